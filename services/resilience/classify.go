package resilience

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Details of a classification (Classification.Detail).
const (
	DetailRetiredModel    = "retired_model"
	DetailContextLength   = "context_length"
	DetailToolLimit       = "tool_limit"
	DetailDailyQuota      = "daily_quota"
	DetailMalformed       = "malformed"
	DetailPayloadTooLarge = "payload_too_large"
	// DetailEmptyResponse marks the synthetic 502 of a 2xx with an empty or
	// unparsable body; it never counts toward the breaker.
	DetailEmptyResponse = "empty_response"
)

// LocalLimitError is implemented by Switchyard's own limiter errors
// (RATE_LIMIT_QUEUE_FULL, RATE_LIMIT_QUEUE_TIMEOUT,
// RATE_LIMIT_EXECUTION_TIMEOUT, CONNECTION_SLOTS_BUSY …). The classifier
// finds it with errors.As, never by text: an upstream body quoting one of
// those codes is an upstream failure like any other (C7).
type LocalLimitError interface {
	error
	// LocalLimit returns the error code, e.g. "RATE_LIMIT_QUEUE_FULL".
	LocalLimit() string
}

// classifierDefaultMaxHint is connectionCooldown.maxRetryHintMs's default (7 days),
// used when the injected setting is missing or not positive.
const classifierDefaultMaxHint = 604_800_000 * time.Millisecond

// classifierMinHint floors every upstream hint (20-resilience §1.5).
const classifierMinHint = time.Second

// Classifier turns one failed attempt into one decision (20-resilience §1):
// short-circuits, status restatement, error rules (operator, then built-in),
// the built-in classifier, breaker flag, failover, retry hint. It holds no
// state: Classify is a pure function of the failure and the injected
// settings, safe for concurrent use.
type Classifier struct {
	rules        func() []ErrorRule
	maxRetryHint func() time.Duration
	now          func() time.Time
	warn         func(msg string, args ...any)
}

// NewClassifier returns a classifier. rules returns the operator rules in
// stored order (the built-ins are appended by the classifier); maxRetryHint
// returns connectionCooldown.maxRetryHintMs; now is the clock, used for
// absolute hints when the failure carries no At; warn logs one line per
// clamped hint. Any of them may be nil (no rules, 7 days, time.Now, silent).
func NewClassifier(rules func() []ErrorRule, maxRetryHint func() time.Duration, now func() time.Time, warn func(msg string, args ...any)) *Classifier {
	if rules == nil {
		rules = func() []ErrorRule { return nil }
	}
	if maxRetryHint == nil {
		maxRetryHint = func() time.Duration { return classifierDefaultMaxHint }
	}
	if now == nil {
		now = time.Now
	}
	if warn == nil {
		warn = func(string, ...any) {}
	}
	return &Classifier{rules: rules, maxRetryHint: maxRetryHint, now: now, warn: warn}
}

// Explanation is a classification with how it was reached, for the classify
// dry run (POST /api/resilience/classify) and the tests.
type Explanation struct {
	Classification Classification
	// Restatement is the restatement entry that rewrote the status, nil when none.
	Restatement *Restatement
	// Rule is the matching error rule, nil when the classifier decided.
	Rule *ErrorRule
	// RuleOrigin is RuleOriginOperator or RuleOriginBuiltin, "" when no rule matched.
	RuleOrigin string
	// RuleIndex is the rule's position in its own list (operator rules in
	// stored order, or BuiltinRules()), -1 when no rule matched.
	RuleIndex int
	// ClassifierRow is the row (1–22) of the built-in classifier table that
	// decided, 0 for a rule or a short-circuit.
	ClassifierRow int
}

// Classify classifies one failed attempt.
func (c *Classifier) Classify(f Failure) Classification {
	return c.Explain(f).Classification
}

