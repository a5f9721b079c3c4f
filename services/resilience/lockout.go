package resilience

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
	"switchyard/services/events"
)

// Model lockout (20-resilience §7): one model, or its quota family, taken out
// of rotation on one connection while the connection serves its other models.
//
// State is data checked against the clock: a record is active while now is
// before Until, then stays as escalation memory until
// LastFailureAt + LastCooldownMs + resetAfter(provider) and is deleted lazily
// after that. Memory is authoritative for reads; every change reaches the
// store before the call that made it returns (BD 9).

// LockKey identifies one lockout row: a key of one shape on one connection.
type LockKey struct {
	Provider     string
	ConnectionID string
	Shape        LockShape
	Key          string
}

func (k LockKey) String() string {
	return k.Provider + "/" + k.ConnectionID + "/" + string(k.Shape) + ":" + k.Key
}

// LockoutRecord is one model lockout and its escalation memory.
type LockoutRecord struct {
	LockKey
	// Model is the model id whose failure wrote the record, as the request named it.
	Model string
	// Reason is the failure reason of the lock (it decides waitability, §9).
	Reason       string
	LastStatus   int
	FailureCount int
	// LockedAt is when the running lock started; Until when it ends.
	LockedAt time.Time
	Until    time.Time
	// LastFailureAt is the latest failure counted or absorbed by this key.
	LastFailureAt time.Time
	// LastCooldownMs is the length of the latest lock, in milliseconds.
	LastCooldownMs int64
	// Version is the row's compare-and-set version (model_lockouts.version).
	Version int64
}

// Active reports whether the record still locks its key at now.
func (r LockoutRecord) Active(now time.Time) bool { return now.Before(r.Until) }

// forgetAt is when the record stops being escalation memory.
func (r LockoutRecord) forgetAt(resetAfter time.Duration) time.Time {
	end := r.LastFailureAt.Add(time.Duration(r.LastCooldownMs)*time.Millisecond + resetAfter)
	if r.Until.After(end) {
		end = r.Until
	}
	return end
}

// LockFilter selects lockouts; an empty field matches everything. Model
// matches every key shape (family, base, exact) of that model, so clearing a
// model also clears the family it shares with its siblings.
type LockFilter struct {
	Provider     string
	ConnectionID string
	Model        string
}

// Matches reports whether the filter selects key.
func (f LockFilter) Matches(k LockKey) bool {
	if f.Provider != "" && f.Provider != k.Provider {
		return false
	}
	if f.ConnectionID != "" && f.ConnectionID != k.ConnectionID {
		return false
	}
	if f.Model == "" {
		return true
	}
	return k.Key == ModelLockKey(k.Shape, k.Provider, f.Model)
}

// LockoutStatus is one lockout as the admin API (GET
// /api/resilience/model-cooldowns) and the runtime page show it.
type LockoutStatus struct {
	Provider     string `json:"provider"`
	ConnectionID string `json:"connectionId"`
	// ConnectionName is left empty here; the caller that knows connections fills it.
	ConnectionName string    `json:"connectionName"`
	Model          string    `json:"model"`
	Shape          LockShape `json:"keyShape"`
	LockKey        string    `json:"lockKey"`
	Reason         Reason    `json:"reason"`
	LastStatus     int       `json:"lastStatus"`
	FailureCount   int       `json:"failureCount"`
	LockedAt       time.Time `json:"lockedAt"`
	Until          time.Time `json:"until"`
	// RemainingMs is how long the lock still runs, 0 once it ended.
	RemainingMs   int64     `json:"remainingMs"`
	LastFailureAt time.Time `json:"-"`
	// Active: the lock has not ended yet. Enforced: it is active and the
	// master switch is on, so routing skips the model (BD 8).
	Active   bool `json:"-"`
	Enforced bool `json:"-"`
}

// Key returns the lock key of the row, as ReEnable takes it.
func (s LockoutStatus) Key() LockKey {
	return LockKey{Provider: s.Provider, ConnectionID: s.ConnectionID, Shape: s.Shape, Key: s.LockKey}
}

// lockoutShards spreads the hot-path map over independent locks; all keys of
// one connection live in the same shard.
const lockoutShards = 32

// lockoutMaxRetryHint is connectionCooldown.maxRetryHintMs's default (7 days).
const lockoutMaxRetryHint = 604_800_000 * time.Millisecond

