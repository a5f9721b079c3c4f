package redisstate_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/testkit"
	"switchyard/models/redisstate"
	"switchyard/services"
	"switchyard/services/traffic"
)

// pair is a replica's shared slots and queues on c, paired, with the local
// gates they fall back to and the fallbacks they counted.
type pair struct {
	s     *redisstate.Slots
	q     *redisstate.Queues
	d     traffic.DispatchAdmitter
	local *traffic.Slots

	mu        sync.Mutex
	fallbacks []string
}

func newPair(t *testing.T, c *redisstate.Client, cfg traffic.SlotConfig) *pair {
	t.Helper()
	p := &pair{local: traffic.NewSlots(nil)}
	onFallback := func(m string) {
		p.mu.Lock()
		p.fallbacks = append(p.fallbacks, m)
		p.mu.Unlock()
	}
	p.s = redisstate.NewSlots(c, p.local, redisstate.SlotsOptions{Replica: "a", Poll: 20 * time.Millisecond, OnFallback: onFallback,
		Config: func() traffic.SlotConfig { return cfg }})
	p.q = redisstate.NewQueues(c, traffic.NewQueues(services.RealClock{}, nil), redisstate.QueuesOptions{Replica: "a",
		Poll: 20 * time.Millisecond, OnFallback: onFallback})
	if p.d = p.s.PairWith(p.q); p.d == nil {
		t.Fatal("shared slots and queues on one client do not pair")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.s.Run(ctx)
	go p.q.Run(ctx)
	return p
}

func (p *pair) fellBack() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.fallbacks)
}

// admit runs one paired admission and counts its slotDone calls.
func (p *pair) admit(ctx context.Context, conn string, limit int, cfg traffic.QueueConfig, slotDone *atomic.Int32) traffic.DispatchAdmission {
	return p.d.AdmitDispatch(ctx, traffic.DispatchGates{ConnectionID: conn, Limit: limit, QueueKey: "p:" + conn, Queue: cfg},
		func() { slotDone.Add(1) })
}

func openQueue() traffic.QueueConfig {
	return traffic.QueueConfig{RequestsPerMinute: 60_000, ConcurrentRequests: 10, MaxWaitMs: 15_000, MaxQueueDepth: 50} // a cap under reserveMinLimit: no spares
}

// A dispatch whose slot and queue both admit at once costs one script
// call, where Acquire then Admit cost two; both grants are live in Redis
// until the caller gives them back.
func TestDispatchOneScriptForSlotAndQueue(t *testing.T) {
	_, c := server(t)
	p := newPair(t, c, slotCfg())
	ctx := context.Background()
	hooks := redisstate.CountCommands(c)
	var done atomic.Int32
	for i := range 5 {
		before := hooks.Single.Load()
		a := p.admit(ctx, "c1", 2, openQueue(), &done)
		if a.SlotErr != nil || a.QueueErr != nil || a.Ticket.Key() != "p:c1" {
			t.Fatalf("admission %d: %+v", i, a)
		}
		// The first call also loads the script (EVALSHA, then EVAL).
		if n := hooks.Single.Load() - before; n != 1 && (i > 0 || n != 2) {
			t.Fatalf("admission %d took %d script calls, want 1", i, n)
		}
		if n, _ := p.s.InFlight(ctx, "c1"); n != 1 || redisstate.QueueRunning(ctx, c, "sy", "p:c1") != 1 {
			t.Fatalf("admission %d: %d slots, %d queue runs held in Redis, want 1 and 1", i, n, redisstate.QueueRunning(ctx, c, "sy", "p:c1"))
		}
		a.Ticket.Done()
		a.Release()
		if n, _ := p.s.InFlight(ctx, "c1"); n != 0 || redisstate.QueueRunning(ctx, c, "sy", "p:c1") != 0 {
			t.Fatalf("admission %d: grants left after the releases", i)
		}
	}
	if done.Load() != 5 {
		t.Fatalf("slotDone called %d times for 5 admissions", done.Load())
	}
	// The two calls of the sequential path, for contrast (the first round
	// loads the two scripts).
	for i := range 2 {
		before := hooks.Single.Load()
		release, _, err := p.s.AcquireWith(ctx, "c1", 2, slotCfg())
		tk, qerr := p.q.Admit(ctx, "p:c1", openQueue())
		if n := hooks.Single.Load() - before; err != nil || qerr != nil || (i == 1 && n != 2) {
			t.Fatalf("sequential: %v %v, %d calls", err, qerr, n)
		}
		tk.Done()
		release()
	}
	if fb := p.fellBack(); len(fb) != 0 {
		t.Fatalf("fallbacks %v with Redis up", fb)
	}
}

