package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/snapshot"
)

// TestPolicyThresholdsReachEveryRule: a policy threshold of a rule added by issue 30 reaches the threshold its rule
// reads; the four Kustomization rules share one margin, which takes the smallest of theirs.
func TestPolicyThresholdsReachEveryRule(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		got    func(snapshot.Thresholds) time.Duration
		want   time.Duration
	}{
		{"a Kustomization rule's threshold", "rules: {flux/kustomization-stale-revision: {threshold: 20m}}",
			func(th snapshot.Thresholds) time.Duration { return th.Flux.Kustomization }, 20 * time.Minute},
		{"the smallest of the Kustomization rules' thresholds", "rules: {flux/kustomization-deletion-stuck: {threshold: 30m}, flux/kustomization-dependency-not-ready: {threshold: 2m}}",
			func(th snapshot.Thresholds) time.Duration { return th.Flux.Kustomization }, 2 * time.Minute},
		{"none set keeps the flag's", "rules: {}",
			func(th snapshot.Thresholds) time.Duration { return th.Flux.Kustomization }, snapshot.DefaultThresholds().Flux.Kustomization},
		{"argocd/rollingsync-stalled", "rules: {argocd/rollingsync-stalled: {threshold: 45m}}",
			func(th snapshot.Thresholds) time.Duration { return th.ArgoCD.RollingSyncStalled }, 45 * time.Minute},
		{"flux/helmrelease-ready-unknown", "rules: {flux/helmrelease-ready-unknown: {threshold: 7m}}",
			func(th snapshot.Thresholds) time.Duration { return th.Flux.ReadyUnknown }, 7 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := policy.LoadPolicy([]byte(tt.policy))
			require.NoError(t, err)
			th := snapshot.DefaultThresholds()
			applyPolicyThresholds(&th, p)
			require.Equal(t, tt.want, tt.got(th))
		})
	}
}