// lockoutDailyResetCap bounds the wait for a daily reset (a DST day has 25 h).
const lockoutDailyResetCap = 25 * time.Hour

type lockoutShard struct {
	mu   sync.RWMutex
	recs map[LockKey]LockoutRecord
}

type lockoutConnKey struct{ provider, connectionID string }

// Lockouts holds the model lockouts of every connection. Locked is the
// hot-path read: memory only, per-shard read locks, no store access. Writers
// serialise per connection; Load, Clear, ForgetConnection and Sweep exclude
// every writer while they run.
type Lockouts struct {
	clock      services.Clock
	cfg        func() LockoutConfig
	resetAfter func(provider string) time.Duration
	store      LockoutStore
	log        *slog.Logger

	// ResetLocation returns the time zone of a provider's daily quota reset
	// (catalogue dailyResetTz); nil or a nil result means UTC. Set before use.
	ResetLocation func(provider string) *time.Location
	// QuotaResetAt returns the learned quota-window reset of a connection
	// (§13.4), used by a hint-less quota_exhausted; nil means none. Set before use.
	QuotaResetAt func(provider, connectionID, model string) (time.Time, bool)
	// MaxRetryHint returns connectionCooldown.maxRetryHintMs, the cap of a
	// quota reset; nil means the default of 7 days. Set before use.
	MaxRetryHint func() time.Duration
	// Events receives the lockouts this process sets and the admin clears;
	// nil records nothing. Set before use.
	Events events.Recorder

	// writers: per-connection mutations hold it shared, bulk ones exclusively.
	writers sync.RWMutex
	conns   sync.Map // lockoutConnKey → *sync.Mutex
	shards  [lockoutShards]lockoutShard
	size    atomic.Int64 // records in memory, so the empty case costs one load
	// version is bumped after every change of the records in memory, so a
	// reader that cached what Blocking answered knows when to ask again.
	version atomic.Uint64

	pub   publisher
	guard storeGuard
	// meta holds what the fleet side tracks per key (deferred diagnostics,
	// rows applied locally, deleted versions); metaN counts the keys with
	// deferred work so Flush skips its scan while it is zero.
	metaMu sync.Mutex
	meta   map[LockKey]*lockMeta
	metaN  atomic.Int64
}

// Version changes after every change of the lockout records in memory
// (a lock set, extended, decayed, re-enabled, cleared, swept or loaded).
// Neither time (a lock ending) nor the master switch changes it: a reader
// caching Blocking compares Enabled and the ends it saw itself. Read it
// before the state it guards.
func (l *Lockouts) Version() uint64 { return l.version.Load() }

