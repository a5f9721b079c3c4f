package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"switchyard/services"
	"switchyard/services/accounts"
)

// Settings are the knobs the proxy path reads per request.
type Settings struct {
	KeepaliveIdle     time.Duration // stream.keepaliveIdleMs (0 = off)
	WriteTimeout      time.Duration // stream.writeTimeoutMs, per write
	TargetTimeout     time.Duration // first useful byte (stream) / whole body (non-stream)
	StreamIdleTimeout time.Duration // upstream silence
	MaxAttempts       int           // routing.maxAttemptsPerRequest
	FallbackStrategy  string        // routing.fallbackStrategy (account level)
	StickyLimit       int           // routing.stickyRoundRobinLimit
	ProviderStrategy  map[string]ProviderStrategy
}

// ProviderStrategy overrides the account strategy of one provider.
type ProviderStrategy struct {
	FallbackStrategy string
	StickyLimit      int
}

// DefaultSettings are the documented defaults.
func DefaultSettings() Settings {
	return Settings{KeepaliveIdle: 2 * time.Second, WriteTimeout: 30 * time.Second, TargetTimeout: 120 * time.Second,
		StreamIdleTimeout: 120 * time.Second, MaxAttempts: 30, FallbackStrategy: "fill-first", StickyLimit: 3}
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
	logs     LogSink
	settings atomic.Pointer[Settings]
}

// New builds the gateway.
func New(clock services.Clock, reg *Registry, up *Upstream, sel *accounts.Selector, logs LogSink) *Gateway {
	g := &Gateway{clock: clock, reg: reg, up: up, sel: sel, logs: logs}
	s := DefaultSettings()
	g.settings.Store(&s)
	return g
}

// SetSettings replaces the settings (applies to requests that start later).
func (g *Gateway) SetSettings(s Settings) { g.settings.Store(&s) }

// Settings returns the current settings.
func (g *Gateway) Settings() Settings { return *g.settings.Load() }

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
}

// target is one (provider, model[, connection]) the request may go to.
type target struct {
	provider services.Provider
	model    string
	connID   string // "" = any connection of the provider
	id       string // combo entry id, "" for direct
}

// expand lists the targets of a route in order. Combo entries are walked in
// listed order, nested combos inline (cycle-safe, depth-limited); the
// combo strategies come with the combo engine.
func expand(s *Snapshot, r Route) []target {
	if r.Combo == nil {
		return []target{{provider: r.Provider, model: r.Model}}
	}
	var out []target
	var walk func(c *services.Combo, depth int, path map[string]bool)
	walk = func(c *services.Combo, depth int, path map[string]bool) {
		if depth > 3 || path[c.ID] {
			return
		}
		path[c.ID] = true
		defer delete(path, c.ID)
		for _, t := range c.Targets {
			if !t.IsEnabled() {
				continue
			}
			switch t.Kind {
			case services.KindCombo:
				if inner, ok := s.ComboByID(t.ComboID); ok && inner.Enabled {
					walk(inner, depth+1, path)
				}
			default:
				p, ok := s.Catalogue.Get(t.Provider)
				if !ok {
					continue
				}
				tg := target{provider: p, model: t.Model, id: t.ID}
				if t.ConnectionID != nil {
					tg.connID = *t.ConnectionID
				}
				out = append(out, tg)
			}
		}
	}
	walk(r.Combo, 1, map[string]bool{})
	return out
}

// attemptState is what one client request accumulates while routing.
type attemptState struct {
	attempts   int
	excluded   map[string]bool // connection ids failed in this request
	failedProv map[string]bool // providers with a failure in this request
	last       *failure
	timerWait  time.Duration // shortest cooldown among connections skipped for a timer
	anyConn    bool
	log        *LogRecord
}

