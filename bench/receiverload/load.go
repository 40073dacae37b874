package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
	"github.com/syncmedic/syncmedic/flux"
)

// result is one target's figures for one round.
type result struct {
	n        int
	elapsed  time.Duration
	lat      []time.Duration
	statuses map[int]int
	errors   int
	cpu      time.Duration // process CPU time (client and server) during the round
}

func (r *result) rps() float64 { return float64(r.n) / r.elapsed.Seconds() }

// merge adds o's requests to r (rounds are summed: total requests over total time).
func (r *result) merge(o *result) {
	if r.statuses == nil {
		r.statuses = map[int]int{}
	}
	r.n += o.n
	r.elapsed += o.elapsed
	r.lat = append(r.lat, o.lat...)
	r.errors += o.errors
	r.cpu += o.cpu
	for k, v := range o.statuses {
		r.statuses[k] += v
	}
}

func (r *result) String() string {
	return fmt.Sprintf("%8.0f req/s  p50 %8s  p99 %8s  cpu/req %6s  statuses %v  errors %d", r.rps(),
		benchutil.Percentile(r.lat, 50).Round(time.Microsecond), benchutil.Percentile(r.lat, 99).Round(time.Microsecond),
		(r.cpu / time.Duration(max(r.n, 1))).Round(100*time.Nanosecond), r.statuses, r.errors)
}

// serve starts an http.Server for h on a free loopback port, with the receiver's timeouts, and returns its URL.
func serve(h http.Handler) (url string, shutdown func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(flux.EventsPath, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: flux.ReadHeaderTimeout, ReadTimeout: flux.ReadTimeout,
		WriteTimeout: flux.WriteTimeout, IdleTimeout: flux.IdleTimeout}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + flux.EventsPath, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// baseline is the bare handler: it reads the body and answers 202.
func baseline() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	})
}

// drive POSTs n events to url from c workers (event i is events[i % len(events)]) and records every latency.
func drive(client *http.Client, url string, events []signedEvent, n, c int) *result {
	res := &result{n: n, lat: make([]time.Duration, n), statuses: map[int]int{}}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu0, start := benchutil.CPUTime(), time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses, errs := map[int]int{}, 0
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					break
				}
				ev := events[i%len(events)]
				t0 := time.Now()
				code, err := post(client, url, ev)
				res.lat[i] = time.Since(t0)
				if err != nil {
					errs++
					continue
				}
				statuses[code]++
			}
			mu.Lock()
			defer mu.Unlock()
			res.errors += errs
			for k, v := range statuses {
				res.statuses[k] += v
			}
		}()
	}
	wg.Wait()
	res.elapsed, res.cpu = time.Since(start), benchutil.CPUTime()-cpu0
	return res
}

func post(client *http.Client, url string, ev signedEvent) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(ev.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(flux.SignatureHeader, ev.signature)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// newClient keeps c connections alive to one host, like notification-controller's pooled HTTP client.
func newClient(c int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: c, MaxIdleConnsPerHost: c, MaxConnsPerHost: c, DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
}
