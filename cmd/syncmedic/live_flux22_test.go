package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// helmReleasesUnread is the problem `scan --kubeconfig` names when the cluster serves no HelmRelease API.
var helmReleasesUnread = "helmreleases.helm.toolkit.fluxcd.io: not served by this cluster, skipped: " + flux.ErrNoHelmReleaseAPI.Error()

// On a cluster without Flux, `scan --kubeconfig` says it read no HelmRelease rather than giving an all-clear that
// seems to cover them, and `fix` never calls a stored HelmRelease incident fixed there. Once Flux 2.2's CRDs are
// installed (helm-controller v0.37.2's own: HelmRelease v2beta2, stored, and v2beta1, no v2), the scan reads the
// HelmReleases through v2beta2 and reports the ones an old controller left with a stale status, and `fix` writes the
// reconcile request through v2beta2.
func TestScanAndFixReadAndWriteHelmReleasesThroughV2beta2OnFlux22(t *testing.T) {
	env := testenv.KubePrivate(t)
	ns := env.Namespace(t)

	t.Run("without Flux the scan says HelmReleases were not read", func(t *testing.T) {
		for _, output := range []string{"table", "json"} {
			t.Run("in "+output, func(t *testing.T) {
				code, out, errOut := runCLI(t, "scan", "--kubeconfig", env.Kubeconfig, "-o", output)
				require.Equal(t, exitOK, code, errOut)
				require.Contains(t, out, helmReleasesUnread)
				require.NotRegexp(t, `[0-9]+ HelmRelease`, out, "no HelmRelease is counted as read")
			})
		}
	})
	t.Run("without Flux a stored HelmRelease incident is never called fixed", func(t *testing.T) {
		f := syncmedic.NewFinding(syncmedic.RuleHelmReleaseStaleStatus, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux,
			Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease", Namespace: ns, Name: "redis"}, "stale status")
		stateFile := filepath.Join(t.TempDir(), "state.json")
		opened := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
		id := fmt.Sprintf("%s-%d", f.Fingerprint, opened.Unix())
		require.NoError(t, (&incident.FileStore{Path: stateFile}).Save(context.Background(), []incident.Incident{{
			ID: id, Fingerprint: f.Fingerprint, Subject: flux.ReleaseSubject(ns, "redis"), State: incident.StateFiring,
			Finding: f, OpenedAt: opened, UpdatedAt: opened}}))
		code, out, errOut := runCLI(t, "fix", id, "--kubeconfig", env.Kubeconfig, "--state-file", stateFile, "--yes", "--offline")
		require.Equal(t, exitUsage, code, out+errOut)
		require.Contains(t, errOut, "the scan cannot confirm it is gone: the cluster did not serve helmreleases.helm.toolkit.fluxcd.io")
		require.NotContains(t, out, "Already fixed")
	})

	require.NoError(t, fluxreal.InstallCRDs(env, fluxreal.HelmControllerV037.CRDDir()))
	for _, hr := range []struct{ version, name string }{{"v2beta2", "redis"}, {"v2beta1", "legacy"}} {
		created := createFlux22Release(t, env, ns, hr.version, hr.name)
		// hand-written state: no helm-controller runs in these cmd tests, and this status (old Ready message, no
		// history) is what helm-controller v0.36 or older wrote before the upgrade to Flux 2.2; v0.37 never writes it.
		updated := writeFlux22Status(t, env, created, map[string]any{"observedGeneration": created.GetGeneration(), "lastAttemptedRevision": "6.5.0",
			"lastReleaseRevision": int64(4), "conditions": []any{flux22Condition(meta.ReadyCondition, "True", meta.ReconciliationSucceededReason, "Release reconciliation succeeded")}})
		require.NoError(t, unstructured.SetNestedField(updated.Object, map[string]any{"replicaCount": int64(2)}, "spec", "values"))
		_, err := env.Dynamic.Resource(testenv.HelmReleaseGVR(hr.version)).Namespace(ns).Update(context.Background(), updated, metav1.UpdateOptions{})
		require.NoError(t, err, "a spec change the old controller never observed")
	}
	web := createFlux22Release(t, env, ns, "v2beta2", "web")
	deployed := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	// hand-written state: no helm-controller runs in these cmd tests (and there is no chart source for one to install
	// from); this is the status helm-controller v0.37 writes after a successful install, as internal/conformance/flux
	// records it from the real controller.
	writeFlux22Status(t, env, web, map[string]any{"observedGeneration": web.GetGeneration(), "lastAttemptedRevision": "1.0.0", "conditions": []any{
		flux22Condition(meta.ReadyCondition, "True", "InstallSucceeded", fmt.Sprintf("Helm install succeeded for release %s/web.v1 with chart web@1.0.0", ns))},
		"history": []any{map[string]any{"name": "web", "namespace": ns, "version": int64(1), "status": "deployed", "chartName": "web", "chartVersion": "1.0.0",
			"digest": "sha256:7f2b1c0bd6b5ea0e6a3f9d8a16e7f1c2b3a4d5e6f708192a3b4c5d6e7f809112", "configDigest": "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			"firstDeployed": deployed, "lastDeployed": deployed}}})

	var r syncmedic.Report
	code, out, errOut := runCLI(t, "scan", "--kubeconfig", env.Kubeconfig, "-o", "json")
	require.Equal(t, exitStuck, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	require.NotContains(t, r.Problems, helmReleasesUnread, "Flux 2.2 serves v2beta2")
	require.Contains(t, r.Read[0], "3 HelmRelease", "all three releases are read through v2beta2")
	found := map[string][]syncmedic.RuleID{}
	for _, f := range r.Findings {
		if f.Object.Kind == "HelmRelease" && f.Object.Namespace == ns {
			found[f.Object.Name] = append(found[f.Object.Name], f.Rule)
		}
	}
	for _, tt := range []struct {
		name, release string
		want          []syncmedic.RuleID
	}{
		{name: "a HelmRelease whose pre-v2beta2 status was written through v2beta2 is reported as stale", release: "redis", want: []syncmedic.RuleID{syncmedic.RuleHelmReleaseStaleStatus}},
		{name: "a HelmRelease whose pre-v2beta2 status was written through v2beta1 is reported as stale", release: "legacy", want: []syncmedic.RuleID{syncmedic.RuleHelmReleaseStaleStatus}},
		{name: "a HelmRelease a v0.37 controller installed is not reported", release: "web"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, found[tt.release], "findings: %v", found)
		})
	}

	var fp string
	for _, f := range r.Findings {
		if f.Rule == syncmedic.RuleHelmReleaseStaleStatus && f.Object.Namespace == ns && f.Object.Name == "redis" {
			fp = f.Fingerprint
			require.Equal(t, syncmedic.ActionFluxReconcile, f.Remedy.Action)
		}
	}
	require.NotEmpty(t, fp, "no stale-status finding on redis")
	redis := func() *unstructured.Unstructured {
		got, err := env.Dynamic.Resource(testenv.HelmReleaseGVR("v2beta2")).Namespace(ns).Get(context.Background(), "redis", metav1.GetOptions{})
		require.NoError(t, err)
		return got
	}
	before := redis()
	for _, tt := range []struct {
		name      string
		flags     []string
		wantOut   string
		requested bool
	}{
		{name: "fix without --yes plans the reconcile request and changes nothing", wantOut: "Dry run: nothing was changed."},
		{name: "fix --yes writes the reconcile request through v2beta2", flags: []string{"--yes", "--offline"}, wantOut: "Applied " + string(syncmedic.ActionFluxReconcile), requested: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"fix", fp, "--kubeconfig", env.Kubeconfig}, tt.flags...)...)
			require.Equal(t, exitOK, code, out+errOut)
			require.Contains(t, out, tt.wantOut)
			after := redis()
			if !tt.requested {
				require.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "nothing changed")
				return
			}
			requested := after.GetAnnotations()[meta.ReconcileRequestAnnotation]
			require.NotEmpty(t, requested, "the request `flux reconcile hr` writes")
			_, err := time.Parse(time.RFC3339Nano, requested)
			require.NoError(t, err)
			require.NotContains(t, after.GetAnnotations(), "reconcile.fluxcd.io/forceAt", "no escalation before the request was handled")
		})
	}
}

