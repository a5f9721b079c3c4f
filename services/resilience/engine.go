package resilience

import (
	"context"
	"time"

	"switchyard/services"
	"switchyard/services/events"
)

// Engine applies the resilience mechanisms in the order of 20-resilience
// §0.1 and §1.6. The gateway asks it before each dispatch whether a provider
// and a connection may be used, and tells it how every dispatch ended.
type Engine struct {
	clock      services.Clock
	Classifier *Classifier
	Breakers   *Breakers
	Gate       WindowGateStore
	Cooldowns  *Cooldowns
	Lockouts   *Lockouts
	doc        func() *Document
	egress     func() EgressLockConfig
	Hooks      EngineHooks
}

// EngineHooks observe applied penalties (metrics). Nil funcs are skipped.
type EngineHooks struct {
	Cooldown   func(provider string, reason Reason)
	Lockout    func(provider string, reason Reason)
	EgressLock func(provider string)
	Classified func(provider string, reason Reason)
	// StoreError sees a write of shared state that failed after the
	// decision was made (mechanism "window_gate"); nothing else reports it.
	StoreError func(mechanism string, err error)
}

func (e *Engine) storeError(mechanism string, err error) {
	if err != nil && e.Hooks.StoreError != nil {
		e.Hooks.StoreError(mechanism, err)
	}
}

// NewEngine wires the mechanisms together.
func NewEngine(clock services.Clock, cls *Classifier, br *Breakers, gate WindowGateStore, cd *Cooldowns, lo *Lockouts,
	doc func() *Document, egress func() EgressLockConfig) *Engine {
	return &Engine{clock: clock, Classifier: cls, Breakers: br, Gate: gate, Cooldowns: cd, Lockouts: lo, doc: doc, egress: egress}
}

// SetEvents gives the breakers, cooldowns and lockouts the recorder of
// the transitions they decide (Runtime page, Recent events). Call it before
// serving; nil records nothing.
func (e *Engine) SetEvents(r events.Recorder) {
	e.Breakers.Events, e.Cooldowns.Events, e.Lockouts.Events = r, r, r
}

// ConnRef is what the engine needs to know of a connection.
type ConnRef struct {
	ID             string
	Provider       string
	Profile        Profile
	DisableCooling bool
	ProxyURL       string
	EgressGroup    string
}

func (c ConnRef) group() string { return EgressGroupOf(c.ProxyURL, c.EgressGroup) }

// Admission is a breaker admission of one dispatch; a probe must end with
// Success, Failure or Release.
type Admission struct {
	Provider string
	Probe    bool
	Gen      uint64
}

// Blocker names why a target or connection is skipped and when that ends
// (0 = not a timer).
type Blocker struct {
	Reason     string // circuit_open, provider_cooldown, model_lockout, cooling, banned, expired, credits_exhausted
	RetryAfter time.Duration
	// Waitable: a cooldown-aware wait may sleep until it lapses (§9).
	Waitable bool
}

// AllowProvider runs the target-level gates: breaker (§2) then window gate
// (§3). connectionID is set when the target pins a connection.
func (e *Engine) AllowProvider(provider string, profile Profile, connectionID string) (Admission, *Blocker) {
	ok, probe, gen, ra := e.Breakers.Allow(provider, profile)
	if !ok {
		return Admission{}, &Blocker{Reason: "circuit_open", RetryAfter: ra, Waitable: true}
	}
	adm := Admission{Provider: provider, Probe: probe, Gen: gen}
	if b, blocked := e.Gate.Block(provider, connectionID); blocked {
		e.Release(adm)
		return Admission{}, &Blocker{Reason: "provider_cooldown", RetryAfter: b.RetryAfter, Waitable: b.Waitable}
	}
	return adm, nil
}

// ConnectionBlocker runs the connection-level gates that resilience owns:
// terminal state, model lockout (§7), cooldown (§4). nil = eligible.
func (e *Engine) ConnectionBlocker(provider, connectionID, model string) *Blocker {
	if b, blocked := e.BlockerAt(provider, connectionID, model, e.clock.Now()); blocked {
		return &b
	}
	return nil
}

