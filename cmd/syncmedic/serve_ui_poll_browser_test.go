package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// streamRetry is how long the incident page waits before it tries the live stream again (retryMillis in
// ui/static/app.js).
const streamRetry = 30 * time.Second

// TestIncidentPagePollsWhileTheLiveStreamIsRefused puts a proxy in front of serve that refuses the incident API's
// live stream (?watch=true), as a proxy that does not pass streamed responses does, and follows the page in headless
// Chromium: it must keep the list current by polling, try the stream again on its own, and once the stream is back
// follow it alone — one stream, no poll beside it, and no second attempt left over from before a filter change.
func TestIncidentPagePollsWhileTheLiveStreamIsRefused(t *testing.T) {
	env, ns, first, serve := serveAStuckHook(t)

	var refuse atomic.Bool
	refuse.Store(true)
	var watches, polls atomic.Int64
	target, err := url.Parse(serve.Base)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // pass every server-sent event on at once
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == ui.IncidentsPath {
			if r.URL.Query().Get("watch") != "true" {
				polls.Add(1)
			} else if watches.Add(1); refuse.Load() {
				http.Error(w, "this proxy does not pass streams", http.StatusBadGateway)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { front.CloseClientConnections(); front.Close() })

	b := testenv.NewBrowser(t)
	b.Open(front.URL + ui.PagePath + "?state=open#token=" + url.QueryEscape(serve.Token))

	t.Run("with the stream refused the page shows the incidents by polling", func(t *testing.T) {
		b.WaitText(" shown · polling · updated")
		b.WaitText("Job.batch/" + ns + "/" + first.Name)
		require.EqualValues(t, 1, watches.Load(), "the page tried the stream once")
	})

	t.Run("an incident that opens while the stream is refused appears without a reload", func(t *testing.T) {
		second := testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "seed", App: ns + "-checkout"})
		b.WaitText("Job.batch/" + ns + "/" + second.Name)
		b.WaitText(" shown · polling · updated")
		require.GreaterOrEqual(t, polls.Load(), int64(2), "the list came from more than one poll")
	})

	// Changing the filter follows the stream again at once; the retry scheduled before the change must not also
	// fire (the page once kept the retry and the poll in one timer, lost the retry's handle, and so reconnected
	// twice, dropping the stream it had just opened).
	b.Click(`input[name=state][value=all]`)
	changed := time.Now()
	require.Eventually(t, func() bool { return watches.Load() == 2 }, 10*time.Second, 50*time.Millisecond,
		"changing the filter tried the stream again")
	b.WaitText(" shown · polling · updated")
	refuse.Store(false)

	t.Run("once the stream is passed again the page follows it by itself", func(t *testing.T) {
		var text string
		require.Eventually(t, func() bool {
			text = b.Text()
			return strings.Contains(text, " shown · live · updated")
		}, streamRetry+20*time.Second, 200*time.Millisecond, "the page never went live again; it shows:\n%s", text)
	})

	t.Run("it follows one stream and polls no more", func(t *testing.T) {
		live := polls.Load()
		// Past the moment the retry scheduled before the filter change would have fired.
		time.Sleep(time.Until(changed.Add(streamRetry + 5*time.Second)))
		time.Sleep(2 * time.Second)
		require.EqualValues(t, 3, watches.Load(), "streams opened: on load, on the filter change, on the retry after it")
		require.Equal(t, live, polls.Load(), "a poll ran beside the live stream")
		require.Contains(t, b.Text(), " shown · live · updated")
	})
}
