package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// foreignFinalizer holds the control Job of TestArgoCDHookFinalizersAreLeftToTheArgoCDRules: no controller removes it.
const foreignFinalizer = "example.com/keep"

// terminatingJobHeldBy creates a plain Job (no hook annotation) holding fin and deletes it, so it stays terminating:
// kube/stuck-terminating reports it whatever runs beside it, which proves the cluster checks looked.
func terminatingJobHeldBy(t *testing.T, env *testenv.Env, ns, name, fin string) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{fin}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox:1.36", Command: []string{"true"}}},
		}}},
	}
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, job))
	require.NoError(t, env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	t.Cleanup(func() {
		got := &batchv1.Job{}
		if env.Client.Get(ctx, client.ObjectKeyFromObject(job), got) == nil {
			got.Finalizers = nil
			_ = env.Client.Update(ctx, got)
		}
	})
}

// TestArgoCDHookFinalizersAreLeftToTheArgoCDRules: a hook Job held only by argocd.argoproj.io/hook-finalizer is
// hook-finalizer-stuck's to judge (a running v3 wave holds its hooks so), so `scan --kubeconfig` and `serve` report
// it as kube/stuck-terminating only when the Argo CD part does not run (or watches only some applications), and
// never when it runs unfiltered against a real argocd-server. A plain Job held by another finalizer is reported in
// every run: the cluster checks looked.
func TestArgoCDHookFinalizersAreLeftToTheArgoCDRules(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	tokenFile := writeFile(t, "argocd-token", argo.AdminToken(t)+"\n")
	hook := testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "migrate", App: ns + "-shop"})
	terminatingJobHeldBy(t, env, ns, "held", foreignFinalizer)
	hookKey, heldKey := "Job/"+ns+"/"+hook.Name, "Job/"+ns+"/held"
	argoFlags := []string{"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", tokenFile}

	scans := []struct {
		name     string
		argo     []string
		hookRule []syncmedic.RuleID // the rules reported about the hook Job
	}{
		{"without the Argo CD part the hook Job is stuck terminating", nil, []syncmedic.RuleID{syncmedic.RuleStuckTerminating}},
		{"with the Argo CD part the hook finalizer is left to the argocd rules", argoFlags, nil},
		{"with the Argo CD part limited to a project the hook Job is stuck terminating again",
			append(append([]string{}, argoFlags...), "--argocd-project", "default"), []syncmedic.RuleID{syncmedic.RuleStuckTerminating}},
	}
	for _, tt := range scans {
		t.Run("scan: "+tt.name, func(t *testing.T) {
			later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			args := append([]string{"scan", "--kubeconfig", env.Kubeconfig, "--now", later, "-o", "json"}, tt.argo...)
			code, out, errOut := runCLI(t, args...)
			require.Equal(t, exitStuck, code, errOut)
			var r syncmedic.Report
			require.NoError(t, json.Unmarshal([]byte(out), &r))
			found := map[string][]syncmedic.RuleID{}
			for _, f := range r.Findings {
				if f.Object.Namespace == ns {
					key := f.Object.Kind + "/" + f.Object.Namespace + "/" + f.Object.Name
					found[key] = append(found[key], f.Rule)
				}
			}
			want := map[string][]syncmedic.RuleID{heldKey: {syncmedic.RuleStuckTerminating}}
			if tt.hookRule != nil {
				want[hookKey] = tt.hookRule
			}
			require.Equal(t, want, found, "stdout: %s", out)
		})
	}

	serves := []struct {
		name     string
		argo     []string
		wantHook bool
	}{
		{"without the Argo CD part the hook Job is stuck terminating", nil, true},
		{"with the Argo CD part the hook finalizer is left to the argocd rules", argoFlags, false},
	}
	for _, tt := range serves {
		t.Run("serve: "+tt.name, func(t *testing.T) {
			token := testToken("api-" + strings.ReplaceAll(t.Name(), "/", "-"))
			args := append([]string{"--kubeconfig", env.Kubeconfig,
				"--state-file", filepath.Join(t.TempDir(), "state.json"), "--api-token-file", writeFile(t, "api-token", token+"\n"),
				"--flux-watch=false", "--kube-stuck-kinds", "jobs.batch", "--terminating-threshold", "1s", "--kube-events=false"}, tt.argo...)
			s := startServe(t, args...)
			header := http.Header{"Authorization": {"Bearer " + token}}
			var objects []string
			var body string
			// The held Job's incident shows that one evaluation of the namespace's Jobs is done; the hook Job is
			// judged in the same evaluation.
			require.Eventually(t, func() bool {
				_, objects, body = apiIncidents(s.Base+ui.IncidentsPath+"?namespace="+ns, header)
				return contains(objects, ns+"/held")
			}, 90*time.Second, 100*time.Millisecond, "last answer: %s\nlogs:\n%s", body, s.Logs)
			want := []string{ns + "/held"}
			if tt.wantHook {
				require.Eventually(t, func() bool {
					_, objects, body = apiIncidents(s.Base+ui.IncidentsPath+"?namespace="+ns, header)
					return len(objects) == 2
				}, 30*time.Second, 100*time.Millisecond, "last answer: %s", body)
				want = append(want, ns+"/"+hook.Name)
			}
			require.ElementsMatch(t, want, objects, "answer: %s", body)
			var list ui.IncidentList
			require.NoError(t, json.Unmarshal([]byte(body), &list))
			for _, inc := range list.Items {
				require.Equal(t, string(syncmedic.RuleStuckTerminating), inc.Rule, "incident about %s", inc.Object.Name)
			}
		})
	}
}
