package traffic_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services/traffic"
)

func TestWaitingBoardBeginEnd(t *testing.T) {
	clock := testkit.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	w := traffic.NewWaiting(clock)
	a := w.Begin(traffic.WaitCooldown, "gpt-4o", "req-a", 6*time.Second)
	clock.Advance(time.Second)
	b := w.Begin(traffic.WaitSlot, "c_1", "req-b", 0)
	c := w.Begin(traffic.WaitSlot, "c_1", "req-c", 2*time.Second)
	if w.Count() != 3 {
		t.Fatalf("count %d", w.Count())
	}
	l := w.List()
	if len(l) != 3 || l[0].RequestID != "req-a" || l[0].Reason != "cooldown" || l[0].Target != "gpt-4o" ||
		!l[0].ResumeAt.Equal(clock.Now().Add(5*time.Second)) || !l[1].ResumeAt.IsZero() {
		t.Fatalf("list %+v", l)
	}
	cs := w.Counts()
	if cs.Total != 3 || cs.ByReason["cooldown"] != 1 || cs.ByReason["slot"] != 2 || cs.ByReason["queue"] != 0 ||
		cs.ByTarget["slot c_1"] != 2 {
		t.Fatalf("counts %+v", cs)
	}
	a.End()
	a.End() // idempotent
	b.End()
	if w.Count() != 1 || len(w.List()) != 1 || w.List()[0].RequestID != "req-c" {
		t.Fatalf("after End: %d %+v", w.Count(), w.List())
	}
	c.End()
	if w.Count() != 0 || len(w.List()) != 0 {
		t.Fatalf("left %+v", w.List())
	}
	traffic.WaitToken{}.End() // the zero token ends nothing
	var none *traffic.Waiting
	none.Begin(traffic.WaitQueue, "k", "r", 0).End()
	if none.Count() != 0 || len(none.List()) != 0 {
		t.Fatal("nil board")
	}
}

// A request that waits for a max_concurrent slot is on the board while it
// waits, and only then: one that gets its slot at once never shows.
func TestWaitingShowsSlotWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := traffic.NewWaiting(nil)
		s := traffic.NewSlots(slotConfig(func(c *traffic.SlotConfig) { c.SlotWaitMs = 30_000 }))
		ctx := traffic.WithWaiting(t.Context(), w, "req-1")
		release, _, err := s.Acquire(ctx, "c_1", 1)
		if err != nil || w.Count() != 0 {
			t.Fatalf("first: %v, board %d", err, w.Count())
		}
		ch := acquireAsync(traffic.WithWaiting(t.Context(), w, "req-2"), s, "c_1", 1, time.Now())
		l := w.List()
		if len(l) != 1 || l[0].RequestID != "req-2" || l[0].Reason != traffic.WaitSlot || l[0].Target != "c_1" ||
			l[0].ResumeAt.Sub(l[0].Since) != 30*time.Second {
			t.Fatalf("while waiting %+v", l)
		}
		release()
		r := <-ch
		if r.err != nil || w.Count() != 0 {
			t.Fatalf("granted: %v, board %+v", r.err, w.List())
		}
		r.release()
		// A client that leaves while waiting leaves the board too.
		release, _, _ = s.Acquire(ctx, "c_1", 1)
		cctx, cancel := context.WithCancel(traffic.WithWaiting(t.Context(), w, "req-3"))
		ch = acquireAsync(cctx, s, "c_1", 1, time.Now())
		if w.Count() != 1 {
			t.Fatalf("req-3 not waiting: %+v", w.List())
		}
		cancel()
		<-ch
		if w.Count() != 0 {
			t.Fatalf("left client still waiting: %+v", w.List())
		}
		release()
	})
}

// A request queued behind a running one is on the board until dispatched.
func TestWaitingShowsQueuedRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := traffic.NewWaiting(nil)
		q := traffic.NewQueues(nil, nil)
		cfg := fast(func(c *traffic.QueueConfig) { c.ConcurrentRequests = 1 })
		first, err := q.Admit(traffic.WithWaiting(t.Context(), w, "req-1"), "openai/c_1", cfg)
		if err != nil || w.Count() != 0 {
			t.Fatalf("first: %v, board %d", err, w.Count())
		}
		ch := admitAsync(traffic.WithWaiting(t.Context(), w, "req-2"), q, "openai/c_1", cfg, time.Now())
		if l := w.List(); len(l) != 1 || l[0].Reason != traffic.WaitQueue || l[0].Target != "openai/c_1" || l[0].RequestID != "req-2" {
			t.Fatalf("while queued %+v", l)
		}
		first.Done()
		r := <-ch
		if r.err != nil || w.Count() != 0 {
			t.Fatalf("dispatched: %v, board %+v", r.err, w.List())
		}
		r.ticket.Done()
	})
}
