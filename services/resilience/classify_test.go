package resilience

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var clsT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// clsEnv is a classifier on a fixed clock with counted warnings.
type clsEnv struct {
	c     *Classifier
	rules []ErrorRule
	max   time.Duration
	warns atomic.Int32
}

func newClsEnv(rules ...ErrorRule) *clsEnv {
	e := &clsEnv{rules: rules, max: 604_800_000 * time.Millisecond}
	e.c = NewClassifier(
		func() []ErrorRule { return e.rules },
		func() time.Duration { return e.max },
		func() time.Time { return clsT0 },
		func(string, ...any) { e.warns.Add(1) },
	)
	return e
}

// clsWant lists the outputs a case checks; zero fields are checked too.
type clsWant struct {
	row      int
	status   int
	reason   Reason
	scope    Scope
	shape    LockShape
	detail   string
	terminal string
	failover Failover
	breaker  bool
}

func clsCheck(t *testing.T, ex Explanation, w clsWant) {
	t.Helper()
	cl := ex.Classification
	if ex.ClassifierRow != w.row {
		t.Errorf("row = %d, want %d (rule %q)", ex.ClassifierRow, w.row, cl.RuleID)
	}
	if w.status != 0 && cl.Status != w.status {
		t.Errorf("status = %d, want %d", cl.Status, w.status)
	}
	if cl.Reason != w.reason {
		t.Errorf("reason = %q, want %q", cl.Reason, w.reason)
	}
	if cl.Scope != w.scope {
		t.Errorf("scope = %q, want %q", cl.Scope, w.scope)
	}
	if cl.LockScope != w.shape {
		t.Errorf("lockScope = %q, want %q", cl.LockScope, w.shape)
	}
	if cl.Detail != w.detail {
		t.Errorf("detail = %q, want %q", cl.Detail, w.detail)
	}
	if cl.Terminal != w.terminal {
		t.Errorf("terminal = %q, want %q", cl.Terminal, w.terminal)
	}
	if cl.Failover != w.failover {
		t.Errorf("failover = %q, want %q", cl.Failover, w.failover)
	}
	if cl.Breaker != w.breaker {
		t.Errorf("breaker = %v, want %v", cl.Breaker, w.breaker)
	}
}

func clsHTTP(status int, body string) Failure {
	return Failure{Provider: "openai", ProviderClass: Profile("apikey"), ConnectionID: "c1", Model: "gpt-4o",
		Status: status, Body: []byte(body), Phase: PhasePreCommit, At: clsT0}
}

func clsPMQ(f Failure) Failure {
	f.Provider, f.PerModelQuota = "gemini", true
	return f
}

func clsWithCode(f Failure, code, typ string) Failure {
	f.Code, f.Type = code, typ
	return f
}

