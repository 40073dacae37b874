package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// deletedHook is a PreSync hook Job of a v3 wave, deleted (by its TTL) ten minutes ago; finalizers are set per case.
const deletedHook = `
apiVersion: batch/v1
kind: Job
metadata:
  namespace: shop
  name: migrate
  deletionTimestamp: "2026-03-10T11:50:10Z"
  annotations: {argocd.argoproj.io/hook: PreSync, argocd.argoproj.io/tracking-id: 'shop:batch/Job:shop/migrate'}
`

// TestStuckTerminatingLeavesArgoCDsFinalizersToTheArgoCDRules: a finalizer an argocd rule owns is that rule's to
// judge. A deleted hook Job that the hook finalizer holds while its v3 wave still runs another hook is normal, and
// only argocd/hook-finalizer-stuck knows the operation; an Application's deletion finalizers are
// argocd/app-deletion-stuck's.
func TestStuckTerminatingLeavesArgoCDsFinalizersToTheArgoCDRules(t *testing.T) {
	withFinalizers := func(t *testing.T, y string, fins ...string) *unstructured.Unstructured {
		o := obj(t, y)
		o.SetFinalizers(fins)
		return o
	}
	app := `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {namespace: argocd, name: shop, deletionTimestamp: "2026-03-10T11:00:00Z"}
`
	tests := []struct {
		name     string
		object   func(t *testing.T) *unstructured.Unstructured
		heldBy   string // the "held by" of the expected stuck-terminating finding; "" for none
		judgedBy syncmedic.RuleID
	}{
		{name: "a hook held only by Argo CD's hook finalizer is hook-finalizer-stuck's to judge",
			object: func(t *testing.T) *unstructured.Unstructured {
				return withFinalizers(t, deletedHook, "argocd.argoproj.io/hook-finalizer")
			}},
		{name: "a Helm hook held only by Argo CD's hook finalizer is hook-finalizer-stuck's to judge",
			object: func(t *testing.T) *unstructured.Unstructured {
				o := withFinalizers(t, deletedHook, "argocd.argoproj.io/hook-finalizer")
				o.SetAnnotations(map[string]string{"helm.sh/hook": "pre-install"})
				return o
			}},
		{name: "a hook held by the hook finalizer and another is reported for the other",
			object: func(t *testing.T) *unstructured.Unstructured {
				return withFinalizers(t, deletedHook, "argocd.argoproj.io/hook-finalizer", "example.com/cleanup")
			},
			heldBy: "held by example.com/cleanup", judgedBy: syncmedic.RuleHookFinalizerStuck},
		{name: "an object that is no hook but carries the hook finalizer is judged here: no argocd rule reads it",
			object: func(t *testing.T) *unstructured.Unstructured {
				o := withFinalizers(t, deletedHook, "argocd.argoproj.io/hook-finalizer")
				o.SetAnnotations(nil)
				return o
			},
			heldBy: "held by argocd.argoproj.io/hook-finalizer"},
		{name: "an Application held by its resources and post-delete finalizers is app-deletion-stuck's to judge",
			object: func(t *testing.T) *unstructured.Unstructured {
				return withFinalizers(t, app, "resources-finalizer.argocd.argoproj.io/foreground", "post-delete-finalizer.argocd.argoproj.io/cleanup")
			}},
		{name: "an Application held by the PreDelete hooks' finalizer (v3.6) is app-deletion-stuck's to judge",
			object: func(t *testing.T) *unstructured.Unstructured {
				return withFinalizers(t, app, "pre-delete-finalizer.argocd.argoproj.io")
			}},
		{name: "a Job with a finalizer named like an Application's is judged here",
			object: func(t *testing.T) *unstructured.Unstructured {
				return withFinalizers(t, deletedHook, "resources-finalizer.argocd.argoproj.io")
			},
			heldBy: "held by resources-finalizer.argocd.argoproj.io"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.object(t)
			fs := Evaluate(Inventory{Objects: []*unstructured.Unstructured{o}, ArgoCDRulesRun: true}, now, DefaultThresholds())
			if tt.heldBy == "" {
				require.Empty(t, fs)
				return
			}
			require.Len(t, fs, 1)
			f := fs[0]
			require.Equal(t, syncmedic.RuleStuckTerminating, f.Rule)
			require.Equal(t, o.GetName(), f.Object.Name)
			require.Contains(t, f.Summary, "has been terminating for ")
			require.True(t, len(f.Summary) > len(tt.heldBy) && f.Summary[len(f.Summary)-len(tt.heldBy):] == tt.heldBy, f.Summary)
			if tt.judgedBy != "" {
				var judged bool
				for _, e := range f.Evidence {
					judged = judged || (e.Field == "finalizer argocd.argoproj.io/hook-finalizer" && e.Value[:len("judged by "+string(tt.judgedBy))] == "judged by "+string(tt.judgedBy))
				}
				require.True(t, judged, "the evidence says which rule judges the Argo CD finalizer: %v", f.Evidence)
			}
		})
	}
}

