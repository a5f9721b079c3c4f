package services

import (
	"encoding/json"
	"fmt"
	"strings"

	"switchyard/services/settings/schema"
)

// ComboConfig is a combo's config (30-routing §3) as stored: only the keys
// set, each typed; an unset key falls through to routing.comboDefaults, then
// to the built-in defaults. It is decoded once, on save, by the settings
// engine (DecodeComboConfig); everything else reads these fields. Fields are
// declared in JSON-name order, so the stored and served JSON keeps the
// sorted key order it had as a plain object.
type ComboConfig struct {
	Auto                  *ComboAuto         `json:"auto,omitzero"`
	Cache                 *ComboCache        `json:"cache,omitzero"`
	ContextRelay          *ComboContextRelay `json:"contextRelay,omitzero"`
	Fusion                *ComboFusion       `json:"fusion,omitzero"`
	MaxComboDepth         *int               `json:"maxComboDepth,omitzero"`
	MaxRetries            *int               `json:"maxRetries,omitzero"`
	Queue                 *ComboQueue        `json:"queue,omitzero"`
	ResetAware            *ComboResetAware   `json:"resetAware,omitzero"`
	ResetWindow           *ComboResetWindow  `json:"resetWindow,omitzero"`
	RetryDelayMs          *int64             `json:"retryDelayMs,omitzero"`
	SessionSticky         *bool              `json:"sessionSticky,omitzero"`
	StickyRoundRobinLimit *int               `json:"stickyRoundRobinLimit,omitzero"`
	StickyWeightedLimit   *int               `json:"stickyWeightedLimit,omitzero"`
	TargetTimeoutMs       *int64             `json:"targetTimeoutMs,omitzero"`
}

// ComboAuto is auto.* (30-routing §10.14). Weights: factor → weight.
type ComboAuto struct {
	ExplorationRate *float64           `json:"explorationRate,omitzero"`
	ModePack        *string            `json:"modePack,omitzero"`
	TieBand         *float64           `json:"tieBand,omitzero"`
	Weights         map[string]float64 `json:"weights,omitzero"`
}

// ComboCache is cache.* (30-routing §10.13).
type ComboCache struct {
	MinPrefixBytes *int `json:"minPrefixBytes,omitzero"`
}

// ComboContextRelay is contextRelay.* (30-routing §10.16).
type ComboContextRelay struct {
	HandoffModel          *string  `json:"handoffModel,omitzero"`
	HandoffProviders      []string `json:"handoffProviders,omitzero"` // non-nil empty = every provider
	HandoffThreshold      *float64 `json:"handoffThreshold,omitzero"`
	HandoffTtlMs          *int64   `json:"handoffTtlMs,omitzero"`
	MaxMessagesForSummary *int     `json:"maxMessagesForSummary,omitzero"`
}

// ComboFusion is fusion.* (30-routing §10.17).
type ComboFusion struct {
	Judge              *ComboJudge `json:"judge,omitzero"`
	MinPanel           *int        `json:"minPanel,omitzero"`
	PanelHardTimeoutMs *int64      `json:"panelHardTimeoutMs,omitzero"`
	StragglerGraceMs   *int64      `json:"stragglerGraceMs,omitzero"`
}

// ComboJudge is fusion.judge: {provider, model} or {comboId}.
type ComboJudge struct {
	ComboID  *string `json:"comboId,omitzero"`
	Model    *string `json:"model,omitzero"`
	Provider *string `json:"provider,omitzero"`
}

// ComboQueue is queue.* (30-routing §3).
type ComboQueue struct {
	ConcurrencyPerTarget *int   `json:"concurrencyPerTarget,omitzero"`
	Depth                *int   `json:"depth,omitzero"`
	TimeoutMs            *int64 `json:"timeoutMs,omitzero"`
}

// ComboResetAware is resetAware.* (30-routing §10.10); the mixes are
// [remaining weight, urgency weight] pairs.
type ComboResetAware struct {
	FiveHourMix    []float64 `json:"fiveHourMix,omitzero"`
	FiveHourWeight *float64  `json:"fiveHourWeight,omitzero"`
	GuardRemaining *float64  `json:"guardRemaining,omitzero"`
	TieBand        *float64  `json:"tieBand,omitzero"`
	WeeklyMix      []float64 `json:"weeklyMix,omitzero"`
	WeeklyWeight   *float64  `json:"weeklyWeight,omitzero"`
}

// ComboResetWindow is resetWindow.* (30-routing §10.11).
type ComboResetWindow struct {
	TieBandMs *int64   `json:"tieBandMs,omitzero"`
	Windows   []string `json:"windows,omitzero"`
}

// AutoFactors are the auto strategy's factor names (30-routing §10.14);
// routing.AutoFactors returns the same list (a test keeps them equal).
var AutoFactors = []string{"quota", "health", "costInv", "latencyInv", "taskFit", "stability", "tierPriority",
	"contextAffinity", "connectionDensity", "resetWindowAffinity", "cacheAffinity"}

// ModePacks are the auto strategy's named weight presets.
var ModePacks = []string{"ship-fast", "cost-saver", "quality-first", "offline-friendly", "reliability-first"}

