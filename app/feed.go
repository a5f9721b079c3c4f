package app

import (
	"context"
	"fmt"

	"switchyard/services"
)

// newFeed is the in-process change feed: writers publish on it after each
// committed admin write, and every cache of config or settings follows it
// (wireFeed). A cache that cannot apply a change is logged and counted in
// switchyard_change_feed_errors_total{kind}; the writer gets the error too.
func newFeed(s *Server) *services.LocalFeed {
	return services.NewLocalFeed(func(c services.Change, err error) {
		s.metrics.feedErrors.WithLabelValues(string(c.Kind)).Inc()
		s.log.Error("cache not refreshed after a change", "change", c.String(), "err", err)
	})
}

// wireFeed subscribes the caches the app assembles. The services subscribe
// their own: the catalogue follows ChangeCatalogue (services.Connections),
// the key index ChangeKey (services.Keys), the settings documents
// ChangeSettings (settings.Document.Follow). Subscription order is
// delivery order, and those come first, so the snapshot below is rebuilt
// from a fresh catalogue.
//
//	connection → memory state of a deleted connection dropped, then the
//	             gateway snapshot rebuilt
//	combo      → the gateway snapshot rebuilt, routing state of vanished combos dropped
//	catalogue  → the gateway snapshot rebuilt
//	key        → the per-key limiter state of a deleted key dropped
//	settings   → the request queues apply the new global requestQueue settings
//
// Stored state of a deleted connection (leases, pins, lockouts, quota
// windows) is deleted once, by the writer, in the Connections.OnDelete hook
// (wireTraffic); the feed only carries what every process must drop from
// memory (cooldown state, dispatch statistics).
func (s *Server) wireFeed() {
	s.feed.Subscribe(services.ChangeConnection, func(_ context.Context, c services.Change) error {
		if c.Payload == services.ChangeDeleted && c.Key != "" {
			s.resilience.DropConnection(c.Key)
			s.gateway.ForgetConnection(c.Key)
		}
		return nil
	})
	for _, kind := range []services.ChangeKind{services.ChangeConnection, services.ChangeCombo, services.ChangeCatalogue} {
		s.feed.Subscribe(kind, s.reloadSnapshot)
	}
	// A deleted key's per-key limiter state goes with it, on every replica
	// (a revoked one is dropped by the writer's revoke hook, and anywhere
	// else once idle: it cannot authenticate any more).
	s.feed.Subscribe(services.ChangeKey, func(_ context.Context, c services.Change) error {
		if c.Payload == services.ChangeDeleted && c.Key != "" {
			s.keyLimiter.Forget(c.Key)
		}
		return nil
	})
	s.feed.Subscribe(services.ChangeSettings, func(_ context.Context, c services.Change) error {
		if c.Key == "" || c.Key == services.SettingsResilience {
			s.queues.Reconfigure()
		}
		return nil
	})
}

// reloadSnapshot rebuilds the gateway's routing snapshot; a combo gone from
// it takes its routing state (its LKGP record included) with it.
func (s *Server) reloadSnapshot(ctx context.Context, _ services.Change) error {
	reg := s.gateway.Registry()
	before := reg.Snapshot()
	if err := reg.Reload(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("reload routing snapshot: %w", err)
	}
	after := reg.Snapshot()
	for _, c := range before.Combos() {
		if _, ok := after.ComboByID(c.ID); !ok {
			s.routeState.Forget(c.ID)
			s.gateway.ForgetCombo(c.ID)
		}
	}
	return nil
}