// One row per classifier row (20-resilience §1.3), plus the ¹ variants.
func TestClassifierTableRows(t *testing.T) {
	idle := clsHTTP(200, "")
	idle.Transport = TransportIdleTimeout
	dial := clsHTTP(0, "")
	dial.Transport = TransportDial
	empty := clsHTTP(502, "")
	empty.Detail = DetailEmptyResponse

	tests := []struct {
		name string
		f    Failure
		want clsWant
	}{
		{"1 transport dial", dial, clsWant{row: 1, reason: ReasonTransient, scope: ScopeConnection, failover: FailoverNext, breaker: true}},
		{"1 pre-commit idle timeout", idle, clsWant{row: 1, reason: ReasonTransient, scope: ScopeConnection, failover: FailoverNext, breaker: true}},
		{"2 ban marker", clsHTTP(403, `{"error":{"message":"Your account has been suspended."}}`),
			clsWant{row: 2, reason: ReasonForbidden, scope: ScopeConnection, terminal: TerminalBanned, failover: FailoverNext}},
		{"2 ban marker on a perModelQuota provider", clsPMQ(clsHTTP(401, `account_deactivated`)),
			clsWant{row: 2, reason: ReasonForbidden, scope: ScopeConnection, terminal: TerminalBanned, failover: FailoverNext}},
		{"3 402", clsHTTP(402, ""),
			clsWant{row: 3, reason: ReasonCreditsExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: FailoverNext}},
		{"3 429 insufficient_quota code", clsWithCode(clsHTTP(429, ""), "insufficient_quota", "insufficient_quota"),
			clsWant{row: 3, reason: ReasonCreditsExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: FailoverNext}},
		{"3¹ 402 on a perModelQuota provider is timed", clsPMQ(clsHTTP(402, "")),
			clsWant{row: 3, reason: ReasonCreditsExhausted, scope: ScopeModel, shape: ShapeFamily, failover: FailoverNext}},
		{"4 retired model", clsHTTP(404, "The model gpt-3 has been deprecated"),
			clsWant{row: 4, reason: ReasonNotFound, scope: ScopeModel, shape: ShapeBase, detail: DetailRetiredModel, failover: FailoverNext}},
		{"4 410 retired", clsHTTP(410, "model retired"),
			clsWant{row: 4, reason: ReasonNotFound, scope: ScopeModel, shape: ShapeBase, detail: DetailRetiredModel, failover: FailoverNext}},
		{"5 context length", clsHTTP(400, "This model's maximum context length is 8192 tokens"),
			clsWant{row: 5, reason: ReasonCallerError, scope: ScopeNone, detail: DetailContextLength, failover: FailoverNextModel}},
		{"6 tool limit", clsHTTP(422, "too many tools"),
			clsWant{row: 6, reason: ReasonCallerError, scope: ScopeNone, detail: DetailToolLimit, failover: FailoverNextModel}},
		{"7 model access", clsWithCode(clsHTTP(404, ""), "model_not_found", ""),
			clsWant{row: 7, reason: ReasonNotFound, scope: ScopeModel, shape: ShapeBase, failover: FailoverNext}},
		{"8 daily quota", clsHTTP(429, "You exceeded your daily quota, try again tomorrow"),
			clsWant{row: 8, reason: ReasonQuotaExhausted, scope: ScopeConnection, detail: DetailDailyQuota, failover: FailoverNext}},
		{"8 daily quota keeps connection scope on a perModelQuota provider", clsPMQ(clsHTTP(429, "tokens per day (TPD)")),
			clsWant{row: 8, reason: ReasonQuotaExhausted, scope: ScopeConnection, detail: DetailDailyQuota, failover: FailoverNext}},
		{"9 quota", clsHTTP(403, "Quota exceeded for this account"),
			clsWant{row: 9, reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: FailoverNext}},
		{"9¹ quota on a perModelQuota provider", clsPMQ(clsHTTP(429, "free tier")),
			clsWant{row: 9, reason: ReasonQuotaExhausted, scope: ScopeModel, shape: ShapeFamily, failover: FailoverNext}},
		{"10 529", clsHTTP(529, ""),
			clsWant{row: 10, reason: ReasonModelCapacity, scope: ScopeModel, shape: ShapeExact, failover: FailoverNext}},
		{"10 503 overloaded", clsHTTP(503, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			clsWant{row: 10, reason: ReasonModelCapacity, scope: ScopeModel, shape: ShapeExact, failover: FailoverNext, breaker: true}},
		{"11 429", clsHTTP(429, ""),
			clsWant{row: 11, reason: ReasonRateLimit, scope: ScopeConnection, failover: FailoverNext}},
		{"11¹ 429 on a perModelQuota provider", clsPMQ(clsHTTP(429, "")),
			clsWant{row: 11, reason: ReasonRateLimit, scope: ScopeModel, shape: ShapeFamily, failover: FailoverNext}},
		{"12 400 rate marker", clsHTTP(400, "请求过于频繁"),
			clsWant{row: 12, reason: ReasonRateLimit, scope: ScopeConnection, failover: FailoverNext}},
		{"12¹ 422 rate marker on a perModelQuota provider", clsPMQ(clsHTTP(422, "high frequency")),
			clsWant{row: 12, reason: ReasonRateLimit, scope: ScopeModel, shape: ShapeFamily, failover: FailoverNext}},
		{"13 401", clsHTTP(401, "invalid api key"),
			clsWant{row: 13, reason: ReasonAuthError, scope: ScopeConnection, failover: FailoverNext}},
		{"14 403 rejection", clsHTTP(403, `{"error":{"type":"forbidden","message":"Request not allowed"}}`),
			clsWant{row: 14, reason: ReasonRequestRejected, scope: ScopeConnection, failover: FailoverNext}},
		{"15 other 403", clsHTTP(403, "region not supported"),
			clsWant{row: 15, reason: ReasonForbidden, scope: ScopeConnection, failover: FailoverNext}},
		{"15¹ other 403 on a perModelQuota provider", clsPMQ(clsHTTP(403, "")),
			clsWant{row: 15, reason: ReasonForbidden, scope: ScopeModel, shape: ShapeFamily, failover: FailoverNext}},
		{"16 other 404", clsHTTP(404, "page not found"),
			clsWant{row: 16, reason: ReasonNotFound, scope: ScopeModel, shape: ShapeBase, failover: FailoverNext}},
		{"17 408", clsHTTP(408, ""),
			clsWant{row: 17, reason: ReasonTransient, scope: ScopeConnection, failover: FailoverNext, breaker: true}},
		{"18 500 on a perModelQuota provider", clsPMQ(clsHTTP(500, "internal")),
			clsWant{row: 18, reason: ReasonServerError, scope: ScopeNone, failover: FailoverNext, breaker: true}},
		{"19 synthetic 502 empty_response", empty,
			clsWant{row: 19, reason: ReasonServerError, scope: ScopeModel, shape: ShapeExact, detail: DetailEmptyResponse, failover: FailoverNext}},
		{"20 500", clsHTTP(500, ""), clsWant{row: 20, reason: ReasonServerError, scope: ScopeConnection, failover: FailoverNext, breaker: true}},
		{"20 502", clsHTTP(502, ""), clsWant{row: 20, reason: ReasonServerError, scope: ScopeConnection, failover: FailoverNext, breaker: true}},
		{"20 503", clsHTTP(503, ""), clsWant{row: 20, reason: ReasonServerError, scope: ScopeConnection, failover: FailoverNext, breaker: true}},
		{"20 504", clsHTTP(504, ""), clsWant{row: 20, reason: ReasonServerError, scope: ScopeConnection, failover: FailoverNext, breaker: true}},
		{"20 other ≥ 500 is not a breaker status", clsHTTP(520, ""),
			clsWant{row: 20, reason: ReasonServerError, scope: ScopeConnection, failover: FailoverNext}},
		{"21 413", clsHTTP(413, "request entity too large"),
			clsWant{row: 21, reason: ReasonCallerError, scope: ScopeNone, detail: DetailPayloadTooLarge, failover: FailoverNextModel}},
		{"22 other 4xx", clsHTTP(400, `{"error":{"message":"messages: field required"}}`),
			clsWant{row: 22, reason: ReasonCallerError, scope: ScopeNone, detail: DetailMalformed, failover: FailoverStop}},
		{"22 409", clsHTTP(409, "conflict"),
			clsWant{row: 22, reason: ReasonCallerError, scope: ScopeNone, detail: DetailMalformed, failover: FailoverStop}},
		{"410 without a retired marker is any other 4xx", clsHTTP(410, "gone"),
			clsWant{row: 22, reason: ReasonCallerError, scope: ScopeNone, detail: DetailMalformed, failover: FailoverStop}},
	}
	e := newClsEnv()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := e.c.Explain(tc.f)
			if ex.Rule != nil {
				t.Fatalf("rule %q matched, want the classifier", ex.Rule.ID)
			}
			clsCheck(t, ex, tc.want)
		})
	}
}

