package quota

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"switchyard/services/routing"
)

func TestFreshness(t *testing.T) {
	stale := 24 * time.Hour
	for _, tc := range []struct {
		name  string
		w     Window
		at    time.Duration // after observation at T0
		known bool
		used  float64
	}{
		{"minute counts until its reset", Window{Name: Minute, Used: 1, ResetAt: T0.Add(6 * time.Minute)}, 5 * time.Minute, true, 1},
		{"minute ends at its reset", Window{Name: Minute, Used: 1, ResetAt: T0.Add(6 * time.Minute)}, 6 * time.Minute, false, 0},
		{"minute without reset: 60 s", Window{Name: Minute, Used: 0.5}, 59 * time.Second, true, 0.5},
		{"minute without reset ends", Window{Name: Minute, Used: 0.5}, 60 * time.Second, false, 0},
		{"5h without reset: nominal 5 h", Window{Name: FiveH, Used: 0.5}, 5*time.Hour - time.Second, true, 0.5},
		{"5h without reset ends at 5 h", Window{Name: FiveH, Used: 0.5}, 5 * time.Hour, false, 0},
		{"weekly without reset: stale bound first", Window{Name: Weekly, Used: 0.5}, 24 * time.Hour, false, 0},
		{"daily without reset", Window{Name: Daily, Used: 0.2}, 23 * time.Hour, true, 0.2},
		{"monthly reset passed: u = 0", Window{Name: Monthly, Used: 0.9, ResetAt: T0.Add(time.Hour)}, 2 * time.Hour, true, 0},
		{"monthly stale", Window{Name: Monthly, Used: 0.9, ResetAt: T0.Add(48 * time.Hour)}, 24 * time.Hour, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Options{MaxStale: func() time.Duration { return stale }})
			tr.ObserveWindows("c", []Window{tc.w}, T0)
			v := tr.Windows("c", T0.Add(tc.at))
			got := map[string]WindowView{Minute: v.Minute, FiveH: v.FiveHour, Daily: v.Daily, Weekly: v.Weekly, Monthly: v.Monthly}[tc.w.Name]
			if got.Known != tc.known || got.Used != tc.used {
				t.Fatalf("known %v u %v, want %v %v", got.Known, got.Used, tc.known, tc.used)
			}
		})
	}
	// routing.quotaMaxStaleMs is read on every use.
	cur := time.Hour
	tr := New(Options{MaxStale: func() time.Duration { return cur }})
	tr.ObserveWindows("c", []Window{{Name: Weekly, Used: 0.5, ResetAt: T0.Add(72 * time.Hour)}}, T0)
	if tr.Windows("c", T0.Add(2*time.Hour)).Weekly.Known {
		t.Fatal("1 h max stale ignored")
	}
	cur = 0 // default 24 h
	if !tr.Windows("c", T0.Add(2*time.Hour)).Weekly.Known {
		t.Fatal("default max stale not applied")
	}
}

func TestNewerObservationWins(t *testing.T) {
	tr := New(Options{})
	tr.ObserveWindows("c", []Window{{Name: FiveH, Used: 0.9}, {Name: Weekly, Used: 0.3}}, T0.Add(time.Minute))
	// An older reading (a slow response received earlier) changes nothing.
	tr.ObserveWindows("c", []Window{{Name: FiveH, Used: 0.1}}, T0)
	v := tr.Windows("c", T0.Add(2*time.Minute))
	if v.FiveHour.Used != 0.9 || v.Weekly.Used != 0.3 {
		t.Fatalf("older observation applied: %+v", v)
	}
	// A newer one replaces only its own window.
	tr.ObserveWindows("c", []Window{{Name: FiveH, Used: 0.2}}, T0.Add(2*time.Minute))
	v = tr.Windows("c", T0.Add(2*time.Minute))
	if v.FiveHour.Used != 0.2 || v.Weekly.Used != 0.3 || !v.Weekly.ObservedAt.Equal(T0.Add(time.Minute)) {
		t.Fatalf("newer observation: %+v", v)
	}
	if got := (View{}).Routing(); got != (routing.QuotaView{}) {
		t.Fatalf("empty view converts to %+v", got)
	}
}

