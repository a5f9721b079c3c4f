// Package testkit holds helpers shared by tests: a fake clock, a migrated
// temporary database and application start-up helpers. Only tests and cmd/
// import it.
package testkit

import (
	"context"
	"sync"
	"time"
)

// FakeClock is a services.Clock whose time moves only when told to.
// Wait advances the clock instantly and records the duration, so code that
// waits can be tested without sleeping.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	waits  []time.Duration
	onWait func(time.Duration)
}

// NewFakeClock starts at t (UTC).
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t.UTC()} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves time forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves time to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.UTC()
	c.mu.Unlock()
}

// OnWait makes every later Wait call f with its duration first, outside
// the clock's lock and before time moves: a test can hold a waiting
// request there to look at it while it waits.
func (c *FakeClock) OnWait(f func(time.Duration)) {
	c.mu.Lock()
	c.onWait = f
	c.mu.Unlock()
}

// Wait records d and advances the clock by it, unless ctx is already done.
func (c *FakeClock) Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	hook := c.onWait
	c.mu.Unlock()
	if hook != nil {
		hook(d)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.waits = append(c.waits, d)
	if d > 0 {
		c.now = c.now.Add(d)
	}
	c.mu.Unlock()
	return nil
}

// Waits returns the durations passed to Wait so far.
func (c *FakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}
