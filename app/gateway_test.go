package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
)

// gwFixture is the gateway in front of the fake upstream: provider "fake"
// (a custom openai-compatible node) with connections named after their keys.
type gwFixture struct {
	app   *testkit.App
	fu    *fakeupstream.Server
	url   string
	key   string
	conns map[string]services.Connection
}

func newGW(t *testing.T, keys ...string) *gwFixture {
	t.Helper()
	fu := fakeupstream.Start(t, fakeupstream.WithEvents(5))
	a := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_PRIVATE_UPSTREAMS", fu.Addr()))
	f := &gwFixture{app: a, fu: fu, conns: map[string]services.Connection{}}
	for i, k := range keys {
		in := services.ConnectionInput{Provider: services.Some("fake"), Name: services.Some("conn-" + strconv.Itoa(i)), APIKey: services.Some(k),
			BaseURL: services.Some(fu.URL() + "/v1"), Priority: services.Some(i)}
		if i == 0 {
			in.Custom = services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})
		}
		f.conns[k] = a.AddConnection(in)
	}
	_, f.key = a.NewKey("client")
	f.url = a.Serve()
	// Cooldown-aware waiting is on by default; these tests observe single
	// passes, so they switch it off (wait_test.go switches it back on).
	patchResilience(t, a, `{"waitForCooldown":{"enabled":false},"comboCooldownWait":{"enabled":false}}`)
	return f
}

func (f *gwFixture) post(t *testing.T, body string, headers ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const chatBody = `{"model":"fake/m1","messages":[{"role":"user","content":"hi"}]}`
const streamBody = `{"model":"fake/m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`

func TestChatNonStreamServesAndNamesTheConnection(t *testing.T) {
	f := newGW(t, "fk-a")
	resp := f.post(t, chatBody)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Object != "chat.completion" || out.Choices[0].Message.Content == "" {
		t.Fatalf("body %s (%v)", b, err)
	}
	h := resp.Header
	if h.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID || h.Get("X-Switchyard-Provider") != "fake" ||
		h.Get("X-Switchyard-Model") != "m1" || h.Get("X-Switchyard-Fallback-Attempts") != "0" || !strings.HasPrefix(h.Get("X-Request-Id"), "req_") {
		t.Fatalf("headers %v", h)
	}
	hits := f.fu.Hits()
	if len(hits) != 1 || hits[0].Model != "m1" {
		t.Fatalf("hits %+v", hits)
	}
}

func TestChat429FailsOverToSecondConnection(t *testing.T) {
	f := newGW(t, "fk-limited", "fk-good")
	f.fu.Script("fk-limited", fakeupstream.Step{Status: 429, RetryAfter: "7"})
	// Distinct conversations: the first success pins its session (after the
	// response is written), which must not steer the second request.
	for _, body := range []string{chatBody, `{"model":"fake/m1","stream":true,"messages":[{"role":"user","content":"another"}]}`} {
		f.fu.Reset()
		f.app.Clock.Advance(time.Hour) // the first connection's cooldown from the previous round is over
		resp := f.post(t, body)
		io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if got := resp.Header.Get("X-Switchyard-Selected-Connection-Id"); got != f.conns["fk-good"].ID {
			t.Fatalf("served by %s, want fk-good", got)
		}
		if resp.Header.Get("X-Switchyard-Fallback-Attempts") != "1" {
			t.Fatalf("fallback attempts %q", resp.Header.Get("X-Switchyard-Fallback-Attempts"))
		}
		if n := len(f.fu.Hits()); n != 2 {
			t.Fatalf("upstream saw %d attempts, want 2", n)
		}
	}
}

// readSSE returns the data payloads of a stream.
func readSSE(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestStreamRelaysDeltasInOrderAndEndsWithDone(t *testing.T) {
	f := newGW(t, "fk-a")
	resp := f.post(t, streamBody)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d ct %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	frames := readSSE(t, resp.Body)
	if len(frames) < 2 || frames[len(frames)-1] != "[DONE]" {
		t.Fatalf("frames %q", frames)
	}
	var text strings.Builder
	for _, fr := range frames[:len(frames)-1] {
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(fr), &c); err != nil {
			t.Fatalf("frame %q: %v", fr, err)
		}
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if text.String() != fakeupstream.DefaultContent {
		t.Fatalf("streamed text %q, want %q", text.String(), fakeupstream.DefaultContent)
	}
}

func TestStreamCutAfterThreeChunksEndsWithErrorAndNoDone(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.Script("fk-a", fakeupstream.Step{Fault: fakeupstream.FaultCut, At: 3})
	resp := f.post(t, streamBody)
	frames := readSSE(t, resp.Body)
	content, errs := 0, 0
	for _, fr := range frames {
		if fr == "[DONE]" {
			t.Fatalf("a truncated stream ended with [DONE]: %q", frames)
		}
		var c struct {
			Error   *struct{ Code string } `json:"error"`
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(fr), &c)
		if c.Error != nil {
			errs++
			continue
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			content++
		}
	}
	if content != 3 || errs != 1 || !strings.Contains(frames[len(frames)-1], `"error"`) {
		t.Fatalf("content chunks %d, error frames %d: %q", content, errs, frames)
	}
}

func TestClientDisconnectEndsUpstreamRequest(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.Script("fk-a", fakeupstream.Step{Fault: fakeupstream.FaultStall, At: 2})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	// Read until the second content chunk has arrived.
	seen := 0
	for seen < 2 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			seen++
		}
	}
	hits := f.fu.Hits()
	cancel()
	resp.Body.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), time.Second)
	defer wcancel()
	if _, err := f.fu.WaitEnded(wctx, hits[0].Seq); err != nil {
		t.Fatalf("upstream request still running 1 s after the client left: %v", err)
	}
}