// BlockerAt is ConnectionBlocker at a given instant, by value: the account
// pick runs it for every connection of a provider, so it allocates nothing
// and reads the clock once per pick, not once per connection.
func (e *Engine) BlockerAt(provider, connectionID, model string, now time.Time) (Blocker, bool) {
	return e.BlockerKeys(provider, connectionID, KeysForModel(provider, model), now)
}

// BlockerKeys is BlockerAt with the model's lock keys computed once by the
// caller (KeysForModel) for all the connections it checks.
func (e *Engine) BlockerKeys(provider, connectionID string, mk ModelKeys, now time.Time) (Blocker, bool) {
	terminal, coolReason := e.Cooldowns.Flags(connectionID)
	if terminal != "" {
		return Blocker{Reason: terminal}, true
	}
	if rec, locked := e.Lockouts.blockingAt(provider, connectionID, mk, now); locked {
		return Blocker{Reason: "model_lockout", RetryAfter: rec.Until.Sub(now), Waitable: Waitable(Reason(rec.Reason))}, true
	}
	if until, cooling := e.Cooldowns.Cooling(connectionID); cooling {
		// Waitable by the reason that wrote the deadline (§9), not by the
		// latest error, which a failure absorbed in the episode overwrote.
		return Blocker{Reason: "cooling", RetryAfter: until.Sub(now), Waitable: Waitable(Reason(coolReason))}, true
	}
	return Blocker{}, false
}

// StateVersion changes after every write that can change what BlockerKeys
// answers for some connection, except the lockout master switch and time
// passing (see Cooldowns.Version, Lockouts.Version). Both counters only
// grow, so their sum changes whenever either does.
func (e *Engine) StateVersion() uint64 { return e.Cooldowns.Version() + e.Lockouts.Version() }

// Release frees a breaker probe slot that did not dispatch or ended without a verdict.
func (e *Engine) Release(adm Admission) {
	if adm.Probe {
		e.Breakers.ReleaseProbe(adm.Provider, adm.Gen)
	}
}

// Success clears or decays state after a 2xx or the first useful stream byte.
func (e *Engine) Success(ctx context.Context, adm Admission, connectionID, model string) {
	e.Breakers.Success(adm.Provider, adm.Gen, adm.Probe)
	e.Cooldowns.Success(ctx, connectionID)
	e.Lockouts.Success(ctx, adm.Provider, connectionID, model)
	e.storeError("window_gate", e.Gate.Success(ctx, adm.Provider, connectionID))
}

// Effect records one state change a failure caused (request log effects[]).
type Effect struct {
	Kind           string    `json:"kind"` // connection_cooldown, model_lockout, terminal, breaker_counted, breaker_opened, window_gate, egress_lock
	Until          time.Time `json:"until,omitempty"`
	LockKey        string    `json:"lockKey,omitempty"`
	TerminalStatus string    `json:"terminalStatus,omitempty"`
}

// Outcome is the decision for one failed dispatch.
type Outcome struct {
	Classification
	Effects []Effect
}

