package incident

import (
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
)

// IncidentState is where an incident is in its life: firing, remediating, resolved.
type IncidentState string

// The states of an incident.
const (
	// StateFiring: the rule matches and nothing is being done about it (yet).
	StateFiring IncidentState = "firing"
	// StateRemediating: syncmedic applied (or is applying) the remedy and waits for the rule to stop matching.
	StateRemediating IncidentState = "remediating"
	// StateResolved: the rule stopped matching for the configured number of consecutive evaluations.
	StateResolved IncidentState = "resolved"
)

// EventReasonRemediation is the reason of the Kubernetes Event syncmedic records on an object it remediated.
const EventReasonRemediation = "SyncmedicRemediation"

// AttemptResult says how a remediation attempt ended.
type AttemptResult string

// The results of a remediation attempt; they are also the result label of syncmedic_remediations_total.
const (
	// ResultStarted marks an attempt in progress (the remedier has been called, no result yet).
	ResultStarted   AttemptResult = "started"
	ResultSucceeded AttemptResult = "succeeded"
	ResultFailed    AttemptResult = "failed"
	// ResultDryRun records what would have been done: the policy does not allow the action.
	ResultDryRun AttemptResult = "dry-run"
)

// Attempt is one remediation of an incident, applied or only planned (dry-run).
type Attempt struct {
	At     time.Time          `json:"at"`
	Action syncmedic.ActionID `json:"action"`
	Result AttemptResult      `json:"result"`
	// Changed is false when the remedy had already been applied (remedies are idempotent).
	Changed bool `json:"changed,omitempty"`
	// Steps are the API calls made, or that would be made in dry-run.
	Steps []string `json:"steps,omitempty"`
	// Reason says why the policy did or did not allow the action ("policy: notify for this rule").
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// Permanent is true when the error cannot be fixed by retrying (see Permanent): no further automatic attempt.
	Permanent bool `json:"permanent,omitempty"`
	// RequestedBy names the person who asked for this fix on demand (remedy.Fixer.Fix); empty for an automatic one.
	RequestedBy string `json:"requestedBy,omitempty"`
	// Pending, on a write-ahead record (Result started), is what the remedy still had to do after the writes in
	// Steps when it recorded its last checkpoint (syncmedic.Checkpoint): terminate-and-resync records "sync" once its
	// TerminateOperation was accepted. A next leader that finds it finishes the remedy (syncmedic.Resumer) instead
	// of reporting it "may have run".
	Pending string `json:"pending,omitempty"`
}

// Incident is the life of one finding: opened by its fingerprint, updated by later evaluations, remediated, resolved.
type Incident struct {
	// ID is unique over time: the fingerprint and the second the incident opened (a finding that comes back after
	// resolution opens a new incident).
	ID          string        `json:"id"`
	Fingerprint string        `json:"fingerprint"`
	Subject     string        `json:"subject"`
	State       IncidentState `json:"state"`
	// Finding is the latest evaluation's finding.
	Finding    syncmedic.Finding `json:"finding"`
	OpenedAt   time.Time         `json:"openedAt"`
	UpdatedAt  time.Time         `json:"updatedAt"`
	ResolvedAt *time.Time        `json:"resolvedAt,omitempty"`
	// Misses counts consecutive evaluations of the subject in which the rule did not match.
	Misses int `json:"misses,omitempty"`
	// Plan says what syncmedic will do about it under the current policy, in one sentence.
	Plan string `json:"plan,omitempty"`
	// Auto is true when the policy lets syncmedic apply the remedy unattended.
	Auto     bool      `json:"auto"`
	Attempts []Attempt `json:"attempts,omitempty"`
	// Route is where its notifications go, decided by the policy's routes and the subject's annotation when it
	// opened (nil: every destination, the default Slack channel).
	Route *policy.Routing `json:"route,omitempty"`
	// Notes is where notifiers keep what they need across restarts (the Slack channel and thread ts).
	Notes map[string]string `json:"notes,omitempty"`
	// Seq numbers the incident's transitions; Outbox keeps those some notifier has not delivered yet and Delivered
	// the last one each notifier delivered (see Tracker.ResumeDelivery, outbox.go).
	Seq       int            `json:"seq,omitempty"`
	Outbox    []OutboxEntry  `json:"outbox,omitempty"`
	Delivered map[string]int `json:"delivered,omitempty"`
	// Ack says who took the incident and when (Tracker.Acknowledge); nil: nobody yet.
	Ack *Ack `json:"ack,omitempty"`
	// SilencedBy is the ID of the active silence that mutes the open incident (silences.go): it is tracked and
	// shown, but neither announced nor remedied automatically. Empty: not silenced.
	SilencedBy string `json:"silencedBy,omitempty"`
	// Unannounced is true while a silence has held back the incident's announcement (its opening); it is
	// announced when no silence matches it any more and it is still open.
	Unannounced bool `json:"unannounced,omitempty"`
}

