package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit/feeds"
	"switchyard/services"
)

// memHandoffs is a shared handoff store in memory: records and claims.
type memHandoffs struct {
	mu     sync.Mutex
	recs   map[string]Handoff
	claims map[string]time.Time
	reads  int
}

func newMemHandoffs() *memHandoffs {
	return &memHandoffs{recs: map[string]Handoff{}, claims: map[string]time.Time{}}
}

func (m *memHandoffs) LoadHandoffs(_ context.Context, now time.Time) ([]Handoff, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Handoff
	for _, h := range m.recs {
		if now.Before(h.ExpiresAt) {
			out = append(out, h)
		}
	}
	return out, nil
}

func (m *memHandoffs) SaveHandoff(_ context.Context, h Handoff) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[h.ID] = h
	return nil
}

func (m *memHandoffs) DeleteExpiredHandoffs(context.Context, time.Time) (int, error) { return 0, nil }

func (m *memHandoffs) LoadHandoff(_ context.Context, id string, now time.Time) (Handoff, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	h, ok := m.recs[id]
	return h, ok && now.Before(h.ExpiresAt), nil
}

func (m *memHandoffs) ClaimHandoff(_ context.Context, id string, until, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.claims[id]; ok && now.Before(cur) {
		return false, nil
	}
	m.claims[id] = until
	return true, nil
}

func (m *memHandoffs) ReleaseHandoffClaim(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims, id)
	return nil
}

func (m *memHandoffs) readCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads
}

func relayReplica(t *testing.T, clock *pickClock, store *memHandoffs, feed services.ChangeFeed) *Gateway {
	t.Helper()
	g := &Gateway{clock: clock}
	if err := g.loadHandoffs(context.Background(), store); err != nil {
		t.Fatal(err)
	}
	g.ShareHandoffs(store, feed, func(err error) { t.Error(err) })
	return g
}

// A record made through A reaches B through the feed; one whose change is
// still in flight is read through once; a missing one is asked for at most
// once per relayMissTTL; destinations given on either side are kept.
func TestSharedRelayRecordsFollowAndReadThrough(t *testing.T) {
	clock := &pickClock{now: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	store := newMemHandoffs()
	fleet := feeds.New("A", "B")
	a := relayReplica(t, clock, store, fleet.Feed(0))
	b := relayReplica(t, clock, store, fleet.Feed(1))

	h := Handoff{ID: "r1", Source: "x1", Summary: HandoffSummary{Summary: "parser work"}, ExpiresAt: clock.Now().Add(time.Hour), Injected: []string{}}
	a.relay.mu.Lock()
	a.installLocked(h)
	a.relay.mu.Unlock()
	a.saveHandoff(h)
	a.WaitRelayWrites()
	if rec := b.lockRecord("r1"); rec == nil || rec.Summary != "parser work" || rec.source != "x1" {
		t.Fatalf("B's record = %+v", rec)
	}
	b.relay.mu.Unlock()
	if store.readCount() != 1 {
		t.Fatalf("%d store reads, want 1 (the notification's)", store.readCount())
	}

	// In flight: B reads it through when a request needs it.
	fleet.Pause()
	h2 := Handoff{ID: "r2", Source: "x1", Summary: HandoffSummary{Summary: "tests"}, ExpiresAt: clock.Now().Add(time.Hour), Injected: []string{"x3"}}
	a.saveHandoff(h2)
	a.WaitRelayWrites()
	rec := b.lockRecord("r2")
	if rec == nil || rec.Summary != "tests" || !rec.injected["x3"] {
		t.Fatalf("read-through record = %+v", rec)
	}
	rec.injected["x2"] = true // B gives it to x2 …
	b.relay.mu.Unlock()
	fleet.Resume(context.Background()) // … and A's late notification keeps that
	if rec := b.lockRecord("r2"); !rec.injected["x2"] || !rec.injected["x3"] {
		t.Fatalf("destinations after the late change: %v", rec.injected)
	}
	b.relay.mu.Unlock()

	// Missing: one read, then none until the TTL passes.
	reads := store.readCount()
	for range 3 {
		if b.lockRecord("none") != nil {
			t.Fatal("a record out of nowhere")
		}
		b.relay.mu.Unlock()
	}
	if got := store.readCount() - reads; got != 1 {
		t.Fatalf("%d reads for a missing record, want 1", got)
	}
	clock.mu.Lock()
	clock.now = clock.now.Add(relayMissTTL)
	clock.mu.Unlock()
	b.lockRecord("none")
	b.relay.mu.Unlock()
	if got := store.readCount() - reads; got != 2 {
		t.Fatalf("%d reads after the TTL, want 2", got)
	}
}

// Of two replicas reaching the threshold together, one makes the summary;
// the claim is free again once released.
func TestSharedRelaySummaryClaimedOnce(t *testing.T) {
	clock := &pickClock{now: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	store := newMemHandoffs()
	fleet := feeds.New("A", "B")
	a := relayReplica(t, clock, store, fleet.Feed(0))
	b := relayReplica(t, clock, store, fleet.Feed(1))
	release, ok := a.claimSummary("r1")
	if !ok {
		t.Fatal("A could not claim a free summary")
	}
	if _, ok := b.claimSummary("r1"); ok {
		t.Fatal("B claimed a summary A is making")
	}
	release()
	if _, ok := b.claimSummary("r1"); !ok {
		t.Fatal("B could not claim a released summary")
	}
	// A single process claims nothing in the store.
	single := &Gateway{clock: clock}
	if _, ok := single.claimSummary("r1"); !ok {
		t.Fatal("a single process refused its own summary")
	}
}
