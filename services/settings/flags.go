package settings

import (
	"context"
	"errors"

	"switchyard/services"
	"switchyard/services/settings/schema"
)

// Feature flags (40-admin-api §9) are views of boolean fields of the
// settings documents: a flag reads its field's effective value and source,
// takes its environment variable from the field's schema entry, and a flag
// PATCH is a PATCH of the documents that hold the fields.

// FeatureFlag is one boolean switch as GET /api/feature-flags lists it.
type FeatureFlag struct {
	Key             string  `json:"key"`
	Field           string  `json:"field"`
	Value           bool    `json:"value"`
	Source          string  `json:"source"` // default, env or stored
	Env             *string `json:"env"`
	RequiresRestart bool    `json:"requiresRestart"`
	Description     string  `json:"description"`
}

// FlagDef names one boolean field of a document as a flag.
type FlagDef struct {
	Key, Field, Description string
}

// flagDoc is a document's side of the flags.
type flagDoc interface {
	Patcher
	flag(path string) (value bool, source, env string)
}

func (d *Document[T]) flag(path string) (bool, string, string) {
	snap := d.Current()
	v, _ := snap.Value(path).(bool)
	f, _ := d.spec.Schema.Field(path)
	return v, snap.Source(path), f.Env
}

// FlagGroup is the flags of one document.
type FlagGroup struct {
	doc  flagDoc
	defs []FlagDef
}

// FlagsOf makes the flags of a document from their definitions.
func FlagsOf[T any](d *Document[T], defs []FlagDef) FlagGroup {
	return FlagGroup{doc: d, defs: defs}
}

// Flags serves the flags of several documents, in the given order (which is
// also the order documents lock in on a flag PATCH).
type Flags struct{ groups []FlagGroup }

// NewFlags lists groups in order.
func NewFlags(groups ...FlagGroup) *Flags { return &Flags{groups: groups} }

// List returns the flags with their effective values and sources.
func (f *Flags) List() []FeatureFlag {
	var out []FeatureFlag
	for _, g := range f.groups {
		for _, d := range g.defs {
			value, source, env := g.doc.flag(d.Field)
			var envp *string
			if env != "" {
				envp = &env
			}
			out = append(out, FeatureFlag{Key: d.Key, Field: d.Field, Value: value, Source: source, Env: envp, Description: d.Description})
		}
	}
	return out
}

func (f *Flags) find(key string) (flagDoc, FlagDef, bool) {
	for _, g := range f.groups {
		for _, d := range g.defs {
			if d.Key == key {
				return g.doc, d, true
			}
		}
	}
	return nil, FlagDef{}, false
}

// Patch applies PATCH /api/feature-flags: {"<key>": true|false|null}; null
// drops the stored value. Unknown keys, non-booleans and rule violations
// come back at once as a *services.ValidationError keyed by flag key;
// nothing is stored on error.
func (f *Flags) Patch(ctx context.Context, body []byte) ([]FeatureFlag, error) {
	patch, err := DecodePatch(body)
	if err != nil {
		return nil, err
	}
	parts, keyOf, err := f.parts(patch)
	if err != nil {
		return nil, err
	}
	if err := PatchAll(ctx, parts...); err != nil {
		var verr *services.ValidationError
		var ferr *FeedError
		switch {
		case errors.As(err, &verr):
			return nil, &services.ValidationError{Fields: byFlagKey(verr.Fields, keyOf)}
		case errors.As(err, &ferr):
			return f.List(), err
		}
		return nil, err
	}
	return f.List(), nil
}

// parts turns a flag patch into one document patch per group, in group
// order; keyOf maps field paths back to flag keys.
func (f *Flags) parts(patch map[string]any) ([]Part, map[string]string, error) {
	keyOf := map[string]string{}
	fields := map[string]string{}
	byDoc := map[flagDoc]map[string]any{}
	for _, k := range schema.SortedKeys(patch) {
		v := patch[k]
		doc, def, ok := f.find(k)
		if !ok {
			fields[k] = "unknown field"
			continue
		}
		if _, ok := v.(bool); !ok && v != nil {
			fields[k] = "must be true, false or null"
			continue
		}
		keyOf[def.Field] = k
		if byDoc[doc] == nil {
			byDoc[doc] = map[string]any{}
		}
		schema.SetPath(byDoc[doc], def.Field, v)
	}
	if len(fields) > 0 {
		return nil, nil, &services.ValidationError{Fields: fields}
	}
	var parts []Part
	for _, g := range f.groups {
		if p, ok := byDoc[g.doc]; ok {
			parts = append(parts, Part{Doc: g.doc, Patch: p})
			delete(byDoc, g.doc)
		}
	}
	return parts, keyOf, nil
}

// byFlagKey renames the problems of flag fields to their flag keys.
func byFlagKey(fields, keyOf map[string]string) map[string]string {
	mapped := map[string]string{}
	for _, path := range schema.SortedKeys(fields) {
		msg := fields[path]
		if k, ok := keyOf[path]; ok {
			path = k
		}
		if _, dup := mapped[path]; !dup {
			mapped[path] = msg
		}
	}
	return mapped
}
