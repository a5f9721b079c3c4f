package resilience

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// SettingsService owns the resilience document (40-admin-api §2) and the
// general settings document (§2.5): it loads both at start from the store
// and the environment, publishes the effective documents for lock-free
// reads, applies PATCHes and serves the feature flags of §9 as views of
// their boolean fields.
type SettingsService struct {
	res  *services.SettingsDoc[Document]
	gen  *services.SettingsDoc[services.GeneralSettings]
	log  *slog.Logger
	cfgs atomic.Pointer[resilienceConfigsAt]
	feed services.ChangeFeed
}

// ResilienceConfigs are the consumer configs of one published document,
// computed once per settings change. Treat them as read-only.
type ResilienceConfigs struct {
	Breaker      BreakerConfig
	Cooldown     CooldownConfig
	WindowGate   WindowGateConfig
	Lockout      LockoutConfig
	ErrorRules   []ErrorRule // operator rules, stored order
	EgressLock   EgressLockConfig
	MaxRetryHint time.Duration
}

type resilienceConfigsAt struct {
	snap *services.SettingsSnapshot[Document]
	cfgs *ResilienceConfigs
}

// SettingsExplain is GET …?explain=true: the effective document, the
// built-in defaults, the source of every non-default field and the revision.
type SettingsExplain[T any] struct {
	Settings T                 `json:"settings"`
	Defaults T                 `json:"defaults"`
	Sources  map[string]string `json:"sources"`
	Revision int64             `json:"revision"`
}

// NewSettingsService loads both documents. opts.Getenv is read once, here:
// env values only supply defaults; an unparsable or out-of-range one is
// ignored with one WARN on opts.Logger.
func NewSettingsService(ctx context.Context, store services.SettingsStore, opts SettingsOptions) (*SettingsService, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	egress := ParseEgressLockProviders(getenv(EnvEgressLockProviders))
	res, err := services.OpenSettingsDoc(ctx, store, ResilienceSpec(opts, egress), getenv, log)
	if err != nil {
		return nil, err
	}
	gen, err := services.OpenSettingsDoc(ctx, store, services.GeneralSettingsSpec(services.GeneralSettingsOptions{KnownProvider: opts.KnownProvider}), getenv, log)
	if err != nil {
		return nil, err
	}
	s := &SettingsService{res: res, gen: gen, log: log, feed: opts.Feed}
	if s.feed != nil {
		s.feed.Subscribe(services.ChangeSettings, s.apply)
	}
	return s, nil
}

// apply is the ChangeSettings subscriber: a document stored with a newer
// revision than the one published here (by another replica, or behind this
// service's back) is read again. The service's own PATCHes arrive with the
// revision it already publishes and change nothing.
func (s *SettingsService) apply(ctx context.Context, c services.Change) error {
	var errs []error
	if c.Key == "" || c.Key == services.SettingsResilience {
		if c.Key == "" || c.Version > s.res.Current().Revision {
			errs = append(errs, s.res.Reload(ctx))
		}
	}
	if c.Key == "" || c.Key == services.SettingsGeneral {
		if c.Key == "" || c.Version > s.gen.Current().Revision {
			errs = append(errs, s.gen.Reload(ctx))
		}
	}
	return errors.Join(errs...)
}

// published announces a stored document; it runs after the PATCH released
// the document's lock, so subscribers may read (or reload) it.
func (s *SettingsService) published(ctx context.Context, key string, rev int64) error {
	if s.feed == nil {
		return nil
	}
	return s.feed.Publish(ctx, services.Change{Kind: services.ChangeSettings, Key: key, Version: rev})
}

// ---- resilience document ----

// Resilience returns the current effective resilience document (lock-free;
// read-only).
func (s *SettingsService) Resilience() *Document { return &s.res.Current().Doc }

// ResilienceSnapshot returns the document with its revision and sources.
func (s *SettingsService) ResilienceSnapshot() *services.SettingsSnapshot[Document] {
	return s.res.Current()
}

// ResilienceDefaults is the document of built-in defaults.
func (s *SettingsService) ResilienceDefaults() Document { return s.res.Defaults() }

// PatchResilience applies a PATCH /api/resilience body (40-admin-api §2.2)
// and returns the new effective document and revision. Errors:
// *services.ValidationError (every problem at once),
// services.ErrEmptySettingsPatch, *services.SettingsJSONError,
// services.ErrPreconditionFailed (stale ifMatch). Nothing is stored on error.
func (s *SettingsService) PatchResilience(ctx context.Context, patch []byte, ifMatch string) (Document, int64, error) {
	snap, err := s.res.Patch(ctx, patch, ifMatch)
	if err != nil {
		return Document{}, 0, err
	}
	return snap.Doc, snap.Revision, s.published(ctx, services.SettingsResilience, snap.Revision)
}

