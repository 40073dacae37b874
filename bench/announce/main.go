package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

type config struct {
	healthy, stuck, parallel, workers int
	threshold                         time.Duration
	version, syncmedicBin             string
	setupTimeout, announceTimeout     time.Duration
	verbose                           bool
	logs                              string
	burst                             bool
	triggerEvery                      time.Duration
	appResync                         time.Duration
	controllerLog                     string
	statusProcs, opProcs              int
	serveArgs                         string
	results                           string
}

func main() {
	var c config
	flag.IntVar(&c.healthy, "healthy", 2000, "healthy Applications (synced by the real controller, automated sync)")
	flag.IntVar(&c.stuck, "stuck", 50, "stuck Applications (a sync waiting for an old hook held by a foreign finalizer)")
	flag.IntVar(&c.parallel, "parallel", 8, "stuck applications set up at once")
	flag.IntVar(&c.workers, "workers", 16, "goroutines creating the healthy applications")
	flag.DurationVar(&c.threshold, "threshold", 10*time.Second, "argocd/hook-not-deleted threshold in serve's policy")
	flag.StringVar(&c.version, "argocd-version", testenv.ArgoCDV3, "Argo CD version of the stack (bin/argocd-<version>)")
	flag.StringVar(&c.syncmedicBin, "syncmedic", "", "syncmedic binary to run (default: go build ./cmd/syncmedic)")
	flag.DurationVar(&c.setupTimeout, "setup-timeout", 45*time.Minute, "how long the healthy applications may take to sync")
	flag.DurationVar(&c.announceTimeout, "announce-timeout", 3*time.Minute, "how long after the last stuck application's threshold every announcement may take")
	flag.BoolVar(&c.verbose, "v", false, "print each stuck application's figures")
	flag.BoolVar(&c.burst, "burst", false, "set the stuck applications up with testenv.ScenarioRealHookHeldByForeignFinalizer, -parallel at a time, creation and stuck sync in one go (their thresholds cross amid the creation of the others), instead of creating them all first and then making one stuck every -trigger-every")
	flag.DurationVar(&c.triggerEvery, "trigger-every", 500*time.Millisecond, "interval between two stuck syncs (without -burst)")
	flag.DurationVar(&c.appResync, "app-resync", 3*time.Minute, "the application-controller's --app-resync (Argo CD's default: 3m; the test suites' stack uses 10s)")
	flag.StringVar(&c.controllerLog, "controller-loglevel", "info", "the application-controller's --loglevel (the test suites' stack uses debug)")
	flag.IntVar(&c.statusProcs, "status-processors", 20, "the application-controller's --status-processors (Argo CD's default: 20; the test suites' stack uses 4)")
	flag.IntVar(&c.opProcs, "operation-processors", 10, "the application-controller's --operation-processors (Argo CD's default: 10; the test suites' stack uses 4)")
	flag.StringVar(&c.serveArgs, "serve-args", "", "more flags for syncmedic serve, space-separated (e.g. \"--argocd-live-reads 16\")")
	flag.StringVar(&c.results, "results", benchutil.ResultsDir, "directory the run's result file (JSON) is written to; bench/README quotes these files")
	flag.StringVar(&c.logs, "logs", "", "copy the logs of syncmedic serve (info level) and of the Argo CD components to this directory at the end")
	flag.Parse()
	if c.healthy < 0 || c.stuck <= 0 || c.parallel <= 0 || c.workers <= 0 || c.threshold <= 0 {
		fmt.Fprintln(os.Stderr, "announce: -stuck, -parallel, -workers and -threshold must be positive, -healthy not negative")
		os.Exit(2)
	}
	os.Exit(testenv.Standalone("announce", func(t testing.TB) { run(t, c) }))
}

