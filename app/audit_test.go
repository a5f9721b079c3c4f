package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services"
)

// waitAudit polls (bounded) until the audit writer has written n entries
// and returns them through GET /api/audit, newest first.
func waitAudit(t *testing.T, a *apiApp, n int) []map[string]any {
	t.Helper()
	if !testkit.PollUntil(5*time.Second, func() bool { return a.Server.AuditLogStats().Written >= int64(n) }) {
		t.Fatalf("the audit log holds %d entries, want %d", a.Server.AuditLogStats().Written, n)
	}
	return itemsOf(t, a.mustJSON(t, "GET", "/api/audit?limit=500", "", 200))
}

// Every successful admin mutation, through /api or the dashboard, lands in
// the audit log with who, when, from where, what and the settings it
// changed (before and after, secrets never), written in batches; reads,
// refused requests and dry runs are not recorded; GET /api/audit filters it.
func TestAuditLogRecordsAdminActions(t *testing.T) {
	a := newAPIApp(t)
	const canary = "sk-audit-canary-0123456789abcdef"
	manageKey, manageSecret := a.NewKey("ops", services.ScopeManage)
	a.Clock.Advance(time.Minute)

	// By the admin session: a settings change (two fields), a read and a refused PATCH.
	a.mustJSON(t, "PATCH", "/api/resilience", `{"modelLockout":{"enabled":true,"baseCooldownMs":60000}}`, 200)
	a.mustJSON(t, "GET", "/api/resilience", "", 200)
	wantError(t, a.admin("PATCH", "/api/resilience", `{"requestQueue":{"maxWaitMs":45000}}`), http.StatusBadRequest, "validation_failed")
	a.mustJSON(t, "POST", "/api/resilience/classify", `{"provider":"openai","status":429}`, 200)
	a.Clock.Advance(time.Second)
	// By a manage key, from another address: a create with a secret, an edit of it.
	req := testkit.Request("POST", "/api/connections", `{"provider":"openai","name":"audited","apiKey":"`+canary+`"}`,
		"Authorization", "Bearer "+manageSecret, "Content-Type", "application/json", "User-Agent", "ops-script/1.0")
	req.RemoteAddr = "10.1.2.3:5555"
	rec := a.Do(req)
	if rec.Code != 201 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body.String())
	}
	connID := decodeObject(t, rec)["id"].(string)
	a.Clock.Advance(time.Second)
	if rec := a.bearer(manageSecret, "PATCH", "/api/connections/"+connID, `{"apiKey":"`+canary+`-2","priority":5}`); rec.Code != 200 {
		t.Fatalf("update: %d", rec.Code)
	}
	a.Clock.Advance(time.Second)
	// A price override through the general document.
	a.mustJSON(t, "PATCH", "/api/settings", `{"pricing":{"models":{"openai/gpt-4o":{"inputPerMTok":2,"outputPerMTok":8}}}}`, 200)
	a.Clock.Advance(time.Second)
	// A dashboard action with the same session.
	d := &dashClient{t: t, app: a.App, cookie: a.cookie}
	d.do("PUT", "/settings/flags/providerCooldown", url.Values{"value": {"on"}}, true, http.StatusOK)

	items := waitAudit(t, a, 5)
	if len(items) != 5 {
		t.Fatalf("%d entries: %v", len(items), items)
	}
	flag, price, update, create, settings := items[0], items[1], items[2], items[3], items[4]

	actor := settings["actor"].(map[string]any)
	if actor["kind"] != "session" || len(actor["id"].(string)) != 12 || actor["actor"] != "admin:"+actor["id"].(string) || actor["name"] != nil {
		t.Errorf("session actor %v", actor)
	}
	if settings["method"] != "PATCH" || settings["route"] != "/api/resilience" || settings["action"] != "settings.resilience.update" ||
		settings["status"] != 200.0 || settings["clientIp"] != "127.0.0.1" || settings["time"] != "2026-03-01T10:01:00.000Z" {
		t.Errorf("settings entry %v", settings)
	}
	if b, _ := json.Marshal(settings["changes"]); string(b) != `[{"after":60000,"before":120000,"path":"modelLockout.baseCooldownMs"},{"after":true,"before":false,"path":"modelLockout.enabled"}]` {
		t.Errorf("changes %s", b)
	}
	actor = create["actor"].(map[string]any)
	if actor["kind"] != "key" || actor["id"] != manageKey.ID || actor["name"] != "ops" || actor["prefix"] != manageKey.Prefix ||
		actor["actor"] != "key:"+manageKey.ID {
		t.Errorf("key actor %v", actor)
	}
	if create["route"] != "/api/connections" || create["targetId"] != connID || create["action"] != "connection.create" ||
		create["clientIp"] != "10.1.2.3" || create["userAgent"] != "ops-script/1.0" || create["status"] != 201.0 {
		t.Errorf("create entry %v", create)
	}
	if update["route"] != "/api/connections/:id" || update["path"] != "/api/connections/"+connID || update["targetId"] != connID {
		t.Errorf("update entry %v", update)
	}
	if b, _ := json.Marshal(price["changes"]); !strings.Contains(string(b), `"path":"pricing.models.openai/gpt-4o.inputPerMTok"`) {
		t.Errorf("price changes %s", b)
	}
	if flag["route"] != "/settings/flags/:key" || flag["targetId"] != "providerCooldown" || flag["actor"].(map[string]any)["kind"] != "session" {
		t.Errorf("dashboard entry %v", flag)
	}
	if b, _ := json.Marshal(flag["changes"]); string(b) != `[{"after":true,"before":false,"path":"providerCooldown.enabled"}]` {
		t.Errorf("flag changes %s", b)
	}
	all := a.mustJSON(t, "GET", "/api/audit?limit=500", "", 200)
	raw, _ := json.Marshal(all)
	for _, s := range []string{canary, manageSecret, a.cookie.Value} {
		if strings.Contains(string(raw), s) {
			t.Errorf("the audit log holds a secret (%.12s…)", s)
		}
	}

	ids := func(query string) string {
		t.Helper()
		var out []string
		for _, it := range itemsOf(t, a.mustJSON(t, "GET", "/api/audit?"+query, "", 200)) {
			out = append(out, it["route"].(string))
		}
		return strings.Join(out, " ")
	}
	for query, want := range map[string]string{
		"actorKind=key":                         "/api/connections/:id /api/connections",
		"actorId=" + manageKey.ID:               "/api/connections/:id /api/connections",
		"route=%2Fapi%2Fconnections":            "/api/connections/:id /api/connections",
		"targetId=" + connID:                    "/api/connections/:id /api/connections",
		"method=patch":                          "/api/settings /api/connections/:id /api/resilience",
		"route=%2Fsettings":                     "/settings/flags/:key",
		"since=2026-03-01T10:01:01Z":            "/settings/flags/:key /api/settings /api/connections/:id /api/connections",
		"until=2026-03-01T10:01:01Z":            "/api/resilience",
		"limit=2&actorKind=session":             "/settings/flags/:key /api/settings",
		"actorId=" + actor["id"].(string) + "x": "",
	} {
		if got := ids(query); got != want {
			t.Errorf("?%s: %q, want %q", query, got, want)
		}
	}
	for query, field := range map[string]string{"actorKind=robot": "actorKind", "method=GET": "method", "since=soon": "since", "limit=501": "limit"} {
		e := wantError(t, a.admin("GET", "/api/audit?"+query, ""), http.StatusBadRequest, "validation_failed")
		if _, ok := e.Error.Fields[field]; !ok {
			t.Errorf("?%s: fields %v", query, e.Error.Fields)
		}
	}
}

