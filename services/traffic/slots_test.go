package traffic_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"switchyard/services/traffic"
)

func slotConfig(f func(*traffic.SlotConfig)) func() traffic.SlotConfig {
	c := traffic.DefaultSlotConfig()
	if f != nil {
		f(&c)
	}
	return func() traffic.SlotConfig { return c }
}

type slotResult struct {
	release  func()
	failOpen bool
	err      error
	at       time.Duration
}

// acquireAsync starts Acquire in a goroutine and waits (in the bubble) until
// it either returned or blocked, so arrival order is the call order.
func acquireAsync(ctx context.Context, s *traffic.Slots, id string, limit int, start time.Time) <-chan slotResult {
	ch := make(chan slotResult, 1)
	go func() {
		r, fo, err := s.Acquire(ctx, id, limit)
		ch <- slotResult{r, fo, err, time.Since(start)}
	}()
	synctest.Wait()
	return ch
}

func slotOf(t *testing.T, s *traffic.Slots, id string) traffic.SlotStats {
	t.Helper()
	for _, st := range s.Stats() {
		if st.ConnectionID == id {
			return st
		}
	}
	t.Fatalf("no slot stats for %s", id)
	return traffic.SlotStats{}
}

func pending[T any](ch <-chan T) bool {
	select {
	case v := <-ch:
		_ = v
		return false
	default:
		return true
	}
}

// S1: maxConcurrent=1, 5 concurrent requests → ≤ 1 in flight, arrival order.
func TestSlotsFIFOAtTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := traffic.NewSlots(nil)
		start := time.Now()
		var chans []<-chan slotResult
		for range 5 {
			chans = append(chans, acquireAsync(t.Context(), s, "c_1", 1, start))
		}
		for i, ch := range chans {
			var r slotResult
			select {
			case r = <-ch:
			default:
				t.Fatalf("request %d has no slot though all before it released", i)
			}
			if r.err != nil || r.failOpen {
				t.Fatalf("request %d: err %v failOpen %v", i, r.err, r.failOpen)
			}
			st := slotOf(t, s, "c_1")
			if st.InFlight != 1 || st.Waiting != 4-i {
				t.Fatalf("after grant %d: %+v", i, st)
			}
			for _, later := range chans[i+1:] {
				if !pending(later) {
					t.Fatalf("a later request got a slot while %d holds it", i)
				}
			}
			time.Sleep(time.Second) // hold it
			r.release()
			synctest.Wait()
		}
		if st := slotOf(t, s, "c_1"); st.InFlight != 0 || st.Waiting != 0 || st.FailOpenGrants != (traffic.FailOpenGrants{}) {
			t.Fatalf("end state %+v", st)
		}
	})
}

// S2: maxConcurrent=1, queueDepth=2, 4 concurrent → 1 running, 2 waiting, the
// 4th sent without a slot, failOpenGrants.queueFull=1.
func TestSlotsQueueFullFailsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := traffic.NewSlots(slotConfig(func(c *traffic.SlotConfig) { c.QueueDepth = 2 }))
		start := time.Now()
		first := <-acquireAsync(t.Context(), s, "c_2", 1, start)
		w1 := acquireAsync(t.Context(), s, "c_2", 1, start)
		w2 := acquireAsync(t.Context(), s, "c_2", 1, start)
		release, failOpen, err := s.Acquire(t.Context(), "c_2", 1)
		if err != nil || !failOpen {
			t.Fatalf("4th: failOpen %v err %v, want fail-open", failOpen, err)
		}
		release() // a no-op, must not free anyone's slot
		st := slotOf(t, s, "c_2")
		want := traffic.SlotStats{ConnectionID: "c_2", Limit: 1, InFlight: 1, Waiting: 2,
			FailOpenGrants: traffic.FailOpenGrants{QueueFull: 1}}
		if st != want {
			t.Fatalf("stats %+v, want %+v", st, want)
		}
		first.release()
		r1 := <-w1
		r1.release()
		r2 := <-w2
		r2.release()
		if tot := s.Totals(); tot.InFlight != 0 || tot.Waiting != 0 || tot.FailOpenGrants.QueueFull != 1 {
			t.Fatalf("totals %+v", tot)
		}
	})
}

