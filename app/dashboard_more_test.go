package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/views"
)

// The dashboard controls that go through the gateway (50-dashboard §6.3–§6.5):
// the connection Test button, combo readiness dots, Preview routing, the
// combo Test button with its API twin POST /api/combos/{id}/test, the
// Overview traffic and resilience tiles, and the settings and flag forms
// that disable their buttons while a save runs.

// moreDemoCombo creates combo "demo": fake/model-x on any connection, then
// fake/model-y pinned to the connection of key pin.
func moreDemoCombo(t *testing.T, f *gwFixture, pin string) services.Combo {
	t.Helper()
	id := f.conns[pin].ID
	cb, _, err := f.app.Server.Combos().Create(context.Background(), services.ComboInput{Name: "demo", Strategy: "priority",
		Targets: []services.Target{{Provider: "fake", Model: "model-x"}, {Provider: "fake", Model: "model-y", ConnectionID: &id}}})
	if err != nil {
		t.Fatal(err)
	}
	return cb
}

// moreCool puts the connection of key k into a 30 s cooldown with real
// traffic: k answers 429 Retry-After 30, the request fails over.
func moreCool(t *testing.T, f *gwFixture, k string) {
	t.Helper()
	f.fu.Script(k, fakeupstream.Step{Status: 429, RetryAfter: "30", ErrorMessage: "Slow down"})
	if resp := rtChat(t, f, "warm"); resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	if _, cooling := f.app.Server.Resilience().Cooldowns.Cooling(f.conns[k].ID); !cooling {
		t.Fatalf("%s is not cooling", k)
	}
}

// moreNoSession checks that a route needs the admin session: 303 to the
// login page for a plain request, 401 with HX-Redirect for htmx.
func moreNoSession(t *testing.T, d *dashClient, method, path string) {
	t.Helper()
	anon := &dashClient{t: t, app: d.app}
	rec := anon.do(method, path, nil, false, http.StatusSeeOther)
	if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/login?next=") {
		t.Errorf("%s %s without a session: Location %q", method, path, loc)
	}
	rec = anon.do(method, path, nil, true, http.StatusUnauthorized)
	if hx := rec.Header().Get("HX-Redirect"); !strings.HasPrefix(hx, "/login?next=") {
		t.Errorf("%s %s without a session: HX-Redirect %q", method, path, hx)
	}
}

// moreCrossSite checks that a mutation from another site is refused.
func moreCrossSite(t *testing.T, d *dashClient, method, path string) {
	t.Helper()
	req := d.req(method, path, url.Values{}, true)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if rec := d.send(req); rec.Code != http.StatusForbidden {
		t.Errorf("%s %s cross-site: status %d, want 403", method, path, rec.Code)
	}
}

// moreCells is the text of each cell of a table row, joined by " | ".
func moreCells(row *goquery.Selection) string {
	var cells []string
	row.Find("td, th").Each(func(_ int, c *goquery.Selection) { cells = append(cells, rtText(c)) })
	return strings.Join(cells, " | ")
}

// moreDisabledElt checks that the hx-disabled-elt of el names, by id,
// buttons that exist in doc.
func moreDisabledElt(t *testing.T, doc *goquery.Document, el *goquery.Selection) {
	t.Helper()
	sel := el.AttrOr("hx-disabled-elt", "")
	if sel == "" || strings.Contains(sel, "find ") || strings.Contains(sel, "closest ") {
		t.Errorf("hx-disabled-elt %q: want the buttons by id", sel)
		return
	}
	for _, part := range strings.Split(sel, ",") {
		part = strings.TrimSpace(part)
		if !strings.HasPrefix(part, "#") || doc.Find("button"+part).Length() != 1 {
			t.Errorf("hx-disabled-elt %q: %q is not one button", sel, part)
		}
	}
}

