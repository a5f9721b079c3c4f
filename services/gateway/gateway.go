package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/leases"
	"switchyard/services/quota"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/settings"
	"switchyard/services/traffic"
	"switchyard/services/translate"
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

// Gateway routes /v1 requests.
type Gateway struct {
	clock    services.Clock
	reg      *Registry
	up       *Upstream
	sel      *accounts.Selector
	res      *resilience.Engine
	logs     LogSink
	obs      Observer
	settings atomic.Pointer[Settings]
	source   atomic.Pointer[func() *Settings]
	traffic  *Traffic
	tools    *ToolLimits
	// prices is the price lookup of cost-aware routing (SetPrices); nil = built-in prices.
	prices atomic.Pointer[func(provider, model string) (routing.Price, bool)]

	strategies map[string]routing.Strategy
	routeState routing.State
	stats      DispatchStats
	quota      *quota.Tracker // learned quota windows (30-routing §8.3); nil = none
	relay      relayStore     // context-relay handoffs (§10.4)
	log        *slog.Logger
	// entrySlots is the combo entry queue of 30-routing §6.5, keyed by
	// combo id and entry id.
	entrySlots *traffic.Slots

	watchdogCfg func() (WatchdogConfig, int)

	// picks is pick's eligibility cache (pick.go).
	picks pickCache
}

// New builds the gateway.
func New(clock services.Clock, reg *Registry, up *Upstream, sel *accounts.Selector, res *resilience.Engine, logs LogSink, obs Observer) *Gateway {
	if obs == nil {
		obs = nopObserver{}
	}
	g := &Gateway{clock: clock, reg: reg, up: up, sel: sel, res: res, logs: logs, obs: obs, entrySlots: traffic.NewSlots(nil)}
	s := DefaultSettings()
	g.settings.Store(&s)
	return g
}

// SetSettings fixes the settings (applies to requests that start later);
// it replaces any settings source.
func (g *Gateway) SetSettings(s Settings) {
	g.source.Store(nil)
	g.settings.Store(&s)
}

// UseSettingsSource makes every request read its settings from src, which
// must be cheap (the app caches the derived value per document revision).
func (g *Gateway) UseSettingsSource(src func() *Settings) { g.source.Store(&src) }

// current returns the settings a new request uses.
func (g *Gateway) current() *Settings {
	if src := g.source.Load(); src != nil {
		return (*src)()
	}
	return g.settings.Load()
}

// Settings returns the current settings.
func (g *Gateway) Settings() Settings { return *g.current() }

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

// SetLogger gives the gateway the server's logger (one warning line per
// all_targets_cooling_down answer, 20-resilience §14).
func (g *Gateway) SetLogger(l *slog.Logger) { g.log = l }

// exclusionReasons lists the distinct exclusion reasons, in first-seen order.
func exclusionReasons(diag []Exclusion) []string {
	var out []string
	for _, d := range diag {
		r := d.Reason
		if d.Detail != "" && r == "unavailable" {
			r += ":" + d.Detail
		}
		found := false
		for _, x := range out {
			found = found || x == r
		}
		if !found {
			out = append(out, r)
		}
	}
	return out
}

// SetQuota installs the quota-window tracker: every upstream response
// feeds it, gate 10 and the quota strategies read it.
func (g *Gateway) SetQuota(t *quota.Tracker) { g.quota = t }

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

// SetStrategies installs the combo strategies and their shared state.
func (g *Gateway) SetStrategies(reg map[string]routing.Strategy, state routing.State) {
	g.strategies, g.routeState = reg, state
}

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

// attemptState is what one client request accumulates while routing.
type attemptState struct {
	attempts      int
	excluded      map[string]bool // connection ids failed in this request
	failedProv    map[string]bool // providers with a failure in this request
	skipModel     map[string]bool // models skipped after a next_model failure
	last          *resilience.Outcome
	lastRes       result
	diag          []Exclusion
	timerWait     time.Duration // earliest timer among exclusions
	timers        map[string]bool
	noTimer       bool // some exclusion is not a timer
	lastTarget    string
	waitMin       time.Duration // smallest remaining waitable blocker
	bestToolLimit ToolLimit
	warnings      []translate.Warning
	onlyLocal     bool  // every failure so far was a local limit
	localErr      error // the last local limiter error
	log           *LogRecord
	cfg           ComboConfig // effective config of the routed combo (§3)
	deadline      time.Time   // routing.requestDeadlineMs after receipt
	terminal      string      // attempt_cap or deadline once the budget is spent
	// retryable lists, in walk order, the targets that failed with
	// model_capacity, server_error or transient in this pass (§6.3);
	// connReason is the reason of each connection's last failure here.
	retryable  []target
	connReason map[string]resilience.Reason
	// pickCands and pickConns are pickUncached's reusable candidate
	// buffers, pickScr pick's.
	pickCands []accounts.Candidate
	pickConns []*services.Connection
	pickScr   pickScratch
}

// retryReason reports the failures a retry pass may try again (§6.3).
func retryReason(r resilience.Reason) bool {
	switch r {
	case resilience.ReasonModelCapacity, resilience.ReasonServerError, resilience.ReasonTransient:
		return true
	}
	return false
}

// budgetSpent reports whether no new dispatch may start (§4): the attempt
// cap or the request deadline is reached. It records which.
func (st *attemptState) budgetSpent(now time.Time, set *Settings) bool {
	switch {
	case st.attempts >= set.MaxAttempts:
		st.terminal = "attempt_cap"
	case !st.deadline.IsZero() && !now.Before(st.deadline):
		st.terminal = "deadline"
	default:
		return false
	}
	return true
}

// noteWaitable records a blocker a cooldown-aware wait may sleep out.
func (st *attemptState) noteWaitable(d time.Duration) {
	if d > 0 && (st.waitMin == 0 || d < st.waitMin) {
		st.waitMin = d
	}
}

func (st *attemptState) exclude(t target, connID, reason, detail string, retryAfter time.Duration) {
	e := Exclusion{Target: t.name(), Reason: reason, Detail: detail}
	if connID != "" {
		id := connID
		e.ConnectionID = &id
	}
	if retryAfter > 0 {
		ms := retryAfter.Milliseconds()
		if ms < 1 {
			ms = 1
		}
		e.RetryAfterMs = &ms
		if st.timerWait == 0 || retryAfter < st.timerWait {
			st.timerWait = retryAfter
		}
		st.timers[reason] = true
	} else {
		st.noTimer = true
	}
	if len(st.diag) < 64 {
		st.diag = append(st.diag, e)
	}
}

