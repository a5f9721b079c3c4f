package resilience

// The resilience settings document (40-admin-api §2): one JSON object stored
// sparsely under the settings key "resilience", served as effective values
// (stored > env > default, 20-resilience §0) by the settings engine
// (services/settings). Its field table is fields.go, its cross-field rules
// cross.go, its provider error rules errorrules.go; the state machines
// consume the configs the Document methods below produce (config.go).

import (
	"slices"
	"time"

	"switchyard/services"
)

// Document is the effective resilience settings document. Its JSON is the
// body of GET /api/resilience; treat a published Document as read-only.
type Document struct {
	RequestQueue              RequestQueueSettings          `json:"requestQueue"`
	ConnectionCooldown        ConnectionCooldownSettings    `json:"connectionCooldown"`
	ProviderBreaker           ProviderBreakerSettings       `json:"providerBreaker"`
	ProviderCooldown          ProviderCooldownSettings      `json:"providerCooldown"`
	WaitForCooldown           WaitForCooldownSettings       `json:"waitForCooldown"`
	ComboCooldownWait         ComboCooldownWaitSettings     `json:"comboCooldownWait"`
	ConnectionConcurrency     ConnectionConcurrencySettings `json:"connectionConcurrency"`
	ModelLockout              ModelLockoutSettings          `json:"modelLockout"`
	SessionAffinity           SessionAffinitySettings       `json:"sessionAffinity"`
	StreamRecovery            StreamRecoverySettings        `json:"streamRecovery"`
	EmergencyFallback         EmergencyFallbackSettings     `json:"emergencyFallback"`
	ProviderErrorRules        []ErrorRuleSetting            `json:"providerErrorRules"`
	AutoDisableBannedAccounts bool                          `json:"autoDisableBannedAccounts"`

	// egressProviders is SWITCHYARD_EGRESS_LOCK_PROVIDERS as read at start
	// (20-resilience §12); not a document field.
	egressProviders []string
}

// RequestQueueSettings is the requestQueue section (20-resilience §10).
type RequestQueueSettings struct {
	AutoEnableApiKeyProviders bool  `json:"autoEnableApiKeyProviders"`
	RequestsPerMinute         int   `json:"requestsPerMinute"`
	MinTimeBetweenRequestsMs  int64 `json:"minTimeBetweenRequestsMs"`
	ConcurrentRequests        int   `json:"concurrentRequests"`
	MaxWaitMs                 int64 `json:"maxWaitMs"`
	MaxQueueDepth             int   `json:"maxQueueDepth"` // 0 = unbounded
	QueueWaitMs               int64 `json:"queueWaitMs"`   // 0 = none
}

// ConnectionCooldownSettings is the connectionCooldown section (§4).
type ConnectionCooldownSettings struct {
	MaxRetryHintMs int64                   `json:"maxRetryHintMs"`
	OAuth          CooldownProfileSettings `json:"oauth"`
	APIKey         CooldownProfileSettings `json:"apikey"`
	Local          CooldownProfileSettings `json:"local"`
}

// CooldownProfileSettings is connectionCooldown.<profile>.
type CooldownProfileSettings struct {
	BaseCooldownMs  int64 `json:"baseCooldownMs"`
	MaxBackoffSteps int   `json:"maxBackoffSteps"`
	MaxCooldownMs   int64 `json:"maxCooldownMs"`
}

// ProviderBreakerSettings is the providerBreaker section (§2).
type ProviderBreakerSettings struct {
	OAuth  BreakerProfileSettings `json:"oauth"`
	APIKey BreakerProfileSettings `json:"apikey"`
	Local  BreakerProfileSettings `json:"local"`
}

// BreakerProfileSettings is providerBreaker.<profile>; DegradationThreshold
// is the effective value (derived when neither stored nor set by env).
type BreakerProfileSettings struct {
	FailureThreshold     int   `json:"failureThreshold"`
	DegradationThreshold int   `json:"degradationThreshold"`
	ResetTimeoutMs       int64 `json:"resetTimeoutMs"`
	HalfOpenRequests     int   `json:"halfOpenRequests"`
	EscalateAfterCycles  int   `json:"escalateAfterCycles"`
	MaxBackoffMultiplier int   `json:"maxBackoffMultiplier"`
}

