package flux_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxnc"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// scenarioParallelism is how many parallel scenarios run at once when `go test -parallel` is not given (the default
// is GOMAXPROCS, 2 in CI). The scenarios mostly wait for their controllers and thresholds: at 2, the package's
// parallel part took 330 s of a 436 s run (2026-11-27, warm, machine otherwise idle), at a load well under the two
// cores, and the four chart-Job scenarios of TestHelmChartJobsOnTheRealNode queued behind the others for 60 s and then
// ran two at a time for 193 s while holding the machine's one real node, which the packages after this one in
// `make test` wait for (hack/test-packages.sh).
const scenarioParallelism = 4

func TestMain(m *testing.M) { testenv.MainParallel(m, scenarioParallelism) }

// staleThreshold is the --stale-status-threshold of the scenarios about flux/helmrelease-stale-status. Not less: Ready's
// lastTransitionTime has a precision of one second, and a real helm-controller writes a release's status in several
// steps a few milliseconds apart, one of which can match the rule for a moment (v0.37.2 adopting a release wrote Ready
// True "Helm upgrade succeeded" 7 ms before observedGeneration and the history, in a cold `make test` run): with a
// one-second threshold, a transition written at 05:06:07.9 already counted as a second old at 05:06:08.0, and that
// moment was announced as a second incident.
const staleThreshold = "5s"

// slackPost is one chat.postMessage or chat.update the Slack test server accepted.
type slackPost = slackrec.Message

// fakeSlack is the recording Slack test server, with this package's ways of reading it.
type fakeSlack struct{ *slackrec.Server }

func newFakeSlack(t *testing.T) *fakeSlack { return &fakeSlack{slackrec.New(t)} }

// roots returns the root messages (new incidents) whose text or blocks contain every one of subs.
func (f *fakeSlack) roots(subs ...string) []slackPost { return f.Roots(subs...) }

// thread returns the replies to ts and the updates of ts, in order.
func (f *fakeSlack) thread(ts string) []slackPost { return f.Thread(ts) }

func (f *fakeSlack) all() []slackPost { return f.All() }

// announcedOnce waits up to within until exactly one root message announces rule about name, and returns it; msg
// says what was expected when it never comes.
func announcedOnce(t *testing.T, f *fakeSlack, rule syncmedic.RuleID, name string, within time.Duration, msg string) slackPost {
	t.Helper()
	var root slackPost
	require.Eventually(t, func() bool {
		roots := f.roots(string(rule), name)
		if len(roots) > 0 {
			root = roots[0]
		}
		return len(roots) == 1
	}, within, 200*time.Millisecond, msg)
	return root
}

// onlyAnnouncement fails t when d announced anything but root (a reply in a thread is not an announcement).
func onlyAnnouncement(t *testing.T, d *daemon, root slackPost) {
	t.Helper()
	for _, p := range d.slack.all() {
		if p.ThreadTS == "" && p.TS != root.TS {
			require.Failf(t, "another announcement", "%s", p.Text)
		}
	}
}

// daemon is one `syncmedic serve` process watching one namespace of a fluxreal stack, receiving its
// notification-controller's signed events, announcing on a Slack test server.
type daemon struct {
	addr  string
	slack *fakeSlack
	logs  *testenv.LockedBuffer
	done  chan struct{}
	cmd   *exec.Cmd
	bin   string
	kube  string
}

