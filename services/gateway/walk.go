package gateway

import (
	"context"
	"errors"
	"fmt"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/translate"
)

// One pass of the attempt loop (30-routing §6.1): for each target in
// order, its entry queue, then its connection loop; and what each
// attempt's result leads to.

// targetRun is what one walk of a target's connections did.
type targetRun struct {
	// dispatched is set once a connection was picked and tried.
	dispatched bool
	// lastReason is the reason of the last failure ("" after none).
	lastReason resilience.Reason
	// outcome is finished when the request is over.
	outcome outcome
	// earlyRetries counts the same-connection retries before commit.
	earlyRetries int
}

// next is what the connection loop does after one attempt.
type next uint8

const (
	nextConnection next = iota // failed: the target's next connection
	sameConnection             // early retry on the same connection (20-resilience §11)
	leaveTarget                // next_model failover: the model is done for this request
	endRequest                 // the request is over
)

// walk is one pass over an ordered target list: the entry queue (§6.5),
// then the target's connection loop. Targets that failed transiently are
// collected for the retry passes.
func (st *attemptState) walk(targets []target) outcome {
	var deferred []target // saturated entries, moved to the end once (§6.5)
	for i := 0; i < len(targets)+len(deferred); i++ {
		var t *target
		last := false
		if i < len(targets) {
			t = &targets[i]
			last = i == len(targets)-1 && len(deferred) == 0
		} else {
			t, last = &deferred[i-len(targets)], true
		}
		if st.skipModel[t.model] {
			st.exclude(*t, "", exclFailed, "same model failed with a caller error", 0)
			continue
		}
		release := func() {}
		if n := st.cfg.QueueConcurrency; n > 0 && t.comboID != "" {
			key := entryKey(*t)
			if i < len(targets) && !last && st.g.entrySlots.Busy(key, n) {
				deferred = append(deferred, *t)
				st.exclude(*t, "", exclTargetSaturated, "", 0)
				st.g.obs.Excluded(exclTargetSaturated)
				continue
			}
			rel, failOpen, err := st.g.entrySlots.AcquireWith(st.ctx(), key, n, entrySlotConfig(st.cfg))
			if err != nil {
				return finished // the client left while queued
			}
			if failOpen {
				st.g.obs.Excluded(exclTargetSaturatedFailOpen)
			}
			release = rel
		}
		tr := st.walkTarget(*t)
		release()
		if tr.outcome == finished {
			return finished
		}
		st.leftTarget(t, tr)
		if st.terminal != "" {
			return pending
		}
	}
	return pending
}

// leftTarget does the bookkeeping of a target the walk moves past after a
// failed dispatch: the session preference record, the retry list, the
// combo strategy's state and the provider window gate.
func (st *attemptState) leftTarget(t *target, tr targetRun) {
	if !tr.dispatched || tr.lastReason == "" {
		return
	}
	g, reason := st.g, tr.lastReason
	g.rememberSession(st.ctx(), *t, st.req, false)
	if retryReason(reason) && !st.hasRetryable(*t) {
		st.retryable = append(st.retryable, *t)
	}
	if t.comboID != "" && reason != resilience.ReasonClientAbort {
		g.routeState.OnFailure(t.comboID, t.id)
	}
	if st.req.Route.Combo != nil {
		g.res.FinalTargetFailure(st.ctx(), t.provider.ID, t.provider.AuthClass, t.connID, reason,
			reason == resilience.ReasonServerError && t.provider.PerModelQuota && st.lastRes.status == 500)
	}
}

