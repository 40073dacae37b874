package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