func TestClientErrorsNeverReachUpstream(t *testing.T) {
	f := newGW(t, "fk-a")
	restricted, restrictedSecret := f.app.NewKey("restricted")
	_, err := f.app.Server.Keys().Update(context.Background(), restricted.ID, services.KeyInput{AllowedModels: services.Some([]string{"openai/*"})})
	if err != nil {
		t.Fatal(err)
	}
	big := `{"model":"fake/m1","messages":[{"role":"user","content":"` + strings.Repeat("x", 33<<20) + `"}]}`
	cases := []struct {
		name, body, auth string
		status           int
		code             string
	}{
		{"invalid key", chatBody, "Bearer sk-sy-" + strings.Repeat("A", 43), 401, "invalid_api_key"},
		{"no key", chatBody, "", 401, "invalid_api_key"},
		{"model not allowed", chatBody, "Bearer " + restrictedSecret, 403, "model_not_allowed"},
		{"unknown model", `{"model":"nosuch-model","messages":[{"role":"user","content":"hi"}]}`, "", 404, "model_not_found"},
		{"malformed json", `{"model":`, "", 400, "invalid_request"},
		{"missing messages", `{"model":"fake/m1"}`, "", 400, "invalid_request"},
		{"body over limit", big, "", 413, "request_too_large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			auth := "Bearer " + f.key
			if tc.auth != "" || tc.name == "no key" {
				auth = tc.auth
			}
			req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct {
					Message, Type, Code string
					Param               *string
				} `json:"error"`
			}
			b, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("body %s", b)
			}
			if resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Type == "" || e.Error.Message == "" {
				t.Fatalf("got %d %s, want %d %s", resp.StatusCode, b, tc.status, tc.code)
			}
			if n := len(f.fu.Hits()); n != 0 {
				t.Fatalf("upstream was hit %d times", n)
			}
		})
	}
	// Wrong media type.
	req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Authorization", "Bearer "+f.key)
	req.Header.Set("Content-Type", "text/plain")
	resp, _ := http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Fatalf("text/plain: %d", resp.StatusCode)
	}
}

func TestModelsListsCombosAndUsableModels(t *testing.T) {
	f := newGW(t, "fk-a")
	_, _, err := f.app.Server.Combos().Create(context.Background(), services.ComboInput{Name: "team",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", f.url+"/v1/models", nil)
	req.Header.Set("x-api-key", f.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Object string
		Data   []struct{ ID, OwnedBy string } `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	if out.Object != "list" || len(out.Data) == 0 || out.Data[0].ID != "team" {
		t.Fatalf("models %+v", out)
	}
	// A combo name routes to its targets.
	resp2 := f.post(t, `{"model":"team","messages":[{"role":"user","content":"hi"}]}`)
	io.ReadAll(resp2.Body)
	if resp2.StatusCode != 200 || resp2.Header.Get("X-Switchyard-Combo") != "team" {
		t.Fatalf("combo request: %d %v", resp2.StatusCode, resp2.Header)
	}
}
