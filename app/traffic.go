package app

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/affinity"
	"switchyard/services/gateway"
	"switchyard/services/leases"
	"switchyard/services/traffic"
)

// wireTraffic builds the admission and placement mechanisms and installs
// them in the gateway.
func (s *Server) wireTraffic(ctx context.Context) error {
	svc := s.settingsSvc
	s.slots = traffic.NewSlots(func() traffic.SlotConfig { return traffic.SlotConfig(svc.Resilience().ConnectionConcurrency) })
	s.queues = traffic.NewQueues(s.clock, func() traffic.QueueConfig {
		q := svc.Resilience().RequestQueue
		return traffic.QueueConfig{RequestsPerMinute: q.RequestsPerMinute, MinTimeBetweenRequestsMs: q.MinTimeBetweenRequestsMs,
			ConcurrentRequests: q.ConcurrentRequests, MaxWaitMs: q.MaxWaitMs, MaxQueueDepth: q.MaxQueueDepth, QueueWaitMs: q.QueueWaitMs}
	})
	s.pins = affinity.NewPins(s.clock, func() time.Duration { return svc.Resilience().SessionAffinity.TTL() }, models.NewAffinityStore(s.db))
	if err := s.pins.Load(ctx); err != nil {
		return err
	}
	s.leases = leases.New(models.NewLeaseStore(s.db), s.clock)
	if err := s.leases.Load(ctx); err != nil {
		return err
	}
	s.gateway.SetTraffic(&gateway.Traffic{Slots: s.slots, Queues: s.queues, Pins: s.pins, Leases: s.leases, Doc: svc.Resilience})
	s.gateway.SetWatchdog(func() (gateway.WatchdogConfig, int) {
		sr := svc.Resilience().StreamRecovery
		w := sr.ThroughputWatchdog
		return gateway.WatchdogConfig{Enabled: w.Enabled, Warmup: time.Duration(w.WarmupMs) * time.Millisecond,
			Window: time.Duration(w.WindowMs) * time.Millisecond, MinUsefulBytesPerSecond: w.MinUsefulBytesPerSecond,
			MinUsefulBytes: w.MinUsefulBytes}, sr.EarlyRetryMax
	})
	s.keys.OnRevoke(func(ctx context.Context, keyID string) {
		if _, err := s.leases.InvalidateKey(ctx, keyID, leases.ReasonManagedKeyRevoked); err != nil {
			s.log.Error("invalidate leases of a revoked key", "key", keyID, "err", err)
		}
	})
	s.conns.OnDelete(func(ctx context.Context, id string) {
		if _, err := s.leases.Invalidate(ctx, id, leases.ReasonConnectionIneligible); err != nil {
			s.log.Error("invalidate leases of a deleted connection", "connection", id, "err", err)
		}
		_, _ = s.pins.DropConnection(ctx, id)
		_ = s.resilience.Lockouts.ForgetConnection(ctx, id)
		s.resilience.Cooldowns.Forget(id)
		s.gateway.ForgetConnection(id)
		_ = s.quota.Forget(ctx, id)
	})
	tools, err := gateway.NewToolLimits(ctx, s.clock, models.NewToolLimitStore(s.db))
	if err != nil {
		return err
	}
	s.toolLimits = tools
	s.gateway.SetToolLimits(tools)
	return nil
}

// leaseCandidates lists the key's allowed connections of provider that could
// serve model right now (enabled, not terminal, not cooling, not locked).
func (s *Server) leaseCandidates(key services.APIKey, provider, model string) []string {
	var out []string
	for _, c := range s.gateway.Registry().Snapshot().Connections(provider) {
		if !c.Enabled || !key.AllowsConnection(c.ID) {
			continue
		}
		if s.resilience.ConnectionBlocker(provider, c.ID, model) != nil {
			continue
		}
		out = append(out, c.ID)
	}
	return out
}

