package resilience

// Configuration of each mechanism, as the state machines consume it. The
// settings document (settings.go) produces these from stored values,
// environment and defaults; the state machines read them through a func so
// a settings change applies to the next evaluation without a restart.

// BreakerProfile tunes the provider circuit breaker of one profile (§2).
type BreakerProfile struct {
	// DegradationThreshold nil = derived: ceil(0.6 × FailureThreshold) limited to [1, FailureThreshold−1].
	DegradationThreshold *int
	FailureThreshold     int
	ResetTimeoutMs       int64
	HalfOpenRequests     int
	EscalateAfterCycles  int
	MaxBackoffMultiplier int
}

// Degradation returns the effective degradation threshold.
func (p BreakerProfile) Degradation() int {
	if p.DegradationThreshold != nil {
		return *p.DegradationThreshold
	}
	d := (p.FailureThreshold*6 + 9) / 10
	if d > p.FailureThreshold-1 {
		d = p.FailureThreshold - 1
	}
	if d < 1 {
		d = 1
	}
	return d
}

// BreakerConfig holds a profile per auth class.
type BreakerConfig map[Profile]BreakerProfile

// CooldownProfile tunes connection cooldowns of one profile (§4).
type CooldownProfile struct {
	BaseCooldownMs  int64
	MaxBackoffSteps int
	MaxCooldownMs   int64
}

// CooldownConfig is the connectionCooldown section.
type CooldownConfig struct {
	Profiles       map[Profile]CooldownProfile
	MaxRetryHintMs int64
}

// WindowProfile tunes the provider cooldown window gate of one profile (§3).
type WindowProfile struct {
	FailureThreshold int
	FailureWindowMs  int64
	CooldownMs       int64
}

// WindowGateConfig is the providerCooldown section.
type WindowGateConfig struct {
	Enabled            bool
	Profiles           map[Profile]WindowProfile
	MinRetryCooldownMs int64
	MaxRetryCooldownMs int64
}

// LockoutConfig is the modelLockout section (§7).
type LockoutConfig struct {
	Enabled               bool
	ErrorCodes            []int
	BaseCooldownMs        int64
	MaxCooldownMs         int64
	MaxBackoffSteps       int
	UseExponentialBackoff bool
}

// LocksStatus reports whether status is one of the lockout error codes.
func (c LockoutConfig) LocksStatus(status int) bool {
	for _, s := range c.ErrorCodes {
		if s == status {
			return true
		}
	}
	return false
}

// ErrorRule is one provider error rule (§1.2), built-in or operator-defined.
type ErrorRule struct {
	ID         string      `json:"id"`
	Provider   string      `json:"provider"`
	Status     int         `json:"status"`
	Match      string      `json:"match,omitempty"`
	Header     *RuleHeader `json:"header,omitempty"`
	Reason     Reason      `json:"reason"`
	Scope      Scope       `json:"scope"`
	LockScope  LockShape   `json:"lockScope,omitempty"`
	CooldownMs *int64      `json:"cooldownMs,omitempty"`
	Ban        bool        `json:"ban,omitempty"`
	Enabled    *bool       `json:"enabled,omitempty"`
	BuiltIn    bool        `json:"builtIn,omitempty"`
	Providers  []string    `json:"-"` // built-ins that cover a family
}

// RuleHeader matches a header value by substring.
type RuleHeader struct {
	Name     string `json:"name"`
	Contains string `json:"contains"`
}

// EgressLockConfig is the egressGroupLock section (§12).
type EgressLockConfig struct {
	Enabled   bool
	Providers []string
}
