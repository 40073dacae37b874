package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	"github.com/syncmedic/syncmedic/notify"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/notify/webhook"
	"github.com/syncmedic/syncmedic/policy"
)

// webhookSink records the incident IDs a real webhook notifier posts.
type webhookSink struct {
	mu  sync.Mutex
	ids []string
}

func (s *webhookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var ev struct {
		Incident struct {
			ID string `json:"id"`
		} `json:"incident"`
	}
	_ = json.Unmarshal(b, &ev)
	s.mu.Lock()
	s.ids = append(s.ids, ev.Incident.ID)
	s.mu.Unlock()
}

func (s *webhookSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// The policy's routes decide, through the real tracker, dispatcher and notifiers, which destinations and which Slack
// channel each incident reaches; a destination an incident is not routed to counts it as delivered, so nothing
// waits in the outbox for it.
func TestRoutesPickTheDestinationsAndTheChannel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pol, err := policy.LoadPolicy([]byte(`resolveAfter: 1
routes:
  - name: payments-webhook-only
    match: {projects: [payments]}
    receivers: [webhook]
  - name: shop-channel
    match: {labels: {team: shop}}
    slackChannel: "#shop"
`))
	require.NoError(t, err)
	store := &incident.MemoryStore{}
	d := notify.NewDispatcher(notify.DispatcherOptions{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	tr, err := incident.NewTracker(ctx, incident.TrackerOptions{Store: store, Policy: func() *policy.Policy { return pol }, Publisher: d})
	require.NoError(t, err)

	slackSrv := slackrec.New(t)
	sl, err := slacknotify.New(slacknotify.Options{Token: "xoxb-test", Channel: "#incidents", Notes: tr, APIURL: slackSrv.GetAPIURL()})
	require.NoError(t, err)
	sink := &webhookSink{}
	hook := httptest.NewServer(sink)
	defer hook.Close()
	wh, err := webhook.New(webhook.Options{URL: hook.URL})
	require.NoError(t, err)
	d.Add(notify.Durable(notify.Destination{Name: "slack", Notifier: sl}, tr))
	d.Add(notify.Durable(notify.Destination{Name: "webhook", Notifier: wh}, tr))
	tr.ResumeDelivery(ctx, "slack", "webhook")
	go d.Run(ctx)

	finding := func(app, project string, labels map[string]string) syncmedic.Finding {
		return syncmedic.NewFinding(syncmedic.RuleOperationStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD,
			Group: "argoproj.io", Version: "v1alpha1", Kind: "Application", Namespace: "argocd", Name: app,
			App: app, AppNamespace: "argocd", Project: project, Labels: labels}, "the sync of "+app+" is stuck")
	}
	tr.Observe(ctx, "argocd//argocd/billing", []syncmedic.Finding{finding("billing", "payments", nil)})
	tr.Observe(ctx, "argocd//argocd/cart", []syncmedic.Finding{finding("cart", "default", map[string]string{"team": "shop"})})
	tr.Observe(ctx, "argocd//argocd/web", []syncmedic.Finding{finding("web", "default", nil)})
	ids := map[string]string{}
	for _, inc := range tr.Incidents() {
		ids[inc.Finding.Object.App] = inc.ID
	}
	require.Len(t, ids, 3)

	require.Eventually(t, func() bool { return len(sink.got()) == 3 && len(slackSrv.Roots()) == 2 }, 10*time.Second, 10*time.Millisecond,
		"webhook got %v; Slack got %s", sink.got(), slackSrv.Summary())
	t.Run("an incident routed to the webhook only is not posted to Slack", func(t *testing.T) {
		require.Empty(t, slackSrv.Roots("billing"))
		require.Contains(t, sink.got(), ids["billing"])
	})
	t.Run("a label route puts the thread in its channel, the others stay in --slack-channel", func(t *testing.T) {
		require.Equal(t, "#shop", slackSrv.Roots("cart")[0].Channel)
		require.Equal(t, "#incidents", slackSrv.Roots("web")[0].Channel)
	})
	t.Run("nothing waits in the outbox for a destination the incident is not routed to", func(t *testing.T) {
		require.Eventually(t, func() bool {
			incs, err := store.Load(ctx)
			require.NoError(t, err)
			for _, inc := range incs {
				if len(inc.Outbox) > 0 {
					return false
				}
			}
			return true
		}, 10*time.Second, 10*time.Millisecond)
	})
}
