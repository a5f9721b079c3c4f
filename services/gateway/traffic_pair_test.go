package gateway_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/traffic"
)

// pairedSlots is a slot store that pairs with one queue store: its paired
// admission is Acquire then Admit over the in-memory stores, with the fake
// clock moved on in each part so the two waits show in the log. It counts
// what the gateway calls.
type pairedSlots struct {
	*traffic.Slots
	queues   *countedQueues
	clock    *testkit.FakeClock
	queueErr error // returned by the queue's part instead of admitting

	acquired, paired atomic.Int32
}

func (p *pairedSlots) Acquire(ctx context.Context, conn string, limit int) (func(), bool, error) {
	p.acquired.Add(1)
	return p.Slots.Acquire(ctx, conn, limit)
}

func (p *pairedSlots) PairWith(rs traffic.RateStore) traffic.DispatchAdmitter {
	if rs != traffic.RateStore(p.queues) {
		return nil
	}
	return p
}

func (p *pairedSlots) AdmitDispatch(ctx context.Context, g traffic.DispatchGates, slotDone func()) traffic.DispatchAdmission {
	p.paired.Add(1)
	var a traffic.DispatchAdmission
	a.Release, _, a.SlotErr = p.Slots.Acquire(ctx, g.ConnectionID, g.Limit)
	p.clock.Advance(5 * time.Millisecond)
	slotDone()
	p.clock.Advance(7 * time.Millisecond)
	if p.queueErr != nil {
		a.QueueErr = p.queueErr
		return a
	}
	a.Ticket, a.QueueErr = p.queues.Queues.Admit(ctx, g.QueueKey, g.Queue)
	return a
}

// countedQueues counts the gateway's own Admit calls.
type countedQueues struct {
	*traffic.Queues
	admits atomic.Int32
}

func (q *countedQueues) Admit(ctx context.Context, key string, cfg traffic.QueueConfig) (traffic.Ticket, error) {
	q.admits.Add(1)
	return q.Queues.Admit(ctx, key, cfg)
}

// pairEnv is a gateway over one connection whose slot store pairs with
// its queue store; slot and queue say which gates the connection has.
func pairEnv(t *testing.T, slot, queue bool) (*loopEnv, *pairedSlots) {
	t.Helper()
	p := &pairedSlots{Slots: traffic.NewSlots(nil), queues: &countedQueues{Queues: traffic.NewQueues(services.RealClock{}, nil)}}
	var reg *gateway.Registry
	e := newLoopEnvWith(t, func(d *gateway.Deps) {
		reg = d.Registry
		d.Traffic.Slots, d.Traffic.Queues = p, p.queues
	}, "fk-a")
	p.clock = e.clock
	e.doc.ConnectionConcurrency.Enabled = true
	limit := 4
	if slot {
		e.src.conns[0].MaxConcurrent = &limit
	}
	e.src.conns[0].RateLimitProtection = &queue
	if err := reg.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, p
}

// A dispatch through a connection with both a max_concurrent slot and the
// request queue is admitted by one paired call of the stores (one round
// trip to a shared state), never by Acquire then Admit; the log still has
// the slot's and the queue's waits apart; slot and ticket are given back.
func TestAdmitPairsSlotAndQueue(t *testing.T) {
	e, p := pairEnv(t, true, true)
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if p.paired.Load() != 1 || p.acquired.Load() != 0 || p.queues.admits.Load() != 0 {
		t.Fatalf("paired %d, Acquire %d, Admit %d: want one paired admission only", p.paired.Load(), p.acquired.Load(), p.queues.admits.Load())
	}
	rec := e.logs.last(t)
	if len(rec.Waits) != 2 || rec.Waits[0].Kind != services.WaitKindSlot || rec.Waits[0].WaitedMs != 5 ||
		rec.Waits[1].Kind != services.WaitKindQueue || rec.Waits[1].WaitedMs != 7 {
		t.Fatalf("waits %+v, want the slot's 5 ms then the queue's 7 ms", rec.Waits)
	}
	if tot := p.Totals(); tot.InFlight != 0 {
		t.Fatalf("%d slots still held after the request", tot.InFlight)
	}
	if tot := p.queues.Totals(); tot.Running != 0 {
		t.Fatalf("%d queue tickets still running after the request", tot.Running)
	}
}

// With only one of the two gates the stores are asked one at a time, as
// before.
func TestAdmitUnpairedWithOneGate(t *testing.T) {
	e, p := pairEnv(t, true, false)
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	if p.paired.Load() != 0 || p.acquired.Load() != 1 || p.queues.admits.Load() != 0 {
		t.Fatalf("slot only: paired %d, Acquire %d, Admit %d", p.paired.Load(), p.acquired.Load(), p.queues.admits.Load())
	}
	e, p = pairEnv(t, false, true)
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	if p.paired.Load() != 0 || p.acquired.Load() != 0 || p.queues.admits.Load() != 1 {
		t.Fatalf("queue only: paired %d, Acquire %d, Admit %d", p.paired.Load(), p.acquired.Load(), p.queues.admits.Load())
	}
}

// A queue refusal in the paired admission refuses the dispatch with its
// typed error and gives the slot the paired call took back.
func TestAdmitPairedQueueRefusalReleasesTheSlot(t *testing.T) {
	e, p := pairEnv(t, true, true)
	p.queueErr = &traffic.LimitError{Code: traffic.CodeQueueFull, Status: 429, RetryAfter: time.Second, Key: "fake:" + e.conns[0].ID,
		Message: "queue full"}
	w := e.chat(chatBody("fake/m1", false))
	if w.Code != 429 || decodeError(t, w).Error.Code != traffic.CodeQueueFull {
		t.Fatalf("status %d %s, want 429 %s", w.Code, w.Body, traffic.CodeQueueFull)
	}
	if tot := p.Totals(); tot.InFlight != 0 {
		t.Fatalf("the refused dispatch still holds %d slots", tot.InFlight)
	}
	if len(e.fu.Hits()) != 0 {
		t.Fatal("a dispatch the queue refused reached the upstream")
	}
}
