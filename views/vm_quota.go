package views

import (
	"strconv"
	"time"

	"switchyard/services/human"
	"switchyard/services/quota"
)

// Quota windows of a connection on the Connections page (50-dashboard §6.4,
// 30-routing §8.3): the long windows always, the minute window when known.

// QuotaWindowVM is one quota window of a connection as it counts now.
type QuotaWindowVM struct {
	Key   string // minute, 5h, daily, weekly, monthly
	Label string // "Minute", "5 h", "Daily", …
	// Known is false for a window never observed or no longer counting
	// (stale); it then reads "unknown".
	Known bool
	// Used is u in [0, 1]; UsedText is it as a percentage with one decimal.
	Used     float64
	UsedText string
	// Level is "", "warning" (≥ 80 %) or "danger" (used up).
	Level string
	// Resets counts down to the window's reset; nil when the reset is
	// unknown or passed (ResetText then says which).
	Resets    *CountdownVM
	ResetText string
	// Left is a minute window's remaining count ("480 of 500 left"), or "".
	Left     string
	Observed *TimeVM
}

// quotaWindowOrder lists the windows in display order with their labels.
var quotaWindowOrder = []struct{ key, label string }{
	{"minute", "Minute"}, {"5h", "5 h"}, {"daily", "Daily"}, {"weekly", "Weekly"}, {"monthly", "Monthly"},
}

// NewQuotaWindowsVM lists the windows of v at now: every long window (known
// or "unknown") and the minute window only when it is known.
func NewQuotaWindowsVM(v quota.View, now time.Time) []QuotaWindowVM {
	windows := map[string]quota.WindowView{"minute": v.Minute, "5h": v.FiveHour, "daily": v.Daily, "weekly": v.Weekly, "monthly": v.Monthly}
	out := make([]QuotaWindowVM, 0, len(quotaWindowOrder))
	for _, o := range quotaWindowOrder {
		w := windows[o.key]
		if o.key == "minute" && !w.Known {
			continue
		}
		out = append(out, newQuotaWindowVM(o.key, o.label, w, now))
	}
	return out
}

func newQuotaWindowVM(key, label string, w quota.WindowView, now time.Time) QuotaWindowVM {
	vm := QuotaWindowVM{Key: key, Label: label, Known: w.Known}
	if !w.Known {
		return vm
	}
	u := min(max(w.Used, 0), 1)
	vm.Used, vm.UsedText = u, PercentText(u)
	switch {
	case u >= 1:
		vm.Level = "danger"
	case u >= 0.8:
		vm.Level = "warning"
	}
	switch {
	case w.ResetAt.IsZero():
		vm.ResetText = "reset unknown"
	case !w.ResetAt.After(now):
		vm.ResetText = "reset passed"
	default:
		vm.Resets = NewCountdownVM(w.ResetAt, now)
	}
	if w.Limit > 0 {
		vm.Left = human.Thousands(w.Remaining) + " of " + human.Thousands(w.Limit) + " left"
	}
	vm.Observed = NewTimeVM(&w.ObservedAt, now)
	return vm
}

// PercentText renders a fraction as a percentage with one decimal ("42.0 %").
func PercentText(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + " %" }

// QuotaReported reports whether any quota window of the connection counts
// now; a row without one shows a single "none reported" line.
func (r ConnectionRowVM) QuotaReported() bool {
	for _, w := range r.Quota {
		if w.Known {
			return true
		}
	}
	return false
}

// ShownQuota are the windows the quota cell lists: all of them once one is
// known (the others read "unknown"), none otherwise.
func (r ConnectionRowVM) ShownQuota() []QuotaWindowVM {
	if !r.QuotaReported() {
		return nil
	}
	return r.Quota
}

// WithQuota adds the connection's quota windows to its row.
func (r ConnectionRowVM) WithQuota(v quota.View, now time.Time) ConnectionRowVM {
	r.Quota = NewQuotaWindowsVM(v, now)
	return r
}

// QuotaSig covers the quota windows cell: what each window shows, its reset
// deadline (not the remaining time, which ticks in the browser) and when it
// was observed.
func (r ConnectionRowVM) QuotaSig() string {
	parts := []any{len(r.Quota)}
	for _, w := range r.Quota {
		reset, seen := w.ResetText, ""
		if w.Resets != nil {
			reset = w.Resets.ISO
		}
		if w.Observed != nil {
			seen = w.Observed.ISO + w.Observed.Rel
		}
		parts = append(parts, w.Key, w.Known, w.UsedText, reset, w.Left, seen)
	}
	return sig(parts...)
}

// ChangedQuotaCells keeps the rows of list whose quota windows cell differs
// from have (cell id → signature the page holds); an empty have keeps all.
func ChangedQuotaCells(list ConnectionsListVM, have map[string]string) []ConnectionRowVM {
	var out []ConnectionRowVM
	for _, g := range list.Groups {
		for _, r := range g.Rows {
			if have[RowID(RowConnQuota, r.ID)] != r.QuotaSig() {
				out = append(out, r)
			}
		}
	}
	return out
}