// One row per marker constant: each marker alone, at a status where its row
// applies, reaches that row.
func TestClassifierMarkers(t *testing.T) {
	groups := []struct {
		name    string
		markers []string
		status  int
		row     int
	}{
		{"ban", banMarkers, 403, 2},
		{"credit", creditMarkers, 400, 3},
		{"retired", retiredMarkers, 404, 4},
		{"context", contextMarkers, 400, 5},
		{"tool-limit", toolLimitMarkers, 400, 6},
		{"model-access", modelAccessMarkers, 404, 7},
		{"daily", dailyMarkers, 429, 8},
		{"quota", quotaMarkers, 429, 9},
		{"overload", overloadMarkers, 503, 10},
		{"rate", rateMarkers, 400, 12},
		{"rejection", rejectionMarkers, 403, 14},
	}
	e := newClsEnv()
	for _, g := range groups {
		for _, m := range g.markers {
			t.Run(g.name+"/"+m, func(t *testing.T) {
				// Upper-cased in the body: matching is case-insensitive.
				f := clsHTTP(g.status, "error: "+strings.ToUpper(m)+" (see docs)")
				if got := e.c.Explain(f).ClassifierRow; got != g.row {
					t.Fatalf("row = %d, want %d", got, g.row)
				}
				// The same marker in the code field counts too.
				f = clsWithCode(clsHTTP(g.status, ""), m, "")
				if got := e.c.Explain(f).ClassifierRow; got != g.row {
					t.Fatalf("as code: row = %d, want %d", got, g.row)
				}
			})
		}
	}
	t.Run("tool-limit/maximum of N tools", func(t *testing.T) {
		if got := e.c.Explain(clsHTTP(400, "a maximum of 64 tools is supported")).ClassifierRow; got != 6 {
			t.Fatalf("row = %d, want 6", got)
		}
	})
	t.Run("tool-limit/array_above_max_length on tools", func(t *testing.T) {
		f := clsHTTP(400, `{"error":{"message":"Expected an array with maximum length 128","param":"tools","code":"array_above_max_length"}}`)
		f.Code = markerArrayAboveMaxLengthCode
		if got := e.c.Explain(f).ClassifierRow; got != 6 {
			t.Fatalf("row = %d, want 6", got)
		}
	})
	t.Run("tool-limit/array_above_max_length on another param is not", func(t *testing.T) {
		f := clsHTTP(400, `{"error":{"message":"Expected an array with maximum length 2048","param":"messages","code":"array_above_max_length"}}`)
		ex := e.c.Explain(f)
		if ex.ClassifierRow != 22 || ex.Classification.Failover != FailoverStop {
			t.Fatalf("row = %d failover %q, want 22/stop", ex.ClassifierRow, ex.Classification.Failover)
		}
	})
}

