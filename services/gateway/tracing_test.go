package gateway_test

import (
	"context"
	"runtime"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"switchyard/services/gateway"
	"switchyard/services/traffic"
)

// attrOf is a recorded span's attribute as text ("" when absent).
func attrOf(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// A dispatch that waits for a max_concurrent slot shows the wait as a span
// under its attempt span, which is under the request's server span; the
// request span carries the GenAI attributes and the token usage.
func TestTracingSlotWaitIsASpanUnderTheAttempt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	slots := traffic.NewSlots(func() traffic.SlotConfig {
		return traffic.SlotConfig{Enabled: true, QueueDepth: 4, SlotWaitMs: 600_000}
	})
	board := traffic.NewWaiting(nil)
	var reg *gateway.Registry
	e := newLoopEnvWith(t, func(d *gateway.Deps) {
		d.Tracing, reg = tp, d.Registry
		d.Traffic.Slots, d.Traffic.Waiting = slots, board
	}, "fk-a")
	e.doc.ConnectionConcurrency.Enabled = true
	one := 1
	e.src.conns[0].MaxConcurrent = &one
	if err := reg.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Another request holds the only slot.
	release, _, err := slots.Acquire(context.Background(), e.conns[0].ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int)
	go func() { done <- e.chat(chatBody("fake/m1", false)).Code }()
	for i := 0; board.Count() == 0; i++ {
		if i > 1_000_000 {
			t.Fatal("the request never waited for the slot")
		}
		runtime.Gosched()
	}
	release()
	if code := <-done; code != 200 {
		t.Fatalf("status %d", code)
	}

	var req, attempt, wait sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.SpanKind() == trace.SpanKindServer:
			req = s
		case s.SpanKind() == trace.SpanKindClient:
			attempt = s
		case s.Name() == "wait slot":
			wait = s
		}
	}
	if req == nil || attempt == nil || wait == nil {
		t.Fatalf("spans: request %v, attempt %v, wait %v", req != nil, attempt != nil, wait != nil)
	}
	if attempt.Parent().SpanID() != req.SpanContext().SpanID() || wait.Parent().SpanID() != attempt.SpanContext().SpanID() {
		t.Fatal("the wait is not under the attempt, or the attempt not under the request")
	}
	if got := attrOf(wait, "switchyard.wait.target"); got != e.conns[0].ID || attrOf(wait, "switchyard.wait.reason") != "slot" {
		t.Fatalf("wait span target %q reason %q", got, attrOf(wait, "switchyard.wait.reason"))
	}
	if req.Name() != "chat fake/m1" || attrOf(req, "gen_ai.response.model") != "m1" || attrOf(req, "gen_ai.provider.name") != "fake" ||
		attrOf(req, "switchyard.outcome") != "success" || attrOf(req, "gen_ai.usage.input_tokens") == "" {
		t.Fatalf("request span %q: %v", req.Name(), req.Attributes())
	}
	if attrOf(attempt, "switchyard.attempt") != "1" || attrOf(attempt, "switchyard.outcome") != "success" ||
		attrOf(attempt, "switchyard.connection.id") != e.conns[0].ID {
		t.Fatalf("attempt span: %v", attempt.Attributes())
	}
}

// A request refused before routing still has its span, with the error
// code and status and no model (it was never parsed).
func TestTracingRefusedRequestSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newLoopEnvWith(t, func(d *gateway.Deps) { d.Tracing = tp }, "fk-a")
	if _, err := e.call(context.Background(), gateway.EndpointChat, `{"model":`); err == nil {
		t.Fatal("a malformed body was accepted")
	}
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Name() != "chat" || attrOf(ended[0], "http.response.status_code") != "400" ||
		attrOf(ended[0], "error.type") == "" {
		t.Fatalf("spans %d: %+v", len(ended), ended)
	}
}
