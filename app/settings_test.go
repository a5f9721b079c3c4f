package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"switchyard/app"
	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services/resilience"
)

// settingsApp is a test app with the settings routes served by a service
// built here (env and logger under the test's control), and a signed-in admin.
type settingsApp struct {
	*testkit.App
	cookie *http.Cookie
	svc    *resilience.SettingsService
	docs   app.SettingsDocs
	logs   *settingsLogBuffer
}

type settingsLogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *settingsLogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *settingsLogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newSettingsApp(t *testing.T, env map[string]string) *settingsApp {
	t.Helper()
	a := testkit.NewApp(t)
	logs := &settingsLogBuffer{}
	docs, err := app.OpenSettings(context.Background(), models.NewSettingsStore(testkit.OpenDB(t)), resilience.SettingsOptions{
		Getenv: func(k string) string { return env[k] },
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		ResolveTarget: func(_ context.Context, target string) error {
			if target == "fast" {
				return nil
			}
			return errors.New("no combo or provider/model named " + target)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Server.MountSettingsRoutes(docs)
	return &settingsApp{App: a, cookie: a.Login(), svc: docs.Resilience, docs: docs, logs: logs}
}

func (a *settingsApp) send(method, path, body string, headers ...string) *httptest.ResponseRecorder {
	h := []string{"Sec-Fetch-Site", "same-origin"}
	if body != "" {
		h = append(h, "Content-Type", "application/json")
	}
	req := testkit.Request(method, path, body, append(h, headers...)...)
	req.AddCookie(a.cookie)
	return a.Do(req)
}

func (a *settingsApp) expect(t *testing.T, method, path, body string, status int, headers ...string) map[string]any {
	t.Helper()
	rec := a.send(method, path, body, headers...)
	if rec.Code != status {
		t.Fatalf("%s %s %s: status %d, want %d: %s", method, path, body, rec.Code, status, rec.Body.String())
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s: body %q: %v", method, path, rec.Body.String(), err)
	}
	return m
}

// settingsErr checks an /api error answer and returns its fields.
func settingsErr(t *testing.T, m map[string]any, code string) map[string]any {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != code {
		t.Fatalf("error %v, want code %s", m, code)
	}
	f, _ := e["fields"].(map[string]any)
	return f
}

func settingsDig(m map[string]any, path string) any {
	var v any = m
	for _, p := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func TestSettingsAPIResilienceDefaultsAndETag(t *testing.T) {
	a := newSettingsApp(t, nil)
	rec := a.send("GET", "/api/resilience", "")
	if rec.Code != 200 || rec.Header().Get("ETag") != `"r0"` || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("GET: %d etag %q cache %q", rec.Code, rec.Header().Get("ETag"), rec.Header().Get("Cache-Control"))
	}
	var got map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &got)
	var want map[string]any
	b, _ := json.Marshal(resilience.DefaultDocument())
	_ = json.Unmarshal(b, &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GET body differs from the defaults:\n%s", rec.Body.String())
	}
	for path, v := range map[string]any{"providerBreaker.apikey.failureThreshold": 12.0, "requestQueue.maxWaitMs": 15000.0,
		"modelLockout.enabled": false, "emergencyFallback.maxOutputTokens": 4096.0, "sessionAffinity.ttlMs": 900000.0} {
		if settingsDig(got, path) != v {
			t.Errorf("%s = %v, want %v", path, settingsDig(got, path), v)
		}
	}
	// One auth check: the routes sit behind the /api authentication.
	if rec := a.Do(testkit.Request("GET", "/api/resilience", "")); rec.Code != 401 {
		t.Fatalf("no credential: %d", rec.Code)
	}
	if rec := a.Do(testkit.Request("PATCH", "/api/feature-flags", `{"modelLockout": true}`, "Content-Type", "application/json")); rec.Code != 401 {
		t.Fatalf("no credential on PATCH: %d", rec.Code)
	}
	// A manage key works too.
	_, secret := a.NewKey("ops", "manage")
	if rec := a.Do(testkit.Request("GET", "/api/settings", "", "Authorization", "Bearer "+secret)); rec.Code != 200 {
		t.Fatalf("manage key: %d %s", rec.Code, rec.Body.String())
	}
}

func TestSettingsAPIResiliencePatch(t *testing.T) {
	a := newSettingsApp(t, nil)
	rec := a.send("PATCH", "/api/resilience", `{"modelLockout": {"enabled": true, "baseCooldownMs": 60000},
	  "requestQueue": {"maxQueueDepth": 256, "queueWaitMs": null},
	  "providerBreaker": {"apikey": {"resetTimeoutMs": 20000}}}`)
	if rec.Code != 200 || rec.Header().Get("ETag") != `"r1"` {
		t.Fatalf("PATCH: %d %q %s", rec.Code, rec.Header().Get("ETag"), rec.Body.String())
	}
	var doc map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &doc)
	for path, v := range map[string]any{"modelLockout.enabled": true, "modelLockout.baseCooldownMs": 60000.0,
		"modelLockout.maxCooldownMs": 1800000.0, "requestQueue.maxQueueDepth": 256.0, "requestQueue.maxWaitMs": 15000.0,
		"providerBreaker.apikey.resetTimeoutMs": 20000.0, "providerBreaker.apikey.failureThreshold": 12.0} {
		if settingsDig(doc, path) != v {
			t.Errorf("%s = %v, want %v", path, settingsDig(doc, path), v)
		}
	}
	// A second PATCH of the same section keeps the first one's fields.
	doc = a.expect(t, "PATCH", "/api/resilience", `{"modelLockout": {"maxBackoffSteps": 4}}`, 200)
	if settingsDig(doc, "modelLockout.enabled") != true || settingsDig(doc, "modelLockout.baseCooldownMs") != 60000.0 || settingsDig(doc, "modelLockout.maxBackoffSteps") != 4.0 {
		t.Fatalf("merge lost fields: %v", doc["modelLockout"])
	}
	// GET serves what PATCH answered.
	rec = a.send("GET", "/api/resilience", "")
	var got map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &got)
	if !reflect.DeepEqual(got, doc) || rec.Header().Get("ETag") != `"r2"` {
		t.Fatalf("GET after PATCH: %s %s", rec.Header().Get("ETag"), rec.Body.String())
	}
	// The service publishes the change to readers.
	if d := a.svc.Resilience(); !d.ModelLockout.Enabled || !d.Lockout().Enabled || d.RequestQueue.MaxQueueDepth != 256 {
		t.Fatal("service not updated")
	}
}

