package argo

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

// scenarioParallelism is how many scenarios run at once when `go test -parallel` is not given. The scenarios mostly
// wait (for controllers, thresholds and TTLs) rather than compute, so the default of GOMAXPROCS (2 in CI) left the
// two cores idle for most of the package's 28 minutes; at 4 it took 18 minutes on the same machine under load. On
// the real node at 4 (2026-11-27, machine otherwise idle) the package took 1,106 s: 195 s of tests that pause the
// shared controllers and run alone, then 911 s of parallel scenarios at a load average of about 1.3 on 2 cores; it
// is `make test`'s longest hold of the machine's one node, so more of them run at once.
const scenarioParallelism = 6

func TestMain(m *testing.M) { testenv.MainParallel(m, scenarioParallelism) }

// slackMessage is one chat.postMessage or chat.update the Slack test server accepted.
type slackMessage = slackrec.Message

// fakeSlack is the recording Slack test server, with this package's ways of reading it.
type fakeSlack struct{ *slackrec.Server }

func newFakeSlack(t *testing.T) *fakeSlack { return &fakeSlack{slackrec.New(t)} }

// all returns every message received, in order.
func (f *fakeSlack) all() []slackMessage { return f.All() }

// roots returns the root messages (new incidents).
func (f *fakeSlack) roots() []slackMessage { return f.Roots() }

// rootWithRule returns the first root message of an incident of rule (its Rule field, not a mention of the rule in
// the evidence of another), if any.
func (f *fakeSlack) rootWithRule(rule string) (slackMessage, bool) {
	for _, m := range f.roots() {
		if announcementOf(m).rule == syncmedic.RuleID(rule) {
			return m, true
		}
	}
	return slackMessage{}, false
}

// incident is what a root message announces: the rule of the incident and the object it is about, as syncmedic
// prints it (Kind.group/namespace/name: see appObject and jobObject).
type incident struct {
	rule   syncmedic.RuleID
	object string
}

func (i incident) String() string { return string(i.rule) + " on " + i.object }

// ruleField reads the rule of a root message from its Rule field: a link whose text is the rule ID, or the rule ID
// in backquotes for a rule without a page.
var ruleField = regexp.MustCompile("^\\*Rule\\*\n(?:<[^|]*\\|([^>]+)>|`([^`]+)`)$")

// announcementOf reads the rule (the Rule field of the blocks) and the object (the fallback text ends with it in
// parentheses) of a root message; a part it cannot read stays empty, which matches no expected incident.
func announcementOf(m slackMessage) incident {
	var in incident
	var blocks any
	_ = json.Unmarshal([]byte(m.Blocks), &blocks)
	for _, text := range texts(blocks) {
		if sub := ruleField.FindStringSubmatch(text); sub != nil {
			in.rule = syncmedic.RuleID(sub[1] + sub[2])
		}
	}
	if i := strings.LastIndex(m.Text, " ("); i >= 0 && strings.HasSuffix(m.Text, ")") {
		in.object = m.Text[i+2 : len(m.Text)-1]
	}
	return in
}

// texts returns every "text" string of decoded Slack blocks, depth first.
func texts(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if s, ok := v["text"].(string); ok {
			out = append(out, s)
		}
		for _, k := range []string{"text", "fields", "elements"} {
			if _, isString := v[k].(string); !isString {
				out = append(out, texts(v[k])...)
			}
		}
	case []any:
		for _, e := range v {
			out = append(out, texts(e)...)
		}
	}
	return out
}

// appObject is the Application of app as syncmedic names it in an incident.
func appObject(app *testenv.RealHookApp) string {
	return "Application.argoproj.io/" + app.Stack.Namespace + "/" + app.Name
}

// jobObject is the Job name of app's destination namespace as syncmedic names it in an incident.
func jobObject(app *testenv.RealHookApp, name string) string {
	return "Job.batch/" + app.Namespace + "/" + name
}

// announcedAbout waits until Slack got the root message of an incident of rule about object, checks that the
// policy's route picked its channel and that every incident announced so far is that one, and returns it.
func announcedAbout(t *testing.T, srv *fakeSlack, rule syncmedic.RuleID, object string, within time.Duration) slackMessage {
	t.Helper()
	return announcedIn(t, srv, routedChannel, incident{rule: rule, object: object}, within)
}

// announcedIn is announcedAbout for want in channel.
func announcedIn(t *testing.T, srv *fakeSlack, channel string, want incident, within time.Duration) slackMessage {
	t.Helper()
	var root slackMessage
	require.Eventually(t, func() bool {
		for _, m := range srv.roots() {
			if announcementOf(m) == want {
				root = m
				return true
			}
		}
		return false
	}, within, tick, "%s is announced on Slack (received: %s)", want, srv.summary())
	require.Equal(t, channel, root.Channel, "the policy's route picks the channel")
	onlyAnnounced(t, srv, want)
	return root
}

// onlyAnnounced checks that every root message Slack got is an incident of one of want: no other rule, no other
// object. How many of each is the caller's to check.
func onlyAnnounced(t *testing.T, srv *fakeSlack, want ...incident) {
	t.Helper()
	for _, m := range srv.roots() {
		require.Contains(t, want, announcementOf(m), "an incident announced besides %v: %q (received: %s)", want, m.Text, srv.summary())
	}
}

// replies returns the texts of the replies in the thread of ts, in order.
func (f *fakeSlack) replies(ts string) []string {
	var out []string
	for _, m := range f.all() {
		if m.Method == "chat.postMessage" && m.ThreadTS == ts {
			out = append(out, m.Text)
		}
	}
	return out
}

// summary lists what Slack received, one line per message, for conformance rows and failure messages.
func (f *fakeSlack) summary() string { return f.Summary() }

