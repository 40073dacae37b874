package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/snapshot"
)

// TestPolicyThresholdsReachEveryRule: a policy threshold of a rule added by issue 30 reaches the threshold its rule
// reads; the Kustomization rules share one margin, which takes the smallest of theirs.
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

// TestPolicyReloadSaysAThresholdChangeWaitsForARestart: the watches take their thresholds at start, so a reloaded
// policy that changes one is in force for everything else at once, and serve says which rules' thresholds wait for
// a restart; a reload that changes no threshold says nothing of them.
func TestPolicyReloadSaysAThresholdChangeWaitsForARestart(t *testing.T) {
	load := func(doc string) *policy.Policy {
		p, err := policy.LoadPolicy([]byte(doc))
		require.NoError(t, err)
		return p
	}
	for _, tt := range []struct {
		name, before, after string
		want                []string
	}{
		{"a threshold set", "rules: {}", "rules: {argocd/operation-stuck: {threshold: 20s}}", []string{"argocd/operation-stuck"}},
		{"a threshold changed, a Kustomization rule's removed", "rules: {argocd/operation-stuck: {threshold: 20s}, flux/kustomization-stale-revision: {threshold: 1m}}",
			"rules: {argocd/operation-stuck: {threshold: 30s}}", []string{"argocd/operation-stuck", "flux/kustomization-stale-revision"}},
		{"only a mode changed", "rules: {argocd/operation-stuck: {threshold: 20s}}", "rules: {argocd/operation-stuck: {threshold: 20s, mode: off}}", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, changedThresholds(load(tt.before), load(tt.after)))
			var logged strings.Builder
			h := &policyHolder{interval: time.Millisecond, source: "test", log: slog.New(slog.NewJSONHandler(&logged, nil))}
			h.cur.Store(load(tt.before))
			ctx, cancel := context.WithCancel(context.Background())
			h.load = func(context.Context) (*policy.Policy, error) { cancel(); return load(tt.after), nil }
			require.NoError(t, h.reload(ctx))
			if tt.want == nil {
				require.NotContains(t, logged.String(), "thresholds changed")
			} else {
				require.Contains(t, logged.String(), `"msg":"policy thresholds changed: they take effect when serve restarts`)
				rules, err := json.Marshal(tt.want)
				require.NoError(t, err)
				require.Contains(t, logged.String(), `"rules":`+string(rules))
			}
		})
	}
}
