package resilience_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// ---- helpers ----

// stMemStore is an in-memory services.SettingsStore with revisions.
type stMemStore struct {
	mu   sync.Mutex
	docs map[string][]byte
	revs map[string]int64
	puts int
}

func newStMemStore() *stMemStore {
	return &stMemStore{docs: map[string][]byte{}, revs: map[string]int64{}}
}

func (s *stMemStore) GetSetting(_ context.Context, key string) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[key]
	if !ok {
		return nil, 0, services.ErrNotFound
	}
	return slices.Clone(d), s.revs[key], nil
}

func (s *stMemStore) PutSetting(_ context.Context, key string, doc []byte, expected int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revs[key] != expected {
		return 0, services.ErrConflict
	}
	s.puts++
	s.docs[key] = slices.Clone(doc)
	s.revs[key]++
	return s.revs[key], nil
}

func (s *stMemStore) raw(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.docs[key])
}

// stLog captures log lines.
type stLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *stLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *stLog) lines(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

type stEnv struct {
	t     *testing.T
	store *stMemStore
	log   *stLog
	env   map[string]string
	opts  resilience.SettingsOptions
	svc   *resilience.SettingsService
	gen   *settings.Document[settings.General]
	flags *settings.Flags
}

func newStEnv(t *testing.T, env map[string]string) *stEnv {
	t.Helper()
	e := &stEnv{t: t, store: newStMemStore(), log: &stLog{}, env: env}
	e.opts = resilience.SettingsOptions{
		Getenv: func(k string) string { return e.env[k] },
		Logger: slog.New(slog.NewTextHandler(e.log, nil)),
		ResolveTarget: func(_ context.Context, target string) error {
			if target == "fast" || strings.HasPrefix(target, "openai/") {
				return nil
			}
			return errors.New("no combo or provider/model named " + target)
		},
		KnownProvider: func(id string) bool { return id == "openai" || id == "opencode" || id == "anthropic" },
	}
	e.open()
	return e
}

// open (re)builds the service over the same store, as a restart would,
// with the general document beside it for the feature flags.
func (e *stEnv) open() {
	e.t.Helper()
	svc, err := resilience.NewSettingsService(context.Background(), e.store, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	gen, err := settings.OpenGeneral(context.Background(), e.store, settings.GeneralOptions{Getenv: e.opts.Getenv, Logger: e.opts.Logger})
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc, e.gen = svc, gen
	e.flags = settings.NewFlags(svc.Flags(), settings.FlagsOf(gen, settings.GeneralFlags))
}

func (e *stEnv) patch(body string) resilience.Document {
	e.t.Helper()
	doc, _, err := e.svc.PatchResilience(context.Background(), []byte(body), "")
	if err != nil {
		e.t.Fatalf("PATCH %s: %v", body, err)
	}
	return doc
}

// patchFails expects a validation error and checks that nothing changed.
func (e *stEnv) patchFails(body string) map[string]string {
	e.t.Helper()
	before, beforeRev, beforeRaw := *e.svc.Resilience(), e.svc.ResilienceSnapshot().Revision, e.store.raw(services.SettingsResilience)
	_, _, err := e.svc.PatchResilience(context.Background(), []byte(body), "")
	var verr *services.ValidationError
	if !errors.As(err, &verr) {
		e.t.Fatalf("PATCH %s: err %v, want a ValidationError", body, err)
	}
	if !reflect.DeepEqual(*e.svc.Resilience(), before) || e.svc.ResilienceSnapshot().Revision != beforeRev ||
		e.store.raw(services.SettingsResilience) != beforeRaw {
		e.t.Fatalf("PATCH %s failed but changed the document", body)
	}
	return verr.Fields
}

func wantFields(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for k, msg := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("no error for %s (got %v)", k, got)
			continue
		}
		if msg != "" && !strings.Contains(g, msg) {
			t.Errorf("%s: %q, want it to contain %q", k, g, msg)
		}
	}
}

// specDefaultJSON is the document of 40-admin-api §2.1 (defaults, no env).
const specDefaultJSON = `{"requestQueue": {"autoEnableApiKeyProviders": false, "requestsPerMinute": 60,
   "minTimeBetweenRequestsMs": 350, "concurrentRequests": 6, "maxWaitMs": 15000,
   "maxQueueDepth": 0, "queueWaitMs": 0},
 "connectionCooldown": {"maxRetryHintMs": 604800000,
   "oauth": {"baseCooldownMs": 5000, "maxBackoffSteps": 8, "maxCooldownMs": 300000},
   "apikey": {"baseCooldownMs": 3000, "maxBackoffSteps": 5, "maxCooldownMs": 300000},
   "local": {"baseCooldownMs": 1000, "maxBackoffSteps": 4, "maxCooldownMs": 60000}},
 "providerBreaker": {
   "oauth":  {"failureThreshold": 8, "degradationThreshold": 5, "resetTimeoutMs": 60000,
              "halfOpenRequests": 1, "escalateAfterCycles": 2, "maxBackoffMultiplier": 8},
   "apikey": {"failureThreshold": 12, "degradationThreshold": 7, "resetTimeoutMs": 30000,
              "halfOpenRequests": 1, "escalateAfterCycles": 3, "maxBackoffMultiplier": 4},
   "local":  {"failureThreshold": 2, "degradationThreshold": 1, "resetTimeoutMs": 15000,
              "halfOpenRequests": 1, "escalateAfterCycles": 3, "maxBackoffMultiplier": 4}},
 "providerCooldown": {"enabled": false, "minRetryCooldownMs": 5000, "maxRetryCooldownMs": 300000,
   "oauth":  {"failureThreshold": 10, "failureWindowMs": 900000, "cooldownMs": 300000},
   "apikey": {"failureThreshold": 15, "failureWindowMs": 1800000, "cooldownMs": 600000},
   "local":  {"failureThreshold": 5, "failureWindowMs": 300000, "cooldownMs": 60000}},
 "waitForCooldown": {"enabled": true, "maxRetries": 5, "maxRetryWaitMs": 90000, "budgetMs": 300000},
 "comboCooldownWait": {"enabled": true, "maxWaitMs": 90000, "maxAttempts": 5, "budgetMs": 300000},
 "connectionConcurrency": {"enabled": true, "queueDepth": 20, "slotWaitMs": 30000, "failOpen": true},
 "modelLockout": {"enabled": false, "errorCodes": [403, 404, 429, 502, 503, 504],
   "baseCooldownMs": 120000, "maxCooldownMs": 1800000, "maxBackoffSteps": 10,
   "useExponentialBackoff": true},
 "sessionAffinity": {"ttlMs": 900000},
 "streamRecovery": {"earlyRetryMax": 1, "throughputWatchdog": {"enabled": false, "warmupMs": 30000,
   "windowMs": 30000, "minUsefulBytesPerSecond": 4, "minUsefulBytes": 1}},
 "emergencyFallback": {"enabled": false, "target": "", "skipForToolRequests": true,
   "maxOutputTokens": 4096},
 "providerErrorRules": [],
 "autoDisableBannedAccounts": false}`

