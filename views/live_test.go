package views

import (
	"context"
	"strings"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/gateway"
)

func ptr[T any](v T) *T { return &v }

func TestTrafficSummaryCountsAndPercentiles(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var entries []services.RequestLogEntry
	// 20 non-streamed successes with latencies 10, 20, …, 200 ms.
	for i := 1; i <= 20; i++ {
		entries = append(entries, services.RequestLogEntry{CreatedAt: t0.Add(time.Duration(i) * time.Second), Status: 200,
			Outcome: services.RequestOutcomeSuccess, LatencyMs: int64(i * 10), PromptTokens: 3, CompletionTokens: 1000})
	}
	entries = append(entries,
		// A stream that ended with an in-band error is no success.
		services.RequestLogEntry{CreatedAt: t0, Status: 200, Stream: true, Outcome: services.RequestOutcomeUpstreamError, TtftMs: ptr(int64(40))},
		// A successful stream after a failover.
		services.RequestLogEntry{CreatedAt: t0, Status: 200, Stream: true, Outcome: services.RequestOutcomeFailover, Attempts: 2, TtftMs: ptr(int64(90))},
		// A 429 to the client.
		services.RequestLogEntry{CreatedAt: t0, Status: 429, Outcome: services.RequestOutcomeClientError, LatencyMs: 5},
		// A client abort: counted apart, not in the rate.
		services.RequestLogEntry{CreatedAt: t0.Add(-time.Minute), Status: 499, Outcome: services.RequestOutcomeAborted, LatencyMs: 9000},
	)
	vm := NewTrafficVM(entries, false)
	if vm.Requests != 24 || vm.Successes != 21 || vm.Aborted != 1 || vm.Failovers != 1 {
		t.Fatalf("counts %+v", vm)
	}
	if got := vm.SuccessRateText(); got != "91.3 %" { // 21 of 23
		t.Errorf("success rate %q", got)
	}
	if vm.SuccessClass() != "tile--warning" {
		t.Errorf("success class %q", vm.SuccessClass())
	}
	// Non-streamed latencies: 5 and 10…200 (21 values): p50 is the 11th, p95 the 20th.
	if !vm.HasLatency || vm.P50 != 100 || vm.P95 != 190 {
		t.Errorf("latency p50 %d p95 %d", vm.P50, vm.P95)
	}
	if !vm.HasTTFB || vm.TTFB50 != 40 || vm.TTFB95 != 90 {
		t.Errorf("ttfb p50 %d p95 %d", vm.TTFB50, vm.TTFB95)
	}
	if vm.TokensIn != 60 || vm.TokensOut != 20000 {
		t.Errorf("tokens %d / %d", vm.TokensIn, vm.TokensOut)
	}
	if !vm.Oldest.Equal(t0.Add(-time.Minute)) {
		t.Errorf("oldest %v", vm.Oldest)
	}

	empty := NewTrafficVM(nil, false)
	if empty.SuccessRateText() != "—" || empty.HasLatency || latencyOrDash(empty.HasLatency, empty.P50) != "—" || empty.SuccessClass() != "" {
		t.Errorf("empty window %+v", empty)
	}

	st := OverviewStatsVM{Now: t0.Add(time.Hour), Window: LookupOverviewWindow("24h"), Traffic: NewTrafficVM(entries, true)}
	if note := st.TrafficNote(); !strings.Contains(note, "newest 24 requests") || !strings.Contains(note, "not counted") {
		t.Errorf("truncated note %q", note)
	}
	st.Traffic.Truncated = false
	if note := st.TrafficNote(); note != "Last 24 hours, from the request log: 24 requests." {
		t.Errorf("note %q", note)
	}
	if LookupOverviewWindow("7d").Key != "1h" {
		t.Error("an unknown window is not the default")
	}
}

func TestResilienceTilesLinkToRuntimePanels(t *testing.T) {
	tiles := ResilienceTilesVM{OpenBreakers: 1, Locked: 2}.Tiles()
	if len(tiles) != 6 {
		t.Fatalf("%d tiles", len(tiles))
	}
	want := map[string]string{OverviewBreakersID: "/runtime#breakers", OverviewCoolingID: "/runtime#cooldowns",
		OverviewLockedID: "/runtime#model-cooldowns", OverviewLeasesID: "/runtime#leases", OverviewQueuedID: "/runtime#queues"}
	for _, tl := range tiles {
		if w, ok := want[tl.ID]; ok && tl.Href != w {
			t.Errorf("%s links to %s, want %s", tl.ID, tl.Href, w)
		}
	}
	if tiles[0].N != 1 || tiles[3].N != 2 {
		t.Errorf("tiles %+v", tiles)
	}
}

func TestConnTestResultText(t *testing.T) {
	cases := []struct {
		in   services.TestResult
		ok   bool
		want string
	}{
		{services.TestResult{OK: true, Status: 200, LatencyMs: 412, Models: []string{"a", "b"}}, true, "OK · 412 ms · 2 models"},
		{services.TestResult{OK: true, Status: 200, LatencyMs: 12_345}, true, "OK · 12.3 s"},
		{services.TestResult{Status: 401, LatencyMs: 230, Reason: "auth_error", Message: "401 Unauthorized — check the API key"}, false,
			"401 Unauthorized — check the API key · 230 ms"},
		{services.TestResult{LatencyMs: 3, Reason: "transient", Message: "could not connect to the upstream"}, false,
			"Failed — could not connect to the upstream · 3 ms"},
		{services.TestResult{Message: ""}, false, "Failed"},
	}
	for _, c := range cases {
		got := NewConnTestResultVM(c.in)
		if got.OK != c.ok || got.Text != c.want {
			t.Errorf("%+v → %+v, want %q", c.in, got, c.want)
		}
	}
	long := NewConnTestResultVM(services.TestResult{Status: 500, Message: strings.Repeat("x", 400)})
	if len([]rune(long.Text)) > 130 {
		t.Errorf("long message not shortened: %d runes", len([]rune(long.Text)))
	}
}

