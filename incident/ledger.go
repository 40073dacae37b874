package incident

import (
	"context"
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
)

// Ledger is what the remediation stage (package remedy) may do with the tracker's incidents: read one, find an
// earlier remedy whose condition came back, and record an attempt. Each method takes the tracker's lock itself; no
// other package touches it. The Tracker is the Ledger.
type Ledger interface {
	// Get returns a copy of an incident.
	Get(id string) (Incident, bool)
	// RecurredAfter finds an earlier incident, resolved within window, whose remedy succeeded on what inc's remedy
	// acts on.
	RecurredAfter(inc Incident, window time.Duration) (PriorRemedy, bool)
	// RecordAttempt adds an attempt to an incident, moves its state, saves and publishes the transition. It
	// returns ErrNotLeading when this replica does not lead (nothing is recorded), or the store's error when the
	// save failed: a started attempt is the write-ahead record of a remedy, which must not run unrecorded.
	RecordAttempt(ctx context.Context, id string, a Attempt, kind EventKind) error
	// Leading reports whether this replica leads: only the leader remediates.
	Leading() bool
	// StoreError says why the stored incidents are not loaded yet (nil once they are).
	StoreError() error
	// Policy returns the policy in force.
	Policy() *policy.Policy
	// Now is the tracker's clock.
	Now() time.Time
}

var _ Ledger = (*Tracker)(nil)

// Remediator consumes the incidents the tracker matched (TrackerOptions.Remediation): the remediation stage.
type Remediator interface {
	// Submit hands over an incident that matched an evaluation, or one loaded with a write-ahead record and no result,
	// on the leader, without the tracker's lock held; the remediator reads the incident and the policy in force when
	// it executes, and records, through l.
	Submit(ctx context.Context, l Ledger, id string)
	// Seed receives the stored incidents whenever the tracker loads them (so rate limits survive a restart). It is
	// called with the tracker's lock held and must not call back into the Ledger.
	Seed(stored []Incident)
}

// Policy returns the policy in force (TrackerOptions.Policy).
func (t *Tracker) Policy() *policy.Policy { return t.o.Policy() }

// Now returns the tracker's clock reading (TrackerOptions.Now).
func (t *Tracker) Now() time.Time { return t.o.Now() }

// PriorRemedy is a successful remedy of an earlier incident.
type PriorRemedy struct {
	Attempt
	// Incident is the ID of the earlier incident.
	Incident string
}

// RecurredAfter finds an earlier incident, resolved within window, whose remedy succeeded on what inc's remedy acts
// on: the condition came back after the fix. For a remedy that acts on an object that is the same finding (same
// fingerprint) and action; for one that acts on the Argo CD application (terminate, sync) it is any incident of the
// same application whose remedy also acted on it — the next hook it is stuck on may have another name (a
// generateName hook is renamed every operation, argocd/hook-completion-missed or hook-immutable reports the hook).
func (t *Tracker) RecurredAfter(inc Incident, window time.Duration) (PriorRemedy, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Now()
	var found PriorRemedy
	ok := false
	for id, other := range t.incidents {
		if id == inc.ID || other.IsOpen() || other.ResolvedAt == nil || now.Sub(*other.ResolvedAt) > window {
			continue
		}
		for _, a := range other.Attempts {
			if a.Result == ResultSucceeded && a.Changed && sameRemedyTarget(inc, other, a) && (!ok || a.At.After(found.At)) {
				found, ok = PriorRemedy{Attempt: a, Incident: id}, true
			}
		}
	}
	return found, ok
}

// sameRemedyTarget reports whether attempt a of the earlier incident other acted on what inc's remedy acts on (see
// RecurredAfter).
func sameRemedyTarget(inc Incident, other *Incident, a Attempt) bool {
	r := inc.Finding.Remedy
	if !r.ActsOnApplication() || inc.Finding.Object.App == "" {
		return other.Fingerprint == inc.Fingerprint && a.Action == r.Action
	}
	prev := other.Finding.Remedy
	return prev.ActsOnApplication() && a.Action == prev.Action && syncmedic.RemedyKey(other.Finding) == syncmedic.RemedyKey(inc.Finding)
}

// Get returns a copy of an incident.
func (t *Tracker) Get(id string) (Incident, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inc := t.incidents[id]
	if inc == nil {
		return Incident{}, false
	}
	return inc.Clone(), true
}