func stJSONEqual(t *testing.T, got any, want string) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("document differs:\n got %s\nwant %s", b, want)
	}
}

// ---- defaults and effective configs ----

func TestSettingsDefaultsAreTheSpecDocument(t *testing.T) {
	stJSONEqual(t, resilience.DefaultDocument(), specDefaultJSON)
	e := newStEnv(t, nil)
	stJSONEqual(t, *e.svc.Resilience(), specDefaultJSON)
	snap := e.svc.ResilienceSnapshot()
	if snap.Revision != 0 || snap.ETag() != `"r0"` {
		t.Fatalf("revision %d etag %s, want 0 and \"r0\"", snap.Revision, snap.ETag())
	}
	if src := e.svc.Explain().Sources; len(src) != 0 {
		t.Fatalf("sources %v, want none", src)
	}
	// Top-level order of the JSON follows §2.1.
	b, _ := json.Marshal(resilience.DefaultDocument())
	if !strings.HasPrefix(string(b), `{"requestQueue":{"autoEnableApiKeyProviders":false,`) ||
		!strings.HasSuffix(string(b), `"providerErrorRules":[],"autoDisableBannedAccounts":false}`) {
		t.Fatalf("field order: %s", b)
	}
}

func TestSettingsEffectiveConfigsHaveSpecDefaults(t *testing.T) {
	d := resilience.DefaultDocument()
	br := d.Breaker()
	ak := br[services.AuthAPIKey]
	if ak.Degradation() != 7 || ak.FailureThreshold != 12 || ak.ResetTimeoutMs != 30000 || ak.HalfOpenRequests != 1 ||
		ak.EscalateAfterCycles != 3 || ak.MaxBackoffMultiplier != 4 {
		t.Errorf("apikey breaker %+v (degradation %d)", ak, ak.Degradation())
	}
	if oa := br[services.AuthOAuth]; oa.Degradation() != 5 || oa.FailureThreshold != 8 || oa.ResetTimeoutMs != 60000 || oa.EscalateAfterCycles != 2 || oa.MaxBackoffMultiplier != 8 {
		t.Errorf("oauth breaker %+v", oa)
	}
	if lo := br[services.AuthLocal]; lo.Degradation() != 1 || lo.FailureThreshold != 2 || lo.ResetTimeoutMs != 15000 {
		t.Errorf("local breaker %+v", lo)
	}
	cd := d.Cooldown()
	if p := cd.Profiles[services.AuthAPIKey]; p != (resilience.CooldownProfile{BaseCooldownMs: 3000, MaxBackoffSteps: 5, MaxCooldownMs: 300000}) {
		t.Errorf("apikey cooldown %+v", p)
	}
	if p := cd.Profiles[services.AuthOAuth]; p != (resilience.CooldownProfile{BaseCooldownMs: 5000, MaxBackoffSteps: 8, MaxCooldownMs: 300000}) {
		t.Errorf("oauth cooldown %+v", p)
	}
	if p := cd.Profiles[services.AuthLocal]; p != (resilience.CooldownProfile{BaseCooldownMs: 1000, MaxBackoffSteps: 4, MaxCooldownMs: 60000}) {
		t.Errorf("local cooldown %+v", p)
	}
	if cd.MaxRetryHintMs != 604800000 {
		t.Errorf("maxRetryHintMs %d", cd.MaxRetryHintMs)
	}
	lk := d.Lockout()
	if lk.Enabled || !slices.Equal(lk.ErrorCodes, []int{403, 404, 429, 502, 503, 504}) || lk.BaseCooldownMs != 120000 ||
		lk.MaxCooldownMs != 1800000 || lk.MaxBackoffSteps != 10 || !lk.UseExponentialBackoff {
		t.Errorf("lockout %+v", lk)
	}
	wg := d.WindowGate()
	if wg.Enabled || wg.MinRetryCooldownMs != 5000 || wg.MaxRetryCooldownMs != 300000 ||
		wg.Profiles[services.AuthAPIKey] != (resilience.WindowProfile{FailureThreshold: 15, FailureWindowMs: 1800000, CooldownMs: 600000}) ||
		wg.Profiles[services.AuthOAuth] != (resilience.WindowProfile{FailureThreshold: 10, FailureWindowMs: 900000, CooldownMs: 300000}) ||
		wg.Profiles[services.AuthLocal] != (resilience.WindowProfile{FailureThreshold: 5, FailureWindowMs: 300000, CooldownMs: 60000}) {
		t.Errorf("window gate %+v", wg)
	}
	if r := d.ErrorRules(); len(r) != 0 {
		t.Errorf("error rules %v", r)
	}
	if eg := d.EgressLock(); !eg.Enabled || !slices.Equal(eg.Providers, []string{"opencode", "opencode-zen", "opencode-go", "opencode-cli"}) {
		t.Errorf("egress lock %+v", eg)
	}
	if d.SessionAffinity.TTL().Milliseconds() != 900000 || d.EmergencyFallback.Active() {
		t.Errorf("affinity %v, fallback active %v", d.SessionAffinity.TTL(), d.EmergencyFallback.Active())
	}
	// The service's cached readers agree and are reused until a change.
	e := newStEnv(t, nil)
	c1 := e.svc.Configs()
	if e.svc.Configs() != c1 || e.svc.BreakerConfig()[services.AuthAPIKey].FailureThreshold != 12 ||
		e.svc.LockoutConfig().BaseCooldownMs != 120000 || e.svc.MaxRetryHint().Milliseconds() != 604800000 {
		t.Fatal("cached configs")
	}
	e.patch(`{"providerBreaker": {"apikey": {"failureThreshold": 20}}}`)
	if c2 := e.svc.Configs(); c2 == c1 || c2.Breaker[services.AuthAPIKey].FailureThreshold != 20 {
		t.Fatal("configs not rebuilt after a change")
	}
}

// ---- environment ----

