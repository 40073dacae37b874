package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/incident"
)

func main() {
	n := flag.Int("n", 20000, "requests per target per round")
	c := flag.Int("c", 16, "concurrent clients (kept-alive connections)")
	rounds := flag.Int("rounds", 3, "alternating rounds per target; figures are summed over rounds")
	distinct := flag.Int("events", 500, "distinct events (one per HelmRelease) cycled through")
	stuckEvery := flag.Int("stuck-every", 100, "every N-th HelmRelease is stuck (DependencyNotReady): 1% by default")
	cpuprofile := flag.String("cpuprofile", "", "after the rounds, profile one extra receiver round into this file")
	results := flag.String("results", benchutil.ResultsDir, "directory the run's result file (JSON) is written to; bench/README quotes these files")
	flag.Parse()
	if *n <= 0 || *c <= 0 || *rounds <= 0 || *distinct <= 0 {
		fmt.Fprintln(os.Stderr, "receiverload: -n, -c, -rounds and -events must be positive")
		os.Exit(2)
	}
	res := benchutil.NewResult("receiverload", os.Args[1:])
	if err := run(*n, *c, *rounds, *distinct, *stuckEvery, *cpuprofile, res); err != nil {
		fmt.Fprintln(os.Stderr, "receiverload:", err)
		os.Exit(1)
	}
	path, err := res.Write(*results)
	if err != nil {
		fmt.Fprintln(os.Stderr, "receiverload:", err)
		os.Exit(1)
	}
	fmt.Printf("result: %s\n", path)
}

// run measures, prints the figures and adds them to res.
func run(n, c, rounds, distinct, stuckEvery int, cpuprofile string, res *benchutil.Result) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	token := []byte("receiverload-hmac-token")
	fx, err := newFixture(distinct, stuckEvery, token, time.Now())
	if err != nil {
		return err
	}
	target, err := startReceiver(ctx, fx, token)
	if err != nil {
		return err
	}
	recvURL, stopRecv, err := serve(target.receiver)
	if err != nil {
		return err
	}
	defer stopRecv()
	baseURL, stopBase, err := serve(baseline())
	if err != nil {
		return err
	}
	defer stopBase()

	fmt.Printf("machine: %s\n", benchutil.Machine())
	fmt.Printf("load: %d signed (sha256) Flux events per target per round, %d concurrent, %d rounds, %d distinct events, 1 in %d HelmReleases stuck\n",
		n, c, rounds, distinct, stuckEvery)
	client := newClient(c)
	// Every request body is distinct (fixture.batch), signed before its round: a round's events are sent to both
	// targets, the receiver seeing each body once.
	warm, err := fx.batch(min(n, 2000))
	if err != nil {
		return err
	}
	drive(client, baseURL, warm, len(warm), c) // warm-up, not counted
	target.measure(client, recvURL, warm, len(warm), c)

	var base, recv result
	for r := range rounds {
		order := []string{"baseline", "receiver"}
		if r%2 == 1 {
			order = []string{"receiver", "baseline"}
		}
		events, err := fx.batch(n)
		if err != nil {
			return err
		}
		for _, name := range order {
			if name == "baseline" {
				got := drive(client, baseURL, events, n, c)
				fmt.Printf("round %d baseline: %s\n", r+1, got)
				res.Add(fmt.Sprintf("round %d baseline", r+1), "%s", got)
				base.merge(got)
				continue
			}
			got := target.measure(client, recvURL, events, n, c)
			fmt.Printf("round %d receiver: %s\n", r+1, got)
			res.Add(fmt.Sprintf("round %d receiver", r+1), "%s", got)
			recv.merge(got)
		}
	}
	if cpuprofile != "" {
		events, err := fx.batch(n)
		if err != nil {
			return err
		}
		if err := profile(cpuprofile, func() { target.measure(client, recvURL, events, n, c) }); err != nil {
			return err
		}
	}
	open := 0
	for _, inc := range target.tracker.Incidents() {
		if inc.IsOpen() {
			open++
		}
	}
	want := (distinct + stuckEvery - 1) / max(stuckEvery, 1)
	cpuRatio := benchutil.Ratio(float64(recv.cpu)/float64(recv.n), float64(base.cpu)/float64(base.n))
	ratio := benchutil.Ratio(recv.rps(), base.rps())
	fmt.Printf("tracker: %d evaluations dispatched, %d open incidents (want %d: the stuck HelmReleases)\n",
		target.dispatched.Load(), open, want)
	fmt.Printf("baseline (bare net/http, reads body, 202): %s\n", &base)
	fmt.Printf("receiver (verify, decode, 202, dispatch):  %s\n", &recv)
	fmt.Printf("cpu per request (client included) receiver/baseline: %.2f\n", cpuRatio)
	fmt.Printf("receiver/baseline throughput ratio: %.2f\n", ratio)
	res.Add("evaluations dispatched", "%d", target.dispatched.Load())
	res.Add("open incidents", "%d (want %d)", open, want)
	res.Add("baseline", "%s", &base)
	res.Add("receiver", "%s", &recv)
	res.Add("cpu per request receiver/baseline", "%.2f", cpuRatio)
	res.Add("receiver/baseline throughput ratio", "%.2f", ratio)
	return nil
}