// ServeChat routes an OpenAI chat completion and writes the response.
func (g *Gateway) ServeChat(w http.ResponseWriter, r *http.Request, req *Request) {
	if req.Inbound == "" {
		req.Inbound = InboundChat
	}
	g.Serve(w, r, req)
}

// Serve routes a client request of any inbound format and writes the response.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, req *Request) {
	var rec *LogRecord
	if c := req.Route.Combo; c != nil && (c.Strategy == "fusion" || c.Strategy == "pipeline") {
		rec = g.serveOwnExecutor(w, r, req)
	} else {
		rec = g.serve(w, r, req)
	}
	if g.logs != nil {
		g.logs.Record(rec)
	}
}

// serve runs the attempt loop of 30-routing §6 for one request and returns
// its finished log record (recorded by the caller: fusion and pipeline
// members are parts of one logged request).
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, req *Request) (rec *LogRecord) {
	set := g.current()
	snap := g.reg.Snapshot()
	rec = newLogRecord(req)
	st := &attemptState{excluded: map[string]bool{}, failedProv: map[string]bool{}, skipModel: map[string]bool{},
		timers: map[string]bool{}, log: rec, onlyLocal: true, cfg: comboConfig(set, req.Route.Combo)}
	if set.RequestDeadline > 0 {
		received := req.Received
		if received.IsZero() {
			received = g.clock.Now()
		}
		st.deadline = received.Add(set.RequestDeadline)
	}
	out := newClientWriter(w, r, req, set)
	defer func() { rec.finish(g.clock.Now(), out) }()
	if st.cfg.TargetTimeout > 0 && st.cfg.TargetTimeout != set.TargetTimeout {
		one := *set // the combo's targetTimeoutMs (30-routing §3)
		one.TargetTimeout = st.cfg.TargetTimeout
		set = &one
	}
	if req.Route.Combo != nil {
		w.Header().Set("X-Switchyard-Combo", req.Route.Combo.Name)
		rec.ComboName = req.Route.Combo.Name
		rec.Strategy = req.Route.Combo.Strategy
	}
	waits, budget := 0, time.Duration(0)
	for {
		if g.route(r, out, snap, req, st, set) {
			return
		}
		if out.gone() {
			return
		}
		if g.retryPasses(r, out, req, st, set) {
			return
		}
		d, ok := g.waitDecision(req, st, waits, &budget)
		if !ok {
			break
		}
		tok := g.beginCooldownWait(req, d)
		done := g.waitOut(r.Context(), out, req, d)
		tok.End()
		if !done {
			return
		}
		waits++
		st.log.waited(req.Route.Combo != nil, d)
		g.obs.Waited(req.Route.Combo != nil)
		// Run the whole target set again with a fresh excluded set.
		snap = g.reg.Snapshot()
		st.resetPass()
	}
	if g.emergency(r, out, snap, req, st, set) {
		return
	}
	g.fail(out, st, g.finalError(req, st))
	return rec
}

// route walks the target set once; it reports whether the request is over.
func (g *Gateway) route(r *http.Request, out *clientWriter, snap *Snapshot, req *Request, st *attemptState, set *Settings) bool {
	return g.walk(r, out, snap, g.expandFor(snap, req.Route, req, set, st), req, st, set)
}

// walk is one pass over an ordered target list (30-routing §6.1): the
// entry queue, then the target's connection loop; it reports whether the
// request is over. Targets that failed transiently are collected for the
// retry passes.
func (g *Gateway) walk(r *http.Request, out *clientWriter, snap *Snapshot, targets []target, req *Request, st *attemptState, set *Settings) bool {
	ctx := withBeta(r.Context(), req.AnthropicBeta)
	var deferred []target // saturated entries, moved to the end once (§6.5)
	for i := 0; i < len(targets)+len(deferred); i++ {
		var t target
		last := false
		if i < len(targets) {
			t = targets[i]
			last = i == len(targets)-1 && len(deferred) == 0
		} else {
			t, last = deferred[i-len(targets)], true
		}
		if st.skipModel[t.model] {
			st.exclude(t, "", "failed", "same model failed with a caller error", 0)
			continue
		}
		release := func() {}
		if n := st.cfg.QueueConcurrency; n > 0 && t.comboID != "" {
			key := entryKey(t)
			if i < len(targets) && !last && g.entrySlots.Busy(key, n) {
				deferred = append(deferred, t)
				st.exclude(t, "", "target_saturated", "", 0)
				g.obs.Excluded("target_saturated")
				continue
			}
			rel, failOpen, err := g.entrySlots.AcquireWith(ctx, key, n, entrySlotConfig(st.cfg))
			if err != nil {
				return true // the client left while queued
			}
			if failOpen {
				g.obs.Excluded("target_saturated_fail_open")
			}
			release = rel
		}
		dispatched, lastReason, stop := g.walkTarget(ctx, out, snap, t, req, st, set)
		release()
		if stop {
			return true
		}
		if dispatched && lastReason != "" {
			g.rememberSession(ctx, t, req, false)
			if retryReason(lastReason) && !st.hasRetryable(t) {
				st.retryable = append(st.retryable, t)
			}
		}
		if dispatched && t.comboID != "" && lastReason != "" && g.routeState != nil && lastReason != resilience.ReasonClientAbort {
			g.routeState.OnFailure(t.comboID, t.id)
		}
		if dispatched && req.Route.Combo != nil && lastReason != "" {
			g.res.FinalTargetFailure(ctx, t.provider.ID, t.provider.AuthClass, t.connID, lastReason,
				lastReason == resilience.ReasonServerError && t.provider.PerModelQuota && st.lastRes.status == 500)
		}
		if st.terminal != "" {
			return false
		}
	}
	return false
}

// noteConnFailure records the reason of a connection's last failure here.
func (st *attemptState) noteConnFailure(connID string, r resilience.Reason) {
	if st.connReason == nil {
		st.connReason = map[string]resilience.Reason{}
	}
	st.connReason[connID] = r
}

func (st *attemptState) hasRetryable(t target) bool {
	for _, r := range st.retryable {
		if r.id == t.id && r.provider.ID == t.provider.ID && r.model == t.model && r.connID == t.connID {
			return true
		}
	}
	return false
}

