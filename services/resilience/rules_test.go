package resilience

import (
	"net/http"
	"testing"
)

func clsInt64(v int64) *int64 { return &v }
func clsBool(v bool) *bool    { return &v }

// One row per built-in rule (20-resilience §1.2), in registry order.
func TestBuiltinRulesEachMatch(t *testing.T) {
	type want struct {
		id         string
		reason     Reason
		scope      Scope
		shape      LockShape
		cooldownMs int64
	}
	oc := func(status int, body string, h http.Header) Failure {
		f := clsHTTP(status, body)
		f.Provider, f.Header = "opencode", h
		return f
	}
	tests := []struct {
		name  string
		f     Failure
		index int
		want  want
	}{
		{"opencode endpoint unavailable 400", oc(400, "The endpoint is unavailable", nil), 0,
			want{"opencode-endpoint-unavailable", ReasonModelCapacity, ScopeModel, ShapeExact, 300_000}},
		{"opencode endpoint unavailable 429", oc(429, "endpoint is unavailable", nil), 1,
			want{"opencode-endpoint-unavailable", ReasonModelCapacity, ScopeModel, ShapeFamily, 300_000}},
		{"opencode monthly limit", oc(429, "Monthly usage limit reached, resets in 3 days", nil), 2,
			want{"opencode-monthly-limit", ReasonQuotaExhausted, ScopeConnection, "", 0}},
		{"opencode remaining requests 0", oc(429, "", http.Header{"X-Ratelimit-Remaining-Requests": {"0"}}), 3,
			want{"opencode-remaining-zero", ReasonQuotaExhausted, ScopeConnection, "", 0}},
		{"opencode remaining tokens 0", oc(429, "", http.Header{"X-Ratelimit-Remaining-Tokens": {" 0 "}}), 4,
			want{"opencode-remaining-zero", ReasonQuotaExhausted, ScopeConnection, "", 0}},
		{"opencode organization quota", oc(429, `{"error":{"code":"organization_quota_exceeded"}}`, nil), 5,
			want{"opencode-org-quota", ReasonQuotaExhausted, ScopeConnection, "", 0}},
		{"opencode account quota", oc(429, `{"error":{"code":"account_quota_exceeded"}}`, nil), 6,
			want{"opencode-org-quota", ReasonQuotaExhausted, ScopeConnection, "", 0}},
		{"opencode plan limit", oc(429, `{"error":{"code":"PLAN_LIMIT_REACHED"}}`, nil), 7,
			want{"opencode-org-quota", ReasonQuotaExhausted, ScopeConnection, "", 0}},
		{"opencode model unavailable", oc(400, "Upstream request failed: Model is unavailable.", nil), 8,
			want{"opencode-model-unavailable", ReasonModelCapacity, ScopeModel, ShapeExact, 3_600_000}},
		{"minimax model quota", func() Failure {
			f := clsHTTP(429, "")
			f.Provider, f.Header = "minimax", http.Header{"X-Model-Quota-Remaining": {"MiniMax-M2=0"}}
			return f
		}(), 9, want{"minimax-model-quota", ReasonQuotaExhausted, ScopeModel, ShapeFamily, 0}},
		{"cloudflare daily free allocation", func() Failure {
			f := clsHTTP(429, "you have used up your daily free allocation of 10,000 neurons")
			f.Provider = "cloudflare-ai"
			return f
		}(), 10, want{"cloudflare-daily-free", ReasonQuotaExhausted, ScopeConnection, "", 0}},
		{"openrouter 402", func() Failure {
			f := clsHTTP(402, "Insufficient credits")
			f.Provider, f.PerModelQuota = "openrouter", true
			return f
		}(), 11, want{"openrouter-402", ReasonQuotaExhausted, ScopeConnection, "", 120_000}},
		{"new-api user quota (agentrouter 429)", func() Failure {
			f := clsHTTP(429, "用户额度不足")
			f.Provider = "agentrouter"
			return f
		}(), 12, want{"newapi-user-quota", ReasonQuotaExhausted, ScopeConnection, "", 0}},
		{"new-api model denied (custom 403)", func() Failure {
			f := clsHTTP(403, "无权访问模型 gpt-x")
			f.Provider, f.Custom = "acme", true
			return f
		}(), 13, want{"newapi-model-denied", ReasonForbidden, ScopeModel, ShapeExact, 21_600_000}},
	}
	if len(tests) != len(BuiltinRules()) {
		t.Fatalf("%d cases for %d built-in rules", len(tests), len(BuiltinRules()))
	}
	e := newClsEnv()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := e.c.Explain(tc.f)
			cl := ex.Classification
			if ex.RuleOrigin != RuleOriginBuiltin || ex.RuleIndex != tc.index || cl.RuleID != tc.want.id {
				t.Fatalf("rule %q origin %q index %d, want %q builtin %d", cl.RuleID, ex.RuleOrigin, ex.RuleIndex, tc.want.id, tc.index)
			}
			if cl.Reason != tc.want.reason || cl.Scope != tc.want.scope || cl.LockScope != tc.want.shape || cl.CooldownMs != tc.want.cooldownMs {
				t.Fatalf("got %s/%s/%q/%d, want %+v", cl.Reason, cl.Scope, cl.LockScope, cl.CooldownMs, tc.want)
			}
			if !cl.ScopeFixed || cl.Terminal != "" || cl.Failover != FailoverNext || cl.Breaker {
				t.Fatalf("fixed %v terminal %q failover %q breaker %v", cl.ScopeFixed, cl.Terminal, cl.Failover, cl.Breaker)
			}
			if ex.Rule == nil || !ex.Rule.BuiltIn {
				t.Fatalf("explanation rule = %+v", ex.Rule)
			}
		})
	}
}