// serveDaemon is one `syncmedic serve` process watching one app of a stack, announcing on slack.
type serveDaemon struct {
	// addr is serve's --listen address (host:port): /readyz, /metrics and, with --api-token-file, the incident API.
	addr  string
	cmd   *exec.Cmd
	logs  *testenv.LockedBuffer
	done  chan struct{}
	slack *fakeSlack
}

// stop stops serve as a Pod's termination does (SIGTERM; SIGKILL after 30 s) and waits until it has exited.
func (d *serveDaemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.done
	}
}

// logLen is how much serve has logged so far: an offset for lookedAt.
func (d *serveDaemon) logLen() int { return d.logs.Len() }

// evaluation is one "evaluated application" debug line of serve.
type evaluation struct {
	findings   int
	hooksKnown bool
}

// evaluations returns serve's evaluations of app logged after offset from, in order.
func (d *serveDaemon) evaluations(app *testenv.RealHookApp, from int) []evaluation {
	line := regexp.MustCompile(`msg="evaluated application" (?:[^\n]* )?subject=argocd/[^ /]*/` +
		regexp.QuoteMeta(app.Stack.Namespace+"/"+app.Name) + ` findings=(\d+) hooksKnown=(true|false)`)
	var out []evaluation
	for _, sub := range line.FindAllStringSubmatch(d.logs.String()[from:], -1) {
		n, _ := strconv.Atoi(sub[1])
		out = append(out, evaluation{findings: n, hooksKnown: sub[2] == "true"})
	}
	return out
}

// lookedAt proves that the silence of a near miss is a judgement: it waits (up to announceWithin) for one more
// evaluation of app than serve had logged when called — so one made once the window had passed, with every
// threshold — and checks that serve evaluated app since offset from and found nothing each time. With hooks, serve
// must also have read the application's hook objects at least once (it does while an operation runs; a finished
// one's hooks are read only where a leaked finalizer is possible). It returns how many evaluations it saw.
func (d *serveDaemon) lookedAt(t *testing.T, app *testenv.RealHookApp, from int, hooks bool) int {
	t.Helper()
	now := d.logLen()
	require.Eventually(t, func() bool { return len(d.evaluations(app, now)) > 0 }, announceWithin, tick,
		"serve evaluates the application again after the window (debug log: evaluated application)")
	evals := d.evaluations(app, from)
	hooksRead := false
	for _, e := range evals {
		require.Zero(t, e.findings, "serve found something on the application during the window: %+v", evals)
		hooksRead = hooksRead || e.hooksKnown
	}
	require.True(t, hooksRead || !hooks, "serve read the application's hook objects at least once during the window: %+v", evals)
	return len(evals)
}

// startServe runs `syncmedic serve` against the stack's argocd-server (admin token, plaintext), watching only app
// (--argocd-selector), with policy as its policy file, announcing on a new Slack test server; it waits until
// /readyz answers 200. The daemon is killed when the test ends, and its output logged if the test failed.
func startServe(t *testing.T, app *testenv.RealHookApp, policy string) *fakeSlack {
	t.Helper()
	return startServeDaemon(t, app, policy).slack
}

// startServeDaemon is startServe returning the daemon, whose log tells what serve evaluated (lookedAt); extra
// flags come last and win (e.g. "--kube-checks=true").
func startServeDaemon(t *testing.T, app *testenv.RealHookApp, policy string, extra ...string) *serveDaemon {
	t.Helper()
	return startServeDaemonOn(t, app, newFakeSlack(t), policy, extra...)
}

// startServeDaemonOn is startServeDaemon announcing on srv: a serve started again after stop finds the threads of
// the one before (with the same --state-file).
func startServeDaemonOn(t *testing.T, app *testenv.RealHookApp, srv *fakeSlack, policy string, extra ...string) *serveDaemon {
	t.Helper()
	return startServeDaemonAt(t, app, srv, app.Stack.Addr, app.Stack.AdminToken(t), policy, extra...)
}

// startServeDaemonAt is startServeDaemonOn talking to the argocd-server at server (plaintext) with token.
func startServeDaemonAt(t *testing.T, app *testenv.RealHookApp, srv *fakeSlack, server, token, policy string, extra ...string) *serveDaemon {
	t.Helper()
	bin := testenv.SyncmedicBinary(t)
	stack := app.Stack
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	ports, err := testenv.FreePorts(1)
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	args := []string{"serve", "--listen", addr, "--log-format", "text", "--log-level", "debug",
		"--kubeconfig", stack.Env.Kubeconfig, "--kube-checks=false", "--flux-watch=false", "--flux-hmac-token-file", write("flux-hmac-token", "hmac-"+token),
		"--argocd-server", server, "--argocd-plaintext", "--argocd-token-file", write("argocd-token", token),
		"--argocd-selector", app.Selector(), "--argocd-live-resync", "1s",
		"--policy-file", write("policy.yaml", policy),
		"--slack-token-file", write("slack-token", "xoxb-conformance"), "--slack-channel", "#incidents",
		"--slack-api-url", srv.GetAPIURL()}
	args = append(args, extra...)
	d := &serveDaemon{addr: addr, logs: &testenv.LockedBuffer{}, done: make(chan struct{}), slack: srv}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	d.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, d.cmd.Start())
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.done
		if t.Failed() {
			t.Logf("syncmedic serve output:\n%s", d.logs.String())
			t.Logf("Slack received:\n%s", srv.summary())
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-d.done:
			return true
		default:
		}
		res, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "syncmedic serve did not become ready")
	select {
	case <-d.done:
		t.Fatalf("syncmedic serve exited: %s\n%s", d.cmd.ProcessState, d.logs.String())
	default:
	}
	return d
}