func TestComboTestResultsView(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cb := services.Combo{ID: "cb_1", Name: "demo"}
	results := []gateway.ComboTestResult{
		{Index: 0, Target: "fake/model-x", Outcome: gateway.ComboTestOK, OK: true, Status: 200, LatencyMs: ptr(int64(12)), ConnectionID: "c_1", ConnectionName: "fake-a", Message: "OK"},
		{Index: 1, Target: "fake/model-y", Outcome: gateway.ComboTestError, Status: 429, LatencyMs: ptr(int64(7)), ConnectionID: "c_2", Message: "429 Too Many Requests"},
		{Index: 2, Target: "fake/model-z", Outcome: gateway.ComboTestSkipped, SkipReason: "cooling", RetryAfterMs: ptr(int64(30_000))},
		{Index: 3, Target: "combo inner", Outcome: gateway.ComboTestSkipped, SkipReason: "combo_reference"},
	}
	vm := NewComboTestVM(cb, results, false, now)
	if vm.HeldBack != 1 || len(vm.Rows) != 4 {
		t.Fatalf("vm %+v", vm)
	}
	r := vm.Rows
	if r[0].Badge.Text != "OK" || r[0].Status != "200" || r[0].Latency != "12 ms" || r[0].Connection != "fake-a" || r[0].Position != 1 {
		t.Errorf("row 1 %+v", r[0])
	}
	if r[1].Badge.Text != "failed" || r[1].Connection != "c_2" || r[1].Detail != "429 Too Many Requests" {
		t.Errorf("row 2 %+v", r[1])
	}
	if r[2].Badge.Text != "skipped" || r[2].Detail != "Skipped: every connection is cooling down; eligible again in 30 s" || r[2].Status != "" {
		t.Errorf("row 3 %+v", r[2])
	}
	if r[3].Detail != "Skipped: a combo reference; test that combo on its own" {
		t.Errorf("row 4 %+v", r[3])
	}

	var b strings.Builder
	if err := ComboPanel(ComboPanelVM{ComboID: cb.ID, Test: &vm}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`data-testid="combo-results-cb_1"`, `data-testid="combo-test-force-cb_1"`, `hx-disabled-elt="#combo-test-force-cb_1"`,
		`name="force" value="1"`, "Test the 1 held-back target too", `data-dismiss`} {
		if !strings.Contains(html, want) {
			t.Errorf("panel lacks %s", want)
		}
	}
	forced := NewComboTestVM(cb, results, true, now)
	b.Reset()
	if err := ComboPanel(ComboPanelVM{ComboID: cb.ID, Test: &forced}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "combo-test-force") || !strings.Contains(b.String(), "held-back targets included") {
		t.Error("a forced test still offers to force")
	}
}

func TestReadinessChips(t *testing.T) {
	list := CombosListVM{Rows: []ComboRowVM{{ID: "cb_1", Name: "demo", Targets: []TargetChipVM{{Text: "fake/a (any connection)"}, {Text: "fake/b (x)"}, {Text: "fake/c (y)", Disabled: true}}}}}
	list = list.WithReadiness(map[string][]ReadinessVM{"cb_1": {
		{State: ReadyState, Text: "ready"},
		{State: CoolingState, Text: "all connections cooling", RetryIn: &CountdownVM{Ms: 5000, ISO: "2026-03-01T10:00:05.000Z"}},
		{State: DisabledState, Text: "switched off"},
	}})
	if n := list.Rows[0].ReadyCount(); n != 1 {
		t.Errorf("ready count %d", n)
	}
	var b strings.Builder
	if err := ComboTargetsCell(list.Rows[0], true).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`id="combo-chips-cb_1"`, `hx-swap-oob="true"`, `data-testid="combo-dot-cb_1-0"`, `data-readiness="ready"`, `dot dot--ready`,
		`data-readiness="cooling"`, `dot dot--skipped`, "all connections cooling", `data-remaining-ms="5000"`, `data-readiness="disabled"`, "switched off"} {
		if !strings.Contains(html, want) {
			t.Errorf("targets cell lacks %s:\n%s", want, html)
		}
	}
	if (ReadinessVM{State: UnavailableState}).DotClass() != "dot--down" || (ReadinessVM{State: DisabledState}).DotClass() != "" {
		t.Error("dot classes")
	}
}

func TestSettingsAndFlagFormsDisableTheirButtonsByID(t *testing.T) {
	card := SettingsCardVM{Def: SettingsCardDef{Section: "requestQueue"}}
	if got := card.DisabledWhileSaving(); got != "#settings-save-requestQueue" {
		t.Errorf("card: %q", got)
	}
	card.Rules = &ErrorRulesVM{}
	if got := card.DisabledWhileSaving(); got != "#settings-save-requestQueue, #settings-submit-requestQueue" {
		t.Errorf("rules card: %q", got)
	}
	if got := (FlagRowVM{Key: "modelLockout"}).DisabledWhileSaving(); got != "#flag-save-modelLockout" {
		t.Errorf("flag: %q", got)
	}
}
