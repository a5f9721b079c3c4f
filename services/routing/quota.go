package routing

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// QuotaWindow is one long quota window of a connection as the
// candidate-level strategies read it (30-routing §8.3), already evaluated at
// the request's clock by its producer (services/quota): a window that is
// never observed or no longer counts is unknown, and a counting window whose
// reset has passed reads Used 0.
type QuotaWindow struct {
	// Known is false when the window was never observed or no longer
	// counts; then Used and ResetAt are meaningless.
	Known bool
	// Used is the used fraction u, in [0, 1].
	Used float64
	// ResetAt is when the window resets; zero when unknown. It may lie in
	// the past (then Used is 0).
	ResetAt time.Time
}

// QuotaView holds the long windows of one connection (§8.3). The zero value
// means "nothing known", the neutral input of every consumer.
type QuotaView struct {
	FiveHour, Daily, Weekly, Monthly QuotaWindow
}

// Window returns the window of a config name ("5h", "daily", "weekly",
// "monthly"); an unknown name is an unknown window.
func (v QuotaView) Window(name string) QuotaWindow {
	switch name {
	case Window5h:
		return v.FiveHour
	case WindowDaily:
		return v.Daily
	case WindowWeekly:
		return v.Weekly
	case WindowMonthly:
		return v.Monthly
	}
	return QuotaWindow{}
}

// MaxUsed is max u over the known long windows; unknown windows count as
// u = 0 (§8.3 fail-open).
func (v QuotaView) MaxUsed() float64 {
	u := 0.0
	for _, w := range [...]QuotaWindow{v.FiveHour, v.Daily, v.Weekly, v.Monthly} {
		if w.Known {
			u = max(u, clamp01(w.Used))
		}
	}
	return u
}

// Long window names of §8.3, as resetWindow.windows spells them.
const (
	Window5h      = "5h"
	WindowDaily   = "daily"
	WindowWeekly  = "weekly"
	WindowMonthly = "monthly"
)

// Nominal window lengths (§8.3, §10.10).
const (
	FiveHours = 5 * time.Hour
	OneDay    = 24 * time.Hour
	OneWeek   = 7 * 24 * time.Hour
	OneMonth  = 30 * 24 * time.Hour
)

// quotaOf returns the quota view of e: unknown for a reference entry, an
// entry without a connection, or a request without a Quota reader.
func quotaOf(req Request, e *Entry) QuotaView {
	if req.Quota == nil || e.IsRef() || e.ConnectionID == "" {
		return QuotaView{}
	}
	return req.Quota(e.ConnectionID)
}

// StrategyConfig is the part of a combo's effective config (§3) that the
// candidate-level strategies read. Build it with StrategyConfigFrom or
// DefaultStrategyConfig.
type StrategyConfig struct {
	ResetAware  ResetAwareConfig
	ResetWindow ResetWindowConfig
	Auto        AutoConfig
}

// ResetAwareConfig holds resetAware.* (§3, §10.10).
type ResetAwareConfig struct {
	FiveHourWeight, WeeklyWeight float64
	// FiveHourMix and WeeklyMix are [remaining weight, urgency weight].
	FiveHourMix, WeeklyMix [2]float64
	GuardRemaining         float64
	TieBand                float64
}

// ResetWindowConfig holds resetWindow.* (§3, §10.11).
type ResetWindowConfig struct {
	// Windows are the long windows whose resets count ("5h", "daily",
	// "weekly", "monthly").
	Windows []string
	TieBand time.Duration
}

// AutoConfig holds auto.* (§3, §10.14).
type AutoConfig struct {
	// Weights is auto.weights: factor → weight; nil means the defaults.
	Weights map[string]float64
	// ModePack is auto.modePack; "" means none.
	ModePack        string
	ExplorationRate float64
	TieBand         float64
}

// DefaultStrategyConfig returns the built-in defaults of §3.
func DefaultStrategyConfig() StrategyConfig {
	return StrategyConfig{
		ResetAware: ResetAwareConfig{
			FiveHourWeight: 0.35, WeeklyWeight: 0.65,
			FiveHourMix: [2]float64{0.45, 0.55}, WeeklyMix: [2]float64{0.25, 0.75},
			GuardRemaining: 0.10, TieBand: 0.05,
		},
		ResetWindow: ResetWindowConfig{Windows: []string{WindowWeekly}, TieBand: time.Minute},
		Auto:        AutoConfig{ExplorationRate: 0.05, TieBand: 0.02},
	}
}

