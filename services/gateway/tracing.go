package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"switchyard/services"
	"switchyard/services/traffic"
)

// OpenTelemetry traces of /v1 requests (Deps.Tracing; off when nil):
//
//   - one server span per inference request, "{operation} {model}" after
//     the GenAI semantic conventions, child of the client's W3C
//     traceparent when it sent one;
//   - under it a client span per upstream attempt, "{operation} {upstream
//     model}", ended once the attempt's failure is classified so its
//     outcome is the reason the request log shows;
//   - a span per wait: the cooldown-aware wait under the request span,
//     slot and request-queue waits under the attempt that waited.
//
// Attributes are the GenAI conventions' (operation, provider, models,
// token usage) and switchyard.* for what they have no name for. Nothing
// from the body, no header and no key goes into a span: prompt and
// completion text are never read here, and upstream error details (which
// may echo the prompt) are left out too.
//
// With tracing off the request path pays a nil check at each hook and
// nothing else: no allocation, no context value.

// Attribute names (OpenTelemetry GenAI semantic conventions, then ours).
const (
	attrOperation    = "gen_ai.operation.name"
	attrProvider     = "gen_ai.provider.name"
	attrSystem       = "gen_ai.system" // the older name of gen_ai.provider.name, for backends on earlier conventions
	attrRequestModel = "gen_ai.request.model"
	attrResponseMod  = "gen_ai.response.model"
	attrInputTokens  = "gen_ai.usage.input_tokens"
	attrOutputTokens = "gen_ai.usage.output_tokens"
	attrErrorType    = "error.type"
	attrHTTPStatus   = "http.response.status_code"
	attrHTTPMethod   = "http.request.method"
	attrHTTPRoute    = "http.route"
	attrRequestID    = "switchyard.request.id"
	attrConnection   = "switchyard.connection.id"
	attrCombo        = "switchyard.combo"
	attrOutcome      = "switchyard.outcome"
	attrAttempt      = "switchyard.attempt"
	attrAttempts     = "switchyard.attempts"
	attrStream       = "switchyard.stream"
	attrWaitReason   = "switchyard.wait.reason"
	attrWaitTarget   = "switchyard.wait.target"
	attrWaitMaxMs    = "switchyard.wait.max_ms"
)

// tracer starts the gateway's spans; nil = tracing off.
type tracer struct {
	t    trace.Tracer
	prop propagation.TraceContext
	// waitHook starts a wait span under the waiting context (built once).
	waitHook traffic.WaitHook
}

func newTracer(tp trace.TracerProvider) *tracer {
	if tp == nil {
		return nil
	}
	tr := &tracer{t: tp.Tracer("switchyard/gateway")}
	tr.waitHook = func(ctx context.Context, reason, target string, resumeIn time.Duration) func() {
		_, sp := tr.t.Start(ctx, "wait "+reason, trace.WithAttributes(attribute.String(attrWaitReason, reason),
			attribute.String(attrWaitTarget, target), attribute.Int64(attrWaitMaxMs, resumeIn.Milliseconds())))
		return func() { sp.End() }
	}
	return tr
}

// attemptTrace is a traced request's current attempt span and the context
// its admission waits start their spans under.
type attemptTrace struct {
	op   string
	span trace.Span
	ctx  context.Context
}

// operationOf is gen_ai.operation.name of an inbound format.
func operationOf(inbound string) string {
	if inbound == InboundEmbeddings {
		return "embeddings"
	}
	return "chat"
}

// handleTraced is Handle inside a request span.
//
//go:noinline
func (g *Gateway) handleTraced(w http.ResponseWriter, r *http.Request, call *Call) error {
	op := operationOf(call.Endpoint.Inbound)
	ctx := g.tracer.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, sp := g.tracer.t.Start(ctx, op, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String(attrOperation, op), attribute.String(attrHTTPMethod, r.Method),
		attribute.String(attrHTTPRoute, call.Endpoint.Path), attribute.String(attrRequestID, call.ID)))
	defer sp.End()
	r = r.WithContext(ctx)
	req, grant, err := g.accept(w, r, call)
	if err != nil {
		traceRefused(sp, err)
		return err
	}
	defer g.keyLimits.Release(grant)
	sp.SetName(op + " " + req.Model)
	sp.SetAttributes(attribute.String(attrRequestModel, req.Model), attribute.Bool(attrStream, req.Stream))
	g.Serve(w, r, req)
	return nil
}