func TestSettingsEnvOverrides(t *testing.T) {
	e := newStEnv(t, map[string]string{
		"RATE_LIMIT_AUTO_ENABLE":                          "yes",
		"RATE_LIMIT_MAX_WAIT_MS":                          "20000",
		"RATE_LIMIT_MAX_QUEUE_DEPTH":                      "500",
		"RATE_LIMIT_QUEUE_WAIT_MS":                        "soon", // unparsable → ignored, one WARN
		"SWITCHYARD_BREAKER_APIKEY_FAILURE_THRESHOLD":     "20",
		"SWITCHYARD_BREAKER_OAUTH_RESET_MS":               "90000",
		"SWITCHYARD_BREAKER_LOCAL_DEGRADATION_THRESHOLD":  "5", // ≥ local failureThreshold 2 → ignored
		"PROVIDER_COOLDOWN_ENABLED":                       "on",
		"PROVIDER_COOLDOWN_MAX_MS":                        "3000", // < min 5000 → ignored
		"SWITCHYARD_PROVIDER_COOLDOWN_LOCAL_COOLDOWN_MS":  "120000",
		"SWITCHYARD_SESSION_AFFINITY_TTL_MS":              "0",
		"STREAM_THROUGHPUT_WATCHDOG_ENABLED":              "1",
		"STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS":            "999", // out of range → ignored
		"STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND": "8",
		"SWITCHYARD_EMERGENCY_FALLBACK":                   "true",
		"SWITCHYARD_EGRESS_LOCK_PROVIDERS":                "none",
	})
	d := e.svc.Resilience()
	if !d.RequestQueue.AutoEnableApiKeyProviders || d.RequestQueue.MaxWaitMs != 20000 || d.RequestQueue.MaxQueueDepth != 500 || d.RequestQueue.QueueWaitMs != 0 {
		t.Errorf("requestQueue %+v", d.RequestQueue)
	}
	if b := d.ProviderBreaker; b.APIKey.FailureThreshold != 20 || b.APIKey.DegradationThreshold != 12 || b.OAuth.ResetTimeoutMs != 90000 || b.Local.DegradationThreshold != 1 {
		t.Errorf("breaker %+v", b)
	}
	if pc := d.ProviderCooldown; !pc.Enabled || pc.MaxRetryCooldownMs != 300000 || pc.Local.CooldownMs != 120000 {
		t.Errorf("providerCooldown %+v", pc)
	}
	if d.SessionAffinity.TTLMs != 0 {
		t.Errorf("ttl %d", d.SessionAffinity.TTLMs)
	}
	if w := d.StreamRecovery.ThroughputWatchdog; !w.Enabled || w.WindowMs != 30000 || w.MinUsefulBytesPerSecond != 8 {
		t.Errorf("watchdog %+v", w)
	}
	if ef := d.EmergencyFallback; !ef.Enabled || ef.Target != "" || ef.Active() {
		t.Errorf("env-enabled fallback without target must be inert: %+v", ef)
	}
	if eg := d.EgressLock(); eg.Enabled || len(eg.Providers) != 0 {
		t.Errorf("egress lock %+v", eg)
	}
	src := e.svc.Explain().Sources
	want := map[string]string{
		"requestQueue.autoEnableApiKeyProviders":                    "env",
		"requestQueue.maxWaitMs":                                    "env",
		"requestQueue.maxQueueDepth":                                "env",
		"providerBreaker.apikey.failureThreshold":                   "env",
		"providerBreaker.apikey.degradationThreshold":               "derived",
		"providerBreaker.oauth.resetTimeoutMs":                      "env",
		"providerCooldown.enabled":                                  "env",
		"providerCooldown.local.cooldownMs":                         "env",
		"sessionAffinity.ttlMs":                                     "env",
		"streamRecovery.throughputWatchdog.enabled":                 "env",
		"streamRecovery.throughputWatchdog.minUsefulBytesPerSecond": "env",
		"emergencyFallback.enabled":                                 "env",
	}
	if !reflect.DeepEqual(src, want) {
		t.Errorf("sources\n got %v\nwant %v", src, want)
	}
	for _, name := range []string{"RATE_LIMIT_QUEUE_WAIT_MS", "SWITCHYARD_BREAKER_LOCAL_DEGRADATION_THRESHOLD", "PROVIDER_COOLDOWN_MAX_MS", "STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS"} {
		lines := e.log.lines(name)
		if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") {
			t.Errorf("%s: want one WARN, got %q", name, lines)
		}
	}
	if n := len(e.log.lines("level=WARN")); n != 4 {
		t.Errorf("%d WARN lines, want 4:\n%s", n, strings.Join(e.log.lines("level=WARN"), "\n"))
	}
	// Stored beats env; null brings env back.
	e.patch(`{"requestQueue": {"maxWaitMs": 25000}}`)
	if e.svc.Resilience().RequestQueue.MaxWaitMs != 25000 || e.svc.Explain().Sources["requestQueue.maxWaitMs"] != "stored" {
		t.Fatal("stored value does not win over env")
	}
	e.patch(`{"requestQueue": {"maxWaitMs": null}}`)
	if e.svc.Resilience().RequestQueue.MaxWaitMs != 20000 || e.svc.Explain().Sources["requestQueue.maxWaitMs"] != "env" {
		t.Fatal("null did not bring the env value back")
	}
}

func TestSettingsEnvBooleans(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "1": true, "on": true, "yes": true, "YES": true,
		"false": false, "0": false, "off": false, "no": false} {
		e := newStEnv(t, map[string]string{"PROVIDER_COOLDOWN_ENABLED": v, "SWITCHYARD_BREAKER_OAUTH_FAILURE_THRESHOLD": "4"})
		if got := e.svc.Resilience().ProviderCooldown.Enabled; got != want {
			t.Errorf("PROVIDER_COOLDOWN_ENABLED=%s → %v", v, got)
		}
		if src := e.svc.ResilienceSnapshot().Source("providerCooldown.enabled"); src != "env" {
			t.Errorf("PROVIDER_COOLDOWN_ENABLED=%s source %s", v, src)
		}
		if n := len(e.log.lines("level=WARN")); n != 0 {
			t.Errorf("PROVIDER_COOLDOWN_ENABLED=%s: %d warnings", v, n)
		}
	}
	e := newStEnv(t, map[string]string{"PROVIDER_COOLDOWN_ENABLED": "maybe"})
	if e.svc.Resilience().ProviderCooldown.Enabled || len(e.log.lines("PROVIDER_COOLDOWN_ENABLED")) != 1 {
		t.Fatal("an unparsable env boolean must be ignored with one warning")
	}
}

