package app

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"switchyard/models/redisstate"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// redisState holds what a replica runs when SWITCHYARD_REDIS_URL makes the
// live limits fleet-wide (scale-out §3.4 rows 3, 8, 9, 10): one Redis client
// with its breaker, and the shared implementations of the slot, queue,
// per-key and window-gate stores, each over this replica's in-memory one,
// which answers while Redis is unavailable (limits per replica then, each
// such decision counted in switchyard_shared_state_fallback_total).
type redisState struct {
	s       *Server
	client  *redisstate.Client
	replica string
	ttl     time.Duration

	slots  *redisstate.Slots
	queues *redisstate.Queues
	gate   *redisstate.WindowGate
	keys   *redisstate.KeyLimiter

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newRedisState(s *Server) (*redisState, error) {
	client, err := redisstate.New(s.cfg.RedisURL, redisstate.Options{CallTimeout: time.Duration(s.cfg.RedisTimeoutMs) * time.Millisecond})
	if err != nil {
		return nil, fmt.Errorf("SWITCHYARD_REDIS_URL: %w", err)
	}
	replica := s.cfg.ReplicaID
	if replica == "" {
		host, _ := os.Hostname()
		replica = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	r := &redisState{s: s, client: client, replica: replica, ttl: time.Duration(s.cfg.RedisGrantTTLMs) * time.Millisecond}
	if err := client.Ping(context.Background()); err != nil {
		// Start anyway: the limits hold per replica until Redis answers.
		s.log.Warn("Redis unreachable at start; limits are per replica until it answers", "err", err)
	}
	client.OnUp(func(context.Context) { s.log.Info("Redis answers again; limits are fleet-wide") })
	return r, nil
}

func (r *redisState) fallback(mechanism string) {
	r.s.metrics.sharedFallbacks.WithLabelValues(mechanism).Inc()
}

// limiters wraps the local slot gates and request queues in their shared
// implementations.
func (r *redisState) limiters(slots *traffic.Slots, queues *traffic.Queues) (traffic.SlotStore, traffic.RateStore) {
	svc := r.s.settingsSvc
	r.slots = redisstate.NewSlots(r.client, slots, redisstate.SlotsOptions{Replica: r.replica, GrantTTL: r.ttl,
		OnFallback: r.fallback,
		Config:     func() traffic.SlotConfig { return traffic.SlotConfig(svc.Resilience().ConnectionConcurrency) }})
	r.queues = redisstate.NewQueues(r.client, queues, redisstate.QueuesOptions{Replica: r.replica, GrantTTL: r.ttl,
		OnFallback: r.fallback})
	return r.slots, r.queues
}

// keyLimiter wraps the local per-key limiter in the shared one: a key's
// requestsPerMinute and maxConcurrentRequests hold for the whole fleet.
func (r *redisState) keyLimiter(local *traffic.KeyLimits) traffic.KeyLimiter {
	r.keys = redisstate.NewKeyLimiter(redisstate.NewKeyLimits(r.client, "", r.replica, r.ttl), local, r.fallback)
	return r.keys
}

// shareWindowGate makes gate count provider-level failures fleet-wide.
func (r *redisState) shareWindowGate(gate *resilience.WindowGate) {
	r.gate = redisstate.NewWindowGate(r.client, "", r.replica, gate)
	gate.UseCounter(r.gate)
}

// reserved sums what this replica holds in reserve of the fleet's limits.
func (r *redisState) reserved() redisstate.ReserveStats {
	var st redisstate.ReserveStats
	if r.slots != nil {
		st = st.Add(r.slots.Reserved())
	}
	if r.queues != nil {
		st = st.Add(r.queues.Reserved())
	}
	if r.keys != nil {
		st = st.Add(r.keys.Reserved())
	}
	return st
}

// Degraded reports whether the limits are per replica right now.
func (r *redisState) Degraded() bool { return r.client.Degraded() }

func (r *redisState) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	// Releases leave the request path: sent in pipelined batches.
	r.wg.Go(func() { r.client.RunReleaser(ctx) })
	if r.slots != nil {
		r.wg.Go(func() { r.slots.Run(ctx) })
	}
	if r.queues != nil {
		r.wg.Go(func() { r.queues.Run(ctx) })
	}
	if r.gate != nil {
		r.wg.Go(func() { r.gate.Run(ctx) })
	}
	if r.keys != nil {
		r.wg.Go(func() { r.keys.Run(ctx) })
	}
	// A probe while degraded: the breaker lets one call through after it
	// opened, so Redis coming back is noticed without traffic.
	r.wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if r.client.Degraded() {
					_ = r.client.Ping(ctx)
				}
			}
		}
	})
}

func (r *redisState) stop() {
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
	}
	r.client.Close()
}
