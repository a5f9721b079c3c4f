package affinity_test

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/internal/testkit/feeds"
	"switchyard/services"
	"switchyard/services/affinity"
)

// fleetPins is two replicas' pins on one store, joined by a fleet feed.
type fleetPins struct {
	clock          *testkit.FakeClock
	rows           *memStore
	feeds          *feeds.Fleet
	a, b           *affinity.Pins
	storeA, storeB *affinity.SharedStore
}

func newFleetPins(t *testing.T) *fleetPins {
	t.Helper()
	f := &fleetPins{clock: testkit.NewFakeClock(t0), rows: newMemStore(), feeds: feeds.New("A", "B")}
	ttl := func() time.Duration { return affinity.DefaultTTL }
	onErr := func(err error) { t.Errorf("pin write: %v", err) }
	f.storeA = affinity.NewSharedStore(f.rows, f.feeds.Feed(0), onErr)
	f.storeB = affinity.NewSharedStore(f.rows, f.feeds.Feed(1), onErr)
	f.a, f.b = affinity.NewPins(f.clock, ttl, f.storeA), affinity.NewPins(f.clock, ttl, f.storeB)
	f.storeA.Follow(f.a)
	f.storeB.Follow(f.b)
	t.Cleanup(func() {
		_ = f.storeA.Close(context.Background())
		_ = f.storeB.Close(context.Background())
	})
	return f
}

func (f *fleetPins) flush(t *testing.T) {
	t.Helper()
	for _, s := range []*affinity.SharedStore{f.storeA, f.storeB} {
		if err := s.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A pin made through A is written off the caller's goroutine and applied to
// B's mirror once published; B's Lookup never reads the store.
func TestSharedPinsFollowAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	f := newFleetPins(t)
	f.feeds.Pause()
	id := affinity.PinID("k1", "openai", "header:s1")
	if err := f.a.Pin(ctx, id, "k1", "openai", "c2"); err != nil {
		t.Fatal(err)
	}
	lookup(t, f.a, id, "c2")
	lookup(t, f.b, id, "") // the change is still in flight
	f.flush(t)
	if row, ok := f.rows.row(id); !ok || row.ConnectionID != "c2" {
		t.Fatalf("row = %+v, %v", row, ok)
	}
	lookup(t, f.b, id, "")
	f.feeds.Resume(ctx)
	lookup(t, f.b, id, "c2")

	// Touches within a minute write nothing and publish nothing.
	sent := f.feeds.Sent()
	for range 5 {
		f.clock.Advance(5 * time.Second)
		if err := f.b.Pin(ctx, id, "k1", "openai", "c2"); err != nil {
			t.Fatal(err)
		}
	}
	f.flush(t)
	if _, saves := f.rows.state(); saves != 1 || f.feeds.Sent() != sent {
		t.Fatalf("touches: %d saves, %d changes sent; want 1 save and none", saves, f.feeds.Sent()-sent)
	}
	// A touch after a minute is written once and reaches A.
	f.clock.Advance(time.Minute)
	_ = f.b.Pin(ctx, id, "k1", "openai", "c2")
	f.flush(t)
	if _, saves := f.rows.state(); saves != 2 {
		t.Fatalf("%d saves after a minute, want 2", saves)
	}

	// A failover on B moves the pin; A follows.
	if err := f.b.Drop(ctx, id); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	_ = f.b.Pin(ctx, id, "k1", "openai", "c3")
	f.flush(t)
	lookup(t, f.a, id, "c3")
	// A plain drop reaches A too.
	_ = f.b.Drop(ctx, id)
	f.flush(t)
	lookup(t, f.a, id, "")
}

// The latest use wins: an older pin published late does not replace a
// newer one in the mirror; a replica's own echo changes nothing.
func TestSharedPinsLatestUseWins(t *testing.T) {
	ctx := context.Background()
	f := newFleetPins(t)
	id := affinity.PinID("k1", "openai", "header:s2")
	f.feeds.Pause()
	_ = f.a.Pin(ctx, id, "k1", "openai", "c1") // at t0
	f.clock.Advance(time.Second)
	_ = f.b.Pin(ctx, id, "k1", "openai", "c2") // at t0+1s
	f.flush(t)
	f.feeds.Resume(ctx)
	lookup(t, f.a, id, "c2")
	lookup(t, f.b, id, "c2")
}

// Clearing through A clears B; a resync merges the stored pins in.
func TestSharedPinsClearAndResync(t *testing.T) {
	ctx := context.Background()
	f := newFleetPins(t)
	id1 := affinity.PinID("k1", "openai", "header:s1")
	id2 := affinity.PinID("k1", "openai", "header:s2")
	_ = f.a.Pin(ctx, id1, "k1", "openai", "c1")
	f.flush(t)
	lookup(t, f.b, id1, "c1")
	if _, err := f.a.ClearAll(ctx); err != nil {
		t.Fatal(err)
	}
	lookup(t, f.b, id1, "")
	// A pin whose notification was lost comes back with the resync.
	f.feeds.Pause()
	_ = f.a.Pin(ctx, id2, "k1", "openai", "c2")
	f.flush(t)
	f.feeds.Drop()
	lookup(t, f.b, id2, "")
	if err := f.feeds.Feed(1).Resync(ctx, services.ChangePin); err != nil {
		t.Fatal(err)
	}
	lookup(t, f.b, id2, "c2")
	// Prune drops expired pins from memory only.
	f.clock.Advance(affinity.DefaultTTL)
	if n := f.b.Prune(); n != 1 {
		t.Fatalf("Prune = %d, want 1", n)
	}
	if _, ok := f.rows.row(id2); !ok {
		t.Fatal("Prune deleted a row")
	}
}

// Pin never waits for the store in a fleet: a store stuck on its write does
// not hold the request goroutine.
func TestSharedPinsWriteOffTheCallersGoroutine(t *testing.T) {
	rows := &blockingPins{memStore: newMemStore(), release: make(chan struct{})}
	feeds := feeds.New("A")
	shared := affinity.NewSharedStore(rows, feeds.Feed(0), nil)
	p := affinity.NewPins(testkit.NewFakeClock(t0), func() time.Duration { return affinity.DefaultTTL }, shared)
	done := make(chan error, 1)
	go func() { done <- p.Pin(context.Background(), affinity.PinID("k", "p", "header:s"), "k", "p", "c1") }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(rows.release)
	if err := shared.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := rows.state(); n != 1 {
		t.Fatalf("%d rows after Close, want 1", n)
	}
}

type blockingPins struct {
	*memStore
	release chan struct{}
}

func (b *blockingPins) SavePin(ctx context.Context, p affinity.Pin) error {
	<-b.release
	return b.memStore.SavePin(ctx, p)
}
