package leases_test

import (
	"net/http"
	"strconv"
	"testing"

	"switchyard/internal/testkit"
	"switchyard/internal/testkit/leasestore"
	"switchyard/services"
	"switchyard/services/leases"
)

// placement is a fixed answer to the routing questions of the lease rules.
type placement struct {
	blocked map[string]bool
	cands   []string
}

func (p placement) LeaseCandidates(key services.APIKey, provider, model string) []string {
	var out []string
	for _, c := range p.cands {
		if key.AllowsConnection(c) && !p.blocked[c] {
			out = append(out, c)
		}
	}
	return out
}

func (p placement) LeaseBlocked(connID, provider, model string) bool { return p.blocked[connID] }

func leaseHeader(owner string, gen int64) http.Header {
	h := http.Header{}
	if owner != "" {
		h.Set(leases.OwnerHeader, owner)
	}
	if gen != 0 {
		h.Set(leases.GenerationHeader, strconv.FormatInt(gen, 10))
	}
	return h
}

// The lease rules of an inference request (20-resilience §6), in the
// order 10-gateway-api §2 step 10 applies them.
func TestBindRules(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	s := leases.New(leasestore.New(), clock)
	k := managedKey("k1", "c1", "c2")
	l := must(t)(s.Acquire(ctx, k, owner(1), "p", []string{"c1"}, 0))
	direct := leases.Target{Provider: "p", Model: "m"}
	free := placement{cands: []string{"c1", "c2"}}
	plain := services.APIKey{ID: "plain", Enabled: true, Scopes: []string{services.ScopeInference}}

	if b, err := s.Bind(ctx, plain, http.Header{}, direct, free); err != nil || b.Managed() {
		t.Fatalf("plain key: %+v, %v", b, err)
	}
	_, err := s.Bind(ctx, plain, leaseHeader(owner(1), 0), direct, free)
	wantErr(t, err, leases.CodeScopeRequired, 403)
	_, err = s.Bind(ctx, managedKey("k0"), leaseHeader(owner(1), 1), direct, free)
	wantErr(t, err, leases.CodeKeyConfigurationInvalid, 403)
	_, err = (*leases.Leases)(nil).Bind(ctx, k, leaseHeader(owner(1), 1), direct, free)
	wantErr(t, err, services.CodeInternalError, 500)
	_, err = s.Bind(ctx, k, leaseHeader("", 1), direct, free)
	wantErr(t, err, leases.CodeContextRequired, 400)
	_, err = s.Bind(ctx, k, leaseHeader(owner(1), 0), direct, free)
	wantErr(t, err, leases.CodeContextRequired, 400)
	_, err = s.Bind(ctx, k, leaseHeader(owner(1), 1), leases.Target{Provider: "p", Model: "m", Combo: true}, free)
	wantErr(t, err, leases.CodeUnsupportedRoute, 400)
	_, err = s.Bind(ctx, k, leaseHeader(owner(2), 1), direct, free)
	wantErr(t, err, leases.CodeRequired, 409)
	_, err = s.Bind(ctx, k, leaseHeader(owner(1), 2), direct, free)
	wantErr(t, err, leases.CodeFenceStale, 409)
	_, err = s.Bind(ctx, k, leaseHeader(owner(1), 1), leases.Target{Provider: "q", Model: "m"}, free)
	wantErr(t, err, leases.CodeConnectionMismatch, 409)

	b, err := s.Bind(ctx, k, leaseHeader(owner(1), 1), direct, free)
	if err != nil || b != (leases.Binding{ConnectionID: "c1", Owner: owner(1), Generation: l.Generation}) {
		t.Fatalf("bound %+v, %v", b, err)
	}
}

// A binding that cannot serve now moves to a free eligible connection
// under the same generation; with every other one leased the request is
// refused with LEASE_CAPACITY_UNAVAILABLE; with none able to serve it
// stays bound.
func TestBindRebindsBlockedConnection(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	s := leases.New(leasestore.New(), clock)
	k := managedKey("k1", "c1", "c2")
	must(t)(s.Acquire(ctx, k, owner(1), "p", []string{"c1"}, 0))
	direct := leases.Target{Provider: "p", Model: "m"}

	b, err := s.Bind(ctx, k, leaseHeader(owner(1), 1), direct, placement{blocked: map[string]bool{"c1": true, "c2": true}, cands: []string{"c1", "c2"}})
	if err != nil || b.ConnectionID != "c1" {
		t.Fatalf("nothing to move to: %+v, %v", b, err)
	}
	b, err = s.Bind(ctx, k, leaseHeader(owner(1), 1), direct, placement{blocked: map[string]bool{"c1": true}, cands: []string{"c1", "c2"}})
	if err != nil || b.ConnectionID != "c2" || b.Generation != 1 {
		t.Fatalf("moved: %+v, %v", b, err)
	}
	// c2 is bound now and blocked; c1 is free but leased by someone else.
	other := managedKey("k2", "c1")
	must(t)(s.Acquire(ctx, other, owner(2), "p", []string{"c1"}, 0))
	_, err = s.Bind(ctx, k, leaseHeader(owner(1), 1), direct, placement{blocked: map[string]bool{"c2": true}, cands: []string{"c1", "c2"}})
	wantErr(t, err, leases.CodeCapacityUnavailable, 429)
}

// An acquire by model refuses combos and models no allowed connection can
// serve now, and leases one that can.
func TestAcquireFor(t *testing.T) {
	s := leases.New(leasestore.New(), testkit.NewFakeClock(t0))
	k := managedKey("k1", "c1", "c2")
	_, err := s.AcquireFor(ctx, k, owner(1), leases.Target{Provider: "p", Model: "m", Combo: true}, 0, placement{})
	wantErr(t, err, leases.CodeUnsupportedRoute, 400)
	_, err = s.AcquireFor(ctx, k, owner(1), leases.Target{Provider: "p", Model: "m"}, 0, placement{cands: []string{"c3"}})
	wantErr(t, err, services.CodeNoExecutableTargets, 404)
	l := must(t)(s.AcquireFor(ctx, k, owner(1), leases.Target{Provider: "p", Model: "m"}, 0,
		placement{blocked: map[string]bool{"c1": true}, cands: []string{"c1", "c2"}}))
	if l.ConnectionID != "c2" || l.Generation != 1 {
		t.Fatalf("acquired %+v", l)
	}
}
