package syncmedic

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// RemediationStage applies the remedy of an incident as the policy allows: for real only on the leader, only for a
// rule in auto mode whose object is in scope, with the kill switch off and within the object's rate limit; as a
// dry-run record otherwise. Every automatic action leaves an audit trail: a structured log line here, and the
// EventRemediating/EventRemediated transitions that notifiers turn into a thread reply and a Kubernetes Event.
type RemediationStage struct {
	remediers Remediers
	limiter   *RateLimiter
	log       *slog.Logger
	identity  string
	metrics   *Metrics

	mu       sync.Mutex
	inflight map[string]bool
	queue    chan remediationRequest // nil: synchronous (the evaluation waits for the remedy)
	workers  int
}

type remediationRequest struct {
	t   *Tracker
	id  string
	pol *Policy
}

// RemediationOptions configure NewRemediationStage.
type RemediationOptions struct {
	// Remediers apply each action through the owning tool's API.
	Remediers Remediers
	// Limiter counts actions per object (nil: a new one on the system clock).
	Limiter *RateLimiter
	// Identity names this replica in the audit log ("who"), e.g. the Pod name.
	Identity string
	Log      *slog.Logger
	Metrics  *Metrics
	// Workers > 0 applies remedies in that many background workers (started by Run), so a slow tool API never
	// holds up the evaluation that found the incident; 0 applies them synchronously inside Observe.
	Workers int
}

// NewRemediationStage returns the stage for TrackerOptions.Remediation.
func NewRemediationStage(o RemediationOptions) *RemediationStage {
	if o.Limiter == nil {
		o.Limiter = NewRateLimiter(nil)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &RemediationStage{remediers: o.Remediers, limiter: o.Limiter, log: o.Log, identity: o.Identity,
		metrics: o.Metrics, inflight: map[string]bool{}, workers: o.Workers}
	if o.Workers > 0 {
		s.queue = make(chan remediationRequest, 256)
	}
	return s
}

// Run applies queued remedies with Options.Workers workers until ctx ends (only needed when Workers > 0).
func (s *RemediationStage) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case r := <-s.queue:
					s.consider(ctx, r.t, r.id, r.pol)
				}
			}
		}()
	}
	wg.Wait()
}

// submit hands one incident to the stage; when the workers are all busy the next evaluation submits it again.
func (s *RemediationStage) submit(ctx context.Context, t *Tracker, id string, pol *Policy) {
	if s.queue == nil {
		s.consider(ctx, t, id, pol)
		return
	}
	select {
	case s.queue <- remediationRequest{t: t, id: id, pol: pol}:
	default:
		s.log.Debug("remediation workers busy; the next evaluation retries", "incident", id)
	}
}

// consider decides and, when allowed, applies the remedy of incident id. It runs without the tracker's lock.
func (s *RemediationStage) consider(ctx context.Context, t *Tracker, id string, pol *Policy) {
	if !t.o.Leader() {
		return
	}
	inc, ok := t.get(id)
	if !ok || !inc.IsOpen() || inc.Finding.Remedy.Action == ActionNone {
		return
	}
	f := inc.Finding
	action := f.Remedy.Action
	d := pol.Decide(f)
	rem := s.remediers[action]
	if d.Act && rem == nil {
		d = Decision{Mode: d.Mode, Reason: fmt.Sprintf("no remedier for %s is configured in this syncmedic (dry-run)", action)}
	}
	// One remedy at a time per incident, per object and per Argo CD application: two incidents about one hook (or
	// two hooks of one application, whose remedies both act on its operation) never run concurrently.
	keys := remedyKeys(id, f.Object)
	if !s.claim(keys...) {
		return
	}
	defer s.release(keys...)
	if !d.Act {
		s.recordDryRun(ctx, t, inc, rem, d)
		return
	}
	rl := *pol.For(f.Rule).RateLimit
	if prev, ok := t.recurredAfter(inc, time.Duration(rl.Window)); ok {
		// The same remedy already "worked" on this object (or, for one that terminates or syncs, on this application)
		// and the condition came back (on Argo CD 2.14 a re-sync re-runs a ttlSecondsAfterFinished: 0 hook, which
		// loses the same race, under a new name when it is a generateName hook): repeating it would loop. A person
		// decides.
		target := "this object"
		if f.Remedy.ActsOnApplication() && f.Object.App != "" {
			target = "application " + f.Object.App
		}
		d = Decision{Mode: d.Mode, Reason: fmt.Sprintf("not repeated: %s was applied to %s at %s (incident %s) and the condition came back; the remedy does not fix the cause, so a person must look",
			prev.Action, target, prev.At.UTC().Format(time.RFC3339), prev.incident)}
		s.recordDryRun(ctx, t, inc, rem, d)
		return
	}
	if last := lastReal(inc); last != nil {
		if last.Permanent {
			return // retrying cannot fix it; the failure is on the incident and in the thread
		}
		if last.Result == ResultSucceeded && t.o.Now().Before(last.At.Add(time.Duration(rl.Backoff))) {
			return // give the tool time to act on the fix before trying again
		}
	}
	if ok, retryAt, why := s.limiter.Allow(RemedyKey(f), rl); !ok {
		s.log.Debug("remediation deferred", "incident", id, "rule", f.Rule, "action", action, "reason", why, "retryAt", retryAt)
		return
	}
	s.apply(ctx, t, inc, rem, d)
}

