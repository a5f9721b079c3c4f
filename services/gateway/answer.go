package gateway

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// The answer of a request nothing served (30-routing §7, 10-gateway-api
// §9), and the words the attempt loop records: log outcomes, exclusion
// reasons, terminal reasons and the observer's labels.

// Outcomes of a request-log record (LogRecord.Outcome, 10-gateway-api §11).
const (
	OutcomeSuccess           = "success"
	OutcomeFailover          = "failover" // served after more than one attempt
	OutcomeEmergencyFallback = "emergency_fallback"
	OutcomeUpstreamError     = "upstream_error" // a 5xx, an upstream 429 or lockout, or an in-band stream error
	OutcomeClientError       = "client_error"
	OutcomeAborted           = "aborted" // the client left
)

// attemptClientAbort is AttemptLog.Outcome of an attempt whose client left;
// a failed attempt records its resilience reason instead.
const attemptClientAbort = "client_abort"

// Exclusion reasons and details of diagnostics.excluded (10-gateway-api
// §9.2) the gateway itself decides; resilience blockers bring their own
// (cooling, circuit_open, window_gate, …).
const (
	exclFailed                  = "failed"
	exclTargetSaturated         = "target_saturated"
	exclTargetSaturatedFailOpen = "target_saturated_fail_open"
	exclToolLimit               = "tool_limit"
	exclUnavailable             = "unavailable"
	exclModelLockout            = "model_lockout"
	exclNoConnection            = "no_connection"

	detailIncompatible = "incompatible"
	detailDisabled     = "disabled"
	detailNotAllowed   = "not_allowed"
	detailLeaseBusy    = "lease_busy"
)

// Terminal reasons: the budget that ended routing (30-routing §4).
const (
	terminalAttemptCap = "attempt_cap"
	terminalDeadline   = "deadline"
)

// Observer labels.
const (
	obsSuccess = "success"
	obsFailure = "failure"
	obsAborted = "aborted"

	failoverConnection = "connection"
	failoverTarget     = "target"
)

// fail writes the final error of st's request.
func (st *attemptState) fail(e *services.GatewayError) { st.g.fail(st.out, st, e) }

