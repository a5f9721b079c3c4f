package fakeupstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
)

func TestRetryAfter(t *testing.T) {
	fixed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		path       string
		step       fakeupstream.Step
		wantHeader string
		wantType   string
		wantCode   string
	}{
		{"seconds openai", "/v1/chat/completions", fakeupstream.Step{Status: 429, RetryAfter: "7"}, "7", "requests", "rate_limit_exceeded"},
		{"seconds anthropic", "/v1/messages", fakeupstream.Step{Status: 429, RetryAfter: "7"}, "7", "rate_limit_error", ""},
		{"http-date verbatim", "/v1/chat/completions", fakeupstream.Step{Status: 503, RetryAfter: fakeupstream.HTTPDate(fixed.Add(time.Minute))},
			"Sun, 01 Mar 2026 12:01:00 GMT", "server_error", ""},
		{"http-date from clock", "/v1/chat/completions", fakeupstream.Step{Status: 429, RetryAfterDate: 7 * time.Second},
			"Sun, 01 Mar 2026 12:00:07 GMT", "requests", "rate_limit_exceeded"},
		{"overloaded 529", "/v1/messages", fakeupstream.Step{Status: 529, RetryAfter: "1"}, "1", "overloaded_error", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fu := fakeupstream.Start(t, fakeupstream.WithClock(func() time.Time { return fixed }))
			fu.Script("fk-limited", tc.step)
			c := newClient(t, fu)
			body := openAIReq("m", false, false, "x")
			if tc.path == "/v1/messages" {
				body = anthropicReq("m", false, "x")
			}
			resp := c.must("POST", tc.path, "fk-limited", body)
			b := must(io.ReadAll(resp.Body))
			if resp.StatusCode != tc.step.Status || resp.Header.Get("Retry-After") != tc.wantHeader {
				t.Errorf("status %d Retry-After %q, want %d %q", resp.StatusCode, resp.Header.Get("Retry-After"), tc.step.Status, tc.wantHeader)
			}
			typ, code, msg := errorCode(t, b)
			if typ != tc.wantType || code != tc.wantCode || msg == "" {
				t.Errorf("error type %q code %q msg %q, want %q %q", typ, code, msg, tc.wantType, tc.wantCode)
			}
			if tc.path == "/v1/messages" && !strings.HasPrefix(string(b), `{"type":"error"`) {
				t.Errorf("anthropic error shape: %s", b)
			}
			if h := onlyHit(t, fu); h.Status != tc.step.Status || h.End != fakeupstream.EndCompleted {
				t.Errorf("hit %+v", h)
			}
		})
	}
}

