package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTheScannerDatesABackendFromWhenItFirstSawItDown: a backend the scanner saw up is dated from the evaluation
// that first saw it without ready endpoints, however old its objects (a 200-day-old slice whose last write a dump
// would not show); the date holds while it stays down and is forgotten once it is up again, so the next outage
// starts its own clock; a backend already down at the scanner's first look is dated from its objects.
func TestTheScannerDatesABackendFromWhenItFirstSawItDown(t *testing.T) {
	const key = "policy/policy-webhook"
	upSlice := `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: policy, name: policy-webhook-x7k2p, creationTimestamp: "2025-08-22T12:00:01Z", labels: {kubernetes.io/service-name: policy-webhook}}
endpoints: [{addresses: [10.244.0.17], conditions: {ready: true}}]
`
	downSlice := `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: policy, name: policy-webhook-x7k2p, creationTimestamp: "2025-08-22T12:00:01Z", labels: {kubernetes.io/service-name: policy-webhook}}
endpoints: [{addresses: [10.244.0.17], conditions: {ready: false}}]
`
	t0 := now
	t.Run("seen up, then down", func(t *testing.T) {
		s := &Scanner{}
		require.Empty(t, s.trackBackends(dumpInventory(t, oldWebhook, upSlice), t0))
		first := s.trackBackends(dumpInventory(t, oldWebhook, downSlice), t0.Add(time.Second))
		want := BackendDown{Since: t0.Add(time.Second), Evidence: "first seen down by this scanner at 2026-03-10T12:00:01Z (up at its evaluation of 2026-03-10T12:00:00Z)"}
		require.Equal(t, map[string]BackendDown{key: want}, first)
		require.Equal(t, map[string]BackendDown{key: want}, s.trackBackends(dumpInventory(t, oldWebhook, downSlice), t0.Add(time.Minute)), "the date holds while it stays down")
		require.Empty(t, s.trackBackends(dumpInventory(t, oldWebhook, upSlice), t0.Add(2*time.Minute)), "forgotten once it is up")
		again := s.trackBackends(dumpInventory(t, oldWebhook, downSlice), t0.Add(3*time.Minute))
		require.Equal(t, t0.Add(3*time.Minute), again[key].Since, "the next outage starts its own clock")
	})
	t.Run("down at the first look", func(t *testing.T) {
		s := &Scanner{}
		require.Equal(t, map[string]BackendDown{key: {Since: time.Date(2025, 8, 22, 12, 0, 1, 0, time.UTC), Evidence: "EndpointSlice policy/policy-webhook-x7k2p created"}},
			utc(s.trackBackends(dumpInventory(t, oldWebhook, downSlice), t0)), "dated from its objects")
	})
}

// utc is m with its times in UTC, to compare them with require.Equal.
func utc(m map[string]BackendDown) map[string]BackendDown {
	for k, v := range m {
		v.Since = v.Since.UTC()
		m[k] = v
	}
	return m
}
