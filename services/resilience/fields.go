package resilience

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"switchyard/services"
	"switchyard/services/settings"
	"switchyard/services/settings/schema"
)

// The field table of 40-admin-api §2.3. Within each section the fields are
// in the order the dashboard's cards show them (50-dashboard §6.9), which
// read their layout from this table.

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

// settingsProfiles are the auth-class profiles of the per-profile sections,
// with their defaults.
var settingsProfiles = []settingsProfileDefaults{
	{"oauth", 5000, 8, 300000, 8, 5, 60000, 2, 8, 10, 900000, 300000},
	{"apikey", 3000, 5, 300000, 12, 7, 30000, 3, 4, 15, 1800000, 600000},
	{"local", 1000, 4, 60000, 2, 1, 15000, 3, 4, 5, 300000, 60000},
}

// DefaultLockoutErrorCodes are modelLockout.errorCodes by default.
var DefaultLockoutErrorCodes = []int{403, 404, 429, 502, 503, 504}

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
	// custom provider (rule providers). nil accepts any id.
	KnownProvider func(id string) bool
	// Feed carries every stored document (ChangeSettings, Version = its
	// revision) to the components that cache settings, and brings the ones
	// stored elsewhere back into this service. nil = neither.
	Feed services.ChangeFeed
}

func intField(path string, def, min, max int64, env string) schema.Field {
	return schema.Field{Path: path, Kind: schema.Int, Default: def, Min: min, Max: max, Env: env}
}

func boolField(path string, def bool, env string) schema.Field {
	return schema.Field{Path: path, Kind: schema.Bool, Default: def, Env: env}
}

func resilienceFields(opts SettingsOptions) []schema.Field {
	var f []schema.Field
	f = append(f, requestQueueFields()...)
	f = append(f, connectionCooldownFields()...)
	f = append(f, breakerFields()...)
	f = append(f, providerCooldownFields()...)
	f = append(f, waitFields()...)
	f = append(f, modelLockoutFields()...)
	f = append(f, streamFields()...)
	return append(f,
		schema.Field{Path: "providerErrorRules", Kind: schema.Records, Default: []any{}, MaxItems: 50,
			Item: ruleSchema, Check: errorRulesCheck(opts.KnownProvider)},
		boolField("autoDisableBannedAccounts", false, ""))
}

func requestQueueFields() []schema.Field {
	return []schema.Field{
		boolField("requestQueue.autoEnableApiKeyProviders", false, EnvRateLimitAutoEnable),
		intField("requestQueue.requestsPerMinute", 60, 1, 1000000, ""),
		intField("requestQueue.minTimeBetweenRequestsMs", 350, 0, 3600000, ""),
		intField("requestQueue.concurrentRequests", 6, 1, 10000, ""),
		intField("requestQueue.maxWaitMs", 15000, 1, 30000, EnvRateLimitMaxWaitMs),
		intField("requestQueue.queueWaitMs", 0, 0, 600000, EnvRateLimitQueueWaitMs),
		intField("requestQueue.maxQueueDepth", 0, 0, 100000, EnvRateLimitMaxQueueDepth),
	}
}

func connectionCooldownFields() []schema.Field {
	f := []schema.Field{intField("connectionCooldown.maxRetryHintMs", 604800000, 1000, 2592000000, "")}
	for _, p := range settingsProfiles {
		pre := "connectionCooldown." + p.name + "."
		f = append(f,
			intField(pre+"baseCooldownMs", p.cdBase, 0, 600000, ""),
			intField(pre+"maxBackoffSteps", p.cdSteps, 0, 20, ""),
			intField(pre+"maxCooldownMs", p.cdMax, 0, 86400000, ""))
	}
	return f
}

func breakerFields() []schema.Field {
	var f []schema.Field
	for _, p := range settingsProfiles {
		pre, env := "providerBreaker."+p.name+".", settingsProfileEnvBreaker+strings.ToUpper(p.name)+"_"
		f = append(f,
			intField(pre+"failureThreshold", p.bkFail, 1, 1000, env+"FAILURE_THRESHOLD"),
			intField(pre+"degradationThreshold", p.bkDeg, 1, 999, env+"DEGRADATION_THRESHOLD"),
			intField(pre+"resetTimeoutMs", p.bkReset, 1000, 3600000, env+"RESET_MS"),
			intField(pre+"halfOpenRequests", 1, 1, 10, ""),
			intField(pre+"escalateAfterCycles", p.bkEscalate, 0, 20, ""),
			intField(pre+"maxBackoffMultiplier", p.bkMaxMult, 1, 64, ""))
	}
	return f
}

