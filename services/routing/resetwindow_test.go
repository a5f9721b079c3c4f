package routing

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestResetWindowSpec reproduces 30-routing §10.11.
func TestResetWindowSpec(t *testing.T) {
	views := specViews()
	keys := map[string]time.Duration{"c1": day, "c4": 2 * day, "c2": 6 * day}
	for c, want := range keys {
		if got := ResetKey(views[c], T, []string{"weekly"}); got != float64(want) {
			t.Errorf("weekly key %s = %v, want %v", c, time.Duration(got), want)
		}
	}
	if !math.IsInf(ResetKey(views["c3"], T, nil), 1) {
		t.Error("c3 key not +Inf")
	}
	both := []string{"weekly", "5h"}
	for c, want := range map[string]time.Duration{"c4": 30 * time.Minute, "c1": hour, "c2": 4 * hour} {
		if got := ResetKey(views[c], T, both); got != float64(want) {
			t.Errorf("weekly+5h key %s = %v, want %v", c, time.Duration(got), want)
		}
	}

	reg, _, _ := newReg(t, 1, 1)
	rw := reg[NameResetWindow]
	cfgBoth := DefaultStrategyConfig()
	cfgBoth.ResetWindow.Windows = both
	views["c5"] = QuotaView{Weekly: win(0.5, day+30*time.Second)}
	cases := []struct {
		name    string
		combo   string
		cfg     *StrategyConfig
		entries []Entry
		want    [][]string
	}{
		{"(1) default weekly", "cb1", nil, cands("c1", "c2", "c3", "c4"), [][]string{{"c1", "c4", "c2", "c3"}}},
		{"(2) weekly and 5h", "cb2", &cfgBoth, cands("c1", "c2", "c3", "c4"), [][]string{{"c4", "c1", "c2", "c3"}}},
		{"(3) c5 within the 60 s band of c1", "cb3", nil, cands("c1", "c2", "c3", "c4", "c5"), [][]string{
			{"c1", "c5", "c4", "c2", "c3"}, {"c5", "c1", "c4", "c2", "c3"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				req := quotaReq(tc.combo, views)
				req.Config = tc.cfg
				if g := ids(rw.Order(req, tc.entries)); !slices.Equal(g, want) {
					t.Fatalf("request %d: order %v, want %v", i+1, g, want)
				}
			}
		})
	}
}

func TestResetWindowRules(t *testing.T) {
	views := specViews()
	reg, _, _ := newReg(t, 1, 1)
	rw := reg[NameResetWindow]
	// A known window without a reset, or with a past one, has no key.
	views["p"] = QuotaView{Weekly: QuotaWindow{Known: true, ResetAt: T.Add(-time.Hour)}}
	views["u"] = QuotaView{Weekly: win(0.3, 0)}
	wantOrder(t, rw.Order(quotaReq("a", views), cands("p", "u", "c2", "c1!")), "c2", "p", "u", "c1")
	// Everything unknown: one head group, rotated.
	wantOrder(t, rw.Order(quotaReq("b", views), cands("x", "y", "z")), "x", "y", "z")
	wantOrder(t, rw.Order(quotaReq("b", views), cands("x", "y", "z")), "y", "z", "x")
	// A zero band still groups equal keys.
	cfg := DefaultStrategyConfig()
	cfg.ResetWindow.TieBand = 0
	views["c1b"] = views["c1"]
	req := quotaReq("c", views)
	req.Config = &cfg
	wantOrder(t, rw.Order(req, cands("c2", "c1", "c1b")), "c1", "c1b", "c2")
	wantOrder(t, rw.Order(req, cands("c2", "c1", "c1b")), "c1b", "c1", "c2")
}
