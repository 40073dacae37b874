package alertmanager

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/notify"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// realAlertmanager is bin/alertmanager (built by `make tools`) running on loopback, clustering off, routing every
// alert to a webhook receiver this test serves, as PagerDuty or Opsgenie would be.
type realAlertmanager struct {
	URL      string
	received *receiver
	start    func()
}

type amOptions struct {
	// user and password, when set, protect the API with basic auth (--web.config.file).
	user, password string
	// later leaves the process to be started by start(), so a test can post before Alertmanager is up.
	later bool
}

// amBinary returns bin/alertmanager, skipping in -short mode when it has not been built.
func amBinary(t *testing.T) string {
	t.Helper()
	dir, err := testenv.BinDir()
	require.NoError(t, err)
	bin := filepath.Join(dir, "alertmanager")
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skipf("%s is missing (run `make tools`); skipped in -short mode", bin)
		}
		t.Fatalf("%s is missing: run `make tools` (hack/alertmanager-tools.sh builds it)", bin)
	}
	return bin
}

func startAlertmanager(t *testing.T, o amOptions) *realAlertmanager {
	t.Helper()
	bin := amBinary(t)
	rec := newReceiver(t)
	dir, err := testenv.TempDir("alertmanager-")
	require.NoError(t, err)
	config := fmt.Sprintf(`route:
  receiver: pager
  group_by: [incident]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: pager
    webhook_configs:
      - url: %s
        send_resolved: true
`, rec.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(config), 0o600))
	args := func(port int) []string {
		return []string{"--config.file=" + filepath.Join(dir, "alertmanager.yml"), "--storage.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + loopback(port), "--cluster.listen-address=", "--log.level=debug"}
	}
	var web []string
	if o.user != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.password), bcrypt.MinCost)
		require.NoError(t, err)
		webConfig := fmt.Sprintf("basic_auth_users:\n  %s: %s\n", o.user, hash)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yml"), []byte(webConfig), 0o600))
		web = []string{"--web.config.file=" + filepath.Join(dir, "web.yml")}
	}
	am := &realAlertmanager{received: rec}
	// A later start publishes its URL first, on a port picked free now (nothing may listen there meanwhile: the
	// replica must find Alertmanager down), and a start that loses it cannot move to another one: the replica posts
	// to the published URL.
	var reserved []int
	if o.later {
		reserved = []int{freePort(t)}
		am.URL = "http://" + loopback(reserved[0])
	}
	var once sync.Once
	am.start = func() {
		once.Do(func() {
			// The port is picked free and bound by Alertmanager a moment later: one another process takes meanwhile
			// means a new start on another port (testenv.StartOnFreePorts).
			child, ports, err := testenv.StartOnFreePorts(testenv.FreePortsOptions{Name: "alertmanager", Ports: 1, Reserved: reserved,
				Start: func(ports []int) (testenv.PortChild, error) {
					return testenv.StartChild("alertmanager", exec.Command(bin, append(args(ports[0]), web...)...), 5*time.Second)
				},
				Ready: func(ports []int, c testenv.PortChild) error {
					return waitReady("http://"+loopback(ports[0])+"/-/ready", o.user, o.password, c.Exited(), 30*time.Second)
				},
			})
			require.NoError(t, err)
			t.Cleanup(child.Stop)
			if o.later {
				require.Equal(t, reserved, ports, "another process took the published port between its release and Alertmanager's bind")
			}
			am.URL = "http://" + loopback(ports[0])
		})
	}
	if !o.later {
		am.start()
	}
	return am
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitReady waits until url answers 200 (with basic auth when user is set), the process exits, or timeout passes.
func waitReady(url, user, password string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %s", url, resp.Status)
		}
		select {
		case <-exited:
			return fmt.Errorf("alertmanager exited before it was ready")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("alertmanager not ready after %s: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gettableAlert is what GET /api/v2/alerts answers for one alert (Alertmanager's models.GettableAlert, in part).
type gettableAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

// alert returns the alert of incident id as Alertmanager's API lists it (resolved alerts are not listed).
func (am *realAlertmanager) alert(t *testing.T, id string, user, password string) (gettableAlert, bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, am.URL+"/api/v2/alerts?filter="+url.QueryEscape(`incident="`+id+`"`), nil)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var alerts []gettableAlert
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&alerts))
	for _, a := range alerts {
		if a.Labels["incident"] == id {
			return a, true
		}
	}
	return gettableAlert{}, false
}