func TestDashboardConnectionTestButton(t *testing.T) {
	f := newGW(t, "fk-a")
	d := rtDash(t, f)
	conn := f.conns["fk-a"]
	path := "/connections/" + conn.ID + "/test"

	full, _ := d.page("/connections", views.RowID(views.RowConnTest, conn.ID), views.RowID(views.RowConnTestButton, conn.ID))
	form := dashFind(t, full, dashTID(views.RowID(views.RowConnTest, conn.ID))+" form")
	if form.AttrOr("hx-post", "") != path || form.AttrOr("action", "") != path || form.AttrOr("hx-target", "") != "#"+views.RowID(views.RowConnTest, conn.ID) {
		t.Errorf("test form %v", form.Nodes[0].Attr)
	}
	moreDisabledElt(t, full, form)

	// A healthy test: the cell comes back with the result line and the stored test.
	rec := d.do("POST", path, nil, true, http.StatusOK)
	doc := dashCheckHTML(t, rec)
	cell := dashFind(t, doc, "td#"+views.RowID(views.RowConnTest, conn.ID))
	res := dashFind(t, doc, dashTID(views.RowID(views.RowConnTestResult, conn.ID)))
	if txt := rtText(res); !strings.HasPrefix(txt, "OK · ") || !strings.Contains(txt, " ms · ") || !strings.HasSuffix(txt, "models") {
		t.Errorf("result %q", txt)
	}
	if res.AttrOr("role", "") != "status" || !res.HasClass("test-result--ok") {
		t.Errorf("result attributes %v", res.Nodes[0].Attr)
	}
	if !strings.Contains(rtText(cell), "tested just now") {
		t.Errorf("cell %q", rtText(cell))
	}
	dashFind(t, doc, dashTID(views.RowID(views.RowConnTestButton, conn.ID)))

	// A rejected key: the reason in the row, the test stored, no resilience state touched.
	f.fu.Script("fk-a", fakeupstream.Step{Status: 401, ErrorMessage: "bad key"})
	before := f.app.Server.Resilience().Cooldowns.State(conn.ID)
	doc = dashCheckHTML(t, d.do("POST", path, nil, true, http.StatusOK))
	res = dashFind(t, doc, dashTID(views.RowID(views.RowConnTestResult, conn.ID)))
	if txt := rtText(res); !strings.HasPrefix(txt, "401 Unauthorized — check the API key · ") || !res.HasClass("test-result--fail") {
		t.Errorf("failed result %q", txt)
	}
	if after := f.app.Server.Resilience().Cooldowns.State(conn.ID); after.AuthFailCount != before.AuthFailCount || after.RateLimitedUntil != nil || after.TerminalStatus != "" {
		t.Errorf("the test changed resilience state: %+v", after)
	}
	got, _ := f.app.Server.Connections().Get(context.Background(), conn.ID)
	if got.LastTest == nil || got.LastTest.OK || got.LastTest.Status != 401 {
		t.Errorf("lastTest %+v", got.LastTest)
	}

	// Without script the form posts and the page comes back with the result in the row.
	rec = d.do("POST", path, nil, false, http.StatusOK)
	doc = dashCheckHTML(t, rec)
	if doc.Find("main#content").Length() != 1 {
		t.Fatal("no full page without htmx")
	}
	dashFind(t, doc, dashTID(views.RowID(views.RowConn, conn.ID))+" "+dashTID(views.RowID(views.RowConnTestResult, conn.ID)))

	// Error paths: unknown connection, no session, another site.
	rec = d.do("POST", "/connections/c_missing/test", nil, true, http.StatusNotFound)
	if dashToast(t, rec) == "" {
		t.Error("404 without an error toast")
	}
	moreNoSession(t, d, "POST", path)
	moreCrossSite(t, d, "POST", path)
}

