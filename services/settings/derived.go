package settings

import "sync/atomic"

// Derived is state computed from a document — a consumer's config — once
// per published snapshot, so the per-request read is one atomic load and a
// pointer compare: no lock, no allocation, and a PATCH applies to the next
// request without a restart.
type Derived[T, D any] struct {
	doc  *Document[T]
	f    func(*T) D
	last atomic.Pointer[derivedAt[T, D]]
}

type derivedAt[T, D any] struct {
	from *Snapshot[T]
	val  D
}

// NewDerived caches f of d's current document.
func NewDerived[T, D any](d *Document[T], f func(*T) D) *Derived[T, D] {
	return &Derived[T, D]{doc: d, f: f}
}

// Get returns f of the current document (read-only; shared by readers).
// Two readers racing after a change may both compute it; either result is
// the same value.
func (x *Derived[T, D]) Get() *D {
	snap := x.doc.Current()
	if c := x.last.Load(); c != nil && c.from == snap {
		return &c.val
	}
	c := &derivedAt[T, D]{from: snap, val: x.f(&snap.Doc)}
	x.last.Store(c)
	return &c.val
}
