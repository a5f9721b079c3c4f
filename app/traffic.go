package app

import (
	"context"
	"sync"
	"time"

	"switchyard/models"
	"switchyard/services/affinity"
	"switchyard/services/gateway"
	"switchyard/services/leases"
	"switchyard/services/traffic"
)

// wireTraffic builds the admission and placement mechanisms of the request
// path (the gateway is built on them next), ends the leases and the per-key
// state of a revoked key and deletes the stored state of a deleted
// connection.
func (s *Server) wireTraffic(ctx context.Context) error {
	svc := s.settingsSvc
	s.slots = traffic.NewSlots(func() traffic.SlotConfig { return traffic.SlotConfig(svc.Resilience().ConnectionConcurrency) })
	s.queues = traffic.NewQueues(s.clock, func() traffic.QueueConfig {
		q := svc.Resilience().RequestQueue
		return traffic.QueueConfig{RequestsPerMinute: q.RequestsPerMinute, MinTimeBetweenRequestsMs: q.MinTimeBetweenRequestsMs,
			ConcurrentRequests: q.ConcurrentRequests, MaxWaitMs: q.MaxWaitMs, MaxQueueDepth: q.MaxQueueDepth, QueueWaitMs: q.QueueWaitMs}
	})
	// Learned rate limits survive a restart (20-resilience §15): restored
	// here, written off the request path by the persister.
	s.queues.UseLearnedStore(models.NewLearnedRateLimitStore(s.db))
	if _, err := s.queues.LoadLearned(ctx); err != nil {
		return err
	}
	s.keyLimits = traffic.NewKeyLimits(s.clock)
	s.keyLimiter = s.keyLimits
	if s.redis != nil {
		// Per-key limits for the whole fleet; the local limiter answers
		// while Redis cannot.
		s.keyLimiter = s.redis.keyLimiter(s.keyLimits)
	}
	var pinStore affinity.Store = models.NewAffinityStore(s.db)
	if s.shared != nil {
		// A fleet writes pins off the request goroutine and shares them.
		s.shared.pinStore = affinity.NewSharedStore(pinStore, s.feed, s.storeErr("affinity_pin"))
		pinStore = s.shared.pinStore
	}
	s.pins = affinity.NewPins(s.clock, func() time.Duration { return svc.Resilience().SessionAffinity.TTL() }, pinStore)
	if s.shared != nil {
		s.shared.pinStore.Follow(s.pins)
	}
	if err := s.pins.Load(ctx); err != nil {
		return err
	}
	s.leases = leases.New(models.NewLeaseStore(s.db), s.clock)
	s.leases.Events = s.events
	if err := s.leases.Load(ctx); err != nil {
		return err
	}
	s.slotStore, s.rateStore = s.slots, s.queues
	if s.redis != nil {
		s.slotStore, s.rateStore = s.redis.limiters(s.slots, s.queues)
	}
	s.waiting = traffic.NewWaiting(s.clock)
	s.keys.OnStoreError(s.metrics.StoreError)
	s.keys.OnRevoke(func(ctx context.Context, keyID string) {
		if _, err := s.leases.InvalidateKey(ctx, keyID, leases.ReasonManagedKeyRevoked); err != nil {
			s.log.Error("invalidate leases of a revoked key", "key", keyID, "err", err)
		}
		s.keyLimiter.Forget(keyID)
	})
	// The stored state of a deleted connection is deleted here, once, by
	// the writer; memory-only state goes through the feed (wireFeed). The
	// connection is already gone, so a failed delete is counted and logged.
	s.conns.OnDelete(func(ctx context.Context, id string) {
		if _, err := s.leases.Invalidate(ctx, id, leases.ReasonConnectionIneligible); err != nil {
			s.log.Error("invalidate leases of a deleted connection", "connection", id, "err", err)
		}
		if _, err := s.pins.DropConnection(ctx, id); err != nil {
			s.metrics.StoreError("affinity_pin", err)
		}
		if err := s.resilience.ForgetConnection(ctx, id); err != nil {
			s.metrics.StoreError("model_lockouts", err)
		}
		if err := s.quota.Forget(ctx, id); err != nil {
			s.metrics.StoreError("quota_windows", err)
		}
	})
	tools, err := gateway.NewToolLimits(ctx, s.clock, models.NewToolLimitStore(s.db))
	if err != nil {
		return err
	}
	s.toolLimits = tools
	return nil
}

// learnedPersistTick is how often the persister looks for learned limits to
// store (wall time); each key is written at most once per
// traffic.PersistEvery on the queues' clock.
const learnedPersistTick = 10 * time.Second

// learnedPersister stores the request queues' learned limits on its own
// goroutine, so the request path only marks them changed.
type learnedPersister struct {
	q     *traffic.Queues
	onErr func(error)
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func startLearnedPersister(q *traffic.Queues, every time.Duration, onErr func(error)) *learnedPersister {
	p := &learnedPersister{q: q, onErr: onErr, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(every)
	return p
}

func (p *learnedPersister) run(every time.Duration) {
	defer close(p.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), every)
			if _, err := p.q.PersistLearned(ctx); err != nil {
				p.onErr(err)
			}
			cancel()
		case <-p.stop:
			return
		}
	}
}

// Close stops the loop and stores what is still unstored, whatever its age.
// It may be called again (the server's Close is).
func (p *learnedPersister) Close(ctx context.Context) error {
	p.once.Do(func() { close(p.stop) })
	<-p.done
	_, err := p.q.FlushLearned(ctx)
	return err
}
