package quota

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzQuotaHeaders feeds arbitrary quota header names and values to the
// parser and the tracker: they never panic, every window has a known name
// and u in [0, 1], a relative reset never lies before receipt, and a gate
// never ends before now.
func FuzzQuotaHeaders(f *testing.F) {
	f.Add(uint8(0), "limit-requests", "500", "remaining-requests", "0", "reset-requests", "6m0s")
	f.Add(uint8(1), "tokens-limit", "1000", "tokens-remaining", "10", "tokens-reset", "2026-09-24T13:20:00Z")
	f.Add(uint8(2), "5h-utilization", "0.97", "5h-status", "rejected", "5h-reset", "1790256000")
	f.Add(uint8(2), "status", "rejected", "representative-claim", "seven_day", "reset", "1790256000123")
	f.Add(uint8(3), "primary-used-percent", "100", "primary-window-minutes", "300", "primary-reset-after-seconds", "1200")
	f.Add(uint8(3), "secondary-used-percent", "NaN", "secondary-window-minutes", "-Inf", "secondary-reset-at", "1e400")
	f.Add(uint8(1), "requests-limit", "0", "requests-remaining", "-0", "requests-reset", "-5s")
	prefixes := []string{prefixOpenAI, prefixAnthropic, prefixUnified, prefixCodex}
	f.Fuzz(func(t *testing.T, family uint8, k1, v1, k2, v2, k3, v3 string) {
		p := prefixes[int(family)%len(prefixes)]
		h := http.Header{}
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}, {k3, v3}} {
			h[p+kv[0]] = []string{kv[1]}
		}
		now := T0
		for _, w := range Parse(h, now) {
			if windowIndex(w.Name) < 0 {
				t.Fatalf("window name %q", w.Name)
			}
			if !(w.Used >= 0 && w.Used <= 1) {
				t.Fatalf("u = %v", w.Used)
			}
			if w.Limit < 0 || w.Remaining < 0 {
				t.Fatalf("negative counts %+v", w)
			}
		}
		for _, v := range []string{v1, v2, v3} {
			r := ParseReset(v, now)
			if relative(v) && !r.IsZero() && r.Before(now) {
				t.Fatalf("relative reset %q → %v, before receipt", v, r)
			}
		}
		tr := New(Options{})
		tr.Observe("c", h, now)
		for _, d := range []time.Duration{0, time.Minute, 6 * time.Hour, 30 * time.Hour} {
			at := now.Add(d)
			view := tr.Windows("c", at)
			for _, w := range []WindowView{view.Minute, view.FiveHour, view.Daily, view.Weekly, view.Monthly} {
				if !(w.Used >= 0 && w.Used <= 1) {
					t.Fatalf("view u = %v", w.Used)
				}
			}
			if blocked, until := tr.Gate("c", int(family)%60, at); blocked && !until.After(at) {
				t.Fatalf("gate ends at %v, not after %v", until, at)
			}
		}
	})
}

// relative reports whether v is a reset relative to receipt: a Go duration
// or a number below 10⁹.
func relative(v string) bool {
	v = strings.TrimSpace(v)
	if _, err := time.ParseDuration(v); err == nil {
		return true
	}
	f, err := strconv.ParseFloat(v, 64)
	return err == nil && !math.IsNaN(f) && f < 1e9
}
