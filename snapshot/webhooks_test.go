package snapshot

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// TestADumpDatesAWebhookBackendFromItsPods: a dump taken 20 s after the only Pod behind a 200-day-old webhook was
// replaced keeps the Pods (cut down to their readiness) and the EndpointSlice's last write, so the scan does not
// announce an outage at once; judged past the threshold, it reports exactly that configuration, dated from the
// replacement Pod's Ready condition and saying so.
func TestADumpDatesAWebhookBackendFromItsPods(t *testing.T) {
	s, err := ReadPaths("testdata/webhook-restart")
	require.NoError(t, err)
	require.Empty(t, s.Problems)
	o := s.Observe()

	var pods []map[string]interface{}
	for _, p := range o.Inventory.Pods {
		pods = append(pods, p.Object)
	}
	require.Equal(t, []map[string]interface{}{
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]interface{}{
			"namespace": "policy", "name": "policy-webhook-5d9c7-abcde", "creationTimestamp": "2026-02-01T00:00:00Z",
			"deletionTimestamp": "2026-03-10T12:00:10Z", "deletionGracePeriodSeconds": int64(30),
			"labels": map[string]interface{}{"app.kubernetes.io/name": "policy-webhook", "pod-template-hash": "5d9c7"}},
			"spec": map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "webhook", "image": "registry.example.com/policy-webhook:1.4.2"}}},
			"status": map[string]interface{}{"phase": "Running", "conditions": []interface{}{
				map[string]interface{}{"type": "Initialized", "status": "True", "lastTransitionTime": "2026-02-01T00:00:01Z"},
				map[string]interface{}{"type": "Ready", "status": "True", "lastTransitionTime": "2026-02-01T00:00:05Z"}}}},
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]interface{}{
			"namespace": "policy", "name": "policy-webhook-7b4f8-fghij", "creationTimestamp": "2026-03-10T11:59:41Z",
			"labels": map[string]interface{}{"app.kubernetes.io/name": "policy-webhook", "pod-template-hash": "7b4f8"}},
			"status": map[string]interface{}{"conditions": []interface{}{
				map[string]interface{}{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": "2026-03-10T11:59:42Z"}}}},
	}, pods, "a terminating Pod is kept whole (kube/stuck-terminating reads it), one not Ready is cut down to its readiness, a Ready one is dropped")
	require.Len(t, o.Inventory.EndpointSlices, 1)
	require.Equal(t, []interface{}{map[string]interface{}{"manager": "kube-controller-manager", "operation": "Update",
		"apiVersion": "discovery.k8s.io/v1", "time": "2026-03-10T11:59:40Z"}},
		o.Inventory.EndpointSlices[0].Object["metadata"].(map[string]interface{})["managedFields"], "only the slice's last write is kept")
	_, found, _ := unstructured.NestedFieldNoCopy(o.Inventory.WebhookConfigurations[0].Object, "metadata", "managedFields")
	require.False(t, found, "no other object keeps its managed fields")

	now := s.Newest(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	require.Equal(t, time.Date(2026, 3, 10, 11, 59, 42, 0, time.UTC), now.UTC(), "the dump was taken at its newest timestamp or later")
	require.Empty(t, Scan(o, now.Add(18*time.Second), DefaultThresholds()), "20 s after the restart nothing is reported")

	fs := Scan(o, now.Add(2*time.Minute), DefaultThresholds())
	require.Len(t, fs, 1, "exactly one finding past the threshold: %v", fs)
	require.Equal(t, syncmedic.RuleWebhookBackendMissing, fs[0].Rule)
	require.Equal(t, "policy.example.com", fs[0].Object.Name)
	require.Equal(t, time.Date(2026, 3, 10, 11, 59, 42, 0, time.UTC), fs[0].Since.UTC())
	var since string
	for _, e := range fs[0].Evidence {
		if e.Field == "since" {
			since = e.Value
		}
	}
	require.Equal(t, "2026-03-10T11:59:42Z, from Pod policy/policy-webhook-7b4f8-fghij: Ready condition False since then (status.conditions lastTransitionTime)", since)
}
