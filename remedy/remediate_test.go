package remedy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/syncmedic/syncmedic/internal/testclock"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

// countingRemedier records its calls; it fails while failing is set.
type countingRemedier struct {
	mu      sync.Mutex
	real    int
	dry     int
	failing error
	// refusing, when set, is the answer of a dry run too (a remedier that read the object and refuses it).
	refusing error
}

func (r *countingRemedier) Remediate(_ context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if dryRun {
		r.dry++
		if r.refusing != nil {
			return syncmedic.Outcome{Action: f.Remedy.Action, DryRun: true}, r.refusing
		}
		return syncmedic.Outcome{Action: f.Remedy.Action, DryRun: true, Steps: []string{"PatchResource (dry-run)"}}, nil
	}
	r.real++
	if r.failing != nil {
		return syncmedic.Outcome{}, r.failing
	}
	return syncmedic.Outcome{Action: f.Remedy.Action, Changed: true, Steps: []string{"PatchResource remove finalizer"}}, nil
}

func (r *countingRemedier) calls() (real, dry int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.real, r.dry
}

type remediationRig struct {
	tr     *incident.Tracker
	stage  *RemediationStage
	fixer  *Fixer
	rem    *countingRemedier
	evs    *events
	clock  *testclock.Clock
	policy *policy.Policy
	leader bool
	logs   *bytes.Buffer
	reg    *prometheus.Registry
}

func newRemediationRig(t *testing.T, policyYAML string) *remediationRig {
	t.Helper()
	p, err := policy.LoadPolicy([]byte(policyYAML))
	require.NoError(t, err)
	r := &remediationRig{rem: &countingRemedier{}, evs: &events{}, clock: newClock(), policy: p, leader: true,
		logs: &bytes.Buffer{}, reg: prometheus.NewRegistry()}
	log := slog.New(slog.NewJSONHandler(r.logs, nil))
	m, rm := incident.NewMetrics(r.reg), NewMetrics(r.reg)
	stage := NewRemediationStage(RemediationOptions{
		Remediers: syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: r.rem, syncmedic.ActionTerminateAndResync: r.rem}, Limiter: NewRateLimiter(r.clock.Now),
		Identity: "syncmedic-0", Log: log, Metrics: rm,
	})
	r.tr = newTestTracker(t, incident.TrackerOptions{Publisher: r.evs, Now: r.clock.Now, Remediation: stage, Log: log, Metrics: m,
		Policy: func() *policy.Policy { return r.policy }, Leader: func() bool { return r.leader }})
	r.stage, r.fixer = stage, NewFixer(stage, r.tr)
	return r
}

const autoPolicy = `
defaults:
  rateLimit: {max: 2, window: 1h, backoff: 1m, maxBackoff: 10m}
rules:
  argocd/hook-finalizer-stuck:
    mode: auto
    namespaces: [shop]
`

