package app_test

import (
	"strings"
	"testing"

	"switchyard/internal/fakeupstream"
)

// A request that spent its time in a cooldown-aware wait makes the
// Overview's latency p95 "far above the upstream", with the share of the
// time spent waiting, in the tile and in GET /api/metrics/summary; fast
// traffic without waits is judged and not flagged. Before, the p95 tile
// showed the number alone and the summary had no judgement.
func TestOverviewFlagsLatencySpentWaiting(t *testing.T) {
	f := newGW(t, "fk-a")
	patchResilience(t, f.app, `{"waitForCooldown":{"enabled":true}}`)
	a := operatorAdmin(t, f)

	chatModel(t, f, "fake/m1")
	waitLogs(t, f, 1)
	s := a.mustJSON(t, "GET", "/api/metrics/summary?window=1h", "", 200)
	j, _ := s["latencyVsUpstream"].(map[string]any)
	if j == nil || j["flagged"] != false || j["waitShare"] != 0.0 {
		t.Fatalf("fast traffic judged %v", s["latencyVsUpstream"])
	}
	if s["ttfbVsUpstream"] != nil {
		t.Errorf("no stream yet, ttfbVsUpstream %v", s["ttfbVsUpstream"])
	}

	// Three requests wait 6.05 s (fake time) for the 429's cooldown, then served.
	for range 3 {
		f.fu.SetScript("fk-a", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429, RetryAfter: "6"}}, Then: fakeupstream.ThenDefault})
		if resp := chatModel(t, f, "fake/m1"); resp.StatusCode != 200 {
			t.Fatalf("after the wait: %d", resp.StatusCode)
		}
	}
	waitLogs(t, f, 4)
	s = a.mustJSON(t, "GET", "/api/metrics/summary?window=1h", "", 200)
	j, _ = s["latencyVsUpstream"].(map[string]any)
	share, _ := j["waitShare"].(float64)
	if j == nil || j["flagged"] != true || share < 0.9 || share > 1 {
		t.Fatalf("p95 %v judged %v, want flagged with ≥ 90 %% waiting", s["latencyP95Ms"], s["latencyVsUpstream"])
	}
	if up, _ := j["upstreamP95Ms"].(float64); up >= 1000 {
		t.Errorf("upstream p95 %v ms: the wait counted as the upstream's", up)
	}

	page := dashboardFragment(t, f, "/overview/stats")
	tile := squashHTML(between(page, `data-testid="overview-latency-p95"`, "</li>"))
	if !strings.Contains(page, `<div class="tile tile--warning" data-testid="overview-latency-p95"`) {
		t.Errorf("p95 tile not in the warning style: %q", tile)
	}
	if !strings.Contains(tile, "far above the upstream") || !strings.Contains(tile, "% waiting") {
		t.Errorf("p95 tile: %q", tile)
	}
}