// ---- PATCH ----

func TestSettingsPatchMergesPerSection(t *testing.T) {
	e := newStEnv(t, nil)
	d := e.patch(`{"modelLockout": {"enabled": true, "baseCooldownMs": 60000},
	  "requestQueue": {"maxQueueDepth": 256, "queueWaitMs": null},
	  "providerBreaker": {"apikey": {"resetTimeoutMs": 20000}}}`)
	if !d.ModelLockout.Enabled || d.ModelLockout.BaseCooldownMs != 60000 || d.ModelLockout.MaxCooldownMs != 1800000 ||
		!slices.Equal(d.ModelLockout.ErrorCodes, []int{403, 404, 429, 502, 503, 504}) {
		t.Errorf("modelLockout %+v", d.ModelLockout)
	}
	if d.RequestQueue.MaxQueueDepth != 256 || d.RequestQueue.MaxWaitMs != 15000 || d.RequestQueue.RequestsPerMinute != 60 {
		t.Errorf("requestQueue %+v", d.RequestQueue)
	}
	if b := d.ProviderBreaker.APIKey; b.ResetTimeoutMs != 20000 || b.FailureThreshold != 12 || b.DegradationThreshold != 7 {
		t.Errorf("apikey breaker %+v", b)
	}
	if rev := e.svc.ResilienceSnapshot().Revision; rev != 1 {
		t.Errorf("revision %d, want 1", rev)
	}
	// A second PATCH of the same section keeps the first one's fields.
	d = e.patch(`{"modelLockout": {"maxBackoffSteps": 3}, "providerBreaker": {"apikey": {"halfOpenRequests": 2}}}`)
	if !d.ModelLockout.Enabled || d.ModelLockout.BaseCooldownMs != 60000 || d.ModelLockout.MaxBackoffSteps != 3 ||
		d.ProviderBreaker.APIKey.ResetTimeoutMs != 20000 || d.ProviderBreaker.APIKey.HalfOpenRequests != 2 {
		t.Errorf("second patch lost fields: %+v %+v", d.ModelLockout, d.ProviderBreaker.APIKey)
	}
	// Stored sparsely: only explicitly set fields.
	var stored map[string]any
	if err := json.Unmarshal([]byte(e.store.raw(services.SettingsResilience)), &stored); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"modelLockout":    map[string]any{"enabled": true, "baseCooldownMs": 60000.0, "maxBackoffSteps": 3.0},
		"requestQueue":    map[string]any{"maxQueueDepth": 256.0},
		"providerBreaker": map[string]any{"apikey": map[string]any{"resetTimeoutMs": 20000.0, "halfOpenRequests": 2.0}},
	}
	if !reflect.DeepEqual(stored, want) {
		t.Errorf("stored %v\nwant %v", stored, want)
	}
	// A restart reads the same document and revision.
	e.open()
	if got := e.svc.Resilience(); !reflect.DeepEqual(*got, d) || e.svc.ResilienceSnapshot().Revision != 2 {
		t.Fatal("reload differs")
	}
	src := e.svc.Explain().Sources
	if src["modelLockout.enabled"] != "stored" || src["requestQueue.maxQueueDepth"] != "stored" || len(src) != 6 {
		t.Errorf("sources %v", src)
	}
	// A null section drops every stored value in it.
	d = e.patch(`{"modelLockout": null}`)
	if d.ModelLockout.Enabled || d.ModelLockout.BaseCooldownMs != 120000 || d.RequestQueue.MaxQueueDepth != 256 {
		t.Errorf("null section: %+v", d.ModelLockout)
	}
}

func TestSettingsPatchUnknownFieldsNamed(t *testing.T) {
	e := newStEnv(t, nil)
	got := e.patchFails(`{"requestQueue": {"maxWaitMS": 100, "maxWaitMs": 45000},
	  "providerBreaker": {"apikey": {"resetTimeout": 1}, "cloud": {}},
	  "streamRecovery": {"throughputWatchdog": {"enabled": "yes"}},
	  "bogus": 1}`)
	want := map[string]string{
		"requestQueue.maxWaitMS":                    "unknown field",
		"requestQueue.maxWaitMs":                    "must be between 1 and 30000",
		"providerBreaker.apikey.resetTimeout":       "unknown field",
		"providerBreaker.cloud":                     "unknown field",
		"streamRecovery.throughputWatchdog.enabled": "must be true or false",
		"bogus": "unknown field",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fields\n got %v\nwant %v", got, want)
	}
}

