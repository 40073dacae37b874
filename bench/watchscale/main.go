package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
)

// serverVersion is what the server process's Version API answers (the watcher's hook-leak check depends on it).
var serverVersion = flag.String("server-version", "v2.14.21+bench", "version the fake argocd-server reports (v2.14.21: the release whose API syncmedic builds on; try v3.1.8 for a v3 server)")

func main() {
	serve := flag.Bool("serve", false, "internal: run as the server process")
	apps := flag.Int("apps", 10000, "applications")
	updates := flag.Int("updates", -1, "updates in the burst after the initial ADDED events (default: one per application)")
	stuckEvery := flag.Int("stuck-every", 100, "every N-th application is stuck on a hook (1% by default)")
	hookedEvery := flag.Int("hooked-every", 10, "every N-th other application is healthy but its last sync ran a PreSync hook (0: none)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the last watcher round to this file (go tool pprof -top FILE)")
	rounds := flag.Int("rounds", 2, "rounds; each consumes the stream with the baseline and with the watcher, order alternating")
	results := flag.String("results", benchutil.ResultsDir, "directory the run's result file (JSON) is written to; bench/README quotes these files")
	flag.Parse()
	if *updates < 0 {
		*updates = *apps
	}
	if *apps <= 0 || *rounds <= 0 {
		fmt.Fprintln(os.Stderr, "watchscale: -apps and -rounds must be positive")
		os.Exit(2)
	}
	var err error
	if *serve {
		err = serveChild(*apps, *updates, *stuckEvery, *hookedEvery)
	} else {
		res := benchutil.NewResult("watchscale", os.Args[1:])
		if err = run(*apps, *updates, *stuckEvery, *hookedEvery, *rounds, *cpuprofile, res); err == nil {
			var path string
			if path, err = res.Write(*results); err == nil {
				fmt.Printf("result: %s\n", path)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "watchscale:", err)
		os.Exit(1)
	}
}

// run measures, prints the figures and adds them to res.
func run(apps, updates, stuckEvery, hookedEvery, rounds int, cpuprofile string, res *benchutil.Result) error {
	srv, err := startChild(apps, updates, stuckEvery, hookedEvery)
	if err != nil {
		return err
	}
	defer srv.stop()
	dir, err := os.MkdirTemp("", "watchscale")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nStuck, nHooked := countKinds(apps, stuckEvery, hookedEvery)
	want := int64(apps + updates)
	fmt.Printf("machine: %s\n", benchutil.Machine())
	fmt.Printf("server version: %s\n", *serverVersion)
	fmt.Printf("stream: %d applications (%d stuck on a hook, %d healthy whose last sync ran a hook, %d healthy without hooks) as ADDED, then %d updates: %d events per consumer per round, %d rounds\n",
		apps, nStuck, nHooked, apps-nStuck-nHooked, updates, want, rounds)
	res.Add("server version", "%s", *serverVersion)

	var base, wat measure
	var calls serverStats
	for r := range rounds {
		order := []bool{false, true}
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, isWatcher := range order {
			if err := srv.reset(); err != nil {
				return err
			}
			if !isWatcher {
				m, err := countOnly(srv.addr, dir, want)
				if err != nil {
					return err
				}
				fmt.Printf("round %d baseline: cpu/event %s, heap %+d B\n", r+1, perEvent(m), m.heap)
				res.Add(fmt.Sprintf("round %d baseline cpu/event", r+1), "%s", perEvent(m))
				base.add(m)
				continue
			}
			profile := ""
			if r == rounds-1 {
				profile = cpuprofile
			}
			m, err := watchAll(srv.addr, dir, want, int64(updates), profile)
			if err != nil {
				return err
			}
			if calls, err = srv.stats(); err != nil {
				return err
			}
			fmt.Printf("round %d watcher:  cpu/event %s, heap %+d B (%.0f B/app), %d evaluations, %d open incidents, server calls %v\n",
				r+1, perEvent(m), m.heap, float64(m.heap)/float64(apps), m.evaluations, m.open, calls.Methods)
			res.Add(fmt.Sprintf("round %d watcher cpu/event", r+1), "%s", perEvent(m))
			wat.add(m)
			wat.heap, wat.open, wat.watcher = m.heap, m.open, m.watcher
		}
	}
	report(apps, nStuck, base, wat, calls, res)
	return nil
}

func (m *measure) add(o measure) {
	m.events += o.events
	m.cpu += o.cpu
	m.evaluations += o.evaluations
	m.heap = o.heap
}

func perEvent(m measure) time.Duration {
	if m.events == 0 {
		return 0
	}
	return (m.cpu / time.Duration(m.events)).Round(10 * time.Nanosecond)
}

func countKinds(apps, stuckEvery, hookedEvery int) (nStuck, nHooked int) {
	for i := range apps {
		switch {
		case stuckEvery > 0 && i%stuckEvery == 0:
			nStuck++
		case hookedEvery > 0 && i%hookedEvery == 1:
			nHooked++
		}
	}
	return nStuck, nHooked
}

func report(apps, nStuck int, base, wat measure, calls serverStats, res *benchutil.Result) {
	fmt.Printf("baseline (Watch, decode, count): cpu/event %s over %d events; heap after the pass %+d B\n", perEvent(base), base.events, base.heap)
	fmt.Printf("watcher (argocd.Watcher + tracker): cpu/event %s over %d events (the List of %d applications included); heap in use per application %.0f B; %d open incidents for %d stuck applications; watcher stats %+v\n",
		perEvent(wat), wat.events, apps, float64(wat.heap)/float64(apps), wat.open, nStuck, wat.watcher)
	var total int64
	names := make([]string, 0, len(calls.Methods))
	for k, v := range calls.Methods {
		total += v
		names = append(names, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(names)
	fmt.Printf("argo cd api calls other than Watch (last watcher round): %d %v; by application: stuck %d, healthy with hooks %d, healthy %d, none named %d\n",
		total, names, calls.ByKind["stuck"], calls.ByKind["hooked"], calls.ByKind["healthy"], calls.ByKind["none"])
	ratio := benchutil.Ratio(float64(perEvent(wat)), float64(perEvent(base)))
	healthyCalls := calls.ByKind["healthy"] + calls.ByKind["hooked"]
	fmt.Printf("watch/baseline cpu ratio: %.2f\n", ratio)
	fmt.Printf("api calls for healthy apps: %d\n", healthyCalls)
	res.Add("baseline cpu/event", "%s", perEvent(base))
	res.Add("watcher cpu/event", "%s", perEvent(wat))
	res.Add("heap in use per application", "%.0f B", float64(wat.heap)/float64(apps))
	res.Add("open incidents", "%d for %d stuck applications", wat.open, nStuck)
	res.Add("api calls other than Watch, last watcher round", "%d %v", total, names)
	res.Add("api calls by application", "stuck %d, healthy with hooks %d, healthy %d, none named %d",
		calls.ByKind["stuck"], calls.ByKind["hooked"], calls.ByKind["healthy"], calls.ByKind["none"])
	res.Add("watch/baseline cpu ratio", "%.2f", ratio)
	res.Add("api calls for healthy apps", "%d", healthyCalls)
}
