package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"switchyard/services"
)

// feedChannel is the PostgreSQL NOTIFY channel of the change feed.
const feedChannel = "switchyard"

// PGFeed is the change feed of a fleet sharing one PostgreSQL database
// (scale-out §3.3). Publish delivers to this process's subscribers first
// (an admin's next request sees its own write), then bumps the feed's
// version and sends a NOTIFY in one statement; every other replica's
// listener delivers the change to its own subscribers.
//
// Lost notifications are covered twice: every (re)connect of the listener
// resyncs every kind (notifications sent while disconnected are gone), and a
// poll compares the stored feed version with the highest one received every
// PollEvery and resyncs on a gap. A change committed by a replica that died
// before its NOTIFY is therefore seen within PollEvery.
//
// The NOTIFY follows the writer's commit instead of riding inside its
// transaction: the repositories stay dialect-neutral, and the version poll
// bounds the one window (a crash between commit and notify) that this
// leaves.
type PGFeed struct {
	db      *gorm.DB
	dsn     string
	replica string
	local   *services.LocalFeed
	log     *slog.Logger

	// PollEvery is the safety-net period (default 5 s).
	PollEvery time.Duration
	// IdleCheck is how long the listener waits for a notification before it
	// pings its connection (default 30 s).
	IdleCheck time.Duration

	seen      atomic.Int64 // highest feed version received or published
	connected atomic.Bool
	connects  atomic.Int64 // listener connections made
	lastSync  atomic.Int64 // unix ms of the last full resync
	kindsMu   sync.Mutex
	kinds     map[services.ChangeKind]bool
}

var _ services.ChangeFeed = (*PGFeed)(nil)

type feedMessage struct {
	Replica string `json:"r"`
	Version int64  `json:"v"`
	Kind    string `json:"k"`
	Key     string `json:"i,omitempty"`
	ItemVer int64  `json:"n,omitempty"`
	Payload string `json:"p,omitempty"`
}

// NewPGFeed returns the shared feed. local holds the subscribers of this
// process; dsn is the database URL the listener connects with (a dedicated
// connection, not one of the pool's).
func NewPGFeed(db *gorm.DB, dsn, replica string, local *services.LocalFeed, log *slog.Logger) *PGFeed {
	return &PGFeed{db: db, dsn: dsn, replica: replica, local: local, log: log, PollEvery: 5 * time.Second,
		kinds: map[services.ChangeKind]bool{}}
}

// Subscribe adds h to the subscribers of kind.
func (f *PGFeed) Subscribe(kind services.ChangeKind, h services.ChangeHandler) {
	f.kindsMu.Lock()
	f.kinds[kind] = true
	f.kindsMu.Unlock()
	f.local.Subscribe(kind, h)
}

// Publish delivers c here, then to every other replica.
func (f *PGFeed) Publish(ctx context.Context, c services.Change) error {
	localErr := f.local.Publish(ctx, c)
	msg := feedMessage{Replica: f.replica, Kind: string(c.Kind), Key: c.Key, ItemVer: c.Version, Payload: c.Payload}
	err := runTx(context.WithoutCancel(ctx), f.db, func(tx *gorm.DB) error {
		if err := tx.Raw(`UPDATE feed_version SET version = version + 1 WHERE id = 1 RETURNING version`).Scan(&msg.Version).Error; err != nil {
			return err
		}
		body, err := json.Marshal(msg)
		if err != nil {
			return err
		}
		// Delivered to the listeners when this transaction commits.
		return tx.Exec(`SELECT pg_notify(?, ?)`, feedChannel, string(body)).Error
	})
	if err != nil {
		return errors.Join(localErr, translate(err, "publish "+c.String()))
	}
	v := msg.Version
	f.raiseSeen(v)
	return localErr
}

func (f *PGFeed) idleCheck() time.Duration {
	if f.IdleCheck > 0 {
		return f.IdleCheck
	}
	return 30 * time.Second
}

// Resync delivers a full reload of kind here.
func (f *PGFeed) Resync(ctx context.Context, kind services.ChangeKind) error {
	return f.local.Resync(ctx, kind)
}

func (f *PGFeed) raiseSeen(v int64) {
	for {
		cur := f.seen.Load()
		if v <= cur || f.seen.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Connected reports whether the listener holds its connection now.
func (f *PGFeed) Connected() bool { return f.connected.Load() }

// Reconnects counts the listener's connections after its first one.
func (f *PGFeed) Reconnects() int64 { return max(f.connects.Load()-1, 0) }

// LastResync is when every kind was last reloaded (zero: never).
func (f *PGFeed) LastResync() time.Time {
	ms := f.lastSync.Load()
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func (f *PGFeed) resyncAll(ctx context.Context) {
	f.kindsMu.Lock()
	kinds := make([]services.ChangeKind, 0, len(f.kinds))
	for k := range f.kinds {
		kinds = append(kinds, k)
	}
	f.kindsMu.Unlock()
	for _, k := range kinds {
		if err := f.local.Resync(ctx, k); err != nil {
			f.log.Error("change feed resync", "kind", string(k), "err", err)
		}
	}
	f.lastSync.Store(time.Now().UnixMilli())
}

// Run listens for other replicas' changes until ctx ends, reconnecting with
// backoff and resyncing after every (re)connect, and polls the feed version.
func (f *PGFeed) Run(ctx context.Context) {
	go f.poll(ctx)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		before := f.connects.Load()
		err := f.listen(ctx)
		f.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if f.connects.Load() != before {
			backoff = 100 * time.Millisecond // it had connected: a fresh outage starts fast
		}
		f.log.Warn("change feed listener lost its connection; reconnecting", "retry_in_ms", backoff.Milliseconds(), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (f *PGFeed) listen(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgx.Connect(cctx, f.dsn)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+feedChannel); err != nil {
		return err
	}
	f.connected.Store(true)
	f.connects.Add(1)
	// Listening first, then the reload: nothing committed after this point
	// can be missed.
	f.resyncAll(ctx)
	for {
		// A connection that silently died (a host that vanished, a network
		// that drops packets) would never return from the wait: after
		// IdleCheck without a notification the connection is pinged, and a
		// failed ping reconnects (and so resyncs).
		wctx, cancel := context.WithTimeout(ctx, f.idleCheck())
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("listener ping: %w", err)
			}
			continue
		}
		var m feedMessage
		if err := json.Unmarshal([]byte(n.Payload), &m); err != nil {
			f.log.Warn("change feed: unreadable notification", "err", err)
			continue
		}
		f.raiseSeen(m.Version)
		if m.Replica == f.replica {
			continue // delivered here when it was published
		}
		c := services.Change{Kind: services.ChangeKind(m.Kind), Key: m.Key, Version: m.ItemVer, Payload: m.Payload, Origin: m.Replica}
		if err := f.local.Publish(ctx, c); err != nil {
			f.log.Error("change feed: apply a remote change", "change", c.String(), "err", err)
		}
	}
}

// poll resyncs when the stored feed version moved past what was received.
func (f *PGFeed) poll(ctx context.Context) {
	t := time.NewTicker(f.PollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var v int64
		if err := f.db.WithContext(ctx).Raw(`SELECT version FROM feed_version WHERE id = 1`).Scan(&v).Error; err != nil {
			continue
		}
		if v > f.seen.Load() {
			f.raiseSeen(v)
			f.resyncAll(ctx)
		}
	}
}