func TestSettingsPatchRangesTypesAndCrossRules(t *testing.T) {
	e := newStEnv(t, nil)
	cases := []struct {
		body string
		want map[string]string
	}{
		{`{"connectionCooldown":{"apikey":{"baseCooldownMs":5000,"maxCooldownMs":4000}}}`,
			map[string]string{"connectionCooldown.apikey.maxCooldownMs": "must be at least baseCooldownMs (5000)"}},
		{`{"connectionCooldown":{"local":{"baseCooldownMs":70000}}}`,
			map[string]string{"connectionCooldown.local.baseCooldownMs": "must not be greater than maxCooldownMs (60000)"}},
		{`{"requestQueue":{"maxQueueDepth":100001}}`,
			map[string]string{"requestQueue.maxQueueDepth": "must be between 0 and 100000"}},
		{`{"requestQueue":{"maxWaitMs":45000}}`,
			map[string]string{"requestQueue.maxWaitMs": "must be between 1 and 30000"}},
		{`{"requestQueue":{"maxWaitMs":1500.5}}`,
			map[string]string{"requestQueue.maxWaitMs": "must be a whole number"}},
		{`{"requestQueue":{"maxWaitMs":"15000"}}`,
			map[string]string{"requestQueue.maxWaitMs": "must be a whole number"}},
		{`{"requestQueue":{"maxWaitMs":99999999999999999999999}}`,
			map[string]string{"requestQueue.maxWaitMs": "must be between 1 and 30000"}},
		{`{"requestQueue": 5}`, map[string]string{"requestQueue": "must be an object"}},
		{`{"providerBreaker": {"oauth": {"degradationThreshold": 8}}}`,
			map[string]string{"providerBreaker.oauth.degradationThreshold": "must be lower than failureThreshold (8)"}},
		{`{"providerBreaker": {"oauth": {"failureThreshold": 1, "degradationThreshold": 2}}}`,
			map[string]string{"providerBreaker.oauth.degradationThreshold": "must be 1 when failureThreshold is 1"}},
		{`{"providerCooldown": {"minRetryCooldownMs": 10000, "maxRetryCooldownMs": 9000}}`,
			map[string]string{"providerCooldown.maxRetryCooldownMs": "must be at least minRetryCooldownMs (10000)"}},
		{`{"modelLockout": {"baseCooldownMs": 600000, "maxCooldownMs": 300000}}`,
			map[string]string{"modelLockout.maxCooldownMs": "must be at least baseCooldownMs (600000)"}},
		{`{"modelLockout": {"errorCodes": []}}`, map[string]string{"modelLockout.errorCodes": "must have between 1 and 20 items"}},
		{`{"modelLockout": {"errorCodes": [429, 399, 600]}}`,
			map[string]string{"modelLockout.errorCodes.1": "must be between 400 and 599", "modelLockout.errorCodes.2": "must be between 400 and 599"}},
		{`{"waitForCooldown": {"maxRetries": 0}}`,
			map[string]string{"waitForCooldown.maxRetries": "must be at least 1 while waitForCooldown.enabled is true"}},
		{`{"waitForCooldown": {"budgetMs": 1000}}`,
			map[string]string{"waitForCooldown.budgetMs": "must be at least maxRetryWaitMs (90000)"}},
		{`{"comboCooldownWait": {"maxWaitMs": 0, "maxAttempts": 0}}`,
			map[string]string{"comboCooldownWait.maxWaitMs": "must be at least 1", "comboCooldownWait.maxAttempts": "must be at least 1"}},
		{`{"emergencyFallback": {"target": "` + strings.Repeat("x", 201) + `"}}`,
			map[string]string{"emergencyFallback.target": "must be at most 200 characters"}},
		{`{"emergencyFallback": {"maxOutputTokens": 131073}}`,
			map[string]string{"emergencyFallback.maxOutputTokens": "must be between 1 and 131072"}},
		{`{"connectionCooldown": {"maxRetryHintMs": 999}}`,
			map[string]string{"connectionCooldown.maxRetryHintMs": "must be between 1000 and 2592000000"}},
		{`{"autoDisableBannedAccounts": "true"}`, map[string]string{"autoDisableBannedAccounts": "must be true or false"}},
		{`{"providerErrorRules": {}}`, map[string]string{"providerErrorRules": "must be an array"}},
		// Every problem at once.
		{`{"requestQueue": {"maxWaitMs": 0, "concurrentRequests": 0}, "sessionAffinity": {"ttlMs": -1}, "x": {}}`,
			map[string]string{"requestQueue.maxWaitMs": "between 1 and 30000", "requestQueue.concurrentRequests": "between 1 and 10000",
				"sessionAffinity.ttlMs": "between 0 and 86400000", "x": "unknown field"}},
	}
	for _, c := range cases {
		got := e.patchFails(c.body)
		wantFields(t, got, c.want)
		if len(got) != len(c.want) {
			t.Errorf("%s: fields %v, want exactly %v", c.body, got, c.want)
		}
	}
	if e.store.puts != 0 {
		t.Fatalf("%d writes after only failed PATCHes", e.store.puts)
	}
	// The message of a ValidationError counts the fields.
	_, _, err := e.svc.PatchResilience(context.Background(), []byte(`{"requestQueue":{"maxWaitMs":45000}}`), "")
	if err.Error() != "1 field is invalid" {
		t.Errorf("message %q", err.Error())
	}
}

func TestSettingsPatchRequestErrors(t *testing.T) {
	e := newStEnv(t, nil)
	ctx := context.Background()
	if _, _, err := e.svc.PatchResilience(ctx, []byte(`{}`), ""); !errors.Is(err, settings.ErrEmptyPatch) {
		t.Errorf("{}: %v", err)
	}
	for _, body := range []string{``, `{`, `[1]`, `{"a":1} {}`, `null`} {
		_, _, err := e.svc.PatchResilience(ctx, []byte(body), "")
		var jerr *settings.JSONError
		if !errors.As(err, &jerr) {
			t.Errorf("%q: %v, want a SettingsJSONError", body, err)
		}
	}
	if e.store.puts != 0 {
		t.Fatal("stored after request errors")
	}
}

func TestSettingsDegradationThresholdDerived(t *testing.T) {
	e := newStEnv(t, nil)
	d := e.patch(`{"providerBreaker": {"apikey": {"failureThreshold": 20}, "oauth": {"failureThreshold": 4}}}`)
	if d.ProviderBreaker.APIKey.DegradationThreshold != 12 || d.ProviderBreaker.OAuth.DegradationThreshold != 3 {
		t.Fatalf("derived %d / %d, want 12 / 3", d.ProviderBreaker.APIKey.DegradationThreshold, d.ProviderBreaker.OAuth.DegradationThreshold)
	}
	src := e.svc.Explain().Sources
	if src["providerBreaker.apikey.degradationThreshold"] != "derived" || src["providerBreaker.oauth.degradationThreshold"] != "derived" {
		t.Fatalf("sources %v", src)
	}
	if p := d.Breaker()[services.AuthAPIKey]; p.Degradation() != 12 {
		t.Fatalf("breaker degradation %d", p.Degradation())
	}
	// Stored below failureThreshold is fine; null derives again.
	d = e.patch(`{"providerBreaker": {"apikey": {"degradationThreshold": 15}}}`)
	if d.ProviderBreaker.APIKey.DegradationThreshold != 15 {
		t.Fatal("stored degradation")
	}
	// Lowering failureThreshold below the stored degradation names failureThreshold.
	got := e.patchFails(`{"providerBreaker": {"apikey": {"failureThreshold": 10}}}`)
	wantFields(t, got, map[string]string{"providerBreaker.apikey.failureThreshold": "must be higher than degradationThreshold (15)"})
	d = e.patch(`{"providerBreaker": {"apikey": {"degradationThreshold": null, "failureThreshold": 12}}}`)
	if d.ProviderBreaker.APIKey.DegradationThreshold != 7 {
		t.Fatalf("back to the default failureThreshold → default degradation 7, got %d", d.ProviderBreaker.APIKey.DegradationThreshold)
	}
	// failureThreshold 1 allows degradation 1.
	d = e.patch(`{"providerBreaker": {"local": {"failureThreshold": 1, "degradationThreshold": 1}}}`)
	if d.ProviderBreaker.Local.DegradationThreshold != 1 {
		t.Fatal("local 1/1")
	}
}