// retryPasses runs the retry passes of 30-routing §6.3 after a pass without
// success: up to maxRetries times, wait retryDelayMs (a client leaving ends
// the request) and walk again only the targets that failed with
// model_capacity, server_error or transient, in their original order, with
// the failed gate lifted for connections whose last failure here was one of
// those. It reports whether the request is over.
func (g *Gateway) retryPasses(r *http.Request, out *clientWriter, req *Request, st *attemptState, set *Settings) bool {
	for pass := 0; pass < st.cfg.MaxRetries && len(st.retryable) > 0 && st.terminal == ""; pass++ {
		if st.last != nil && (st.last.Reason == resilience.ReasonCallerError || st.last.Reason == resilience.ReasonClientAbort) {
			return false
		}
		targets := st.retryable
		st.retryable = nil
		if !g.retryUseful(g.reg.Snapshot(), targets, req, st) {
			return false
		}
		if st.cfg.RetryDelay > 0 && !g.waitOut(r.Context(), out, req, st.cfg.RetryDelay) {
			return true
		}
		if budgetLeft := !st.budgetSpent(g.clock.Now(), set); !budgetLeft {
			return false
		}
		for id, reason := range st.connReason {
			if retryReason(reason) {
				delete(st.excluded, id)
			}
		}
		if g.walk(r, out, g.reg.Snapshot(), targets, req, st, set) || out.gone() {
			return true
		}
	}
	return false
}

// retryUseful reports whether some connection of the targets could serve
// after the retry delay: one that failed transiently here, or was never
// tried, and whose blocker (if any) ends within the delay. A pass that can
// only meet cooling connections is skipped instead of waited for.
func (g *Gateway) retryUseful(s *Snapshot, targets []target, req *Request, st *attemptState) bool {
	for _, t := range targets {
		for _, c := range s.Connections(t.provider.ID) {
			if !c.Enabled || (t.connID != "" && c.ID != t.connID) || !req.Key.AllowsConnection(c.ID) {
				continue
			}
			if st.excluded[c.ID] && !retryReason(st.connReason[c.ID]) {
				continue
			}
			b := g.res.ConnectionBlocker(t.provider.ID, c.ID, t.model)
			if b == nil || (b.RetryAfter > 0 && b.RetryAfter <= st.cfg.RetryDelay) {
				return true
			}
		}
	}
	return false
}

// emergency makes the one last attempt of 20-resilience §13.3 on the
// configured fallback target, only after every target failed for a reason
// that allows it. It reports whether the fallback served the request.
func (g *Gateway) emergency(r *http.Request, out *clientWriter, snap *Snapshot, req *Request, st *attemptState, set *Settings) bool {
	if g.traffic == nil || g.traffic.Doc == nil || out.committedUseful() {
		return false
	}
	ef := g.traffic.Doc().EmergencyFallback
	if !ef.Active() || (ef.SkipForToolRequests && req.ToolCount > 0) || req.LeaseConnID != "" {
		return false
	}
	if st.onlyLocal && st.localErr != nil {
		return false
	}
	if st.last != nil {
		switch st.last.Reason {
		case resilience.ReasonCallerError, resilience.ReasonClientAbort, resilience.ReasonLocalLimit:
			return false
		}
	}
	route, gerr := Resolve(snap, req.Key, ef.Target)
	if gerr != nil {
		return false
	}
	if (route.Combo != nil && req.Route.Combo != nil && route.Combo.ID == req.Route.Combo.ID) ||
		(route.Combo == nil && req.Route.Combo == nil && route.Canonical() == req.Route.Canonical()) {
		return false // the fallback is what just failed
	}
	fr := *req
	fr.Route = route
	fr.Body = capTokens(req.Body, req.Inbound, ef.MaxOutputTokens)
	// The fallback's answer says so in X-Switchyard-Warning too (10-gateway-api
	// §6.8): the dispatch sets the header from the request's warnings before it
	// commits the response.
	fr.Warnings = append(slices.Clip(req.Warnings), WarnEmergencyFallback)
	one := *set
	one.MaxAttempts = st.attempts + 1 // one attempt, no waits, no recursion
	out.w.Header().Set("X-Switchyard-Emergency-Fallback", "from="+req.Model+"; to="+ef.Target)
	for _, t := range g.expand(snap, route, &fr) {
		_, _, stop := g.walkTarget(withBeta(r.Context(), req.AnthropicBeta), out, snap, t, &fr, st, &one)
		if stop || st.attempts >= one.MaxAttempts {
			break
		}
	}
	served := st.log.Status == 200 && (st.log.Outcome == "success" || st.log.Outcome == "failover")
	if served {
		st.log.EmergencyFallback = true
		st.log.Outcome = "emergency_fallback"
		g.obs.EmergencyFallback("success")
		return true
	}
	g.obs.EmergencyFallback("failure")
	// Tried and failed: the log marks it (its emergency_fallback filter finds
	// it), but the warning token is for answers the fallback gave.
	st.log.EmergencyFallback = true
	st.log.Warnings = slices.DeleteFunc(st.log.Warnings, func(w string) bool { return w == WarnEmergencyFallback })
	if !out.committed() {
		out.w.Header().Del("X-Switchyard-Emergency-Fallback")
		out.dropWarning(WarnEmergencyFallback)
	}
	return out.committed() || out.gone()
}

// WarnEmergencyFallback marks an answer the emergency fallback gave.
const WarnEmergencyFallback = "emergency_fallback"

// capTokens caps the output tokens of a fallback request.
func capTokens(body map[string]json.RawMessage, inbound string, limit int) map[string]json.RawMessage {
	if limit <= 0 {
		return body
	}
	field := "max_tokens"
	switch inbound {
	case InboundResponses:
		field = "max_output_tokens"
	case InboundEmbeddings:
		return body
	}
	out := make(map[string]json.RawMessage, len(body))
	for k, v := range body {
		out[k] = v
	}
	var cur int
	if v, ok := body[field]; !ok || json.Unmarshal(v, &cur) != nil || cur > limit {
		out[field] = json.RawMessage(fmt.Sprint(limit))
	}
	if inbound == InboundChat {
		if v, ok := body["max_completion_tokens"]; ok && json.Unmarshal(v, &cur) == nil && cur > limit {
			out["max_completion_tokens"] = json.RawMessage(fmt.Sprint(limit))
			delete(out, "max_tokens")
		}
	}
	return out
}

