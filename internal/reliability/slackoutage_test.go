package reliability

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Through the whole daemon (watcher → tracker → dispatcher → Slack), Slack answering 500 and 429 with Retry-After
// for a while delays the notifications of two incidents but loses none: each incident has one root message and
// its steps in order, and the outage's calls were all retried.
func TestSlackErrorsAndRateLimitsThroughTheDaemonDelayButLoseNothing(t *testing.T) {
	env := testenv.Kube(t) // skips under -short, before the build
	bin := buildSyncmedic(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	srv := newFakeSlack(t)
	outage := []func(w http.ResponseWriter){status(500), rateLimited("1"), status(502), rateLimited("1"), status(500)}
	srv.failNext(outage...)
	dir := t.TempDir()
	startDaemon(t, bin, "--kubeconfig", env.Kubeconfig, "--kube-checks=false", "--flux-watch=false", "--kube-events=false",
		"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, dir, "argocd-token", argo.AdminToken(t)),
		"--argocd-live-resync", "500ms", "--hook-finalizer-threshold", "1s", "--policy-file", writeFile(t, dir, "policy.yaml", "resolveAfter: 1\n"),
		"--slack-token-file", writeFile(t, dir, "slack-token", slackToken), "--slack-channel", "#incidents", "--slack-api-url", srv.GetAPIURL())

	var jobs []*batchv1.Job
	for i := range 2 {
		// hand-written state: see leakedHook.
		jobs = append(jobs, leakedHook(t, argo, fmt.Sprintf("shop-%d", i)))
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, j := range jobs {
			roots := srv.roots(j.Namespace)
			if len(roots) != 1 || len(srv.replies(roots[0].TS)) != 1 {
				return false, fmt.Sprintf("%s: %d roots", j.Namespace, len(roots))
			}
		}
		return true, ""
	})
	for _, j := range jobs { // someone removes the finalizer by hand: the incidents resolve
		patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))
		require.NoError(t, env.Client.Patch(context.Background(), j, patch))
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, j := range jobs {
			if n := len(srv.replies(srv.roots(j.Namespace)[0].TS)); n != 2 {
				return false, fmt.Sprintf("%s: %d replies", j.Namespace, n)
			}
		}
		return true, ""
	})

	require.Equal(t, len(outage), srv.refusedCalls(), "every failed call was retried until Slack accepted it")
	for i, j := range jobs {
		t.Run(fmt.Sprintf("one root message and every step in order for shop-%d", i), func(t *testing.T) {
			roots := srv.roots(j.Namespace)
			require.Len(t, roots, 1)
			replies := srv.replies(roots[0].TS)
			require.Len(t, replies, 2)
			require.Contains(t, replies[0].Text, "Dry-run")
			require.Contains(t, replies[1].Text, "Resolved")
		})
	}
}