// Ack records who acknowledged (took) an incident. A later acknowledgement by someone else is a takeover: it
// replaces this one and names the person taken over from.
type Ack struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
	// TakenOverFrom names who had acknowledged the incident before By took it over; empty for the first.
	TakenOverFrom string `json:"takenOverFrom,omitempty"`
}

// IsOpen reports whether the incident is not resolved.
func (i *Incident) IsOpen() bool { return i.State != StateResolved }

// Title returns the rule's catalog title, or the rule ID when it is not in the catalog.
func (i *Incident) Title() string {
	if r, ok := syncmedic.LookupRule(i.Finding.Rule); ok {
		return r.Title
	}
	return string(i.Finding.Rule)
}

// LastAttempt returns the latest attempt, or nil.
func (i *Incident) LastAttempt() *Attempt {
	if len(i.Attempts) == 0 {
		return nil
	}
	return &i.Attempts[len(i.Attempts)-1]
}

// Clone returns a deep copy, safe to hand to another goroutine.
func (i *Incident) Clone() Incident {
	c := *i
	c.Attempts = append([]Attempt(nil), i.Attempts...)
	if i.Notes != nil {
		c.Notes = make(map[string]string, len(i.Notes))
		for k, v := range i.Notes {
			c.Notes[k] = v
		}
	}
	if i.ResolvedAt != nil {
		t := *i.ResolvedAt
		c.ResolvedAt = &t
	}
	c.Finding.Evidence = append([]syncmedic.Evidence(nil), i.Finding.Evidence...)
	if i.Route != nil {
		r := *i.Route
		r.Receivers = append([]string(nil), i.Route.Receivers...)
		c.Route = &r
	}
	c.Outbox, c.Delivered = cloneOutbox(i.Outbox, i.Delivered)
	if i.Ack != nil {
		a := *i.Ack
		c.Ack = &a
	}
	return c
}

// stripMonotonic drops the monotonic clock readings of the incident's times, as a JSON round trip does.
func (i *Incident) stripMonotonic() {
	i.OpenedAt, i.UpdatedAt, i.Finding.Since = i.OpenedAt.Round(0), i.UpdatedAt.Round(0), i.Finding.Since.Round(0)
	if i.ResolvedAt != nil {
		t := i.ResolvedAt.Round(0)
		i.ResolvedAt = &t
	}
	for k := range i.Attempts {
		i.Attempts[k].At = i.Attempts[k].At.Round(0)
	}
	if i.Ack != nil {
		a := *i.Ack
		a.At = a.At.Round(0)
		i.Ack = &a
	}
	for k := range i.Outbox {
		i.Outbox[k].At = i.Outbox[k].At.Round(0)
		if a := i.Outbox[k].Attempt; a != nil {
			c := *a
			c.At = c.At.Round(0)
			i.Outbox[k].Attempt = &c
		}
	}
}

func incidentID(fingerprint string, opened time.Time) string {
	return fmt.Sprintf("%s-%d", fingerprint, opened.Unix())
}

// EventKind names a transition of an incident that notifiers announce.
type EventKind string

// The transitions of an incident.
const (
	// EventOpened: a new incident (announce it: the Slack root message).
	EventOpened EventKind = "opened"
	// EventUpdated: the finding changed (its summary, evidence or remedy), not only its ages.
	EventUpdated EventKind = "updated"
	// EventRemediating: syncmedic starts applying the remedy.
	EventRemediating EventKind = "remediating"
	// EventRemediated: an attempt ended (succeeded, failed, or was recorded as dry-run); Event.Attempt says how.
	EventRemediated EventKind = "remediated"
	// EventResolved: the rule stopped matching.
	EventResolved EventKind = "resolved"
	// EventAcknowledged: someone took the incident (Incident.Ack says who, and whom they took it over from).
	EventAcknowledged EventKind = "acknowledged"
)

// Event is one transition of an incident, with a snapshot of the incident after it. Notifiers receive events in
// order per incident.
type Event struct {
	Kind     EventKind `json:"kind"`
	At       time.Time `json:"at"`
	Incident Incident  `json:"incident"`
	// Attempt is the attempt for EventRemediating and EventRemediated.
	Attempt *Attempt `json:"attempt,omitempty"`
	// Seq is the transition's number within its incident when delivery is durable (Tracker.ResumeDelivery), else 0.
	Seq int `json:"seq,omitempty"`

	// withheld is true for a transition a silence keeps from the notifiers (withheld).
	withheld bool
}

// Publisher receives the events of the tracker (the notify.Dispatcher). Publish must not block for long.
type Publisher interface {
	Publish(ev Event)
}

// PublisherFunc adapts a function to a Publisher.
type PublisherFunc func(ev Event)

// Publish calls f.
func (f PublisherFunc) Publish(ev Event) { f(ev) }