// walkTarget tries the connections of one target until one serves, the
// failover rule moves on, or nothing is left. stop = the request is over.
func (g *Gateway) walkTarget(ctx context.Context, out *clientWriter, s *Snapshot, t target, req *Request, st *attemptState, set *Settings) (dispatched bool, lastReason resilience.Reason, stop bool) {
	// Learned tool limit (20-resilience §13.2): a hard exclusion, tools are never dropped.
	if req.ToolCount > 0 {
		if l, ok := g.tools.Get(t.provider.ID, t.model); ok && l.MaxTools < req.ToolCount {
			st.exclude(t, "", "tool_limit", fmt.Sprintf("limit %d tools", l.MaxTools), 0)
			if l.MaxTools > st.bestToolLimit.MaxTools || st.bestToolLimit.Provider == "" {
				st.bestToolLimit = l
			}
			g.obs.Excluded("tool_limit")
			return false, "", false
		}
	}
	var retryConn *services.Connection
	earlyRetries := 0
	for {
		if st.budgetSpent(g.clock.Now(), set) {
			st.exclude(t, "", st.terminal, "", 0)
			return dispatched, lastReason, false
		}
		adm, blk := g.res.AllowProvider(t.provider.ID, t.provider.AuthClass, t.connID)
		if blk != nil {
			if blk.Waitable {
				st.noteWaitable(blk.RetryAfter)
			}
			if !dispatched {
				st.exclude(t, "", blk.Reason, "", blk.RetryAfter)
				g.obs.Excluded(blk.Reason)
			}
			return dispatched, lastReason, false
		}
		conn := retryConn
		retryConn = nil
		if conn == nil {
			conn = g.pick(s, t, req, st, set, !dispatched)
		}
		if conn == nil {
			g.res.Release(adm)
			return dispatched, lastReason, false
		}
		dispatched = true
		if st.lastTarget != "" {
			kind := "target"
			if st.lastTarget == t.name() {
				kind = "connection"
			}
			g.obs.Failover(kind)
		}
		st.lastTarget = t.name()
		if t.comboID != "" && g.routeState != nil {
			g.routeState.OnDispatch(t.comboID, t.id)
		}
		dreq := req
		if t.relay {
			if ir := g.relayInjection(t, conn, req); ir != nil {
				dreq = ir
			}
		}
		res := g.dispatch(ctx, out, t, conn, dreq, st, set)
		switch {
		case res.ok:
			g.res.Success(ctx, adm, conn.ID, t.model)
			g.stats.Record(t.provider.ID, t.model, conn.ID, true, res.latency)
			g.rememberSession(ctx, t, req, true)
			if t.relay {
				g.relayAfterSuccess(t, conn, req, set)
			}
			g.storeError(StoreToolLimit, g.tools.Succeeded(ctx, t.provider.ID, t.model, req.ToolCount))
			if t.comboID != "" && g.routeState != nil {
				g.routeState.OnSuccess(t.comboID, t.id, conn.ID)
			}
			g.obs.Attempt(t.provider.ID, "success")
			if pin := g.pinID(req, t.provider.ID); pin != "" {
				g.storeError(StoreAffinityPin, g.traffic.Pins.Pin(context.WithoutCancel(ctx), pin, req.Key.ID, t.provider.ID, conn.ID))
			}
			return true, "", true
		case res.gone:
			g.res.Release(adm)
			g.obs.Attempt(t.provider.ID, "aborted")
			return true, "", true
		case res.shutdown:
			// The drain ran out while the client still waits: tell it so,
			// in band once the stream is committed.
			g.res.Release(adm)
			g.obs.Attempt(t.provider.ID, "aborted")
			e := services.NewGatewayError(services.CodeServerShuttingDown, "The server is shutting down; retry the request.")
			if out.committedUseful() {
				out.streamError(e)
				st.log.Outcome, st.log.Status, st.log.ErrorCode = "upstream_error", 200, e.Code
			} else {
				g.fail(out, st, e)
			}
			return true, "", true
		case res.callerErr != nil:
			g.res.Release(adm)
			var lf *leaseFenceError
			if errors.As(res.callerErr, &lf) {
				g.fail(out, st, lf.gatewayError())
				return true, "", true
			}
			var ue *translate.UnsupportedError
			e := services.NewGatewayError(services.CodeInvalidRequest, "The request cannot be translated: "+res.callerErr.Error())
			if errors.As(res.callerErr, &ue) {
				e = services.NewGatewayError(services.CodeUnsupportedParameter, ue.Message).WithParam(ue.Param)
			}
			g.fail(out, st, e)
			return true, "", true
		}
		g.obs.Attempt(t.provider.ID, "failure")
		// Early retry on the same connection before commit (20-resilience §11).
		if req.Stream && !res.postCommit && !out.committedUseful() && earlyRetries < g.earlyRetryMax() &&
			(res.watchdog || res.transport == resilience.TransportReset || res.transport == resilience.TransportIdleTimeout ||
				res.detail == resilience.DetailEmptyResponse) {
			earlyRetries++
			g.res.Release(adm)
			retryConn = conn
			continue
		}
		if res.watchdog {
			// A throughput abort penalises nothing: no cooldown, no breaker count.
			g.res.Release(adm)
			st.last = &resilience.Outcome{Classification: resilience.Classification{Reason: resilience.ReasonTransient,
				Detail: "throughput_too_low", Failover: resilience.FailoverNext}}
			st.lastRes = res
			st.excluded[conn.ID] = true
			st.noteConnFailure(conn.ID, resilience.ReasonTransient)
			g.stats.Record(t.provider.ID, t.model, conn.ID, false, 0)
			st.onlyLocal = false
			lastReason = resilience.ReasonTransient
			if res.postCommit {
				e := services.NewGatewayError(services.CodeStreamThroughputTooLow, "The upstream stream was too slow and was stopped.")
				out.streamError(e)
				st.log.Outcome, st.log.Status, st.log.ErrorCode = "upstream_error", 200, e.Code
				return true, lastReason, true
			}
			continue
		}
		outc := g.recordFailure(ctx, s, t, conn, req, st, adm, res)
		lastReason = outc.Reason
		if out.committedUseful() || res.postCommit {
			// Nothing is replayed after the first useful byte: end in band.
			e := g.answerFor(req, st)
			out.streamError(e)
			st.log.Outcome, st.log.Status, st.log.ErrorCode = "upstream_error", 200, e.Code
			return true, lastReason, true
		}
		switch outc.Failover {
		case resilience.FailoverStop:
			g.relayCallerError(out, st, res, *outc)
			return true, lastReason, true
		case resilience.FailoverNextModel:
			st.skipModel[t.model] = true
			return true, lastReason, false
		}
	}
}