func TestMarkersAreLowerCase(t *testing.T) {
	all := [][]string{banMarkers, creditMarkers, retiredMarkers, contextMarkers, toolLimitMarkers,
		modelAccessMarkers, dailyMarkers, quotaMarkers, overloadMarkers, rateMarkers, rejectionMarkers,
		{markerArrayAboveMaxLengthCode, markerMaximumOfNTools, markerQuotaInsufficientCN, markerNoAccessCN,
			markerEndpointUnavailable, markerMonthlyUsageLimit, markerOrganizationQuotaCode, markerAccountQuotaCode,
			markerPlanLimitReachedCode, markerUpstreamModelUnavail, markerDailyFreeAllocation, markerNoAccessToModelCN,
			markerModelQuotaRemainingEq0}}
	for _, group := range all {
		for _, m := range group {
			if m == "" || m != strings.ToLower(m) {
				t.Errorf("marker %q must be non-empty lower case", m)
			}
		}
	}
}

// Restatement cases (20-resilience §1.1).
func TestRestatement(t *testing.T) {
	custom := func(status int, msg string) Failure {
		f := clsHTTP(status, `{"error":{"message":"`+msg+`"}}`)
		f.Provider, f.Custom, f.Message = "my-node", true, msg
		return f
	}
	agent := func(status int, msg string) Failure {
		f := clsHTTP(status, msg)
		f.Provider = "agentrouter"
		return f
	}
	hinted := custom(403, "用户额度不足")
	hinted.Header = http.Header{"Retry-After": {"7"}}
	tests := []struct {
		name        string
		f           Failure
		restated    string
		status      int
		clientRetry time.Duration
	}{
		{"custom node 403", custom(403, "用户额度不足"), "newapi-quota-misstatus", 429, time.Minute},
		{"custom node 400", custom(400, "当前分组额度不足"), "newapi-quota-misstatus", 429, time.Minute},
		{"agentrouter 403 in body only", agent(403, "额度不足"), "newapi-quota-misstatus", 429, time.Minute},
		{"upstream hint beats the default", hinted, "newapi-quota-misstatus", 429, 7 * time.Second},
		{"exclude marker keeps the status", agent(403, "无权访问: 额度不足"), "", 403, 0},
		{"permanent model denial is never restated", custom(403, "无权访问模型 gpt-x"), "", 403, 0},
		{"status outside fromStatuses", custom(401, "额度不足"), "", 401, 0},
		{"already 429", custom(429, "额度不足"), "", 429, 0},
		{"provider outside the family", func() Failure { f := agent(403, "额度不足"); f.Provider = "openai"; return f }(), "", 403, 0},
		{"no marker", custom(403, "forbidden"), "", 403, 0},
	}
	e := newClsEnv()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := e.c.Explain(tc.f)
			cl := ex.Classification
			if cl.Restated != tc.restated || cl.Status != tc.status {
				t.Fatalf("restated %q status %d, want %q %d", cl.Restated, cl.Status, tc.restated, tc.status)
			}
			if (ex.Restatement != nil) != (tc.restated != "") {
				t.Fatalf("explanation restatement = %v", ex.Restatement)
			}
			if cl.ClientRetryAfter != tc.clientRetry {
				t.Fatalf("ClientRetryAfter = %v, want %v", cl.ClientRetryAfter, tc.clientRetry)
			}
		})
	}
}

