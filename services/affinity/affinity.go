// Package affinity owns session affinity (20-resilience §5): deriving a
// request's session key, and the pins that keep a (client key, provider,
// session) on the connection that last served it. A pin is a preference,
// never a wall (BD 7): callers drop it when its connection is ineligible or
// fails, and re-pin after a success.
//
// Pins live in memory for the request path and are written through to a
// Store (session_affinity_pins) so they survive a restart; touches are
// coalesced to one write per pin per minute.
//
// The package imports the standard library and switchyard/services only; it
// must not import models, handlers, app or any ORM or HTTP framework.
package affinity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"switchyard/services"
)

// DefaultTTL is the default of sessionAffinity.ttlMs (900 000 ms). 0 turns
// affinity off.
const DefaultTTL = 15 * time.Minute

// TouchInterval is the most often one pin's row is rewritten when it is only
// used again on the same connection; the stored expiry may lag by this much.
const TouchInterval = time.Minute

// SweepInterval is how often the app should call Sweep.
const SweepInterval = 5 * time.Minute

// Pin binds a session of one client key on one provider to a connection.
type Pin struct {
	ID           string // PinID(KeyID, Provider, session key)
	KeyID        string
	Provider     string
	ConnectionID string
	CreatedAt    time.Time
	LastUsedAt   time.Time
	ExpiresAt    time.Time
}

// Store persists pins (session_affinity_pins); models implements it.
type Store interface {
	// LoadPins returns every stored pin.
	LoadPins(ctx context.Context) ([]Pin, error)
	// SavePin inserts the pin or replaces the row with its id.
	SavePin(ctx context.Context, p Pin) error
	// DeletePin deletes one pin; a missing row is no error.
	DeletePin(ctx context.Context, id string) error
	// DeletePinsForConnection deletes the pins of a connection and returns how many.
	DeletePinsForConnection(ctx context.Context, connID string) (int, error)
	// DeleteExpired deletes pins with ExpiresAt ≤ now and returns how many.
	DeleteExpired(ctx context.Context, now time.Time) (int, error)
}

// entry is a pin in memory with the LastUsedAt and ExpiresAt its row holds.
type entry struct {
	pin         Pin
	storedAt    time.Time // LastUsedAt of the last write
	storedUntil time.Time // ExpiresAt of the last write
}

// Pins is the in-memory, write-through set of session pins.
//
// Lock order: wmu, then mu. wmu is held across store writes so rows are
// written in the order memory changed; mu guards the map only and is never
// held across I/O, so Lookup never waits on the database unless it has to
// delete an expired pin.
type Pins struct {
	clock services.Clock
	ttl   func() time.Duration
	store Store

	wmu  sync.Mutex
	mu   sync.RWMutex
	pins map[string]entry
}

// NewPins builds the set. ttl is read on every use, so a settings change
// applies at once; ttl() ≤ 0 turns affinity off (nothing read or written).
func NewPins(clock services.Clock, ttl func() time.Duration, store Store) *Pins {
	return &Pins{clock: clock, ttl: ttl, store: store, pins: map[string]entry{}}
}

func (p *Pins) now() time.Time { return p.clock.Now().UTC().Truncate(time.Millisecond) }

// expired reports whether a pin is over: past its ExpiresAt, or unused for
// longer than a positive current TTL (so shortening the TTL applies to old
// pins at once).
func expired(pin Pin, now time.Time, ttl time.Duration) bool {
	if !now.Before(pin.ExpiresAt) {
		return true
	}
	return ttl > 0 && !now.Before(pin.LastUsedAt.Add(ttl))
}