// A dispatch that finds the slots taken waits in the slot's queue without
// touching the request queue (no token spent, no running grant, no waiter
// there), and is admitted to both once a slot frees.
func TestDispatchWaitsForTheSlotBeforeTheQueue(t *testing.T) {
	_, c := server(t)
	p := newPair(t, c, slotCfg())
	ctx := context.Background()
	hold, _, err := p.s.AcquireWith(ctx, "c2", 1, slotCfg())
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int32
	got := make(chan traffic.DispatchAdmission, 1)
	go func() { got <- p.admit(ctx, "c2", 1, openQueue(), &done) }()
	waitQueued(t, c, "c2", 1)
	if redisstate.QueueTouched(ctx, c, "sy", "p:c2") || done.Load() != 0 {
		t.Fatalf("while waiting for the slot: queue touched %v, slotDone %d", redisstate.QueueTouched(ctx, c, "sy", "p:c2"), done.Load())
	}
	hold()
	a := <-got
	if a.SlotErr != nil || a.QueueErr != nil || a.Ticket.Key() != "p:c2" || done.Load() != 1 {
		t.Fatalf("after the release: %+v, slotDone %d", a, done.Load())
	}
	if redisstate.QueueRunning(ctx, c, "sy", "p:c2") != 1 {
		t.Fatal("admitted without a queue grant")
	}
	a.Ticket.Done()
	a.Release()
}

// Slots busy without fail-open: CONNECTION_SLOTS_BUSY, and the queue is
// never consulted. With fail-open the dispatch goes without a slot (counted
// by the local gate) and the queue is consulted as usual.
func TestDispatchSlotRefusalAndFailOpen(t *testing.T) {
	_, c := server(t)
	strict := slotCfg()
	strict.SlotWaitMs = 0 // a saturated connection is at once a timeout
	p := newPair(t, c, strict)
	ctx := context.Background()
	hold, _, err := p.s.AcquireWith(ctx, "c3", 1, strict)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	var done atomic.Int32
	a := p.admit(ctx, "c3", 1, openQueue(), &done)
	var le *traffic.LimitError
	if !errors.As(a.SlotErr, &le) || le.Code != traffic.CodeSlotsBusy || a.QueueErr != nil || a.Ticket.Key() != "" || done.Load() != 1 {
		t.Fatalf("strict: %+v, slotDone %d", a, done.Load())
	}
	if redisstate.QueueTouched(ctx, c, "sy", "p:c3") {
		t.Fatal("a dispatch refused its slot reached the request queue")
	}

	open := strict
	open.FailOpen = true
	po := newPair(t, c, open)
	a = po.admit(ctx, "c3", 1, openQueue(), &done)
	if a.SlotErr != nil || a.QueueErr != nil || a.Ticket.Key() != "p:c3" {
		t.Fatalf("fail-open: %+v", a)
	}
	if st := po.local.Stats(); len(st) != 1 || st[0].FailOpenGrants.Timeout != 1 {
		t.Fatalf("fail-open counters %+v", st)
	}
	if redisstate.QueueRunning(ctx, c, "sy", "p:c3") != 1 {
		t.Fatal("the failed-open dispatch was not admitted to the queue")
	}
	a.Ticket.Done()
	a.Release()
}

// The slot granted, a full request queue refuses RATE_LIMIT_QUEUE_FULL; the
// slot is still held for the caller to give back (as after Acquire, then a
// refusing Admit).
func TestDispatchQueueFullLeavesTheSlotToRelease(t *testing.T) {
	_, c := server(t)
	p := newPair(t, c, slotCfg())
	ctx := context.Background()
	cfg := traffic.QueueConfig{RequestsPerMinute: 60_000, ConcurrentRequests: 1, MaxWaitMs: 15_000, MaxQueueDepth: 1}
	first, err := p.q.Admit(ctx, "p:c4", cfg)
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() {
		tk, err := p.q.Admit(ctx, "p:c4", cfg)
		tk.Done()
		waiter <- err
	}()
	if !testkit.PollUntil(5*time.Second, func() bool { return redisstate.QueueWaiting(ctx, c, "sy", "p:c4") == 1 }) {
		t.Fatal("the waiter never queued")
	}
	var done atomic.Int32
	a := p.admit(ctx, "c4", 2, cfg, &done)
	var le *traffic.LimitError
	if !errors.As(a.QueueErr, &le) || le.Code != traffic.CodeQueueFull || a.SlotErr != nil || done.Load() != 1 {
		t.Fatalf("queue full: %+v", a)
	}
	if n, _ := p.s.InFlight(ctx, "c4"); n != 1 {
		t.Fatalf("%d slots held after the queue refused, want the one the caller releases", n)
	}
	a.Release()
	if n, _ := p.s.InFlight(ctx, "c4"); n != 0 {
		t.Fatal("the release did not give the slot back")
	}
	first.Done()
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
}

