package remedy

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

// RemediationStage applies the remedy of an incident as the policy allows: for real only on the leader, only for a
// rule in auto mode whose object is in scope, with the kill switch off and within the object's rate limit; as a
// dry-run record otherwise. The policy is the one in force when the remedy executes, read again after its
// write-ahead record and immediately before each write the remedier sends, not the one of the evaluation that
// queued it. Every automatic action leaves an audit trail: a structured log line here, and the
// EventRemediating/EventRemediated transitions that notifiers turn into a thread reply and a Kubernetes Event.
type RemediationStage struct {
	remediers syncmedic.Remediers
	limiter   *RateLimiter
	log       *slog.Logger
	identity  string
	metrics   *Metrics
	drain     time.Duration

	// life outlives the caller's context: a remedy runs on it until it ends, so shutdown never cuts one off between
	// two writes (TerminateOperation and Sync); Run cancels it once Drain has passed after its context ended.
	life    context.Context
	endLife context.CancelFunc
	running sync.WaitGroup

	mu       sync.Mutex
	inflight map[string]bool
	queue    chan remediationRequest // nil: synchronous (the evaluation waits for the remedy)
	workers  int
}

var _ incident.Remediator = (*RemediationStage)(nil)

type remediationRequest struct {
	t  incident.Ledger
	id string
}

// RemediationOptions configure NewRemediationStage.
type RemediationOptions struct {
	// Remediers apply each action through the owning tool's API.
	Remediers syncmedic.Remediers
	// Limiter counts actions per object (nil: a new one on the system clock).
	Limiter *RateLimiter
	// Identity names this replica in the audit log ("who"), e.g. the Pod name.
	Identity string
	Log      *slog.Logger
	Metrics  *Metrics
	// Workers > 0 applies remedies in that many background workers (started by Run), so a slow tool API never
	// holds up the evaluation that found the incident; 0 applies them synchronously inside Observe.
	Workers int
	// Drain is how long Run, once its context ends, lets the remedies in flight finish (default DefaultDrain); after
	// it their context is cancelled. Serve's pod must be given this much termination grace.
	Drain time.Duration
}

// recordTimeout bounds the save of a remedy's result once its own context has ended.
const recordTimeout = 10 * time.Second

// DefaultDrain lets a terminate-and-resync in flight finish on shutdown: up to 5 minutes for the terminated
// operation to stop (argocd remedy StopTimeout) and one more for its Sync retries.
const DefaultDrain = 6 * time.Minute

// NewRemediationStage returns the stage for incident.TrackerOptions.Remediation.
func NewRemediationStage(o RemediationOptions) *RemediationStage {
	if o.Limiter == nil {
		o.Limiter = NewRateLimiter(nil)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Drain <= 0 {
		o.Drain = DefaultDrain
	}
	s := &RemediationStage{remediers: o.Remediers, limiter: o.Limiter, log: o.Log, identity: o.Identity,
		metrics: o.Metrics, inflight: map[string]bool{}, workers: o.Workers, drain: o.Drain}
	s.life, s.endLife = context.WithCancel(context.Background())
	if o.Workers > 0 {
		s.queue = make(chan remediationRequest, 256)
	}
	return s
}

// Run applies queued remedies with Options.Workers workers until ctx ends. Then it starts no new remedy, lets the
// ones in flight (queued or on demand) finish for up to Options.Drain, cancels what is still running, and returns
// once every remedy has recorded its result.
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
					if ctx.Err() != nil {
						return // shutting down: the next leader evaluates it again
					}
					s.consider(ctx, r.t, r.id)
				}
			}
		}()
	}
	<-ctx.Done()
	cut := time.AfterFunc(s.drain, s.endLife)
	defer cut.Stop()
	wg.Wait()
	s.running.Wait()
	s.endLife()
}

// begin returns the context a remedy runs on: ctx's values, not its cancellation (shutdown or a caller that went
// away must not stop a remedy between two writes), ended by Run's drain deadline. done must be called when the
// result is recorded.
func (s *RemediationStage) begin(ctx context.Context) (context.Context, func()) {
	s.running.Add(1)
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(s.life, cancel)
	return rctx, func() {
		stop()
		cancel()
		s.running.Done()
	}
}

// Submit hands one incident to the stage (incident.Remediator); when the workers are all busy the next evaluation
// submits it again.
func (s *RemediationStage) Submit(ctx context.Context, t incident.Ledger, id string) {
	if s.queue == nil {
		s.consider(ctx, t, id)
		return
	}
	select {
	case s.queue <- remediationRequest{t: t, id: id}:
	default:
		s.log.Debug("remediation workers busy; the next evaluation retries", "incident", id)
	}
}

