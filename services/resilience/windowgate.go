package resilience

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// WindowGateStatus is one live window-gate entry as health and runtime
// pages show it.
type WindowGateStatus struct {
	// Key is the provider id, or "provider:connectionId" for a
	// connection-level entry.
	Key          string `json:"key"`
	Provider     string `json:"-"`
	ConnectionID string `json:"-"`
	// RetryAfterMs is the remaining enforced cooldown (rounded up), 0 when
	// the entry is not cooling.
	RetryAfterMs int64 `json:"retryAfterMs"`
	// FailuresInWindow is the number of provider-level failures inside the
	// failure window, or the connection-level failure count.
	FailuresInWindow int `json:"failuresInWindow"`
	// Waitable: the cooldown was written by a waitable reason (§9).
	Waitable bool `json:"-"`
}

// WindowBlock describes why the window gate blocks a target.
type WindowBlock struct {
	// RetryAfter is the time until every blocking entry has lapsed.
	RetryAfter time.Duration
	// Waitable: every blocking entry was written by a waitable reason
	// (rate_limit, transient, server_error, model_capacity).
	Waitable bool
}

// windowGateRetention is the least idle time before a lapsed entry is dropped:
// max(30 min, maxRetryCooldownMs) (20-resilience §3 State).
const windowGateRetention = 30 * time.Minute

// windowGateEntry is one provider-level or connection-level entry.
type windowGateEntry struct {
	provider     string
	connectionID string // "" for a provider-level entry
	profile      Profile

	// Provider level.
	failures     []time.Time // trigger instants inside the window, oldest first
	gateUntil    time.Time   // set on reaching failureThreshold
	gateWaitable bool
	ruleUntil    time.Time // set by a rule with scope provider (§3.1)

	// Connection level.
	failureCount int
	connWaitable bool

	lastEventAt time.Time
}

// WindowGate is the provider cooldown window gate (20-resilience §3): it
// keeps successive combo requests off a provider, or a pinned connection of
// it, that just failed repeatedly. Memory only, lost on restart by design.
// Deadlines are data compared with the clock when read; Sweep only drops
// dead entries. It is the in-process WindowGateStore; its writes never fail.
type WindowGate struct {
	clock services.Clock
	cfg   func() WindowGateConfig

	live    atomic.Int64 // len(entries), for the lock-free empty check
	mu      sync.Mutex
	entries map[string]*windowGateEntry

	// counter, when set, counts provider-level failures for the fleet
	// (UseCounter); nil counts in this process.
	counter WindowCounter
}

// NewWindowGate builds an empty gate reading its settings through cfg at
// every evaluation.
func NewWindowGate(clock services.Clock, cfg func() WindowGateConfig) *WindowGate {
	return &WindowGate{clock: clock, cfg: cfg, entries: map[string]*windowGateEntry{}}
}

func windowGateKey(provider, connectionID string) string {
	if connectionID == "" {
		return provider
	}
	return provider + ":" + connectionID
}

// windowGateTriggers reports whether reason feeds the gate, and whether a cooldown
// it writes is waitable.
func windowGateTriggers(reason Reason) (feeds, waitable bool) {
	switch reason {
	case ReasonRateLimit, ReasonModelCapacity, ReasonServerError, ReasonTransient:
		return true, true
	case ReasonQuotaExhausted:
		return true, false
	}
	return false, false
}

// profileCfg returns the window profile: the configured one, else the spec
// defaults, sanitised.
func (g *WindowGate) profileCfg(cfg WindowGateConfig, profile Profile) WindowProfile {
	p, ok := cfg.Profiles[profile]
	if !ok {
		switch profile {
		case services.AuthOAuth:
			p = WindowProfile{FailureThreshold: 10, FailureWindowMs: 900_000, CooldownMs: 300_000}
		case services.AuthLocal:
			p = WindowProfile{FailureThreshold: 5, FailureWindowMs: 300_000, CooldownMs: 60_000}
		default:
			p = WindowProfile{FailureThreshold: 15, FailureWindowMs: 1_800_000, CooldownMs: 600_000}
		}
	}
	p.FailureThreshold = max(p.FailureThreshold, 1)
	p.FailureWindowMs = max(p.FailureWindowMs, 1)
	p.CooldownMs = max(p.CooldownMs, 0)
	return p
}

