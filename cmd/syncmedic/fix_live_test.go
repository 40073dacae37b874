package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// leakedHook puts the stuck-hook-finalizer seed incident into the real apiserver and Argo CD: application appName
// finished a sync that ran a PreSync hook Job, and the Job, deleted afterwards, is held by
// argocd.argoproj.io/hook-finalizer (as a v3 controller leaks it, or as v2.14.3 left it) with nobody to remove it.
//
// hand-written state: the resource tree and a Succeeded operation, on the in-process argocd-server, which runs no
// application-controller: the tests that use it prove the CLI and serve (scan, fix, preflight, the Fix button)
// through argocd-server's API and RBAC. The real v3.0.12 controller leaks the hook finalizer after a failed wave in
// internal/conformance/argo TestHookFinalizerLeakedByAFailedWave; no controller here leaks it after a successful
// sync, the shape of argo-cd #24187 kept here.
func leakedHook(t *testing.T, argo *testenv.ArgoCDServer, appName string) *batchv1.Job {
	ns := argo.Env.Namespace(t)
	argo.CreateApplication(t, argo.NewApplication(appName, ns))
	job := testenv.ScenarioHookFinalizerStuck(t, argo.Env, testenv.HookJob{Namespace: ns, App: appName})
	// hand-written state: the leaked hook in the app's cached tree (see leakedHook's doc: the in-process argocd-server
	// runs no application-controller).
	argo.SetResources(t, appName, job)
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	finished := metav1.NewTime(started.Add(10 * time.Second))
	// hand-written state: the finished operation that leaked the hook (see leakedHook's doc: the in-process
	// argocd-server runs no application-controller).
	argo.SetOperationState(t, appName, &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: testenv.Revision}},
		Phase:     synccommon.OperationSucceeded, Message: "successfully synced (all tasks run)",
		StartedAt: started, FinishedAt: &finished,
		SyncResult: &v1alpha1.SyncOperationResult{Revision: testenv.Revision, Resources: v1alpha1.ResourceResults{{
			Group: "batch", Version: "v1", Kind: "Job", Namespace: ns, Name: job.Name,
			HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationSucceeded, SyncPhase: synccommon.SyncPhasePreSync,
		}}},
	})
	return job
}

// stored returns the Application and the Job as the apiserver stores them, for byte-for-byte comparisons.
func stored(t *testing.T, argo *testenv.ArgoCDServer, appName string, job *batchv1.Job) string {
	t.Helper()
	ctx := context.Background()
	app := &v1alpha1.Application{}
	require.NoError(t, argo.Env.Client.Get(ctx, types.NamespacedName{Namespace: argo.Namespace, Name: appName}, app))
	a, err := json.Marshal(app)
	require.NoError(t, err)
	live := &batchv1.Job{}
	err = argo.Env.Client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, live)
	if apierrors.IsNotFound(err) {
		return string(a) + "\nJob: absent"
	}
	require.NoError(t, err)
	j, err := json.Marshal(live)
	require.NoError(t, err)
	return string(a) + "\n" + string(j)
}

// liveReport runs `syncmedic scan -o json` against the Argo CD server and returns the exit code and the report.
func liveReport(t *testing.T, argoFlags []string) (int, syncmedic.Report, string) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"scan", "-o", "json"}, argoFlags...)...)
	var r syncmedic.Report
	if code == exitOK || code == exitStuck {
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	}
	return code, r, errOut
}

func findingOf(r syncmedic.Report, rule syncmedic.RuleID, app string) (syncmedic.Finding, bool) {
	for _, f := range r.Findings {
		if f.Rule == rule && f.Object.App == app {
			return f, true
		}
	}
	return syncmedic.Finding{}, false
}

