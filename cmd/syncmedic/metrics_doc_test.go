package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/snapshot"
)

// documentedMetrics reads docs/metrics.md's table rows "| `name` | type | `label`, … | meaning |" into name → labels
// (the labels column may say more, in words: only the words in backquotes count).
func documentedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	require.NoError(t, err)
	name := regexp.MustCompile("^`(syncmedic_[a-z0-9_]+)`$")
	label := regexp.MustCompile("`([a-z_]+)`")
	out := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			continue
		}
		m := name.FindStringSubmatch(strings.TrimSpace(cells[1]))
		if m == nil {
			continue
		}
		labels := []string{}
		for _, l := range label.FindAllStringSubmatch(cells[3], -1) {
			labels = append(labels, l[1])
		}
		sort.Strings(labels)
		out[m[1]] = labels
	}
	require.NotEmpty(t, out, "docs/metrics.md has no metric rows")
	return out
}

// servedMetrics builds serve's daemon, with Argo CD configured (never dialed: it connects when it runs), and returns
// the syncmedic_ metrics it registered with their labels.
func servedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	o := &serveOptions{thresholds: snapshot.DefaultThresholds()}
	cmd := serveCommand(o)
	require.NoError(t, cmd.ParseFlags(append([]string{"--argocd-server", "127.0.0.1:1", "--argocd-plaintext", "--argocd-instance", "prod",
		"--state-file", filepath.Join(t.TempDir(), "state.json")}, fluxTokenArgs(t)...)))
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	policy, err := newPolicyHolder(ctx, o, nil, log)
	require.NoError(t, err)
	d, err := newDaemon(ctx, o, nil, nil, policy, log)
	require.NoError(t, err)
	out := map[string][]string{}
	for name, labels := range d.reg.registered() {
		if strings.HasPrefix(name, "syncmedic_") {
			if labels == nil {
				labels = []string{}
			}
			out[name] = labels
		}
	}
	require.Contains(t, out, "syncmedic_argocd_applications", "the Argo CD component registered its metrics")
	return out
}

func TestEveryMetricIsDocumented(t *testing.T) {
	served, documented := servedMetrics(t), documentedMetrics(t)
	for name, labels := range served {
		t.Run(name+" is in docs/metrics.md with its labels", func(t *testing.T) {
			doc, ok := documented[name]
			require.True(t, ok, "docs/metrics.md does not document %s (labels %v): add a row", name, labels)
			require.Equal(t, labels, doc, "docs/metrics.md lists other labels for %s", name)
		})
	}
	for name := range documented {
		t.Run(name+" in docs/metrics.md is one serve exports", func(t *testing.T) {
			require.Contains(t, served, name, "docs/metrics.md documents %s, which serve does not register", name)
		})
	}
	t.Run("no metric carries the instance label Prometheus gives every target", func(t *testing.T) {
		for name, labels := range served {
			require.NotContains(t, labels, "instance", name)
		}
	})
}
