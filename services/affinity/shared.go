package affinity

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"switchyard/services"
)

// Pins in a fleet (scale-out §3.4 row 6). Replicas sharing one database
// share their pins, so the next request of a session lands on the same
// connection whichever replica serves it. A pin stays a preference (BD 7):
// Lookup reads the mirror only, and the rows are written off the request
// goroutine — new and moved pins at once, touches at most once per pin per
// TouchInterval (Pins decides that, as in a single process) — then
// published; every other replica applies the pin to its mirror. The latest
// use wins when two replicas pin one session differently.

// SharedStore is the Store of a replica in a fleet: SavePin and DeletePin
// queue the write (coalesced per pin) and return at once; a background
// writer stores it and publishes ChangePin. The other methods are the
// inner store's.
type SharedStore struct {
	inner Store
	feed  services.ChangeFeed
	onErr func(error)
	w     *services.Coalescer[string, pinOp]
}

var _ Store = (*SharedStore)(nil)

// pinOp is one queued write: the pin to store, or its deletion.
type pinOp struct {
	pin Pin
	del bool
}

// NewSharedStore wraps inner. onErr (may be nil) sees failed writes and
// publishes; the pin stays in memory either way.
func NewSharedStore(inner Store, feed services.ChangeFeed, onErr func(error)) *SharedStore {
	s := &SharedStore{inner: inner, feed: feed, onErr: onErr}
	s.w = services.NewCoalescer(s.write, onErr)
	return s
}

func (s *SharedStore) write(ctx context.Context, id string, op pinOp) error {
	c := services.Change{Kind: services.ChangePin, Key: id, Payload: services.ChangeDeleted}
	if op.del {
		if err := s.inner.DeletePin(ctx, id); err != nil {
			return fmt.Errorf("affinity: delete pin: %w", err)
		}
	} else {
		if err := s.inner.SavePin(ctx, op.pin); err != nil {
			return fmt.Errorf("affinity: save pin: %w", err)
		}
		c.Payload = encodePin(op.pin)
	}
	if err := s.feed.Publish(ctx, c); err != nil {
		return fmt.Errorf("affinity: publish pin: %w", err)
	}
	return nil
}

// LoadPins implements Store.
func (s *SharedStore) LoadPins(ctx context.Context) ([]Pin, error) { return s.inner.LoadPins(ctx) }

// SavePin implements Store: the write is queued.
func (s *SharedStore) SavePin(_ context.Context, p Pin) error {
	s.w.Put(p.ID, pinOp{pin: p})
	return nil
}

// DeletePin implements Store: the deletion is queued.
func (s *SharedStore) DeletePin(_ context.Context, id string) error {
	s.w.Put(id, pinOp{del: true})
	return nil
}

// DeletePinsForConnection implements Store: queued writes of the
// connection's pins are dropped, then its rows deleted at once. The other
// replicas drop the connection's pins when they learn it was deleted.
func (s *SharedStore) DeletePinsForConnection(ctx context.Context, connID string) (int, error) {
	s.w.Discard(func(_ string, op pinOp) bool { return !op.del && op.pin.ConnectionID == connID })
	return s.inner.DeletePinsForConnection(ctx, connID)
}

// DeleteExpired implements Store. Pins.ClearAll deletes with clearAll: then
// the queued writes go too, and the other replicas are told to clear.
func (s *SharedStore) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	clear := !now.Before(clearAll)
	if clear {
		s.w.Discard(func(string, pinOp) bool { return true })
	}
	n, err := s.inner.DeleteExpired(ctx, now)
	if err != nil || !clear {
		return n, err
	}
	if perr := s.feed.Publish(ctx, services.Change{Kind: services.ChangePin, Payload: services.ChangeDeleted}); perr != nil && s.onErr != nil {
		s.onErr(fmt.Errorf("affinity: publish clear: %w", perr))
	}
	return n, nil
}

// Flush writes the queued pins now (tests, shutdown).
func (s *SharedStore) Flush(ctx context.Context) error { return s.w.Flush(ctx) }

// Close stops the writer after writing what is queued.
func (s *SharedStore) Close(ctx context.Context) error { return s.w.Close(ctx) }

