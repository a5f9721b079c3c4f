package routing

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// State is the per-combo routing state as the attempt loop sees it: the
// outcome hooks of 30-routing §6.6. Every method is safe for concurrent use
// and cheap; none blocks on the network (persistence is write-through to a
// local store). Hooks for an entry or combo the state has never seen are
// no-ops apart from the least-used count.
type State interface {
	// OnDispatch is called when a dispatch to the entry starts, whatever
	// the connection or pass (least-used counts dispatches started).
	OnDispatch(comboID, entryID string)
	// OnSuccess is called once when the entry served the request, with
	// the connection that served ("" for a reference entry). It advances
	// weighted stickiness and rewrites the LKGP record when it changes.
	OnSuccess(comboID, entryID, connectionID string)
	// OnFailure is called once when the walk leaves an entry that was
	// dispatched and failed (every connection it tried failed and routing
	// moves on; not for a caller_error stop or a client abort). It clears
	// weighted stickiness and makes round-robin start a fresh batch when
	// the entry started the current one.
	OnFailure(comboID, entryID string)
	// OnSkip is called when the walk skips an entry because a gate was
	// closed at re-check (§6.1 step 2), or no connection was left for it.
	// Round-robin starts a fresh batch when the entry started the current
	// one.
	OnSkip(comboID, entryID string)
	// Forget drops every piece of state of a deleted combo, its persisted
	// LKGP record included.
	Forget(comboID string)
}

var _ State = (*MemoryState)(nil)

// LKGPRecord is the last-known-good record of one combo (§10.15): the
// entry and connection of the last success that changed it.
type LKGPRecord struct {
	ComboID      string
	EntryID      string
	ConnectionID string
	UpdatedAt    time.Time
}

// LKGPStore persists LKGP records, one per combo (§9: the only persisted
// state of this package). MemoryState loads every record once when it is
// built and writes through on each change; a store is optional.
type LKGPStore interface {
	// Load returns every stored record.
	Load(ctx context.Context) ([]LKGPRecord, error)
	// Save inserts or replaces the record of rec.ComboID.
	Save(ctx context.Context, rec LKGPRecord) error
	// Delete removes the record of a combo; a missing record is no error.
	Delete(ctx context.Context, comboID string) error
}

// StateOptions configures a MemoryState.
type StateOptions struct {
	// Now stamps LKGP records; nil means time.Now. Pass the injected
	// clock's Now.
	Now func() time.Time
	// LKGP persists LKGP records; nil keeps them in memory only.
	LKGP LKGPStore
	// OnStoreError receives LKGP store write errors (the in-memory record
	// is kept either way); nil drops them.
	OnStoreError func(error)
}

// MemoryState is the in-memory State of one process, keyed by combo id
// (§9's table): round-robin tickets, weighted stickiness, strict-random
// decks, least-used counters and LKGP records. Safe for concurrent use; each
// combo has its own lock. Lock order where two are held: combo, then the
// registry's RNG.
type MemoryState struct {
	now   func() time.Time
	store LKGPStore
	onErr func(error)

	mu     sync.RWMutex
	combos map[string]*comboState
}

// comboState is everything kept for one combo.
type comboState struct {
	mu sync.Mutex

	// Round-robin (§10.3): the ticket, and the batch, start entry and limit
	// of the last ticket issued. Only the latest batch can still raise the
	// ticket: for older batches (b+1)·L ≤ the ticket already.
	rrTicket uint64
	rrBatch  uint64
	rrStart  string
	rrLimit  uint64

	// Weighted stickiness (§10.2): entry drawn, its consecutive successes
	// and the limit it was drawn under.
	wSticky    string
	wSuccesses int
	wLimit     int

	// Strict-random (§10.13): remaining cards (next first), the ids the
	// cycle was built from, the ids popped this cycle.
	deck   []string
	cycle  map[string]struct{}
	popped map[string]struct{}
	// posIDs and pos index the entry ids of the last order (id → position),
	// reused while the combo's entries are the same.
	posIDs []string
	pos    map[string]int

	// Least-used (§10.8): dispatches started per entry id.
	used map[string]uint64

	// LKGP (§10.15). lkgpActive is set by the lkgp strategy's Order, so
	// successes of combos using another strategy write no record.
	lkgp       LKGPRecord
	hasLKGP    bool
	lkgpActive bool
	lkgpDirty  bool
	// saveMu serialises store writes of this combo; each write re-reads
	// the latest record, so the last change always wins.
	saveMu sync.Mutex
}

// NewMemoryState builds a state and loads the stored LKGP records, if a
// store is given.
func NewMemoryState(ctx context.Context, opts StateOptions) (*MemoryState, error) {
	s := newMemoryState(opts)
	if s.store == nil {
		return s, nil
	}
	recs, err := s.store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("routing: load lkgp records: %w", err)
	}
	for _, r := range recs {
		cs := s.combo(r.ComboID)
		cs.lkgp, cs.hasLKGP = r, true
	}
	return s, nil
}

