package remedy

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

const fixByPolicy = `
defaults:
  rateLimit: {max: 1, window: 1h, backoff: 1m, maxBackoff: 10m}
rules:
  argocd/hook-finalizer-stuck:
    mode: notify
    namespaces: [shop]
    fixBy: ["group:sre-*", "user:alice", "token"]
`

var (
	sre   = policy.Caller{User: "bob", Groups: []string{"dev", "sre-oncall"}, Via: "argocd-extension"}
	dev   = policy.Caller{User: "carol", Groups: []string{"dev"}, Via: "argocd-extension"}
	token = policy.Caller{Via: "api-token"}
)

// openIncident observes one hook finding and returns its incident's ID.
func openIncident(t *testing.T, r *remediationRig, ns string) string {
	t.Helper()
	r.tr.Observe(context.Background(), "s", []syncmedic.Finding{hookFinding(ns, "migrate")})
	incs := r.tr.Incidents()
	require.Len(t, incs, 1)
	return incs[0].ID
}

func TestAFixOnDemandIsPlannedThenConfirmed(t *testing.T) {
	ctx := context.Background()
	r := newRemediationRig(t, fixByPolicy)
	id := openIncident(t, r, "shop")
	_, dryBefore := r.rem.calls()

	plan, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre})
	require.NoError(t, err)
	require.True(t, plan.DryRun)
	require.Equal(t, "group:sre-*", plan.AllowedBy)
	require.Equal(t, []string{"PatchResource (dry-run)"}, plan.Steps)
	require.NotEmpty(t, plan.Confirm)
	real, dry := r.rem.calls()
	require.Zero(t, real, "a plan changes nothing")
	require.Equal(t, dryBefore+1, dry)
	require.Len(t, r.tr.Incidents()[0].Attempts, 1, "a plan is not an attempt (only the policy's dry-run record is)")

	done, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre, Confirm: plan.Confirm})
	require.NoError(t, err)
	require.False(t, done.DryRun)
	require.Equal(t, incident.ResultSucceeded, done.Result)
	require.True(t, done.Changed)
	real, _ = r.rem.calls()
	require.Equal(t, 1, real)

	inc := r.tr.Incidents()[0]
	last := inc.LastAttempt()
	require.Equal(t, "argocd user bob (groups dev, sre-oncall) via argocd-extension", last.RequestedBy)
	require.Contains(t, last.Reason, `requested by argocd user bob`)
	require.Equal(t, incident.StateRemediating, inc.State)
	require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventRemediated, incident.EventRemediating, incident.EventRemediated}, r.evs.kinds())
	require.Contains(t, r.logs.String(), `"msg":"remediation","who":"syncmedic-0","requestedBy":"argocd user bob (groups dev, sre-oncall) via argocd-extension"`)
}

func TestAFixOnDemandIsRefusedWhereThePolicyDoesNotAllowIt(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		policy string
		ns     string
		caller policy.Caller
		kill   bool
		// then, when set, replaces the policy after the incident opened (an off rule opens none).
		then string
		code FixErrorCode
		msg  string
	}{
		{name: "a user outside fixBy is forbidden", policy: fixByPolicy, ns: "shop", caller: dev, code: FixForbidden, msg: "not in fixBy"},
		{name: "nobody may fix without fixBy", policy: "", ns: "shop", caller: sre, code: FixForbidden, msg: "nobody may fix"},
		{name: "an object outside the rule's namespaces is forbidden", policy: fixByPolicy, ns: "kube-system", caller: sre, code: FixForbidden, msg: "kube-system"},
		{name: "the kill switch refuses every fix", policy: fixByPolicy, ns: "shop", caller: sre, kill: true, code: FixForbidden, msg: "kill switch"},
		{name: "a rule that is off is forbidden", policy: fixByPolicy, then: `rules: {argocd/hook-finalizer-stuck: {mode: off, fixBy: ["*"]}}`, ns: "shop", caller: sre, code: FixForbidden, msg: "is off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRemediationRig(t, tt.policy)
			id := openIncident(t, r, tt.ns)
			if tt.then != "" {
				r.policy = mustPolicy(t, tt.then)
			}
			r.policy.KillSwitch = tt.kill
			requireRefused(t, r, id, tt.caller, tt.code, tt.msg)
		})
	}
	t.Run("a direct API caller is allowed by the token entry", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		id := openIncident(t, r, "shop")
		plan, err := r.fixer.Fix(ctx, id, FixRequest{Caller: token})
		require.NoError(t, err)
		require.Equal(t, "token", plan.AllowedBy)
	})
	t.Run("a follower sends the caller to the leader", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		id := openIncident(t, r, "shop")
		r.leader = false
		requireRefused(t, r, id, sre, FixUnavailable, "not the leader")
	})
	t.Run("a finding with no action syncmedic can apply says nothing will be applied, and why", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		f := hookFinding("shop", "migrate")
		f.Remedy.Action, f.Remedy.Description = syncmedic.ActionNone, "The patch has no effect here: the controller ignores it."
		r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
		id := r.tr.Incidents()[0].ID
		requireRefused(t, r, id, sre, FixForbidden, "nothing will be applied: this "+string(f.Rule)+" finding has no action syncmedic can apply (The patch has no effect here: the controller ignores it)")
	})
	t.Run("a remedy whose dry run refuses the object is a conflict that says nothing will be applied, without a retry", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		id := openIncident(t, r, "shop")
		r.rem.refusing = syncmedic.Permanent(errors.New("refusing to patch Workflow ci/build: forceFinalizerRemoval has no effect here"))
		_, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre})
		fe, ok := IsFixError(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, FixConflict, fe.Code)
		require.Zero(t, fe.RetryAfter, "retrying cannot help")
		require.Equal(t, "nothing will be applied: the remedy refuses this object as it is now: refusing to patch Workflow ci/build: forceFinalizerRemoval has no effect here", fe.Msg)
		real, _ := r.rem.calls()
		require.Zero(t, real, "nothing is applied")
	})
	t.Run("an unknown incident is not found", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		requireRefused(t, r, "nope", sre, FixNotFound, "no incident nope")
	})
}

