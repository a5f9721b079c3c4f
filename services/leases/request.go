package leases

import (
	"context"
	"errors"
	"net/http"
	"time"

	"switchyard/services"
)

// The lease rules of one inference request (20-resilience §6,
// 10-gateway-api §2 step 10) and of an acquire by model. The caller hands
// over the key, the request's headers and what the model resolved to; the
// rules decide here. What they need to know about connections — which can
// serve a model now — is routing's knowledge, asked through Placement.

// Placement answers the routing questions of the lease rules. The gateway
// implements it from its snapshot and the resilience state.
type Placement interface {
	// LeaseCandidates lists the key's allowed connections of provider
	// that could serve model now (enabled, not terminal, cooling or
	// locked), in configured order.
	LeaseCandidates(key services.APIKey, provider, model string) []string
	// LeaseBlocked reports whether connID cannot serve model now: gone,
	// disabled, or blocked by a cooldown, terminal state or lockout.
	LeaseBlocked(connID, provider, model string) bool
}

// Target is what an inference request or an acquire resolved to.
type Target struct {
	Provider string
	Model    string
	// Combo is set when the name resolved to a combo, which a lease can
	// never serve.
	Combo bool
}

// Binding is the lease context of one inference request: the connection
// its lease binds it to, and the fence (owner, generation) routing
// re-checks right before dispatch. The zero Binding is a request whose key
// is not lease-managed.
type Binding struct {
	ConnectionID string
	Owner        string
	Generation   int64
}

// Managed reports a request bound by a lease.
func (b Binding) Managed() bool { return b.ConnectionID != "" }

// errUnavailable answers a lease-managed key when the process has no lease
// service.
func errUnavailable() *Error {
	return newError(services.CodeInternalError, "Leases are not available.")
}

// Bind applies the lease rules of an inference request: lease headers from
// a key without lease:exclusive → 403 LEASE_SCOPE_REQUIRED; a lease-managed
// key needs a valid owner and generation (400, 409), may not name a combo
// (400 LEASE_UNSUPPORTED_ROUTE) nor a model of another provider than its
// lease's (409 LEASE_CONNECTION_MISMATCH), and is bound to its lease's
// connection. A binding that cannot serve now moves, in one transaction,
// to a free eligible allowed connection under the same generation; when
// every other one is leased the request gets 429 LEASE_CAPACITY_UNAVAILABLE,
// and when none can serve it stays where it is (routing then answers why).
// A nil *Leases refuses lease-managed keys with internal_error. Errors are *Error,
// except a store failure.
func (s *Leases) Bind(ctx context.Context, key services.APIKey, h http.Header, t Target, p Placement) (Binding, error) {
	if !key.HasScope(services.ScopeLeaseExclusive) {
		if h.Get(OwnerHeader) != "" || h.Get(GenerationHeader) != "" {
			return Binding{}, CheckKey(key)
		}
		return Binding{}, nil
	}
	if err := CheckKey(key); err != nil {
		return Binding{}, err
	}
	if s == nil {
		return Binding{}, errUnavailable()
	}
	owner, err := ParseOwner(h.Get(OwnerHeader))
	if err != nil {
		return Binding{}, err
	}
	gen, err := ParseGeneration(h.Get(GenerationHeader))
	if err != nil {
		return Binding{}, err
	}
	if t.Combo {
		return Binding{}, newError(CodeUnsupportedRoute, "A lease-managed key must name a provider/model, not a combo.")
	}
	l, err := s.Check(ctx, key, owner, gen)
	if err != nil {
		return Binding{}, err
	}
	if l.Provider != t.Provider {
		return Binding{}, newError(CodeConnectionMismatch, "The leased connection belongs to another provider than the requested model.")
	}
	if p.LeaseBlocked(l.ConnectionID, t.Provider, t.Model) {
		if cands := p.LeaseCandidates(key, t.Provider, t.Model); len(cands) > 0 {
			nl, err := s.Transition(ctx, key, owner, gen, t.Provider, cands, ReasonHealthOrCooldown)
			var le *Error
			switch {
			case err == nil:
				l = nl
			case errors.As(err, &le) && le.Code == CodeCapacityUnavailable:
				return Binding{}, err
			}
		}
	}
	return Binding{ConnectionID: l.ConnectionID, Owner: owner, Generation: gen}, nil
}

// AcquireFor is the acquire of POST /v1/session-leases for a resolved
// model: a combo → 400 LEASE_UNSUPPORTED_ROUTE; no allowed connection of
// the provider can serve the model now → 404 no_executable_targets;
// otherwise Acquire among those that can.
func (s *Leases) AcquireFor(ctx context.Context, key services.APIKey, owner string, t Target, ttl time.Duration, p Placement) (Lease, error) {
	if t.Combo {
		return Lease{}, newError(CodeUnsupportedRoute, "A lease names a provider/model, not a combo.")
	}
	cands := p.LeaseCandidates(key, t.Provider, t.Model)
	if len(cands) == 0 {
		return Lease{}, newError(services.CodeNoExecutableTargets, "No allowed connection of this provider can serve the model now.")
	}
	return s.Acquire(ctx, key, owner, t.Provider, cands, ttl)
}