// Explain is GET /api/resilience?explain=true.
func (s *SettingsService) Explain() SettingsExplain[Document] {
	snap := s.res.Current()
	return SettingsExplain[Document]{Settings: snap.Doc, Defaults: s.res.Defaults(), Sources: snap.Sources(), Revision: snap.Revision}
}

// Configs returns the consumer configs of the current document, computed
// once per change (lock-free; read-only).
func (s *SettingsService) Configs() *ResilienceConfigs {
	snap := s.res.Current()
	if c := s.cfgs.Load(); c != nil && c.snap == snap {
		return c.cfgs
	}
	d := &snap.Doc
	c := &ResilienceConfigs{Breaker: d.Breaker(), Cooldown: d.Cooldown(), WindowGate: d.WindowGate(),
		Lockout: d.Lockout(), ErrorRules: d.ErrorRules(), EgressLock: d.EgressLock(), MaxRetryHint: d.MaxRetryHint()}
	s.cfgs.Store(&resilienceConfigsAt{snap: snap, cfgs: c})
	return c
}

// Config readers for the state machines (pass the method values, e.g.
// NewBreakers(clock, svc.BreakerConfig, …)).

func (s *SettingsService) BreakerConfig() BreakerConfig       { return s.Configs().Breaker }
func (s *SettingsService) CooldownConfig() CooldownConfig     { return s.Configs().Cooldown }
func (s *SettingsService) WindowGateConfig() WindowGateConfig { return s.Configs().WindowGate }
func (s *SettingsService) LockoutConfig() LockoutConfig       { return s.Configs().Lockout }
func (s *SettingsService) OperatorRules() []ErrorRule         { return s.Configs().ErrorRules }
func (s *SettingsService) EgressLockConfig() EgressLockConfig { return s.Configs().EgressLock }
func (s *SettingsService) MaxRetryHint() time.Duration        { return s.Configs().MaxRetryHint }

// ---- general document ----

// General returns the current effective general settings (lock-free; read-only).
func (s *SettingsService) General() *services.GeneralSettings { return &s.gen.Current().Doc }

// GeneralSnapshot returns the general document with its revision and sources.
func (s *SettingsService) GeneralSnapshot() *services.SettingsSnapshot[services.GeneralSettings] {
	return s.gen.Current()
}

// GeneralDefaults is the general document of built-in defaults.
func (s *SettingsService) GeneralDefaults() services.GeneralSettings { return s.gen.Defaults() }

// PatchGeneral applies a PATCH /api/settings body, like PatchResilience.
func (s *SettingsService) PatchGeneral(ctx context.Context, patch []byte, ifMatch string) (services.GeneralSettings, int64, error) {
	snap, err := s.gen.Patch(ctx, patch, ifMatch)
	if err != nil {
		return services.GeneralSettings{}, 0, err
	}
	return snap.Doc, snap.Revision, s.published(ctx, services.SettingsGeneral, snap.Revision)
}

// ExplainGeneral is GET /api/settings?explain=true.
func (s *SettingsService) ExplainGeneral() SettingsExplain[services.GeneralSettings] {
	snap := s.gen.Current()
	return SettingsExplain[services.GeneralSettings]{Settings: snap.Doc, Defaults: s.gen.Defaults(), Sources: snap.Sources(), Revision: snap.Revision}
}

// ---- feature flags (40-admin-api §9) ----

// FeatureFlag is one boolean switch as GET /api/feature-flags lists it.
type FeatureFlag struct {
	Key             string  `json:"key"`
	Field           string  `json:"field"`
	Value           bool    `json:"value"`
	Source          string  `json:"source"` // default, env or stored
	Env             *string `json:"env"`
	RequiresRestart bool    `json:"requiresRestart"`
	Description     string  `json:"description"`
}

type featureFlagDef struct {
	key, field, env, description string
	general                      bool // a field of the general document
}

var featureFlagDefs = []featureFlagDef{
	{key: "emergencyFallback", field: "emergencyFallback.enabled", env: EnvEmergencyFallback,
		description: "One last attempt on emergencyFallback.target when every target failed."},
	{key: "modelLockout", field: "modelLockout.enabled",
		description: "Lock a failing model on one connection while the connection keeps serving its other models."},
	{key: "providerCooldown", field: "providerCooldown.enabled", env: EnvProviderCooldownEnabled,
		description: "Keep combo requests off a provider that just failed repeatedly (provider cooldown window gate)."},
	{key: "throughputWatchdog", field: "streamRecovery.throughputWatchdog.enabled", env: EnvWatchdogEnabled,
		description: "Abort upstream streams that keep sending events but too little useful text."},
	{key: "waitForCooldown", field: "waitForCooldown.enabled",
		description: "Single-model requests wait for a short cooldown to end instead of failing."},
	{key: "comboCooldownWait", field: "comboCooldownWait.enabled",
		description: "Combo requests wait for a short cooldown to end instead of failing."},
	{key: "connectionConcurrency", field: "connectionConcurrency.enabled",
		description: "Enforce each connection's maxConcurrent slots."},
	{key: "rateLimitAutoEnable", field: "requestQueue.autoEnableApiKeyProviders", env: EnvRateLimitAutoEnable,
		description: "Pace API-key connections whose rate-limit protection is not set explicitly."},
	{key: "autoDisableBannedAccounts", field: "autoDisableBannedAccounts",
		description: "Disable a connection when it becomes banned."},
	{key: "logRequestBodies", field: services.GeneralCaptureBodies, env: services.EnvLogRequestBodies, general: true,
		description: "Record request and response bodies in the request log (up to logging.captureMaxBytes each)."},
}

