package services_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"switchyard/services"
)

// flakyThrottle is a shared throttle whose store answers err (nil: it
// counts in its own in-memory throttle).
type flakyThrottle struct {
	inner   *services.MemoryLoginThrottle
	err     error
	settled int
}

func (f *flakyThrottle) Reserve(ctx context.Context, a services.LoginAttempt) (services.LoginReservation, error) {
	if f.err != nil {
		return services.LoginReservation{}, f.err
	}
	return f.inner.Reserve(ctx, a)
}

func (f *flakyThrottle) Settle(ctx context.Context, r services.LoginReservation, o services.LoginOutcome) error {
	f.settled++
	return f.inner.Settle(ctx, r, o)
}

// TestFleetLoginThrottleFallsBackToLocal (issue 19 items 5 and 6): while the
// shared store is unavailable (or too slow) the replica's own throttle
// decides — with the same limits, so a sixth wrong password still waits —
// the switch is logged once each way and counted per decision; the local
// reservations settle locally; any other store error refuses the attempt.
func TestFleetLoginThrottleFallsBackToLocal(t *testing.T) {
	ctx := context.Background()
	shared := &flakyThrottle{inner: services.NewMemoryLoginThrottle()}
	var logs bytes.Buffer
	fallbacks := 0
	f := services.NewFleetLoginThrottle(shared, services.NewMemoryLoginThrottle(),
		slog.New(slog.NewTextHandler(&logs, nil)), func(error) { fallbacks++ })
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a := services.LoginAttempt{IP: "203.0.113.9", At: t0}

	shared.err = &services.UnavailableError{Op: "reserve a sign-in check", Err: errors.New("connection refused")}
	for i := range 5 {
		r, err := f.Reserve(ctx, a)
		if err != nil || r.Wait != 0 {
			t.Fatalf("local check %d: %+v %v", i, r, err)
		}
		if i == 0 {
			// A check that never ran is withdrawn from the local count.
			if err := f.Settle(ctx, r, services.LoginNotChecked); err != nil {
				t.Fatal(err)
			}
			if r, _ := f.Reserve(ctx, a); r.Wait != 0 {
				t.Fatal("the withdrawn local check still counted")
			}
		}
	}
	if shared.settled != 0 {
		t.Fatal("a local reservation was settled on the shared store")
	}
	if r, _ := f.Reserve(ctx, a); r.Wait != 30*time.Second {
		t.Fatalf("the sixth check during the outage: wait %v, want 30s (the local limit)", r.Wait)
	}
	shared.err = context.DeadlineExceeded // a store that hangs
	if r, err := f.Reserve(ctx, a); err != nil || r.Wait != 30*time.Second {
		t.Fatalf("a store past its time: %+v %v", r, err)
	}
	if fallbacks != 8 {
		t.Errorf("%d decisions counted as local, want 8", fallbacks)
	}

	shared.err = nil
	r, err := f.Reserve(ctx, services.LoginAttempt{IP: "198.51.100.1", At: t0})
	if err != nil || r.Wait != 0 {
		t.Fatalf("the shared store answers again: %+v %v", r, err)
	}
	if err := f.Settle(ctx, r, services.LoginFailed); err != nil || shared.settled != 1 {
		t.Fatalf("a shared reservation settled locally (err %v)", err)
	}
	out := logs.String()
	if strings.Count(out, "does not answer") != 1 || strings.Count(out, "answers again") != 1 {
		t.Errorf("the switch is not logged once each way:\n%s", out)
	}

	shared.err = errors.New("models: reserve a sign-in check: syntax error")
	if _, err := f.Reserve(ctx, a); err == nil {
		t.Error("a store fault that is not an outage let the attempt through")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	shared.err = context.Canceled
	if _, err := f.Reserve(cctx, a); err == nil {
		t.Error("a cancelled request was checked locally")
	}
}
