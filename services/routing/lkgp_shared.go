package routing

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"switchyard/services"
)

// LKGP records in a fleet (scale-out §3.4 row 12). A record is written only
// when it changes, and here off the request goroutine: SharedLKGPStore
// queues the write (coalesced per combo: a burst of changes writes the
// last), a background writer stores it and publishes ChangeLKGP, and every
// other replica applies it to its MemoryState. The newest UpdatedAt wins.

// SharedLKGPStore is the LKGPStore of a replica in a fleet: Save and Delete
// queue the write and return at once; Load is the inner store's.
type SharedLKGPStore struct {
	inner LKGPStore
	feed  services.ChangeFeed
	onErr func(error)
	w     *services.Coalescer[string, lkgpOp]
}

var _ LKGPStore = (*SharedLKGPStore)(nil)

type lkgpOp struct {
	rec LKGPRecord
	del bool
}

// NewSharedLKGPStore wraps inner. onErr (may be nil) sees failed writes and
// publishes; memory keeps the record either way.
func NewSharedLKGPStore(inner LKGPStore, feed services.ChangeFeed, onErr func(error)) *SharedLKGPStore {
	s := &SharedLKGPStore{inner: inner, feed: feed, onErr: onErr}
	s.w = services.NewCoalescer(s.write, onErr)
	return s
}

func (s *SharedLKGPStore) write(ctx context.Context, comboID string, op lkgpOp) error {
	c := services.Change{Kind: services.ChangeLKGP, Key: comboID, Payload: services.ChangeDeleted}
	if op.del {
		if err := s.inner.Delete(ctx, comboID); err != nil {
			return fmt.Errorf("routing: delete lkgp %s: %w", comboID, err)
		}
	} else {
		if err := s.inner.Save(ctx, op.rec); err != nil {
			return fmt.Errorf("routing: save lkgp %s: %w", comboID, err)
		}
		c.Payload = encodeLKGP(op.rec)
	}
	if err := s.feed.Publish(ctx, c); err != nil {
		return fmt.Errorf("routing: publish lkgp %s: %w", comboID, err)
	}
	return nil
}

// Load implements LKGPStore.
func (s *SharedLKGPStore) Load(ctx context.Context) ([]LKGPRecord, error) { return s.inner.Load(ctx) }

// Save implements LKGPStore: the write is queued.
func (s *SharedLKGPStore) Save(_ context.Context, rec LKGPRecord) error {
	s.w.Put(rec.ComboID, lkgpOp{rec: rec})
	return nil
}

// Delete implements LKGPStore: the deletion is queued.
func (s *SharedLKGPStore) Delete(_ context.Context, comboID string) error {
	s.w.Put(comboID, lkgpOp{del: true})
	return nil
}

// Flush writes the queued records now (tests, shutdown).
func (s *SharedLKGPStore) Flush(ctx context.Context) error { return s.w.Flush(ctx) }

// Close stops the writer after writing what is queued.
func (s *SharedLKGPStore) Close(ctx context.Context) error { return s.w.Close(ctx) }

// Follow subscribes st, the MemoryState built on this store, to the other
// replicas' LKGP changes; a resync merges the stored records in. This
// process's own changes are skipped.
func (s *SharedLKGPStore) Follow(st *MemoryState) {
	s.feed.Subscribe(services.ChangeLKGP, func(ctx context.Context, c services.Change) error {
		switch {
		case c.Key == "":
			return st.ReloadLKGP(ctx)
		case c.Origin == "":
			return nil
		case c.Payload == services.ChangeDeleted:
			st.ForgetLKGP(c.Key)
			return nil
		}
		rec, err := decodeLKGP(c.Key, c.Payload)
		if err != nil {
			return err
		}
		st.ApplyLKGP(rec)
		return nil
	})
}

// encodeLKGP is "<updated ms> <entry id> <connection id>" (ids never hold
// spaces; the connection is "" for a reference entry).
func encodeLKGP(r LKGPRecord) string {
	return strconv.FormatInt(r.UpdatedAt.UnixMilli(), 10) + " " + r.EntryID + " " + r.ConnectionID
}

func decodeLKGP(comboID, p string) (LKGPRecord, error) {
	ms, rest, ok := strings.Cut(p, " ")
	entry, conn, _ := strings.Cut(rest, " ")
	at, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || entry == "" {
		return LKGPRecord{}, fmt.Errorf("routing: unreadable lkgp change %q", p)
	}
	return LKGPRecord{ComboID: comboID, EntryID: entry, ConnectionID: conn, UpdatedAt: time.UnixMilli(at).UTC()}, nil
}

// ApplyLKGP installs a record another replica wrote, in memory only, unless
// the one held is newer.
func (s *MemoryState) ApplyLKGP(rec LKGPRecord) {
	cs := s.combo(rec.ComboID)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.hasLKGP && cs.lkgp.UpdatedAt.After(rec.UpdatedAt) {
		return
	}
	cs.lkgp, cs.hasLKGP = rec, true
}

// ForgetLKGP drops a record another replica deleted, in memory only.
func (s *MemoryState) ForgetLKGP(comboID string) {
	cs := s.peek(comboID)
	if cs == nil {
		return
	}
	cs.mu.Lock()
	cs.hasLKGP = false
	cs.mu.Unlock()
}

// ReloadLKGP merges the stored records in (ApplyLKGP each): a resync after
// notifications may have been lost.
func (s *MemoryState) ReloadLKGP(ctx context.Context) error {
	if s.store == nil {
		return nil
	}
	recs, err := s.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("routing: reload lkgp records: %w", err)
	}
	for _, r := range recs {
		s.ApplyLKGP(r)
	}
	return nil
}