func TestRateLimitHeaders(t *testing.T) {
	fixed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		style string
		want  map[string]string
	}{
		{"openai", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
			"x-ratelimit-limit-tokens": "60000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}},
		{"anthropic", map[string]string{
			"anthropic-ratelimit-requests-limit": "60", "anthropic-ratelimit-requests-remaining": "0",
			"anthropic-ratelimit-requests-reset": "2026-03-01T12:06:00Z", "anthropic-ratelimit-tokens-reset": "2026-03-01T12:06:00Z",
			"anthropic-ratelimit-input-tokens-limit": "60000", "anthropic-ratelimit-output-tokens-remaining": "0"}},
		{"codex", map[string]string{
			"x-codex-primary-used-percent": "100", "x-codex-primary-window-minutes": "300",
			"x-codex-primary-reset-after-seconds": "360", "x-codex-primary-reset-at": "1772366760",
			"x-codex-secondary-used-percent": "0", "x-codex-secondary-window-minutes": "10080"}},
	}
	for _, tc := range tests {
		t.Run(tc.style, func(t *testing.T) {
			fu := fakeupstream.Start(t, fakeupstream.WithClock(func() time.Time { return fixed }))
			fu.Script("fk", fakeupstream.Step{Status: 429, RateLimit: &fakeupstream.RateLimit{Style: tc.style, Remaining: 0, Reset: 6 * time.Minute}})
			resp := newClient(t, fu).must("POST", "/v1/chat/completions", "fk", openAIReq("m", false, false, "x"))
			for k, v := range tc.want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestPresets(t *testing.T) {
	tests := []struct {
		preset     string
		status     int
		anthropic  bool // rendered in Anthropic shape on the OpenAI route
		typ, code  string
		msgHas     string
		msgHasAnth string // when the request is Anthropic ("" = same as msgHas)
	}{
		{"openai_rate_limit", 429, false, "tokens", "rate_limit_exceeded", "try again in 1.2s", ""},
		{"openai_insufficient_quota", 429, false, "insufficient_quota", "insufficient_quota", "exceeded your current quota", ""},
		{"anthropic_rate_limit", 429, true, "rate_limit_error", "", "rate limit", ""},
		{"anthropic_overloaded", 529, true, "overloaded_error", "", "Overloaded", ""},
		{"anthropic_request_not_allowed", 403, true, "permission_error", "", "Request not allowed", ""},
		{"quota_cn_403", 403, false, "new_api_error", "", "额度不足", ""},
		{"model_forbidden_cn_403", 403, false, "new_api_error", "", "无权访问模型 model-q", ""},
		{"tools_limit_400", 400, false, "invalid_request_error", "array_above_max_length", "maximum length 128", ""},
		{"tools_limit_text_400", 400, false, "invalid_request_error", "", "a maximum of 128 tools", ""},
		{"context_length_400", 400, false, "invalid_request_error", "context_length_exceeded", "maximum context length", "prompt is too long"},
		{"model_not_found_404", 404, false, "invalid_request_error", "model_not_found", "`model-q` does not exist", "model: model-q"},
		{"invalid_key_401", 401, false, "invalid_request_error", "invalid_api_key", "Incorrect API key", "invalid x-api-key"},
		{"account_deactivated_401", 401, false, "invalid_request_error", "account_deactivated", "deactivated", "disabled"},
		{"payment_required_402", 402, false, "billing_error", "payment_required", "credit", ""},
		{"daily_quota_429", 429, false, "requests", "daily_limit_exceeded", "try again tomorrow", ""},
		{"reset_text_429", 429, false, "requests", "rate_limit_exceeded", "resets in 1h2m3s", ""},
		{"echo_key_401", 401, false, "invalid_request_error", "invalid_api_key", "fk-echo-secret", ""},
		{"server_500", 500, false, "server_error", "", "error", ""},
		{"server_502", 502, false, "server_error", "", "Bad gateway", ""},
		{"server_503", 503, false, "server_error", "", "overloaded", "unavailable"},
		{"server_504", 504, false, "server_error", "", "timeout", ""},
		{"timeout_408", 408, false, "timeout", "", "timed out", ""},
	}
	if len(tests) != len(fakeupstream.Presets()) {
		t.Errorf("table covers %d presets, package has %d: %v", len(tests), len(fakeupstream.Presets()), fakeupstream.Presets())
	}
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	for _, tc := range tests {
		t.Run(tc.preset, func(t *testing.T) {
			fu.Script("fk-echo-secret", fakeupstream.Step{Preset: tc.preset})
			resp := c.must("POST", "/v1/chat/completions", "fk-echo-secret", openAIReq("model-q", false, false, "x"))
			b := must(io.ReadAll(resp.Body))
			typ, code, msg := errorCode(t, b)
			isAnth := strings.HasPrefix(string(b), `{"type":"error"`)
			if resp.StatusCode != tc.status || typ != tc.typ || code != tc.code || isAnth != tc.anthropic ||
				!strings.Contains(strings.ToLower(msg), strings.ToLower(tc.msgHas)) {
				t.Errorf("got %d %s", resp.StatusCode, b)
			}
			// The same preset asked by an Anthropic client comes in Anthropic shape unless pinned.
			resp = c.must("POST", "/v1/messages", "fk-echo-secret", anthropicReq("model-q", false, "x"))
			b = must(io.ReadAll(resp.Body))
			_, _, msg = errorCode(t, b)
			want := tc.msgHas
			if tc.msgHasAnth != "" {
				want = tc.msgHasAnth
			}
			pinnedOpenAI := !tc.anthropic && strings.HasPrefix(tc.preset, "openai_") || strings.Contains(tc.preset, "_cn_")
			if strings.HasPrefix(string(b), `{"type":"error"`) == pinnedOpenAI || !strings.Contains(strings.ToLower(msg), strings.ToLower(want)) {
				t.Errorf("anthropic client got %d %s", resp.StatusCode, b)
			}
		})
	}
}

func TestErrorFieldsWithoutPreset(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.ScriptModel("fk-missing", "model-x", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found"})
	c := newClient(t, fu)
	status, b := c.chat("fk-missing", "model-x")
	typ, code, msg := errorCode(t, b)
	if status != 404 || typ != "invalid_request_error" || code != "model_not_found" || !strings.Contains(msg, "model-x") {
		t.Errorf("openai: %d %s", status, b)
	}
	resp := c.must("POST", "/v1/messages", "fk-missing", anthropicReq("model-x", false, "x"))
	b = must(io.ReadAll(resp.Body))
	if typ, _, _ := errorCode(t, b); resp.StatusCode != 404 || typ != "not_found_error" {
		t.Errorf("anthropic: %d %s", resp.StatusCode, b)
	}
	if status, _ := c.chat("fk-missing", "model-y"); status != 200 {
		t.Errorf("model-y answered %d, want 200", status)
	}
}

func TestResetBeforeHeaders(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{Fault: fakeupstream.FaultReset})
	c := newClient(t, fu)
	resp, err := c.send(t.Context(), "POST", "/v1/chat/completions", "fk", openAIReq("m", true, false, "x"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a transport error", resp.StatusCode)
	}
	t.Logf("client saw: %v", err)
	h := onlyHit(t, fu)
	if h.End != fakeupstream.EndReset || h.Status != 0 || !h.THeaders.IsZero() || h.BytesSent != 0 || h.Action != "reset_before_headers" {
		t.Errorf("hit %+v", h)
	}
}

func TestCutAfter(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		mode      fakeupstream.CutMode
		wantErr   bool // the body read fails
		exactData bool // all k events arrive (not guaranteed after an RST)
	}{
		{"openai eof", "/v1/chat/completions", fakeupstream.CutEOF, false, true},
		{"openai fin", "/v1/chat/completions", fakeupstream.CutFIN, true, true},
		{"openai rst", "/v1/chat/completions", fakeupstream.CutRST, true, false},
		{"anthropic eof", "/v1/messages", "", false, true},
		{"anthropic fin", "/v1/messages", fakeupstream.CutFIN, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fu := fakeupstream.Start(t)
			fu.Script("fk", fakeupstream.Step{Events: 10, Fault: fakeupstream.FaultCut, At: 3, CutMode: tc.mode})
			c := newClient(t, fu)
			body := openAIReq("m", true, true, "x")
			if tc.path == "/v1/messages" {
				body = anthropicReq("m", true, "x")
			}
			resp := c.must("POST", tc.path, "fk", body)
			evs, err := newSSE(resp.Body).readAll()
			if (err != nil) != tc.wantErr {
				t.Errorf("read error %v, want error %v", err, tc.wantErr)
			}
			if tc.mode == fakeupstream.CutFIN && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("FIN mid-body: %v, want unexpected EOF", err)
			}
			content := 0
			for _, ev := range evs {
				if ev.Data == "[DONE]" || ev.Event == "message_stop" || ev.Event == "message_delta" {
					t.Fatalf("success marker after a cut: %+v", ev)
				}
				if ev.Event == "content_block_delta" {
					content++
				}
			}
			if tc.path != "/v1/messages" {
				content = len(openAIDeltas(t, evs))
			}
			if tc.exactData && content != 3 {
				t.Errorf("%d content events, want 3", content)
			}
			h := onlyHit(t, fu)
			if h.End != fakeupstream.EndCut || h.EventsSent != 3 || h.Status != 200 || h.Usage.Sent || h.Action != "cut@3" {
				t.Errorf("hit %+v", h)
			}
		})
	}
}

func TestCutAtZeroSendsOnlyThePreamble(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{Fault: fakeupstream.FaultCut, At: 0})
	resp := newClient(t, fu).must("POST", "/v1/messages", "fk", anthropicReq("m", true, "x"))
	evs, err := newSSE(resp.Body).readAll()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range evs {
		names = append(names, ev.Event)
	}
	if strings.Join(names, ",") != "message_start,content_block_start,ping" {
		t.Errorf("events %v", names)
	}
}

// streamUntil opens a stream and returns after it has read n content events, with the rest of
// the body unread and the cancel function of the request.
func streamUntil(t *testing.T, c *client, path string, n int) (cancel context.CancelFunc, body io.ReadCloser, r *sseReader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reqBody := openAIReq("m", true, false, "x")
	if path == "/v1/messages" {
		reqBody = anthropicReq("m", true, "x")
	}
	resp, err := c.send(ctx, "POST", path, "fk", reqBody)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	r = newSSE(resp.Body)
	for got := 0; got < n; {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("after %d events: %v", got, err)
		}
		if ev.Event == "content_block_delta" || (ev.Event == "" && len(openAIDeltas(t, []sseEvent{ev})) == 1) {
			got++
		}
	}
	return cancel, resp.Body, r
}

