package remedy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

// hookStore is a MemoryStore that calls onStarted while it saves a write-ahead record (an attempt whose result is
// still "started"), and fails that save while failStarted is set: the moment between the stage's decision and the
// remedier's first write.
type hookStore struct {
	incident.MemoryStore
	onStarted   func()
	failStarted error
}

func (s *hookStore) Save(ctx context.Context, incs []incident.Incident) error {
	for _, inc := range incs {
		if last := inc.LastAttempt(); last != nil && last.Result == incident.ResultStarted {
			if s.onStarted != nil {
				s.onStarted()
			}
			if s.failStarted != nil {
				return s.failStarted
			}
		}
	}
	return s.MemoryStore.Save(ctx, incs)
}

// withStore replaces the rig's tracker by one saving to store (the stage and remediers stay).
func (r *remediationRig) withStore(t *testing.T, store incident.Store) {
	t.Helper()
	r.tr = newTestTracker(t, incident.TrackerOptions{Store: store, Publisher: r.evs, Now: r.clock.Now, Remediation: r.stage,
		Policy: func() *policy.Policy { return r.policy }, Leader: func() bool { return r.leader }})
	r.fixer = NewFixer(r.stage, r.tr)
}

func attemptsOf(t *testing.T, tr *incident.Tracker) []incident.Attempt {
	t.Helper()
	incs := tr.Incidents()
	require.Len(t, incs, 1)
	return incs[0].Attempts
}

// TestTheKillSwitchStopsAQueuedRemedy: a remedy queued under one policy executes under the policy in force when a
// worker takes it; the kill switch turned on in between stops it with no write.
func TestTheKillSwitchStopsAQueuedRemedy(t *testing.T) {
	p, err := policy.LoadPolicy([]byte(autoPolicy))
	require.NoError(t, err)
	var mu sync.Mutex
	current := p
	rem := &countingRemedier{}
	stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: rem}, Workers: 1})
	evs := &events{}
	tr := newTestTracker(t, incident.TrackerOptions{Publisher: evs, Remediation: stage,
		Policy: func() *policy.Policy { mu.Lock(); defer mu.Unlock(); return current }})

	ctx := context.Background()
	tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")}) // queued: no worker runs yet
	off := *p
	off.KillSwitch = true
	mu.Lock()
	current = &off // the policy reload
	mu.Unlock()

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); stage.Run(rctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { k := evs.kinds(); return len(k) > 1 && k[len(k)-1] == incident.EventRemediated }, 5*time.Second, 5*time.Millisecond)

	real, _ := rem.calls()
	require.Zero(t, real, "no write after the kill switch")
	require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediated}, evs.kinds())
	a := evs.last().Attempt
	require.Equal(t, incident.ResultDryRun, a.Result)
	require.Equal(t, "the kill switch is on: syncmedic takes no action (dry-run)", a.Reason)
	require.Equal(t, incident.StateFiring, evs.last().Incident.State)
}

// TestThePolicyIsReadAgainRightBeforeTheFirstWrite: the policy changes while the write-ahead record is saved, after
// the stage (or the person's confirmation) decided to act: no write is made, and the attempt says why.
func TestThePolicyIsReadAgainRightBeforeTheFirstWrite(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		change func(p *policy.Policy)
		want   string
	}{
		{name: "the kill switch", change: func(p *policy.Policy) { p.KillSwitch = true },
			want: "the kill switch is on: syncmedic takes no action"},
		{name: "the rule set to notify", change: func(p *policy.Policy) {
			p.Rules[syncmedic.RuleHookFinalizerStuck] = policy.RulePolicy{Mode: policy.ModeNotify}
		},
			want: "policy: argocd/hook-finalizer-stuck is notify only"},
	}
	for _, tt := range tests {
		t.Run("automatic: "+tt.name, func(t *testing.T) {
			r := newRemediationRig(t, autoPolicy)
			store := &hookStore{}
			r.withStore(t, store)
			store.onStarted = func() { tt.change(r.policy) }
			r.tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})

			real, _ := r.rem.calls()
			require.Zero(t, real, "no write")
			require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediating, incident.EventRemediated}, r.evs.kinds())
			last := r.evs.last()
			require.Equal(t, incident.ResultDryRun, last.Attempt.Result)
			require.Contains(t, last.Attempt.Reason, "not applied, nothing was changed: the policy in force when the remedy was about to make its first write refuses it: "+tt.want)
			require.Equal(t, incident.StateFiring, last.Incident.State)
			require.Len(t, attemptsOf(t, r.tr), 1, "the write-ahead record is replaced, not left started")
		})
	}
	t.Run("on demand: the kill switch after the confirmation", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		store := &hookStore{}
		r.withStore(t, store)
		id := openIncident(t, r, "shop")
		plan, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre})
		require.NoError(t, err)
		store.onStarted = func() { r.policy.KillSwitch = true }
		res, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre, Confirm: plan.Confirm})
		require.NoError(t, err)
		real, _ := r.rem.calls()
		require.Zero(t, real, "no write")
		require.Equal(t, incident.ResultDryRun, res.Result)
		a := attemptsOf(t, r.tr)
		require.Len(t, a, 2, "the notify policy's dry-run record, then the stopped fix")
		a = a[1:]
		require.Equal(t, "not applied, nothing was changed: the policy in force when the remedy was about to make its first write refuses it: the kill switch is on: syncmedic takes no action, on demand or not", a[0].Reason)
		require.Equal(t, "argocd user bob (groups dev, sre-oncall) via argocd-extension", a[0].RequestedBy)
	})
}