func TestDashboardComboReadinessPreviewAndTest(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	cb := moreDemoCombo(t, f, "fk-a")
	a, b := f.conns["fk-a"], f.conns["fk-b"]

	// Both targets ready: filled dots, and a poller for the dots.
	full, _ := d.page("/combos", views.ComboDotID(cb.ID, 0), views.ComboDotID(cb.ID, 1),
		views.RowID(views.RowComboTest, cb.ID), views.RowID(views.RowComboPreview, cb.ID), views.CombosReadinessPollID)
	for i := range 2 {
		chip := full.Find(dashTID(views.ComboDotID(cb.ID, i)))
		if chip.AttrOr("data-readiness", "") != views.ReadyState || chip.Find(".dot.dot--ready").Length() != 1 {
			t.Errorf("target %d not ready: %s", i, rtText(chip))
		}
	}
	poll := dashFind(t, full, dashTID(views.CombosReadinessPollID))
	if _, ok := poll.Attr("data-poll"); !ok || poll.AttrOr("hx-get", "") != "/combos/readiness" {
		t.Errorf("poller %v", poll.Nodes[0].Attr)
	}
	if trig := poll.AttrOr("hx-trigger", ""); !strings.Contains(trig, "every 10s") || !strings.Contains(trig, views.EventConnectionsChanged+" from:body") ||
		!strings.Contains(trig, views.EventResilienceChanged+" from:body") {
		t.Errorf("poller trigger %q", trig)
	}
	moreDisabledElt(t, full, dashFind(t, full, dashTID(views.RowID(views.RowCombo, cb.ID))+" form"))

	// fk-a cools down: the target pinned to it is cooling, the other stays ready via fk-b.
	moreCool(t, f, "fk-a")
	rec := d.do("GET", "/combos/readiness", nil, true, http.StatusOK)
	doc := dashCheckHTML(t, rec)
	cell := dashFind(t, doc, "td#"+views.RowID(views.RowComboTargets, cb.ID))
	if cell.AttrOr("hx-swap-oob", "") != "true" {
		t.Errorf("readiness cell is not out of band")
	}
	if got := doc.Find(dashTID(views.ComboDotID(cb.ID, 0))).AttrOr("data-readiness", ""); got != views.ReadyState {
		t.Errorf("target 1 %q", got)
	}
	pinned := doc.Find(dashTID(views.ComboDotID(cb.ID, 1)))
	if pinned.AttrOr("data-readiness", "") != views.CoolingState || !strings.Contains(rtText(pinned), "all connections cooling") ||
		pinned.Find("time[data-remaining-ms]").Length() != 1 {
		t.Errorf("pinned target: %s %q", pinned.AttrOr("data-readiness", ""), rtText(pinned))
	}
	if rec := d.do("GET", "/combos/readiness", nil, false, http.StatusOK); !strings.Contains(rec.Body.String(), "<html") {
		t.Error("GET /combos/readiness without htmx is not the page")
	}

	// Preview routing: model-x first and usable, model-y skipped while fk-a cools.
	rec = d.do("GET", "/combos/"+cb.ID+"/preview", nil, true, http.StatusOK)
	doc = dashCheckHTML(t, rec)
	panel := dashFind(t, doc, dashTID(views.RowID(views.RowComboRoute, cb.ID)))
	first := rtText(panel.Find(dashTID(views.RowID(views.RowComboRoute, cb.ID) + "-1")))
	second := rtText(panel.Find(dashTID(views.RowID(views.RowComboRoute, cb.ID) + "-2")))
	if !strings.HasPrefix(first, "fake/model-x eligible") || !strings.Contains(first, "conn-1: usable") || !strings.Contains(first, "conn-0: cooling") {
		t.Errorf("first %q", first)
	}
	if !strings.HasPrefix(second, "fake/model-y skipped now") {
		t.Errorf("second %q", second)
	}
	dashFind(t, doc, dashTID(views.RowID(views.RowComboPanelClose, cb.ID))+"[data-dismiss]")
	rec = d.do("GET", "/combos/"+cb.ID+"/preview", nil, false, http.StatusOK)
	page := dashCheckHTML(t, rec)
	dashFind(t, page, "#"+views.RowID(views.RowComboSlot, cb.ID)+" "+dashTID(views.RowID(views.RowComboRoute, cb.ID)))

	// Test: model-x answers through fk-b; model-y is held back while fk-a cools.
	stateA := f.app.Server.Resilience().Cooldowns.State(a.ID)
	rec = d.do("POST", "/combos/"+cb.ID+"/test", nil, true, http.StatusOK)
	doc = dashCheckHTML(t, rec)
	results := dashFind(t, doc, dashTID(views.RowID(views.RowComboResults, cb.ID)))
	row1 := moreCells(results.Find(dashTID(views.RowID(views.RowComboResults, cb.ID) + "-1")))
	row2 := moreCells(results.Find(dashTID(views.RowID(views.RowComboResults, cb.ID) + "-2")))
	if !strings.HasPrefix(row1, "1 | fake/model-x | OK | 200 | ") || !strings.Contains(row1, " ms | conn-1 | OK") {
		t.Errorf("row 1 %q", row1)
	}
	if !strings.HasPrefix(row2, "2 | fake/model-y | skipped | — | — | — | Skipped: every connection is cooling down; eligible again in ") {
		t.Errorf("row 2 %q", row2)
	}
	force := dashFind(t, doc, dashTID(views.RowID(views.RowComboForceTest, cb.ID)))
	if force.Closest("form").Find(`input[name="force"][value="1"]`).Length() != 1 {
		t.Error("the force button does not send force=1")
	}

	// Forced: model-y goes to fk-a anyway and reports its 429; fk-a's cooldown is as it was.
	doc = dashCheckHTML(t, d.do("POST", "/combos/"+cb.ID+"/test", url.Values{"force": {"1"}}, true, http.StatusOK))
	row2 = moreCells(doc.Find(dashTID(views.RowID(views.RowComboResults, cb.ID) + "-2")))
	if !strings.HasPrefix(row2, "2 | fake/model-y | failed | 429 | ") || !strings.HasSuffix(row2, " | conn-0 | 429 Too Many Requests: Slow down") {
		t.Errorf("forced row 2 %q", row2)
	}
	if after := f.app.Server.Resilience().Cooldowns.State(a.ID); after.BackoffLevel != stateA.BackoffLevel ||
		after.RateLimitedUntil == nil || !after.RateLimitedUntil.Equal(*stateA.RateLimitedUntil) || after.LastErrorAt == nil ||
		!after.LastErrorAt.Equal(*stateA.LastErrorAt) {
		t.Errorf("the test changed fk-a's state: %+v, was %+v", after, stateA)
	}
	if st := f.app.Server.Resilience().Cooldowns.State(b.ID); st.RateLimitedUntil != nil || st.LastError != "" {
		t.Errorf("fk-b state %+v", st)
	}

	// Without script: the page with the results under the row.
	page = dashCheckHTML(t, d.do("POST", "/combos/"+cb.ID+"/test", nil, false, http.StatusOK))
	dashFind(t, page, "#"+views.RowID(views.RowComboSlot, cb.ID)+" "+dashTID(views.RowID(views.RowComboResults, cb.ID)))

	// Error paths.
	for _, p := range []string{"/combos/cb_missing/test", "/combos/cb_missing/preview"} {
		method := "POST"
		if strings.HasSuffix(p, "preview") {
			method = "GET"
		}
		if rec := d.do(method, p, nil, true, http.StatusNotFound); dashToast(t, rec) == "" {
			t.Errorf("%s: 404 without a toast", p)
		}
		moreNoSession(t, d, method, p)
	}
	moreNoSession(t, d, "GET", "/combos/readiness")
	moreCrossSite(t, d, "POST", "/combos/"+cb.ID+"/test")
}

// moreComboTest decodes the answer of POST /api/combos/{id}/test.
type moreComboTest struct {
	Results []struct {
		Index        int
		Target       string
		Outcome      string
		OK           bool
		Status       int
		ConnectionID string
		LatencyMs    *int64
		SkipReason   string
		RetryAfterMs *int64
		Message      string
	}
}

