package resilience

import (
	"net/http"
	"slices"
	"strings"
)

// Rule origins, as the classify dry run reports them.
const (
	RuleOriginOperator = "operator"
	RuleOriginBuiltin  = "builtin"
)

// builtinRule is one entry of the built-in registry. ErrorRule is what the
// admin API lists; headerEquals makes the header test an equality (trimmed,
// case-insensitive) instead of a substring, for "remaining = 0" tests that a
// substring "0" would also find in "10" or "100".
type builtinRule struct {
	ErrorRule
	headerEquals bool
}

func ruleCooldown(ms int64) *int64 { return &ms }

// builtinRules is the built-in half of the rule registry (20-resilience §1.2),
// evaluated after the operator rules, first match wins. A table row with
// several statuses, headers or match alternatives is one rule each, all with
// the row's id.
var builtinRules = []builtinRule{
	{ErrorRule: ErrorRule{ID: "opencode-endpoint-unavailable", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 400,
		Match: markerEndpointUnavailable, Reason: ReasonModelCapacity, Scope: ScopeModel, CooldownMs: ruleCooldown(300_000)}},
	{ErrorRule: ErrorRule{ID: "opencode-endpoint-unavailable", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 429,
		Match: markerEndpointUnavailable, Reason: ReasonModelCapacity, Scope: ScopeModel, CooldownMs: ruleCooldown(300_000)}},
	{ErrorRule: ErrorRule{ID: "opencode-monthly-limit", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 429,
		Match: markerMonthlyUsageLimit, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}},
	{ErrorRule: ErrorRule{ID: "opencode-remaining-zero", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 429,
		Header: &RuleHeader{Name: "x-ratelimit-remaining-requests", Contains: "0"}, Reason: ReasonQuotaExhausted, Scope: ScopeConnection},
		headerEquals: true},
	{ErrorRule: ErrorRule{ID: "opencode-remaining-zero", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 429,
		Header: &RuleHeader{Name: "x-ratelimit-remaining-tokens", Contains: "0"}, Reason: ReasonQuotaExhausted, Scope: ScopeConnection},
		headerEquals: true},
	{ErrorRule: ErrorRule{ID: "opencode-org-quota", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 429,
		Match: markerOrganizationQuotaCode, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}},
	{ErrorRule: ErrorRule{ID: "opencode-org-quota", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 429,
		Match: markerAccountQuotaCode, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}},
	{ErrorRule: ErrorRule{ID: "opencode-org-quota", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 429,
		Match: markerPlanLimitReachedCode, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}},
	{ErrorRule: ErrorRule{ID: "opencode-model-unavailable", Provider: "opencode", Providers: ruleOpenCodeFamily, Status: 400,
		Match: markerUpstreamModelUnavail, Reason: ReasonModelCapacity, Scope: ScopeModel, CooldownMs: ruleCooldown(3_600_000)}},
	{ErrorRule: ErrorRule{ID: "minimax-model-quota", Provider: "minimax", Status: 429,
		Header: &RuleHeader{Name: "x-model-quota-remaining", Contains: markerModelQuotaRemainingEq0}, Reason: ReasonQuotaExhausted, Scope: ScopeModel}},
	{ErrorRule: ErrorRule{ID: "cloudflare-daily-free", Provider: "cloudflare-ai", Status: 429,
		Match: markerDailyFreeAllocation, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}},
	{ErrorRule: ErrorRule{ID: "openrouter-402", Provider: "openrouter", Status: 402,
		Reason: ReasonQuotaExhausted, Scope: ScopeConnection, CooldownMs: ruleCooldown(120_000)}},
	{ErrorRule: ErrorRule{ID: "newapi-user-quota", Provider: "agentrouter", Providers: ruleNewAPIFamily, Status: 429,
		Match: markerQuotaInsufficientCN, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}},
	// The lock is capped by modelLockout.maxCooldownMs when applied (§7).
	{ErrorRule: ErrorRule{ID: "newapi-model-denied", Provider: "agentrouter", Providers: ruleNewAPIFamily, Status: 403,
		Match: markerNoAccessToModelCN, Reason: ReasonForbidden, Scope: ScopeModel, LockScope: ShapeExact, CooldownMs: ruleCooldown(21_600_000)}},
}