func TestStallEndsWhenClientCancels(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		t.Run(path, func(t *testing.T) {
			fu := fakeupstream.Start(t)
			fu.Script("fk", fakeupstream.Step{Fault: fakeupstream.FaultStall, At: 2})
			cancel, _, _ := streamUntil(t, newClient(t, fu), path, 2)
			hits := fu.Hits()
			if len(hits) != 1 || hits[0].Ended() {
				t.Fatalf("stalled handler should still run: %+v", hits)
			}
			cancel()
			// The property: a client that leaves makes the upstream request end within 1 s.
			h := waitEnded(t, fu, hits[0].Seq, time.Second)
			if h.End != fakeupstream.EndClientCancelled || h.EventsSent != 2 || h.Status != 200 {
				t.Errorf("hit %+v", h)
			}
		})
	}
}

func TestStallForReleases(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{Fault: fakeupstream.FaultStall, At: 1, StallFor: 20 * time.Millisecond})
	resp := newClient(t, fu).must("POST", "/v1/chat/completions", "fk", openAIReq("m", true, false, "x"))
	evs, err := newSSE(resp.Body).readAll()
	if err != nil || len(openAIDeltas(t, evs)) != 1 || evs[len(evs)-1].Data == "[DONE]" {
		t.Errorf("events %+v err %v", evs, err)
	}
	if h := onlyHit(t, fu); h.End != fakeupstream.EndStallReleased {
		t.Errorf("hit %+v", h)
	}
}

