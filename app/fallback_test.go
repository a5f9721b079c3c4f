package app_test

import (
	"strings"
	"testing"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
)

// twoProviders is the gateway with provider fake (fk-a) and fakeb (fk-b).
func twoProviders(t *testing.T) *gwFixture {
	t.Helper()
	f := newGW(t, "fk-a")
	f.conns["fk-b"] = f.app.AddConnection(services.ConnectionInput{Provider: services.Some("fakeb"),
		Custom: services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"}),
		Name:   services.Some("b-1"), APIKey: services.Some("fk-b"), BaseURL: services.Some(f.fu.URL() + "/v1")})
	return f
}

func toolsBody(model string, n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"` + model + `","messages":[{"role":"user","content":"use tools"}],"tools":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"function","function":{"name":"f` + strings.Repeat("x", i%5) + `","parameters":{"type":"object"}}}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

func TestToolLimitIsLearnedAndRoutesAround(t *testing.T) {
	f := twoProviders(t)
	if _, _, err := f.app.Server.Combos().Create(t.Context(), services.ComboInput{Name: "tools",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fakeb", Model: "m2"}}}); err != nil {
		t.Fatal(err)
	}
	f.fu.Script("fk-a", fakeupstream.Step{Status: 400, ErrorCode: "array_above_max_length",
		ErrorMessage: "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 130 instead."})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, toolsBody("tools", 130))
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-b"].ID {
		t.Fatalf("first: %d %s", resp.StatusCode, b)
	}
	if l, ok := f.app.Server.Gateway().ToolLimits().Get("fake", "m1"); !ok || l.MaxTools != 128 || l.Source != "parsed" {
		t.Fatalf("learned %+v %v", l, ok)
	}
	f.fu.Reset()
	f.fu.ClearScripts()
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, toolsBody("tools", 130))
	if resp.StatusCode != 200 || len(f.fu.HitsFor("fk-a")) != 0 {
		t.Fatalf("130 tools reached the limited target: %d, hits %d", resp.StatusCode, len(f.fu.HitsFor("fk-a")))
	}
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, toolsBody("tools", 10))
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID {
		t.Fatalf("10 tools: %d served by %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	// A direct request no target can take: 400 naming the limit, no upstream hit.
	f.fu.Reset()
	resp, b = postKey(t, f.url+"/v1/chat/completions", f.key, toolsBody("fake/m1", 130))
	if resp.StatusCode != 400 || !strings.Contains(string(b), "tool_limit_exceeded") || !strings.Contains(string(b), "128") || len(f.fu.Hits()) != 0 {
		t.Fatalf("no fit: %d %s", resp.StatusCode, b)
	}
}

func TestEmergencyFallbackToggledAtRunTime(t *testing.T) {
	f := twoProviders(t)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	admin := f.app.Login()
	patch := func(path, body string) {
		req := testkit.Request("PATCH", path, body, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
		req.AddCookie(admin)
		if rec := f.app.Do(req); rec.Code != 200 {
			t.Fatalf("PATCH %s: %d %s", path, rec.Code, rec.Body.String())
		}
	}
	patch("/api/resilience", `{"emergencyFallback":{"target":"fakeb/m2"}}`)
	resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	if resp.StatusCode != 503 {
		t.Fatalf("fallback off: %d", resp.StatusCode)
	}
	patch("/api/feature-flags", `{"emergencyFallback":true}`)
	f.app.Server.Resilience().Cooldowns.ClearCooldowns(t.Context(), nil)
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"fake/m1","messages":[{"role":"user","content":"again"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Emergency-Fallback") != "from=fake/m1; to=fakeb/m2" ||
		resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-b"].ID {
		t.Fatalf("fallback on: %d %v", resp.StatusCode, resp.Header)
	}
	patch("/api/feature-flags", `{"emergencyFallback":false}`)
	f.app.Server.Resilience().Cooldowns.ClearCooldowns(t.Context(), nil)
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"fake/m1","messages":[{"role":"user","content":"third"}]}`)
	if resp.StatusCode == 200 {
		t.Fatal("fallback still used after the flag was switched off")
	}
}
