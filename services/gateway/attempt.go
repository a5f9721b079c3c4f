package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/events"
	"switchyard/services/resilience"
)

// The attempt loop of 30-routing §6 for one client request, in three files:
//
//   - attempt.go (here): the request's state and the outer loop — passes
//     over the target set, the retry passes (§6.3), the cooldown-aware
//     waits (20-resilience §9) and the emergency fallback (§13.3);
//   - walk.go: one pass — the entry queue of each target (§6.5), then the
//     target's connection loop, and what each attempt's result leads to;
//   - dispatch.go: one attempt — admission, the lease fence, the upstream
//     exchange and the response;
//   - answer.go: the final answer when nothing served (§7, 10-gateway-api §9).
//
// Every step reports an outcome: pending (the request still waits for an
// answer; the loop moves on) or finished (answered — served, or an error
// written — or the client left). Nothing after finished touches the client.

// outcome says whether a step of the attempt loop ended the client request.
type outcome uint8

const (
	// pending: nothing settled the request; the loop goes on to the next
	// connection, target or pass.
	pending outcome = iota
	// finished: the request is over — served, answered with an error
	// already written, or its client left.
	finished
)

// attemptState is one client request while it is routed: what it was
// given (fixed for its life) and what it accumulates. The loop's steps are
// its methods.
type attemptState struct {
	// The request, fixed for its life (its context is out's request's).
	g    *Gateway
	out  *clientWriter
	req  *Request
	set  *Settings
	snap *Snapshot // refreshed at every pass

	attempts      int
	excluded      map[string]bool // connection ids failed in this request
	failedProv    map[string]bool // providers with a failure in this request
	skipModel     map[string]bool // models skipped after a next_model failure
	last          *resilience.Outcome
	lastRes       result
	diag          []Exclusion
	timerWait     time.Duration // earliest timer among exclusions
	timers        map[string]bool
	lastTarget    string
	waitMin       time.Duration // smallest remaining waitable blocker
	bestToolLimit ToolLimit
	onlyLocal     bool  // every failure so far was a local limit
	noTimer       bool  // some exclusion is not a timer (beside onlyLocal: one word for both)
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
	// trace is the current attempt's span (tracing.go); nil when off.
	trace *attemptTrace
}

// newAttempt starts routing req: its log record, its client writer (on the
// settings the request started with), its budget, and the combo's own
// target timeout.
func (g *Gateway) newAttempt(w http.ResponseWriter, r *http.Request, req *Request) *attemptState {
	set := g.current()
	rec := newLogRecord(req)
	st := &attemptState{g: g, req: req, snap: g.reg.Snapshot(),
		excluded: map[string]bool{}, failedProv: map[string]bool{}, skipModel: map[string]bool{},
		timers: map[string]bool{}, log: rec, onlyLocal: true, cfg: comboConfig(set, req.Route.Combo)}
	if set.RequestDeadline > 0 {
		received := req.Received
		if received.IsZero() {
			received = g.clock.Now()
		}
		st.deadline = received.Add(set.RequestDeadline)
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = g.clock.Now() // the origin of the timeline's offsets
	}
	st.out = newClientWriter(w, r, req, set)
	if st.cfg.TargetTimeout > 0 && st.cfg.TargetTimeout != set.TargetTimeout {
		one := *set // the combo's targetTimeoutMs (30-routing §3)
		one.TargetTimeout = st.cfg.TargetTimeout
		set = &one
	}
	st.set = set
	if c := req.Route.Combo; c != nil {
		w.Header().Set("X-Switchyard-Combo", c.Name)
		rec.ComboName, rec.Strategy = c.Name, c.Strategy
	}
	return st
}

// ctx is the client request's context.
func (st *attemptState) ctx() context.Context { return st.out.r.Context() }

// serve runs the attempt loop for one request and returns its finished log
// record (recorded by the caller: fusion and pipeline members are parts of
// one logged request).
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, req *Request) *LogRecord {
	st := g.newAttempt(w, r, req)
	st.run()
	st.log.finish(g.clock.Now(), st.out)
	return st.log
}

// run is the outer loop: a pass over the target set, the retry passes, and
// while a cooldown-aware wait is allowed, a wait and a fresh pass; then the
// emergency fallback, then the final error.
func (st *attemptState) run() {
	waits, budget := 0, time.Duration(0)
	for {
		if st.walk(st.g.expandFor(st.snap, st.req.Route, st.req, st.set, st)) == finished || st.out.gone() {
			return
		}
		if st.retryPasses() == finished {
			return
		}
		d, ok := st.waitDecision(waits, &budget)
		if !ok {
			break
		}
		tok := st.g.beginCooldownWait(st.ctx(), st.req, d)
		kind := services.WaitKindSingle
		if st.req.Route.Combo != nil {
			kind = services.WaitKindCombo
		}
		done := st.timedWait(kind, st.req.Model, d)
		tok.End()
		if !done {
			return
		}
		waits++
		st.g.obs.Waited(st.req.Route.Combo != nil)
		// Run the whole target set again with a fresh excluded set.
		st.snap = st.g.reg.Snapshot()
		st.resetPass()
	}
	if st.emergency() == finished {
		return
	}
	st.fail(st.finalError())
}

