package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/notify"
)

func event() incident.Event {
	f := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux,
		Kind: "HelmRelease", Namespace: "shop", Name: "web"}, "install retries exhausted")
	return incident.Event{Kind: incident.EventOpened, At: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC),
		Incident: incident.Incident{ID: f.Fingerprint + "-1", Fingerprint: f.Fingerprint, State: incident.StateFiring, Finding: f}}
}

func TestWebhookPostsTheSignedIncident(t *testing.T) {
	secret := []byte("s3cr3t-hmac-key")
	var got incident.Event
	var sig string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		sig = r.Header.Get(SignatureHeader)
		require.Equal(t, Sign(secret, body), sig)
		require.NoError(t, json.Unmarshal(body, &got))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n, err := New(Options{URL: srv.URL, Secret: secret})
	require.NoError(t, err)
	retry, err := n.Notify(context.Background(), event())
	require.NoError(t, err)
	require.False(t, retry)
	require.Equal(t, incident.EventOpened, got.Kind)
	require.Equal(t, syncmedic.RuleRetriesExhausted, got.Incident.Finding.Rule)
	require.Regexp(t, `^sha256=[0-9a-f]{64}$`, sig)
}

func TestWebhookUnsignedWithoutSecret(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Empty(t, r.Header.Get(SignatureHeader))
	}))
	defer srv.Close()
	n, err := New(Options{URL: srv.URL})
	require.NoError(t, err)
	_, err = n.Notify(context.Background(), event())
	require.NoError(t, err)
}

func TestWebhookSaysWhetherToRetry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header string
		retry  bool
		after  time.Duration
	}{
		{"a server error is retried", 503, "", true, 0},
		{"a rate limit is retried after Retry-After", 429, "3", true, 3 * time.Second},
		{"a client error is not retried", 400, "", false, 0},
		{"a refusal is not retried", 403, "", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				http.Error(w, "nope", tc.status)
			}))
			defer srv.Close()
			n, err := New(Options{URL: srv.URL + "/hook?token=urltoken123"})
			require.NoError(t, err)
			retry, err := n.Notify(context.Background(), event())
			require.Error(t, err)
			require.Equal(t, tc.retry, retry)
			after, _ := notify.RetryAfter(err)
			require.Equal(t, tc.after, after)
			require.NotContains(t, err.Error(), "urltoken123")
		})
	}
	t.Run("a network error is retried and does not show the URL", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		n, err := New(Options{URL: srv.URL + "/hook?token=urltoken123"})
		require.NoError(t, err)
		retry, err := n.Notify(context.Background(), event())
		require.Error(t, err)
		require.True(t, retry)
		require.NotContains(t, err.Error(), "urltoken123")
	})
}

func TestWebhookPayloadCarriesTheFixCommand(t *testing.T) {
	withRemedy := func(e incident.Event) incident.Event {
		e.Incident.Finding.Remedy = syncmedic.Remedy{Action: syncmedic.ActionFluxResetReconcile, Description: "reset the retries",
			Commands: []string{"flux reconcile helmrelease web -n shop --reset"}}
		return e
	}
	resolved := withRemedy(event())
	resolved.Kind, resolved.Incident.State = incident.EventResolved, incident.StateResolved
	for _, tc := range []struct {
		name   string
		ev     incident.Event
		golden string
		fix    string
	}{
		{name: "an open incident with an automatic remedy carries the exact syncmedic fix command next to the manual ones",
			ev: withRemedy(event()), golden: "payload-opened", fix: "syncmedic fix " + event().Incident.ID},
		{name: "a finding that only notifies has no fix command", ev: event()},
		{name: "a resolved incident has no fix command", ev: resolved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(r.Body)
				require.NoError(t, err)
				if tc.golden != "" {
					golden(t, tc.golden, body)
				}
				require.NoError(t, json.Unmarshal(body, &got))
			}))
			defer srv.Close()
			n, err := New(Options{URL: srv.URL})
			require.NoError(t, err)
			_, err = n.Notify(context.Background(), tc.ev)
			require.NoError(t, err)
			if tc.fix == "" {
				require.NotContains(t, got, "fix")
			} else {
				require.Equal(t, tc.fix, got["fix"])
			}
			require.Equal(t, string(tc.ev.Kind), got["kind"], "the event's own fields stay at the top level")
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares body, indented, with testdata/<name>.golden.json.
func golden(t *testing.T, name string, body []byte) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Indent(&buf, body, "", "  "))
	buf.WriteByte('\n')
	file := filepath.Join("testdata", name+".golden.json")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test ./notify/webhook -update to create it")
	require.Equal(t, string(want), buf.String())
}