func TestRemediationFollowsThePolicy(t *testing.T) {
	ctx := context.Background()
	t.Run("notify records what would be done once and changes nothing", func(t *testing.T) {
		r := newRemediationRig(t, "")
		for range 3 {
			r.tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
		}
		real, dry := r.rem.calls()
		require.Equal(t, 0, real)
		require.Equal(t, 1, dry)
		require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediated}, r.evs.kinds())
		a := r.evs.last().Attempt
		require.Equal(t, incident.ResultDryRun, a.Result)
		require.Equal(t, []string{"PatchResource (dry-run)"}, a.Steps)
		require.Equal(t, incident.StateFiring, r.evs.last().Incident.State)
	})
	t.Run("auto applies the remedy and audits it", func(t *testing.T) {
		r := newRemediationRig(t, autoPolicy)
		r.tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
		real, _ := r.rem.calls()
		require.Equal(t, 1, real)
		require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediating, incident.EventRemediated}, r.evs.kinds())
		ev := r.evs.last()
		require.Equal(t, incident.ResultSucceeded, ev.Attempt.Result)
		require.Equal(t, incident.StateRemediating, ev.Incident.State)
		require.Contains(t, r.logs.String(), `"msg":"remediation","who":"syncmedic-0","action":"argocd/remove-hook-finalizer","result":"succeeded"`)
		require.Contains(t, r.logs.String(), `"incident":"`+ev.Incident.ID+`"`)
		m, err := r.reg.Gather()
		require.NoError(t, err)
		require.Contains(t, metricText(t, m), `syncmedic_remediations_total{action="argocd/remove-hook-finalizer",result="succeeded",rule="argocd/hook-finalizer-stuck"} 1`)
	})
	t.Run("auto does not act outside the allowed namespaces", func(t *testing.T) {
		r := newRemediationRig(t, autoPolicy)
		r.tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("kube-system", "migrate")})
		real, dry := r.rem.calls()
		require.Equal(t, 0, real)
		require.Equal(t, 1, dry)
		require.Contains(t, r.evs.last().Attempt.Reason, "kube-system")
	})
	t.Run("the kill switch stops every action at once", func(t *testing.T) {
		r := newRemediationRig(t, autoPolicy)
		r.policy.KillSwitch = true
		r.tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "a"), hookFinding("shop", "b")})
		real, _ := r.rem.calls()
		require.Equal(t, 0, real)
		require.Contains(t, r.evs.last().Attempt.Reason, "kill switch")
	})
	t.Run("a follower never acts", func(t *testing.T) {
		r := newRemediationRig(t, autoPolicy)
		r.leader = false
		r.tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
		real, dry := r.rem.calls()
		require.Zero(t, real+dry)
		require.Empty(t, r.evs.kinds())
	})
}

func TestRemediationIsRateLimitedAndBacksOff(t *testing.T) {
	ctx := context.Background()
	r := newRemediationRig(t, autoPolicy)
	r.rem.failing = errors.New("argocd: connection refused")
	f := hookFinding("shop", "migrate")
	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	require.Equal(t, incident.StateFiring, r.evs.last().Incident.State, "a failed action puts the incident back to firing")
	require.Equal(t, incident.ResultFailed, r.evs.last().Attempt.Result)

	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	real, _ := r.rem.calls()
	require.Equal(t, 1, real, "no retry inside the backoff")

	r.clock.Advance(time.Minute)
	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	real, _ = r.rem.calls()
	require.Equal(t, 2, real, "retried once the backoff passed")

	r.rem.failing = nil
	r.clock.Advance(2 * time.Minute)
	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	real, _ = r.rem.calls()
	require.Equal(t, 2, real, "the rate limit (2 per hour) holds even after the backoff")

	r.clock.Advance(time.Hour)
	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	real, _ = r.rem.calls()
	require.Equal(t, 3, real)
	require.Equal(t, incident.ResultSucceeded, r.evs.last().Attempt.Result)
}

func TestRemediationStopsAfterAPermanentError(t *testing.T) {
	ctx := context.Background()
	r := newRemediationRig(t, autoPolicy)
	r.rem.failing = syncmedic.Permanent(errors.New("permission denied: applications, update"))
	f := hookFinding("shop", "migrate")
	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	r.clock.Advance(24 * time.Hour)
	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	real, _ := r.rem.calls()
	require.Equal(t, 1, real)
	require.True(t, r.evs.last().Attempt.Permanent)
}

func TestRateLimitsSurviveARestart(t *testing.T) {
	ctx := context.Background()
	store := &incident.MemoryStore{}
	c := newClock()
	p, err := policy.LoadPolicy([]byte(autoPolicy))
	require.NoError(t, err)
	rem := &countingRemedier{failing: errors.New("503 from argocd-server")}
	newReplica := func() *incident.Tracker {
		stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: rem}, Limiter: NewRateLimiter(c.Now)})
		return newTestTracker(t, incident.TrackerOptions{Store: store, Now: c.Now, Remediation: stage, Policy: func() *policy.Policy { return p }})
	}
	f := hookFinding("shop", "migrate")
	newReplica().Observe(ctx, "s", []syncmedic.Finding{f})
	c.Advance(30 * time.Second)
	newReplica().Observe(ctx, "s", []syncmedic.Finding{f})
	real, _ := rem.calls()
	require.Equal(t, 1, real, "the restarted replica still backs off after the failure it loaded")
}