func TestSettingsAPIResilienceRefusalsStoreNothing(t *testing.T) {
	a := newSettingsApp(t, nil)
	a.expect(t, "PATCH", "/api/resilience", `{"requestQueue": {"maxQueueDepth": 10}}`, 200)
	before := a.send("GET", "/api/resilience", "")
	cases := []struct {
		body   string
		status int
		code   string
		fields map[string]string
	}{
		{`{"requestQueue":{"maxWaitMs":45000}}`, 400, "validation_failed",
			map[string]string{"requestQueue.maxWaitMs": "must be between 1 and 30000"}},
		{`{"requestQueue":{"maxQueueDepth":100001}}`, 400, "validation_failed",
			map[string]string{"requestQueue.maxQueueDepth": "must be between 0 and 100000"}},
		{`{"connectionCooldown":{"apikey":{"baseCooldownMs":5000,"maxCooldownMs":4000}}}`, 400, "validation_failed",
			map[string]string{"connectionCooldown.apikey.maxCooldownMs": "must be at least baseCooldownMs (5000)"}},
		{`{"providerBreaker": {"oauth": {"degradationThreshold": 8}}}`, 400, "validation_failed",
			map[string]string{"providerBreaker.oauth.degradationThreshold": "must be lower than failureThreshold (8)"}},
		{`{"requestQueue": {"maxWaitMS": 1, "maxWaitMs": 45000}, "modelLockout": {"enabled": true, "colour": "red"}}`, 400, "validation_failed",
			map[string]string{"requestQueue.maxWaitMS": "unknown field", "requestQueue.maxWaitMs": "must be between 1 and 30000",
				"modelLockout.colour": "unknown field"}},
		{`{"emergencyFallback": {"enabled": true}}`, 400, "validation_failed",
			map[string]string{"emergencyFallback.enabled": "set emergencyFallback.target first"}},
		{`{}`, 400, "validation_failed", nil},
		{`{"requestQueue": `, 400, "invalid_json", nil},
		{`[1, 2]`, 400, "invalid_json", nil},
	}
	for _, c := range cases {
		rec := a.send("PATCH", "/api/resilience", c.body)
		if rec.Code != c.status {
			t.Fatalf("%s: %d %s", c.body, rec.Code, rec.Body.String())
		}
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		fields := settingsErr(t, m, c.code)
		gotFields := map[string]string{}
		for k, v := range fields {
			gotFields[k], _ = v.(string)
		}
		if c.fields != nil && !reflect.DeepEqual(gotFields, c.fields) {
			t.Errorf("%s: fields %v, want %v", c.body, gotFields, c.fields)
		}
		if c.body == `{}` && settingsDig(m, "error.message") != "no settings to update" {
			t.Errorf("{}: %v", m)
		}
	}
	rec := a.send("PATCH", "/api/resilience", `{"requestQueue": {"maxQueueDepth": 1}}`, "Content-Type", "text/plain")
	if rec.Code != 415 {
		t.Fatalf("text/plain: %d", rec.Code)
	}
	rec = a.send("PATCH", "/api/resilience", `{"requestQueue": {"maxQueueDepth": 1}}`, "If-Match", `"r0"`)
	if rec.Code != 412 {
		t.Fatalf("stale If-Match: %d %s", rec.Code, rec.Body.String())
	}
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	settingsErr(t, m, "precondition_failed")
	after := a.send("GET", "/api/resilience", "")
	if after.Body.String() != before.Body.String() || after.Header().Get("ETag") != `"r1"` {
		t.Fatalf("a refused PATCH changed the document: %s → %s", before.Header().Get("ETag"), after.Header().Get("ETag"))
	}
	// The current ETag is accepted.
	if rec := a.send("PATCH", "/api/resilience", `{"requestQueue": {"maxQueueDepth": null}}`, "If-Match", `"r1"`); rec.Code != 200 || rec.Header().Get("ETag") != `"r2"` {
		t.Fatalf("current If-Match: %d %s", rec.Code, rec.Body.String())
	}
	doc := a.expect(t, "GET", "/api/resilience", "", 200)
	if settingsDig(doc, "requestQueue.maxQueueDepth") != 0.0 {
		t.Fatalf("null did not remove the stored value: %v", doc["requestQueue"])
	}
}