// fail writes the final error: an HTTP error before commit, an in-band
// error frame after a keepalive commit.
func (g *Gateway) fail(out *clientWriter, st *attemptState, e *services.GatewayError) {
	st.log.Status, st.log.ErrorCode = e.HTTPStatus(), e.Code
	switch {
	case e.HTTPStatus() >= 500 || e.Code == services.CodeUpstreamRateLimited || e.Code == services.CodeModelCooldown:
		st.log.Outcome = OutcomeUpstreamError
	default:
		st.log.Outcome = OutcomeClientError
	}
	if st.attempts == 0 {
		switch e.Code {
		case services.CodeProviderCircuitOpen, services.CodeModelCooldown, services.CodeAllTargetsCoolingDown, services.CodeNoExecutableTargets:
			g.obs.PoolExhausted(e.Code)
		}
		if e.Code == services.CodeAllTargetsCoolingDown {
			g.log.Load().Warn("all targets cooling down", "request_id", out.req.ID, "model", out.req.Model,
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

// endInBand ends a committed stream with one error frame (and no [DONE]);
// the request is logged as a 200 that ended in an upstream error.
func (st *attemptState) endInBand(e *services.GatewayError) {
	st.out.streamError(e)
	st.log.Outcome, st.log.Status, st.log.ErrorCode = OutcomeUpstreamError, 200, e.Code
}

func errThroughputTooLow() *services.GatewayError {
	return services.NewGatewayError(services.CodeStreamThroughputTooLow, "The upstream stream was too slow and was stopped.")
}

// relayCallerError relays an upstream caller fault that stops the request.
func (st *attemptState) relayCallerError(res result, o resilience.Outcome) {
	code, _, msg := parseUpstreamError(res.body)
	if !upstreamCode.MatchString(code) {
		code = services.CodeInvalidRequest
	}
	text := "The upstream rejected the request"
	if msg != "" {
		text += ": " + msg
	}
	st.fail(&services.GatewayError{Status: clampCaller(o.Status), Code: code, Message: text})
}

// exclusionReasons lists the distinct exclusion reasons, in first-seen order.
func exclusionReasons(diag []Exclusion) []string {
	var out []string
	for _, d := range diag {
		r := d.Reason
		if d.Detail != "" && r == exclUnavailable {
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

// finalError decides the answer when routing ended without success
// (30-routing §7).
func (st *attemptState) finalError() *services.GatewayError {
	e := st.answerFor()
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

// answerFor is the error of a request nothing served: from the
// exclusions when nothing was dispatched, else from the last failure.
func (st *attemptState) answerFor() *services.GatewayError {
	if st.attempts == 0 {
		return st.undispatched()
	}
	var le *traffic.LimitError
	if st.onlyLocal && errors.As(st.localErr, &le) {
		return &services.GatewayError{Status: le.HTTPStatus(), Code: le.Code, Message: le.Message, RetryAfter: le.RetryAfterSeconds()}
	}
	return st.upstreamFailure()
}

// undispatched answers a request no target was dispatched to: a tool
// limit, an open breaker, a lockout, timers, or nothing usable at all.
func (st *attemptState) undispatched() *services.GatewayError {
	req := st.req
	direct := req.Route.Combo == nil
	secs := ceilSeconds(st.timerWait)
	switch {
	case st.bestToolLimit.Provider != "" && onlyToolLimits(st):
		l := st.bestToolLimit
		return services.NewGatewayError(services.CodeToolLimitExceeded, fmt.Sprintf("The request has %d tools; the largest limit known for this request's targets is %d (%s/%s).",
			req.ToolCount, l.MaxTools, l.Provider, l.Model)).WithParam("tools")
	case req.Inbound == InboundEmbeddings && onlyIncompatible(st):
		// Embeddings exist only on openai-format upstreams (10-gateway-api §5.4).
		return services.NewGatewayError(services.CodeUnsupportedParameter,
			"Embeddings are served by OpenAI-format upstreams only, and no target of this model is one.").WithParam("model")
	case direct && st.timers["circuit_open"]:
		return services.NewGatewayError(services.CodeProviderCircuitOpen,
			"The provider's circuit breaker is open after repeated failures; retry after "+strconv.Itoa(secs)+" s.").WithRetryAfter(secs)
	case direct && st.timers[exclModelLockout] && len(st.timers) == 1 && !st.noTimer:
		return services.NewGatewayError(services.CodeModelCooldown,
			"This model is locked out on every connection; retry after "+strconv.Itoa(secs)+" s.").WithRetryAfter(secs)
	case len(st.timers) > 0:
		return services.NewGatewayError(services.CodeAllTargetsCoolingDown, "Every target is cooling down; retry after "+strconv.Itoa(secs)+" s.").WithRetryAfter(secs)
	}
	return services.NewGatewayError(services.CodeNoExecutableTargets,
		"No connection can serve this request: add or enable a connection for its provider, or check the key's allowed connections.")
}

// upstreamFailure answers from the last failed attempt (10-gateway-api §9.3).
func (st *attemptState) upstreamFailure() *services.GatewayError {
	last, res := st.last, st.lastRes
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
		return errThroughputTooLow()
	case status == 0 && res.timeout:
		return services.NewGatewayError(services.CodeUpstreamTimeout, "The upstream did not answer in time.")
	case status == 0:
		return services.NewGatewayError(services.CodeUpstreamError, "The upstream failed: "+msg)
	case status == 404 && last.Reason == resilience.ReasonNotFound:
		return services.NewGatewayError(services.CodeModelNotFound, "The upstream does not know this model: "+msg)
	case status == 429:
		return services.NewGatewayError(services.CodeUpstreamRateLimited, "The upstream rate-limited every connection tried (429): "+msg).WithRetryAfter(st.retryAfter())
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
			e.RetryAfter = st.retryAfter()
		}
		return e
	}
	return services.NewGatewayError(services.CodeUpstreamError, "The upstream failed with "+strconv.Itoa(status)+": "+msg)
}

// retryAfter is the Retry-After of an upstream 429 or 503 answer: the
// soonest timer among the exclusions, else the last failure's hint or
// client wait, else 1 s.
func (st *attemptState) retryAfter() int {
	last := st.last
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
		if e.Detail != detailIncompatible {
			return false
		}
	}
	return len(st.diag) > 0
}

// onlyToolLimits reports that every exclusion was a learned tool limit.
func onlyToolLimits(st *attemptState) bool {
	for _, e := range st.diag {
		if e.Reason != exclToolLimit {
			return false
		}
	}
	return len(st.diag) > 0
}