// startServe runs `syncmedic serve` for namespace ns with policy (YAML), the thresholds in args, Slack, and — when
// the stack has a notification-controller — a generic-hmac Provider and Alert forwarding the namespace's
// HelmRelease events to its receiver, signed with a token only the two share.
func startServe(t *testing.T, stack *fluxreal.Stack, ns, policy string, args ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	token := "hmac-" + ns
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	d := &daemon{slack: newFakeSlack(t), bin: testenv.SyncmedicBinary(t), kube: stack.Env.Kubeconfig}
	rest := append([]string{"--log-format", "text", "--log-level", "debug",
		"--kubeconfig", stack.Env.Kubeconfig, "--kube-checks=false", "--flux-namespaces", ns,
		"--flux-hmac-token-file", write("hmac-token", token),
		"--policy-file", write("policy.yaml", policy), "--state-file", filepath.Join(dir, "state.json"),
		"--slack-token-file", write("slack-token", "xoxb-test"), "--slack-channel", "#gitops", "--slack-api-url", d.slack.GetAPIURL(),
		"--kube-events=false"}, args...)
	// The listen port is picked free and bound a moment later: when another process took it meanwhile, serve exits
	// with a bind error and is started again on another port (three starts in all).
	for attempt := 1; ; attempt++ {
		d.addr, d.logs, d.done = freeAddr(t), &testenv.LockedBuffer{}, make(chan struct{})
		d.start(t, append([]string{"serve", "--listen", d.addr}, rest...))
		if d.waitReady(t) || !testenv.BindFailed(d.logs.String()) || attempt == 3 {
			break
		}
	}
	select {
	case <-d.done:
		t.Fatalf("syncmedic serve exited: %s\n%s", d.cmd.ProcessState, d.logs.String())
	default:
	}
	if stack.Notification != nil {
		fluxnc.ForwardHelmReleaseEvents(t, stack.Env.Client, ns, "http://"+d.addr+flux.EventsPath, []byte(token))
	}
	return d
}

// start starts `syncmedic` with args, stopped (SIGTERM, then SIGKILL) when t ends; its output is logged when t fails.
func (d *daemon) start(t *testing.T, args []string) {
	t.Helper()
	cmd, logs, done := exec.Command(d.bin, args...), d.logs, d.done
	d.cmd = cmd
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() && d.cmd == cmd {
			t.Logf("syncmedic serve output (tail):\n%s", tailString(logs.String(), 12000))
			for _, p := range d.slack.all() {
				t.Logf("slack %s ts=%s thread=%s: %s", p.Method, p.TS, p.ThreadTS, p.Text)
			}
		}
	})
}

// waitReady waits until serve answers 200 on /readyz (true) or has exited (false).
func (d *daemon) waitReady(t *testing.T) bool {
	t.Helper()
	ready := false
	require.Eventually(t, func() bool {
		select {
		case <-d.done:
			return true
		default:
		}
		res, err := http.Get("http://" + d.addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		ready = res.StatusCode == http.StatusOK
		return ready
	}, 60*time.Second, 50*time.Millisecond, "syncmedic serve did not become ready")
	return ready
}

// metric returns the sum of the samples of name (any labels matching every label filter, e.g. `result="accepted"`)
// on serve's /metrics.
func (d *daemon) metric(t *testing.T, name string, filters ...string) float64 {
	t.Helper()
	res, err := http.Get("http://" + d.addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') || !containsAll(rest, filters) {
			continue
		}
		var v float64
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			_, _ = fmt.Sscan(rest[i+1:], &v)
		}
		sum += v
	}
	return sum
}

// logLen is how much serve has logged so far: an offset for lookedAt.
func (d *daemon) logLen() int { return d.logs.Len() }

// lookedAt proves that the silence of a near miss is a judgement: serve evaluated HelmRelease ns/name at least once
// since its log held from bytes (its debug line "evaluated HelmRelease", docs/serve.md) and found nothing each time.
// It returns how many evaluations it saw, for the row.
func (d *daemon) lookedAt(t *testing.T, ns, name string, from int) int {
	t.Helper()
	line := regexp.MustCompile(`msg="evaluated HelmRelease" (?:[^\n]* )?subject=` + regexp.QuoteMeta("flux/"+ns+"/"+name) + ` findings=(\d+)`)
	evals := line.FindAllStringSubmatch(d.logs.String()[from:], -1)
	require.NotEmpty(t, evals, "serve evaluated HelmRelease %s/%s during the window", ns, name)
	for _, e := range evals {
		require.Equal(t, "0", e[1], "serve found something on HelmRelease %s/%s during the window", ns, name)
	}
	return len(evals)
}

// run runs the syncmedic binary with args (scan, fix) and returns its combined output and exit code.
func (d *daemon) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(d.bin, args...)
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
