package quota

import (
	"context"
	"net/http"
	"testing"
	"time"

	"switchyard/services"
)

// bridge joins two in-process feeds as PGFeed joins replicas: a publish
// reaches the publisher's subscribers, then the other side's with Origin
// set, and counts each delivery on delivered so a test can wait for it.
type bridge struct {
	self, other *services.LocalFeed
	name        string
	delivered   chan struct{} // one token per change delivered to the other side
}

func (b bridge) Publish(ctx context.Context, c services.Change) error {
	err := b.self.Publish(ctx, c)
	c.Origin = b.name
	_ = b.other.Publish(ctx, c)
	b.delivered <- struct{}{}
	return err
}

func (b bridge) wait(t *testing.T) {
	t.Helper()
	select {
	case <-b.delivered:
	case <-time.After(10 * time.Second):
		t.Fatal("no change delivered")
	}
}
func (b bridge) Subscribe(k services.ChangeKind, h services.ChangeHandler) { b.self.Subscribe(k, h) }
func (b bridge) Resync(ctx context.Context, k services.ChangeKind) error {
	return b.self.Resync(ctx, k)
}

// In a fleet a gate-relevant change is written at once (not after the 10 s
// debounce) and published: the quota gate closed through A holds on B. A
// change that cannot move the gate stays debounced, and reaches B with the
// next write.
func TestSharedQuotaGateChangeWrittenAtOnceAndFollowed(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(T0)
	rowsA, rowsB := newMemStore(), newMemStore()
	fa, fb := services.NewLocalFeed(nil), services.NewLocalFeed(nil)
	toB := bridge{fa, fb, "A", make(chan struct{}, 16)}
	a := newTracker(Options{Store: rowsA, Clock: clock, Feed: toB}, time.Hour)
	b := newTracker(Options{Store: rowsB, Clock: clock, Feed: bridge{fb, fa, "B", make(chan struct{}, 16)}}, time.Hour)
	defer a.Close(ctx)
	defer b.Close(ctx)

	weekly := func(pct string) http.Header {
		return hdr("x-codex-secondary-used-percent", pct, "x-codex-secondary-window-minutes", "10080",
			"x-codex-secondary-reset-after-seconds", "86400")
	}
	// The first observation is written at once anyway; B gets it.
	a.Observe("c1", weekly("10"), clock.Now())
	waitSave(t, rowsA)
	toB.wait(t)
	if v := b.Windows("c1", clock.Now()).Weekly; !v.Known || v.Used != 0.1 {
		t.Fatalf("B's weekly window %+v, want 10 %% from A", v)
	}
	// 2 s later, below the gate floor: debounced as in a single process.
	clock.Advance(2 * time.Second)
	a.Observe("c1", weekly("20"), clock.Now())
	a.flushDue(ctx, clock.Now())
	noSave(t, rowsA)
	if b.Windows("c1", clock.Now()).Weekly.Used != 0.1 {
		t.Fatal("a debounced change reached B before its write")
	}
	// The window fills: the gate closes on A, and the write goes at once.
	verB := b.Version()
	clock.Advance(time.Second)
	a.Observe("c1", weekly("100"), clock.Now())
	if recs := waitSave(t, rowsA); len(recs) != 1 || recs[0].Used != 1 {
		t.Fatalf("gate write %+v", recs)
	}
	toB.wait(t)
	if blocked, _ := b.Gate("c1", 0, clock.Now()); !blocked {
		t.Fatal("B's quota gate is open although A saw the window full")
	}
	if b.Version() == verB {
		t.Fatal("B's tracker version did not move: cached pools would not see the gate")
	}
	// B applied A's rows without writing them again.
	noSave(t, rowsB)
	// An older observation arriving late changes nothing on B.
	b.Apply("c1", []Record{{ConnectionID: "c1", Window: Weekly, Used: 0.3, ObservedAt: T0}})
	if b.Windows("c1", clock.Now()).Weekly.Used != 1 {
		t.Fatal("an older reading replaced a newer one")
	}
}

// Without a feed nothing changes: a gate change waits for the debounce as
// before (embedded mode).
func TestQuotaGateChangeDebouncedWithoutFeed(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(T0)
	rows := newMemStore()
	tr := newTracker(Options{Store: rows, Clock: clock}, time.Hour)
	defer tr.Close(ctx)
	h := func(pct string) http.Header {
		return hdr("x-codex-secondary-used-percent", pct, "x-codex-secondary-window-minutes", "10080")
	}
	tr.Observe("c1", h("10"), clock.Now())
	waitSave(t, rows)
	clock.Advance(time.Second)
	tr.Observe("c1", h("100"), clock.Now())
	tr.flushDue(ctx, clock.Now())
	noSave(t, rows)
}