// Follow subscribes p, the Pins built on this store, to the other replicas'
// pin changes: a written pin is applied to the mirror, a deleted one
// dropped, a clear clears it; a resync merges the stored pins in. This
// process's own changes are skipped: its mirror made them.
func (s *SharedStore) Follow(p *Pins) {
	s.feed.Subscribe(services.ChangePin, func(ctx context.Context, c services.Change) error {
		switch {
		case c.Key == "" && c.Payload == "":
			return p.Reload(ctx)
		case c.Origin == "":
			return nil
		case c.Key == "":
			p.forgetAll()
		case c.Payload == services.ChangeDeleted:
			p.Forget(c.Key)
		default:
			pin, err := decodePin(c.Key, c.Payload)
			if err != nil {
				return err
			}
			p.Apply(pin)
		}
		return nil
	})
}

type pinPayload struct {
	KeyID      string `json:"k"`
	Provider   string `json:"p"`
	Connection string `json:"c"`
	CreatedAt  int64  `json:"cr"`
	LastUsedAt int64  `json:"u"`
	ExpiresAt  int64  `json:"e"`
}

func encodePin(p Pin) string {
	b, _ := json.Marshal(pinPayload{KeyID: p.KeyID, Provider: p.Provider, Connection: p.ConnectionID,
		CreatedAt: p.CreatedAt.UnixMilli(), LastUsedAt: p.LastUsedAt.UnixMilli(), ExpiresAt: p.ExpiresAt.UnixMilli()})
	return string(b)
}

func decodePin(id, payload string) (Pin, error) {
	var pp pinPayload
	if err := json.Unmarshal([]byte(payload), &pp); err != nil || pp.Connection == "" {
		return Pin{}, fmt.Errorf("affinity: unreadable pin change %q", payload)
	}
	return Pin{ID: id, KeyID: pp.KeyID, Provider: pp.Provider, ConnectionID: pp.Connection,
		CreatedAt: time.UnixMilli(pp.CreatedAt).UTC(), LastUsedAt: time.UnixMilli(pp.LastUsedAt).UTC(),
		ExpiresAt: time.UnixMilli(pp.ExpiresAt).UTC()}, nil
}

// Apply installs a pin another replica wrote, in memory only: it replaces
// the mirror's pin unless that one was used later (the latest use wins).
// The row already holds it, so it counts as stored.
func (p *Pins) Apply(pin Pin) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.pins[pin.ID]; ok && !pin.LastUsedAt.After(cur.pin.LastUsedAt) {
		return
	}
	p.pins[pin.ID] = entry{pin: pin, storedAt: pin.LastUsedAt, storedUntil: pin.ExpiresAt}
}

// Forget drops a pin another replica deleted, in memory only.
func (p *Pins) Forget(pinID string) {
	p.mu.Lock()
	delete(p.pins, pinID)
	p.mu.Unlock()
}

// ForgetConnection drops a deleted connection's pins from memory (the
// replica that deleted it deleted the rows).
func (p *Pins) ForgetConnection(connID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, e := range p.pins {
		if e.pin.ConnectionID == connID {
			delete(p.pins, id)
		}
	}
}

func (p *Pins) forgetAll() {
	p.mu.Lock()
	p.pins = map[string]entry{}
	p.mu.Unlock()
}

// Reload merges the stored pins into memory (Apply each unexpired row): a
// resync after notifications may have been lost. A pin deleted meanwhile
// elsewhere stays until it expires or fails; a pin is only a preference.
func (p *Pins) Reload(ctx context.Context) error {
	rows, err := p.store.LoadPins(ctx)
	if err != nil {
		return fmt.Errorf("affinity: reload pins: %w", err)
	}
	now, ttl := p.now(), p.ttl()
	for _, r := range rows {
		if !expired(r, now, ttl) {
			p.Apply(r)
		}
	}
	return nil
}

// Prune drops expired pins from memory only and returns how many: the
// memory half of Sweep, for the replicas that do not run the sweep.
func (p *Pins) Prune() int {
	now, ttl := p.now(), p.ttl()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for id, e := range p.pins {
		if expired(e.pin, now, ttl) {
			delete(p.pins, id)
			n++
		}
	}
	return n
}
