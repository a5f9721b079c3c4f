package settings

import (
	"math"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"switchyard/services"
	"switchyard/services/settings/schema"
)

// generalSchema is the field table of 40-admin-api §2.5; names, defaults
// and ranges are those of the spec file that owns each field.
func generalSchema(known func(string) bool) *schema.Schema {
	ms := func(path string, def, min, max int64) schema.Field {
		return schema.Field{Path: path, Kind: schema.Int, Default: def, Min: min, Max: max}
	}
	strategies := services.AccountStrategies()
	return schema.New([]schema.Field{
		ms("routing.maxAttemptsPerRequest", 30, 1, 100),
		ms("routing.requestDeadlineMs", 600000, 1000, 3600000),
		{Path: "routing.fallbackStrategy", Kind: schema.String, Default: "fill-first", OneOf: strategies},
		ms("routing.stickyRoundRobinLimit", 3, 1, 1000),
		{Path: "routing.providerStrategies", Kind: schema.Object, Default: map[string]any{}, Check: providerStrategiesCheck(strategies, known)},
		ms("routing.quotaMaxStaleMs", 86400000, 60000, 604800000),
		{Path: "routing.autoTaskFitness", Kind: schema.Records, Default: []any{}, MaxItems: 100, Item: taskFitnessSchema},
		{Path: "routing.comboDefaults", Kind: schema.Object, Default: map[string]any{}, Check: checkComboDefaults},
		{Path: "routing.echoRequestedModel", Kind: schema.Bool, Default: false},
		ms("limits.maxBodyBytes", 33554432, 1<<20, 256<<20),
		ms("limits.maxHeaderBytes", 65536, 4096, 1<<20),
		ms("limits.maxJsonDepth", 64, 16, 256),
		ms("limits.maxMessages", 10000, 1, 100000),
		ms("server.readHeaderTimeoutMs", 10000, 1000, 300000),
		ms("server.bodyReadTimeoutMs", 60000, 1000, 3600000),
		ms("server.idleTimeoutMs", 120000, 1000, 3600000),
		ms("stream.keepaliveIdleMs", 2000, 0, 60000),
		ms("stream.writeTimeoutMs", 30000, 1000, 600000),
		ms("upstream.connectTimeoutMs", 10000, 1000, 120000),
		ms("upstream.streamIdleTimeoutMs", 120000, 1000, 3600000),
		{Path: "cors.allowedOrigins", Kind: schema.StringList, Default: []string{}, MaxItems: 100, MaxLen: 253, Check: checkOrigins},
		ms("translation.defaultMaxTokens", 4096, 1, 1000000),
		{Path: "logging.captureBodies", Kind: schema.Bool, Default: false, Env: EnvLogRequestBodies},
		ms("logging.captureMaxBytes", 32768, 1024, 1<<20),
		{Path: "logging.retentionDays", Kind: schema.Int, Default: int64(7), Min: 1, Max: 3650, Env: EnvLogRetentionDays},
		{Path: GeneralPricingModels, Kind: schema.Object, Default: map[string]any{}, Check: func(v any, live bool) (any, map[string]string) {
			check := known
			if !live {
				check = nil // stored documents keep overrides of since-deleted providers
			}
			return checkPriceOverrides(v.(map[string]any), check)
		}},
	})
}

// Bounds of pricing.models.
const (
	maxPriceOverrides = 500
	maxPricePerMTok   = 1_000_000
)

