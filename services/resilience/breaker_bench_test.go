package resilience_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
)

// benchClock is the wall clock shifted by an offset that Set and Advance move.
type benchClock struct{ off atomic.Int64 }

func (c *benchClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *benchClock) Set(t time.Time)         { c.off.Store(int64(time.Until(t))) }
func (c *benchClock) Advance(d time.Duration) { c.off.Add(int64(d)) }
func (c *benchClock) Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// breakerIn returns breakers with provider "deepseek" (API-key profile) in
// state: CLOSED after one counted failure, OPEN after the failure threshold,
// or HALF_OPEN with its one probe admitted and still in flight, the state a
// request meets while the probe runs.
//
// The clock is the wall clock moved by an offset (benchClock): lock-free like
// the production RealClock. The test FakeClock takes a mutex per Now, which
// under RunParallel measured the clock's contention rather than the breaker's.
func breakerIn(tb testing.TB, state resilience.BreakerState) *resilience.Breakers {
	tb.Helper()
	clock := &benchClock{}
	clock.Set(bkT0)
	cfg := bkDefaults()
	br := resilience.NewBreakers(clock, func() resilience.BreakerConfig { return cfg }, newBkMemStore(), nil)
	fail := func() {
		ok, _, gen, _ := br.Allow("deepseek", services.AuthAPIKey)
		if !ok {
			tb.Fatal("failure setup: not admitted")
		}
		br.Failure("deepseek", services.AuthAPIKey, gen, false, true, true, "server_error")
	}
	fail()
	if state != resilience.BreakerClosed {
		for i := 1; i < cfg[services.AuthAPIKey].FailureThreshold; i++ {
			clock.Set(bkAt(int64(i) * 1000))
			fail()
		}
	}
	if state == resilience.BreakerHalfOpen {
		clock.Advance(2 * time.Duration(cfg[services.AuthAPIKey].ResetTimeoutMs) * time.Millisecond)
		if ok, probe, _, _ := br.Allow("deepseek", services.AuthAPIKey); !ok || !probe {
			tb.Fatalf("half-open setup: ok %v probe %v, want the probe", ok, probe)
		}
	}
	if got := br.Status("deepseek").State; got != state {
		tb.Fatalf("setup: state %s, want %s", got, state)
	}
	return br
}

var breakerStates = []resilience.BreakerState{resilience.BreakerClosed, resilience.BreakerOpen, resilience.BreakerHalfOpen}

// BenchmarkBreakerAllow is the provider breaker check of every dispatch in
// each state (60-quality §5.3 (e); target ≤ 100 ns and 0 allocs/op), serial
// and with RunParallel.
func BenchmarkBreakerAllow(b *testing.B) {
	for _, st := range breakerStates {
		b.Run(string(st), func(b *testing.B) {
			br := breakerIn(b, st)
			b.ReportAllocs()
			for b.Loop() {
				br.Allow("deepseek", services.AuthAPIKey)
			}
		})
		b.Run(string(st)+"/parallel", func(b *testing.B) {
			br := breakerIn(b, st)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					br.Allow("deepseek", services.AuthAPIKey)
				}
			})
		})
	}
}

// TestBreakerAllowZeroAlloc holds the 0-allocation target of the breaker
// check in every state (60-quality §5.4).
func TestBreakerAllowZeroAlloc(t *testing.T) {
	for _, st := range breakerStates {
		br := breakerIn(t, st)
		want := st != resilience.BreakerOpen && st != resilience.BreakerHalfOpen
		if allocs := testing.AllocsPerRun(1000, func() {
			if ok, _, _, _ := br.Allow("deepseek", services.AuthAPIKey); ok != want {
				t.Fatalf("%s: admitted %v, want %v", st, ok, want)
			}
		}); allocs != 0 {
			t.Errorf("%s: Allow allocates %.1f times per call", st, allocs)
		}
	}
}
