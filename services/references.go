package services

import (
	"context"
	"fmt"
)

// Ref names a combo or key that points at something.
type Ref struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ConnectionReferences lists combos pinning a connection and keys allowing it.
type ConnectionReferences struct {
	Combos []Ref `json:"combos"`
	Keys   []Ref `json:"keys"`
}

// UseReferenceStores lets the service find combos and keys that point at a
// connection (delete confirmation, GET one, the lease-key delete rule).
func (s *Connections) UseReferenceStores(combos ComboStore, keys KeyStore) {
	s.comboStore, s.keyStore = combos, keys
}

// References lists combos whose targets pin the connection and keys whose
// allowedConnections contain it.
func (s *Connections) References(ctx context.Context, id string) (ConnectionReferences, error) {
	refs := ConnectionReferences{Combos: []Ref{}, Keys: []Ref{}}
	if s.comboStore != nil {
		combos, err := s.comboStore.ListCombos(ctx)
		if err != nil {
			return refs, err
		}
		for _, c := range combos {
			for _, t := range c.Targets {
				if t.ConnectionID != nil && *t.ConnectionID == id {
					refs.Combos = append(refs.Combos, Ref{ID: c.ID, Name: c.Name})
					break
				}
			}
		}
	}
	if s.keyStore != nil {
		keys, err := s.keyStore.ListKeys(ctx)
		if err != nil {
			return refs, err
		}
		for _, k := range keys {
			if contains(k.AllowedConnections, id) {
				refs.Keys = append(refs.Keys, Ref{ID: k.ID, Name: k.Name})
			}
		}
	}
	return refs, nil
}

// checkDeletable refuses to delete the last allowed connection of an active
// lease:exclusive key (40-admin-api §5).
func (s *Connections) checkDeletable(ctx context.Context, id string) error {
	if s.keyStore == nil {
		return nil
	}
	keys, err := s.keyStore.ListKeys(ctx)
	if err != nil {
		return err
	}
	conns, err := s.store.ListConnections(ctx)
	if err != nil {
		return err
	}
	exists := map[string]bool{}
	for _, c := range conns {
		exists[c.ID] = c.ID != id
	}
	for _, k := range keys {
		if k.RevokedAt != nil || !k.HasScope(ScopeLeaseExclusive) || !contains(k.AllowedConnections, id) {
			continue
		}
		left := 0
		for _, other := range k.AllowedConnections {
			if exists[other] {
				left++
			}
		}
		if left == 0 {
			return &ConflictError{Msg: fmt.Sprintf("Key '%s' would lose its last allowed connection. Edit the key first.", k.Name)}
		}
	}
	return nil
}
