package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
	"github.com/syncmedic/syncmedic/notify/alertmanager"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/notify/webhook"
)

// hungServer is a real HTTP server that accepts connections and reads requests but sends no answer until answer
// is called; then it answers 202 and records each event it received.
type hungServer struct {
	*httptest.Server
	answering atomic.Bool
	attempts  atomic.Int32
	mu        sync.Mutex
	got       []string
}

func newHungServer(t *testing.T) *hungServer {
	t.Helper()
	h := &hungServer{}
	stop := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.attempts.Add(1)
		body, err := io.ReadAll(r.Body) // a read body lets the server notice the client hang up
		if err != nil || !h.answering.Load() {
			select {
			case <-r.Context().Done(): // the client gave up
			case <-stop:
			}
			return
		}
		var ev incident.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.got = append(h.got, ev.Incident.ID+":"+string(ev.Kind))
		h.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(func() { close(stop); h.Close() })
	return h
}

func (h *hungServer) answer() { h.answering.Store(true) }

func (h *hungServer) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

func newWebhook(t *testing.T, url string, client *http.Client) notify.Notifier {
	t.Helper()
	n, err := webhook.New(webhook.Options{URL: url, HTTPClient: client})
	require.NoError(t, err)
	return n
}

func event(id string, kind incident.EventKind) incident.Event {
	return incident.Event{Kind: kind, At: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), Incident: incident.Incident{ID: id}}
}

func TestAHungDestinationIsCutOffRetriedAndDeliveredOnceItAnswers(t *testing.T) {
	hung, up := newHungServer(t), newHungServer(t)
	up.answer()
	// The notifier's own client would wait an hour: the dispatcher's per-attempt deadline is what cuts it off.
	patient := notify.NewHTTPClient(time.Hour)
	reg := prometheus.NewRegistry()
	d := notify.NewDispatcher(notify.DispatcherOptions{AttemptTimeout: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Registerer: reg},
		notify.Destination{Name: "hung", Notifier: newWebhook(t, hung.URL, patient)},
		notify.Destination{Name: "up", Notifier: newWebhook(t, up.URL, patient)})
	want := []string{"a:opened", "a:resolved"}
	for _, w := range []incident.EventKind{incident.EventOpened, incident.EventResolved} {
		d.Publish(event("a", w))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	require.Eventually(t, func() bool { return len(up.received()) == 2 }, 10*time.Second, 10*time.Millisecond,
		"the destination that answers is not held up by the one that does not")
	require.Equal(t, want, up.received())
	require.Eventually(t, func() bool { return hung.attempts.Load() >= 3 }, 10*time.Second, 10*time.Millisecond,
		"each attempt on the silent server is cut off and retried")
	require.Empty(t, hung.received())
	require.GreaterOrEqual(t, counter(t, reg, "hung", "retried"), 2.0)
	require.Zero(t, counter(t, reg, "hung", "failed"), "an outage delays, it does not drop")

	hung.answer()
	require.Eventually(t, func() bool { return len(hung.received()) == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, want, hung.received(), "nothing dropped, order kept")
	require.Equal(t, 2.0, counter(t, reg, "hung", "sent"))
}

func TestNotifierClientsGiveUpOnAServerThatNeverAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(t *testing.T, url string, client *http.Client) notify.Notifier
	}{
		{name: "the webhook notifier", new: newWebhook},
		{name: "the Slack bot notifier", new: newSlackBot},
		{name: "the Slack incoming-webhook notifier", new: newSlackWebhook},
		{name: "the Alertmanager notifier", new: newAlertmanager},
	} {
		t.Run(tc.name+" times out on a silent server and asks for a retry", func(t *testing.T) {
			hung := newHungServer(t)
			n := tc.new(t, hung.URL, notify.NewHTTPClient(100*time.Millisecond))
			retry, err := n.Notify(context.Background(), event("a", incident.EventOpened))
			require.Error(t, err)
			require.ErrorContains(t, err, "Timeout")
			require.True(t, retry)
			require.Positive(t, hung.attempts.Load())
		})
	}
}

// counter reads syncmedic_notifications_total{notifier,result} from reg.
func counter(t *testing.T, reg *prometheus.Registry, notifier, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "syncmedic_notifications_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["notifier"] == notifier && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func newSlackBot(t *testing.T, url string, client *http.Client) notify.Notifier {
	t.Helper()
	notes, err := incident.NewTracker(context.Background(), incident.TrackerOptions{})
	require.NoError(t, err)
	n, err := slacknotify.New(slacknotify.Options{Token: "xoxb-test", Channel: "#incidents", Notes: notes, APIURL: url + "/", HTTPClient: client})
	require.NoError(t, err)
	return n
}

func newSlackWebhook(t *testing.T, url string, client *http.Client) notify.Notifier {
	t.Helper()
	n, err := slacknotify.NewWebhook(slacknotify.WebhookOptions{URL: url, HTTPClient: client})
	require.NoError(t, err)
	return n
}

func newAlertmanager(t *testing.T, url string, client *http.Client) notify.Notifier {
	t.Helper()
	n, err := alertmanager.New(alertmanager.Options{URLs: []string{url}, HTTPClient: client})
	require.NoError(t, err)
	return n
}
