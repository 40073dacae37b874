package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestFixUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "state.json")
	tests := []struct {
		name     string
		args     []string
		code     int
		mentions string
	}{
		{"fix without an ID is a usage error", []string{"fix"}, exitUsage, "accepts 1 arg"},
		{"fix without a live Argo CD says which flag to give", []string{"fix", "3f9a0c2d1e4b5a67"}, exitUsage, "--argocd-server"},
		{"fix with plaintext and insecure together is refused before dialing", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext", "--argocd-insecure"}, exitUsage, "exclude each other"},
		{"fix against an unreachable Argo CD is a failed connection", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext"}, exitFailed, "connection refused"},
		{"an incident ID against an unreachable Argo CD is a failed connection too", []string{"fix", "3f9a0c2d1e4b5a67-1773144000", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext"}, exitFailed, "connection refused"},
		{"a name instead of an ID is refused before dialing", []string{"fix", "shop/migrate", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext"}, exitUsage, "is not a finding ID"},
		{"a fingerprint one digit short is refused", []string{"fix", "3f9a0c2d1e4b5a6", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext"}, exitUsage, "16 hex digits"},
		{"an incident ID with a suffix that is not a number is refused", []string{"fix", "3f9a0c2d1e4b5a67-one", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext"}, exitUsage, "fingerprint-number"},
		{"a state file that does not exist is refused, not read as an empty store", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext", "--state-file", missing}, exitUsage, "no such file"},
		{"both state stores at once are refused", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext", "--state-file", missing, "--state-configmap", "syncmedic/state"}, exitUsage, "not both"},
		{"fix takes serve's --argocd-ca-file: a missing CA file is refused before dialing, naming the flag", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-ca-file", missing}, exitUsage, "--argocd-ca-file: open "},
		{"--argocd-ca-file and --argocd-insecure exclude each other in fix as in serve", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-ca-file", missing, "--argocd-insecure"}, exitUsage, "excludes --argocd-plaintext and --argocd-insecure"},
		{"a state ConfigMap without --kubeconfig says how to read it", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext", "--state-configmap", "syncmedic/state"}, exitUsage, "needs --kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateCLIConfig(t) // no kubeconfig or argocd login of the machine is read
			code, _, errOut := runCLI(t, tt.args...)
			require.Equal(t, tt.code, code, errOut)
			require.Contains(t, errOut, tt.mentions)
		})
	}
}

// storedFinding is a finding as serve's tracker stores it, for an object the test chooses.
func storedFinding(rule syncmedic.RuleID, action syncmedic.ActionID, o syncmedic.ObjectRef) syncmedic.Finding {
	return syncmedic.Finding{Rule: rule, Object: o, Summary: "stuck", Remedy: syncmedic.Remedy{Action: action}}.WithFingerprint()
}

// TestFixTakesEitherIDAndOnlyCallsAKnownFindingFixed runs `fix` against the real apiserver with a Workflow held by
// the artifact-gc finalizer, and serve's incident store (a file, and a ConfigMap) holding incidents of it and of
// findings the cluster no longer has: both IDs fix the current finding; a stored ID the scan no longer finds is
// "already fixed" (exit 0) only when the scan covered it; an ID never seen, or a scan that read nothing, is not 0.
func TestFixTakesEitherIDAndOnlyCallsAKnownFindingFixed(t *testing.T) {
	env := testenv.Kube(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	// hand-written state: a failed Workflow held by artifact-gc: no Argo Workflows controller runs in these tests (the
	// real v3.5.10 produces it in internal/conformance/workflows TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifacts), so its
	// status is written as the workflow-controller writes it, plus a garbage-collection Pod recorded (podsRecouped) so the remedy applies.
	wf := testenv.ScenarioWorkflowArtifactGCStuck(t, env, ns, "ids-build")
	live := []string{"--kubeconfig", env.Kubeconfig, "--artifactgc-threshold", "0s"}

	// The command scan prints is the one to run.
	code, out, errOut := runCLI(t, append([]string{"scan", "-o", "json"}, live...)...)
	require.Equal(t, exitStuck, code, errOut)
	var r struct {
		Findings []struct {
			syncmedic.Finding
			Fix string `json:"fix"`
		} `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	var current syncmedic.Finding
	var command []string
	for _, f := range r.Findings {
		if f.Object.Kind == "Workflow" && f.Object.Namespace == ns && f.Object.Name == wf.GetName() {
			current, command = f.Finding, strings.Fields(f.Fix)
		}
	}
	require.Equal(t, []string{"syncmedic", "fix", current.Fingerprint}, command, "scan prints the exact fix command")
	fp := current.Fingerprint

	gone := storedFinding(syncmedic.RuleArtifactGCFinalizerStuck, syncmedic.ActionForceFinalizerRemoval, syncmedic.ObjectRef{
		Tool: syncmedic.ToolArgoWorkflows, Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow", Namespace: ns, Name: "ids-deleted-long-ago"})
	argo := storedFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ActionRemoveHookFinalizer, syncmedic.ObjectRef{
		Tool: syncmedic.ToolArgoCD, Group: "batch", Version: "v1", Kind: "Job", Namespace: ns, Name: "migrate", App: "shop", AppNamespace: "argocd", Project: "default"})
	pod := storedFinding(syncmedic.RuleStuckTerminating, syncmedic.ActionNone, syncmedic.ObjectRef{
		Tool: syncmedic.ToolKubernetes, Version: "v1", Kind: "Pod", Namespace: ns, Name: "web-0"})
	opened := time.Unix(1773144000, 0).UTC()
	newIncident := func(id string, f syncmedic.Finding, state incident.IncidentState) incident.Incident {
		return incident.Incident{ID: id, Fingerprint: f.Fingerprint, Subject: ns, State: state, Finding: f, OpenedAt: opened, UpdatedAt: opened}
	}
	incidents := []incident.Incident{
		newIncident(fp+"-1773144000", current, incident.StateFiring),
		newIncident(gone.Fingerprint+"-1773144000-2", gone, incident.StateRemediating),
		newIncident(argo.Fingerprint+"-1773144000", argo, incident.StateFiring),
		newIncident(pod.Fingerprint+"-1773144000", pod, incident.StateFiring),
	}
	stateFile := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, (&incident.FileStore{Path: stateFile}).Save(ctx, incidents))
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	require.NoError(t, (&incident.ConfigMapStore{Client: kube, Namespace: ns, Name: "syncmedic-state"}).Save(ctx, incidents))
	stored, err := os.ReadFile(stateFile)
	require.NoError(t, err)
	withFile := append([]string{"--state-file", stateFile}, live...)
	nobody := env.UserKubeconfig(t, "nobody-"+ns) // no RBAC at all: every list is forbidden
	never := "0123456789abcdef"

	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{name: "a bare fingerprint of a current finding plans its remedy, a dry run by default, exit 0",
			args: append([]string{fp}, live...), code: exitOK,
			want: []string{"Would apply " + string(syncmedic.ActionForceFinalizerRemoval), "Dry run: nothing was changed"}},
		{name: "the incident ID Slack shows fixes the same finding, exit 0",
			args: append([]string{fp + "-1773144000"}, withFile...), code: exitOK,
			want: []string{"Incident " + fp + "-1773144000 is the finding " + fp, "Would apply " + string(syncmedic.ActionForceFinalizerRemoval)}},
		{name: "an incident ID with the tracker's same-second counter is accepted without a store, exit 0",
			args: append([]string{fp + "-1773144000-2"}, live...), code: exitOK,
			want: []string{"Would apply " + string(syncmedic.ActionForceFinalizerRemoval)}},
		{name: "a stored incident the live scan no longer finds is already fixed, exit 0",
			args: append([]string{gone.Fingerprint + "-1773144000-2"}, withFile...), code: exitOK,
			want: []string{"Already fixed: the live scan no longer finds it", "Workflow.argoproj.io/" + ns + "/ids-deleted-long-ago"}},
		{name: "a stored fingerprint read from serve's ConfigMap that the live scan no longer finds is already fixed, exit 0",
			args: append([]string{gone.Fingerprint, "--state-configmap", ns + "/syncmedic-state"}, live...), code: exitOK,
			want: []string{"Already fixed: the live scan no longer finds it"}},
		{name: "a stored incident whose condition still holds below the thresholds given is not called fixed, exit 2",
			args: append(append([]string{fp + "-1773144000"}, withFile...), "--artifactgc-threshold", "24h"), code: exitUsage,
			want: []string{"incident " + fp + "-1773144000 is not fixed: its condition still holds", "--*-threshold"}},
		{name: "an ID never seen, live or stored, exits 2 and says where IDs come from",
			args: append([]string{never}, withFile...), code: exitUsage,
			want: []string{"ID " + never + " was never seen", "`syncmedic scan`", "Slack messages show incident IDs"}},
		{name: "an ID the live scan does not find, without a store, exits 2: fixed and never seen look alike",
			args: append([]string{never}, live...), code: exitUsage,
			want: []string{"fix cannot tell which", "--state-file"}},
		{name: "a stored Argo CD finding is not called fixed by a scan that did not read Argo CD, exit 2",
			args: append([]string{argo.Fingerprint}, withFile...), code: exitUsage,
			want: []string{"cannot confirm it is gone", "give --argocd-server"}},
		{name: "a stored finding of a kind the live scan does not list is not called fixed, exit 2",
			args: append([]string{pod.Fingerprint}, withFile...), code: exitUsage,
			want: []string{"cannot confirm it is gone", "does not list Pod objects"}},
		{name: "a live scan that may read nothing never calls a stored finding fixed, exit 3",
			args: []string{gone.Fingerprint, "--state-file", stateFile, "--kubeconfig", nobody, "--artifactgc-threshold", "0s"}, code: exitFailed,
			want: []string{"forbidden"}},
		{name: "a malformed ID exits 2 before anything is read",
			args: append([]string{fp + "-"}, withFile...), code: exitUsage,
			want: []string{"is not a finding ID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"fix"}, tt.args...)...)
			require.Equal(t, tt.code, code, out+errOut)
			for _, w := range tt.want {
				require.Contains(t, out+errOut, w)
			}
			if tt.code != exitOK {
				require.NotContains(t, out, "Already fixed", "never fixed when exiting %d", tt.code)
			}
		})
	}
	t.Run("no dry run changed the Workflow", func(t *testing.T) {
		require.Equal(t, wf.GetResourceVersion(), workflowVersion(t, env, ns, wf.GetName()))
	})
	t.Run("fix only reads serve's state file", func(t *testing.T) {
		after, err := os.ReadFile(stateFile)
		require.NoError(t, err)
		require.Equal(t, string(stored), string(after))
	})
}

func workflowVersion(t *testing.T, env *testenv.Env, ns, name string) string {
	t.Helper()
	got, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return got.GetResourceVersion()
}