// recordFailure classifies a failed attempt and records it everywhere: the
// resilience state, the log, tool limits, metrics, the attempt state and
// the session pin. A method of its own so that its locals (the Failure
// among them) are not part of walkTarget's frame, which a streaming
// request keeps on its stack for the whole stream.
func (g *Gateway) recordFailure(ctx context.Context, s *Snapshot, t target, conn *services.Connection, req *Request, st *attemptState, adm resilience.Admission, res result) *resilience.Outcome {
	f := failureOf(res, t, conn, req.ToolCount, g.clock.Now())
	outc := g.res.Failure(ctx, adm, refOf(conn), f, func() []resilience.ConnRef { return g.siblings(s, t.provider.ID) })
	st.log.noteOutcome(outc)
	if outc.Detail == resilience.DetailToolLimit {
		g.storeError(StoreToolLimit, g.tools.Learn(ctx, t.provider.ID, t.model, outc.ToolLimit, req.ToolCount))
	}
	g.obs.Failure(t.provider.ID, string(outc.Reason))
	st.last, st.lastRes = &outc, res
	st.failedProv[t.provider.ID] = true
	st.excluded[conn.ID] = true
	st.noteConnFailure(conn.ID, outc.Reason)
	if recordable(outc.Reason) {
		g.stats.Record(t.provider.ID, t.model, conn.ID, false, 0)
	}
	if outc.Reason != resilience.ReasonLocalLimit {
		st.onlyLocal = false
		// The session leaves this connection: drop its pin (re-pinned on success).
		if pin := g.pinID(req, t.provider.ID); pin != "" {
			if id, ok := g.traffic.Pins.Lookup(pin); ok && id == conn.ID {
				g.storeError(StoreAffinityPin, g.traffic.Pins.Drop(context.WithoutCancel(ctx), pin))
			}
		}
	} else {
		st.localErr = res.localErr
	}
	return &outc
}

func refOf(c *services.Connection) resilience.ConnRef {
	return resilience.ConnRef{ID: c.ID, Provider: c.Provider, Profile: c.AuthClass, DisableCooling: c.DisableCooling,
		ProxyURL: c.ProxyURL.Reveal(), EgressGroup: c.EgressGroup}
}

// siblings lists enabled connections of a provider for the egress lock.
func (g *Gateway) siblings(s *Snapshot, provider string) []resilience.ConnRef {
	var out []resilience.ConnRef
	for _, c := range s.Connections(provider) {
		if c.Enabled {
			out = append(out, refOf(c))
		}
	}
	return out
}

// pickUncached chooses the next connection for a target, or nil when none
// is left. The connection gates of 30-routing §5 (7–12) run here for every
// connection; when nothing is eligible the target's exclusion names its
// soonest-ending blocker. pick (pick.go) makes the same decision from its
// eligibility cache; this is the reference it is tested against.
func (g *Gateway) pickUncached(s *Snapshot, t target, req *Request, st *attemptState, set *Settings, record bool) *services.Connection {
	// The candidate buffers live in the attempt state: one request's picks
	// reuse them, so a pick allocates nothing once they have grown.
	eligible, conns := st.pickCands[:0], st.pickConns[:0] // conns[i] is eligible[i]'s connection
	defer func() { st.pickCands, st.pickConns = eligible[:0], conns[:0] }()
	var soonest resilience.Blocker
	soonestConn := ""
	allLocked, any := true, false
	hard := ""
	now := g.clock.Now()
	mk := resilience.KeysForModel(t.provider.ID, t.model)
	if _, ok := pipelineFor(req.Inbound, t.provider.Format, nativeAnthropic(t.provider), set.DefaultMaxTokens); !ok {
		if record {
			st.exclude(t, "", "unavailable", "incompatible", 0) // e.g. embeddings on an anthropic-format upstream
			g.obs.Excluded("incompatible")
		}
		return nil
	}
	for _, c := range s.Connections(t.provider.ID) {
		if t.connID != "" && c.ID != t.connID {
			continue
		}
		if !c.Enabled {
			hard = "disabled"
			continue
		}
		if !req.Key.AllowsConnection(c.ID) {
			hard = "not_allowed"
			continue
		}
		if st.excluded[c.ID] {
			continue
		}
		if req.LeaseConnID != "" && c.ID != req.LeaseConnID {
			continue
		}
		if g.heldByOthers(c.ID, req) {
			if !dispatchedOnce(st) {
				hard = "lease_busy"
			}
			continue
		}
		b, blocked := g.res.BlockerKeys(t.provider.ID, c.ID, mk, now)
		if !blocked && g.quota != nil {
			if qb := g.quotaBlocker(c, now); qb != nil {
				b, blocked = *qb, true
			}
		}
		if blocked {
			any = true
			if b.Waitable {
				st.noteWaitable(b.RetryAfter)
			}
			if b.RetryAfter <= 0 {
				hard = b.Reason
				allLocked = false
				continue
			}
			if b.Reason != "model_lockout" {
				allLocked = false
			}
			if soonestConn == "" || b.RetryAfter < soonest.RetryAfter {
				soonest, soonestConn = b, c.ID
			}
			continue
		}
		rt := g.reg.Runtime(c.ID)
		eligible = append(eligible, accounts.Candidate{ID: c.ID, Priority: c.Priority, CreatedAt: c.CreatedAt,
			BackoffLevel: g.res.Cooldowns.BackoffLevel(c.ID), LastUsedAt: rt.LastUsed(), InFlight: rt.InFlight(), SuccessRate: rt.SuccessRate()})
		conns = append(conns, c)
	}
	if len(eligible) == 0 {
		if record {
			switch {
			case soonestConn != "":
				reason, detail := "unavailable", soonest.Reason
				if soonest.Reason == "model_lockout" && allLocked && any {
					reason, detail = "model_lockout", ""
				}
				st.exclude(t, soonestConn, reason, detail, soonest.RetryAfter)
				g.obs.Excluded(soonest.Reason)
			case hard != "":
				st.exclude(t, "", "unavailable", hard, 0)
				g.obs.Excluded(hard)
			default:
				st.exclude(t, "", "no_connection", "", 0)
			}
		}
		return nil
	}
	strategy, sticky := set.FallbackStrategy, set.StickyLimit
	if ps, ok := set.ProviderStrategy[t.provider.ID]; ok {
		if ps.FallbackStrategy != "" {
			strategy = ps.FallbackStrategy
		}
		if ps.StickyLimit > 0 {
			sticky = ps.StickyLimit
		}
	}
	// The strategy's preferred connection (lkgp), when eligible.
	if t.prefConn != "" {
		if c := eligibleByID(conns, t.prefConn); c != nil {
			return c
		}
	}
	// An eligible affinity pin wins (a preference, never a wall: BD 7).
	if pin := g.pinID(req, t.provider.ID); pin != "" {
		if id, ok := g.traffic.Pins.Lookup(pin); ok {
			if c := eligibleByID(conns, id); c != nil {
				st.log.AffinityHit = true
				return c
			}
		}
	}
	id := g.sel.Pick(t.provider.ID, strategy, sticky, eligible, st.failedProv[t.provider.ID])
	return eligibleByID(conns, id)
}

