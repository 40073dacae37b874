package slack

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	"github.com/syncmedic/syncmedic/notify"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
)

const testToken = "xoxb-111-222-topsecretbottoken"

func stuckHook(name string) syncmedic.Finding {
	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD,
		Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: name, App: "shop", Project: "default"},
		"hook Job "+name+" is stuck terminating: argocd.argoproj.io/hook-finalizer is never removed")
	f.Evidence = []syncmedic.Evidence{{Field: "metadata.finalizers", Value: "[argocd.argoproj.io/hook-finalizer]"}}
	f.Remedy = syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true,
		Description: "remove the hook finalizer through Argo CD PatchResource"}
	f.Links = []syncmedic.Link{{Title: "Open shop in Argo CD", URL: "https://argocd.example.com/applications/argocd/shop"}}
	return f
}

// rig is one syncmedic replica: a tracker over a store, publishing to a dispatcher with the Slack notifier.
type rig struct {
	tracker *incident.Tracker
	cancel  context.CancelFunc
	done    chan struct{}
}

type rigOptions struct {
	store     incident.Store
	policy    string
	remediers syncmedic.Remediers
	log       *slog.Logger
}

func startRig(t *testing.T, srv *slackrec.Server, o rigOptions) *rig {
	t.Helper()
	p, err := policy.LoadPolicy([]byte(o.policy))
	require.NoError(t, err)
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	disp := notify.NewDispatcher(notify.DispatcherOptions{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Log: o.log})
	r := &rig{cancel: cancel, done: make(chan struct{})}
	stage := remedy.NewRemediationStage(remedy.RemediationOptions{Remediers: o.remediers, Log: o.log})
	r.tracker, err = incident.NewTracker(ctx, incident.TrackerOptions{Store: o.store, Publisher: disp, Log: o.log,
		Remediation: stage, Policy: func() *policy.Policy { return p }})
	require.NoError(t, err)
	n, err := New(Options{Token: testToken, Channel: "#incidents", Notes: r.tracker, APIURL: srv.GetAPIURL()})
	require.NoError(t, err)
	disp.Add(notify.Destination{Name: "slack", Notifier: n})
	go func() { defer close(r.done); disp.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *rig) stop() {
	r.cancel()
	<-r.done
}

func succeeding() syncmedic.Remediers {
	return syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: syncmedic.RemedierFunc(
		func(_ context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
			return syncmedic.Outcome{Action: f.Remedy.Action, DryRun: dryRun, Changed: !dryRun,
				Steps: []string{"PatchResource batch/Job shop/" + f.Object.Name + ": test + remove finalizers/0"}}, nil
		})}
}

const autoPolicy = "rules:\n  argocd/hook-finalizer-stuck:\n    mode: auto\n"

func TestIncidentLifeInOneSlackThread(t *testing.T) {
	ctx := context.Background()
	srv := slackrec.New(t)
	r := startRig(t, srv, rigOptions{policy: autoPolicy, remediers: succeeding()})
	f := stuckHook("migrate")

	r.tracker.Observe(ctx, "argocd/shop", []syncmedic.Finding{f})
	for range 3 {
		r.tracker.Observe(ctx, "argocd/shop", nil)
	}
	require.Eventually(t, func() bool {
		roots := srv.Roots()
		if len(roots) != 1 {
			return false
		}
		_, replies := thread(srv, roots[0].TS)
		return len(replies) == 3
	}, 5*time.Second, 10*time.Millisecond)

	root := srv.Roots()[0]
	t.Run("one root message announces the incident", func(t *testing.T) {
		text := blocksText(t, root.Blocks)
		require.Contains(t, text, "Firing")
		require.Contains(t, text, "will apply `argocd/remove-hook-finalizer` automatically")
		require.Contains(t, text, "https://argocd.example.com/applications/argocd/shop")
	})
	updates, replies := thread(srv, root.TS)
	t.Run("the root is updated in place as the incident moves", func(t *testing.T) {
		require.Len(t, updates, 3)
		require.Contains(t, blocksText(t, updates[0].Blocks), "Remediating")
		require.Contains(t, blocksText(t, updates[2].Blocks), "Resolved")
	})
	t.Run("each step is a thread reply, in order", func(t *testing.T) {
		require.Contains(t, replies[0].Text, "Applying `argocd/remove-hook-finalizer`")
		require.Contains(t, replies[1].Text, "succeeded")
		require.Contains(t, replies[1].Text, "PatchResource batch/Job shop/migrate")
		require.Contains(t, replies[2].Text, "Resolved")
	})
}

