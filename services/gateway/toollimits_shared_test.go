package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit/feeds"
	"switchyard/services"
)

// memToolStore is a ToolLimitStore in memory.
type memToolStore struct {
	mu   sync.Mutex
	rows map[[2]string]ToolLimit
}

func (m *memToolStore) LoadToolLimits(context.Context) ([]ToolLimit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ToolLimit
	for _, l := range m.rows {
		out = append(out, l)
	}
	return out, nil
}

func (m *memToolStore) SaveToolLimit(_ context.Context, l ToolLimit) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows[[2]string{l.Provider, l.Model}] = l
	return nil
}

func (m *memToolStore) DeleteToolLimits(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.rows)
	m.rows = map[[2]string]ToolLimit{}
	return n, nil
}

// A tool limit learned on A is known on B once published; a later raise on
// B reaches A; a clear through A clears B; a resync reloads the stored ones.
func TestSharedToolLimitsFollowAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	clock := &pickClock{now: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	rows := &memToolStore{rows: map[[2]string]ToolLimit{}}
	fleet := feeds.New("A", "B")
	a, _ := NewToolLimits(ctx, clock, rows)
	b, _ := NewToolLimits(ctx, clock, rows)
	a.Share(fleet.Feed(0), func(err error) { t.Error(err) })
	b.Share(fleet.Feed(1), func(err error) { t.Error(err) })

	if err := a.Learn(ctx, "openai", "gpt", 0, 130); err != nil { // inferred 129
		t.Fatal(err)
	}
	a.WaitPublished()
	if l, ok := b.Get("openai", "gpt"); !ok || l.MaxTools != 129 || l.Source != "inferred" {
		t.Fatalf("B's limit = %+v, %v; want inferred 129 from A", l, ok)
	}
	clock.now = clock.now.Add(time.Minute)
	if err := b.Succeeded(ctx, "openai", "gpt", 135); err != nil {
		t.Fatal(err)
	}
	b.WaitPublished()
	if l, _ := a.Get("openai", "gpt"); l.MaxTools != 135 {
		t.Fatalf("A's limit = %+v, want the raise to 135 made on B", l)
	}
	// An older limit arriving late does not replace a newer one.
	b.Apply(ToolLimit{Provider: "openai", Model: "gpt", MaxTools: 1, LearnedAt: clock.now.Add(-time.Hour), ExpiresAt: clock.now.Add(time.Hour)})
	if l, _ := b.Get("openai", "gpt"); l.MaxTools != 135 {
		t.Fatalf("an older limit won: %+v", l)
	}
	if _, err := a.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	a.WaitPublished()
	if _, ok := b.Get("openai", "gpt"); ok {
		t.Fatal("B kept a limit cleared through A")
	}
	// A limit whose change was lost comes back on B's resync.
	fleet.Pause()
	_ = a.Learn(ctx, "openai", "gpt", 64, 70)
	a.WaitPublished()
	fleet.Drop()
	if _, ok := b.Get("openai", "gpt"); ok {
		t.Fatal("B saw a dropped change")
	}
	if err := fleet.Feed(1).Resync(ctx, services.ChangeToolLimit); err != nil {
		t.Fatal(err)
	}
	if l, ok := b.Get("openai", "gpt"); !ok || l.MaxTools != 64 {
		t.Fatalf("after resync %+v, %v", l, ok)
	}
}
