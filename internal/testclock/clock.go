// Package testclock is a settable time source for tests of the incident engine.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable time source, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock set to a fixed moment, so tests give the same results every run.
func New() *Clock { return &Clock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
