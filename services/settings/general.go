package settings

import (
	"context"
	"log/slog"

	"switchyard/services"
)

// The general settings document (40-admin-api §2.5): everything outside
// the resilience mechanisms, stored under the key "general". Its field
// table is generalFields (general_fields.go); the gateway reads it through
// gateway.FromGeneral.

// General is the effective general settings document. Its JSON is the body
// of GET /api/settings; treat a published General as read-only.
type General struct {
	Routing     Routing     `json:"routing"`
	Limits      Limits      `json:"limits"`
	Server      Server      `json:"server"`
	Stream      Stream      `json:"stream"`
	Upstream    Upstream    `json:"upstream"`
	CORS        CORS        `json:"cors"`
	Translation Translation `json:"translation"`
	Logging     Logging     `json:"logging"`
	Pricing     Pricing     `json:"pricing"`
}

// Routing are the global routing settings (30-routing §3, §11).
type Routing struct {
	MaxAttemptsPerRequest int                         `json:"maxAttemptsPerRequest"`
	RequestDeadlineMs     int64                       `json:"requestDeadlineMs"`
	FallbackStrategy      string                      `json:"fallbackStrategy"`
	StickyRoundRobinLimit int                         `json:"stickyRoundRobinLimit"`
	ProviderStrategies    map[string]ProviderStrategy `json:"providerStrategies"`
	QuotaMaxStaleMs       int64                       `json:"quotaMaxStaleMs"`
	AutoTaskFitness       []TaskFitnessRule           `json:"autoTaskFitness"`
	// ComboDefaults is the combo config every combo (and a direct request,
	// the anonymous combo) starts from, validated like combo.config.
	ComboDefaults      services.ComboConfig `json:"comboDefaults"`
	EchoRequestedModel bool                 `json:"echoRequestedModel"`
}

// ProviderStrategy overrides the account strategy of one provider.
type ProviderStrategy struct {
	FallbackStrategy      *string `json:"fallbackStrategy,omitempty"`
	StickyRoundRobinLimit *int    `json:"stickyRoundRobinLimit,omitempty"`
}

// AccountStrategy returns the strategy and sticky limit for provider
// (30-routing §11 step 4).
func (r Routing) AccountStrategy(provider string) (strategy string, stickyLimit int) {
	strategy, stickyLimit = r.FallbackStrategy, r.StickyRoundRobinLimit
	if ps, ok := r.ProviderStrategies[provider]; ok {
		if ps.FallbackStrategy != nil {
			strategy = *ps.FallbackStrategy
		}
		if ps.StickyRoundRobinLimit != nil {
			stickyLimit = *ps.StickyRoundRobinLimit
		}
	}
	return strategy, stickyLimit
}

// TaskFitnessRule is one routing.autoTaskFitness rule (30-routing §10.14).
type TaskFitnessRule struct {
	ModelPattern string  `json:"modelPattern"`
	Task         string  `json:"task"`
	Score        float64 `json:"score"`
}

// Limits are the request limits (10-gateway-api §10).
type Limits struct {
	MaxBodyBytes   int64 `json:"maxBodyBytes"`
	MaxHeaderBytes int   `json:"maxHeaderBytes"`
	MaxJSONDepth   int   `json:"maxJsonDepth"`
	MaxMessages    int   `json:"maxMessages"`
}

// Server configures the listener (applies after a restart).
type Server struct {
	ReadHeaderTimeoutMs int64 `json:"readHeaderTimeoutMs"`
	BodyReadTimeoutMs   int64 `json:"bodyReadTimeoutMs"`
	IdleTimeoutMs       int64 `json:"idleTimeoutMs"`
}

// Stream tunes client streams (10-gateway-api §7.3, §7.5).
type Stream struct {
	KeepaliveIdleMs int64 `json:"keepaliveIdleMs"`
	WriteTimeoutMs  int64 `json:"writeTimeoutMs"`
}

// Upstream tunes upstream connections (10-gateway-api §7.5).
type Upstream struct {
	ConnectTimeoutMs    int64 `json:"connectTimeoutMs"`
	StreamIdleTimeoutMs int64 `json:"streamIdleTimeoutMs"`
}

// CORS lists the origins allowed on /v1 (10-gateway-api §1).
type CORS struct {
	AllowedOrigins []string `json:"allowedOrigins"`
}

// Translation tunes format translation (10-gateway-api §6.2).
type Translation struct {
	DefaultMaxTokens int `json:"defaultMaxTokens"`
}

// Logging tunes the request log (10-gateway-api §11, 40-admin-api §8).
type Logging struct {
	CaptureBodies   bool `json:"captureBodies"`
	CaptureMaxBytes int  `json:"captureMaxBytes"`
	RetentionDays   int  `json:"retentionDays"`
}

// Pricing overrides the built-in model price table (services.Prices), which
// prices the request log's estimated costs and cost-optimized routing.
type Pricing struct {
	// Models maps "provider/model" to its price in USD per 1M input and
	// output tokens, replacing the built-in list price (or giving one to a
	// model the table lacks, such as a custom provider's). Default {}; at
	// most 500 models; each price 0–1000000. A PATCH merges per model; null
	// removes an override.
	Models map[string]services.ModelPrice `json:"models"`
}

// GeneralOptions are what the general document needs from outside.
type GeneralOptions struct {
	// KnownProvider reports whether id is a catalogue id or an existing
	// custom provider (routing.providerStrategies keys); nil accepts any id.
	KnownProvider func(id string) bool
	// Getenv reads the environment at start (nil = none).
	Getenv func(string) string
	// Logger receives one WARN per ignored env value or stored field (nil = discard).
	Logger *slog.Logger
}

// Env names of general settings.
const (
	EnvLogRetentionDays = "SWITCHYARD_LOG_RETENTION_DAYS"
	EnvLogRequestBodies = "SWITCHYARD_LOG_REQUEST_BODIES"
	// GeneralPricingModels is the path of the model price overrides.
	GeneralPricingModels = "pricing.models"
)

// GeneralSpec defines the general settings document.
func GeneralSpec(opts GeneralOptions) Spec[General] {
	return Spec[General]{
		Key:    services.SettingsGeneral,
		Schema: generalSchema(opts.KnownProvider),
		Finish: func(g *General) {
			if g.Routing.ProviderStrategies == nil {
				g.Routing.ProviderStrategies = map[string]ProviderStrategy{}
			}
			if g.Routing.AutoTaskFitness == nil {
				g.Routing.AutoTaskFitness = []TaskFitnessRule{}
			}
			if g.CORS.AllowedOrigins == nil {
				g.CORS.AllowedOrigins = []string{}
			}
			if g.Pricing.Models == nil {
				g.Pricing.Models = map[string]services.ModelPrice{}
			}
		},
	}
}

// OpenGeneral loads the general document (opts.Getenv is read once, here).
func OpenGeneral(ctx context.Context, store services.SettingsStore, opts GeneralOptions) (*Document[General], error) {
	return Open(ctx, store, GeneralSpec(opts), opts.Getenv, opts.Logger)
}

// GeneralFlags are the feature flags of the general document (40-admin-api §9).
var GeneralFlags = []FlagDef{
	{Key: "logRequestBodies", Field: "logging.captureBodies",
		Description: "Record request and response bodies in the request log (up to logging.captureMaxBytes each)."},
}
