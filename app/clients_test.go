package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

// clientsGW is newGW with an anthropic-format custom node ("fakeant",
// given the host root as base URL) and, when native, a connection of the
// catalogue's anthropic provider, both on the same fake upstream.
func clientsGW(t *testing.T, native bool) *gwFixture {
	t.Helper()
	f := newGW(t, "fk-a")
	f.conns["fk-ant"] = f.app.AddConnection(services.ConnectionInput{Provider: services.Some("fakeant"), Name: services.Some("ant"),
		APIKey: services.Some("fk-ant"), BaseURL: services.Some(f.fu.URL()),
		Custom: services.Some(services.CustomSpec{WireFormat: "anthropic", AuthClass: "apikey"})})
	if native {
		f.conns["fk-native"] = f.app.AddConnection(services.ConnectionInput{Provider: services.Some("anthropic"), Name: services.Some("native"),
			APIKey: services.Some("fk-native"), BaseURL: services.Some(f.fu.URL() + "/v1")})
	}
	return f
}

func (f *gwFixture) do(t *testing.T, method, path, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.key)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func lastHitBody(t *testing.T, f *gwFixture, key string) map[string]json.RawMessage {
	t.Helper()
	hits := f.fu.HitsFor(key)
	if len(hits) == 0 {
		t.Fatalf("no upstream hit for %s", key)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(hits[len(hits)-1].Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const midSystemBody = `{"model":"%s","max_tokens":32,"system":"You are terse.","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"system","content":"Answer in French."},{"role":"user","content":"again"}]}`

func midSystem(model string) string { return strings.Replace(midSystemBody, "%s", model, 1) }

// Item 1: a mid-conversation system entry is accepted, folded for a
// compatible node (system_folded), passed through to Anthropic's API under
// the beta, translated to a chat system message in place, and other roles
// get the real API's wording.
func TestMessagesMidConversationSystem(t *testing.T) {
	f := clientsGW(t, true)

	resp, b := f.do(t, "POST", "/v1/messages", midSystem("fakeant/c1"))
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("X-Switchyard-Warning"), "system_folded") {
		t.Fatalf("folded: %d %q %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"), b)
	}
	up := lastHitBody(t, f, "fk-ant")
	if strings.Contains(string(up["messages"]), `"system"`) || !strings.Contains(string(up["system"]), "You are terse.") ||
		!strings.Contains(string(up["system"]), "Answer in French.") || strings.Index(string(up["system"]), "terse") > strings.Index(string(up["system"]), "French") {
		t.Fatalf("folded upstream body: messages %s system %s", up["messages"], up["system"])
	}

	resp, b = f.do(t, "POST", "/v1/messages", midSystem("anthropic/c1"), "anthropic-beta", "mid-conversation-system-2026-04-07")
	if resp.StatusCode != 200 || strings.Contains(resp.Header.Get("X-Switchyard-Warning"), "system_folded") {
		t.Fatalf("native: %d %q %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"), b)
	}
	if up := lastHitBody(t, f, "fk-native"); !strings.Contains(string(up["messages"]), `"role":"system"`) {
		t.Fatalf("native upstream body lost the system entry: %s", up["messages"])
	}

	resp, b = f.do(t, "POST", "/v1/messages", midSystem("fake/m1"))
	if resp.StatusCode != 200 {
		t.Fatalf("translated: %d %s", resp.StatusCode, b)
	}
	var chat struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	up = lastHitBody(t, f, "fk-a")
	json.Unmarshal(up["messages"], &chat.Messages)
	roles := []string{}
	for _, m := range chat.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,system,user" || chat.Messages[3].Content != "Answer in French." {
		t.Fatalf("translated roles %v: %s", roles, up["messages"])
	}

	resp, b = f.do(t, "POST", "/v1/messages", `{"model":"fake/m1","max_tokens":8,"messages":[{"role":"wizard","content":"hi"}]}`)
	var e struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	json.Unmarshal(b, &e)
	if resp.StatusCode != 400 || e.Error.Message != `Unexpected role "wizard" for input message role: expected user, assistant or system.` {
		t.Fatalf("bad role: %d %s", resp.StatusCode, b)
	}
}