func TestAPIComboTest(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	cb := moreDemoCombo(t, f, "fk-a")
	a, b := f.conns["fk-a"], f.conns["fk-b"]
	moreCool(t, f, "fk-a")
	api := &apiApp{App: f.app, cookie: f.app.Login()}
	path := "/api/combos/" + cb.ID + "/test"

	decode := func(rec interface{ Result() *http.Response }, body []byte) moreComboTest {
		var out moreComboTest
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		return out
	}
	// No body: gated targets are skipped.
	rec := api.admin("POST", path, "")
	if rec.Code != 200 || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("test: %d %s", rec.Code, rec.Body.String())
	}
	out := decode(rec, rec.Body.Bytes())
	if len(out.Results) != 2 {
		t.Fatalf("results %s", rec.Body.String())
	}
	r0, r1 := out.Results[0], out.Results[1]
	if r0.Index != 0 || r0.Target != "fake/model-x" || r0.Outcome != "ok" || !r0.OK || r0.Status != 200 || r0.ConnectionID != b.ID || r0.LatencyMs == nil {
		t.Errorf("target 0 %+v", r0)
	}
	if r1.Outcome != "skipped" || r1.SkipReason != "cooling" || r1.RetryAfterMs == nil || *r1.RetryAfterMs <= 0 || r1.ConnectionID != "" {
		t.Errorf("target 1 %+v", r1)
	}
	// force: the held-back target is probed and its 429 reported; nothing changes.
	stateA := f.app.Server.Resilience().Cooldowns.State(a.ID)
	rec = api.admin("POST", path, `{"force":true}`)
	out = decode(rec, rec.Body.Bytes())
	if rec.Code != 200 || len(out.Results) != 2 || out.Results[1].Outcome != "error" || out.Results[1].Status != 429 ||
		out.Results[1].ConnectionID != a.ID || !strings.HasPrefix(out.Results[1].Message, "429 Too Many Requests") {
		t.Errorf("forced: %d %s", rec.Code, rec.Body.String())
	}
	if after := f.app.Server.Resilience().Cooldowns.State(a.ID); after.BackoffLevel != stateA.BackoffLevel || !after.RateLimitedUntil.Equal(*stateA.RateLimitedUntil) {
		t.Errorf("the test changed fk-a's state: %+v", after)
	}

	// Error paths: bad body, unknown combo, no credential, another site, a key without manage.
	wantError(t, api.admin("POST", path, `{"forse":true}`), http.StatusBadRequest, "validation_failed")
	wantError(t, api.admin("POST", path, `{"force":"yes"}`), http.StatusBadRequest, "validation_failed")
	wantError(t, api.admin("POST", path, `{"force":true}`, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "unsupported_media_type")
	wantError(t, api.admin("POST", "/api/combos/cb_missing/test", ""), http.StatusNotFound, "not_found")
	wantError(t, api.Do(testkit.Request("POST", path, "", "Sec-Fetch-Site", "same-origin")), http.StatusUnauthorized, "unauthorized")
	req := testkit.Request("POST", path, "", "Sec-Fetch-Site", "cross-site")
	req.AddCookie(api.cookie)
	wantError(t, api.Do(req), http.StatusForbidden, "cross_origin_rejected")
	_, inference := api.NewKey("client-only", services.ScopeInference)
	wantError(t, api.bearer(inference, "POST", path, ""), http.StatusForbidden, "forbidden")
	_, manage := api.NewKey("ops", services.ScopeManage)
	if rec := api.bearer(manage, "POST", path, `{"force":false}`); rec.Code != 200 {
		t.Errorf("manage key: %d %s", rec.Code, rec.Body.String())
	}
}