func TestRestartMidIncidentContinuesTheSameThread(t *testing.T) {
	ctx := context.Background()
	srv := slackrec.New(t)
	store := &incident.FileStore{Path: filepath.Join(t.TempDir(), "incidents.json")}
	f := stuckHook("migrate")

	first := startRig(t, srv, rigOptions{store: store})
	first.tracker.Observe(ctx, "argocd/shop", []syncmedic.Finding{f})
	require.Eventually(t, func() bool {
		roots := srv.Roots()
		if len(roots) != 1 {
			return false
		}
		_, replies := thread(srv, roots[0].TS)
		return len(replies) == 1 // the dry-run record
	}, 5*time.Second, 10*time.Millisecond)
	first.stop()
	ts := srv.Roots()[0].TS

	second := startRig(t, srv, rigOptions{store: store})
	second.tracker.Observe(ctx, "argocd/shop", []syncmedic.Finding{f})
	for range 3 {
		second.tracker.Observe(ctx, "argocd/shop", nil)
	}
	require.Eventually(t, func() bool {
		_, replies := thread(srv, ts)
		return len(replies) == 2
	}, 5*time.Second, 10*time.Millisecond)
	require.Len(t, srv.Roots(), 1, "no duplicate root message after the restart")
	updates, replies := thread(srv, ts)
	require.Contains(t, replies[1].Text, "Resolved")
	require.Contains(t, blocksText(t, updates[len(updates)-1].Blocks), "Resolved")
}

func TestSlackOutageDelaysButLosesNothingAndKeepsOrder(t *testing.T) {
	ctx := context.Background()
	srv := slackrec.New(t)
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv.FailNext(slackrec.Status(500), slackrec.Status(502), slackrec.Status(503), slackrec.RateLimited("1"), slackrec.Status(500))
	r := startRig(t, srv, rigOptions{policy: autoPolicy, remediers: succeeding(), log: log})
	a, b := stuckHook("migrate"), stuckHook("seed")

	r.tracker.Observe(ctx, "argocd/shop", []syncmedic.Finding{a, b})
	for range 3 {
		r.tracker.Observe(ctx, "argocd/shop", nil)
	}
	start := time.Now()
	require.Eventually(t, func() bool {
		roots := srv.Roots()
		if len(roots) != 2 {
			return false
		}
		for _, root := range roots {
			if _, replies := thread(srv, root.TS); len(replies) != 3 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	require.Zero(t, srv.Pending())
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the 429's Retry-After was waited for")

	for _, root := range srv.Roots() {
		updates, replies := thread(srv, root.TS)
		require.Len(t, updates, 3)
		require.Contains(t, replies[0].Text, "Applying")
		require.Contains(t, replies[1].Text, "succeeded")
		require.Contains(t, replies[2].Text, "Resolved")
		require.Contains(t, blocksText(t, updates[2].Blocks), "Resolved", "the last update is the final state")
	}
	t.Run("the token appears in no log line and no message", func(t *testing.T) {
		require.Contains(t, logs.String(), "will be retried")
		require.NotContains(t, logs.String(), testToken)
		for _, m := range srv.All() {
			require.NotContains(t, m.Text+m.Blocks, testToken)
		}
	})
}

func TestSlackSaysWhetherToRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  func(w http.ResponseWriter)
		retry bool
		after time.Duration
	}{
		{"a server error is retried", slackrec.Status(500), true, 0},
		{"a rate limit is retried after Retry-After", slackrec.RateLimited("7"), true, 7 * time.Second},
		{"a client error is not retried", slackrec.Status(400), false, 0},
		{"ok:false is not retried", slackrec.OKFalse("channel_not_found"), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := slackrec.New(t)
			srv.FailNext(tc.fail)
			notes := &memNotes{}
			n, err := New(Options{Token: testToken, Channel: "#incidents", Notes: notes, APIURL: srv.GetAPIURL()})
			require.NoError(t, err)
			inc := incident.Incident{ID: "abc-1", State: incident.StateFiring, Finding: stuckHook("migrate")}
			retry, err := n.Notify(context.Background(), incident.Event{Kind: incident.EventOpened, Incident: inc})
			require.Error(t, err)
			require.Equal(t, tc.retry, retry)
			require.NotContains(t, err.Error(), testToken)
			after, ok := notify.RetryAfter(err)
			require.Equal(t, tc.after != 0, ok)
			require.Equal(t, tc.after, after)
		})
	}
}

func TestIncomingWebhookPostsOneMessagePerTransition(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	secretURL := srv.URL + "/services/T000/B000/webhooksecret"
	w, err := NewWebhook(WebhookOptions{URL: secretURL})
	require.NoError(t, err)
	inc := incident.Incident{ID: "abc-1", State: incident.StateFiring, Finding: stuckHook("migrate")}
	for _, kind := range []incident.EventKind{incident.EventOpened, incident.EventResolved} {
		if kind == incident.EventResolved {
			inc.State = incident.StateResolved
		}
		retry, err := w.Notify(context.Background(), incident.Event{Kind: kind, Incident: inc})
		require.NoError(t, err)
		require.False(t, retry)
	}
	require.Len(t, bodies, 2)
	require.Contains(t, bodies[1], "Resolved")

	t.Run("an unreachable webhook is retried and its URL is never shown", func(t *testing.T) {
		srv.Close()
		retry, err := w.Notify(context.Background(), incident.Event{Kind: incident.EventOpened, Incident: inc})
		require.Error(t, err)
		require.True(t, retry)
		require.NotContains(t, err.Error(), "webhooksecret")
	})
}

// memNotes is a Notes for notifier unit tests.
type memNotes struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *memNotes) Note(id, key string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[id+"/"+key]
	return v, ok
}

func (n *memNotes) SetNote(_ context.Context, id, key, value string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]string{}
	}
	n.m[id+"/"+key] = value
}

// syncBuffer is a bytes.Buffer safe for concurrent log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