// eligibleByID finds id among the eligible connections. A linear scan: it
// runs at most three times per pick, and building a map per request cost
// more than the scans it saved.
func eligibleByID(conns []*services.Connection, id string) *services.Connection {
	if id == "" {
		return nil
	}
	for _, c := range conns {
		if c.ID == id {
			return c
		}
	}
	return nil
}

func dispatchedOnce(st *attemptState) bool { return st.attempts > 0 }

// responseModel is the "model" of a synthesised response (10-gateway-api
// §6.5): the upstream model id that served, or the client's name when
// routing.echoRequestedModel is on.
func responseModel(req *Request, t target, set *Settings) string {
	if set.EchoRequestedModel {
		return req.Model
	}
	return t.model
}

// requestBody rebuilds the upstream body for a target: the client's fields
// with model replaced by the upstream model id.
func requestBody(req *Request, model string) ([]byte, error) {
	return encodeBody(req.Body, model)
}

// dispatch sends one upstream request and, on success, writes the response.
func (g *Gateway) dispatch(ctx context.Context, out *clientWriter, t target, c *services.Connection, req *Request, st *attemptState, set *Settings) result {
	pl, ok := pipelineFor(req.Inbound, t.provider.Format, nativeAnthropic(t.provider), set.DefaultMaxTokens)
	if !ok {
		return resBad(resilience.DetailMalformed, "this upstream format cannot serve the request")
	}
	body, warns, err := pl.body(req, t.model)
	if err != nil {
		return result{callerErr: err}
	}
	st.log.UpstreamFormat = string(t.provider.Format)
	st.warnings = warns
	st.attempts++
	start, wallStart := g.clock.Now(), time.Now()
	rt := g.reg.Runtime(c.ID)
	rt.lastUsedMs.Store(start.UnixMilli())
	g.obs.Used(c.ID, start)
	rt.inFlight.Add(1)
	defer rt.inFlight.Add(-1)
	at := st.log.startAttempt(t, c, start)
	out.setDispatch(c.ID, t.provider.ID, t.model, st.attempts-1)

	adm, err := g.admit(ctx, t, c, req)
	if err != nil {
		res := localLimit(ctx, err)
		at.finish(g.clock.Now(), res)
		return res
	}
	defer adm.done()
	// The lease fence is re-checked after slot and queue waits, right before sending.
	if req.LeaseConnID != "" && g.traffic != nil && g.traffic.Leases != nil {
		if l, err := g.traffic.Leases.Check(ctx, req.Key, req.LeaseOwner, req.LeaseGen); err != nil || l.ConnectionID != c.ID {
			res := result{callerErr: &leaseFenceError{err: err}}
			at.finish(g.clock.Now(), res)
			return res
		}
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// requestQueue.maxWaitMs bounds dispatch → response headers (BD 14).
	var execTimer *time.Timer
	if adm.maxWait > 0 {
		execTimer = time.AfterFunc(adm.maxWait, func() { cancel(errExecTimeout) })
	}
	onHeaders := func(status int, h http.Header) {
		if execTimer != nil {
			execTimer.Stop()
		}
		if g.quota != nil {
			g.quota.Observe(c.ID, h, g.clock.Now())
		}
		g.learn(ctx, adm, status, h)
	}
	if len(warns) > 0 || len(req.Warnings) > 0 {
		out.setWarning(warningText(req.Warnings, warns))
		st.log.addWarnings(req.Warnings, warns)
	}
	var res result
	if req.Stream {
		res = g.relayStream(actx, cancel, out, t, c, pl.path, body, pl.stream(req, responseModel(req, t, set)), set, st, onHeaders)
	} else {
		res = g.forwardJSON(actx, cancel, out, t, c, pl, body, set, st, onHeaders)
	}
	redactResult(&res, c)
	if execTimer != nil {
		execTimer.Stop()
	}
	if !res.ok && !res.gone && out.committedUseful() {
		res.postCommit = true
	}
	at.finish(g.clock.Now(), res)
	if res.ok {
		res.latency = out.firstByteSince(wallStart)
		rt.successes.Add(1)
		st.log.served(t, c, st.attempts)
		if d := out.ttfb(); d > 0 {
			g.obs.TTFB(t.provider.ID, d)
		}
	} else if !res.gone {
		rt.failures.Add(1)
	}
	return res
}

// forwardJSON handles a non-stream dispatch: the whole body within the
// target timeout, converted to the client's format and validated before
// anything reaches the client.
func (g *Gateway) forwardJSON(ctx context.Context, cancel context.CancelCauseFunc, out *clientWriter, t target, c *services.Connection, pl pipeline, body []byte, set *Settings, st *attemptState, onHeaders func(int, http.Header)) result {
	timer := time.AfterFunc(set.TargetTimeout, func() { cancel(errTargetTimeout) })
	defer timer.Stop()
	resp, err := g.send(ctx, t, c, pl.path, body, false)
	if err != nil {
		return transportResult(ctx, err)
	}
	defer resp.Body.Close()
	onHeaders(resp.StatusCode, resp.Header)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return resStatus(resp.StatusCode, resp.Header, b)
	}
	buf, err := g.up.readBody(resp.Body)
	defer buf.release()
	if res, ok := limitResult(err, g.up.limits()); ok {
		return res
	}
	if err != nil {
		return transportResult(ctx, err)
	}
	b := buf.bytes()
	conv, u, err := pl.convert(out.req, responseModel(out.req, t, set), b)
	if err != nil {
		var ue *translate.UpstreamError
		if errors.As(err, &ue) {
			// An error object with status 200, as some providers send; kept
			// no longer than an error body is read.
			if len(b) > 64<<10 {
				b = bytes.Clone(b[:64<<10])
			}
			return resStatus(502, resp.Header, b)
		}
		return resBad(resilience.DetailEmptyResponse, "malformed or empty response body")
	}
	st.log.addCounts(u)
	if !out.writeJSON(conv, "") {
		return resGone()
	}
	return resOK()
}