func TestBackgroundWorkersApplyRemediesWithoutHoldingUpEvaluation(t *testing.T) {
	p, err := policy.LoadPolicy([]byte(autoPolicy))
	require.NoError(t, err)
	release := make(chan struct{})
	var calls sync.WaitGroup
	calls.Add(1)
	slow := syncmedic.RemedierFunc(func(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
		defer calls.Done()
		<-release
		return syncmedic.Outcome{Action: f.Remedy.Action, Changed: true}, nil
	})
	stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: slow}, Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); stage.Run(ctx) }()
	defer func() { cancel(); <-done }()
	evs := &events{}
	tr := newTestTracker(t, incident.TrackerOptions{Publisher: evs, Remediation: stage, Policy: func() *policy.Policy { return p }})

	f := hookFinding("shop", "migrate")
	tr.Observe(ctx, "s", []syncmedic.Finding{f}) // returns while the remedy is still running
	require.Eventually(t, func() bool { return len(evs.kinds()) == 2 }, 5*time.Second, 5*time.Millisecond)
	tr.Observe(ctx, "s", []syncmedic.Finding{f}) // the same incident is not taken twice
	close(release)
	calls.Wait()
	require.Eventually(t, func() bool { return evs.last().Kind == incident.EventRemediated }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediating, incident.EventRemediated}, evs.kinds())
}

func TestOneRemedyRunsAtATimePerObjectAndPerApplication(t *testing.T) {
	s := NewRemediationStage(RemediationOptions{})
	hook := syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "batch", Kind: "Job", Namespace: "shop", Name: "migrate", App: "shop", AppNamespace: "argocd"}
	sibling := hook
	sibling.Name = "seed"
	elsewhere := syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "batch", Kind: "Job", Namespace: "web", Name: "migrate", App: "web", AppNamespace: "argocd"}
	release := syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Kind: "HelmRelease", Namespace: "shop", Name: "shop"}

	require.True(t, s.claim(remedyKeys("hook-finalizer-1", hook)...))
	require.False(t, s.claim(remedyKeys("hook-completion-1", hook)...), "a second incident about the same hook waits for the first remedy")
	require.False(t, s.claim(remedyKeys("hook-finalizer-2", sibling)...), "another hook of the same application waits: both remedies act on its operation")
	require.True(t, s.claim(remedyKeys("hook-finalizer-3", elsewhere)...), "another application is independent")
	require.True(t, s.claim(remedyKeys("retries-1", release)...), "an object outside Argo CD is independent")
	s.release(remedyKeys("hook-finalizer-1", hook)...)
	require.True(t, s.claim(remedyKeys("hook-completion-1", hook)...), "once the first remedy ended the second may run")
}

func TestARemedyThatDidNotFixTheCauseIsNotRepeatedWhenTheConditionComesBack(t *testing.T) {
	ctx := context.Background()
	r := newRemediationRig(t, autoPolicy)
	f := hookFinding("shop", "migrate")
	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	real, _ := r.rem.calls()
	require.Equal(t, 1, real, "the first time, the remedy is applied")
	for range 3 { // resolveAfter: the fix seemed to work
		r.clock.Advance(time.Minute)
		r.tr.Observe(ctx, "s", nil)
	}
	require.Equal(t, incident.StateResolved, r.evs.last().Incident.State)

	r.clock.Advance(2 * time.Minute) // past the backoff, well inside the rate-limit window
	r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
	real, _ = r.rem.calls()
	require.Equal(t, 1, real, "the same remedy is not applied again to the same condition")
	last := r.evs.last()
	require.Equal(t, incident.ResultDryRun, last.Attempt.Result)
	require.Contains(t, last.Attempt.Reason, "the condition came back")
	require.Contains(t, last.Attempt.Reason, "a person must look")

	t.Run("after the rate-limit window it may act again", func(t *testing.T) {
		for range 3 {
			r.clock.Advance(time.Minute)
			r.tr.Observe(ctx, "s", nil)
		}
		r.clock.Advance(2 * time.Hour)
		r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
		real, _ := r.rem.calls()
		require.Equal(t, 2, real)
	})
}

// blockingRemedier holds its real calls until released, as a slow terminate-and-resync does.
type blockingRemedier struct{ release chan struct{} }

