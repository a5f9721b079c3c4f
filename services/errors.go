// Package services owns Switchyard's domain: types, errors, store interfaces,
// validation and the services that the HTTP layer calls. It imports no HTTP
// framework, ORM or template engine, so every rule here is testable alone and
// the same method serves the dashboard and the management API.
package services

import (
	"errors"
	"sort"
	"strings"
	"time"

	"switchyard/services/human"
)

// Sentinel errors. Wrap them with context; callers test with errors.Is.
var (
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
)

// ValidationError lists what is wrong with an input, keyed by field name
// (dotted JSON path such as "targets.1.weight"), in words the admin can act on.
type ValidationError struct {
	Fields map[string]string
}

func (e *ValidationError) Error() string {
	return human.Plural(len(e.Fields), "field is", "fields are") + " invalid"
}

// Keys returns the invalid field names in a stable order.
func (e *ValidationError) Keys() []string {
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fieldErrors collects validation problems; Err returns nil when there are none.
type fieldErrors map[string]string

// add records the first problem of a field; later ones are usually consequences.
func (f fieldErrors) add(field, msg string) {
	if _, ok := f[field]; !ok {
		f[field] = msg
	}
}

func (f fieldErrors) Err() error {
	if len(f) == 0 {
		return nil
	}
	return &ValidationError{Fields: map[string]string(f)}
}

// Invalid builds a ValidationError for one field.
func Invalid(field, msg string) error {
	return &ValidationError{Fields: map[string]string{field: msg}}
}

// ConflictError is a state conflict not tied to one field ("already revoked",
// "still referenced"); it wraps ErrConflict and carries a sentence for the admin.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ThrottledError says a caller must wait before trying again (login throttling).
type ThrottledError struct {
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	wait := (e.RetryAfter + time.Second - 1).Truncate(time.Second) // whole seconds, rounded up
	return "Too many failed sign-in attempts from your address. Try again in " + human.Duration(wait, human.Length) + "."
}

// trimmed reports whether s has surrounding white space.
func trimmed(s string) bool { return strings.TrimSpace(s) == s }
