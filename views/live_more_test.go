package views

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/quota"
	"switchyard/services/stats"
)

// renderDoc renders a component and parses it.
func renderDoc(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	return parseHTML(t, c, "", "")
}

// renderCell renders a table cell component inside a row, where it parses.
func renderCell(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	return parseHTML(t, c, "<table><tbody><tr>", "</tr></tbody></table>")
}

func parseHTML(t *testing.T, c templ.Component, before, after string) *goquery.Document {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(before + b.String() + after))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// squash is the text of s with its white space collapsed.
func squash(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

// cells is the text of each cell of a table row, joined by " | ".
func cells(row *goquery.Selection) string {
	var out []string
	row.Find("th, td").Each(func(_ int, c *goquery.Selection) { out = append(out, squash(c)) })
	return strings.Join(out, " | ")
}

func TestRowIDCellKinds(t *testing.T) {
	cases := map[string]string{
		RowID(RowConn, "c_1"):         "conn-c_1",
		RowID(RowConnSlot, "c_1"):     "conn-slot-c_1",
		RowID(RowConnStatus, "c_1"):   "conn-c_1-status",
		RowID(RowConnCooldown, "c_1"): "conn-c_1-cooldown",
		RowID(RowConnError, "c_1"):    "conn-c_1-error",
		RowID(RowConnConc, "c_1"):     "conn-c_1-concurrency",
		RowID(RowConnQuota, "c_1"):    "conn-c_1-quota",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestQuotaWindowsCell(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	seen := now.Add(-3 * time.Minute)
	v := quota.View{
		FiveHour: quota.WindowView{Known: true, Used: 0.42, ResetAt: now.Add(20 * time.Minute), ObservedAt: seen},
		Daily:    quota.WindowView{Known: true, Used: 0, ResetAt: now.Add(-time.Minute), ObservedAt: seen}, // reset passed: reads unused
		Weekly:   quota.WindowView{Known: true, Used: 1, ResetAt: now.Add(72 * time.Hour), ObservedAt: seen},
	}
	ws := NewQuotaWindowsVM(v, now)
	if len(ws) != 4 || ws[0].Key != "5h" || ws[3].Key != "monthly" {
		t.Fatalf("windows %+v", ws)
	}
	if w := ws[0]; !w.Known || w.UsedText != "42.0 %" || w.Level != "" || w.Resets == nil || w.Resets.Ms != 1_200_000 {
		t.Errorf("5h %+v", w)
	}
	if w := ws[1]; !w.Known || w.UsedText != "0.0 %" || w.Resets != nil || w.ResetText != "reset passed" {
		t.Errorf("daily %+v", w)
	}
	if w := ws[2]; w.Level != "danger" || w.UsedText != "100.0 %" {
		t.Errorf("weekly %+v", w)
	}
	if w := ws[3]; w.Known || w.UsedText != "" {
		t.Errorf("monthly %+v", w)
	}

	// The minute window shows only when known, first, with its counts.
	v.Minute = quota.WindowView{Known: true, Used: 0.04, Limit: 500, Remaining: 480, ObservedAt: seen}
	v.Weekly.Used = 0.85
	ws = NewQuotaWindowsVM(v, now)
	if len(ws) != 5 || ws[0].Key != "minute" || ws[0].Left != "480 of 500 left" || ws[0].ResetText != "reset unknown" {
		t.Fatalf("with minute %+v", ws)
	}
	if ws[3].Level != "warning" {
		t.Errorf("weekly at 85 %%: level %q", ws[3].Level)
	}

	row := NewConnectionRowVM(services.Connection{ID: "c_1", Name: "main", Enabled: true}, now)
	if len(row.Quota) != 4 {
		t.Fatalf("a row without live data: %+v", row.Quota)
	}
	unknownSig := row.QuotaSig()
	row = row.WithQuota(v, now)
	doc := renderCell(t, connQuotaCell(row, true))
	cell := doc.Find("td#conn-c_1-quota")
	if cell.Length() != 1 || cell.AttrOr("hx-swap-oob", "") != "true" || cell.AttrOr("data-label", "") != "Quota windows" {
		t.Fatalf("cell %v", cell.Nodes)
	}
	five := cell.Find(`[data-testid="conn-c_1-quota-5h"]`)
	if got := squash(five); got != "5 h 42.0 % used, resets in 20 m 0 s" {
		t.Errorf("5h line %q", got)
	}
	if five.Find(`time[data-remaining-ms="1200000"]`).Length() != 1 {
		t.Errorf("5h line lacks its countdown")
	}
	if got := five.AttrOr("title", ""); got != "Observed 2026-03-01 09:57:00 UTC" {
		t.Errorf("5h title %q", got)
	}
	if got := squash(cell.Find(`[data-testid="conn-c_1-quota-minute"]`)); got != "Minute 4.0 % used, reset unknown and 480 of 500 left" {
		t.Errorf("minute line %q", got)
	}
	if got := squash(cell.Find(`[data-testid="conn-c_1-quota-monthly"]`)); got != "Monthly unknown" {
		t.Errorf("monthly line %q", got)
	}
	sig := cell.Find(`input[data-quota-sig][name="qsig"]`).AttrOr("value", "")
	if sig != "conn-c_1-quota="+row.QuotaSig() || row.QuotaSig() == unknownSig || cell.Find("[data-live-sig]").Length() != 0 {
		t.Errorf("live signature %q", sig)
	}
	// The signature ignores the ticking remaining time, not a new reading.
	later := row.WithQuota(v, now.Add(10*time.Second))
	if later.QuotaSig() != row.QuotaSig() {
		t.Error("the signature changed with the remaining time alone")
	}
	v.FiveHour.Used = 0.5
	if row.WithQuota(v, now).QuotaSig() == row.QuotaSig() {
		t.Error("the signature missed a new reading")
	}

	// The quota poll sends the cell when its signature differs, and the
	// status poll never does.
	list := ConnectionsListVM{Groups: []ConnectionGroupVM{{ProviderID: "p", Rows: []ConnectionRowVM{row}}}}
	if got := ChangedQuotaCells(list, nil); len(got) != 1 || got[0].ID != "c_1" {
		t.Errorf("a first poll sends %+v", got)
	}
	if got := ChangedQuotaCells(list, map[string]string{"conn-c_1-quota": row.QuotaSig()}); len(got) != 0 {
		t.Errorf("an unchanged cell was sent: %+v", got)
	}
	if NewConnectionStatusesVM(list, nil).Send["conn-c_1-quota"] {
		t.Error("the status poll sends the quota cell")
	}
	doc = renderDoc(t, ConnectionQuotaWindows([]ConnectionRowVM{row}))
	if doc.Find(`template`).Length() != 1 {
		t.Errorf("the poll answer does not wrap the cell in a template")
	}
}

func TestTargetMetrics(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	if got := NewTargetMetricsVM(gateway.TargetStats{}); got != UnknownTargetMetrics {
		t.Errorf("no samples %+v", got)
	}
	got := NewTargetMetricsVM(gateway.TargetStats{Samples: 3, SuccessRate: f(2.0 / 3)})
	if got.Samples != "3" || got.SuccessRate != "66.7 %" || got.AvgLatency != "—" || got.P95Latency != "—" {
		t.Errorf("failures only %+v", got)
	}
	got = NewTargetMetricsVM(gateway.TargetStats{Samples: 1200, SuccessRate: f(1), AvgLatencyMs: f(411.6), P95LatencyMs: f(12_345)})
	if got.Samples != "1,200" || got.SuccessRate != "100.0 %" || got.AvgLatency != "412 ms" || got.P95Latency != "12.3 s" {
		t.Errorf("known %+v", got)
	}

	list := CombosListVM{Rows: []ComboRowVM{{ID: "cb_1", Targets: []TargetChipVM{{Text: "fake/a (any connection)", Metrics: UnknownTargetMetrics},
		{Text: "combo inner", Metrics: UnknownTargetMetrics}}}}}
	list = list.WithMetrics(map[string][]TargetMetricsVM{"cb_1": {got}})
	doc := renderCell(t, ComboTargetsCell(list.Rows[0], true))
	if s := squash(doc.Find(`[data-testid="combo-metrics-cb_1-0"]`)); s != "samples 1,200 success 100.0 % avg latency 412 ms p95 latency 12.3 s" {
		t.Errorf("target 1 metrics %q", s)
	}
	if s := squash(doc.Find(`[data-testid="combo-metrics-cb_1-1"]`)); s != "samples 0 success — avg latency — p95 latency —" {
		t.Errorf("target 2 metrics %q", s)
	}
	if doc.Find(`[data-testid="combo-dot-cb_1-0"] dl.target-metrics dt`).Length() != 4 {
		t.Error("the metrics are not a description list inside the chip")
	}
}

func TestTrafficChart(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 30, 20, 0, time.UTC)
	minute := func(ago time.Duration) time.Time { return now.Add(-ago).Truncate(time.Minute) }
	// The summary's minutes: 10:30 with two successes and a failure, 10:25
	// with a success and a client abort, and one outside the hour.
	sum := stats.Summary{PerMinute: []stats.Point{
		{T: minute(2 * time.Hour), OK: 1},
		{T: minute(5 * time.Minute), OK: 1, Aborted: 1},
		{T: minute(0), OK: 2, Failed: 1},
	}}
	entries := sum
	c := NewTrafficChartVM(entries, LookupOverviewWindow("1h"), now)
	if len(c.Buckets) != 60 || c.Bucket != time.Minute || c.Title() != "Requests per minute" {
		t.Fatalf("buckets %d of %s", len(c.Buckets), c.Bucket)
	}
	last := c.Buckets[59]
	if !last.Start.Equal(time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)) || last.OK != 2 || last.Fail != 1 {
		t.Errorf("last bucket %+v", last)
	}
	if c.Successes != 3 || c.Failures != 1 || c.Aborted != 1 || c.Max != 3 {
		t.Errorf("totals %+v", c)
	}
	if got := c.Desc(); got != "4 requests in the last hour: 3 succeeded, 1 failed. Busiest minute: 10:30 UTC with 3. 1 client abort is not shown." {
		t.Errorf("desc %q", got)
	}
	if rows := c.Rows(); len(rows) != 2 || c.BucketLabel(rows[0]) != "10:25 UTC" {
		t.Errorf("rows %+v", rows)
	}
	bars := c.Bars()
	if len(bars) != 2 || !bars[1].HasOK || !bars[1].HasFail || bars[0].HasFail {
		t.Fatalf("bars %+v", bars)
	}
	// Scale 0–4: the last bar's 2 successes fill half the plot, its failure a quarter on top.
	if bars[1].OKH != "75" || bars[1].OKY != "83" || bars[1].FailH != "37.5" || bars[1].FailY != "45.5" {
		t.Errorf("last bar %+v", bars[1])
	}
	if ticks := c.YTicks(); len(ticks) != 3 || ticks[1].Label != "2" || ticks[2].Label != "4" || ticks[2].Pos != "8" {
		t.Errorf("y ticks %+v", ticks)
	}
	if x := c.XTicks(); x[0].Label != "−1 h" || x[1].Label != "−30 min" || x[2].Label != "now" {
		t.Errorf("x ticks %+v", x)
	}

	day := NewTrafficChartVM(entries, LookupOverviewWindow("24h"), now)
	if len(day.Buckets) != 96 || day.Title() != "Requests per 15 minutes" || day.Successes != 4 || day.XTicks()[0].Label != "−1 day" {
		t.Errorf("24 h chart: %d buckets, %q, %d successes", len(day.Buckets), day.Title(), day.Successes)
	}

	doc := renderDoc(t, trafficChart(c))
	svg := doc.Find(`[data-testid="overview-chart"] svg[role="img"]`)
	if svg.Length() != 1 || svg.AttrOr("aria-labelledby", "") != "traffic-chart-title traffic-chart-desc" {
		t.Fatalf("svg %v", svg.Nodes)
	}
	if svg.Find("title").Text() != "Requests per minute" || !strings.HasPrefix(svg.Find("desc").Text(), "4 requests") {
		t.Error("svg title or desc")
	}
	if svg.Find("rect.chart__ok").Length() != 2 || svg.Find("rect.chart__fail").Length() != 1 {
		t.Error("bars not drawn")
	}
	table := doc.Find(`.visually-hidden > table[data-testid="overview-chart-data"]`)
	if got := cells(table.Find("tbody tr").Last()); got != "10:30 UTC | 2 | 1" {
		t.Errorf("data table last row %q", got)
	}
	if doc.Find("[style]").Length() != 0 {
		t.Error("a style attribute in the chart")
	}

	empty := renderDoc(t, trafficChart(NewTrafficChartVM(stats.Summary{}, LookupOverviewWindow("1h"), now)))
	if empty.Find("svg").Length() != 0 || squash(empty.Find(`[data-testid="overview-chart-empty"]`)) != "No requests in the last hour." {
		t.Error("an empty window draws a chart")
	}
}

func TestFailingTargets(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	list := []stats.FailingTarget{
		{Provider: "fake", Model: "model-x", ConnectionID: "c_b", Failures: 3,
			Last: stats.Failure{At: now.Add(-2 * time.Minute), Seq: 1, Status: 429, Reason: "rate_limit", Detail: "Slow down"}},
		{Provider: "other", Model: "m", ConnectionID: "c_gone", Failures: 1,
			Last: stats.Failure{At: now.Add(-3 * time.Minute), Status: 502, Code: "upstream_error"}},
	}
	for i := range 6 {
		list = append(list, stats.FailingTarget{Provider: "p" + string(rune('a'+i)), Model: "m", ConnectionID: "c_a", Failures: 1,
			Last: stats.Failure{At: now.Add(-time.Duration(10+i) * time.Minute), Reason: "transient", Detail: strings.Repeat("x", 200)}})
	}
	names := map[string]string{"c_a": "fake-a", "c_b": "fake-b"}
	got := NewFailingTargetsVM(list, names, now)
	if len(got) != 5 {
		t.Fatalf("%d rows, want the top 5", len(got))
	}
	top := got[0]
	if top.Target() != "fake/model-x" || top.Connection != "fake-b" || top.Failures != 3 || top.LastError != "429 rate limit" ||
		top.LastDetail != "Slow down" || top.Last == nil || top.Last.Rel != "2 min ago" {
		t.Errorf("top %+v", top)
	}
	if top.LogsHref != "/logs?connectionId=c_b&provider=fake&range=1h" {
		t.Errorf("logs link %q", top.LogsHref)
	}
	if g := got[1]; g.Target() != "other/m" || g.Connection != "c_gone" || g.Failures != 1 || g.LastError != "502 upstream_error" {
		t.Errorf("second %+v", g)
	}
	if g := got[2]; g.LastError != "transient" || len([]rune(g.LastDetail)) != 120 {
		t.Errorf("third %+v", g)
	}

	doc := renderDoc(t, failingTargets(got))
	row := doc.Find(`[data-testid="overview-failing-1"]`)
	if s := cells(row); s != "fake/model-x | fake-b | 3 | 429 rate limit Slow down 2 min ago | View logs of fake/model-x on fake-b, last hour" {
		t.Errorf("row 1 %q", s)
	}
	if href := row.Find("a").AttrOr("href", ""); href != "/logs?connectionId=c_b&provider=fake&range=1h" {
		t.Errorf("row link %q", href)
	}
	if doc.Find(`th[scope="col"]`).Length() != 5 || doc.Find("caption").Length() != 1 {
		t.Error("table headers or caption")
	}
	none := renderDoc(t, failingTargets(nil))
	if squash(none.Find(`[data-testid="overview-failing-empty"]`)) != "No dispatch failed in the last hour." {
		t.Error("empty state")
	}
}
