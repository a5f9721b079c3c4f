package app

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"switchyard/migrations"
	"switchyard/services/health"
)

// healthPingTimeout bounds the database ping of one health report.
const healthPingTimeout = time.Second

// emergencyResolves reports whether the emergency-fallback target names
// something routable now, read from the routing snapshot in memory (the
// report must not need the database): an enabled combo, or a provider of
// the catalogue with a model.
func (s *Server) emergencyResolves(target string) bool {
	if target == "" {
		return false
	}
	snap := s.gateway.Registry().Snapshot()
	for _, c := range snap.Combos() {
		if c.Enabled && strings.EqualFold(c.Name, target) {
			return true
		}
	}
	p, m, ok := strings.Cut(target, "/")
	if !ok || m == "" {
		return false
	}
	_, known := snap.Catalogue.Lookup(p)
	return known
}

// healthCache builds the admin report at most once per second.
type healthCache struct {
	mu    sync.Mutex
	at    time.Time
	value health.Report
}

// HealthReport builds the health report of GET /api/monitoring/health and
// the Health page: the database and process measured here, the resilience
// sections from the read model.
func (s *Server) HealthReport(ctx context.Context) health.Report {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	now := s.clock.Now()
	if !s.health.at.IsZero() && now.Sub(s.health.at) < time.Second && s.health.value.Version != "" {
		return s.health.value
	}
	dbPath := filepath.Join(s.cfg.DataDir, "switchyard.db")
	db := health.Database{Path: dbPath, SchemaVersion: strings.TrimSuffix(migrations.Latest(), ".sql")}
	if s.cfg.Shared() {
		db.Path = ""
	}
	start := time.Now()
	// Bounded: an unreachable server must not hold the report (and every
	// probe waiting on its cache) for the pool's connect timeout.
	pctx, cancel := context.WithTimeout(ctx, healthPingTimeout)
	if sqlDB, err := s.db.DB(); err == nil && sqlDB.PingContext(pctx) == nil {
		db.OK = true
		db.PingMs = float64(time.Since(start).Microseconds()) / 1000
	}
	cancel()
	if fi, err := os.Stat(dbPath + "-wal"); err == nil && !s.cfg.Shared() {
		db.WalBytes = fi.Size()
	}
	var feed *health.ChangeFeedFacts
	if s.shared != nil {
		f := s.shared.feed
		feed = &health.ChangeFeedFacts{Connected: f.Connected(), LastResync: f.LastResync(), Reconnects: f.Reconnects()}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := s.logWriter.Stats()
	f := health.Facts{Now: now, StartedAt: s.startedAt, Version: Version, KeyID: s.keyring.KeyID(),
		Listen: s.listenAddr.Load().(string), Demo: s.cfg.Demo, Database: db,
		Ready: s.ready.Load(), Feed: feed,
		Runtime:    health.Runtime{GoVersion: runtime.Version(), Goroutines: runtime.NumGoroutine(), HeapInuseBytes: ms.HeapInuse},
		RequestLog: health.RequestLog{QueueDepth: st.QueueDepth, Dropped: st.Dropped}, Resilience: s.status.Snapshot(),
		Shared: s.sharedFacts()}
	if s.leases != nil {
		f.ActiveLeases = len(s.leases.Active())
	}
	if s.pins != nil {
		f.Pins = s.pins.Count()
	}
	if s.queues != nil {
		f.Queues = s.queues.Totals()
	}
	if s.slots != nil {
		f.Slots = s.slots.Totals()
	}
	if s.toolLimits != nil {
		f.ToolLimits = s.toolLimits.All()
	}
	if s.waiting != nil {
		f.Waiting = s.waiting.Counts()
	}
	f.Emergency = s.settingsSvc.Resilience().EmergencyFallback
	f.EmergencyResolves = s.emergencyResolves(f.Emergency.Target)
	r := health.Build(f)
	s.health.at, s.health.value = now, r
	return r
}

// sharedFacts is the shared-state section of the health report.
func (s *Server) sharedFacts() health.Shared {
	if !s.cfg.Shared() {
		return health.Shared{Mode: health.ModeEmbedded, Redis: health.RedisOff, Limits: health.LimitsPerReplica}
	}
	f := health.Shared{Mode: health.ModeShared, Redis: health.RedisOff, Limits: health.LimitsPerReplica}
	if s.shared != nil {
		f.Replica = s.shared.replica
	}
	if s.redis != nil {
		f.Redis, f.Limits = health.RedisUp, health.LimitsFleet
		if s.redis.Degraded() {
			f.Redis, f.Limits = health.RedisDegraded, health.LimitsPerReplica
		}
		st := s.redis.reserved()
		f.Reserves = &health.Reserves{SpareGrants: st.SpareGrants, BlockTokens: st.BlockTokens}
	}
	return f
}
