package redisstate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/testkit"
	"switchyard/models/redisstate"
	"switchyard/services/traffic"
)

// server starts a miniredis with its clock set, and a client on it.
func server(t *testing.T) (*miniredis.Miniredis, *redisstate.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	clock := &atomic.Pointer[time.Time]{}
	clocks.Store(mr, clock)
	t.Cleanup(func() { clocks.Delete(mr) })
	setTime(mr, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	c := redisstate.NewWithClient(rdb, redisstate.Options{CallTimeout: 500 * time.Millisecond, OpenFor: 50 * time.Millisecond,
		ReserveNow: func() time.Time { return *clock.Load() }})
	t.Cleanup(func() { c.Close() })
	return mr, c
}

// clocks holds each test server's time, which the replicas' reserves
// read too: one injected time line for Redis and the local clock.
var clocks sync.Map // *miniredis.Miniredis → *atomic.Pointer[time.Time]

// setTime moves the clock of the server and of the reserves of its replicas.
func setTime(mr *miniredis.Miniredis, at time.Time) {
	mr.SetTime(at)
	if c, ok := clocks.Load(mr); ok {
		c.(*atomic.Pointer[time.Time]).Store(&at)
	}
}

func slotCfg() traffic.SlotConfig {
	return traffic.SlotConfig{Enabled: true, QueueDepth: 50, SlotWaitMs: 60_000, FailOpen: false}
}

func newSlots(t *testing.T, c *redisstate.Client, replica string, fallbacks *atomic.Int64) *redisstate.Slots {
	t.Helper()
	s := redisstate.NewSlots(c, traffic.NewSlots(nil), redisstate.SlotsOptions{Replica: replica, Poll: 100 * time.Millisecond,
		OnFallback: func(string) {
			if fallbacks != nil {
				fallbacks.Add(1)
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.Run(ctx)
	return s
}

// Three replicas' gates on one Redis never hold more than the limit, and
// every request is served (S5 across replicas).
func TestSlotsLimitHoldsAcrossReplicas(t *testing.T) {
	_, c := server(t)
	gates := []*redisstate.Slots{newSlots(t, c, "a", nil), newSlots(t, c, "b", nil), newSlots(t, c, "c", nil)}
	var inFlight, peak, served atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for range 10 {
				release, failOpen, err := gates[w%3].AcquireWith(context.Background(), "conn1", 2, slotCfg())
				if err != nil || failOpen {
					t.Errorf("acquire: failOpen %v err %v", failOpen, err)
					return
				}
				n := inFlight.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				inFlight.Add(-1)
				served.Add(1)
				release()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 2 {
		t.Fatalf("peak in flight %d, limit 2", p)
	}
	if served.Load() != 60 {
		t.Fatalf("served %d of 60", served.Load())
	}
	if n, err := gates[0].InFlight(context.Background(), "conn1"); err != nil || n != 0 {
		t.Fatalf("left in flight %d, %v", n, err)
	}
}

// Waiters are served in arrival order across replicas.
func TestSlotsFIFOAcrossReplicas(t *testing.T) {
	_, c := server(t)
	a, b := newSlots(t, c, "a", nil), newSlots(t, c, "b", nil)
	hold, _, err := a.AcquireWith(context.Background(), "c1", 1, slotCfg())
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 4)
	var wg sync.WaitGroup
	for i := range 4 {
		g := []*redisstate.Slots{a, b}[i%2]
		started := make(chan struct{})
		wg.Go(func() {
			close(started)
			release, _, err := g.AcquireWith(context.Background(), "c1", 1, slotCfg())
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			release()
		})
		<-started
		// Each waiter is queued before the next arrives.
		waitQueued(t, c, "c1", i+1)
	}
	hold()
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("served %d, want %d (arrival order)", got, want)
		}
		want++
	}
}

func waitQueued(t *testing.T, c *redisstate.Client, conn string, n int) {
	t.Helper()
	if !testkit.PollUntil(5*time.Second, func() bool { return redisstate.Waiting(context.Background(), c, "sy", conn) >= n }) {
		t.Fatalf("never %d waiting", n)
	}
}

// A full queue and an elapsed wait refuse with CONNECTION_SLOTS_BUSY without
// fail-open, and are counted as fail-open grants with it (S2, S4).
func TestSlotsQueueFullAndTimeout(t *testing.T) {
	_, c := server(t)
	local := traffic.NewSlots(nil)
	s := redisstate.NewSlots(c, local, redisstate.SlotsOptions{Replica: "a", Poll: 5 * time.Millisecond})
	ctx := context.Background()
	hold, _, _ := s.AcquireWith(ctx, "c1", 1, slotCfg())
	defer hold()
	cfg := slotCfg()
	cfg.QueueDepth = 0
	_, _, err := s.AcquireWith(ctx, "c1", 1, cfg)
	var le *traffic.LimitError
	if !errors.As(err, &le) || le.Code != traffic.CodeSlotsBusy || le.RetryAfter != time.Second {
		t.Fatalf("queue full without fail-open: %v", err)
	}
	cfg.FailOpen = true
	_, failOpen, err := s.AcquireWith(ctx, "c1", 1, cfg)
	if err != nil || !failOpen {
		t.Fatalf("queue full with fail-open: failOpen %v err %v", failOpen, err)
	}
	cfg = slotCfg()
	cfg.SlotWaitMs, cfg.FailOpen = 30, true
	_, failOpen, err = s.AcquireWith(ctx, "c1", 1, cfg)
	if err != nil || !failOpen {
		t.Fatalf("timeout with fail-open: failOpen %v err %v", failOpen, err)
	}
	st := local.Stats()
	if len(st) != 1 || st[0].FailOpenGrants.QueueFull != 1 || st[0].FailOpenGrants.Timeout != 1 {
		t.Fatalf("fail-open counters %+v", st)
	}
	if redisstate.Waiting(ctx, c, "sy", "c1") != 0 {
		t.Fatal("a timed-out waiter stayed queued")
	}
}

// A waiter whose client leaves never gets a slot and leaves the queue.
func TestSlotsCancelledWaiterLeaves(t *testing.T) {
	_, c := server(t)
	s := newSlots(t, c, "a", nil)
	hold, _, _ := s.AcquireWith(context.Background(), "c1", 1, slotCfg())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := s.AcquireWith(ctx, "c1", 1, slotCfg())
		done <- err
	}()
	waitQueued(t, c, "c1", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	hold()
	if n, _ := s.InFlight(context.Background(), "c1"); n != 0 || redisstate.Waiting(context.Background(), c, "sy", "c1") != 0 {
		t.Fatalf("in flight %d after the cancelled waiter", n)
	}
}

// A crashed replica renews nothing: its grants lapse after the TTL and the
// slots return to the fleet.
func TestSlotsGrantsOfACrashedReplicaLapse(t *testing.T) {
	mr, c := server(t)
	crashed := redisstate.NewSlots(c, traffic.NewSlots(nil), redisstate.SlotsOptions{Replica: "dead", GrantTTL: 30 * time.Second})
	if _, _, err := crashed.AcquireWith(context.Background(), "c1", 1, slotCfg()); err != nil {
		t.Fatal(err)
	}
	other := redisstate.NewSlots(c, traffic.NewSlots(nil), redisstate.SlotsOptions{Replica: "b"})
	cfg := slotCfg()
	cfg.SlotWaitMs = 0
	if _, _, err := other.AcquireWith(context.Background(), "c1", 1, cfg); err == nil {
		t.Fatal("slot free while the crashed replica's grant lives")
	}
	setTime(mr, time.Date(2026, 12, 1, 0, 0, 31, 0, time.UTC))
	release, failOpen, err := other.AcquireWith(context.Background(), "c1", 1, cfg)
	if err != nil || failOpen {
		t.Fatalf("after the TTL: failOpen %v err %v", failOpen, err)
	}
	release()
}

// Renewal keeps a long request's slot past the TTL; after a Redis restart
// (its data lost) a renew puts the live grants back.
func TestSlotsRenewAndReseed(t *testing.T) {
	mr, c := server(t)
	s := redisstate.NewSlots(c, traffic.NewSlots(nil), redisstate.SlotsOptions{Replica: "a", GrantTTL: 30 * time.Second})
	release, _, err := s.AcquireWith(context.Background(), "c1", 1, slotCfg())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for i := 1; i <= 4; i++ { // 4 × 20 s: far past the TTL, renewed each time
		setTime(mr, time.Date(2026, 12, 1, 0, 0, 20*i, 0, time.UTC))
		if err := redisstate.RenewNow(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.InFlight(context.Background(), "c1"); n != 1 {
			t.Fatalf("after %d s the renewed grant is gone (%d)", 20*i, n)
		}
	}
	mr.FlushAll() // a restarted Redis without persistence
	if n, _ := s.InFlight(context.Background(), "c1"); n != 0 {
		t.Fatal("flush kept the grant")
	}
	if err := redisstate.RenewNow(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.InFlight(context.Background(), "c1"); n != 1 {
		t.Fatalf("re-seed: %d grants", n)
	}
}

// With Redis gone the gates answer locally (counted), the breaker stops
// calling Redis after 3 failures, and Redis answering again marks the client
// up and re-seeds the grants taken before the outage.
func TestSlotsFallBackWhileRedisIsDownAndReseedAfter(t *testing.T) {
	mr, c := server(t)
	var fallbacks atomic.Int64
	s := newSlots(t, c, "a", &fallbacks)
	before, _, err := s.AcquireWith(context.Background(), "c1", 5, slotCfg())
	if err != nil {
		t.Fatal(err)
	}
	defer before()
	addr := mr.Addr()
	mr.Close()
	for range 5 {
		release, failOpen, err := s.AcquireWith(context.Background(), "c1", 1, slotCfg())
		if err != nil || failOpen {
			t.Fatalf("local fallback: failOpen %v err %v", failOpen, err)
		}
		release()
	}
	if fallbacks.Load() != 5 || !c.Degraded() {
		t.Fatalf("fallbacks %d, degraded %v", fallbacks.Load(), c.Degraded())
	}
	if err := mr.StartAddr(addr); err != nil {
		t.Fatal(err)
	}
	ok := testkit.PollUntil(10*time.Second, func() bool { return c.Ping(context.Background()) == nil })
	if !ok || c.Degraded() {
		t.Fatalf("never up again (degraded %v, last error %q)", c.Degraded(), c.LastError())
	}
	if !testkit.PollUntil(5*time.Second, func() bool { n, _ := s.InFlight(context.Background(), "c1"); return n == 1 }) {
		t.Fatal("the grant held through the outage was not re-seeded")
	}
}
