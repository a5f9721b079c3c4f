// Package gateway is the /v1 proxy engine: model resolution, the attempt
// loop over targets and connections, upstream dispatch and the stream relay.
// Everything on the request path reads an immutable in-memory snapshot, so a
// request never touches the database.
package gateway

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// Snapshot is an immutable view of what routing needs: connections by
// provider in configured order, combos by name, the catalogue.
type Snapshot struct {
	Catalogue  *services.Catalogue
	byProvider map[string][]*services.Connection
	byID       map[string]*services.Connection
	all        []services.Connection      // list order (services.SortConnections)
	combos     []services.Combo           // list order
	comboName  map[string]*services.Combo // exact name → combo
	comboID    map[string]*services.Combo
}

// Connections returns a provider's connections in configured order
// (priority asc, created, id), disabled ones included.
func (s *Snapshot) Connections(provider string) []*services.Connection { return s.byProvider[provider] }

// All returns every connection in list order: provider in catalogue order,
// priority, name (as services.Connections.List). The slice is shared and
// must not be modified; the dashboard reads names and configuration from it
// instead of the store.
func (s *Snapshot) All() []services.Connection { return s.all }

// Connection finds one connection by id.
func (s *Snapshot) Connection(id string) (*services.Connection, bool) {
	c, ok := s.byID[id]
	return c, ok
}

// Combos returns every combo in list order.
func (s *Snapshot) Combos() []services.Combo { return s.combos }

// ComboByName finds a combo by its exact name.
func (s *Snapshot) ComboByName(name string) (*services.Combo, bool) {
	c, ok := s.comboName[name]
	return c, ok
}

// ComboByID finds a combo by id.
func (s *Snapshot) ComboByID(id string) (*services.Combo, bool) {
	c, ok := s.comboID[id]
	return c, ok
}

// Source loads what a snapshot is built from; the admin services satisfy it.
type Source interface {
	Catalogue() *services.Catalogue
	ListConnections(ctx context.Context) ([]services.Connection, error)
	ListCombos(ctx context.Context) ([]services.Combo, error)
}

// Registry publishes the current snapshot and per-connection runtime
// counters. Readers never lock; Reload swaps in a new snapshot.
type Registry struct {
	src     Source
	current atomic.Pointer[Snapshot]
	mu      sync.Mutex // serialises reloads
	runtime sync.Map   // connection id → *ConnRuntime
}

// ConnRuntime holds counters that change per request and survive reloads.
type ConnRuntime struct {
	lastUsedMs atomic.Int64
	inFlight   atomic.Int64
	successes  atomic.Int64
	failures   atomic.Int64
}

// LastUsed is when the last dispatch to the connection started (zero = never).
func (r *ConnRuntime) LastUsed() time.Time {
	ms := r.lastUsedMs.Load()
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// InFlight is the number of dispatches in progress.
func (r *ConnRuntime) InFlight() int { return int(r.inFlight.Load()) }

// SuccessRate is successes / dispatches, or -1 with no data.
func (r *ConnRuntime) SuccessRate() float64 {
	s, f := r.successes.Load(), r.failures.Load()
	if s+f == 0 {
		return -1
	}
	return float64(s) / float64(s+f)
}

// NewRegistry builds a registry and loads the first snapshot.
func NewRegistry(ctx context.Context, src Source) (*Registry, error) {
	r := &Registry{src: src}
	if err := r.Reload(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Snapshot returns the current snapshot.
func (r *Registry) Snapshot() *Snapshot { return r.current.Load() }

// Runtime returns the counters of a connection, creating them on first use.
func (r *Registry) Runtime(id string) *ConnRuntime {
	if v, ok := r.runtime.Load(id); ok {
		return v.(*ConnRuntime)
	}
	v, _ := r.runtime.LoadOrStore(id, &ConnRuntime{})
	return v.(*ConnRuntime)
}

// Reload rebuilds the snapshot from the source (called after every admin change).
func (r *Registry) Reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	conns, err := r.src.ListConnections(ctx)
	if err != nil {
		return err
	}
	combos, err := r.src.ListCombos(ctx)
	if err != nil {
		return err
	}
	s := &Snapshot{Catalogue: r.src.Catalogue(), byProvider: map[string][]*services.Connection{}, byID: map[string]*services.Connection{},
		combos: combos, comboName: map[string]*services.Combo{}, comboID: map[string]*services.Combo{}}
	for i := range conns {
		c := &conns[i]
		s.byProvider[c.Provider] = append(s.byProvider[c.Provider], c)
		s.byID[c.ID] = c
	}
	s.all = append([]services.Connection(nil), conns...)
	if s.Catalogue != nil {
		services.SortConnections(s.all, s.Catalogue)
	}
	for _, list := range s.byProvider {
		sort.SliceStable(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.Priority != b.Priority {
				return a.Priority < b.Priority
			}
			if !a.CreatedAt.Equal(b.CreatedAt) {
				return a.CreatedAt.Before(b.CreatedAt)
			}
			return a.ID < b.ID
		})
	}
	for i := range s.combos {
		c := &s.combos[i]
		s.comboID[c.ID] = c
		if c.Enabled {
			s.comboName[c.Name] = c
		}
	}
	r.current.Store(s)
	// Drop runtime counters of deleted connections.
	r.runtime.Range(func(k, _ any) bool {
		if _, ok := s.byID[k.(string)]; !ok {
			r.runtime.Delete(k)
		}
		return true
	})
	return nil
}