// consider decides with the policy in force now and, when allowed, applies the remedy of incident id. It runs
// without the tracker's lock.
func (s *RemediationStage) consider(ctx context.Context, t incident.Ledger, id string) {
	if !t.Leading() {
		return
	}
	inc, ok := t.Get(id)
	if !ok || !inc.IsOpen() || inc.Finding.Remedy.Action == syncmedic.ActionNone {
		return
	}
	// A silenced incident is neither remedied nor recorded as a dry-run (its thread is silent): the remedy is
	// considered again once the silence ends.
	if inc.Silenced() {
		s.log.Debug("incident silenced: no automatic remedy", "incident", id, "silence", inc.SilencedBy)
		return
	}
	f := inc.Finding
	action := f.Remedy.Action
	pol := t.Policy()
	d := pol.Decide(f)
	rem := s.remediers[action]
	if d.Act && rem == nil {
		d = policy.Decision{Mode: d.Mode, Reason: fmt.Sprintf("no remedier for %s is configured in this syncmedic (dry-run)", action)}
	}
	// One remedy at a time per incident, per object and per Argo CD application: two incidents about one hook (or
	// two hooks of one application, whose remedies both act on its operation) never run concurrently.
	keys := remedyKeys(id, f.Object)
	if !s.claim(keys...) {
		return
	}
	defer s.release(keys...)
	if last := lastReal(inc); last != nil && last.Result == incident.ResultStarted {
		// This replica holds the incident's claim, so no remedy of it runs here: the write-ahead record is of a
		// replica that stopped, or lost the lead, before it recorded the result.
		if resumer, ok := rem.(syncmedic.Resumer); ok && last.Pending != "" {
			s.resume(ctx, t, inc, resumer, *last)
			return
		}
		s.recordInterrupted(ctx, t, inc, *last)
		return
	}
	if !d.Act {
		s.recordDryRun(ctx, t, inc, rem, d)
		return
	}
	rl := *pol.For(f.Rule).RateLimit
	if prev, ok := t.RecurredAfter(inc, time.Duration(rl.Window)); ok {
		// The same remedy already "worked" on this object (or, for one that terminates or syncs, on this application)
		// and the condition came back (on Argo CD 2.14 a re-sync re-runs a ttlSecondsAfterFinished: 0 hook, which
		// loses the same race, under a new name when it is a generateName hook): repeating it would loop. A person
		// decides.
		target := "this object"
		if f.Remedy.ActsOnApplication() && f.Object.App != "" {
			target = "application " + f.Object.App
		}
		d = policy.Decision{Mode: d.Mode, Reason: fmt.Sprintf("not repeated: %s was applied to %s at %s (incident %s) and the condition came back; the remedy does not fix the cause, so a person must look",
			prev.Action, target, prev.At.UTC().Format(time.RFC3339), prev.Incident)}
		s.recordDryRun(ctx, t, inc, rem, d)
		return
	}
	if last := lastReal(inc); last != nil {
		if last.Permanent {
			return // retrying cannot fix it; the failure is on the incident and in the thread
		}
		if last.Result == incident.ResultSucceeded && t.Now().Before(last.At.Add(time.Duration(rl.Backoff))) {
			return // give the tool time to act on the fix before trying again
		}
	}
	if ok, retryAt, why := s.limiter.Allow(syncmedic.RemedyKey(f), rl); !ok {
		s.log.Debug("remediation deferred", "incident", id, "rule", f.Rule, "action", action, "reason", why, "retryAt", retryAt)
		return
	}
	s.apply(ctx, t, inc, rem, d)
}

func (s *RemediationStage) apply(ctx context.Context, t incident.Ledger, inc incident.Incident, rem syncmedic.Remedier, d policy.Decision) {
	s.applyAttempt(ctx, t, inc, rem, d, "", func(pol *policy.Policy) string {
		if d := pol.Decide(inc.Finding); !d.Act {
			return d.Reason
		}
		return ""
	})
}

