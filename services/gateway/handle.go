package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"switchyard/services"
	"switchyard/services/affinity"
	"switchyard/services/leases"
	"switchyard/services/traffic"
)

// The entry of a /v1 inference request: after the handler has
// authenticated the key, everything of 10-gateway-api §2 from step 5 on —
// the key's own limits, the body (read through the handler), parsing,
// model resolution, the lease rules — then routing and the request log.

// Endpoint is one inference endpoint: its path, the client's format and
// its request parser.
type Endpoint struct {
	Path    string
	Inbound string
	parse   func([]byte, Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError)
}

// The inference endpoints of 10-gateway-api §5.
var (
	EndpointChat       = Endpoint{"/v1/chat/completions", InboundChat, ParseChat}
	EndpointMessages   = Endpoint{"/v1/messages", InboundMessages, ParseMessages}
	EndpointResponses  = Endpoint{"/v1/responses", InboundResponses, ParseResponses}
	EndpointEmbeddings = Endpoint{"/v1/embeddings", InboundEmbeddings, ParseEmbeddings}
)

// Call is one inference request as the /v1 handler hands it over: the
// authenticated key, the endpoint, and how to read the body. The handler
// owns the HTTP envelope (media type, size limit, read deadline); the
// gateway decides everything else.
type Call struct {
	// ID is the request id; ClientRequestID the client's X-Request-Id
	// when it is acceptable, else "".
	ID              string
	ClientRequestID string
	Key             services.APIKey
	Endpoint        Endpoint
	// Received starts the latency clock.
	Received time.Time
	// ReadBody checks the media type and reads the body of r under
	// maxBytes (w is the response Handle was given), refusing with a
	// *services.GatewayError (415, 413, 400). It is called after the key's
	// limits admitted the request, never before (10-gateway-api §2).
	ReadBody func(w http.ResponseWriter, r *http.Request, maxBytes int64) ([]byte, error)
}

// Handle serves one inference request. A request refused before routing
// (the key's limits, the body, parsing, resolution, leases) is logged, gets
// X-Switchyard-Error-Code, and comes back as the error for the caller's
// error handler to write; once routing starts Handle writes the answer
// itself and returns nil.
//
// Its frame stays small on purpose: a streaming request waits below it for
// the whole stream, and every frame between net/http and the upstream read
// counts towards the goroutine's stack (docs/PERFORMANCE.md, idle
// streams). The checks with their large locals run in accept, whose frame
// is gone by the time Serve runs.
func (g *Gateway) Handle(w http.ResponseWriter, r *http.Request, call *Call) error {
	if g.tracer != nil {
		return g.handleTraced(w, r, call)
	}
	req, grant, err := g.accept(w, r, call)
	if err != nil {
		return err
	}
	defer g.keyLimits.Release(grant)
	g.Serve(w, r, req)
	return nil
}

// accept runs steps 5 to 10 of 10-gateway-api §2 and returns the routable
// request with the key's grant; a refusal is logged here.
//
//go:noinline
func (g *Gateway) accept(w http.ResponseWriter, r *http.Request, call *Call) (*Request, traffic.KeyGrant, error) {
	model, stream := "", false
	req, grant, err := g.admitCall(w, r, call, &model, &stream)
	if err != nil {
		var gerr *services.GatewayError
		if errors.As(err, &gerr) {
			w.Header().Set("X-Switchyard-Error-Code", gerr.Code)
			g.LogRejected(call.ID, call.ClientRequestID, call.Key, call.Endpoint.Path, model, stream, call.Received, gerr)
		}
		return nil, traffic.KeyGrant{}, err
	}
	return req, grant, nil
}

// admitCall applies the key's limits, reads, parses and resolves the
// request and applies the lease rules. model and stream are set as soon as
// the body is parsed, for the log of a later refusal.
func (g *Gateway) admitCall(w http.ResponseWriter, r *http.Request, call *Call, model *string, stream *bool) (_ *Request, grant traffic.KeyGrant, err error) {
	k := call.Key
	grant, err = g.keyLimits.Admit(r.Context(), k.ID, traffic.KeyLimitOf(k))
	if err != nil {
		return nil, grant, keyRefusal(err)
	}
	defer func() {
		if err != nil {
			g.keyLimits.Release(grant)
		}
	}()
	g.keyUse.Touch(r.Context(), k)
	lim := g.limits()
	body, err := call.ReadBody(w, r, lim.MaxBodyBytes)
	if err != nil {
		return nil, grant, err
	}
	top, m, st, gerr := call.Endpoint.parse(body, lim)
	if gerr != nil {
		return nil, grant, gerr
	}
	*model, *stream = m, st
	route, gerr := Resolve(g.reg.Snapshot(), k, m)
	if gerr != nil {
		return nil, grant, gerr
	}
	lt := leases.Target{Provider: route.Provider.ID, Model: route.Model, Combo: route.Combo != nil}
	bind, err := g.traffic.Leases.Bind(r.Context(), k, r.Header, lt, g)
	if err != nil {
		return nil, grant, leaseError(err)
	}
	return newRequest(r, call, top, m, st, route, bind), grant, nil
}

// newRequest builds the routable request of an admitted call.
func newRequest(r *http.Request, call *Call, top map[string]json.RawMessage, model string, stream bool, route Route, bind leases.Binding) *Request {
	inbound := call.Endpoint.Inbound
	req := &Request{ID: call.ID, ClientRequestID: call.ClientRequestID, Key: call.Key, Endpoint: call.Endpoint.Path,
		Body: top, Model: model, Stream: stream, Route: route, Received: call.Received, Header: r.Header,
		LeaseConnID: bind.ConnectionID, LeaseOwner: bind.Owner, LeaseGen: bind.Generation,
		Inbound: inbound, ToolCount: CountTools(top)}
	if inbound == InboundMessages {
		req.AnthropicBeta = r.Header.Get("anthropic-beta")
		req.MidSystem = HasSystemEntries(top["messages"])
	}
	if inbound == InboundResponses {
		var bg bool
		if v, ok := top["background"]; ok && json.Unmarshal(v, &bg) == nil && bg {
			// Background mode is served synchronously (20-resilience §13.1).
			req.Warnings = append(req.Warnings, "background_mode_degraded")
		}
	}
	if key, _, ok := affinity.SessionKey(r.Header, top); ok {
		req.SessionKey = key
	}
	return req
}

// keyRefusal is the answer to a request its key's own limits refused:
// 429 rate_limit_exceeded with Retry-After (10-gateway-api §3.4).
func keyRefusal(err error) error {
	var kr *traffic.KeyRefusal
	if !errors.As(err, &kr) {
		return err
	}
	return services.NewGatewayError(services.CodeRateLimitExceeded, kr.Error()).WithRetryAfter(kr.RetryAfterSeconds())
}

// leaseError converts a lease refusal into the /v1 error shape.
func leaseError(err error) error {
	var le *leases.Error
	if errors.As(err, &le) {
		return le.GatewayError()
	}
	return err
}

// Serve routes a request already admitted and parsed (Handle's second
// half; also the executors' and tests' entry) and records its log.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, req *Request) {
	var rec *LogRecord
	if c := req.Route.Combo; c != nil && (c.Strategy == "fusion" || c.Strategy == "pipeline") {
		rec = g.serveOwnExecutor(w, r, req)
	} else {
		rec = g.serve(w, r, req)
	}
	if g.tracer != nil {
		traceServed(r.Context(), rec)
	}
	g.logs.Record(rec)
}
