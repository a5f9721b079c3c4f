package resilience_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
)

// The dry run reads the same pipeline the attempt loop applies: rules,
// classifier, hint, lockout override, the cooldown ladder at the
// connection's level; and it writes nothing.
func TestDryRunClassifiesWithoutChangingState(t *testing.T) {
	e := newStatusEnv(t, conn("c_1", true))
	ctx := context.Background()
	f503 := resilience.Failure{Provider: "openai", ProviderClass: services.AuthAPIKey, ConnectionID: "c_1", Model: "gpt-4o",
		Status: 503, Body: []byte(`{"error":{"message":"upstream down"}}`), Message: "upstream down", Phase: resilience.PhasePreCommit}

	d := e.engine.DryRun(f503)
	if d.Classification.Reason != resilience.ReasonServerError || d.Classification.Scope != resilience.ScopeConnection ||
		d.Effect != "connection_cooldown" || d.Cooldown != time.Second || !d.Penalising || d.Rule != nil || d.ClassifierRow != 20 {
		t.Fatalf("503 on a fresh connection: %+v", d)
	}
	if st := e.cd.State("c_1"); st.RateLimitedUntil != nil || st.LastError != "" {
		t.Fatalf("the dry run changed the connection: %+v", st)
	}

	// Two real failures (the second after the first cooldown) raise the
	// ladder; the dry run reads the connection's level.
	for range 2 {
		e.engine.Failure(ctx, resilience.Admission{Provider: "openai"}, resilience.ConnRef{ID: "c_1", Provider: "openai", Profile: services.AuthAPIKey}, f503, nil)
		e.clock.Advance(5 * time.Second)
	}
	if d := e.engine.DryRun(f503); d.Cooldown != 4*time.Second {
		t.Fatalf("dry run at level 2: %v", d.Cooldown)
	}
	if d := e.engine.DryRun(resilience.Failure{Provider: "openai", ProviderClass: services.AuthAPIKey, Status: 503}); d.Cooldown != time.Second {
		t.Fatalf("dry run without a connection: %v", d.Cooldown)
	}

	// A retry hint replaces the ladder.
	h := http.Header{"Retry-After": {"7"}}
	d = e.engine.DryRun(resilience.Failure{Provider: "openai", ProviderClass: services.AuthAPIKey, Status: 429, Header: h})
	if d.Classification.Reason != resilience.ReasonRateLimit || d.Classification.Hint != 7*time.Second ||
		d.Classification.HintSource != resilience.HintSourceHeader || d.Cooldown != 7*time.Second {
		t.Fatalf("429 with Retry-After: %+v", d)
	}

	// A built-in rule decides, with its registry position.
	d = e.engine.DryRun(resilience.Failure{Provider: "opencode", ProviderClass: services.AuthAPIKey, Status: 429,
		Header: http.Header{"X-Ratelimit-Remaining-Requests": {"0"}}})
	if d.Rule == nil || d.Rule.ID != "opencode-remaining-zero" || d.RuleOrigin != resilience.RuleOriginBuiltin || d.RuleIndex != 3 ||
		d.Classification.Reason != resilience.ReasonQuotaExhausted {
		t.Fatalf("opencode rule: %+v", d)
	}

	// With model lockout on, a 429 locks the model instead (the override).
	e.doc.ModelLockout.Enabled = true
	e.doc.ModelLockout.ErrorCodes = []int{429}
	d = e.engine.DryRun(resilience.Failure{Provider: "openai", ProviderClass: services.AuthAPIKey, ConnectionID: "c_1", Model: "gpt-4o", Status: 429})
	if !d.LockoutOverride || d.Classification.Scope != resilience.ScopeModel || d.Effect != "model_lockout" || d.Cooldown != time.Minute || d.LockKey == "" {
		t.Fatalf("lockout override: %+v", d)
	}
	if n := e.lo.Count(); n != 0 {
		t.Fatalf("the dry run locked %d models", n)
	}

	// A caller error changes nothing.
	d = e.engine.DryRun(resilience.Failure{Provider: "openai", ProviderClass: services.AuthAPIKey, Status: 400, Message: "bad field"})
	if d.Penalising || d.Effect != "" || d.Classification.Reason != resilience.ReasonCallerError {
		t.Fatalf("caller error: %+v", d)
	}
}
