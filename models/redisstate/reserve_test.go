package redisstate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/models/redisstate"
	"switchyard/services"
	"switchyard/services/traffic"
)

// A key with room to spare is admitted from the replica's reserve: the
// first admission asks Redis (and takes a token block), the next ones make
// no round trip until the block is spent; the grant of an ended request
// stays in Redis as a spare for the next one instead of being released.
func TestKeyLimitsAdmitFromTheReserve(t *testing.T) {
	_, c := server(t)
	k := redisstate.NewKeyLimits(c, "", "a", 0)
	ctx := context.Background()
	hooks := redisstate.CountCommands(c)
	d, err := k.Admit(ctx, "k", 60_000, 1000)
	if err != nil || !d.Admitted {
		t.Fatalf("first admission %+v %v", d, err)
	}
	k.Release(d)
	first := hooks.Single.Load()
	for i := range 60 {
		d, err := k.Admit(ctx, "k", 60_000, 1000)
		if err != nil || !d.Admitted {
			t.Fatalf("admission %d: %+v %v", i, d, err)
		}
		if n := redisstate.KeyGrants(ctx, c, "sy", "k"); n != 1 {
			t.Fatalf("admission %d: %d grants in Redis, want the one it holds", i, n)
		}
		k.Release(d)
	}
	if n := hooks.Single.Load() - first; n != 0 {
		t.Fatalf("60 admissions from the reserve sent %d scripts, want 0", n)
	}
	// The first script took one token and a block of 64: the 66th
	// admission needs a script again.
	for range 5 {
		d, _ := k.Admit(ctx, "k", 60_000, 1000)
		k.Release(d)
	}
	if n := hooks.Single.Load() - first; n != 1 {
		t.Fatalf("past the block: %d scripts, want 1", n)
	}
	// A sweep with nothing taken since gives the idle spare back.
	k.Sweep()
	k.Sweep()
	if n := redisstate.KeyGrants(ctx, c, "sy", "k"); n != 0 {
		t.Fatalf("%d grants after two idle sweeps, want 0", n)
	}
}

