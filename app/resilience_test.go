package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services/resilience"
)

// patchResilience changes the settings document through the admin API.
func patchResilience(t *testing.T, a *testkit.App, body string) {
	t.Helper()
	c := a.Login()
	req := testkit.Request("PATCH", "/api/resilience", body, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
	req.AddCookie(c)
	if rec := a.Do(req); rec.Code != 200 {
		t.Fatalf("PATCH /api/resilience: %d %s", rec.Code, rec.Body.String())
	}
}

func adminGet(t *testing.T, a *testkit.App, path string) map[string]any {
	t.Helper()
	req := testkit.Request("GET", path, "")
	req.AddCookie(a.Login())
	rec := a.Do(req)
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	var m map[string]any
	json.Unmarshal(rec.Body.Bytes(), &m)
	return m
}

func TestRetryAfterCoolsTheConnectionExactly(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "7"})
	resp := f.post(t, chatBody)
	io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || len(f.fu.Hits()) != 2 {
		t.Fatalf("first: %d, hits %d", resp.StatusCode, len(f.fu.Hits()))
	}
	st := f.app.Server.Resilience().Cooldowns.State(f.conns["fk-a"].ID)
	if st.RateLimitedUntil == nil || !st.RateLimitedUntil.Equal(f.app.Clock.Now().Add(7*time.Second)) || st.BackoffLevel != 0 {
		t.Fatalf("cooldown %+v, want until now+7s at level 0", st)
	}
	// While cooling, the first connection is skipped without a hit.
	f.fu.Reset()
	resp = f.post(t, chatBody)
	io.ReadAll(resp.Body)
	if hits := f.fu.Hits(); len(hits) != 1 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-b"].ID {
		t.Fatalf("while cooling: %d hits", len(hits))
	}
	// Lazy recovery: at +7 s it is eligible again, nothing written before.
	f.app.Clock.Advance(7 * time.Second)
	f.fu.Script("fk-a", fakeupstream.Step{})
	f.fu.Reset()
	// A new conversation: no affinity pin from the requests above applies.
	resp = f.post(t, `{"model":"fake/m1","messages":[{"role":"user","content":"a new conversation"}]}`)
	io.ReadAll(resp.Body)
	if resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID {
		t.Fatal("recovered connection not used again")
	}
	// The response reaches the client just before the success is booked.
	cleared := testkit.PollUntil(5*time.Second, func() bool {
		st := f.app.Server.Resilience().Cooldowns.State(f.conns["fk-a"].ID)
		return st.RateLimitedUntil == nil && st.BackoffLevel == 0
	})
	if !cleared {
		t.Fatalf("success did not clear state: %+v", f.app.Server.Resilience().Cooldowns.State(f.conns["fk-a"].ID))
	}
}

func TestRateLimitsNeverTripTheBreakerButServerErrorsDo(t *testing.T) {
	f := newGW(t, "fk-a")
	patchResilience(t, f.app, `{"providerBreaker":{"apikey":{"failureThreshold":2}}}`)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429})
	for i := 0; i < 6; i++ {
		resp := f.post(t, chatBody)
		io.ReadAll(resp.Body)
		f.app.Clock.Advance(time.Hour)
	}
	if s := f.app.Server.Resilience().Breakers.Status("fake"); s.State != resilience.BreakerClosed || s.FailureCount != 0 {
		t.Fatalf("429s changed the breaker: %+v", s)
	}
	// A caller fault changes nothing anywhere.
	f.fu.Script("fk-a", fakeupstream.Step{Status: 400, ErrorMessage: "bad field"})
	resp := f.post(t, chatBody)
	io.ReadAll(resp.Body)
	if st := f.app.Server.Resilience().Cooldowns.State(f.conns["fk-a"].ID); st.RateLimitedUntil != nil && st.RateLimitedUntil.After(f.app.Clock.Now()) {
		t.Fatalf("a 400 cooled the connection: %+v", st)
	}
	// Two 503s on new episodes open the breaker; the next request is 503 provider_circuit_open without a hit.
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	for i := 0; i < 2; i++ {
		if i > 0 {
			f.app.Clock.Advance(time.Hour) // a new episode, not the running cooldown
		}
		resp := f.post(t, chatBody)
		io.ReadAll(resp.Body)
	}
	if s := f.app.Server.Resilience().Breakers.Status("fake"); s.State != resilience.BreakerOpen {
		t.Fatalf("breaker %+v, want OPEN", s)
	}
	f.fu.Reset()
	resp = f.post(t, chatBody)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(b), `"provider_circuit_open"`) || resp.Header.Get("Retry-After") == "" || len(f.fu.Hits()) != 0 {
		t.Fatalf("open breaker: %d %s hits %d", resp.StatusCode, b, len(f.fu.Hits()))
	}
}