func TestRestatementsRegistryIsACopy(t *testing.T) {
	r := Restatements()
	if len(r) != 1 || r[0].ID != "newapi-quota-misstatus" || r[0].ToStatus != 429 || r[0].DefaultRetryAfterMs != 60_000 {
		t.Fatalf("registry = %+v", r)
	}
	r[0].Providers[0] = "changed"
	r[0].TextMarkers[0] = "changed"
	if Restatements()[0].Providers[0] != "agentrouter" || Restatements()[0].TextMarkers[0] != markerQuotaInsufficientCN {
		t.Fatal("Restatements returned the registry itself")
	}
}

func TestAcceptanceC1NewAPIQuotaMisstatus(t *testing.T) {
	e := newClsEnv()
	f := clsHTTP(403, `{"error":{"message":"用户额度不足, 剩余额度: ＄0.01","type":"new_api_error"}}`)
	f.Provider, f.Custom, f.Message = "my-node", true, "用户额度不足, 剩余额度: ＄0.01"
	ex := e.c.Explain(f)
	cl := ex.Classification
	clsCheck(t, ex, clsWant{status: 429, reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: FailoverNext})
	if cl.Restated != "newapi-quota-misstatus" || cl.RuleID != "newapi-user-quota" || ex.RuleOrigin != RuleOriginBuiltin {
		t.Fatalf("restated %q rule %q origin %q", cl.Restated, cl.RuleID, ex.RuleOrigin)
	}
	// No rule cooldownMs: the §4.1 ladder gives 3 000 ms at level 0; never terminal.
	if cl.CooldownMs != 0 || cl.Terminal != "" || cl.Ban || !cl.ScopeFixed {
		t.Fatalf("cooldownMs %d terminal %q ban %v fixed %v", cl.CooldownMs, cl.Terminal, cl.Ban, cl.ScopeFixed)
	}
	if cl.Hint != 0 || cl.ClientRetryAfter != 60*time.Second {
		t.Fatalf("hint %v clientRetryAfter %v, want 0 and 60s", cl.Hint, cl.ClientRetryAfter)
	}
}

func TestAcceptanceC2NewAPIModelDenied(t *testing.T) {
	e := newClsEnv()
	f := clsHTTP(403, "无权访问模型 gpt-x")
	f.Provider, f.Custom = "my-node", true
	ex := e.c.Explain(f)
	cl := ex.Classification
	clsCheck(t, ex, clsWant{status: 403, reason: ReasonForbidden, scope: ScopeModel, shape: ShapeExact, failover: FailoverNext})
	if cl.Restated != "" || cl.RuleID != "newapi-model-denied" || cl.CooldownMs != 21_600_000 || cl.Terminal != "" {
		t.Fatalf("restated %q rule %q cooldownMs %d terminal %q", cl.Restated, cl.RuleID, cl.CooldownMs, cl.Terminal)
	}
}