// walkTarget tries the connections of one target until one serves, the
// failover rule moves on, or nothing is left.
func (st *attemptState) walkTarget(t target) (tr targetRun) {
	g, req := st.g, st.req
	if st.overToolLimit(t) {
		return tr
	}
	var retryConn *services.Connection
	for {
		if st.budgetSpent(g.clock.Now(), st.set) {
			st.exclude(t, "", st.terminal, "", 0)
			return tr
		}
		adm, blk := g.res.AllowProvider(t.provider.ID, t.provider.AuthClass, t.connID)
		if blk != nil {
			if blk.Waitable {
				st.noteWaitable(blk.RetryAfter)
			}
			if !tr.dispatched {
				st.exclude(t, "", blk.Reason, "", blk.RetryAfter)
				g.obs.Excluded(blk.Reason)
			}
			return tr
		}
		conn := retryConn
		retryConn = nil
		if conn == nil {
			conn = g.pick(st.snap, t, req, st, st.set, !tr.dispatched)
		}
		if conn == nil {
			g.res.Release(adm)
			return tr
		}
		tr.dispatched = true
		st.noteDispatch(&t)
		dreq := req
		if t.relay {
			if ir := g.relayInjection(t, conn, req); ir != nil {
				dreq = ir
			}
		}
		res := st.dispatch(&t, conn, dreq)
		nx := st.settle(&t, conn, adm, res, &tr)
		if st.trace != nil {
			st.traceAttemptEnd()
		}
		switch nx {
		case sameConnection:
			retryConn = conn
		case leaveTarget:
			return tr
		case endRequest:
			tr.outcome = finished
			return tr
		}
	}
}

// overToolLimit applies a learned tool limit (20-resilience §13.2): a hard
// exclusion, tools are never dropped.
func (st *attemptState) overToolLimit(t target) bool {
	if st.req.ToolCount == 0 {
		return false
	}
	l, ok := st.g.tools.Get(t.provider.ID, t.model)
	if !ok || l.MaxTools >= st.req.ToolCount {
		return false
	}
	st.exclude(t, "", exclToolLimit, fmt.Sprintf("limit %d tools", l.MaxTools), 0)
	if l.MaxTools > st.bestToolLimit.MaxTools || st.bestToolLimit.Provider == "" {
		st.bestToolLimit = l
	}
	st.g.obs.Excluded(exclToolLimit)
	return true
}

// noteDispatch counts a failover (to another connection of the same
// target, or to another target) and tells the combo strategy.
func (st *attemptState) noteDispatch(t *target) {
	if st.lastTarget != "" {
		kind := failoverTarget
		if st.lastTarget == t.name() {
			kind = failoverConnection
		}
		st.g.obs.Failover(kind)
	}
	st.lastTarget = t.name()
	if t.comboID != "" {
		st.g.routeState.OnDispatch(t.comboID, t.id)
	}
}

// settle records one attempt's result everywhere it counts and says what
// the connection loop does next. A method of its own, like the ones it
// calls, so that its locals are not part of walkTarget's frame, which a
// streaming request keeps on its stack for the whole stream.
func (st *attemptState) settle(t *target, conn *services.Connection, adm resilience.Admission, res result, tr *targetRun) next {
	g := st.g
	switch {
	case res.ok:
		st.served(t, conn, adm, res)
		return endRequest
	case res.gone:
		g.res.Release(adm)
		g.obs.Attempt(t.provider.ID, obsAborted)
		return endRequest
	case res.shutdown:
		g.res.Release(adm)
		g.obs.Attempt(t.provider.ID, obsAborted)
		st.shuttingDown()
		return endRequest
	case res.callerErr != nil:
		g.res.Release(adm)
		st.fail(callerFault(res.callerErr))
		return endRequest
	}
	g.obs.Attempt(t.provider.ID, obsFailure)
	if st.earlyRetry(res, tr) {
		g.res.Release(adm)
		return sameConnection
	}
	if res.watchdog {
		return st.throughputAbort(t, conn, adm, res, tr)
	}
	outc := st.recordFailure(t, conn, adm, res)
	tr.lastReason = outc.Reason
	if st.out.committedUseful() || res.postCommit {
		// Nothing is replayed after the first useful byte: end in band.
		st.endInBand(st.answerFor())
		return endRequest
	}
	switch outc.Failover {
	case resilience.FailoverStop:
		st.relayCallerError(res, *outc)
		return endRequest
	case resilience.FailoverNextModel:
		st.skipModel[t.model] = true
		return leaveTarget
	}
	return nextConnection
}