// traceRefused marks a request refused before routing.
func traceRefused(sp trace.Span, err error) {
	var gerr *services.GatewayError
	if !errors.As(err, &gerr) {
		sp.SetStatus(codes.Error, "refused")
		return
	}
	sp.SetAttributes(attribute.Int(attrHTTPStatus, gerr.HTTPStatus()), attribute.String(attrErrorType, gerr.Code),
		attribute.String(attrOutcome, OutcomeClientError))
	if gerr.HTTPStatus() >= 500 {
		sp.SetStatus(codes.Error, gerr.Code)
	}
}

// traceServed puts the finished request's results on its span (the span
// of ctx; none when the request was not traced).
func traceServed(ctx context.Context, rec *LogRecord) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attribute.String(attrOutcome, rec.Outcome), attribute.Int(attrHTTPStatus, rec.Status),
		attribute.Int(attrAttempts, rec.Attempts)}
	if rec.Provider != "" {
		attrs = append(attrs, attribute.String(attrProvider, rec.Provider), attribute.String(attrSystem, rec.Provider))
	}
	if rec.Model != "" {
		attrs = append(attrs, attribute.String(attrResponseMod, rec.Model))
	}
	if rec.ConnectionID != "" {
		attrs = append(attrs, attribute.String(attrConnection, rec.ConnectionID))
	}
	if rec.ComboName != "" {
		attrs = append(attrs, attribute.String(attrCombo, rec.ComboName))
	}
	if rec.PromptTokens > 0 || rec.CompletionTok > 0 {
		attrs = append(attrs, attribute.Int64(attrInputTokens, rec.PromptTokens), attribute.Int64(attrOutputTokens, rec.CompletionTok))
	}
	if rec.ErrorCode != "" {
		attrs = append(attrs, attribute.String(attrErrorType, rec.ErrorCode))
	}
	sp.SetAttributes(attrs...)
	if rec.Status >= 500 {
		sp.SetStatus(codes.Error, rec.ErrorCode)
	}
}

// traceAttemptStart opens the span of the attempt just added to the log.
func (st *attemptState) traceAttemptStart(t *target, c *services.Connection) {
	if st.trace == nil {
		st.trace = &attemptTrace{op: operationOf(st.req.Inbound)}
	}
	attrs := []attribute.KeyValue{attribute.String(attrOperation, st.trace.op), attribute.String(attrProvider, t.provider.ID),
		attribute.String(attrSystem, t.provider.ID), attribute.String(attrRequestModel, t.model),
		attribute.String(attrConnection, c.ID), attribute.Int(attrAttempt, len(st.log.AttemptLog))}
	if cb := st.req.Route.Combo; cb != nil {
		attrs = append(attrs, attribute.String(attrCombo, cb.Name))
	}
	ctx, sp := st.g.tracer.t.Start(st.ctx(), st.trace.op+" "+t.model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	st.trace.span, st.trace.ctx = sp, traffic.WithWaitHook(ctx, st.g.tracer.waitHook)
}

// traceAttemptEnd closes the current attempt span with the attempt's
// outcome as the log records it (the classified reason of a failure).
func (st *attemptState) traceAttemptEnd() {
	sp := st.trace.span
	if sp == nil || len(st.log.AttemptLog) == 0 {
		return
	}
	st.trace.span, st.trace.ctx = nil, nil
	a := &st.log.AttemptLog[len(st.log.AttemptLog)-1]
	outcome := a.Outcome
	if outcome == "" {
		outcome = "failure"
	}
	sp.SetAttributes(attribute.String(attrOutcome, outcome))
	if a.UpstreamStatus > 0 {
		sp.SetAttributes(attribute.Int(attrHTTPStatus, a.UpstreamStatus))
	}
	if outcome == OutcomeSuccess {
		sp.SetAttributes(attribute.String(attrResponseMod, a.Model))
	} else {
		sp.SetAttributes(attribute.String(attrErrorType, outcome))
		sp.SetStatus(codes.Error, outcome)
	}
	sp.End()
}

// attemptCtx is the context the current attempt's admission waits under:
// the attempt span's when traced.
func (st *attemptState) attemptCtx() context.Context {
	if st.trace != nil && st.trace.ctx != nil {
		return st.trace.ctx
	}
	return st.ctx()
}

// traceWait adds a wait span under ctx to tok (tracing on only).
func (g *Gateway) traceWait(ctx context.Context, tok traffic.WaitToken, reason, target string, d time.Duration) traffic.WaitToken {
	if g.tracer == nil {
		return tok
	}
	return tok.Also(g.tracer.waitHook(ctx, reason, target, d))
}
