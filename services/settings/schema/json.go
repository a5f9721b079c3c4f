package schema

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Build decodes values into the typed document T: the values are nested
// into the document's JSON object, which T's json tags read. This is the one
// place flat values become a Go struct; code outside the settings packages
// reads the struct.
func Build[T any](s *Schema, v Values) (T, error) {
	return Convert[T](s.Nest(v))
}

// Convert re-decodes plain JSON (or any JSON-encodable value) into T.
func Convert[T any](v any) (T, error) {
	var out T
	err := ConvertInto(v, &out)
	return out, err
}

// ConvertInto re-decodes v into *dst, keeping the fields v does not set
// (defaults the caller filled in).
func ConvertInto(v, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("settings: encode: %w", err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("settings: decode: %w", err)
	}
	return nil
}

// Canonical is a typed value as the plain JSON a field stores.
func Canonical(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("settings: encode: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("settings: decode: %w", err)
	}
	return out, nil
}

// Plain converts decoded JSON (json.Number numbers) to plain JSON with
// float64 numbers, copying maps and slices.
func Plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Plain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Plain(e)
		}
		return out
	}
	return v
}

// clone deep-copies a canonical value.
func clone(v any) any {
	switch x := v.(type) {
	case []int64:
		return slices.Clone(x)
	case []float64:
		return slices.Clone(x)
	case []string:
		return slices.Clone(x)
	case map[string]any, []any, json.Number:
		return Plain(x)
	}
	return v
}

// mergeObject merges patch into dst: nested objects per key, null deletes a
// key, anything else replaces.
func mergeObject(dst, patch map[string]any) {
	for k, v := range patch {
		if v == nil {
			delete(dst, k)
			continue
		}
		if pm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeObject(dm, pm)
				continue
			}
			fresh := map[string]any{}
			mergeObject(fresh, pm)
			dst[k] = fresh
			continue
		}
		dst[k] = v
	}
}