func newMemoryState(opts StateOptions) *MemoryState {
	s := &MemoryState{now: opts.Now, store: opts.LKGP, onErr: opts.OnStoreError, combos: map[string]*comboState{}}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// combo returns the state of comboID, creating it on first use.
func (s *MemoryState) combo(comboID string) *comboState {
	s.mu.RLock()
	cs := s.combos[comboID]
	s.mu.RUnlock()
	if cs != nil {
		return cs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs = s.combos[comboID]; cs == nil {
		cs = &comboState{}
		s.combos[comboID] = cs
	}
	return cs
}

// peek returns the state of comboID or nil.
func (s *MemoryState) peek(comboID string) *comboState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.combos[comboID]
}

// OnDispatch counts a dispatch started to the entry (least-used).
func (s *MemoryState) OnDispatch(comboID, entryID string) {
	cs := s.peek(comboID)
	if cs == nil {
		return // never ordered by least-used: nothing counts yet
	}
	cs.mu.Lock()
	if cs.used != nil {
		if _, ok := cs.used[entryID]; ok {
			cs.used[entryID]++
		}
	}
	cs.mu.Unlock()
}

// OnSuccess advances weighted stickiness and records the LKGP entry and
// connection.
func (s *MemoryState) OnSuccess(comboID, entryID, connectionID string) {
	cs := s.peek(comboID)
	if cs == nil {
		return
	}
	cs.mu.Lock()
	if cs.wSticky == entryID && cs.wSticky != "" {
		cs.wSuccesses++
		if cs.wSuccesses >= cs.wLimit {
			cs.wSticky, cs.wSuccesses = "", 0
		}
	}
	changed := false
	if cs.lkgpActive && (!cs.hasLKGP || cs.lkgp.EntryID != entryID || cs.lkgp.ConnectionID != connectionID) {
		cs.lkgp = LKGPRecord{ComboID: comboID, EntryID: entryID, ConnectionID: connectionID, UpdatedAt: s.now()}
		cs.hasLKGP, cs.lkgpDirty, changed = true, true, true
	}
	cs.mu.Unlock()
	if changed {
		s.persist(comboID, cs)
	}
}

// OnFailure clears weighted stickiness of the entry and raises the
// round-robin ticket when the entry started the current batch.
func (s *MemoryState) OnFailure(comboID, entryID string) {
	cs := s.peek(comboID)
	if cs == nil {
		return
	}
	cs.mu.Lock()
	if cs.wSticky == entryID {
		cs.wSticky, cs.wSuccesses = "", 0
	}
	cs.raiseRoundRobin(entryID)
	cs.mu.Unlock()
}

// OnSkip raises the round-robin ticket when the skipped entry started the
// current batch.
func (s *MemoryState) OnSkip(comboID, entryID string) {
	cs := s.peek(comboID)
	if cs == nil {
		return
	}
	cs.mu.Lock()
	cs.raiseRoundRobin(entryID)
	cs.mu.Unlock()
}

// Forget drops the combo's state and its stored LKGP record.
func (s *MemoryState) Forget(comboID string) {
	s.mu.Lock()
	cs := s.combos[comboID]
	delete(s.combos, comboID)
	s.mu.Unlock()
	if cs == nil || s.store == nil {
		return
	}
	cs.mu.Lock()
	had := cs.hasLKGP
	cs.hasLKGP, cs.lkgpDirty = false, had
	cs.mu.Unlock()
	if had {
		s.persist(comboID, cs)
	}
}

// LKGP returns the combo's current LKGP record.
func (s *MemoryState) LKGP(comboID string) (LKGPRecord, bool) {
	cs := s.peek(comboID)
	if cs == nil {
		return LKGPRecord{}, false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.lkgp, cs.hasLKGP
}

// LeastUsedCount returns the dispatch count of an entry as least-used sees
// it (false before least-used has ordered the entry).
func (s *MemoryState) LeastUsedCount(comboID, entryID string) (uint64, bool) {
	cs := s.peek(comboID)
	if cs == nil {
		return 0, false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n, ok := cs.used[entryID]
	return n, ok
}

// persist writes the combo's latest LKGP record (or its deletion) to the
// store. Called without cs.mu held.
func (s *MemoryState) persist(comboID string, cs *comboState) {
	if s.store == nil {
		return
	}
	cs.saveMu.Lock()
	defer cs.saveMu.Unlock()
	cs.mu.Lock()
	rec, has, dirty := cs.lkgp, cs.hasLKGP, cs.lkgpDirty
	cs.lkgpDirty = false
	cs.mu.Unlock()
	if !dirty {
		return // a concurrent persist already wrote the latest record
	}
	var err error
	if has {
		err = s.store.Save(context.Background(), rec)
	} else {
		err = s.store.Delete(context.Background(), comboID)
	}
	if err != nil && s.onErr != nil {
		s.onErr(fmt.Errorf("routing: persist lkgp %s: %w", comboID, err))
	}
}

// raiseRoundRobin makes the next request start a fresh batch when entryID
// started the current one (§10.3). Called with cs.mu held.
func (cs *comboState) raiseRoundRobin(entryID string) {
	if cs.rrLimit == 0 || cs.rrStart != entryID {
		return
	}
	if next := (cs.rrBatch + 1) * cs.rrLimit; cs.rrTicket < next {
		cs.rrTicket = next
	}
}
