package app

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"switchyard/models"
	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/gateway"
	"switchyard/services/quota"
	"switchyard/services/routing"
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

// wireGateway builds the proxy engine. Its snapshot follows the change feed
// (wireFeed).
func (s *Server) wireGateway(ctx context.Context, seed uint64) error {
	reg, err := gateway.NewRegistry(ctx, registrySource{s})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s.gateway = gateway.New(s.clock, reg, gateway.NewUpstream(s.egress, Version), accounts.NewSelector(rng), s.resilience, s.logSink, s.metrics)
	routeState, err := routing.NewMemoryState(ctx, routing.StateOptions{Now: s.clock.Now, LKGP: models.NewLKGPStore(s.db),
		OnStoreError: func(err error) { s.log.Error("save last-known-good record", "err", err) }})
	if err != nil {
		return err
	}
	// The combo strategies draw from their own source, never the account selector's.
	comboRNG := rand.New(rand.NewPCG(seed^0x5bd1e995, seed+1))
	s.gateway.SetStrategies(routing.NewRegistry(comboRNG, routeState), routeState)
	s.routeState = routeState
	s.gwSettings = &gatewaySettings{src: s.settingsSvc.General}
	s.quota = quota.New(quota.Options{Store: models.NewQuotaStore(s.db), Clock: s.clock, Logger: s.log.With("component", "quota"),
		MaxStale: func() time.Duration {
			return time.Duration(s.settingsSvc.General().Routing.QuotaMaxStaleMs) * time.Millisecond
		}})
	if err := s.quota.Load(ctx); err != nil {
		return err
	}
	s.gateway.SetQuota(s.quota)
	s.gateway.SetLogger(s.log)
	if err := s.gateway.UseHandoffStore(ctx, models.NewHandoffStore(s.db)); err != nil {
		return err
	}
	s.gateway.UseSettingsSource(func() *gateway.Settings { return &s.gwSettings.get().set })
	return nil
}

// gatewaySettings derives the proxy settings from the general settings
// document, once per document version, so a PATCH /api/settings applies to
// the next request without a restart and costs nothing per request.
type gatewaySettings struct {
	src  func() *services.GeneralSettings
	last atomic.Pointer[derivedSettings]
}

type derivedSettings struct {
	from *services.GeneralSettings
	set  gateway.Settings
	lim  gateway.Limits
}

func (g *gatewaySettings) get() *derivedSettings {
	doc := g.src()
	if d := g.last.Load(); d != nil && d.from == doc {
		return d
	}
	d := &derivedSettings{from: doc, set: gateway.DefaultSettings(), lim: gateway.DefaultLimits()}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	d.set.KeepaliveIdle = ms(doc.Stream.KeepaliveIdleMs)
	d.set.WriteTimeout = ms(doc.Stream.WriteTimeoutMs)
	d.set.StreamIdleTimeout = ms(doc.Upstream.StreamIdleTimeoutMs)
	if doc.Routing.MaxAttemptsPerRequest > 0 {
		d.set.MaxAttempts = doc.Routing.MaxAttemptsPerRequest
	}
	if doc.Routing.RequestDeadlineMs > 0 {
		d.set.RequestDeadline = ms(doc.Routing.RequestDeadlineMs)
	}
	d.set.EchoRequestedModel = doc.Routing.EchoRequestedModel
	d.set.DirectCombo = gateway.ComboDefaults(doc.Routing.ComboDefaults)
	d.set.ComboDefaults, d.set.TaskFitness = doc.Routing.ComboDefaults, doc.Routing.AutoTaskFitness
	if doc.Routing.FallbackStrategy != "" {
		d.set.FallbackStrategy = doc.Routing.FallbackStrategy
	}
	if doc.Routing.StickyRoundRobinLimit > 0 {
		d.set.StickyLimit = doc.Routing.StickyRoundRobinLimit
	}
	d.set.ProviderStrategy = map[string]gateway.ProviderStrategy{}
	for p, ps := range doc.Routing.ProviderStrategies {
		var v gateway.ProviderStrategy
		if ps.FallbackStrategy != nil {
			v.FallbackStrategy = *ps.FallbackStrategy
		}
		if ps.StickyRoundRobinLimit != nil {
			v.StickyLimit = *ps.StickyRoundRobinLimit
		}
		d.set.ProviderStrategy[p] = v
	}
	if doc.Limits.MaxBodyBytes > 0 {
		d.lim.MaxBodyBytes = doc.Limits.MaxBodyBytes
	}
	if doc.Limits.MaxJSONDepth > 0 {
		d.lim.MaxJSONDepth = doc.Limits.MaxJSONDepth
	}
	if doc.Limits.MaxMessages > 0 {
		d.lim.MaxMessages = doc.Limits.MaxMessages
	}
	g.last.Store(d)
	return d
}
