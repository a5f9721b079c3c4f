package routing

import (
	"slices"
	"testing"
)

// TestResetAwareSpec reproduces 30-routing §10.10.
func TestResetAwareSpec(t *testing.T) {
	views := specViews()
	for _, tc := range []struct {
		conn string
		want float64
	}{
		{"c1", 0.4466}, {"c2", 0.1943}, {"c3", 0.5}, {"c4", 0.2046}, {"c6", 0.5625}, {"c7", 0.4260},
	} {
		if got := round4(ResetAwareScore(views[tc.conn], T, nil)); got != tc.want {
			t.Errorf("score %s = %.4f, want %.4f", tc.conn, got, tc.want)
		}
	}
	// c4 before the guard: 0.4092 × max(0.05, 0.05/0.10) = 0.2046.
	c4 := views["c4"]
	if got := round4(ResetAwareScore(c4, T, &ResetAwareConfig{FiveHourWeight: 0.35, WeeklyWeight: 0.65,
		FiveHourMix: [2]float64{0.45, 0.55}, WeeklyMix: [2]float64{0.25, 0.75}})); got != 0.4092 {
		t.Errorf("c4 unguarded = %.4f, want 0.4092", got)
	}

	reg, _, _ := newReg(t, 1, 1)
	ra := reg[NameResetAware]
	cases := []struct {
		name    string
		combo   string
		entries []Entry
		want    [][]string // one order per consecutive request
	}{
		{"(1) band holds c3 only", "cb1", cands("c1", "c2", "c3", "c4"), [][]string{
			{"c3", "c1", "c4", "c2"}, {"c3", "c1", "c4", "c2"}}},
		{"(2) weekly-only and 5h-only windows", "cb2", cands("c1", "c3", "c6", "c7"), [][]string{
			{"c6", "c3", "c1", "c7"}}},
		{"(3) identical windows rotate", "cb3", cands("c1", "c2", "c5"), [][]string{
			{"c1", "c5", "c2"}, {"c5", "c1", "c2"}, {"c1", "c5", "c2"}}},
	}
	views["c5"] = views["c1"]
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				got := ra.Order(quotaReq(tc.combo, views), tc.entries)
				if g := ids(got); !slices.Equal(g, want) {
					t.Fatalf("request %d: order %v, want %v", i+1, g, want)
				}
			}
		})
	}
}

func TestResetAwareRulesAndState(t *testing.T) {
	views := specViews()
	views["c5"] = views["c1"]
	reg, _, _ := newReg(t, 1, 1)
	ra := reg[NameResetAware]
	// Unavailable candidates go last in configured order and still advance
	// the counter; counters are per combo.
	wantOrder(t, ra.Order(quotaReq("x", views), cands("c2!", "c1", "c5")), "c1", "c5", "c2")
	wantOrder(t, ra.Order(quotaReq("x", views), cands("c2!", "c1", "c5")), "c5", "c1", "c2")
	wantOrder(t, ra.Order(quotaReq("y", views), cands("c2!", "c1", "c5")), "c1", "c5", "c2")
	// Reference entries score 0.5, like unknown windows: tie with c3.
	es := cands("c3", "c1")
	ref := Entry{Index: 2, ID: "R", ComboRef: "inner", Available: true}
	es = append(es, ref)
	wantOrder(t, ra.Order(quotaReq("z", views), es), "c3", "R", "c1")
	wantOrder(t, ra.Order(quotaReq("z", views), es), "R", "c3", "c1")
	// Nil Quota: every candidate 0.5, all in the head group.
	wantOrder(t, ra.Order(Request{ComboID: "n"}, cands("a", "b")), "a", "b")
	wantOrder(t, ra.Order(Request{ComboID: "n"}, cands("a", "b")), "b", "a")
	// A 5h window below the guard floor: ×0.05 at most.
	full := QuotaView{FiveHour: win(1, 4*hour)}
	if s := ResetAwareScore(full, T, nil); s <= 0 || s > 0.05 {
		t.Fatalf("guarded score %v", s)
	}
	// Tie band from config: a 0.1 band puts c1 (0.4466) with c3 (0.5).
	cfg := DefaultStrategyConfig()
	cfg.ResetAware.TieBand = 0.1
	req := quotaReq("band", views)
	req.Config = &cfg
	wantOrder(t, ra.Order(req, cands("c1", "c3")), "c3", "c1")
	wantOrder(t, ra.Order(req, cands("c1", "c3")), "c1", "c3")
}
