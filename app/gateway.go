package app

import (
	"context"
	"math/rand/v2"
	"time"

	"switchyard/models"
	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/gateway"
	"switchyard/services/quota"
	"switchyard/services/routing"
	"switchyard/services/settings"
)

// registrySource feeds the gateway's snapshot from the admin services.
type registrySource struct{ s *Server }

func (r registrySource) Catalogue() *services.Catalogue { return r.s.catalogue.Get() }
func (r registrySource) ListConnections(ctx context.Context) ([]services.Connection, error) {
	return r.s.conns.List(ctx, services.ConnectionFilter{})
}
func (r registrySource) ListCombos(ctx context.Context) ([]services.Combo, error) {
	return r.s.combos.List(ctx)
}

// wireGateway builds the proxy engine from everything it works with
// (wireTraffic has built the traffic mechanisms). Its snapshot follows the
// change feed (wireFeed).
func (s *Server) wireGateway(ctx context.Context, seed uint64) error {
	reg, err := gateway.NewRegistry(ctx, registrySource{s})
	if err != nil {
		return err
	}
	var lkgp routing.LKGPStore = models.NewLKGPStore(s.db)
	if s.shared != nil {
		// A fleet writes LKGP records off the request goroutine and shares them.
		s.shared.lkgpStore = routing.NewSharedLKGPStore(lkgp, s.feed, s.storeErr("combo_lkgp"))
		lkgp = s.shared.lkgpStore
	}
	routeState, err := routing.NewMemoryState(ctx, routing.StateOptions{Now: s.clock.Now, LKGP: lkgp,
		OnStoreError: func(err error) { s.log.Error("save last-known-good record", "err", err) }})
	if err != nil {
		return err
	}
	if s.shared != nil {
		s.shared.lkgpStore.Follow(routeState)
	}
	s.routeState = routeState
	general := s.settingDocs.General
	s.gwSettings = settings.NewDerived(general, gateway.FromGeneral)
	qopts := quota.Options{Store: models.NewQuotaStore(s.db), Clock: s.clock, Logger: s.log.With("component", "quota"),
		MaxStale: func() time.Duration {
			return time.Duration(general.Current().Doc.Routing.QuotaMaxStaleMs) * time.Millisecond
		}}
	if s.shared != nil {
		qopts.Feed = s.feed // a fleet shares quota windows
	}
	s.quota = quota.New(qopts)
	if err := s.quota.Load(ctx); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// The combo strategies draw from their own source, never the account selector's.
	comboRNG := rand.New(rand.NewPCG(seed^0x5bd1e995, seed+1))
	up := gateway.NewUpstream(s.egress, Version)
	up.SetBodyLimits(s.cfg.Upstream)
	svc := s.settingsSvc
	s.gateway, err = gateway.New(ctx, gateway.Deps{
		Clock: s.clock, Registry: reg, Upstream: up,
		Selector: accounts.NewSelector(rng), Resilience: s.resilience,
		Settings: func() *gateway.Settings { return &s.gwSettings.Get().Settings },
		Limits:   func() gateway.Limits { return s.gwSettings.Get().Limits },
		Logs:     s.logSink, Observer: s.metrics, Logger: s.log,
		Strategies: routing.NewRegistry(comboRNG, routeState), RouteState: routeState,
		Quota: s.quota, ToolLimits: s.toolLimits, Handoffs: models.NewHandoffStore(s.db),
		Traffic: &gateway.Traffic{Slots: s.slotStore, Queues: s.rateStore, Pins: s.pins, Leases: s.leases, Doc: svc.Resilience,
			Waiting: s.waiting},
		Watchdog: func() (gateway.WatchdogConfig, int) {
			sr := svc.Resilience().StreamRecovery
			w := sr.ThroughputWatchdog
			return gateway.WatchdogConfig{Enabled: w.Enabled, Warmup: time.Duration(w.WarmupMs) * time.Millisecond,
				Window: time.Duration(w.WindowMs) * time.Millisecond, MinUsefulBytesPerSecond: w.MinUsefulBytesPerSecond,
				MinUsefulBytes: w.MinUsefulBytes}, sr.EarlyRetryMax
		},
		KeyLimits: s.keyLimiter, KeyUsage: s.keys, Prices: s.prices,
		Tracing: s.tracing.TracerProvider(), Events: s.events,
	})
	return err
}
