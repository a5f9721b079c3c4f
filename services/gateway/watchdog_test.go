package gateway

import (
	"testing"
	"time"
)

var wdDefaults = WatchdogConfig{Enabled: true, Warmup: 30 * time.Second, Window: 30 * time.Second, MinUsefulBytesPerSecond: 4, MinUsefulBytes: 1}

// firstAbort feeds bytesPerSec useful bytes each second (protected until
// protectedUntil) and returns the first second at which Abort is true.
func firstAbort(cfg WatchdogConfig, bytesPerSec int, protectedUntil, limit time.Duration) time.Duration {
	t0 := time.Unix(0, 0)
	w := NewWatchdog(cfg, t0)
	for s := time.Second; s <= limit; s += time.Second {
		at := t0.Add(s)
		if s < protectedUntil {
			w.Observe(at, 0, true)
		} else {
			w.Observe(at, bytesPerSec, false)
		}
		if w.Abort(at) {
			return s
		}
	}
	return -1
}

func TestWatchdogAcceptance(t *testing.T) {
	if got := firstAbort(wdDefaults, 10, 0, 10*time.Minute); got != -1 {
		t.Errorf("T1: steady 10 B/s aborted at %v", got)
	}
	if got := firstAbort(wdDefaults, 2, 0, 10*time.Minute); got != 60*time.Second {
		t.Errorf("T2: 2 B/s aborted at %v, want 60s", got)
	}
	if got := firstAbort(wdDefaults, 2, 120*time.Second, 10*time.Minute); got != 150*time.Second {
		t.Errorf("T3: after tool calls, aborted at %v, want 150s", got)
	}
	if got := firstAbort(wdDefaults, 0, 0, 10*time.Minute); got != 60*time.Second {
		t.Errorf("T4: pings only aborted at %v, want 60s", got)
	}
	off := wdDefaults
	off.Enabled = false
	if got := firstAbort(off, 0, 0, 10*time.Minute); got != -1 {
		t.Errorf("T5: disabled watchdog aborted at %v", got)
	}
}