// ServeChat routes an OpenAI chat completion and writes the response.
func (g *Gateway) ServeChat(w http.ResponseWriter, r *http.Request, req *Request) {
	set := g.settings.Load()
	snap := g.reg.Snapshot()
	rec := newLogRecord(req)
	st := &attemptState{excluded: map[string]bool{}, failedProv: map[string]bool{}, log: rec}
	out := newClientWriter(w, r, req, set)
	defer func() {
		rec.finish(g.clock.Now(), out)
		if g.logs != nil {
			g.logs.Record(rec)
		}
	}()
	if req.Route.Combo != nil {
		w.Header().Set("X-Switchyard-Combo", req.Route.Combo.Name)
		rec.ComboName = req.Route.Combo.Name
		rec.Strategy = req.Route.Combo.Strategy
	}
	targets := expand(snap, req.Route)
	for _, t := range targets {
		for {
			if st.attempts >= set.MaxAttempts {
				g.fail(out, st, &services.GatewayError{Status: 503, Code: "all_targets_cooling_down", RetryAfter: 1,
					Message: "The request used its attempt budget of " + strconv.Itoa(set.MaxAttempts) + " dispatches."})
				return
			}
			conn := g.pick(snap, t, req, st, set)
			if conn == nil {
				break
			}
			res := g.dispatch(r.Context(), out, snap, t, conn, req, st, set)
			switch res {
			case failNone, failClientGone, failCaller:
				return
			case failNextTarget:
				st.excluded[conn.ID] = true
			}
			if res == failNextTarget {
				break
			}
			st.excluded[conn.ID] = true
		}
	}
	if out.gone() {
		return
	}
	g.fail(out, st, finalError(st.last, st.attempts, st.timerWait, st.anyConn))
}

