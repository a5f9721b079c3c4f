package resilience

// The resilience settings document (40-admin-api §2): one JSON object stored
// sparsely under the settings key "resilience", served as effective values
// (stored > env > default, 20-resilience §0). The field table of §2.3 is
// resilienceFields; the state machines consume the configs the Document
// methods produce (config.go).

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
		out.Profiles[d.profiles()[i]] = CooldownProfile{BaseCooldownMs: s.BaseCooldownMs, MaxBackoffSteps: s.MaxBackoffSteps, MaxCooldownMs: s.MaxCooldownMs}
	}
	return out
}

// WindowGate returns the providerCooldown config.
func (d Document) WindowGate() WindowGateConfig {
	pc := d.ProviderCooldown
	out := WindowGateConfig{Enabled: pc.Enabled, Profiles: map[Profile]WindowProfile{},
		MinRetryCooldownMs: pc.MinRetryCooldownMs, MaxRetryCooldownMs: pc.MaxRetryCooldownMs}
	for i, s := range [3]WindowProfileSettings{pc.OAuth, pc.APIKey, pc.Local} {
		out.Profiles[d.profiles()[i]] = WindowProfile{FailureThreshold: s.FailureThreshold, FailureWindowMs: s.FailureWindowMs, CooldownMs: s.CooldownMs}
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

// ---- the field table (40-admin-api §2.3) ----

// Env names of the resilience settings that are not per profile.
const (
	EnvRateLimitAutoEnable       = "RATE_LIMIT_AUTO_ENABLE"
	EnvRateLimitMaxWaitMs        = "RATE_LIMIT_MAX_WAIT_MS"
	EnvRateLimitMaxQueueDepth    = "RATE_LIMIT_MAX_QUEUE_DEPTH"
	EnvRateLimitQueueWaitMs      = "RATE_LIMIT_QUEUE_WAIT_MS"
	EnvProviderCooldownEnabled   = "PROVIDER_COOLDOWN_ENABLED"
	EnvProviderCooldownMinMs     = "PROVIDER_COOLDOWN_MIN_MS"
	EnvProviderCooldownMaxMs     = "PROVIDER_COOLDOWN_MAX_MS"
	EnvSessionAffinityTTLMs      = "SWITCHYARD_SESSION_AFFINITY_TTL_MS"
	EnvWatchdogEnabled           = "STREAM_THROUGHPUT_WATCHDOG_ENABLED"
	EnvEmergencyFallback         = "SWITCHYARD_EMERGENCY_FALLBACK"
	EnvEmergencyFallbackTarget   = "SWITCHYARD_EMERGENCY_FALLBACK_TARGET"
	EnvEgressLockProviders       = "SWITCHYARD_EGRESS_LOCK_PROVIDERS"
	envWatchdogPrefix            = "STREAM_THROUGHPUT_WATCHDOG_"
	settingsProfileEnvBreaker    = "SWITCHYARD_BREAKER_"
	settingsProfileEnvWindowGate = "SWITCHYARD_PROVIDER_COOLDOWN_"
)

type settingsProfileDefaults struct {
	name                                          string
	cdBase, cdSteps, cdMax                        int64
	bkFail, bkDeg, bkReset, bkEscalate, bkMaxMult int64
	wgFail, wgWindow, wgCooldown                  int64
}

var settingsProfiles = []settingsProfileDefaults{
	{"oauth", 5000, 8, 300000, 8, 5, 60000, 2, 8, 10, 900000, 300000},
	{"apikey", 3000, 5, 300000, 12, 7, 30000, 3, 4, 15, 1800000, 600000},
	{"local", 1000, 4, 60000, 2, 1, 15000, 3, 4, 5, 300000, 60000},
}

// DefaultLockoutErrorCodes are modelLockout.errorCodes by default.
var DefaultLockoutErrorCodes = []int{403, 404, 429, 502, 503, 504}

// ruleSettingReasons are the reasons a rule may give (R§1.4 minus client_abort, local_limit).
var ruleSettingReasons = []Reason{ReasonRateLimit, ReasonQuotaExhausted, ReasonCreditsExhausted, ReasonAuthError,
	ReasonForbidden, ReasonNotFound, ReasonModelCapacity, ReasonServerError, ReasonTransient,
	ReasonRequestRejected, ReasonCallerError}

// SettingsOptions are what the settings service needs from outside.
type SettingsOptions struct {
	// Getenv reads the environment at start (nil = none).
	Getenv func(string) string
	// Logger receives one WARN per ignored env value or stored field (nil = discard).
	Logger *slog.Logger
	// ResolveTarget reports why an emergency fallback target does not
	// resolve (nil error = it resolves: an enabled combo name or a known
	// provider/model). nil accepts any well-formed target.
	ResolveTarget func(ctx context.Context, target string) error
	// KnownProvider reports whether id is a catalogue id or an existing
	// custom provider (rule providers, routing.providerStrategies keys).
	// nil accepts any id.
	KnownProvider func(id string) bool
	// Feed carries every stored document (ChangeSettings, Version = its
	// revision) to the components that cache settings, and brings the ones
	// stored elsewhere back into this service. nil = neither.
	Feed services.ChangeFeed
}

func resilienceFields(opts SettingsOptions) []services.SettingField {
	i := func(path string, def, min, max int64, env string) services.SettingField {
		return services.SettingField{Path: path, Kind: services.SettingInt, Default: def, Min: min, Max: max, Env: env}
	}
	b := func(path string, def bool, env string) services.SettingField {
		return services.SettingField{Path: path, Kind: services.SettingBool, Default: def, Env: env}
	}
	f := []services.SettingField{
		b("requestQueue.autoEnableApiKeyProviders", false, EnvRateLimitAutoEnable),
		i("requestQueue.requestsPerMinute", 60, 1, 1000000, ""),
		i("requestQueue.minTimeBetweenRequestsMs", 350, 0, 3600000, ""),
		i("requestQueue.concurrentRequests", 6, 1, 10000, ""),
		i("requestQueue.maxWaitMs", 15000, 1, 30000, EnvRateLimitMaxWaitMs),
		i("requestQueue.maxQueueDepth", 0, 0, 100000, EnvRateLimitMaxQueueDepth),
		i("requestQueue.queueWaitMs", 0, 0, 600000, EnvRateLimitQueueWaitMs),
		i("connectionCooldown.maxRetryHintMs", 604800000, 1000, 2592000000, ""),
	}
	for _, p := range settingsProfiles {
		pre := "connectionCooldown." + p.name + "."
		f = append(f,
			i(pre+"baseCooldownMs", p.cdBase, 0, 600000, ""),
			i(pre+"maxBackoffSteps", p.cdSteps, 0, 20, ""),
			i(pre+"maxCooldownMs", p.cdMax, 0, 86400000, ""))
	}
	for _, p := range settingsProfiles {
		pre, env := "providerBreaker."+p.name+".", settingsProfileEnvBreaker+strings.ToUpper(p.name)+"_"
		f = append(f,
			i(pre+"failureThreshold", p.bkFail, 1, 1000, env+"FAILURE_THRESHOLD"),
			i(pre+"degradationThreshold", p.bkDeg, 1, 999, env+"DEGRADATION_THRESHOLD"),
			i(pre+"resetTimeoutMs", p.bkReset, 1000, 3600000, env+"RESET_MS"),
			i(pre+"halfOpenRequests", 1, 1, 10, ""),
			i(pre+"escalateAfterCycles", p.bkEscalate, 0, 20, ""),
			i(pre+"maxBackoffMultiplier", p.bkMaxMult, 1, 64, ""))
	}
	f = append(f,
		b("providerCooldown.enabled", false, EnvProviderCooldownEnabled),
		i("providerCooldown.minRetryCooldownMs", 5000, 0, 300000, EnvProviderCooldownMinMs),
		i("providerCooldown.maxRetryCooldownMs", 300000, 0, 3600000, EnvProviderCooldownMaxMs))
	for _, p := range settingsProfiles {
		pre, env := "providerCooldown."+p.name+".", settingsProfileEnvWindowGate+strings.ToUpper(p.name)+"_"
		f = append(f,
			i(pre+"failureThreshold", p.wgFail, 1, 1000, env+"FAILURE_THRESHOLD"),
			i(pre+"failureWindowMs", p.wgWindow, 1000, 86400000, env+"FAILURE_WINDOW_MS"),
			i(pre+"cooldownMs", p.wgCooldown, 1000, 86400000, env+"COOLDOWN_MS"))
	}
	codes := make([]int64, len(DefaultLockoutErrorCodes))
	for k, c := range DefaultLockoutErrorCodes {
		codes[k] = int64(c)
	}
	f = append(f,
		b("waitForCooldown.enabled", true, ""),
		i("waitForCooldown.maxRetries", 5, 0, 10, ""),
		i("waitForCooldown.maxRetryWaitMs", 90000, 0, 300000, ""),
		i("waitForCooldown.budgetMs", 300000, 0, 600000, ""),
		b("comboCooldownWait.enabled", true, ""),
		i("comboCooldownWait.maxWaitMs", 90000, 0, 300000, ""),
		i("comboCooldownWait.maxAttempts", 5, 0, 10, ""),
		i("comboCooldownWait.budgetMs", 300000, 0, 600000, ""),
		b("connectionConcurrency.enabled", true, ""),
		i("connectionConcurrency.queueDepth", 20, 0, 100, ""),
		i("connectionConcurrency.slotWaitMs", 30000, 0, 300000, ""),
		b("connectionConcurrency.failOpen", true, ""),
		b("modelLockout.enabled", false, ""),
		services.SettingField{Path: "modelLockout.errorCodes", Kind: services.SettingIntList, Default: codes,
			MinItems: 1, MaxItems: 20, Min: 400, Max: 599, Check: normaliseErrorCodes},
		i("modelLockout.baseCooldownMs", 120000, 5000, 600000, ""),
		i("modelLockout.maxCooldownMs", 1800000, 5000, 3600000, ""),
		i("modelLockout.maxBackoffSteps", 10, 0, 20, ""),
		b("modelLockout.useExponentialBackoff", true, ""),
		i("sessionAffinity.ttlMs", 900000, 0, 86400000, EnvSessionAffinityTTLMs),
		i("streamRecovery.earlyRetryMax", 1, 0, 4, ""),
		b("streamRecovery.throughputWatchdog.enabled", false, EnvWatchdogEnabled),
		i("streamRecovery.throughputWatchdog.warmupMs", 30000, 0, 600000, envWatchdogPrefix+"WARMUP_MS"),
		i("streamRecovery.throughputWatchdog.windowMs", 30000, 1000, 600000, envWatchdogPrefix+"WINDOW_MS"),
		i("streamRecovery.throughputWatchdog.minUsefulBytesPerSecond", 4, 1, 1000000, envWatchdogPrefix+"MIN_BYTES_PER_SECOND"),
		i("streamRecovery.throughputWatchdog.minUsefulBytes", 1, 1, 1000000, envWatchdogPrefix+"MIN_USEFUL_BYTES"),
		b("emergencyFallback.enabled", false, EnvEmergencyFallback),
		services.SettingField{Path: "emergencyFallback.target", Kind: services.SettingString, Default: "", MaxLen: 200,
			Env: EnvEmergencyFallbackTarget, Check: checkFallbackTarget},
		b("emergencyFallback.skipForToolRequests", true, ""),
		i("emergencyFallback.maxOutputTokens", 4096, 1, 131072, ""),
		services.SettingField{Path: "providerErrorRules", Kind: services.SettingArray, Default: []any{}, MaxItems: 50,
			Check: func(v any, live bool) (any, map[string]string) {
				known := opts.KnownProvider
				if !live {
					known = nil
				}
				return checkErrorRules(v.([]any), known)
			}},
		b("autoDisableBannedAccounts", false, ""),
	)
	return f
}

func normaliseErrorCodes(v any, _ bool) (any, map[string]string) {
	codes := slices.Clone(v.([]int64))
	slices.Sort(codes)
	return slices.Compact(codes), nil
}

func checkFallbackTarget(v any, _ bool) (any, map[string]string) {
	s := v.(string)
	if s != strings.TrimSpace(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' }) {
		return nil, map[string]string{"": "must be a combo name or provider/model without spaces"}
	}
	if strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") {
		return nil, map[string]string{"": "must be a combo name or provider/model"}
	}
	return s, nil
}

// checkErrorRules validates and normalises providerErrorRules (R§1.2,
// 40-admin-api §2.3): every field present, ids generated where missing.
func checkErrorRules(rules []any, known func(string) bool) (any, map[string]string) {
	errs := map[string]string{}
	out := make([]any, len(rules))
	ids := map[string]int{}
	type key struct {
		provider string
		status   int
	}
	catchAll := map[key]int{} // first enabled rule matching everything for (provider, status)
	for n, item := range rules {
		p := "." + strconv.Itoa(n)
		r, ok := item.(map[string]any)
		if !ok {
			errs[p] = "must be an object"
			continue
		}
		bad := func(field, msg string) { errs[p+"."+field] = msg }
		for k := range r {
			switch k {
			case "id", "provider", "status", "match", "header", "reason", "scope", "lockScope", "cooldownMs", "ban", "enabled":
			default:
				bad(k, "unknown field")
			}
		}
		norm := map[string]any{"match": "", "header": nil, "lockScope": nil, "cooldownMs": nil, "ban": false, "enabled": true}
		// id
		switch id := r["id"].(type) {
		case nil:
			norm["id"] = "r_" + services.NewTargetID()
		case string:
			switch {
			case id == "":
				norm["id"] = "r_" + services.NewTargetID()
			case utf8.RuneCountInString(id) > 64 || strings.TrimSpace(id) != id:
				bad("id", "must be at most 64 characters without surrounding spaces")
			default:
				norm["id"] = id
			}
		default:
			bad("id", "must be a string")
		}
		if id, ok := norm["id"].(string); ok {
			if first, dup := ids[id]; dup {
				bad("id", fmt.Sprintf("must be unique: rule %d has the same id", first+1))
			} else {
				ids[id] = n
			}
		}
		// provider
		provider, isStr := r["provider"].(string)
		switch {
		case r["provider"] == nil:
			bad("provider", "is required")
		case !isStr || strings.TrimSpace(provider) == "":
			bad("provider", "must be a provider id")
		case known != nil && !known(provider):
			bad("provider", fmt.Sprintf("unknown provider %q", provider))
		default:
			norm["provider"] = provider
		}
		// status
		status := 0
		if r["status"] == nil {
			bad("status", "is required")
		} else if n64, msg := ruleInt(r["status"], 100, 599); msg != "" {
			bad("status", msg)
		} else {
			status = int(n64)
			norm["status"] = float64(status)
		}
		// match
		match := ""
		if v, present := r["match"]; present && v != nil {
			s, ok := v.(string)
			switch {
			case !ok:
				bad("match", "must be a string")
			case utf8.RuneCountInString(s) > 200:
				bad("match", "must be at most 200 characters")
			default:
				match = s
				norm["match"] = s
			}
		}
		// header
		hasHeader := false
		if v := r["header"]; v != nil {
			h, ok := v.(map[string]any)
			if !ok {
				bad("header", `must be {"name", "contains"} or null`)
			} else {
				for k := range h {
					if k != "name" && k != "contains" {
						errs[p+".header."+k] = "unknown field"
					}
				}
				name, _ := h["name"].(string)
				contains, _ := h["contains"].(string)
				okName := name != "" && utf8.RuneCountInString(name) <= 64 && isHeaderToken(name)
				okContains := contains != "" && utf8.RuneCountInString(contains) <= 200
				if !okName {
					errs[p+".header.name"] = "must be a header name of 1 to 64 token characters"
				}
				if !okContains {
					errs[p+".header.contains"] = "must be 1 to 200 characters"
				}
				if okName && okContains {
					hasHeader = true
					norm["header"] = map[string]any{"name": name, "contains": contains}
				}
			}
		}
		// reason
		reason, _ := r["reason"].(string)
		switch {
		case r["reason"] == nil:
			bad("reason", "is required")
		case !slices.Contains(ruleSettingReasons, Reason(reason)):
			names := make([]string, len(ruleSettingReasons))
			for k, x := range ruleSettingReasons {
				names[k] = string(x)
			}
			bad("reason", "must be one of "+strings.Join(names, ", "))
		default:
			norm["reason"] = reason
		}
		// scope
		scope, _ := r["scope"].(string)
		switch Scope(scope) {
		case ScopeModel, ScopeConnection, ScopeProvider, ScopeNone:
			norm["scope"] = scope
		default:
			if r["scope"] == nil {
				bad("scope", "is required")
			} else {
				bad("scope", "must be one of model, connection, provider, none")
			}
		}
		// lockScope
		if v := r["lockScope"]; v != nil {
			s, _ := v.(string)
			switch {
			case s != string(ShapeFamily) && s != string(ShapeBase) && s != string(ShapeExact):
				bad("lockScope", "must be family, base, exact or null")
			case Scope(scope) != ScopeModel:
				bad("lockScope", "only applies with scope model")
			default:
				norm["lockScope"] = s
			}
		}
		// cooldownMs
		if v := r["cooldownMs"]; v != nil {
			if ms, msg := ruleInt(v, 1000, 86400000); msg != "" {
				bad("cooldownMs", msg)
			} else {
				norm["cooldownMs"] = float64(ms)
			}
		}
		// ban, enabled
		if v, present := r["ban"]; present && v != nil {
			switch ban, ok := v.(bool); {
			case !ok:
				bad("ban", "must be true or false")
			case ban && Scope(scope) != ScopeConnection:
				bad("ban", "only applies with scope connection")
			default:
				norm["ban"] = ban
			}
		}
		enabled := true
		if v, present := r["enabled"]; present && v != nil {
			if e, ok := v.(bool); ok {
				enabled = e
				norm["enabled"] = e
			} else {
				bad("enabled", "must be true or false")
			}
		}
		// An enabled rule can never match when an earlier enabled rule has
		// the same provider and status, no match text and no header.
		if enabled && provider != "" && status != 0 {
			k := key{strings.ToLower(strings.TrimSpace(provider)), status}
			if first, shadowed := catchAll[k]; shadowed {
				if _, has := errs[p]; !has {
					errs[p] = fmt.Sprintf("rule %d can never match: rule %d above it has the same provider and status, no match text and no header", n+1, first+1)
				}
			} else if match == "" && !hasHeader {
				catchAll[k] = n
			}
		}
		out[n] = norm
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func ruleInt(v any, min, max int64) (int64, string) {
	f, ok := v.(float64)
	if !ok || f != float64(int64(f)) {
		return 0, "must be a whole number"
	}
	if f < float64(min) || f > float64(max) {
		return 0, fmt.Sprintf("must be between %d and %d", min, max)
	}
	return int64(f), ""
}

// isHeaderToken reports whether s is an RFC 9110 token (a header name).
func isHeaderToken(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return s != ""
}

// derivedDegradation is ceil(0.6 × failureThreshold) limited to [1, failureThreshold−1].
func derivedDegradation(failure int64) int64 {
	return int64(BreakerProfile{FailureThreshold: int(failure)}.Degradation())
}

// ResilienceSpec defines the resilience document: its fields, derived
// values, cross-field rules (40-admin-api §2.3) and the env-only egress
// provider list.
func ResilienceSpec(opts SettingsOptions, egressProviders []string) services.SettingsDocSpec[Document] {
	fields := resilienceFields(opts)
	return services.SettingsDocSpec[Document]{
		Key:    services.SettingsResilience,
		Schema: services.NewSettingsSchema(fields),
		Derive: deriveDegradation,
		Cross: func(d *Document, c services.SettingsCheck) []services.SettingProblem {
			return resilienceCross(d, c, opts)
		},
		Finish: func(d *Document) {
			d.egressProviders = slices.Clone(egressProviders)
			if d.ProviderErrorRules == nil {
				d.ProviderErrorRules = []ErrorRuleSetting{}
			}
			if d.ModelLockout.ErrorCodes == nil {
				d.ModelLockout.ErrorCodes = []int{}
			}
		},
	}
}

// DefaultDocument is the document of built-in defaults (no env, nothing
// stored; egress lock on the default provider list).
func DefaultDocument() Document {
	return ResilienceSpec(SettingsOptions{}, ParseEgressLockProviders("")).Defaults()
}

// deriveDegradation: a breaker profile's degradationThreshold neither stored
// nor set by env is its built-in default while failureThreshold has its
// built-in value, else derived from failureThreshold (source "derived").
func deriveDegradation(eff services.SettingValues, src map[string]string) {
	for _, p := range settingsProfiles {
		deg := "providerBreaker." + p.name + ".degradationThreshold"
		fail := eff.Int("providerBreaker." + p.name + ".failureThreshold")
		if src[deg] != services.SourceDefault || fail == p.bkFail {
			continue
		}
		eff[deg] = derivedDegradation(fail)
		src[deg] = services.SourceDerived
	}
}

// resilienceCross checks the cross-field rules on the merged document.
func resilienceCross(d *Document, c services.SettingsCheck, opts SettingsOptions) []services.SettingProblem {
	var out []services.SettingProblem
	// atLeast: high ≥ low, reported on the field the PATCH changed.
	atLeast := func(lowPath, highPath string) {
		low, high := c.Values.Int(lowPath), c.Values.Int(highPath)
		if high >= low {
			return
		}
		lowName, highName := lastSettingPart(lowPath), lastSettingPart(highPath)
		if c.Touched(lowPath) && !c.Touched(highPath) {
			out = append(out, services.SettingProblem{Path: lowPath, Related: []string{highPath},
				Message: fmt.Sprintf("must not be greater than %s (%d)", highName, high)})
			return
		}
		out = append(out, services.SettingProblem{Path: highPath, Related: []string{lowPath},
			Message: fmt.Sprintf("must be at least %s (%d)", lowName, low)})
	}
	for _, p := range settingsProfiles {
		pre := "connectionCooldown." + p.name + "."
		atLeast(pre+"baseCooldownMs", pre+"maxCooldownMs")
	}
	for _, p := range settingsProfiles {
		pre := "providerBreaker." + p.name + "."
		degPath, failPath := pre+"degradationThreshold", pre+"failureThreshold"
		if src := c.Sources[degPath]; src != services.SourceStored && src != services.SourceEnv {
			continue
		}
		deg, fail := c.Values.Int(degPath), c.Values.Int(failPath)
		if deg < fail || deg == 1 && fail == 1 {
			continue
		}
		switch {
		case c.Touched(failPath) && !c.Touched(degPath):
			out = append(out, services.SettingProblem{Path: failPath, Related: []string{degPath},
				Message: fmt.Sprintf("must be higher than degradationThreshold (%d)", deg)})
		case fail == 1:
			out = append(out, services.SettingProblem{Path: degPath, Related: []string{failPath},
				Message: "must be 1 when failureThreshold is 1"})
		default:
			out = append(out, services.SettingProblem{Path: degPath, Related: []string{failPath},
				Message: fmt.Sprintf("must be lower than failureThreshold (%d)", fail)})
		}
	}
	atLeast("providerCooldown.minRetryCooldownMs", "providerCooldown.maxRetryCooldownMs")
	atLeast("modelLockout.baseCooldownMs", "modelLockout.maxCooldownMs")
	// Waits: enabled needs count and cap ≥ 1 and budget ≥ cap.
	waits := func(section, countName, capName string) {
		enabledPath, countPath, capPath, budgetPath := section+".enabled", section+"."+countName, section+"."+capName, section+".budgetMs"
		if !c.Values.Bool(enabledPath) {
			return
		}
		onlyEnabled := func(path string) bool { return c.Touched(enabledPath) && !c.Touched(path) }
		for _, path := range []string{countPath, capPath} {
			if c.Values.Int(path) >= 1 {
				continue
			}
			if onlyEnabled(path) {
				out = append(out, services.SettingProblem{Path: enabledPath, Related: []string{path},
					Message: fmt.Sprintf("needs %s of at least 1 (now %d)", path, c.Values.Int(path))})
			} else {
				out = append(out, services.SettingProblem{Path: path, Related: []string{enabledPath},
					Message: fmt.Sprintf("must be at least 1 while %s is true", enabledPath)})
			}
		}
		if budget, limit := c.Values.Int(budgetPath), c.Values.Int(capPath); budget < limit {
			switch {
			case c.Touched(capPath) && !c.Touched(budgetPath):
				out = append(out, services.SettingProblem{Path: capPath, Related: []string{budgetPath},
					Message: fmt.Sprintf("must not be greater than budgetMs (%d) while %s is true", budget, enabledPath)})
			case onlyEnabled(budgetPath):
				out = append(out, services.SettingProblem{Path: enabledPath, Related: []string{budgetPath},
					Message: fmt.Sprintf("needs budgetMs of at least %s (%d)", capName, limit)})
			default:
				out = append(out, services.SettingProblem{Path: budgetPath, Related: []string{capPath},
					Message: fmt.Sprintf("must be at least %s (%d) while %s is true", capName, limit, enabledPath)})
			}
		}
	}
	waits("waitForCooldown", "maxRetries", "maxRetryWaitMs")
	waits("comboCooldownWait", "maxAttempts", "maxWaitMs")
	// Emergency fallback: turning it on needs a resolving target.
	ef := d.EmergencyFallback
	const efEnabled, efTarget = "emergencyFallback.enabled", "emergencyFallback.target"
	if ef.Enabled && c.Patched != nil && (c.Touched(efEnabled) || c.Touched(efTarget)) {
		var resolveErr error
		if ef.Target != "" && opts.ResolveTarget != nil {
			resolveErr = opts.ResolveTarget(c.Ctx, ef.Target)
		}
		switch {
		case c.Touched(efEnabled) && (ef.Target == "" || resolveErr != nil && !c.Touched(efTarget)):
			out = append(out, services.SettingProblem{Path: efEnabled, Message: "set emergencyFallback.target first"})
		case resolveErr != nil:
			out = append(out, services.SettingProblem{Path: efTarget, Message: "does not resolve: " + resolveErr.Error()})
		}
	}
	return out
}

func lastSettingPart(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }
