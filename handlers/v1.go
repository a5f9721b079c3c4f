package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/leases"
)

// V1 is the client-facing API: it authenticates the key and owns the HTTP
// envelope (media type, body size, read deadline); the gateway decides
// everything else — the key's limits, parsing, resolution, leases,
// routing. The body is never read before the key is checked.
type V1 struct {
	Keys    *services.Keys
	Gateway *gateway.Gateway
	Clock   services.Clock
	// Leases owns exclusive session leases (nil = leases unavailable).
	Leases *leases.Leases
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

// ChatCompletions serves POST /v1/chat/completions (and /chat/completions).
func (h *V1) ChatCompletions(c echo.Context) error { return h.serve(c, gateway.EndpointChat) }

// Messages serves POST /v1/messages (and /messages) in the Anthropic format.
func (h *V1) Messages(c echo.Context) error { return h.serve(c, gateway.EndpointMessages) }

// Responses serves POST /v1/responses (and /responses), translated to chat
// for upstreams without the Responses API.
func (h *V1) Responses(c echo.Context) error { return h.serve(c, gateway.EndpointResponses) }

// Embeddings serves POST /v1/embeddings (and /embeddings), OpenAI-format upstreams only.
func (h *V1) Embeddings(c echo.Context) error { return h.serve(c, gateway.EndpointEmbeddings) }

// serve runs the order of processing of 10-gateway-api §2: the request id,
// authentication and scope here, then one call into the gateway. A request
// refused at authentication is logged here, every later refusal by the
// gateway.
//
// Its frame stays small on purpose: a streaming request's goroutine waits
// below it for the whole stream, and every frame between net/http and the
// upstream read counts towards the goroutine's stack (16 KiB instead of
// 32 KiB per open stream). Authentication, with its locals, runs in
// prepare, whose frame is gone by the time the gateway serves.
func (h *V1) serve(c echo.Context, ep gateway.Endpoint) error {
	var call gateway.Call
	if err := h.prepare(c, ep, &call); err != nil {
		return err
	}
	return h.Gateway.Handle(c.Response(), c.Request(), &call)
}

// prepare sets the request-id headers, authenticates the key and fills in
// the gateway call; a refused key is logged here.
//
//go:noinline
func (h *V1) prepare(c echo.Context, ep gateway.Endpoint, call *gateway.Call) error {
	received := h.Clock.Now()
	id := RequestID(c)
	c.Response().Header().Set("X-Switchyard-Request-Id", id)
	if ep.Inbound == gateway.InboundMessages {
		c.Response().Header().Set("request-id", id)
	}
	k, err := h.authenticate(c)
	if err != nil {
		var gerr *services.GatewayError
		if errors.As(err, &gerr) {
			c.Response().Header().Set("X-Switchyard-Error-Code", gerr.Code)
			h.Gateway.LogRejected(id, clientRequestID(c.Request()), services.APIKey{}, ep.Path, "", false, received, gerr)
		}
		return err
	}
	*call = gateway.Call{ID: id, ClientRequestID: clientRequestID(c.Request()), Key: k, Endpoint: ep, Received: received, ReadBody: gatewayBody}
	return nil
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
	"/v1/chat/completions": http.MethodPost, "/v1/messages": http.MethodPost, countTokensPath: http.MethodPost,
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

// countTokensPath is the token-count endpoint of 10-gateway-api §5.2.
const countTokensPath = "/v1/messages/count_tokens"

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
		h.Gateway.LogRejected(rid, clientRequestID(c.Request()), key, countTokensPath, model, false, received, gerr)
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
	lim := h.Gateway.Limits()
	body, p := readJSONBody(c.Response(), c.Request(), lim.MaxBodyBytes)
	if p != bodyOK {
		return fail(p.gatewayError(lim.MaxBodyBytes))
	}
	top, m, _, gerr := gateway.ParseCountTokens(body, lim)
	if gerr != nil {
		return fail(gerr)
	}
	model = m
	route, gerr := gateway.Resolve(h.Gateway.Registry().Snapshot(), k, m)
	if gerr != nil {
		return fail(gerr)
	}
	req := &gateway.Request{ID: rid, ClientRequestID: clientRequestID(c.Request()), Key: k, Endpoint: countTokensPath,
		Body: top, Model: m, Route: route, Received: received, Header: c.Request().Header, Inbound: gateway.InboundMessages,
		AnthropicBeta: c.Request().Header.Get("anthropic-beta")}
	res := h.Gateway.CountTokens(c.Request().Context(), req)
	if res.Estimated {
		c.Response().Header().Set("X-Switchyard-Warning", gateway.WarnTokenCountEstimated)
	}
	h.Gateway.LogCount(req, res)
	return c.JSON(http.StatusOK, map[string]int{"input_tokens": res.InputTokens})
}