func TestLiveScanAndFixAgainstArgoCD(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"viewer", "nobody"},
		Policy:   []string{"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer"},
	})
	t.Setenv("ARGOCD_AUTH_TOKEN", "") // the token comes from --argocd-token-file only
	dir := t.TempDir()
	adminFile, viewerFile := filepath.Join(dir, "admin-token"), filepath.Join(dir, "viewer-token")
	require.NoError(t, os.WriteFile(adminFile, []byte(argo.AdminToken(t)+"\n"), 0o600))
	require.NoError(t, os.WriteFile(viewerFile, []byte(argo.Token(t, "viewer")+"\n"), 0o600))
	nobodyFile := filepath.Join(dir, "nobody-token") // an account with no role: argocd-server lists it no application
	require.NoError(t, os.WriteFile(nobodyFile, []byte(argo.Token(t, "nobody")+"\n"), 0o600))
	flags := func(tokenFile string) []string {
		return []string{"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", tokenFile,
			"--hook-finalizer-threshold", "1ms"}
	}
	const appName = "shop"
	// hand-written state: see leakedHook.
	job := leakedHook(t, argo, appName)

	var f syncmedic.Finding
	t.Run("a live scan reports the hook held by the finalizer and exits 1", func(t *testing.T) {
		var r syncmedic.Report
		require.Eventually(t, func() bool {
			var code int
			code, r, _ = liveReport(t, flags(adminFile))
			_, found := findingOf(r, syncmedic.RuleHookFinalizerStuck, appName)
			return code == exitStuck && found
		}, 30*time.Second, 100*time.Millisecond, "no %s finding for %s", syncmedic.RuleHookFinalizerStuck, appName)
		f, _ = findingOf(r, syncmedic.RuleHookFinalizerStuck, appName)
		require.Equal(t, syncmedic.ActionRemoveHookFinalizer, f.Remedy.Action)
		require.Equal(t, job.Name, f.Object.Name)
		require.NotEmpty(t, f.Fingerprint)

		code, out, errOut := runCLI(t, append([]string{"scan"}, flags(adminFile)...)...)
		require.Equal(t, exitStuck, code, errOut)
		require.Contains(t, out, string(syncmedic.RuleHookFinalizerStuck))
		require.Contains(t, out, job.Name)
	})
	require.NotEmpty(t, f.Fingerprint, "the scan found nothing to fix")
	before := stored(t, argo, appName, job)

	t.Run("fix without --yes prints the steps and changes nothing", func(t *testing.T) {
		code, out, errOut := runCLI(t, append([]string{"fix", f.Fingerprint}, flags(adminFile)...)...)
		require.Equal(t, exitOK, code, errOut)
		require.Contains(t, out, "Would apply "+string(syncmedic.ActionRemoveHookFinalizer))
		require.Contains(t, out, "1. PatchResource app="+argo.Namespace+"/"+appName)
		require.Contains(t, out, "test, then remove exactly argocd.argoproj.io/hook-finalizer")
		require.Contains(t, out, "Dry run: nothing was changed. Re-run with --yes to apply.")
		require.Equal(t, before, stored(t, argo, appName, job), "the Application and the Job are byte-for-byte unchanged")
	})

	t.Run("fix --yes with an account lacking the update permission is refused and changes nothing", func(t *testing.T) {
		code, _, errOut := runCLI(t, append([]string{"fix", f.Fingerprint, "--yes", "--offline"}, flags(viewerFile)...)...)
		require.Equal(t, exitFailed, code)
		require.Contains(t, errOut, "applications, update")
		require.Equal(t, before, stored(t, argo, appName, job))
	})

	t.Run("fix --yes removes the finalizer through PatchResource and the apiserver deletes the Job", func(t *testing.T) {
		code, out, errOut := runCLI(t, append([]string{"fix", f.Fingerprint, "--yes", "--offline"}, flags(adminFile)...)...)
		require.Equal(t, exitOK, code, errOut)
		require.Contains(t, out, "Applied "+string(syncmedic.ActionRemoveHookFinalizer))
		require.Contains(t, out, "removed argocd.argoproj.io/hook-finalizer")
		require.NotContains(t, out, "Dry run")
		require.Eventually(t, func() bool {
			err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, &batchv1.Job{})
			return apierrors.IsNotFound(err)
		}, 10*time.Second, 20*time.Millisecond, "the Job is gone once its last finalizer is")
	})

	t.Run("a second fix --yes of an incident serve stored is already fixed, exit 0, and changes nothing", func(t *testing.T) {
		after := stored(t, argo, appName, job)
		stateFile := filepath.Join(dir, "state.json")
		opened := time.Unix(1773144000, 0).UTC()
		require.NoError(t, (&incident.FileStore{Path: stateFile}).Save(context.Background(), []incident.Incident{{
			ID: f.Fingerprint + "-1773144000", Fingerprint: f.Fingerprint, Subject: appName, State: incident.StateRemediating,
			Finding: f, OpenedAt: opened, UpdatedAt: opened}}))
		code, out, errOut := runCLI(t, append([]string{"fix", f.Fingerprint + "-1773144000", "--yes", "--offline", "--state-file", stateFile}, flags(adminFile)...)...)
		require.Equal(t, exitOK, code, errOut)
		require.Contains(t, out, "Already fixed: the live scan no longer finds it (incident "+f.Fingerprint+"-1773144000")
		require.Equal(t, after, stored(t, argo, appName, job))

		code, _, errOut = runCLI(t, append([]string{"scan"}, flags(adminFile)...)...)
		require.Equal(t, exitOK, code, "nothing is stuck any more: %s", errOut)
	})

	t.Run("without the store the same fingerprint exits 2: fixed and never seen look alike", func(t *testing.T) {
		code, out, errOut := runCLI(t, append([]string{"fix", f.Fingerprint, "--yes", "--offline"}, flags(adminFile)...)...)
		require.Equal(t, exitUsage, code, out+errOut)
		require.Contains(t, errOut, "no current finding has ID "+f.Fingerprint)
		require.NotContains(t, out, "Already fixed")
	})

	t.Run("an account that may get no application never calls the stored incident fixed, exit 3", func(t *testing.T) {
		stateFile := filepath.Join(dir, "state.json")
		code, out, errOut := runCLI(t, append([]string{"fix", f.Fingerprint, "--state-file", stateFile}, flags(nobodyFile)...)...)
		require.Equal(t, exitFailed, code, out+errOut)
		require.Contains(t, errOut, "applications, get")
		require.NotContains(t, out, "Already fixed")
	})
}