func TestGate(t *testing.T) {
	at := func(d time.Duration) time.Time { return T0.Add(d) }
	for _, tc := range []struct {
		name    string
		ws      []Window
		reserve int
		now     time.Duration
		blocked bool
		until   time.Time
	}{
		{"u = 1, future reset", []Window{{Name: Weekly, Used: 1, ResetAt: at(2 * time.Hour)}}, 0, 0, true, at(2 * time.Hour)},
		{"u = 1, reset unknown: not gated", []Window{{Name: Weekly, Used: 1}}, 0, 0, false, time.Time{}},
		{"u = 1, reset passed", []Window{{Name: FiveH, Used: 1, ResetAt: at(time.Hour)}}, 0, time.Hour, false, time.Time{}},
		{"u = 1 beyond freshness: timer is the end of freshness", []Window{{Name: Monthly, Used: 1, ResetAt: at(20 * 24 * time.Hour)}},
			0, time.Hour, true, at(24 * time.Hour)},
		{"minute never gates", []Window{{Name: Minute, Used: 1, ResetAt: at(time.Minute)}}, 0, 0, false, time.Time{}},
		{"u .95 no reserve", []Window{{Name: FiveH, Used: 0.95, ResetAt: at(time.Hour)}}, 0, 0, false, time.Time{}},
		{"reserve 10: u .90 gated", []Window{{Name: FiveH, Used: 0.90, ResetAt: at(time.Hour)}}, 10, 0, true, at(time.Hour)},
		{"reserve 10: u .89 free", []Window{{Name: FiveH, Used: 0.89, ResetAt: at(time.Hour)}}, 10, 0, false, time.Time{}},
		{"reserve, unknown reset: until freshness ends", []Window{{Name: FiveH, Used: 0.95}}, 10, 0, true, at(5 * time.Hour)},
		{"reserve clamped to 50", []Window{{Name: Daily, Used: 0.5, ResetAt: at(time.Hour)}}, 90, 0, true, at(time.Hour)},
		{"reserve 50 clamps, u .49 free", []Window{{Name: Daily, Used: 0.49, ResetAt: at(time.Hour)}}, 90, 0, false, time.Time{}},
		{"negative reserve is 0", []Window{{Name: Daily, Used: 0.99, ResetAt: at(time.Hour)}}, -5, 0, false, time.Time{}},
		{"two blocking windows: the later end", []Window{{Name: FiveH, Used: 1, ResetAt: at(time.Hour)},
			{Name: Weekly, Used: 1, ResetAt: at(3 * time.Hour)}}, 0, 0, true, at(3 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Options{})
			tr.ObserveWindows("c", tc.ws, T0)
			blocked, until := tr.Gate("c", tc.reserve, T0.Add(tc.now))
			if blocked != tc.blocked || !until.Equal(tc.until) {
				t.Fatalf("Gate = %v until %v, want %v until %v", blocked, until, tc.blocked, tc.until)
			}
		})
	}
	if b, _ := New(Options{}).Gate("never", 50, T0); b {
		t.Fatal("unknown connection gated")
	}
}

// memStore is a Store in memory that reports each save on saved.
type memStore struct {
	mu    sync.Mutex
	rows  map[string]Record // conn/window → row
	saves int
	fail  error
	saved chan []Record
}

func newMemStore() *memStore {
	return &memStore{rows: map[string]Record{}, saved: make(chan []Record, 100)}
}

func (m *memStore) LoadQuotaWindows(context.Context) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Record, 0, len(m.rows))
	for _, r := range m.rows {
		out = append(out, r)
	}
	return out, nil
}

