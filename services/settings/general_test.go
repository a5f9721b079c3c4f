package settings_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"switchyard/services"
	"switchyard/services/settings"
)

// gsMemStore is an in-memory services.SettingsStore with revisions.
type gsMemStore struct {
	mu   sync.Mutex
	docs map[string][]byte
	revs map[string]int64
}

func (s *gsMemStore) GetSetting(_ context.Context, key string) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[key]
	if !ok {
		return nil, 0, services.ErrNotFound
	}
	return slices.Clone(d), s.revs[key], nil
}

func (s *gsMemStore) PutSetting(_ context.Context, key string, doc []byte, expected int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revs[key] != expected {
		return 0, services.ErrConflict
	}
	s.docs[key] = slices.Clone(doc)
	s.revs[key]++
	return s.revs[key], nil
}

type gsEnv struct {
	t     *testing.T
	store *gsMemStore
	logs  *bytes.Buffer
	doc   *settings.Document[settings.General]
}

func newGSEnv(t *testing.T, env map[string]string) *gsEnv {
	t.Helper()
	e := &gsEnv{t: t, store: &gsMemStore{docs: map[string][]byte{}, revs: map[string]int64{}}, logs: &bytes.Buffer{}}
	doc, err := settings.OpenGeneral(context.Background(), e.store, settings.GeneralOptions{
		KnownProvider: func(id string) bool { return id == "openai" || id == "codex" },
		Getenv:        func(k string) string { return env[k] },
		Logger:        slog.New(slog.NewTextHandler(e.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.doc = doc
	return e
}

func (e *gsEnv) patch(body string) settings.General {
	e.t.Helper()
	snap, err := e.doc.Patch(context.Background(), []byte(body), "")
	if err != nil {
		e.t.Fatalf("PATCH %s: %v", body, err)
	}
	return snap.Doc
}

func (e *gsEnv) patchFails(body string) map[string]string {
	e.t.Helper()
	before := e.doc.Current()
	_, err := e.doc.Patch(context.Background(), []byte(body), "")
	var verr *services.ValidationError
	if !errors.As(err, &verr) {
		e.t.Fatalf("PATCH %s: %v, want a ValidationError", body, err)
	}
	if e.doc.Current() != before {
		e.t.Fatalf("PATCH %s failed but published a new document", body)
	}
	return verr.Fields
}

func TestGeneralSettingsDefaults(t *testing.T) {
	want := `{"routing": {"maxAttemptsPerRequest": 30, "requestDeadlineMs": 600000, "fallbackStrategy": "fill-first",
	   "stickyRoundRobinLimit": 3, "providerStrategies": {}, "quotaMaxStaleMs": 86400000, "autoTaskFitness": [],
	   "comboDefaults": {}, "echoRequestedModel": false},
	 "limits": {"maxBodyBytes": 33554432, "maxHeaderBytes": 65536, "maxJsonDepth": 64, "maxMessages": 10000},
	 "server": {"readHeaderTimeoutMs": 10000, "bodyReadTimeoutMs": 60000, "idleTimeoutMs": 120000},
	 "stream": {"keepaliveIdleMs": 2000, "writeTimeoutMs": 30000},
	 "upstream": {"connectTimeoutMs": 10000, "streamIdleTimeoutMs": 120000},
	 "cors": {"allowedOrigins": []},
	 "translation": {"defaultMaxTokens": 4096},
	 "logging": {"captureBodies": false, "captureMaxBytes": 32768, "retentionDays": 7},
	 "pricing": {"models": {}}}`
	for _, doc := range []settings.General{settings.GeneralSpec(settings.GeneralOptions{}).Defaults(), newGSEnv(t, nil).doc.Current().Doc} {
		b, _ := json.Marshal(doc)
		var got, w any
		_ = json.Unmarshal(b, &got)
		_ = json.Unmarshal([]byte(want), &w)
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("defaults\n got %s\nwant %s", b, want)
		}
	}
}

func TestGeneralSettingsEnv(t *testing.T) {
	e := newGSEnv(t, map[string]string{"SWITCHYARD_LOG_RETENTION_DAYS": "30", "SWITCHYARD_LOG_REQUEST_BODIES": "yes"})
	snap := e.doc.Current()
	if snap.Doc.Logging.RetentionDays != 30 || !snap.Doc.Logging.CaptureBodies {
		t.Fatalf("logging %+v", snap.Doc.Logging)
	}
	if !reflect.DeepEqual(snap.Sources(), map[string]string{"logging.retentionDays": "env", "logging.captureBodies": "env"}) {
		t.Fatalf("sources %v", snap.Sources())
	}
	e = newGSEnv(t, map[string]string{"SWITCHYARD_LOG_RETENTION_DAYS": "forever", "SWITCHYARD_LOG_REQUEST_BODIES": "2"})
	if d := e.doc.Current().Doc; d.Logging.RetentionDays != 7 || d.Logging.CaptureBodies {
		t.Fatalf("invalid env not ignored: %+v", d.Logging)
	}
	if n := strings.Count(e.logs.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d warnings, want 2:\n%s", n, e.logs)
	}
}

func TestGeneralSettingsPatchMergesMapsPerKey(t *testing.T) {
	e := newGSEnv(t, nil)
	d := e.patch(`{"routing": {"providerStrategies": {"openai": {"fallbackStrategy": "round-robin", "stickyRoundRobinLimit": 5}}}}`)
	d = e.patch(`{"routing": {"providerStrategies": {"codex": {"fallbackStrategy": "p2c"}, "openai": {"stickyRoundRobinLimit": 2}}, "maxAttemptsPerRequest": 10}}`)
	s, l := d.Routing.AccountStrategy("openai")
	if s != "round-robin" || l != 2 {
		t.Fatalf("openai %s/%d, want round-robin/2 (nested merge)", s, l)
	}
	if s, l := d.Routing.AccountStrategy("codex"); s != "p2c" || l != 3 {
		t.Fatalf("codex %s/%d", s, l)
	}
	if s, l := d.Routing.AccountStrategy("anthropic"); s != "fill-first" || l != 3 {
		t.Fatalf("default %s/%d", s, l)
	}
	// null deletes one key of the map; the rest stays.
	d = e.patch(`{"routing": {"providerStrategies": {"codex": null}}}`)
	if _, ok := d.Routing.ProviderStrategies["codex"]; ok || d.Routing.ProviderStrategies["openai"].FallbackStrategy == nil || d.Routing.MaxAttemptsPerRequest != 10 {
		t.Fatalf("after null key: %+v", d.Routing)
	}
	// Arrays are replaced.
	d = e.patch(`{"routing": {"autoTaskFitness": [{"modelPattern": "gpt-*", "task": "code", "score": 0.9}]}, "cors": {"allowedOrigins": ["https://a.example"]}}`)
	d = e.patch(`{"routing": {"autoTaskFitness": [{"modelPattern": "claude-*", "task": "reasoning", "score": 1}]}}`)
	if len(d.Routing.AutoTaskFitness) != 1 || d.Routing.AutoTaskFitness[0].ModelPattern != "claude-*" || d.CORS.AllowedOrigins[0] != "https://a.example" {
		t.Fatalf("arrays: %+v %+v", d.Routing.AutoTaskFitness, d.CORS)
	}
	// comboDefaults merge per key (nested groups too) and are validated like combo.config.
	e.patch(`{"routing": {"comboDefaults": {"maxRetries": 2, "queue": {"depth": 5}}}}`)
	d = e.patch(`{"routing": {"comboDefaults": {"queue": {"timeoutMs": 1000}, "maxRetries": null}}}`)
	depth, timeout := 5, int64(1000)
	want := services.ComboConfig{Queue: &services.ComboQueue{Depth: &depth, TimeoutMs: &timeout}}
	if !reflect.DeepEqual(d.Routing.ComboDefaults, want) {
		b, _ := json.Marshal(d.Routing.ComboDefaults)
		t.Fatalf("comboDefaults %s", b)
	}
	// Whole-field null.
	d = e.patch(`{"routing": {"providerStrategies": null}}`)
	if len(d.Routing.ProviderStrategies) != 0 {
		t.Fatalf("providerStrategies %v", d.Routing.ProviderStrategies)
	}
	if e.doc.Current().Revision != 8 {
		t.Fatalf("revision %d", e.doc.Current().Revision)
	}
}

func TestGeneralSettingsValidation(t *testing.T) {
	e := newGSEnv(t, nil)
	got := e.patchFails(`{"routing": {"maxAttemptsPerRequest": 0, "fallbackStrategy": "priority",
	   "providerStrategies": {"nope": {}, "openai": {"fallbackStrategy": "x", "sticky": 1}},
	   "comboDefaults": {"maxRetries": 9, "bogus": 1}, "autoTaskFitness": [{"modelPattern": "", "task": "poetry", "score": 2}]},
	 "limits": {"maxBodyBytes": 1000, "maxJsonDepth": 8}, "cors": {"allowedOrigins": ["https://ok.example", "not an origin", "https://x.example/path"]},
	 "logging": {"retentionDays": 0}, "server": {"port": 1}}`)
	want := map[string]string{
		"routing.maxAttemptsPerRequest":                      "must be between 1 and 100",
		"routing.fallbackStrategy":                           "must be one of fill-first, round-robin",
		"routing.providerStrategies.nope":                    "unknown provider",
		"routing.providerStrategies.openai.fallbackStrategy": "must be one of",
		"routing.providerStrategies.openai.sticky":           "unknown field",
		"routing.comboDefaults.maxRetries":                   "must be a whole number between 0 and 5",
		"routing.comboDefaults.bogus":                        "unknown field",
		"routing.autoTaskFitness.0.modelPattern":             "1 to 200 characters",
		"routing.autoTaskFitness.0.task":                     "must be one of code, reasoning, chat",
		"routing.autoTaskFitness.0.score":                    "between 0 and 1",
		"limits.maxBodyBytes":                                "must be between 1048576 and 268435456",
		"limits.maxJsonDepth":                                "must be between 16 and 256",
		"cors.allowedOrigins.1":                              "must be an origin",
		"cors.allowedOrigins.2":                              "must be an origin",
		"logging.retentionDays":                              "must be between 1 and 3650",
		"server.port":                                        "unknown field",
	}
	for k, msg := range want {
		if !strings.Contains(got[k], msg) {
			t.Errorf("%s: %q, want %q", k, got[k], msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields %v", got)
	}
	if e.doc.Current().Revision != 0 {
		t.Fatal("stored after a failed PATCH")
	}
}

// pricing.models overrides the price table per model: merged per model,
// null removes one, validated per field.
func TestGeneralSettingsPriceOverrides(t *testing.T) {
	e := newGSEnv(t, nil)
	d := e.patch(`{"pricing": {"models": {"openai/gpt-4o": {"inputPerMTok": 2, "outputPerMTok": 8}, "codex/gpt-5-codex": {"inputPerMTok": 1.25, "outputPerMTok": 10}}}}`)
	if got := d.Pricing.Models["openai/gpt-4o"]; got != (services.ModelPrice{InputPerMTok: 2, OutputPerMTok: 8}) {
		t.Fatalf("override %+v", got)
	}
	d = e.patch(`{"pricing": {"models": {"openai/gpt-4o": {"outputPerMTok": 9}, "codex/gpt-5-codex": null}}}`)
	if got := d.Pricing.Models; len(got) != 1 || got["openai/gpt-4o"] != (services.ModelPrice{InputPerMTok: 2, OutputPerMTok: 9}) {
		t.Fatalf("after merge and null: %+v", got)
	}
	got := e.patchFails(`{"pricing": {"models": {"nope/x": {"inputPerMTok": 1, "outputPerMTok": 1}, "openai": {},
	  "openai/a": {"inputPerMTok": -1, "outputPerMTok": "x", "cachedPerMTok": 1}, "openai/b": {"inputPerMTok": 1}}}}`)
	want := map[string]string{
		"pricing.models.nope/x":                 "unknown provider",
		"pricing.models.openai":                 "must be named provider/model",
		"pricing.models.openai/a.inputPerMTok":  "between 0 and 1000000",
		"pricing.models.openai/a.outputPerMTok": "between 0 and 1000000",
		"pricing.models.openai/a.cachedPerMTok": "unknown field",
		"pricing.models.openai/b.outputPerMTok": "between 0 and 1000000",
	}
	for k, msg := range want {
		if !strings.Contains(got[k], msg) {
			t.Errorf("%s: %q, want %q", k, got[k], msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields %v", got)
	}
}
