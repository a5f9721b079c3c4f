package schema

import (
	"sort"
	"strings"
)

// Dotted JSON paths ("providerBreaker.oauth.failureThreshold") name every
// field, every problem and every form control; these are the only helpers
// that take them apart or build objects from them.

// Join appends key k to a dotted path.
func Join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// Last is the last segment of a dotted path.
func Last(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }

// SetPath sets a dotted path in a JSON object, creating the objects on the
// way (a patch body or a nested document).
func SetPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = v
}

// SortedKeys returns the keys of m in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
