package snapshot

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
)

// TestNamespacesAreKeptAndRead: a dump's Namespaces are kept (the webhook rules read them), an Active and a
// Terminating one alike, and the webhook findings say the backend's Namespace is Terminating; a dump without
// Namespaces says they were not read.
func TestNamespacesAreKeptAndRead(t *testing.T) {
	const webhook = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: config.webhook.serving.knative.dev
  creationTimestamp: "2026-03-01T00:00:00Z"
  ownerReferences: [{apiVersion: v1, kind: Namespace, name: knative-serving, uid: 5b1d, controller: true}]
webhooks:
- name: config.webhook.serving.knative.dev
  failurePolicy: Fail
  clientConfig: {service: {namespace: knative-serving, name: webhook}}
---
apiVersion: v1
kind: Service
metadata: {name: kubernetes, namespace: default}
`
	const namespaces = `apiVersion: v1
kind: Namespace
metadata: {name: default, uid: 0001}
status: {phase: Active}
---
apiVersion: v1
kind: Namespace
metadata: {name: knative-serving, uid: 5b1d, deletionTimestamp: "2026-03-10T11:00:00Z"}
spec: {finalizers: [kubernetes]}
status: {phase: Terminating}
`
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	read := func(t *testing.T, docs ...string) Observations {
		dir := t.TempDir()
		for i, d := range docs {
			require.NoError(t, os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".yaml"), []byte(d), 0o600))
		}
		s, err := ReadPaths(dir)
		require.NoError(t, err)
		require.Empty(t, s.Problems)
		return s.Observe()
	}
	t.Run("kept and read", func(t *testing.T) {
		o := read(t, webhook, namespaces)
		require.True(t, o.Inventory.NamespacesKnown)
		var names []string
		for _, ns := range o.Inventory.Namespaces {
			names = append(names, ns.GetName())
		}
		require.Equal(t, []string{"default", "knative-serving"}, names)
		fs := Scan(o, now, DefaultThresholds())
		var got []string
		for _, f := range fs {
			got = append(got, string(f.Rule)+" "+f.Summary)
		}
		require.ElementsMatch(t, []string{
			string(syncmedic.RuleWebhookBackendMissing) + " Webhook config.webhook.serving.knative.dev rejects every write it matches: Service knative-serving/webhook does not exist; Namespace knative-serving is Terminating, so the backend is gone with it; failurePolicy is Fail",
			string(syncmedic.RuleWebhookNamespaceOwned) + " ValidatingWebhookConfiguration config.webhook.serving.knative.dev is controlled by Namespace knative-serving, which is Terminating: the webhook's backend is deleted with it, and the configuration stays until the Namespace is gone",
		}, got)
	})
	t.Run("not dumped, not claimed", func(t *testing.T) {
		o := read(t, webhook)
		require.False(t, o.Inventory.NamespacesKnown)
		for _, f := range Scan(o, now, DefaultThresholds()) {
			require.NotContains(t, f.Summary, "Terminating")
			require.NotContains(t, f.Summary, "gone")
		}
	})
}
