package views

import (
	"strconv"
	"time"

	"switchyard/services/human"
	"switchyard/services/stats"
)

// Overview traffic windows (50-dashboard §6.3): the switch offers these, the
// first is the default.
var OverviewWindows = []OverviewWindow{
	{Key: "1h", Label: "Last hour", Span: time.Hour},
	{Key: "24h", Label: "Last 24 hours", Span: 24 * time.Hour},
}

// OverviewWindow is one choice of the window switch.
type OverviewWindow struct {
	Key   string
	Label string
	Span  time.Duration
}

// LookupOverviewWindow finds a window by key; anything unknown is the default.
func LookupOverviewWindow(key string) OverviewWindow {
	for _, w := range OverviewWindows {
		if w.Key == key {
			return w
		}
	}
	return OverviewWindows[0]
}

// OverviewStatsVM is the polled region of the Overview: the window switch,
// the traffic tiles and chart, the top failing targets and the resilience
// counts.
type OverviewStatsVM struct {
	Now        time.Time
	Window     OverviewWindow
	Traffic    TrafficVM
	Chart      TrafficChartVM
	Failing    []FailingTargetVM // top failing targets of the last hour
	Resilience ResilienceTilesVM
	Cost       CostVM
}

// WindowURL is the stats fragment of a window (polled and switched to).
func WindowURL(key string) string { return "/overview/stats?window=" + key }

// TrafficVM is the traffic of the window, from the in-memory buckets
// (services/stats). Success means a 2xx final status that, for a stream,
// ended without an in-band error; client aborts are counted apart and left
// out of the success rate. Latency percentiles are over non-streamed
// requests (total time), time to first byte over streamed ones.
type TrafficVM struct {
	Requests  int
	Successes int
	Aborted   int
	Failovers int
	TokensIn  int64
	TokensOut int64
	P50, P95  int64 // ms; valid when HasLatency
	TTFB50    int64
	TTFB95    int64

	HasLatency bool
	HasTTFB    bool
	// Latency and TTFB compare the p95s with the upstreams' own (stats.Judgement).
	LatencyJudged, TTFBJudged stats.Judgement
	// SinceStart: the process is younger than the window; the figures
	// start at Since.
	SinceStart bool
	Since      time.Time
}

// NewTrafficVM reads the tiles from a summary.
func NewTrafficVM(s stats.Summary) TrafficVM {
	return TrafficVM{Requests: s.Requests, Successes: s.Succeeded, Aborted: s.Aborted, Failovers: s.Failovers,
		TokensIn: s.TokensIn, TokensOut: s.TokensOut,
		HasLatency: s.Latency.Count > 0, P50: s.Latency.P50, P95: s.Latency.P95,
		HasTTFB: s.TTFB.Count > 0, TTFB50: s.TTFB.P50, TTFB95: s.TTFB.P95,
		LatencyJudged: s.LatencyJudgement, TTFBJudged: s.TTFBJudgement,
		SinceStart: s.SinceStart, Since: s.Since}
}

// SuccessRateText is the success rate with one decimal, "—" with no request
// that counts.
func (t TrafficVM) SuccessRateText() string {
	n := t.Requests - t.Aborted
	if n <= 0 {
		return "—"
	}
	return strconv.FormatFloat(float64(t.Successes)*100/float64(n), 'f', 1, 64) + " %"
}

// SuccessClass warns when fewer than 95 % of the counted requests succeeded.
func (t TrafficVM) SuccessClass() string {
	n := t.Requests - t.Aborted
	switch {
	case n <= 0:
		return ""
	case t.Successes*100 < n*80:
		return "tile--danger"
	case t.Successes*100 < n*95:
		return "tile--warning"
	}
	return ""
}

// P95Meta is the p95 tile's note: what it is over, and once requests were
// judged the upstreams' own p95 and the share of the time spent waiting
// ("non-streamed, total time · upstream 520 ms · 85 % waiting").
func (t TrafficVM) P95Meta(stream bool) string {
	base, j := "non-streamed, total time", t.LatencyJudged
	if stream {
		base, j = "streams", t.TTFBJudged
	}
	if j.Upstream.Count == 0 {
		return base
	}
	note := base + " · upstream " + human.Duration(millis(j.Upstream.P95), human.Latency) + " · " + strconv.FormatFloat(j.WaitShare*100, 'f', 0, 64) + " % waiting"
	if j.Flagged {
		note = "far above the upstream: " + note
	}
	return note
}

// P95Class warns on a p95 far above the upstreams' own (stats.Judgement).
func (t TrafficVM) P95Class(stream bool) string {
	j := t.LatencyJudged
	if stream {
		j = t.TTFBJudged
	}
	if j.Flagged {
		return "tile--warning"
	}
	return ""
}

// latencyOrDash renders a percentile, or "—" without data.
func latencyOrDash(ok bool, ms int64) string {
	if !ok {
		return "—"
	}
	return human.Duration(millis(ms), human.Latency)
}

// ResilienceTilesVM is "Resilience at a glance": each count links to its
// Runtime panel and uses the warning style when not zero.
type ResilienceTilesVM struct {
	OpenBreakers int
	Cooling      int
	Terminal     int
	Locked       int
	Leases       int
	Queued       int
	// Waiting counts the requests waiting inside the gateway now (cooldown,
	// slot and queue waits): not zero while anyone waits.
	Waiting int
}

// ResilienceTile is one count of ResilienceTilesVM.
type ResilienceTile struct {
	ID    string
	Label string
	N     int
	Href  string
}

// Tiles lists the counts in display order.
func (r ResilienceTilesVM) Tiles() []ResilienceTile {
	return []ResilienceTile{
		{OverviewBreakersID, "Open breakers", r.OpenBreakers, "/runtime#" + BreakersPanelID},
		{OverviewCoolingID, "Cooling connections", r.Cooling, "/runtime#" + CooldownsPanelID},
		{OverviewTerminalID, "Terminal connections", r.Terminal, "/runtime#" + CooldownsPanelID},
		{OverviewLockedID, "Locked models", r.Locked, "/runtime#" + ModelCooldownsCardID},
		{OverviewLeasesID, "Active leases", r.Leases, "/runtime#" + LeasesPanelID},
		{OverviewQueuedID, "Queued requests", r.Queued, "/runtime#" + QueuesPanelID},
		{OverviewWaitingID, "Waiting now", r.Waiting, "/runtime#" + WaitingPanelID},
	}
}

// trafficNote says what the figures cover.
func (vm OverviewStatsVM) trafficNote(now time.Time) string {
	t := vm.Traffic
	count := human.Plural(t.Requests, "request", "requests") + "."
	if t.SinceStart {
		return vm.Window.Label + ", since start (" + Ago(t.Since, now) + "): " + count
	}
	return vm.Window.Label + ": " + count
}

// TrafficNote is trafficNote at the time the figures were read.
func (vm OverviewStatsVM) TrafficNote() string { return vm.trafficNote(vm.Now) }