func TestAConfirmedFixIsAppliedOnlyAsReviewed(t *testing.T) {
	ctx := context.Background()
	t.Run("a plan that changed since it was reviewed is a conflict carrying the new plan", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		id := openIncident(t, r, "shop")
		plan, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre})
		require.NoError(t, err)
		f := hookFinding("shop", "migrate")
		f.Summary = "the hook moved on"
		r.tr.Observe(ctx, "s", []syncmedic.Finding{f})
		res, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre, Confirm: plan.Confirm})
		fe, ok := IsFixError(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, FixConflict, fe.Code)
		require.NotEqual(t, plan.Confirm, res.Confirm, "the answer carries the new plan to review")
		real, _ := r.rem.calls()
		require.Zero(t, real)
	})
	t.Run("the object's rate limit applies to people too", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		id := openIncident(t, r, "shop")
		plan, err := r.fixer.Fix(ctx, id, FixRequest{Caller: sre})
		require.NoError(t, err)
		_, err = r.fixer.Fix(ctx, id, FixRequest{Caller: sre, Confirm: plan.Confirm})
		require.NoError(t, err)
		plan, err = r.fixer.Fix(ctx, id, FixRequest{Caller: sre})
		require.NoError(t, err)
		_, err = r.fixer.Fix(ctx, id, FixRequest{Caller: sre, Confirm: plan.Confirm})
		fe, ok := IsFixError(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, FixRateLimited, fe.Code)
		require.Positive(t, fe.RetryAfter)
	})
	t.Run("a remedy already running on the object is a conflict", func(t *testing.T) {
		r := newRemediationRig(t, fixByPolicy)
		id := openIncident(t, r, "shop")
		inc := r.tr.Incidents()[0]
		keys := remedyKeys(id, inc.Finding.Object)
		require.True(t, r.stage.claim(keys...))
		defer r.stage.release(keys...)
		requireRefused(t, r, id, sre, FixConflict, "running now")
	})
	t.Run("a remedy that re-runs hooks says so before it is confirmed", func(t *testing.T) {
		f := hookFinding("shop", "migrate")
		f.Remedy.RerunsHooks, f.Remedy.AutoSafe = true, false
		w := fixWarnings(f)
		require.Len(t, w, 2)
		require.Contains(t, w[0], "every hook of the application runs again")
		require.Contains(t, w[1], "never applies this remedy unattended")
	})
}

func mustPolicy(t *testing.T, y string) *policy.Policy {
	t.Helper()
	p, err := policy.LoadPolicy([]byte(y))
	require.NoError(t, err)
	return p
}

func requireRefused(t *testing.T, r *remediationRig, id string, c policy.Caller, code FixErrorCode, msg string) {
	t.Helper()
	_, err := r.fixer.Fix(context.Background(), id, FixRequest{Caller: c})
	fe, ok := IsFixError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, code, fe.Code)
	require.Contains(t, fe.Msg, msg)
	real, _ := r.rem.calls()
	require.Zero(t, real, "nothing is applied")
}

func TestChangesSignalsEveryChangeOfTheIncidents(t *testing.T) {
	r := newRemediationRig(t, fixByPolicy)
	ch := r.tr.Changes()
	r.tr.Observe(context.Background(), "healthy", nil)
	select {
	case <-ch:
		t.Fatal("an evaluation that changed nothing is not a change")
	default:
	}
	id := openIncident(t, r, "shop")
	select {
	case <-ch:
	default:
		t.Fatal("an opened incident is a change")
	}
	ch = r.tr.Changes()
	plan, err := r.fixer.Fix(context.Background(), id, FixRequest{Caller: sre})
	require.NoError(t, err)
	_, err = r.fixer.Fix(context.Background(), id, FixRequest{Caller: sre, Confirm: plan.Confirm})
	require.NoError(t, err)
	select {
	case <-ch:
	default:
		t.Fatal("a remediation attempt is a change")
	}
}