func providerCooldownFields() []schema.Field {
	f := []schema.Field{
		boolField("providerCooldown.enabled", false, EnvProviderCooldownEnabled),
		intField("providerCooldown.minRetryCooldownMs", 5000, 0, 300000, EnvProviderCooldownMinMs),
		intField("providerCooldown.maxRetryCooldownMs", 300000, 0, 3600000, EnvProviderCooldownMaxMs),
	}
	for _, p := range settingsProfiles {
		pre, env := "providerCooldown."+p.name+".", settingsProfileEnvWindowGate+strings.ToUpper(p.name)+"_"
		f = append(f,
			intField(pre+"failureThreshold", p.wgFail, 1, 1000, env+"FAILURE_THRESHOLD"),
			intField(pre+"failureWindowMs", p.wgWindow, 1000, 86400000, env+"FAILURE_WINDOW_MS"),
			intField(pre+"cooldownMs", p.wgCooldown, 1000, 86400000, env+"COOLDOWN_MS"))
	}
	return f
}

func waitFields() []schema.Field {
	return []schema.Field{
		boolField("waitForCooldown.enabled", true, ""),
		intField("waitForCooldown.maxRetries", 5, 0, 10, ""),
		intField("waitForCooldown.maxRetryWaitMs", 90000, 0, 300000, ""),
		intField("waitForCooldown.budgetMs", 300000, 0, 600000, ""),
		boolField("comboCooldownWait.enabled", true, ""),
		intField("comboCooldownWait.maxWaitMs", 90000, 0, 300000, ""),
		intField("comboCooldownWait.maxAttempts", 5, 0, 10, ""),
		intField("comboCooldownWait.budgetMs", 300000, 0, 600000, ""),
		boolField("connectionConcurrency.enabled", true, ""),
		boolField("connectionConcurrency.failOpen", true, ""),
		intField("connectionConcurrency.slotWaitMs", 30000, 0, 300000, ""),
		intField("connectionConcurrency.queueDepth", 20, 0, 100, ""),
	}
}

func modelLockoutFields() []schema.Field {
	codes := make([]int64, len(DefaultLockoutErrorCodes))
	for k, c := range DefaultLockoutErrorCodes {
		codes[k] = int64(c)
	}
	return []schema.Field{
		boolField("modelLockout.enabled", false, ""),
		{Path: "modelLockout.errorCodes", Kind: schema.IntList, Default: codes,
			MinItems: 1, MaxItems: 20, Min: 400, Max: 599, Check: normaliseErrorCodes},
		intField("modelLockout.baseCooldownMs", 120000, 5000, 600000, ""),
		intField("modelLockout.maxCooldownMs", 1800000, 5000, 3600000, ""),
		intField("modelLockout.maxBackoffSteps", 10, 0, 20, ""),
		boolField("modelLockout.useExponentialBackoff", true, ""),
	}
}

func streamFields() []schema.Field {
	return []schema.Field{
		intField("sessionAffinity.ttlMs", 900000, 0, 86400000, EnvSessionAffinityTTLMs),
		intField("streamRecovery.earlyRetryMax", 1, 0, 4, ""),
		boolField("streamRecovery.throughputWatchdog.enabled", false, EnvWatchdogEnabled),
		intField("streamRecovery.throughputWatchdog.warmupMs", 30000, 0, 600000, envWatchdogPrefix+"WARMUP_MS"),
		intField("streamRecovery.throughputWatchdog.windowMs", 30000, 1000, 600000, envWatchdogPrefix+"WINDOW_MS"),
		intField("streamRecovery.throughputWatchdog.minUsefulBytesPerSecond", 4, 1, 1000000, envWatchdogPrefix+"MIN_BYTES_PER_SECOND"),
		intField("streamRecovery.throughputWatchdog.minUsefulBytes", 1, 1, 1000000, envWatchdogPrefix+"MIN_USEFUL_BYTES"),
		boolField("emergencyFallback.enabled", false, EnvEmergencyFallback),
		{Path: "emergencyFallback.target", Kind: schema.String, Default: "", MaxLen: 200,
			Env: EnvEmergencyFallbackTarget, Check: checkFallbackTarget},
		boolField("emergencyFallback.skipForToolRequests", true, ""),
		intField("emergencyFallback.maxOutputTokens", 4096, 1, 131072, ""),
	}
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

// ResilienceSpec defines the resilience document: its fields, derived
// values, cross-field rules (40-admin-api §2.3) and the env-only egress
// provider list.
func ResilienceSpec(opts SettingsOptions, egressProviders []string) settings.Spec[Document] {
	return settings.Spec[Document]{
		Key:    services.SettingsResilience,
		Schema: schema.New(resilienceFields(opts)),
		Derive: deriveDegradation,
		Cross: func(d *Document, c settings.Check) []settings.Problem {
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
func deriveDegradation(eff schema.Values, src map[string]string) {
	for _, p := range settingsProfiles {
		deg := "providerBreaker." + p.name + ".degradationThreshold"
		fail := eff.Int("providerBreaker." + p.name + ".failureThreshold")
		if src[deg] != schema.SourceDefault || fail == p.bkFail {
			continue
		}
		eff[deg] = int64(BreakerProfile{FailureThreshold: int(fail)}.Degradation())
		src[deg] = schema.SourceDerived
	}
}
