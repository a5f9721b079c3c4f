package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"switchyard/models"
	"switchyard/services"
	"switchyard/services/affinity"
	"switchyard/services/routing"
)

// sharedState is what a replica of a fleet runs besides the embedded mode's
// components: the PostgreSQL change feed (LISTEN/NOTIFY, resync on every
// reconnect, version poll) through which every replica's caches follow the
// admin writes made on any of them, the background writers of the session
// state it shares (pins, LKGP records), and the singleton jobs. nil in
// embedded mode.
//
// What each replica shares through the feed besides config and settings
// (scale-out §3.4), and how:
//
//	lease         every write published; the others re-read the active rows;
//	              Check reads through to the store before refusing
//	pin           written off the request goroutine (touches ≤ 1/min), the
//	              pin published and applied; Lookup stays a mirror read
//	lkgp          written off the request goroutine, coalesced per combo
//	quota         a gate-relevant change written at once, every write
//	              published and applied; Gate stays a mirror read
//	toollimit     published once learned (or cleared)
//	handoff       published; re-read on notice, read through on a miss;
//	              summaries claimed in the store
//	learnedlimit  published with its debounced write
type sharedState struct {
	feed    *models.PGFeed
	replica string
	log     *slog.Logger

	pinStore  *affinity.SharedStore
	lkgpStore *routing.SharedLKGPStore
	locks     *models.JobLocks
	jobs      []singletonJob

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newSharedState(s *Server) *sharedState {
	replica := s.cfg.ReplicaID
	if replica == "" {
		host, _ := os.Hostname()
		replica = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if s.cfg.RedisURL == "" {
		s.log.Warn("limits are per replica: max_concurrent slots, per-key limits, the request queue and the window gate are counted by each replica, so with N replicas a limit admits up to N times as much; set SWITCHYARD_REDIS_URL to count them across the fleet")
	}
	return &sharedState{
		replica: replica,
		log:     s.log.With("component", "shared-state"),
		feed:    models.NewPGFeed(s.db, s.cfg.DatabaseURL, replica, s.localFeed, s.log.With("component", "change-feed")),
		locks:   models.NewJobLocks(s.db),
	}
}

// storeErr reports a failed write or publish of shared state under
// mechanism (switchyard_store_errors_total): memory keeps the state.
func (s *Server) storeErr(mechanism string) func(error) {
	return func(err error) { s.metrics.StoreError(mechanism, err) }
}

// wireShared joins the remaining caches to the fleet once every component
// exists (the pin and LKGP stores were wrapped where they were built). It
// runs before the feed starts, so the first resync reaches them all.
func (s *Server) wireShared() {
	sh := s.shared
	s.leases.Share(models.NewLeaseStore(s.db), s.feed, s.storeErr("exclusive_leases"))
	s.toolLimits.Share(s.feed, s.storeErr("learned_tool_limits"))
	s.gateway.ShareHandoffs(models.NewHandoffStore(s.db), s.feed, s.storeErr("context_handoffs"))
	s.queues.ShareLearned(s.feed, s.storeErr("learned_rate_limits"))
	// A connection deleted through another replica takes its pins out of
	// this mirror too (the writer deleted the rows).
	s.feed.Subscribe(services.ChangeConnection, func(_ context.Context, c services.Change) error {
		if c.Origin != "" && c.Key != "" && c.Payload == services.ChangeDeleted {
			s.pins.ForgetConnection(c.Key)
		}
		return nil
	})
	sh.jobs = s.singletonJobs()
}

// Periods of the singleton jobs.
const (
	sweepEvery       = affinity.SweepInterval // 5 min (20-resilience §5)
	leaseExpireEvery = time.Minute
)

// singletonJobs are the fleet's housekeeping, each run by one replica at a
// time (models.JobLocks). None is needed for correctness: reads treat
// expired rows as gone; the jobs keep tables and memory small.
func (s *Server) singletonJobs() []singletonJob {
	handoffs, tools := models.NewHandoffStore(s.db), models.NewToolLimitStore(s.db)
	return []singletonJob{
		{name: "pins_sweep", every: sweepEvery,
			run: func(ctx context.Context) error { _, err := s.pins.Sweep(ctx); return err },
			// The other replicas drop expired pins from memory only.
			others: func() { s.pins.Prune() }},
		{name: "handoffs_sweep", every: sweepEvery,
			run: func(ctx context.Context) error {
				_, err := handoffs.DeleteExpiredHandoffs(ctx, s.clock.Now())
				return err
			}},
		{name: "tool_limits_sweep", every: sweepEvery,
			run: func(ctx context.Context) error {
				_, err := tools.DeleteExpiredToolLimits(ctx, s.clock.Now())
				return err
			}},
		{name: "lockouts_sweep", every: sweepEvery,
			run: func(ctx context.Context) error { _, err := s.resilience.Lockouts.Sweep(ctx); return err }},
		{name: "lease_expire", every: leaseExpireEvery,
			run: func(ctx context.Context) error { _, err := s.leases.Expire(ctx); return err }},
	}
}

// start runs the background loops until stop.
func (sh *sharedState) start() {
	ctx, cancel := context.WithCancel(context.Background())
	sh.cancel = cancel
	sh.wg.Go(func() { sh.feed.Run(ctx) })
	for _, j := range sh.jobs {
		sh.wg.Go(func() { runSingleton(ctx, sh.locks, j, sh.log) })
	}
}

// stop ends the loops, writes what the background writers still hold and
// releases the job locks, so another replica takes the jobs over.
func (sh *sharedState) stop() {
	if sh.cancel != nil {
		sh.cancel()
		sh.wg.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if sh.pinStore != nil {
		if err := sh.pinStore.Close(ctx); err != nil {
			sh.log.Warn("pins not written at shutdown", "err", err)
		}
	}
	if sh.lkgpStore != nil {
		if err := sh.lkgpStore.Close(ctx); err != nil {
			sh.log.Warn("LKGP records not written at shutdown", "err", err)
		}
	}
	if err := sh.locks.Close(ctx); err != nil {
		sh.log.Warn("job locks not released at shutdown; they go with the connection", "err", err)
	}
}

// singletonJob is one housekeeping task of the fleet.
type singletonJob struct {
	name  string
	every time.Duration
	run   func(ctx context.Context) error
	// others, when set, runs on the replicas that do not hold the job.
	others func()
}

// jobLocker elects the replica that runs a job (models.JobLocks).
type jobLocker interface {
	Holds(ctx context.Context, job string) (bool, error)
}

// runSingleton runs j every j.every on the replica that holds its lock,
// until ctx ends. A replica that cannot ask (the database is down) skips
// the tick.
func runSingleton(ctx context.Context, locks jobLocker, j singletonJob, log *slog.Logger) {
	t := time.NewTicker(j.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runOnce(ctx, locks, j, log)
	}
}

func runOnce(ctx context.Context, locks jobLocker, j singletonJob, log *slog.Logger) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	mine, err := locks.Holds(lctx, j.name)
	cancel()
	switch {
	case err != nil:
		log.Warn("singleton job skipped: its lock cannot be asked for", "job", j.name, "err", err)
	case mine:
		rctx, cancel := context.WithTimeout(ctx, j.every)
		if err := j.run(rctx); err != nil {
			log.Warn("singleton job failed", "job", j.name, "err", err)
		}
		cancel()
	case j.others != nil:
		j.others()
	}
}
