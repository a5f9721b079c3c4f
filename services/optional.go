package services

import (
	"bytes"
	"encoding/json"
)

// Opt is a PATCH field with three states: absent (keep), null (clear) and a
// value. encoding/json cannot tell absent from null with a pointer alone.
type Opt[T any] struct {
	Set  bool // the field was present
	Null bool // it was JSON null
	V    T
}

// Some returns a present, non-null value.
func Some[T any](v T) Opt[T] { return Opt[T]{Set: true, V: v} }

// Null returns a present null.
func Null[T any]() Opt[T] { return Opt[T]{Set: true, Null: true} }

func (o *Opt[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	// Strict inside too: a misspelt key in a nested object is an error, not
	// a silent reset of that object.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(&o.V)
}

// Ptr returns nil for absent or null, else a pointer to the value.
func (o Opt[T]) Ptr() *T {
	if !o.Set || o.Null {
		return nil
	}
	v := o.V
	return &v
}
