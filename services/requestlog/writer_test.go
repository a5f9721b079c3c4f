package requestlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"switchyard/services"
	"switchyard/services/requestlog"
)

func TestMain(m *testing.M) {
	// Every writer goroutine must end with Close.
	goleak.VerifyTestMain(m)
}

// memSink records copies of the batches it receives. fail, when set, decides
// per call (1-based) whether to fail; gate, when set, blocks each call until a
// value arrives or ctx ends.
type memSink struct {
	mu      sync.Mutex
	batches [][]services.RequestLogEntry
	calls   int
	fail    func(call int) error
	gate    chan struct{}
}

func (s *memSink) WriteRequestLogs(ctx context.Context, entries []services.RequestLogEntry) error {
	s.mu.Lock()
	s.calls++
	call := s.calls
	s.mu.Unlock()
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.fail != nil {
		if err := s.fail(call); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, append([]services.RequestLogEntry(nil), entries...))
	return nil
}

// sizes returns the length of each written batch.
func (s *memSink) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, len(s.batches))
	for i, b := range s.batches {
		out[i] = len(b)
	}
	return out
}

// ids returns the ids written, in order.
func (s *memSink) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.batches {
		for _, e := range b {
			out = append(out, e.ID)
		}
	}
	return out
}

func entry(i int) services.RequestLogEntry {
	return services.RequestLogEntry{ID: fmt.Sprintf("r%05d", i), Endpoint: "/v1/chat/completions", Outcome: services.RequestOutcomeSuccess}
}

func addN(t *testing.T, w *requestlog.Writer, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if !w.Add(entry(i)) {
			t.Fatalf("Add(%d) refused", i)
		}
	}
}

func closeWriter(t *testing.T, w *requestlog.Writer) {
	t.Helper()
	if err := w.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func wantSizes(t *testing.T, sink *memSink, want ...int) {
	t.Helper()
	got := sink.sizes()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batch sizes = %v, want %v", got, want)
	}
}

func wantStats(t *testing.T, w *requestlog.Writer, want requestlog.Stats) {
	t.Helper()
	if got := w.Stats(); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
}

func TestWriterFlushesEachInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &memSink{}
		w := requestlog.New(sink, nil, requestlog.Options{})
		defer closeWriter(t, w)

		addN(t, w, 0, 3)
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		wantSizes(t, sink)
		wantStats(t, w, requestlog.Stats{QueueDepth: 3})

		time.Sleep(time.Millisecond) // t = 1 s
		synctest.Wait()
		wantSizes(t, sink, 3)

		addN(t, w, 3, 2)
		time.Sleep(time.Second) // t = 2 s
		synctest.Wait()
		wantSizes(t, sink, 3, 2)

		time.Sleep(5 * time.Second) // idle: no empty batches
		synctest.Wait()
		wantSizes(t, sink, 3, 2)
		wantStats(t, w, requestlog.Stats{Batches: 2, Written: 5})
	})
}

func TestWriterFlushesFullBatchWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &memSink{}
		w := requestlog.New(sink, nil, requestlog.Options{})
		defer closeWriter(t, w)
		start := time.Now()

		addN(t, w, 0, requestlog.DefaultBatchSize+44)
		synctest.Wait()
		if d := time.Since(start); d != 0 {
			t.Fatalf("fake time moved %v before the full batch was written", d)
		}
		wantSizes(t, sink, 256)
		wantStats(t, w, requestlog.Stats{QueueDepth: 44, Batches: 1, Written: 256})

		time.Sleep(time.Second)
		synctest.Wait()
		wantSizes(t, sink, 256, 44)
	})
}

