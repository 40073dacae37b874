package remedy

import (
	"fmt"
	"sync"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
)

// RateLimiter bounds automatic actions per object (per application for a remedy that acts on the application, see
// RemedyKey): at most RateLimit.Max in any RateLimit.Window, and after a failed action an exponential backoff
// (Backoff, doubled per consecutive failure, capped at MaxBackoff).
type RateLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	objects map[string]*objectActions
}

type objectActions struct {
	times       []time.Time // actions inside the window, oldest first
	failures    int
	lastFailure time.Time
}

// NewRateLimiter returns an empty limiter; now is the clock (nil: time.Now).
func NewRateLimiter(now func() time.Time) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{now: now, objects: map[string]*objectActions{}}
}

// Allow reports whether one more action on key is allowed now, and when it is not, until when to wait and why.
func (l *RateLimiter) Allow(key string, rl policy.RateLimit) (ok bool, retryAt time.Time, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	o := l.objects[key]
	if o == nil {
		return true, time.Time{}, ""
	}
	o.prune(now, time.Duration(rl.Window))
	if o.failures > 0 {
		wait := time.Duration(rl.Backoff) << (o.failures - 1)
		if wait > time.Duration(rl.MaxBackoff) || wait <= 0 {
			wait = time.Duration(rl.MaxBackoff)
		}
		if until := o.lastFailure.Add(wait); now.Before(until) {
			return false, until, fmt.Sprintf("backing off %s after %d failed action(s)", syncmedic.HumanDuration(wait), o.failures)
		}
	}
	if len(o.times) >= rl.Max {
		return false, o.times[0].Add(time.Duration(rl.Window)), fmt.Sprintf("rate limit: %d action(s) in %s", rl.Max, syncmedic.HumanDuration(time.Duration(rl.Window)))
	}
	return true, time.Time{}, ""
}

// Record counts an action on key at its time, and whether it succeeded (a success ends the backoff).
func (l *RateLimiter) Record(key string, at time.Time, succeeded bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.objects[key]
	if o == nil {
		o = &objectActions{}
		l.objects[key] = o
	}
	o.times = append(o.times, at)
	if succeeded {
		o.failures = 0
		return
	}
	o.failures++
	o.lastFailure = at
}

func (o *objectActions) prune(now time.Time, window time.Duration) {
	i := 0
	for i < len(o.times) && !o.times[i].After(now.Add(-window)) {
		i++
	}
	o.times = o.times[i:]
}
