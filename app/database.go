package app

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"gorm.io/gorm"

	"switchyard/models"
	"switchyard/services"
)

// startupDBWait bounds how long a replica waits at start for a shared
// database that does not answer: long enough for a database and its
// replicas started together (an orchestrator brings them up in any order),
// short enough that a wrong URL fails the deployment visibly.
const startupDBWait = 30 * time.Second

// maxClockSkew is the replica-to-database clock difference above which the
// start-up check warns: cooldowns, lockouts and leases are absolute instants
// written by one replica and read by the others, so skew shifts every
// cross-replica deadline by its size.
const maxClockSkew = 250 * time.Millisecond

// openDatabase opens the embedded SQLite file, or the shared PostgreSQL
// database when the configuration names one. The latter is retried with
// backoff for up to startupDBWait while it cannot be reached, each attempt
// logged, and its clock is compared with ours.
func openDatabase(ctx context.Context, cfg Config, clock services.Clock, log *slog.Logger) (*gorm.DB, error) {
	if !cfg.Shared() {
		return models.Open(ctx, filepath.Join(cfg.DataDir, "switchyard.db"), clock.Now)
	}
	deadline := clock.Now().Add(startupDBWait)
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		db, err := models.OpenPostgres(ctx, cfg.DatabaseURL, clock.Now, models.PostgresOptions{MaxOpenConns: cfg.DatabasePool})
		if err == nil {
			checkClockSkew(ctx, db, clock, log)
			return db, nil
		}
		if !models.IsUnavailable(err) || !clock.Now().Add(backoff).Before(deadline) {
			return nil, fmt.Errorf("database (SWITCHYARD_DATABASE_URL): %w", err)
		}
		log.Warn("shared database unreachable at start; retrying", "attempt", attempt,
			"retry_in_ms", backoff.Milliseconds(), "gives_up_in_ms", deadline.Sub(clock.Now()).Milliseconds(), "err", err)
		if err := clock.Wait(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(backoff*2, 4*time.Second)
	}
}

// checkClockSkew warns when this replica's clock and the database's differ by
// more than maxClockSkew (half the query's round trip is allowed for).
func checkClockSkew(ctx context.Context, db *gorm.DB, clock services.Clock, log *slog.Logger) {
	before := clock.Now()
	var dbNow time.Time
	if err := db.WithContext(ctx).Raw(`SELECT clock_timestamp()`).Scan(&dbNow).Error; err != nil {
		log.Warn("clock skew check failed", "err", err)
		return
	}
	after := clock.Now()
	mid := before.Add(after.Sub(before) / 2)
	skew := dbNow.Sub(mid)
	if skew.Abs() > maxClockSkew {
		log.Warn("this replica's clock differs from the database's; cross-replica cooldowns, lockouts and leases shift by the difference (run NTP on every host)",
			"skew_ms", skew.Milliseconds(), "limit_ms", maxClockSkew.Milliseconds())
	}
}