func TestWriterOverflowDropsNewest(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sink := &memSink{}
			w := requestlog.New(sink, nil, requestlog.Options{Capacity: 8})
			defer closeWriter(t, w)

			addN(t, w, 0, 8)
			for i := 8; i < 10; i++ {
				if w.Add(entry(i)) {
					t.Fatalf("Add(%d) accepted beyond capacity", i)
				}
			}
			wantStats(t, w, requestlog.Stats{QueueDepth: 8, Dropped: 2})

			time.Sleep(time.Second)
			synctest.Wait()
			if got, want := strings.Join(sink.ids(), ","), "r00000,r00001,r00002,r00003,r00004,r00005,r00006,r00007"; got != want {
				t.Fatalf("written %s, want %s (the oldest kept)", got, want)
			}
			addN(t, w, 10, 1) // room again once written
			wantStats(t, w, requestlog.Stats{QueueDepth: 1, Dropped: 2, Batches: 1, Written: 8})
		})
	})

	// Entries being written still count against the capacity.
	t.Run("slow sink", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sink := &memSink{gate: make(chan struct{})}
			w := requestlog.New(sink, nil, requestlog.Options{Capacity: 8, BatchSize: 4})
			defer closeWriter(t, w)

			addN(t, w, 0, 4) // a full batch: written at once, the sink blocks
			synctest.Wait()
			addN(t, w, 4, 4)
			if w.Add(entry(8)) {
				t.Fatal("Add accepted while 4 entries wait and 4 are being written")
			}
			wantStats(t, w, requestlog.Stats{QueueDepth: 8, Dropped: 1})

			sink.gate <- struct{}{}
			sink.gate <- struct{}{}
			synctest.Wait()
			wantSizes(t, sink, 4, 4)
			wantStats(t, w, requestlog.Stats{Dropped: 1, Batches: 2, Written: 8})
		})
	})
}

func TestWriterCloseFlushesAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &memSink{}
		w := requestlog.New(sink, nil, requestlog.Options{})
		start := time.Now()

		addN(t, w, 0, 600)
		if err := w.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close waited %v of fake time for the interval", d)
		}
		if got := len(sink.ids()); got != 600 {
			t.Fatalf("written %d entries, want 600", got)
		}
		for _, n := range sink.sizes() {
			if n > requestlog.DefaultBatchSize {
				t.Fatalf("batch of %d entries, want at most %d", n, requestlog.DefaultBatchSize)
			}
		}

		if w.Add(entry(600)) {
			t.Fatal("Add accepted after Close")
		}
		if err := w.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		st := w.Stats()
		if st.QueueDepth != 0 || st.Written != 600 || st.Dropped != 1 || st.FailedBatches != 0 {
			t.Fatalf("stats = %+v", st)
		}
		// synctest.Test returns only once the writer goroutine has exited.
	})
}

func TestWriterCloseGivesUpWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &memSink{gate: make(chan struct{})} // never opened
		logs := &syncBuffer{}
		w := requestlog.New(sink, slog.New(slog.NewTextHandler(logs, nil)), requestlog.Options{BatchSize: 4})

		addN(t, w, 0, 10) // two batches taken, the first stuck in the sink
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := w.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want deadline exceeded", err)
		}
		synctest.Wait() // the writer sees its write cancelled and exits
		st := w.Stats()
		if st.FailedBatches != 1 || st.Dropped != 6 || st.QueueDepth != 0 || st.Written != 0 {
			t.Fatalf("stats = %+v, want 1 failed batch (4) and 6 dropped", st)
		}
		if out := logs.String(); !strings.Contains(out, "abandoned at close") || !strings.Contains(out, "entries=6") {
			t.Fatalf("log lacks the abandoned entries: %q", out)
		}
		if err := w.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

