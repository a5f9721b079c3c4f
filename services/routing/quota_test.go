package routing

import (
	"math"
	"slices"
	"testing"
	"time"

	"switchyard/services"
)

// T is the "now" of the quota cases of 30-routing §10.10–10.12.
var T = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// win is a known window with used fraction u resetting d after T (d = 0:
// reset unknown).
func win(u float64, d time.Duration) QuotaWindow {
	w := QuotaWindow{Known: true, Used: u}
	if d != 0 {
		w.ResetAt = T.Add(d)
	}
	return w
}

const (
	hour = time.Hour
	day  = 24 * time.Hour
)

// specViews are the windows of the §10.10 cases, by connection id.
func specViews() map[string]QuotaView {
	return map[string]QuotaView{
		"c1": {FiveHour: win(0.30, hour), Weekly: win(0.50, day)},
		"c2": {FiveHour: win(0.90, 4*hour), Weekly: win(0.20, 6*day)},
		// c3: never observed.
		"c4": {FiveHour: win(0.95, 30*time.Minute), Weekly: win(0.40, 2*day)},
		"c6": {Weekly: win(0.70, 12*hour)},
		"c7": {FiveHour: win(0.20, 2*hour)},
		"c8": {FiveHour: win(0.2, 0), Weekly: win(0.2, 0)},
		"c9": {FiveHour: win(0.2, 0)},
	}
}

// cands builds available candidates, one per connection id, in configured
// order; the candidate id is the connection id. A trailing "!" marks one
// unavailable.
func cands(specs ...string) []Entry {
	es := ents(specs...)
	for i := range es {
		es[i].ConnectionID = es[i].ID
		es[i].Model = "m"
	}
	return es
}

func quotaReq(combo string, views map[string]QuotaView) Request {
	return Request{ComboID: combo, Now: T, Quota: func(id string) QuotaView { return views[id] }}
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

func TestStrategyConfigFrom(t *testing.T) {
	def := DefaultStrategyConfig()
	if got := StrategyConfigFrom(); got.ResetAware != def.ResetAware || !slices.Equal(got.ResetWindow.Windows, []string{"weekly"}) ||
		got.ResetWindow.TieBand != time.Minute || got.Auto.ExplorationRate != 0.05 || got.Auto.TieBand != 0.02 ||
		got.Auto.Weights != nil || got.Auto.ModePack != "" {
		t.Fatalf("defaults = %+v", got)
	}
	f := func(v float64) *float64 { return &v }
	s := func(v string) *string { return &v }
	ms := func(v int64) *int64 { return &v }
	comboDefaults := &services.ComboConfig{
		ResetAware:  &services.ComboResetAware{TieBand: f(0.1), GuardRemaining: f(0.2)},
		ResetWindow: &services.ComboResetWindow{Windows: []string{"5h"}},
		Auto:        &services.ComboAuto{ModePack: s("cost-saver"), ExplorationRate: f(0.3)},
	}
	combo := &services.ComboConfig{
		ResetAware:  &services.ComboResetAware{TieBand: f(0.0), FiveHourMix: []float64{0.5, 0.5}},
		ResetWindow: &services.ComboResetWindow{Windows: []string{"weekly", "5h"}, TieBandMs: ms(1000)},
		Auto:        &services.ComboAuto{Weights: map[string]float64{"quota": 1.0, "health": -1.0}, ExplorationRate: f(0.9)},
	}
	got := StrategyConfigFrom(comboDefaults, nil, combo)
	want := def
	want.ResetAware.TieBand, want.ResetAware.GuardRemaining, want.ResetAware.FiveHourMix = 0, 0.2, [2]float64{0.5, 0.5}
	if got.ResetAware != want.ResetAware {
		t.Errorf("resetAware = %+v, want %+v", got.ResetAware, want.ResetAware)
	}
	if !slices.Equal(got.ResetWindow.Windows, []string{"weekly", "5h"}) || got.ResetWindow.TieBand != time.Second {
		t.Errorf("resetWindow = %+v", got.ResetWindow)
	}
	// explorationRate 0.9 is out of range: the comboDefaults value stays.
	if got.Auto.ModePack != "cost-saver" || got.Auto.ExplorationRate != 0.3 || len(got.Auto.Weights) != 1 || got.Auto.Weights["quota"] != 1 {
		t.Errorf("auto = %+v", got.Auto)
	}
	// Invalid windows fall through.
	bad := StrategyConfigFrom(&services.ComboConfig{ResetWindow: &services.ComboResetWindow{Windows: []string{"hourly"}}})
	if !slices.Equal(bad.ResetWindow.Windows, []string{"weekly"}) {
		t.Errorf("invalid windows accepted: %v", bad.ResetWindow.Windows)
	}
}

func TestQuotaViewNeutral(t *testing.T) {
	// 30-routing §8.3 fail-open: nothing known → headroom 1, reset-aware
	// 0.5, reset-window +∞; a reference entry reads nothing.
	var v QuotaView
	if HeadroomOf(v) != 1 || ResetAwareScore(v, T, nil) != 0.5 || !math.IsInf(ResetKey(v, T, nil), 1) {
		t.Fatal("unknown windows are not neutral")
	}
	called := false
	req := Request{Quota: func(string) QuotaView { called = true; return QuotaView{Weekly: win(1, day)} }}
	ref := Entry{ID: "R", ComboRef: "inner", Available: true}
	if quotaOf(req, &ref) != (QuotaView{}) || called {
		t.Fatal("reference entry read a quota view")
	}
	// A window whose reset has passed reads u = 0 (producer's job): it is
	// known, with no future reset for reset-window.
	past := QuotaView{Weekly: QuotaWindow{Known: true, Used: 0, ResetAt: T.Add(-time.Minute)}}
	if !math.IsInf(ResetKey(past, T, nil), 1) || HeadroomOf(past) != 1 {
		t.Fatal("past reset mishandled")
	}
}

// BenchmarkQuotaStrategies orders 100 candidates with known windows (one in
// ten unavailable) under each quota strategy.
