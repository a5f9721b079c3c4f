package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/events"
	"switchyard/services/leases"
	"switchyard/services/quota"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/settings"
	"switchyard/services/traffic"
)

// Settings are the knobs the proxy path reads per request.
type Settings struct {
	KeepaliveIdle     time.Duration // stream.keepaliveIdleMs (0 = off)
	WriteTimeout      time.Duration // stream.writeTimeoutMs, per write
	TargetTimeout     time.Duration // first useful byte (stream) / whole body (non-stream)
	StreamIdleTimeout time.Duration // upstream silence
	MaxAttempts       int           // routing.maxAttemptsPerRequest
	DefaultMaxTokens  int           // translation.defaultMaxTokens
	// EchoRequestedModel is routing.echoRequestedModel: responses name the
	// client's model instead of the upstream id (10-gateway-api §6.5).
	EchoRequestedModel bool
	FallbackStrategy   string // routing.fallbackStrategy (account level)
	StickyLimit        int    // routing.stickyRoundRobinLimit
	ProviderStrategy   map[string]ProviderStrategy
	// DirectCombo is the effective config of a direct request, the
	// anonymous combo of 30-routing §3 (defaults ← routing.comboDefaults);
	// combos overlay their own config on it.
	DirectCombo ComboConfig
	// RequestDeadline is routing.requestDeadlineMs: no dispatch starts
	// later than this after receipt.
	RequestDeadline time.Duration
	// ComboDefaults is routing.comboDefaults (the quota and auto strategy
	// config and context relay layer combo.config over it); TaskFitness is
	// routing.autoTaskFitness.
	ComboDefaults services.ComboConfig
	TaskFitness   []settings.TaskFitnessRule
}

// ProviderStrategy overrides the account strategy of one provider.
type ProviderStrategy struct {
	FallbackStrategy string
	StickyLimit      int
}

// DefaultSettings are the documented defaults.
func DefaultSettings() Settings {
	return Settings{KeepaliveIdle: 2 * time.Second, WriteTimeout: 30 * time.Second, TargetTimeout: 120 * time.Second,
		StreamIdleTimeout: 120 * time.Second, MaxAttempts: 30, FallbackStrategy: "fill-first", StickyLimit: 3, DefaultMaxTokens: 4096,
		DirectCombo: DefaultComboConfig(), RequestDeadline: 10 * time.Minute}
}

// LogSink receives one record per client request; it must not block.
type LogSink interface {
	Record(rec *LogRecord)
}

// KeyUsage records that a client key was used (its lastUsedAt);
// services.Keys implements it. Called once per admitted request, it must
// not block.
type KeyUsage interface {
	Touch(ctx context.Context, k services.APIKey)
}

