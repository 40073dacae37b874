package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/snapshot"
)

func TestStartFlux(t *testing.T) {
	deps := func() serveDeps {
		return serveDeps{Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Thresholds: snapshot.DefaultThresholds(), Triggers: &triggers{}}
	}
	tests := []struct {
		name    string
		opts    fluxOptions
		wantErr string
	}{
		{name: "without a cluster only the receiver runs", opts: fluxOptions{enabled: true, bodyLimit: "1Mi", watch: true, tokenFile: writeFile(t, "token", "s3cret"), maxAge: flux.DefaultMaxEventAge}},
		{name: "a token file is read and trimmed", opts: fluxOptions{enabled: true, bodyLimit: "64Ki", tokenFile: writeFile(t, "token", "s3cret\n"), maxAge: flux.DefaultMaxEventAge}},
		{name: "without a token file the receiver is refused", opts: fluxOptions{enabled: true, bodyLimit: "1Mi", maxAge: flux.DefaultMaxEventAge},
			wantErr: "--flux-hmac-token-file is required"},
		{name: "the test-only opt-out runs the receiver unsigned", opts: fluxOptions{enabled: true, bodyLimit: "1Mi", unsigned: true, maxAge: flux.DefaultMaxEventAge}},
		{name: "a zero replay window is refused", opts: fluxOptions{enabled: true, bodyLimit: "1Mi", tokenFile: writeFile(t, "token", "s3cret"), maxAge: 0},
			wantErr: "--flux-event-max-age 0s: want a positive duration"},
		{name: "an empty token file is refused", opts: fluxOptions{enabled: true, bodyLimit: "1Mi", tokenFile: writeFile(t, "empty", " \n")}, wantErr: "is empty"},
		{name: "a missing token file is refused", opts: fluxOptions{enabled: true, bodyLimit: "1Mi", tokenFile: "/nonexistent/token"}, wantErr: "--flux-hmac-token-file"},
		{name: "a body limit that is not a quantity is refused", opts: fluxOptions{enabled: true, bodyLimit: "lots"}, wantErr: "--flux-body-limit"},

		{name: "a zero body limit is refused", opts: fluxOptions{enabled: true, bodyLimit: "0"}, wantErr: "--flux-body-limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := deps()
			parts, err := startFlux(context.Background(), d, &tt.opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Contains(t, parts.Handlers, flux.EventsPath)
			require.Len(t, parts.Sources, 1, "the receiver")
			require.Empty(t, parts.Remediers, "no cluster, no reconcile remedies")
			require.False(t, d.Triggers.Fire("flux/apps/redis"), "no watcher owns flux/ subjects without a cluster")
		})
	}
	t.Run("--flux=false runs nothing and needs no token", func(t *testing.T) {
		parts, err := startFlux(context.Background(), deps(), &fluxOptions{bodyLimit: "1Mi", maxAge: flux.DefaultMaxEventAge})
		require.NoError(t, err)
		require.False(t, parts.contributes(), "no receiver, no watch: %+v", parts)
	})
}
