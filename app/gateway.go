package app

import (
	"context"
	"math/rand/v2"

	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/gateway"
)

// registrySource feeds the gateway's snapshot from the admin services.
type registrySource struct{ s *Server }

func (r registrySource) Catalogue() *services.Catalogue { return r.s.catalog.Get() }
func (r registrySource) ListConnections(ctx context.Context) ([]services.Connection, error) {
	return r.s.conns.List(ctx, services.ConnectionFilter{})
}
func (r registrySource) ListCombos(ctx context.Context) ([]services.Combo, error) {
	return r.s.combos.List(ctx)
}

// wireGateway builds the proxy engine and keeps its snapshot fresh: every
// admin change to connections or combos reloads it.
func (s *Server) wireGateway(ctx context.Context, seed uint64) error {
	reg, err := gateway.NewRegistry(ctx, registrySource{s})
	if err != nil {
		return err
	}
	reload := func() {
		if err := reg.Reload(context.Background()); err != nil {
			s.log.Error("reload routing snapshot", "err", err)
		}
	}
	s.conns.OnChange(reload)
	s.combos.OnChange(reload)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s.gateway = gateway.New(s.clock, reg, gateway.NewUpstream(s.egress, Version), accounts.NewSelector(rng), s.resilience, s.logSink, s.metrics)
	return nil
}