func TestBuiltinRuleFamilies(t *testing.T) {
	e := newClsEnv()
	for _, p := range []string{"opencode", "opencode-zen", "opencode-go", "opencode-cli"} {
		f := clsHTTP(429, "monthly usage limit reached")
		f.Provider = p
		if id := e.c.Classify(f).RuleID; id != "opencode-monthly-limit" {
			t.Errorf("%s: rule %q", p, id)
		}
	}
	for _, f := range []Failure{
		func() Failure { f := clsHTTP(429, "额度不足"); f.Provider = "agentrouter"; return f }(),
		func() Failure { f := clsHTTP(429, "额度不足"); f.Provider, f.Custom = "node-a", true; return f }(),
	} {
		if id := e.c.Classify(f).RuleID; id != "newapi-user-quota" {
			t.Errorf("%s: rule %q", f.Provider, id)
		}
	}
	// Outside the families the built-ins never match.
	for _, f := range []Failure{
		func() Failure { f := clsHTTP(429, "monthly usage limit reached"); f.Provider = "opencode-x"; return f }(),
		func() Failure { f := clsHTTP(429, "额度不足"); f.Provider = "openai"; return f }(),
		func() Failure { f := clsHTTP(402, ""); f.Provider = "openai"; return f }(),
	} {
		if id := e.c.Classify(f).RuleID; id != "" {
			t.Errorf("%s %d: rule %q matched", f.Provider, f.Status, id)
		}
	}
}

func TestBuiltinRuleNegativeMatches(t *testing.T) {
	e := newClsEnv()
	oc := func(status int, body string, h http.Header) Failure {
		f := clsHTTP(status, body)
		f.Provider, f.Header = "opencode", h
		return f
	}
	tests := []struct {
		name string
		f    Failure
	}{
		{"remaining 10 is not 0", oc(429, "", http.Header{"X-Ratelimit-Remaining-Requests": {"10"}})},
		{"remaining 100 tokens is not 0", oc(429, "", http.Header{"X-Ratelimit-Remaining-Tokens": {"100"}})},
		{"endpoint unavailable on 503", oc(503, "endpoint is unavailable", nil)},
		{"monthly limit on 400", oc(400, "monthly usage limit reached", nil)},
		{"minimax remaining quota left", func() Failure {
			f := clsHTTP(429, "")
			f.Provider, f.Header = "minimax", http.Header{"X-Model-Quota-Remaining": {"MiniMax-M2=12"}}
			return f
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if id := e.c.Classify(tc.f).RuleID; id != "" {
				t.Fatalf("rule %q matched", id)
			}
		})
	}
}

func TestBuiltinRulesListing(t *testing.T) {
	rules := BuiltinRules()
	ids := map[string]int{}
	for _, r := range rules {
		ids[r.ID]++
		if !r.BuiltIn || r.Reason == "" || r.Scope == "" || r.Status == 0 {
			t.Errorf("incomplete built-in %+v", r)
		}
	}
	want := map[string]int{"opencode-endpoint-unavailable": 2, "opencode-monthly-limit": 1, "opencode-remaining-zero": 2,
		"opencode-org-quota": 3, "opencode-model-unavailable": 1, "minimax-model-quota": 1, "cloudflare-daily-free": 1,
		"openrouter-402": 1, "newapi-user-quota": 1, "newapi-model-denied": 1}
	if len(ids) != len(want) {
		t.Fatalf("ids = %v", ids)
	}
	for id, n := range want {
		if ids[id] != n {
			t.Errorf("%s: %d entries, want %d", id, ids[id], n)
		}
	}
	// A copy: changing it changes nothing.
	rules[0].Status = 599
	*rules[0].CooldownMs = 1
	rules[0].Providers[0] = "x"
	if r := BuiltinRules()[0]; r.Status != 400 || *r.CooldownMs != 300_000 || r.Providers[0] != "opencode" {
		t.Fatalf("BuiltinRules returned the registry itself: %+v", r)
	}
}

