package leases_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/internal/testkit/feeds"
	"switchyard/internal/testkit/leasestore"
	"switchyard/services"
	"switchyard/services/leases"
)

// pair is two replicas' lease services on one store, joined by a fleet feed.
type pair struct {
	a, b  *leases.Leases
	feeds *feeds.Fleet
}

func newPair(t *testing.T, clock *testkit.FakeClock, store leases.Store) pair {
	t.Helper()
	p := pair{feeds: feeds.New("A", "B")}
	reader := store.(leases.Reader)
	p.a, p.b = leases.New(store, clock), leases.New(store, clock)
	for i, s := range []*leases.Leases{p.a, p.b} {
		s.Share(reader, p.feeds.Feed(i), func(err error) { t.Errorf("publish: %v", err) })
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// A lease acquired through A is usable through B before any notification
// reached B (Check reads through), and from then on B's mirror has it.
func TestFleetLeaseAcquiredOnAServesOnB(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		p := newPair(t, clock, store)
		p.feeds.Pause() // the notification is still in flight
		k := managedKey("k1", "c1", "c2")
		l := must(t)(p.a.Acquire(ctx, k, owner(1), "openai", []string{"c1"}, time.Minute))
		got, err := p.b.Check(ctx, k, owner(1), l.Generation)
		if err != nil || got.ID != l.ID || got.ConnectionID != "c1" {
			t.Fatalf("B.Check = %+v, %v; want the lease acquired through A", got, err)
		}
		// The read-through patched B's mirror: routing on B avoids c1 now.
		if !p.b.HeldByOthers("c1", "other") {
			t.Fatal("B routes unmanaged traffic to c1 after its own read-through")
		}
		// A stale generation is still stale after reading through.
		_, err = p.b.Check(ctx, k, owner(1), l.Generation+1)
		wantErr(t, err, leases.CodeFenceStale, 409)
		// An owner without a lease anywhere is refused after reading through.
		_, err = p.b.Check(ctx, k, owner(2), 1)
		wantErr(t, err, leases.CodeRequired, 409)
	})
}

// The exclusivity is the store's: B cannot take a connection A leased, even
// with its mirror not yet told; and once the feed delivers, B's View has it.
func TestFleetLeaseWallAcrossReplicas(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		p := newPair(t, clock, store)
		p.feeds.Pause()
		k := managedKey("k1", "c1")
		must(t)(p.a.Acquire(ctx, k, owner(1), "openai", []string{"c1"}, time.Minute))
		if p.b.HeldByOthers("c1", "k-unmanaged") {
			t.Fatal("B knew of the lease before the feed delivered it (test does not bite)")
		}
		_, err := p.b.Acquire(ctx, k, owner(2), "openai", []string{"c1"}, time.Minute)
		le := wantErr(t, err, leases.CodeCapacityUnavailable, 429)
		if le.RetryAfter != time.Minute {
			t.Fatalf("Retry-After %v, want 60 s (the lease acquired through A)", le.RetryAfter)
		}
		v := p.b.Version()
		p.feeds.Resume(ctx)
		if !p.b.HeldByOthers("c1", "k-unmanaged") || p.b.Version() == v {
			t.Fatal("B's View did not follow A's lease once the feed delivered it")
		}
	})
}

// A release and a renew through A reach B's mirror through the feed.
func TestFleetLeaseChangesFollowTheFeed(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		p := newPair(t, clock, store)
		k := managedKey("k1", "c1")
		l := must(t)(p.a.Acquire(ctx, k, owner(1), "openai", []string{"c1"}, time.Minute))
		if got := p.b.Active(); len(got) != 1 || got[0].ID != l.ID {
			t.Fatalf("B.Active = %+v", got)
		}
		clock.Advance(30 * time.Second)
		r := must(t)(p.a.Renew(ctx, k, owner(1), l.Generation, 5*time.Minute))
		if got := p.b.Active(); len(got) != 1 || !got[0].ExpiresAt.Equal(r.ExpiresAt) {
			t.Fatalf("B.Active after renew = %+v, want expiry %v", got, r.ExpiresAt)
		}
		must(t)(p.a.Release(ctx, k, owner(1), l.Generation, ""))
		if p.b.HeldByOthers("c1", "other") || len(p.b.Active()) != 0 {
			t.Fatal("B still holds a lease A released")
		}
		_, err := p.b.Check(ctx, k, owner(1), l.Generation)
		wantErr(t, err, leases.CodeRequired, 409)
		// An admin ending it through B reaches A the same way.
		l2 := must(t)(p.a.Acquire(ctx, k, owner(1), "openai", []string{"c1"}, time.Minute))
		if n, err := p.b.Invalidate(ctx, "c1", leases.ReasonAdminEnded); err != nil || n != 1 {
			t.Fatalf("B.Invalidate = %d, %v", n, err)
		}
		if _, err := p.a.Check(ctx, k, owner(1), l2.Generation); err == nil {
			t.Fatal("A still serves a lease ended through B")
		}
	})
}

