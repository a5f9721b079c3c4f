package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// TestGrowBufCapsAndBudget (issue 17 item 3, the rule): a buffer never
// grows past its cap; beyond its free part it holds 64 KiB chunks, each
// drawn from the shared budget; bytes joins them in order; release gives
// the budget back.
func TestGrowBufCapsAndBudget(t *testing.T) {
	b := &memBudget{}
	b.limit.Store(4 * chunkSize)
	g := growBuf{max: 1 << 20, free: 64 << 10, budget: b, tooBig: errEventTooLarge}
	if err := g.add(bytes.Repeat([]byte("a"), 64<<10)...); err != nil || b.used.Load() != 0 {
		t.Fatalf("within the free part: err %v, budget used %d", err, b.used.Load())
	}
	if err := g.add(bytes.Repeat([]byte("b"), 100<<10)...); err != nil {
		t.Fatal(err)
	}
	if used := b.used.Load(); used != 2*chunkSize {
		t.Fatalf("budget used %d, want two chunks", used)
	}
	other := growBuf{max: 1 << 20, free: 64 << 10, budget: b, tooBig: errEventTooLarge}
	if err := other.add(make([]byte, 300<<10)...); !errors.Is(err, errBudgetSpent) {
		t.Fatalf("second buffer over the budget: %v", err)
	}
	other.release()
	if err := g.add(make([]byte, 1<<20)...); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("over the cap: %v", err)
	}
	got := g.bytes()
	if len(got) != 164<<10 || got[0] != 'a' || got[64<<10] != 'b' || got[len(got)-1] != 'b' {
		t.Fatalf("joined %d bytes", len(got))
	}
	g.reset()
	if b.used.Load() != 0 || len(g.bytes()) != 0 {
		t.Fatalf("reset of a large buffer: budget used %d", b.used.Load())
	}
	// A small value stays one slice, without touching the budget.
	if err := g.add([]byte("data")...); err != nil || string(g.bytes()) != "data" || b.used.Load() != 0 {
		t.Fatalf("small value: %v %q", err, g.bytes())
	}
}

// hostileStream answers 200 with a useful chunk (when useful) and then one
// endless line, counting what it could write.
func hostileStream(useful bool, written *atomic.Int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if useful {
			_, _ = w.Write(append(append([]byte("data: "), chunk("Hel", false)...), '\n', '\n'))
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\""))
		junk := bytes.Repeat([]byte("A"), 64<<10)
		for i := 0; i < 50<<20/len(junk); i++ { // a 50 MB line without a newline
			n, err := w.Write(junk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
}

func relayHostile(t *testing.T, useful bool, lim BodyLimits) (result, string, int64) {
	t.Helper()
	var written atomic.Int64
	up := hostileStream(useful, &written)
	defer up.Close()
	e := newBenchEnvAt(t, 1, "fill-first", "healthy", up.URL+"/v1")
	guard, _ := services.ParseEgressAllowlist("127.0.0.0/8")
	e.g.up = NewUpstream(guard, "test")
	e.g.up.SetBodyLimits(lim)
	c, _ := e.snap.Connection("conn-0000")
	p, _ := e.snap.Catalogue.Get("fake")
	req := &Request{ID: "req_hostile", Key: e.key, Endpoint: "/v1/chat/completions", Model: "fake/m1", Stream: true, Inbound: InboundChat}
	rec := httptest.NewRecorder()
	out := newClientWriter(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), req, e.set)
	ctx, cancel := context.WithCancelCause(context.Background())
	res := e.g.relayStream(ctx, cancel, out, target{provider: p, model: "m1"}, c, "/chat/completions", []byte(`{}`),
		newChatPassthrough(), e.set, e.newState(req), func(int, http.Header) {})
	if used := e.g.up.BudgetInUse(); used != 0 {
		t.Errorf("budget still in use after the attempt: %d bytes", used)
	}
	return res, rec.Body.String(), written.Load()
}