// Enabled reports whether the gate is on (providerCooldown.enabled).
func (g *WindowGate) Enabled() bool { return g.config().Enabled }

func (g *WindowGate) config() WindowGateConfig {
	if g.cfg == nil {
		return WindowGateConfig{}
	}
	return g.cfg()
}

// windowConnCooldown is min(minRetryCooldownMs × 2^min(count−1, 10), maxRetryCooldownMs).
func windowConnCooldown(cfg WindowGateConfig, count int) time.Duration {
	if count <= 0 {
		return 0
	}
	minMs, maxMs := cfg.MinRetryCooldownMs, cfg.MaxRetryCooldownMs
	if minMs == 0 && maxMs == 0 {
		minMs, maxMs = 5_000, 300_000
	}
	maxMs = max(maxMs, minMs)
	ms := min(minMs<<min(count-1, 10), maxMs)
	return time.Duration(ms) * time.Millisecond
}

// remaining returns how long e still blocks and whether that block is
// waitable. Entries written by the gate are enforced only while it is
// enabled; rule-declared provider cooldowns always are (§3.1).
func (e *windowGateEntry) remaining(cfg WindowGateConfig, now time.Time) (time.Duration, bool) {
	var (
		rem      time.Duration
		waitable = true
	)
	add := func(d time.Duration, w bool) {
		if d <= 0 {
			return
		}
		rem = max(rem, d)
		waitable = waitable && w
	}
	if e.connectionID == "" {
		add(e.ruleUntil.Sub(now), false)
		if cfg.Enabled {
			add(e.gateUntil.Sub(now), e.gateWaitable)
		}
	} else if cfg.Enabled && e.failureCount > 0 {
		add(e.lastEventAt.Add(windowConnCooldown(cfg, e.failureCount)).Sub(now), e.connWaitable)
	}
	return rem, rem > 0 && waitable
}

// inWindow drops failures at least failureWindowMs old and returns how many
// remain.
func (e *windowGateEntry) inWindow(p WindowProfile, now time.Time) int {
	window := time.Duration(p.FailureWindowMs) * time.Millisecond
	i := 0
	for i < len(e.failures) && now.Sub(e.failures[i]) >= window {
		i++
	}
	if i > 0 {
		e.failures = slices.Delete(e.failures, 0, i)
	}
	return len(e.failures)
}

// dead reports whether e holds nothing worth keeping: no running cooldown
// (enforced or not), nothing inside the failure window, and idle for the
// retention time.
func (g *WindowGate) dead(e *windowGateEntry, cfg WindowGateConfig, now time.Time) bool {
	if now.Before(e.ruleUntil) || now.Before(e.gateUntil) {
		return false
	}
	if e.connectionID != "" && e.failureCount > 0 && now.Sub(e.lastEventAt) < windowConnCooldown(cfg, e.failureCount) {
		return false
	}
	if e.connectionID == "" && e.inWindow(g.profileCfg(cfg, e.profile), now) > 0 {
		return false
	}
	retention := max(windowGateRetention, time.Duration(cfg.MaxRetryCooldownMs)*time.Millisecond)
	return now.Sub(e.lastEventAt) >= retention
}

// entryLocked returns the entry to write, starting afresh when the stored one
// is dead (lazy expiry: an idle connection's count does not outlive it).
func (g *WindowGate) entryLocked(cfg WindowGateConfig, now time.Time, provider, connectionID string, profile Profile) *windowGateEntry {
	key := windowGateKey(provider, connectionID)
	e := g.entries[key]
	if e == nil || g.dead(e, cfg, now) {
		e = &windowGateEntry{provider: provider, connectionID: connectionID}
		g.entries[key] = e
		g.live.Store(int64(len(g.entries)))
	}
	if profile != "" {
		e.profile = profile
	}
	return e
}

