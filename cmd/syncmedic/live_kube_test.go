package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
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
	// hand-written state: a failed Workflow held by artifact-gc: no Argo Workflows controller runs in these tests (the
	// real v3.5.10 produces it in internal/conformance/workflows TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifacts), so its
	// status is written as the workflow-controller writes it, plus a garbage-collection Pod recorded (podsRecouped) so the remedy applies.
	wf := testenv.ScenarioWorkflowArtifactGCStuck(t, env, ns, "live-build")
	// hand-written state: the same Workflow as v3.5.10 really leaves it, without a garbage-collection Pod (no
	// controller runs here; internal/conformance/workflows plays it on the real v3.5.10).
	noPod := testenv.ScenarioWorkflowArtifactGCWithoutGCPod(t, env, ns, "live-build-nopod")
	hook := testenv.ScenarioWebhookBackendGone(t, env)
	// hand-written state: a pre-v2beta2 HelmRelease status on a bare apiserver (no helm-controller runs in these cmd
	// tests, and helm-controller <= v0.36, which wrote it, does not download); the real v1.4.3 controller inherits it
	// in internal/conformance/flux TestPreV2beta2StatusIsRewrittenByTheRealControllerOnSyncmedicsRequest.
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
		{"a failed Workflow held by artifact-gc without a garbage-collection Pod is reported", "Workflow/" + ns + "/" + noPod.GetName(), syncmedic.RuleArtifactGCFinalizerStuck},
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
	// hand-written state: a pre-v2beta2 HelmRelease status on a bare apiserver (no helm-controller runs in these cmd
	// tests, and helm-controller <= v0.36, which wrote it, does not download); the real v1.4.3 controller inherits it
	// in internal/conformance/flux TestPreV2beta2StatusIsRewrittenByTheRealControllerOnSyncmedicsRequest.
	hr := testenv.ScenarioHelmReleaseOldStatus(t, env, ns, "fix-redis", "v2beta2")
	// The scenario dates its old status a minute ahead; `fix` judges at the real time, so date it an hour back.
	for i := range hr.Status.Conditions {
		hr.Status.Conditions[i].LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	}
	// hand-written state: the same old status dated an hour back, past the threshold (no controller runs here).
	require.NoError(t, env.Client.Status().Update(context.Background(), hr))
	// hand-written state: a failed Workflow held by artifact-gc: no Argo Workflows controller runs in these tests (the
	// real v3.5.10 produces it in internal/conformance/workflows TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifacts), so its
	// status is written as the workflow-controller writes it, plus a garbage-collection Pod recorded (podsRecouped) so the remedy applies.
	wf := testenv.ScenarioWorkflowArtifactGCStuck(t, env, ns, "fix-build")
	// hand-written state: the same Workflow as v3.5.10 really leaves it, without a garbage-collection Pod (no
	// controller runs here; internal/conformance/workflows plays it on the real v3.5.10).
	noPod := testenv.ScenarioWorkflowArtifactGCWithoutGCPod(t, env, ns, "fix-build-nopod")
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

		code, out, errOut = runCLI(t, "fix", fp, "--kubeconfig", env.Kubeconfig, "--stale-status-threshold", "1m", "--yes", "--offline")
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
		code, out, errOut := runCLI(t, "fix", fp, "--kubeconfig", env.Kubeconfig, "--artifactgc-threshold", "0s", "--yes", "--offline")
		require.Equal(t, exitOK, code, out+errOut)
		got, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Get(context.Background(), wf.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		force, _, _ := unstructured.NestedBool(got.Object, "spec", "artifactGC", "forceFinalizerRemoval")
		require.True(t, force)
		require.Contains(t, out, "Applied "+string(syncmedic.ActionForceFinalizerRemoval))
		require.Contains(t, out, "patch written: the workflow controller removes the "+testenv.ArtifactGCFinalizer+" finalizer itself")
	})
	t.Run("a Workflow without a garbage-collection Pod is reported, offers no action, and fix --yes patches nothing", func(t *testing.T) {
		_, out, _ := runCLI(t, "scan", "--kubeconfig", env.Kubeconfig, "--now", later, "-o", "json")
		var r syncmedic.Report
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		var found []syncmedic.Finding
		for _, f := range r.Findings {
			if f.Object.Namespace == ns && f.Object.Name == noPod.GetName() {
				found = append(found, f)
			}
		}
		require.Len(t, found, 1, "one finding for the Workflow")
		f := found[0]
		require.Equal(t, syncmedic.RuleArtifactGCFinalizerStuck, f.Rule)
		require.Equal(t, "Workflow", f.Object.Kind)
		require.Equal(t, syncmedic.ActionNone, f.Remedy.Action, "the workflow controller ignores forceFinalizerRemoval here")
		require.Empty(t, f.Remedy.Params)
		before := noPod.GetResourceVersion()
		code, out, errOut := runCLI(t, "fix", f.Fingerprint, "--kubeconfig", env.Kubeconfig, "--artifactgc-threshold", "0s", "--yes", "--offline")
		require.Equal(t, exitUsage, code, out+errOut)
		require.Contains(t, out, "has no effect here", "fix says why")
		require.Contains(t, out, `--type json -p`, "and prints the removal by hand")
		require.Contains(t, errOut, "nothing applied")
		require.NotContains(t, out, "Applied")
		got, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Get(context.Background(), noPod.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, before, got.GetResourceVersion(), "the Workflow is not patched")
		force, _, _ := unstructured.NestedBool(got.Object, "spec", "artifactGC", "forceFinalizerRemoval")
		require.False(t, force)
	})
}