// comboConfigSchema is the field table of combo config (30-routing §3).
// Unknown keys and out-of-range values are errors, never clamped; each
// field words its problem in one sentence.
var comboConfigSchema = schema.New(func() []schema.Field {
	i := func(path string, lo, hi int64) schema.Field {
		return schema.Field{Path: path, Kind: schema.Int, Min: lo, Max: hi,
			Problem: fmt.Sprintf("must be a whole number between %d and %d", lo, hi)}
	}
	f := func(path string, lo, hi float64) schema.Field {
		return schema.Field{Path: path, Kind: schema.Float, MinFloat: lo, MaxFloat: hi,
			Problem: fmt.Sprintf("must be a number between %g and %g", lo, hi)}
	}
	pair := func(path string) schema.Field {
		return schema.Field{Path: path, Kind: schema.FloatList, MinItems: 2, MaxItems: 2, MinFloat: 0, MaxFloat: 1,
			Problem: "must be a pair of numbers between 0 and 1"}
	}
	return []schema.Field{
		i("maxRetries", 0, 5), i("retryDelayMs", 0, 60000), i("targetTimeoutMs", 1000, 900000),
		i("maxComboDepth", 1, 10), {Path: "sessionSticky", Kind: schema.Bool},
		i("stickyRoundRobinLimit", 1, 1000), i("stickyWeightedLimit", 1, 1000),
		i("queue.concurrencyPerTarget", 0, 10000), i("queue.depth", 0, 100), i("queue.timeoutMs", 0, 300000),
		f("resetAware.fiveHourWeight", 0, 1), f("resetAware.weeklyWeight", 0, 1),
		pair("resetAware.fiveHourMix"), pair("resetAware.weeklyMix"),
		f("resetAware.guardRemaining", 0, 0.5), f("resetAware.tieBand", 0, 0.5),
		{Path: "resetWindow.windows", Kind: schema.StringList, MinItems: 1, OneOf: []string{"5h", "daily", "weekly", "monthly"},
			Problem: "must be a non-empty list of 5h, daily, weekly, monthly"},
		i("resetWindow.tieBandMs", 0, 86400000),
		{Path: "auto.weights", Kind: schema.JSON, Check: checkAutoWeights},
		{Path: "auto.modePack", Kind: schema.String, OneOf: ModePacks, Problem: "must be one of " + strings.Join(ModePacks, ", ")},
		f("auto.explorationRate", 0, 0.5), f("auto.tieBand", 0, 0.5),
		i("cache.minPrefixBytes", 0, 1048576),
		f("contextRelay.handoffThreshold", 0.5, 0.95),
		{Path: "contextRelay.handoffModel", Kind: schema.String, Problem: "must be a model name", Check: checkHandoffModel},
		{Path: "contextRelay.handoffProviders", Kind: schema.StringList, Problem: "must be a list of provider ids"},
		i("contextRelay.maxMessagesForSummary", 4, 200), i("contextRelay.handoffTtlMs", 60000, 86400000),
		{Path: "fusion.judge", Kind: schema.JSON, Check: checkFusionJudge},
		i("fusion.minPanel", 1, 10), i("fusion.stragglerGraceMs", 0, 120000), i("fusion.panelHardTimeoutMs", 1000, 600000),
	}
}())

// DecodeComboConfig decodes and checks a combo config as the API and the
// builder send it (decoded JSON). null values are dropped (they fall through
// to the defaults); problems are keyed by dotted path ("queue.depth").
func DecodeComboConfig(raw map[string]any) (ComboConfig, map[string]string) {
	vals, errs := comboConfigSchema.Decode(raw, true)
	if len(errs) > 0 {
		return ComboConfig{}, errs
	}
	cfg, err := schema.Build[ComboConfig](comboConfigSchema, vals)
	if err != nil {
		return ComboConfig{}, map[string]string{"": err.Error()}
	}
	return cfg, nil
}

// IsZero reports a config that sets nothing.
func (c ComboConfig) IsZero() bool { return c == ComboConfig{} }

// checkAutoWeights accepts an object of known factor → number ≥ 0.
func checkAutoWeights(v any, _ bool) (any, map[string]string) {
	bad := map[string]string{"": "must be an object of factor → number ≥ 0"}
	w, err := schema.Convert[map[string]*float64](v)
	if err != nil {
		return nil, bad
	}
	for _, k := range schema.SortedKeys(w) {
		if !contains(AutoFactors, k) {
			return nil, map[string]string{"": "unknown factor '" + k + "'; factors: " + strings.Join(AutoFactors, ", ")}
		}
	}
	for _, f := range w {
		if f == nil || *f < 0 {
			return nil, bad
		}
	}
	return v, nil
}

func checkHandoffModel(v any, _ bool) (any, map[string]string) {
	if s := v.(string); s == "" || len(s) > 256 {
		return nil, map[string]string{"": "must be a model name"}
	}
	return v, nil
}

// checkFusionJudge accepts exactly {"provider", "model"} or {"comboId"}.
func checkFusionJudge(v any, _ bool) (any, map[string]string) {
	keys, errKeys := schema.Convert[map[string]json.RawMessage](v)
	j, errJudge := schema.Convert[ComboJudge](v)
	if errKeys == nil && errJudge == nil &&
		(len(keys) == 1 && j.ComboID != nil || len(keys) == 2 && j.Provider != nil && j.Model != nil) {
		return v, nil
	}
	return nil, map[string]string{"": `must be {"provider", "model"} or {"comboId"}`}
}

// ConfigJSON encodes a combo config for storage.
func ConfigJSON(cfg ComboConfig) string {
	b, err := json.Marshal(cfg)
	if err != nil {
		return "{}"
	}
	return string(b)
}