// S3: a slot held 31 s → the waiter is sent without a slot at t=30 s,
// failOpenGrants.timeout=1.
func TestSlotsWaitTimeoutFailsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := traffic.NewSlots(nil)
		start := time.Now()
		holder := <-acquireAsync(t.Context(), s, "c_3", 1, start)
		w := acquireAsync(t.Context(), s, "c_3", 1, start)
		time.Sleep(31 * time.Second)
		holder.release()
		r := <-w
		if r.err != nil || !r.failOpen || r.at != 30*time.Second {
			t.Fatalf("waiter: failOpen %v err %v at %v, want fail-open at 30s", r.failOpen, r.err, r.at)
		}
		st := slotOf(t, s, "c_3")
		if st.FailOpenGrants != (traffic.FailOpenGrants{Timeout: 1}) || st.InFlight != 0 || st.Waiting != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// S4: failOpen=false, saturated, queue full → CONNECTION_SLOTS_BUSY, 429, Retry-After 1.
func TestSlotsFailOpenOffIsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := traffic.NewSlots(slotConfig(func(c *traffic.SlotConfig) { c.FailOpen = false; c.QueueDepth = 1 }))
		start := time.Now()
		holder := <-acquireAsync(t.Context(), s, "c_4", 1, start)
		w := acquireAsync(t.Context(), s, "c_4", 1, start)

		release, failOpen, err := s.Acquire(t.Context(), "c_4", 1) // queue full
		var le *traffic.LimitError
		if !errors.As(err, &le) || le.Code != traffic.CodeSlotsBusy || le.HTTPStatus() != 429 || le.RetryAfterSeconds() != 1 || failOpen {
			t.Fatalf("queue full: failOpen %v err %#v, want CONNECTION_SLOTS_BUSY 429 Retry-After 1", failOpen, err)
		}
		if le.LocalLimit() != traffic.CodeSlotsBusy || time.Since(start) != 0 {
			t.Fatalf("LocalLimit %q after %v", le.LocalLimit(), time.Since(start))
		}
		release() // safe even on error

		r := <-w // timeout without fail-open
		if !errors.As(r.err, &le) || le.Code != traffic.CodeSlotsBusy || r.at != 30*time.Second || r.failOpen {
			t.Fatalf("timeout: %+v, want CONNECTION_SLOTS_BUSY at 30s", r)
		}
		holder.release()
		if st := slotOf(t, s, "c_4"); st.FailOpenGrants != (traffic.FailOpenGrants{}) || st.InFlight != 0 {
			t.Fatalf("stats %+v: refusals are not fail-open grants", st)
		}
	})
}

func TestSlotsReleaseIsIdempotent(t *testing.T) {
	s := traffic.NewSlots(nil)
	ctx := context.Background()
	a, _, err := s.Acquire(ctx, "c_5", 2)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.Acquire(ctx, "c_5", 2)
	if err != nil {
		t.Fatal(err)
	}
	a()
	a() // deferred + early release at stream end
	a()
	if st := slotOf(t, s, "c_5"); st.InFlight != 1 {
		t.Fatalf("in flight %d after releasing one of two thrice, want 1", st.InFlight)
	}
	b()
	if st := slotOf(t, s, "c_5"); st.InFlight != 0 {
		t.Fatalf("in flight %d, want 0", st.InFlight)
	}
}

func TestSlotsClientLeavesWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := traffic.NewSlots(nil)
		start := time.Now()
		holder := <-acquireAsync(t.Context(), s, "c_6", 1, start)
		ctx, cancel := context.WithCancel(t.Context())
		gone := acquireAsync(ctx, s, "c_6", 1, start)
		next := acquireAsync(t.Context(), s, "c_6", 1, start)
		cancel()
		r := <-gone
		if !errors.Is(r.err, context.Canceled) || r.failOpen {
			t.Fatalf("cancelled waiter: %+v, want context.Canceled", r)
		}
		r.release()
		if st := slotOf(t, s, "c_6"); st.Waiting != 1 || st.InFlight != 1 {
			t.Fatalf("stats %+v, want the cancelled waiter gone", st)
		}
		holder.release()
		n := <-next
		if n.err != nil || n.failOpen {
			t.Fatalf("next waiter: %+v", n)
		}
		n.release()
		if _, _, err := s.Acquire(ctx, "c_6", 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with a done context = %v", err)
		}
	})
}

func TestSlotsNoGate(t *testing.T) {
	ctx := context.Background()
	s := traffic.NewSlots(slotConfig(func(c *traffic.SlotConfig) { c.Enabled = false }))
	for range 10 {
		if _, fo, err := s.Acquire(ctx, "c_7", 1); err != nil || fo {
			t.Fatalf("disabled: failOpen %v err %v", fo, err)
		}
	}
	s = traffic.NewSlots(nil)
	for range 10 {
		if _, fo, err := s.Acquire(ctx, "c_7", 0); err != nil || fo {
			t.Fatalf("unlimited: failOpen %v err %v", fo, err)
		}
	}
	if st := s.Stats(); len(st) != 0 {
		t.Fatalf("stats %+v, want no gate", st)
	}
}