// Deps are everything a Gateway works with, given once to New. The first
// group is required (New refuses a Gateway without it); every other field
// is optional, and its comment says what nil means.
type Deps struct {
	// Clock is the only source of time of routing and resilience.
	Clock services.Clock
	// Registry publishes the connections, combos and catalogue.
	Registry *Registry
	// Upstream sends the upstream requests.
	Upstream *Upstream
	// Selector picks a connection among a provider's eligible ones.
	Selector *accounts.Selector
	// Resilience holds cooldowns, breakers, lockouts and the window gate.
	Resilience *resilience.Engine

	// Settings is read by every request, so it must be cheap (the app
	// caches the derived value per document revision). nil: DefaultSettings.
	Settings func() *Settings
	// Limits are the body and parse limits of /v1 (10-gateway-api §10).
	// nil: DefaultLimits.
	Limits func() Limits
	// Logs receives one record per client request. nil: none kept.
	Logs LogSink
	// Observer counts events for metrics. nil: none counted.
	Observer Observer
	// Logger takes the warnings of 20-resilience §14. nil: discarded.
	Logger *slog.Logger
	// Strategies are the combo strategies, RouteState their shared state
	// (round-robin tickets, stickiness, LKGP). nil: every combo is walked
	// in priority order and keeps no state.
	Strategies map[string]routing.Strategy
	RouteState routing.State
	// Quota is the learned quota windows (30-routing §8.3, gate 10). nil:
	// no quota gate and no quota signals.
	Quota *quota.Tracker
	// Traffic holds slots, the request queue, affinity pins and leases;
	// each nil field switches its mechanism off. nil: all off, with the
	// default resilience document.
	Traffic *Traffic
	// ToolLimits are the learned tool limits (20-resilience §13.2). nil:
	// learned in memory only.
	ToolLimits *ToolLimits
	// Handoffs persists context-relay handoffs (30-routing §10.4); New
	// loads the live ones. nil: kept in memory only.
	Handoffs HandoffStore
	// Watchdog is streamRecovery: the throughput watchdog and the early
	// retry count. nil: no watchdog, one early retry.
	Watchdog func() (WatchdogConfig, int)
	// KeyLimits enforces each client key's requestsPerMinute and
	// maxConcurrentRequests. nil: the in-memory traffic.KeyLimits.
	KeyLimits traffic.KeyLimiter
	// KeyUsage records key use. nil: not recorded.
	KeyUsage KeyUsage
	// Prices is the price table cost-aware routing reads, with the admin's
	// overrides (30-routing §8.2). nil: the built-in list prices.
	Prices *services.Prices
	// Tracing starts the spans of /v1 requests (tracing.go). nil: no
	// tracing, and nothing of it on the request path.
	Tracing trace.TracerProvider
	// Events receives an emergency fallback that answered (the Runtime
	// page's Recent events). nil: not recorded.
	Events events.Recorder
}

// Gateway routes /v1 requests. Every field is set by New and never changes,
// except the settings override of SetSettings and the logger of SetLogger:
// optional dependencies left out of Deps hold a no-op or a memory-only
// default, so the request path checks none of them for nil — only the
// mechanisms a nil means "off" for (quota, traffic's fields).
type Gateway struct {
	clock  services.Clock
	reg    *Registry
	up     *Upstream
	sel    *accounts.Selector
	res    *resilience.Engine
	logs   LogSink
	obs    Observer
	log    atomic.Pointer[slog.Logger]
	source atomic.Pointer[func() *Settings]
	fixed  atomic.Pointer[Settings]
	limits func() Limits

	traffic *Traffic
	// pair admits a dispatch's slot and queue ticket together when the
	// slot store pairs with the queue store (traffic.DispatchPairer); nil:
	// one after the other.
	pair       traffic.DispatchAdmitter
	tools      *ToolLimits
	keyLimits  traffic.KeyLimiter
	keyUse     KeyUsage
	strategies map[string]routing.Strategy
	routeState routing.State
	stats      DispatchStats
	quota      *quota.Tracker // learned quota windows (30-routing §8.3); nil = none
	relay      relayStore     // context-relay handoffs (§10.4)
	// entrySlots is the combo entry queue of 30-routing §6.5, keyed by
	// combo id and entry id.
	entrySlots  *traffic.Slots
	watchdogCfg func() (WatchdogConfig, int)
	// prices is the price lookup of cost-aware routing, built once in New
	// so a request takes no closure of its own.
	prices func(provider, model string) (routing.Price, bool)
	// tracer starts the request, attempt and wait spans; nil = off.
	tracer *tracer
	// events receives the emergency fallbacks that answered; nil = none.
	events events.Recorder

	// picks is pick's eligibility cache (pick.go).
	picks pickCache
}

