package resilience

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// FuzzClassify: whatever an upstream sends, the classifier never panics and
// always answers within the closed vocabularies.
func FuzzClassify(f *testing.F) {
	f.Add("openai", 429, "", []byte(`{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`), "", "", "Retry-After", "20", false, false, false, "", uint8(0))
	f.Add("agentrouter", 403, "", []byte("用户额度不足"), "", "用户额度不足", "", "", false, true, false, "", uint8(0))
	f.Add("opencode", 429, "", []byte(""), "", "", "x-ratelimit-remaining-requests", "0", false, false, false, "", uint8(0))
	f.Add("gemini", 429, "", []byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26.6s"}]}}`), "", "", "", "", true, false, false, "", uint8(0))
	f.Add("openai", 400, "", []byte(`{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length 128","param":"tools","code":"array_above_max_length"}}`), "array_above_max_length", "", "", "", false, false, false, "", uint8(0))
	f.Add("openai", 0, TransportReset, []byte(nil), "", "", "", "", false, false, false, "", uint8(1))
	f.Add("openai", 502, "", []byte(nil), "", "", "", "", false, false, false, DetailEmptyResponse, uint8(0))
	f.Add("x", -1, "idle_timeout", []byte("retry after 2026-01-01T00:00:00Z resets in 1h2m3s try again in 9999999999999999999 minutes"), "", "", "X-RateLimit-Reset", "99999999999999999999", false, false, true, "", uint8(2))
	f.Add("codex", 429, "", []byte(`[{"retry_after":"1e308"}]`), "", "", "x-codex-primary-used-percent", "100", true, false, false, "", uint8(3))

	rules := []ErrorRule{
		{ID: "r1", Provider: "openai", Status: 400, Match: "capacity", Reason: ReasonModelCapacity, Scope: ScopeModel},
		{ID: "r2", Provider: "openai", Status: 429, Header: &RuleHeader{Name: "x-kind", Contains: "daily"}, Reason: ReasonQuotaExhausted, Scope: ScopeConnection},
		{ID: "r3", Provider: "openai", Status: 403, Match: "tos", Reason: ReasonForbidden, Scope: ScopeConnection, Ban: true},
	}
	c := NewClassifier(func() []ErrorRule { return rules }, func() time.Duration { return 604_800_000 * time.Millisecond },
		func() time.Time { return clsT0 }, nil)

	validReason := map[Reason]bool{ReasonRateLimit: true, ReasonQuotaExhausted: true, ReasonCreditsExhausted: true,
		ReasonAuthError: true, ReasonForbidden: true, ReasonNotFound: true, ReasonModelCapacity: true, ReasonServerError: true,
		ReasonTransient: true, ReasonRequestRejected: true, ReasonCallerError: true, ReasonClientAbort: true, ReasonLocalLimit: true}
	validScope := map[Scope]bool{ScopeNone: true, ScopeConnection: true, ScopeModel: true, ScopeProvider: true}
	validFailover := map[Failover]bool{FailoverNext: true, FailoverNextModel: true, FailoverStop: true}
	validShape := map[LockShape]bool{"": true, ShapeFamily: true, ShapeBase: true, ShapeExact: true}
	validTerminal := map[string]bool{"": true, TerminalBanned: true, TerminalCreditsExhausted: true}

	f.Fuzz(func(t *testing.T, provider string, status int, transport string, body []byte, code, message, hName, hValue string,
		perModel, custom, abort bool, detail string, flags uint8) {
		fl := Failure{Provider: provider, Status: status, Transport: transport, Body: body, Code: code, Message: message,
			PerModelQuota: perModel, Custom: custom, ClientAbort: abort, Detail: detail, Phase: PhasePreCommit, At: clsT0}
		if hName != "" {
			fl.Header = http.Header{}
			fl.Header.Add(hName, hValue)
		}
		if flags&1 != 0 {
			fl.Phase = PhasePostCommit
		}
		if flags&2 != 0 {
			fl.LocalErr = errors.New("local")
		}
		cl := c.Classify(fl)
		if !validReason[cl.Reason] {
			t.Fatalf("unknown reason %q for %+v", cl.Reason, fl)
		}
		if !validScope[cl.Scope] {
			t.Fatalf("unknown scope %q", cl.Scope)
		}
		if !validFailover[cl.Failover] {
			t.Fatalf("unknown failover %q", cl.Failover)
		}
		if !validShape[cl.LockScope] || (cl.Scope == ScopeModel) != (cl.LockScope != "") {
			t.Fatalf("lock scope %q for scope %q", cl.LockScope, cl.Scope)
		}
		if !validTerminal[cl.Terminal] {
			t.Fatalf("terminal %q", cl.Terminal)
		}
		if cl.Hint < 0 || (cl.Hint > 0 && (cl.Hint < time.Second || cl.Hint > 604_800_000*time.Millisecond)) {
			t.Fatalf("hint %v out of [1s, 7d]", cl.Hint)
		}
		if (cl.Hint > 0) != (cl.HintSource != "") {
			t.Fatalf("hint %v source %q", cl.Hint, cl.HintSource)
		}
		if cl.Breaker && (fl.Phase == PhasePostCommit || cl.Detail == DetailEmptyResponse) {
			t.Fatalf("breaker counted for %+v", cl)
		}
		if cl.ToolLimit < 0 {
			t.Fatalf("tool limit %d", cl.ToolLimit)
		}
	})
}
