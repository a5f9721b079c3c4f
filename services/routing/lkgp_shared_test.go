package routing_test

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/testkit/feeds"
	"switchyard/services"
	"switchyard/services/routing"
)

type blockingLKGP struct {
	*routing.MemoryLKGPStore
	release chan struct{}
}

func (b *blockingLKGP) Save(ctx context.Context, r routing.LKGPRecord) error {
	<-b.release
	return b.MemoryLKGPStore.Save(ctx, r)
}

// In a fleet the LKGP record is written off the request goroutine (a stuck
// store never holds OnSuccess), coalesced per combo, and published; the
// other replica's state follows, the newest record winning.
func TestSharedLKGPWrittenOffTheRequestAndFollowed(t *testing.T) {
	ctx := context.Background()
	rows := &blockingLKGP{MemoryLKGPStore: routing.NewMemoryLKGPStore(), release: make(chan struct{})}
	feeds := feeds.New("A", "B")
	clock := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	sa := routing.NewSharedLKGPStore(rows, feeds.Feed(0), func(err error) { t.Error(err) })
	sb := routing.NewSharedLKGPStore(rows, feeds.Feed(1), func(err error) { t.Error(err) })
	defer sb.Close(ctx)
	a, err := routing.NewMemoryState(ctx, routing.StateOptions{LKGP: sa, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := routing.NewMemoryState(ctx, routing.StateOptions{LKGP: sb, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	sa.Follow(a)
	sb.Follow(b)
	l := routing.NewRegistry(nil, a)[routing.NameLKGP]
	es := []routing.Entry{{ID: "A", Available: true}, {ID: "B", Available: true}}
	l.Order(routing.Request{ComboID: "cb"}, es) // the combo uses lkgp: successes record

	done := make(chan struct{})
	go func() {
		a.OnSuccess("cb", "A", "c1")
		clock = clock.Add(time.Second)
		a.OnSuccess("cb", "B", "c2") // coalesced behind the first write
		close(done)
	}()
	<-done // returned although the store write is stuck
	close(rows.release)
	if err := sa.Close(ctx); err != nil {
		t.Fatal(err)
	}
	recs, _ := rows.Load(ctx)
	if len(recs) != 1 || recs[0].EntryID != "B" {
		t.Fatalf("stored %+v, want the last record {B c2}", recs)
	}
	if rec, ok := b.LKGP("cb"); !ok || rec.EntryID != "B" || rec.ConnectionID != "c2" {
		t.Fatalf("B's record = %+v, %v; want {B c2}", rec, ok)
	}
	// An older record arriving late does not replace a newer one.
	b.ApplyLKGP(routing.LKGPRecord{ComboID: "cb", EntryID: "A", ConnectionID: "c1", UpdatedAt: clock.Add(-time.Hour)})
	if rec, _ := b.LKGP("cb"); rec.EntryID != "B" {
		t.Fatalf("an older record won: %+v", rec)
	}
	// A deletion (combo gone) reaches B; a resync brings stored records back.
	if err := feeds.Feed(0).Publish(ctx, services.Change{Kind: services.ChangeLKGP, Key: "cb", Payload: services.ChangeDeleted}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.LKGP("cb"); ok {
		t.Fatal("B kept a deleted record")
	}
	if err := feeds.Feed(1).Resync(ctx, services.ChangeLKGP); err != nil {
		t.Fatal(err)
	}
	if rec, ok := b.LKGP("cb"); !ok || rec.EntryID != "B" {
		t.Fatalf("after resync %+v, %v", rec, ok)
	}
}
