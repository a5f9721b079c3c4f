package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"switchyard/services"
	"switchyard/services/leases"
	"switchyard/services/resilience"
	"switchyard/services/translate"
)

// One attempt of the attempt loop: admission (slots, request queue), the
// lease fence, the upstream exchange and the response to the client.

// requestBody rebuilds the upstream body for a target: the client's fields
// with model replaced by the upstream model id.
func requestBody(req *Request, model string) ([]byte, error) {
	return encodeBody(req.Body, model)
}

// responseModel is the "model" of a synthesised response (10-gateway-api
// §6.5): the upstream model id that served, or the client's name when
// routing.echoRequestedModel is on.
func responseModel(req *Request, t target, set *Settings) string {
	if set.EchoRequestedModel {
		return req.Model
	}
	return t.model
}

// dispatch sends one upstream request and, on success, writes the response.
// req is the request as sent (st.req, or a copy with injected context).
func (st *attemptState) dispatch(t *target, c *services.Connection, req *Request) result {
	g, out, set := st.g, st.out, st.set
	pl, ok := pipelineFor(req.Inbound, t.provider.Format, nativeAnthropic(t.provider), set.DefaultMaxTokens)
	if !ok {
		return resBad(resilience.DetailMalformed, "this upstream format cannot serve the request")
	}
	body, warns, err := pl.body(req, t.model)
	if err != nil {
		return result{callerErr: err}
	}
	st.log.UpstreamFormat = string(t.provider.Format)
	st.attempts++
	start, wallStart := g.clock.Now(), time.Now()
	rt := g.reg.Runtime(c.ID)
	rt.lastUsedMs.Store(start.UnixMilli())
	g.obs.Used(c.ID, start)
	rt.inFlight.Add(1)
	defer rt.inFlight.Add(-1)
	at := st.log.startAttempt(*t, c, start)
	if g.tracer != nil {
		st.traceAttemptStart(t, c)
	}
	out.setDispatch(c.ID, t.provider.ID, t.model, st.attempts-1)

	adm, res, admitted := st.admitDispatch(t, c, req, at)
	if !admitted {
		at.finish(g.clock.Now(), res)
		return res
	}
	defer adm.done()
	actx, cancel := context.WithCancelCause(st.ctx())
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
		g.learn(st.ctx(), adm, status, h)
	}
	if len(warns) > 0 || len(req.Warnings) > 0 {
		out.setWarning(warningText(req.Warnings, warns))
		st.log.addWarnings(req.Warnings, warns)
	}
	if req.Stream {
		res = g.relayStream(actx, cancel, out, *t, c, pl.path, body, pl.stream(req, responseModel(req, *t, set)), set, st, onHeaders)
	} else {
		res = g.forwardJSON(actx, cancel, out, *t, c, pl, body, set, st, onHeaders)
	}
	redactResult(&res, c)
	if execTimer != nil {
		execTimer.Stop()
	}
	st.dispatched(t, c, rt, at, wallStart, &res)
	return res
}

// admitDispatch takes a max_concurrent slot and a request-queue ticket,
// then re-checks the lease fence, which may have changed while the
// request waited for them; false with the attempt's result when the
// attempt ends here. Time spent waiting for a slot or in the queue is
// logged as waits, not as the attempt's duration.
func (st *attemptState) admitDispatch(t *target, c *services.Connection, req *Request, at attemptHandle) (*admission, result, bool) {
	adm, err := st.g.admit(st.attemptCtx(), *t, c, req, st.log)
	if adm.gated {
		// The waits are rows of their own; the attempt starts after them.
		at.admitted(st.g.clock.Now())
	}
	if err != nil {
		return nil, localLimit(st.ctx(), err), false
	}
	if ls := st.g.traffic.Leases; req.LeaseConnID != "" && ls != nil {
		if l, err := ls.Check(st.ctx(), req.Key, req.LeaseOwner, req.LeaseGen); err != nil || l.ConnectionID != c.ID {
			adm.done()
			return nil, result{callerErr: &leaseFenceError{err: err}}, false
		}
	}
	return adm, result{}, true
}

// dispatched finishes the attempt's log entry and counters once the
// exchange is over.
func (st *attemptState) dispatched(t *target, c *services.Connection, rt *ConnRuntime, at attemptHandle, wallStart time.Time, res *result) {
	g, out := st.g, st.out
	if !res.ok && !res.gone && out.committedUseful() {
		res.postCommit = true
	}
	at.finish(g.clock.Now(), *res)
	if res.ok {
		res.latency = out.firstByteSince(wallStart)
		rt.successes.Add(1)
		st.log.served(*t, c, st.attempts)
		if d := out.ttfb(); d > 0 {
			g.obs.TTFB(t.provider.ID, d)
		}
	} else if !res.gone {
		rt.failures.Add(1)
	}
}

// forwardJSON handles a non-stream dispatch: the whole body within the
// target timeout, converted to the client's format and validated before
// anything reaches the client.
func (g *Gateway) forwardJSON(ctx context.Context, cancel context.CancelCauseFunc, out *clientWriter, t target, c *services.Connection, pl pipeline, body []byte, set *Settings, st *attemptState, onHeaders func(int, http.Header)) result {
	timer := time.AfterFunc(set.TargetTimeout, func() { cancel(errTargetTimeout) })
	defer timer.Stop()
	resp, err := g.send(ctx, t, c, pl.path, body, false, out.req.AnthropicBeta)
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

// send performs the HTTP exchange up to the response headers. beta is the
// client's anthropic-beta header, forwarded to anthropic-format upstreams
// only (10-gateway-api §8.3).
func (g *Gateway) send(ctx context.Context, t target, c *services.Connection, path string, body []byte, stream bool, beta string) (*http.Response, error) {
	cl, err := g.up.client(c)
	if err != nil {
		return nil, err
	}
	hreq, err := g.up.newRequest(ctx, t.provider, c, path, body, stream)
	if err != nil {
		return nil, err
	}
	if beta != "" && t.provider.Format == services.FormatAnthropic {
		hreq.Header.Set("anthropic-beta", beta)
	}
	return cl.Do(hreq)
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