func (m *memStore) SaveQuotaWindows(_ context.Context, recs []Record) error {
	m.mu.Lock()
	m.saves++
	err := m.fail
	if err == nil {
		for _, r := range recs {
			m.rows[r.ConnectionID+"/"+r.Window] = r
		}
	}
	m.mu.Unlock()
	m.saved <- recs
	return err
}

func (m *memStore) DeleteQuotaWindows(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.rows {
		if r.ConnectionID == id {
			delete(m.rows, k)
		}
	}
	return nil
}

func (m *memStore) row(key string) (Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[key]
	return r, ok
}

func waitSave(t *testing.T, m *memStore) []Record {
	t.Helper()
	select {
	case recs := <-m.saved:
		return recs
	case <-time.After(10 * time.Second):
		t.Fatal("no write")
		return nil
	}
}

func noSave(t *testing.T, m *memStore) {
	t.Helper()
	select {
	case recs := <-m.saved:
		t.Fatalf("unexpected write %+v", recs)
	default:
	}
}

func TestPersistenceDebounced(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(T0)
	st := newMemStore()
	tr := newTracker(Options{Store: st, Clock: clock}, time.Hour) // sweep driven by the test
	defer tr.Close(ctx)

	codex := func(pct string) http.Header { return hdr("x-codex-primary-used-percent", pct) }
	// The first observation of a connection is written at once.
	tr.Observe("c1", codex("10"), clock.Now())
	if recs := waitSave(t, st); len(recs) != 1 || recs[0].Used != 0.1 || recs[0].Window != FiveH || recs[0].ConnectionID != "c1" {
		t.Fatalf("first write %+v", recs)
	}
	// Within 10 s: memory changes, nothing is written.
	clock.Advance(5 * time.Second)
	tr.Observe("c1", codex("20"), clock.Now())
	tr.flushDue(ctx, clock.Now())
	noSave(t, st)
	if tr.Windows("c1", clock.Now()).FiveHour.Used != 0.2 {
		t.Fatal("memory not updated")
	}
	// Another connection is not held back by c1.
	tr.Observe("c2", codex("30"), clock.Now())
	if recs := waitSave(t, st); recs[0].ConnectionID != "c2" {
		t.Fatalf("c2 write %+v", recs)
	}
	// 10 s after c1's write the sweep writes the pending change …
	clock.Advance(5 * time.Second)
	tr.flushDue(ctx, clock.Now())
	if recs := waitSave(t, st); recs[0].Used != 0.2 {
		t.Fatalf("due write %+v", recs)
	}
	// … and nothing when nothing changed.
	clock.Advance(time.Minute)
	tr.flushDue(ctx, clock.Now())
	noSave(t, st)
	// After the interval, an observation is written at once again.
	tr.Observe("c1", codex("40"), clock.Now())
	if recs := waitSave(t, st); recs[0].Used != 0.4 {
		t.Fatalf("write %+v", recs)
	}
	// Close writes what is pending regardless of the interval.
	tr.Observe("c1", codex("50"), clock.Now())
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.row("c1/5h"); r.Used != 0.5 {
		t.Fatalf("after close: %+v", r)
	}
}

