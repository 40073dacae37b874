package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/syncmedic/syncmedic/argocd/rules"
)

// appKind says what an application of the fixture looks like.
type appKind int

const (
	// healthy: Synced, Healthy, last sync Succeeded without hooks.
	healthy appKind = iota
	// hooked: Synced, Healthy, last sync Succeeded an hour ago and ran a PreSync hook (deleted by its
	// HookSucceeded policy, as most are).
	hooked
	// stuck: a sync Running for an hour, waiting for a PreSync hook Job that completed but kept
	// argocd.argoproj.io/hook-finalizer (the seed incident).
	stuck
)

// fixture is what the server streams: the applications, then a burst of updates.
type fixture struct {
	apps    []v1alpha1.Application
	kinds   map[string]appKind // by application name
	updates []v1alpha1.ApplicationWatchEvent
}

const appNamespace = "argocd"

// newFixture builds n applications (every stuckEvery-th stuck, every hookedEvery-th of the others hooked) and
// updates burst events: each a new version of application i % n, as the application controller writes them on a
// refresh (reconciledAt, observedAt and, every 10th, a fresh sync of a new revision).
//
// hand-written state: every Application's status and operation state (Succeeded, or Running for an hour waiting on
// a hook that completed), served by the benchmark's own argocd-server stand-in and never written to an apiserver:
// the benchmark measures the watch at 10,000 applications, which no application-controller could sync on a test
// machine. The real controllers' versions of the stuck state are in internal/conformance/argo
// (TestFastHookJobWithTTLZero, TestHookFinalizerLeakedByAFailedWave).
func newFixture(n, updates, stuckEvery, hookedEvery int, now time.Time) *fixture {
	fx := &fixture{kinds: map[string]appKind{}}
	for i := range n {
		kind := healthy
		switch {
		case stuckEvery > 0 && i%stuckEvery == 0:
			kind = stuck
		case hookedEvery > 0 && i%hookedEvery == 1:
			kind = hooked
		}
		a := newApp(i, kind, now)
		fx.apps = append(fx.apps, *a)
		fx.kinds[a.Name] = kind
	}
	for j := range updates {
		a := fx.apps[j%n].DeepCopy()
		a.ResourceVersion = fmt.Sprint(10_000_000 + j)
		at := metav1.NewTime(now.Add(time.Duration(j) * time.Millisecond))
		a.Status.ReconciledAt, a.Status.ObservedAt = &at, &at
		if fx.kinds[a.Name] == healthy && j%10 == 0 {
			rev := fmt.Sprintf("%040x", j)
			a.Status.Sync.Revision, a.Status.OperationState = rev, succeededOp(a.Name, rev, now.Add(-time.Minute), false)
		}
		fx.updates = append(fx.updates, v1alpha1.ApplicationWatchEvent{Type: watch.Modified, Application: *a})
	}
	return fx
}

func newApp(i int, kind appKind, now time.Time) *v1alpha1.Application {
	name, ns := fmt.Sprintf("app-%05d", i), fmt.Sprintf("team-%03d", i%300)
	rev := fmt.Sprintf("%040x", 0xabcdef00+i)
	a := &v1alpha1.Application{}
	a.Name, a.Namespace, a.ResourceVersion, a.Generation = name, appNamespace, fmt.Sprint(1000+i), 7
	a.UID = types.UID(fmt.Sprintf("0b6b5f8e-2a0f-4f2e-8d5b-%012d", i))
	a.Labels = map[string]string{"team": ns, "tier": "backend"}
	a.Finalizers = []string{"resources-finalizer.argocd.argoproj.io"}
	a.Spec.Project = "default"
	a.Spec.Source = &v1alpha1.ApplicationSource{RepoURL: "https://git.example.com/platform/deploy.git", Path: "apps/" + name, TargetRevision: "main"}
	a.Spec.Destination = v1alpha1.ApplicationDestination{Server: "https://kubernetes.default.svc", Namespace: ns}
	a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{Prune: true, SelfHeal: true}, SyncOptions: []string{"CreateNamespace=true"}}
	for _, r := range []struct{ g, k, n string }{{"", "Service", name}, {"apps", "Deployment", name}, {"", "ConfigMap", name + "-config"},
		{"", "ServiceAccount", name}, {"networking.k8s.io", "Ingress", name}, {"policy", "PodDisruptionBudget", name}} {
		a.Status.Resources = append(a.Status.Resources, v1alpha1.ResourceStatus{Group: r.g, Version: "v1", Kind: r.k, Namespace: ns, Name: r.n,
			Status: v1alpha1.SyncStatusCodeSynced, Health: &v1alpha1.HealthStatus{Status: health.HealthStatusHealthy}})
	}
	a.Status.Sync = v1alpha1.SyncStatus{Status: v1alpha1.SyncStatusCodeSynced, Revision: rev,
		ComparedTo: v1alpha1.ComparedTo{Source: *a.Spec.Source, Destination: a.Spec.Destination}}
	a.Status.Health = v1alpha1.HealthStatus{Status: health.HealthStatusHealthy}
	a.Status.SourceType, a.Status.ControllerNamespace = v1alpha1.ApplicationSourceTypeKustomize, appNamespace
	a.Status.Summary.Images = []string{"registry.example.com/" + name + ":1.4.2"}
	rt := metav1.NewTime(now.Add(-3 * time.Minute))
	a.Status.ReconciledAt, a.Status.ObservedAt = &rt, &rt
	for h := range 3 {
		at := metav1.NewTime(now.Add(-time.Duration(3-h) * 24 * time.Hour))
		a.Status.History = append(a.Status.History, v1alpha1.RevisionHistory{ID: int64(h), Revision: rev, DeployedAt: at, DeployStartedAt: &at, Source: *a.Spec.Source})
	}
	switch kind {
	case healthy:
		a.Status.OperationState = succeededOp(name, rev, now.Add(-24*time.Hour), false)
	case hooked:
		a.Status.OperationState = succeededOp(name, rev, now.Add(-time.Hour), true)
	case stuck:
		a.Status.OperationState = runningOp(name, rev, now.Add(-time.Hour))
		a.Status.Health = v1alpha1.HealthStatus{Status: health.HealthStatusProgressing}
	}
	return a
}

