package flux_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// flux22CRDs is the directory (in bin/) of helm-controller v0.37.2's own CRDs: HelmRelease v2beta2 (storage) and
// v2beta1, no v2 — what a Flux 2.2 cluster serves.
const flux22CRDs = "crds-helm-controller-v0.37.2"

// On an apiserver without Flux the watcher says so; once Flux 2.2's CRDs are installed it watches HelmReleases
// through v2beta2, reports each rule on releases written through v2beta2 and v2beta1, re-evaluates a release when an
// event triggers it (reading it through v2beta2), and applies the reconcile remedy through v2beta2.
func TestWatcherReadsHelmReleasesOnAClusterServingOnlyV2beta2(t *testing.T) {
	env := testenv.KubePrivate(t)
	t.Parallel()
	_, err := flux.NewWatcher(flux.WatcherOptions{Config: env.Config})
	require.ErrorIs(t, err, flux.ErrNoHelmReleaseAPI, "a cluster without Flux is not a cluster where nothing is stuck")

	bin, err := testenv.BinDir()
	require.NoError(t, err)
	_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(bin, flux22CRDs)}, ErrorIfPathMissing: true})
	require.NoError(t, err, "run `make tools` (hack/flux-tools.sh) for %s", flux22CRDs)
	ns := env.Namespace(t)
	long := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	created := func(version, name string, spec, status map[string]any) {
		t.Helper()
		hrs := env.Dynamic.Resource(testenv.HelmReleaseGVR(version)).Namespace(ns)
		spec["interval"] = "5m"
		spec["chart"] = map[string]any{"spec": map[string]any{"chart": name, "sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}}
		obj, err := hrs.Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "helm.toolkit.fluxcd.io/" + version, "kind": "HelmRelease",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}, metav1.CreateOptions{})
		require.NoError(t, err)
		status["observedGeneration"] = int64(1)
		// hand-written state: each release's status as helm-controller v0.37 (v2beta2) or v0.36 (v2beta1) wrote it,
		// on a private apiserver serving only Flux 2.2's CRDs, with no helm-controller: the test is about reading
		// through v2beta2. The real v0.37.2 runs against v2beta2 in internal/conformance/flux
		// TestFlux22ServeWatchesV2beta2AndAnnouncesWhatIsStuck; v0.36 does not download.
		obj.Object["status"] = status
		_, err = hrs.UpdateStatus(context.Background(), obj, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": long}
	}
	// What helm-controller v0.37 writes: a Ready dependency, a dependent it has not re-checked, a release whose
	// retries ran out; and what v0.36 left behind in v2beta1, before a spec change it never observed.
	created("v2beta2", "db", map[string]any{}, map[string]any{"conditions": []any{
		cond(meta.ReadyCondition, "True", "UpgradeSucceeded", fmt.Sprintf("Helm upgrade succeeded for release %s/db.v3 with chart db@1.0.0", ns))}})
	created("v2beta2", "app", map[string]any{"dependsOn": []any{map[string]any{"name": "db"}}}, map[string]any{"conditions": []any{
		cond(meta.ReadyCondition, "False", meta.DependencyNotReadyReason, fmt.Sprintf("dependency '%s/db' is not ready", ns))}})
	created("v2beta2", "cache", map[string]any{}, map[string]any{"installFailures": int64(3), "conditions": []any{
		cond(meta.StalledCondition, "True", flux.RetriesExceededReason, "Failed to install after 3 attempt(s)"),
		cond(meta.ReadyCondition, "False", "InstallFailed", "Helm install failed")}})
	created("v2beta1", "legacy", map[string]any{}, map[string]any{"lastAppliedRevision": "6.5.0", "lastAttemptedRevision": "6.5.0",
		"lastReleaseRevision": int64(4), "conditions": []any{cond(meta.ReadyCondition, "True", meta.ReconciliationSucceededReason, "Release reconciliation succeeded")}})
	legacy := env.Dynamic.Resource(testenv.HelmReleaseGVR("v2beta1")).Namespace(ns)
	_, err = legacy.Patch(context.Background(), "legacy", "application/merge-patch+json", []byte(`{"spec":{"values":{"replicaCount":2}}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	w, err := flux.NewWatcher(flux.WatcherOptions{Config: env.Config, Namespaces: []string{ns}})
	require.NoError(t, err)
	require.Equal(t, "v2beta2", w.APIVersion())
	sink := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, sink) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool { return w.Ready() == nil }, 30*time.Second, 20*time.Millisecond)

	tests := []struct {
		name, release string
		want          []syncmedic.RuleID
	}{
		{name: "a dependent told its Ready dependency is not ready is reported", release: "app", want: []syncmedic.RuleID{syncmedic.RuleDependencyNotReadyFalse}},
		{name: "the Ready dependency is healthy", release: "db"},
		{name: "a release whose retries ran out is reported", release: "cache", want: []syncmedic.RuleID{syncmedic.RuleRetriesExhausted}},
		{name: "a status an old controller wrote through v2beta1 is stale", release: "legacy", want: []syncmedic.RuleID{syncmedic.RuleHelmReleaseStaleStatus}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Eventually(t, func() bool {
				got, ok := sink.rules(flux.ReleaseSubject(ns, tt.release))
				return ok && equalRules(got, tt.want)
			}, 20*time.Second, 20*time.Millisecond)
		})
	}

	t.Run("an event's trigger re-evaluates the release through v2beta2", func(t *testing.T) {
		subject := flux.ReleaseSubject(ns, "app")
		before := sink.evaluations(subject)
		w.Trigger(subject)
		require.Eventually(t, func() bool { return sink.evaluations(subject) > before }, 20*time.Second, 20*time.Millisecond)
		got, _ := sink.rules(subject)
		require.Equal(t, []syncmedic.RuleID{syncmedic.RuleDependencyNotReadyFalse}, got)
	})

	t.Run("the reconcile remedy is written through v2beta2", func(t *testing.T) {
		f, ok := sink.finding(flux.ReleaseSubject(ns, "app"), syncmedic.RuleDependencyNotReadyFalse)
		require.True(t, ok)
		out, err := w.Remediers()[f.Remedy.Action].Remediate(context.Background(), f, false)
		require.NoError(t, err)
		require.True(t, out.Changed, "%v", out.Steps)
		app, err := env.Dynamic.Resource(testenv.HelmReleaseGVR("v2beta2")).Namespace(ns).Get(context.Background(), "app", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, app.GetAnnotations()[meta.ReconcileRequestAnnotation])
	})
}