func TestSettingsNullRemovesStoredValue(t *testing.T) {
	e := newStEnv(t, nil)
	e.patch(`{"requestQueue": {"maxQueueDepth": 256, "requestsPerMinute": 30}, "autoDisableBannedAccounts": true}`)
	d := e.patch(`{"requestQueue": {"maxQueueDepth": null}, "autoDisableBannedAccounts": null}`)
	if d.RequestQueue.MaxQueueDepth != 0 || d.RequestQueue.RequestsPerMinute != 30 || d.AutoDisableBannedAccounts {
		t.Fatalf("after null: %+v %v", d.RequestQueue, d.AutoDisableBannedAccounts)
	}
	if strings.Contains(e.store.raw(services.SettingsResilience), "maxQueueDepth") ||
		strings.Contains(e.store.raw(services.SettingsResilience), "autoDisableBannedAccounts") {
		t.Fatalf("stored still holds removed values: %s", e.store.raw(services.SettingsResilience))
	}
	if src := e.svc.Explain().Sources; !reflect.DeepEqual(src, map[string]string{"requestQueue.requestsPerMinute": "stored"}) {
		t.Fatalf("sources %v", src)
	}
}

func TestSettingsIfMatch(t *testing.T) {
	e := newStEnv(t, nil)
	ctx := context.Background()
	_, rev, err := e.svc.PatchResilience(ctx, []byte(`{"sessionAffinity": {"ttlMs": 60000}}`), `"r0"`)
	if err != nil || rev != 1 {
		t.Fatalf("If-Match r0: rev %d err %v", rev, err)
	}
	_, _, err = e.svc.PatchResilience(ctx, []byte(`{"sessionAffinity": {"ttlMs": 1000}}`), `"r0"`)
	if !errors.Is(err, settings.ErrPreconditionFailed) {
		t.Fatalf("stale If-Match: %v", err)
	}
	if e.svc.Resilience().SessionAffinity.TTLMs != 60000 || e.svc.ResilienceSnapshot().Revision != 1 {
		t.Fatal("a stale If-Match changed the document")
	}
	for _, im := range []string{`"r1"`, `W/"r2"`, `"r9", "r3"`, `*`} {
		if _, _, err := e.svc.PatchResilience(ctx, []byte(`{"sessionAffinity": {"ttlMs": 2000}}`), im); err != nil {
			t.Fatalf("If-Match %s: %v", im, err)
		}
	}
	if e.svc.ResilienceSnapshot().ETag() != `"r5"` {
		t.Fatalf("etag %s", e.svc.ResilienceSnapshot().ETag())
	}
}

func TestSettingsConcurrentPatchesNeverLoseAnUpdate(t *testing.T) {
	e := newStEnv(t, nil)
	// A second service over the same store writes behind the first one's back.
	other, err := resilience.NewSettingsService(context.Background(), e.store, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc := e.svc
			if i%2 == 1 {
				svc = other
			}
			body := fmt.Sprintf(`{"providerBreaker": {"oauth": {"escalateAfterCycles": %d}}, "requestQueue": {"requestsPerMinute": %d}}`, i%20, 100+i)
			if _, _, err := svc.PatchResilience(context.Background(), []byte(body), ""); err != nil {
				t.Error(err)
			}
			_ = svc.Resilience().RequestQueue.RequestsPerMinute
			_ = svc.BreakerConfig()
		}()
	}
	wg.Wait()
	if _, rev, _ := e.store.GetSetting(context.Background(), services.SettingsResilience); rev != 20 {
		t.Fatalf("revision %d, want 20", rev)
	}
}

// ---- rules and lists ----

func TestSettingsErrorRules(t *testing.T) {
	e := newStEnv(t, nil)
	d := e.patch(`{"providerErrorRules": [
	  {"provider": "opencode", "status": 429, "match": "Monthly", "reason": "quota_exhausted", "scope": "connection"},
	  {"id": "my-rule", "provider": "openai", "status": 400, "header": {"name": "x-error-kind", "contains": "capacity"},
	   "reason": "model_capacity", "scope": "model", "lockScope": "exact", "cooldownMs": 60000, "enabled": false},
	  {"provider": "anthropic", "status": 403, "reason": "forbidden", "scope": "connection", "ban": true}]}`)
	rules := d.ProviderErrorRules
	if len(rules) != 3 || !strings.HasPrefix(rules[0].ID, "r_") || len(rules[0].ID) != 10 || rules[1].ID != "my-rule" {
		t.Fatalf("rules %+v", rules)
	}
	if r := rules[0]; r.Match != "Monthly" || r.Header != nil || r.LockScope != nil || r.CooldownMs != nil || r.Ban || !r.Enabled {
		t.Errorf("defaults not filled: %+v", r)
	}
	er := d.ErrorRules()
	if er[1].LockScope != resilience.ShapeExact || *er[1].CooldownMs != 60000 || *er[1].Enabled || er[1].Header.Name != "x-error-kind" ||
		!er[2].Ban || er[2].Scope != resilience.ScopeConnection || er[0].Reason != resilience.ReasonQuotaExhausted {
		t.Errorf("ErrorRules %+v", er)
	}
	// The generated id is stored: a reload keeps it.
	id := rules[0].ID
	e.open()
	if e.svc.Resilience().ProviderErrorRules[0].ID != id {
		t.Fatal("generated id not stored")
	}
	// Served JSON has every field.
	b, _ := json.Marshal(e.svc.Resilience().ProviderErrorRules[0])
	for _, k := range []string{`"match":"Monthly"`, `"header":null`, `"lockScope":null`, `"cooldownMs":null`, `"ban":false`, `"enabled":true`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("rule JSON %s lacks %s", b, k)
		}
	}
	// Arrays are replaced as a whole.
	d = e.patch(`{"providerErrorRules": [{"provider": "openai", "status": 402, "reason": "credits_exhausted", "scope": "connection"}]}`)
	if len(d.ProviderErrorRules) != 1 || d.ProviderErrorRules[0].Status != 402 {
		t.Fatalf("replace: %+v", d.ProviderErrorRules)
	}
	got := e.patchFails(`{"providerErrorRules": [
	  {"id": "a", "provider": "openai", "status": 429, "reason": "rate_limit", "scope": "connection"},
	  {"id": "a", "provider": "nope", "status": 600, "reason": "client_abort", "scope": "everything", "extra": 1},
	  {"provider": "openai", "status": 400, "reason": "caller_error", "scope": "connection", "lockScope": "family", "ban": false},
	  {"provider": "openai", "status": 429, "match": "x", "reason": "rate_limit", "scope": "model", "ban": true, "cooldownMs": 10},
	  {"provider": "openai", "status": 429, "reason": "rate_limit", "scope": "none"},
	  {"status": 500, "reason": "server_error", "scope": "none", "header": {"name": "bad header", "contains": ""}},
	  "rule"]}`)
	wantFields(t, got, map[string]string{
		"providerErrorRules.1.id":              "must be unique: rule 1 has the same id",
		"providerErrorRules.1.provider":        "unknown provider",
		"providerErrorRules.1.status":          "must be between 100 and 599",
		"providerErrorRules.1.reason":          "must be one of rate_limit",
		"providerErrorRules.1.scope":           "must be one of model, connection, provider, none",
		"providerErrorRules.1.extra":           "unknown field",
		"providerErrorRules.2.lockScope":       "only applies with scope model",
		"providerErrorRules.3.ban":             "only applies with scope connection",
		"providerErrorRules.3.cooldownMs":      "must be between 1000 and 86400000",
		"providerErrorRules.4":                 "rule 5 can never match: rule 1 above it",
		"providerErrorRules.5.provider":        "is required",
		"providerErrorRules.5.header.name":     "token characters",
		"providerErrorRules.5.header.contains": "1 to 200 characters",
		"providerErrorRules.6":                 "must be an object",
	})
	many := make([]string, 51)
	for i := range many {
		many[i] = fmt.Sprintf(`{"provider": "openai", "status": %d, "reason": "server_error", "scope": "none"}`, 500+i)
	}
	wantFields(t, e.patchFails(`{"providerErrorRules": [`+strings.Join(many, ",")+`]}`),
		map[string]string{"providerErrorRules": "must have at most 50 items"})
	// A disabled catch-all does not shadow; an enabled one with a header does not either.
	e.patch(`{"providerErrorRules": [
	  {"provider": "openai", "status": 429, "reason": "rate_limit", "scope": "connection", "enabled": false},
	  {"provider": "openai", "status": 429, "header": {"name": "x-a", "contains": "1"}, "reason": "rate_limit", "scope": "connection"},
	  {"provider": "openai", "status": 429, "reason": "rate_limit", "scope": "connection"}]}`)
}

