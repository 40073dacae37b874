package alertmanager

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func stuckHook(name string) syncmedic.Finding {
	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD,
		Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: name, App: "shop", Project: "default"},
		"hook Job "+name+" is stuck terminating: argocd.argoproj.io/hook-finalizer is never removed")
	f.Remedy = syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true,
		Description: "remove the hook finalizer through Argo CD PatchResource",
		Commands:    []string{`kubectl -n shop patch job ` + name + ` --type json -p '[{"op":"remove","path":"/metadata/finalizers/0"}]'`}}
	f.Links = []syncmedic.Link{{Title: "Open shop in Argo CD", URL: "https://argocd.example.com/applications/argocd/shop"}}
	return f
}

func goldenIncident() incident.Incident {
	opened := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	since := opened.Add(-25 * time.Minute)
	f := stuckHook("migrate")
	f.Since = since
	f.Evidence = []syncmedic.Evidence{
		{Field: "metadata.deletionTimestamp", Value: since.Format(time.RFC3339), Since: &since},
		{Field: "metadata.finalizers", Value: "[argocd.argoproj.io/hook-finalizer]"},
	}
	return incident.Incident{ID: f.Fingerprint + "-1773144000", Fingerprint: f.Fingerprint, Subject: "argocd/shop",
		State: incident.StateFiring, Finding: f, OpenedAt: opened, UpdatedAt: opened,
		Plan: "policy: argocd/hook-finalizer-stuck is notify only (dry-run); set it to auto to let syncmedic apply the fix"}
}

func golden(t *testing.T, name string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(v))
	file := filepath.Join("testdata", name+".golden.json")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test ./notify/alertmanager -update to create it")
	require.Equal(t, string(want), buf.String())
}

func TestAlertGolden(t *testing.T) {
	expires := time.Date(2026, 3, 10, 12, 9, 0, 0, time.UTC)
	resolved := goldenIncident()
	end := resolved.OpenedAt.Add(40 * time.Minute)
	resolved.State, resolved.ResolvedAt, resolved.UpdatedAt = incident.StateResolved, &end, end
	for _, tc := range []struct {
		name string
		inc  incident.Incident
	}{
		{"alert-firing", goldenIncident()},
		{"alert-resolved", resolved},
	} {
		t.Run(tc.name, func(t *testing.T) { golden(t, tc.name, NewAlert(tc.inc, expires)) })
	}
}

func TestNewAlert(t *testing.T) {
	expires := time.Date(2026, 3, 10, 12, 9, 0, 0, time.UTC)
	flux := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux,
		Kind: "HelmRelease", Namespace: "shop", Name: "web"}, "install retries exhausted")
	for _, tc := range []struct {
		name     string
		inc      incident.Incident
		labels   map[string]string
		absent   []string
		endsAt   time.Time
		noFix    bool
		generate string
	}{
		{name: "an open incident fires until it expires and names its object, app and fix",
			inc:    goldenIncident(),
			labels: map[string]string{"alertname": AlertName, "kind": "Job", "app": "shop", "project": "default"},
			endsAt: expires, generate: "https://argocd.example.com/applications/argocd/shop"},
		{name: "a HelmRelease without an app or a link has no empty labels and no generator URL",
			inc:    incident.Incident{ID: flux.Fingerprint + "-1", State: incident.StateFiring, Finding: flux, OpenedAt: expires.Add(-time.Hour)},
			labels: map[string]string{"kind": "HelmRelease", "name": "web", "release": "web", "tool": syncmedic.ToolFlux, "severity": flux.Severity.String()},
			absent: []string{"app", "project", "subject", "flux_owner"}, endsAt: expires, noFix: true},
		{name: "an object a HelmRelease applied names that release",
			inc: func() incident.Incident {
				i := goldenIncident()
				i.Finding.Object.App, i.Finding.Object.Project, i.Finding.Object.FluxOwner = "", "", "HelmRelease/shop/db"
				return i
			}(),
			labels: map[string]string{"release": "db", "flux_owner": "HelmRelease/shop/db"}, absent: []string{"app", "project"},
			endsAt: expires, generate: "https://argocd.example.com/applications/argocd/shop"},
		{name: "an incident that resolved before it opened (a clock step) still ends no earlier than it starts",
			inc: func() incident.Incident {
				i := goldenIncident()
				before := i.OpenedAt.Add(-time.Minute)
				i.State, i.ResolvedAt = incident.StateResolved, &before
				return i
			}(),
			endsAt: goldenIncident().OpenedAt, noFix: true, generate: "https://argocd.example.com/applications/argocd/shop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAlert(tc.inc, expires)
			for k, v := range tc.labels {
				require.Equal(t, v, a.Labels[k], "label %s", k)
			}
			for _, k := range tc.absent {
				require.NotContains(t, a.Labels, k)
			}
			for k, v := range a.Labels {
				require.NotEmpty(t, v, "label %s", k)
			}
			require.Equal(t, tc.inc.ID, a.Labels["incident"])
			require.Equal(t, tc.endsAt, a.EndsAt)
			require.Equal(t, tc.generate, a.GeneratorURL)
			if tc.noFix {
				require.NotContains(t, a.Annotations, "fix")
			} else {
				require.Equal(t, "syncmedic fix "+tc.inc.ID, a.Annotations["fix"])
			}
		})
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no URL", Options{}, "at least one URL is required"},
		{"a URL without a scheme", Options{URLs: []string{"alertmanager:9093"}}, "want http(s)://host:port"},
		{"a URL with a query", Options{URLs: []string{"http://am:9093/?x=1"}}, "no query"},
		{"a URL whose password would be printed", Options{URLs: []string{"ftp://user:s3cret@am:9093"}}, "ftp://user:xxxxx@am:9093"},
		{"both a bearer token and basic auth", Options{URLs: []string{"http://am:9093"}, BearerToken: "t", Username: "u", Password: "p"}, "not both"},
		{"a username without a password", Options{URLs: []string{"http://am:9093"}, Username: "u"}, "both a username and a password"},
		{"a negative resend interval", Options{URLs: []string{"http://am:9093"}, ResendInterval: -time.Second}, "must be positive"},
	} {
		t.Run(tc.name+" is refused with a message saying what to give", func(t *testing.T) {
			_, err := New(tc.o)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}
}

func TestEndpointKeepsThePathPrefix(t *testing.T) {
	for _, tc := range []struct{ name, url, want string }{
		{"a bare host posts to /api/v2/alerts", "http://am:9093", "http://am:9093/api/v2/alerts"},
		{"a path prefix behind a proxy is kept", "https://monitoring.example.com/alertmanager/", "https://monitoring.example.com/alertmanager/api/v2/alerts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := endpoint(tc.url)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestAlertmanagerSaysWhetherToRetry(t *testing.T) {
	inc := goldenIncident()
	ev := incident.Event{Kind: incident.EventOpened, Incident: inc}
	for _, tc := range []struct {
		name   string
		status []int // one per Alertmanager
		retry  bool
		ok     bool
	}{
		{name: "an accepted post succeeds", status: []int{200}, ok: true},
		{name: "a server error is retried", status: []int{503}, retry: true},
		{name: "a bad request (an alert Alertmanager refuses) is not retried", status: []int{400}},
		{name: "a post one replica of a cluster takes succeeds; the other gets it at the next refresh", status: []int{503, 200}, ok: true},
		{name: "a post no replica takes is retried if any failure is worth it", status: []int{400, 503}, retry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var urls []string
			for _, st := range tc.status {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					var alerts []Alert
					require.NoError(t, json.NewDecoder(r.Body).Decode(&alerts))
					require.Len(t, alerts, 1)
					require.Equal(t, "Bearer tok-789", r.Header.Get("Authorization"))
					http.Error(w, http.StatusText(st), st)
				}))
				t.Cleanup(srv.Close)
				urls = append(urls, srv.URL)
			}
			n, err := New(Options{URLs: urls, BearerToken: "tok-789"})
			require.NoError(t, err)
			retry, err := n.Notify(context.Background(), ev)
			require.Equal(t, tc.retry, retry)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.NotContains(t, err.Error(), "tok-789")
		})
	}
}