// ProviderCooldownSettings is the providerCooldown section (§3).
type ProviderCooldownSettings struct {
	Enabled            bool                  `json:"enabled"`
	MinRetryCooldownMs int64                 `json:"minRetryCooldownMs"`
	MaxRetryCooldownMs int64                 `json:"maxRetryCooldownMs"`
	OAuth              WindowProfileSettings `json:"oauth"`
	APIKey             WindowProfileSettings `json:"apikey"`
	Local              WindowProfileSettings `json:"local"`
}

// WindowProfileSettings is providerCooldown.<profile>.
type WindowProfileSettings struct {
	FailureThreshold int   `json:"failureThreshold"`
	FailureWindowMs  int64 `json:"failureWindowMs"`
	CooldownMs       int64 `json:"cooldownMs"`
}

// WaitForCooldownSettings is the waitForCooldown section (§9, single-model requests).
type WaitForCooldownSettings struct {
	Enabled        bool  `json:"enabled"`
	MaxRetries     int   `json:"maxRetries"`
	MaxRetryWaitMs int64 `json:"maxRetryWaitMs"`
	BudgetMs       int64 `json:"budgetMs"`
}

// ComboCooldownWaitSettings is the comboCooldownWait section (§9, combos).
type ComboCooldownWaitSettings struct {
	Enabled     bool  `json:"enabled"`
	MaxWaitMs   int64 `json:"maxWaitMs"`
	MaxAttempts int   `json:"maxAttempts"`
	BudgetMs    int64 `json:"budgetMs"`
}

// ConnectionConcurrencySettings is the connectionConcurrency section (§8).
type ConnectionConcurrencySettings struct {
	Enabled    bool  `json:"enabled"`
	QueueDepth int   `json:"queueDepth"`
	SlotWaitMs int64 `json:"slotWaitMs"`
	FailOpen   bool  `json:"failOpen"`
}

// ModelLockoutSettings is the modelLockout section (§7).
type ModelLockoutSettings struct {
	Enabled               bool  `json:"enabled"`
	ErrorCodes            []int `json:"errorCodes"`
	BaseCooldownMs        int64 `json:"baseCooldownMs"`
	MaxCooldownMs         int64 `json:"maxCooldownMs"`
	MaxBackoffSteps       int   `json:"maxBackoffSteps"`
	UseExponentialBackoff bool  `json:"useExponentialBackoff"`
}

// SessionAffinitySettings is the sessionAffinity section (§5).
type SessionAffinitySettings struct {
	TTLMs int64 `json:"ttlMs"` // 0 = off
}

// TTL returns ttlMs as a duration.
func (s SessionAffinitySettings) TTL() time.Duration {
	return time.Duration(s.TTLMs) * time.Millisecond
}

// StreamRecoverySettings is the streamRecovery section (§11).
type StreamRecoverySettings struct {
	EarlyRetryMax      int                        `json:"earlyRetryMax"`
	ThroughputWatchdog ThroughputWatchdogSettings `json:"throughputWatchdog"`
}

// ThroughputWatchdogSettings is streamRecovery.throughputWatchdog.
type ThroughputWatchdogSettings struct {
	Enabled                 bool  `json:"enabled"`
	WarmupMs                int64 `json:"warmupMs"`
	WindowMs                int64 `json:"windowMs"`
	MinUsefulBytesPerSecond int   `json:"minUsefulBytesPerSecond"`
	MinUsefulBytes          int   `json:"minUsefulBytes"`
}

// EmergencyFallbackSettings is the emergencyFallback section (§13.3).
type EmergencyFallbackSettings struct {
	Enabled             bool   `json:"enabled"`
	Target              string `json:"target"`
	SkipForToolRequests bool   `json:"skipForToolRequests"`
	MaxOutputTokens     int    `json:"maxOutputTokens"`
}

// Active reports whether the fallback can run: enabled with a target (an
// env-enabled fallback without one is inert). Whether the target still
// resolves is the router's check.
func (e EmergencyFallbackSettings) Active() bool { return e.Enabled && e.Target != "" }

// ErrorRuleSetting is one operator provider error rule as the document holds
// it (40-admin-api §2.3), every field present.
type ErrorRuleSetting struct {
	ID         string      `json:"id"`
	Provider   string      `json:"provider"`
	Status     int         `json:"status"`
	Match      string      `json:"match"`
	Header     *RuleHeader `json:"header"`
	Reason     Reason      `json:"reason"`
	Scope      Scope       `json:"scope"`
	LockScope  *LockShape  `json:"lockScope"`
	CooldownMs *int64      `json:"cooldownMs"`
	Ban        bool        `json:"ban"`
	Enabled    bool        `json:"enabled"`
}