// StrategyConfigFrom builds the typed config from config layers, lowest
// precedence first: typically routing.comboDefaults, then combo.config.
// Each key (resetAware.tieBand, auto.weights, …) comes from the last layer
// that sets it; absent keys and values out of the §3 ranges (a row stored
// before a range changed) fall through to the built-in defaults. Nil layers
// are skipped.
func StrategyConfigFrom(layers ...*services.ComboConfig) StrategyConfig {
	c := DefaultStrategyConfig()
	for _, layer := range layers {
		if layer == nil {
			continue
		}
		if ra := layer.ResetAware; ra != nil {
			c.ResetAware.apply(ra)
		}
		if rw := layer.ResetWindow; rw != nil {
			c.ResetWindow.apply(rw)
		}
		if au := layer.Auto; au != nil {
			c.Auto.apply(au)
		}
	}
	return c
}

func (c *ResetAwareConfig) apply(ra *services.ComboResetAware) {
	setFloat(&c.FiveHourWeight, ra.FiveHourWeight, 0, 1)
	setFloat(&c.WeeklyWeight, ra.WeeklyWeight, 0, 1)
	setPair(&c.FiveHourMix, ra.FiveHourMix)
	setPair(&c.WeeklyMix, ra.WeeklyMix)
	setFloat(&c.GuardRemaining, ra.GuardRemaining, 0, 0.5)
	setFloat(&c.TieBand, ra.TieBand, 0, 0.5)
}

func (c *ResetWindowConfig) apply(rw *services.ComboResetWindow) {
	if ws := windowList(rw.Windows); ws != nil {
		c.Windows = ws
	}
	if v := rw.TieBandMs; v != nil && *v >= 0 && *v <= 86_400_000 {
		c.TieBand = time.Duration(*v) * time.Millisecond
	}
}

func (c *AutoConfig) apply(au *services.ComboAuto) {
	if au.Weights != nil {
		w := make(map[string]float64, len(au.Weights))
		for k, f := range au.Weights {
			if f >= 0 && !math.IsInf(f, 0) {
				w[k] = f
			}
		}
		c.Weights = w
	}
	if au.ModePack != nil {
		if _, known := modePacks[*au.ModePack]; known {
			c.ModePack = *au.ModePack
		}
	}
	setFloat(&c.ExplorationRate, au.ExplorationRate, 0, 0.5)
	setFloat(&c.TieBand, au.TieBand, 0, 0.5)
}

// setFloat stores *v in *dst when it is set and in [lo, hi].
func setFloat(dst *float64, v *float64, lo, hi float64) {
	if v != nil && *v >= lo && *v <= hi {
		*dst = *v
	}
}

// setPair stores a [a, b] pair of numbers in [0, 1].
func setPair(dst *[2]float64, v []float64) {
	if len(v) != 2 || !(v[0] >= 0 && v[0] <= 1) || !(v[1] >= 0 && v[1] <= 1) {
		return
	}
	*dst = [2]float64{v[0], v[1]}
}

// windowList reads a non-empty list of long window names; nil when invalid.
func windowList(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	out := make([]string, 0, len(v))
	for _, s := range v {
		switch s {
		case Window5h, WindowDaily, WindowWeekly, WindowMonthly:
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		default:
			return nil
		}
	}
	return out
}

// strategyConfig returns the request's config or the defaults.
func strategyConfig(req Request) *StrategyConfig {
	if req.Config != nil {
		return req.Config
	}
	return &defaultStrategyConfig
}

var defaultStrategyConfig = DefaultStrategyConfig()

// rotation holds the per-combo rotation counters of reset-aware,
// reset-window and auto (§9: in memory, keyed by combo id). Each strategy
// has its own.
type rotation struct {
	m sync.Map // combo id → *atomic.Uint64
}

// next returns the combo's counter and advances it by one.
func (r *rotation) next(comboID string) uint64 {
	v, ok := r.m.Load(comboID)
	if !ok {
		v, _ = r.m.LoadOrStore(comboID, new(atomic.Uint64))
	}
	return v.(*atomic.Uint64).Add(1) - 1
}

// scored is one available candidate with its sort key.
type scored struct {
	pos   int
	score float64
}

// rotateHead rotates ks[:n] left by counter mod n.
func rotateHead(ks []scored, n int, counter uint64) {
	if n < 2 {
		return
	}
	k := int(counter % uint64(n))
	if k == 0 {
		return
	}
	head := ks[:n]
	tmp := slices.Clone(head[:k])
	copy(head, head[k:])
	copy(head[n-k:], tmp)
}

// emitScored returns the entries of ks in order, then the unavailable
// entries in configured order.
func emitScored(ks []scored, entries []Entry) []Entry {
	out := make([]Entry, 0, len(entries))
	for _, k := range ks {
		out = append(out, entries[k.pos])
	}
	return appendUnavailable(out, entries)
}

// scoreEps absorbs float rounding when comparing scores with a tie band.
const scoreEps = 1e-12

func clamp01(x float64) float64 {
	switch {
	case x > 1:
		return 1
	case x >= 0:
		return x
	}
	return 0 // negative or NaN
}
