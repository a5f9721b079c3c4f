package views

import (
	"strings"
	"testing"
	"time"

	"switchyard/services"
)

// A connection whose provider never reported a quota window shows one line,
// not four "unknown" ones (issue 21 item 9).
func TestConnQuotaCellNoneReported(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := NewConnectionRowVM(services.Connection{ID: "c_1", Name: "main", Enabled: true}, now)
	cell := renderCell(t, connQuotaCell(row, false)).Find("td#conn-c_1-quota")
	if got := squash(cell); got != "none reported" {
		t.Errorf("quota cell %q", got)
	}
	if n := cell.Find("li").Length(); n != 1 {
		t.Errorf("%d lines, want 1", n)
	}
	if cell.Find(`input[data-quota-sig]`).Length() != 1 {
		t.Error("the cell lost its poll signature")
	}
}

// A weighted combo's list row shows each target's weight and share and a
// bar of the shares; a priority combo shows none (50-dashboard §6.5).
func TestComboRowWeights(t *testing.T) {
	w := func(n int) *int { return &n }
	off := false
	targets := []services.Target{
		{Kind: services.KindModel, Provider: "fake", Model: "model-x", Weight: w(3)},
		{Kind: services.KindModel, Provider: "fake", Model: "model-y", Weight: w(2)},
		{Kind: services.KindModel, Provider: "fake", Model: "model-z", Weight: w(5), Enabled: &off},
	}
	list := NewCombosListVM([]services.Combo{
		{ID: "cb_w", Name: "weighted", Strategy: "weighted", Enabled: true, Targets: targets},
		{ID: "cb_p", Name: "ordered", Strategy: "priority", Enabled: true, Targets: targets},
	}, nil, "")
	row := list.Rows[0]
	var texts []string
	for _, c := range row.Targets {
		texts = append(texts, c.WeightText)
	}
	if got := strings.Join(texts, " | "); got != "weight 3 · 60.0 % | weight 2 · 40.0 % | weight 5 · disabled" {
		t.Errorf("weight texts %q", got)
	}
	if len(row.Weights) != 2 || row.Weights[0].X != "0.00%" || row.Weights[0].W != "60.00%" || row.Weights[1].X != "60.00%" || row.Weights[1].W != "40.00%" {
		t.Errorf("weights bar %+v", row.Weights)
	}
	doc := renderCell(t, ComboTargetsCell(row, false))
	if n := doc.Find(`svg[data-testid="combo-weights-cb_w"] rect`).Length(); n != 2 {
		t.Errorf("%d bar segments rendered", n)
	}
	if p := list.Rows[1]; p.Weights != nil || p.Targets[0].WeightText != "" {
		t.Errorf("a priority combo shows weights: %+v", p.Weights)
	}

	// All weights 0: every enabled target equally likely.
	zero := []services.Target{{Kind: services.KindModel, Provider: "a", Model: "m", Weight: w(0)}, {Kind: services.KindModel, Provider: "b", Model: "m", Weight: w(0)}}
	z := NewCombosListVM([]services.Combo{{ID: "cb_z", Name: "z", Strategy: "weighted", Targets: zero}}, nil, "").Rows[0]
	if z.Targets[0].WeightText != "weight 0 · 50.0 %" || len(z.Weights) != 2 {
		t.Errorf("all-zero weights %q %+v", z.Targets[0].WeightText, z.Weights)
	}
}

// The Model lockout card previews the lock lengths of repeated failures from
// the values it shows, through the lockouts' own ladder.
func TestLockoutPreview(t *testing.T) {
	def, _ := FindSettingsCard(SectionModelLockout)
	card := func(base, maxMs, steps, exp string) SettingsCardVM {
		return SettingsCardVM{Def: def, Groups: []SettingsGroupVM{{Fields: []SettingsFieldVM{
			{Path: "modelLockout.baseCooldownMs", Unit: "ms", Value: base},
			{Path: "modelLockout.maxCooldownMs", Unit: "ms", Value: maxMs},
			{Path: "modelLockout.maxBackoffSteps", Value: steps},
			{Path: "modelLockout.useExponentialBackoff", Value: exp},
		}}}}
	}
	for _, c := range []struct {
		base, maxMs, steps, exp, want string
		ok                            bool
	}{
		{"120000", "1800000", "10", "true", "2 min → 4 min → 8 min → 16 min → 30 min (cap)", true},
		{"120000", "1800000", "2", "true", "2 min → 4 min → 8 min", true},
		{"60000", "600000", "10", "false", "1 min on every repeat failure", true},
		{"1000", "3600000", "20", "true", "1 s → 2 s → 4 s → 8 s → 16 s → 32 s → 1 min 4 s → 2 min 8 s → …", true},
		{"120000", "60000", "10", "true", "", false},
		{"", "60000", "10", "true", "", false},
	} {
		got, ok := card(c.base, c.maxMs, c.steps, c.exp).LockoutPreview()
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("base %s max %s steps %s exp %s: %q %v, want %q %v", c.base, c.maxMs, c.steps, c.exp, got, ok, c.want, c.ok)
		}
	}
	f := SettingsFieldVM{Path: "modelLockout.baseCooldownMs", Unit: "ms", Value: "5400000"}
	if f.Human() != "1 h 30 min" || (SettingsFieldVM{Unit: "ms", Value: "0"}).Human() != "" || (SettingsFieldVM{Value: "60000"}).Human() != "" {
		t.Errorf("human units %q", f.Human())
	}
}
