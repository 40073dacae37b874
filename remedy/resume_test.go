package remedy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testclock"
	"github.com/syncmedic/syncmedic/policy"
)

// resumingRemedier is terminate-and-resync as the stage sees it: Remediate terminates (a checkpoint "sync" pending)
// and then hangs until the test ends (the replica is cut off there); Resume asks the gate and makes the pending sync,
// or hangs too when hang is set.
type resumingRemedier struct {
	mu      sync.Mutex
	block   chan struct{}
	hang    bool
	real    int
	resumed []string
	syncs   int
}

func (r *resumingRemedier) Remediate(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	if dryRun {
		return syncmedic.Outcome{Action: f.Remedy.Action, DryRun: true}, nil
	}
	r.mu.Lock()
	r.real++
	r.mu.Unlock()
	if err := syncmedic.RecordCheckpoint(ctx, []string{"TerminateOperation app=argocd/shop"}, "sync"); err != nil {
		return syncmedic.Outcome{}, err
	}
	r.wait(ctx)
	return syncmedic.Outcome{}, context.Canceled
}

// wait blocks until the test ends or the stage's drain cancels the remedy (the replica is gone by then).
func (r *resumingRemedier) wait(ctx context.Context) {
	select {
	case <-r.block:
	case <-ctx.Done():
	}
}

func (r *resumingRemedier) Resume(ctx context.Context, f syncmedic.Finding, pending string) (syncmedic.Outcome, error) {
	r.mu.Lock()
	r.resumed = append(r.resumed, pending)
	r.mu.Unlock()
	if r.hang {
		r.wait(ctx)
		return syncmedic.Outcome{}, context.Canceled
	}
	out := syncmedic.Outcome{Action: f.Remedy.Action, Steps: []string{"app=argocd/shop: resuming the pending sync"}}
	if err := syncmedic.BeforeWrite(ctx, "Sync app=argocd/shop"); err != nil {
		return out, err
	}
	r.mu.Lock()
	r.syncs++
	r.mu.Unlock()
	out.Changed, out.Steps = true, append(out.Steps, "Sync app=argocd/shop")
	return out, nil
}

