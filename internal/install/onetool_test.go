package install

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// checkPluginOnly checks, on the real Argo CD, what the plugin alone installs (manifests/argocd-cmp without
// manifests/components/argocd-account, docs/one-tool-installs.md): no syncmedic account and no syncmedic policy line
// in argocd-cm and argocd-rbac-cm, so nothing it brings may sync or update an application.
func checkPluginOnly(t *testing.T, n *testenv.Node) {
	t.Helper()
	ctx := context.Background()
	cm, err := n.Clientset.CoreV1().ConfigMaps(testenv.ArgoCDNamespace).Get(ctx, "argocd-cm", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, cm.Data, "accounts.syncmedic", "the plugin alone adds no Argo CD account")
	rbacCM, err := n.Clientset.CoreV1().ConfigMaps(testenv.ArgoCDNamespace).Get(ctx, "argocd-rbac-cm", metav1.GetOptions{})
	require.NoError(t, err)
	for key, policy := range rbacCM.Data {
		require.NotContains(t, policy, "syncmedic", "argocd-rbac-cm %s: the plugin alone adds no RBAC line", key)
	}
}

// checkOneToolInstallsWithHelm installs the chart twice more on the node the full install left clean, each as
// docs/one-tool-installs.md says: Argo CD only (flux.enabled=false; a Secret holding argocd-token and no
// flux-hmac-token; manifests/flux not applied) and Flux only (no argocd.server; a Secret holding flux-hmac-token
// only). Each time both replicas become Ready on the image `make image` built; the Argo CD-only serve says Flux is off,
// its Argo CD component is ready (it reached argocd-server with the token) and its ServiceAccount may not watch
// HelmReleases; the Flux-only serve accepts the signed events of a HelmRelease through its Service (checkInstalled)
// and runs no Argo CD component. The Helm uninstall leaves nothing each time.
func checkOneToolInstallsWithHelm(t *testing.T, n *testenv.Node, work string) {
	t.Helper()
	t.Run("Argo CD only", func(t *testing.T) {
		audit := n.AuditOffset(t)
		out := runShell(t, n, work, `kubectl create namespace syncmedic
kubectl -n syncmedic create secret generic syncmedic-secrets --from-file=argocd-token=./argocd-token
kubectl -n syncmedic create secret generic syncmedic-argocd-ca --from-file=ca.crt=argocd-ca.crt
helm install syncmedic charts/syncmedic -n syncmedic --set flux.enabled=false \
  --set argocd.server=argocd-server.argocd.svc:443 --set argocd.tls.mode=ca`)
		t.Logf("install:\n%s", out)
		pods := waitSyncmedicReady(t, n)
		for _, p := range pods {
			require.Contains(t, p.Spec.Containers[0].Args, "--flux=false")
			logs := podLogs(t, n, p)
			require.Contains(t, logs, "flux: off (--flux=false)")
			poll(t, "the Argo CD component of "+p.Name+" ready", func() (bool, error) {
				m, err := podMetrics(context.Background(), n, p)
				if err != nil {
					return false, err
				}
				_, fluxRuns := m[`syncmedic_component_ready{component="flux"}`]
				require.False(t, fluxRuns, "no Flux component")
				return m[`syncmedic_component_ready{component="argocd"}`] == 1, fmt.Errorf("argocd ready %d", m[`syncmedic_component_ready{component="argocd"}`])
			})
		}
		require.False(t, serviceAccountMay(t, n, "watch", "helm.toolkit.fluxcd.io", "helmreleases"), "no Flux permission")
		require.True(t, serviceAccountMay(t, n, "watch", "batch", "jobs"), "the cluster checks keep theirs")
		rbac, auditEnd := helmRBAC(t, n, work), n.AuditOffset(t)
		t.Logf("uninstall:\n%s", runShell(t, n, work, "helm uninstall syncmedic -n syncmedic\nkubectl delete namespace syncmedic"))
		checkNothingLeft(t, n)
		grantsUsed(t, n, audit, auditEnd, rbac, false)
	})
	t.Run("Flux only", func(t *testing.T) {
		var token string
		for _, line := range strings.Split(readmeBlock(t, readmeServeSection, 1), "\n") {
			if strings.HasPrefix(line, "TOKEN=") {
				token = line
			}
		}
		require.NotEmpty(t, token, "the serve block's TOKEN line")
		audit := n.AuditOffset(t)
		out := runShell(t, n, work, token+`
kubectl create namespace syncmedic
kubectl -n syncmedic create secret generic syncmedic-secrets --from-literal=flux-hmac-token="$TOKEN"
helm install syncmedic charts/syncmedic -n syncmedic
`+readmeBlock(t, readmeFluxSection, 1))
		t.Logf("install:\n%s", out)
		checkInstalled(t, n, "syncmedic-flux-only")
		for _, p := range waitSyncmedicReady(t, n) {
			m, err := podMetrics(context.Background(), n, p)
			require.NoError(t, err)
			_, argoRuns := m[`syncmedic_component_ready{component="argocd"}`]
			require.False(t, argoRuns, "no Argo CD component without argocd.server")
			for _, a := range p.Spec.Containers[0].Args {
				require.False(t, strings.HasPrefix(a, "--argocd-server"), a)
			}
		}
		rbac, auditEnd := helmRBAC(t, n, work), n.AuditOffset(t)
		t.Logf("uninstall:\n%s", runShell(t, n, work, readmeBlock(t, readmeUninstallSection, 2)))
		checkNothingLeft(t, n)
		grantsUsed(t, n, audit, auditEnd, rbac, false)
	})
}

// waitSyncmedicReady waits until the syncmedic Deployment has its two replicas Ready on the image `make image` built,
// and returns its Pods.
func waitSyncmedicReady(t *testing.T, n *testenv.Node) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var pods []corev1.Pod
	poll(t, "the syncmedic Deployment available, its two Pods the only ones", func() (bool, error) {
		var d appsv1.Deployment
		if err := n.Client.Get(ctx, client.ObjectKey{Namespace: "syncmedic", Name: "syncmedic"}, &d); err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != 2 || d.Status.ReadyReplicas != 2 ||
			d.Status.AvailableReplicas != 2 || d.Status.Replicas != 2 {
			return false, fmt.Errorf("%+v", d.Status)
		}
		// A rollout's old Pods go after the new ones are ready: wait until they are gone.
		list, err := n.Clientset.CoreV1().Pods("syncmedic").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
		if err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) == 2, fmt.Errorf("%d Pods", len(pods))
	})
	for _, p := range pods {
		require.Equal(t, makefileImage(t), p.Spec.Containers[0].Image)
	}
	return pods
}

// podLogs returns the syncmedic container's log of p.
func podLogs(t *testing.T, n *testenv.Node, p corev1.Pod) string {
	t.Helper()
	b, err := n.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "syncmedic"}).DoRaw(context.Background())
	require.NoError(t, err)
	return string(b)
}

// serviceAccountMay asks the apiserver whether syncmedic's ServiceAccount may verb group/resource cluster-wide.
func serviceAccountMay(t *testing.T, n *testenv.Node, verb, group, resource string) bool {
	t.Helper()
	sar, err := n.Clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:syncmedic:syncmedic",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:syncmedic", "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return sar.Status.Allowed
}