// concurrencyRoutes registers GET /api/concurrency and its reset (40-admin-api §4.2).
func (s *Server) concurrencyRoutes(g *echo.Group) {
	g.GET("/concurrency", func(c echo.Context) error {
		snap := s.gateway.Registry().Snapshot()
		queues := []traffic.QueueStats{}
		for _, q := range s.queues.Stats() {
			if cn, ok := snap.Connection(q.ConnectionID); ok && protectedConn(cn, s) {
				queues = append(queues, q)
			}
		}
		type slotJSON struct {
			traffic.SlotStats
			Provider string `json:"provider"`
		}
		slots := []slotJSON{}
		for _, st := range s.slots.Stats() {
			p := ""
			if cn, ok := snap.Connection(st.ConnectionID); ok {
				p = cn.Provider
			}
			slots = append(slots, slotJSON{SlotStats: st, Provider: p})
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, map[string]any{"queues": queues, "slots": slots})
	})
	g.POST("/concurrency/reset", func(c echo.Context) error {
		var in struct {
			Target       string `json:"target"`
			ConnectionID string `json:"connectionId"`
		}
		if err := c.Bind(&in); err != nil {
			return services.Invalid("target", "Send {\"target\": \"slots\" | \"queues\" | \"all\"}.")
		}
		if in.Target != "slots" && in.Target != "queues" && in.Target != "all" {
			return services.Invalid("target", "Use slots, queues or all.")
		}
		out := map[string]int{"slotsReset": 0, "queuesReset": 0}
		if in.Target != "queues" {
			if in.ConnectionID != "" {
				out["slotsReset"] = s.slots.ResetConnection(in.ConnectionID)
			} else {
				out["slotsReset"] = s.slots.Reset()
			}
		}
		if in.Target != "slots" {
			if in.ConnectionID != "" {
				out["queuesReset"] = s.queues.ResetConnection(in.ConnectionID)
			} else {
				out["queuesReset"] = s.queues.Reset()
			}
		}
		s.log.Info("audit", "actor", handlers.Actor(c), "action", "concurrency.reset", "target", in.Target)
		return c.JSON(http.StatusOK, out)
	})
}

func protectedConn(c *services.Connection, s *Server) bool {
	if c.RateLimitProtection != nil {
		return *c.RateLimitProtection
	}
	return s.settingsSvc.Resilience().RequestQueue.AutoEnableApiKeyProviders && c.AuthClass == services.AuthAPIKey
}

type leaseJSON struct {
	ID             string            `json:"id"`
	APIKey         map[string]string `json:"apiKey"`
	Provider       string            `json:"provider"`
	ConnectionID   string            `json:"connectionId"`
	ConnectionName string            `json:"connectionName"`
	Generation     int64             `json:"generation"`
	State          string            `json:"state"`
	AcquiredAt     string            `json:"acquiredAt"`
	RenewedAt      string            `json:"renewedAt"`
	ExpiresAt      string            `json:"expiresAt"`
	RemainingMs    int64             `json:"remainingMs"`
}

// leaseRoutes registers the lease and affinity admin routes (40-admin-api §3).
// Only active leases are listed; ended rows stay in the database for audit.
func (s *Server) leaseRoutes(g *echo.Group) {
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	g.GET("/resilience/leases", func(c echo.Context) error {
		if st := c.QueryParam("state"); st != "" && st != "active" && st != "all" {
			return services.Invalid("state", "Use active or all.")
		}
		now := s.clock.Now()
		snap := s.gateway.Registry().Snapshot()
		items := []leaseJSON{}
		for _, l := range s.leases.Active() {
			k, _ := s.keys.Get(c.Request().Context(), l.KeyID)
			name := ""
			if cn, ok := snap.Connection(l.ConnectionID); ok {
				name = cn.Name
			}
			items = append(items, leaseJSON{ID: l.ID, APIKey: map[string]string{"id": k.ID, "name": k.Name, "prefix": k.Prefix},
				Provider: l.Provider, ConnectionID: l.ConnectionID, ConnectionName: name, Generation: l.Generation, State: string(l.State),
				AcquiredAt: iso(l.AcquiredAt), RenewedAt: iso(l.RenewedAt), ExpiresAt: iso(l.ExpiresAt), RemainingMs: l.ExpiresAt.Sub(now).Milliseconds()})
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, map[string]any{"items": items, "nextCursor": nil})
	})
	g.DELETE("/resilience/leases/:id", func(c echo.Context) error {
		for _, l := range s.leases.Active() {
			if l.ID == c.Param("id") {
				if _, err := s.leases.Invalidate(c.Request().Context(), l.ConnectionID, leases.ReasonAdminEnded); err != nil {
					return err
				}
				s.log.Info("audit", "actor", handlers.Actor(c), "action", "lease.end", "id", l.ID)
				return c.JSON(http.StatusOK, map[string]string{"id": l.ID, "state": "invalidated", "endReason": leases.ReasonAdminEnded})
			}
		}
		return services.ErrNotFound
	})
	g.DELETE("/resilience/affinity", func(c echo.Context) error {
		n := s.pins.Count()
		if err := s.pins.Clear(c.Request().Context()); err != nil {
			return err
		}
		s.log.Info("audit", "actor", handlers.Actor(c), "action", "affinity.clear")
		return c.JSON(http.StatusOK, map[string]int{"pinsCleared": n})
	})
}