// cutOff runs rem on a leader until its write-ahead record holds a checkpoint with something pending, or (pending
// "") a record without one, and returns what the store holds then: what the state ConfigMap keeps once the replica is
// killed.
func cutOff(t *testing.T, c *testclock.Clock, p *policy.Policy, f syncmedic.Finding, store incident.Store, rem syncmedic.Remedier, pending string) *incident.MemoryStore {
	t.Helper()
	ctx := context.Background()
	stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{f.Remedy.Action: rem}, Workers: 1, Limiter: NewRateLimiter(c.Now), Drain: time.Millisecond})
	evs := &events{}
	tr := newTestTracker(t, incident.TrackerOptions{Store: store, Publisher: evs, Now: c.Now, Remediation: stage, Policy: func() *policy.Policy { return p }})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); stage.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tr.Observe(ctx, "s", []syncmedic.Finding{f})
	var stored []incident.Incident
	require.Eventually(t, func() bool {
		incs, err := store.Load(ctx)
		require.NoError(t, err)
		for _, inc := range incs {
			if last := inc.LastAttempt(); last != nil && last.Result == incident.ResultStarted && last.Pending == pending && (pending != "" || len(inc.Attempts) > 1) {
				stored = []incident.Incident{inc}
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
	if pending != "" {
		require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediating}, evs.kinds(), "the checkpoint is saved, not announced again")
	}
	killed := &incident.MemoryStore{}
	require.NoError(t, killed.Save(ctx, stored))
	return killed
}

// TestANextLeaderFinishesTheSyncPendingAfterATerminate: a replica killed between terminate-and-resync's
// TerminateOperation and its Sync leaves a write-ahead record with the checkpoint "sync pending". The next leader
// closes that attempt as interrupted, records a new write-ahead record, and resumes the sync exactly once, under the
// policy in force now (the kill switch on: no sync, and the attempt says to sync by hand). A resumed sync cut off in
// turn is never resumed again: the leader after reports it "may have run — check".
func TestANextLeaderFinishesTheSyncPendingAfterATerminate(t *testing.T) {
	ctx := context.Background()
	f := appHookFinding(syncmedic.RuleHookCompletionMissed, "shop", "migrate", syncmedic.ActionTerminateAndResync, true)
	p, err := policy.LoadPolicy([]byte(interruptPolicy))
	require.NoError(t, err)
	off := *p
	off.KillSwitch = true
	for _, tt := range []struct {
		name      string
		policy    *policy.Policy
		wantSyncs int
		wantLast  incident.AttemptResult
		wantErr   string
	}{
		{name: "the policy allows it: synced once", policy: p, wantSyncs: 1, wantLast: incident.ResultSucceeded},
		{name: "the kill switch is on now: no sync, the attempt says the app was left terminated", policy: &off, wantLast: incident.ResultFailed,
			wantErr: "not sent: Sync app=argocd/shop, refused right before it was sent: the kill switch is on: syncmedic takes no action (dry-run)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			old := &resumingRemedier{block: make(chan struct{})}
			t.Cleanup(func() { close(old.block) })
			store := cutOff(t, c, p, f, &incident.MemoryStore{}, old, "sync")

			c.Advance(time.Minute)
			next := &resumingRemedier{block: make(chan struct{})}
			stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{f.Remedy.Action: next}, Limiter: NewRateLimiter(c.Now)})
			tr := newTestTracker(t, incident.TrackerOptions{Store: store, Now: c.Now, Remediation: stage, Policy: func() *policy.Policy { return tt.policy }})
			for range 3 {
				tr.Observe(ctx, "s", []syncmedic.Finding{f})
				c.Advance(time.Minute)
			}
			require.Equal(t, []string{"sync"}, next.resumed, "resumed exactly once")
			require.Zero(t, next.real, "the terminate is not repeated")
			require.Equal(t, tt.wantSyncs, next.syncs)
			a := attemptsOf(t, tr)
			if tt.wantErr != "" {
				require.Len(t, a, 3, "then the kill switch's dry-run record of the next evaluation")
				require.Equal(t, incident.ResultDryRun, a[2].Result)
			} else {
				require.Len(t, a, 2)
			}
			require.Equal(t, incident.ResultFailed, a[0].Result, "the cut attempt is closed")
			require.False(t, a[0].Permanent)
			require.Equal(t, []string{"TerminateOperation app=argocd/shop"}, a[0].Steps)
			require.Empty(t, a[0].Pending)
			require.Contains(t, a[0].Error, `interrupted after its checkpoint: argocd/terminate-and-resync started at `)
			require.Contains(t, a[0].Error, `with "sync" still to do; the next leader resumes it`)
			require.Equal(t, tt.wantLast, a[1].Result)
			require.Contains(t, a[1].Reason, `resuming "sync" after the checkpoint of the attempt started at `)
			if tt.wantErr != "" {
				require.Equal(t, tt.wantErr, a[1].Error)
				require.True(t, a[1].Permanent)
				require.False(t, a[1].Changed)
			} else {
				require.Equal(t, []string{"app=argocd/shop: resuming the pending sync", "Sync app=argocd/shop"}, a[1].Steps)
			}
		})
	}
	t.Run("a resumed sync cut off in turn is reported, never resumed twice", func(t *testing.T) {
		c := newClock()
		old := &resumingRemedier{block: make(chan struct{})}
		t.Cleanup(func() { close(old.block) })
		store := cutOff(t, c, p, f, &incident.MemoryStore{}, old, "sync")
		c.Advance(time.Minute)
		second := &resumingRemedier{block: make(chan struct{}), hang: true}
		t.Cleanup(func() { close(second.block) })
		store = cutOff(t, c, p, f, store, second, "")
		require.Equal(t, []string{"sync"}, second.resumed)

		c.Advance(time.Minute)
		third := &resumingRemedier{block: make(chan struct{})}
		stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{f.Remedy.Action: third}, Limiter: NewRateLimiter(c.Now)})
		tr := newTestTracker(t, incident.TrackerOptions{Store: store, Now: c.Now, Remediation: stage, Policy: func() *policy.Policy { return p }})
		for range 3 {
			tr.Observe(ctx, "s", []syncmedic.Finding{f})
			c.Advance(time.Minute)
		}
		require.Empty(t, third.resumed)
		require.Zero(t, third.real)
		a := attemptsOf(t, tr)
		require.Len(t, a, 2)
		require.Equal(t, incident.ResultFailed, a[1].Result)
		require.True(t, a[1].Permanent)
		require.Contains(t, a[1].Error, "may have run — check: argocd/terminate-and-resync on application shop")
	})
}
