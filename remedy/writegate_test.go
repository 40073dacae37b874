package remedy

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

// readingRemedier reads before it writes, as the Argo CD remedies do (Get, sync windows, CanI, settings): duringRead
// runs in that read, after the stage's own policy check; then it asks the gate and makes its one write.
type readingRemedier struct {
	mu         sync.Mutex
	duringRead func()
	writes     int
}

func (r *readingRemedier) Remediate(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: f.Remedy.Action, DryRun: dryRun, Steps: []string{"Get app=shop"}}
	if dryRun {
		return out, nil
	}
	if r.duringRead != nil {
		r.duringRead()
	}
	if err := syncmedic.BeforeWrite(ctx, "PatchResource Job shop/migrate"); err != nil {
		return out, err
	}
	r.mu.Lock()
	r.writes++
	r.mu.Unlock()
	out.Changed, out.Steps = true, append(out.Steps, "PatchResource Job shop/migrate")
	return out, nil
}

// TestThePolicyIsReadAgainImmediatelyBeforeEachWrite: the kill switch (or a rule set to notify) that takes effect
// while the remedier reads, after the stage's check, stops the write itself: nothing is written, the attempt is a
// dry-run record saying which write was refused and why, and it counts against no rate limit. With the policy
// unchanged the remedy writes exactly once.
func TestThePolicyIsReadAgainImmediatelyBeforeEachWrite(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		onDemand bool
		change   func(p *policy.Policy)
		want     string
	}{
		{name: "automatic: the kill switch", change: func(p *policy.Policy) { p.KillSwitch = true },
			want: "the kill switch is on: syncmedic takes no action (dry-run)"},
		{name: "automatic: the rule set to notify", change: func(p *policy.Policy) {
			p.Rules[syncmedic.RuleHookFinalizerStuck] = policy.RulePolicy{Mode: policy.ModeNotify}
		}, want: "policy: argocd/hook-finalizer-stuck is notify only (dry-run); set it to auto to let syncmedic apply the fix"},
		{name: "automatic: the namespace taken out of scope", change: func(p *policy.Policy) {
			rp := p.Rules[syncmedic.RuleHookFinalizerStuck]
			rp.Namespaces = []string{"payments"}
			p.Rules[syncmedic.RuleHookFinalizerStuck] = rp
		}, want: `policy: namespace "shop" is not in the allowed namespaces (payments) for argocd/hook-finalizer-stuck`},
		{name: "on demand: the kill switch after the confirmation", onDemand: true, change: func(p *policy.Policy) { p.KillSwitch = true },
			want: "the kill switch is on: syncmedic takes no action, on demand or not"},
		{name: "near miss, automatic: nothing changes: written once"},
		{name: "near miss, on demand: nothing changes: written once", onDemand: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := autoPolicy
			if tt.onDemand {
				pol = fixByPolicy
			}
			r := newRemediationRig(t, pol)
			rem := &readingRemedier{}
			r.stage.remediers[syncmedic.ActionRemoveHookFinalizer] = rem
			var res FixResult
			if tt.onDemand {
				id := openIncident(t, r, "shop")
				plan, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre})
				require.NoError(t, err)
				if tt.change != nil {
					rem.duringRead = func() { tt.change(r.policy) }
				}
				res, err = r.fixer.Fix(ctx, id, FixRequest{Caller: sre, Confirm: plan.Confirm})
				require.NoError(t, err)
			} else {
				if tt.change != nil {
					rem.duringRead = func() { tt.change(r.policy) }
				}
				r.tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
			}
			last := attemptsOf(t, r.tr)
			a := last[len(last)-1]
			if tt.change == nil {
				require.Equal(t, 1, rem.writes, "written exactly once")
				require.Equal(t, incident.ResultSucceeded, a.Result)
				require.True(t, a.Changed)
				require.Equal(t, []string{"Get app=shop", "PatchResource Job shop/migrate"}, a.Steps)
				return
			}
			require.Zero(t, rem.writes, "no write after the policy changed")
			require.Equal(t, incident.ResultDryRun, a.Result)
			require.False(t, a.Changed)
			require.Empty(t, a.Error)
			require.Equal(t, "not applied, nothing was changed: the policy in force right before its write (PatchResource Job shop/migrate) refuses it: "+tt.want, a.Reason)
			require.Equal(t, []string{"Get app=shop"}, a.Steps)
			require.Contains(t, r.logs.String(), `"msg":"remediation write refused right before it was sent"`)
			if tt.onDemand {
				require.Equal(t, incident.ResultDryRun, res.Result)
			} else {
				require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediating, incident.EventRemediated}, r.evs.kinds())
				require.Equal(t, incident.StateFiring, r.evs.last().Incident.State)
			}
			ok, _, _ := r.stage.limiter.Allow(syncmedic.RemedyKey(hookFinding("shop", "migrate")), *r.policy.For(syncmedic.RuleHookFinalizerStuck).RateLimit)
			require.True(t, ok, "a write that was not sent uses up no rate limit")
		})
	}
}