// written sets o's managedFields to one write by manager at.
func written(o *unstructured.Unstructured, manager string, at time.Time) *unstructured.Unstructured {
	t := metav1.NewTime(at)
	o.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &t}})
	return o
}

// TestWebhookBackendIsDatedFromWhenItWentDown: the endpoints controller removes its last-change-trigger-time
// annotation when no Pod's Ready transition triggered the change (a rollout deleting the only ready Pod) and sets it to
// the Service's creation after a restart, so an old EndpointSlice without it must not date an outage from its own
// creation: its last write does.
func TestWebhookBackendIsDatedFromWhenItWentDown(t *testing.T) {
	cfg := func(t *testing.T) *unstructured.Unstructured {
		w := obj(t, knativeWebhook)
		w.SetOwnerReferences(nil)
		return w
	}
	oldSlice := func(t *testing.T, lastWrite time.Duration) *unstructured.Unstructured {
		sl := obj(t, slice(false))
		sl.SetCreationTimestamp(metav1.NewTime(now.Add(-30 * 24 * time.Hour)))
		return written(sl, "endpointslice-controller.k8s.io", now.Add(-lastWrite))
	}
	tests := []struct {
		name      string
		inv       func(t *testing.T) Inventory
		wantSince time.Time // zero: no finding
		evidence  string
	}{
		{name: "an old slice without the annotation that went unready 20s ago is not reported yet",
			inv: func(t *testing.T) Inventory {
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{cfg(t)}, Services: []*unstructured.Unstructured{obj(t, webhookService)},
					ServicesKnown: true, EndpointSlices: []*unstructured.Unstructured{oldSlice(t, 20*time.Second)}, EndpointsKnown: true}
			}},
		{name: "an old slice without the annotation unready since its write five minutes ago is reported from that write",
			inv: func(t *testing.T) Inventory {
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{cfg(t)}, Services: []*unstructured.Unstructured{obj(t, webhookService)},
					ServicesKnown: true, EndpointSlices: []*unstructured.Unstructured{oldSlice(t, 5*time.Minute)}, EndpointsKnown: true}
			},
			wantSince: now.Add(-5 * time.Minute)},
		{name: "an annotation older than the last write (the Service's creation, after a controller restart) does not date it",
			inv: func(t *testing.T) Inventory {
				sl := oldSlice(t, 20*time.Second)
				sl.SetAnnotations(map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": now.Add(-30 * 24 * time.Hour).Format(time.RFC3339)})
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{cfg(t)}, Services: []*unstructured.Unstructured{obj(t, webhookService)},
					ServicesKnown: true, EndpointSlices: []*unstructured.Unstructured{sl}, EndpointsKnown: true}
			}},
		{name: "a Service missing from a dump is dated from the configuration's creation, and says so",
			inv: func(t *testing.T) Inventory {
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{cfg(t)}, ServicesKnown: true, EndpointsKnown: true}
			},
			wantSince: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
			evidence:  "dated from the webhook configuration's creation, the earliest it can have begun"},
		{name: "a Service missing from a dump is dated from the first failed call to its webhook when a tool reported one",
			inv: func(t *testing.T) Inventory {
				fail := func(at time.Duration) WebhookCallFailure {
					return WebhookCallFailure{Source: "Application argocd/hello", At: now.Add(-at),
						Message: `Internal error occurred: failed calling webhook "config.webhook.serving.knative.dev": service "webhook" not found`}
				}
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{cfg(t)}, ServicesKnown: true, EndpointsKnown: true,
					WebhookCallFailures: []WebhookCallFailure{fail(time.Minute), fail(time.Hour)}}
			},
			wantSince: now.Add(-time.Hour),
			evidence:  "dated from the first failed call (Application argocd/hello), when it was down at the latest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := WebhookBackendMissing(tt.inv(t), now, DefaultThresholds())
			if tt.wantSince.IsZero() {
				require.Empty(t, fs)
				return
			}
			require.Len(t, fs, 1)
			require.Equal(t, "config.webhook.serving.knative.dev", fs[0].Object.Name)
			require.Equal(t, tt.wantSince, fs[0].Since.UTC())
			var backend, since string
			for _, e := range fs[0].Evidence {
				switch e.Field {
				case "backend":
					require.NotNil(t, e.Since)
					require.Equal(t, tt.wantSince, e.Since.UTC())
					backend = e.Value
				case "since":
					since = e.Value
				}
			}
			require.NotEmpty(t, backend)
			if tt.evidence != "" {
				require.Contains(t, since, tt.evidence)
			}
		})
	}
}