// receiver is the webhook receiver Alertmanager notifies (what PagerDuty would get): it records each alert's status.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []string // "<incident> <status>"
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var msg struct {
			Alerts []struct {
				Status string            `json:"status"`
				Labels map[string]string `json:"labels"`
			} `json:"alerts"`
		}
		if err := json.NewDecoder(req.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, a := range msg.Alerts {
			r.got = append(r.got, a.Labels["incident"]+" "+a.Status)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) saw(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.got {
		if g == s {
			return true
		}
	}
	return false
}

// replica is syncmedic's own chain: a tracker publishing to a dispatcher whose "alertmanager" destination is the
// notifier under test, durable and refreshed, as serve wires it.
type replica struct {
	tracker *incident.Tracker
	n       *Notifier
}

func startReplica(t *testing.T, o Options) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	disp := notify.NewDispatcher(notify.DispatcherOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	tracker, err := incident.NewTracker(ctx, incident.TrackerOptions{Publisher: disp})
	require.NoError(t, err)
	o.Incidents = tracker
	n, err := New(o)
	require.NoError(t, err)
	disp.Add(notify.Durable(notify.Destination{Name: DefaultName, Notifier: n, Refresher: n, Timeout: 5 * time.Second}, tracker))
	tracker.ResumeDelivery(ctx, DefaultName)
	done := make(chan struct{})
	go func() { defer close(done); disp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &replica{tracker: tracker, n: n}
}

func (r *replica) open(t *testing.T, f syncmedic.Finding) incident.Incident {
	t.Helper()
	r.tracker.Observe(context.Background(), "argocd/shop", []syncmedic.Finding{f})
	for _, inc := range r.tracker.Incidents() {
		if inc.Fingerprint == f.Fingerprint && inc.IsOpen() {
			return inc
		}
	}
	t.Fatalf("no incident opened for %s", f.Fingerprint)
	return incident.Incident{}
}

func TestIncidentsBecomeAlertsInARealAlertmanager(t *testing.T) {
	t.Run("an incident appears as a firing alert with its labels, reaches the receiver, and resolves when it resolves", func(t *testing.T) {
		am := startAlertmanager(t, amOptions{})
		r := startReplica(t, Options{URLs: []string{am.URL}})
		inc := r.open(t, stuckHook("migrate"))

		var a gettableAlert
		require.Eventually(t, func() bool {
			var ok bool
			a, ok = am.alert(t, inc.ID, "", "")
			return ok
		}, 20*time.Second, 50*time.Millisecond)
		require.Equal(t, "active", a.Status.State)
		for k, v := range map[string]string{"alertname": AlertName, "incident": inc.ID, "rule": string(syncmedic.RuleHookFinalizerStuck),
			"severity": inc.Finding.Severity.String(), "tool": syncmedic.ToolArgoCD, "kind": "Job", "namespace": "shop",
			"name": "migrate", "app": "shop", "project": "default", "subject": "argocd/shop"} {
			require.Equal(t, v, a.Labels[k], "label %s", k)
		}
		require.Equal(t, inc.Finding.Summary, a.Annotations["summary"])
		require.Equal(t, syncmedic.FixCommand(inc.ID), a.Annotations["fix"])
		require.WithinDuration(t, inc.OpenedAt, a.StartsAt, time.Millisecond, "startsAt is when the incident opened")
		require.True(t, a.EndsAt.After(time.Now().Add(time.Minute)), "an open incident's alert ends 4 resend intervals ahead, not now")
		require.Eventually(t, func() bool { return am.received.saw(inc.ID + " firing") }, 20*time.Second, 50*time.Millisecond,
			"Alertmanager routes it to its receiver")

		r.tracker.Gone(context.Background(), "argocd/shop")
		require.Eventually(t, func() bool { _, ok := am.alert(t, inc.ID, "", ""); return !ok }, 20*time.Second, 50*time.Millisecond,
			"resolved long before the 4 min endsAt it was posted with")
		require.Eventually(t, func() bool { return am.received.saw(inc.ID + " resolved") }, 20*time.Second, 50*time.Millisecond,
			"the receiver hears it resolved")
	})

	t.Run("an open incident is posted again before its endsAt, so Alertmanager does not resolve it", func(t *testing.T) {
		am := startAlertmanager(t, amOptions{})
		r := startReplica(t, Options{URLs: []string{am.URL}, ResendInterval: time.Second})
		inc := r.open(t, stuckHook("migrate"))
		var first gettableAlert
		require.Eventually(t, func() bool {
			var ok bool
			first, ok = am.alert(t, inc.ID, "", "")
			return ok
		}, 20*time.Second, 20*time.Millisecond)
		require.Eventually(t, func() bool {
			a, ok := am.alert(t, inc.ID, "", "")
			require.True(t, ok, "the alert expired: it was not posted again before its endsAt")
			return a.EndsAt.After(first.EndsAt.Add(5 * time.Second))
		}, 30*time.Second, 100*time.Millisecond, "the re-posts move endsAt forward, past the first post's endsAt")
		require.False(t, am.received.saw(inc.ID+" resolved"))
	})

	t.Run("an incident opened while Alertmanager is down reaches it once it is up", func(t *testing.T) {
		am := startAlertmanager(t, amOptions{later: true})
		r := startReplica(t, Options{URLs: []string{am.URL}})
		inc := r.open(t, stuckHook("migrate"))
		am.start()
		require.Eventually(t, func() bool { _, ok := am.alert(t, inc.ID, "", ""); return ok }, 30*time.Second, 50*time.Millisecond)
	})

	t.Run("with two Alertmanagers and one down, the incident reaches the other at once and the late one at the next refresh", func(t *testing.T) {
		up, late := startAlertmanager(t, amOptions{}), startAlertmanager(t, amOptions{later: true})
		r := startReplica(t, Options{URLs: []string{late.URL, up.URL}, ResendInterval: time.Second})
		inc := r.open(t, stuckHook("migrate"))
		require.Eventually(t, func() bool { _, ok := up.alert(t, inc.ID, "", ""); return ok }, 20*time.Second, 50*time.Millisecond)
		late.start()
		require.Eventually(t, func() bool { _, ok := late.alert(t, inc.ID, "", ""); return ok }, 30*time.Second, 50*time.Millisecond)
	})

	t.Run("basic auth is sent, and a wrong password is refused without a retry or a leak", func(t *testing.T) {
		am := startAlertmanager(t, amOptions{user: "syncmedic", password: "right-pass-123"})
		r := startReplica(t, Options{URLs: []string{am.URL}, Username: "syncmedic", Password: "right-pass-123"})
		inc := r.open(t, stuckHook("migrate"))
		require.Eventually(t, func() bool { _, ok := am.alert(t, inc.ID, "syncmedic", "right-pass-123"); return ok }, 20*time.Second, 50*time.Millisecond)

		wrong, err := New(Options{URLs: []string{am.URL}, Username: "syncmedic", Password: "wrong-pass-456"})
		require.NoError(t, err)
		retry, err := wrong.Notify(context.Background(), incident.Event{Kind: incident.EventOpened, Incident: inc})
		require.ErrorContains(t, err, "401")
		require.False(t, retry)
		require.NotContains(t, err.Error(), "wrong-pass-456")
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
