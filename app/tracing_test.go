package app_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
)

// otlpReceiver is an OTLP/HTTP trace receiver on 127.0.0.1: it decodes
// every ExportTraceServiceRequest and keeps the raw bodies, so a test can
// look both at the spans and for strings that must never be exported.
type otlpReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	res     []*commonpb.KeyValue
	raw     [][]byte
	auth    []string
	paths   []string
	exports chan struct{}
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{exports: make(chan struct{}, 64)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.raw = append(rc.raw, body)
		rc.auth = append(rc.auth, r.Header.Get("Authorization"))
		rc.paths = append(rc.paths, r.URL.Path)
		for _, rs := range req.ResourceSpans {
			rc.res = append(rc.res, rs.GetResource().GetAttributes()...)
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
		select {
		case rc.exports <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *otlpReceiver) snapshot() ([]*tracepb.Span, [][]byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...), append([][]byte(nil), rc.raw...)
}

// spanAttr returns a span attribute as a string ("" when absent).
func spanAttr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			if v.BoolValue {
				return "true"
			}
			return "false"
		}
	}
	return ""
}

// A request that fails once with 429 + Retry-After, waits out the cooldown
// and is then served is one trace: the request's server span (a child of
// the client's traceparent) with its two attempt spans and the wait span
// under it, GenAI attributes on each, and no key and no prompt anywhere in
// what was exported.
func TestTracingExportsRequestAttemptAndWaitSpans(t *testing.T) {
	const (
		upstreamKey = "sk-upstream-SECRET-9f3c1a"
		prompt      = "PROMPT-TEXT-never-in-a-span-7d1e"
		clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		clientSpan  = "00f067aa0ba902b7"
	)
	rc := startOTLPReceiver(t)
	fu := fakeupstream.Start(t, fakeupstream.WithEvents(3))
	a := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_PRIVATE_UPSTREAMS", fu.Addr()),
		testkit.WithEnv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.srv.URL),
		testkit.WithEnv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20collector-token"),
		testkit.WithEnv("OTEL_SERVICE_NAME", "switchyard-test"))
	if a.Server.Tracing() == nil {
		t.Fatal("tracing is off although OTEL_EXPORTER_OTLP_ENDPOINT is set")
	}
	if got := a.Server.Tracing().Where(); got != rc.srv.URL+"/v1/traces" {
		t.Fatalf("exporting to %q, want %q", got, rc.srv.URL+"/v1/traces")
	}
	conn := a.AddConnection(services.ConnectionInput{Provider: services.Some("fake"), Name: services.Some("conn-0"),
		APIKey: services.Some(upstreamKey), BaseURL: services.Some(fu.URL() + "/v1"),
		Custom: services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})})
	_, clientKey := a.NewKey("client")
	url := a.Serve()
	patchResilience(t, a, `{"waitForCooldown":{"enabled":true}}`)
	fu.SetScript(upstreamKey, "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429, RetryAfter: "3"}}, Then: fakeupstream.ThenDefault})

	body := `{"model":"fake/m1","messages":[{"role":"user","content":"` + prompt + `"}]}`
	resp, b := postKey(t, url+"/v1/chat/completions", clientKey, body, "traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	if w := a.Clock.Waits(); len(w) != 1 {
		t.Fatalf("cooldown waits %v, want one", w)
	}

	// The request span ends as the handler returns, just after the client
	// has its answer: flush until it is exported (bounded).
	var spans []*tracepb.Span
	var raw [][]byte
	var root *tracepb.Span
	deadline := time.After(20 * time.Second)
	for root == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.Server.FlushTraces(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		cancel()
		spans, raw = rc.snapshot()
		for _, s := range spans {
			if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
				root = s
			}
		}
		if root != nil {
			break
		}
		select {
		case <-rc.exports:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no request span exported; got %d spans", len(spans))
		}
	}

	// The request span continues the client's trace.
	if hex.EncodeToString(root.TraceId) != clientTrace || hex.EncodeToString(root.ParentSpanId) != clientSpan {
		t.Fatalf("request span trace %x parent %x, want %s / %s", root.TraceId, root.ParentSpanId, clientTrace, clientSpan)
	}
	if root.Name != "chat fake/m1" {
		t.Fatalf("request span name %q, want \"chat fake/m1\"", root.Name)
	}
	for key, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "fake/m1", "gen_ai.response.model": "m1",
		"gen_ai.provider.name": "fake", "switchyard.connection.id": conn.ID, "switchyard.outcome": "failover",
		"switchyard.attempts": "2", "http.response.status_code": "200",
	} {
		if got := spanAttr(root.Attributes, key); got != want {
			t.Errorf("request span %s = %q, want %q", key, got, want)
		}
	}
	if spanAttr(root.Attributes, "gen_ai.usage.input_tokens") == "" || spanAttr(root.Attributes, "gen_ai.usage.output_tokens") == "" {
		t.Errorf("request span has no token usage: %v", root.Attributes)
	}

	// Under it: two attempts (429, then success) and the cooldown wait.
	var attempts, waits []*tracepb.Span
	for _, s := range spans {
		if !bytes.Equal(s.TraceId, root.TraceId) || s == root {
			continue
		}
		if !bytes.Equal(s.ParentSpanId, root.SpanId) {
			t.Errorf("span %q has parent %x, want the request span %x", s.Name, s.ParentSpanId, root.SpanId)
		}
		switch {
		case s.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			attempts = append(attempts, s)
		case strings.HasPrefix(s.Name, "wait "):
			waits = append(waits, s)
		default:
			t.Errorf("unexpected span %q", s.Name)
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	if attempts[0].StartTimeUnixNano > attempts[1].StartTimeUnixNano {
		attempts[0], attempts[1] = attempts[1], attempts[0]
	}
	for i, want := range []struct{ attempt, outcome, status string }{{"1", "rate_limit", "429"}, {"2", "success", "200"}} {
		s := attempts[i]
		for key, v := range map[string]string{"switchyard.attempt": want.attempt, "switchyard.outcome": want.outcome,
			"http.response.status_code": want.status, "gen_ai.request.model": "m1", "gen_ai.provider.name": "fake",
			"gen_ai.operation.name": "chat", "switchyard.connection.id": conn.ID} {
			if got := spanAttr(s.Attributes, key); got != v {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, key, got, v)
			}
		}
	}
	if attempts[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || attempts[1].Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("attempt statuses %v, %v: want error, then not", attempts[0].Status, attempts[1].Status)
	}
	if len(waits) != 1 || spanAttr(waits[0].Attributes, "switchyard.wait.reason") != "cooldown" {
		t.Fatalf("wait spans %v, want one cooldown wait", waits)
	}
	if waits[0].StartTimeUnixNano < attempts[0].StartTimeUnixNano || waits[0].StartTimeUnixNano > attempts[1].StartTimeUnixNano {
		t.Errorf("the wait does not lie between the two attempts")
	}

	// Nothing secret left the process: neither key, nor the prompt, nor
	// the collector's own credential.
	all := bytes.Join(raw, nil)
	for name, secret := range map[string]string{"client key": clientKey, "upstream key": upstreamKey, "prompt": prompt,
		"client key prefix": clientKey[:12], "collector token": "collector-token"} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("the exported spans contain the %s", name)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, h := range rc.auth {
		if h != "Bearer collector-token" || rc.paths[i] != "/v1/traces" {
			t.Errorf("export %d: Authorization %q path %q, want the OTEL_EXPORTER_OTLP_HEADERS value at /v1/traces", i, h, rc.paths[i])
		}
	}
	if spanAttr(rc.res, "service.name") != "switchyard-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME", spanAttr(rc.res, "service.name"))
	}
}

// With no OTEL_* endpoint in its configuration the server builds no trace
// pipeline, installs no tracer provider and exports nothing — not even to
// an endpoint the process environment names, which the exporter would
// otherwise pick up by itself.
func TestTracingOffWithoutEndpoint(t *testing.T) {
	rc := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rc.srv.URL+"/v1/traces")
	before := otel.GetTracerProvider()
	f := newGW(t, "fk-a")
	if f.app.Server.Tracing() != nil {
		t.Fatal("tracing is on without OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if resp := f.post(t, chatBody, "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok || otel.GetTracerProvider() != before {
		t.Fatal("a tracer provider was installed globally")
	}
	if spans, raw := rc.snapshot(); len(spans) != 0 || len(raw) != 0 {
		t.Fatalf("exported %d spans without an endpoint", len(spans))
	}
}
