package quota

import (
	"math"
	"net/http"
	"testing"
	"time"

	"switchyard/services/routing"
)

// TestQuotaWindowSpec reproduces the quota-window acceptance cases of
// 30-routing §12, one row per case.
func TestQuotaWindowSpec(t *testing.T) {
	// T is the receipt time of every case's first response; the epoch
	// resets of case 2 lie after it.
	T := time.Unix(1790200000, 0).UTC()
	type obsAt struct {
		at time.Duration // after T
		h  http.Header
	}
	// want is what the connection looks like at T + at. NaN fields are not
	// checked.
	type want struct {
		at         time.Duration
		windows    map[string]WindowView // checked: Known, Used, ResetAt
		gated      bool
		until      time.Time
		headroom   float64
		resetAware float64
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		obs  []obsAt
		want []want
	}{
		{
			name: "1 openai minute window: learned, never gates or reorders",
			obs: []obsAt{{0, hdr("x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "0",
				"x-ratelimit-reset-requests", "6m0s")}},
			want: []want{{at: 0, windows: map[string]WindowView{Minute: {Known: true, Used: 1, ResetAt: T.Add(360 * time.Second)}},
				headroom: 1, resetAware: 0.5}},
		},
		{
			name: "2 anthropic unified 5h and 7d, allowed",
			obs: []obsAt{{0, hdr("anthropic-ratelimit-unified-5h-utilization", "0.42", "anthropic-ratelimit-unified-5h-reset", "1790256000",
				"anthropic-ratelimit-unified-7d-utilization", "0.18", "anthropic-ratelimit-unified-7d-reset", "1790730000",
				"anthropic-ratelimit-unified-status", "allowed")}},
			want: []want{{at: 0, windows: map[string]WindowView{
				FiveH:  {Known: true, Used: 0.42, ResetAt: time.Unix(1790256000, 0).UTC()},
				Weekly: {Known: true, Used: 0.18, ResetAt: time.Unix(1790730000, 0).UTC()},
			}, headroom: 0.58, resetAware: nan}},
		},
		{
			name: "3 codex 5h exhausted: gated 1200 s, then u = 0",
			obs: []obsAt{{0, hdr("x-codex-primary-used-percent", "100", "x-codex-primary-window-minutes", "300",
				"x-codex-primary-reset-after-seconds", "1200", "x-codex-secondary-used-percent", "40",
				"x-codex-secondary-window-minutes", "10080")}},
			want: []want{
				{at: 0, windows: map[string]WindowView{FiveH: {Known: true, Used: 1, ResetAt: T.Add(1200 * time.Second)},
					Weekly: {Known: true, Used: 0.4}}, gated: true, until: T.Add(1200 * time.Second), headroom: 0, resetAware: nan},
				{at: 1199 * time.Second, gated: true, until: T.Add(1200 * time.Second), headroom: 0, resetAware: nan},
				{at: 1201 * time.Second, windows: map[string]WindowView{FiveH: {Known: true, Used: 0, ResetAt: T.Add(1200 * time.Second)}},
					headroom: 0.6, resetAware: nan},
			},
		},
		{
			name: "4 unified 5h rejected, lifted by a newer allowed response",
			obs: []obsAt{
				{0, hdr("anthropic-ratelimit-unified-5h-status", "rejected", "anthropic-ratelimit-unified-5h-utilization", "0.97",
					"anthropic-ratelimit-unified-5h-reset", epoch(T.Add(2*time.Hour)))},
				{time.Minute, hdr("anthropic-ratelimit-unified-5h-status", "allowed", "anthropic-ratelimit-unified-5h-utilization", "0.50",
					"anthropic-ratelimit-unified-5h-reset", epoch(T.Add(2*time.Hour)))},
			},
			want: []want{
				{at: 0, windows: map[string]WindowView{FiveH: {Known: true, Used: 1, ResetAt: T.Add(2 * time.Hour)}},
					gated: true, until: T.Add(2 * time.Hour), headroom: 0, resetAware: nan},
				{at: time.Minute, windows: map[string]WindowView{FiveH: {Known: true, Used: 0.5, ResetAt: T.Add(2 * time.Hour)}},
					headroom: 0.5, resetAware: nan},
			},
		},
		{
			name: "5 weekly counts for quotaMaxStaleMs after observation",
			obs: []obsAt{{0, hdr("anthropic-ratelimit-unified-7d-utilization", "0.50",
				"anthropic-ratelimit-unified-7d-reset", epoch(T.Add(72*time.Hour)))}},
			want: []want{
				{at: 23 * time.Hour, windows: map[string]WindowView{Weekly: {Known: true, Used: 0.5, ResetAt: T.Add(72 * time.Hour)}},
					headroom: 0.5, resetAware: nan},
				{at: 25 * time.Hour, windows: map[string]WindowView{Weekly: {}}, headroom: 1, resetAware: 0.5},
			},
		},
		{
			name: "6 never observed: eligible, neutral values",
			want: []want{{at: 0, windows: map[string]WindowView{FiveH: {}, Weekly: {}, Minute: {}}, headroom: 1, resetAware: 0.5}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Options{})
			pending := tc.obs
			for _, w := range tc.want {
				for len(pending) > 0 && pending[0].at <= w.at {
					tr.Observe("c1", pending[0].h, T.Add(pending[0].at))
					pending = pending[1:]
				}
				now := T.Add(w.at)
				v := tr.Windows("c1", now)
				byName := map[string]WindowView{Minute: v.Minute, FiveH: v.FiveHour, Daily: v.Daily, Weekly: v.Weekly, Monthly: v.Monthly}
				for name, ww := range w.windows {
					g := byName[name]
					if g.Known != ww.Known || math.Abs(g.Used-ww.Used) > 1e-9 || !g.ResetAt.Equal(ww.ResetAt) {
						t.Errorf("T+%v %s = {known %v u %v reset %v}, want {known %v u %v reset %v}",
							w.at, name, g.Known, g.Used, g.ResetAt, ww.Known, ww.Used, ww.ResetAt)
					}
				}
				gated, until := tr.Gate("c1", 0, now)
				if gated != w.gated || !until.Equal(w.until) {
					t.Errorf("T+%v gate = %v until %v, want %v until %v", w.at, gated, until, w.gated, w.until)
				}
				rv := tr.RoutingView("c1", now)
				if h := routing.HeadroomOf(rv); math.Abs(h-w.headroom) > 1e-9 {
					t.Errorf("T+%v headroom = %v, want %v", w.at, h, w.headroom)
				}
				if !math.IsNaN(w.resetAware) {
					if s := routing.ResetAwareScore(rv, now, nil); s != w.resetAware {
						t.Errorf("T+%v reset-aware = %v, want %v", w.at, s, w.resetAware)
					}
				}
			}
		})
	}
}