func (g *WindowGate) deleteLocked(key string) {
	delete(g.entries, key)
	g.live.Store(int64(len(g.entries)))
}

// RecordFinalFailure records the final failure of a combo target (after its
// connections were tried). connectionID is "" unless the target pinned a
// connection, in which case the connection-level entry is written instead of
// the provider-level one. perModelQuota500 marks a bare 500 on a
// perModelQuota provider, which never feeds the gate. Nothing happens while
// the gate is disabled or for reasons other than rate_limit,
// quota_exhausted, model_capacity, server_error and transient.
//
// A failure landing while its entry is already cooling changes nothing
// (episode rule, BD 3): it neither counts nor moves the deadline.
func (g *WindowGate) RecordFinalFailure(ctx context.Context, provider string, profile Profile, connectionID string, reason Reason, perModelQuota500 bool) error {
	feeds, waitable := windowGateTriggers(reason)
	if !feeds || perModelQuota500 {
		return nil
	}
	cfg := g.config()
	if !cfg.Enabled {
		return nil
	}
	if g.counter != nil && connectionID == "" {
		return g.recordShared(ctx, cfg, provider, profile, waitable)
	}
	g.recordFinalFailure(cfg, provider, profile, connectionID, waitable)
	return nil
}

func (g *WindowGate) recordFinalFailure(cfg WindowGateConfig, provider string, profile Profile, connectionID string, waitable bool) {
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.entryLocked(cfg, now, provider, connectionID, profile)
	if connectionID != "" {
		if e.failureCount > 0 && now.Sub(e.lastEventAt) < windowConnCooldown(cfg, e.failureCount) {
			return
		}
		e.failureCount++
		e.lastEventAt = now
		e.connWaitable = waitable
		return
	}
	if now.Before(e.gateUntil) {
		return
	}
	p := g.profileCfg(cfg, e.profile)
	e.lastEventAt = now
	e.failures = append(e.failures, now)
	if e.inWindow(p, now) >= p.FailureThreshold {
		e.gateUntil = now.Add(time.Duration(p.CooldownMs) * time.Millisecond)
		e.gateWaitable = waitable
		e.failures = e.failures[:0]
	}
}

// ProviderScope applies a rule with scope provider (§3.1): the provider-level
// entry cools for cooldownMs (the profile's cooldownMs when ≤ 0) from now,
// even with the gate disabled — the rule is the opt-in. It never shortens a
// running rule cooldown. Such a cooldown is not waitable, since the rule's
// reason is not known here.
func (g *WindowGate) ProviderScope(ctx context.Context, provider string, profile Profile, cooldownMs int64) error {
	cfg := g.config()
	now := g.clock.Now()
	g.mu.Lock()
	e := g.entryLocked(cfg, now, provider, "", profile)
	if cooldownMs <= 0 {
		cooldownMs = g.profileCfg(cfg, e.profile).CooldownMs
	}
	if until := now.Add(time.Duration(cooldownMs) * time.Millisecond); until.After(e.ruleUntil) {
		e.ruleUntil = until
	}
	e.lastEventAt = now
	g.mu.Unlock()
	if g.counter != nil {
		if _, err := g.counter.CloseProvider(ctx, provider, time.Duration(cooldownMs)*time.Millisecond); err != nil {
			return fmt.Errorf("resilience: shared window gate of %s: %w", provider, errors.Join(err, services.ErrUnavailable))
		}
	}
	return nil
}

