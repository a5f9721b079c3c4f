package traffic

import (
	"context"
	"time"
)

// WaitHook is told when a request under its context starts to wait (a
// slot, the request queue, a cooldown-aware wait); the function it returns
// is called when that wait ends. The gateway's trace spans of waits hang
// on it. It runs only when a request really waits, never on the way
// through, and must not block; its end must tolerate a second call (a
// token's End may be repeated), as an OpenTelemetry span's End does.
type WaitHook func(ctx context.Context, reason, target string, resumeIn time.Duration) (end func())

type waitHookKey struct{}

// WithWaitHook makes BeginWait under ctx call h as well as the waiting
// board (if any). A nil h returns ctx.
func WithWaitHook(ctx context.Context, h WaitHook) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, waitHookKey{}, h)
}

// Also returns the token with end called when the wait ends (after any
// end it already had). A nil end changes nothing.
func (t WaitToken) Also(end func()) WaitToken {
	switch {
	case end == nil:
	case t.end == nil:
		t.end = end
	default:
		prev := t.end
		t.end = func() { prev(); end() }
	}
	return t
}
