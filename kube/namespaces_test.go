package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// namespace is a Namespace fixture: uid as given, Terminating since deleted when that is not zero.
func namespace(t *testing.T, name, uid string, deleted time.Time) *unstructured.Unstructured {
	t.Helper()
	ns := obj(t, `
apiVersion: v1
kind: Namespace
metadata: {name: `+name+`, uid: `+uid+`}
status: {phase: Active}
`)
	if !deleted.IsZero() {
		ns.SetDeletionTimestamp(&metav1.Time{Time: deleted})
		require.NoError(t, unstructured.SetNestedField(ns.Object, "Terminating", "status", "phase"))
	}
	return ns
}

func evidence(f syncmedic.Finding, field string) (syncmedic.Evidence, bool) {
	for _, e := range f.Evidence {
		if e.Field == field {
			return e, true
		}
	}
	return syncmedic.Evidence{}, false
}

// TestWebhookNamespaceOwnedSaysWhatBecameOfTheNamespace checks kube/webhook-namespace-owned with the owning
// Namespace present, Terminating, gone, recreated, and not read.
func TestWebhookNamespaceOwnedSaysWhatBecameOfTheNamespace(t *testing.T) {
	deleted := now.Add(-10 * time.Minute)
	tests := []struct {
		name        string
		namespaces  []*unstructured.Unstructured
		known       bool
		wantSummary string
		wantNS      string
		wantSince   *time.Time
		wantDelete  bool // the remedy deletes the configuration (the backend is gone)
	}{
		{name: "present", namespaces: []*unstructured.Unstructured{namespace(t, "knative-serving", "5b1d", time.Time{})}, known: true,
			wantSummary: "is controlled by Namespace knative-serving: Argo CD will not prune it", wantNS: "Namespace knative-serving exists (Active)"},
		{name: "Terminating", namespaces: []*unstructured.Unstructured{namespace(t, "knative-serving", "5b1d", deleted)}, known: true,
			wantSummary: "is controlled by Namespace knative-serving, which is Terminating: the webhook's backend is deleted with it",
			wantNS:      "Namespace knative-serving is Terminating", wantSince: &deleted, wantDelete: true},
		{name: "gone", namespaces: []*unstructured.Unstructured{namespace(t, "default", "0001", time.Time{})}, known: true,
			wantSummary: "is controlled by Namespace knative-serving, which is gone: so is the webhook's backend",
			wantNS:      "Namespace knative-serving does not exist", wantDelete: true},
		{name: "recreated with another uid", namespaces: []*unstructured.Unstructured{namespace(t, "knative-serving", "77aa", time.Time{})}, known: true,
			wantSummary: "which is gone", wantNS: "Namespace knative-serving (uid 5b1d) is gone; the Namespace of that name now is another one (uid 77aa)", wantDelete: true},
		{name: "not read", wantSummary: "is controlled by Namespace knative-serving: Argo CD will not prune it",
			wantNS: "Namespace knative-serving: not read (Namespaces were not listed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := Inventory{WebhookConfigurations: []*unstructured.Unstructured{obj(t, knativeWebhook)}, Namespaces: tt.namespaces, NamespacesKnown: tt.known}
			fs := WebhookNamespaceOwned(inv, now, DefaultThresholds())
			require.Len(t, fs, 1)
			require.Contains(t, fs[0].Summary, tt.wantSummary)
			ev, ok := evidence(fs[0], "namespace")
			require.True(t, ok, "evidence %v", fs[0].Evidence)
			require.Equal(t, tt.wantNS, ev.Value)
			requireSameTime(t, tt.wantSince, ev.Since)
			if tt.wantDelete {
				require.Equal(t, "kubectl delete validatingwebhookconfiguration.admissionregistration.k8s.io config.webhook.serving.knative.dev", fs[0].Remedy.Commands[1])
				require.NotContains(t, fs[0].Remedy.Description, "WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP")
			} else {
				require.Contains(t, fs[0].Remedy.Commands[0], "WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true")
			}
		})
	}
}

// TestWebhookBackendMissingSaysItsNamespaceIsGone checks kube/webhook-backend-missing with the backend Service's
// Namespace present, Terminating, gone and not read.
func TestWebhookBackendMissingSaysItsNamespaceIsGone(t *testing.T) {
	deleted := now.Add(-10 * time.Minute)
	tests := []struct {
		name        string
		namespaces  []*unstructured.Unstructured
		known       bool
		wantSummary string
		wantNS      string
		wantSince   *time.Time
		wantCheck   string
	}{
		{name: "present", namespaces: []*unstructured.Unstructured{namespace(t, "knative-serving", "5b1d", time.Time{})}, known: true,
			wantSummary: "Service knative-serving/webhook does not exist and failurePolicy is Fail", wantNS: "Namespace knative-serving exists (Active)",
			wantCheck: "kubectl -n knative-serving get service,endpointslices"},
		{name: "Terminating", namespaces: []*unstructured.Unstructured{namespace(t, "knative-serving", "5b1d", deleted)}, known: true,
			wantSummary: "Service knative-serving/webhook does not exist; Namespace knative-serving is Terminating, so the backend is gone with it; failurePolicy is Fail",
			wantNS:      "Namespace knative-serving is Terminating", wantSince: &deleted, wantCheck: "kubectl get namespace knative-serving"},
		{name: "gone", known: true,
			wantSummary: "Service knative-serving/webhook does not exist; Namespace knative-serving does not exist, so the backend is gone with it",
			wantNS:      "Namespace knative-serving does not exist", wantCheck: "kubectl get namespace knative-serving"},
		{name: "not read", wantSummary: "Service knative-serving/webhook does not exist and failurePolicy is Fail",
			wantNS: "Namespace knative-serving: not read (Namespaces were not listed)", wantCheck: "kubectl -n knative-serving get service,endpointslices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := obj(t, knativeWebhook)
			w.SetOwnerReferences(nil)
			inv := Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, ServicesKnown: true, EndpointsKnown: true,
				Namespaces: tt.namespaces, NamespacesKnown: tt.known}
			fs := Evaluate(inv, now, DefaultThresholds())
			require.Len(t, fs, 1)
			require.Equal(t, syncmedic.RuleWebhookBackendMissing, fs[0].Rule)
			require.Contains(t, fs[0].Summary, tt.wantSummary)
			ev, ok := evidence(fs[0], "namespace")
			require.True(t, ok, "evidence %v", fs[0].Evidence)
			require.Equal(t, tt.wantNS, ev.Value)
			requireSameTime(t, tt.wantSince, ev.Since)
			require.Contains(t, fs[0].Remedy.Commands[0], tt.wantCheck)
		})
	}
}

func requireSameTime(t *testing.T, want, got *time.Time) {
	t.Helper()
	if want == nil {
		require.Nil(t, got)
		return
	}
	require.NotNil(t, got)
	require.True(t, want.Equal(*got), "want %s, got %s", want, got)
}