func (b *blockingRemedier) Remediate(_ context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	if !dryRun {
		<-b.release
	}
	return syncmedic.Outcome{Action: f.Remedy.Action, Changed: !dryRun, DryRun: dryRun}, nil
}

func TestAnIncidentResolvedByItsOwnRemedySaysSucceededBeforeResolved(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := policy.LoadPolicy([]byte(autoPolicy + "resolveAfter: 1\n"))
	require.NoError(t, err)
	rem := &blockingRemedier{release: make(chan struct{})}
	evs, c := &events{}, newClock()
	stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: rem},
		Limiter: NewRateLimiter(c.Now), Workers: 1})
	go stage.Run(ctx)
	tr := newTestTracker(t, incident.TrackerOptions{Publisher: evs, Now: c.Now, Remediation: stage, Policy: func() *policy.Policy { return p },
		Leader: func() bool { return true }})

	tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	require.Eventually(t, func() bool { return slices.Contains(evs.kinds(), incident.EventRemediating) }, 5*time.Second, 5*time.Millisecond)
	// The remedy's own effect makes the rule stop matching while the remedy still runs.
	c.Advance(time.Second)
	tr.Observe(ctx, "s", nil)
	require.NotContains(t, evs.kinds(), incident.EventResolved, "not resolved while its remedy has not recorded a result")

	close(rem.release)
	// No further evaluation: a healthy application sends no more changes, so the result itself resolves it.
	require.Eventually(t, func() bool { return slices.Contains(evs.kinds(), incident.EventResolved) }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediating, incident.EventRemediated, incident.EventResolved}, evs.kinds(),
		"the thread says the remedy succeeded, then that the incident resolved")
}

// appHookFinding is a finding on a hook of Argo CD application app (in namespace argocd) whose remedy is action;
// reruns marks a remedy that starts a new sync.
func appHookFinding(rule syncmedic.RuleID, app, hook string, action syncmedic.ActionID, reruns bool) syncmedic.Finding {
	f := syncmedic.NewFinding(rule, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: hook,
		App: app, AppNamespace: "argocd", Project: "default"}, "hook Job "+hook+" of "+app)
	f.Remedy = syncmedic.Remedy{Action: action, AutoSafe: true, RerunsHooks: reruns, Description: "fix " + hook}
	return f
}

const appLevelPolicy = `
defaults:
  rateLimit: {max: %d, window: 1h, backoff: 1m, maxBackoff: 10m}
rules:
  argocd/hook-completion-missed: {mode: auto, rerunHooks: true}
  argocd/hook-immutable: {mode: auto, rerunHooks: true}
  argocd/hook-finalizer-stuck: {mode: auto}
`

