package app_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/views"
)

// The Audit log page: in the navigation, filterable, paginated, showing
// who changed what with the settings' before and after.
func TestDashboardAuditLogPage(t *testing.T) {
	d := newDashClient(t)
	a := &apiApp{App: d.app, cookie: d.cookie}
	full, _ := d.page("/audit", views.AuditPageID, views.AuditFiltersID, views.AuditEmptyID)
	if cur := full.Find(`nav a[aria-current="page"]`).First(); rtText(cur) != "Audit log" || cur.AttrOr("href", "") != "/audit" {
		t.Errorf("nav current %q", rtText(cur))
	}
	if full.Find("title").Text() != "Audit log · Switchyard" {
		t.Errorf("title %q", full.Find("title").Text())
	}

	// One change from the dashboard, one from a key.
	d.do("PUT", "/settings/flags/providerCooldown", url.Values{"value": {"on"}}, true, http.StatusOK)
	_, manage := a.NewKey("ops", services.ScopeManage)
	d.app.Clock.Advance(time.Second)
	if rec := a.bearer(manage, "POST", "/api/resilience/breakers/reset", ""); rec.Code != 200 {
		t.Fatalf("reset: %d", rec.Code)
	}
	waitAudit(t, a, 2)
	full, _ = d.page("/audit")
	rows := full.Find(dashTID(views.AuditListID) + " tbody > tr")
	if rows.Length() != 2 {
		t.Fatalf("%d rows", rows.Length())
	}
	first, second := moreCells(rows.Eq(0)), moreCells(rows.Eq(1))
	if !strings.Contains(first, "ops sk-sy-") || !strings.Contains(first, "POST /api/resilience/breakers/reset") || !strings.Contains(first, "127.0.0.1") {
		t.Errorf("key row %q", first)
	}
	if !strings.Contains(second, "admin session ") || !strings.Contains(second, "PUT /settings/flags/:key") ||
		!strings.Contains(second, "providerCooldown | providerCooldown.enabled: false → true") {
		t.Errorf("dashboard row %q", second)
	}
	// Filters: by actor (the list fragment for htmx), by area; a bad time is a 422 form.
	rec := d.hxTarget("GET", "/audit?actor=session", views.AuditListID, nil, http.StatusOK)
	frag := dashParse(t, rec)
	if n := frag.Find("tbody > tr").Length(); n != 1 || strings.Contains(rec.Body.String(), views.AuditFiltersID) {
		t.Errorf("actor filter: %d rows (fragment only)", n)
	}
	doc := dashCheckHTML(t, d.do("GET", "/audit?route=%2Fapi%2F", nil, false, http.StatusOK))
	if n := doc.Find(dashTID(views.AuditListID) + " tbody > tr").Length(); n != 1 {
		t.Errorf("area filter: %d rows", n)
	}
	doc = dashCheckHTML(t, d.do("GET", "/audit?targetId=nothing", nil, false, http.StatusOK))
	dashFind(t, doc, dashTID(views.AuditNoMatchID))
	doc = dashCheckHTML(t, d.do("GET", "/audit?range=custom&since=2026-03-02T10:00&until=2026-03-01T10:00", nil, false, http.StatusUnprocessableEntity))
	if !strings.Contains(rtText(dashFind(t, doc, "#since-error")), "The start must be before the end.") {
		t.Error("no message for a reversed range")
	}
	moreNoSession(t, d, "GET", "/audit")
}

