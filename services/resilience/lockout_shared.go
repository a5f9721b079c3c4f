package resilience

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"switchyard/services"
)

// The fleet side of Lockouts (decisions.go): compare-and-set writes on the
// row version, the change-feed payload, applying other replicas' lockouts,
// coalesced last-failure times and the reconciliation of keys applied
// locally. A row inserted after a delete starts at a version above the
// deleted one (the wall-clock millisecond, or the known tombstone + 1), so
// a late notification of the old row never resurrects it.

// lockClearKey is the Key of a published bulk clear (its payload is the
// filter); it cannot collide with a LockKey's String, which holds a "/".
const lockClearKey = "clear"

// tombstoneTTL is how long a deleted key's version is remembered.
const tombstoneTTL = time.Hour

type casOutcome int

const (
	casDone     casOutcome = iota // written, or nothing to write
	casConflict                   // the row moved: the mirror follows it, decide again
	casLocal                      // applied in memory only (dirty)
)

// lockMeta is the fleet bookkeeping of one key; guarded by metaMu.
type lockMeta struct {
	dirty     bool // the mirror holds a decision the store lacks
	diag      bool // LastFailureAt newer than the store's
	diagSeen  bool // still so at the previous flush
	lastWrite time.Time
	tomb      int64 // version of the deletion, 0 = none
	tombAt    time.Time
}

func (m *lockMeta) busy() bool { return m.dirty || m.diag }

// withMeta runs f on key's bookkeeping, keeping metaN right.
func (l *Lockouts) withMeta(key LockKey, f func(m *lockMeta)) {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	m := l.meta[key]
	if m == nil {
		m = &lockMeta{}
		l.meta[key] = m
	}
	was := m.busy()
	f(m)
	switch now := m.busy(); {
	case was && !now:
		l.metaN.Add(-1)
	case !was && now:
		l.metaN.Add(1)
	}
	if !m.busy() && m.tomb == 0 && m.lastWrite.IsZero() {
		delete(l.meta, key)
	}
}

func (l *Lockouts) metaOf(key LockKey) lockMeta {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	if m := l.meta[key]; m != nil {
		return *m
	}
	return lockMeta{}
}

// commit writes one decision on key: next (nil = delete the row) replacing
// prev (found: the mirror holds prev). Called with the key's connection
// mutex and writers shared.
func (l *Lockouts) commit(ctx context.Context, prev LockoutRecord, found bool, next *LockoutRecord, now time.Time, attempt int) casOutcome {
	key := prev.LockKey
	if next != nil {
		key = next.LockKey
	}
	if next == nil && !found {
		return casDone
	}
	if l.guard.down(now) {
		l.applyLocally(key, prev, found, next)
		return casLocal
	}
	inStore := found && prev.Version >= 0
	if next == nil && !inStore {
		// A record only this mirror holds: nothing to delete in the store;
		// Reconcile adopts whatever the store has meanwhile.
		l.applyLocally(key, prev, found, nil)
		return casLocal
	}
	wctx, cancel := decisionContext(ctx)
	var (
		cur               LockoutRecord
		curFound, swapped bool
		err               error
	)
	switch {
	case next == nil:
		cur, curFound, swapped, err = l.store.CompareAndDeleteLockout(wctx, key, prev.Version)
	default:
		expect := int64(-1)
		if inStore {
			expect, next.Version = prev.Version, prev.Version+1
		} else {
			next.Version = l.insertVersion(key, now)
		}
		cur, curFound, swapped, err = l.store.CompareAndSaveLockout(wctx, expect, *next)
	}
	cancel()
	switch {
	case err != nil:
		l.guard.trip(now)
		l.log.Error("persist model lockout", "lock", key.String(), "err", err)
		l.applyLocally(key, prev, found, next)
		return casLocal
	case swapped && next == nil:
		l.guard.reset()
		l.deleted(ctx, key, prev.Version+1)
		return casDone
	case swapped:
		l.guard.reset()
		l.written(ctx, *next, now)
		return casDone
	}
	l.adopt(key, cur, curFound)
	if attempt < casAttempts {
		return casConflict
	}
	l.log.Warn("model lockout applied locally", "lock", key.String(), "why", "compare-and-set kept conflicting")
	if p, ok := l.get(key); ok {
		prev, found = p, true
	} else {
		prev, found = LockoutRecord{LockKey: key}, false
	}
	l.applyLocally(key, prev, found, next)
	return casLocal
}