// NewLockouts builds the lockout state. cfg returns the current modelLockout
// settings; resetAfter returns providerBreaker.<profile>.resetTimeoutMs of a
// provider (nil = 0); store nil keeps state in memory only; log nil discards.
// Call Load before serving to restore persisted lockouts.
func NewLockouts(clock services.Clock, cfg func() LockoutConfig, resetAfter func(provider string) time.Duration, store LockoutStore, log *slog.Logger) *Lockouts {
	if store == nil {
		store = NewMemoryLockoutStore()
	}
	if resetAfter == nil {
		resetAfter = func(string) time.Duration { return 0 }
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Lockouts{clock: clock, cfg: cfg, resetAfter: resetAfter, store: store,
		log: log.With("component", "model_lockout"), meta: map[LockKey]*lockMeta{}}
	for i := range l.shards {
		l.shards[i].recs = map[LockKey]LockoutRecord{}
	}
	return l
}

// Enabled reports the master switch modelLockout.enabled (BD 8).
func (l *Lockouts) Enabled() bool { return l.cfg().Enabled }

// Load replaces the memory state with the store's records, deleting those
// that are no longer even escalation memory.
func (l *Lockouts) Load(ctx context.Context) error {
	recs, err := l.store.LoadLockouts(ctx)
	if err != nil {
		return fmt.Errorf("resilience: load lockouts: %w", err)
	}
	l.writers.Lock()
	defer l.writers.Unlock()
	l.clearMemory()
	now := l.now()
	var errs []error
	for _, r := range recs {
		if l.dead(r, now) {
			// By version: another replica may have renewed the row meanwhile.
			if _, _, _, err := l.store.CompareAndDeleteLockout(ctx, r.LockKey, r.Version); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		l.put(r)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("resilience: load lockouts: delete expired: %w", err)
	}
	return nil
}

// clearMemory drops every record from memory; writers are excluded.
func (l *Lockouts) clearMemory() {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		l.size.Add(-int64(len(sh.recs)))
		clear(sh.recs)
		sh.mu.Unlock()
	}
	l.version.Add(1)
}

// Locked reports whether model is locked on the connection: any of its three
// keys is active and the master switch is on. until is the latest end among
// the active keys and key the one that ends then. Entries are not enforced
// while the master switch is off (BD 8); they stay listed and expire normally.
func (l *Lockouts) Locked(provider, connectionID, model string) (locked bool, until time.Time, key LockKey) {
	rec, locked := l.Blocking(provider, connectionID, model)
	return locked, rec.Until, rec.LockKey
}

// Blocking is Locked returning the whole record of the key that ends last, so
// the selector reads the lock's reason (waitability) without listing records.
func (l *Lockouts) Blocking(provider, connectionID, model string) (rec LockoutRecord, locked bool) {
	if l.size.Load() == 0 || !l.cfg().Enabled {
		return LockoutRecord{}, false
	}
	return l.blockingAt(provider, connectionID, KeysForModel(provider, model), l.clock.Now())
}

// blockingAt is Blocking with the model's keys computed and the time read
// by the caller.
func (l *Lockouts) blockingAt(provider, connectionID string, mk ModelKeys, now time.Time) (rec LockoutRecord, locked bool) {
	if l.size.Load() == 0 || !l.cfg().Enabled {
		return LockoutRecord{}, false
	}
	keys := mk.lockKeys(provider, connectionID)
	sh := l.shard(provider, connectionID)
	sh.mu.RLock()
	for _, k := range keys {
		if r, ok := sh.recs[k]; ok && r.Active(now) && r.Until.After(rec.Until) {
			rec, locked = r, true
		}
	}
	sh.mu.RUnlock()
	return rec, locked
}

// Apply records a model-scoped failure of (provider, connectionID, model) as
// §1.6 step 4 decides it: nothing happens unless the master switch is on and
// c.Status is one of modelLockout.errorCodes. The shape is c.LockScope, else
// the status's (LockShapeForStatus). A failure while that key is active is
// the running episode: no escalation, the deadline only moves to a
// later-ending hint, and newEpisode is false. Otherwise a new lock starts
// (newEpisode true) with the length of §7. applied reports whether the
// failure was recorded; rec is the resulting record. The store is written
// before Apply returns; a store error is logged and the lock kept in memory.
func (l *Lockouts) Apply(ctx context.Context, provider, connectionID, model string, c Classification) (applied bool, rec LockoutRecord, newEpisode bool) {
	cfg := l.cfg()
	if !cfg.Enabled || !cfg.LocksStatus(c.Status) {
		return false, LockoutRecord{}, false
	}
	key := lockKeyOf(provider, connectionID, model, c)

	l.writers.RLock()
	defer l.writers.RUnlock()
	mu := l.connMutex(provider, connectionID)
	mu.Lock()
	defer mu.Unlock()

	now := l.now()
	for attempt := 1; ; attempt++ {
		prev, found := l.get(key)
		if found && prev.Active(now) {
			// The running episode: no escalation; only a later-ending hint
			// moves the deadline, anything else is a diagnostic.
			rec = prev
			rec.LastFailureAt = now
			hint := l.hintLength(cfg, c)
			end := now.Add(hint)
			if hint <= 0 || !end.After(prev.Until) {
				l.noteDiagnostics(ctx, rec, now)
				return true, rec, false
			}
			rec.Until = end
			rec.LastCooldownMs = hint.Milliseconds()
			rec.Reason = string(c.Reason)
			rec.LastStatus = c.Status
			newEpisode = false
		} else {
			n := 1
			if found && !l.dead(prev, now) {
				n = prev.FailureCount + 1
			}
			d := l.length(cfg, provider, connectionID, model, c, n, now)
			rec = LockoutRecord{
				LockKey:        key,
				Model:          strings.TrimSpace(model),
				Reason:         string(c.Reason),
				LastStatus:     c.Status,
				FailureCount:   n,
				LockedAt:       now,
				Until:          now.Add(d),
				LastFailureAt:  now,
				LastCooldownMs: d.Milliseconds(),
			}
			newEpisode = true
		}
		if l.commit(ctx, prev, found, &rec, now, attempt) == casConflict {
			continue
		}
		if newEpisode {
			if l.Events != nil {
				l.Events.Record(events.Event{Type: events.LockoutSet, Provider: provider, ConnectionID: connectionID,
					Model: rec.Model, Cause: string(c.Reason), Status: c.Status})
			}
			l.log.Info("model locked", "provider", provider, "connection_id", connectionID, "model", model,
				"key_shape", string(key.Shape), "lock_key", key.Key, "reason", string(c.Reason), "status", c.Status,
				"failure_count", rec.FailureCount, "cooldown_ms", rec.LastCooldownMs)
		}
		return true, rec, newEpisode
	}
}

// lockKeyOf is the key a classification locks: its lock scope, else the
// natural shape of its status.
func lockKeyOf(provider, connectionID, model string, c Classification) LockKey {
	shape := c.LockScope
	switch shape {
	case ShapeFamily, ShapeBase, ShapeExact:
	default:
		shape = LockShapeForStatus(c.Status)
	}
	return LockKey{Provider: provider, ConnectionID: connectionID, Shape: shape, Key: ModelLockKey(shape, provider, model)}
}

// Preview is the lockout Apply would set for a first failure of model on a
// connection that holds none, without setting it (the classify dry run);
// ok is false when no lockout would be set (switched off, or a status the
// lockout does not take).
func (l *Lockouts) Preview(provider, connectionID, model string, c Classification) (key LockKey, d time.Duration, ok bool) {
	cfg := l.cfg()
	if !cfg.Enabled || !cfg.LocksStatus(c.Status) {
		return LockKey{}, 0, false
	}
	return lockKeyOf(provider, connectionID, model, c), l.length(cfg, provider, connectionID, model, c, 1, l.now()), true
}

// Success decays the lockouts of (provider, connectionID, model) after a
// successful request: failure_count halves (integer division) on each of the
// model's three keys, and a key that reaches 0 is deleted, so the model is
// eligible at once even before its Until. Nothing happens while the master
// switch is off (entries then only expire). Cheap when nothing is stored.
func (l *Lockouts) Success(ctx context.Context, provider, connectionID, model string) {
	if l.size.Load() == 0 || !l.cfg().Enabled {
		return
	}
	keys := LockKeysFor(provider, connectionID, model)
	if !l.hasAny(provider, connectionID, keys) {
		return
	}
	l.writers.RLock()
	defer l.writers.RUnlock()
	mu := l.connMutex(provider, connectionID)
	mu.Lock()
	defer mu.Unlock()

	now := l.now()
	for _, k := range keys {
		for attempt := 1; ; attempt++ {
			prev, ok := l.get(k)
			if !ok {
				break
			}
			r := prev
			r.FailureCount /= 2
			next := &r
			if r.FailureCount <= 0 || l.dead(r, now) {
				next = nil
			}
			if l.commit(ctx, prev, true, next, now, attempt) != casConflict {
				break
			}
		}
	}
}

// List returns the active lockouts the filter selects, the longest remaining
// first (GET /api/resilience/model-cooldowns). Entries stay listed while the
// master switch is off; Enforced tells them apart.
func (l *Lockouts) List(filter LockFilter) []LockoutStatus {
	return l.list(filter, false)
}

// ListAll is List plus the records kept only as escalation memory (inactive,
// not yet forgotten), which follow the active ones, latest failure first.
func (l *Lockouts) ListAll(filter LockFilter) []LockoutStatus {
	return l.list(filter, true)
}

func (l *Lockouts) list(filter LockFilter, memory bool) []LockoutStatus {
	now := l.clock.Now()
	enabled := l.cfg().Enabled
	var out []LockoutStatus
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.RLock()
		for k, r := range sh.recs {
			if !filter.Matches(k) {
				continue
			}
			active := r.Active(now)
			if !active && (!memory || l.dead(r, now)) {
				continue
			}
			s := LockoutStatus{
				Provider: k.Provider, ConnectionID: k.ConnectionID, Model: r.Model,
				Shape: k.Shape, LockKey: k.Key, Reason: Reason(r.Reason),
				LastStatus: r.LastStatus, FailureCount: r.FailureCount,
				LockedAt: r.LockedAt, Until: r.Until, LastFailureAt: r.LastFailureAt,
				Active: active, Enforced: active && enabled,
			}
			if active {
				s.RemainingMs = r.Until.Sub(now).Milliseconds()
			}
			out = append(out, s)
		}
		sh.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b LockoutStatus) int {
		if a.Active != b.Active {
			if a.Active {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.RemainingMs, a.RemainingMs); c != 0 {
			return c
		}
		if c := b.LastFailureAt.Compare(a.LastFailureAt); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.ConnectionID, b.ConnectionID),
			cmp.Compare(a.Shape, b.Shape), cmp.Compare(a.LockKey, b.LockKey))
	})
	return out
}

