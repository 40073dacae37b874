package flux

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"time"
)

// replayWindow refuses signed events outside a window around now and remembers the bodies accepted within it, so a
// captured request replayed later is refused (stale) and one replayed at once is accepted only the first time.
// Memory is bounded: at most max digests are kept; past that the oldest are forgotten first.
type replayWindow struct {
	maxAge time.Duration
	max    int
	now    func() time.Time

	mu    sync.Mutex
	seen  map[[sha256.Size]byte]time.Time // digest → when it may be forgotten
	order [][sha256.Size]byte             // digests in the order they were admitted; order[head:] are in seen
	head  int
}

func newReplayWindow(maxAge time.Duration, max int, now func() time.Time) *replayWindow {
	return &replayWindow{maxAge: maxAge, max: max, now: now, seen: map[[sha256.Size]byte]time.Time{}}
}

// check returns an error when ts is more than maxAge from now, before or after (a skewed clock): one line, fit
// for a 400.
func (w *replayWindow) check(ts time.Time) error {
	now := w.now()
	switch {
	case ts.IsZero():
		return fmt.Errorf("%w: timestamp is required in a signed event (notification-controller always sets it)", ErrStaleEvent)
	case now.Sub(ts) > w.maxAge:
		return fmt.Errorf("%w: timestamp %s is %s old, more than the %s replay window (a replayed or long-delayed event; check the clocks of notification-controller's and syncmedic's nodes)",
			ErrStaleEvent, ts.UTC().Format(time.RFC3339), now.Sub(ts).Round(time.Second), w.maxAge)
	case ts.Sub(now) > w.maxAge:
		return fmt.Errorf("%w: timestamp %s is %s in the future, more than the %s replay window (check the clocks of notification-controller's and syncmedic's nodes)",
			ErrStaleEvent, ts.UTC().Format(time.RFC3339), ts.Sub(now).Round(time.Second), w.maxAge)
	}
	return nil
}

// admit calls accept unless body was admitted before within the window, and remembers body when accept returns
// true (an event refused with 429 or 503 is retried by notification-controller, so it is not remembered). It
// reports whether body is a duplicate. The lock is held across accept so that two copies racing in are admitted
// once.
func (w *replayWindow) admit(body []byte, ts time.Time, accept func() bool) (duplicate bool) {
	digest := sha256.Sum256(body)
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if until, ok := w.seen[digest]; ok && now.Before(until) {
		return true
	}
	if !accept() {
		return false
	}
	w.forget(now)
	if _, ok := w.seen[digest]; !ok {
		w.order = append(w.order, digest)
	}
	// Past ts+maxAge the timestamp check refuses the body anyway, so the digest is no longer needed.
	w.seen[digest] = ts.Add(w.maxAge)
	return false
}

// forget drops the digests that have expired at the front of the FIFO, and the oldest ones while the set is full.
func (w *replayWindow) forget(now time.Time) {
	for w.head < len(w.order) {
		d := w.order[w.head]
		if len(w.seen) < w.max && now.Before(w.seen[d]) {
			break
		}
		delete(w.seen, d)
		w.head++
	}
	if w.head > 1024 && w.head > len(w.order)/2 { // compact: amortised O(1) per digest
		w.order = append(w.order[:0], w.order[w.head:]...)
		w.head = 0
	}
}
