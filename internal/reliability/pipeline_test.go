package reliability

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/argocd"
	argoremedy "github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
)

// argoThresholds are short so that the faults happen around threshold crossings, in seconds.
var argoThresholds = rules.Thresholds{HookFinalizer: time.Second, HookCompletion: time.Second, OperationStuck: time.Second}

// argoPipeline is serve's Argo CD path in-process: watcher → tracker → remediation stage → Argo CD remedies, all
// through one client (as serve shares it), with a memory store.
type argoPipeline struct {
	watcher *argocd.Watcher
	tracker *incident.Tracker
}

func startArgoPipeline(t *testing.T, argo *testenv.ArgoCDServer, addr, policyYAML string) *argoPipeline {
	t.Helper()
	t.Setenv("ARGOCD_AUTH_TOKEN", argo.AdminToken(t))
	c, err := argocd.Dial(argocd.ClientOptions{ServerAddr: addr, PlainText: true})
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := policy.LoadPolicy([]byte(policyYAML))
	require.NoError(t, err)
	rem, err := argoremedy.NewRemedies(argoremedy.RemedierOptions{Client: c, Log: log, RetryBackoff: 50 * time.Millisecond, StopTimeout: 30 * time.Second})
	require.NoError(t, err)
	w, err := argocd.NewWatcher(argocd.WatcherOptions{Client: c, Thresholds: argoThresholds, Resync: 500 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Log: log})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stage := remedy.NewRemediationStage(remedy.RemediationOptions{Remediers: rem.Remediers(), Log: log, Workers: 2})
	tr, err := incident.NewTracker(ctx, incident.TrackerOptions{Policy: func() *policy.Policy { return p }, Remediation: stage, Log: log})
	require.NoError(t, err)
	done := make(chan struct{}, 2)
	go func() { stage.Run(ctx); done <- struct{}{} }()
	go func() {
		if err := w.Run(ctx, tr); err != nil {
			t.Errorf("watcher stopped: %v", err)
		}
		done <- struct{}{}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		_ = c.Close()
	})
	return &argoPipeline{watcher: w, tracker: tr}
}

// incidents returns the incidents of subject.
func (p *argoPipeline) incidents(subject string) []incident.Incident {
	var out []incident.Incident
	for _, inc := range p.tracker.Incidents() {
		if inc.Subject == subject {
			out = append(out, inc)
		}
	}
	return out
}

// realAttempts returns the attempts that were not dry-runs.
func realAttempts(inc incident.Incident) []incident.Attempt {
	var out []incident.Attempt
	for _, a := range inc.Attempts {
		if a.Result != incident.ResultDryRun {
			out = append(out, a)
		}
	}
	return out
}

// eventually polls cond until it holds, failing with cond's last explanation when timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	var why string
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		if ok, why = cond(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