// Settings → Model prices: the table, an override saved through the
// general settings (its validation a 422 form), the estimated cost it
// gives the request log and the Overview, and removing it again.
func TestDashboardModelPricesAndCost(t *testing.T) {
	f := newGW(t, "fk-a")
	d := rtDash(t, f)
	full, _ := d.page("/settings/prices", views.PricesPageID, views.PriceFormID, views.PricesTableID)
	row := dashFind(t, full, dashTID(views.RowID(views.RowPrice, "openai/gpt-4o")))
	if got := moreCells(row); got != "openai/gpt-4o | $2.50 | $10.00 | built-in | " {
		t.Errorf("built-in row %q", got)
	}
	// Traffic to a model without a price: no cost, and the page names it.
	if resp := chatModel(t, f, "fake/m1"); resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	first := waitLogs(t, f, 1)[0]
	if first.EstimatedCost.Known {
		t.Fatalf("priced without a price: %+v", first.EstimatedCost)
	}
	full, _ = d.page("/settings/prices")
	if !strings.Contains(rtText(dashFind(t, full, dashTID(views.PriceFormID)).Parent()), "without a known price: fake/m1") {
		t.Error("the unpriced model is not named")
	}
	// A bad price is refused with the form kept.
	rec := d.do("POST", "/settings/prices", url.Values{"model": {"fake/m1"}, "inputPerMTok": {"cheap"}, "outputPerMTok": {"-1"}}, true, http.StatusUnprocessableEntity)
	doc := dashParse(t, rec)
	if doc.Find("#inputPerMTok").AttrOr("value", "") != "cheap" || !strings.Contains(rtText(doc.Find("#outputPerMTok-error")), "USD per 1M tokens") {
		t.Errorf("422 form %s", rec.Body.String())
	}
	d.do("POST", "/settings/prices", url.Values{"model": {"nosuch/m"}, "inputPerMTok": {"1"}, "outputPerMTok": {"1"}}, true, http.StatusUnprocessableEntity)
	// Saved: in the table, in the settings document, with a toast.
	rec = d.do("POST", "/settings/prices", url.Values{"model": {"fake/m1"}, "inputPerMTok": {"1000"}, "outputPerMTok": {"2000"}}, true, http.StatusOK)
	if !strings.Contains(rec.Header().Get("HX-Trigger"), "Price of fake/m1 saved.") {
		t.Errorf("toast %q", rec.Header().Get("HX-Trigger"))
	}
	doc = dashParse(t, rec)
	if got := moreCells(dashFind(t, doc, dashTID(views.RowID(views.RowPrice, "fake/m1")))); !strings.HasPrefix(got, "fake/m1 | $1000.00 | $2000.00 | override") {
		t.Errorf("override row %q", got)
	}
	settings := adminGet(t, f.app, "/api/settings")
	if b, _ := json.Marshal(settings["pricing"]); string(b) != `{"models":{"fake/m1":{"inputPerMTok":1000,"outputPerMTok":2000}}}` {
		t.Errorf("pricing %s", b)
	}
	// The next request is priced; the log table and the Overview show it as an estimate.
	f.app.Clock.Advance(time.Second)
	resp := chatModel(t, f, "fake/m1")
	rows := waitLogs(t, f, 2)
	var priced services.RequestLogEntry
	for _, r := range rows {
		if r.ID == resp.Header.Get("X-Switchyard-Request-Id") {
			priced = r
		}
	}
	want := services.Cost{NanoUSD: priced.PromptTokens*1000*1000 + priced.CompletionTokens*2000*1000, Known: true}
	if priced.EstimatedCost != want || !want.Known || want.NanoUSD == 0 {
		t.Fatalf("cost %+v, want %+v", priced.EstimatedCost, want)
	}
	logs := dashCheckHTML(t, d.do("GET", "/logs", nil, false, http.StatusOK))
	if got := rtText(dashFind(t, logs, dashTID(views.RowID(views.RowLogCost, priced.ID)))); got != "≈ "+views.CostText(want) {
		t.Errorf("cost cell %q", got)
	}
	if got := rtText(dashFind(t, logs, dashTID(views.RowID(views.RowLogCost, first.ID)))); got != "—" {
		t.Errorf("unpriced cost cell %q", got)
	}
	if !strings.Contains(rtText(logs.Find("thead")), "Cost (estimate)") {
		t.Error("the cost column is not marked as an estimate")
	}
	stats := dashCheckHTML(t, d.do("GET", "/overview/stats?window=1h", nil, true, http.StatusOK))
	if got := rtText(dashFind(t, stats, dashTID(views.OverviewCostID)+" .tile__value")); got != "≈ "+views.CostText(want) {
		t.Errorf("cost tile %q", got)
	}
	panel := rtText(dashFind(t, stats, dashTID(views.OverviewCostPanelID)))
	for _, s := range []string{"not a bill", "1 request has no known price", "client", "conn-0", "fake/m1"} {
		if !strings.Contains(panel, s) {
			t.Errorf("cost panel lacks %q: %s", s, panel)
		}
	}
	// Removed: the model has no price again.
	rec = d.do("POST", "/settings/prices/remove", url.Values{"model": {"fake/m1"}}, true, http.StatusOK)
	if dashParse(t, rec).Find(dashTID(views.RowID(views.RowPrice, "fake/m1"))).Length() != 0 {
		t.Error("the override is still listed")
	}
	settings = adminGet(t, f.app, "/api/settings")
	if b, _ := json.Marshal(settings["pricing"]); string(b) != `{"models":{}}` {
		t.Errorf("pricing after remove %s", b)
	}
	moreNoSession(t, d, "GET", "/settings/prices")
	anon := &dashClient{t: t, app: f.app}
	anon.do("POST", "/settings/prices", url.Values{"model": {"fake/m1"}}, false, http.StatusSeeOther)
}
