package routing

import "testing"

// TestHeadroomSpec reproduces 30-routing §10.12.
func TestHeadroomSpec(t *testing.T) {
	views := specViews()
	for c, want := range map[string]float64{"c3": 1.0, "c1": 0.5, "c2": 0.1, "c4": 0.05, "c8": 0.8, "c9": 0.8} {
		if got := round4(HeadroomOf(views[c])); got != want {
			t.Errorf("headroom %s = %v, want %v", c, got, want)
		}
	}
	reg, _, _ := newReg(t, 1, 1)
	h := reg[NameHeadroom]
	for _, tc := range []struct {
		name    string
		entries []Entry
		want    []string
	}{
		{"(1) §10.10 windows", cands("c1", "c2", "c3", "c4"), []string{"c3", "c1", "c2", "c4"}},
		{"(2) equal headroom keeps configured order", cands("c8", "c9"), []string{"c8", "c9"}},
		{"(2) reversed", cands("c9", "c8"), []string{"c9", "c8"}},
		{"unavailable last", cands("c1!", "c2", "c3"), []string{"c3", "c2", "c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // no rotation: the same order every request
				wantOrder(t, h.Order(quotaReq("cb", views), tc.entries), tc.want...)
			}
		})
	}
}