// New builds the gateway from its dependencies and loads the live context
// handoffs from Deps.Handoffs.
func New(ctx context.Context, d Deps) (*Gateway, error) {
	var missing []error
	for _, m := range []struct {
		name string
		nil  bool
	}{{"Clock", d.Clock == nil}, {"Registry", d.Registry == nil}, {"Upstream", d.Upstream == nil},
		{"Selector", d.Selector == nil}, {"Resilience", d.Resilience == nil}} {
		if m.nil {
			missing = append(missing, errors.New("gateway: Deps."+m.name+" is required"))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	g := &Gateway{clock: d.Clock, reg: d.Registry, up: d.Upstream, sel: d.Selector, res: d.Resilience,
		logs: d.Logs, obs: d.Observer, limits: d.Limits, traffic: d.Traffic, tools: d.ToolLimits,
		keyLimits: d.KeyLimits, keyUse: d.KeyUsage, strategies: d.Strategies, routeState: d.RouteState,
		quota: d.Quota, watchdogCfg: d.Watchdog, entrySlots: traffic.NewSlots(nil), prices: priceLookup(d.Prices),
		tracer: newTracer(d.Tracing), events: d.Events}
	g.defaults()
	if d.Settings != nil {
		src := d.Settings
		g.source.Store(&src)
	}
	g.SetLogger(d.Logger)
	if d.Handoffs != nil {
		if err := g.loadHandoffs(ctx, d.Handoffs); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// defaults fills the optional dependencies left out with their no-op or
// memory-only stand-ins.
func (g *Gateway) defaults() {
	if g.logs == nil {
		g.logs = nopSink{}
	}
	if g.obs == nil {
		g.obs = nopObserver{}
	}
	if g.limits == nil {
		g.limits = DefaultLimits
	}
	if g.traffic == nil {
		g.traffic = &Traffic{}
	}
	if g.traffic.Doc == nil {
		doc := resilience.DefaultDocument()
		g.traffic.Doc = func() *resilience.Document { return &doc }
	}
	if p, ok := g.traffic.Slots.(traffic.DispatchPairer); ok && g.traffic.Queues != nil {
		g.pair = p.PairWith(g.traffic.Queues)
	}
	if g.tools == nil {
		g.tools, _ = NewToolLimits(context.Background(), g.clock, nil)
	}
	if g.keyLimits == nil {
		g.keyLimits = traffic.NewKeyLimits(g.clock)
	}
	if g.keyUse == nil {
		g.keyUse = nopUsage{}
	}
	if g.routeState == nil {
		g.routeState = nopRouteState{}
	}
	if g.watchdogCfg == nil {
		g.watchdogCfg = func() (WatchdogConfig, int) { return WatchdogConfig{}, 1 }
	}
	s := DefaultSettings()
	g.fixed.Store(&s)
}

type nopSink struct{}

func (nopSink) Record(*LogRecord) {}

type nopUsage struct{}

func (nopUsage) Touch(context.Context, services.APIKey) {}

// nopRouteState is the routing state of a gateway without strategies.
type nopRouteState struct{}

func (nopRouteState) OnDispatch(string, string)        {}
func (nopRouteState) OnSuccess(string, string, string) {}
func (nopRouteState) OnFailure(string, string)         {}
func (nopRouteState) OnSkip(string, string)            {}
func (nopRouteState) Forget(string)                    {}

// SetSettings fixes the settings for requests that start later, in place
// of the Deps.Settings source: tests tune a running gateway with it.
func (g *Gateway) SetSettings(s Settings) {
	g.source.Store(nil)
	g.fixed.Store(&s)
}

// SetLogger replaces the logger of the 20-resilience §14 warnings (tests
// capture them); nil discards them.
func (g *Gateway) SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g.log.Store(l)
}

// current returns the settings a new request uses.
func (g *Gateway) current() *Settings {
	if src := g.source.Load(); src != nil {
		return (*src)()
	}
	return g.fixed.Load()
}

// Settings returns the current settings.
func (g *Gateway) Settings() Settings { return *g.current() }

// Limits returns the current /v1 body and parse limits.
func (g *Gateway) Limits() Limits { return g.limits() }

// Registry returns the snapshot registry.
func (g *Gateway) Registry() *Registry { return g.reg }

// Request is one parsed client request.
type Request struct {
	ID              string
	ClientRequestID string
	Key             services.APIKey
	Endpoint        string
	Body            map[string]json.RawMessage // top-level fields as sent
	Model           string
	Stream          bool
	Route           Route
	Received        time.Time
	ToolCount       int
	// Header is the client's request header (session keys; never forwarded).
	Header http.Header
	// SessionKey is the normalised affinity session key, "" when none.
	SessionKey string
	// LeaseConnID is the connection bound by the key's exclusive lease;
	// LeaseOwner and LeaseGen are the fence re-checked right before dispatch.
	LeaseConnID string
	LeaseOwner  string
	LeaseGen    int64
	// Inbound is the client's API format (Inbound* constants).
	Inbound string
	// Warnings are losses already known before routing (background mode).
	Warnings []string
	// AnthropicBeta is the client's anthropic-beta header (forwarded only
	// from /v1/messages to anthropic-format upstreams).
	AnthropicBeta string
	// MidSystem marks a /v1/messages body with role "system" entries inside
	// messages (HasSystemEntries).
	MidSystem bool
}

// target is one (provider, model[, connection]) the request may go to.
type target struct {
	provider services.Provider
	model    string
	connID   string // "" = any connection of the provider
	id       string // combo entry id, "" for direct
	comboID  string // the combo whose strategy ordered this entry
	prefConn string // strategy-preferred connection (lkgp)
	prefPin  string // session preference record id (30-routing §6.4), "" = none
	relay    bool   // the ordering combo is context-relay (§10.4)
}

func (t target) name() string { return t.provider.ID + "/" + t.model }

// QuotaBlocker is gate 10 for the dashboard's readiness view: the quota
// window blocking c now, nil when none does.
func (g *Gateway) QuotaBlocker(c *services.Connection) *resilience.Blocker {
	return g.quotaBlocker(c, g.clock.Now())
}

// quotaBlocker is gate 10 (30-routing §8.4) for one connection, nil when
// the quota windows allow it. It is a timer but not waitable: windows
// reset in hours, past any cooldown wait.
func (g *Gateway) quotaBlocker(c *services.Connection, now time.Time) *resilience.Blocker {
	if g.quota == nil {
		return nil
	}
	if blocked, until := g.quota.Gate(c.ID, c.QuotaReservePercent, now); blocked {
		return &resilience.Blocker{Reason: "quota_window", RetryAfter: until.Sub(now)}
	}
	return nil
}

// LeaseCandidates lists the key's allowed connections of provider that
// could serve model right now (enabled, not terminal, not cooling, not
// locked): leases.Placement, what an acquire or a rebinding may choose from.
func (g *Gateway) LeaseCandidates(key services.APIKey, provider, model string) []string {
	var out []string
	for _, c := range g.reg.Snapshot().Connections(provider) {
		if !c.Enabled || !key.AllowsConnection(c.ID) {
			continue
		}
		if g.res.ConnectionBlocker(provider, c.ID, model) != nil {
			continue
		}
		out = append(out, c.ID)
	}
	return out
}

// LeaseBlocked reports whether a lease's connection cannot serve model now
// (gone, disabled, or blocked): leases.Placement.
func (g *Gateway) LeaseBlocked(connID, provider, model string) bool {
	cn, ok := g.reg.Snapshot().Connection(connID)
	return !ok || !cn.Enabled || g.res.ConnectionBlocker(provider, connID, model) != nil
}

var _ leases.Placement = (*Gateway)(nil)

// Exclusion is one element of diagnostics.excluded (10-gateway-api §9.2).
type Exclusion struct {
	Target       string  `json:"target"`
	ConnectionID *string `json:"connectionId"`
	Reason       string  `json:"reason"`
	Detail       string  `json:"detail,omitempty"`
	RetryAfterMs *int64  `json:"retryAfterMs"`
}

// Diagnostics explain a routing error.
type Diagnostics struct {
	PoolSize       int         `json:"poolSize"`
	Attempted      int         `json:"attempted"`
	RetryAfterMs   *int64      `json:"retryAfterMs"`
	TerminalReason string      `json:"terminalReason"`
	Excluded       []Exclusion `json:"excluded"`
}