func (s *RemediationStage) apply(ctx context.Context, t *Tracker, inc Incident, rem Remedier, d Decision) {
	s.applyAttempt(ctx, t, inc, rem, d, "")
}

// applyAttempt applies the remedy for real and records it: the started attempt, the structured audit line (who:
// this replica, and the person who asked when requestedBy is set), the result. It returns the recorded result.
func (s *RemediationStage) applyAttempt(ctx context.Context, t *Tracker, inc Incident, rem Remedier, d Decision, requestedBy string) Attempt {
	f, action := inc.Finding, inc.Finding.Remedy.Action
	start := t.o.Now()
	t.recordAttempt(ctx, inc.ID, Attempt{At: start, Action: action, Result: ResultStarted, Reason: d.Reason, RequestedBy: requestedBy}, EventRemediating)
	out, err := rem.Remediate(ctx, f, false)
	a := Attempt{At: start, Action: action, Result: ResultSucceeded, Changed: out.Changed, Steps: out.Steps, Reason: d.Reason, RequestedBy: requestedBy}
	if err != nil {
		a.Result, a.Error, a.Permanent = ResultFailed, err.Error(), IsPermanent(err)
	}
	s.limiter.Record(RemedyKey(f), start, err == nil)
	s.metrics.remediation(f.Rule, action, a.Result)
	attrs := []any{"who", s.identity}
	if requestedBy != "" {
		attrs = append(attrs, "requestedBy", requestedBy)
	}
	s.log.Info("remediation", append(attrs, "action", action, "result", a.Result, "changed", a.Changed,
		"steps", a.Steps, "incident", inc.ID, "rule", f.Rule, "why", d.Reason, "summary", f.Summary,
		"subject", inc.Subject, "namespace", f.Object.Namespace, "app", f.Object.App, "object", f.Object.String(),
		"err", a.Error)...)
	t.recordAttempt(ctx, inc.ID, a, EventRemediated)
	return a
}

// recordDryRun records once per incident and action what would have been done, and why it was not.
func (s *RemediationStage) recordDryRun(ctx context.Context, t *Tracker, inc Incident, rem Remedier, d Decision) {
	f, action := inc.Finding, inc.Finding.Remedy.Action
	for _, a := range inc.Attempts {
		if a.Action == action && a.Result == ResultDryRun && a.Reason == d.Reason {
			return
		}
	}
	a := Attempt{At: t.o.Now(), Action: action, Result: ResultDryRun, Reason: d.Reason, Steps: f.Remedy.Commands}
	if rem != nil {
		out, err := rem.Remediate(ctx, f, true)
		if err != nil {
			a.Error = err.Error()
		} else if len(out.Steps) > 0 {
			a.Steps = out.Steps
		}
	}
	s.metrics.remediation(f.Rule, action, ResultDryRun)
	t.recordAttempt(ctx, inc.ID, a, EventRemediated)
}