// BuiltinRules returns a copy of the built-in error rules in evaluation order
// (after the operator rules). Rules covering a provider family list it in
// Providers (CustomNodesProvider = every custom node); Provider names the
// family's first member. The opencode-remaining-zero header test is an
// equality with "0", not a substring.
func BuiltinRules() []ErrorRule {
	out := make([]ErrorRule, len(builtinRules))
	for i, b := range builtinRules {
		out[i] = cloneRule(b.ErrorRule)
	}
	return out
}

func cloneRule(r ErrorRule) ErrorRule {
	r.BuiltIn = true
	r.Providers = slices.Clone(r.Providers)
	if r.Header != nil {
		h := *r.Header
		r.Header = &h
	}
	if r.CooldownMs != nil {
		r.CooldownMs = ruleCooldown(*r.CooldownMs)
	}
	if r.Enabled != nil {
		e := *r.Enabled
		r.Enabled = &e
	}
	return r
}

// errorRuleMatch is the rule that decided a failure.
type errorRuleMatch struct {
	rule   ErrorRule
	origin string // RuleOriginOperator or RuleOriginBuiltin
	index  int    // position in its own list
}

// matchErrorRule returns the first matching rule of the registry (operator rules
// in stored order, then built-ins) or ok=false. text is the lower-cased
// message + " " + body; status is the restated status.
func matchErrorRule(operator []ErrorRule, f *Failure, status int, text string) (errorRuleMatch, bool) {
	for i := range operator {
		if ruleMatches(&operator[i], false, f, status, text) {
			return errorRuleMatch{rule: operator[i], origin: RuleOriginOperator, index: i}, true
		}
	}
	for i := range builtinRules {
		b := &builtinRules[i]
		if ruleMatches(&b.ErrorRule, b.headerEquals, f, status, text) {
			return errorRuleMatch{rule: cloneRule(b.ErrorRule), origin: RuleOriginBuiltin, index: i}, true
		}
	}
	return errorRuleMatch{}, false
}

// ruleMatches applies one rule. A disabled rule, or one whose reason or scope
// is outside the vocabulary a rule may use (the admin API validates; this
// keeps a hand-edited row from producing an unknown outcome), never matches.
func ruleMatches(r *ErrorRule, headerEquals bool, f *Failure, status int, text string) bool {
	if r.Enabled != nil && !*r.Enabled {
		return false
	}
	if r.Status != status || !ruleReasonValid(r.Reason) || !ruleScopeValid(r.Scope) {
		return false
	}
	if len(r.Providers) > 0 {
		if !ruleProviderListed(r.Providers, f) {
			return false
		}
	} else if r.Provider == "" || !strings.EqualFold(strings.TrimSpace(r.Provider), strings.TrimSpace(f.Provider)) {
		return false
	}
	if r.Match != "" && !strings.Contains(text, strings.ToLower(r.Match)) {
		return false
	}
	if r.Header != nil && !ruleHeaderMatches(r.Header, headerEquals, f.Header) {
		return false
	}
	return true
}

func ruleHeaderMatches(rh *RuleHeader, equals bool, h http.Header) bool {
	if strings.TrimSpace(rh.Name) == "" {
		return false
	}
	want := strings.ToLower(rh.Contains)
	for _, v := range clsHeaderValues(h, rh.Name) {
		if equals {
			if strings.EqualFold(strings.TrimSpace(v), strings.TrimSpace(want)) {
				return true
			}
		} else if strings.Contains(strings.ToLower(v), want) {
			return true
		}
	}
	return false
}

// ruleReasonValid reports whether a rule may produce reason: the closed
// vocabulary except the two short-circuit reasons.
func ruleReasonValid(r Reason) bool {
	switch r {
	case ReasonRateLimit, ReasonQuotaExhausted, ReasonCreditsExhausted, ReasonAuthError,
		ReasonForbidden, ReasonNotFound, ReasonModelCapacity, ReasonServerError, ReasonTransient,
		ReasonRequestRejected, ReasonCallerError:
		return true
	}
	return false
}

func ruleScopeValid(s Scope) bool {
	switch s {
	case ScopeNone, ScopeConnection, ScopeModel, ScopeProvider:
		return true
	}
	return false
}

// clsHeaderValues returns the values of header name, also when h was built
// by hand with non-canonical keys.
func clsHeaderValues(h http.Header, name string) []string {
	if h == nil {
		return nil
	}
	if v := h.Values(name); len(v) > 0 {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

// clsHeader returns the first value of header name, "" when absent.
func clsHeader(h http.Header, name string) string {
	if v := clsHeaderValues(h, name); len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}
