package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"switchyard/services"
	"switchyard/services/affinity"
	"switchyard/services/gateway"
	"switchyard/services/leases"
)

// V1 is the client-facing API: key auth, per-key limits, body limits, then
// the gateway. The body is never read before the key is checked.
type V1 struct {
	Keys    *services.Keys
	Gateway *gateway.Gateway
	Clock   services.Clock
	Limits  func() gateway.Limits
	// Leases owns exclusive session leases (nil = leases unavailable).
	Leases *leases.Leases
	// LeaseCandidates lists the key's connections of a provider that could
	// serve model now (lease acquire).
	LeaseCandidates func(key services.APIKey, provider, model string) []string
	// LeaseBlocked reports a bound connection that cannot serve model now.
	LeaseBlocked func(connID, provider, model string) bool

	rpm  sync.Map // key id → *rate.Limiter
	conc sync.Map // key id → *atomic.Int64
}

// gwErr is the /v1 error of code; its status follows from the code.
func gwErr(code, msg string) *services.GatewayError { return services.NewGatewayError(code, msg) }

// authenticate reads the key from Authorization: Bearer, else x-api-key.
// Keys in the query string are refused whatever the headers say.
func (h *V1) authenticate(c echo.Context) (services.APIKey, error) {
	r := c.Request()
	if r.URL.RawQuery != "" { // parsed only when present: most requests carry none
		q := r.URL.Query()
		for _, name := range []string{"key", "api_key", "apikey", "access_token"} {
			if q.Has(name) {
				return services.APIKey{}, gwErr(services.CodeInvalidAPIKey, "Send the API key in the Authorization header, never in the URL.")
			}
		}
	}
	secret := ""
	if a := r.Header.Get("Authorization"); a != "" {
		if scheme, token, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") {
			secret = strings.TrimSpace(token)
		}
	}
	if secret == "" {
		secret = strings.TrimSpace(r.Header.Get("x-api-key"))
	}
	k, err := h.Keys.Authenticate(secret)
	if err != nil {
		var kerr *services.KeyAuthError
		msg := "Invalid API key."
		if errors.As(err, &kerr) {
			msg = kerr.Error()
		}
		return services.APIKey{}, gwErr(services.CodeInvalidAPIKey, msg)
	}
	if c.Get("sy.lease-endpoint") == true {
		return k, nil
	}
	if !k.HasScope(services.ScopeInference) {
		return services.APIKey{}, gwErr(services.CodeInsufficientScope, "This API key lacks the inference scope.")
	}
	return k, nil
}

// admit applies the key's requests-per-minute and concurrency limits; the
// returned release must be called when the request ends.
func (h *V1) admit(k services.APIKey) (func(), error) {
	if k.RequestsPerMinute != nil && *k.RequestsPerMinute > 0 {
		rpm := *k.RequestsPerMinute
		v, _ := h.rpm.LoadOrStore(k.ID+"/"+strconv.Itoa(rpm), rate.NewLimiter(rate.Limit(float64(rpm)/60), rpm))
		lim := v.(*rate.Limiter)
		now := h.Clock.Now()
		res := lim.ReserveN(now, 1)
		if d := res.DelayFrom(now); d > 0 {
			res.CancelAt(now)
			e := gwErr(services.CodeRateLimitExceeded, fmt.Sprintf("This API key is limited to %d requests per minute.", rpm))
			e.RetryAfter = int(math.Ceil(d.Seconds()))
			return nil, e
		}
	}
	if k.MaxConcurrentRequests != nil && *k.MaxConcurrentRequests > 0 {
		v, _ := h.conc.LoadOrStore(k.ID, new(atomic.Int64))
		n := v.(*atomic.Int64)
		if n.Add(1) > int64(*k.MaxConcurrentRequests) {
			n.Add(-1)
			e := gwErr(services.CodeRateLimitExceeded, fmt.Sprintf("This API key may have at most %d requests in flight.", *k.MaxConcurrentRequests))
			e.RetryAfter = 1
			return nil, e
		}
		return func() { n.Add(-1) }, nil
	}
	return func() {}, nil
}

// readBody checks the media type and reads the body under the size limit.
func (h *V1) readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		return nil, gwErr(services.CodeUnsupportedMediaType, "Send the body as Content-Type: application/json.")
	}
	lim := h.Limits()
	if r.ContentLength > lim.MaxBodyBytes {
		return nil, gwErr(services.CodeRequestTooLarge, fmt.Sprintf("The body is larger than %d bytes.", lim.MaxBodyBytes))
	}
	// The read is bounded by the server's body deadline (app: first byte,
	// minimum rate, total), which also closes a connection that sends too slowly.
	b, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, lim.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, gwErr(services.CodeRequestTooLarge, fmt.Sprintf("The body is larger than %d bytes.", lim.MaxBodyBytes))
		}
		return nil, gwErr(services.CodeInvalidRequest, "The body could not be read.")
	}
	return b, nil
}