// Audit entries are pruned with the request log, after logging.retentionDays.
func TestAuditLogRetention(t *testing.T) {
	a := newAPIApp(t)
	a.mustJSON(t, "PATCH", "/api/settings", `{"logging":{"retentionDays":2}}`, 200)
	waitAudit(t, a, 1)
	if err := a.Server.RequestLogs().WriteRequestLogs(context.Background(), []services.RequestLogEntry{
		{ID: "req_old", CreatedAt: a.Clock.Now(), Endpoint: "/v1/chat/completions", Outcome: "success"}}); err != nil {
		t.Fatal(err)
	}
	a.Clock.Advance(47 * time.Hour)
	if r, n, err := a.Server.PurgeOldLogs(context.Background()); err != nil || r != 0 || n != 0 {
		t.Fatalf("before the retention: %d requests, %d audit entries, %v", r, n, err)
	}
	a.Clock.Advance(2 * time.Hour)
	if r, n, err := a.Server.PurgeOldLogs(context.Background()); err != nil || r != 1 || n != 1 {
		t.Fatalf("after the retention: %d requests, %d audit entries, %v", r, n, err)
	}
	a.cookie = a.Login() // the session idled out meanwhile
	if items := itemsOf(t, a.mustJSON(t, "GET", "/api/audit", "", 200)); len(items) != 0 {
		t.Fatalf("entries left %v", items)
	}
	if _, err := a.Server.RequestLogs().FindRequestLog(context.Background(), "req_old"); err == nil {
		t.Fatal("the old request log row is still there")
	}
}
