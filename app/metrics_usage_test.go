package app

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/services"
)

// fakeUsageStore records the batches of connUsage.
type fakeUsageStore struct {
	mu      sync.Mutex
	batches []map[string]time.Time
	calls   atomic.Int32
	block   chan struct{} // when set, a write waits for it
}

func (s *fakeUsageStore) TouchConnectionsLastUsed(_ context.Context, at map[string]time.Time) error {
	s.calls.Add(1)
	if s.block != nil {
		<-s.block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := make(map[string]time.Time, len(at))
	for k, v := range at {
		cp[k] = v
	}
	s.batches = append(s.batches, cp)
	return nil
}

func (s *fakeUsageStore) all() []map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]time.Time(nil), s.batches...)
}

func TestConnUsageKeepsTheLatestInMemoryAndFlushesInBatches(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	u := newConnUsage(time.Minute)
	// Without a store Served only keeps memory.
	u.Used("c_1", t0)
	if got := u.LastUsed("c_1"); !got.Equal(t0) {
		t.Fatalf("last used %v", got)
	}
	if err := u.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	store := &fakeUsageStore{block: make(chan struct{})}
	u.bind(store, nil)

	// The first success after binding starts one background write; the
	// calls meanwhile only move the times in memory (never backwards).
	u.Used("c_1", t0.Add(time.Second))
	for i := range 50 {
		u.Used("c_2", t0.Add(time.Duration(i)*time.Millisecond))
		u.Used("c_1", t0) // older: ignored
	}
	close(store.block)
	if err := u.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := store.calls.Load(); n < 1 || n > 2 {
		t.Fatalf("%d writes for 101 successes", n)
	}
	final := map[string]time.Time{}
	for _, b := range store.all() {
		for k, v := range b {
			final[k] = v
		}
	}
	if !final["c_1"].Equal(t0.Add(time.Second)) || !final["c_2"].Equal(t0.Add(49*time.Millisecond)) {
		t.Fatalf("written %v", final)
	}
	if got := u.LastUsed("c_1"); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("last used went backwards: %v", got)
	}

	// Nothing new: nothing written. Closed: Served starts no write.
	calls := store.calls.Load()
	if err := u.Flush(context.Background()); err != nil || store.calls.Load() != calls {
		t.Errorf("an empty flush wrote (%v)", err)
	}
	u.Used("c_3", t0.Add(time.Hour))
	time.Sleep(10 * time.Millisecond)
	if store.calls.Load() != calls {
		t.Error("a closed tracker started a write")
	}
}

func TestConnUsageWritesAtMostOncePerInterval(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	u := newConnUsage(time.Minute)
	store := &fakeUsageStore{}
	u.bind(store, nil)
	u.Used("c_1", t0)
	waitCalls := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for store.calls.Load() < n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if store.calls.Load() != n {
			t.Fatalf("%d writes, want %d", store.calls.Load(), n)
		}
	}
	waitCalls(1)
	u.Used("c_1", t0.Add(30*time.Second)) // within the interval: memory only
	time.Sleep(10 * time.Millisecond)
	waitCalls(1)
	u.Used("c_1", t0.Add(61*time.Second)) // interval elapsed: one more write
	waitCalls(2)
	if err := u.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := store.all()
	if !b[len(b)-1]["c_1"].Equal(t0.Add(61 * time.Second)) {
		t.Errorf("last batch %v", b[len(b)-1])
	}
}

// The tracker is bound to the connection store when the server is built:
// a flush lands in connections.last_used_at, only ever moving forward.
func TestServedReachesTheConnectionRow(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SWITCHYARD_ADMIN_PASSWORD": "correct horse battery", "SWITCHYARD_DATA_DIR": dir}
	cfg, err := LoadConfig([]string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(context.Background(), cfg, Options{Argon2: &services.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cn, err := s.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("ollama"), Name: services.Some("box"),
		BaseURL: services.Some("http://127.0.0.1:1/v1")})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 123_000_000, time.UTC)
	s.metrics.Used(cn.ID, at)
	s.metrics.Used("c_deleted", at)
	if err := s.metrics.usage.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.conns.Get(ctx, cn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(at) {
		t.Fatalf("last_used_at %v, want %v", got.LastUsedAt, at)
	}
	// An older time never overwrites a newer one.
	store := s.metrics.usage.store
	if err := store.TouchConnectionsLastUsed(ctx, map[string]time.Time{cn.ID: at.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.conns.Get(ctx, cn.ID); !got.LastUsedAt.Equal(at) {
		t.Fatalf("last_used_at moved back to %v", got.LastUsedAt)
	}
}