// Failure classifies one failed dispatch and applies it (§1.6): terminal
// state, lockout override, penalty by scope, breaker, egress-group lock.
// siblings lists other connections of listed providers (egress lock).
func (e *Engine) Failure(ctx context.Context, adm Admission, conn ConnRef, f Failure, siblings func() []ConnRef) Outcome {
	cls := e.Classifier.Classify(f)
	out := Outcome{Classification: cls}
	if e.Hooks.Classified != nil {
		e.Hooks.Classified(conn.Provider, cls.Reason)
	}
	if !penalising(cls, f) {
		e.Release(adm)
		return out
	}
	doc := e.doc()
	cls, _ = lockoutOverride(cls, doc.Lockout())
	scope := cls.Scope
	out.Classification = cls
	newEpisode := true
	switch {
	case cls.Terminal != "" || scope == ScopeConnection:
		eff := e.Cooldowns.Apply(ctx, ConnInfo{ID: conn.ID, Provider: conn.Provider, Profile: conn.Profile, DisableCooling: conn.DisableCooling,
			AutoDisableBanned: doc.AutoDisableBannedAccounts, Message: f.Message, Code: f.Code}, cls)
		newEpisode = eff.NewEpisode
		if eff.EnteredTerminal {
			out.Effects = append(out.Effects, Effect{Kind: "terminal", TerminalStatus: eff.Terminal})
		} else if eff.NewEpisode && !eff.Until.IsZero() {
			out.Effects = append(out.Effects, Effect{Kind: "connection_cooldown", Until: eff.Until})
			if e.Hooks.Cooldown != nil {
				e.Hooks.Cooldown(conn.Provider, cls.Reason)
			}
		}
	case scope == ScopeModel:
		applied, rec, ne := e.Lockouts.Apply(ctx, conn.Provider, conn.ID, f.Model, cls)
		newEpisode = !applied || ne
		if applied && ne {
			out.Effects = append(out.Effects, Effect{Kind: "model_lockout", Until: rec.Until, LockKey: rec.LockKey.String()})
			if e.Hooks.Lockout != nil {
				e.Hooks.Lockout(conn.Provider, cls.Reason)
			}
		}
	case scope == ScopeProvider:
		e.storeError("window_gate", e.Gate.ProviderScope(ctx, conn.Provider, conn.Profile, cls.CooldownMs))
		out.Effects = append(out.Effects, Effect{Kind: "window_gate"})
	}
	opened := e.Breakers.Failure(adm.Provider, conn.Profile, adm.Gen, adm.Probe, cls.Breaker, newEpisode, string(cls.Reason))
	if cls.Breaker && newEpisode {
		out.Effects = append(out.Effects, Effect{Kind: "breaker_counted"})
	}
	if opened {
		out.Effects = append(out.Effects, Effect{Kind: "breaker_opened"})
	}
	if cfg := e.egress(); EgressLockTriggered(cfg, conn.Provider, cls) && siblings != nil {
		group := conn.group()
		var sib []ConnInfo
		for _, s := range siblings() {
			if s.ID != conn.ID && s.group() == group {
				sib = append(sib, ConnInfo{ID: s.ID, Provider: s.Provider, Profile: s.Profile, DisableCooling: s.DisableCooling})
			}
		}
		failing := ConnInfo{ID: conn.ID, Provider: conn.Provider, Profile: conn.Profile, DisableCooling: conn.DisableCooling}
		if cooled := e.Cooldowns.ApplyEgressLock(ctx, failing, sib, cls.Hint, cls.Reason); len(cooled) > 0 {
			out.Effects = append(out.Effects, Effect{Kind: "egress_lock"})
			if e.Hooks.EgressLock != nil {
				e.Hooks.EgressLock(conn.Provider)
			}
		}
	}
	return out
}

// penalising reports a failure that changes state: not the client's doing,
// not a local limit, not after commit (BD 2, BD 15).
func penalising(cls Classification, f Failure) bool {
	return cls.Reason != ReasonClientAbort && cls.Reason != ReasonLocalLimit && cls.Reason != ReasonCallerError &&
		f.Phase != PhasePostCommit
}

// lockoutOverride applies the lockout override of 20-resilience §7: with
// model lockout on, a connection-scoped rate limit, refusal, capacity or
// server error of a locked status locks the model instead of cooling the
// connection (never when a rule fixed the scope or the failure is
// terminal). It reports whether it did.
func lockoutOverride(cls Classification, lockCfg LockoutConfig) (Classification, bool) {
	if lockCfg.Enabled && lockCfg.LocksStatus(cls.Status) && !cls.ScopeFixed && cls.Scope == ScopeConnection && cls.Terminal == "" &&
		(cls.Reason == ReasonRateLimit || cls.Reason == ReasonForbidden || cls.Reason == ReasonModelCapacity || cls.Reason == ReasonServerError) {
		cls.Scope = ScopeModel
		cls.LockScope = ""
		return cls, true
	}
	return cls, false
}

// FinalTargetFailure feeds the window gate with a combo target's final
// failure (§3); single-model requests never write it.
func (e *Engine) FinalTargetFailure(ctx context.Context, provider string, profile Profile, connectionID string, reason Reason, perModelQuota500 bool) {
	e.storeError("window_gate", e.Gate.RecordFinalFailure(ctx, provider, profile, connectionID, reason, perModelQuota500))
}

// Waitable reports whether a reason's timer may be waited out (§1.4, §9).
func Waitable(reason Reason) bool {
	switch reason {
	case ReasonRateLimit, ReasonModelCapacity, ReasonServerError, ReasonTransient:
		return true
	}
	return false
}
