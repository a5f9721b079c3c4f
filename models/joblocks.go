package models

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"gorm.io/gorm"
)

// JobLocks elects, per singleton job, the one replica of a fleet that runs
// it (the expiry sweeps of pins, handoffs and tool limits, the lockout
// sweep, the lease expiry; scale-out §3.4): the replica holding the job's
// session-level advisory lock, pg_try_advisory_lock(hashtext(
// 'switchyard_job:<job>')). The locks live on one connection this replica
// keeps out of the pool for the purpose; when it dies — the replica was
// killed, or the network cut it — PostgreSQL releases them, and the next
// replica to ask takes over. Correctness never depends on the jobs: every
// read judges expiry by itself.
type JobLocks struct {
	db *gorm.DB

	mu   sync.Mutex
	conn *sql.Conn
	held map[string]bool
}

// NewJobLocks returns the elector of a PostgreSQL store.
func NewJobLocks(db *gorm.DB) *JobLocks { return &JobLocks{db: db, held: map[string]bool{}} }

// Holds reports whether this replica holds job's lock now, taking it when
// it is free. A lost connection loses every lock it held; the next call
// opens another and asks again.
func (j *JobLocks) Holds(ctx context.Context, job string) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.conn != nil {
		if err := j.conn.PingContext(ctx); err != nil {
			j.dropLocked()
		}
	}
	if j.conn == nil {
		sqlDB, err := j.db.DB()
		if err != nil {
			return false, err
		}
		c, err := sqlDB.Conn(ctx)
		if err != nil {
			return false, translate(err, "job lock connection")
		}
		j.conn = c
	}
	if j.held[job] {
		return true, nil
	}
	var ok bool
	if err := j.conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, "switchyard_job:"+job).Scan(&ok); err != nil {
		j.dropLocked()
		return false, translate(err, fmt.Sprintf("job lock %s", job))
	}
	if ok {
		j.held[job] = true
	}
	return ok, nil
}

// dropLocked forgets the connection and its locks (PostgreSQL released them
// with the session, or will when the broken connection is discarded).
func (j *JobLocks) dropLocked() {
	if j.conn != nil {
		_ = j.conn.Close()
	}
	j.conn, j.held = nil, map[string]bool{}
}

// Close releases every lock, so another replica takes the jobs over at its
// next tick, and gives the connection back.
func (j *JobLocks) Close(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.conn == nil {
		return nil
	}
	// Session locks outlive a connection returned to the pool: unlock first.
	_, err := j.conn.ExecContext(ctx, `SELECT pg_advisory_unlock_all()`)
	j.dropLocked()
	return translate(err, "release job locks")
}