// Flags lists the feature flags with their effective values and sources.
func (s *SettingsService) Flags() []FeatureFlag {
	res, gen := s.res.Current(), s.gen.Current()
	out := make([]FeatureFlag, len(featureFlagDefs))
	for i, d := range featureFlagDefs {
		var value bool
		var source string
		if d.general {
			value, source = gen.Doc.Logging.CaptureBodies, gen.Source(d.field)
		} else {
			value, source = resilienceFlagValue(&res.Doc, d.field), res.Source(d.field)
		}
		var env *string
		if d.env != "" {
			e := d.env
			env = &e
		}
		out[i] = FeatureFlag{Key: d.key, Field: d.field, Value: value, Source: source, Env: env, Description: d.description}
	}
	return out
}

func resilienceFlagValue(d *Document, field string) bool {
	switch field {
	case "emergencyFallback.enabled":
		return d.EmergencyFallback.Enabled
	case "modelLockout.enabled":
		return d.ModelLockout.Enabled
	case "providerCooldown.enabled":
		return d.ProviderCooldown.Enabled
	case "streamRecovery.throughputWatchdog.enabled":
		return d.StreamRecovery.ThroughputWatchdog.Enabled
	case "waitForCooldown.enabled":
		return d.WaitForCooldown.Enabled
	case "comboCooldownWait.enabled":
		return d.ComboCooldownWait.Enabled
	case "connectionConcurrency.enabled":
		return d.ConnectionConcurrency.Enabled
	case "requestQueue.autoEnableApiKeyProviders":
		return d.RequestQueue.AutoEnableApiKeyProviders
	case "autoDisableBannedAccounts":
		return d.AutoDisableBannedAccounts
	}
	return false
}

// PatchFlags applies PATCH /api/feature-flags: {"<key>": true|false|null};
// null drops the stored value. Unknown keys, non-booleans and rule
// violations come back at once as a *services.ValidationError keyed by flag
// key; nothing is stored on error.
func (s *SettingsService) PatchFlags(ctx context.Context, patch []byte) ([]FeatureFlag, error) {
	body, err := services.DecodeSettingsPatch(patch)
	if err != nil {
		return nil, err
	}
	keyOf := map[string]string{}
	resPatch, genPatch := map[string]any{}, map[string]any{}
	fields := map[string]string{}
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := body[k]
		var def *featureFlagDef
		for i := range featureFlagDefs {
			if featureFlagDefs[i].key == k {
				def = &featureFlagDefs[i]
			}
		}
		if def == nil {
			fields[k] = "unknown field"
			continue
		}
		if _, ok := v.(bool); !ok && v != nil {
			fields[k] = "must be true, false or null"
			continue
		}
		keyOf[def.field] = k
		target := resPatch
		if def.general {
			target = genPatch
		}
		setNestedPatch(target, def.field, v)
	}
	if len(fields) > 0 {
		return nil, &services.ValidationError{Fields: fields}
	}
	var parts []services.SettingsPatch
	if len(resPatch) > 0 {
		parts = append(parts, services.SettingsPatch{Doc: s.res, Patch: resPatch})
	}
	if len(genPatch) > 0 {
		parts = append(parts, services.SettingsPatch{Doc: s.gen, Patch: genPatch})
	}
	if err := services.PatchSettings(ctx, parts...); err != nil {
		var verr *services.ValidationError
		if errors.As(err, &verr) {
			mapped := map[string]string{}
			for path, msg := range verr.Fields {
				if k, ok := keyOf[path]; ok {
					path = k
				}
				if _, dup := mapped[path]; !dup {
					mapped[path] = msg
				}
			}
			return nil, &services.ValidationError{Fields: mapped}
		}
		return nil, err
	}
	var errs []error
	if len(resPatch) > 0 {
		errs = append(errs, s.published(ctx, services.SettingsResilience, s.res.Current().Revision))
	}
	if len(genPatch) > 0 {
		errs = append(errs, s.published(ctx, services.SettingsGeneral, s.gen.Current().Revision))
	}
	return s.Flags(), errors.Join(errs...)
}

// setNestedPatch sets a dotted path in a patch object.
func setNestedPatch(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = v
}