// send performs the HTTP exchange up to the response headers.
func (g *Gateway) send(ctx context.Context, t target, c *services.Connection, path string, body []byte, stream bool) (*http.Response, error) {
	cl, err := g.up.client(c)
	if err != nil {
		return nil, err
	}
	hreq, err := g.up.newRequest(ctx, t.provider, c, path, body, stream)
	if err != nil {
		return nil, err
	}
	if beta := ctxBeta(ctx); beta != "" && t.provider.Format == services.FormatAnthropic {
		hreq.Header.Set("anthropic-beta", beta)
	}
	return cl.Do(hreq)
}

// relayCallerError relays an upstream caller fault that stops the request.
func (g *Gateway) relayCallerError(out *clientWriter, st *attemptState, res result, o resilience.Outcome) {
	code, _, msg := parseUpstreamError(res.body)
	if !upstreamCode.MatchString(code) {
		code = services.CodeInvalidRequest
	}
	status := o.Status
	if status < 400 || status > 499 {
		status = 400
	}
	text := "The upstream rejected the request"
	if msg != "" {
		text += ": " + msg
	}
	g.fail(out, st, &services.GatewayError{Status: status, Code: code, Message: text})
}

// fail writes the final error: an HTTP error before commit, an in-band
// error frame after a keepalive commit.
func (g *Gateway) fail(out *clientWriter, st *attemptState, e *services.GatewayError) {
	st.log.Status, st.log.ErrorCode = e.HTTPStatus(), e.Code
	switch {
	case e.HTTPStatus() >= 500 || e.Code == services.CodeUpstreamRateLimited || e.Code == services.CodeModelCooldown:
		st.log.Outcome = "upstream_error"
	default:
		st.log.Outcome = "client_error"
	}
	if st.attempts == 0 {
		switch e.Code {
		case services.CodeProviderCircuitOpen, services.CodeModelCooldown, services.CodeAllTargetsCoolingDown, services.CodeNoExecutableTargets:
			g.obs.PoolExhausted(e.Code)
		}
		if e.Code == services.CodeAllTargetsCoolingDown && g.log != nil {
			g.log.Warn("all targets cooling down", "request_id", out.req.ID, "model", out.req.Model,
				"reasons", exclusionReasons(st.diag), "retry_after_s", e.RetryAfter)
		}
	}
	if out.gone() {
		return
	}
	if out.committed() {
		out.streamError(e)
		return
	}
	out.writeError(e)
}

// finalError decides the answer when routing ended without success
// (30-routing §7).
func (g *Gateway) finalError(req *Request, st *attemptState) *services.GatewayError {
	e := g.answerFor(req, st)
	ms := int64(e.RetryAfter) * 1000
	d := Diagnostics{PoolSize: len(st.diag) + st.attempts, Attempted: st.attempts, TerminalReason: e.Code, Excluded: st.diag}
	if st.terminal != "" {
		d.TerminalReason = st.terminal // attempt_cap or deadline (30-routing §4)
	}
	if st.timerWait > 0 {
		ms = st.timerWait.Milliseconds()
		d.RetryAfterMs = &ms
	}
	if d.Excluded == nil {
		d.Excluded = []Exclusion{}
	}
	e.Diagnostics = d
	return e
}

func (g *Gateway) answerFor(req *Request, st *attemptState) *services.GatewayError {
	direct := req.Route.Combo == nil
	timerSecs := func() int { return ceilSeconds(st.timerWait) }
	if st.attempts == 0 {
		switch {
		case st.bestToolLimit.Provider != "" && onlyToolLimits(st):
			l := st.bestToolLimit
			return services.NewGatewayError(services.CodeToolLimitExceeded, fmt.Sprintf("The request has %d tools; the largest limit known for this request's targets is %d (%s/%s).", req.ToolCount, l.MaxTools, l.Provider, l.Model)).WithParam("tools")
		case req.Inbound == InboundEmbeddings && onlyIncompatible(st):
			// Embeddings exist only on openai-format upstreams (10-gateway-api §5.4).
			return services.NewGatewayError(services.CodeUnsupportedParameter, "Embeddings are served by OpenAI-format upstreams only, and no target of this model is one.").WithParam("model")
		case direct && st.timers["circuit_open"]:
			return services.NewGatewayError(services.CodeProviderCircuitOpen, "The provider's circuit breaker is open after repeated failures; retry after "+strconv.Itoa(timerSecs())+" s.").WithRetryAfter(timerSecs())
		case direct && st.timers["model_lockout"] && len(st.timers) == 1 && !st.noTimer:
			return services.NewGatewayError(services.CodeModelCooldown, "This model is locked out on every connection; retry after "+strconv.Itoa(timerSecs())+" s.").WithRetryAfter(timerSecs())
		case len(st.timers) > 0:
			return services.NewGatewayError(services.CodeAllTargetsCoolingDown, "Every target is cooling down; retry after "+strconv.Itoa(timerSecs())+" s.").WithRetryAfter(timerSecs())
		}
		return services.NewGatewayError(services.CodeNoExecutableTargets, "No connection can serve this request: add or enable a connection for its provider, or check the key's allowed connections.")
	}
	var le *traffic.LimitError
	if st.onlyLocal && errors.As(st.localErr, &le) {
		return &services.GatewayError{Status: le.HTTPStatus(), Code: le.Code, Message: le.Message, RetryAfter: le.RetryAfterSeconds()}
	}
	last, res := st.last, st.lastRes
	retryAfter := func() int {
		switch {
		case st.timerWait > 0:
			return ceilSeconds(st.timerWait)
		case last != nil && last.Hint > 0:
			return ceilSeconds(last.Hint)
		case last != nil && last.ClientRetryAfter > 0:
			return ceilSeconds(last.ClientRetryAfter)
		}
		return 1
	}
	msg := res.message
	if len(res.body) > 0 {
		if _, _, m := parseUpstreamError(res.body); m != "" {
			msg = m
		}
	}
	status := 0
	if last != nil {
		status = last.Status
	}
	switch {
	case last != nil && last.Reason == resilience.ReasonCallerError:
		code, _, _ := parseUpstreamError(res.body)
		if !upstreamCode.MatchString(code) {
			code = services.CodeInvalidRequest
		}
		return &services.GatewayError{Status: clampCaller(status), Code: code, Message: "The upstream rejected the request: " + msg}
	case res.watchdog:
		return services.NewGatewayError(services.CodeStreamThroughputTooLow, "The upstream stream was too slow and was stopped.")
	case status == 0 && res.timeout:
		return services.NewGatewayError(services.CodeUpstreamTimeout, "The upstream did not answer in time.")
	case status == 0:
		return services.NewGatewayError(services.CodeUpstreamError, "The upstream failed: "+msg)
	case status == 404 && last.Reason == resilience.ReasonNotFound:
		return services.NewGatewayError(services.CodeModelNotFound, "The upstream does not know this model: "+msg)
	case status == 429:
		return services.NewGatewayError(services.CodeUpstreamRateLimited, "The upstream rate-limited every connection tried (429): "+msg).WithRetryAfter(retryAfter())
	case status == 401 || status == 402 || status == 403 || status == 407:
		return services.NewGatewayError(services.CodeUpstreamError, "The upstream refused Switchyard's credentials ("+strconv.Itoa(status)+"): "+msg)
	case status == 504:
		return services.NewGatewayError(services.CodeUpstreamTimeout, "The upstream timed out (504).")
	case status >= 500:
		s := status
		if s == 529 || s > 599 {
			s = 503
		}
		e := &services.GatewayError{Status: s, Code: services.CodeUpstreamError, Message: "The upstream failed with " + strconv.Itoa(status) + ": " + msg}
		if s == 503 {
			e.RetryAfter = retryAfter()
		}
		return e
	}
	return services.NewGatewayError(services.CodeUpstreamError, "The upstream failed with "+strconv.Itoa(status)+": "+msg)
}