func TestAcceptanceC3OperatorRuleOn400(t *testing.T) {
	rule := ErrorRule{ID: "r_mistral1", Provider: "mistral", Status: 400, Match: "capacity exceeded for",
		Reason: ReasonModelCapacity, Scope: ScopeModel}
	f := clsHTTP(400, `{"object":"error","message":"Service tier capacity exceeded for this model.","type":"invalid_request_error"}`)
	f.Provider = "mistral"

	ex := newClsEnv(rule).c.Explain(f)
	clsCheck(t, ex, clsWant{reason: ReasonModelCapacity, scope: ScopeModel, shape: ShapeExact, failover: FailoverNext})
	if ex.Classification.RuleID != "r_mistral1" || ex.RuleOrigin != RuleOriginOperator || ex.RuleIndex != 0 || !ex.Classification.ScopeFixed {
		t.Fatalf("rule %q origin %q index %d", ex.Classification.RuleID, ex.RuleOrigin, ex.RuleIndex)
	}

	ex = newClsEnv().c.Explain(f)
	clsCheck(t, ex, clsWant{row: 22, reason: ReasonCallerError, scope: ScopeNone, detail: DetailMalformed, failover: FailoverStop})
}

func TestAcceptanceC4RetryAfterBeatsRateLimitReset(t *testing.T) {
	f := clsHTTP(429, "")
	f.Header = http.Header{
		"Retry-After":       {"20"},
		"X-Ratelimit-Reset": {strconv.FormatInt(clsT0.Add(90*time.Second).Unix(), 10)},
	}
	cl := newClsEnv().c.Classify(f)
	if cl.Hint != 20*time.Second || cl.HintSource != HintSourceHeader {
		t.Fatalf("hint %v from %q, want 20s from header", cl.Hint, cl.HintSource)
	}
}

type clsLocalErr struct{ code string }

func (e clsLocalErr) Error() string      { return "local limit " + e.code }
func (e clsLocalErr) LocalLimit() string { return e.code }

