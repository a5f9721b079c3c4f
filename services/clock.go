package services

import (
	"context"
	"time"
)

// Clock is the only source of time in services, so tests can move time
// instead of sleeping.
type Clock interface {
	Now() time.Time
	// Wait returns after d, or earlier with ctx.Err() when ctx ends.
	Wait(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