// inferenceSpec describes one inference endpoint.
type inferenceSpec struct {
	endpoint string
	inbound  string
	parse    func([]byte, gateway.Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError)
}

var (
	chatSpec       = inferenceSpec{"/v1/chat/completions", gateway.InboundChat, gateway.ParseChat}
	messagesSpec   = inferenceSpec{"/v1/messages", gateway.InboundMessages, gateway.ParseMessages}
	responsesSpec  = inferenceSpec{"/v1/responses", gateway.InboundResponses, gateway.ParseResponses}
	embeddingsSpec = inferenceSpec{"/v1/embeddings", gateway.InboundEmbeddings, gateway.ParseEmbeddings}
	countSpec      = inferenceSpec{"/v1/messages/count_tokens", gateway.InboundMessages, gateway.ParseCountTokens}
)

// ChatCompletions serves POST /v1/chat/completions (and /chat/completions).
func (h *V1) ChatCompletions(c echo.Context) error { return h.serve(c, chatSpec) }

// Messages serves POST /v1/messages (and /messages) in the Anthropic format.
func (h *V1) Messages(c echo.Context) error { return h.serve(c, messagesSpec) }

// Responses serves POST /v1/responses (and /responses), translated to chat
// for upstreams without the Responses API.
func (h *V1) Responses(c echo.Context) error { return h.serve(c, responsesSpec) }

// Embeddings serves POST /v1/embeddings (and /embeddings), OpenAI-format upstreams only.
func (h *V1) Embeddings(c echo.Context) error { return h.serve(c, embeddingsSpec) }

// serve runs the order of processing of 10-gateway-api §2. Requests refused
// before routing are logged too.
//
// Its frame stays small on purpose: a streaming request's goroutine waits
// below it for the whole stream, and every frame between net/http and the
// upstream read counts towards the goroutine's stack (16 KiB instead of
// 32 KiB per open stream). The checks with their large locals run in
// prepare, whose frame is gone by the time Serve runs.
func (h *V1) serve(c echo.Context, spec inferenceSpec) error {
	received := h.Clock.Now()
	c.Response().Header().Set("X-Switchyard-Request-Id", RequestID(c))
	if spec.inbound == gateway.InboundMessages {
		c.Response().Header().Set("request-id", RequestID(c))
	}
	req, release, err := h.prepare(c, spec, received)
	if err != nil {
		return err
	}
	defer release()
	h.Gateway.Serve(c.Response(), c.Request(), req)
	return nil
}

// prepare authenticates, admits, reads, parses and resolves the request and
// returns it with the release of the key's concurrency slot. A refused
// request is logged here.
//
//go:noinline
func (h *V1) prepare(c echo.Context, spec inferenceSpec, received time.Time) (*gateway.Request, func(), error) {
	var key services.APIKey
	model, stream := "", false
	req, release, err := h.inference(c, spec, received, &key, &model, &stream)
	if err != nil {
		var gerr *services.GatewayError
		if errors.As(err, &gerr) {
			c.Response().Header().Set("X-Switchyard-Error-Code", gerr.Code)
			h.Gateway.LogRejected(RequestID(c), clientRequestID(c.Request()), key, spec.endpoint, model, stream, received, gerr)
		}
		return nil, nil, err
	}
	return req, release, nil
}

func (h *V1) inference(c echo.Context, spec inferenceSpec, received time.Time, key *services.APIKey, model *string, stream *bool) (_ *gateway.Request, _ func(), err error) {
	k, err := h.authenticate(c)
	if err != nil {
		return nil, nil, err
	}
	*key = k
	release, err := h.admit(k)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	h.Keys.Touch(c.Request().Context(), k)
	body, err := h.readBody(c)
	if err != nil {
		return nil, nil, err
	}
	top, m, st, gerr := spec.parse(body, h.Limits())
	if gerr != nil {
		return nil, nil, gerr
	}
	*model, *stream = m, st
	route, gerr := gateway.Resolve(h.Gateway.Registry().Snapshot(), k, m)
	if gerr != nil {
		return nil, nil, gerr
	}
	leaseConn, leaseOwner, leaseGen, err := h.leaseContext(c, k, route)
	if err != nil {
		return nil, nil, err
	}
	req := &gateway.Request{ID: RequestID(c), ClientRequestID: clientRequestID(c.Request()), Key: k, Endpoint: spec.endpoint,
		Body: top, Model: m, Stream: st, Route: route, Received: received, Header: c.Request().Header, LeaseConnID: leaseConn, LeaseOwner: leaseOwner, LeaseGen: leaseGen,
		Inbound: spec.inbound, ToolCount: gateway.CountTools(top)}
	if spec.inbound == gateway.InboundMessages {
		req.AnthropicBeta = c.Request().Header.Get("anthropic-beta")
		req.MidSystem = gateway.HasSystemEntries(top["messages"])
	}
	if spec.inbound == gateway.InboundResponses {
		var bg bool
		if v, ok := top["background"]; ok && json.Unmarshal(v, &bg) == nil && bg {
			// Background mode is served synchronously (20-resilience §13.1).
			req.Warnings = append(req.Warnings, "background_mode_degraded")
		}
	}
	if key, _, ok := affinity.SessionKey(c.Request().Header, top); ok {
		req.SessionKey = key
	}
	return req, release, nil
}

