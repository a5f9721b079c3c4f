package app_test

// Goroutine, file-descriptor and heap leak checks (60-quality R8, R9): build
// the whole app, drive JSON requests, streams and client disconnects
// through it, close everything, and nothing may be left behind.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/app"
	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
)

// leakApp is an app, its listener and its fake upstream, all closed
// explicitly (not through t.Cleanup) so leak checks can run after them.
type leakApp struct {
	srv  *app.Server
	http *httptest.Server
	fu   *fakeupstream.Server
	key  string
	hc   *http.Client
	tr   *http.Transport
}

func newLeakApp(t *testing.T, opts ...fakeupstream.Option) *leakApp {
	t.Helper()
	fu := fakeupstream.New(append([]fakeupstream.Option{fakeupstream.WithEvents(8)}, opts...)...)
	if err := fu.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SWITCHYARD_ADMIN_PASSWORD": testkit.AdminPassword, "SWITCHYARD_DATA_DIR": t.TempDir(),
		"SWITCHYARD_PRIVATE_UPSTREAMS": fu.Addr()}
	cfg, err := app.LoadConfig([]string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.Build(context.Background(), cfg, app.Options{Clock: services.RealClock{}, Argon2: &testkit.CheapArgon2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, k := range []string{"lk-a-3f9e", "lk-b-3f9e"} {
		if _, err := srv.Connections().Create(ctx, services.ConnectionInput{Provider: services.Some("leaky"), Name: services.Some(fmt.Sprintf("c%d", i)),
			APIKey: services.Some(k), BaseURL: services.Some(fu.URL() + "/v1"), Priority: services.Some(i),
			Custom: services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})}); err != nil {
			t.Fatal(err)
		}
	}
	_, key, err := srv.Keys().Create(ctx, services.KeyInput{Name: services.Some("leak"), Scopes: services.Some([]string{services.ScopeInference})})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	return &leakApp{srv: srv, http: httptest.NewServer(srv.Handler()), fu: fu, key: key, hc: &http.Client{Transport: tr}, tr: tr}
}

// close shuts everything down in the order a process exit would.
func (l *leakApp) close(t *testing.T) {
	t.Helper()
	l.tr.CloseIdleConnections()
	l.http.Close()
	if err := l.srv.Close(); err != nil {
		t.Errorf("app close: %v", err)
	}
	l.fu.Close()
}

func (l *leakApp) call(model string, stream bool, nonce string) testkit.ChatCall {
	return testkit.ChatCall{BaseURL: l.http.URL, Key: l.key, Model: model, Stream: stream, Nonce: nonce, Want: fakeupstream.DefaultContent}
}