// TestARemedyDoesNotRunWithoutItsWriteAheadRecord: when the started attempt cannot be saved, the next leader would
// not know the remedy ran: nothing is written.
func TestARemedyDoesNotRunWithoutItsWriteAheadRecord(t *testing.T) {
	r := newRemediationRig(t, autoPolicy)
	store := &hookStore{failStarted: errors.New("configmaps \"syncmedic-state\" is forbidden")}
	r.withStore(t, store)
	r.tr.Observe(context.Background(), "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	real, _ := r.rem.calls()
	require.Zero(t, real)
	require.Contains(t, r.logs.String(), `"msg":"remediation not started: its write-ahead record was not saved"`)
}

// TestAnInterruptedHookRerunningRemedyIsNotRepeated: a new leader loads a write-ahead record without a result. A
// remedy that re-runs hooks may have run: it is reported "may have run — check" and never retried automatically;
// an idempotent one (a finalizer removal) is applied again.
func TestAnInterruptedHookRerunningRemedyIsNotRepeated(t *testing.T) {
	ctx := context.Background()
	p, err := policy.LoadPolicy([]byte(interruptPolicy))
	require.NoError(t, err)
	tests := []struct {
		name     string
		finding  syncmedic.Finding
		gone     bool // the finding no longer matches when the new leader loads (the operation was terminated)
		wantReal int
	}{
		{name: "terminate-and-resync re-runs hooks: not repeated",
			finding:  appHookFinding(syncmedic.RuleHookCompletionMissed, "shop", "migrate", syncmedic.ActionTerminateAndResync, true),
			wantReal: 0},
		{name: "terminate-and-resync cut off after its terminate, the finding gone: reported all the same",
			finding: appHookFinding(syncmedic.RuleHookCompletionMissed, "shop", "migrate", syncmedic.ActionTerminateAndResync, true),
			gone:    true, wantReal: 0},
		{name: "near miss: a finalizer removal is idempotent: applied again",
			finding:  appHookFinding(syncmedic.RuleHookFinalizerStuck, "shop", "migrate", syncmedic.ActionRemoveHookFinalizer, false),
			wantReal: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			// The old leader: it saves the write-ahead record, and its process dies while the remedier runs.
			block := make(chan struct{})
			hung := syncmedic.RemedierFunc(func(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
				<-block
				return syncmedic.Outcome{}, errors.New("never recorded: the test is over")
			})
			old := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{tt.finding.Remedy.Action: hung}, Workers: 1})
			oldStore := &incident.MemoryStore{}
			oldTr := newTestTracker(t, incident.TrackerOptions{Store: oldStore, Now: c.Now, Remediation: old, Policy: func() *policy.Policy { return p }})
			octx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); old.Run(octx) }()
			t.Cleanup(func() { close(block); cancel(); <-done })
			oldTr.Observe(ctx, "s", []syncmedic.Finding{tt.finding})
			var stored []incident.Incident
			require.Eventually(t, func() bool {
				incs, err := oldStore.Load(ctx)
				require.NoError(t, err)
				for _, inc := range incs {
					if last := inc.LastAttempt(); last != nil && last.Result == incident.ResultStarted {
						stored = []incident.Incident{inc}
						return true
					}
				}
				return false
			}, 5*time.Second, time.Millisecond, "the old leader saved its write-ahead record")
			store := &incident.MemoryStore{}
			require.NoError(t, store.Save(ctx, stored)) // what the state ConfigMap holds when the process is gone

			c.Advance(time.Minute)
			rem := &countingRemedier{}
			evs := &events{}
			stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{tt.finding.Remedy.Action: rem}, Limiter: NewRateLimiter(c.Now)})
			tr := newTestTracker(t, incident.TrackerOptions{Store: store, Publisher: evs, Now: c.Now, Remediation: stage, Policy: func() *policy.Policy { return p }})
			for range 3 {
				findings := []syncmedic.Finding{tt.finding}
				if tt.gone {
					findings = nil
				}
				tr.Observe(ctx, "s", findings)
				c.Advance(10 * time.Minute)
			}
			real, _ := rem.calls()
			require.Equal(t, tt.wantReal, real)
			a := attemptsOf(t, tr)
			if tt.wantReal == 0 {
				require.Len(t, a, 1, "the write-ahead record is replaced by the outcome")
				require.Equal(t, incident.ResultFailed, a[0].Result)
				require.True(t, a[0].Permanent)
				require.Equal(t, "may have run — check: argocd/terminate-and-resync on application shop started at "+a[0].At.UTC().Format(time.RFC3339)+
					" and its result was never recorded (the replica applying it stopped or lost the lead): it may have terminated the operation and may have started a new sync, whose hooks run again. "+
					"syncmedic does not repeat it. Check the application's operation and history (argocd app get shop; argocd app history shop); "+
					"if its operation ended \"Operation terminated\" and no newer sync started, sync it by hand (argocd app sync shop)", a[0].Error)
				want := []incident.EventKind{incident.EventRemediated}
				if tt.gone {
					want = append(want, incident.EventResolved) // the thread says "may have run — check" first
				}
				require.Equal(t, want, evs.kinds(), "reported once, in the thread")
			} else {
				require.Len(t, a, 2)
				require.Equal(t, incident.ResultFailed, a[0].Result, "the write-ahead record is closed")
				require.False(t, a[0].Permanent)
				require.Contains(t, a[0].Error, "interrupted: argocd/remove-hook-finalizer on Job.batch/shop/migrate")
				require.Equal(t, incident.ResultSucceeded, a[1].Result, "then applied again: it is idempotent")
			}
		})
	}
}

