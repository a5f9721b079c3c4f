package quota

import (
	"testing"
	"time"
)

// BenchmarkObserve measures the hot-path cost per upstream response:
// without quota headers (the common case: no allocation) and with a full
// Codex and Anthropic unified set.
func BenchmarkObserve(b *testing.B) {
	b.Run("no-quota-headers", func(b *testing.B) {
		tr := New(Options{})
		h := plainHeaders()
		b.ReportAllocs()
		for b.Loop() {
			tr.Observe("c1", h, T0)
		}
	})
	b.Run("quota-headers", func(b *testing.B) {
		tr := New(Options{})
		h := plainHeaders()
		for k, v := range hdr("x-codex-primary-used-percent", "42", "x-codex-primary-window-minutes", "300",
			"x-codex-primary-reset-after-seconds", "1200", "x-codex-secondary-used-percent", "10",
			"x-codex-secondary-window-minutes", "10080", "x-ratelimit-limit-requests", "500",
			"x-ratelimit-remaining-requests", "499", "x-ratelimit-reset-requests", "120ms") {
			h[k] = v
		}
		b.ReportAllocs()
		for b.Loop() {
			tr.Observe("c1", h, T0)
		}
	})
}

// BenchmarkGate is the per-connection cost of gate 10 in the account pick.
func BenchmarkGate(b *testing.B) {
	tr := New(Options{})
	tr.ObserveWindows("c1", []Window{{Name: FiveH, Used: 0.5, ResetAt: T0.Add(time.Hour)}, {Name: Weekly, Used: 0.2}}, T0)
	b.ReportAllocs()
	for b.Loop() {
		tr.Gate("c1", 10, T0)
	}
}