// progress prints a line about the setup on stderr (the report goes to stdout).
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func run(t testing.TB, c config) {
	fmt.Printf("machine: %s\n", benchutil.Machine())
	bin := c.syncmedicBin
	if bin == "" {
		progress("building ./cmd/syncmedic")
		bin = buildSyncmedic(t)
	}

	progress("starting kube-apiserver, etcd, kube-controller-manager and Argo CD %s", c.version)
	begin := time.Now()
	env := testenv.KubeWithControllers(t)
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: c.version, AppResync: c.appResync,
		ControllerLogLevel: c.controllerLog, StatusProcessors: c.statusProcs, OperationProcessors: c.opProcs})
	fmt.Printf("control plane: kube-apiserver, etcd, kube-controller-manager v1.31.0; Argo CD %s (application-controller, repo-server, argocd-server, redis) started in %s (Argo CD stack %s)\n",
		c.version, time.Since(begin).Round(time.Second), stack.StartedIn.Round(time.Second))
	if c.verbose {
		fmt.Printf("argocd-server %s, redis %s, Argo CD namespace %s\n", stack.Addr, stack.Redis, stack.Namespace)
	}
	fmt.Printf("application-controller: --app-resync %s --status-processors %d --operation-processors %d --loglevel %s\n",
		c.appResync, c.statusProcs, c.opProcs, c.controllerLog)

	progress("creating %d healthy applications", c.healthy)
	begin = time.Now()
	createFleet(t, stack, c.healthy, c.workers)
	created := time.Since(begin)
	waitFleet(t, stack, c.healthy, c.setupTimeout)
	fmt.Printf("healthy: %d applications (one ConfigMap each, automated sync) created in %s, all Synced, Healthy and Succeeded after %s\n",
		c.healthy, created.Round(time.Second), time.Since(begin).Round(time.Second))

	slack := newTimedSlack(t)
	policy := fmt.Sprintf("rules:\n  %s: {mode: notify, threshold: %s}\n", syncmedic.RuleHookNotDeleted, c.threshold)
	progress("starting syncmedic serve")
	serve := startServe(t, bin, stack, policy, slack.apiURL(), strings.Fields(c.serveArgs))
	if c.serveArgs != "" {
		fmt.Printf("serve: more flags: %s\n", c.serveArgs)
	}
	waitHeld(t, serve, c.healthy)
	watch := startOpWatch(t, stack)

	var stuck []stuckApp
	var probe *treeProbe
	loadBefore := loadAverage()
	if c.burst {
		progress("making %d applications stuck, %d at a time (-burst)", c.stuck, c.parallel)
		begin = time.Now()
		stuck = makeStuck(t, stack, c.stuck, c.parallel)
		fmt.Printf("stuck (-burst): %d of %d applications created and waiting for an old hook Job held by %s, set up in %s\n",
			len(stuck), c.stuck, testenv.ForeignFinalizer, time.Since(begin).Round(time.Second))
	} else {
		progress("preparing %d applications (first sync with a PreSync hook), %d at a time", c.stuck, c.parallel)
		begin = time.Now()
		apps := prepareStuck(t, stack, c.stuck, c.parallel)
		fmt.Printf("prepared: %d of %d applications, first sync (PreSync hook Job) succeeded, in %s\n", len(apps), c.stuck,
			time.Since(begin).Round(time.Second))
		names := make([]string, len(apps))
		for i, a := range apps {
			names[i] = a.Name
		}
		probe = startTreeProbe(t, stack, func() []string { return names })
		loadBefore = loadAverage()
		progress("making them stuck, one every %s", c.triggerEvery)
		begin = time.Now()
		stuck = triggerStuck(t, apps, c.triggerEvery)
		fmt.Printf("stuck: %d applications waiting for an old hook Job held by %s (one more every %s, over %s)\n",
			len(stuck), testenv.ForeignFinalizer, c.triggerEvery, time.Since(begin).Round(time.Second))
	}

	roots := waitAnnounced(t, slack, stuck, time.Now().Add(c.threshold+c.announceTimeout))
	loadAfter := loadAverage()
	incidents, err := serve.incidents()
	if err != nil {
		t.Fatalf("reading the incident API: %v", err)
	}
	samples, problems := collect(t, stuck, roots, incidents, watch, string(syncmedic.RuleHookNotDeleted))
	live, _ := serve.metric("syncmedic_argocd_live_calls_total")
	events, _ := serve.metric("syncmedic_argocd_watch_events_total")
	held, _ := serve.metric("syncmedic_argocd_applications")
	cpu, _ := serve.metric("process_cpu_seconds_total")
	failed, timedOut := serve.liveFailures()
	var trees []time.Duration
	treeFails := -1
	if probe != nil {
		trees, treeFails = probe.results()
	}
	if c.logs != "" {
		if err := keepLogs(c.logs, serve, stack); err != nil {
			t.Errorf("keeping the logs: %v", err)
		}
	}

	r := report{threshold: c.threshold, samples: samples, stuck: len(stuck), healthy: c.healthy,
		roots: len(slack.roots()), incidents: len(incidents), liveCalls: live, watchEvents: events, held: held,
		serveCPU: cpu, liveFailed: failed, liveTimedOut: timedOut, trees: trees, treeFails: treeFails, load: loadBefore + " → " + loadAfter, verbose: c.verbose}
	var printed bytes.Buffer
	r.print(&printed)
	fmt.Print(printed.String())
	res := benchutil.NewResult("announce", os.Args[1:])
	res.LoadAverage = benchutil.LoadAverage{Start: loadBefore, End: loadAfter}
	for _, line := range strings.Split(strings.TrimSpace(printed.String()), "\n") {
		if name, value, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
			res.Add(name, "%s", value)
		}
	}
	if path, err := res.Write(c.results); err != nil {
		t.Errorf("writing the result: %v", err)
	} else {
		fmt.Printf("result: %s\n", path)
	}
	if others := r.roots - len(roots); others > 0 {
		problems = append(problems, fmt.Sprintf("%d root messages besides the first announcement of each stuck application (a healthy application announced, or one announced twice):\n%s",
			others, slack.rec.Summary()))
	}
	for _, p := range problems {
		t.Errorf("%s", p)
	}
	if t.Failed() {
		t.Logf("syncmedic serve log (last lines):\n%s", serve.tail(40))
	}
}

// waitHeld waits until serve's Argo CD watch holds at least n applications (it knows the whole fleet).
func waitHeld(t testing.TB, s *serveProc, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		held, err := s.metric("syncmedic_argocd_applications")
		if err == nil && int(held) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("syncmedic serve holds %v of %d applications after 5m (%v):\n%s", held, n, err, s.tail(30))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitAnnounced waits until every stuck app has a root message naming it, or the deadline; it returns the first
// root naming each app.
func waitAnnounced(t testing.TB, slack *timedSlack, stuck []stuckApp, deadline time.Time) map[string]post {
	t.Helper()
	for {
		found := map[string]post{}
		for _, p := range slack.roots() {
			for _, s := range stuck {
				if _, ok := found[s.app.Name]; !ok && p.mentions(s.app.Name) {
					found[s.app.Name] = p
				}
			}
		}
		if len(found) == len(stuck) || time.Now().After(deadline) {
			return found
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// keepLogs copies serve's log and the Argo CD components' logs into dir.
func keepLogs(dir string, serve *serveProc, stack *testenv.RealArgoCD) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := copyFile(serve.logPath, filepath.Join(dir, "syncmedic-serve.log")); err != nil {
		return err
	}
	for component, path := range stack.Logs {
		if err := copyFile(path, filepath.Join(dir, component+".log")); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