func TestPersistenceFailureRetried(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(T0)
	st := newMemStore()
	st.fail = errors.New("disk full")
	tr := newTracker(Options{Store: st, Clock: clock}, time.Hour)
	tr.ObserveWindows("c1", []Window{{Name: Weekly, Used: 0.3}}, clock.Now())
	waitSave(t, st)
	// The store has answered; the failed write marks the connection dirty
	// again just after. Wait for that (bounded) before the retry.
	v, _ := tr.conns.Load("c1")
	for deadline := time.Now().Add(10 * time.Second); !v.(*conn).dirty.Load(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the failed write never left the connection dirty")
		}
	}
	st.mu.Lock()
	st.fail = nil
	st.mu.Unlock()
	clock.Advance(10 * time.Second)
	tr.flushDue(ctx, clock.Now())
	waitSave(t, st)
	if r, ok := st.row("c1/weekly"); !ok || r.Used != 0.3 {
		t.Fatalf("retried row %+v %v", r, ok)
	}
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLoadAndForget(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(T0.Add(time.Hour))
	st := newMemStore()
	st.rows["c1/5h"] = Record{ConnectionID: "c1", Window: FiveH, Used: 1, ResetAt: T0.Add(2 * time.Hour), ObservedAt: T0}
	st.rows["c1/weekly"] = Record{ConnectionID: "c1", Window: Weekly, Used: 0.7, ObservedAt: T0.Add(-25 * time.Hour)} // stale
	st.rows["c2/bogus"] = Record{ConnectionID: "c2", Window: "hourly", Used: 1, ObservedAt: T0}
	tr := newTracker(Options{Store: st, Clock: clock}, time.Hour)
	defer tr.Close(ctx)
	// Newer than the stored row: memory wins over Load.
	tr.ObserveWindows("c3", []Window{{Name: Daily, Used: 0.1}}, T0.Add(time.Hour))
	waitSave(t, st)
	st.mu.Lock()
	st.rows["c3/daily"] = Record{ConnectionID: "c3", Window: Daily, Used: 0.9, ObservedAt: T0}
	st.mu.Unlock()
	if err := tr.Load(ctx); err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	if b, until := tr.Gate("c1", 0, now); !b || !until.Equal(T0.Add(2*time.Hour)) {
		t.Fatalf("loaded gate %v %v", b, until)
	}
	v := tr.Windows("c1", now)
	if v.Weekly.Known || !v.FiveHour.ObservedAt.Equal(T0) {
		t.Fatalf("loaded view %+v", v)
	}
	if tr.Windows("c3", now).Daily.Used != 0.1 {
		t.Fatal("older stored row replaced a newer observation")
	}
	noSave(t, st) // Load writes nothing back

	if err := tr.Forget(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if b, _ := tr.Gate("c1", 0, now); b {
		t.Fatal("forgotten connection still gated")
	}
	if _, ok := st.row("c1/5h"); ok {
		t.Fatal("forgotten rows kept")
	}
}

func TestMemoryOnly(t *testing.T) {
	tr := New(Options{})
	tr.Observe("c", hdr("x-codex-primary-used-percent", "100", "x-codex-primary-reset-after-seconds", "60"), T0)
	if b, _ := tr.Gate("c", 0, T0); !b {
		t.Fatal("not gated")
	}
	ctx := context.Background()
	if err := tr.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Forget(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tr.Observe("", hdr("x-codex-primary-used-percent", "1"), T0) // no connection: ignored
}

// TestConcurrentUse observes, reads, gates, flushes and forgets from many
// goroutines; run with -race.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(T0)
	st := newMemStore()
	st.saved = make(chan []Record, 1<<16)
	tr := newTracker(Options{Store: st, Clock: clock, WriteInterval: time.Millisecond}, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				id := fmt.Sprintf("c%d", i%5)
				now := T0.Add(time.Duration(g*1000+i) * time.Millisecond)
				tr.Observe(id, hdr("x-codex-primary-used-percent", fmt.Sprint(i%101),
					"x-codex-primary-reset-after-seconds", "30", "anthropic-ratelimit-unified-7d-utilization", "0.5"), now)
				tr.Windows(id, now)
				tr.Gate(id, i%51, now)
				tr.RoutingView(id, now)
				switch i % 50 {
				case 7:
					_ = tr.Flush(ctx)
				case 13:
					_ = tr.Forget(ctx, id)
				case 21:
					clock.Advance(time.Second)
				}
			}
		})
	}
	wg.Wait()
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Every stored u is a valid fraction.
	recs, _ := st.LoadQuotaWindows(ctx)
	for _, r := range recs {
		if r.Used < 0 || r.Used > 1 || !slices.Contains(windowNames[:], r.Window) {
			t.Fatalf("bad row %+v", r)
		}
	}
}

// fakeClock is a services.Clock that moves only when told to (this
// package's tests cannot import testkit, which imports models).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Wait(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}
