package services

import (
	"sort"
	"sync/atomic"
)

func sortSlice[T any](s []T, less func(a, b T) bool) {
	sort.SliceStable(s, func(i, j int) bool { return less(s[i], s[j]) })
}

// CatalogueHolder publishes the current catalogue to readers without a lock:
// writers swap in a new immutable Catalogue.
type CatalogueHolder struct{ p atomic.Pointer[Catalogue] }

// NewCatalogueHolder starts with c.
func NewCatalogueHolder(c *Catalogue) *CatalogueHolder {
	h := &CatalogueHolder{}
	h.p.Store(c)
	return h
}

func (h *CatalogueHolder) Get() *Catalogue  { return h.p.Load() }
func (h *CatalogueHolder) Set(c *Catalogue) { h.p.Store(c) }
