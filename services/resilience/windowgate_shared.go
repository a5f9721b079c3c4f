package resilience

import (
	"context"
	"errors"
	"fmt"
	"time"

	"switchyard/services"
)

// WindowCounter counts the provider-level window gate for a whole fleet
// (scale-out §3.4 row 3): the failure instants of a provider's window and its
// deadline live in one shared place (Redis), on that place's clock, so the
// threshold is reached by the failures of every replica and a gate closed
// through one replica holds on all of them. The WindowGate stays the mirror
// Block reads (lock-free, allocation-free); the counter tells the other
// replicas through Mirror* calls. Connection-level entries (a combo target
// pinned to a connection) stay per replica.
type WindowCounter interface {
	// CountFailure adds one final failure of provider to its window and
	// closes the gate for cooldown when the window holds threshold
	// failures; it returns the deadline when it closed it (zero otherwise).
	CountFailure(ctx context.Context, provider string, threshold int, window, cooldown time.Duration, waitable bool) (until time.Time, err error)
	// CloseProvider closes the gate for cooldown at once (a rule with scope
	// provider), never shortening a later deadline.
	CloseProvider(ctx context.Context, provider string, cooldown time.Duration) (until time.Time, err error)
	// ClearWindow empties the provider's failure window (a success).
	ClearWindow(ctx context.Context, provider string) error
	// ClearAll drops every provider's window and deadline.
	ClearAll(ctx context.Context) error
}

// UseCounter makes g count provider-level failures through c. Call it
// before g is used. A counter error falls back to counting in this process
// (the gate then holds per replica) and is returned wrapping
// services.ErrUnavailable, which the engine counts.
func (g *WindowGate) UseCounter(c WindowCounter) { g.counter = c }

func (g *WindowGate) recordShared(ctx context.Context, cfg WindowGateConfig, provider string, profile Profile, waitable bool) error {
	now := g.clock.Now()
	g.mu.Lock()
	e := g.entryLocked(cfg, now, provider, "", profile)
	cooling := now.Before(e.gateUntil)
	p := g.profileCfg(cfg, e.profile)
	g.mu.Unlock()
	if cooling {
		return nil // the episode rule: a cooling gate counts nothing
	}
	until, err := g.counter.CountFailure(ctx, provider, p.FailureThreshold,
		time.Duration(p.FailureWindowMs)*time.Millisecond, time.Duration(p.CooldownMs)*time.Millisecond, waitable)
	if err != nil {
		g.recordFinalFailure(cfg, provider, profile, "", waitable)
		return fmt.Errorf("resilience: shared window gate of %s: %w", provider, errors.Join(err, services.ErrUnavailable))
	}
	if until.IsZero() {
		g.MirrorFailure(provider, profile)
	} else {
		g.MirrorClose(provider, profile, until, waitable)
	}
	return nil
}

// MirrorFailure records in this replica's mirror that provider's window
// holds a failure (counted elsewhere): a later success here must clear the
// shared window, and Entries shows it.
func (g *WindowGate) MirrorFailure(provider string, profile Profile) {
	cfg := g.config()
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entryLocked(cfg, now, provider, "", profile)
	e.lastEventAt = now
	e.failures = append(e.failures, now)
}

// MirrorClose applies a gate deadline decided by the shared counter.
func (g *WindowGate) MirrorClose(provider string, profile Profile, until time.Time, waitable bool) {
	cfg := g.config()
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entryLocked(cfg, now, provider, "", profile)
	if until.After(e.gateUntil) {
		e.gateUntil, e.gateWaitable = until, waitable
	}
	e.failures = e.failures[:0]
	e.lastEventAt = now
}

// MirrorRule applies a rule cooldown (scope provider) decided elsewhere.
func (g *WindowGate) MirrorRule(provider string, until time.Time) {
	cfg := g.config()
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entryLocked(cfg, now, provider, "", "")
	if until.After(e.ruleUntil) {
		e.ruleUntil = until
	}
	e.lastEventAt = now
}

// MirrorSuccess empties provider's window in this replica's mirror.
func (g *WindowGate) MirrorSuccess(provider string) {
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.entries[provider]; e != nil {
		e.failures = e.failures[:0]
		if !now.Before(e.gateUntil) && !now.Before(e.ruleUntil) {
			g.deleteLocked(provider)
		}
	}
}

// MirrorClear drops every provider-level entry of the mirror.
func (g *WindowGate) MirrorClear() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, e := range g.entries {
		if e.connectionID == "" {
			g.deleteLocked(key)
		}
	}
}