// leaseContext applies the lease rules of an inference request (20-resilience
// §6): a lease-managed key must present a live lease and is bound to its
// connection; lease headers from any other key are refused.
func (h *V1) leaseContext(c echo.Context, k services.APIKey, route gateway.Route) (string, string, int64, error) {
	hd := c.Request().Header
	hasHeaders := hd.Get(leases.OwnerHeader) != "" || hd.Get(leases.GenerationHeader) != ""
	if !k.HasScope(services.ScopeLeaseExclusive) {
		if hasHeaders {
			return "", "", 0, leaseErr(leases.CheckKey(k))
		}
		return "", "", 0, nil
	}
	if err := leases.CheckKey(k); err != nil {
		return "", "", 0, leaseErr(err)
	}
	if h.Leases == nil {
		return "", "", 0, gwErr(services.CodeInternalError, "Leases are not available.")
	}
	owner, err := leases.ParseOwner(hd.Get(leases.OwnerHeader))
	if err != nil {
		return "", "", 0, leaseErr(err)
	}
	gen, err := leases.ParseGeneration(hd.Get(leases.GenerationHeader))
	if err != nil {
		return "", "", 0, leaseErr(err)
	}
	if route.Combo != nil {
		return "", "", 0, gwErr(leases.CodeUnsupportedRoute, "A lease-managed key must name a provider/model, not a combo.")
	}
	l, err := h.Leases.Check(c.Request().Context(), k, owner, gen)
	if err != nil {
		return "", "", 0, leaseErr(err)
	}
	if l.Provider != route.Provider.ID {
		return "", "", 0, gwErr(leases.CodeConnectionMismatch, "The leased connection belongs to another provider than the requested model.")
	}
	// A binding that cannot serve now moves, in one transaction, to a free
	// eligible allowed connection with the same generation (20-resilience §6).
	if h.LeaseBlocked != nil && h.LeaseBlocked(l.ConnectionID, route.Provider.ID, route.Model) {
		if cands := h.LeaseCandidates(k, route.Provider.ID, route.Model); len(cands) > 0 {
			nl, err := h.Leases.Transition(c.Request().Context(), k, owner, gen, route.Provider.ID, cands, leases.ReasonHealthOrCooldown)
			switch {
			case err == nil:
				l = nl
			default:
				var le *leases.Error
				if errors.As(err, &le) && le.Code == leases.CodeCapacityUnavailable {
					return "", "", 0, leaseErr(err)
				}
			}
		}
	}
	return l.ConnectionID, owner, gen, nil
}

// leaseErr converts a lease error into the gateway error shape.
func leaseErr(err error) error {
	var le *leases.Error
	if errors.As(err, &le) {
		return le.GatewayError()
	}
	return err
}

// clientRequestID keeps a client's X-Request-Id when it is ≤ 128 printable ASCII.
func clientRequestID(r *http.Request) string {
	v := r.Header.Get("X-Request-Id")
	if len(v) > 128 {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return ""
		}
	}
	return v
}

// Models serves GET /v1/models in the OpenAI shape, or the Anthropic shape
// when the request carries anthropic-version.
func (h *V1) Models(c echo.Context) error {
	c.Response().Header().Set("X-Switchyard-Request-Id", RequestID(c))
	k, err := h.authenticate(c)
	if err != nil {
		return err
	}
	entries := gateway.ListModels(h.Gateway.Registry().Snapshot(), k)
	return h.writeModels(c, entries)
}

// Model serves GET /v1/models/{id}; the id may contain '/'.
func (h *V1) Model(c echo.Context) error {
	c.Response().Header().Set("X-Switchyard-Request-Id", RequestID(c))
	k, err := h.authenticate(c)
	if err != nil {
		return err
	}
	// {id} is path-decoded: the SDKs send provider%2Fmodel (10-gateway-api §5.5).
	id, err := url.PathUnescape(c.Param("*"))
	if err != nil {
		id = c.Param("*")
	}
	for _, e := range gateway.ListModels(h.Gateway.Registry().Snapshot(), k) {
		if e.ID == id {
			if c.Request().Header.Get("anthropic-version") != "" {
				return c.JSON(200, map[string]any{"type": "model", "id": e.ID, "display_name": e.ID, "created_at": e.CreatedRFC3339()})
			}
			return c.JSON(200, map[string]any{"id": e.ID, "object": "model", "created": e.Created, "owned_by": e.OwnedBy})
		}
	}
	return gwErr(services.CodeModelNotFound, fmt.Sprintf("Unknown model %q.", id))
}

