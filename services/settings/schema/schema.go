// Package schema is the field engine of Switchyard's settings documents
// (40-admin-api §2) and of combo config (30-routing §3): a table of typed
// leaf fields addressed by dotted JSON paths, strict decoding of JSON values
// against it (every problem keyed by its dotted path, in words the admin
// can act on), per-section merge with null deletes, environment defaults,
// and nesting the flat values back into the JSON a typed Go struct decodes.
//
// It imports only the standard library, so both the services root (combo
// config) and services/settings (the stored documents) build on it.
package schema

import (
	"slices"
	"strings"
)

// Sources of an effective value (40-admin-api §2.1 explain).
const (
	SourceDefault = "default"
	SourceEnv     = "env"
	SourceStored  = "stored"
	SourceDerived = "derived"
)

// Kind is the JSON type of a field.
type Kind int

const (
	Bool       Kind = iota + 1 // bool
	Int                        // int64, Min–Max inclusive
	Float                      // float64, MinFloat–MaxFloat inclusive
	String                     // string: at most MaxLen characters, one of OneOf when set
	IntList                    // []int64: MinItems–MaxItems items, each Min–Max
	FloatList                  // []float64: MinItems–MaxItems items, each MinFloat–MaxFloat
	StringList                 // []string: MinItems–MaxItems items, each a String
	Object                     // free-form object, merged per key (deeply) on PATCH
	JSON                       // any JSON value, replaced on PATCH; Check validates it
	Record                     // an object with the fields of Item, replaced on PATCH
	Records                    // an array of Record values, replaced on PATCH
)

// Field describes one leaf of a document. Values are held in canonical Go
// types: bool, int64, float64, string, []int64, []float64, []string, plain
// JSON (map[string]any / []any with float64 numbers) for Object and JSON,
// and nested maps of canonical values for Record and Records.
type Field struct {
	Path    string // dotted JSON path, e.g. "requestQueue.maxWaitMs"
	Kind    Kind
	Default any
	// Min/Max bound Int and IntList items; MinFloat/MaxFloat bound Float and
	// FloatList items.
	Min, Max           int64
	MinFloat, MaxFloat float64
	// MinItems/MaxItems bound lists (0 = no bound).
	MinItems, MaxItems int
	MaxLen             int      // String and StringList items, in characters (0 = no bound)
	OneOf              []string // String and StringList items: the allowed values (nil = any)
	Env                string   // environment variable supplying the default, "" = none
	// Required is the message of an absent or null field when a Record is
	// decoded ("" = optional).
	Required string
	// Problem, when set, is the one sentence for any problem of the value's
	// own type, range or items (for Record and Records: a value that is not
	// an object or an array); Check's problems keep their own words.
	Problem string
	// Item describes the fields of a Record, or of each Records item.
	Item *Schema
	// Check runs after the kind checks (for Object on the merged value; for
	// Records always, on the items as decoded: an item keeps the fields that
	// passed, a non-object item is nil, so rules across items are reported
	// with the items' own problems). It returns the value to store (it may
	// normalise) and problems keyed by a path suffix: "" is the field
	// itself, ".3.status" a part of it. live is true for PATCH values:
	// lookups against other state (known providers) run only then, so a
	// stored value never becomes unreadable because, say, a custom provider
	// was deleted later.
	Check func(v any, live bool) (any, map[string]string)
}

// Values holds values by field path. Stored values are sparse; effective
// values have every field.
type Values map[string]any

// Int returns an integer value (0 when absent).
func (v Values) Int(path string) int64 { n, _ := v[path].(int64); return n }

// Bool returns a boolean value (false when absent).
func (v Values) Bool(path string) bool { b, _ := v[path].(bool); return b }

// String returns a string value ("" when absent).
func (v Values) String(path string) string { s, _ := v[path].(string); return s }

// Schema is the set of fields of one document.
type Schema struct {
	fields []*Field
	byPath map[string]*Field
	root   *node
}

type node struct {
	children map[string]*node
	field    *Field
}

// New indexes fields; it panics on a malformed schema (a programming error).
func New(fields []Field) *Schema {
	s := &Schema{byPath: map[string]*Field{}, root: &node{children: map[string]*node{}}}
	for i := range fields {
		f := &fields[i]
		if n, ok := f.Default.(int); ok {
			f.Default = int64(n)
		}
		if _, dup := s.byPath[f.Path]; dup {
			panic("settings schema: duplicate field " + f.Path)
		}
		if (f.Kind == Record || f.Kind == Records) && f.Item == nil {
			panic("settings schema: " + f.Path + " has no Item schema")
		}
		s.fields = append(s.fields, f)
		s.byPath[f.Path] = f
		s.index(f)
	}
	return s
}

func (s *Schema) index(f *Field) {
	n := s.root
	parts := strings.Split(f.Path, ".")
	for j, p := range parts {
		if n.field != nil {
			panic("settings schema: " + f.Path + " nests under a field")
		}
		child := n.children[p]
		if child == nil {
			child = &node{children: map[string]*node{}}
			n.children[p] = child
		}
		n = child
		if j == len(parts)-1 {
			if len(n.children) > 0 {
				panic("settings schema: " + f.Path + " is a section")
			}
			n.field = f
		}
	}
}

// Fields returns the fields in schema order.
func (s *Schema) Fields() []Field {
	out := make([]Field, len(s.fields))
	for i, f := range s.fields {
		out[i] = *f
	}
	return out
}

// Field returns the field at path.
func (s *Schema) Field(path string) (Field, bool) {
	f, ok := s.byPath[path]
	if !ok {
		return Field{}, false
	}
	return *f, true
}

// Defaults returns every field's built-in default.
func (s *Schema) Defaults() Values {
	out := Values{}
	for _, f := range s.fields {
		out[f.Path] = clone(f.Default)
	}
	return out
}

// Nest turns values into the nested JSON object of the document.
func (s *Schema) Nest(v Values) map[string]any {
	root := map[string]any{}
	for _, f := range s.fields {
		if val, ok := v[f.Path]; ok {
			SetPath(root, f.Path, val)
		}
	}
	return root
}

// Effective layers stored over env over defaults and reports each field's
// source (default, env or stored).
func (s *Schema) Effective(stored, env Values) (Values, map[string]string) {
	eff := Values{}
	src := map[string]string{}
	for _, f := range s.fields {
		if v, ok := stored[f.Path]; ok {
			eff[f.Path], src[f.Path] = v, SourceStored
		} else if v, ok := env[f.Path]; ok {
			eff[f.Path], src[f.Path] = v, SourceEnv
		} else {
			eff[f.Path], src[f.Path] = clone(f.Default), SourceDefault
		}
	}
	return eff, src
}

// oneOf reports whether s is allowed by f.OneOf.
func (f *Field) oneOf(s string) bool { return f.OneOf == nil || slices.Contains(f.OneOf, s) }