// TestRelayStreamOversizedEvent (issue 17 item 3): one SSE line past
// MaxEventBytes ends the attempt without reading on. Before the first
// useful byte it is a malformed answer (502, failover, counted against the
// connection); after it, the attempt fails post-commit, so the client gets
// the in-band error and no [DONE]. Before the cap, the relay collected the
// whole 50 MB line.
func TestRelayStreamOversizedEvent(t *testing.T) {
	lim := BodyLimits{MaxEventBytes: 1 << 20, MaxBodyBytes: 4 << 20, BudgetBytes: 8 << 20}
	res, body, written := relayHostile(t, false, lim)
	if res.ok || res.status != 502 || res.detail != resilience.DetailMalformed || !strings.Contains(res.message, "larger than 1 MiB") {
		t.Fatalf("pre-commit verdict %+v", res)
	}
	if body != "" {
		t.Errorf("pre-commit: the client got %q", body)
	}
	t.Logf("pre-commit: the upstream wrote %d KiB before the relay stopped reading", written>>10)
	if written > 8<<20 {
		t.Errorf("the relay read on: %d bytes written by the upstream", written)
	}
	res, body, _ = relayHostile(t, true, lim)
	if res.ok || res.detail != resilience.DetailMalformed {
		t.Fatalf("post-commit verdict %+v", res)
	}
	if !strings.Contains(body, "Hel") || strings.Contains(body, "[DONE]") {
		t.Errorf("post-commit client body %.200q", body)
	}
	// A budget spent by others: a local refusal that penalises nobody.
	res, _, _ = relayHostile(t, false, BodyLimits{MaxEventBytes: 1 << 20, BudgetBytes: 128 << 10})
	var le *traffic.LimitError
	if !errors.As(res.localErr, &le) || le.Code != CodeBufferBusy {
		t.Fatalf("over the budget: %+v", res)
	}
}

// TestForwardJSONOversizedBody (issue 17 item 3): a non-stream answer past
// MaxBodyBytes is a malformed answer, read no further than the cap; before,
// up to 64 MiB was read per request.
func TestForwardJSONOversizedBody(t *testing.T) {
	var written atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"`))
		junk := bytes.Repeat([]byte("B"), 64<<10)
		for i := 0; i < 300<<20/len(junk); i++ {
			n, err := w.Write(junk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer up.Close()
	e := newBenchEnvAt(t, 1, "fill-first", "healthy", up.URL+"/v1")
	guard, _ := services.ParseEgressAllowlist("127.0.0.0/8")
	e.g.up = NewUpstream(guard, "test")
	e.g.up.SetBodyLimits(BodyLimits{MaxBodyBytes: 2 << 20})
	c, _ := e.snap.Connection("conn-0000")
	p, _ := e.snap.Catalogue.Get("fake")
	req := &Request{ID: "req_big", Key: e.key, Endpoint: "/v1/chat/completions", Model: "fake/m1", Inbound: InboundChat}
	rec := httptest.NewRecorder()
	out := newClientWriter(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), req, e.set)
	pl, _ := pipelineFor(InboundChat, services.FormatOpenAI, false, 4096)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	res := e.g.forwardJSON(ctx, cancel, out, target{provider: p, model: "m1"}, c, pl, []byte(`{}`), e.set, e.newState(req), func(int, http.Header) {})
	if res.ok || res.status != 502 || res.detail != resilience.DetailMalformed || !strings.Contains(res.message, "larger than 2 MiB") {
		t.Fatalf("verdict %+v", res)
	}
	if rec.Body.Len() != 0 {
		t.Errorf("the client got %d bytes", rec.Body.Len())
	}
	if used := e.g.up.BudgetInUse(); used != 0 {
		t.Errorf("budget in use after the call: %d", used)
	}
	t.Logf("the upstream wrote %d KiB of its 300 MiB before the gateway stopped", written.Load()>>10)
}