func TestSettingsErrorCodesSortedWithoutDuplicates(t *testing.T) {
	e := newStEnv(t, nil)
	d := e.patch(`{"modelLockout": {"errorCodes": [503, 429, 503, 404]}}`)
	if !slices.Equal(d.ModelLockout.ErrorCodes, []int{404, 429, 503}) || !d.Lockout().LocksStatus(429) || d.Lockout().LocksStatus(502) {
		t.Fatalf("errorCodes %v", d.ModelLockout.ErrorCodes)
	}
	if !strings.Contains(e.store.raw(services.SettingsResilience), `"errorCodes":[404,429,503]`) {
		t.Fatalf("stored %s", e.store.raw(services.SettingsResilience))
	}
}

func TestSettingsWaitRules(t *testing.T) {
	e := newStEnv(t, nil)
	// Disabled, the counts may be 0; turning it on again is refused while 0.
	e.patch(`{"waitForCooldown": {"enabled": false, "maxRetries": 0}}`)
	wantFields(t, e.patchFails(`{"waitForCooldown": {"enabled": true}}`),
		map[string]string{"waitForCooldown.enabled": "needs waitForCooldown.maxRetries of at least 1 (now 0)"})
	d := e.patch(`{"waitForCooldown": {"enabled": true, "maxRetries": 2}}`)
	if !d.WaitForCooldown.Enabled || d.WaitForCooldown.MaxRetries != 2 {
		t.Fatalf("%+v", d.WaitForCooldown)
	}
	e.patch(`{"comboCooldownWait": {"budgetMs": 100000}}`)
	wantFields(t, e.patchFails(`{"comboCooldownWait": {"maxWaitMs": 200000}}`),
		map[string]string{"comboCooldownWait.maxWaitMs": "must not be greater than budgetMs (100000) while comboCooldownWait.enabled is true"})
	e.patch(`{"comboCooldownWait": {"maxWaitMs": 200000, "budgetMs": 600000}}`)
	// Disabled, the budget rule does not apply.
	e.patch(`{"comboCooldownWait": {"enabled": false, "budgetMs": 0}}`)
}

func TestSettingsEmergencyFallbackNeedsATarget(t *testing.T) {
	e := newStEnv(t, nil)
	wantFields(t, e.patchFails(`{"emergencyFallback": {"enabled": true}}`),
		map[string]string{"emergencyFallback.enabled": "set emergencyFallback.target first"})
	wantFields(t, e.patchFails(`{"emergencyFallback": {"enabled": true, "target": "nowhere"}}`),
		map[string]string{"emergencyFallback.target": "does not resolve: no combo or provider/model named nowhere"})
	wantFields(t, e.patchFails(`{"emergencyFallback": {"target": "bad target"}}`),
		map[string]string{"emergencyFallback.target": "without spaces"})
	// A target that does not resolve may be stored while the fallback is off.
	e.patch(`{"emergencyFallback": {"target": "later"}}`)
	wantFields(t, e.patchFails(`{"emergencyFallback": {"enabled": true}}`),
		map[string]string{"emergencyFallback.enabled": "set emergencyFallback.target first"})
	d := e.patch(`{"emergencyFallback": {"enabled": true, "target": "openai/gpt-4o-mini"}}`)
	if !d.EmergencyFallback.Active() || d.EmergencyFallback.Target != "openai/gpt-4o-mini" {
		t.Fatalf("%+v", d.EmergencyFallback)
	}
	wantFields(t, e.patchFails(`{"emergencyFallback": {"target": "nowhere"}}`),
		map[string]string{"emergencyFallback.target": "does not resolve"})
}