func (h *V1) writeModels(c echo.Context, entries []gateway.ModelEntry) error {
	if c.Request().Header.Get("anthropic-version") != "" {
		data := make([]map[string]any, len(entries))
		for i, e := range entries {
			data[i] = map[string]any{"type": "model", "id": e.ID, "display_name": e.ID, "created_at": e.CreatedRFC3339()}
		}
		var first, last any
		if len(entries) > 0 {
			first, last = entries[0].ID, entries[len(entries)-1].ID
		}
		return c.JSON(200, map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
	}
	data := make([]map[string]any, len(entries))
	for i, e := range entries {
		data[i] = map[string]any{"id": e.ID, "object": "model", "created": e.Created, "owned_by": e.OwnedBy}
	}
	return c.JSON(200, map[string]any{"object": "list", "data": data})
}

// v1Methods are the known /v1 paths and the method each serves, for the
// 405 of 10-gateway-api §1.
var v1Methods = map[string]string{
	"/v1/chat/completions": http.MethodPost, "/v1/messages": http.MethodPost, "/v1/messages/count_tokens": http.MethodPost,
	"/v1/responses": http.MethodPost, "/v1/embeddings": http.MethodPost, "/v1/session-leases": http.MethodPost,
	"/v1/models": http.MethodGet,
}

// NotFound answers unknown /v1 paths, hinting at a doubled prefix, and a
// known path with another method with 405 and Allow.
func (h *V1) NotFound(c echo.Context) error {
	c.Response().Header().Set("X-Switchyard-Request-Id", RequestID(c))
	p := c.Request().URL.Path
	allow, known := v1Methods[p]
	if !known && strings.HasPrefix(p, "/v1/models/") {
		allow, known = http.MethodGet, true
	}
	if known {
		c.Response().Header().Set("Allow", allow)
		return gwErr(services.CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; use %s.", c.Request().Method, p, allow))
	}
	msg := fmt.Sprintf("Unknown endpoint %s.", p)
	if rest, ok := strings.CutPrefix(p, "/v1/v1/"); ok {
		msg += " Did you mean /v1/" + rest + "?"
	}
	return gwErr(services.CodeEndpointNotFound, msg)
}

// CountTokens serves POST /v1/messages/count_tokens (10-gateway-api §5.2):
// auth, key policy and model resolution as /v1/messages, then the first
// eligible target counts (gateway.CountTokens). It is metadata: the key's
// rate and concurrency limits, slots and queues do not apply, and no
// resilience state is touched. It is logged like any /v1 POST.
func (h *V1) CountTokens(c echo.Context) error {
	received := h.Clock.Now()
	rid := RequestID(c)
	c.Response().Header().Set("X-Switchyard-Request-Id", rid)
	c.Response().Header().Set("request-id", rid)
	var key services.APIKey
	model := ""
	fail := func(gerr *services.GatewayError) error {
		c.Response().Header().Set("X-Switchyard-Error-Code", gerr.Code)
		h.Gateway.LogRejected(rid, clientRequestID(c.Request()), key, countSpec.endpoint, model, false, received, gerr)
		return gerr
	}
	k, err := h.authenticate(c)
	if err != nil {
		var gerr *services.GatewayError
		if errors.As(err, &gerr) {
			return fail(gerr)
		}
		return err
	}
	key = k
	body, err := h.readBody(c)
	if err != nil {
		var gerr *services.GatewayError
		if errors.As(err, &gerr) {
			return fail(gerr)
		}
		return err
	}
	top, m, _, gerr := countSpec.parse(body, h.Limits())
	if gerr != nil {
		return fail(gerr)
	}
	model = m
	route, gerr := gateway.Resolve(h.Gateway.Registry().Snapshot(), k, m)
	if gerr != nil {
		return fail(gerr)
	}
	req := &gateway.Request{ID: rid, ClientRequestID: clientRequestID(c.Request()), Key: k, Endpoint: countSpec.endpoint,
		Body: top, Model: m, Route: route, Received: received, Header: c.Request().Header, Inbound: gateway.InboundMessages,
		AnthropicBeta: c.Request().Header.Get("anthropic-beta")}
	res := h.Gateway.CountTokens(c.Request().Context(), req)
	if res.Estimated {
		c.Response().Header().Set("X-Switchyard-Warning", gateway.WarnTokenCountEstimated)
	}
	h.Gateway.LogCount(req, res)
	return c.JSON(http.StatusOK, map[string]int{"input_tokens": res.InputTokens})
}
