package resilience

import (
	"time"

	"switchyard/services"
)

// DryRun is the classification pipeline run on a failure that did not
// happen (POST /api/resilience/classify, 40-admin-api §2.4): the same
// restatements, operator and built-in rules, classifier, retry hint,
// lockout override and penalty ladders the attempt loop applies, with
// nothing written.
type DryRun struct {
	Explanation
	// Penalising is false for the reasons that change no state (client
	// abort, local limit, caller error) and after commit.
	Penalising bool
	// LockoutOverride: model lockout turned the connection penalty into a
	// model lockout; Classification.Scope is the scope after it.
	LockoutOverride bool
	// Effect is what the failure would apply: "connection_cooldown",
	// "model_lockout", "terminal", "window_gate" or "" (nothing).
	Effect string
	// Cooldown is the connection cooldown or model lockout it would set.
	Cooldown time.Duration
	// LockKey is the model lockout's key (Effect model_lockout).
	LockKey string
}

// DryRun classifies f and says what it would do to its connection
// (f.ConnectionID's state when the engine holds one, else a connection
// without state) or its model, without doing it.
func (e *Engine) DryRun(f Failure) DryRun {
	ex := e.Classifier.Explain(f)
	out := DryRun{Explanation: ex, Penalising: penalising(ex.Classification, f)}
	if !out.Penalising {
		return out
	}
	cls, over := lockoutOverride(ex.Classification, e.document().Lockout())
	out.Classification, out.LockoutOverride = cls, over
	switch {
	case cls.Terminal != "" || cls.Scope == ScopeConnection:
		from := services.ConnectionState{}
		if f.ConnectionID != "" {
			from = e.Cooldowns.State(f.ConnectionID)
		}
		eff := e.Cooldowns.Preview(ConnInfo{ID: f.ConnectionID, Provider: f.Provider, Profile: f.ProviderClass,
			Message: f.Message, Code: f.Code}, cls, from)
		switch {
		case eff.EnteredTerminal:
			out.Effect = "terminal"
			out.Classification.Terminal = eff.Terminal
		case !eff.Until.IsZero():
			out.Effect = "connection_cooldown"
			out.Cooldown = eff.Until.Sub(e.Cooldowns.now())
		}
	case cls.Scope == ScopeModel:
		if key, d, ok := e.Lockouts.Preview(f.Provider, f.ConnectionID, f.Model, cls); ok {
			out.Effect, out.Cooldown, out.LockKey = "model_lockout", d, key.Key
		}
	case cls.Scope == ScopeProvider:
		out.Effect = "window_gate"
		out.Cooldown = time.Duration(cls.CooldownMs) * time.Millisecond
	}
	return out
}