// checkPriceOverrides validates pricing.models: "provider/model" keys of a
// known provider (when known is set) and {inputPerMTok, outputPerMTok}
// numbers, both present after the merge.
func checkPriceOverrides(m map[string]any, known func(string) bool) (any, map[string]string) {
	if len(m) > maxPriceOverrides {
		return nil, map[string]string{"": "at most " + strconv.Itoa(maxPriceOverrides) + " models may have a price override"}
	}
	errs := map[string]string{}
	for k, v := range m {
		p := "." + k
		provider, model, ok := strings.Cut(k, "/")
		switch {
		case !ok || provider == "" || strings.TrimSpace(model) == "" || utf8.RuneCountInString(k) > 200 || hasControl(k):
			errs[p] = "must be named provider/model (at most 200 characters)"
			continue
		case known != nil && !known(provider):
			errs[p] = "unknown provider"
			continue
		}
		price, ok := v.(map[string]any)
		if !ok {
			errs[p] = "must be an object with inputPerMTok and outputPerMTok"
			continue
		}
		for f := range price {
			if f != "inputPerMTok" && f != "outputPerMTok" {
				errs[p+"."+f] = "unknown field"
			}
		}
		for _, f := range []string{"inputPerMTok", "outputPerMTok"} {
			n, ok := price[f].(float64)
			if !ok || n < 0 || n > maxPricePerMTok || math.IsNaN(n) {
				errs[p+"."+f] = "must be a price in USD per 1M tokens between 0 and " + strconv.Itoa(maxPricePerMTok)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return m, nil
}

// hasControl reports a control character (a key must print as it reads).
func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}

// taskFitnessSchema is one routing.autoTaskFitness rule.
var taskFitnessSchema = schema.New([]schema.Field{
	{Path: "modelPattern", Kind: schema.String, Required: msgPattern, Problem: msgPattern, Check: func(v any, _ bool) (any, map[string]string) {
		if s := v.(string); strings.TrimSpace(s) == "" || len([]rune(s)) > 200 {
			return nil, map[string]string{"": msgPattern}
		}
		return v, nil
	}},
	{Path: "task", Kind: schema.String, OneOf: []string{"code", "reasoning", "chat"}, Required: msgTask, Problem: msgTask},
	{Path: "score", Kind: schema.Float, MinFloat: 0, MaxFloat: 1, Required: msgScore, Problem: msgScore},
})

const (
	msgPattern = "must be a pattern of 1 to 200 characters"
	msgTask    = "must be one of code, reasoning, chat"
	msgScore   = "must be a number between 0 and 1"
)

// providerStrategiesCheck checks the merged routing.providerStrategies map:
// known provider ids, each with the fields of one account strategy.
func providerStrategiesCheck(strategies []string, known func(string) bool) func(any, bool) (any, map[string]string) {
	entry := schema.New([]schema.Field{
		{Path: "fallbackStrategy", Kind: schema.String, OneOf: strategies, Problem: "must be one of " + strings.Join(strategies, ", ")},
		{Path: "stickyRoundRobinLimit", Kind: schema.Int, Min: 1, Max: 1000},
	})
	return func(v any, live bool) (any, map[string]string) {
		m := v.(map[string]any)
		errs := map[string]string{}
		for _, id := range schema.SortedKeys(m) {
			p := "." + id
			if live && known != nil && !known(id) {
				errs[p] = "unknown provider"
				continue
			}
			ps, ok := m[id].(map[string]any)
			if !ok {
				errs[p] = "must be an object"
				continue
			}
			_, problems := entry.Decode(ps, live)
			for k, msg := range problems {
				errs[p+"."+k] = msg
			}
		}
		if len(errs) > 0 {
			return nil, errs
		}
		return m, nil
	}
}

// checkComboDefaults validates routing.comboDefaults like combo.config and
// stores it as the typed config encodes.
func checkComboDefaults(v any, _ bool) (any, map[string]string) {
	cfg, errs := services.DecodeComboConfig(v.(map[string]any))
	if len(errs) > 0 {
		out := map[string]string{}
		for k, msg := range errs {
			out["."+k] = msg
		}
		return nil, out
	}
	clean, err := schema.Canonical(cfg)
	if err != nil {
		return nil, map[string]string{"": err.Error()}
	}
	return clean, nil
}

func checkOrigins(v any, _ bool) (any, map[string]string) {
	errs := map[string]string{}
	for i, o := range v.([]string) {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			errs["."+strconv.Itoa(i)] = "must be an origin such as https://app.example.com"
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return v, nil
}
