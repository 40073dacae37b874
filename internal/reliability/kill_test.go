package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/notify/kubeevents"
)

// syncmedic SIGKILLed twice mid-incident — once after announcing it, once after fixing it while Slack was down —
// loses no incident, announces it in one root message with every step posted once, and applies the remedy once.
func TestSIGKILLMidIncidentLosesNothingAndRepeatsNothing(t *testing.T) {
	env := testenv.Kube(t) // skips under -short, before the build
	bin := buildSyncmedic(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	srv := newFakeSlack(t)
	dir := t.TempDir()
	stateNS := env.Namespace(t)
	store := &incident.ConfigMapStore{Client: env.Clientset, Namespace: stateNS, Name: "syncmedic-state"}
	policy := writeFile(t, dir, "policy.yaml", "resolveAfter: 1\n")
	args := []string{"--kubeconfig", env.Kubeconfig, "--kube-checks=false", "--flux-watch=false",
		"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, dir, "argocd-token", argo.AdminToken(t)),
		"--argocd-live-resync", "500ms", "--hook-finalizer-threshold", "1s",
		"--state-configmap", stateNS + "/syncmedic-state", "--policy-file", policy, "--policy-reload-interval", "100ms",
		"--slack-token-file", writeFile(t, dir, "slack-token", slackToken), "--slack-channel", "#incidents", "--slack-api-url", srv.GetAPIURL()}

	first := startDaemon(t, bin, args...)
	removals := countFinalizerRemovals(t, env)
	// hand-written state: see leakedHook.
	job := leakedHook(t, argo, "shop")
	require.Eventually(t, func() bool {
		roots := srv.roots(job.Name)
		return len(roots) == 1 && len(srv.replies(roots[0].TS)) == 1 && undelivered(t, store) == 0
	}, 30*time.Second, 50*time.Millisecond, "the incident is announced (root and dry-run reply) and recorded as delivered")
	first.kill()

	srv.fail(status(503))
	writeFile(t, dir, "policy.yaml", "resolveAfter: 1\nrules:\n  argocd/hook-finalizer-stuck:\n    mode: auto\n")
	second := startDaemon(t, bin, args...)
	require.Eventually(t, func() bool {
		incs, err := store.Load(context.Background())
		return err == nil && len(incs) == 1 && !incs[0].IsOpen() && undelivered(t, store) > 0
	}, 30*time.Second, 50*time.Millisecond, "the restarted daemon fixes and resolves the stored incident while Slack is down")
	require.Positive(t, srv.refusedCalls())
	second.kill()

	srv.ok()
	startDaemon(t, bin, args...)
	root := srv.roots(job.Name)[0]
	require.Eventually(t, func() bool { return undelivered(t, store) == 0 }, 30*time.Second, 50*time.Millisecond,
		"the steps queued at the kill are delivered after the second restart")

	t.Run("no lost incident: exactly one, resolved, with one real remediation", func(t *testing.T) {
		incs, err := store.Load(context.Background())
		require.NoError(t, err)
		require.Len(t, incs, 1)
		require.Equal(t, incident.StateResolved, incs[0].State)
		var real []incident.Attempt
		for _, a := range incs[0].Attempts {
			if a.Result != incident.ResultDryRun {
				real = append(real, a)
			}
		}
		require.Len(t, real, 1)
		require.Equal(t, incident.ResultSucceeded, real[0].Result)
		require.True(t, real[0].Changed)
		require.Empty(t, incs[0].Outbox, "everything was delivered")
	})
	t.Run("no duplicate remedy: the apiserver saw the finalizer removed once", func(t *testing.T) {
		require.Equal(t, 1, removals.count())
		require.Len(t, eventsWithReason(t, env, job.Namespace, incident.EventReasonRemediation), 1)
	})
	t.Run("no duplicate notification: one root message, each step posted once, in order", func(t *testing.T) {
		require.Len(t, srv.roots(job.Name), 1)
		var got []string
		for _, r := range srv.replies(root.TS) {
			got = append(got, r.Text)
		}
		require.Len(t, got, 5, "%q", got)
		for i, want := range []string{"Dry-run", "The finding changed", "Applying", "succeeded", "Resolved"} {
			require.Contains(t, got[i], want)
		}
		require.Len(t, eventsWithReason(t, env, job.Namespace, kubeevents.ReasonIncidentOpened), 1)
		require.Len(t, eventsWithReason(t, env, job.Namespace, kubeevents.ReasonIncidentResolved), 1)
	})
}

// undelivered counts the transitions in the store that some notifier has not delivered yet.
func undelivered(t *testing.T, store incident.Store) int {
	t.Helper()
	incs, err := store.Load(context.Background())
	require.NoError(t, err)
	n := 0
	for _, inc := range incs {
		n += len(inc.Outbox)
	}
	return n
}
