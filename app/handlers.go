package app

import (
	"switchyard/handlers"
	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// handlerSet is every HTTP handler of the product, built once from the
// wired services; routes.go registers them.
type handlerSet struct {
	v1 *handlers.V1

	// Management API (/api).
	health         *handlers.HealthAPI
	connectionsAPI *handlers.ConnectionsAPI
	combosAPI      *handlers.CombosAPI
	keysAPI        *handlers.KeysAPI
	resilienceAPI  *handlers.ResilienceAPI
	eventsAPI      *handlers.EventsAPI
	trafficAPI     *handlers.TrafficAPI
	settingsAPI    *handlers.SettingsAPI
	logsAPI        *handlers.LogsAPI
	metricsAPI     *handlers.MetricsAPI
	rulesAPI       *handlers.RulesAPI
	auditAPI       *handlers.AuditAPI

	// Dashboard.
	layout      handlers.Layout
	setup       *handlers.Setup
	signIn      *handlers.SignIn
	overview    *handlers.Overview
	connections *handlers.Connections
	combos      *handlers.Combos
	keys        *handlers.Keys
	runtime     *handlers.Runtime
	healthPage  *handlers.Health
	resilience  *handlers.ResilienceSettings
	flags       *handlers.Flags
	account     *handlers.Account
	logs        *handlers.Logs
	audit       *handlers.Audit
	prices      *handlers.Prices
}

// newHandlers builds the handlers over the wired services.
func (s *Server) newHandlers() *handlerSet {
	layout := handlers.Layout{Version: Version, Demo: s.cfg.Demo, PlainHTTP: func() bool { return !s.loopback.Load() }}
	api := &handlers.API{Clock: s.clock, Log: s.log.With("component", "api")}
	var quota handlers.QuotaWindows
	if s.quota != nil {
		quota = s.quota
	}
	return &handlerSet{
		v1: &handlers.V1{Keys: s.keys, Gateway: s.gateway, Clock: s.clock, Leases: s.leases},

		health:         &handlers.HealthAPI{Reports: s},
		connectionsAPI: &handlers.ConnectionsAPI{API: api, Conns: s.conns, State: s.resilience, Tester: s.gateway, Confirm: s.auth, ClientIP: clientIP},
		combosAPI:      &handlers.CombosAPI{API: api, Combos: s.combos, Tester: s.gateway, Explainer: s.gateway},
		keysAPI:        &handlers.KeysAPI{API: api, Keys: s.keys},
		resilienceAPI:  &handlers.ResilienceAPI{API: api, Status: s.status, Engine: s.resilience, Catalogue: s.conns},
		eventsAPI:      &handlers.EventsAPI{API: api, Status: s.status, Catalogue: s.conns, Events: s.events},
		trafficAPI: &handlers.TrafficAPI{API: api, Status: s.status, Queues: s.rateStore, Slots: s.slotStore, Leases: s.leases,
			Keys: s.keys, Pins: s.pins, Waiting: s.waiting},
		settingsAPI: &handlers.SettingsAPI{API: api, Resilience: s.settingDocs.Resilience.Document(), General: s.settingDocs.General,
			Flags: s.settingDocs.Flags},
		logsAPI: &handlers.LogsAPI{API: api, Logs: s.logStore},
		metricsAPI: &handlers.MetricsAPI{API: api, Stats: s.traffic, Names: func() map[string]string {
			snap := s.status.Snapshot()
			return snap.Names()
		}},
		rulesAPI: &handlers.RulesAPI{API: api, Engine: s.resilience, Catalogue: s.conns, Operator: s.settingsSvc.OperatorRules},
		auditAPI: &handlers.AuditAPI{API: api, Audit: s.auditStore},

		layout: layout,
		setup: &handlers.Setup{Layout: layout, Auth: s.auth, Cookies: s.cookies, ListenPort: s.listenPort,
			IsLoopback: isLoopbackPeer, ClientIP: clientIP},
		signIn: &handlers.SignIn{Layout: layout, Auth: s.auth, Cookies: s.cookies, ClientIP: clientIP},
		overview: &handlers.Overview{Layout: layout, Conns: s.conns, Combos: s.combos, Keys: s.keys, Traffic: s.traffic,
			Status: s.status, Leases: s.leases, Queues: s.queues, Waiting: s.waiting, Clock: s.clock},
		connections: &handlers.Connections{Layout: layout, Conns: s.conns, Status: s.status, State: s.resilience, Quota: quota,
			Tester: s.gateway, Clock: s.clock, Confirm: s.auth, ClientIP: clientIP},
		combos: &handlers.Combos{Layout: layout, Combos: s.combos, Conns: s.conns, Keys: s.keys, Logs: s.logStore,
			Gates: s.resilience, Dispatch: s.gateway, Tester: s.gateway, Explainer: s.gateway, Clock: s.clock},
		keys: &handlers.Keys{Layout: layout, Keys: s.keys, Combos: s.combos, Conns: s.conns, Clock: s.clock},
		runtime: &handlers.Runtime{Layout: layout, Status: s.status, Engine: s.resilience, Catalogue: s.conns,
			LeaseAdmin: s.leases, QueueStats: s.rateStore, SlotStats: s.slotStore, Waiting: s.waiting, Keys: s.keys, Clock: s.clock,
			Events: s.events, PerReplica: s.cfg.Shared(), Pins: s.pins},
		healthPage: &handlers.Health{Layout: layout, Reports: s, Clock: s.clock},
		resilience: &handlers.ResilienceSettings{Layout: layout, Settings: s.settingsSvc.Document(), Lockouts: s.resilience, Catalogue: s.conns,
			Audit: s.auditStore, Clock: s.clock},
		flags:   &handlers.Flags{Layout: layout, Flags: s.settingDocs.Flags, Settings: s.settingsSvc, Combos: s.combos, Conns: s.conns},
		account: &handlers.Account{Layout: layout, Auth: s.auth, Cookies: s.cookies, ClientIP: clientIP, Clock: s.clock},
		logs:    &handlers.Logs{Layout: layout, Logs: s.logStore, Conns: s.conns, Keys: s.keys, Clock: s.clock},
		audit:   &handlers.Audit{Layout: layout, Audit: s.auditStore, Keys: s.keys, Clock: s.clock},
		prices:  &handlers.Prices{Layout: layout, Settings: s.settingDocs.General, Prices: s.prices, Stats: s.traffic},
	}
}

// newMonitor builds the resilience read model over the gateway's in-memory
// snapshot (connection names and configuration), the slots and queues, and
// the quota gate.
func (s *Server) newMonitor() *resilience.Monitor {
	return resilience.NewMonitor(s.resilience, resilience.StatusSources{
		Connections: func() []services.Connection { return s.gateway.Registry().Snapshot().All() },
		Traffic:     trafficReader{slots: s.slotStore, queues: s.rateStore},
		Quota:       s.gateway,
	})
}

// trafficReader reads slot use and queued requests per connection for the
// read model.
type trafficReader struct {
	slots  traffic.SlotStore
	queues traffic.RateStore
}

func (t trafficReader) SlotUse() map[string]resilience.SlotUse {
	out := map[string]resilience.SlotUse{}
	if t.slots == nil {
		return out
	}
	for _, st := range t.slots.Stats() {
		out[st.ConnectionID] = resilience.SlotUse{InFlight: st.InFlight, Waiting: st.Waiting}
	}
	return out
}

func (t trafficReader) Queued() map[string]int {
	out := map[string]int{}
	if t.queues == nil {
		return out
	}
	for _, q := range t.queues.Stats() {
		out[q.ConnectionID] += q.Queued
	}
	return out
}