func clampCaller(status int) int {
	if status < 400 || status > 499 {
		return 400
	}
	return status
}

func ceilSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	if s > 3600 {
		s = 3600
	}
	return s
}

// onlyIncompatible reports that every exclusion was a target whose wire
// format cannot serve the request.
func onlyIncompatible(st *attemptState) bool {
	for _, e := range st.diag {
		if e.Detail != "incompatible" {
			return false
		}
	}
	return len(st.diag) > 0
}

// onlyToolLimits reports that every exclusion was a learned tool limit.
func onlyToolLimits(st *attemptState) bool {
	for _, e := range st.diag {
		if e.Reason != "tool_limit" {
			return false
		}
	}
	return len(st.diag) > 0
}

// earlyRetryMax is streamRecovery.earlyRetryMax (default 1).
func (g *Gateway) earlyRetryMax() int {
	if g.watchdogCfg == nil {
		return 1
	}
	_, n := g.watchdogCfg()
	return n
}

// leaseFenceError is a lease that changed while the request waited.
type leaseFenceError struct{ err error }

func (e *leaseFenceError) Error() string { return "lease fence changed before dispatch" }

func (e *leaseFenceError) gatewayError() *services.GatewayError {
	var le *leases.Error
	if errors.As(e.err, &le) {
		return le.GatewayError()
	}
	return services.NewGatewayError(leases.CodeFenceStale, "The lease changed while the request waited.")
}

// resetPass starts a new walk after a cooldown-aware wait: a fresh excluded
// set and exclusion list; the attempt budget and the log stay shared.
func (st *attemptState) resetPass() {
	st.excluded = map[string]bool{}
	st.skipModel = map[string]bool{}
	st.diag = nil
	st.timerWait, st.waitMin = 0, 0
	st.timers = map[string]bool{}
	st.noTimer = false
}

// waitDecision is the pure rule of 20-resilience §9: wait for the smallest
// waitable blocker (or the latest upstream hint) + 50 ms when it fits the
// cap, the count and the budget left.
func (g *Gateway) waitDecision(req *Request, st *attemptState, waits int, used *time.Duration) (time.Duration, bool) {
	if g.traffic == nil || g.traffic.Doc == nil {
		return 0, false
	}
	if st.waitMin <= 0 {
		// Connections this pass failed on are cooling now: look again.
		st.waitMin = g.waitableMin(g.reg.Snapshot(), req)
	}
	if st.waitMin <= 0 {
		return 0, false
	}
	if st.last != nil {
		switch st.last.Reason {
		case resilience.ReasonCallerError, resilience.ReasonClientAbort:
			return 0, false
		}
	}
	doc := g.traffic.Doc()
	var enabled bool
	var limit, budget time.Duration
	var count int
	if req.Route.Combo != nil {
		w := doc.ComboCooldownWait
		enabled, limit, count, budget = w.Enabled, time.Duration(w.MaxWaitMs)*time.Millisecond, w.MaxAttempts, time.Duration(w.BudgetMs)*time.Millisecond
	} else {
		w := doc.WaitForCooldown
		enabled, limit, count, budget = w.Enabled, time.Duration(w.MaxRetryWaitMs)*time.Millisecond, w.MaxRetries, time.Duration(w.BudgetMs)*time.Millisecond
	}
	d := st.waitMin
	if st.last != nil && st.last.Hint > d && resilience.Waitable(st.last.Reason) {
		d = st.last.Hint
	}
	d += 50 * time.Millisecond
	if !enabled || d > limit || waits >= count || d > budget-*used {
		return 0, false
	}
	*used += d
	return d, true
}

// waitOut sleeps on the injected clock, sending keepalives to a streaming
// client meanwhile; false when the client left.
func (g *Gateway) waitOut(ctx context.Context, out *clientWriter, req *Request, d time.Duration) bool {
	stop := make(chan struct{})
	if req.Stream {
		go func() {
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case now := <-t.C:
					out.keepalive(now, nil)
				}
			}
		}()
	}
	err := g.clock.Wait(ctx, d)
	close(stop)
	return err == nil && !out.gone()
}

// waitableMin scans the request's targets for the soonest-ending waitable
// blocker (an open breaker, a waitable cooldown or lockout) and reports 0
// when some connection is usable now or nothing waitable blocks.
func (g *Gateway) waitableMin(s *Snapshot, req *Request) time.Duration {
	var min time.Duration
	for _, t := range g.expand(s, req.Route, req) {
		if st := g.res.Breakers.Status(t.provider.ID); st.State == resilience.BreakerOpen {
			if d := time.Duration(st.RetryAfterMs) * time.Millisecond; d > 0 && (min == 0 || d < min) {
				min = d
			}
			continue
		}
		for _, c := range s.Connections(t.provider.ID) {
			if !c.Enabled || !req.Key.AllowsConnection(c.ID) || (t.connID != "" && c.ID != t.connID) {
				continue
			}
			b := g.res.ConnectionBlocker(t.provider.ID, c.ID, t.model)
			if b == nil {
				b = g.quotaBlocker(c, g.clock.Now())
			}
			if b == nil {
				return 0 // usable now: the failure was not a timer
			}
			if b.Waitable && b.RetryAfter > 0 && (min == 0 || b.RetryAfter < min) {
				min = b.RetryAfter
			}
		}
	}
	return min
}