// createFlux22Release creates HelmRelease name through apiVersion version and returns it as the apiserver stored it.
func createFlux22Release(t *testing.T, env *testenv.Env, ns, version, name string) *unstructured.Unstructured {
	t.Helper()
	created, err := env.Dynamic.Resource(testenv.HelmReleaseGVR(version)).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/" + version, "kind": "HelmRelease",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"interval": "5m", "chart": map[string]any{"spec": map[string]any{
			"chart": name, "sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err, "creating HelmRelease %s through %s", name, version)
	return created
}

// writeFlux22Status writes status on obj through the status subresource of obj's apiVersion; each caller says why no
// controller can write that status in these tests.
func writeFlux22Status(t *testing.T, env *testenv.Env, obj *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	obj.Object["status"] = status
	// hand-written state: no helm-controller runs in these cmd tests; the callers say which controller wrote status.
	updated, err := env.Dynamic.Resource(testenv.HelmReleaseGVR(obj.GroupVersionKind().Version)).Namespace(obj.GetNamespace()).
		UpdateStatus(context.Background(), obj, metav1.UpdateOptions{})
	require.NoError(t, err, "writing the status of HelmRelease %s through %s", obj.GetName(), obj.GetAPIVersion())
	return updated
}

// flux22Condition is a condition that last changed an hour ago, past every default threshold.
func flux22Condition(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "observedGeneration": int64(1),
		"lastTransitionTime": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
}