func TestDashboardOverviewTrafficTiles(t *testing.T) {
	f := newGW(t, "fk-a")
	d := rtDash(t, f)
	tile := func(doc *goquery.Document, id string) string {
		t.Helper()
		return rtText(dashFind(t, doc, dashTID(id)+" .tile__value"))
	}

	// Nothing sent yet.
	full, frag := d.page("/", views.OverviewStatsID, views.OverviewRequestsID, views.OverviewResilienceID)
	region := dashFind(t, frag, dashTID(views.OverviewStatsID))
	if _, ok := region.Attr("data-poll"); !ok || region.AttrOr("hx-get", "") != "/overview/stats?window=1h" {
		t.Errorf("stats region %v", region.Nodes[0].Attr)
	}
	if trig := region.AttrOr("hx-trigger", ""); !strings.Contains(trig, "every 10s") || !strings.Contains(trig, views.EventResilienceChanged+" from:body") {
		t.Errorf("stats trigger %q", trig)
	}
	if region.Find("form, input, select, textarea").Length() > 0 || region.AttrOr("aria-live", "") != "" {
		t.Error("the polled region holds a form or is aria-live")
	}
	if got := tile(full, views.OverviewRequestsID); got != "0" {
		t.Errorf("requests %q", got)
	}
	if got := tile(full, views.OverviewSuccessID); got != "—" {
		t.Errorf("success rate %q", got)
	}

	// Two successes and one failure (fk-a answers 503 for model bad).
	f.fu.ScriptModel("fk-a", "bad", fakeupstream.Step{Status: 503, ErrorMessage: "down"})
	for _, m := range []string{"m1", "m2", "bad"} {
		rtChat(t, f, m)
	}
	if !testkit.PollUntil(5*time.Second, func() bool {
		page, err := f.app.Server.RequestLogs().ListRequestLogs(context.Background(), services.RequestLogQuery{})
		return err == nil && len(page.Items) == 3
	}) {
		t.Fatal("the request log never held 3 entries")
	}
	doc := dashCheckHTML(t, d.do("GET", "/overview/stats?window=1h", nil, true, http.StatusOK))
	if got := tile(doc, views.OverviewRequestsID); got != "3" {
		t.Errorf("requests %q", got)
	}
	if got := tile(doc, views.OverviewSuccessID); got != "66.7 %" {
		t.Errorf("success rate %q", got)
	}
	for _, id := range []string{views.OverviewP50ID, views.OverviewP95ID} {
		if got := tile(doc, id); !strings.HasSuffix(got, " ms") {
			t.Errorf("%s %q", id, got)
		}
	}
	if got := tile(doc, views.OverviewTTFBP50ID); got != "—" {
		t.Errorf("ttfb without streams %q", got)
	}
	// The resilience counts are the Runtime KPI strip's.
	kpi := dashParse(t, d.do("GET", "/runtime/summary", nil, true, http.StatusOK))
	for id, kid := range map[string]string{views.OverviewBreakersID: views.RuntimeOpenID, views.OverviewCoolingID: views.RuntimeCoolingID,
		views.OverviewLockedID: views.RuntimeLockedID} {
		if got, want := tile(doc, id), strings.TrimSpace(kpi.Find(dashTID(kid)+" .tile__value").Text()); got != want {
			t.Errorf("%s = %q, runtime says %q", id, got, want)
		}
	}
	if href := dashFind(t, doc, dashTID(views.OverviewBreakersID)).AttrOr("href", ""); href != "/runtime#breakers" {
		t.Errorf("open breakers link %q", href)
	}

	// Out of the last hour, still in the last 24 hours.
	f.app.Clock.Advance(2 * time.Hour)
	doc = dashCheckHTML(t, d.do("GET", "/overview/stats?window=1h", nil, true, http.StatusOK))
	if got := tile(doc, views.OverviewRequestsID); got != "0" {
		t.Errorf("last hour after 2 h: %q", got)
	}
	doc = dashCheckHTML(t, d.do("GET", "/overview/stats?window=24h", nil, true, http.StatusOK))
	if got := tile(doc, views.OverviewRequestsID); got != "3" {
		t.Errorf("last 24 hours: %q", got)
	}
	region = dashFind(t, doc, dashTID(views.OverviewStatsID))
	if region.AttrOr("hx-get", "") != "/overview/stats?window=24h" {
		t.Errorf("the 24 h region polls %q", region.AttrOr("hx-get", ""))
	}
	cur := dashFind(t, doc, dashTID(views.OverviewWindowID)+` a[aria-current="page"]`)
	if cur.AttrOr("data-testid", "") != views.RowID(views.OverviewWindowID, "24h") || cur.AttrOr("hx-push-url", "") != "/?window=24h" {
		t.Errorf("current window link %v", cur.Nodes[0].Attr)
	}
	// Opened directly, the fragment URL is the Overview page with that window.
	page := dashCheckHTML(t, d.do("GET", "/overview/stats?window=24h", nil, false, http.StatusOK))
	if page.Find("main#content h1").Text() != "Overview" || tile(page, views.OverviewRequestsID) != "3" {
		t.Error("GET /overview/stats without htmx is not the Overview page with that window")
	}
	moreNoSession(t, d, "GET", "/overview/stats?window=1h")
}

func TestSettingsAndFlagFormsDisableTheirButtons(t *testing.T) {
	d := newDashClient(t)
	// Store a flag so its Reset button shows.
	patchResilience(t, d.app, `{"modelLockout":{"enabled":true}}`)
	for _, path := range []string{"/settings/resilience", "/settings/flags"} {
		full, _ := d.page(path)
		forms := full.Find("form[hx-sync]")
		if forms.Length() < 2 {
			t.Fatalf("%s: %d forms", path, forms.Length())
		}
		forms.Each(func(_ int, form *goquery.Selection) { moreDisabledElt(t, full, form) })
	}
	full, _ := d.page("/settings/flags")
	reset := full.Find(dashTID(views.RowID(views.RowFlagReset, "modelLockout")))
	if reset.Length() != 1 || !strings.Contains(reset.Closest("form").AttrOr("hx-disabled-elt", ""), "#"+reset.AttrOr("id", "-")) {
		t.Errorf("the stored flag's Reset is not disabled with its form")
	}
}

// moreQuotaHeaders are the headers of an upstream reporting a 5-hour
// window 42 % used (resetting in 20 min), a weekly one 18 % used and a
// minute window with 480 of 500 requests left.
var moreQuotaHeaders = map[string]string{
	"x-codex-primary-used-percent": "42", "x-codex-primary-window-minutes": "300", "x-codex-primary-reset-after-seconds": "1200",
	"x-codex-secondary-used-percent": "18", "x-codex-secondary-window-minutes": "10080", "x-codex-secondary-reset-after-seconds": "259200",
	"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "480", "x-ratelimit-reset-requests": "20s",
}

