package routing

import (
	"cmp"
	"slices"
	"time"
)

// ResetAware prefers connections whose remaining quota is about to reset
// anyway (§10.10). Each candidate scores its known 5h and weekly windows:
// for a window with used fraction u, reset R and nominal length W (5 h,
// 7 d), r = 1 − u, urgency = clamp₀¹(1 − (R − now)/W) and
// S = m₁·r + m₂·urgency·(1 − r) with [m₁, m₂] the window's mix; the score
// is the weighted mean of the known windows (0.5 when none is known, and
// for reference entries). A known 5h window with r < guardRemaining
// multiplies the score by max(0.05, r/guardRemaining). Candidates sort by
// score descending (ties configured order); the head group within tieBand
// of the top is rotated left by a per-combo counter that advances every
// request.
//
// It is a candidate-level strategy: Request.Quota supplies the windows and
// Request.Config the resetAware.* keys (nil: defaults).
type ResetAware struct {
	rot rotation
}

// Name returns "reset-aware".
func (*ResetAware) Name() string { return NameResetAware }

// Describe returns the builder line.
func (*ResetAware) Describe() string { return describe(NameResetAware) }

// Order scores, sorts and rotates the head group.
func (r *ResetAware) Order(req Request, entries []Entry) []Entry {
	counter := r.rot.next(req.ComboID)
	cfg := &strategyConfig(req).ResetAware
	var buf [stackKeys]scored
	ks := keysIn(buf[:], len(entries))
	for i := range entries {
		if entries[i].Available {
			ks = append(ks, scored{pos: i, score: ResetAwareScore(quotaOf(req, &entries[i]), req.Now, cfg)})
		}
	}
	slices.SortStableFunc(ks, func(a, b scored) int { return cmp.Compare(b.score, a.score) })
	n := 0
	for n < len(ks) && ks[n].score >= ks[0].score-cfg.TieBand-scoreEps {
		n++
	}
	rotateHead(ks, n, counter)
	return emitScored(ks, entries)
}

// ResetAwareScore is the reset-aware score of one connection's windows at
// now (§10.10); cfg nil means the defaults.
func ResetAwareScore(v QuotaView, now time.Time, cfg *ResetAwareConfig) float64 {
	if cfg == nil {
		cfg = &defaultStrategyConfig.ResetAware
	}
	var sum, weights float64
	if w := v.FiveHour; w.Known {
		sum += cfg.FiveHourWeight * windowScore(w, now, FiveHours, cfg.FiveHourMix)
		weights += cfg.FiveHourWeight
	}
	if w := v.Weekly; w.Known {
		sum += cfg.WeeklyWeight * windowScore(w, now, OneWeek, cfg.WeeklyMix)
		weights += cfg.WeeklyWeight
	}
	score := 0.5
	if weights > 0 {
		score = sum / weights
	}
	if w := v.FiveHour; w.Known && cfg.GuardRemaining > 0 {
		if rem := 1 - clamp01(w.Used); rem < cfg.GuardRemaining {
			score *= max(0.05, rem/cfg.GuardRemaining)
		}
	}
	return score
}

// windowScore is S_w of §10.10. An unknown reset counts as no urgency.
func windowScore(w QuotaWindow, now time.Time, length time.Duration, mix [2]float64) float64 {
	r := 1 - clamp01(w.Used)
	urgency := 0.0
	if !w.ResetAt.IsZero() {
		urgency = clamp01(1 - float64(w.ResetAt.Sub(now))/float64(length))
	}
	return mix[0]*r + mix[1]*urgency*(1-r)
}
