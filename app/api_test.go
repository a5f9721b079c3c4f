package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/app"
	"switchyard/handlers"
	"switchyard/internal/testkit"
	"switchyard/services"
)

// ---- helpers ----

// apiApp is a test app with a signed-in admin.
type apiApp struct {
	*testkit.App
	cookie *http.Cookie
}

func newAPIApp(t *testing.T) *apiApp {
	t.Helper()
	a := testkit.NewApp(t)
	return &apiApp{App: a, cookie: a.Login()}
}

// admin sends a request with the admin cookie, as the dashboard's own
// scripts would (Sec-Fetch-Site: same-origin); a body is sent as JSON.
func (a *apiApp) admin(method, path, body string, headers ...string) *httptest.ResponseRecorder {
	h := []string{"Sec-Fetch-Site", "same-origin"}
	if body != "" {
		h = append(h, "Content-Type", "application/json")
	}
	req := testkit.Request(method, path, body, append(h, headers...)...)
	req.AddCookie(a.cookie)
	return a.Do(req)
}

// bearer sends a request with a client key; a body is sent as JSON.
func (a *apiApp) bearer(secret, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	h := []string{"Authorization", "Bearer " + secret}
	if body != "" {
		h = append(h, "Content-Type", "application/json")
	}
	return a.Do(testkit.Request(method, path, body, append(h, headers...)...))
}

// mustJSON sends an admin request, checks the status and decodes the body.
func (a *apiApp) mustJSON(t *testing.T, method, path, body string, status int) map[string]any {
	t.Helper()
	rec := a.admin(method, path, body)
	if rec.Code != status {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, rec.Code, status, rec.Body.String())
	}
	if status == http.StatusNoContent {
		return nil
	}
	return decodeObject(t, rec)
}

func decodeObject(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want JSON: %s", ct, rec.Body.String())
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, rec.Body.String())
	}
	return m
}

// apiError is the error shape of 40-admin-api §1.
type apiError struct {
	Error struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Fields  map[string]string `json:"fields"`
	} `json:"error"`
}

func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) apiError {
	t.Helper()
	var e apiError
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body.String())
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != code {
		t.Fatalf("error code %q (decode err %v), want %q: %s", e.Error.Code, err, code, rec.Body.String())
	}
	return e
}

// itemsOf returns the "items" of a list response.
func itemsOf(t *testing.T, m map[string]any) []map[string]any {
	t.Helper()
	raw, ok := m["items"].([]any)
	if !ok {
		t.Fatalf("no items array in %v", m)
	}
	out := make([]map[string]any, len(raw))
	for i, v := range raw {
		out[i] = v.(map[string]any)
	}
	return out
}

func idsOf(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it["id"].(string)
	}
	return out
}

// wantNull checks that key is present in m with the value null.
func wantNull(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		v, ok := m[k]
		if !ok || v != nil {
			t.Errorf("%q = %v (present %v), want null", k, v, ok)
		}
	}
}

