package traffic_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/services/traffic"
)

// memLearnedStore is a LearnedStore in memory that records its writes and
// fails while broken is set.
type memLearnedStore struct {
	mu     sync.Mutex
	rows   map[string]traffic.LearnedLimit
	saves  [][]string // keys of each SaveLearnedLimits call
	broken bool
}

var errLearnedDown = errors.New("store down")

func newMemLearnedStore() *memLearnedStore {
	return &memLearnedStore{rows: map[string]traffic.LearnedLimit{}}
}

func (s *memLearnedStore) LoadLearnedLimits(context.Context) ([]traffic.LearnedLimit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []traffic.LearnedLimit
	for _, l := range s.rows {
		out = append(out, l)
	}
	return out, nil
}

func (s *memLearnedStore) SaveLearnedLimits(_ context.Context, ls []traffic.LearnedLimit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return errLearnedDown
	}
	var keys []string
	for _, l := range ls {
		s.rows[l.Key] = l
		keys = append(keys, l.Key)
	}
	slices.Sort(keys)
	s.saves = append(s.saves, keys)
	return nil
}

func (s *memLearnedStore) DeleteLearnedLimits(_ context.Context, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return errLearnedDown
	}
	for _, k := range keys {
		delete(s.rows, k)
	}
	return nil
}

func (s *memLearnedStore) savedKeys() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, keys := range s.saves {
		parts = append(parts, strings.Join(keys, ","))
	}
	return strings.Join(parts, " | ")
}

func learnHeaders(limit, remaining string) http.Header {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", limit)
	h.Set("x-ratelimit-remaining-requests", remaining)
	h.Set("x-ratelimit-reset-requests", "30s")
	return h
}

// Learned limits are stored off the request path, each key at most once per
// 60 s (20-resilience §10: "debounced 60 s"), and a failed write is tried
// again.
func TestQueueLearnedPersistDebounced(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := &stepClock{now: t0}
	store := newMemLearnedStore()
	q := traffic.NewQueues(clock, nil)
	q.UseLearnedStore(store)

	q.Learn(ctx, "openai:c_1", learnHeaders("500", "400"))
	q.Learn(ctx, "openai:c_2", learnHeaders("100", "90"))
	if n, err := q.PersistLearned(ctx); err != nil || n != 2 {
		t.Fatalf("first persist = %d, %v; want both keys", n, err)
	}
	if n, _ := q.PersistLearned(ctx); n != 0 {
		t.Fatalf("nothing changed, yet %d written", n)
	}
	// c_1 learns again 10 s later: not written before 60 s after its last write.
	clock.now = t0.Add(10 * time.Second)
	q.Learn(ctx, "openai:c_1", learnHeaders("500", "300"))
	if n, _ := q.PersistLearned(ctx); n != 0 {
		t.Fatalf("written %d within 60 s of the last write", n)
	}
	clock.now = t0.Add(traffic.PersistEvery)
	store.broken = true
	if _, err := q.PersistLearned(ctx); !errors.Is(err, errLearnedDown) {
		t.Fatalf("failed write reported %v", err)
	}
	store.broken = false
	if n, err := q.PersistLearned(ctx); err != nil || n != 1 {
		t.Fatalf("retry after the failure = %d, %v; want c_1", n, err)
	}
	if got, want := store.savedKeys(), "openai:c_1,openai:c_2 | openai:c_1"; got != want {
		t.Fatalf("writes %q, want %q", got, want)
	}
	if r := store.rows["openai:c_1"]; r.Remaining != 300 || !r.ObservedAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("stored c_1 = %+v", r)
	}

	// Shutdown: FlushLearned writes what is pending whatever its age.
	clock.now = t0.Add(traffic.PersistEvery + time.Second)
	q.Learn(ctx, "openai:c_1", learnHeaders("500", "200"))
	if n, err := q.FlushLearned(ctx); err != nil || n != 1 {
		t.Fatalf("flush = %d, %v", n, err)
	}
}

// Restored limits apply at once and are not written back unchanged; Reset
// deletes the stored ones before forgetting them, and keeps them when the
// delete fails.
func TestQueueLearnedRestoreAndReset(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := &stepClock{now: t0}
	store := newMemLearnedStore()
	first := traffic.NewQueues(clock, nil)
	first.UseLearnedStore(store)
	first.Learn(ctx, "openai:c_1", learnHeaders("500", "20"))
	first.Learn(ctx, "openai:c_2", learnHeaders("600", "500"))
	if _, err := first.FlushLearned(ctx); err != nil {
		t.Fatal(err)
	}

	clock.now = t0.Add(time.Second)
	q := traffic.NewQueues(clock, nil)
	q.UseLearnedStore(store)
	if n, err := q.LoadLearned(ctx); err != nil || n != 2 {
		t.Fatalf("LoadLearned = %d, %v", n, err)
	}
	if st := queueOf(t, q, "openai:c_1"); st.Learned == nil || st.Learned.MinTimeMs != 110 || !st.Learned.Throttled {
		t.Fatalf("restored c_1: %+v", st.Learned)
	}
	if n, _ := q.PersistLearned(ctx); n != 0 {
		t.Fatalf("restored limits written back: %d", n)
	}

	store.broken = true
	if _, err := q.ResetConnection(ctx, "c_1"); !errors.Is(err, errLearnedDown) {
		t.Fatalf("reset with a failing store: %v", err)
	}
	if st := queueOf(t, q, "openai:c_1"); st.Learned == nil {
		t.Fatal("learned limit forgotten although its row could not be deleted")
	}
	store.broken = false
	if _, err := q.ResetConnection(ctx, "c_1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.rows["openai:c_1"]; ok {
		t.Fatal("reset left the stored row: the throttle would come back at the next start")
	}
	if _, ok := store.rows["openai:c_2"]; !ok {
		t.Fatal("reset of c_1 deleted c_2's row")
	}
	if _, err := q.Reset(ctx); err != nil || len(store.rows) != 0 {
		t.Fatalf("Reset: %v, rows left %v", err, store.rows)
	}
}