// TestFixRefusedByKubernetesRBACChangesNothing runs `fix --yes` as a user who may read everything but patch nothing:
// the Flux and Workflow remedies fail with exit 3, the message names the verb and resource the account lacks, and
// the objects are untouched.
func TestFixRefusedByKubernetesRBACChangesNothing(t *testing.T) {
	env := testenv.Kube(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	// hand-written state: a pre-v2beta2 HelmRelease status on a bare apiserver (no helm-controller runs in these cmd
	// tests, and helm-controller <= v0.36, which wrote it, does not download); the real v1.4.3 controller inherits it
	// in internal/conformance/flux TestPreV2beta2StatusIsRewrittenByTheRealControllerOnSyncmedicsRequest.
	hr := testenv.ScenarioHelmReleaseOldStatus(t, env, ns, "rbac-redis", "v2beta2")
	for i := range hr.Status.Conditions {
		hr.Status.Conditions[i].LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	}
	// hand-written state: the same old status dated an hour back, past the threshold (no controller runs here).
	require.NoError(t, env.Client.Status().Update(ctx, hr))
	// hand-written state: a failed Workflow held by artifact-gc: no Argo Workflows controller runs in these tests (the
	// real v3.5.10 produces it in internal/conformance/workflows TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifacts), so its
	// status is written as the workflow-controller writes it, plus a garbage-collection Pod recorded (podsRecouped) so the remedy applies.
	wf := testenv.ScenarioWorkflowArtifactGCStuck(t, env, ns, "rbac-build")

	user := "reader-" + ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}}
	require.NoError(t, env.Client.Create(ctx, role))
	require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}))
	kubeconfig := env.UserKubeconfig(t, user)
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	tests := []struct {
		name, kind, object, resource, grants string
		flags                                []string
		version                              func() string
	}{
		{name: "the HelmRelease reconcile request is refused without patch on helmreleases", kind: "HelmRelease", object: hr.Name,
			resource: `cannot patch resource "helmreleases" in API group "helm.toolkit.fluxcd.io"`, grants: "manifests/base/clusterrole.yaml", flags: []string{"--stale-status-threshold", "1m"},
			version: func() string { return testenv.GetHelmRelease(t, env, ns, hr.Name).ResourceVersion }},
		{name: "the Workflow forceFinalizerRemoval is refused without patch on workflows", kind: "Workflow", object: wf.GetName(),
			resource: `cannot patch resource "workflows" in API group "argoproj.io"`, grants: "manifests/components/workflows-remedy", flags: []string{"--artifactgc-threshold", "0s"},
			version: func() string {
				got, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Get(ctx, wf.GetName(), metav1.GetOptions{})
				require.NoError(t, err)
				return got.GetResourceVersion()
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, errOut := runCLI(t, "scan", "--kubeconfig", kubeconfig, "--now", later, "-o", "json")
			var r syncmedic.Report
			require.NoError(t, json.Unmarshal([]byte(out), &r), errOut)
			fp := ""
			for _, f := range r.Findings {
				if f.Object.Kind == tt.kind && f.Object.Namespace == ns && f.Object.Name == tt.object && f.Remedy.Action != syncmedic.ActionNone {
					fp = f.Fingerprint
				}
			}
			require.NotEmpty(t, fp, "a reader still sees the finding: %s", out)
			before := tt.version()
			code, out, errOut := runCLI(t, append([]string{"fix", fp, "--kubeconfig", kubeconfig, "--yes", "--offline"}, tt.flags...)...)
			require.Equal(t, exitFailed, code, out+errOut)
			require.Contains(t, errOut, tt.resource, "the refusal names the verb and the resource")
			require.Contains(t, errOut, tt.grants, "and how the install grants that permission")
			require.Equal(t, before, tt.version(), "nothing changed")
		})
	}
}