// Item 2: count_tokens is forwarded to an anthropic-format upstream,
// counted locally otherwise (and when the upstream fails), and takes no
// inference dispatch.
func TestCountTokensForwardedOrLocal(t *testing.T) {
	f := clientsGW(t, false)
	body := `{"model":"%s","messages":[{"role":"user","content":"count these words please"}]}`
	resp, b := f.do(t, "POST", "/v1/messages/count_tokens", strings.Replace(body, "%s", "fakeant/c1", 1))
	var out struct {
		InputTokens int `json:"input_tokens"`
	}
	json.Unmarshal(b, &out)
	want := fakeupstream.Tokens("count these words please")
	if resp.StatusCode != 200 || out.InputTokens != want || resp.Header.Get("X-Switchyard-Warning") != "" {
		t.Fatalf("forwarded: %d %s (want %d)", resp.StatusCode, b, want)
	}
	if hits := f.fu.HitsFor("fk-ant"); len(hits) != 1 || hits[0].Path != "/v1/messages/count_tokens" || hits[0].Model != "c1" {
		t.Fatalf("hits %+v", hits)
	}

	resp, b = f.do(t, "POST", "/v1/messages/count_tokens", strings.Replace(body, "%s", "fake/m1", 1))
	out.InputTokens = 0
	json.Unmarshal(b, &out)
	if resp.StatusCode != 200 || out.InputTokens < 5 || out.InputTokens > 20 || resp.Header.Get("X-Switchyard-Warning") != "token_count_estimated" {
		t.Fatalf("local: %d %q %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"), b)
	}
	if n := len(f.fu.HitsFor("fk-a")); n != 0 {
		t.Fatalf("a local count dispatched %d upstream requests", n)
	}

	f.fu.Script("fk-ant", fakeupstream.Step{Status: 500})
	resp, b = f.do(t, "POST", "/v1/messages/count_tokens", strings.Replace(body, "%s", "fakeant/c1", 1))
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Warning") != "token_count_estimated" {
		t.Fatalf("fallback: %d %q %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"), b)
	}
	// The failure fed no resilience state: the connection still serves.
	f.fu.Script("fk-ant")
	if resp, b := f.do(t, "POST", "/v1/messages", `{"model":"fakeant/c1","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("after a failed count: %d %s", resp.StatusCode, b)
	}
}

// Item 3: GET /v1/models/{id} decodes provider%2Fmodel.
func TestModelByEncodedID(t *testing.T) {
	f := clientsGW(t, false)
	if err := f.app.Server.Connections().SetCustomModels(context.Background(), "fake", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/models/fake%2Fm1", "/v1/models/fake/m1"} {
		resp, b := f.do(t, "GET", p, "")
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"fake/m1"`) {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, b)
		}
	}
}