// TestTheScannerKeepsOnlyTheLastWriteOfAnEndpointSlice: the informer cache drops managed fields to save memory, but an
// EndpointSlice keeps its newest write time, which dates a webhook backend's outage.
func TestTheScannerKeepsOnlyTheLastWriteOfAnEndpointSlice(t *testing.T) {
	older, newer := metav1.NewTime(now.Add(-time.Hour)), metav1.NewTime(now.Add(-time.Minute))
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &newer, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:endpoints":{}}`)}},
		{Manager: "endpointslice-controller.k8s.io", Operation: metav1.ManagedFieldsOperationUpdate, Time: &older},
	}
	sl := obj(t, slice(false))
	sl.SetManagedFields(entries)
	trimManagedFields(sl, true)
	kept := sl.GetManagedFields()
	require.Len(t, kept, 1)
	require.Equal(t, "kubectl", kept[0].Manager)
	require.Nil(t, kept[0].FieldsV1, "the field set is dropped")
	require.Equal(t, newer.Time, LastWrite(sl).UTC())

	other := obj(t, webhookService)
	other.SetManagedFields(entries)
	trimManagedFields(other, false)
	require.Empty(t, other.GetManagedFields())
}

// TestStuckTerminatingKeepsArgoCDsFinalizersWhenNoArgoCDRuleRuns: when syncmedic reads no Argo CD (a kube-only scan
// or serve without --argocd-server), no argocd rule sees a hook held by the hook finalizer or a deleting
// Application, so kube/stuck-terminating still reports them (the seed incident of a hook stuck terminating).
func TestStuckTerminatingKeepsArgoCDsFinalizersWhenNoArgoCDRuleRuns(t *testing.T) {
	o := obj(t, deletedHook)
	o.SetFinalizers([]string{"argocd.argoproj.io/hook-finalizer"})
	fs := Evaluate(Inventory{Objects: []*unstructured.Unstructured{o}}, now, DefaultThresholds())
	require.Len(t, fs, 1)
	require.Equal(t, syncmedic.RuleStuckTerminating, fs[0].Rule)
	require.Equal(t, o.GetName(), fs[0].Object.Name)
	require.True(t, strings.HasSuffix(fs[0].Summary, "held by argocd.argoproj.io/hook-finalizer"), fs[0].Summary)
	fs = Evaluate(Inventory{Objects: []*unstructured.Unstructured{o}, ArgoCDRulesRun: true}, now, DefaultThresholds())
	require.Empty(t, fs, "with the argocd rules running, the hook finalizer is hook-finalizer-stuck's to judge")
}