// B5/C5: the breaker flag matrix.
func TestBreakerFlagMatrix(t *testing.T) {
	reset := clsHTTP(0, "")
	reset.Transport = TransportReset
	postCommit := clsHTTP(0, "")
	postCommit.Transport, postCommit.Phase = TransportReset, PhasePostCommit
	post503 := clsHTTP(503, "")
	post503.Phase = PhasePostCommit
	abort := clsHTTP(503, "")
	abort.ClientAbort = true
	local := clsHTTP(429, "")
	local.LocalErr = fmt.Errorf("router: %w", clsLocalErr{"RATE_LIMIT_QUEUE_FULL"})
	empty := clsHTTP(502, "")
	empty.Detail = DetailEmptyResponse
	tls := clsHTTP(0, "")
	tls.Transport = TransportTLS
	headers := clsHTTP(0, "")
	headers.Transport = TransportHeadersTimeout

	tests := []struct {
		name string
		f    Failure
		want bool
	}{
		{"503", clsHTTP(503, ""), true},
		{"reset before headers", reset, true},
		{"tls", tls, true},
		{"headers timeout", headers, true},
		{"500", clsHTTP(500, ""), true},
		{"502", clsHTTP(502, ""), true},
		{"504", clsHTTP(504, ""), true},
		{"408", clsHTTP(408, ""), true},
		{"503 overloaded (model_capacity)", clsHTTP(503, "overloaded"), true},
		{"429", clsHTTP(429, ""), false},
		{"429 overloaded", clsHTTP(429, "overloaded"), false},
		{"529", clsHTTP(529, ""), false},
		{"401", clsHTTP(401, ""), false},
		{"402", clsHTTP(402, ""), false},
		{"403", clsHTTP(403, ""), false},
		{"400", clsHTTP(400, ""), false},
		{"413", clsHTTP(413, ""), false},
		{"context length", clsHTTP(400, "context_length_exceeded"), false},
		{"client abort", abort, false},
		{"client abort 499", clsHTTP(499, ""), false},
		{"local limit RATE_LIMIT_QUEUE_FULL", local, false},
		{"empty_response", empty, false},
		{"post-commit cut", postCommit, false},
		{"post-commit 503", post503, false},
	}
	e := newClsEnv()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.c.Classify(tc.f).Breaker; got != tc.want {
				t.Fatalf("breaker = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBreakerFlagSameForRules(t *testing.T) {
	rules := []ErrorRule{
		{ID: "r1", Provider: "openai", Status: 503, Reason: ReasonServerError, Scope: ScopeConnection},
		{ID: "r2", Provider: "openai", Status: 429, Reason: ReasonModelCapacity, Scope: ScopeModel},
		{ID: "r3", Provider: "openai", Status: 502, Reason: ReasonQuotaExhausted, Scope: ScopeConnection},
	}
	e := newClsEnv(rules...)
	for _, tc := range []struct {
		status int
		want   bool
	}{{503, true}, {429, false}, {502, false}} {
		cl := e.c.Classify(clsHTTP(tc.status, ""))
		if cl.RuleID == "" || cl.Breaker != tc.want {
			t.Errorf("status %d: rule %q breaker %v, want %v", tc.status, cl.RuleID, cl.Breaker, tc.want)
		}
	}
}

func TestAcceptanceC6HintCappedWithOneWarn(t *testing.T) {
	e := newClsEnv()
	f := clsHTTP(429, "")
	f.Header = http.Header{"Retry-After": {"864000"}}
	cl := e.c.Classify(f)
	if cl.Hint.Milliseconds() != 604_800_000 || cl.HintSource != HintSourceHeader {
		t.Fatalf("hint = %d ms from %q, want 604800000 from header", cl.Hint.Milliseconds(), cl.HintSource)
	}
	if n := e.warns.Load(); n != 1 {
		t.Fatalf("warn calls = %d, want 1", n)
	}
}

func TestAcceptanceC7UpstreamQueueFullTextIsRateLimit(t *testing.T) {
	f := clsHTTP(429, `{"error":{"code":"RATE_LIMIT_QUEUE_FULL","message":"queue full"}}`)
	f.Code = "RATE_LIMIT_QUEUE_FULL"
	ex := newClsEnv().c.Explain(f)
	clsCheck(t, ex, clsWant{row: 11, reason: ReasonRateLimit, scope: ScopeConnection, failover: FailoverNext})
}

func TestAcceptanceC8ToolLimit(t *testing.T) {
	msg := "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 200 instead."
	f := clsHTTP(400, `{"error":{"message":"`+msg+`","type":"invalid_request_error","param":"tools","code":"array_above_max_length"}}`)
	f.Code, f.Type, f.Message, f.ToolCount = "array_above_max_length", "invalid_request_error", msg, 200
	ex := newClsEnv().c.Explain(f)
	clsCheck(t, ex, clsWant{row: 6, reason: ReasonCallerError, scope: ScopeNone, detail: DetailToolLimit, failover: FailoverNextModel})
	cl := ex.Classification
	if cl.ToolLimit != 128 || cl.CooldownMs != 0 || cl.Terminal != "" || cl.Hint != 0 || cl.RuleID != "" {
		t.Fatalf("toolLimit %d cooldownMs %d terminal %q hint %v rule %q", cl.ToolLimit, cl.CooldownMs, cl.Terminal, cl.Hint, cl.RuleID)
	}
}

func TestToolLimitParsing(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"Invalid 'tools': array too long. Expected an array with maximum length 128, but got 200", 128},
		{"This model supports a maximum of 64 tools", 64},
		{"tools: array too long (limit 32)", 32},
		{"you may pass at most 20 tools", 20},
		{"too many tools", 0},
		{"maximum length 0", 0},
	}
	for _, tc := range tests {
		if got := parseToolLimit(tc.text); got != tc.want {
			t.Errorf("parseToolLimit(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestShortCircuits(t *testing.T) {
	// A rule that would match everything below if it were consulted.
	e := newClsEnv(ErrorRule{ID: "catch", Provider: "openai", Status: 429, Reason: ReasonQuotaExhausted, Scope: ScopeConnection})

	abort := clsHTTP(429, "rate limit")
	abort.ClientAbort = true
	abort.Header = http.Header{"Retry-After": {"5"}}
	cl := e.c.Classify(abort)
	if cl.Reason != ReasonClientAbort || cl.Scope != ScopeNone || cl.Failover != FailoverStop || cl.RuleID != "" || cl.Hint != 0 || cl.Breaker {
		t.Fatalf("client abort: %+v", cl)
	}
	cl = e.c.Classify(clsHTTP(499, ""))
	if cl.Reason != ReasonClientAbort || cl.Failover != FailoverStop {
		t.Fatalf("499: %+v", cl)
	}

	local := clsHTTP(429, "")
	local.LocalErr = fmt.Errorf("admission: %w", clsLocalErr{"RATE_LIMIT_QUEUE_FULL"})
	cl = e.c.Classify(local)
	if cl.Reason != ReasonLocalLimit || cl.Detail != "RATE_LIMIT_QUEUE_FULL" || cl.Scope != ScopeNone ||
		cl.Failover != FailoverNext || cl.RuleID != "" || cl.Breaker || cl.Terminal != "" {
		t.Fatalf("local limit: %+v", cl)
	}
	// An untyped limiter error is still local (never read as text).
	local.LocalErr = errors.New("CONNECTION_SLOTS_BUSY")
	if cl = e.c.Classify(local); cl.Reason != ReasonLocalLimit || cl.Detail != "" {
		t.Fatalf("untyped local limit: %+v", cl)
	}
	// client_abort wins over local_limit.
	local.ClientAbort = true
	if cl = e.c.Classify(local); cl.Reason != ReasonClientAbort {
		t.Fatalf("abort + local: %+v", cl)
	}
}

func TestPostCommitNeverFailsOver(t *testing.T) {
	f := clsHTTP(503, "")
	f.Phase = PhasePostCommit
	cl := newClsEnv().c.Classify(f)
	if cl.Reason != ReasonServerError || cl.Failover != FailoverStop || cl.Breaker {
		t.Fatalf("post-commit 503: %+v", cl)
	}
}

func TestUnsetPhaseCountsAsPreCommit(t *testing.T) {
	f := clsHTTP(503, "")
	f.Phase = ""
	if cl := newClsEnv().c.Classify(f); !cl.Breaker || cl.Failover != FailoverNext {
		t.Fatalf("503 without phase: %+v", cl)
	}
}

func TestDetailOfTheFailureIsKept(t *testing.T) {
	f := clsHTTP(0, "")
	f.Transport, f.Detail = TransportIdleTimeout, "watchdog"
	if cl := newClsEnv().c.Classify(f); cl.Reason != ReasonTransient || cl.Detail != "watchdog" {
		t.Fatalf("got %+v", cl)
	}
}

func TestClassifyIsPureAndConcurrent(t *testing.T) {
	e := newClsEnv(ErrorRule{ID: "r1", Provider: "mistral", Status: 400, Match: "capacity", Reason: ReasonModelCapacity, Scope: ScopeModel})
	inputs := []Failure{clsHTTP(429, "quota exceeded"), clsHTTP(503, ""), clsHTTP(400, "context window"), clsPMQ(clsHTTP(429, ""))}
	want := make([]Classification, len(inputs))
	for i, f := range inputs {
		want[i] = e.c.Classify(f)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := (g + i) % len(inputs)
				if got := e.c.Classify(inputs[k]); got != want[k] {
					t.Errorf("input %d: %+v != %+v", k, got, want[k])
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestNewClassifierNilDependencies(t *testing.T) {
	c := NewClassifier(nil, nil, nil, nil)
	f := clsHTTP(429, "")
	f.At = time.Time{}
	f.Header = http.Header{"Retry-After": {"864000"}}
	cl := c.Classify(f)
	if cl.Reason != ReasonRateLimit || cl.Hint != 604_800_000*time.Millisecond {
		t.Fatalf("got %+v", cl)
	}
}

func TestOpenAIRateLimitReachedIsRateLimit(t *testing.T) {
	c := NewClassifier(nil, nil, nil, nil)
	cl := c.Classify(Failure{Provider: "openai", ProviderClass: "apikey", Status: 429, Phase: PhasePreCommit,
		Message: "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29900."})
	if cl.Reason != ReasonRateLimit {
		t.Fatalf("reason %s, want rate_limit", cl.Reason)
	}
}
