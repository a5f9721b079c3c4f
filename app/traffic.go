package app

import (
	"context"
	"time"

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
		_ = s.resilience.ForgetConnection(ctx, id)
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