// seed counts the actions recorded on stored incidents, so a restart or a new leader keeps the rate limits and
// backoffs of the replica before it.
func (s *RemediationStage) seed(stored []Incident) {
	type action struct {
		key string
		at  time.Time
		ok  bool
	}
	var all []action
	for _, inc := range stored {
		for _, a := range inc.Attempts {
			if a.Result == ResultSucceeded || a.Result == ResultFailed {
				all = append(all, action{RemedyKey(inc.Finding), a.At, a.Result == ResultSucceeded})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, a := range all {
		s.limiter.Record(a.key, a.at, a.ok)
	}
}

// remedyKeys are what one remedy holds while it runs: the incident, the object, and the Argo CD application.
func remedyKeys(id string, o ObjectRef) []string {
	keys := []string{"incident:" + id, "object:" + ObjectKey(o)}
	if app := ApplicationKey(o); app != "" {
		keys = append(keys, "app:"+app)
	}
	return keys
}

// claim takes every key, or none when one is held.
func (s *RemediationStage) claim(keys ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if s.inflight[k] {
			return false
		}
	}
	for _, k := range keys {
		s.inflight[k] = true
	}
	return true
}

func (s *RemediationStage) release(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.inflight, k)
	}
}

// priorRemedy is a successful remedy of an earlier incident.
type priorRemedy struct {
	Attempt
	incident string
}

// recurredAfter finds an earlier incident, resolved within window, whose remedy succeeded on what inc's remedy acts
// on: the condition came back after the fix. For a remedy that acts on an object that is the same finding (same
// fingerprint) and action; for one that acts on the Argo CD application (terminate, sync) it is any incident of the
// same application whose remedy also acted on it — the next hook it is stuck on may have another name (a
// generateName hook is renamed every operation, argocd/hook-completion-missed or hook-immutable reports the hook).
func (t *Tracker) recurredAfter(inc Incident, window time.Duration) (priorRemedy, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Now()
	var found priorRemedy
	ok := false
	for id, other := range t.incidents {
		if id == inc.ID || other.IsOpen() || other.ResolvedAt == nil || now.Sub(*other.ResolvedAt) > window {
			continue
		}
		for _, a := range other.Attempts {
			if a.Result == ResultSucceeded && a.Changed && sameRemedyTarget(inc, other, a) && (!ok || a.At.After(found.At)) {
				found, ok = priorRemedy{Attempt: a, incident: id}, true
			}
		}
	}
	return found, ok
}

// sameRemedyTarget reports whether attempt a of the earlier incident other acted on what inc's remedy acts on (see
// recurredAfter).
func sameRemedyTarget(inc Incident, other *Incident, a Attempt) bool {
	r := inc.Finding.Remedy
	if !r.ActsOnApplication() || inc.Finding.Object.App == "" {
		return other.Fingerprint == inc.Fingerprint && a.Action == r.Action
	}
	prev := other.Finding.Remedy
	return prev.ActsOnApplication() && a.Action == prev.Action && RemedyKey(other.Finding) == RemedyKey(inc.Finding)
}

// lastReal returns the latest attempt that was not a dry-run.
func lastReal(inc Incident) *Attempt {
	for i := len(inc.Attempts) - 1; i >= 0; i-- {
		if inc.Attempts[i].Result != ResultDryRun {
			return &inc.Attempts[i]
		}
	}
	return nil
}

// get returns a copy of an incident.
func (t *Tracker) get(id string) (Incident, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inc := t.incidents[id]
	if inc == nil {
		return Incident{}, false
	}
	return inc.Clone(), true
}

// recordAttempt adds an attempt to an incident (a started attempt is replaced by its result), moves its state,
// saves and publishes the transition. Nothing is recorded once leadership is lost.
func (t *Tracker) recordAttempt(ctx context.Context, id string, a Attempt, kind EventKind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inc := t.incidents[id]
	if inc == nil || !t.o.Leader() {
		return
	}
	if last := inc.LastAttempt(); last != nil && last.Result == ResultStarted && last.Action == a.Action {
		*last = a
	} else {
		inc.Attempts = append(inc.Attempts, a)
	}
	if inc.IsOpen() && a.Result != ResultDryRun {
		inc.State = StateRemediating
		if a.Result == ResultFailed {
			inc.State = StateFiring
		}
	}
	now := t.o.Now()
	inc.UpdatedAt = now
	evs := []Event{t.event(kind, inc, &a, now)} // before saving: the outbox entry is saved with the attempt
	// The condition went away while the remedy ran (often its own effect) and the resolution waited for this
	// result: resolve now, as no further evaluation may come.
	if a.Result != ResultStarted && inc.IsOpen() && inc.Misses > 0 && inc.Misses >= t.o.Policy().ResolveAfter {
		evs = append(evs, t.resolveLocked(inc, now))
	}
	t.saveLocked(ctx)
	for _, ev := range evs {
		t.o.Publisher.Publish(ev)
	}
	t.o.Metrics.setIncidents(t.incidents)
	t.changedLocked()
}