// snapshot is everything the API can change, read through the services, so
// "nothing changed" compares the stored state itself.
func snapshot(t *testing.T, a *testkit.App) string {
	t.Helper()
	ctx := context.Background()
	conns, err := a.Server.Connections().List(ctx, services.ConnectionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	combos, err := a.Server.Combos().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := a.Server.Keys().List(ctx, "all")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal([]any{conns, combos, keys})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fixture holds one of each resource, created through the services.
type fixture struct {
	conn, conn2, combo, combo2, key string
	local                           string
	localCombo                      string // one target pinned to local: combo tests stay on this machine
}

func newFixture(t *testing.T, a *testkit.App) fixture {
	t.Helper()
	ctx := context.Background()
	var f fixture
	for i, dst := range []*string{&f.conn, &f.conn2} {
		c, err := a.Server.Connections().Create(ctx, services.ConnectionInput{
			Provider: services.Some("openai"), Name: services.Some([]string{"team-1", "team-2"}[i]),
			APIKey: services.Some("sk-fixture-0000000000000000"),
		})
		if err != nil {
			t.Fatal(err)
		}
		*dst = c.ID
	}
	for i, dst := range []*string{&f.combo, &f.combo2} {
		cb, _, err := a.Server.Combos().Create(ctx, services.ComboInput{
			Name:    []string{"fast", "smart"}[i],
			Targets: []services.Target{{Provider: "openai", Model: "gpt-4o-mini"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		*dst = cb.ID
	}
	// A local server on a closed loopback port: connection tests stay on this machine.
	lc, err := a.Server.Connections().Create(ctx, services.ConnectionInput{Provider: services.Some("ollama"),
		Name: services.Some("box"), BaseURL: services.Some("http://127.0.0.1:1/v1")})
	if err != nil {
		t.Fatal(err)
	}
	f.local = lc.ID
	lcb, _, err := a.Server.Combos().Create(ctx, services.ComboInput{Name: "on-box",
		Targets: []services.Target{{Provider: "ollama", Model: "llama3", ConnectionID: &f.local}}})
	if err != nil {
		t.Fatal(err)
	}
	f.localCombo = lcb.ID
	k, _ := a.NewKey("fixture-key", services.ScopeInference)
	f.key = k.ID
	return f
}

// apiRoute is one registered /api route, with a request that succeeds when
// the table is walked in order by an authorised caller.
type apiRoute struct {
	method, pattern, id, body string
	ok                        int
}

func (r apiRoute) path() string {
	return strings.Replace(strings.Replace(r.pattern, ":id", r.id, 1), ":provider", r.id, 1)
}
func (r apiRoute) String() string {
	return r.method + " " + r.pattern
}

func (r apiRoute) unsafe() bool {
	return r.method != http.MethodGet && r.method != http.MethodHead && r.method != http.MethodOptions
}

func apiRoutes(f fixture) []apiRoute {
	return []apiRoute{
		{"GET", "/api/connections", "", "", 200},
		{"POST", "/api/connections", "", `{"provider":"anthropic","name":"new","apiKey":"sk-ant-0000000000000000"}`, 201},
		{"GET", "/api/connections/:id", f.conn, "", 200},
		{"PATCH", "/api/connections/:id", f.conn, `{"name":"renamed","priority":3}`, 200},
		{"POST", "/api/connections/:id/reset", f.conn, "", 200},
		{"POST", "/api/connections/:id/test", f.local, "", 200},
		{"GET", "/api/resilience", "", "", 200},
		{"PATCH", "/api/resilience", "", `{"modelLockout":{"enabled":true}}`, 200},
		{"GET", "/api/settings", "", "", 200},
		{"PATCH", "/api/settings", "", `{"routing":{"maxAttemptsPerRequest":20}}`, 200},
		{"GET", "/api/feature-flags", "", "", 200},
		{"PATCH", "/api/feature-flags", "", `{"modelLockout":true}`, 200},
		{"POST", "/api/resilience/reset", "", "", 200},
		{"POST", "/api/resilience/breakers/reset", "", "", 200},
		{"POST", "/api/resilience/breakers/:provider/reset", "openai", "", 200},
		{"GET", "/api/resilience/model-cooldowns", "", "", 200},
		{"DELETE", "/api/resilience/model-cooldowns", "", `{"all":true}`, 200},
		{"GET", "/api/resilience/cooldowns", "", "", 200},
		{"GET", "/api/concurrency", "", "", 200},
		{"GET", "/api/resilience/leases", "", "", 200},
		{"DELETE", "/api/resilience/leases/:id", "no-such-lease", "", 404},
		{"DELETE", "/api/resilience/affinity", "", "", 200},
		{"GET", "/api/resilience/events", "", "", 200},
		{"POST", "/api/concurrency/reset", "", `{"target":"all"}`, 200},
		{"POST", "/api/resilience/cooldowns", "", `{"all":true}`, 200},
		{"DELETE", "/api/connections/:id", f.conn2, "", 204},
		{"GET", "/api/combos", "", "", 200},
		{"POST", "/api/combos/reorder", "", `{"ids":["` + f.combo2 + `","` + f.combo + `","` + f.localCombo + `"]}`, 200},
		{"POST", "/api/combos", "", `{"name":"new-combo","targets":[{"provider":"openai","model":"gpt-4o"}]}`, 201},
		{"GET", "/api/combos/:id", f.combo, "", 200},
		{"GET", "/api/combos/:id/explain", f.combo, "", 200},
		{"POST", "/api/combos/:id/test", f.localCombo, `{"force":false}`, 200},
		{"PUT", "/api/combos/:id", f.combo, `{"name":"fast","description":"replaced","targets":[{"provider":"openai","model":"gpt-4o"}]}`, 200},
		{"PATCH", "/api/combos/:id", f.combo, `{"name":"renamed-combo"}`, 200},
		{"DELETE", "/api/combos/:id", f.combo2, "", 204},
		{"GET", "/api/keys", "", "", 200},
		{"POST", "/api/keys", "", `{"name":"new-key"}`, 201},
		{"GET", "/api/keys/:id", f.key, "", 200},
		{"PATCH", "/api/keys/:id", f.key, `{"name":"renamed-key"}`, 200},
		{"POST", "/api/keys/:id/revoke", f.key, "", 200},
		{"DELETE", "/api/keys/:id", f.key, "", 204},
		{"GET", "/api/logs", "", "", 200},
		{"GET", "/api/logs/:id", "no-such-log", "", 404},
		{"GET", "/api/audit", "", "", 200},
		{"GET", "/api/metrics/summary", "", "", 200},
		{"GET", "/api/resilience/error-rules", "", "", 200},
		{"POST", "/api/resilience/classify", "", `{"provider":"openai","status":429}`, 200},
	}
}

// ---- auth ----

// TestAPIRouteTableCoversEveryRoute keeps the auth tables below honest: a
// new /api route must be added to apiRoutes.
func TestAPIRouteTableCoversEveryRoute(t *testing.T) {
	a := testkit.NewApp(t)
	e := a.Server.Echo()
	inTable := map[string]bool{}
	for _, r := range apiRoutes(fixture{}) {
		inTable[r.String()] = true
	}
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	for _, r := range e.Routes() {
		if !strings.HasPrefix(r.Path, "/api/") || r.Path == "/api/monitoring/health" || !slices.Contains(methods, r.Method) {
			continue
		}
		if !inTable[r.Method+" "+r.Path] {
			t.Errorf("route %s %s is not in apiRoutes", r.Method, r.Path)
		}
		delete(inTable, r.Method+" "+r.Path)
	}
	for r := range inTable {
		t.Errorf("apiRoutes lists %s, which is not registered", r)
	}
}

func TestAPIRoutesRequireCredentials(t *testing.T) {
	a := newAPIApp(t)
	f := newFixture(t, a.App)
	revoked, revokedSecret := a.NewKey("gone", services.ScopeManage)
	if _, err := a.Server.Keys().Revoke(context.Background(), revoked.ID); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, a.App)
	for _, r := range apiRoutes(f) {
		t.Run(r.String(), func(t *testing.T) {
			h := []string{"Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}
			rec := a.Do(testkit.Request(r.method, r.path(), r.body, h...))
			wantError(t, rec, http.StatusUnauthorized, "unauthorized")

			rec = a.bearer(revokedSecret, r.method, r.path(), r.body)
			wantError(t, rec, http.StatusUnauthorized, "unauthorized")

			// A present Authorization header is the only credential considered.
			req := testkit.Request(r.method, r.path(), r.body, append(h, "Authorization", "Bearer sk-sy-not-a-real-key")...)
			req.AddCookie(a.cookie)
			wantError(t, a.Do(req), http.StatusUnauthorized, "unauthorized")
		})
	}
	if snapshot(t, a.App) != before {
		t.Fatal("requests without a valid credential changed state")
	}
}

func TestAPICookieMutationsRejectCrossSite(t *testing.T) {
	a := newAPIApp(t)
	f := newFixture(t, a.App)
	before := snapshot(t, a.App)
	a.Clock.Advance(time.Minute) // a write would now also change updatedAt
	for _, r := range apiRoutes(f) {
		t.Run(r.String(), func(t *testing.T) {
			req := testkit.Request(r.method, r.path(), r.body, "Sec-Fetch-Site", "cross-site", "Content-Type", "application/json")
			req.AddCookie(a.cookie)
			rec := a.Do(req)
			if !r.unsafe() {
				if rec.Code != r.ok {
					t.Fatalf("safe method cross-site: status %d: %s", rec.Code, rec.Body.String())
				}
				return
			}
			wantError(t, rec, http.StatusForbidden, "cross_origin_rejected")
		})
	}
	if after := snapshot(t, a.App); after != before {
		t.Fatalf("cross-site requests changed state:\nbefore %s\nafter  %s", before, after)
	}
}

func TestAPIKeyWithoutManageScopeIsForbidden(t *testing.T) {
	a := newAPIApp(t)
	f := newFixture(t, a.App)
	_, secret := a.NewKey("scraper", services.ScopeInference, services.ScopeMetrics)
	before := snapshot(t, a.App)
	for _, r := range apiRoutes(f) {
		t.Run(r.String(), func(t *testing.T) {
			wantError(t, a.bearer(secret, r.method, r.path(), r.body), http.StatusForbidden, "forbidden")
		})
	}
	if snapshot(t, a.App) != before {
		t.Fatal("a key without scope manage changed state")
	}
}

func TestAPIManageKeyWorksWithoutCrossOriginCheck(t *testing.T) {
	a := newAPIApp(t)
	f := newFixture(t, a.App)
	_, secret := a.NewKey("ops-script", services.ScopeManage)
	for _, r := range apiRoutes(f) {
		// Walked in order: each row's request is valid after the rows above it.
		rec := a.bearer(secret, r.method, r.path(), r.body, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
		if rec.Code != r.ok {
			t.Fatalf("%s: status %d, want %d: %s", r, rec.Code, r.ok, rec.Body.String())
		}
	}
	ctx := context.Background()
	if _, err := a.Server.Keys().Get(ctx, f.key); err == nil {
		t.Error("key still exists after revoke and delete")
	}
	if c, err := a.Server.Connections().Get(ctx, f.conn); err != nil || c.Name != "renamed" || c.Priority != 3 {
		t.Errorf("connection after PATCH: %+v, %v", c, err)
	}
}

func TestAPIRefusesKeyInQueryString(t *testing.T) {
	a := newAPIApp(t)
	_, secret := a.NewKey("ops", services.ScopeManage)
	for _, q := range []string{"key", "api_key"} {
		target := "/api/connections?" + q + "=" + secret
		wantError(t, a.Do(testkit.Request("GET", target, "")), http.StatusBadRequest, "bad_request")
		wantError(t, a.admin("GET", target, ""), http.StatusBadRequest, "bad_request")
		wantError(t, a.bearer(secret, "GET", target, ""), http.StatusBadRequest, "bad_request")
	}
}

// ---- connections ----

func TestAPIConnectionsRoundTrip(t *testing.T) {
	a := newAPIApp(t)
	const apiKey = "sk-proj-abcdefghijklmnop9f2a"

	// Create.
	rec := a.admin("POST", "/api/connections", `{"provider":"openai","name":"team-1","apiKey":"`+apiKey+`",
		"defaultModel":"gpt-4o-mini","maxConcurrent":2,"rateLimitOverrides":{"requestsPerMinute":120},
		"proxyUrl":"http://ops:hunter2@proxy.internal:3128"}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body.String())
	}
	conn := decodeObject(t, rec)
	id, _ := conn["id"].(string)
	if !strings.HasPrefix(id, "c_") || rec.Header().Get("Location") != "/api/connections/"+id {
		t.Fatalf("id %q, Location %q", id, rec.Header().Get("Location"))
	}
	want := map[string]any{
		"provider": "openai", "name": "team-1", "authClass": "apikey", "enabled": true, "priority": float64(0),
		"baseUrl": "https://api.openai.com/v1", "defaultModel": "gpt-4o-mini", "maxConcurrent": float64(2),
		"proxyUrl": "http://ops:****@proxy.internal:3128", "disableCooling": false,
		"quotaReservePercent": float64(0), "tier": "standard",
		"createdAt": "2026-03-01T10:00:00.000Z", "updatedAt": "2026-03-01T10:00:00.000Z",
	}
	for k, v := range want {
		if conn[k] != v {
			t.Errorf("%s = %#v, want %#v", k, conn[k], v)
		}
	}
	wantNull(t, conn, "rateLimitProtection", "egressGroup", "lastUsedAt", "lastTest")
	if s := conn["secret"].(map[string]any); s["set"] != true || s["preview"] != "sk-…9f2a" {
		t.Errorf("secret = %v", s)
	}
	rlo := conn["rateLimitOverrides"].(map[string]any)
	if rlo["requestsPerMinute"] != float64(120) {
		t.Errorf("rateLimitOverrides = %v", rlo)
	}
	wantNull(t, rlo, "minTimeBetweenRequestsMs", "concurrentRequests", "maxWaitMs", "maxQueueDepth", "queueWaitMs")
	state := conn["state"].(map[string]any)
	if state["status"] != "active" || state["cooldownRemainingMs"] != float64(0) || state["lockedModels"] != float64(0) ||
		state["backoffLevel"] != float64(0) {
		t.Errorf("state = %v", state)
	}
	wantNull(t, state, "rateLimitedUntil", "terminalStatus", "terminalAt", "lastError", "lastErrorReason", "lastErrorStatus", "lastErrorAt")
	if strings.Contains(rec.Body.String(), "hunter2") || strings.Contains(rec.Body.String(), apiKey) {
		t.Fatalf("create response leaks a secret: %s", rec.Body.String())
	}

	// Get one, with references from a pinning combo and an allowing key.
	got := a.mustJSON(t, "GET", "/api/connections/"+id, "", 200)
	refs := got["references"].(map[string]any)
	if len(refs["combos"].([]any)) != 0 || len(refs["keys"].([]any)) != 0 {
		t.Errorf("references before = %v", refs)
	}
	combo := a.mustJSON(t, "POST", "/api/combos", `{"name":"pinned","targets":[{"provider":"openai","model":"gpt-4o","connectionId":"`+id+`"}]}`, 201)
	key := decodeObject(t, a.admin("POST", "/api/keys", `{"name":"agent-a","allowedConnections":["`+id+`"]}`))["key"].(map[string]any)
	got = a.mustJSON(t, "GET", "/api/connections/"+id, "", 200)
	refs = got["references"].(map[string]any)
	wantRef := func(list any, id, name string) {
		t.Helper()
		l, _ := list.([]any)
		if len(l) != 1 || l[0].(map[string]any)["id"] != id || l[0].(map[string]any)["name"] != name {
			t.Errorf("references = %v, want [%s %s]", list, id, name)
		}
	}
	wantRef(refs["combos"], combo["id"].(string), "pinned")
	wantRef(refs["keys"], key["id"].(string), "agent-a")

	// Patch: absent fields keep their value, null clears.
	a.Clock.Advance(90 * time.Second)
	patched := a.mustJSON(t, "PATCH", "/api/connections/"+id, `{"priority":5,"maxConcurrent":null,"egressGroup":"eu-1","enabled":false}`, 200)
	if patched["priority"] != float64(5) || patched["egressGroup"] != "eu-1" || patched["enabled"] != false ||
		patched["name"] != "team-1" || patched["updatedAt"] != "2026-03-01T10:01:30.000Z" || patched["createdAt"] != "2026-03-01T10:00:00.000Z" {
		t.Errorf("patched = %v", patched)
	}
	wantNull(t, patched, "maxConcurrent")
	if s := patched["secret"].(map[string]any); s["set"] != true || s["preview"] != "sk-…9f2a" {
		t.Errorf("secret after patch = %v (omitted apiKey must keep it)", s)
	}
	if patched["state"].(map[string]any)["status"] != "disabled" {
		t.Errorf("status after disable = %v", patched["state"])
	}

	// List: order by provider (catalogue order), priority, name; filters.
	a.mustJSON(t, "POST", "/api/connections", `{"provider":"anthropic","name":"claude","apiKey":"sk-ant-0000000000000000"}`, 201)
	a.mustJSON(t, "POST", "/api/connections", `{"provider":"openai","name":"zeta","apiKey":"sk-0000000000000000","priority":1}`, 201)
	a.mustJSON(t, "POST", "/api/connections", `{"provider":"openai","name":"alpha","apiKey":"sk-0000000000000000","priority":1}`, 201)
	var names []string
	for _, it := range itemsOf(t, a.mustJSON(t, "GET", "/api/connections", "", 200)) {
		names = append(names, it["name"].(string))
	}
	// team-1 has priority 5 since the PATCH above.
	if want := []string{"alpha", "zeta", "team-1", "claude"}; !slices.Equal(names, want) {
		t.Errorf("list order %v, want %v", names, want)
	}
	for _, tc := range []struct {
		query string
		want  int
	}{{"?provider=anthropic", 1}, {"?provider=openai", 3}, {"?status=disabled", 1}, {"?status=active", 3}, {"?status=cooling", 0}, {"?provider=openai&status=active", 2}} {
		if n := len(itemsOf(t, a.mustJSON(t, "GET", "/api/connections"+tc.query, "", 200))); n != tc.want {
			t.Errorf("list%s: %d items, want %d", tc.query, n, tc.want)
		}
	}
	e := wantError(t, a.admin("GET", "/api/connections?status=sleepy", ""), 400, "validation_failed")
	if e.Error.Fields["status"] == "" {
		t.Errorf("fields = %v, want status", e.Error.Fields)
	}

	// Delete.
	if rec := a.admin("DELETE", "/api/connections/"+id, ""); rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body.String())
	}
	wantError(t, a.admin("GET", "/api/connections/"+id, ""), 404, "not_found")
	wantError(t, a.admin("DELETE", "/api/connections/"+id, ""), 404, "not_found")
	wantError(t, a.admin("PATCH", "/api/connections/"+id, `{"name":"x"}`), 404, "not_found")
	if n := len(itemsOf(t, a.mustJSON(t, "GET", "/api/connections", "", 200))); n != 3 {
		t.Errorf("%d connections after delete, want 3", n)
	}
}

func TestAPIConnectionDeleteConflictsWithLeaseKey(t *testing.T) {
	a := newAPIApp(t)
	conn := a.mustJSON(t, "POST", "/api/connections", `{"provider":"glm","name":"glm-1","apiKey":"sk-glm-0000000000000000"}`, 201)
	id := conn["id"].(string)
	a.mustJSON(t, "POST", "/api/keys", `{"name":"agent","scopes":["inference","lease:exclusive"],"allowedConnections":["`+id+`"]}`, 201)
	before := snapshot(t, a.App)
	e := wantError(t, a.admin("DELETE", "/api/connections/"+id, ""), http.StatusConflict, "conflict")
	if !strings.Contains(e.Error.Message, "agent") {
		t.Errorf("message %q does not name the key", e.Error.Message)
	}
	if snapshot(t, a.App) != before {
		t.Fatal("refused delete changed state")
	}
}

func TestAPIConnectionSecretNeverInResponses(t *testing.T) {
	a := newAPIApp(t)
	const canary = "sk-canary-5e1f0c9d8b7a6f5e4d3c2b1a"
	const canary2 = "sk-canary-second-00112233445566ff"
	const proxyPass = "proxy-canary-pw"
	var bodies []string
	keep := func(rec *httptest.ResponseRecorder) *httptest.ResponseRecorder {
		bodies = append(bodies, rec.Body.String())
		return rec
	}
	rec := keep(a.admin("POST", "/api/connections", `{"provider":"openai","name":"canary","apiKey":"`+canary+`","proxyUrl":"socks5://u:`+proxyPass+`@203.0.113.10:1080"}`))
	if rec.Code != 201 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body.String())
	}
	id := decodeObject(t, rec)["id"].(string)
	keep(a.admin("GET", "/api/connections/"+id, ""))
	keep(a.admin("GET", "/api/connections", ""))
	keep(a.admin("PATCH", "/api/connections/"+id, `{"name":"canary-renamed"}`))
	rec = keep(a.admin("PATCH", "/api/connections/"+id, `{"apiKey":"`+canary2+`"}`))
	if got := decodeObject(t, rec)["secret"].(map[string]any)["preview"]; got != services.Secret(canary2).Preview() {
		t.Errorf("preview after key change = %v, want %q", got, services.Secret(canary2).Preview())
	}
	keep(a.admin("GET", "/api/connections?provider=openai", ""))
	keep(a.admin("POST", "/api/connections", `{"provider":"openai","name":"canary-renamed","apiKey":"`+canary+`"}`)) // 400 duplicate name
	for i, b := range bodies {
		for _, s := range []string{canary, canary2, canary[8:], canary2[8:], proxyPass} {
			if strings.Contains(b, s) {
				t.Errorf("response %d contains %q: %s", i, s, b)
			}
		}
	}
	got := a.mustJSON(t, "GET", "/api/connections/"+id, "", 200)
	if got["proxyUrl"] != "socks5://u:****@203.0.113.10:1080" {
		t.Errorf("proxyUrl = %v", got["proxyUrl"])
	}
}

// ---- combos ----

func TestAPICombosRoundTrip(t *testing.T) {
	a := newAPIApp(t)
	conn := a.mustJSON(t, "POST", "/api/connections", `{"provider":"openai","name":"team-1","apiKey":"sk-0000000000000000"}`, 201)
	connID := conn["id"].(string)

	rec := a.admin("POST", "/api/combos", `{"name":"fast","description":"cheap first","targets":[
		{"provider":"openai","model":"gpt-4o-mini"},
		{"provider":"openai","model":"gpt-4o","connectionId":"`+connID+`","label":"pinned","weight":3}]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body.String())
	}
	fast := decodeObject(t, rec)
	fastID := fast["id"].(string)
	if !strings.HasPrefix(fastID, "cb_") || rec.Header().Get("Location") != "/api/combos/"+fastID {
		t.Fatalf("id %q Location %q", fastID, rec.Header().Get("Location"))
	}
	if _, has := fast["warnings"]; has {
		t.Errorf("warnings present without any: %v", fast["warnings"])
	}
	for k, v := range map[string]any{"name": "fast", "description": "cheap first", "strategy": "priority", "enabled": true,
		"hidden": false, "order": float64(0), "createdAt": "2026-03-01T10:00:00.000Z", "updatedAt": "2026-03-01T10:00:00.000Z"} {
		if fast[k] != v {
			t.Errorf("%s = %#v, want %#v", k, fast[k], v)
		}
	}
	if cfg, ok := fast["config"].(map[string]any); !ok || len(cfg) != 0 {
		t.Errorf("config = %#v, want {}", fast["config"])
	}
	targets := fast["targets"].([]any)
	t0, t1 := targets[0].(map[string]any), targets[1].(map[string]any)
	if t0["kind"] != "model" || t0["provider"] != "openai" || t0["model"] != "gpt-4o-mini" || t0["weight"] != float64(1) || t0["enabled"] != true || t0["id"] == "" {
		t.Errorf("target 0 = %v", t0)
	}
	wantNull(t, t0, "connectionId", "label")
	if t1["connectionId"] != connID || t1["label"] != "pinned" || t1["weight"] != float64(3) {
		t.Errorf("target 1 = %v", t1)
	}

	// Warnings are returned, not blocking.
	weighted := a.mustJSON(t, "POST", "/api/combos", `{"name":"spread","strategy":"weighted","targets":[{"provider":"openai","model":"gpt-4o","weight":0}]}`, 201)
	if w, _ := weighted["warnings"].([]any); len(w) != 1 || w[0] != "all weights are 0" {
		t.Errorf("warnings = %v", weighted["warnings"])
	}
	if weighted["order"] != float64(1) {
		t.Errorf("second combo order = %v", weighted["order"])
	}

	// A combo target has comboId and no model fields.
	outer := a.mustJSON(t, "POST", "/api/combos", `{"name":"outer","targets":[{"kind":"combo","comboId":"`+fastID+`","label":"backup"}]}`, 201)
	ot := outer["targets"].([]any)[0].(map[string]any)
	if ot["kind"] != "combo" || ot["comboId"] != fastID || ot["label"] != "backup" {
		t.Errorf("combo target = %v", ot)
	}
	for _, k := range []string{"provider", "model", "connectionId"} {
		if _, has := ot[k]; has {
			t.Errorf("combo target has %q: %v", k, ot)
		}
	}

	// GET → edit → PUT round-trips and keeps target ids.
	got := a.mustJSON(t, "GET", "/api/combos/"+fastID, "", 200)
	got["description"] = "replaced"
	got["targets"] = []any{targets[1], targets[0]}
	body, _ := json.Marshal(got)
	a.Clock.Advance(time.Minute)
	put := a.mustJSON(t, "PUT", "/api/combos/"+fastID, string(body), 200)
	pt := put["targets"].([]any)
	if put["description"] != "replaced" || pt[0].(map[string]any)["id"] != t1["id"] || pt[1].(map[string]any)["id"] != t0["id"] ||
		put["updatedAt"] != "2026-03-01T10:01:00.000Z" || put["createdAt"] != "2026-03-01T10:00:00.000Z" {
		t.Errorf("after PUT = %v", put)
	}
	got["id"] = "cb_other"
	body, _ = json.Marshal(got)
	e := wantError(t, a.admin("PUT", "/api/combos/"+fastID, string(body)), 400, "validation_failed")
	if e.Error.Fields["id"] == "" {
		t.Errorf("fields = %v, want id", e.Error.Fields)
	}
	e = wantError(t, a.admin("POST", "/api/combos", `{"id":"cb_mine","name":"mine","targets":[{"provider":"openai","model":"gpt-4o"}]}`), 400, "validation_failed")
	if e.Error.Fields["id"] == "" {
		t.Errorf("fields = %v, want id", e.Error.Fields)
	}
	wantError(t, a.admin("PUT", "/api/combos/cb_missing", `{"name":"x","targets":[{"provider":"openai","model":"gpt-4o"}]}`), 404, "not_found")

	// PATCH the light fields.
	patched := a.mustJSON(t, "PATCH", "/api/combos/"+fastID, `{"enabled":false,"hidden":true,"description":"off"}`, 200)
	if patched["enabled"] != false || patched["hidden"] != true || patched["description"] != "off" || patched["name"] != "fast" {
		t.Errorf("patched = %v", patched)
	}

	// List order and reorder.
	list := itemsOf(t, a.mustJSON(t, "GET", "/api/combos", "", 200))
	spreadID, outerID := weighted["id"].(string), outer["id"].(string)
	if ids := idsOf(list); !slices.Equal(ids, []string{fastID, spreadID, outerID}) {
		t.Fatalf("list order %v", ids)
	}
	newOrder := []string{outerID, fastID, spreadID}
	body, _ = json.Marshal(map[string]any{"ids": newOrder})
	re := a.mustJSON(t, "POST", "/api/combos/reorder", string(body), 200)
	if ids, _ := re["ids"].([]any); len(ids) != 3 || ids[0] != outerID || ids[1] != fastID || ids[2] != spreadID {
		t.Errorf("reorder answered %v", re)
	}
	list = itemsOf(t, a.mustJSON(t, "GET", "/api/combos", "", 200))
	if ids := idsOf(list); !slices.Equal(ids, newOrder) {
		t.Errorf("list after reorder %v, want %v", ids, newOrder)
	}
	before := snapshot(t, a.App)
	for _, bad := range []string{`{"ids":["` + outerID + `","` + fastID + `"]}`, `{"ids":["` + outerID + `","` + fastID + `","` + fastID + `"]}`, `{}`} {
		e := wantError(t, a.admin("POST", "/api/combos/reorder", bad), 400, "validation_failed")
		if e.Error.Fields["ids"] == "" {
			t.Errorf("reorder %s: fields %v", bad, e.Error.Fields)
		}
	}

	// Delete: referenced → 409 unless forced.
	e = wantError(t, a.admin("DELETE", "/api/combos/"+fastID, ""), 409, "conflict")
	if !strings.Contains(e.Error.Message, "outer") {
		t.Errorf("conflict message %q does not name the referencing combo", e.Error.Message)
	}
	wantError(t, a.admin("DELETE", "/api/combos/"+fastID+"?force=perhaps", ""), 400, "validation_failed")
	if snapshot(t, a.App) != before {
		t.Fatal("refused requests changed state")
	}
	if rec := a.admin("DELETE", "/api/combos/"+fastID+"?force=true", ""); rec.Code != 204 {
		t.Fatalf("forced delete: %d %s", rec.Code, rec.Body.String())
	}
	wantError(t, a.admin("GET", "/api/combos/"+fastID, ""), 404, "not_found")
	outer = a.mustJSON(t, "GET", "/api/combos/"+outerID, "", 200)
	if n := len(outer["targets"].([]any)); n != 0 {
		t.Errorf("outer still has %d targets after forced delete", n)
	}
	if rec := a.admin("DELETE", "/api/combos/"+spreadID, ""); rec.Code != 204 {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body.String())
	}
	if ids := idsOf(itemsOf(t, a.mustJSON(t, "GET", "/api/combos", "", 200))); !slices.Equal(ids, []string{outerID}) {
		t.Errorf("list after deletes %v", ids)
	}
}

// ---- keys ----

var keySecretRe = regexp.MustCompile(`^sk-sy-[A-Za-z0-9_-]{43}$`)

func TestAPIKeysRoundTrip(t *testing.T) {
	a := newAPIApp(t)
	rec := a.admin("POST", "/api/keys", `{"name":"agent-a","scopes":["inference"],"allowedModels":["glm/*"],"allowedCombos":[]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body.String())
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	created := decodeObject(t, rec)
	secret, _ := created["secret"].(string)
	key := created["key"].(map[string]any)
	id := key["id"].(string)
	if !keySecretRe.MatchString(secret) || key["prefix"] != secret[:12] || !strings.HasPrefix(id, "k_") {
		t.Fatalf("secret %q, key %v", secret, key)
	}
	if rec.Header().Get("Location") != "/api/keys/"+id {
		t.Errorf("Location %q", rec.Header().Get("Location"))
	}
	for k, v := range map[string]any{"name": "agent-a", "enabled": true, "state": "active", "createdAt": "2026-03-01T10:00:00.000Z"} {
		if key[k] != v {
			t.Errorf("%s = %#v, want %#v", k, key[k], v)
		}
	}
	wantNull(t, key, "allowedConnections", "requestsPerMinute", "maxConcurrentRequests", "expiresAt", "lastUsedAt", "revokedAt")
	if ac, ok := key["allowedCombos"].([]any); !ok || len(ac) != 0 {
		t.Errorf("allowedCombos = %#v, want [] (none), not null (any)", key["allowedCombos"])
	}
	if am, _ := key["allowedModels"].([]any); len(am) != 1 || am[0] != "glm/*" {
		t.Errorf("allowedModels = %v", key["allowedModels"])
	}
	if _, has := key["keyHash"]; has {
		t.Error("key JSON has keyHash")
	}
	hash := services.SHA256Hex(secret)
	noSecret := func(what string, rec *httptest.ResponseRecorder) {
		t.Helper()
		if b := rec.Body.String(); strings.Contains(b, secret) || strings.Contains(b, secret[12:]) || strings.Contains(b, hash) {
			t.Errorf("%s contains the secret or its hash: %s", what, b)
		}
	}

	// GET and list never carry the secret.
	rec = a.admin("GET", "/api/keys/"+id, "")
	noSecret("GET one", rec)
	got := decodeObject(t, rec)
	if got["name"] != "agent-a" || got["prefix"] != secret[:12] {
		t.Errorf("GET one = %v", got)
	}
	if ac, ok := got["allowedCombos"].([]any); !ok || len(ac) != 0 {
		t.Errorf("stored allowedCombos = %#v, want []", got["allowedCombos"])
	}
	wantNull(t, got, "allowedConnections")
	rec = a.admin("GET", "/api/keys", "")
	noSecret("list", rec)
	if ids := idsOf(itemsOf(t, decodeObject(t, rec))); !slices.Equal(ids, []string{id}) {
		t.Errorf("list ids %v", ids)
	}

	// PATCH, and the state filter.
	rec = a.admin("PATCH", "/api/keys/"+id, `{"enabled":false,"requestsPerMinute":30}`)
	noSecret("PATCH", rec)
	if got := decodeObject(t, rec); got["state"] != "disabled" || got["requestsPerMinute"] != float64(30) || got["name"] != "agent-a" {
		t.Errorf("patched = %v", got)
	}
	a.Clock.Advance(time.Second)
	other := a.mustJSON(t, "POST", "/api/keys", `{"name":"agent-b"}`, 201)["key"].(map[string]any)
	for _, tc := range []struct {
		state string
		want  []string
	}{{"", []string{other["id"].(string), id}}, {"all", []string{other["id"].(string), id}}, {"active", []string{other["id"].(string)}},
		{"disabled", []string{id}}, {"revoked", []string{}}, {"expired", []string{}}} {
		if ids := idsOf(itemsOf(t, a.mustJSON(t, "GET", "/api/keys?state="+tc.state, "", 200))); !slices.Equal(ids, tc.want) {
			t.Errorf("state=%s: %v, want %v", tc.state, ids, tc.want)
		}
	}
	e := wantError(t, a.admin("GET", "/api/keys?state=sleeping", ""), 400, "validation_failed")
	if e.Error.Fields["state"] == "" {
		t.Errorf("fields = %v, want state", e.Error.Fields)
	}

	// Delete needs a revoked key; revoke is idempotent.
	before := snapshot(t, a.App)
	wantError(t, a.admin("DELETE", "/api/keys/"+id, ""), 409, "conflict")
	if snapshot(t, a.App) != before {
		t.Fatal("refused delete changed state")
	}
	revoked := a.mustJSON(t, "POST", "/api/keys/"+id+"/revoke", "", 200)
	if revoked["state"] != "revoked" || revoked["revokedAt"] != "2026-03-01T10:00:01.000Z" {
		t.Errorf("revoked = %v", revoked)
	}
	a.Clock.Advance(time.Hour)
	again := a.mustJSON(t, "POST", "/api/keys/"+id+"/revoke", "", 200)
	if again["state"] != "revoked" || again["revokedAt"] != revoked["revokedAt"] {
		t.Errorf("second revoke = %v, want unchanged %v", again, revoked["revokedAt"])
	}
	wantError(t, a.admin("POST", "/api/keys/k_missing/revoke", ""), 404, "not_found")
	if rec := a.admin("DELETE", "/api/keys/"+id, ""); rec.Code != 204 {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body.String())
	}
	wantError(t, a.admin("GET", "/api/keys/"+id, ""), 404, "not_found")
	if ids := idsOf(itemsOf(t, a.mustJSON(t, "GET", "/api/keys", "", 200))); !slices.Equal(ids, []string{other["id"].(string)}) {
		t.Errorf("list after delete %v", ids)
	}
}

// ---- bad input ----

func TestAPIBadInputIsRefusedAndChangesNothing(t *testing.T) {
	a := newAPIApp(t)
	f := newFixture(t, a.App)
	const ok = `"provider":"openai","name":"new","apiKey":"sk-0000000000000000"`
	huge := `{"name":"` + strings.Repeat("x", handlers.MaxAPIBody+1) + `"}`
	tests := []struct {
		name, method, path, contentType, body string
		status                                int
		code                                  string
		fields                                map[string]string // "" = any message
		exact                                 bool              // fields must match exactly
	}{
		{"unknown provider", "POST", "/api/connections", "", `{"provider":"nope","name":"x","apiKey":"sk-0000000000000000"}`, 400, "validation_failed", map[string]string{"provider": ""}, false},
		{"malformed base URL", "POST", "/api/connections", "", `{` + ok + `,"baseUrl":"ftp://x"}`, 400, "validation_failed", map[string]string{"baseUrl": "Use an http:// or https:// URL."}, true},
		{"private base URL for a non-local provider", "POST", "/api/connections", "", `{` + ok + `,"baseUrl":"http://10.0.0.5/v1"}`, 400, "validation_failed", map[string]string{"baseUrl": ""}, true},
		{"private base URL on edit", "PATCH", "/api/connections/" + f.conn, "", `{"baseUrl":"http://10.0.0.5/v1"}`, 400, "validation_failed", map[string]string{"baseUrl": ""}, true},
		{"missing api key", "POST", "/api/connections", "", `{"provider":"openai","name":"x"}`, 400, "validation_failed", map[string]string{"apiKey": ""}, true},
		{"duplicate connection name", "POST", "/api/connections", "", `{"provider":"openai","name":"team-1","apiKey":"sk-0000000000000000"}`, 400, "validation_failed", map[string]string{"name": ""}, true},
		{"negative maxConcurrent", "POST", "/api/connections", "", `{` + ok + `,"maxConcurrent":-1}`, 400, "validation_failed", map[string]string{"maxConcurrent": ""}, true},
		{"negative maxConcurrent on edit", "PATCH", "/api/connections/" + f.conn, "", `{"maxConcurrent":-1,"name":"changed"}`, 400, "validation_failed", map[string]string{"maxConcurrent": ""}, true},
		{"override out of range", "PATCH", "/api/connections/" + f.conn, "", `{"rateLimitOverrides":{"maxWaitMs":45000}}`, 400, "validation_failed", map[string]string{"rateLimitOverrides.maxWaitMs": "must be between 1 and 30000"}, true},
		{"unknown field", "POST", "/api/connections", "", `{` + ok + `,"maxConcurent":2}`, 400, "validation_failed", map[string]string{"maxConcurent": "unknown field"}, true},
		{"unknown field on edit", "PATCH", "/api/connections/" + f.conn, "", `{"maxConcurent":2}`, 400, "validation_failed", map[string]string{"maxConcurent": "unknown field"}, true},
		{"provider is immutable", "PATCH", "/api/connections/" + f.conn, "", `{"provider":"anthropic"}`, 400, "validation_failed", map[string]string{"provider": ""}, true},
		{"wrong type", "PATCH", "/api/connections/" + f.conn, "", `{"priority":"high"}`, 400, "validation_failed", map[string]string{"priority": "must be a whole number"}, true},
		{"wrong type on create", "POST", "/api/connections", "", `{` + ok + `,"enabled":"yes"}`, 400, "validation_failed", map[string]string{"enabled": "must be true or false"}, true},
		{"not JSON", "POST", "/api/connections", "text/plain", `{` + ok + `}`, 415, "unsupported_media_type", nil, false},
		{"no content type", "PATCH", "/api/connections/" + f.conn, "-", `{"name":"x"}`, 415, "unsupported_media_type", nil, false},
		{"form body", "POST", "/api/keys", "application/x-www-form-urlencoded", `name=x`, 415, "unsupported_media_type", nil, false},
		{"body over 1 MiB", "POST", "/api/connections", "", huge, 413, "payload_too_large", nil, false},
		{"body over 1 MiB on combos", "POST", "/api/combos", "", huge, 413, "payload_too_large", nil, false},
		{"unparsable JSON", "POST", "/api/connections", "", `{"provider":`, 400, "invalid_json", nil, false},
		{"JSON array", "POST", "/api/keys", "", `[1,2]`, 400, "invalid_json", nil, false},
		{"duplicate combo name", "POST", "/api/combos", "", `{"name":"FAST","targets":[{"provider":"openai","model":"gpt-4o"}]}`, 400, "validation_failed", map[string]string{"name": ""}, true},
		{"duplicate combo name on patch", "PATCH", "/api/combos/" + f.combo2, "", `{"name":"fast"}`, 400, "validation_failed", map[string]string{"name": ""}, true},
		{"combo without targets", "POST", "/api/combos", "", `{"name":"empty","targets":[]}`, 400, "validation_failed", map[string]string{"targets": ""}, true},
		{"combo weight out of range", "PUT", "/api/combos/" + f.combo, "", `{"name":"fast","targets":[{"provider":"openai","model":"a"},{"provider":"openai","model":"b","weight":101}]}`, 400, "validation_failed", map[string]string{"targets.1.weight": ""}, true},
		{"combo unknown config key", "POST", "/api/combos", "", `{"name":"cfg","targets":[{"provider":"openai","model":"a"}],"config":{"maxRetry":2}}`, 400, "validation_failed", map[string]string{"config.maxRetry": "unknown field"}, true},
		{"combo unknown field", "PATCH", "/api/combos/" + f.combo, "", `{"strategy":"random"}`, 400, "validation_failed", map[string]string{"strategy": "unknown field"}, true},
		{"combo pinned to a missing connection", "POST", "/api/combos", "", `{"name":"pin","targets":[{"provider":"openai","model":"a","connectionId":"c_gone"}]}`, 400, "validation_failed", map[string]string{"targets.0.connectionId": ""}, true},
		{"key unknown scope", "POST", "/api/keys", "", `{"name":"k","scopes":["admin"]}`, 400, "validation_failed", map[string]string{"scopes": ""}, true},
		{"key scopes wrong type", "POST", "/api/keys", "", `{"name":"k","scopes":"manage"}`, 400, "validation_failed", map[string]string{"scopes": "must be an array"}, true},
		{"lease key without connections", "POST", "/api/keys", "", `{"name":"k","scopes":["lease:exclusive"]}`, 400, "validation_failed",
			map[string]string{"allowedConnections": "a key with lease:exclusive needs at least one allowed connection"}, true},
		{"key expiry in the past", "PATCH", "/api/keys/" + f.key, "", `{"expiresAt":"2020-01-01T00:00:00Z"}`, 400, "validation_failed", map[string]string{"expiresAt": ""}, true},
		{"key negative limit", "PATCH", "/api/keys/" + f.key, "", `{"requestsPerMinute":-5}`, 400, "validation_failed", map[string]string{"requestsPerMinute": ""}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, a.App)
			h := []string{"Sec-Fetch-Site", "same-origin"}
			switch tc.contentType {
			case "":
				h = append(h, "Content-Type", "application/json")
			case "-":
			default:
				h = append(h, "Content-Type", tc.contentType)
			}
			req := testkit.Request(tc.method, tc.path, tc.body, h...)
			req.AddCookie(a.cookie)
			e := wantError(t, a.Do(req), tc.status, tc.code)
			for k, msg := range tc.fields {
				got, has := e.Error.Fields[k]
				if !has || (msg != "" && got != msg) {
					t.Errorf("fields[%q] = %q (present %v), want %q; all: %v", k, got, has, msg, e.Error.Fields)
				}
			}
			if tc.exact && len(e.Error.Fields) != len(tc.fields) {
				t.Errorf("fields = %v, want only %v", e.Error.Fields, slices.Collect(maps.Keys(tc.fields)))
			}
			if tc.fields == nil && e.Error.Fields != nil {
				t.Errorf("unexpected fields %v", e.Error.Fields)
			}
			if after := snapshot(t, a.App); after != before {
				t.Errorf("refused request changed state:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// Counts through the API itself are unchanged too.
	for path, want := range map[string]int{"/api/connections": 3, "/api/combos": 3, "/api/keys": 1} {
		if n := len(itemsOf(t, a.mustJSON(t, "GET", path, "", 200))); n != want {
			t.Errorf("%s has %d items, want %d", path, n, want)
		}
	}
}

// ---- audit ----

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// auditLines returns the decoded "audit" records logged so far.
func (b *syncBuffer) auditLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "audit" {
			out = append(out, m)
		}
	}
	return out
}

// newLoggedApp is testkit.NewApp with the server's log captured.
func newLoggedApp(t *testing.T) (*apiApp, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{"SWITCHYARD_ADMIN_PASSWORD": testkit.AdminPassword, "SWITCHYARD_DATA_DIR": dir, "SWITCHYARD_PUBLIC_HOSTS": testkit.TestHost}
	cfg, err := app.LoadConfig([]string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	clock := testkit.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	srv, err := app.Build(context.Background(), cfg, app.Options{Clock: clock, Argon2: &testkit.CheapArgon2,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	a := &testkit.App{T: t, Server: srv, Clock: clock, DataDir: dir}
	return &apiApp{App: a, cookie: a.Login()}, logs
}

func TestAPIMutationsWriteOneAuditLineEach(t *testing.T) {
	a, logs := newLoggedApp(t)
	const canary = "sk-audit-canary-0123456789abcdef"
	manageKey, manageSecret := a.NewKey("ops", services.ScopeManage)

	var connID, comboID, keyID, keySecret string
	steps := []struct {
		name      string
		do        func() *httptest.ResponseRecorder
		status    int
		action    string // "" = no audit line expected
		byKey     bool
		idFromRes func(map[string]any) string
	}{
		{"list is not audited", func() *httptest.ResponseRecorder { return a.admin("GET", "/api/connections", "") }, 200, "", false, nil},
		{"create connection", func() *httptest.ResponseRecorder {
			return a.admin("POST", "/api/connections", `{"provider":"openai","name":"audited","apiKey":"`+canary+`"}`)
		}, 201, "connection.create", false, func(m map[string]any) string { connID = m["id"].(string); return connID }},
		{"refused create is not audited", func() *httptest.ResponseRecorder {
			return a.admin("POST", "/api/connections", `{"provider":"openai","name":"audited","apiKey":"`+canary+`"}`)
		}, 400, "", false, nil},
		{"update connection by key", func() *httptest.ResponseRecorder {
			return a.bearer(manageSecret, "PATCH", "/api/connections/"+connID, `{"apiKey":"`+canary+`-2"}`)
		}, 200, "connection.update", true, func(map[string]any) string { return connID }},
		{"create combo", func() *httptest.ResponseRecorder {
			return a.admin("POST", "/api/combos", `{"name":"audit-combo","targets":[{"provider":"openai","model":"gpt-4o"}]}`)
		}, 201, "combo.create", false, func(m map[string]any) string { comboID = m["id"].(string); return comboID }},
		{"replace combo", func() *httptest.ResponseRecorder {
			return a.admin("PUT", "/api/combos/"+comboID, `{"name":"audit-combo","targets":[{"provider":"openai","model":"gpt-4o-mini"}]}`)
		}, 200, "combo.replace", false, func(map[string]any) string { return comboID }},
		{"patch combo", func() *httptest.ResponseRecorder {
			return a.admin("PATCH", "/api/combos/"+comboID, `{"hidden":true}`)
		}, 200, "combo.update", false, func(map[string]any) string { return comboID }},
		{"reorder combos", func() *httptest.ResponseRecorder {
			return a.admin("POST", "/api/combos/reorder", `{"ids":["`+comboID+`"]}`)
		}, 200, "combo.reorder", false, nil},
		{"delete combo", func() *httptest.ResponseRecorder { return a.admin("DELETE", "/api/combos/"+comboID, "") }, 204, "combo.delete", false,
			func(map[string]any) string { return comboID }},
		{"create key", func() *httptest.ResponseRecorder { return a.admin("POST", "/api/keys", `{"name":"audited-key"}`) }, 201, "key.create", false,
			func(m map[string]any) string {
				keySecret = m["secret"].(string)
				keyID = m["key"].(map[string]any)["id"].(string)
				return keyID
			}},
		{"update key", func() *httptest.ResponseRecorder { return a.admin("PATCH", "/api/keys/"+keyID, `{"enabled":false}`) }, 200, "key.update", false,
			func(map[string]any) string { return keyID }},
		{"revoke key", func() *httptest.ResponseRecorder { return a.admin("POST", "/api/keys/"+keyID+"/revoke", "") }, 200, "key.revoke", false,
			func(map[string]any) string { return keyID }},
		{"delete key", func() *httptest.ResponseRecorder { return a.admin("DELETE", "/api/keys/"+keyID, "") }, 204, "key.delete", false,
			func(map[string]any) string { return keyID }},
		{"delete connection", func() *httptest.ResponseRecorder { return a.admin("DELETE", "/api/connections/"+connID, "") }, 204, "connection.delete", false,
			func(map[string]any) string { return connID }},
	}
	for _, st := range steps {
		n := len(logs.auditLines(t))
		rec := st.do()
		if rec.Code != st.status {
			t.Fatalf("%s: status %d, want %d: %s", st.name, rec.Code, st.status, rec.Body.String())
		}
		lines := logs.auditLines(t)
		if st.action == "" {
			if len(lines) != n {
				t.Errorf("%s: wrote %d audit lines, want none", st.name, len(lines)-n)
			}
			continue
		}
		if len(lines) != n+1 {
			t.Fatalf("%s: wrote %d audit lines, want 1", st.name, len(lines)-n)
		}
		line := lines[n]
		wantActor := "admin:"
		if st.byKey {
			wantActor = "key:" + manageKey.ID
		}
		actor, _ := line["actor"].(string)
		if line["action"] != st.action || !strings.HasPrefix(actor, wantActor) || (!st.byKey && len(actor) <= len(wantActor)) {
			t.Errorf("%s: audit line %v, want action %s by %s…", st.name, line, st.action, wantActor)
		}
		if st.idFromRes != nil {
			var body map[string]any
			if rec.Code != http.StatusNoContent {
				body = decodeObject(t, rec)
			}
			if id := st.idFromRes(body); line["id"] != id {
				t.Errorf("%s: audit id %v, want %s", st.name, line["id"], id)
			}
		}
	}
	all := logs.String()
	for _, s := range []string{canary, manageSecret, keySecret, a.cookie.Value} {
		if s != "" && strings.Contains(all, s) {
			t.Errorf("the log contains a secret (%.12s…)", s)
		}
	}
}