// insertVersion is the version of a row inserted now: above any version a
// deleted row of key had, so receivers order the two.
func (l *Lockouts) insertVersion(key LockKey, now time.Time) int64 {
	return max(now.UnixMilli(), l.metaOf(key).tomb+1, 1)
}

// written publishes a record the store took.
func (l *Lockouts) written(ctx context.Context, rec LockoutRecord, now time.Time) {
	l.put(rec)
	l.withMeta(rec.LockKey, func(m *lockMeta) {
		m.dirty, m.diag, m.diagSeen, m.lastWrite = false, false, false, now
	})
	l.pub.publish(ctx, services.Change{Kind: services.ChangeModelLockout, Key: rec.LockKey.String(), Version: rec.Version,
		Payload: encodeLock(rec, false)})
}

// deleted drops key, whose row was deleted at version v, and publishes it.
func (l *Lockouts) deleted(ctx context.Context, key LockKey, v int64) {
	l.drop(key)
	now := l.clock.Now()
	l.withMeta(key, func(m *lockMeta) {
		m.dirty, m.diag, m.diagSeen = false, false, false
		m.tomb, m.tombAt = max(m.tomb, v), now
	})
	l.pub.publish(ctx, services.Change{Kind: services.ChangeModelLockout, Key: key.String(), Version: v,
		Payload: encodeLock(LockoutRecord{LockKey: key}, true)})
}

// adopt makes the mirror follow the stored row of key (a conflict's
// re-read); a dirty key keeps its local decision merged in.
func (l *Lockouts) adopt(key LockKey, cur LockoutRecord, found bool) {
	local, lfound := l.get(key)
	if l.metaOf(key).dirty {
		if m, ok := mergeLock(local, lfound, cur, found); ok {
			l.put(m)
		}
		return
	}
	if found {
		l.put(cur)
		return
	}
	l.drop(key)
}

// applyLocally keeps a decision in memory only, for Reconcile. A record
// the store does not have carries version -1.
func (l *Lockouts) applyLocally(key LockKey, prev LockoutRecord, found bool, next *LockoutRecord) {
	if next == nil {
		l.drop(key)
	} else {
		r := *next
		r.Version = -1
		if found {
			r.Version = prev.Version
		}
		l.put(r)
	}
	l.withMeta(key, func(m *lockMeta) { m.dirty, m.diag = true, false })
}

// noteDiagnostics records a failure absorbed by a running lock: memory at
// once, the store's last_failure_at at most once per diagnosticsInterval.
func (l *Lockouts) noteDiagnostics(ctx context.Context, rec LockoutRecord, now time.Time) {
	l.putQuiet(rec)
	m := l.metaOf(rec.LockKey)
	if m.dirty {
		return
	}
	if !m.lastWrite.IsZero() && now.Sub(m.lastWrite) < diagnosticsInterval || l.guard.down(now) {
		l.withMeta(rec.LockKey, func(m *lockMeta) { m.diag = true })
		return
	}
	_ = l.writeDiagnostics(ctx, rec, now)
}