// leakTraffic sends n requests (JSON and streams alternately, from 8
// workers), then client disconnects: streams cancelled after their first
// events while the upstream stalls, and requests cancelled while the
// upstream has not answered yet. Each disconnect must end its upstream
// request within 1 s (R8).
func leakTraffic(t *testing.T, l *leakApp, n int) {
	t.Helper()
	l.fu.ScriptModel("*", "stall", fakeupstream.Step{Fault: fakeupstream.FaultStall, At: 2})
	l.fu.ScriptModel("*", "slow", fakeupstream.Step{Delay: 10 * time.Second})
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				out := testkit.DoChat(ctx, l.hc, l.call("leaky/m1", i%2 == 0, fmt.Sprintf("%08x", i)))
				cancel()
				if out.Class != testkit.ClassOK {
					t.Errorf("request %d: %v", i, out)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()

	for i := range 10 {
		model := "leaky/stall"
		if i%2 == 1 {
			model = "leaky/slow"
		}
		nonce := fmt.Sprintf("c%07x", i)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", l.http.URL+"/v1/chat/completions", strings.NewReader(l.call(model, true, nonce).ChatBody()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+l.key)
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := l.hc.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			io.CopyN(io.Discard, resp.Body, 64) // the first bytes, then the client goes away
			cancel()
			io.Copy(io.Discard, resp.Body)
		}()
		wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := l.fu.WaitUntil(wctx, func(hits []fakeupstream.Hit) bool {
			for _, h := range hits {
				if h.Nonce == nonce {
					return true
				}
			}
			return false
		}); err != nil {
			t.Fatalf("disconnect %d: upstream never reached: %v", i, err)
		}
		wcancel()
		// A stream client leaves by itself after its first bytes; the slow
		// one leaves here, before any header arrived.
		if model == "leaky/slow" {
			cancel()
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("disconnect %d: the stream never delivered its first bytes", i)
			cancel()
			<-done
		}
		ectx, ecancel := context.WithTimeout(context.Background(), time.Second)
		err := l.fu.WaitUntil(ectx, func(hits []fakeupstream.Hit) bool {
			for _, h := range hits {
				if h.Nonce == nonce && !h.Ended() {
					return false
				}
			}
			return true
		})
		ecancel()
		if err != nil {
			t.Errorf("disconnect %d (%s): upstream request still running 1 s after the client left: %v", i, model, err)
		}
	}
	for _, h := range l.fu.Hits() {
		if strings.HasPrefix(h.Nonce, "c") && h.End != fakeupstream.EndClientCancelled {
			t.Errorf("disconnect hit %d ended %q, want client_cancelled", h.Seq, h.End)
		}
	}
	if !testkit.PollUntil(5*time.Second, func() bool { return l.srv.RequestLogStats().Written >= int64(n+10) }) {
		t.Errorf("request log: %+v, want %d rows", l.srv.RequestLogStats(), n+10)
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

func TestNoGoroutineOrFDLeakAfterTrafficAndClose(t *testing.T) {
	// Goroutines of earlier tests (their keep-alive connections winding
	// down) are not this test's business.
	ignore := goleak.IgnoreCurrent()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	fdBefore := openFDs(t)

	l := newLeakApp(t)
	leakTraffic(t, l, 200)
	l.close(t)

	goleak.VerifyNone(t, ignore,
		// The race detector's and the runtime's own helpers, when present.
		goleak.IgnoreTopFunction("runtime.ensureSigM.func1"),
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
	)
	var fdAfter int
	settled := testkit.PollUntil(2*time.Second, func() bool { fdAfter = openFDs(t); return fdAfter <= fdBefore+2 })
	t.Logf("open fds: %d before, %d after", fdBefore, fdAfter)
	if !settled {
		t.Errorf("open fds %d after close, %d before (allowed ± 2)", fdAfter, fdBefore)
	}
}

// raceEnabled reports a -race build.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// heapInUse is the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestHeapBoundedOverThousandsOfStreams(t *testing.T) {
	warm, streams, conc := 200, 2000, 20
	if raceEnabled() {
		streams = 1000 // the race detector makes each stream ~7× slower
	}
	if testkit.IsLong() {
		warm, streams, conc = 500, 5000, 200
	}
	// The hit log would grow with every request; R9 measures the gateway.
	l := newLeakApp(t, fakeupstream.WithHitLog(fakeupstream.HitLogOff))
	defer l.close(t)
	run := func(n int) {
		var wg sync.WaitGroup
		work := make(chan int)
		for range conc {
			wg.Go(func() {
				for i := range work {
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					if out := testkit.DoChat(ctx, l.hc, l.call("leaky/m1", true, "")); out.Class != testkit.ClassOK {
						t.Errorf("stream %d: %v", i, out)
					}
					cancel()
				}
			})
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
	}
	settle := func(rows int) uint64 {
		l.tr.CloseIdleConnections()
		if !testkit.PollUntil(5*time.Second, func() bool { return l.srv.RequestLogStats().Written >= int64(rows) }) {
			t.Fatalf("request log: %+v, want %d rows", l.srv.RequestLogStats(), rows)
		}
		return heapInUse()
	}
	run(warm)
	base := settle(warm)
	start := time.Now()
	run(streams)
	elapsed := time.Since(start)
	after := settle(warm + streams)
	growth := int64(after) - int64(base)
	t.Logf("heap: %.2f MiB after %d warm-up streams, %.2f MiB after %d more (%v, concurrency %d): growth %+.2f MiB",
		float64(base)/(1<<20), warm, float64(after)/(1<<20), streams, elapsed.Round(time.Millisecond), conc, float64(growth)/(1<<20))
	if growth > 8<<20 {
		t.Errorf("heap grew %.2f MiB over %d streams (bound 8 MiB)", float64(growth)/(1<<20), streams)
	}
}
