package incident

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/silence"
)

// TrackerOptions configure a Tracker. Every field is optional.
type TrackerOptions struct {
	// Store persists incidents (nil: in memory only).
	Store Store
	// Policy returns the current policy (nil: DefaultPolicy). It is called on every evaluation, so a reloaded
	// policy (or the kill switch) takes effect at once.
	Policy func() *policy.Policy
	// Publisher receives every transition (nil: discarded). It is called with the tracker's lock held, in order.
	Publisher Publisher
	// Remediation applies remedies as the policy allows (remedy.RemediationStage; nil: never, not even dry-run
	// records).
	Remediation Remediator
	// Leader reports whether this replica leads (nil: always). Followers track incidents in memory but neither
	// save, publish nor remediate; on becoming leader the tracker merges the stored incidents first.
	Leader func() bool
	// Retention is how long resolved incidents are kept (for late notifications and history); default 24h.
	Retention time.Duration
	Now       func() time.Time
	Log       *slog.Logger
	Metrics   *Metrics
	// LoadLater lets NewTracker succeed when the stored incidents cannot be read yet (a ConfigMap store while the
	// apiserver is unreachable): the load is retried on every evaluation, and until it succeeds the tracker acts like
	// a follower — it tracks in memory but neither announces, saves nor remediates, so nothing is announced twice.
	// StoreError says why meanwhile. Without it, a failed first load is NewTracker's error.
	LoadLater bool
	// SilenceCheckInterval is how often Run looks for silences that started or ended (default 1s).
	SilenceCheckInterval time.Duration
	// SilenceMaxDuration is how long a silence may last (default silence.DefaultMaxDuration): CreateSilence refuses
	// a longer one.
	SilenceMaxDuration time.Duration
}

// maxResolvedKept bounds the resolved incidents kept in the store (a ConfigMap holds at most 1 MiB).
const maxResolvedKept = 200

// Tracker turns findings into incidents (it is a Sink): a new fingerprint opens an incident, later evaluations
// update it, remediation attempts are recorded on it, and it resolves once its rule has not matched for
// Policy.ResolveAfter consecutive evaluations of its subject.
type Tracker struct {
	o TrackerOptions

	mu        sync.Mutex
	incidents map[string]*Incident // by ID
	open      map[string]string    // fingerprint → ID of the open incident
	// bySubject indexes open by subject (subject → fingerprints), so an evaluation costs what its subject has open,
	// not what the whole tracker has (a watch evaluates every application on every event).
	bySubject  map[string]map[string]struct{}
	lastGC     time.Time                   // last gcLocked; it runs on every change, else at most every gcInterval
	metricsSet bool                        // the incident gauges were set once; afterwards only changes update them
	synced     bool                        // memory merged with the store since this replica became leader
	notifiers  []string                    // destinations whose deliveries the outbox tracks (nil: outbox off)
	changed    chan struct{}               // closed and replaced on every change of what Incidents returns (Changes)
	loadErr    error                       // the last failed load of the stored incidents, until one succeeds
	silences   map[string]*silence.Silence // by ID (silences.go)
	// silencesReloaded is when a follower last read the stored silences (checkSilences).
	silencesReloaded time.Time
	// unfinished are the open incidents loaded with a remedy's write-ahead record and no result (its replica stopped
	// or lost the lead while it ran): the next evaluation hands them to the remediator, matched or not.
	unfinished []string
}

var _ syncmedic.GoneSink = (*Tracker)(nil)