func TestSettingsStoredValuesThatNoLongerPassAreIgnored(t *testing.T) {
	e := newStEnv(t, nil)
	if _, err := e.store.PutSetting(context.Background(), services.SettingsResilience,
		[]byte(`{"requestQueue": {"maxWaitMs": 45000, "requestsPerMinute": 30}, "gone": true}`), 0); err != nil {
		t.Fatal(err)
	}
	e.open()
	d := e.svc.Resilience()
	if d.RequestQueue.MaxWaitMs != 15000 || d.RequestQueue.RequestsPerMinute != 30 || e.svc.ResilienceSnapshot().Revision != 1 {
		t.Fatalf("%+v", d.RequestQueue)
	}
	if len(e.log.lines("requestQueue.maxWaitMs")) != 1 || len(e.log.lines("field=gone")) != 1 {
		t.Fatalf("warnings:\n%s", strings.Join(e.log.lines("WARN"), "\n"))
	}
	// A stored rule whose provider has since disappeared still loads (the
	// provider lookup only runs on PATCH).
	if _, err := e.store.PutSetting(context.Background(), services.SettingsResilience,
		[]byte(`{"providerErrorRules": [{"id": "r_1", "provider": "deleted-node", "status": 429, "match": "", "header": null,
		  "reason": "rate_limit", "scope": "connection", "lockScope": null, "cooldownMs": null, "ban": false, "enabled": true}]}`), 1); err != nil {
		t.Fatal(err)
	}
	e.open()
	if r := e.svc.Resilience().ProviderErrorRules; len(r) != 1 || r[0].Provider != "deleted-node" {
		t.Fatalf("rules %+v", r)
	}
}

// ---- feature flags ----

func TestFeatureFlagsRoundTrip(t *testing.T) {
	e := newStEnv(t, map[string]string{"PROVIDER_COOLDOWN_ENABLED": "true"})
	flags := e.flags.List()
	keys := make([]string, len(flags))
	for i, f := range flags {
		keys[i] = f.Key
	}
	wantKeys := []string{"emergencyFallback", "modelLockout", "providerCooldown", "throughputWatchdog", "waitForCooldown",
		"comboCooldownWait", "connectionConcurrency", "rateLimitAutoEnable", "autoDisableBannedAccounts", "logRequestBodies"}
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("keys %v", keys)
	}
	byKey := func(fl []settings.FeatureFlag) map[string]settings.FeatureFlag {
		m := map[string]settings.FeatureFlag{}
		for _, f := range fl {
			m[f.Key] = f
		}
		return m
	}
	m := byKey(flags)
	if f := m["emergencyFallback"]; f.Field != "emergencyFallback.enabled" || f.Value || f.Source != "default" || f.Env == nil ||
		*f.Env != "SWITCHYARD_EMERGENCY_FALLBACK" || f.RequiresRestart || f.Description == "" {
		t.Errorf("emergencyFallback %+v", f)
	}
	if f := m["providerCooldown"]; !f.Value || f.Source != "env" {
		t.Errorf("providerCooldown %+v", f)
	}
	if f := m["waitForCooldown"]; !f.Value || f.Source != "default" || f.Env != nil {
		t.Errorf("waitForCooldown %+v", f)
	}
	if f := m["logRequestBodies"]; f.Field != "logging.captureBodies" || f.Value || *f.Env != "SWITCHYARD_LOG_REQUEST_BODIES" {
		t.Errorf("logRequestBodies %+v", f)
	}
	ctx := context.Background()
	flags, err := e.flags.Patch(ctx, []byte(`{"modelLockout": true, "logRequestBodies": true, "providerCooldown": false, "waitForCooldown": false}`))
	if err != nil {
		t.Fatal(err)
	}
	m = byKey(flags)
	for k, v := range map[string]bool{"modelLockout": true, "logRequestBodies": true, "providerCooldown": false, "waitForCooldown": false} {
		if m[k].Value != v || m[k].Source != "stored" {
			t.Errorf("%s: %+v", k, m[k])
		}
	}
	if !e.svc.Resilience().ModelLockout.Enabled || !(&e.gen.Current().Doc).Logging.CaptureBodies || e.svc.Resilience().ProviderCooldown.Enabled {
		t.Fatal("flags are not views of the settings fields")
	}
	// null drops the stored value: env or default applies again.
	flags, err = e.flags.Patch(ctx, []byte(`{"modelLockout": null, "providerCooldown": null, "logRequestBodies": null}`))
	if err != nil {
		t.Fatal(err)
	}
	m = byKey(flags)
	if m["modelLockout"].Value || m["modelLockout"].Source != "default" || !m["providerCooldown"].Value || m["providerCooldown"].Source != "env" ||
		m["logRequestBodies"].Source != "default" || m["waitForCooldown"].Source != "stored" {
		t.Fatalf("after null: %+v", m)
	}
	// Errors: every problem at once, keyed by flag; nothing stored.
	resRev, genRev := e.svc.ResilienceSnapshot().Revision, e.gen.Current().Revision
	for body, want := range map[string]map[string]string{
		`{"nope": true, "modelLockout": "yes", "waitForCooldown": 1}`: {"nope": "unknown field", "modelLockout": "must be true, false or null",
			"waitForCooldown": "must be true, false or null"},
		`{"emergencyFallback": true, "modelLockout": true, "logRequestBodies": true}`: {"emergencyFallback": "set emergencyFallback.target first"},
	} {
		_, err := e.flags.Patch(ctx, []byte(body))
		var verr *services.ValidationError
		if !errors.As(err, &verr) || !reflect.DeepEqual(verr.Fields, want) {
			t.Errorf("%s: %v %v, want %v", body, err, verr, want)
		}
	}
	if e.svc.ResilienceSnapshot().Revision != resRev || e.gen.Current().Revision != genRev || e.svc.Resilience().ModelLockout.Enabled {
		t.Fatal("a refused flag PATCH stored something")
	}
	if _, err := e.flags.Patch(ctx, []byte(`{}`)); !errors.Is(err, settings.ErrEmptyPatch) {
		t.Fatalf("{}: %v", err)
	}
	// With a target, the fallback can be switched on.
	e.patch(`{"emergencyFallback": {"target": "fast"}}`)
	flags, err = e.flags.Patch(ctx, []byte(`{"emergencyFallback": true}`))
	if err != nil || !byKey(flags)["emergencyFallback"].Value || !e.svc.Resilience().EmergencyFallback.Active() {
		t.Fatalf("enable fallback: %v", err)
	}
	// waitForCooldown with maxRetries 0 cannot be turned on from the flag either.
	e.patch(`{"waitForCooldown": {"maxRetries": 0}}`)
	_, err = e.flags.Patch(ctx, []byte(`{"waitForCooldown": true}`))
	var verr *services.ValidationError
	if !errors.As(err, &verr) || !strings.Contains(verr.Fields["waitForCooldown"], "maxRetries") {
		t.Fatalf("waitForCooldown on with maxRetries 0: %v", err)
	}
}
