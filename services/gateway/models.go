package gateway

import (
	"sort"
	"time"

	"switchyard/services"
)

// ModelEntry is one entry of GET /v1/models.
type ModelEntry struct {
	ID      string
	Created int64
	OwnedBy string
}

// ListModels lists what a key may call (10-gateway-api §5.5): combos first
// (enabled, not hidden, allowed) by order then name, then every known model
// of providers with a usable connection, sorted by provider and model.
func ListModels(s *Snapshot, key services.APIKey) []ModelEntry {
	var out []ModelEntry
	seen := map[string]bool{}
	combos := append([]services.Combo(nil), s.Combos()...)
	sort.SliceStable(combos, func(i, j int) bool {
		if combos[i].Order != combos[j].Order {
			return combos[i].Order < combos[j].Order
		}
		return combos[i].Name < combos[j].Name
	})
	for _, c := range combos {
		if !c.Enabled || c.Hidden || !key.AllowsCombo(c.Name) || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		out = append(out, ModelEntry{ID: c.Name, Created: c.CreatedAt.Unix(), OwnedBy: "combo"})
	}
	var direct []ModelEntry
	for _, p := range s.Catalogue.All() {
		if !usableProvider(s, key, p.ID) {
			continue
		}
		for _, m := range p.Models {
			id := p.ID + "/" + m
			if key.AllowsModel(id) && !seen[id] {
				seen[id] = true
				direct = append(direct, ModelEntry{ID: id, OwnedBy: p.ID})
			}
		}
	}
	sort.Slice(direct, func(i, j int) bool { return direct[i].ID < direct[j].ID })
	return append(out, direct...)
}

// CreatedRFC3339 renders a model's creation time for the Anthropic shape.
func (m ModelEntry) CreatedRFC3339() string {
	return time.Unix(m.Created, 0).UTC().Format(time.RFC3339)
}
