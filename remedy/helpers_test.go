// Test helpers shared by the tests of this package, as in package incident's tracker_test.go and metrics_test.go.

package remedy

import (
	"bytes"
	"context"
	"github.com/syncmedic/syncmedic/internal/testclock"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

// newClock is the tests' settable time source.
func newClock() *testclock.Clock { return testclock.New() }

// events collects published events.
type events struct {
	mu  sync.Mutex
	evs []incident.Event
}

func (e *events) Publish(ev incident.Event) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() }

func (e *events) kinds() []incident.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []incident.EventKind
	for _, ev := range e.evs {
		out = append(out, ev.Kind)
	}
	return out
}

func (e *events) last() incident.Event { e.mu.Lock(); defer e.mu.Unlock(); return e.evs[len(e.evs)-1] }

func hookFinding(ns, name string) syncmedic.Finding {
	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "batch", Version: "v1", Kind: "Job",
		Namespace: ns, Name: name, App: "shop", Project: "default"}, "hook Job "+name+" is stuck terminating")
	f.Evidence = []syncmedic.Evidence{{Field: "metadata.finalizers", Value: "argocd.argoproj.io/hook-finalizer"}}
	f.Remedy = syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true, Description: "remove the finalizer",
		Commands: []string{"kubectl -n " + ns + " patch job " + name + " --type json -p '[...]'"}}
	return f
}

func newTestTracker(t *testing.T, o incident.TrackerOptions) *incident.Tracker {
	t.Helper()
	tr, err := incident.NewTracker(context.Background(), o)
	require.NoError(t, err)
	return tr
}

// metricText renders gathered metrics in the Prometheus text format.
func metricText(t *testing.T, mfs []*dto.MetricFamily) string {
	t.Helper()
	var b bytes.Buffer
	for _, mf := range mfs {
		_, err := expfmt.MetricFamilyToText(&b, mf)
		require.NoError(t, err)
	}
	return b.String()
}