func TestOperatorRules(t *testing.T) {
	tests := []struct {
		name     string
		rules    []ErrorRule
		f        Failure
		ruleID   string
		index    int
		reason   Reason
		scope    Scope
		shape    LockShape
		terminal string
		ban      bool
		detail   string
		failover Failover
	}{
		{
			name:   "operator before built-in",
			rules:  []ErrorRule{{ID: "mine", Provider: "opencode", Status: 429, Reason: ReasonRateLimit, Scope: ScopeConnection}},
			f:      func() Failure { f := clsHTTP(429, "monthly usage limit reached"); f.Provider = "opencode"; return f }(),
			ruleID: "mine", reason: ReasonRateLimit, scope: ScopeConnection, failover: FailoverNext,
		},
		{
			name: "first match in stored order, disabled rules skipped",
			rules: []ErrorRule{
				{ID: "off", Provider: "openai", Status: 429, Reason: ReasonForbidden, Scope: ScopeConnection, Enabled: clsBool(false)},
				{ID: "other-status", Provider: "openai", Status: 503, Reason: ReasonForbidden, Scope: ScopeConnection},
				{ID: "no-match", Provider: "openai", Status: 429, Match: "nope", Reason: ReasonForbidden, Scope: ScopeConnection},
				{ID: "hit", Provider: "OpenAI", Status: 429, Match: "SLOW DOWN", Reason: ReasonQuotaExhausted, Scope: ScopeProvider, Enabled: clsBool(true)},
				{ID: "later", Provider: "openai", Status: 429, Reason: ReasonRateLimit, Scope: ScopeConnection},
			},
			f:      clsHTTP(429, "please slow down"),
			ruleID: "hit", index: 3, reason: ReasonQuotaExhausted, scope: ScopeProvider, failover: FailoverNext,
		},
		{
			name:   "match covers message + body",
			rules:  []ErrorRule{{ID: "msg", Provider: "openai", Status: 400, Match: "in the message", Reason: ReasonRateLimit, Scope: ScopeConnection}},
			f:      func() Failure { f := clsHTTP(400, "{}"); f.Message = "Text In The Message"; return f }(),
			ruleID: "msg", reason: ReasonRateLimit, scope: ScopeConnection, failover: FailoverNext,
		},
		{
			name: "header rule, case-insensitive substring",
			rules: []ErrorRule{{ID: "hdr", Provider: "openai", Status: 429, Header: &RuleHeader{Name: "x-limit-kind", Contains: "DAILY"},
				Reason: ReasonQuotaExhausted, Scope: ScopeModel, LockScope: ShapeBase}},
			f: func() Failure {
				f := clsHTTP(429, "")
				f.Header = http.Header{"X-Limit-Kind": {"tokens-daily"}}
				return f
			}(),
			ruleID: "hdr", reason: ReasonQuotaExhausted, scope: ScopeModel, shape: ShapeBase, failover: FailoverNext,
		},
		{
			name: "header rule on a hand-built header map",
			rules: []ErrorRule{{ID: "hdr", Provider: "openai", Status: 429, Header: &RuleHeader{Name: "X-Limit-Kind", Contains: "daily"},
				Reason: ReasonQuotaExhausted, Scope: ScopeConnection}},
			f:      func() Failure { f := clsHTTP(429, ""); f.Header = http.Header{"x-limit-kind": {"daily"}}; return f }(),
			ruleID: "hdr", reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: FailoverNext,
		},
		{
			name:   "model scope without lockScope takes the status shape",
			rules:  []ErrorRule{{ID: "m", Provider: "openai", Status: 404, Reason: ReasonNotFound, Scope: ScopeModel}},
			f:      clsHTTP(404, ""),
			ruleID: "m", reason: ReasonNotFound, scope: ScopeModel, shape: ShapeBase, failover: FailoverNext,
		},
		{
			name:   "ban rule makes banned",
			rules:  []ErrorRule{{ID: "ban", Provider: "openai", Status: 403, Match: "tos violation", Reason: ReasonForbidden, Scope: ScopeConnection, Ban: true}},
			f:      clsHTTP(403, "TOS violation"),
			ruleID: "ban", reason: ReasonForbidden, scope: ScopeConnection, terminal: TerminalBanned, ban: true, failover: FailoverNext,
		},
		{
			name:   "credits rule on connection is terminal",
			rules:  []ErrorRule{{ID: "cr", Provider: "openai", Status: 400, Match: "wallet empty", Reason: ReasonCreditsExhausted, Scope: ScopeConnection}},
			f:      clsHTTP(400, "wallet empty"),
			ruleID: "cr", reason: ReasonCreditsExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: FailoverNext,
		},
		{
			name:   "credits rule on model is timed",
			rules:  []ErrorRule{{ID: "crm", Provider: "openai", Status: 400, Reason: ReasonCreditsExhausted, Scope: ScopeModel}},
			f:      clsHTTP(400, "wallet empty"),
			ruleID: "crm", reason: ReasonCreditsExhausted, scope: ScopeModel, shape: ShapeExact, failover: FailoverNext,
		},
		{
			name:   "connection quota rule stays timed even on a ban marker",
			rules:  []ErrorRule{{ID: "q", Provider: "openai", Status: 403, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}},
			f:      clsHTTP(403, "your account has been banned"),
			ruleID: "q", reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: FailoverNext,
		},
		{
			name:   "caller_error rule: context detail moves to the next model",
			rules:  []ErrorRule{{ID: "ce", Provider: "openai", Status: 400, Reason: ReasonCallerError, Scope: ScopeNone}},
			f:      clsHTTP(400, "prompt is too long"),
			ruleID: "ce", reason: ReasonCallerError, scope: ScopeNone, detail: DetailContextLength, failover: FailoverNextModel,
		},
		{
			name:   "caller_error rule without a detail stops",
			rules:  []ErrorRule{{ID: "ce", Provider: "openai", Status: 400, Reason: ReasonCallerError, Scope: ScopeNone}},
			f:      clsHTTP(400, "bad"),
			ruleID: "ce", reason: ReasonCallerError, scope: ScopeNone, detail: DetailMalformed, failover: FailoverStop,
		},
		{
			name: "rules with a reason or scope outside the vocabulary never match",
			rules: []ErrorRule{
				{ID: "abort", Provider: "openai", Status: 429, Reason: ReasonClientAbort, Scope: ScopeNone},
				{ID: "bogus", Provider: "openai", Status: 429, Reason: "bogus", Scope: ScopeConnection},
				{ID: "noscope", Provider: "openai", Status: 429, Reason: ReasonRateLimit},
			},
			f:      clsHTTP(429, ""),
			ruleID: "", index: -1, reason: ReasonRateLimit, scope: ScopeConnection, failover: FailoverNext,
		},
		{
			name:   "a restated status is what rules see",
			rules:  []ErrorRule{{ID: "after", Provider: "agentrouter", Status: 429, Reason: ReasonRateLimit, Scope: ScopeConnection}},
			f:      func() Failure { f := clsHTTP(403, "额度不足"); f.Provider = "agentrouter"; return f }(),
			ruleID: "after", reason: ReasonRateLimit, scope: ScopeConnection, failover: FailoverNext,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := newClsEnv(tc.rules...).c.Explain(tc.f)
			cl := ex.Classification
			if cl.RuleID != tc.ruleID || ex.RuleIndex != tc.index {
				t.Fatalf("rule %q index %d, want %q %d", cl.RuleID, ex.RuleIndex, tc.ruleID, tc.index)
			}
			if tc.ruleID != "" && (ex.RuleOrigin != RuleOriginOperator || !cl.ScopeFixed) {
				t.Fatalf("origin %q fixed %v", ex.RuleOrigin, cl.ScopeFixed)
			}
			if cl.Reason != tc.reason || cl.Scope != tc.scope || cl.LockScope != tc.shape || cl.Terminal != tc.terminal ||
				cl.Ban != tc.ban || cl.Detail != tc.detail || cl.Failover != tc.failover {
				t.Fatalf("got %+v", cl)
			}
		})
	}
}

func TestOperatorRuleCooldown(t *testing.T) {
	e := newClsEnv(ErrorRule{ID: "cd", Provider: "openai", Status: 429, Reason: ReasonRateLimit, Scope: ScopeConnection, CooldownMs: clsInt64(45_000)})
	if cl := e.c.Classify(clsHTTP(429, "")); cl.CooldownMs != 45_000 {
		t.Fatalf("cooldownMs = %d", cl.CooldownMs)
	}
}

// Rules read the rules func on every call, so a settings change applies to
// the next classification.
func TestOperatorRulesReadPerCall(t *testing.T) {
	e := newClsEnv()
	if id := e.c.Classify(clsHTTP(429, "")).RuleID; id != "" {
		t.Fatalf("rule %q", id)
	}
	e.rules = []ErrorRule{{ID: "new", Provider: "openai", Status: 429, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}}
	if id := e.c.Classify(clsHTTP(429, "")).RuleID; id != "new" {
		t.Fatalf("rule %q, want new", id)
	}
}