// trackerStub is the tracker's view Refresh reads (a fake for this unit test of which incidents are re-posted).
type trackerStub struct {
	incidents []incident.Incident
	follower  bool
}

func (s trackerStub) Incidents() []incident.Incident { return s.incidents }
func (s trackerStub) Leading() bool                  { return !s.follower }

func TestRefreshPostsWhatIsOpenAndJustResolved(t *testing.T) {
	now := time.Date(2026, 3, 10, 13, 0, 0, 0, time.UTC)
	open := goldenIncident()
	justResolved, longResolved, routedElsewhere := goldenIncident(), goldenIncident(), goldenIncident()
	justResolved.ID, longResolved.ID, routedElsewhere.ID = "just-resolved", "long-resolved", "routed-elsewhere"
	recent, old := now.Add(-time.Minute), now.Add(-time.Hour)
	justResolved.State, justResolved.ResolvedAt = incident.StateResolved, &recent
	longResolved.State, longResolved.ResolvedAt = incident.StateResolved, &old
	routedElsewhere.Route = &policy.Routing{Receivers: []string{"slack"}}
	// A silence held back the announcement of one (it was never posted: it must not be now), and came after the
	// other's (Alertmanager keeps it firing).
	heldBack, silencedLater := goldenIncident(), goldenIncident()
	heldBack.ID, heldBack.SilencedBy, heldBack.Unannounced = "held-back", "s1", true
	silencedLater.ID, silencedLater.SilencedBy = "silenced-later", "s1"
	all := []incident.Incident{open, justResolved, longResolved, routedElsewhere, heldBack, silencedLater}
	for _, tc := range []struct {
		name    string
		tracker trackerStub
		want    map[string]time.Time // incident → endsAt
	}{
		{name: "the leader re-posts open incidents firing and recently resolved ones resolved, only those routed here and announced",
			tracker: trackerStub{incidents: all},
			want:    map[string]time.Time{open.ID: now.Add(4 * time.Minute), "just-resolved": recent, "silenced-later": now.Add(4 * time.Minute)}},
		{name: "a follower posts nothing", tracker: trackerStub{incidents: all, follower: true}, want: map[string]time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			got := map[string]time.Time{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var alerts []Alert
				require.NoError(t, json.NewDecoder(r.Body).Decode(&alerts))
				mu.Lock()
				defer mu.Unlock()
				for _, a := range alerts {
					got[a.Labels["incident"]] = a.EndsAt
				}
			}))
			defer srv.Close()
			n, err := New(Options{URLs: []string{srv.URL}, Incidents: tc.tracker, Now: func() time.Time { return now }})
			require.NoError(t, err)
			require.Equal(t, DefaultResendInterval, n.RefreshInterval())
			require.NoError(t, n.Refresh(context.Background()))
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tc.want, got)
		})
	}
}