// Explain classifies one failed attempt and says which restatement, rule or
// classifier row decided.
func (c *Classifier) Explain(f Failure) Explanation {
	ex := Explanation{RuleIndex: -1}
	cl := &ex.Classification
	cl.Status = f.Status

	// Short-circuits: never restated, never matched against rules or text.
	if f.ClientAbort || f.Status == 499 {
		cl.Reason, cl.Scope, cl.Failover = ReasonClientAbort, ScopeNone, FailoverStop
		return ex
	}
	if f.LocalErr != nil {
		cl.Reason, cl.Scope, cl.Failover = ReasonLocalLimit, ScopeNone, FailoverNext
		var le LocalLimitError
		if errors.As(f.LocalErr, &le) {
			cl.Detail = le.LocalLimit()
		}
		return ex
	}

	// Stage 1: restatement.
	ruleText := strings.ToLower(f.Message + " " + string(f.Body))
	var restated *Restatement
	if r := restateFailure(&f, ruleText); r != nil {
		restated = r
		cl.Status, cl.Restated = r.ToStatus, r.ID
		cp := cloneRestatement(*r)
		ex.Restatement = &cp
	}
	status := cl.Status
	transport := status == 0 || (f.Transport != "" && status < 400)
	cl.Detail = f.Detail
	doc := clsDecodeJSON(f.Body)
	hay := strings.ToLower(f.Code + " " + f.Type + " " + f.Message + " " + string(f.Body))

	// Stage 2: rules, then stage 3: the built-in classifier.
	if m, ok := matchErrorRule(c.rules(), &f, status, ruleText); ok {
		ex.Rule, ex.RuleOrigin, ex.RuleIndex = &m.rule, m.origin, m.index
		applyErrorRule(cl, m.rule, status)
		if cl.Reason == ReasonCallerError {
			cl.Detail = callerErrorDetail(status, hay, &f, doc)
		}
	} else {
		ex.ClassifierRow = classifyBuiltin(cl, &f, status, transport, hay, doc)
	}

	if cl.Detail == DetailToolLimit {
		cl.ToolLimit = parseToolLimit(f.Message + " " + string(f.Body))
	}

	postCommit := f.Phase == PhasePostCommit
	cl.Breaker = classifyBreakerFlag(status, transport, cl.Reason, cl.Detail, f.Detail, postCommit)
	cl.Failover = classifyFailover(cl.Reason, cl.Detail)
	if postCommit {
		// Commit is the point of no return (BD 15): the attempt loop cannot
		// move on, whatever the reason says.
		cl.Failover = FailoverStop
	}

	// Retry hint, floored and capped.
	now := f.At
	if now.IsZero() {
		now = c.now()
	}
	hint, src := parseRetryHint(f.Header, f.Body, doc, now)
	if hint <= 0 && f.Message != "" && !strings.Contains(string(f.Body), f.Message) {
		if d, ok := hintFromText(f.Message, now); ok {
			hint, src = d, HintSourceBodyText
		}
	}
	if hint > 0 {
		hint = max(hint, classifierMinHint)
		limit := c.maxRetryHint()
		if limit <= 0 {
			limit = classifierDefaultMaxHint
		}
		if hint > limit {
			c.warn("resilience: upstream retry hint clamped to connectionCooldown.maxRetryHintMs",
				"provider", f.Provider, "connection", f.ConnectionID, "source", src,
				"hintMs", hint.Milliseconds(), "maxRetryHintMs", limit.Milliseconds())
			hint = limit
		}
		cl.Hint, cl.HintSource = hint, src
	}

	// The client's Retry-After if this becomes the final answer.
	if restated != nil {
		cl.ClientRetryAfter = time.Duration(restated.DefaultRetryAfterMs) * time.Millisecond
		if cl.Hint > 0 {
			cl.ClientRetryAfter = cl.Hint
		}
	}
	return ex
}

// applyErrorRule copies a matching rule's decision: its reason and scope are
// final, its cooldownMs replaces the penalty's base, and only ban: true or
// credits_exhausted on a connection scope make a terminal state.
func applyErrorRule(cl *Classification, r ErrorRule, status int) {
	cl.RuleID = r.ID
	cl.Reason, cl.Scope, cl.ScopeFixed = r.Reason, r.Scope, true
	cl.Ban = r.Ban
	if r.Scope == ScopeModel {
		switch r.LockScope {
		case ShapeFamily, ShapeBase, ShapeExact:
			cl.LockScope = r.LockScope
		default:
			cl.LockScope = LockShapeForStatus(status)
		}
	}
	if r.CooldownMs != nil && *r.CooldownMs > 0 {
		cl.CooldownMs = *r.CooldownMs
	}
	switch {
	case r.Ban && r.Scope == ScopeConnection:
		cl.Terminal = TerminalBanned
	case r.Reason == ReasonCreditsExhausted && r.Scope == ScopeConnection:
		cl.Terminal = TerminalCreditsExhausted
	}
}

// classifyBuiltin applies the built-in classifier table (20-resilience §1.3),
// first applicable row wins, and returns the row number. hay is the
// lower-cased code + type + message + body.
func classifyBuiltin(cl *Classification, f *Failure, status int, transport bool, hay string, doc any) int {
	b := builtinRows{cl: cl, f: f, status: status, hay: hay}
	if row := b.markerRows(transport, doc); row != 0 {
		return row
	}
	return b.statusRows()
}

