package reliability

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
)

const slackToken = "xoxb-111-222-reliabilitytoken"

// replica is one syncmedic process as serve wires it: a tracker over a store, publishing through a dispatcher to
// the Slack notifier with durable delivery. stop cancels its context, as a restart does.
type replica struct {
	tracker *incident.Tracker
	cancel  context.CancelFunc
	done    chan struct{}
}

func startReplica(t *testing.T, store incident.Store, srv *fakeSlack, remediers syncmedic.Remediers, policyYAML string) *replica {
	t.Helper()
	p, err := policy.LoadPolicy([]byte(policyYAML))
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	disp := notify.NewDispatcher(notify.DispatcherOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Log: log})
	stage := remedy.NewRemediationStage(remedy.RemediationOptions{Remediers: remediers, Log: log})
	tr, err := incident.NewTracker(ctx, incident.TrackerOptions{Store: store, Publisher: disp, Log: log,
		Remediation: stage, Policy: func() *policy.Policy { return p }})
	require.NoError(t, err)
	n, err := slacknotify.New(slacknotify.Options{Token: slackToken, Channel: "#incidents", Notes: tr, APIURL: srv.GetAPIURL()})
	require.NoError(t, err)
	disp.Add(notify.Durable(notify.Destination{Name: "slack", Notifier: n}, tr))
	tr.ResumeDelivery(ctx, "slack")
	r := &replica{tracker: tr, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); disp.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// testWriter sends log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// hookFinding is an argocd/hook-finalizer-stuck finding about hook Job name of application app.
func hookFinding(app, name string) syncmedic.Finding {
	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD,
		Group: "batch", Version: "v1", Kind: "Job", Namespace: app, Name: name, App: app, Project: "default"},
		"hook Job "+name+" is stuck terminating: argocd.argoproj.io/hook-finalizer is never removed")
	f.Evidence = []syncmedic.Evidence{{Field: "metadata.finalizers", Value: "[argocd.argoproj.io/hook-finalizer]"}}
	f.Remedy = syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true,
		Description: "remove the hook finalizer through Argo CD PatchResource"}
	return f
}