// The slot granted, the queue's spacing makes the dispatch wait: the slot's
// part is over (slotDone called, the slot held) while the request waits in
// the shared queue, and it is dispatched once the spacing has passed on the
// server's clock.
func TestDispatchHoldsTheSlotWhileTheQueueWaits(t *testing.T) {
	mr, c := server(t)
	p := newPair(t, c, slotCfg())
	ctx := context.Background()
	cfg := openQueue()
	cfg.MinTimeBetweenRequestsMs = 1000
	var done atomic.Int32
	first := p.admit(ctx, "c5", 2, cfg, &done)
	if first.SlotErr != nil || first.QueueErr != nil {
		t.Fatalf("first: %+v", first)
	}
	got := make(chan traffic.DispatchAdmission, 1)
	go func() { got <- p.admit(ctx, "c5", 2, cfg, &done) }()
	if !testkit.PollUntil(5*time.Second, func() bool { return redisstate.QueueWaiting(ctx, c, "sy", "p:c5") == 1 }) {
		t.Fatal("the second dispatch never waited in the queue")
	}
	if n, _ := p.s.InFlight(ctx, "c5"); n != 2 || done.Load() != 2 {
		t.Fatalf("while the queue waits: %d slots held, slotDone %d; want 2 and 2", n, done.Load())
	}
	setTime(mr, time.Date(2026, 12, 1, 0, 0, 2, 0, time.UTC)) // server(t) starts at 00:00:00
	a := <-got
	if a.SlotErr != nil || a.QueueErr != nil || a.Ticket.Key() != "p:c5" {
		t.Fatalf("after the spacing: %+v", a)
	}
	for _, x := range []traffic.DispatchAdmission{first, a} {
		x.Ticket.Done()
		x.Release()
	}
}

// With Redis gone both gates answer from the local ones, each decision
// counted as a fallback of its own mechanism, as Acquire then Admit do.
func TestDispatchFallsBackLocallyWhileRedisIsDown(t *testing.T) {
	mr, c := server(t)
	p := newPair(t, c, slotCfg())
	mr.Close()
	var done atomic.Int32
	a := p.admit(context.Background(), "c6", 2, openQueue(), &done)
	if a.SlotErr != nil || a.QueueErr != nil || a.Ticket.Key() != "p:c6" || done.Load() != 1 {
		t.Fatalf("with Redis down: %+v", a)
	}
	if fb := p.fellBack(); !slices.Equal(fb, []string{"slots", "request_queue"}) {
		t.Fatalf("fallbacks %v, want slots then request_queue", fb)
	}
	if tot := p.local.Totals(); tot.InFlight != 1 {
		t.Fatalf("local gate in flight %d, want 1", tot.InFlight)
	}
	a.Ticket.Done()
	a.Release()
	if tot := p.local.Totals(); tot.InFlight != 0 {
		t.Fatal("the local slot was not given back")
	}
}

// Only the shared queues on the same client pair with the shared slots.
func TestPairWithOnlyTheSameRedis(t *testing.T) {
	_, c := server(t)
	s := redisstate.NewSlots(c, traffic.NewSlots(nil), redisstate.SlotsOptions{Replica: "a"})
	if s.PairWith(traffic.NewQueues(services.RealClock{}, nil)) != nil {
		t.Fatal("paired with the in-memory queues")
	}
	other := redisstate.NewWithClient(c2(t), redisstate.Options{})
	if s.PairWith(redisstate.NewQueues(other, traffic.NewQueues(services.RealClock{}, nil), redisstate.QueuesOptions{})) != nil {
		t.Fatal("paired with the queues of another Redis client")
	}
}

// c2 is a second connection to a fresh miniredis.
func c2(t *testing.T) *redis.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
