package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"

	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
)

// measure is what one consumer cost over one pass of the stream.
type measure struct {
	events      int64
	cpu         time.Duration
	heap        int64 // live heap after the pass minus before it
	evaluations int64
	open        int // open incidents (watcher only)
	watcher     argocd.WatcherStats
}

// dial connects the way syncmedic serve does: argocd.Dial over plaintext gRPC.
func dial(addr, dir string) (*argocd.APIClient, error) {
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("bench-token\n"), 0o600); err != nil {
		return nil, err
	}
	return argocd.Dial(argocd.ClientOptions{ServerAddr: addr, PlainText: true, TokenFile: tokenFile, UserAgent: "syncmedic-watchscale"})
}

// countOnly is the baseline: the same Watch through the same client, decoding every event and only counting it.
func countOnly(addr, dir string, want int64) (measure, error) {
	c, err := dial(addr, dir)
	if err != nil {
		return measure{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heap0 := benchutil.HeapInUse()
	cpu0 := benchutil.CPUTime()
	stream, err := c.Watch(ctx, &application.ApplicationQuery{})
	if err != nil {
		return measure{}, err
	}
	var m measure
	for m.events < want {
		if _, err := stream.Recv(); err != nil {
			return m, fmt.Errorf("baseline watch after %d events: %w", m.events, err)
		}
		m.events++
	}
	m.cpu = benchutil.CPUTime() - cpu0
	m.heap = int64(benchutil.HeapInUse()) - int64(heap0)
	runtime.KeepAlive(stream)
	return m, nil
}

// watchAll runs syncmedic's argocd.Watcher into a real tracker until it has received the updates and gone quiet
// (no evaluation and no live-state call for a while), then measures it while it still holds every application.
// The watcher opens its watch with a resourceVersion, so the server sends it no ADDED burst: it learns the
// applications from its List instead. Its CPU is divided by want, the application states both consumers end up
// knowing (every application once, then every update), so the two figures compare the same work.
func watchAll(addr, dir string, want, updates int64, cpuprofile string) (measure, error) {
	c, err := dial(addr, dir)
	if err != nil {
		return measure{}, err
	}
	defer c.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := incident.NewTracker(ctx, incident.TrackerOptions{Log: log})
	if err != nil {
		return measure{}, err
	}
	w, err := argocd.NewWatcher(argocd.WatcherOptions{Client: c, Log: log})
	if err != nil {
		return measure{}, err
	}
	heap0 := benchutil.HeapInUse()
	if cpuprofile != "" {
		stop, err := startProfile(cpuprofile)
		if err != nil {
			return measure{}, err
		}
		defer stop()
	}
	cpu0 := benchutil.CPUTime()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, tr) }()
	if err := waitQuiet(w, updates, done); err != nil {
		return measure{}, err
	}
	m := measure{cpu: benchutil.CPUTime() - cpu0}
	m.heap = int64(benchutil.HeapInUse()) - int64(heap0)
	m.watcher = w.Stats()
	m.events, m.evaluations = want, m.watcher.Evaluations
	for _, inc := range tr.Incidents() {
		if inc.IsOpen() {
			m.open++
		}
	}
	cancel()
	return m, <-done
}

// waitQuiet polls the watcher's counters: done when every event arrived and nothing moved for 10 polls.
func waitQuiet(w *argocd.Watcher, want int64, done <-chan error) error {
	const poll = 20 * time.Millisecond
	var last argocd.WatcherStats
	quiet, stalled := 0, 0
	for {
		select {
		case err := <-done:
			return fmt.Errorf("watcher stopped: %v", err)
		case <-time.After(poll):
		}
		s := w.Stats()
		if s == last {
			quiet++
			stalled++
		} else {
			quiet, stalled, last = 0, 0, s
		}
		if s.Events >= want && quiet >= 10 {
			return nil
		}
		if stalled >= int(time.Minute/poll) {
			return errors.New("watcher made no progress for a minute: " + fmt.Sprintf("%+v", s))
		}
	}
}

// startProfile writes a CPU profile to path until the returned function is called.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
