package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack/slacktest"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/notify"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// slackLog is slacktest with chat.postMessage/chat.update answering like Slack (a distinct ts per message) and
// recording every call.
type slackLog struct {
	mu    sync.Mutex
	seq   int
	posts []map[string]string
}

func (s *slackLog) handler(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		s.mu.Lock()
		defer s.mu.Unlock()
		m := map[string]string{"method": method, "ts": r.Form.Get("ts"), "thread_ts": r.Form.Get("thread_ts"), "text": r.Form.Get("text")}
		if method == "chat.postMessage" {
			s.seq++
			m["ts"] = fmt.Sprintf("1710072000.%06d", s.seq)
		}
		s.posts = append(s.posts, m)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C1", "ts": m["ts"]})
	}
}

func (s *slackLog) roots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.posts {
		if p["method"] == "chat.postMessage" && p["thread_ts"] == "" {
			out = append(out, p["ts"])
		}
	}
	return out
}

func (s *slackLog) replies(ts string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.posts {
		if p["thread_ts"] == ts {
			out = append(out, p["text"])
		}
	}
	return out
}

// replica is one syncmedic: elector, tracker over the shared ConfigMap, remediation, Slack, evaluating every 50ms.
type replica struct {
	elector *Elector
	calls   atomic.Int32
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

func startReplica(t *testing.T, env *testenv.Env, ns, id, slackURL string, stuck *atomic.Bool) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{cancel: cancel}
	var err error
	r.elector, err = New(Options{Client: env.Clientset, Namespace: ns, Name: "syncmedic", Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond})
	require.NoError(t, err)
	pol, err := policy.LoadPolicy([]byte("rules:\n  argocd/hook-finalizer-stuck:\n    mode: auto\n"))
	require.NoError(t, err)
	disp := notify.NewDispatcher(notify.DispatcherOptions{MinBackoff: 10 * time.Millisecond})
	stage := remedy.NewRemediationStage(remedy.RemediationOptions{Identity: id, Remediers: syncmedic.Remediers{
		syncmedic.ActionRemoveHookFinalizer: syncmedic.RemedierFunc(func(_ context.Context, f syncmedic.Finding, dry bool) (syncmedic.Outcome, error) {
			if !dry {
				r.calls.Add(1)
			}
			return syncmedic.Outcome{Action: f.Remedy.Action, DryRun: dry, Changed: !dry, Steps: []string{"PatchResource"}}, nil
		})}})
	tracker, err := incident.NewTracker(ctx, incident.TrackerOptions{
		Store:  &incident.ConfigMapStore{Client: env.Clientset, Namespace: ns, Name: "syncmedic-state"},
		Policy: func() *policy.Policy { return pol }, Publisher: disp, Remediation: stage, Leader: r.elector.IsLeader})
	require.NoError(t, err)
	sl, err := slacknotify.New(slacknotify.Options{Token: "xoxb-test", Channel: "#incidents", Notes: tracker, APIURL: slackURL})
	require.NoError(t, err)
	disp.Add(notify.Destination{Name: "slack", Notifier: sl})

	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD,
		Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "migrate", App: "shop"}, "hook Job migrate is stuck")
	f.Remedy = syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true}
	r.done.Add(3)
	go func() { defer r.done.Done(); _ = r.elector.Run(ctx) }()
	go func() { defer r.done.Done(); disp.Run(ctx) }()
	go func() {
		defer r.done.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				var fs []syncmedic.Finding
				if stuck.Load() {
					fs = []syncmedic.Finding{f}
				}
				tracker.Observe(ctx, "argocd/shop", fs)
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() {
	r.cancel()
	r.done.Wait()
}

func TestTwoReplicasOnlyTheLeaderActsAndFailoverContinuesTheThread(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	log := &slackLog{}
	srv := slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", log.handler("chat.postMessage"))
		c.Handle("/chat.update", log.handler("chat.update"))
	})
	srv.Start()
	defer srv.Stop()

	var stuck atomic.Bool
	stuck.Store(true)
	a := startReplica(t, env, ns, "syncmedic-a", srv.GetAPIURL(), &stuck)
	b := startReplica(t, env, ns, "syncmedic-b", srv.GetAPIURL(), &stuck)

	var ts string
	require.Eventually(t, func() bool {
		roots := log.roots()
		if len(roots) != 1 {
			return false
		}
		ts = roots[0]
		return len(log.replies(ts)) >= 2 // applying, succeeded
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, int32(1), a.calls.Load()+b.calls.Load(), "exactly one replica remediated")
	require.True(t, a.elector.IsLeader() != b.elector.IsLeader(), "exactly one replica leads")

	leader, follower := a, b
	if b.elector.IsLeader() {
		leader, follower = b, a
	}
	leader.stop()
	require.Eventually(t, follower.elector.IsLeader, 15*time.Second, 50*time.Millisecond, "the other replica takes over")

	stuck.Store(false)
	require.Eventually(t, func() bool {
		replies := log.replies(ts)
		return len(replies) > 0 && contains(replies[len(replies)-1], "Resolved")
	}, 15*time.Second, 50*time.Millisecond, "the new leader posts the resolution in the same thread")
	require.Len(t, log.roots(), 1, "no second root message after the failover")
	require.Equal(t, int32(1), a.calls.Load()+b.calls.Load(), "the new leader did not act again on a fixed incident")
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
