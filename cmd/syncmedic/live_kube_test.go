package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestLiveClusterScan runs `scan --kubeconfig` against the real apiserver holding the cluster-side seed incidents,
// and checks that each one is reported with the same rule a dump of it would get.
func TestLiveClusterScan(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	job := testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "live-migrate"})
	wf := testenv.ScenarioWorkflowArtifactGCStuck(t, env, ns, "live-build")
	hook := testenv.ScenarioWebhookBackendGone(t, env)
	hr := testenv.ScenarioHelmReleaseOldStatus(t, env, ns, "live-redis", "v2beta1")
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339) // past every default threshold

	code, out, errOut := runCLI(t, "scan", "--kubeconfig", env.Kubeconfig, "--now", later, "-o", "json")
	require.Equal(t, exitStuck, code, errOut)
	var r syncmedic.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	found := map[string][]syncmedic.RuleID{}
	for _, f := range r.Findings {
		key := f.Object.Kind + "/" + f.Object.Namespace + "/" + f.Object.Name
		found[key] = append(found[key], f.Rule)
	}
	for _, c := range []struct {
		name, object string
		rule         syncmedic.RuleID
	}{
		{"a deleted Job held by a finalizer is stuck terminating", "Job/" + ns + "/" + job.Name, syncmedic.RuleStuckTerminating},
		{"a failed Workflow held by artifact-gc is reported", "Workflow/" + ns + "/" + wf.GetName(), syncmedic.RuleArtifactGCFinalizerStuck},
		{"a webhook whose Service is gone is reported", "ValidatingWebhookConfiguration//" + hook.Webhook.Name, syncmedic.RuleWebhookBackendMissing},
		{"a HelmRelease with a pre-v2beta2 status is reported", "HelmRelease/" + ns + "/" + hr.Name, syncmedic.RuleHelmReleaseStaleStatus},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Contains(t, found[c.object], c.rule, "findings: %v", found)
		})
	}
	t.Run("the HelmRelease CRD storing only v2 is not reported", func(t *testing.T) {
		require.NotContains(t, found, "CustomResourceDefinition//helmreleases.helm.toolkit.fluxcd.io")
	})
	t.Run("an unreachable cluster is a failure, not a usage error", func(t *testing.T) {
		code, _, errOut := runCLI(t, "scan", "--kubeconfig", "testdata/unreachable.kubeconfig")
		require.Equal(t, exitFailed, code, errOut)
		require.Contains(t, errOut, "127.0.0.1:1")
	})
}

// TestFixThroughTheKubernetesAPI applies the Flux and Argo Workflows remedies with `fix --kubeconfig`: a dry run
// changes nothing, --yes writes exactly what `flux reconcile hr` writes / sets forceFinalizerRemoval.
func TestFixThroughTheKubernetesAPI(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	hr := testenv.ScenarioHelmReleaseOldStatus(t, env, ns, "fix-redis", "v2beta2")
	// The scenario dates its old status a minute ahead; `fix` judges at the real time, so date it an hour back.
	for i := range hr.Status.Conditions {
		hr.Status.Conditions[i].LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	}
	require.NoError(t, env.Client.Status().Update(context.Background(), hr))
	wf := testenv.ScenarioWorkflowArtifactGCStuck(t, env, ns, "fix-build")
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	fingerprint := func(t *testing.T, kind, name string) string {
		_, out, _ := runCLI(t, "scan", "--kubeconfig", env.Kubeconfig, "--now", later, "-o", "json")
		var r syncmedic.Report
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		for _, f := range r.Findings {
			if f.Object.Kind == kind && f.Object.Namespace == ns && f.Object.Name == name && f.Remedy.Action != syncmedic.ActionNone {
				return f.Fingerprint
			}
		}
		t.Fatalf("no finding with a remedy for %s %s/%s", kind, ns, name)
		return ""
	}

	t.Run("a HelmRelease with a stale status gets a reconcile request only with --yes", func(t *testing.T) {
		fp := fingerprint(t, "HelmRelease", hr.Name)
		before := testenv.GetHelmRelease(t, env, ns, hr.Name)
		code, out, errOut := runCLI(t, "fix", fp, "--kubeconfig", env.Kubeconfig, "--stale-status-threshold", "1m")
		require.Equal(t, exitOK, code, errOut)
		require.Contains(t, out, "Dry run")
		require.Equal(t, before.ResourceVersion, testenv.GetHelmRelease(t, env, ns, hr.Name).ResourceVersion, "a dry run changes nothing")

		code, out, errOut = runCLI(t, "fix", fp, "--kubeconfig", env.Kubeconfig, "--stale-status-threshold", "1m", "--yes")
		require.Equal(t, exitOK, code, out+errOut)
		after := testenv.GetHelmRelease(t, env, ns, hr.Name)
		requested := after.Annotations["reconcile.fluxcd.io/requestedAt"]
		require.NotEmpty(t, requested, "the request `flux reconcile hr` writes")
		_, err := time.Parse(time.RFC3339Nano, requested)
		require.NoError(t, err)
		require.NotContains(t, after.Annotations, "reconcile.fluxcd.io/forceAt", "no escalation before the request was handled")
	})
	t.Run("a Workflow held by artifact-gc gets forceFinalizerRemoval only with --yes", func(t *testing.T) {
		fp := fingerprint(t, "Workflow", wf.GetName())
		code, out, errOut := runCLI(t, "fix", fp, "--kubeconfig", env.Kubeconfig, "--artifactgc-threshold", "0s", "--yes")
		require.Equal(t, exitOK, code, out+errOut)
		got, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Get(context.Background(), wf.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		force, _, _ := unstructured.NestedBool(got.Object, "spec", "artifactGC", "forceFinalizerRemoval")
		require.True(t, force)
	})
}