func (l *Lockouts) writeDiagnostics(ctx context.Context, rec LockoutRecord, now time.Time) error {
	wctx, cancel := decisionContext(ctx)
	err := l.store.SaveLockoutDiagnostics(wctx, rec.LockKey, rec.LastFailureAt)
	cancel()
	if err != nil {
		l.guard.trip(now)
		l.withMeta(rec.LockKey, func(m *lockMeta) { m.diag = true })
		return fmt.Errorf("resilience: last failure of lockout %s: %w", rec.LockKey, err)
	}
	l.withMeta(rec.LockKey, func(m *lockMeta) { m.diag, m.diagSeen, m.lastWrite = false, false, now })
	// The other mirrors learn the later last failure too (at the same
	// version): it decides when the key's escalation memory ends, and a
	// mirror judging it on an older time would start a new episode where
	// this one escalates.
	l.pub.publish(ctx, services.Change{Kind: services.ChangeModelLockout, Key: rec.LockKey.String(), Version: rec.Version,
		Payload: encodeLock(rec, false)})
	return nil
}

// putQuiet replaces an existing record without bumping the version: only
// its last failure time moved, which no gate reads.
func (l *Lockouts) putQuiet(r LockoutRecord) {
	sh := l.shard(r.Provider, r.ConnectionID)
	sh.mu.Lock()
	_, ok := sh.recs[r.LockKey]
	if ok {
		sh.recs[r.LockKey] = r
	}
	sh.mu.Unlock()
	if !ok {
		l.put(r)
	}
}

// forgetMeta drops the bookkeeping of the keys the filter selects.
func (l *Lockouts) forgetMeta(filter LockFilter) {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	for k, m := range l.meta {
		if filter.Matches(k) {
			if m.busy() {
				l.metaN.Add(-1)
			}
			delete(l.meta, k)
		}
	}
}

// pruneTombs forgets deletions older than tombstoneTTL.
func (l *Lockouts) pruneTombs(now time.Time) {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	for k, m := range l.meta {
		if m.tomb != 0 && now.Sub(m.tombAt) > tombstoneTTL {
			m.tomb = 0
			if !m.busy() {
				delete(l.meta, k)
			}
		}
	}
}

// UseFeed publishes this mirror's lockouts on feed and applies the ones
// other replicas publish (ChangeModelLockout).
func (l *Lockouts) UseFeed(feed services.ChangeFeed) {
	l.pub.log = l.log
	l.pub.set(feed)
	feed.Subscribe(services.ChangeModelLockout, l.onChange)
}

func (l *Lockouts) onChange(ctx context.Context, ch services.Change) error {
	if isOwn(ctx) {
		return nil // what this mirror decided and holds already
	}
	switch ch.Key {
	case "":
		return l.Resync(ctx)
	case lockClearKey:
		filter, ok := decodeLockFilter(ch.Payload)
		if !ok {
			return l.Resync(ctx)
		}
		l.writers.Lock()
		l.clearFilter(filter, nil)
		l.writers.Unlock()
		return nil
	}
	rec, del, ok := decodeLock(ch.Payload)
	if !ok {
		return l.Resync(ctx)
	}
	rec.Version = ch.Version
	if !del && l.laterFailure(rec) {
		return nil
	}
	if l.notNewer(rec.LockKey, ch.Version) {
		if !del && l.hiddenByTomb(rec.LockKey, ch.Version) {
			return l.adoptStored(ctx, rec.LockKey)
		}
		return nil // in embedded mode: our own decision, handed back
	}
	l.writers.RLock()
	defer l.writers.RUnlock()
	mu := l.connMutex(rec.Provider, rec.ConnectionID)
	mu.Lock()
	defer mu.Unlock()
	if l.notNewer(rec.LockKey, ch.Version) {
		return nil
	}
	if l.metaOf(rec.LockKey).dirty {
		local, lfound := l.get(rec.LockKey)
		if m, ok := mergeLock(local, lfound, rec, !del); ok {
			l.put(m)
		}
		return nil
	}
	if del {
		l.drop(rec.LockKey)
		l.withMeta(rec.LockKey, func(m *lockMeta) { m.tomb, m.tombAt = max(m.tomb, ch.Version), l.clock.Now() })
		return nil
	}
	l.put(rec)
	return nil
}