func succeededOp(app, rev string, finished time.Time, hook bool) *v1alpha1.OperationState {
	started, done := metav1.NewTime(finished.Add(-20*time.Second)), metav1.NewTime(finished)
	op := &v1alpha1.OperationState{Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: rev}, InitiatedBy: v1alpha1.OperationInitiator{Automated: true}},
		Phase: synccommon.OperationSucceeded, Message: "successfully synced (all tasks run)", StartedAt: started, FinishedAt: &done,
		SyncResult: &v1alpha1.SyncOperationResult{Revision: rev}}
	op.SyncResult.Resources = v1alpha1.ResourceResults{{Group: "apps", Version: "v1", Kind: "Deployment", Name: app, Status: synccommon.ResultCodeSynced,
		Message: "deployment.apps/" + app + " configured", HookPhase: synccommon.OperationRunning, SyncPhase: synccommon.SyncPhaseSync}}
	if hook {
		op.SyncResult.Resources = append(op.SyncResult.Resources, &v1alpha1.ResourceResult{Group: "batch", Version: "v1", Kind: "Job", Name: hookName(app),
			Status: synccommon.ResultCodeSynced, Message: "job.batch/" + hookName(app) + " created", HookType: synccommon.HookTypePreSync,
			HookPhase: synccommon.OperationSucceeded, SyncPhase: synccommon.SyncPhasePreSync})
	}
	return op
}

func runningOp(app, rev string, started time.Time) *v1alpha1.OperationState {
	op := &v1alpha1.OperationState{Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: rev}, InitiatedBy: v1alpha1.OperationInitiator{Automated: true}},
		Phase: synccommon.OperationRunning, Message: "waiting for completion of hook batch/Job/" + hookName(app), StartedAt: metav1.NewTime(started),
		SyncResult: &v1alpha1.SyncOperationResult{Revision: rev}}
	op.SyncResult.Resources = v1alpha1.ResourceResults{{Group: "batch", Version: "v1", Kind: "Job", Name: hookName(app),
		HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationRunning, SyncPhase: synccommon.SyncPhasePreSync, Message: "job.batch/" + hookName(app) + " created"}}
	return op
}

// hookManifest is the live hook Job of a stuck application as GetResource returns it: complete, yet still carrying
// the hook finalizer.
func hookManifest(a *v1alpha1.Application, now time.Time) string {
	ns := a.Spec.Destination.Namespace
	created, done := now.Add(-time.Hour).UTC().Format(time.RFC3339), now.Add(-59*time.Minute).UTC().Format(time.RFC3339)
	m := map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": hookName(a.Name), "namespace": ns, "creationTimestamp": created,
			"annotations": map[string]any{"argocd.argoproj.io/hook": "PreSync", "argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation"},
			"finalizers":  []any{rules.HookFinalizer}},
		"status": map[string]any{"succeeded": 1, "conditions": []any{map[string]any{"type": "Complete", "status": "True", "lastTransitionTime": done}}},
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// hookName is the PreSync hook Job of an application: one object per application.
func hookName(app string) string { return app + "-migrate" }