// pick chooses the next connection for a target, or nil when none is left.
func (g *Gateway) pick(s *Snapshot, t target, req *Request, st *attemptState, set *Settings) *services.Connection {
	now := g.clock.Now()
	var eligible []accounts.Candidate
	var byID map[string]*services.Connection
	for _, c := range s.Connections(t.provider.ID) {
		if t.connID != "" && c.ID != t.connID {
			continue
		}
		if !c.Enabled || c.State.TerminalStatus != "" || !req.Key.AllowsConnection(c.ID) {
			continue
		}
		st.anyConn = true
		if st.excluded[c.ID] {
			continue
		}
		if until := c.State.RateLimitedUntil; until != nil && until.After(now) && !c.DisableCooling {
			if d := until.Sub(now); st.timerWait == 0 || d < st.timerWait {
				st.timerWait = d
			}
			continue
		}
		if t.provider.Format != services.FormatOpenAI {
			continue // anthropic-format upstreams need the translator
		}
		rt := g.reg.Runtime(c.ID)
		eligible = append(eligible, accounts.Candidate{ID: c.ID, Priority: c.Priority, CreatedAt: c.CreatedAt,
			BackoffLevel: c.State.BackoffLevel, LastUsedAt: rt.LastUsed(), InFlight: rt.InFlight(), SuccessRate: rt.SuccessRate()})
		if byID == nil {
			byID = map[string]*services.Connection{}
		}
		byID[c.ID] = c
	}
	if len(eligible) == 0 {
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
	id := g.sel.Pick(t.provider.ID, strategy, sticky, eligible, st.failedProv[t.provider.ID])
	return byID[id]
}

// requestBody rebuilds the upstream body for a target: the client's fields
// with model replaced by the upstream model id.
func requestBody(req *Request, model string) ([]byte, error) {
	m := make(map[string]json.RawMessage, len(req.Body))
	for k, v := range req.Body {
		m[k] = v
	}
	mb, _ := json.Marshal(model)
	m["model"] = mb
	return json.Marshal(m)
}

// dispatch sends one upstream request and, on success, writes the response.
func (g *Gateway) dispatch(ctx context.Context, out *clientWriter, s *Snapshot, t target, c *services.Connection, req *Request, st *attemptState, set *Settings) failKind {
	body, err := requestBody(req, t.model)
	if err != nil {
		g.fail(out, st, &services.GatewayError{Status: 400, Code: "invalid_request", Message: "The request body could not be re-encoded."})
		return failCaller
	}
	st.attempts++
	start := g.clock.Now()
	rt := g.reg.Runtime(c.ID)
	rt.lastUsedMs.Store(start.UnixMilli())
	rt.inFlight.Add(1)
	defer rt.inFlight.Add(-1)
	at := st.log.startAttempt(t, c, start, req.Received)
	out.setDispatch(c.ID, t.provider.ID, t.model, st.attempts-1)

	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var f failure
	if req.Stream {
		f = g.relayStream(actx, cancel, out, t, c, body, set, st)
	} else {
		f = g.forwardJSON(actx, cancel, out, t, c, body, set, st)
	}
	at.finish(g.clock.Now(), f)
	switch f.kind {
	case failNone:
		rt.successes.Add(1)
		st.log.served(t, c, st.attempts)
		return failNone
	case failClientGone:
		return failClientGone
	case failCaller:
		st.last = &f
		code := "invalid_request"
		if f.code != "" {
			code = f.code
		}
		status := f.status
		msg := "The upstream rejected the request"
		if f.message != "" {
			msg += ": " + f.message
		}
		g.fail(out, st, &services.GatewayError{Status: status, Code: code, Message: msg})
		return failCaller
	}
	rt.failures.Add(1)
	st.last = &f
	st.failedProv[t.provider.ID] = true
	if out.committedUseful() {
		// Nothing is replayed after the first useful byte: end in band.
		out.streamError(finalError(&f, st.attempts, 0, true))
		st.log.Outcome, st.log.Status, st.log.ErrorCode = "upstream_error", 200, finalError(&f, 0, 0, true).Code
		return failClientGone
	}
	return f.kind
}

// forwardJSON handles a non-stream dispatch: the whole body within the
// target timeout, validated as JSON before anything reaches the client.
func (g *Gateway) forwardJSON(ctx context.Context, cancel context.CancelCauseFunc, out *clientWriter, t target, c *services.Connection, body []byte, set *Settings, st *attemptState) failure {
	timer := time.AfterFunc(set.TargetTimeout, func() { cancel(errTargetTimeout) })
	defer timer.Stop()
	resp, err := g.send(ctx, t, c, body, false)
	if err != nil {
		return g.transportFailure(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return classifyStatus(resp.StatusCode, resp.Header, b, g.clock.Now())
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return g.transportFailure(ctx, err)
	}
	var probe struct {
		Choices json.RawMessage `json:"choices"`
		Usage   *usage          `json:"usage"`
	}
	if json.Unmarshal(b, &probe) != nil || len(probe.Choices) == 0 {
		return failure{kind: failRetryConn, status: resp.StatusCode, reason: "malformed", message: "malformed or empty response body"}
	}
	st.log.addUsage(probe.Usage)
	if !out.writeJSON(body200(b)) {
		return failure{kind: failClientGone}
	}
	return failure{}
}

func body200(b []byte) []byte { return b }

var errTargetTimeout = errors.New("target timeout")
var errStreamIdle = errors.New("upstream stream idle")

// send performs the HTTP exchange up to the response headers.
func (g *Gateway) send(ctx context.Context, t target, c *services.Connection, body []byte, stream bool) (*http.Response, error) {
	cl, err := g.up.client(c)
	if err != nil {
		return nil, err
	}
	hreq, err := g.up.newRequest(ctx, t.provider, c, "/chat/completions", body, stream)
	if err != nil {
		return nil, err
	}
	return cl.Do(hreq)
}

// transportFailure classifies a failed exchange: the client leaving, our
// own timeouts, or a transport error.
func (g *Gateway) transportFailure(ctx context.Context, err error) failure {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errTargetTimeout) || errors.Is(cause, errStreamIdle):
		return failure{kind: failRetryConn, reason: "timeout", message: "no answer within the timeout"}
	case ctx.Err() != nil:
		return failure{kind: failClientGone}
	case errors.Is(err, ErrEgressRefused):
		return failure{kind: failRetryConn, reason: "transport", message: ErrEgressRefused.Error()}
	}
	return failure{kind: failRetryConn, reason: "transport", message: "connection to the upstream failed"}
}

// fail writes the final error: an HTTP error before commit, an in-band
// error frame after a keepalive commit.
func (g *Gateway) fail(out *clientWriter, st *attemptState, e *services.GatewayError) {
	st.log.Status, st.log.ErrorCode = e.Status, e.Code
	switch {
	case e.Status >= 500 || e.Code == "upstream_rate_limited":
		st.log.Outcome = "upstream_error"
	default:
		st.log.Outcome = "client_error"
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