// builtinRows is one failure being matched against the built-in table.
type builtinRows struct {
	cl     *Classification
	f      *Failure
	status int
	hay    string
}

func (b builtinRows) is4xx() bool               { return b.status >= 400 && b.status <= 499 }
func (b builtinRows) in(statuses ...int) bool   { return slices.Contains(statuses, b.status) }
func (b builtinRows) has(markers []string) bool { return containsAnyMarker(b.hay, markers) }

// set decides reason and scope (and the lock shape of a model scope).
func (b builtinRows) set(r Reason, s Scope, shape LockShape) {
	b.cl.Reason, b.cl.Scope = r, s
	if s == ScopeModel {
		b.cl.LockScope = shape
	}
}

// connOrFamily is the ¹ rows: connection, but the model's quota family on a
// perModelQuota provider.
func (b builtinRows) connOrFamily(r Reason) {
	if b.f.PerModelQuota {
		b.set(r, ScopeModel, ShapeFamily)
	} else {
		b.set(r, ScopeConnection, "")
	}
}

// markerRows are rows 1–10: transport failures and what the error text
// says (bans, credits, retired models, context and tool limits, model
// access, quotas, overload); 0 when none applies.
func (b builtinRows) markerRows(transport bool, doc any) int {
	switch {
	case transport:
		b.set(ReasonTransient, ScopeConnection, "")
		return 1
	case b.is4xx() && b.has(banMarkers):
		b.set(ReasonForbidden, ScopeConnection, "")
		b.cl.Terminal = TerminalBanned
		return 2
	case b.status == 402 || (b.is4xx() && b.has(creditMarkers)):
		if b.f.PerModelQuota {
			// A passthrough/per-model provider's billing refusal is usually
			// about one model: timed, never terminal.
			b.set(ReasonCreditsExhausted, ScopeModel, ShapeFamily)
		} else {
			b.set(ReasonCreditsExhausted, ScopeConnection, "")
			b.cl.Terminal = TerminalCreditsExhausted
		}
		return 3
	case b.in(404, 410) && b.has(retiredMarkers):
		b.set(ReasonNotFound, ScopeModel, ShapeBase)
		b.cl.Detail = DetailRetiredModel
		return 4
	case b.is4xx() && b.has(contextMarkers):
		b.set(ReasonCallerError, ScopeNone, "")
		b.cl.Detail = DetailContextLength
		return 5
	case b.in(400, 413, 422) && hasToolLimitMarker(b.hay, b.f, doc):
		b.set(ReasonCallerError, ScopeNone, "")
		b.cl.Detail = DetailToolLimit
		return 6
	case b.in(400, 403, 404, 422) && b.has(modelAccessMarkers):
		b.set(ReasonNotFound, ScopeModel, ShapeBase)
		return 7
	case b.in(400, 403, 429) && b.has(dailyMarkers):
		b.set(ReasonQuotaExhausted, ScopeConnection, "")
		b.cl.Detail = DetailDailyQuota
		return 8
	// "Rate limit reached for … per min" is a rate limit, not a used-up quota.
	case b.in(400, 403, 429) && containsAnyMarker(strings.ReplaceAll(b.hay, "rate limit reached", ""), quotaMarkers):
		b.connOrFamily(ReasonQuotaExhausted)
		return 9
	case b.status == 529 || (b.in(429, 500, 502, 503) && b.has(overloadMarkers)):
		b.set(ReasonModelCapacity, ScopeModel, ShapeExact)
		return 10
	}
	return 0
}

// statusRows are rows 11–22: what the status decides, with the
// rate-limit and refusal markers of rows 12 and 14 and the empty answer of
// row 19.
func (b builtinRows) statusRows() int {
	switch {
	case b.status == 429:
		b.connOrFamily(ReasonRateLimit)
		return 11
	case b.in(400, 422) && b.has(rateMarkers):
		b.connOrFamily(ReasonRateLimit)
		return 12
	case b.status == 401:
		b.set(ReasonAuthError, ScopeConnection, "")
		return 13
	case b.status == 403 && b.has(rejectionMarkers):
		b.set(ReasonRequestRejected, ScopeConnection, "")
		return 14
	case b.status == 403:
		b.connOrFamily(ReasonForbidden)
		return 15
	case b.status == 404:
		b.set(ReasonNotFound, ScopeModel, ShapeBase)
		return 16
	case b.status == 408:
		b.set(ReasonTransient, ScopeConnection, "")
		return 17
	case b.status == 500 && b.f.PerModelQuota:
		b.set(ReasonServerError, ScopeNone, "")
		return 18
	case b.f.Detail == DetailEmptyResponse:
		b.set(ReasonServerError, ScopeModel, ShapeExact)
		b.cl.Detail = DetailEmptyResponse
		return 19
	case b.status == 413:
		b.set(ReasonCallerError, ScopeNone, "")
		b.cl.Detail = DetailPayloadTooLarge
		return 21
	case b.is4xx():
		b.set(ReasonCallerError, ScopeNone, "")
		b.cl.Detail = DetailMalformed
		return 22
	default:
		// 5xx, and anything outside 4xx/5xx that still arrived as a failure
		// (a 3xx the gateway does not follow, a 2xx carrying an in-band error
		// without a code): an upstream fault.
		b.set(ReasonServerError, ScopeConnection, "")
		return 20
	}
}