// receiverTarget is syncmedic's receiver wired as serve wires it, with a tracker behind it.
type receiverTarget struct {
	receiver   *flux.Receiver
	tracker    *incident.Tracker
	accepted   atomic.Int64
	dispatched atomic.Int64
}

// startReceiver builds the receiver (signature verification on, metrics registered) and runs it; each accepted
// HelmRelease event re-evaluates the release against fx.releases (standing in for the watcher's informer cache)
// and reports the findings to a real tracker.
func startReceiver(ctx context.Context, fx *fixture, token []byte) (*receiverTarget, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tr, err := incident.NewTracker(ctx, incident.TrackerOptions{Log: log})
	if err != nil {
		return nil, err
	}
	t := &receiverTarget{tracker: tr}
	th := flux.DefaultThresholds()
	rcv, err := flux.NewReceiver(flux.ReceiverOptions{Token: token, Log: log, Metrics: prometheus.NewRegistry(),
		Handle: func(ctx context.Context, ev *flux.Event) {
			if s := ev.Subject(); s != "" {
				if hr := fx.releases[s]; hr != nil {
					tr.Observe(ctx, s, flux.EvaluateRelease(observe(hr, fx.releases), time.Now(), th))
				}
			}
			t.dispatched.Add(1)
		}})
	if err != nil {
		return nil, err
	}
	t.receiver = rcv
	go func() { _ = rcv.Run(ctx, tr) }()
	return t, nil
}

// measure drives the receiver and counts the round until every accepted event has been dispatched.
func (t *receiverTarget) measure(client *http.Client, url string, events []signedEvent, n, c int) *result {
	before := t.dispatched.Load()
	cpu0, start := benchutil.CPUTime(), time.Now()
	res := drive(client, url, events, n, c)
	want := before + int64(res.statuses[http.StatusAccepted])
	deadline := time.Now().Add(time.Minute)
	for t.dispatched.Load() < want {
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "receiverload: %d events answered 202 were not dispatched within a minute (a 202 that queues nothing: a duplicate?)\n", want-t.dispatched.Load())
			os.Exit(1)
		}
		time.Sleep(100 * time.Microsecond)
	}
	res.elapsed, res.cpu = time.Since(start), benchutil.CPUTime()-cpu0
	return res
}

// observe builds the observation the Flux watcher builds from its cache: the release and its dependencies.
func observe(hr *helmv2.HelmRelease, releases map[string]*helmv2.HelmRelease) flux.ReleaseObservation {
	obs := flux.ReleaseObservation{Release: hr, Dependencies: map[types.NamespacedName]*helmv2.HelmRelease{}, DependenciesKnown: true}
	for _, d := range hr.Spec.DependsOn {
		nn := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
		if nn.Namespace == "" {
			nn.Namespace = hr.Namespace
		}
		if dep := releases[flux.ReleaseSubject(nn.Namespace, nn.Name)]; dep != nil {
			obs.Dependencies[nn] = dep
		}
	}
	return obs
}

func profile(path string, f func()) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		return err
	}
	f()
	pprof.StopCPUProfile()
	fmt.Printf("cpu profile of one receiver round: %s (go tool pprof -top %s)\n", path, path)
	return nil
}