// applyAttempt applies the remedy for real and records it: the started attempt (the write-ahead record, saved
// before anything is changed), the structured audit line (who: this replica, and the person who asked when
// requestedBy is set), the result. Right before the remedier runs, refused is asked about the policy in force then:
// a reason stops the remedy with no write made (the kill switch turned on, the rule set to notify, the object taken
// out of scope since the remedy was queued or confirmed). The remedier asks refused again immediately before each of
// its writes (syncmedic.BeforeWrite): a refusal before the first write is recorded like the one above; after an
// earlier write (a terminated operation whose Sync was refused) it is a permanent failure saying what was left. It
// returns the recorded result.
func (s *RemediationStage) applyAttempt(ctx context.Context, t incident.Ledger, inc incident.Incident, rem syncmedic.Remedier, d policy.Decision, requestedBy string, refused func(*policy.Policy) string) incident.Attempt {
	ctx, done := s.begin(ctx)
	defer done()
	f, action := inc.Finding, inc.Finding.Remedy.Action
	start := t.Now()
	if err := t.RecordAttempt(ctx, inc.ID, incident.Attempt{At: start, Action: action, Result: incident.ResultStarted, Reason: d.Reason, RequestedBy: requestedBy}, incident.EventRemediating); err != nil {
		// Without its write-ahead record a remedy that is cut off leaves no trace for the next leader: do not start.
		s.log.Warn("remediation not started: its write-ahead record was not saved", "incident", inc.ID, "rule", f.Rule, "action", action, "err", err)
		return incident.Attempt{At: start, Action: action, Result: incident.ResultFailed, Reason: d.Reason, RequestedBy: requestedBy,
			Error: fmt.Sprintf("not applied, nothing was changed: the attempt could not be recorded before its first write (%v); retry once the incident store is writable", err)}
	}
	if why := refused(t.Policy()); why != "" {
		a := incident.Attempt{At: start, Action: action, Result: incident.ResultDryRun, RequestedBy: requestedBy,
			Reason: "not applied, nothing was changed: the policy in force when the remedy was about to make its first write refuses it: " + why}
		s.log.Info("remediation stopped before its first write", "who", s.identity, "incident", inc.ID, "rule", f.Rule, "action", action, "why", a.Reason)
		s.metrics.remediation(f.Rule, action, incident.ResultDryRun)
		_ = t.RecordAttempt(ctx, inc.ID, a, incident.EventRemediated) // a lost record only loses the dry-run note
		return a
	}
	// The remedier reads the application, sync windows, permissions and settings after the check above; the gate
	// reads the policy again immediately before each of its writes, so nothing is written after the kill switch.
	gate := func(_ context.Context, write string) string {
		why := refused(t.Policy())
		if why != "" {
			s.log.Info("remediation write refused right before it was sent", "who", s.identity, "incident", inc.ID, "rule", f.Rule, "action", action, "write", write, "why", why)
		}
		return why
	}
	// A remedy that makes several writes saves its progress on its write-ahead record, for a next leader to finish.
	checkpoint := func(ctx context.Context, steps []string, pending string) error {
		return t.RecordAttempt(ctx, inc.ID, incident.Attempt{At: start, Action: action, Result: incident.ResultStarted, Steps: steps, Pending: pending,
			Reason: d.Reason, RequestedBy: requestedBy}, incident.EventRemediating) // saved, not announced again
	}
	out, err := rem.Remediate(syncmedic.WithCheckpoint(syncmedic.WithWriteGate(ctx, gate), checkpoint), f, false)
	a := incident.Attempt{At: start, Action: action, Result: incident.ResultSucceeded, Changed: out.Changed, Steps: out.Steps, Reason: d.Reason, RequestedBy: requestedBy}
	refusal, gated := syncmedic.IsWriteRefused(err)
	switch {
	case gated && !out.Changed:
		// Nothing was written: a dry-run record like the refusal above, not a failure (nothing to retry or count).
		a.Result = incident.ResultDryRun
		a.Reason = fmt.Sprintf("not applied, nothing was changed: the policy in force right before its write (%s) refuses it: %s", refusal.Write, refusal.Reason)
	case err != nil:
		a.Result, a.Error, a.Permanent = incident.ResultFailed, err.Error(), syncmedic.IsPermanent(err)
	}
	if !gated || out.Changed {
		s.limiter.Record(syncmedic.RemedyKey(f), start, err == nil)
	}
	s.metrics.remediation(f.Rule, action, a.Result)
	attrs := []any{"who", s.identity}
	if requestedBy != "" {
		attrs = append(attrs, "requestedBy", requestedBy)
	}
	s.log.Info("remediation", append(attrs, "action", action, "result", a.Result, "changed", a.Changed,
		"steps", a.Steps, "incident", inc.ID, "rule", f.Rule, "why", d.Reason, "summary", f.Summary,
		"subject", inc.Subject, "namespace", f.Object.Namespace, "app", f.Object.App, "object", f.Object.String(),
		"err", a.Error)...)
	// The result is recorded even when the drain cut the remedy off: its write-ahead record must not stay open.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if rerr := t.RecordAttempt(rctx, inc.ID, a, incident.EventRemediated); rerr != nil {
		s.log.Error("the remediation's result was not recorded", "incident", inc.ID, "action", action, "result", a.Result, "err", rerr)
	}
	return a
}

