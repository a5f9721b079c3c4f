package app_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

// Context relay (30-routing §10.4 case 2): session S served on x1 whose
// 5-hour window is at 90 % → one summary call; the next S request, moved
// to x2, carries the summary as system context; the one after does not.
func TestContextRelayCarriesSummaryToNextConnection(t *testing.T) {
	f := newGW(t, "fk-a", "fk-a2")
	mkCombo(t, f, services.ComboInput{Name: "relay", Strategy: "context-relay", Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	f.fu.Script("fk-a",
		fakeupstream.Step{Content: "first answer", Headers: map[string]string{"anthropic-ratelimit-unified-5h-utilization": "0.9"}},
		fakeupstream.Step{Content: `{"summary":"refactoring the parser","keyDecisions":["keep the API","add fuzzing"],"taskProgress":"half done","activeEntities":["parse.go"]}`},
		fakeupstream.Step{Status: 429, RetryAfter: "600", Times: 10})
	body := `{"model":"relay","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"go on"}]}`
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, body, "X-Session-Id", "S")
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID {
		t.Fatalf("first: %d %s", resp.StatusCode, b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.app.Server.Gateway().RelayRecords() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no handoff record after the summary call")
		}
		time.Sleep(5 * time.Millisecond)
	}
	summaryHits := f.fu.HitsFor("fk-a")
	if len(summaryHits) != 2 || !strings.Contains(string(summaryHits[1].Body), "user: go on") {
		t.Fatalf("summary call: %d hits; body %s", len(summaryHits), summaryHits[len(summaryHits)-1].Body)
	}
	resp, b = postKey(t, f.url+"/v1/chat/completions", f.key, body, "X-Session-Id", "S")
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a2"].ID {
		t.Fatalf("second: %d %s", resp.StatusCode, b)
	}
	x2 := f.fu.HitsFor("fk-a2")
	msgs, _ := hitMessages(t, x2[0])
	if len(msgs) != 3 || msgs[0].Content != "be brief" || msgs[1].Role != "system" ||
		!strings.HasPrefix(msgs[1].Content, "Context carried over from an earlier session:\nSummary: refactoring the parser") ||
		!strings.Contains(msgs[1].Content, "Key decisions: keep the API; add fuzzing") || msgs[2].Content != "go on" {
		t.Fatalf("x2 messages %+v", msgs)
	}
	postKey(t, f.url+"/v1/chat/completions", f.key, body, "X-Session-Id", "S")
	x2 = f.fu.HitsFor("fk-a2")
	if msgs, _ := hitMessages(t, x2[len(x2)-1]); len(msgs) != 2 {
		t.Fatalf("injected twice on x2: %+v", msgs)
	}
	// The record is persisted with its destination, so a restart neither
	// loses it nor injects it again on x2.
	f.app.Server.Gateway().WaitRelay()
	db := testkit.OpenDBAt(t, filepath.Join(f.app.DataDir, "switchyard.db"), f.app.Clock.Now)
	hs, err := models.NewHandoffStore(db).LoadHandoffs(t.Context(), f.app.Clock.Now())
	if err != nil || len(hs) != 1 || hs[0].Source != f.conns["fk-a"].ID || len(hs[0].Injected) != 1 ||
		hs[0].Injected[0] != f.conns["fk-a2"].ID || hs[0].Summary.Summary != "refactoring the parser" {
		t.Fatalf("persisted handoffs %+v %v", hs, err)
	}
}

// Below the threshold (u = 0.80 < 0.85) no summary call is made (case 3),
// and without a session key the combo is plain priority (case 1).
func TestContextRelayBelowThresholdMakesNoSummary(t *testing.T) {
	f := newGW(t, "fk-a")
	mkCombo(t, f, services.ComboInput{Name: "relay", Strategy: "context-relay", Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	f.fu.Script("fk-a", fakeupstream.Step{Headers: map[string]string{"anthropic-ratelimit-unified-5h-utilization": "0.8"}, Times: 5})
	postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("relay"), "X-Session-Id", "S")
	f.fu.Script("fk-a", fakeupstream.Step{Headers: map[string]string{"anthropic-ratelimit-unified-5h-utilization": "0.95"}, Times: 5})
	postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("relay")) // no session
	f.app.Server.Gateway().WaitRelay()
	if n := len(f.fu.HitsFor("fk-a")); n != 2 || f.app.Server.Gateway().RelayRecords() != 0 {
		t.Fatalf("hits %d, records %d: a summary was made", n, f.app.Server.Gateway().RelayRecords())
	}
}