// ErrorRule converts the setting to the classifier's rule.
func (r ErrorRuleSetting) ErrorRule() ErrorRule {
	out := ErrorRule{ID: r.ID, Provider: r.Provider, Status: r.Status, Match: r.Match, Reason: r.Reason,
		Scope: r.Scope, Ban: r.Ban}
	if r.Header != nil {
		h := *r.Header
		out.Header = &h
	}
	if r.LockScope != nil {
		out.LockScope = *r.LockScope
	}
	if r.CooldownMs != nil {
		ms := *r.CooldownMs
		out.CooldownMs = &ms
	}
	enabled := r.Enabled
	out.Enabled = &enabled
	return out
}

func (d Document) profiles() [3]Profile {
	return [3]Profile{services.AuthOAuth, services.AuthAPIKey, services.AuthLocal}
}

// Breaker returns the providerBreaker config. DegradationThreshold is always
// set to the effective value (equal to the derived one when derived).
func (d Document) Breaker() BreakerConfig {
	out := BreakerConfig{}
	for i, s := range [3]BreakerProfileSettings{d.ProviderBreaker.OAuth, d.ProviderBreaker.APIKey, d.ProviderBreaker.Local} {
		deg := s.DegradationThreshold
		out[d.profiles()[i]] = BreakerProfile{DegradationThreshold: &deg, FailureThreshold: s.FailureThreshold,
			ResetTimeoutMs: s.ResetTimeoutMs, HalfOpenRequests: s.HalfOpenRequests,
			EscalateAfterCycles: s.EscalateAfterCycles, MaxBackoffMultiplier: s.MaxBackoffMultiplier}
	}
	return out
}

// Cooldown returns the connectionCooldown config.
func (d Document) Cooldown() CooldownConfig {
	out := CooldownConfig{Profiles: map[Profile]CooldownProfile{}, MaxRetryHintMs: d.ConnectionCooldown.MaxRetryHintMs}
	for i, s := range [3]CooldownProfileSettings{d.ConnectionCooldown.OAuth, d.ConnectionCooldown.APIKey, d.ConnectionCooldown.Local} {
		out.Profiles[d.profiles()[i]] = CooldownProfile(s)
	}
	return out
}

// WindowGate returns the providerCooldown config.
func (d Document) WindowGate() WindowGateConfig {
	pc := d.ProviderCooldown
	out := WindowGateConfig{Enabled: pc.Enabled, Profiles: map[Profile]WindowProfile{},
		MinRetryCooldownMs: pc.MinRetryCooldownMs, MaxRetryCooldownMs: pc.MaxRetryCooldownMs}
	for i, s := range [3]WindowProfileSettings{pc.OAuth, pc.APIKey, pc.Local} {
		out.Profiles[d.profiles()[i]] = WindowProfile(s)
	}
	return out
}

// Lockout returns the modelLockout config.
func (d Document) Lockout() LockoutConfig {
	m := d.ModelLockout
	return LockoutConfig{Enabled: m.Enabled, ErrorCodes: slices.Clone(m.ErrorCodes), BaseCooldownMs: m.BaseCooldownMs,
		MaxCooldownMs: m.MaxCooldownMs, MaxBackoffSteps: m.MaxBackoffSteps, UseExponentialBackoff: m.UseExponentialBackoff}
}

// ErrorRules returns the operator rules in stored order (disabled ones
// included, with Enabled false).
func (d Document) ErrorRules() []ErrorRule {
	out := make([]ErrorRule, len(d.ProviderErrorRules))
	for i, r := range d.ProviderErrorRules {
		out[i] = r.ErrorRule()
	}
	return out
}

// MaxRetryHint is connectionCooldown.maxRetryHintMs as a duration.
func (d Document) MaxRetryHint() time.Duration {
	return time.Duration(d.ConnectionCooldown.MaxRetryHintMs) * time.Millisecond
}

// EgressLock returns the egress-group lock config: the provider list of
// SWITCHYARD_EGRESS_LOCK_PROVIDERS read at start (20-resilience §12).
func (d Document) EgressLock() EgressLockConfig {
	return EgressLockConfig{Enabled: len(d.egressProviders) > 0, Providers: slices.Clone(d.egressProviders)}
}
