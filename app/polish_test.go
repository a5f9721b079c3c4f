package app_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/views"
)

// First-run setup lands on the Overview with the welcome toast of
// 50-dashboard §6.1 rendered into the toast region; the Overview without
// ?welcome=1 has none, and an htmx request for it gets the content alone.
func TestSetupWelcomeToast(t *testing.T) {
	a := testkit.NewApp(t, testkit.WithoutAdminPassword())
	resp := postForm(a, "/setup", url.Values{"password": {"long enough pw 1"}, "confirm": {"long enough pw 1"}}, nil, "")
	if resp.StatusCode != 303 || sessionCookie(resp) == nil {
		t.Fatalf("setup: %d", resp.StatusCode)
	}
	loc := resp.Header.Get("Location")
	if loc != "/?welcome=1" {
		t.Fatalf("setup redirects to %q", loc)
	}
	get := func(path string, htmx bool) *goquery.Document {
		t.Helper()
		req := testkit.Request("GET", path, "")
		req.AddCookie(sessionCookie(resp))
		if htmx {
			req.Header.Set("HX-Request", "true")
		}
		rec := a.Do(req)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(rec.Body.String()))
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	toast := get(loc, false).Find("#" + views.ToastsID + ` [data-testid="` + views.FlashToastID + `"]`)
	if toast.Length() != 1 || strings.TrimSpace(toast.Text()) != "Admin password set. Welcome to Switchyard." ||
		!toast.HasClass("toast--success") || toast.AttrOr("data-clear-param", "") != "welcome" {
		t.Fatalf("welcome toast %d %q", toast.Length(), toast.Text())
	}
	if n := get("/", false).Find(`[data-testid="` + views.FlashToastID + `"]`).Length(); n != 0 {
		t.Errorf("the Overview without ?welcome=1 shows %d welcome toasts", n)
	}
	if n := get(loc, true).Find(`[data-testid="` + views.FlashToastID + `"]`).Length(); n != 0 {
		t.Errorf("the htmx fragment carries %d welcome toasts", n)
	}
}

// Settings → Resilience: each card says when it was last saved, from the
// audit log (a key is named), instead of the document revision every card
// shares; duration fields show human units; the page is in sections with a
// nav; the Model lockout preview follows the values typed and saves nothing.
func TestResilienceCardsLastSavedAndPreview(t *testing.T) {
	a := newAPIApp(t)
	_, secret := a.NewKey("ops-bot", services.ScopeManage)
	a.Clock.Advance(time.Minute)
	if rec := a.bearer(secret, "PATCH", "/api/resilience", `{"modelLockout":{"baseCooldownMs":60000}}`); rec.Code != 200 {
		t.Fatalf("PATCH: %d %s", rec.Code, rec.Body.String())
	}
	waitAudit(t, a, 1)
	a.Clock.Advance(3 * time.Minute)
	d := &dashClient{t: t, app: a.App, cookie: a.cookie}
	full, _ := d.page("/settings/resilience", views.SettingsNavID)
	line := func(section string) string {
		t.Helper()
		return rtText(dashFind(t, full, dashTID(views.RowID(views.RowSettingsLastSaved, section))))
	}
	if got := line(views.SectionModelLockout); got != "Last saved 3 min ago by key ops-bot" {
		t.Errorf("Model lockout card: %q", got)
	}
	if got := line(views.SectionRequestQueue); got != "Never saved" {
		t.Errorf("Request queue card: %q", got)
	}
	if strings.Contains(full.Text(), "Settings revision") {
		t.Error("the cards still show the shared settings revision")
	}
	if got := rtText(dashFind(t, full, "#modelLockout-baseCooldownMs-human")); got != "= 1 min" {
		t.Errorf("human units %q", got)
	}
	if desc := dashFind(t, full, "#modelLockout-baseCooldownMs").AttrOr("aria-describedby", ""); !strings.Contains(desc, "modelLockout-baseCooldownMs-human") {
		t.Errorf("the input is not described by its human units: %q", desc)
	}
	if n := full.Find(dashTID(views.SettingsNavID) + " a").Length(); n != len(views.SettingsSections) {
		t.Errorf("%d section links", n)
	}
	for _, sec := range views.SettingsSections {
		dashFind(t, full, "section#"+sec.ID+" h2")
	}
	if got := rtText(dashFind(t, full, dashTID(views.LockoutPreviewID))); !strings.HasSuffix(got, "1 min → 2 min → 4 min → 8 min → 16 min → 30 min (cap)") {
		t.Errorf("preview %q", got)
	}

	// Saving a card from the dashboard: the answer says "just now" at once
	// (the audit entry is written in batches).
	form := spCardForm(t, d, views.SectionRequestQueue, "requestQueue.requestsPerMinute", "90")
	doc := dashParse(t, d.do("PUT", "/settings/resilience/"+views.SectionRequestQueue, form, true, http.StatusOK))
	if got := rtText(dashFind(t, doc, dashTID(views.RowID(views.RowSettingsLastSaved, views.SectionRequestQueue)))); got != "Last saved just now" {
		t.Errorf("after Save: %q", got)
	}

	// The preview: what the card would do with the values typed; nothing stored.
	pv := url.Values{"modelLockout.baseCooldownMs": {"120000"}, "modelLockout.maxCooldownMs": {"600000"},
		"modelLockout.maxBackoffSteps": {""}, "modelLockout.useExponentialBackoff": {"on"}}
	doc = dashParse(t, d.do("POST", views.LockoutPreviewURL, pv, true, http.StatusOK))
	if got := rtText(dashFind(t, doc, dashTID(views.LockoutPreviewID))); !strings.HasSuffix(got, "2 min → 4 min → 8 min → 10 min (cap)") {
		t.Errorf("typed preview %q", got)
	}
	pv.Set("modelLockout.maxCooldownMs", "60000")
	doc = dashParse(t, d.do("POST", views.LockoutPreviewURL, pv, true, http.StatusOK))
	if got := rtText(dashFind(t, doc, dashTID(views.LockoutPreviewID))); !strings.Contains(got, "at least as long") {
		t.Errorf("preview of max below base %q", got)
	}
	var doc2 struct {
		ModelLockout struct {
			BaseCooldownMs int64 `json:"baseCooldownMs"`
		} `json:"modelLockout"`
	}
	if err := json.Unmarshal(a.admin("GET", "/api/resilience", "").Body.Bytes(), &doc2); err != nil || doc2.ModelLockout.BaseCooldownMs != 60000 {
		t.Errorf("the preview changed the stored settings: %+v %v", doc2, err)
	}
	if !testkit.PollUntil(5*time.Second, func() bool { return a.Server.AuditLogStats().Written >= 2 }) {
		t.Fatal("the dashboard save was not audited")
	}
	if n := len(itemsOf(t, a.mustJSON(t, "GET", "/api/audit?limit=500", "", 200))); n != 2 {
		t.Errorf("%d audit entries, want 2 (the previews are not admin actions)", n)
	}
}