func TestSettingsAPIExplainSources(t *testing.T) {
	a := newSettingsApp(t, map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "20000", "SWITCHYARD_BREAKER_APIKEY_FAILURE_THRESHOLD": "many"})
	if !strings.Contains(a.logs.String(), "SWITCHYARD_BREAKER_APIKEY_FAILURE_THRESHOLD") || strings.Count(a.logs.String(), "level=WARN") != 1 {
		t.Fatalf("want one WARN for the unparsable env value:\n%s", a.logs.String())
	}
	a.expect(t, "PATCH", "/api/resilience", `{"modelLockout": {"enabled": true}, "providerBreaker": {"oauth": {"failureThreshold": 10}}}`, 200)
	m := a.expect(t, "GET", "/api/resilience?explain=true", "", 200)
	want := map[string]any{"requestQueue.maxWaitMs": "env", "modelLockout.enabled": "stored",
		"providerBreaker.oauth.failureThreshold": "stored", "providerBreaker.oauth.degradationThreshold": "derived"}
	if !reflect.DeepEqual(m["sources"], want) || m["revision"] != 1.0 {
		t.Fatalf("sources %v revision %v", m["sources"], m["revision"])
	}
	if settingsDig(m, "settings.requestQueue.maxWaitMs") != 20000.0 || settingsDig(m, "defaults.requestQueue.maxWaitMs") != 15000.0 ||
		settingsDig(m, "settings.providerBreaker.apikey.failureThreshold") != 12.0 || settingsDig(m, "settings.providerBreaker.oauth.degradationThreshold") != 6.0 {
		t.Fatalf("explain documents: %v", m)
	}
	rec := a.send("GET", "/api/resilience?explain=maybe", "")
	if rec.Code != 400 {
		t.Fatalf("explain=maybe: %d", rec.Code)
	}
}

func TestSettingsAPIGeneralSettings(t *testing.T) {
	a := newSettingsApp(t, nil)
	rec := a.send("GET", "/api/settings", "")
	if rec.Code != 200 || rec.Header().Get("ETag") != `"r0"` {
		t.Fatalf("GET: %d %q", rec.Code, rec.Header().Get("ETag"))
	}
	var doc map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &doc)
	if settingsDig(doc, "routing.fallbackStrategy") != "fill-first" || settingsDig(doc, "limits.maxBodyBytes") != 33554432.0 || settingsDig(doc, "logging.retentionDays") != 7.0 {
		t.Fatalf("defaults %s", rec.Body.String())
	}
	rec = a.send("PATCH", "/api/settings", `{"routing": {"providerStrategies": {"openai": {"fallbackStrategy": "round-robin"}}}, "stream": {"keepaliveIdleMs": 0}}`)
	if rec.Code != 200 || rec.Header().Get("ETag") != `"r1"` {
		t.Fatalf("PATCH: %d %s", rec.Code, rec.Body.String())
	}
	doc = a.expect(t, "PATCH", "/api/settings", `{"routing": {"providerStrategies": {"codex": {"stickyRoundRobinLimit": 9}}}}`, 200)
	if settingsDig(doc, "routing.providerStrategies.openai.fallbackStrategy") != "round-robin" || settingsDig(doc, "routing.providerStrategies.codex.stickyRoundRobinLimit") != 9.0 ||
		settingsDig(doc, "stream.keepaliveIdleMs") != 0.0 {
		t.Fatalf("merge per key: %v", doc["routing"])
	}
	m := a.expect(t, "PATCH", "/api/settings", `{"routing": {"maxAttemptsPerRequest": 101}, "limits": {"maxJsonDepth": "deep"}, "colour": 1}`, 400)
	f := settingsErr(t, m, "validation_failed")
	if f["routing.maxAttemptsPerRequest"] != "must be between 1 and 100" || f["limits.maxJsonDepth"] != "must be a whole number" || f["colour"] != "unknown field" {
		t.Fatalf("fields %v", f)
	}
	if rec := a.send("PATCH", "/api/settings", `{"stream": {"writeTimeoutMs": 5000}}`, "If-Match", `"r1"`); rec.Code != 412 {
		t.Fatalf("stale If-Match: %d", rec.Code)
	}
	m = a.expect(t, "GET", "/api/settings?explain=true", "", 200)
	if !reflect.DeepEqual(m["sources"], map[string]any{"routing.providerStrategies": "stored", "stream.keepaliveIdleMs": "stored"}) || m["revision"] != 2.0 {
		t.Fatalf("explain %v", m)
	}
	if a.docs.General.Current().Doc.Routing.ProviderStrategies["codex"].StickyRoundRobinLimit == nil {
		t.Fatal("service not updated")
	}
}

