package ui

import (
	"net"
	"net/http"
	"strconv"
	"sync"
)

// maxStreamsPerCaller bounds the live streams (GET /api/v1/incidents?watch=true) one caller holds open at once: a
// page or two per person, not a loop that opens them until serve runs out of goroutines and file descriptors.
const maxStreamsPerCaller = 8

// streamLimits counts the open live streams per caller.
type streamLimits struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire counts one more stream of key, unless key has maxStreamsPerCaller open; release gives it back.
func (l *streamLimits) acquire(key string) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= maxStreamsPerCaller {
		return nil, false
	}
	if l.open == nil {
		l.open = map[string]int{}
	}
	l.open[key]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.open[key]--; l.open[key] <= 0 {
			delete(l.open, key)
		}
	}, true
}

// streamCaller names whose streams r counts against, and how to say it: the Argo CD user (through the proxy
// extension), else the bearer token's holder at the client's address.
func streamCaller(r *http.Request) string {
	c := caller(r)
	if c.User != "" || c.Token != "" {
		return c.String()
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return c.String() + " from " + host
}

// limitStream answers 429 when r's caller has maxStreamsPerCaller live streams open already; otherwise the caller
// must call release when the stream ends.
func (a *api) limitStream(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	who := streamCaller(r)
	release, ok = a.streams.acquire(who)
	if !ok {
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusTooManyRequests, who+" has "+strconv.Itoa(maxStreamsPerCaller)+
			" live streams (watch=true) open already: close one (another tab?) or list without watch=true")
	}
	return release, ok
}