func TestDelayBeforeHeadersHonoursCancel(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{Delay: time.Hour})
	c := newClient(t, fu)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		resp, err := c.send(ctx, "POST", "/v1/chat/completions", "fk", openAIReq("m", false, false, "x"))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	hits := must(fu.WaitHits(t.Context(), 1))
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want context.Canceled", err)
	}
	h := waitEnded(t, fu, hits[0].Seq, time.Second)
	if h.End != fakeupstream.EndClientCancelled || h.Status != 0 || !h.THeaders.IsZero() {
		t.Errorf("hit %+v", h)
	}
}

func TestFirstByteDelayHonoursCancel(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{FirstByteDelay: time.Hour})
	c := newClient(t, fu)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Do returns once headers arrive; the body is withheld.
	resp, err := c.send(ctx, "POST", "/v1/chat/completions", "fk", openAIReq("m", true, false, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	h, _ := fu.Hit(1)
	if h.THeaders.IsZero() || h.Ended() {
		t.Fatalf("hit %+v", h)
	}
	cancel()
	if h = waitEnded(t, fu, 1, time.Second); h.End != fakeupstream.EndClientCancelled || h.BytesSent != 0 {
		t.Errorf("hit %+v", h)
	}
}

func TestMalformedChunk(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{Events: 6, Fault: fakeupstream.FaultMalformed, At: 2})
	c := newClient(t, fu)
	resp := c.must("POST", "/v1/chat/completions", "fk", openAIReq("m", true, false, "x"))
	evs, err := newSSE(resp.Body).readAll()
	if err != nil {
		t.Fatal(err)
	}
	// role chunk, 2 good content chunks, 1 truncated chunk, then the body ends.
	if len(evs) != 4 {
		t.Fatalf("%d events: %+v", len(evs), evs)
	}
	for i, ev := range evs {
		valid := json.Valid([]byte(ev.Data))
		if valid != (i < 3) {
			t.Errorf("event %d valid=%v: %q", i, valid, ev.Data)
		}
	}
	if h := onlyHit(t, fu); h.End != fakeupstream.EndMalformedSent || h.EventsSent != 2 {
		t.Errorf("hit %+v", h)
	}

	// A JSON answer is truncated instead, with a Content-Length that matches what is sent.
	fu.Reset()
	status, b := c.chat("fk", "m")
	if status != 200 || json.Valid(b) || len(b) == 0 {
		t.Errorf("JSON malformed answer %d %q", status, b)
	}
}

