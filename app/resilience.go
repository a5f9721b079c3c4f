package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"switchyard/models"
	"switchyard/services"
	"switchyard/services/resilience"
)

// wireResilience builds the resilience state machines over their SQLite
// stores, reading their configs from the resilience settings document, and
// restores persisted state.
func (s *Server) wireResilience(ctx context.Context) error {
	svc := s.settingsSvc
	log := s.log.With("component", "resilience")
	breakers := resilience.NewBreakers(s.clock, svc.BreakerConfig, models.NewBreakerStore(s.db), log)
	if err := breakers.Restore(ctx); err != nil {
		return fmt.Errorf("restore breakers: %w", err)
	}
	cooldowns := resilience.NewCooldowns(s.clock, svc.CooldownConfig, models.NewConnectionStateStore(s.db), log)
	if err := cooldowns.Load(ctx); err != nil {
		return fmt.Errorf("load connection state: %w", err)
	}
	resetAfter := func(provider string) time.Duration {
		profile := services.AuthAPIKey
		if p, ok := s.catalogue.Get().Get(provider); ok {
			profile = p.AuthClass
		}
		if bp, ok := svc.BreakerConfig()[profile]; ok && bp.ResetTimeoutMs > 0 {
			return time.Duration(bp.ResetTimeoutMs) * time.Millisecond
		}
		return 30 * time.Second
	}
	lockouts := resilience.NewLockouts(s.clock, svc.LockoutConfig, resetAfter, models.NewLockoutStore(s.db), log)
	lockouts.MaxRetryHint = svc.MaxRetryHint
	if err := lockouts.Load(ctx); err != nil {
		return fmt.Errorf("load model lockouts: %w", err)
	}
	warn := func(msg string, args ...any) { log.Warn(msg, args...) }
	classifier := resilience.NewClassifier(svc.OperatorRules, svc.MaxRetryHint, s.clock.Now, warn)
	gate := resilience.NewWindowGate(s.clock, svc.WindowGateConfig)
	if s.redis != nil {
		s.redis.shareWindowGate(gate)
	}
	s.resilience = resilience.NewEngine(s.clock, classifier, breakers, gate, cooldowns, lockouts, svc.Resilience, svc.EgressLockConfig)
	// The transitions this replica decides from now on go to the Runtime
	// page's Recent events (restored state is not an event).
	s.resilience.SetEvents(s.events)
	// Decisions go through the store's compare-and-set and out on the change
	// feed in both modes; in a fleet the feed brings the other replicas'
	// decisions to these mirrors, and probes held by other replicas survive
	// this one's restart.
	breakers.Fleet = s.cfg.Shared()
	s.resilience.UseFeed(s.feed)
	s.resilience.Hooks = resilience.EngineHooks{
		Cooldown:   func(p string, r resilience.Reason) { s.metrics.cooldownsApplied.WithLabelValues(p, string(r)).Inc() },
		Lockout:    func(p string, r resilience.Reason) { s.metrics.lockoutsApplied.WithLabelValues(p, string(r)).Inc() },
		EgressLock: func(p string) { s.metrics.egressLocks.WithLabelValues(p).Inc() },
		StoreError: s.metrics.StoreError,
	}
	// New credentials clear a terminal state (BD 4); deleted connections
	// take their state with them.
	s.conns.OnCredentialsChanged(func(ctx context.Context, id string) {
		if err := cooldowns.Reset(ctx, id); err != nil {
			log.Error("reset connection state after new credentials", "connection", id, "err", err)
		}
	})
	return nil
}

// resolveTarget checks an emergency-fallback target names something routable.
func (s *Server) resolveTarget(ctx context.Context, target string) error {
	list, err := s.combos.List(ctx)
	if err != nil {
		return err
	}
	for _, c := range list {
		if c.Enabled && strings.EqualFold(c.Name, target) {
			return nil
		}
	}
	if p, m, ok := strings.Cut(target, "/"); ok && m != "" {
		if _, ok := s.catalogue.Get().Lookup(p); ok {
			return nil
		}
	}
	return fmt.Errorf("no enabled combo or known provider/model named %q", target)
}

// flushResilience stops the periodic flush and writes what the decisions
// deferred (diagnostics, breaker leaks, rows applied locally) at shutdown.
func (s *Server) flushResilience(log *slog.Logger) {
	s.decisions.Close()
	if s.resilience == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.resilience.Flush(ctx); err != nil {
		log.Warn("resilience decisions not written at shutdown", "err", err)
	}
}