func TestSettingsAPIFeatureFlags(t *testing.T) {
	a := newSettingsApp(t, map[string]string{"STREAM_THROUGHPUT_WATCHDOG_ENABLED": "on"})
	m := a.expect(t, "GET", "/api/feature-flags", "", 200)
	flags := func(m map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		list, _ := m["flags"].([]any)
		for _, f := range list {
			ff := f.(map[string]any)
			out[ff["key"].(string)] = ff
		}
		return out
	}
	fl := flags(m)
	if len(fl) != 10 {
		t.Fatalf("flags %v", m)
	}
	if f := fl["emergencyFallback"]; f["field"] != "emergencyFallback.enabled" || f["value"] != false || f["source"] != "default" ||
		f["env"] != "SWITCHYARD_EMERGENCY_FALLBACK" || f["requiresRestart"] != false || f["description"] == "" {
		t.Fatalf("emergencyFallback %v", f)
	}
	if f := fl["throughputWatchdog"]; f["value"] != true || f["source"] != "env" {
		t.Fatalf("throughputWatchdog %v", f)
	}
	if f := fl["modelLockout"]; f["env"] != nil {
		t.Fatalf("modelLockout env %v", f["env"])
	}
	fl = flags(a.expect(t, "PATCH", "/api/feature-flags", `{"modelLockout": true, "throughputWatchdog": false, "logRequestBodies": true}`, 200))
	if fl["modelLockout"]["value"] != true || fl["modelLockout"]["source"] != "stored" || fl["throughputWatchdog"]["value"] != false ||
		fl["logRequestBodies"]["value"] != true {
		t.Fatalf("after PATCH %v", fl)
	}
	doc := a.expect(t, "GET", "/api/resilience", "", 200)
	gen := a.expect(t, "GET", "/api/settings", "", 200)
	if settingsDig(doc, "modelLockout.enabled") != true || settingsDig(gen, "logging.captureBodies") != true {
		t.Fatal("flags are not views of the settings documents")
	}
	fl = flags(a.expect(t, "PATCH", "/api/feature-flags", `{"throughputWatchdog": null, "logRequestBodies": null}`, 200))
	if fl["throughputWatchdog"]["value"] != true || fl["throughputWatchdog"]["source"] != "env" || fl["logRequestBodies"]["source"] != "default" {
		t.Fatalf("after null %v", fl)
	}
	before := a.send("GET", "/api/feature-flags", "").Body.String()
	m = a.expect(t, "PATCH", "/api/feature-flags", `{"bogus": true, "modelLockout": "on"}`, 400)
	if f := settingsErr(t, m, "validation_failed"); f["bogus"] != "unknown field" || f["modelLockout"] == nil || len(f) != 2 {
		t.Fatalf("fields %v", f)
	}
	m = a.expect(t, "PATCH", "/api/feature-flags", `{"emergencyFallback": true, "modelLockout": false}`, 400)
	if f := settingsErr(t, m, "validation_failed"); !reflect.DeepEqual(f, map[string]any{"emergencyFallback": "set emergencyFallback.target first"}) {
		t.Fatalf("fields %v", f)
	}
	if after := a.send("GET", "/api/feature-flags", "").Body.String(); after != before {
		t.Fatal("a refused flag PATCH changed something")
	}
	a.expect(t, "PATCH", "/api/resilience", `{"emergencyFallback": {"target": "fast"}}`, 200)
	fl = flags(a.expect(t, "PATCH", "/api/feature-flags", `{"emergencyFallback": true}`, 200))
	if fl["emergencyFallback"]["value"] != true || fl["emergencyFallback"]["source"] != "stored" {
		t.Fatalf("emergencyFallback %v", fl["emergencyFallback"])
	}
}