// TestAnApplicationLevelRemedyIsLimitedByTheApplicationNotByTheHookName: gitops-engine names a generateName hook
// <prefix><rev7>-<phase>-<startedAt>, so every re-sync re-creates the stuck hook under a new name. A remedy that
// terminates or syncs acts on the application: the rate limit and "not repeated" count it per application.
func TestAnApplicationLevelRemedyIsLimitedByTheApplicationNotByTheHookName(t *testing.T) {
	ctx := context.Background()
	const (
		first  = "migrate-4f2a9c1-presync-1773144000" // the hook of the first operation
		second = "migrate-4f2a9c1-presync-1773144330" // the same hook, re-created by the re-sync syncmedic started
	)
	resync := func(app, hook string) syncmedic.Finding {
		return appHookFinding(syncmedic.RuleHookCompletionMissed, app, hook, syncmedic.ActionTerminateAndResync, true)
	}
	tests := []struct {
		name string
		max  int
		// before is remedied first and, unless stillOpen, resolves; after comes next.
		before, after syncmedic.Finding
		stillOpen     bool
		wantReal      int
		wantReason    string // of after's dry-run record, when it is refused by "not repeated"
	}{
		{name: "the re-created hook's terminate-and-resync is not repeated once the first incident resolved",
			max: 3, before: resync("shop", first), after: resync("shop", second), wantReal: 1,
			wantReason: "not repeated: argocd/terminate-and-resync was applied to application shop"},
		{name: "while the first incident is open the rate limit counts the application",
			max: 1, before: resync("shop", first), after: resync("shop", second), stillOpen: true, wantReal: 1},
		{name: "a finalizer removal that then synced counts as an action on the application",
			max: 3, before: appHookFinding(syncmedic.RuleHookImmutable, "shop", first, syncmedic.ActionRemoveHookFinalizer, true), after: resync("shop", second), wantReal: 1,
			wantReason: "not repeated: argocd/remove-hook-finalizer was applied to application shop"},
		{name: "near miss: another application is not limited",
			max: 1, before: resync("shop", first), after: resync("web", second), stillOpen: true, wantReal: 2},
		{name: "near miss: a finalizer removal alone acts on its hook only",
			max: 1, before: appHookFinding(syncmedic.RuleHookFinalizerStuck, "shop", first, syncmedic.ActionRemoveHookFinalizer, false),
			after: appHookFinding(syncmedic.RuleHookFinalizerStuck, "shop", second, syncmedic.ActionRemoveHookFinalizer, false), wantReal: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRemediationRig(t, fmt.Sprintf(appLevelPolicy, tt.max))
			r.tr.Observe(ctx, "s", []syncmedic.Finding{tt.before})
			real, _ := r.rem.calls()
			require.Equal(t, 1, real, "the first remedy is applied")
			var open []syncmedic.Finding
			if tt.stillOpen {
				open = []syncmedic.Finding{tt.before}
			} else {
				for range 3 { // resolveAfter: the fix seemed to work
					r.clock.Advance(time.Minute)
					r.tr.Observe(ctx, "s", nil)
				}
				require.Equal(t, incident.StateResolved, r.evs.last().Incident.State)
			}
			r.clock.Advance(5 * time.Minute) // past the backoff, inside the window: the v2.14 loop's period
			r.tr.Observe(ctx, "s", append(open, tt.after))
			real, _ = r.rem.calls()
			require.Equal(t, tt.wantReal, real)
			last := r.evs.last()
			require.Equal(t, tt.after.WithFingerprint().Fingerprint, last.Incident.Fingerprint, "the last event is about the second hook")
			if tt.wantReal == 1 { // refused: deferred by the limit (no attempt) or recorded as not repeated (dry-run)
				require.True(t, last.Attempt == nil || last.Attempt.Result == incident.ResultDryRun, "%+v", last.Attempt)
			}
			if tt.wantReason != "" {
				require.Equal(t, incident.ResultDryRun, last.Attempt.Result)
				require.Contains(t, last.Attempt.Reason, tt.wantReason)
			}
		})
	}
}

// TestApplicationRateLimitsSurviveARestart: a new leader loads the stored incidents and counts their actions against
// the application, so the re-created hook's terminate-and-resync waits for the window after a restart too.
func TestApplicationRateLimitsSurviveARestart(t *testing.T) {
	ctx := context.Background()
	store := &incident.MemoryStore{}
	c := newClock()
	p, err := policy.LoadPolicy([]byte(fmt.Sprintf(appLevelPolicy, 1)))
	require.NoError(t, err)
	rem := &countingRemedier{}
	newReplica := func() *incident.Tracker {
		stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{syncmedic.ActionTerminateAndResync: rem}, Limiter: NewRateLimiter(c.Now)})
		return newTestTracker(t, incident.TrackerOptions{Store: store, Now: c.Now, Remediation: stage, Policy: func() *policy.Policy { return p }})
	}
	first := appHookFinding(syncmedic.RuleHookCompletionMissed, "shop", "migrate-4f2a9c1-presync-1773144000", syncmedic.ActionTerminateAndResync, true)
	second := appHookFinding(syncmedic.RuleHookCompletionMissed, "shop", "migrate-4f2a9c1-presync-1773144330", syncmedic.ActionTerminateAndResync, true)
	newReplica().Observe(ctx, "s", []syncmedic.Finding{first})
	c.Advance(5 * time.Minute)
	newReplica().Observe(ctx, "s", []syncmedic.Finding{first, second})
	real, _ := rem.calls()
	require.Equal(t, 1, real, "the restarted replica counts the first hook's action against the application")
}
