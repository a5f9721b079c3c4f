package app_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

// A connection whose 5-hour window is used up (codex headers, 100 %) is
// gated (gate 10, 30-routing §8.4): the next request goes to the next entry
// without touching it, and diagnostics name quota_window when nothing else
// is left.
func TestQuotaWindowGatesUsedUpConnection(t *testing.T) {
	f := twoProviders(t)
	mkCombo(t, f, services.ComboInput{Name: "ff", Strategy: "fill-first",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fakeb", Model: "m2"}}})
	mkCombo(t, f, services.ComboInput{Name: "only-a", Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	f.fu.Script("fk-a", fakeupstream.Step{Headers: map[string]string{
		"x-codex-primary-used-percent": "100", "x-codex-primary-window-minutes": "300", "x-codex-primary-reset-after-seconds": "1200"}})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("ff"))
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID {
		t.Fatalf("first: %d %s", resp.StatusCode, b)
	}
	f.fu.Reset()
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("ff"))
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-b"].ID || len(f.fu.HitsFor("fk-a")) != 0 {
		t.Fatalf("gated: %d on %s, hits on A %d", resp.StatusCode, resp.Header.Get("X-Switchyard-Selected-Connection-Id"), len(f.fu.HitsFor("fk-a")))
	}
	resp, b = postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("only-a"))
	var e struct {
		Diagnostics struct {
			Excluded []struct {
				Reason, Detail string
				RetryAfterMs   *int64
			}
		}
	}
	_ = json.Unmarshal(b, &e)
	if resp.StatusCode != 503 || !strings.Contains(string(b), "all_targets_cooling_down") || len(e.Diagnostics.Excluded) != 1 ||
		e.Diagnostics.Excluded[0].Detail != "quota_window" || e.Diagnostics.Excluded[0].RetryAfterMs == nil ||
		*e.Diagnostics.Excluded[0].RetryAfterMs != 1200_000 {
		t.Fatalf("only A: %d %s", resp.StatusCode, b)
	}
	// Time passes beyond the reset: the window reads as unused again.
	f.app.Clock.Advance(1201 * time.Second)
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("only-a"))
	if resp.StatusCode != 200 {
		t.Fatalf("after the reset: %d", resp.StatusCode)
	}
}

// headroom orders a provider's connections by their unused quota, learned
// from the Anthropic unified utilisation headers.
func TestHeadroomPrefersTheLessUsedConnection(t *testing.T) {
	f := newGW(t, "fk-a", "fk-a2")
	mkCombo(t, f, services.ComboInput{Name: "room", Strategy: "headroom", Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	mkCombo(t, f, services.ComboInput{Name: "a2", Targets: []services.Target{{Provider: "fake", Model: "m1", ConnectionID: ptr(f.conns["fk-a2"].ID)}}})
	f.fu.Script("fk-a", fakeupstream.Step{Headers: map[string]string{"anthropic-ratelimit-unified-5h-utilization": "0.9"}, Times: 10})
	f.fu.Script("fk-a2", fakeupstream.Step{Headers: map[string]string{"anthropic-ratelimit-unified-5h-utilization": "0.2"}, Times: 10})
	// Learn both: the first request goes to fk-a (configured order), then fk-a2 directly.
	postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("room"))
	postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("a2"))
	for i := range 3 {
		resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("room"))
		if got := resp.Header.Get("X-Switchyard-Selected-Connection-Id"); resp.StatusCode != 200 || got != f.conns["fk-a2"].ID {
			t.Fatalf("request %d: %d on %s, want the connection with more headroom", i, resp.StatusCode, got)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// An auto combo serves through its candidates; an unknown X-Switchyard-Mode
// is ignored with warning mode_ignored, a known one is not.
func TestAutoComboModeHeader(t *testing.T) {
	f := newGW(t, "fk-a", "fk-a2")
	mkCombo(t, f, services.ComboInput{Name: "smart", Strategy: "auto", Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("smart"), "X-Switchyard-Mode", "turbo")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("X-Switchyard-Warning"), "mode_ignored") {
		t.Fatalf("unknown mode: %d %q %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"), b)
	}
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("smart"), "X-Switchyard-Mode", "cheap")
	if resp.StatusCode != 200 || strings.Contains(resp.Header.Get("X-Switchyard-Warning"), "mode_ignored") {
		t.Fatalf("known mode: %d %q", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"))
	}
}
