package routing

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// ResetWindow drains first the accounts whose quota is about to renew
// (§10.11). Key = the earliest future reset among the known windows named
// by resetWindow.windows (default weekly); none → +∞. Candidates sort by key
// ascending (ties configured order); the head group, whose keys are within
// resetWindow.tieBandMs of the smallest, is rotated left by a per-combo
// counter that advances every request. When no key is known the head group
// is every candidate.
//
// It is a candidate-level strategy: Request.Quota supplies the windows and
// Request.Config the resetWindow.* keys (nil: defaults).
type ResetWindow struct {
	rot rotation
}

// Name returns "reset-window".
func (*ResetWindow) Name() string { return NameResetWindow }

// Describe returns the builder line.
func (*ResetWindow) Describe() string { return describe(NameResetWindow) }

// Order sorts by earliest reset and rotates the head group.
func (r *ResetWindow) Order(req Request, entries []Entry) []Entry {
	counter := r.rot.next(req.ComboID)
	cfg := &strategyConfig(req).ResetWindow
	var buf [stackKeys]scored
	ks := keysIn(buf[:], len(entries))
	for i := range entries {
		if entries[i].Available {
			ks = append(ks, scored{pos: i, score: ResetKey(quotaOf(req, &entries[i]), req.Now, cfg.Windows)})
		}
	}
	slices.SortStableFunc(ks, func(a, b scored) int { return cmp.Compare(a.score, b.score) })
	n := 0
	band := float64(max(cfg.TieBand, 0))
	for n < len(ks) && (ks[n].score == ks[0].score || ks[n].score-ks[0].score <= band) {
		n++
	}
	rotateHead(ks, n, counter)
	return emitScored(ks, entries)
}

// ResetKey is the reset-window key of one connection at now, in
// nanoseconds from now: the earliest future reset among the named windows
// that are known, or +Inf. An empty list means ["weekly"].
func ResetKey(v QuotaView, now time.Time, windows []string) float64 {
	if len(windows) == 0 {
		windows = defaultStrategyConfig.ResetWindow.Windows
	}
	key := math.Inf(1)
	for _, name := range windows {
		w := v.Window(name)
		if !w.Known || w.ResetAt.IsZero() || !w.ResetAt.After(now) {
			continue
		}
		key = min(key, float64(w.ResetAt.Sub(now)))
	}
	return key
}