// Success records a success on provider (through connectionID when the
// target pinned one, else ""). It empties the provider's failure window and
// zeroes the connection's count, which ends a connection-level cooldown; a
// running provider-level cooldown keeps its deadline.
func (g *WindowGate) Success(ctx context.Context, provider, connectionID string) error {
	if g.live.Load() == 0 {
		return nil
	}
	now := g.clock.Now()
	g.mu.Lock()
	shared := false
	if e := g.entries[provider]; e != nil {
		// The fleet's window holds failures this mirror knows of: a success
		// here empties it for every replica (after the lock: Block must
		// never wait for Redis).
		shared = g.counter != nil && len(e.failures) > 0
		e.failures = e.failures[:0]
		if !now.Before(e.gateUntil) && !now.Before(e.ruleUntil) {
			g.deleteLocked(provider) // nothing left to remember
		}
	}
	if connectionID != "" {
		key := windowGateKey(provider, connectionID)
		if g.entries[key] != nil {
			g.deleteLocked(key)
		}
	}
	g.mu.Unlock()
	if shared {
		if err := g.counter.ClearWindow(ctx, provider); err != nil {
			return fmt.Errorf("resilience: shared window gate of %s: %w", provider, errors.Join(err, services.ErrUnavailable))
		}
	}
	return nil
}

// Blocked reports whether the gate excludes a target of provider (pinning
// connectionID, or "") as provider_cooldown, and for how long. Expiry is lazy.
func (g *WindowGate) Blocked(provider, connectionID string) (blocked bool, retryAfter time.Duration) {
	b, ok := g.Block(provider, connectionID)
	return ok, b.RetryAfter
}

// Block is Blocked with the waitability of the block (20-resilience §9).
func (g *WindowGate) Block(provider, connectionID string) (WindowBlock, bool) {
	if g.live.Load() == 0 {
		return WindowBlock{}, false
	}
	cfg := g.config()
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	var (
		rem      time.Duration
		waitable = true
	)
	check := func(key string) {
		e := g.entries[key]
		if e == nil {
			return
		}
		if d, w := e.remaining(cfg, now); d > 0 {
			rem = max(rem, d)
			waitable = waitable && w
		}
	}
	check(provider)
	if connectionID != "" {
		check(windowGateKey(provider, connectionID))
	}
	if rem <= 0 {
		return WindowBlock{}, false
	}
	return WindowBlock{RetryAfter: rem, Waitable: waitable}, true
}

// Entries lists the entries that are cooling or hold failures, sorted by
// key. Dead entries met on the way are dropped.
func (g *WindowGate) Entries() []WindowGateStatus {
	cfg := g.config()
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]WindowGateStatus, 0, len(g.entries))
	for key, e := range g.entries {
		if g.dead(e, cfg, now) {
			g.deleteLocked(key)
			continue
		}
		rem, waitable := e.remaining(cfg, now)
		s := WindowGateStatus{Key: key, Provider: e.provider, ConnectionID: e.connectionID,
			RetryAfterMs: durationCeilMs(rem), Waitable: waitable}
		if e.connectionID == "" {
			s.FailuresInWindow = e.inWindow(g.profileCfg(cfg, e.profile), now)
		} else {
			s.FailuresInWindow = e.failureCount
		}
		if s.RetryAfterMs == 0 && s.FailuresInWindow == 0 {
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b WindowGateStatus) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// Clear drops every entry (POST /api/resilience/reset) and returns how many
// were cooling or held failures.
func (g *WindowGate) Clear(ctx context.Context) (int, error) {
	n := len(g.Entries())
	g.mu.Lock()
	clear(g.entries)
	g.live.Store(0)
	g.mu.Unlock()
	if g.counter != nil {
		if err := g.counter.ClearAll(ctx); err != nil {
			return n, fmt.Errorf("resilience: clear the shared window gate: %w", errors.Join(err, services.ErrUnavailable))
		}
	}
	return n, nil
}

// Sweep drops dead entries (lapsed and idle for max(30 min,
// maxRetryCooldownMs)) and returns how many it dropped. The app may call it
// every 60 s; correctness never depends on it.
func (g *WindowGate) Sweep() int {
	cfg := g.config()
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for key, e := range g.entries {
		if g.dead(e, cfg, now) {
			g.deleteLocked(key)
			n++
		}
	}
	return n
}
