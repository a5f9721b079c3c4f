package services

import (
	"errors"
	"time"
)

// ErrUnavailable says a store the request needs cannot answer right now:
// the database is closed (shutting down) or locked. It is never a reason to
// let a request through (60-quality S16): the request fails with 503 and a
// Retry-After, and the client tries again. Test with errors.Is.
var ErrUnavailable = errors.New("temporarily unavailable")

// DefaultUnavailableRetryAfter is the wait suggested when an
// UnavailableError names none.
const DefaultUnavailableRetryAfter = 5 * time.Second

// UnavailableError is ErrUnavailable with its cause, which is for the server
// log only (it may hold SQL), and the wait to suggest to the client.
type UnavailableError struct {
	Op         string        // what was attempted, e.g. "list keys"
	RetryAfter time.Duration // 0 = DefaultUnavailableRetryAfter
	Err        error         // the store's error
}

func (e *UnavailableError) Error() string {
	msg := "temporarily unavailable"
	if e.Op != "" {
		msg = e.Op + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap exposes both ErrUnavailable and the cause to errors.Is and errors.As.
func (e *UnavailableError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.Err}
}

// Wait is the Retry-After to send: RetryAfter, or the default when unset.
func (e *UnavailableError) Wait() time.Duration {
	if e.RetryAfter > 0 {
		return e.RetryAfter
	}
	return DefaultUnavailableRetryAfter
}
