package resilience

import (
	"context"
	"log/slog"
	"time"

	"switchyard/services"
	"switchyard/services/settings"
)

// SettingsService owns the resilience document (40-admin-api §2): it loads
// it at start from the store and the environment through the settings
// engine, publishes the effective document for lock-free reads, applies
// PATCHes and hands the state machines their configs, computed once per
// change.
type SettingsService struct {
	doc  *settings.Document[Document]
	cfgs *settings.Derived[Document, ResilienceConfigs]
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

// NewSettingsService loads the document. opts.Getenv is read once, here:
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
	doc, err := settings.Open(ctx, store, ResilienceSpec(opts, egress), getenv, log)
	if err != nil {
		return nil, err
	}
	if opts.Feed != nil {
		doc.Follow(opts.Feed)
	}
	return &SettingsService{doc: doc, cfgs: settings.NewDerived(doc, configsOf)}, nil
}

func configsOf(d *Document) ResilienceConfigs {
	return ResilienceConfigs{Breaker: d.Breaker(), Cooldown: d.Cooldown(), WindowGate: d.WindowGate(),
		Lockout: d.Lockout(), ErrorRules: d.ErrorRules(), EgressLock: d.EgressLock(), MaxRetryHint: d.MaxRetryHint()}
}

// Document is the settings document itself (GET/PATCH /api/resilience,
// explain, reload).
func (s *SettingsService) Document() *settings.Document[Document] { return s.doc }

// Resilience returns the current effective resilience document (lock-free;
// read-only).
func (s *SettingsService) Resilience() *Document { return &s.doc.Current().Doc }

// ResilienceSnapshot returns the document with its revision and sources.
func (s *SettingsService) ResilienceSnapshot() *settings.Snapshot[Document] { return s.doc.Current() }

// ResilienceDefaults is the document of built-in defaults.
func (s *SettingsService) ResilienceDefaults() Document { return s.doc.Defaults() }

// PatchResilience applies a PATCH /api/resilience body (40-admin-api §2.2)
// and returns the new effective document and revision. Errors:
// *services.ValidationError (every problem at once), settings.ErrEmptyPatch,
// *settings.JSONError, settings.ErrPreconditionFailed (stale ifMatch).
// Nothing is stored on error.
func (s *SettingsService) PatchResilience(ctx context.Context, patch []byte, ifMatch string) (Document, int64, error) {
	snap, err := s.doc.Patch(ctx, patch, ifMatch)
	if err != nil {
		return Document{}, 0, err
	}
	return snap.Doc, snap.Revision, nil
}

// Explain is GET /api/resilience?explain=true.
func (s *SettingsService) Explain() settings.Explain[Document] { return s.doc.Explain() }

// Configs returns the consumer configs of the current document, computed
// once per change (lock-free; read-only).
func (s *SettingsService) Configs() *ResilienceConfigs { return s.cfgs.Get() }

// Config readers for the state machines (pass the method values, e.g.
// NewBreakers(clock, svc.BreakerConfig, …)).

func (s *SettingsService) BreakerConfig() BreakerConfig       { return s.Configs().Breaker }
func (s *SettingsService) CooldownConfig() CooldownConfig     { return s.Configs().Cooldown }
func (s *SettingsService) WindowGateConfig() WindowGateConfig { return s.Configs().WindowGate }
func (s *SettingsService) LockoutConfig() LockoutConfig       { return s.Configs().Lockout }
func (s *SettingsService) OperatorRules() []ErrorRule         { return s.Configs().ErrorRules }
func (s *SettingsService) EgressLockConfig() EgressLockConfig { return s.Configs().EgressLock }
func (s *SettingsService) MaxRetryHint() time.Duration        { return s.Configs().MaxRetryHint }

// Flags are the feature flags of the resilience document (40-admin-api
// §9), listed before the general document's.
func (s *SettingsService) Flags() settings.FlagGroup { return settings.FlagsOf(s.doc, FeatureFlags) }

// FeatureFlags are the boolean switches of the resilience document shown
// as feature flags, in the order GET /api/feature-flags lists them.
var FeatureFlags = []settings.FlagDef{
	{Key: "emergencyFallback", Field: "emergencyFallback.enabled",
		Description: "One last attempt on emergencyFallback.target when every target failed."},
	{Key: "modelLockout", Field: "modelLockout.enabled",
		Description: "Lock a failing model on one connection while the connection keeps serving its other models."},
	{Key: "providerCooldown", Field: "providerCooldown.enabled",
		Description: "Keep combo requests off a provider that just failed repeatedly (provider cooldown window gate)."},
	{Key: "throughputWatchdog", Field: "streamRecovery.throughputWatchdog.enabled",
		Description: "Abort upstream streams that keep sending events but too little useful text."},
	{Key: "waitForCooldown", Field: "waitForCooldown.enabled",
		Description: "Single-model requests wait for a short cooldown to end instead of failing."},
	{Key: "comboCooldownWait", Field: "comboCooldownWait.enabled",
		Description: "Combo requests wait for a short cooldown to end instead of failing."},
	{Key: "connectionConcurrency", Field: "connectionConcurrency.enabled",
		Description: "Enforce each connection's maxConcurrent slots."},
	{Key: "rateLimitAutoEnable", Field: "requestQueue.autoEnableApiKeyProviders",
		Description: "Pace API-key connections whose rate-limit protection is not set explicitly."},
	{Key: "autoDisableBannedAccounts", Field: "autoDisableBannedAccounts",
		Description: "Disable a connection when it becomes banned."},
}