// A replica's own changes are not re-read when their echo comes back, and a
// change the mirror already shows costs no store read either.
func TestFleetLeaseOwnEchoSkipped(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	store := leasestore.New()
	feeds := feeds.New("A", "B")
	counting := &countingReader{Reader: store}
	a := leases.New(store, clock)
	a.Share(counting, feeds.Feed(0), nil)
	b := leases.New(store, clock)
	b.Share(store, feeds.Feed(1), nil)
	k := managedKey("k1", "c1")
	must(t)(a.Acquire(ctx, k, owner(1), "openai", []string{"c1"}, time.Minute))
	// The write's own refresh is the one read; its local echo adds none.
	if counting.lists != 1 {
		t.Fatalf("A read the leases %d times for its own acquire, want 1", counting.lists)
	}
	// B's write reaches A: one refresh there.
	must(t)(b.Acquire(ctx, managedKey("k2", "c2"), owner(2), "openai", []string{"c2"}, time.Minute))
	if counting.lists != 2 || !a.HeldByOthers("c2", "k1") {
		t.Fatalf("A after B's acquire: %d reads, held %v", counting.lists, a.HeldByOthers("c2", "k1"))
	}
	// A resync always refreshes.
	if err := feeds.Feed(0).Resync(ctx, services.ChangeLease); err != nil || counting.lists != 3 {
		t.Fatalf("resync: %v, %d reads", err, counting.lists)
	}
}

type countingReader struct {
	leases.Reader
	lists, owners int
	onOwner       func()
}

func (c *countingReader) LiveLeases(ctx context.Context, now time.Time) ([]leases.Lease, error) {
	c.lists++
	return c.Reader.LiveLeases(ctx, now)
}

func (c *countingReader) LiveByOwner(ctx context.Context, hash string, now time.Time) (leases.Lease, bool, error) {
	c.owners++
	l, ok, err := c.Reader.LiveByOwner(ctx, hash, now)
	if c.onOwner != nil {
		c.onOwner()
	}
	return l, ok, err
}

// A read-through result is not patched into a mirror that was refreshed
// while it was read (the refresh may be newer); the answer still stands.
func TestFleetLeaseReadThroughYieldsToNewerMirror(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	store := leasestore.New()
	feeds := feeds.New("A", "B")
	feeds.Pause()
	a := leases.New(store, clock)
	a.Share(store, feeds.Feed(0), nil)
	counting := &countingReader{Reader: store}
	b := leases.New(store, clock)
	b.Share(counting, feeds.Feed(1), nil)
	k := managedKey("k1", "c1")
	l := must(t)(a.Acquire(ctx, k, owner(1), "openai", []string{"c1"}, time.Minute))
	// While B reads through, its mirror changes: A's lease ends and B
	// refreshes (a release delivered meanwhile).
	counting.onOwner = func() {
		counting.onOwner = nil
		must(t)(a.Release(ctx, k, owner(1), l.Generation, ""))
		if err := b.Load(ctx); err != nil {
			t.Error(err)
		}
	}
	if _, err := b.Check(ctx, k, owner(1), l.Generation); err != nil {
		t.Fatalf("B.Check: %v (the row read before the release)", err)
	}
	if b.HeldByOthers("c1", "other") {
		t.Fatal("the read-through patched an older row over a newer mirror")
	}
}

// A store that cannot answer fails the read-through: Check does not refuse
// with LEASE_REQUIRED, it passes the store's error on (503 with Retry-After).
func TestFleetLeaseCheckFailsClosed(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	store := leasestore.New()
	feeds := feeds.New("A")
	s := leases.New(store, clock)
	s.Share(downReader{}, feeds.Feed(0), nil)
	_, err := s.Check(ctx, managedKey("k1", "c1"), owner(1), 1)
	var le *leases.Error
	if !errors.Is(err, services.ErrUnavailable) || errors.As(err, &le) {
		t.Fatalf("Check with the store down = %v, want the store's unavailable error", err)
	}
}

type downReader struct{}

var errDown = &services.UnavailableError{Op: "read leases", Err: fmt.Errorf("connection refused")}

func (downReader) LiveByOwner(context.Context, string, time.Time) (leases.Lease, bool, error) {
	return leases.Lease{}, false, errDown
}

func (downReader) LiveLeases(context.Context, time.Time) ([]leases.Lease, error) {
	return nil, errDown
}
