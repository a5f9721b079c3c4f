package events

import (
	"context"
	"sync"
	"time"

	"switchyard/services"
)

// Type names what happened. The values are the "type" of GET
// /api/resilience/events.
type Type string

// Event types (50-dashboard §6.8).
const (
	BreakerOpened   Type = "breaker_opened"
	BreakerHalfOpen Type = "breaker_half_open"
	BreakerClosed   Type = "breaker_closed"
	CooldownSet     Type = "cooldown_set"
	CooldownCleared Type = "cooldown_cleared"
	LockoutSet      Type = "lockout_set"
	LockoutCleared  Type = "lockout_cleared"
	TerminalSet     Type = "terminal_set"
	TerminalReset   Type = "terminal_reset"
	LeaseEnded      Type = "lease_ended"
	// LeaseMoved is a lease its owner moved to another connection of the
	// provider (the old one cooled down, lost the model or its quota):
	// ConnectionID is the new connection, Cause the reason.
	LeaseMoved        Type = "lease_moved"
	EmergencyFallback Type = "emergency_fallback_used"
	// EmergencyFallbackFailed is an emergency fallback that was tried and
	// did not answer either; Cause is its own failure's reason.
	EmergencyFallbackFailed Type = "emergency_fallback_failed"
)

// Causes that are not a failure classification.
const (
	// CauseAdmin marks an action of the admin, from the dashboard or the
	// management API.
	CauseAdmin = "admin"
	// CauseSuccess marks state a successful request cleared.
	CauseSuccess = "success"
	// CauseResetTimeout marks an open breaker whose retry time came.
	CauseResetTimeout = "reset_timeout"
	// CauseProbeSucceeded marks a half-open breaker closed by its probe.
	CauseProbeSucceeded = "probe_succeeded"
	// CauseProbeFailed marks a half-open breaker reopened by its probe.
	CauseProbeFailed = "probe_failed"
	// CauseFailuresDecayed marks a degraded breaker whose failures leaked away.
	CauseFailuresDecayed = "failures_decayed"
	// CauseEgressLock marks a connection cooled with a sibling of its egress group.
	CauseEgressLock = "egress_lock"
)

// Event is one resilience transition. Only the fields its Type uses are
// set; display names are resolved when it is shown (Subject), so an event
// keeps ids only.
type Event struct {
	Type Type
	// At is when it happened; Record stamps the ring's clock when zero.
	At           time.Time
	Provider     string // canonical provider id
	ConnectionID string
	Model        string // lockouts: the model; emergency fallback: the model asked for
	LeaseID      string
	Target       string // emergency fallback: the target that answered
	// Cause is the failure's reason code (rate_limit, server_error, …), a
	// lease's end reason, or one of the Cause constants ("admin").
	Cause string
	// Status is the upstream HTTP status of the failure, 0 when none.
	Status int
	// Actor names who acted when an admin's request caused the event
	// ("admin session 3f2a9c1b04de", "key agent-a sk-sy-Ab12"), from the
	// request's context (WithActor); "" otherwise.
	Actor string
}

type actorKey struct{}

// WithActor returns ctx carrying actor, the display name of whoever makes
// the admin request ctx belongs to; the events that request causes name
// them. The audit middleware sets it for every mutating admin request.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor ctx carries, "" when none.
func ActorOf(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

// Subject names what the event concerns, with the display names of its
// provider and connection (the ids when a name is unknown): "OpenAI" for a
// breaker, "team-1 · OpenAI" for a connection, "gpt-4o on team-1" for a
// lockout, "lease 17 on team-1", "demo → openai/gpt-4o-mini".
func (e Event) Subject(providerName, connName string) string {
	if providerName == "" {
		providerName = e.Provider
	}
	if connName == "" {
		connName = e.ConnectionID
	}
	switch e.Type {
	case BreakerOpened, BreakerHalfOpen, BreakerClosed:
		return providerName
	case LockoutSet, LockoutCleared:
		return e.Model + " on " + connName
	case LeaseEnded, LeaseMoved:
		return "lease " + e.LeaseID + " on " + connName
	case EmergencyFallback, EmergencyFallbackFailed:
		return e.Model + " → " + e.Target
	}
	if providerName == "" {
		return connName
	}
	return connName + " · " + providerName
}

// Recorder receives events. Record must be cheap and never block.
type Recorder interface {
	Record(Event)
}

// Capacity is how many events the ring keeps (50-dashboard §6.8: the last 50).
const Capacity = 50

// Ring is a Recorder keeping the last Capacity events in a fixed array.
type Ring struct {
	clock services.Clock

	mu   sync.Mutex
	buf  [Capacity]Event
	next int // where the next event goes
	n    int // events held, ≤ Capacity
}

var _ Recorder = (*Ring)(nil)

// NewRing builds an empty ring stamping events with clock.
func NewRing(clock services.Clock) *Ring { return &Ring{clock: clock} }

// Record keeps e, dropping the oldest event once Capacity are held.
func (r *Ring) Record(e Event) {
	if e.At.IsZero() {
		e.At = r.clock.Now()
	}
	r.mu.Lock()
	r.buf[r.next] = e
	r.next = (r.next + 1) % Capacity
	if r.n < Capacity {
		r.n++
	}
	r.mu.Unlock()
}

// Snapshot returns the events held, newest first.
func (r *Ring) Snapshot() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Event, r.n)
	for i := range out {
		out[i] = r.buf[(r.next-1-i+Capacity)%Capacity]
	}
	return out
}