// RecordAttempt adds an attempt to an incident (a started attempt is replaced by its result), moves its state,
// saves and publishes the transition. Nothing is recorded once leadership is lost (ErrNotLeading); a save that fails
// is returned (the attempt stays recorded in memory, and the next change saves it again).
func (t *Tracker) RecordAttempt(ctx context.Context, id string, a Attempt, kind EventKind) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	inc := t.incidents[id]
	if inc == nil {
		return fmt.Errorf("incident %s: %w", id, ErrNotFound)
	}
	if !t.o.Leader() {
		return t.recordLateResultLocked(ctx, inc, a)
	}
	replaced := false
	if last := inc.LastAttempt(); last != nil && last.Result == ResultStarted && last.Action == a.Action {
		*last, replaced = a, true
	} else {
		inc.Attempts = append(inc.Attempts, a)
	}
	if inc.IsOpen() {
		switch {
		case a.Result == ResultFailed, a.Result == ResultDryRun && replaced:
			// A failure, or a remedy the policy stopped after its write-ahead record: nothing is being done.
			inc.State = StateFiring
		case a.Result != ResultDryRun:
			inc.State = StateRemediating
		}
	}
	now := t.o.Now()
	inc.UpdatedAt = now
	var evs []Event
	if !replaced || a.Result != ResultStarted {
		// A started attempt that replaces one is a checkpoint of the remedy in flight: saved, not announced again.
		evs = append(evs, t.event(kind, inc, &a, now)) // before saving: the outbox entry is saved with the attempt
	}
	// The condition went away while the remedy ran (often its own effect) and the resolution waited for this
	// result: resolve now, as no further evaluation may come.
	if a.Result != ResultStarted && inc.IsOpen() && inc.Misses > 0 && inc.Misses >= t.o.Policy().ResolveAfter {
		evs = append(evs, t.resolveLocked(inc, now))
	}
	err := t.saveLocked(ctx)
	t.publishLocked(evs)
	t.o.Metrics.setIncidents(t.incidents)
	t.changedLocked()
	return err
}

// AttemptMerger is a Store that can write one attempt's result into the stored incidents without replacing the
// rest: a replica that lost the lead while its remedy ran records the result there, since a whole Save would
// overwrite what the new leader saved meanwhile.
type AttemptMerger interface {
	// MergeAttempt replaces, in the stored incident id, the attempt of the same action started at the same time
	// (its write-ahead record, or what a new leader recorded in its place) by a. It reports whether it found it.
	MergeAttempt(ctx context.Context, id string, a Attempt) (bool, error)
}

// recordLateResultLocked records the result of a remedy this replica started while it led, after it lost the lead:
// in memory, and in the store through AttemptMerger, so the new leader (when it loads after this) knows the remedy
// ran and how it ended instead of finding its write-ahead record without a result. Anything else returns
// ErrNotLeading. No transition is published: the leader's notifiers own the incident's thread.
func (t *Tracker) recordLateResultLocked(ctx context.Context, inc *Incident, a Attempt) error {
	last := inc.LastAttempt()
	if a.Result == ResultStarted || last == nil || last.Result != ResultStarted || last.Action != a.Action || !last.At.Equal(a.At) {
		return ErrNotLeading
	}
	*last = a
	m, ok := t.o.Store.(AttemptMerger)
	if !ok {
		return fmt.Errorf("the lead was lost before the result of %s was recorded, and this store cannot merge it: %w", a.Action, ErrNotLeading)
	}
	found, err := m.MergeAttempt(ctx, inc.ID, a)
	if err != nil {
		return fmt.Errorf("record the result of %s after the lead was lost: %w", a.Action, err)
	}
	if !found {
		return fmt.Errorf("record the result of %s after the lead was lost: the stored incident %s no longer holds its write-ahead record", a.Action, inc.ID)
	}
	t.o.Log.Info("remediation result recorded after the lead was lost", "incident", inc.ID, "action", a.Action, "result", a.Result)
	return nil
}

// mergeAttempt replaces in incidents the attempt of incident id with a's action and start time by a.
func mergeAttempt(incidents []Incident, id string, a Attempt) bool {
	for i := range incidents {
		if incidents[i].ID != id {
			continue
		}
		for k := range incidents[i].Attempts {
			if b := &incidents[i].Attempts[k]; b.Action == a.Action && b.At.Equal(a.At) {
				*b = a
				return true
			}
		}
	}
	return false
}
