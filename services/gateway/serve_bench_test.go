package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"switchyard/services"
	"switchyard/services/accounts"
)

// BenchmarkServe is one whole request through the attempt loop — settings,
// log record, expansion, provider gates, pick, dispatch over loopback to an
// httptest upstream, response write — for a non-stream and a stream chat
// completion. It measures the loop's own cost next to a real round trip;
// the upstream and the loopback dominate, so compare allocs/op first.
func BenchmarkServe(b *testing.B) {
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m1","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	sse := "data: " + string(chunk("hi", false)) + "\n\ndata: " + string(chunk("", true)) + "\n\ndata: [DONE]\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, sse)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	defer up.Close()
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		b.Run(name, func(b *testing.B) {
			e := newBenchEnvAt(b, 1, accounts.FillFirst, "healthy", up.URL+"/v1")
			guard, err := services.ParseEgressAllowlist("127.0.0.0/8")
			if err != nil {
				b.Fatal(err)
			}
			e.g.up = NewUpstream(guard, "bench")
			body := benchChatBody
			if stream {
				body = strings.Replace(body, `"model":"bench"`, `"model":"fake/m1","stream":true`, 1)
			} else {
				body = strings.Replace(body, `"model":"bench"`, `"model":"fake/m1"`, 1)
			}
			top, model, st, gerr := ParseChat([]byte(body), DefaultLimits())
			if gerr != nil {
				b.Fatal(gerr)
			}
			route, gerr := Resolve(e.snap, e.key, model)
			if gerr != nil {
				b.Fatal(gerr)
			}
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			b.ReportAllocs()
			for b.Loop() {
				req := &Request{ID: "req_bench", Key: e.key, Endpoint: "/v1/chat/completions", Body: top, Model: model, Stream: st,
					Route: route, Received: benchT0, Header: r.Header, Inbound: InboundChat}
				w := httptest.NewRecorder()
				e.g.Serve(w, r, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body.String())
				}
			}
		})
	}
}