const interruptPolicy = `
defaults:
  rateLimit: {max: 1, window: 1h, backoff: 1m, maxBackoff: 10m}
rules:
  argocd/hook-completion-missed: {mode: auto, rerunHooks: true}
  argocd/hook-finalizer-stuck: {mode: auto}
`

// TestShutdownLetsARemedyInFlightFinish: Run's context ends while a remedy is between two writes; the remedy keeps
// running on an uncancelled context and records its result, and Run returns only then. Past the drain its context
// is cancelled.
func TestShutdownLetsARemedyInFlightFinish(t *testing.T) {
	tests := []struct {
		name    string
		drain   time.Duration
		release bool // the remedy finishes by itself
		want    incident.AttemptResult
	}{
		{name: "within the drain the remedy finishes", drain: time.Minute, release: true, want: incident.ResultSucceeded},
		{name: "past the drain it is cancelled", drain: 50 * time.Millisecond, want: incident.ResultFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := policy.LoadPolicy([]byte(autoPolicy))
			require.NoError(t, err)
			started, release := make(chan struct{}), make(chan struct{})
			var second bool
			rem := syncmedic.RemedierFunc(func(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
				close(started) // TerminateOperation sent
				select {
				case <-release:
				case <-ctx.Done():
					return syncmedic.Outcome{Changed: true, Steps: []string{"TerminateOperation"}}, ctx.Err()
				}
				second = true // Sync sent
				return syncmedic.Outcome{Changed: true, Steps: []string{"TerminateOperation", "Sync"}}, nil
			})
			stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: rem}, Workers: 1, Drain: tt.drain})
			evs := &events{}
			tr := newTestTracker(t, incident.TrackerOptions{Publisher: evs, Remediation: stage, Policy: func() *policy.Policy { return p }})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); stage.Run(ctx) }()
			tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
			<-started
			cancel() // SIGTERM
			select {
			case <-done:
				if tt.release {
					t.Fatal("Run returned while the remedy was still in flight")
				}
			case <-time.After(100 * time.Millisecond):
			}
			if tt.release {
				close(release)
			}
			<-done
			require.Equal(t, tt.release, second)
			a := attemptsOf(t, tr)
			require.Len(t, a, 1)
			require.Equal(t, tt.want, a[0].Result)
		})
	}
}

// TestAFixOnDemandOutlivesItsRequest: the person's HTTP request goes away (the client disconnects, the server shuts
// down) while the confirmed remedy is between two writes; the remedy finishes and records its result.
func TestAFixOnDemandOutlivesItsRequest(t *testing.T) {
	r := newRemediationRig(t, fixByPolicy)
	id := openIncident(t, r, "shop")
	plan, err := r.fixer.Fix(context.Background(), id, FixRequest{Caller: sre})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var remedyCtxErr error
	r.stage.remediers[syncmedic.ActionRemoveHookFinalizer] = syncmedic.RemedierFunc(func(rctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
		if dryRun {
			return r.rem.Remediate(rctx, f, true)
		}
		cancel() // the request is gone after the first write
		remedyCtxErr = rctx.Err()
		return syncmedic.Outcome{Action: f.Remedy.Action, Changed: true, Steps: []string{"TerminateOperation", "Sync"}}, nil
	})
	res, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre, Confirm: plan.Confirm})
	require.NoError(t, err)
	require.NoError(t, remedyCtxErr, "the remedy's context is not the request's")
	require.Equal(t, incident.ResultSucceeded, res.Result)
	require.Equal(t, []string{"TerminateOperation", "Sync"}, res.Steps)
}