// callerErrorDetail names a caller_error that a rule decided, by the same
// tests as classifier rows 5, 6 and 21; anything else is malformed.
func callerErrorDetail(status int, hay string, f *Failure, doc any) string {
	switch {
	case status >= 400 && status <= 499 && containsAnyMarker(hay, contextMarkers):
		return DetailContextLength
	case (status == 400 || status == 413 || status == 422) && hasToolLimitMarker(hay, f, doc):
		return DetailToolLimit
	case status == 413:
		return DetailPayloadTooLarge
	}
	return DetailMalformed
}

var (
	toolsMaximumOfRe = regexp.MustCompile(markerMaximumOfNTools)
	// toolLimitNumberRes find the limit N in a tool-limit message, first hit wins.
	toolLimitNumberRes = []*regexp.Regexp{
		regexp.MustCompile(`(?i)maximum of (\d+) tools`),
		regexp.MustCompile(`(?i)maximum length (?:of )?(\d+)`),
		regexp.MustCompile(`(?i)at most (\d+) tools`),
		regexp.MustCompile(`(?i)array too long[^0-9]{0,200}?(\d+)`),
	}
)

// hasToolLimitMarker implements row 6's markers. array_above_max_length
// counts only for the tools parameter: the envelope's param when the body
// names one, else a mention of tools in the text.
func hasToolLimitMarker(hay string, f *Failure, doc any) bool {
	if containsAnyMarker(hay, toolLimitMarkers) || toolsMaximumOfRe.MatchString(hay) {
		return true
	}
	if !strings.Contains(hay, markerArrayAboveMaxLengthCode) {
		return false
	}
	if param, ok := clsErrorParam(doc); ok {
		return strings.EqualFold(strings.TrimSpace(param), "tools")
	}
	return strings.Contains(strings.ToLower(f.Message), "tools")
}

// clsErrorParam returns the param of an OpenAI error envelope.
func clsErrorParam(doc any) (string, bool) {
	for _, o := range clsJSONObjects(doc) {
		if e, ok := o["error"].(map[string]any); ok {
			if p, ok := e["param"].(string); ok {
				return p, true
			}
		}
		if p, ok := o["param"].(string); ok {
			return p, true
		}
	}
	return "", false
}

// parseToolLimit returns the tool limit a tool-limit error states, 0 when it
// states none (the caller then infers one from the request, §13.2).
func parseToolLimit(text string) int {
	for _, re := range toolLimitNumberRes {
		m := re.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 && n <= 1_000_000 {
			return n
		}
	}
	return 0
}

// classifyBreakerFlag is the breaker flag of 20-resilience §1.4, the same for rules
// and classifier: an upstream that failed to serve (timeouts, 5xx, resets)
// before commit. 429, auth, billing and caller errors say nothing about the
// provider's health; an empty 2xx is the model's doing, not the provider's.
func classifyBreakerFlag(status int, transport bool, r Reason, detail, inputDetail string, postCommit bool) bool {
	if postCommit || detail == DetailEmptyResponse || inputDetail == DetailEmptyResponse {
		return false
	}
	switch status {
	case 408, 500, 502, 503, 504:
	default:
		if !transport {
			return false
		}
	}
	switch r {
	case ReasonTransient, ReasonServerError, ReasonModelCapacity:
		return true
	}
	return false
}

// classifyFailover is the failover column of 20-resilience §1.4. A caller error
// that another model may accept (context, tools, payload size) skips targets
// of the same model; a malformed request stops.
func classifyFailover(r Reason, detail string) Failover {
	switch r {
	case ReasonClientAbort:
		return FailoverStop
	case ReasonCallerError:
		switch detail {
		case DetailContextLength, DetailToolLimit, DetailPayloadTooLarge:
			return FailoverNextModel
		}
		return FailoverStop
	}
	return FailoverNext
}
