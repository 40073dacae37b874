package ui

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// maxUnauthorizedPerMinute is how many requests with a missing or wrong bearer token one client address may send
// per minute (in a burst, then at that rate) before the API answers it 429 with Retry-After, without looking at
// its token. Requests with a valid token are never delayed.
const maxUnauthorizedPerMinute = 10

// maxTrackedClients bounds the client addresses the limiter remembers; past it, those back to a full allowance are
// forgotten.
const maxTrackedClients = 10000

// failureLimiter is a token bucket per client address, taken from by each refused request.
type failureLimiter struct {
	now func() time.Time

	mu      sync.Mutex
	clients map[string]*allowance
}

type allowance struct {
	left float64 // requests still allowed to fail
	at   time.Time
}

func newFailureLimiter(now func() time.Time) *failureLimiter {
	if now == nil {
		now = time.Now
	}
	return &failureLimiter{now: now, clients: map[string]*allowance{}}
}

// refill brings a's allowance up to now; the caller holds mu.
func (l *failureLimiter) refill(a *allowance, now time.Time) {
	a.left += now.Sub(a.at).Minutes() * maxUnauthorizedPerMinute
	if a.left > maxUnauthorizedPerMinute {
		a.left = maxUnauthorizedPerMinute
	}
	a.at = now
}

// blocked reports whether client used up its allowance, and how long until it may fail again.
func (l *failureLimiter) blocked(client string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.clients[client]
	if !ok {
		return 0, false
	}
	now := l.now()
	l.refill(a, now)
	if a.left >= 1 {
		return 0, false
	}
	return time.Duration((1 - a.left) / maxUnauthorizedPerMinute * float64(time.Minute)), true
}

// fail takes one from client's allowance.
func (l *failureLimiter) fail(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	a, ok := l.clients[client]
	if !ok {
		if len(l.clients) >= maxTrackedClients {
			l.forgetFull(now)
		}
		a = &allowance{left: maxUnauthorizedPerMinute, at: now}
		l.clients[client] = a
	}
	l.refill(a, now)
	a.left--
}

// forgetFull drops the clients back to a full allowance, or all of them when none is; the caller holds mu.
func (l *failureLimiter) forgetFull(now time.Time) {
	for c, a := range l.clients {
		if l.refill(a, now); a.left >= maxUnauthorizedPerMinute {
			delete(l.clients, c)
		}
	}
	if len(l.clients) >= maxTrackedClients {
		clear(l.clients)
	}
}

// clientAddress is the address of the peer that sent r (not a forwarded-for header, which the peer writes).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