// laterFailure applies a published last-failure time (writeDiagnostics)
// to the record of the same version this mirror holds, and reports whether
// rec was that: same version, same lock, a later LastFailureAt only.
func (l *Lockouts) laterFailure(rec LockoutRecord) bool {
	held, ok := l.get(rec.LockKey)
	if !ok || held.Version != rec.Version || !rec.LastFailureAt.After(held.LastFailureAt) {
		return false
	}
	probe := held
	probe.LastFailureAt = rec.LastFailureAt
	if !sameLock(probe, rec) {
		return false
	}
	l.writers.RLock()
	defer l.writers.RUnlock()
	mu := l.connMutex(rec.Provider, rec.ConnectionID)
	mu.Lock()
	defer mu.Unlock()
	if cur, ok := l.get(rec.LockKey); ok && cur.Version == rec.Version && rec.LastFailureAt.After(cur.LastFailureAt) {
		cur.LastFailureAt = rec.LastFailureAt
		l.putQuiet(cur)
	}
	return true
}

// hiddenByTomb reports whether a record at version v is refused only
// because this mirror saw key deleted at v or later: a late notification
// of the deleted row, or a new row inserted by a replica that did not know
// of the deletion (it lost the notification) at a version that is not
// above it.
func (l *Lockouts) hiddenByTomb(key LockKey, v int64) bool {
	if r, ok := l.get(key); ok && r.Version >= v {
		return false
	}
	return l.metaOf(key).tomb >= v
}

// adoptStored settles hiddenByTomb's ambiguity with the store: a stored
// row is the live one, whatever its version, and replaces the tombstone.
func (l *Lockouts) adoptStored(ctx context.Context, key LockKey) error {
	rctx, cancel := decisionContext(ctx)
	stored, found, err := l.store.LoadLockout(rctx, key)
	cancel()
	if err != nil {
		return fmt.Errorf("resilience: re-read lockout %s: %w", key, err)
	}
	if !found {
		return nil // the late notification of a deleted row
	}
	l.writers.RLock()
	defer l.writers.RUnlock()
	mu := l.connMutex(key.Provider, key.ConnectionID)
	mu.Lock()
	defer mu.Unlock()
	if l.metaOf(key).dirty {
		return nil // a local decision waits for its reconcile, which merges the stored row
	}
	if r, ok := l.get(key); ok && r.Version >= stored.Version {
		return nil
	}
	l.withMeta(key, func(m *lockMeta) { m.tomb = 0 })
	l.put(stored)
	return nil
}

// notNewer reports whether the mirror already holds version v of key, or
// a later one, or saw the key deleted at v or later.
func (l *Lockouts) notNewer(key LockKey, v int64) bool {
	if r, ok := l.get(key); ok && r.Version >= v {
		return true
	}
	return l.metaOf(key).tomb >= v
}

// Resync reloads every stored record into the mirror (after lost
// notifications); keys applied locally keep their decisions merged in.
func (l *Lockouts) Resync(ctx context.Context) error {
	if err := l.Reconcile(ctx); err != nil {
		l.log.Warn("reconcile before resync", "err", err)
	}
	l.writers.Lock()
	defer l.writers.Unlock()
	recs, err := l.store.LoadLockouts(ctx)
	if err != nil {
		return fmt.Errorf("resilience: resync lockouts: %w", err)
	}
	stored := make(map[LockKey]LockoutRecord, len(recs))
	for _, r := range recs {
		stored[r.LockKey] = r
	}
	var keys []LockKey
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.RLock()
		for k := range sh.recs {
			keys = append(keys, k)
		}
		sh.mu.RUnlock()
	}
	for _, k := range keys {
		if _, ok := stored[k]; !ok {
			stored[k] = LockoutRecord{LockKey: k, Version: -2} // gone from the store
		}
	}
	for k, r := range stored {
		found := r.Version != -2
		local, lfound := l.get(k)
		if l.metaOf(k).dirty {
			if m, ok := mergeLock(local, lfound, r, found); ok {
				l.put(m)
			}
			continue
		}
		switch {
		case !found:
			l.drop(k)
		case !lfound || local != r:
			l.put(r)
			fallthrough
		default:
			// The stored row is the live one, whatever its version (as in
			// adoptStored): a tombstone of an earlier deletion would
			// otherwise hide the deletion of this row from the feed.
			l.withMeta(k, func(m *lockMeta) { m.tomb = 0 })
		}
	}
	return nil
}