// Item 4: an anthropic base URL given as the host root works (clientsGW
// gives fakeant the root; the catalogue's .../v1 spelling still works).
func TestAnthropicBaseURLRootAndV1(t *testing.T) {
	f := clientsGW(t, true)
	for _, m := range []string{"fakeant/c1", "anthropic/c1"} {
		resp, b := f.do(t, "POST", "/v1/messages", `{"model":"`+m+`","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, b)
		}
	}
	for _, k := range []string{"fk-ant", "fk-native"} {
		if h := f.fu.HitsFor(k); len(h) != 1 || h[0].Path != "/v1/messages" {
			t.Fatalf("%s hits %+v", k, h)
		}
	}
}

// Item 6: caller errors tell SDKs not to retry.
func TestShouldRetryFalseOnCallerErrors(t *testing.T) {
	f := clientsGW(t, false)
	cases := []struct {
		path, body string
		headers    []string
		status     int
		retry      string
	}{
		{"/v1/chat/completions", chatBody, []string{"Authorization", "Bearer sk-sy-" + strings.Repeat("x", 43)}, 401, "false"},
		{"/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, nil, 404, "false"},
		{"/v1/chat/completions", `{"messages":[]}`, nil, 400, "false"},
		{"/v1/messages", chatBody, []string{"Content-Type", "text/plain"}, 415, "false"},
	}
	for _, c := range cases {
		resp, b := f.do(t, "POST", c.path, c.body, c.headers...)
		if resp.StatusCode != c.status || resp.Header.Get("x-should-retry") != c.retry || resp.Header.Get("X-Switchyard-Error-Code") == "" {
			t.Fatalf("%s %d: x-should-retry %q code %q %s", c.path, resp.StatusCode, resp.Header.Get("x-should-retry"), resp.Header.Get("X-Switchyard-Error-Code"), b)
		}
	}
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "3"})
	if resp, _ := f.do(t, "POST", "/v1/chat/completions", chatBody); resp.StatusCode != 429 || resp.Header.Get("x-should-retry") != "" {
		t.Fatalf("429: %d x-should-retry %q", resp.StatusCode, resp.Header.Get("x-should-retry"))
	}
}

// Item 7: the unprefixed aliases answer every outcome like /v1.
func TestUnprefixedAliasesAnswerLikeV1(t *testing.T) {
	f := clientsGW(t, false)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/chat/completions", "/messages", "/responses", "/embeddings"} {
		for _, c := range []struct {
			method, ct, auth string
			status           int
			code             string
		}{
			{"POST", "application/json", "", 401, "invalid_api_key"},
			{"POST", "application/json", "Bearer " + f.key, 404, "model_not_found"},
			{"POST", "text/plain", "Bearer " + f.key, 415, "unsupported_media_type"},
			{"GET", "", "Bearer " + f.key, 405, "method_not_allowed"},
		} {
			for _, prefix := range []string{"", "/v1"} {
				body := `{"model":"no-such-model","max_tokens":8,"input":"x","messages":[{"role":"user","content":"hi"}]}`
				req, _ := http.NewRequest(c.method, f.url+prefix+p, strings.NewReader(body))
				if c.ct != "" {
					req.Header.Set("Content-Type", c.ct)
				}
				if c.auth != "" {
					req.Header.Set("Authorization", c.auth)
				}
				resp, err := noRedirect.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !strings.Contains(string(b), `"`+c.code+`"`) {
					t.Fatalf("%s %s%s: %d %q %s", c.method, prefix, p, resp.StatusCode, resp.Header.Get("Content-Type"), b)
				}
			}
		}
	}
}

// Item 8: the request log keeps the warnings sent; translated answers name
// the upstream model id; embeddings refuse stream and anthropic-only
// targets with 400 unsupported_parameter.
func TestContractGaps(t *testing.T) {
	f := clientsGW(t, false)
	resp, b := f.do(t, "POST", "/v1/chat/completions", `{"model":"fakeant/c1","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Warning") != "param_dropped:logprobs" {
		t.Fatalf("warning: %d %q %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"), b)
	}
	rows := waitLogs(t, f, 1)
	if len(rows[0].Warnings) != 1 || rows[0].Warnings[0] != "param_dropped:logprobs" {
		t.Fatalf("log warnings %v", rows[0].Warnings)
	}

	for _, c := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"fake/m1","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"fakeant/c1","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"fake/m1","input":"hi"}`},
	} {
		resp, b := f.do(t, "POST", c.path, c.body)
		var out struct{ Model string }
		json.Unmarshal(b, &out)
		if resp.StatusCode != 200 || (out.Model != "m1" && out.Model != "c1") {
			t.Fatalf("%s: %d model %q %s", c.path, resp.StatusCode, out.Model, b)
		}
	}

	for _, c := range []struct{ body, param string }{
		{`{"model":"fake/e1","input":"x","stream":true}`, "stream"},
		{`{"model":"fakeant/e1","input":"x"}`, "model"},
	} {
		resp, b := f.do(t, "POST", "/v1/embeddings", c.body)
		var e struct {
			Error struct{ Code, Param string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		if resp.StatusCode != 400 || e.Error.Code != "unsupported_parameter" || e.Error.Param != c.param {
			t.Fatalf("embeddings %s: %d %s", c.body, resp.StatusCode, b)
		}
	}
}

// Item 8: a misspelled bare model name is offered the bare name it resembles.
func TestSuggestionsIncludeBareNames(t *testing.T) {
	f := clientsGW(t, false)
	if err := f.app.Server.Connections().SetCustomModels(context.Background(), "fake", []string{"demo-fast"}); err != nil {
		t.Fatal(err)
	}
	resp, b := f.do(t, "POST", "/v1/chat/completions", `{"model":"demo-fsat","messages":[{"role":"user","content":"hi"}]}`)
	var e struct {
		Error struct{ Suggestions []string } `json:"error"`
	}
	json.Unmarshal(b, &e)
	if resp.StatusCode != 404 || len(e.Error.Suggestions) == 0 || e.Error.Suggestions[0] != "demo-fast" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
