package views

import (
	"context"
	"strings"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/stats"
)

func ptr[T any](v T) *T { return &v }

// The tiles word a summary of the buckets (whose counting rules are
// services/stats' tests): the success rate without client aborts, its
// warning styles, dashes without data, and what the figures cover.
func TestTrafficTilesFromSummary(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	sum := stats.Summary{Window: "24h", Span: 24 * time.Hour, Since: t0.Add(-24 * time.Hour), Requests: 24, Succeeded: 21, Failed: 2, Aborted: 1,
		Failovers: 1, TokensIn: 60, TokensOut: 20000, Latency: stats.Percentiles{Count: 21, P50: 100, P95: 184},
		TTFB: stats.Percentiles{Count: 2, P50: 40, P95: 90}}
	vm := NewTrafficVM(sum)
	if vm.Requests != 24 || vm.Successes != 21 || vm.Aborted != 1 || vm.Failovers != 1 || vm.TokensIn != 60 || vm.TokensOut != 20000 {
		t.Fatalf("counts %+v", vm)
	}
	if got := vm.SuccessRateText(); got != "91.3 %" { // 21 of 23
		t.Errorf("success rate %q", got)
	}
	if vm.SuccessClass() != "tile--warning" {
		t.Errorf("success class %q", vm.SuccessClass())
	}
	if !vm.HasLatency || vm.P50 != 100 || vm.P95 != 184 || !vm.HasTTFB || vm.TTFB50 != 40 || vm.TTFB95 != 90 {
		t.Errorf("percentiles %+v", vm)
	}
	empty := NewTrafficVM(stats.Summary{})
	if empty.SuccessRateText() != "—" || empty.HasLatency || latencyOrDash(empty.HasLatency, empty.P50) != "—" || empty.SuccessClass() != "" {
		t.Errorf("empty window %+v", empty)
	}
	st := OverviewStatsVM{Now: t0, Window: LookupOverviewWindow("24h"), Traffic: vm}
	if note := st.TrafficNote(); note != "Last 24 hours: 24 requests." {
		t.Errorf("note %q", note)
	}
	sum.SinceStart, sum.Since = true, t0.Add(-14*time.Minute)
	st.Traffic = NewTrafficVM(sum)
	if note := st.TrafficNote(); note != "Last 24 hours, since start (14 min ago): 24 requests." {
		t.Errorf("since-start note %q", note)
	}
	if LookupOverviewWindow("7d").Key != "1h" {
		t.Error("an unknown window is not the default")
	}
}

// Cost figures are always estimates: "—" without a price, and the tables
// name keys by name and prefix, connections by name.
func TestCostPanel(t *testing.T) {
	sum := stats.Summary{Cost: services.Cost{NanoUSD: 12_345_000, Known: true}, Unpriced: 2,
		ByKey:        []stats.Usage{{ID: "k_1", Name: "agent", Prefix: "sk-sy-Ab12Cd", Requests: 3, TokensIn: 1200, TokensOut: 310, Cost: services.Cost{NanoUSD: 12_345_000, Known: true}}},
		ByConnection: []stats.Usage{{ID: "c_1", Provider: "fake", Requests: 3, Unpriced: 2}},
		ByModel:      []stats.Usage{{ID: "fake/m1", Requests: 1, Cost: services.Cost{NanoUSD: 5, Known: true}}}}
	vm := NewCostVM(sum, map[string]string{"c_1": "fake-a"})
	if vm.Total != "$0.012" || costTileValue(vm) != "≈ $0.012" || vm.Unpriced != 2 {
		t.Fatalf("total %+v", vm)
	}
	if r := vm.ByKey[0]; r.Label != "agent" || r.Sub != "sk-sy-Ab12Cd…" || r.Tokens != "1,200 / 310" || r.Cost != "$0.012" {
		t.Errorf("by key %+v", r)
	}
	if r := vm.ByConn[0]; r.Label != "fake-a" || r.Sub != "fake" || r.Cost != "—" {
		t.Errorf("by connection %+v", r)
	}
	if costTileValue(NewCostVM(stats.Summary{}, nil)) != "—" {
		t.Error("an unpriced window shows a cost")
	}
	doc := renderDoc(t, costPanel(vm, "Last hour"))
	if got := cells(doc.Find(`[data-testid="overview-cost-by-key"] tbody tr`)); got != "agent sk-sy-Ab12Cd… | 3 | 1,200 / 310 | ≈ $0.012" {
		t.Errorf("key row %q", got)
	}
	if got := squash(doc.Find(`[data-testid="overview-cost-by-connection"] tbody tr`)); !strings.Contains(got, "no price") {
		t.Errorf("connection row %q", got)
	}
	if !strings.Contains(squash(doc.Selection), "2 requests have no known price") || !strings.Contains(squash(doc.Selection), "not a bill") {
		t.Errorf("panel %q", squash(doc.Selection))
	}
	for c, want := range map[services.Cost]string{{}: "—", {Known: true}: "$0", {NanoUSD: 450_000, Known: true}: "$0.00045",
		{NanoUSD: 1_234_000_000, Known: true}: "$1.23", {NanoUSD: 1_234_567_000_000, Known: true}: "$1,235", {NanoUSD: 1, Known: true}: "< $0.000001"} {
		if got := CostText(c); got != want {
			t.Errorf("CostText(%+v) = %q, want %q", c, got, want)
		}
	}
}

func TestResilienceTilesLinkToRuntimePanels(t *testing.T) {
	tiles := ResilienceTilesVM{OpenBreakers: 1, Locked: 2, Waiting: 3}.Tiles()
	if len(tiles) != 7 {
		t.Fatalf("%d tiles", len(tiles))
	}
	want := map[string]string{OverviewBreakersID: "/runtime#breakers", OverviewCoolingID: "/runtime#cooldowns",
		OverviewLockedID: "/runtime#model-cooldowns", OverviewLeasesID: "/runtime#leases", OverviewQueuedID: "/runtime#queues",
		OverviewWaitingID: "/runtime#waiting"}
	for _, tl := range tiles {
		if w, ok := want[tl.ID]; ok && tl.Href != w {
			t.Errorf("%s links to %s, want %s", tl.ID, tl.Href, w)
		}
	}
	if tiles[0].N != 1 || tiles[3].N != 2 || tiles[6].N != 3 || tiles[6].Label != "Waiting now" {
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