// served records a success: resilience, metrics, session records, tool
// limits, the combo strategy and the affinity pin.
func (st *attemptState) served(t *target, conn *services.Connection, adm resilience.Admission, res result) {
	g, req := st.g, st.req
	g.res.Success(st.ctx(), adm, conn.ID, t.model)
	g.stats.Record(t.provider.ID, t.model, conn.ID, true, res.latency)
	g.rememberSession(st.ctx(), *t, req, true)
	if t.relay {
		g.relayAfterSuccess(*t, conn, req, st.set)
	}
	g.storeError(StoreToolLimit, g.tools.Succeeded(st.ctx(), t.provider.ID, t.model, req.ToolCount))
	if t.comboID != "" {
		g.routeState.OnSuccess(t.comboID, t.id, conn.ID)
	}
	g.obs.Attempt(t.provider.ID, obsSuccess)
	if pin := g.pinID(req, t.provider.ID); pin != "" {
		g.storeError(StoreAffinityPin, g.traffic.Pins.Pin(context.WithoutCancel(st.ctx()), pin, req.Key.ID, t.provider.ID, conn.ID))
	}
}

// shuttingDown answers a request cut at the end of the shutdown drain
// while its client still waits: in band once the stream is committed.
func (st *attemptState) shuttingDown() {
	e := services.NewGatewayError(services.CodeServerShuttingDown, "The server is shutting down; retry the request.")
	if st.out.committedUseful() {
		st.endInBand(e)
		return
	}
	st.fail(e)
}

// callerFault is the answer to a request that cannot be sent as asked:
// its lease changed while it waited, or it cannot be translated for the
// upstream.
func callerFault(err error) *services.GatewayError {
	var lf *leaseFenceError
	if errors.As(err, &lf) {
		return lf.gatewayError()
	}
	var ue *translate.UnsupportedError
	if errors.As(err, &ue) {
		return services.NewGatewayError(services.CodeUnsupportedParameter, ue.Message).WithParam(ue.Param)
	}
	return services.NewGatewayError(services.CodeInvalidRequest, "The request cannot be translated: "+err.Error())
}

// earlyRetry reports a stream attempt that failed before commit in a way
// the same connection may be retried for (20-resilience §11), and counts it.
func (st *attemptState) earlyRetry(res result, tr *targetRun) bool {
	if !st.req.Stream || res.postCommit || st.out.committedUseful() || tr.earlyRetries >= st.g.earlyRetryMax() {
		return false
	}
	if !res.watchdog && res.transport != resilience.TransportReset && res.transport != resilience.TransportIdleTimeout &&
		res.detail != resilience.DetailEmptyResponse {
		return false
	}
	tr.earlyRetries++
	return true
}

// throughputAbort handles a stream the watchdog stopped: it penalises
// nothing (no cooldown, no breaker count); after the commit the stream
// ends in band, before it the next connection is tried.
func (st *attemptState) throughputAbort(t *target, conn *services.Connection, adm resilience.Admission, res result, tr *targetRun) next {
	st.g.res.Release(adm)
	st.last = &resilience.Outcome{Classification: resilience.Classification{Reason: resilience.ReasonTransient,
		Detail: "throughput_too_low", Failover: resilience.FailoverNext}}
	st.lastRes = res
	st.excluded[conn.ID] = true
	st.noteConnFailure(conn.ID, resilience.ReasonTransient)
	st.g.stats.Record(t.provider.ID, t.model, conn.ID, false, 0)
	st.onlyLocal = false
	tr.lastReason = resilience.ReasonTransient
	if res.postCommit {
		st.endInBand(errThroughputTooLow())
		return endRequest
	}
	return nextConnection
}

// recordFailure classifies a failed attempt and records it everywhere: the
// resilience state, the log, tool limits, metrics, the attempt state and
// the session pin.
func (st *attemptState) recordFailure(t *target, conn *services.Connection, adm resilience.Admission, res result) *resilience.Outcome {
	g, req, s := st.g, st.req, st.snap
	f := failureOf(res, *t, conn, req.ToolCount, g.clock.Now())
	outc := g.res.Failure(st.ctx(), adm, refOf(conn), f, func() []resilience.ConnRef { return g.siblings(s, t.provider.ID) })
	st.log.noteOutcome(outc)
	if outc.Detail == resilience.DetailToolLimit {
		g.storeError(StoreToolLimit, g.tools.Learn(st.ctx(), t.provider.ID, t.model, outc.ToolLimit, req.ToolCount))
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
				g.storeError(StoreAffinityPin, g.traffic.Pins.Drop(context.WithoutCancel(st.ctx()), pin))
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

// earlyRetryMax is streamRecovery.earlyRetryMax (default 1).
func (g *Gateway) earlyRetryMax() int {
	_, n := g.watchdogCfg()
	return n
}