// Token blocks never let the fleet admit more than the bucket holds: three
// replicas admitting at one instant from a bucket of 1,600 admit exactly
// 1,600 (the blocks they still hold included), then nothing.
func TestKeyLimitsBlocksKeepTheBurst(t *testing.T) {
	_, c := server(t)
	replicas := []*redisstate.KeyLimits{
		redisstate.NewKeyLimits(c, "", "a", 0), redisstate.NewKeyLimits(c, "", "b", 0), redisstate.NewKeyLimits(c, "", "c", 0)}
	ctx := context.Background()
	admitted, refusedInARow := 0, 0
	for i := 0; refusedInARow < 30 && i < 5000; i++ {
		d, err := replicas[i%3].Admit(ctx, "k", 1600, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d.Admitted {
			admitted, refusedInARow = admitted+1, 0
		} else {
			refusedInARow++
		}
	}
	if admitted != 1600 {
		t.Fatalf("admitted %d at one instant from a bucket of 1600", admitted)
	}
}

// Below reserveMinLimit nothing is reserved: every admission of a key with
// maxConcurrentRequests 2 is decided in Redis and every release goes there.
func TestKeyLimitsSmallLimitKeepsNoReserve(t *testing.T) {
	_, c := server(t)
	k := redisstate.NewKeyLimits(c, "", "a", 0)
	ctx := context.Background()
	hooks := redisstate.CountCommands(c)
	for i := range 5 {
		d, _ := k.Admit(ctx, "k", 0, 2)
		if !d.Admitted {
			t.Fatalf("admission %d refused", i)
		}
		k.Release(d)
		if n := redisstate.KeyGrants(ctx, c, "sy", "k"); n != 0 {
			t.Fatalf("admission %d: %d grants kept", i, n)
		}
	}
	if n := hooks.Single.Load(); n < 5 {
		t.Fatalf("%d scripts for 5 admissions, want one each", n)
	}
}

// A refusal anywhere makes every replica give its reserve of the key back,
// so the refused client's retry finds the slot the idle reserve held.
func TestKeyLimitsRefusalReturnsReserves(t *testing.T) {
	_, c := server(t)
	a, b := redisstate.NewKeyLimits(c, "", "a", 0), redisstate.NewKeyLimits(c, "", "b", 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)
	go b.Run(ctx)
	// a keeps two spares (an eighth of 16) from two requests that ended.
	d1, _ := a.Admit(ctx, "k", 0, 16)
	d2, _ := a.Admit(ctx, "k", 0, 16)
	a.Release(d1)
	a.Release(d2)
	if n := redisstate.KeyGrants(ctx, c, "sy", "k"); n != 2 {
		t.Fatalf("%d grants after a's requests ended, want its 2 spares", n)
	}
	var held []redisstate.KeyDecision
	for range 14 {
		d, _ := b.Admit(ctx, "k", 0, 16)
		if !d.Admitted {
			t.Fatal("refused below the limit")
		}
		held = append(held, d)
	}
	if d, _ := b.Admit(ctx, "k", 0, 16); d.Admitted || d.Which != "concurrency" {
		t.Fatalf("the 17th grant (14 running + 2 spares) was not refused: %+v", d)
	}
	until(t, "a gives its spares back", func() bool { return redisstate.KeyGrants(ctx, c, "sy", "k") == 14 })
	d, _ := b.Admit(ctx, "k", 0, 16)
	if !d.Admitted {
		t.Fatal("the retry was refused although only 14 requests run")
	}
	// a holds off: its next request's grant is released when it ends.
	d3, _ := a.Admit(ctx, "k", 0, 16)
	a.Release(d3)
	if n := redisstate.KeyGrants(ctx, c, "sy", "k"); n != 15 {
		t.Fatalf("%d grants: a kept a spare during its hold-off", n)
	}
	for _, d := range held {
		b.Release(d)
	}
}

// A connection with room keeps the slots of ended requests as spares: no
// script per acquisition or release; a small max_concurrent keeps none
// (the T5 case: exactly the limit, every time from Redis).
func TestSlotsSpareGrants(t *testing.T) {
	_, c := server(t)
	s := newSlots(t, c, "a", nil)
	ctx := context.Background()
	hooks := redisstate.CountCommands(c)
	release, _, err := s.Acquire(ctx, "big", 1000)
	if err != nil {
		t.Fatal(err)
	}
	release()
	first := hooks.Single.Load()
	for i := range 50 {
		release, _, err := s.Acquire(ctx, "big", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n := redisstate.SlotGrants(ctx, c, "sy", "big"); n != 1 {
			t.Fatalf("acquisition %d: %d grants, want 1", i, n)
		}
		if st := s.Totals(); st.InFlight != 1 {
			t.Fatalf("acquisition %d: in flight %d, want 1 (a spare is not in flight)", i, st.InFlight)
		}
		release()
		release()
	}
	if n := hooks.Single.Load() - first; n != 0 {
		t.Fatalf("50 acquisitions from a spare sent %d scripts", n)
	}
	if st := s.Totals(); st.InFlight != 0 {
		t.Fatalf("in flight %d after every release", st.InFlight)
	}
	before := hooks.Single.Load()
	for range 3 {
		release, _, _ := s.Acquire(ctx, "small", 2)
		release()
		if n := redisstate.SlotGrants(ctx, c, "sy", "small"); n != 0 {
			t.Fatal("max_concurrent 2 kept a spare")
		}
	}
	if n := hooks.Single.Load() - before; n < 3 {
		t.Fatalf("max_concurrent 2: %d scripts for 3 acquisitions", n)
	}
	// A reset deletes the grants in Redis and the spares with them.
	if _, err := s.ResetConnection(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	before = hooks.Single.Load()
	release, _, _ = s.Acquire(ctx, "big", 1000)
	release()
	if hooks.Single.Load() == before {
		t.Fatal("a spare survived the reset")
	}
}

// A waiter on another replica makes the holder give its spares back at
// once: the waiter is granted the slot an idle spare held.
func TestSlotsWaiterReturnsSpares(t *testing.T) {
	_, c := server(t)
	a, b := newSlots(t, c, "a", nil), newSlots(t, c, "b", nil)
	ctx := context.Background()
	var ra []func()
	for range 2 {
		r, _, _ := a.Acquire(ctx, "c", 16)
		ra = append(ra, r)
	}
	for _, r := range ra {
		r()
	}
	var rb []func()
	for range 14 {
		r, _, err := b.Acquire(ctx, "c", 16)
		if err != nil {
			t.Fatal(err)
		}
		rb = append(rb, r)
	}
	if n := redisstate.SlotGrants(ctx, c, "sy", "c"); n != 16 {
		t.Fatalf("%d grants, want 14 running and 2 spares", n)
	}
	done := make(chan error, 1)
	go func() {
		r, _, err := b.Acquire(ctx, "c", 16)
		if err == nil {
			r()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a hang detector
		t.Fatal("the waiter never got the slot the spare held")
	}
	for _, r := range rb {
		r()
	}
}

// A request queue that nothing paces admits from the reserve (a token
// block, the running grant of an ended request); spacing or a learned
// throttle sends every admission to Redis.
func TestQueuesAdmitFromTheReserve(t *testing.T) {
	mr, c := server(t)
	local := traffic.NewQueues(services.RealClock{}, nil)
	q := redisstate.NewQueues(c, local, redisstate.QueuesOptions{Replica: "a"})
	ctx := context.Background()
	hooks := redisstate.CountCommands(c)
	cfg := traffic.QueueConfig{RequestsPerMinute: 60_000, ConcurrentRequests: 100, MaxWaitMs: 15_000}
	tk, err := q.Admit(ctx, "k", cfg)
	if err != nil {
		t.Fatal(err)
	}
	tk.Done()
	first := hooks.Single.Load()
	for i := range 40 {
		tk, err := q.Admit(ctx, "k", cfg)
		if err != nil || tk.Key() != "k" {
			t.Fatalf("admission %d: %v", i, err)
		}
		if n := redisstate.QueueRunning(ctx, c, "sy", "k"); n != 1 {
			t.Fatalf("admission %d: %d running grants, want 1", i, n)
		}
		tk.Done()
	}
	if n := hooks.Single.Load() - first; n != 0 {
		t.Fatalf("40 admissions from the reserve sent %d scripts", n)
	}
	paced := cfg
	paced.MinTimeBetweenRequestsMs = 1
	setTime(mr, time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC)) // past the spacing of the last dispatch
	before := hooks.Single.Load()
	tk, _ = q.Admit(ctx, "k", paced)
	tk.Done()
	if hooks.Single.Load() == before {
		t.Fatal("a paced key was admitted from the reserve")
	}
}

// A dispatch whose slot and queue both have reserves makes no round trip.
func TestDispatchFromReserves(t *testing.T) {
	_, c := server(t)
	p := newPair(t, c, slotCfg())
	ctx := context.Background()
	cfg := traffic.QueueConfig{RequestsPerMinute: 60_000, ConcurrentRequests: 100, MaxWaitMs: 15_000}
	var done struct{ n atomic.Int32 }
	a := p.admit(ctx, "c1", 1000, cfg, &done.n)
	a.Ticket.Done()
	a.Release()
	hooks := redisstate.CountCommands(c)
	for i := range 30 {
		a := p.admit(ctx, "c1", 1000, cfg, &done.n)
		if a.SlotErr != nil || a.QueueErr != nil {
			t.Fatalf("dispatch %d: %+v", i, a)
		}
		a.Ticket.Done()
		a.Release()
	}
	if n := hooks.Single.Load(); n != 0 {
		t.Fatalf("30 dispatches from reserves sent %d scripts", n)
	}
	if done.n.Load() != 31 {
		t.Fatalf("slotDone called %d times", done.n.Load())
	}
}