func TestSlotsNoQueueOrNoWait(t *testing.T) {
	ctx := context.Background()
	s := traffic.NewSlots(slotConfig(func(c *traffic.SlotConfig) { c.QueueDepth = 0 }))
	r, _, _ := s.Acquire(ctx, "c_8", 1)
	if _, fo, err := s.Acquire(ctx, "c_8", 1); err != nil || !fo {
		t.Fatalf("queueDepth 0: failOpen %v err %v", fo, err)
	}
	r()
	if st := slotOf(t, s, "c_8"); st.FailOpenGrants.QueueFull != 1 {
		t.Fatalf("stats %+v", st)
	}

	s = traffic.NewSlots(slotConfig(func(c *traffic.SlotConfig) { c.SlotWaitMs = 0 }))
	r, _, _ = s.Acquire(ctx, "c_8", 1)
	if _, fo, err := s.Acquire(ctx, "c_8", 1); err != nil || !fo {
		t.Fatalf("slotWaitMs 0: failOpen %v err %v", fo, err)
	}
	r()
	if st := slotOf(t, s, "c_8"); st.FailOpenGrants.Timeout != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSlotsRaisedLimitServesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := traffic.NewSlots(nil)
		start := time.Now()
		holder := <-acquireAsync(t.Context(), s, "c_9", 1, start)
		w := acquireAsync(t.Context(), s, "c_9", 1, start)
		r, fo, err := s.Acquire(t.Context(), "c_9", 3) // maxConcurrent raised to 3
		if err != nil || fo {
			t.Fatalf("raised: failOpen %v err %v", fo, err)
		}
		wr := <-w
		if wr.err != nil || wr.failOpen {
			t.Fatalf("waiter %+v", wr)
		}
		if st := slotOf(t, s, "c_9"); st.InFlight != 3 || st.Limit != 3 {
			t.Fatalf("stats %+v", st)
		}
		r()
		wr.release()
		holder.release()
	})
}

func TestSlotsReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := traffic.NewSlots(nil)
		start := time.Now()
		old := <-acquireAsync(t.Context(), s, "c_10", 1, start)
		w := acquireAsync(t.Context(), s, "c_10", 1, start)
		if n, _ := s.ResetConnection(context.Background(), "nobody"); n != 0 {
			t.Fatalf("ResetConnection(unknown) = %d", n)
		}
		if n, _ := s.Reset(context.Background()); n != 1 {
			t.Fatalf("Reset = %d, want 1", n)
		}
		wr := <-w // granted at once, up to the cap
		if wr.err != nil || wr.failOpen {
			t.Fatalf("waiter after reset: %+v", wr)
		}
		old.release() // from the old generation: ignored
		if st := slotOf(t, s, "c_10"); st.InFlight != 1 {
			t.Fatalf("in flight %d after an old release, want 1", st.InFlight)
		}
		if n, _ := s.ResetConnection(context.Background(), "c_10"); n != 1 {
			t.Fatalf("ResetConnection = %d", n)
		}
		wr.release() // old generation again
		if st := slotOf(t, s, "c_10"); st.InFlight != 0 {
			t.Fatalf("in flight %d, want 0", st.InFlight)
		}
	})
}

// S5 (smaller): 16 goroutines × 2000 acquire/release with limit 2 never hold
// more than 2 slots; fail-open dispatches are counted, not held; all return.
// Real goroutines and timers, no synctest, so -race sees real interleavings.
func TestSlotsStress(t *testing.T) {
	const workers, rounds, limit = 16, 2000, 2
	s := traffic.NewSlots(nil)
	ctx := context.Background()
	var inFlight, peak, failOpens atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				release, failOpen, err := s.Acquire(ctx, "c_s", limit)
				if err != nil {
					t.Error(err)
					return
				}
				if failOpen {
					failOpens.Add(1)
					release()
					continue
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inFlight.Add(-1)
				release()
				release()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Fatalf("peak %d slots held, cap %d", p, limit)
	}
	st := slotOf(t, s, "c_s")
	if st.InFlight != 0 || st.Waiting != 0 {
		t.Fatalf("end stats %+v, want every slot returned", st)
	}
	if got := st.FailOpenGrants.QueueFull + st.FailOpenGrants.Timeout; got != failOpens.Load() {
		t.Fatalf("fail-open grants %d counted, %d seen", got, failOpens.Load())
	}
}
