package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/views"
)

// A successful emergency fallback says so in X-Switchyard-Warning as well
// as in its own header, and the log's warnings; a failed one sends
// neither, but the log marks it and the emergency_fallback filter finds it.
func TestEmergencyFallbackWarningAndFailedFallbackInTheLog(t *testing.T) {
	f := twoProviders(t)
	a := operatorAdmin(t, f)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503, Times: 100})
	a.mustJSON(t, "PATCH", "/api/resilience", `{"emergencyFallback":{"enabled":true,"target":"fakeb/m2"}}`, 200)

	served, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	if served.StatusCode != 200 || served.Header.Get("X-Switchyard-Emergency-Fallback") != "from=fake/m1; to=fakeb/m2" ||
		served.Header.Get("X-Switchyard-Warning") != "emergency_fallback" {
		t.Fatalf("served by the fallback: %d %v", served.StatusCode, served.Header)
	}
	// Now the fallback fails too.
	f.app.Server.Resilience().Cooldowns.ClearCooldowns(t.Context(), nil)
	f.fu.Script("fk-b", fakeupstream.Step{Status: 503, Times: 100})
	failed, _ := postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"fake/m1","messages":[{"role":"user","content":"again"}]}`)
	if failed.StatusCode < 500 || failed.Header.Get("X-Switchyard-Emergency-Fallback") != "" || strings.Contains(failed.Header.Get("X-Switchyard-Warning"), "emergency_fallback") {
		t.Fatalf("failed fallback: %d %v", failed.StatusCode, failed.Header)
	}
	// A plain failure without the fallback, for the filter.
	a.mustJSON(t, "PATCH", "/api/resilience", `{"emergencyFallback":{"enabled":false}}`, 200)
	f.app.Server.Resilience().Cooldowns.ClearCooldowns(t.Context(), nil)
	plain, _ := postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"fake/m1","messages":[{"role":"user","content":"third"}]}`)
	waitLogs(t, f, 3)

	servedID, failedID := served.Header.Get("X-Switchyard-Request-Id"), failed.Header.Get("X-Switchyard-Request-Id")
	rows := itemsOf(t, a.mustJSON(t, "GET", "/api/logs?outcome=emergency_fallback", "", 200))
	if len(rows) != 2 || rows[0]["id"] != failedID || rows[1]["id"] != servedID {
		t.Fatalf("emergency_fallback filter: %v", idsOf(rows))
	}
	if r := rows[1]; r["outcome"] != "emergency_fallback" || r["emergencyFallback"] != true || !strings.Contains(strings.Join(toStrings(r["warnings"]), ","), "emergency_fallback") {
		t.Errorf("served row %v", r)
	}
	if r := rows[0]; r["outcome"] != "upstream_error" || r["emergencyFallback"] != true || strings.Contains(strings.Join(toStrings(r["warnings"]), ","), "emergency_fallback") {
		t.Errorf("failed row %v", r)
	}
	if r := a.mustJSON(t, "GET", "/api/logs/"+plain.Header.Get("X-Switchyard-Request-Id"), "", 200); r["emergencyFallback"] != false {
		t.Errorf("plain failure %v", r)
	}
	// The Request logs page marks the failed fallback.
	d := &dashClient{t: t, app: f.app, cookie: a.cookie}
	doc := dashCheckHTML(t, d.do("GET", "/logs?outcome=emergency_fallback", nil, false, http.StatusOK))
	if doc.Find(dashTID(views.RowID(views.RowLogFallbackFailed, failedID))).Length() != 1 ||
		doc.Find(dashTID(views.RowID(views.RowLogFallbackFailed, servedID))).Length() != 0 {
		t.Error("the failed fallback is not marked in the log table")
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// "View logs" from a failing target lists the requests of the connection
// that failed, also those another connection finally served, on the page
// as through the API.
func TestViewLogsOfAFailingTargetListsItsFailedAttempts(t *testing.T) {
	f := newGW(t, "fk-bad", "fk-good")
	a := operatorAdmin(t, f)
	f.fu.Script("fk-bad", fakeupstream.Step{Status: 503, ErrorMessage: "down", Times: 100})
	// The first request fails on fk-bad and fk-good serves it; the second
	// goes to fk-good alone.
	failover := chatModel(t, f, "fake/m1")
	direct := chatModel(t, f, "fake/m1")
	if failover.StatusCode != 200 || direct.StatusCode != 200 || failover.Header.Get("X-Switchyard-Fallback-Attempts") == direct.Header.Get("X-Switchyard-Fallback-Attempts") {
		t.Fatalf("chats: %d %d", failover.StatusCode, direct.StatusCode)
	}
	waitLogs(t, f, 2)
	d := &dashClient{t: t, app: f.app, cookie: a.cookie}
	overview := dashCheckHTML(t, d.do("GET", "/overview/stats?window=1h", nil, true, http.StatusOK))
	row := dashFind(t, overview, dashTID(views.RowID(views.RowFailing, "1")))
	href := row.Find("a").AttrOr("href", "")
	if !strings.Contains(href, "connectionId="+f.conns["fk-bad"].ID) {
		t.Fatalf("View logs of the failing target: %q", href)
	}
	logs := dashCheckHTML(t, d.do("GET", href, nil, false, http.StatusOK))
	rows := logs.Find(dashTID(views.LogsListID) + " tbody > tr")
	if rows.Length() != 1 || rows.AttrOr("data-testid", "") != views.RowID(views.RowLog, failover.Header.Get("X-Switchyard-Request-Id")) {
		t.Fatalf("the failing connection's log lists %d requests, want the one it failed (served by fk-good)", rows.Length())
	}
	// The serving connection lists both.
	good := dashCheckHTML(t, d.do("GET", "/logs?connectionId="+f.conns["fk-good"].ID, nil, false, http.StatusOK))
	if n := good.Find(dashTID(views.LogsListID) + " tbody > tr").Length(); n != 2 {
		t.Fatalf("the serving connection's log lists %d requests, want 2", n)
	}
}

// Every attempted connection's last use is recorded (not only the one that
// served), and so is a manage key's use of the management API; both reach
// their rows in the background.
func TestLastUseOfAttemptedConnectionsAndManageKeys(t *testing.T) {
	f := newGW(t, "fk-bad", "fk-good")
	f.fu.Script("fk-bad", fakeupstream.Step{Status: 503, Times: 100})
	if resp := chatModel(t, f, "fake/m1"); resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	want := f.app.Clock.Now().Truncate(time.Millisecond)
	bad := f.conns["fk-bad"].ID
	if !testkit.PollUntil(5*time.Second, func() bool {
		c, err := f.app.Server.Connections().Get(context.Background(), bad)
		return err == nil && c.LastUsedAt != nil
	}) {
		t.Fatal("the connection that failed has no last use")
	}
	if c, _ := f.app.Server.Connections().Get(context.Background(), bad); !c.LastUsedAt.Equal(want) {
		t.Fatalf("failed connection last used %v, want %v", c.LastUsedAt, want)
	}

	k, secret := f.app.NewKey("ops", services.ScopeManage)
	f.app.Clock.Advance(time.Minute)
	a := &apiApp{App: f.app}
	if rec := a.bearer(secret, "GET", "/api/connections", ""); rec.Code != 200 {
		t.Fatalf("manage call: %d", rec.Code)
	}
	f.app.Server.Keys().WaitTouches()
	got, err := f.app.Server.Keys().Get(context.Background(), k.ID)
	if err != nil || got.LastUsedAt == nil || !got.LastUsedAt.Equal(f.app.Clock.Now().UTC()) {
		t.Fatalf("manage key last used %v (%v)", got.LastUsedAt, err)
	}
	// The key page shows it.
	d := &dashClient{t: t, app: f.app, cookie: f.app.Login()}
	page := d.do("GET", "/keys", nil, false, http.StatusOK).Body.String()
	if i := strings.Index(page, "ops"); i < 0 || !strings.Contains(page[i:], "just now") {
		t.Error("the keys page does not show the manage key's last use")
	}
}