// recordInterrupted records the outcome of a write-ahead record whose remedy never recorded a result. A remedy that
// re-runs hooks may have run: it is reported "may have run — check" and not repeated automatically (its hooks may be
// database migrations); a person checks the application. Any other remedy is idempotent: the failure is recorded
// and the remedy applied again when its finding still matches, as the rate limit and backoff allow.
func (s *RemediationStage) recordInterrupted(ctx context.Context, t incident.Ledger, inc incident.Incident, started incident.Attempt) {
	f := inc.Finding
	a := started
	a.Result = incident.ResultFailed
	at := started.At.UTC().Format(time.RFC3339)
	if f.Remedy.RerunsHooks {
		target := f.Object.String()
		if f.Object.App != "" {
			target = "application " + f.Object.App
		}
		a.Permanent = true
		a.Error = fmt.Sprintf("may have run — check: %s on %s started at %s and its result was never recorded (the replica applying it stopped or lost the lead): "+
			"it may have terminated the operation and may have started a new sync, whose hooks run again. syncmedic does not repeat it. "+
			"Check the application's operation and history (argocd app get %s; argocd app history %s); if its operation ended \"Operation terminated\" and no newer sync started, sync it by hand (argocd app sync %s)",
			f.Remedy.Action, target, at, f.Object.App, f.Object.App, f.Object.App)
	} else {
		a.Error = fmt.Sprintf("interrupted: %s on %s started at %s and its result was never recorded (the replica applying it stopped or lost the lead); "+
			"it is idempotent and is applied again while the finding matches", f.Remedy.Action, f.Object, at)
	}
	s.log.Warn("remediation interrupted", "who", s.identity, "incident", inc.ID, "rule", f.Rule, "action", f.Remedy.Action, "startedAt", started.At,
		"app", f.Object.App, "repeated", !a.Permanent)
	s.metrics.remediation(f.Rule, f.Remedy.Action, incident.ResultFailed)
	if err := t.RecordAttempt(ctx, inc.ID, a, incident.EventRemediated); err != nil {
		s.log.Error("the interrupted remediation was not recorded", "incident", inc.ID, "err", err)
	}
}

// recordDryRun records once per incident and action what would have been done, and why it was not.
func (s *RemediationStage) recordDryRun(ctx context.Context, t incident.Ledger, inc incident.Incident, rem syncmedic.Remedier, d policy.Decision) {
	f, action := inc.Finding, inc.Finding.Remedy.Action
	for _, a := range inc.Attempts {
		if a.Action == action && a.Result == incident.ResultDryRun && a.Reason == d.Reason {
			return
		}
	}
	a := incident.Attempt{At: t.Now(), Action: action, Result: incident.ResultDryRun, Reason: d.Reason, Steps: f.Remedy.Commands}
	if rem != nil {
		out, err := rem.Remediate(ctx, f, true)
		if err != nil {
			a.Error = err.Error()
		} else if len(out.Steps) > 0 {
			a.Steps = out.Steps
		}
	}
	s.metrics.remediation(f.Rule, action, incident.ResultDryRun)
	_ = t.RecordAttempt(ctx, inc.ID, a, incident.EventRemediated) // not leading, or a failed save the next change retries
}

// Seed counts the actions recorded on stored incidents, so a restart or a new leader keeps the rate limits and
// backoffs of the replica before it.
func (s *RemediationStage) Seed(stored []incident.Incident) {
	type action struct {
		key string
		at  time.Time
		ok  bool
	}
	var all []action
	for _, inc := range stored {
		for _, a := range inc.Attempts {
			if a.Result == incident.ResultSucceeded || a.Result == incident.ResultFailed {
				all = append(all, action{syncmedic.RemedyKey(inc.Finding), a.At, a.Result == incident.ResultSucceeded})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, a := range all {
		s.limiter.Record(a.key, a.at, a.ok)
	}
}

// remedyKeys are what one remedy holds while it runs: the incident, the object, and the Argo CD application.
func remedyKeys(id string, o syncmedic.ObjectRef) []string {
	keys := []string{"incident:" + id, "object:" + syncmedic.ObjectKey(o)}
	if app := syncmedic.ApplicationKey(o); app != "" {
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

// lastReal returns the latest attempt that was not a dry-run.
func lastReal(inc incident.Incident) *incident.Attempt {
	for i := len(inc.Attempts) - 1; i >= 0; i-- {
		if inc.Attempts[i].Result != incident.ResultDryRun {
			return &inc.Attempts[i]
		}
	}
	return nil
}
