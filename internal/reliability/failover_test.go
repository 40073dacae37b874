package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// The leader SIGKILLed while Slack is down, with an incident's announcement still queued: the other replica takes
// the Lease over and delivers the announcement from the store, once — one root message, one dry-run reply.
func TestLeaderKilledWithNotificationsQueuedTheNewLeaderDeliversThemOnce(t *testing.T) {
	env := testenv.Kube(t) // skips under -short, before the build
	bin := buildSyncmedic(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	srv := newFakeSlack(t)
	srv.fail(status(503))
	dir := t.TempDir()
	ns := env.Namespace(t)
	store := &incident.ConfigMapStore{Client: env.Clientset, Namespace: ns, Name: "syncmedic-state"}
	args := func(identity string) []string {
		return []string{"--kubeconfig", env.Kubeconfig, "--kube-checks=false", "--flux-watch=false", "--kube-events=false",
			"--leader-elect", "--leader-election-namespace", ns, "--identity", identity,
			"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, dir, "argocd-token", argo.AdminToken(t)),
			"--argocd-live-resync", "500ms", "--hook-finalizer-threshold", "1s", "--state-configmap", ns + "/syncmedic-state",
			"--slack-token-file", writeFile(t, dir, "slack-token", slackToken), "--slack-channel", "#incidents", "--slack-api-url", srv.GetAPIURL()}
	}
	holder := func() string {
		l, err := env.Clientset.CoordinationV1().Leases(ns).Get(context.Background(), "syncmedic", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	first := startDaemon(t, bin, args("replica-a")...)
	require.Eventually(t, func() bool { return holder() == "replica-a" }, 30*time.Second, 50*time.Millisecond)
	startDaemon(t, bin, args("replica-b")...)
	// hand-written state: see leakedHook.
	job := leakedHook(t, argo, "shop")
	require.Eventually(t, func() bool { return undelivered(t, store) == 2 && srv.refusedCalls() > 0 }, 30*time.Second, 50*time.Millisecond,
		"the leader recorded the opening and the dry-run but could not deliver them")
	first.kill()
	srv.ok()

	require.Eventually(t, func() bool { return holder() == "replica-b" }, 60*time.Second, 100*time.Millisecond,
		"the other replica takes the Lease over once it expires")
	eventually(t, 30*time.Second, func() (bool, string) {
		return undelivered(t, store) == 0, "the new leader delivers what the old one left"
	})
	roots := srv.roots(job.Name)
	require.Len(t, roots, 1, "one root message")
	replies := srv.replies(roots[0].TS)
	require.Len(t, replies, 1, "one dry-run reply")
	require.Contains(t, replies[0].Text, "Dry-run")
}