// Flush writes deferred last-failure times and reconciles the keys applied
// locally.
func (l *Lockouts) Flush(ctx context.Context, force bool) error {
	if l.metaN.Load() == 0 {
		return nil
	}
	now := l.now()
	var errs []error
	if force || !l.guard.down(now) {
		errs = append(errs, l.Reconcile(ctx))
	}
	type item struct {
		key LockKey
		m   lockMeta
	}
	var diags []item
	l.metaMu.Lock()
	for k, m := range l.meta {
		if m.diag && !m.dirty {
			diags = append(diags, item{k, *m})
		}
	}
	l.metaMu.Unlock()
	for _, it := range diags {
		if !force && !it.m.diagSeen && now.Sub(it.m.lastWrite) < diagnosticsInterval {
			l.withMeta(it.key, func(m *lockMeta) { m.diagSeen = true })
			continue
		}
		if !force && l.guard.down(now) {
			continue
		}
		rec, ok := l.get(it.key)
		if !ok {
			l.withMeta(it.key, func(m *lockMeta) { m.diag = false })
			continue
		}
		if err := l.writeDiagnostics(ctx, rec, now); err != nil {
			errs = append(errs, err)
			break
		}
	}
	return errors.Join(errs...)
}

// Reconcile writes the keys applied locally while the store could not be
// written, merged extend-only with the stored rows (the later end, the
// higher count); a row only the store has is kept. It stops at the first
// store error.
func (l *Lockouts) Reconcile(ctx context.Context) error {
	var dirty []LockKey
	l.metaMu.Lock()
	for k, m := range l.meta {
		if m.dirty {
			dirty = append(dirty, k)
		}
	}
	l.metaMu.Unlock()
	for _, k := range dirty {
		if err := l.reconcileKey(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lockouts) reconcileKey(ctx context.Context, key LockKey) error {
	l.writers.RLock()
	defer l.writers.RUnlock()
	mu := l.connMutex(key.Provider, key.ConnectionID)
	mu.Lock()
	defer mu.Unlock()
	now := l.now()
	for range casAttempts {
		if !l.metaOf(key).dirty {
			return nil
		}
		wctx, cancel := decisionContext(ctx)
		cur, found, err := l.store.LoadLockout(wctx, key)
		cancel()
		if err != nil {
			l.guard.trip(now)
			return fmt.Errorf("resilience: reconcile lockout %s: %w", key, err)
		}
		local, lfound := l.get(key)
		m, ok := mergeLock(local, lfound, cur, found)
		if ok && !found && l.dead(m, now) {
			ok = false
		}
		clean := func(m *lockMeta) { m.dirty = false }
		switch {
		case !ok:
			l.drop(key)
			l.withMeta(key, clean)
			return nil
		case found && sameLock(m, cur):
			l.put(cur)
			l.withMeta(key, clean)
			return nil
		}
		expect := int64(-1)
		if found {
			expect, m.Version = cur.Version, cur.Version+1
		} else {
			m.Version = l.insertVersion(key, now)
		}
		wctx, cancel = decisionContext(ctx)
		_, _, swapped, err := l.store.CompareAndSaveLockout(wctx, expect, m)
		cancel()
		if err != nil {
			l.guard.trip(now)
			return fmt.Errorf("resilience: reconcile lockout %s: %w", key, err)
		}
		if swapped {
			l.guard.reset()
			l.written(ctx, m, now)
			l.log.Info("model lockout reconciled with the store", "lock", key.String(), "version", m.Version)
			return nil
		}
	}
	return nil
}

// mergeLock merges a lockout decided locally into the stored one without
// weakening either: the later end (with its start, reason, status and
// length), the higher failure count, the later last failure. The version is
// the stored one (-1 when the store has no row). ok=false: neither has it.
func mergeLock(local LockoutRecord, lfound bool, stored LockoutRecord, sfound bool) (LockoutRecord, bool) {
	switch {
	case !lfound && !sfound:
		return LockoutRecord{}, false
	case !sfound:
		local.Version = -1
		return local, true
	case !lfound:
		return stored, true
	}
	m := stored
	if local.Until.After(m.Until) {
		m.Until, m.LockedAt, m.Reason, m.LastStatus, m.LastCooldownMs = local.Until, local.LockedAt, local.Reason, local.LastStatus, local.LastCooldownMs
		m.Model = local.Model
	}
	m.FailureCount = max(m.FailureCount, local.FailureCount)
	if local.LastFailureAt.After(m.LastFailureAt) {
		m.LastFailureAt = local.LastFailureAt
	}
	return m, true
}

// sameLock reports whether a and b agree on everything but the version.
func sameLock(a, b LockoutRecord) bool {
	a.Version, b.Version = 0, 0
	return a == b
}

// lockPayload is a lockout on the change feed (epoch ms, short names); X
// marks a deletion.
type lockPayload struct {
	P  string `json:"p"`
	C  string `json:"c"`
	S  string `json:"s"`
	K  string `json:"k"`
	X  bool   `json:"x,omitempty"`
	M  string `json:"m,omitempty"`
	R  string `json:"r,omitempty"`
	ST int    `json:"st,omitempty"`
	N  int    `json:"n,omitempty"`
	LA int64  `json:"la,omitempty"`
	U  int64  `json:"u,omitempty"`
	LF int64  `json:"lf,omitempty"`
	CD int64  `json:"cd,omitempty"`
}

func encodeLock(r LockoutRecord, deleted bool) string {
	p := lockPayload{P: r.Provider, C: r.ConnectionID, S: string(r.Shape), K: r.Key, X: deleted}
	if !deleted {
		p.M, p.R, p.ST, p.N = r.Model, r.Reason, r.LastStatus, r.FailureCount
		p.LA, p.U, p.LF, p.CD = r.LockedAt.UnixMilli(), r.Until.UnixMilli(), r.LastFailureAt.UnixMilli(), r.LastCooldownMs
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func decodeLock(payload string) (r LockoutRecord, deleted, ok bool) {
	var p lockPayload
	if payload == "" || json.Unmarshal([]byte(payload), &p) != nil || p.C == "" {
		return LockoutRecord{}, false, false
	}
	r.LockKey = LockKey{Provider: p.P, ConnectionID: p.C, Shape: LockShape(p.S), Key: p.K}
	if p.X {
		return r, true, true
	}
	r.Model, r.Reason, r.LastStatus, r.FailureCount = p.M, p.R, p.ST, p.N
	r.LockedAt, r.Until = time.UnixMilli(p.LA).UTC(), time.UnixMilli(p.U).UTC()
	r.LastFailureAt, r.LastCooldownMs = time.UnixMilli(p.LF).UTC(), p.CD
	return r, false, true
}

type filterPayload struct {
	P string `json:"p,omitempty"`
	C string `json:"c,omitempty"`
	M string `json:"m,omitempty"`
}

func encodeLockFilter(f LockFilter) string {
	b, _ := json.Marshal(filterPayload{P: f.Provider, C: f.ConnectionID, M: f.Model})
	return string(b)
}

func decodeLockFilter(payload string) (LockFilter, bool) {
	var p filterPayload
	if json.Unmarshal([]byte(payload), &p) != nil {
		return LockFilter{}, false
	}
	return LockFilter{Provider: p.P, ConnectionID: p.C, Model: p.M}, true
}