// Count returns how many lockouts are active (enforced or not).
func (l *Lockouts) Count() int {
	if l.size.Load() == 0 {
		return 0
	}
	now := l.clock.Now()
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.RLock()
		for _, r := range sh.recs {
			if r.Active(now) {
				n++
			}
		}
		sh.mu.RUnlock()
	}
	return n
}

// ReEnable deletes one lockout row, lock and escalation memory, at once. It
// returns an error wrapping services.ErrNotFound when the key has no row.
// The row goes first: when its delete fails the lock stays, in memory as in
// the store, rather than coming back at the next start.
func (l *Lockouts) ReEnable(ctx context.Context, key LockKey) error {
	l.writers.RLock()
	defer l.writers.RUnlock()
	mu := l.connMutex(key.Provider, key.ConnectionID)
	mu.Lock()
	defer mu.Unlock()
	prev, ok := l.get(key)
	if !ok {
		return fmt.Errorf("resilience: re-enable %s: %w", key, services.ErrNotFound)
	}
	if err := l.store.DeleteLockout(ctx, key); err != nil {
		return fmt.Errorf("resilience: re-enable %s: %w", key, err)
	}
	l.deleted(ctx, key, prev.Version+1)
	return nil
}

// Clear deletes every lockout row the filter selects (an empty filter: all),
// locks and escalation memory alike, and returns how many of them were
// active. A filter with Model clears its family, base and exact keys. The
// rows go first, under the writers' lock: when their delete fails nothing
// is cleared, since a lock cleared only in memory would come back at the
// next start.
func (l *Lockouts) Clear(ctx context.Context, filter LockFilter) (int, error) {
	l.writers.Lock()
	defer l.writers.Unlock()
	if _, err := l.store.DeleteLockouts(ctx, filter); err != nil {
		return 0, fmt.Errorf("resilience: clear lockouts: %w", err)
	}
	var cleared []LockoutRecord
	keep := func(r LockoutRecord) { cleared = append(cleared, r) }
	if l.Events == nil {
		keep = nil
	}
	active := l.clearFilter(filter, keep)
	l.pub.publish(ctx, services.Change{Kind: services.ChangeModelLockout, Key: lockClearKey, Payload: encodeLockFilter(filter)})
	l.recordCleared(events.ActorOf(ctx), cleared)
	return active, nil
}