func TestDashboardConnectionQuotaWindows(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	a, b := f.conns["fk-a"], f.conns["fk-b"]
	f.fu.Script("fk-a", fakeupstream.Step{Headers: moreQuotaHeaders})
	if resp := rtChat(t, f, "m1"); resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != a.ID {
		t.Fatalf("chat: %d on %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	line := func(doc *goquery.Document, id, window string) string {
		t.Helper()
		return rtText(dashFind(t, doc, dashTID(views.RowID(views.RowConnQuota, id)+"-"+window)))
	}

	// The learned windows of fk-a; fk-b was never observed.
	full, _ := d.page("/connections", views.RowID(views.RowConnQuota, a.ID), views.RowID(views.RowConnQuota, b.ID))
	if n := full.Find(`th[scope="col"]`).FilterFunction(func(_ int, s *goquery.Selection) bool { return rtText(s) == "Quota windows" }).Length(); n != 1 {
		t.Errorf("%d Quota windows column headers", n)
	}
	if got := line(full, a.ID, "5h"); got != "5 h 42.0 % used, resets in 20 m 0 s" {
		t.Errorf("5h %q", got)
	}
	if full.Find(dashTID(views.RowID(views.RowConnQuota, a.ID)+"-5h")+` time[data-remaining-ms="1200000"]`).Length() != 1 {
		t.Error("the 5-hour reset is not a ticking countdown")
	}
	if got := line(full, a.ID, "weekly"); got != "Weekly 18.0 % used, resets in 3 d 0 h" {
		t.Errorf("weekly %q", got)
	}
	if got := line(full, a.ID, "minute"); got != "Minute 4.0 % used, resets in 20 s and 480 of 500 left" {
		t.Errorf("minute %q", got)
	}
	for _, w := range []string{"daily", "monthly"} {
		if got := line(full, a.ID, w); !strings.HasSuffix(got, " unknown") {
			t.Errorf("%s %q", w, got)
		}
	}
	if got := moreLines(dashFind(t, full, dashTID(views.RowID(views.RowConnQuota, b.ID)))); got != moreUnknownQuota {
		t.Errorf("never observed: %q", got)
	}

	// Status cells carry the ids 50-dashboard §6.4 names: conn-<id>-status.
	for _, id := range []string{"conn-" + a.ID + "-status", "conn-" + a.ID + "-cooldown", "conn-" + a.ID + "-error",
		"conn-" + a.ID + "-concurrency", "conn-" + a.ID + "-quota"} {
		dashFind(t, full, "td#"+id)
	}
	if n := full.Find(`[id^="conn-status-"], [id^="conn-cooldown-"], [id^="conn-error-"], [id^="conn-concurrency-"]`).Length(); n != 0 {
		t.Errorf("%d cells with the old ids", n)
	}

	// The quota poll: every 10 s and on connections-changed, with its own signatures.
	poll := dashFind(t, full, dashTID(views.ConnectionsQuotaPollID))
	if _, ok := poll.Attr("data-poll"); !ok || poll.AttrOr("hx-get", "") != "/connections/quota-windows" || poll.AttrOr("hx-swap", "") != "none" ||
		poll.AttrOr("hx-include", "") != "[data-quota-sig]" || !strings.Contains(poll.AttrOr("hx-trigger", ""), "every 10s") {
		t.Errorf("quota poller %v", poll.Nodes[0].Attr)
	}
	doc := dashCheckHTML(t, d.do("GET", "/connections/quota-windows", nil, true, http.StatusOK))
	cell := dashFind(t, doc, "template > td#"+views.RowID(views.RowConnQuota, a.ID))
	if cell.AttrOr("hx-swap-oob", "") != "true" || !strings.Contains(rtText(cell), "42.0 % used") {
		t.Errorf("polled quota cell %q", rtText(cell))
	}
	sigs := url.Values{}
	full.Find("input[data-quota-sig]").Each(func(_ int, s *goquery.Selection) { sigs.Add(views.QuotaSigField, s.AttrOr("value", "")) })
	if len(sigs[views.QuotaSigField]) != 2 {
		t.Fatalf("%d quota signatures, want 2", len(sigs[views.QuotaSigField]))
	}
	if rec := d.do("GET", "/connections/quota-windows", sigs, true, http.StatusOK); strings.TrimSpace(rec.Body.String()) != "" {
		t.Errorf("unchanged quota cells were sent: %s", dashTrunc(rec.Body.String(), 500))
	}
	// The status poll leaves the quota cells alone.
	if doc := dashCheckHTML(t, d.do("GET", "/connections/statuses", nil, true, http.StatusOK)); doc.Find("td#"+views.RowID(views.RowConnQuota, a.ID)).Length() != 0 {
		t.Error("the status poll sent a quota cell")
	}

	// A day later every reading is stale: unknown again, the minute window
	// gone. (The admin signs in again: a session idles out after 12 h.)
	f.app.Clock.Advance(25 * time.Hour)
	d.cookie = f.app.Login()
	doc = dashCheckHTML(t, d.do("GET", "/connections/quota-windows", sigs, true, http.StatusOK))
	if got := moreLines(dashFind(t, doc, "td#"+views.RowID(views.RowConnQuota, a.ID))); got != moreUnknownQuota {
		t.Errorf("stale windows %q", got)
	}
	if doc.Find("td#"+views.RowID(views.RowConnQuota, b.ID)).Length() != 0 {
		t.Error("fk-b's unchanged quota cell was sent")
	}

	// Error paths: a malformed signature sends the cell; no session; without
	// htmx the URL is the Connections page.
	doc = dashCheckHTML(t, d.do("GET", "/connections/quota-windows?"+views.QuotaSigField+"=garbage", nil, true, http.StatusOK))
	dashFind(t, doc, "td#"+views.RowID(views.RowConnQuota, b.ID))
	page := dashCheckHTML(t, d.do("GET", "/connections/quota-windows", nil, false, http.StatusOK))
	dashFind(t, page, dashTID(views.ConnectionsPageID))
	moreNoSession(t, d, "GET", "/connections/quota-windows")
}

// moreUnknownQuota is the quota windows cell of a connection never observed
// (or whose readings all went stale): one line, not one "unknown" per window.
const moreUnknownQuota = "none reported"

// moreLines is the text of each list item of s, joined by " | ".
func moreLines(s *goquery.Selection) string {
	var lines []string
	s.Find("li").Each(func(_ int, li *goquery.Selection) { lines = append(lines, rtText(li)) })
	return strings.Join(lines, " | ")
}

// moreDemoChat sends one chat request for combo demo.
func moreDemoChat(t *testing.T, f *gwFixture, text string) *http.Response {
	t.Helper()
	resp := f.post(t, `{"model":"demo","messages":[{"role":"user","content":"`+text+`"}]}`)
	io.ReadAll(resp.Body)
	return resp
}

func TestDashboardComboReadinessQuotaGate(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	cb := moreDemoCombo(t, f, "fk-a")
	// fk-a reports its 5-hour window used up, resetting in 20 min: gate 10 holds it back.
	f.fu.Script("fk-a", fakeupstream.Step{Headers: map[string]string{
		"x-codex-primary-used-percent": "100", "x-codex-primary-window-minutes": "300", "x-codex-primary-reset-after-seconds": "1200"}})
	if resp := rtChat(t, f, "m1"); resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	if _, cooling := f.app.Server.Resilience().Cooldowns.Cooling(f.conns["fk-a"].ID); cooling {
		t.Fatal("fk-a is cooling; the test wants the quota gate alone")
	}
	doc := dashCheckHTML(t, d.do("GET", "/combos/readiness", nil, true, http.StatusOK))
	if got := doc.Find(dashTID(views.ComboDotID(cb.ID, 0))).AttrOr("data-readiness", ""); got != views.ReadyState {
		t.Errorf("target 1 (any connection, fk-b free) %q", got)
	}
	pinned := doc.Find(dashTID(views.ComboDotID(cb.ID, 1)))
	if pinned.AttrOr("data-readiness", "") != views.CoolingState || !strings.Contains(rtText(pinned), "all connections cooling (quota window used up) · 20 m 0 s") ||
		pinned.Find(`time[data-remaining-ms="1200000"]`).Length() != 1 || pinned.Find(".dot.dot--skipped").Length() != 1 {
		t.Errorf("pinned target: %s %q", pinned.AttrOr("data-readiness", ""), rtText(pinned))
	}
	// The full page shows the same.
	full, _ := d.page("/combos", views.ComboDotID(cb.ID, 1))
	if got := full.Find(dashTID(views.ComboDotID(cb.ID, 1))).AttrOr("data-readiness", ""); got != views.CoolingState {
		t.Errorf("page: pinned target %q", got)
	}
	// Past the reset the window reads unused and the target is ready again.
	f.app.Clock.Advance(1201 * time.Second)
	doc = dashCheckHTML(t, d.do("GET", "/combos/readiness", nil, true, http.StatusOK))
	if got := doc.Find(dashTID(views.ComboDotID(cb.ID, 1))).AttrOr("data-readiness", ""); got != views.ReadyState {
		t.Errorf("after the reset: pinned target %q", got)
	}
}

func TestDashboardComboTargetMetrics(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	cb := moreDemoCombo(t, f, "fk-a")
	metrics := func(doc *goquery.Document, i int) string {
		t.Helper()
		return rtText(dashFind(t, doc, dashTID(views.ComboMetricsID(cb.ID, i))))
	}
	const unknown = "samples 0 success — avg latency — p95 latency —"

	// Nothing dispatched yet: every figure unknown.
	full, _ := d.page("/combos", views.ComboMetricsID(cb.ID, 0), views.ComboMetricsID(cb.ID, 1))
	for i := range 2 {
		if got := metrics(full, i); got != unknown {
			t.Errorf("target %d before traffic: %q", i, got)
		}
	}

	// Ten requests for demo: the first meets a 404 on fk-a and moves on to
	// fk-b (same target, next connection); model-y is never asked for.
	f.fu.ScriptModel("fk-a", "model-x", fakeupstream.Step{Status: http.StatusNotFound, ErrorCode: "model_not_found"}, fakeupstream.Step{})
	for i := range 10 {
		if resp := moreDemoChat(t, f, "hello "+strconv.Itoa(i)); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	// An outcome is recorded as its dispatch ends, which may be just after
	// the client has read the answer.
	var want gateway.TargetStats
	if !testkit.PollUntil(5*time.Second, func() bool {
		want = f.app.Server.Gateway().TargetStats("fake", "model-x", "")
		return want.Samples == 11
	}) || want.SuccessRate == nil || want.P95LatencyMs == nil {
		t.Fatalf("gateway metrics %+v", want)
	}
	// The readiness poll refreshes the metrics with the dots.
	doc := dashCheckHTML(t, d.do("GET", "/combos/readiness", nil, true, http.StatusOK))
	got := metrics(doc, 0)
	if !strings.HasPrefix(got, "samples 11 success 90.9 % avg latency ") || strings.Contains(got, "—") || !strings.HasSuffix(got, " ms") {
		t.Errorf("target 1 %q", got)
	}
	if v := views.NewTargetMetricsVM(want); !strings.Contains(got, "avg latency "+v.AvgLatency) || !strings.Contains(got, "p95 latency "+v.P95Latency) {
		t.Errorf("target 1 %q, gateway says %+v", got, v)
	}
	if got := metrics(doc, 1); got != unknown {
		t.Errorf("target 2 (never dispatched) %q", got)
	}
	page := dashCheckHTML(t, d.do("GET", "/combos", nil, false, http.StatusOK))
	if got := metrics(page, 0); !strings.HasPrefix(got, "samples 11 ") {
		t.Errorf("page: target 1 %q", got)
	}
}

func TestDashboardOverviewChartAndFailingTargets(t *testing.T) {
	f := newGW(t, "fk-a")
	d := rtDash(t, f)
	a := f.conns["fk-a"]

	// Nothing sent yet: no bars, no failing target.
	full, _ := d.page("/", views.OverviewChartID, views.OverviewChartEmptyID, views.OverviewFailingEmptyID)
	if full.Find(dashTID(views.OverviewStatsID)+" "+dashTID(views.OverviewChartID)).Length() != 1 {
		t.Error("the chart is outside the polled region")
	}

	// Two successes and one failure (fk-a answers 503 for model bad).
	f.fu.ScriptModel("fk-a", "bad", fakeupstream.Step{Status: 503, ErrorMessage: "down"})
	for _, m := range []string{"m1", "m2", "bad"} {
		rtChat(t, f, m)
	}
	var entries []services.RequestLogEntry
	if !testkit.PollUntil(5*time.Second, func() bool {
		page, err := f.app.Server.RequestLogs().ListRequestLogs(context.Background(), services.RequestLogQuery{})
		entries = page.Items
		return err == nil && len(page.Items) == 3
	}) {
		t.Fatal("the request log never held 3 entries")
	}
	failed := 0
	for _, e := range entries {
		for _, at := range e.AttemptLog {
			if at.Outcome != "success" {
				failed++
			}
		}
	}
	if failed == 0 {
		t.Fatal("no failed attempt logged")
	}

	doc := dashCheckHTML(t, d.do("GET", "/overview/stats?window=1h", nil, true, http.StatusOK))
	svg := dashFind(t, doc, dashTID(views.OverviewChartID)+` svg[role="img"]`)
	if rtText(svg.Find("title")) != "Requests per minute" || !strings.HasPrefix(rtText(svg.Find("desc")), "3 requests in the last hour: 2 succeeded, 1 failed.") {
		t.Errorf("svg title %q desc %q", rtText(svg.Find("title")), rtText(svg.Find("desc")))
	}
	if svg.Find("rect.chart__ok").Length() != 1 || svg.Find("rect.chart__fail").Length() != 1 {
		t.Errorf("bars: %d ok, %d failed parts", svg.Find("rect.chart__ok").Length(), svg.Find("rect.chart__fail").Length())
	}
	rows := dashFind(t, doc, dashTID(views.OverviewChartTableID)+" tbody tr")
	minute := f.app.Clock.Now().UTC().Format("15:04") + " UTC"
	if rows.Length() != 1 || moreCells(rows) != minute+" | 2 | 1" {
		t.Errorf("data table %q", moreCells(rows))
	}

	row := dashFind(t, doc, dashTID(views.RowID(views.RowFailing, "1")))
	cells := moreCells(row)
	if !strings.HasPrefix(cells, "fake/bad | conn-0 | "+strconv.Itoa(failed)+" | 503 ") || !strings.HasSuffix(cells, " | View logs of fake/bad on conn-0, last hour") {
		t.Errorf("failing row %q", cells)
	}
	if doc.Find(dashTID(views.RowID(views.RowFailing, "2"))).Length() != 0 {
		t.Error("a second failing target")
	}
	href := row.Find("a").AttrOr("href", "")
	if href != "/logs?connectionId="+a.ID+"&provider=fake&range=1h" {
		t.Errorf("logs link %q", href)
	}
	logs := dashCheckHTML(t, d.do("GET", href, nil, false, http.StatusOK))
	if n := logs.Find(dashTID(views.LogsListID) + " tbody > tr").Length(); n != 3 {
		t.Errorf("the linked log view lists %d requests, want 3", n)
	}

	// Two hours on: the last hour is empty; the last 24 hours still chart them
	// per 15 minutes, but nothing failed in the last hour.
	f.app.Clock.Advance(2 * time.Hour)
	doc = dashCheckHTML(t, d.do("GET", "/overview/stats?window=1h", nil, true, http.StatusOK))
	dashFind(t, doc, dashTID(views.OverviewChartEmptyID))
	dashFind(t, doc, dashTID(views.OverviewFailingEmptyID))
	doc = dashCheckHTML(t, d.do("GET", "/overview/stats?window=24h", nil, true, http.StatusOK))
	if got := rtText(dashFind(t, doc, dashTID(views.OverviewChartID)+" svg title")); got != "Requests per 15 minutes" {
		t.Errorf("24 h chart title %q", got)
	}
	dashFind(t, doc, dashTID(views.OverviewFailingEmptyID))
	moreNoSession(t, d, "GET", "/overview/stats?window=24h")
}

// The combos list shows each combo's requests and success rate over the
// last hour, from the request log.
func TestDashboardComboLastHourTraffic(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	cb := moreDemoCombo(t, f, "fk-a")
	cell := views.RowID(views.RowComboTraffic, cb.ID)
	full, _ := d.page("/combos", cell)
	if got := rtText(dashFind(t, full, dashTID(cell))); got != "no requests" {
		t.Fatalf("before traffic: %q", got)
	}
	for i := range 3 {
		if resp := moreDemoChat(t, f, "hi "+strconv.Itoa(i)); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	if !testkit.PollUntil(5*time.Second, func() bool { return f.app.Server.RequestLogStats().Written >= 3 }) {
		t.Fatal("request log not written")
	}
	full, _ = d.page("/combos", cell)
	if got := rtText(dashFind(t, full, dashTID(cell))); got != "3 requests · 100.0 % success" {
		t.Fatalf("after traffic: %q", got)
	}
}
