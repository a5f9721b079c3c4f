package traffic

import (
	"net/http"
	"time"

	"switchyard/services"
)

// Codes of the local limit errors (10-gateway-api §9.3, 20-resilience §8,
// §10), from the table in services/errcodes.go.
const (
	// CodeSlotsBusy: every concurrency slot of the connection is taken and
	// connectionConcurrency.failOpen is false (429).
	CodeSlotsBusy = services.CodeConnectionSlotsBusy
	// CodeQueueFull: requestQueue.maxQueueDepth requests already wait (429).
	CodeQueueFull = services.CodeRateLimitQueueFull
	// CodeQueueTimeout: still queued after requestQueue.queueWaitMs (503).
	CodeQueueTimeout = services.CodeRateLimitQueueTimeout
	// CodeExecutionTimeout: no response headers (first byte for streams)
	// within requestQueue.maxWaitMs of dispatch (504).
	CodeExecutionTimeout = services.CodeRateLimitExecutionTimeout
)

// LimitError is a refusal by one of Switchyard's own limiters, never an
// upstream rejection. The classifier recognises it through LocalLimit
// (services/resilience.LocalLimitError) and applies no cooldown, lockout,
// breaker, window-gate or affinity effect (BD 2).
type LimitError struct {
	// Code is one of the Code* constants.
	Code string
	// Status is the HTTP status to answer with; 0 means the code's default
	// (429, 503 or 504).
	Status int
	// RetryAfter is the suggested wait; RetryAfterSeconds rounds and clamps it.
	RetryAfter time.Duration
	// Key is the limiter key ("provider:connectionId[:model]") or the
	// connection id of a slot gate.
	Key string
	// Message says which knob refused, in words an operator can act on.
	Message string
}

func (e *LimitError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return "traffic: " + e.Code
}

// LocalLimit returns the error code, e.g. "RATE_LIMIT_QUEUE_FULL".
func (e *LimitError) LocalLimit() string { return e.Code }

// HTTPStatus returns Status, or the code's default when Status is 0.
func (e *LimitError) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	if s := services.StatusOfCode(e.Code); s != 0 {
		return s
	}
	return http.StatusTooManyRequests
}

// RetryAfterSeconds returns RetryAfter in whole seconds, rounded up and
// clamped to 1–60, for the Retry-After header (every 429/503 carries one, BD 6).
func (e *LimitError) RetryAfterSeconds() int {
	return clampSeconds(e.RetryAfter)
}

// clampSeconds rounds d up to whole seconds within 1–60.
func clampSeconds(d time.Duration) int {
	if d <= 0 {
		return 1
	}
	if d >= 60*time.Second {
		return 60
	}
	return max(int((d+time.Second-1)/time.Second), 1)
}