// recordCleared records one admin clear per model and connection (a model
// may be locked under several key shapes), by actor.
func (l *Lockouts) recordCleared(actor string, cleared []LockoutRecord) {
	seen := map[[3]string]bool{}
	for _, r := range cleared {
		k := [3]string{r.Provider, r.ConnectionID, r.Model}
		if seen[k] {
			continue
		}
		seen[k] = true
		l.Events.Record(events.Event{Type: events.LockoutCleared, Provider: r.Provider, ConnectionID: r.ConnectionID,
			Model: r.Model, Cause: events.CauseAdmin, Actor: actor})
	}
}

// clearFilter drops the records the filter selects from memory and
// returns how many were active, handing each active one to cleared when
// it is not nil; writers are excluded.
func (l *Lockouts) clearFilter(filter LockFilter, cleared func(LockoutRecord)) int {
	now := l.clock.Now()
	active := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, r := range sh.recs {
			if filter.Matches(k) {
				if r.Active(now) {
					active++
					if cleared != nil {
						cleared(r)
					}
				}
				delete(sh.recs, k)
				l.size.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
	l.forgetMeta(filter)
	l.version.Add(1)
	return active
}

// ForgetConnection deletes every lockout of a connection (it was deleted or
// its credentials replaced).
func (l *Lockouts) ForgetConnection(ctx context.Context, connectionID string) error {
	if connectionID == "" {
		return nil
	}
	if _, err := l.Clear(ctx, LockFilter{ConnectionID: connectionID}); err != nil {
		return err
	}
	l.conns.Range(func(k, _ any) bool {
		if k.(lockoutConnKey).connectionID == connectionID {
			l.conns.Delete(k)
		}
		return true
	})
	return nil
}

// Sweep deletes the rows that are no longer even escalation memory and
// returns how many. Reads never need it (an ended lock is simply inactive);
// it only keeps memory and the table small.
func (l *Lockouts) Sweep(ctx context.Context) (int, error) {
	if l.size.Load() == 0 {
		return 0, nil
	}
	l.writers.Lock()
	defer l.writers.Unlock()
	now := l.now()
	var dead []LockoutRecord
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, r := range sh.recs {
			if l.dead(r, now) {
				delete(sh.recs, k)
				l.size.Add(-1)
				dead = append(dead, r)
			}
		}
		sh.mu.Unlock()
	}
	if len(dead) > 0 {
		l.version.Add(1)
	}
	l.pruneTombs(now)
	var errs []error
	for _, r := range dead {
		// By version: every replica sweeps, and one may have renewed the row.
		if _, _, _, err := l.store.CompareAndDeleteLockout(ctx, r.LockKey, r.Version); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return len(dead), fmt.Errorf("resilience: sweep lockouts: %w", err)
	}
	return len(dead), nil
}

// dead reports whether r is past its lock and its escalation memory.
func (l *Lockouts) dead(r LockoutRecord, now time.Time) bool {
	return now.After(r.forgetAt(l.resetAfter(r.Provider)))
}

// now is the clock in UTC, cut to the millisecond the store keeps, so a
// reloaded record equals the one in memory.
func (l *Lockouts) now() time.Time {
	return l.clock.Now().UTC().Truncate(time.Millisecond)
}

func (l *Lockouts) shard(provider, connectionID string) *lockoutShard {
	// FNV-1a over provider, a separator and the connection id, without allocating.
	h := uint32(2166136261)
	for i := 0; i < len(provider); i++ {
		h = (h ^ uint32(provider[i])) * 16777619
	}
	h *= 16777619 // a zero separator byte, so ("ab","c") and ("a","bc") differ
	for i := 0; i < len(connectionID); i++ {
		h = (h ^ uint32(connectionID[i])) * 16777619
	}
	return &l.shards[h%lockoutShards]
}

func (l *Lockouts) connMutex(provider, connectionID string) *sync.Mutex {
	k := lockoutConnKey{provider, connectionID}
	if m, ok := l.conns.Load(k); ok {
		return m.(*sync.Mutex)
	}
	m, _ := l.conns.LoadOrStore(k, &sync.Mutex{})
	return m.(*sync.Mutex)
}

func (l *Lockouts) get(k LockKey) (LockoutRecord, bool) {
	sh := l.shard(k.Provider, k.ConnectionID)
	sh.mu.RLock()
	r, ok := sh.recs[k]
	sh.mu.RUnlock()
	return r, ok
}

func (l *Lockouts) hasAny(provider, connectionID string, keys [3]LockKey) bool {
	sh := l.shard(provider, connectionID)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	for _, k := range keys {
		if _, ok := sh.recs[k]; ok {
			return true
		}
	}
	return false
}

func (l *Lockouts) put(r LockoutRecord) {
	sh := l.shard(r.Provider, r.ConnectionID)
	sh.mu.Lock()
	if _, ok := sh.recs[r.LockKey]; !ok {
		l.size.Add(1)
	}
	sh.recs[r.LockKey] = r
	sh.mu.Unlock()
	l.version.Add(1)
}

func (l *Lockouts) drop(k LockKey) {
	sh := l.shard(k.Provider, k.ConnectionID)
	sh.mu.Lock()
	_, ok := sh.recs[k]
	if ok {
		delete(sh.recs, k)
		l.size.Add(-1)
	}
	sh.mu.Unlock()
	if ok {
		l.version.Add(1)
	}
}