func TestErrorEvent(t *testing.T) {
	tests := []struct {
		path, wantEvent, wantType string
	}{
		{"/v1/chat/completions", "", "server_error"},
		{"/v1/messages", "error", "overloaded_error"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			fu := fakeupstream.Start(t)
			fu.Script("fk", fakeupstream.Step{Fault: fakeupstream.FaultErrorEvent, At: 2})
			body := openAIReq("m", true, false, "x")
			if tc.path == "/v1/messages" {
				body = anthropicReq("m", true, "x")
			}
			resp := newClient(t, fu).must("POST", tc.path, "fk", body)
			evs, err := newSSE(resp.Body).readAll()
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			var e struct {
				Error struct{ Type string } `json:"error"`
			}
			if last.Event != tc.wantEvent || json.Unmarshal([]byte(last.Data), &e) != nil || e.Error.Type != tc.wantType {
				t.Errorf("last event %+v", last)
			}
			if h := onlyHit(t, fu); h.End != fakeupstream.EndErrorEventSent || h.EventsSent != 2 {
				t.Errorf("hit %+v", h)
			}
		})
	}
}

func TestEmpty200AndHTML502(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk-empty", fakeupstream.Step{Fault: fakeupstream.FaultEmpty200})
	fu.Script("fk-html", fakeupstream.Step{Fault: fakeupstream.FaultHTML502})
	c := newClient(t, fu)
	if status, b := c.chat("fk-empty", "m"); status != 200 || len(b) != 0 {
		t.Errorf("empty_200: %d %q", status, b)
	}
	resp := c.must("POST", "/v1/chat/completions", "fk-html", openAIReq("m", true, false, "x"))
	b := must(io.ReadAll(resp.Body))
	if resp.StatusCode != 502 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(b), "502 Bad Gateway") {
		t.Errorf("html_502: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

func TestSlicedAndThrottledWrites(t *testing.T) {
	whole := func(st fakeupstream.Step) []sseEvent {
		t.Helper()
		fu := fakeupstream.Start(t)
		fu.Script("fk", st)
		resp := newClient(t, fu).must("POST", "/v1/messages", "fk", anthropicReq("m", true, "x"))
		evs, err := newSSE(resp.Body).readAll()
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	base := whole(fakeupstream.Step{Events: 4})
	for _, st := range []fakeupstream.Step{
		{Events: 4, WriteSize: 1},
		{Events: 4, BytesPerSec: 1 << 20, WriteSize: 7},
	} {
		got := whole(st)
		if len(got) != len(base) {
			t.Fatalf("%+v: %d events, want %d", st, len(got), len(base))
		}
		for i := range got {
			if got[i] != base[i] {
				t.Errorf("%+v: event %d differs:\n%+v\n%+v", st, i, got[i], base[i])
			}
		}
	}
}

func TestCloseEndsRunningHandlers(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{Fault: fakeupstream.FaultStall, At: 1})
	streamUntil(t, newClient(t, fu), "/v1/chat/completions", 1)
	fu.Close() // must not block on the stalled handler
	h, ok := fu.Hit(1)
	if !ok || !h.Ended() || h.End != fakeupstream.EndServerClosed && h.End != fakeupstream.EndClientCancelled {
		t.Errorf("hit %+v", h)
	}
	// Closed servers refuse to listen again.
	if err := fu.Listen("127.0.0.1:0"); err == nil {
		t.Error("Listen after Close succeeded")
	}
}

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:0", "nonsense"} {
		s := fakeupstream.New()
		if err := s.Listen(addr); err == nil {
			s.Close()
			t.Errorf("Listen(%q) succeeded", addr)
		}
		s.Close()
	}
	s := fakeupstream.New()
	if err := s.Listen("localhost:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") && !strings.HasPrefix(s.URL(), "http://[::1]:") {
		t.Errorf("URL %q", s.URL())
	}
}

func TestStartWithNilT(t *testing.T) {
	s := fakeupstream.Start(nil)
	defer s.Close()
	resp, err := http.Get(s.URL() + "/_fake/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 200 || s.Count() != 0 {
		t.Errorf("healthz %d, hits %d (control routes are not hits)", resp.StatusCode, s.Count())
	}
}