// syncBuffer is a log destination safe to read while the writer logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWriterSurvivesFailingSink(t *testing.T) {
	cases := []struct {
		name    string
		fail    func(call int) error
		wantLog string
	}{
		{"error", func(call int) error {
			if call == 1 {
				return errors.New("disk I/O error")
			}
			return nil
		}, "disk I/O error"},
		{"panic", func(call int) error {
			if call == 1 {
				panic("boom")
			}
			return nil
		}, "sink panicked: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := &syncBuffer{}
				sink := &memSink{fail: tc.fail}
				w := requestlog.New(sink, slog.New(slog.NewTextHandler(logs, nil)), requestlog.Options{})
				defer closeWriter(t, w)

				secret := entry(0)
				secret.Bodies = &services.CapturedBodies{Request: &services.CapturedBody{Text: "prompt-text-secret"}}
				w.Add(secret)
				addN(t, w, 1, 2)
				time.Sleep(time.Second)
				synctest.Wait()
				wantStats(t, w, requestlog.Stats{FailedBatches: 1})

				addN(t, w, 3, 2)
				time.Sleep(time.Second)
				synctest.Wait()
				wantStats(t, w, requestlog.Stats{Batches: 1, Written: 2, FailedBatches: 1})
				if got := strings.Join(sink.ids(), ","); got != "r00003,r00004" {
					t.Fatalf("written %s, want r00003,r00004", got)
				}

				out := logs.String()
				if !strings.Contains(out, "request log batch write failed") || !strings.Contains(out, "entries=3") || !strings.Contains(out, tc.wantLog) {
					t.Fatalf("log lacks the failure: %q", out)
				}
				if strings.Contains(out, "prompt-text-secret") || strings.Contains(out, "r00000") {
					t.Fatalf("log shows entry content: %q", out)
				}
			})
		})
	}
}

// A store that is unavailable (a shared database restarting, SQLite busy)
// costs no log rows while the queue has room: the entries stay queued, in
// order, and are written at the first flush after the store answers again.
// Past Capacity new entries are refused and counted, as always; a store
// still unavailable at Close loses what it holds, counted as a failed batch.
func TestWriterHoldsEntriesWhileTheStoreIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down sync.Mutex
		unavailable := true
		sink := &memSink{fail: func(int) error {
			down.Lock()
			defer down.Unlock()
			if unavailable {
				return &services.UnavailableError{Op: "write request logs", Err: errors.New("connection refused")}
			}
			return nil
		}}
		logs := &syncBuffer{}
		w := requestlog.New(sink, slog.New(slog.NewTextHandler(logs, nil)), requestlog.Options{BatchSize: 4, Capacity: 10})
		addN(t, w, 0, 3)
		time.Sleep(time.Second)
		synctest.Wait()
		addN(t, w, 3, 6) // 9 queued: a full batch kicks a write, which fails too
		time.Sleep(time.Second)
		synctest.Wait()
		if !w.Add(entry(9)) || w.Add(entry(10)) {
			t.Fatal("the held entries do not count against Capacity")
		}
		st := w.Stats()
		if st.Held != 9 || st.QueueDepth != 10 || st.Dropped != 1 || st.FailedBatches != 0 || st.HeldBatches < 2 || len(sink.ids()) != 0 {
			t.Fatalf("during the outage: %+v, written %v", st, sink.ids())
		}
		if !strings.Contains(logs.String(), "the store is unavailable") {
			t.Fatalf("no warning about the held entries: %q", logs.String())
		}

		down.Lock()
		unavailable = false
		down.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		want := []string{}
		for i := range 10 {
			want = append(want, entry(i).ID)
		}
		if got := sink.ids(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("written after the outage %v, want %v in order", got, want)
		}
		st = w.Stats()
		if st.Held != 0 || st.QueueDepth != 0 || st.Written != 10 || st.FailedBatches != 0 {
			t.Fatalf("after the outage: %+v", st)
		}

		down.Lock()
		unavailable = true
		down.Unlock()
		addN(t, w, 20, 2)
		closeWriter(t, w)
		if st := w.Stats(); st.FailedBatches != 1 || st.QueueDepth != 0 || st.Written != 10 {
			t.Fatalf("closed while the store is unavailable: %+v", st)
		}
	})
}

func TestWriterConcurrentAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &memSink{}
		w := requestlog.New(sink, nil, requestlog.Options{Capacity: 1000, BatchSize: 64})
		const workers, each = 16, 200
		var wg sync.WaitGroup
		var mu sync.Mutex
		accepted := 0
		for g := range workers {
			wg.Go(func() {
				n := 0
				for i := range each {
					if w.Add(entry(g*each + i)) {
						n++
					}
				}
				mu.Lock()
				accepted += n
				mu.Unlock()
			})
		}
		wg.Wait()
		closeWriter(t, w)
		st := w.Stats()
		if int(st.Written) != accepted || len(sink.ids()) != accepted {
			t.Fatalf("accepted %d, stats %+v, sink %d", accepted, st, len(sink.ids()))
		}
		if int(st.Written+st.Dropped) != workers*each {
			t.Fatalf("written %d + dropped %d != %d added", st.Written, st.Dropped, workers*each)
		}
	})
}

type discardSink struct{}

func (discardSink) WriteRequestLogs(context.Context, []services.RequestLogEntry) error { return nil }

func BenchmarkAdd(b *testing.B) {
	e := services.RequestLogEntry{ID: "req_01JNQ7H2Q8ZK4M6T9V3XWYB5CD", Endpoint: "/v1/chat/completions",
		RequestedModel: "fast", Provider: "glm", Model: "glm-4.6", ConnectionID: "c_2", Status: 200,
		Outcome: services.RequestOutcomeSuccess, Attempts: 1,
		AttemptLog: []services.AttemptRecord{{Provider: "glm", Model: "glm-4.6", ConnectionID: "c_2", Outcome: "success"}}}

	// Every Add accepted: when the queue is full the timer pauses until the writer drains it.
	b.Run("accepted", func(b *testing.B) {
		w := requestlog.New(discardSink{}, nil, requestlog.Options{})
		b.ReportAllocs()
		for b.Loop() {
			if !w.Add(e) {
				b.StopTimer()
				for w.Stats().QueueDepth >= requestlog.DefaultBatchSize {
					runtime.Gosched()
				}
				b.StartTimer()
				w.Add(e)
			}
		}
		b.StopTimer()
		_ = w.Close(context.Background())
	})
	// Producers outrunning the writer: a mix of accepted and dropped entries.
	b.Run("parallel", func(b *testing.B) {
		w := requestlog.New(discardSink{}, nil, requestlog.Options{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.Add(e)
			}
		})
		b.StopTimer()
		_ = w.Close(context.Background())
		b.ReportMetric(float64(w.Stats().Dropped)/float64(b.N), "dropped/op")
	})
	// The fast path when the queue is full: an atomic add and a counter.
	b.Run("full", func(b *testing.B) {
		sink := &memSink{gate: make(chan struct{})}
		w := requestlog.New(sink, nil, requestlog.Options{Capacity: 1})
		w.Add(e)
		b.ReportAllocs()
		for b.Loop() {
			w.Add(e)
		}
		b.StopTimer()
		close(sink.gate)
		_ = w.Close(context.Background())
	})
}

// The audit log rides on the same Batcher as the request log: any entry
// type, the same interval, batch size and capacity bound.
func TestBatcherWritesAnyEntryType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got [][]string
		write := func(_ context.Context, batch []string) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, append([]string(nil), batch...))
			return nil
		}
		w := requestlog.NewBatcher(write, "audit log", nil, requestlog.Options{BatchSize: 2, Capacity: 3})
		for _, s := range []string{"a", "b", "c", "d"} {
			w.Add(s)
		}
		synctest.Wait() // the full batch of two is written at once
		mu.Lock()
		if fmt.Sprint(got) != "[[a b]]" {
			t.Errorf("before the interval: %v", got)
		}
		mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(got) != "[[a b] [c]]" {
			t.Errorf("batches %v", got)
		}
		if st := w.Stats(); st.Dropped != 1 || st.Written != 3 || st.QueueDepth != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}