// retryReason reports the failures a retry pass may try again (§6.3).
func retryReason(r resilience.Reason) bool {
	switch r {
	case resilience.ReasonModelCapacity, resilience.ReasonServerError, resilience.ReasonTransient:
		return true
	}
	return false
}

// stopsRetrying reports a last failure after which neither a retry pass
// nor a wait can help: the caller's own fault, or the client leaving.
func (st *attemptState) stopsRetrying() bool {
	return st.last != nil && (st.last.Reason == resilience.ReasonCallerError || st.last.Reason == resilience.ReasonClientAbort)
}

// budgetSpent reports whether no new dispatch may start (§4): the attempt
// cap or the request deadline is reached. It records which.
func (st *attemptState) budgetSpent(now time.Time, set *Settings) bool {
	switch {
	case st.attempts >= set.MaxAttempts:
		st.terminal = terminalAttemptCap
	case !st.deadline.IsZero() && !now.Before(st.deadline):
		st.terminal = terminalDeadline
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

// exclude records why a target (or one of its connections) was not
// dispatched to, for diagnostics.excluded and the final answer.
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
	if st.log != nil {
		st.log.skipped(e, st.g.clock.Now())
	}
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

func dispatchedOnce(st *attemptState) bool { return st.attempts > 0 }

// retryPasses runs the retry passes of 30-routing §6.3 after a pass without
// success: up to maxRetries times, wait retryDelayMs (a client leaving ends
// the request) and walk again only the targets that failed with
// model_capacity, server_error or transient, in their original order, with
// the failed gate lifted for connections whose last failure here was one of
// those.
func (st *attemptState) retryPasses() outcome {
	for pass := 0; pass < st.cfg.MaxRetries && len(st.retryable) > 0 && st.terminal == ""; pass++ {
		if st.stopsRetrying() {
			return pending
		}
		targets := st.retryable
		st.retryable = nil
		if !st.retryUseful(st.g.reg.Snapshot(), targets) {
			return pending
		}
		if st.cfg.RetryDelay > 0 && !st.timedWait(services.WaitKindRetryDelay, st.req.Model, st.cfg.RetryDelay) {
			return finished
		}
		if st.budgetSpent(st.g.clock.Now(), st.set) {
			return pending
		}
		for id, reason := range st.connReason {
			if retryReason(reason) {
				delete(st.excluded, id)
			}
		}
		st.snap = st.g.reg.Snapshot()
		if st.walk(targets) == finished || st.out.gone() {
			return finished
		}
	}
	return pending
}

// retryUseful reports whether some connection of the targets could serve
// after the retry delay: one that failed transiently here, or was never
// tried, and whose blocker (if any) ends within the delay. A pass that can
// only meet cooling connections is skipped instead of waited for.
func (st *attemptState) retryUseful(s *Snapshot, targets []target) bool {
	for _, t := range targets {
		for _, c := range s.Connections(t.provider.ID) {
			if !c.Enabled || (t.connID != "" && c.ID != t.connID) || !st.req.Key.AllowsConnection(c.ID) {
				continue
			}
			if st.excluded[c.ID] && !retryReason(st.connReason[c.ID]) {
				continue
			}
			b := st.g.res.ConnectionBlocker(t.provider.ID, c.ID, t.model)
			if b == nil || (b.RetryAfter > 0 && b.RetryAfter <= st.cfg.RetryDelay) {
				return true
			}
		}
	}
	return false
}

// waitDecision is the pure rule of 20-resilience §9: wait for the smallest
// waitable blocker (or the latest upstream hint) + 50 ms when it fits the
// cap, the count and the budget left.
func (st *attemptState) waitDecision(waits int, used *time.Duration) (time.Duration, bool) {
	if st.waitMin <= 0 {
		// Connections this pass failed on are cooling now: look again.
		st.waitMin = st.g.waitableMin(st.g.reg.Snapshot(), st.req)
	}
	if st.waitMin <= 0 || st.stopsRetrying() {
		return 0, false
	}
	doc := st.g.traffic.Doc()
	var enabled bool
	var limit, budget time.Duration
	var count int
	if st.req.Route.Combo != nil {
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

// timedWait is waitOut recorded in the request's log as a wait of kind on
// target, with the last failure's reason as its cause; a wait the client
// left during is recorded for as long as it lasted.
func (st *attemptState) timedWait(kind, target string, d time.Duration) bool {
	start := st.g.clock.Now()
	done := st.waitOut(d)
	reason := "cooldown" // nothing was dispatched: every target was blocked
	if kind == services.WaitKindRetryDelay {
		reason = "retry"
	}
	if st.last != nil {
		reason = string(st.last.Reason)
	}
	st.log.waited(kind, reason, target, start, st.g.clock.Now())
	return done
}

// waitOut sleeps on the injected clock, sending keepalives to a streaming
// client meanwhile; false when the client left.
func (st *attemptState) waitOut(d time.Duration) bool {
	out := st.out
	stop := make(chan struct{})
	if st.req.Stream {
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
	err := st.g.clock.Wait(st.ctx(), d)
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

// emergency makes the one last attempt of 20-resilience §13.3 on the
// configured fallback target, only after every target failed for a reason
// that allows it: finished when the fallback answered (or the client
// left), pending when the final error is still to be written.
func (st *attemptState) emergency() outcome {
	req, out := st.req, st.out
	if out.committedUseful() {
		return pending
	}
	ef := st.g.traffic.Doc().EmergencyFallback
	if !ef.Active() || (ef.SkipForToolRequests && req.ToolCount > 0) || req.LeaseConnID != "" {
		return pending
	}
	if st.onlyLocal && st.localErr != nil {
		return pending
	}
	if st.last != nil {
		switch st.last.Reason {
		case resilience.ReasonCallerError, resilience.ReasonClientAbort, resilience.ReasonLocalLimit:
			return pending
		}
	}
	route, gerr := Resolve(st.snap, req.Key, ef.Target)
	if gerr != nil {
		return pending
	}
	if (route.Combo != nil && req.Route.Combo != nil && route.Combo.ID == req.Route.Combo.ID) ||
		(route.Combo == nil && req.Route.Combo == nil && route.Canonical() == req.Route.Canonical()) {
		return pending // the fallback is what just failed
	}
	fr := *req
	fr.Route = route
	fr.Body = capTokens(req.Body, req.Inbound, ef.MaxOutputTokens)
	// The fallback's answer says so in X-Switchyard-Warning too (10-gateway-api
	// §6.8): the dispatch sets the header from the request's warnings before it
	// commits the response.
	fr.Warnings = append(slices.Clip(req.Warnings), WarnEmergencyFallback)
	one := *st.set
	one.MaxAttempts = st.attempts + 1 // one attempt, no waits, no recursion
	out.w.Header().Set("X-Switchyard-Emergency-Fallback", "from="+req.Model+"; to="+ef.Target)
	// The fallback's targets are walked as the request's own, on its
	// one-attempt budget; the final answer speaks of the original request.
	set := st.set
	cause := ""
	if st.last != nil {
		cause = string(st.last.Reason) // why the request itself failed
	}
	st.req, st.set = &fr, &one
	before := st.attempts
	for _, t := range st.g.expand(st.snap, route, &fr) {
		if tr := st.walkTarget(t); tr.outcome == finished || st.attempts >= one.MaxAttempts {
			break
		}
	}
	st.req, st.set = req, set
	res := st.emergencyResult()
	if st.g.events != nil {
		e := events.Event{Type: events.EmergencyFallback, Model: req.Model, Target: ef.Target, Cause: cause}
		if st.log.Outcome != OutcomeEmergencyFallback {
			// Why the fallback failed too: its attempt's reason, or nothing
			// of it could be tried.
			e.Type, e.Cause = events.EmergencyFallbackFailed, exclUnavailable
			if st.attempts > before && st.last != nil {
				e.Cause = string(st.last.Reason)
			}
		}
		st.g.events.Record(e)
	}
	return res
}

// WarnEmergencyFallback marks an answer the emergency fallback gave.
const WarnEmergencyFallback = "emergency_fallback"

// emergencyResult reports and counts how the emergency fallback ended.
func (st *attemptState) emergencyResult() outcome {
	served := st.log.Status == 200 && (st.log.Outcome == OutcomeSuccess || st.log.Outcome == OutcomeFailover)
	if served {
		st.log.EmergencyFallback = true
		st.log.Outcome = OutcomeEmergencyFallback
		st.g.obs.EmergencyFallback(obsSuccess)
		return finished
	}
	st.g.obs.EmergencyFallback(obsFailure)
	// Tried and failed: the log marks it (its emergency_fallback filter finds
	// it), but the warning token is for answers the fallback gave.
	st.log.EmergencyFallback = true
	st.log.Warnings = slices.DeleteFunc(st.log.Warnings, func(w string) bool { return w == WarnEmergencyFallback })
	if !st.out.committed() {
		st.out.w.Header().Del("X-Switchyard-Emergency-Fallback")
		st.out.dropWarning(WarnEmergencyFallback)
	}
	if st.out.committed() || st.out.gone() {
		return finished
	}
	return pending
}

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