// NewTracker returns a tracker; when it leads, it loads the stored incidents first.
func NewTracker(ctx context.Context, o TrackerOptions) (*Tracker, error) {
	if o.Store == nil {
		o.Store = &MemoryStore{}
	}
	if o.Policy == nil {
		p := policy.DefaultPolicy()
		o.Policy = func() *policy.Policy { return p }
	}
	if o.Publisher == nil {
		o.Publisher = PublisherFunc(func(Event) {})
	}
	if o.Leader == nil {
		o.Leader = func() bool { return true }
	}
	if o.Retention == 0 {
		o.Retention = 24 * time.Hour
	}
	if o.SilenceMaxDuration <= 0 {
		o.SilenceMaxDuration = silence.DefaultMaxDuration
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	t := &Tracker{o: o, incidents: map[string]*Incident{}, open: map[string]string{}, bySubject: map[string]map[string]struct{}{},
		silences: map[string]*silence.Silence{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	if o.Leader() {
		if err := t.syncLocked(ctx); err != nil {
			if !o.LoadLater {
				return nil, err
			}
			t.loadErr = err
			o.Log.Warn("cannot load stored incidents yet: tracking in memory, announcing and remediating nothing until they load", "err", err)
		}
	}
	o.Metrics.setIncidents(t.incidents)
	return t, nil
}

// Observe records one evaluation of subject (a Sink): opens, updates and resolves incidents, publishes their
// transitions, and (on the leader) hands every matching incident to the remediation stage.
func (t *Tracker) Observe(ctx context.Context, subject string, findings []syncmedic.Finding) {
	t.observe(ctx, subject, findings, false)
}

// Gone records that subject itself no longer exists (its application or HelmRelease was deleted): its open
// incidents resolve at once, since the evaluations that would otherwise resolve them will never come.
func (t *Tracker) Gone(ctx context.Context, subject string) {
	t.observe(ctx, subject, nil, true)
}

func (t *Tracker) observe(ctx context.Context, subject string, findings []syncmedic.Finding, gone bool) {
	t.mu.Lock()
	leader := t.o.Leader()
	if !leader {
		t.synced, t.loadErr = false, nil
	} else if !t.synced {
		if err := t.syncLocked(ctx); err != nil {
			t.loadErr = err
			t.o.Log.Error("cannot load stored incidents; will retry on the next evaluation (announcing and remediating nothing meanwhile)", "err", err)
		} else if t.loadErr != nil {
			t.loadErr = nil
			t.o.Log.Info("stored incidents loaded")
		}
	}
	// A leader that could not read what was already announced acts like a follower until it can: announcing now
	// could repeat what an earlier run announced.
	leader = leader && t.synced
	pol := t.o.Policy()
	if gone {
		p := *pol
		p.ResolveAfter = 1
		pol = &p
	}
	now := t.o.Now()
	events, matched, dirty := t.evaluateLocked(subject, findings, pol, now)
	// Most evaluations change nothing (a healthy application's refresh): skip the passes over every incident.
	if dirty || now.Sub(t.lastGC) >= gcInterval {
		t.gcLocked(now)
		t.lastGC = now
	}
	if leader {
		if dirty {
			t.saveLocked(ctx)
		}
		t.publishLocked(events)
	}
	if dirty || !t.metricsSet {
		t.o.Metrics.setIncidents(t.incidents)
		t.metricsSet = true
	}
	if dirty {
		t.changedLocked()
	}
	var unfinished []string
	if leader {
		unfinished, t.unfinished = t.unfinished, nil
	}
	t.mu.Unlock()

	if leader && t.o.Remediation != nil {
		for _, id := range matched {
			t.o.Remediation.Submit(ctx, t, id)
		}
		for _, id := range unfinished {
			if !slices.Contains(matched, id) {
				t.o.Remediation.Submit(ctx, t, id)
			}
		}
	}
}

// evaluateLocked applies one evaluation and returns the events, the IDs of the incidents that matched, and whether
// anything worth saving changed.
func (t *Tracker) evaluateLocked(subject string, findings []syncmedic.Finding, pol *policy.Policy, now time.Time) ([]Event, []string, bool) {
	var events []Event
	var matched []string
	dirty := false
	seen := map[string]bool{}
	for _, f := range findings {
		if f.Fingerprint == "" {
			f = f.WithFingerprint()
		}
		d := pol.Decide(f)
		if seen[f.Fingerprint] || d.Mode == policy.ModeOff {
			continue
		}
		seen[f.Fingerprint] = true
		inc := t.incidents[t.open[f.Fingerprint]]
		if inc == nil {
			inc = &Incident{ID: t.newID(f.Fingerprint, now), Fingerprint: f.Fingerprint, Subject: subject,
				State: StateFiring, Finding: f, OpenedAt: now, UpdatedAt: now, Plan: d.Reason, Auto: d.Act, Route: pol.Route(f)}
			inc.SilencedBy = t.silencedByLocked(inc, now)
			t.incidents[inc.ID], t.open[f.Fingerprint] = inc, inc.ID
			t.indexLocked(subject, f.Fingerprint)
			events = append(events, t.event(EventOpened, inc, nil, now))
			dirty = true
		} else {
			changed := materialChange(inc.Finding, f) || inc.Plan != d.Reason
			dirty = dirty || changed || inc.Misses > 0 || inc.Subject != subject
			if inc.Subject != subject {
				t.unindexLocked(inc.Subject, inc.Fingerprint)
				t.indexLocked(subject, inc.Fingerprint)
			}
			inc.Finding, inc.Subject, inc.Misses, inc.Plan, inc.Auto = f, subject, 0, d.Reason, d.Act
			if ev, silenced := t.refreshSilenceLocked(inc, now); silenced {
				dirty = true
				if ev != nil {
					events = append(events, *ev)
				}
			}
			if changed {
				inc.UpdatedAt = now
				events = append(events, t.event(EventUpdated, inc, nil, now))
			}
		}
		// A silenced incident is not remedied automatically: the remediation stage does not even see it.
		if !inc.Silenced() {
			matched = append(matched, inc.ID)
		}
	}
	for _, fp := range sortedKeys(t.bySubject[subject]) {
		inc := t.incidents[t.open[fp]]
		if inc == nil || inc.Subject != subject || seen[fp] {
			continue
		}
		inc.Misses++
		dirty = true
		if inc.Misses >= pol.ResolveAfter && !remedyInFlight(inc, now) {
			events = append(events, t.resolveLocked(inc, now))
		}
	}
	for _, ev := range events {
		if ev.Kind == EventOpened {
			t.o.Log.Info("incident opened", "incident", ev.Incident.ID, "rule", ev.Incident.Finding.Rule,
				"subject", subject, "namespace", ev.Incident.Finding.Object.Namespace, "app", ev.Incident.Finding.Object.App,
				"silencedBy", ev.Incident.SilencedBy)
		}
	}
	return events, matched, dirty
}

// resolveLocked closes an open incident and returns its event.
func (t *Tracker) resolveLocked(inc *Incident, now time.Time) Event {
	at := now
	inc.State, inc.ResolvedAt, inc.UpdatedAt = StateResolved, &at, now
	delete(t.open, inc.Fingerprint)
	t.unindexLocked(inc.Subject, inc.Fingerprint)
	t.o.Log.Info("incident resolved", "incident", inc.ID, "rule", inc.Finding.Rule, "subject", inc.Subject)
	ev := t.event(EventResolved, inc, nil, now)
	inc.SilencedBy = "" // silences mute open incidents only
	return ev
}

func (t *Tracker) indexLocked(subject, fp string) {
	m := t.bySubject[subject]
	if m == nil {
		m = map[string]struct{}{}
		t.bySubject[subject] = m
	}
	m[fp] = struct{}{}
}

func (t *Tracker) unindexLocked(subject, fp string) {
	if m := t.bySubject[subject]; m != nil {
		delete(m, fp)
		if len(m) == 0 {
			delete(t.bySubject, subject)
		}
	}
}

// inFlightGrace bounds how long a started remedy holds off the resolution of its incident (a remedy cut off by a
// crash never records its result).
const inFlightGrace = 10 * time.Minute

// remedyInFlight reports whether the incident's remedy has started and not yet recorded its result: the condition
// often stops matching because of the remedy itself (a terminated operation), and the thread must say the remedy
// succeeded before it says the incident resolved. RecordAttempt resolves it when the result comes in, as no
// evaluation may follow (a healthy application sends no more changes).
func remedyInFlight(inc *Incident, now time.Time) bool {
	last := inc.LastAttempt()
	return last != nil && last.Result == ResultStarted && now.Sub(last.At) < inFlightGrace
}

// newID returns an incident ID not used yet (a finding may come back within the second it resolved).
func (t *Tracker) newID(fingerprint string, now time.Time) string {
	id := incidentID(fingerprint, now)
	for n := 2; t.incidents[id] != nil; n++ {
		id = fmt.Sprintf("%s-%d", incidentID(fingerprint, now), n)
	}
	return id
}

// materialChange reports whether a re-evaluated finding says something new (ages alone are not news).
func materialChange(a, b syncmedic.Finding) bool {
	if !sameSummary(a.Summary, b.Summary) || a.Severity != b.Severity || !reflect.DeepEqual(a.Remedy, b.Remedy) || len(a.Evidence) != len(b.Evidence) {
		return true
	}
	for i := range a.Evidence {
		if a.Evidence[i].Field != b.Evidence[i].Field || a.Evidence[i].Value != b.Evidence[i].Value {
			return true
		}
	}
	return false
}

// event returns the transition kind of inc, numbered and kept in the outbox unless a silence withholds it (then
// publishLocked drops it). An opening a silence withholds leaves the incident unannounced until the silence ends.
func (t *Tracker) event(kind EventKind, inc *Incident, a *Attempt, now time.Time) Event {
	ev := Event{Kind: kind, At: now}
	if a != nil {
		c := *a
		ev.Attempt = &c
	}
	ev.withheld = withheld(inc, kind, a)
	if kind == EventOpened {
		inc.Unannounced = ev.withheld
	}
	if !ev.withheld {
		t.enqueueLocked(inc, &ev)
	}
	ev.Incident = eventSnapshot(inc)
	return ev
}

// gcInterval bounds how long a resolved incident past its retention may stay when nothing changes.
const gcInterval = time.Minute

// gcLocked forgets resolved incidents past the retention, and the oldest beyond maxResolvedKept.
func (t *Tracker) gcLocked(now time.Time) {
	var resolved []*Incident
	for id, inc := range t.incidents {
		if inc.IsOpen() {
			continue
		}
		if inc.ResolvedAt != nil && now.Sub(*inc.ResolvedAt) > t.o.Retention {
			delete(t.incidents, id)
			continue
		}
		resolved = append(resolved, inc)
	}
	if len(resolved) > maxResolvedKept {
		sort.Slice(resolved, func(i, j int) bool { return resolved[i].UpdatedAt.Before(resolved[j].UpdatedAt) })
		for _, inc := range resolved[:len(resolved)-maxResolvedKept] {
			delete(t.incidents, inc.ID)
		}
	}
}

func (t *Tracker) saveLocked(ctx context.Context) error {
	all := make([]Incident, 0, len(t.incidents))
	for _, id := range sortedKeys(t.incidents) {
		all = append(all, t.incidents[id].Clone())
	}
	err := t.o.Store.Save(ctx, all)
	if err != nil {
		t.o.Log.Error("cannot save incidents; the next change retries", "err", err)
	}
	return err
}

// syncLocked merges the stored incidents into memory: the store's record wins for what was announced and done
// (state, attempts, notes), memory for what was observed while following (the finding, misses, subject). Open
// incidents only memory knows are announced now.
func (t *Tracker) syncLocked(ctx context.Context) error {
	stored, err := t.o.Store.Load(ctx)
	if err != nil {
		return err
	}
	if err := t.loadSilencesLocked(ctx); err != nil {
		return err
	}
	now := t.o.Now()
	merged := map[string]*Incident{}
	open := map[string]string{}
	for i := range stored {
		inc := stored[i]
		if mem := t.incidents[t.open[inc.Fingerprint]]; mem != nil && inc.IsOpen() {
			inc.Finding, inc.Misses, inc.Subject, inc.Plan, inc.Auto = mem.Finding, mem.Misses, mem.Subject, mem.Plan, mem.Auto
		}
		merged[inc.ID] = &inc
		if inc.IsOpen() {
			open[inc.Fingerprint] = inc.ID
		}
	}
	var events []Event
	for fp, id := range t.open {
		if _, ok := open[fp]; ok {
			continue
		}
		inc := t.incidents[id]
		merged[id], open[fp] = inc, id
		inc.SilencedBy = t.silencedByLocked(inc, now)
		events = append(events, t.event(EventOpened, inc, nil, now))
	}
	t.incidents, t.open, t.synced = merged, open, true
	// Silences that ended while no replica led: the incidents they held back are announced now.
	for _, id := range t.openByAgeLocked() {
		if ev, changed := t.refreshSilenceLocked(t.incidents[id], now); changed && ev != nil {
			events = append(events, *ev)
		}
	}
	t.metricsSet = false // the loaded incidents are new to the gauges
	t.bySubject = map[string]map[string]struct{}{}
	for fp, id := range open {
		t.indexLocked(merged[id].Subject, fp)
	}
	if t.o.Remediation != nil {
		t.o.Remediation.Seed(stored)
		t.unfinished = t.unfinishedLocked()
	}
	if len(events) > 0 {
		t.saveLocked(ctx)
	}
	t.publishSyncedLocked(events)
	t.o.Log.Info("incidents loaded", "open", len(open), "total", len(merged))
	return nil
}

// Incidents returns a copy of every incident the tracker holds, open first, then by opening time.
func (t *Tracker) Incidents() []Incident {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Incident, 0, len(t.incidents))
	for _, inc := range t.incidents {
		out = append(out, inc.Clone())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].IsOpen() != out[j].IsOpen() {
			return out[i].IsOpen()
		}
		if !out[i].OpenedAt.Equal(out[j].OpenedAt) {
			return out[i].OpenedAt.Before(out[j].OpenedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Note returns what a notifier stored on an incident under key (e.g. the Slack thread ts).
func (t *Tracker) Note(id, key string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inc := t.incidents[id]
	if inc == nil {
		return "", false
	}
	v, ok := inc.Notes[key]
	return v, ok
}

// SetNote stores value under key on an incident and persists it (on the leader), so the next replica or restart
// continues where this one left off.
func (t *Tracker) SetNote(ctx context.Context, id, key, value string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inc := t.incidents[id]
	if inc == nil || inc.Notes[key] == value {
		return
	}
	if inc.Notes == nil {
		inc.Notes = map[string]string{}
	}
	inc.Notes[key] = value
	if t.o.Leader() {
		t.saveLocked(ctx)
	}
}

// StoreError is the error of the last failed load of the stored incidents while it keeps failing (LoadLater), else
// nil: while it is set the tracker announces and remediates nothing.
func (t *Tracker) StoreError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.loadErr
}

// Changes returns a channel closed at the next change of the incidents (an incident opened, updated, remediated
// or resolved): the incident API's live stream waits on it instead of polling.
func (t *Tracker) Changes() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed
}

// unfinishedLocked lists the open incidents whose last attempt is a write-ahead record without a result.
func (t *Tracker) unfinishedLocked() []string {
	var out []string
	for _, id := range sortedKeys(t.incidents) {
		inc := t.incidents[id]
		if last := inc.LastAttempt(); inc.IsOpen() && last != nil && last.Result == ResultStarted {
			out = append(out, id)
		}
	}
	return out
}

func (t *Tracker) changedLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