func TestConcurrentFailuresAreOneEpisode(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503, Delay: 150 * time.Millisecond})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(chatBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+f.key)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if n := len(f.fu.Hits()); n != 8 {
		t.Fatalf("%d dispatches, want 8 concurrent ones", n)
	}
	st := f.app.Server.Resilience().Cooldowns.State(f.conns["fk-a"].ID)
	if st.BackoffLevel != 1 {
		t.Fatalf("backoff level %d after 8 concurrent 503s, want 1", st.BackoffLevel)
	}
	if s := f.app.Server.Resilience().Breakers.Status("fake"); s.FailureCount != 1 {
		t.Fatalf("breaker counted %d failures, want 1", s.FailureCount)
	}
}

func TestModelLockoutKeepsOtherModelsAndReEnables(t *testing.T) {
	f := newGW(t, "fk-a")
	patchResilience(t, f.app, `{"modelLockout":{"enabled":true}}`)
	f.fu.ScriptModel("fk-a", "model-x", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found", ErrorMessage: "The model does not exist"})
	body := func(m string) string {
		return `{"model":"fake/` + m + `","messages":[{"role":"user","content":"hi"}]}`
	}
	resp := f.post(t, body("model-x"))
	io.ReadAll(resp.Body)
	if resp.StatusCode != 404 {
		t.Fatalf("model-x: %d", resp.StatusCode)
	}
	// Locked: the next request for model-x does not reach the upstream.
	f.fu.Reset()
	resp = f.post(t, body("model-x"))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || !strings.Contains(string(b), "model_cooldown") || len(f.fu.Hits()) != 0 {
		t.Fatalf("locked model-x: %d %s hits %d", resp.StatusCode, b, len(f.fu.Hits()))
	}
	// model-y on the same connection still works.
	resp = f.post(t, body("model-y"))
	io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("model-y: %d", resp.StatusCode)
	}
	list := adminGet(t, f.app, "/api/resilience/model-cooldowns")
	items, _ := list["items"].([]any)
	if list["enabled"] != true || len(items) != 1 || items[0].(map[string]any)["model"] != "model-x" {
		t.Fatalf("model cooldowns %v", list)
	}
	// Re-enable through the API: the next request reaches the upstream at once.
	req := testkit.Request("DELETE", "/api/resilience/model-cooldowns", `{"provider":"fake","connectionId":"`+f.conns["fk-a"].ID+`","model":"model-x"}`,
		"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
	req.AddCookie(f.app.Login())
	if rec := f.app.Do(req); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"removed":`) {
		t.Fatalf("re-enable: %d %s", rec.Code, rec.Body.String())
	}
	f.fu.Reset()
	f.fu.ClearScripts()
	resp = f.post(t, body("model-x"))
	io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || len(f.fu.Hits()) != 1 {
		t.Fatalf("after re-enable: %d hits %d", resp.StatusCode, len(f.fu.Hits()))
	}
}

func TestQuotaMisstatusRestatedButAccessDeniedNot(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.Script("fk-a", fakeupstream.Step{Status: 403, ErrorMessage: "用户额度不足, 剩余额度: 0"})
	resp := f.post(t, chatBody)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "60" || !strings.Contains(string(b), "upstream_rate_limited") {
		t.Fatalf("quota misstatus: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	f.app.Clock.Advance(time.Hour)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 403, ErrorMessage: "无权访问模型 gpt-x"})
	resp = f.post(t, chatBody)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode == 429 || strings.Contains(string(b), "upstream_rate_limited") {
		t.Fatalf("access denied was restated: %d %s", resp.StatusCode, b)
	}
}

func TestStatePersistsAcrossRestart(t *testing.T) {
	fu := fakeupstream.Start(t)
	dir := t.TempDir()
	env := map[string]string{"SWITCHYARD_DATA_DIR": dir, "SWITCHYARD_PRIVATE_UPSTREAMS": fu.Addr(), "SWITCHYARD_ADMIN_PASSWORD": testkit.AdminPassword}
	r := testkit.StartApp(t, nil, env)
	cl := newHTTPAdmin(t, r.BaseURL)
	cl.do("PATCH", "/api/resilience", `{"modelLockout":{"enabled":true},"providerBreaker":{"local":{"failureThreshold":1}},"waitForCooldown":{"enabled":false}}`, 200)
	mk := func(provider, name, key string, custom string) string {
		body := `{"provider":"` + provider + `","name":"` + name + `","apiKey":"` + key + `","baseUrl":"` + fu.URL() + `/v1"`
		if custom != "" {
			body += `,"custom":{"wireFormat":"openai","authClass":"` + custom + `"}`
		}
		return cl.do("POST", "/api/connections", body+`}`, 201)["id"].(string)
	}
	cool := mk("fake", "cooling", "fk-cool", "apikey")
	term := mk("fake", "terminal", "fk-term", "")
	locked := mk("fake", "locked", "fk-lock", "")
	mk("brk", "breaker", "fk-brk", "local")
	key := cl.do("POST", "/api/keys", `{"name":"client"}`, 201)["secret"].(string)
	// 500 is not a lockout status, so it cools the connection itself.
	fu.Script("fk-cool", fakeupstream.Step{Status: 500, RetryAfter: "600"})
	fu.Script("fk-term", fakeupstream.Step{Status: 402, ErrorCode: "insufficient_quota"})
	fu.ScriptModel("fk-lock", "m1", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found"})
	fu.Script("fk-brk", fakeupstream.Step{Status: 503})
	for _, m := range []string{"fake/m1", "brk/m1"} {
		req, _ := http.NewRequest("POST", r.BaseURL+"/v1/chat/completions", strings.NewReader(`{"model":"`+m+`","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	check := func(when string, cl *httpAdmin) {
		cds := cl.do("GET", "/api/resilience/cooldowns", "", 200)["connections"].([]any)
		status := map[string]string{}
		for _, c := range cds {
			m := c.(map[string]any)
			status[m["id"].(string)] = m["status"].(string)
		}
		if status[cool] != "cooling" || status[term] != "terminal" || status[locked] != "model_locked" {
			t.Fatalf("%s: statuses %v", when, status)
		}
		h := cl.do("GET", "/api/monitoring/health", "", 200)
		brs, _ := h["breakers"].([]any)
		open := false
		for _, b := range brs {
			if m := b.(map[string]any); m["provider"] == "brk" && m["state"] == "OPEN" {
				open = true
			}
		}
		if !open {
			t.Fatalf("%s: breaker of brk not open: %v", when, h["breakers"])
		}
	}
	check("before restart", cl)
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	r2 := testkit.StartApp(t, nil, env)
	check("after restart", newHTTPAdmin(t, r2.BaseURL))
}

// httpAdmin drives the management API over real HTTP with a session cookie.
type httpAdmin struct {
	t      *testing.T
	base   string
	cookie *http.Cookie
}

func newHTTPAdmin(t *testing.T, base string) *httpAdmin {
	t.Helper()
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader("password="+strings.ReplaceAll(testkit.AdminPassword, " ", "+")))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.MaxAge >= 0 && strings.HasSuffix(c.Name, "switchyard_session") {
			return &httpAdmin{t: t, base: base, cookie: c}
		}
	}
	t.Fatalf("login: %d, no cookie", resp.StatusCode)
	return nil
}

func (h *httpAdmin) do(method, path, body string, want int) map[string]any {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), method, h.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(h.cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		h.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}