// Load replaces the memory set with the store's unexpired pins and deletes
// the expired rows. It reads regardless of the TTL, so pins still within
// their lifetime come back if affinity is switched on again.
func (p *Pins) Load(ctx context.Context) error {
	rows, err := p.store.LoadPins(ctx)
	if err != nil {
		return fmt.Errorf("affinity: load pins: %w", err)
	}
	now, ttl := p.now(), p.ttl()
	m := make(map[string]entry, len(rows))
	for _, r := range rows {
		if expired(r, now, ttl) {
			continue
		}
		m[r.ID] = entry{pin: r, storedAt: r.LastUsedAt, storedUntil: r.ExpiresAt}
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	p.pins = m
	p.mu.Unlock()
	if _, err := p.store.DeleteExpired(ctx, now); err != nil {
		return fmt.Errorf("affinity: load pins: %w", err)
	}
	return nil
}

// Lookup returns the connection a session is pinned to. Nothing is found
// while the TTL is 0. An expired pin is deleted (memory and row) and not
// returned.
func (p *Pins) Lookup(pinID string) (connID string, ok bool) {
	ttl := p.ttl()
	if ttl <= 0 {
		return "", false
	}
	now := p.now()
	p.mu.RLock()
	e, found := p.pins[pinID]
	p.mu.RUnlock()
	if !found {
		return "", false
	}
	if !expired(e.pin, now, ttl) {
		return e.pin.ConnectionID, true
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	cur, still := p.pins[pinID]
	if still && cur.pin == e.pin {
		delete(p.pins, pinID)
	}
	p.mu.Unlock()
	if still && cur.pin == e.pin {
		// No request context here; the sweep deletes the row if this fails.
		_ = p.store.DeletePin(context.Background(), pinID)
	}
	return "", false
}

// Pin records a success of the session on connID: a new pin or a move to
// another connection is written at once; a repeat on the same connection
// extends the pin in memory and rewrites its row at most once per
// TouchInterval. Nothing happens while the TTL is 0.
func (p *Pins) Pin(ctx context.Context, pinID, keyID, provider, connID string) error {
	ttl := p.ttl()
	if ttl <= 0 {
		return nil
	}
	now := p.now()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	e, found := p.pins[pinID]
	if found && e.pin.ConnectionID == connID && !expired(e.pin, now, ttl) {
		e.pin.LastUsedAt = now
		e.pin.ExpiresAt = now.Add(ttl)
		write := now.Sub(e.storedAt) >= TouchInterval || e.storedUntil.Before(now)
		if write {
			e.storedAt, e.storedUntil = now, e.pin.ExpiresAt
		}
		p.pins[pinID] = e
		p.mu.Unlock()
		if !write {
			return nil
		}
		return p.save(ctx, e.pin)
	}
	pin := Pin{ID: pinID, KeyID: keyID, Provider: provider, ConnectionID: connID,
		CreatedAt: now, LastUsedAt: now, ExpiresAt: now.Add(ttl)}
	p.pins[pinID] = entry{pin: pin, storedAt: now, storedUntil: pin.ExpiresAt}
	p.mu.Unlock()
	return p.save(ctx, pin)
}

// save writes a pin whose memory copy has already changed. The write
// outlives the request's cancellation so the row keeps up with memory.
func (p *Pins) save(ctx context.Context, pin Pin) error {
	if err := p.store.SavePin(context.WithoutCancel(ctx), pin); err != nil {
		return fmt.Errorf("affinity: save pin: %w", err)
	}
	return nil
}

// Drop deletes one pin (cause ineligible or failover).
func (p *Pins) Drop(ctx context.Context, pinID string) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	delete(p.pins, pinID)
	p.mu.Unlock()
	if err := p.store.DeletePin(context.WithoutCancel(ctx), pinID); err != nil {
		return fmt.Errorf("affinity: drop pin: %w", err)
	}
	return nil
}

// DropConnection deletes every pin of a connection (deleted, disabled,
// terminal) and returns how many rows went.
func (p *Pins) DropConnection(ctx context.Context, connID string) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	for id, e := range p.pins {
		if e.pin.ConnectionID == connID {
			delete(p.pins, id)
		}
	}
	p.mu.Unlock()
	n, err := p.store.DeletePinsForConnection(context.WithoutCancel(ctx), connID)
	if err != nil {
		return n, fmt.Errorf("affinity: drop pins of connection %s: %w", connID, err)
	}
	return n, nil
}

// Count returns how many pins are live now; 0 while the TTL is 0.
func (p *Pins) Count() int {
	ttl := p.ttl()
	if ttl <= 0 {
		return 0
	}
	now := p.now()
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for _, e := range p.pins {
		if !expired(e.pin, now, ttl) {
			n++
		}
	}
	return n
}

// clearAll is an instant after every stored expiry, so DeleteExpired with it
// deletes every row.
var clearAll = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// ClearAll deletes every pin, in memory and in the store, and returns how
// many were live (Count at that moment): the admin's Clear all pins and
// DELETE /api/resilience/affinity. Each session's next request is routed
// afresh and pins again.
func (p *Pins) ClearAll(ctx context.Context) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	n := p.Count()
	p.mu.Lock()
	p.pins = map[string]entry{}
	p.mu.Unlock()
	if _, err := p.store.DeleteExpired(ctx, clearAll); err != nil {
		return n, fmt.Errorf("affinity: clear pins: %w", err)
	}
	return n, nil
}

// On reports whether session affinity is on (sessionAffinity.ttlMs > 0).
func (p *Pins) On() bool { return p.ttl() > 0 }

// Sweep removes expired pins from memory and deletes expired rows (the
// 5-minute sweep) and returns how many rows went. A live pin whose row lags
// behind coalesced touches is rewritten first, so the sweep never deletes the
// row of a live pin. While the TTL is 0 nothing is written, only deleted.
func (p *Pins) Sweep(ctx context.Context) (int, error) {
	now, ttl := p.now(), p.ttl()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	var stale []Pin
	p.mu.Lock()
	for id, e := range p.pins {
		switch {
		case expired(e.pin, now, ttl):
			delete(p.pins, id)
		case ttl > 0 && !now.Before(e.storedUntil):
			e.storedAt, e.storedUntil = e.pin.LastUsedAt, e.pin.ExpiresAt
			p.pins[id] = e
			stale = append(stale, e.pin)
		}
	}
	p.mu.Unlock()
	for _, pin := range stale {
		if err := p.save(ctx, pin); err != nil {
			return 0, err
		}
	}
	n, err := p.store.DeleteExpired(ctx, now)
	if err != nil {
		return n, fmt.Errorf("affinity: sweep pins: %w", err)
	}
	return n, nil
}
