package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/views"
)

// Settings → Resilience, Feature flags, Account and the Request logs pages
// (50-dashboard §6.7, §6.9–§6.11), through the real server.

// spCardForm is what a browser would submit from a card as it is shown,
// with overrides: kv pairs of name and value; "-" unticks a switch (removes
// the field), anything else sets it.
func spCardForm(t *testing.T, d *dashClient, section string, kv ...string) url.Values {
	t.Helper()
	doc := dashParse(t, d.do("GET", "/settings/resilience/"+section, nil, true, http.StatusOK))
	return spFormValues(t, dashFind(t, doc, dashTID(views.SettingsCardTestID(section))+" form"), kv...)
}

// spFormValues collects a form's successful controls, then applies kv.
func spFormValues(t *testing.T, form *goquery.Selection, kv ...string) url.Values {
	t.Helper()
	v := url.Values{}
	form.Find("input, select, textarea").Each(func(_ int, s *goquery.Selection) {
		name, ok := s.Attr("name")
		if !ok || name == "" || s.Is("[disabled]") {
			return
		}
		switch {
		case s.Is("input[type=checkbox]"):
			if _, on := s.Attr("checked"); on {
				v.Add(name, s.AttrOr("value", "on"))
			}
		case s.Is("select"):
			opt := s.Find("option[selected]")
			if opt.Length() == 0 {
				opt = s.Find("option").First()
			}
			v.Add(name, opt.AttrOr("value", ""))
		case s.Is("textarea"):
			v.Add(name, s.Text())
		default:
			v.Add(name, s.AttrOr("value", ""))
		}
	})
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "-" {
			v.Del(kv[i])
			continue
		}
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// spResilience is GET /api/resilience with the admin cookie.
func spResilience(t *testing.T, d *dashClient) map[string]any {
	t.Helper()
	req := testkit.Request("GET", "/api/resilience", "", "Sec-Fetch-Site", "same-origin")
	req.AddCookie(d.cookie)
	rec := d.app.Do(req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/resilience: %d %s", rec.Code, rec.Body.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// spAPI patches through the management API (another writer).
func spAPI(t *testing.T, d *dashClient, method, path, body string) {
	t.Helper()
	req := testkit.Request(method, path, body, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json")
	req.AddCookie(d.cookie)
	if rec := d.app.Do(req); rec.Code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
	}
}

func spSection(doc map[string]any, path string) any {
	var cur any = doc
	for _, p := range strings.Split(path, ".") {
		cur = cur.(map[string]any)[p]
	}
	return cur
}

// spRoutes are the routes of this file; {s} is a session id hash, {l} a log id.
var spRoutes = []dashRoute{
	{"GET", "/settings/resilience"}, {"GET", "/settings/resilience/model-lockout"}, {"GET", "/settings/resilience/model-lockout?defaults=1"},
	{"POST", "/settings/resilience/model-lockout"}, {"PUT", "/settings/resilience/connection-cooldown"},
	{"POST", "/settings/resilience/error-rules"}, {"POST", "/settings/resilience/error-rules/builder"},
	{"GET", "/settings/flags"}, {"PUT", "/settings/flags/modelLockout"}, {"POST", "/settings/flags/modelLockout"},
	{"DELETE", "/settings/flags/modelLockout"}, {"POST", "/settings/flags/modelLockout/reset"},
	{"GET", "/settings/account"}, {"GET", "/settings/account/confirm-end-others"}, {"POST", "/settings/account/password"},
	{"POST", "/settings/account/sessions/end-others"}, {"POST", "/settings/account/sessions/{s}/end"},
	{"GET", "/logs"}, {"GET", "/logs/{l}"},
}

func TestSettingsPagesRenderFreshInstall(t *testing.T) {
	d := newDashClient(t)
	var ids []string
	for _, def := range views.SettingsCardDefs {
		ids = append(ids, views.SettingsCardTestID(def.Section))
	}
	if views.SettingsCardTestID(views.SectionModelLockout) != views.ModelLockoutCardID {
		t.Fatalf("model lockout card test id %q, want %q", views.SettingsCardTestID(views.SectionModelLockout), views.ModelLockoutCardID)
	}
	full, _ := d.page("/settings/resilience", append(ids, views.ResiliencePageID)...)
	if got := full.Find("title").Text(); got != "Resilience settings · Switchyard" {
		t.Errorf("title %q", got)
	}
	if got := full.Find(`nav a[aria-current="page"]`).First().Text(); got != "Resilience" {
		t.Errorf("current nav entry %q", got)
	}
	// The card order follows 40-admin-api §2 and every card posts its own section.
	var order []string
	full.Find("section.card[data-testid]").Each(func(_ int, s *goquery.Selection) { order = append(order, s.AttrOr("data-testid", "")) })
	if strings.Join(order, ",") != strings.Join(ids, ",") {
		t.Errorf("card order %v", order)
	}
	for _, def := range views.SettingsCardDefs {
		form := dashFind(t, full, dashTID(views.SettingsCardTestID(def.Section))+" form")
		if got := form.AttrOr("hx-post", ""); got != "/settings/resilience/"+def.Section {
			t.Errorf("%s posts to %q", def.Section, got)
		}
		if form.Find(`input[name="revision"]`).AttrOr("value", "") != "0" {
			t.Errorf("%s: revision input missing", def.Section)
		}
	}

	// Request queue: maxQueueDepth and maxWaitMs with default, range and source.
	rq := full.Find(dashTID(views.SettingsCardTestID(views.SectionRequestQueue)))
	if help := rq.Find("#requestQueue-maxWaitMs-help").Text(); !strings.Contains(help, "Default 15000 ms (15 s); 1–30000 ms.") ||
		!strings.Contains(help, "RATE_LIMIT_MAX_WAIT_MS") || !strings.Contains(help, "time spent queued does not count") {
		t.Errorf("maxWaitMs help %q", help)
	}
	if help := rq.Find("#requestQueue-maxQueueDepth-help").Text(); !strings.Contains(help, "0 = unbounded.") || !strings.Contains(help, "0–100000") {
		t.Errorf("maxQueueDepth help %q", help)
	}
	// Connection cooldown: one fieldset per auth class.
	cc := full.Find(dashTID(views.SettingsCardTestID(views.SectionConnectionCooldown)))
	if n := cc.Find("fieldset legend").Length(); n != 3 {
		t.Errorf("connection cooldown has %d profile groups", n)
	}
	if v := cc.Find("#connectionCooldown-apikey-maxCooldownMs").AttrOr("value", ""); v != "300000" {
		t.Errorf("apikey maxCooldownMs %q", v)
	}
	// The Model Lockout card's six fields, defaults shown, source default.
	ml := dashFind(t, full, dashTID(views.ModelLockoutCardID))
	want := map[string]string{"modelLockout-errorCodes": "403, 404, 429, 502, 503, 504", "modelLockout-baseCooldownMs": "120000",
		"modelLockout-maxCooldownMs": "1800000", "modelLockout-maxBackoffSteps": "10"}
	for id, v := range want {
		if got := dashFind(t, full, dashTID(views.ModelLockoutCardID)+" input#"+id).AttrOr("value", ""); got != v {
			t.Errorf("#%s = %q, want %q", id, got, v)
		}
	}
	if _, on := ml.Find("input#modelLockout-enabled[role=switch]").Attr("checked"); on {
		t.Error("model lockout is on by default")
	}
	if _, on := ml.Find("input#modelLockout-useExponentialBackoff[role=switch]").Attr("checked"); !on {
		t.Error("exponential backoff is off by default")
	}
	if got := ml.Find(dashTID(views.SettingSourceTestID("modelLockout.enabled"))).Text(); got != "default" {
		t.Errorf("source %q", got)
	}
	if help := ml.Find("#modelLockout-baseCooldownMs-help").Text(); !strings.Contains(help, "Default 120000 ms (2 min); 5000–600000 ms.") {
		t.Errorf("base help %q", help)
	}
	if ml.Find(".field__changed").Length() != 0 {
		t.Error("a default value is marked changed")
	}
	if ml.Find(dashTID(views.LockoutActiveLinkID)).Length() != 0 {
		t.Error("active lockouts link without lockouts")
	}
	// Emergency fallback: its switch and model live on the flags page.
	ef := full.Find(dashTID(views.SettingsCardTestID(views.SectionEmergencyFallback)))
	if ef.Find("#emergencyFallback-enabled").Length() != 0 || ef.Find("#emergencyFallback-maxOutputTokens").Length() != 1 {
		t.Error("emergency fallback card fields")
	}
	// Error rules: empty editor, built-in rules listed read-only.
	er := full.Find(dashTID(views.SettingsCardTestID(views.SectionErrorRules)))
	if er.Find(dashTID(views.ErrorRulesTableID)+" tbody select").Length() != 0 {
		t.Error("rules editor not empty")
	}
	if er.Find(dashTID(views.ErrorRulesBuiltinID)+" .tag").Length() == 0 {
		t.Error("built-in rules not listed")
	}

	// One card alone: fragment for htmx, the whole page otherwise.
	_, frag := d.page("/settings/resilience/model-lockout", views.ModelLockoutCardID)
	if frag.Find("section.card").Length() != 1 {
		t.Error("card fragment carries other cards")
	}
	d.do("GET", "/settings/resilience/no-such-card", nil, true, http.StatusNotFound)

	// Feature flags: every flag of the registry with source and env name.
	full, _ = d.page("/settings/flags", views.FlagsPageID, views.FlagsListID)
	if n := full.Find(dashTID(views.FlagsListID) + " > li").Length(); n != 10 {
		t.Errorf("%d flags listed, want 10", n)
	}
	row := dashFind(t, full, dashTID(views.RowID(views.RowFlag, "providerCooldown")))
	if txt := row.Text(); !strings.Contains(txt, "PROVIDER_COOLDOWN_ENABLED") || !strings.Contains(txt, "without restart") {
		t.Errorf("providerCooldown row %q", txt)
	}
	if got := row.Find(dashTID(views.RowID(views.RowFlagSource, "providerCooldown"))).Text(); got != "Default" {
		t.Errorf("source %q", got)
	}
	if row.Find(dashTID(views.RowID(views.RowFlagReset, "providerCooldown"))).Length() != 0 {
		t.Error("Reset shown for a flag at its default")
	}
	efRow := dashFind(t, full, dashTID(views.RowID(views.RowFlag, "emergencyFallback")))
	if !strings.Contains(efRow.Text(), "makes one last attempt on this model") || efRow.Find("input[name=target]").Length() != 1 {
		t.Errorf("emergency fallback row %q", efRow.Text())
	}
	if !strings.Contains(full.Find(dashTID(views.RowID(views.RowFlag, "logRequestBodies"))).Text(), "Bodies may contain your users' data.") {
		t.Error("log request bodies note missing")
	}

	// Account: this session, no other.
	full, _ = d.page("/settings/account", views.AccountPageID, views.PasswordFormID, views.SessionsListID, views.SessionCurrentTagID)
	if n := full.Find(dashTID(views.SessionsListID) + " tbody tr[data-testid]").Length(); n != 1 {
		t.Errorf("%d sessions listed", n)
	}
	if full.Find(dashTID(views.SessionsEndOthersID)).Length() != 0 {
		t.Error("sign out others offered without another session")
	}
	for _, name := range []string{"current", "new", "confirm"} {
		in := dashFind(t, full, "input#"+name)
		if in.AttrOr("type", "") != "password" || in.AttrOr("value", "") != "" {
			t.Errorf("#%s %s", name, goquery.NodeName(in))
		}
	}

	// Request logs: the empty state.
	full, frag = d.page("/logs", views.LogsPageID, views.LogsFiltersID, views.LogsListID, views.LogsEmptyID)
	if got := strings.TrimSpace(full.Find(dashTID(views.LogsEmptyID) + " .empty__text").Text()); got != "No requests yet. Send the curl from the Overview page." {
		t.Errorf("empty state %q", got)
	}
	if frag.Find(dashTID(views.LogsFiltersID)).Length() != 1 {
		t.Error("htmx page fragment lacks the filters")
	}
	// The filter form swaps the list only.
	req := d.req("GET", "/logs?outcome=success", nil, true)
	req.Header.Set("HX-Target", views.LogsListID)
	rec := d.send(req)
	doc := dashCheckHTML(t, rec)
	if doc.Find(dashTID(views.LogsFiltersID)).Length() != 0 || doc.Find(dashTID(views.LogsNoMatchID)).Length() != 1 {
		t.Errorf("list fragment: %s", dashTrunc(rec.Body.String(), 500))
	}
	d.do("GET", "/logs/l_missing", nil, true, http.StatusNotFound)
}

func TestSettingsPagesRenderSeeded(t *testing.T) {
	d := newDashClient(t)
	dashSeed(t, d.app)
	other := d.app.Login() // a second browser
	spAPI(t, d, "PATCH", "/api/resilience", `{"modelLockout": {"enabled": true, "baseCooldownMs": 60000},
		"providerErrorRules": [{"provider": "openai", "status": 429, "match": "daily", "reason": "quota_exhausted", "scope": "connection"}]}`)
	spAPI(t, d, "PATCH", "/api/feature-flags", `{"providerCooldown": true}`)

	full, _ := d.page("/settings/resilience", views.ModelLockoutCardID)
	ml := full.Find(dashTID(views.ModelLockoutCardID))
	if got := ml.Find(dashTID(views.SettingSourceTestID("modelLockout.baseCooldownMs"))).Text(); got != "saved" {
		t.Errorf("base source %q", got)
	}
	if !strings.Contains(ml.Find(dashTID(views.SettingFieldTestID("modelLockout.baseCooldownMs"))).Text(), "changed") {
		t.Error("changed marker missing")
	}
	if v := ml.Find("#modelLockout-baseCooldownMs").AttrOr("value", ""); v != "60000" {
		t.Errorf("base %q", v)
	}
	if got := ml.Find(`input[name="revision"]`).AttrOr("value", ""); got != "2" {
		t.Errorf("revision %q, want 2", got)
	}
	rules := full.Find(dashTID(views.ErrorRulesTableID))
	if rules.Find(`select[name="providerErrorRules.0.provider"] option[selected]`).AttrOr("value", "") != "openai" ||
		rules.Find(`input[name="providerErrorRules.0.match"]`).AttrOr("value", "") != "daily" ||
		!strings.HasPrefix(rules.Find(`input[name="providerErrorRules.0.id"]`).AttrOr("value", ""), "r_") {
		t.Errorf("stored rule not shown: %s", dashTrunc(rules.Text(), 500))
	}

	full, _ = d.page("/settings/flags", views.FlagsListID)
	row := full.Find(dashTID(views.RowID(views.RowFlag, "providerCooldown")))
	if got := row.Find(dashTID(views.RowID(views.RowFlagSource, "providerCooldown"))).Text(); got != "Set on this dashboard" {
		t.Errorf("source %q", got)
	}
	if _, on := row.Find(dashTID(views.RowID(views.RowFlagSwitch, "providerCooldown"))).Attr("checked"); !on {
		t.Error("switch off")
	}
	dashFind(t, full, dashTID(views.RowID(views.RowFlagReset, "providerCooldown")))
	if full.Find("datalist#"+views.FlagFieldID("emergencyFallback", "targets")+` option[value="fast"]`).Length() != 1 {
		t.Error("emergency fallback choices lack the combo")
	}

	full, _ = d.page("/settings/account", views.SessionsListID)
	if n := full.Find(dashTID(views.SessionsListID) + " tbody tr[data-testid]").Length(); n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
	if n := full.Find(dashTID(views.SessionCurrentTagID)).Length(); n != 1 {
		t.Errorf("%d current tags", n)
	}
	dashFind(t, full, dashTID(views.SessionsEndOthersID))
	if strings.Contains(full.Text(), other.Value) || strings.Contains(full.Text(), d.cookie.Value) {
		t.Error("a session cookie is on the page")
	}
}

func TestSettingsModelLockoutCardSaveEnablesLockout(t *testing.T) {
	d := newDashClient(t)
	if d.app.Server.Resilience().Lockouts.Enabled() {
		t.Fatal("lockout on at start")
	}
	form := spCardForm(t, d, views.SectionModelLockout, "modelLockout.enabled", "on", "modelLockout.errorCodes", "429, 404,404",
		"modelLockout.baseCooldownMs", "60000", "modelLockout.maxCooldownMs", "600000", "modelLockout.maxBackoffSteps", "5",
		"modelLockout.useExponentialBackoff", "-")
	rec := d.do("POST", "/settings/resilience/model-lockout", form, true, http.StatusOK)
	var saved struct{ Section string }
	_ = json.Unmarshal(dashEvents(t, rec)[views.EventSettingsSaved], &saved)
	if saved.Section != views.SectionModelLockout {
		t.Errorf("settings-saved %q", rec.Header().Get("HX-Trigger"))
	}
	if got := dashToast(t, rec); got != "Model lockout saved." {
		t.Errorf("toast %q", got)
	}
	doc := dashCheckHTML(t, rec)
	card := dashFind(t, doc, dashTID(views.ModelLockoutCardID))
	dashFind(t, doc, dashTID(views.ModelLockoutCardID)+" "+dashTID(views.SettingsSavedID))
	if v := card.Find("#modelLockout-errorCodes").AttrOr("value", ""); v != "404, 429" {
		t.Errorf("codes shown %q (sorted, deduplicated)", v)
	}
	if _, on := card.Find("#modelLockout-enabled").Attr("checked"); !on {
		t.Error("enabled not shown")
	}
	// The other cards get the new revision out of band.
	if oob := doc.Find(`input[hx-swap-oob][name="revision"]`); oob.Length() != len(views.SettingsCardDefs)-1 || oob.First().AttrOr("value", "") != "1" {
		t.Errorf("%d out-of-band revisions", oob.Length())
	}

	// The service the router reads, and the API twin, agree.
	if !d.app.Server.Resilience().Lockouts.Enabled() {
		t.Error("lockout not enabled in the engine")
	}
	ml := spSection(spResilience(t, d), "modelLockout").(map[string]any)
	if ml["enabled"] != true || ml["baseCooldownMs"] != 60000.0 || ml["maxCooldownMs"] != 600000.0 || ml["maxBackoffSteps"] != 5.0 ||
		ml["useExponentialBackoff"] != false || len(ml["errorCodes"].([]any)) != 2 {
		t.Errorf("GET /api/resilience modelLockout = %v", ml)
	}

	// Saving another card right after uses the refreshed revision (no 409).
	form = spCardForm(t, d, views.SectionSessionAffinity, "sessionAffinity.ttlMs", "60000")
	d.do("POST", "/settings/resilience/session-affinity", form, true, http.StatusOK)

	// A blank number drops the stored value: the default applies again.
	form = spCardForm(t, d, views.SectionModelLockout, "modelLockout.baseCooldownMs", "")
	rec = d.do("PUT", "/settings/resilience/model-lockout", form, true, http.StatusOK)
	if got := dashParse(t, rec).Find(dashTID(views.SettingSourceTestID("modelLockout.baseCooldownMs"))).Text(); got != "default" {
		t.Errorf("source after blank %q", got)
	}
	if v := spSection(spResilience(t, d), "modelLockout.baseCooldownMs"); v != 120000.0 {
		t.Errorf("base after blank %v", v)
	}

	// Restore defaults re-renders with the defaults, unsaved.
	doc = dashParse(t, d.do("GET", "/settings/resilience/model-lockout?defaults=1", nil, true, http.StatusOK))
	dashFind(t, doc, dashTID(views.SettingsDefaultsNoteID))
	if _, on := doc.Find("#modelLockout-enabled").Attr("checked"); on {
		t.Error("defaults show lockout on")
	}
	if !d.app.Server.Resilience().Lockouts.Enabled() {
		t.Error("Restore defaults saved something")
	}

	// Without script the form post redirects back to the card.
	form = spCardForm(t, d, views.SectionModelLockout)
	rec = d.do("POST", "/settings/resilience/model-lockout", form, false, http.StatusSeeOther)
	if loc := rec.Header().Get("Location"); loc != "/settings/resilience#settings-model-lockout" {
		t.Errorf("Location %q", loc)
	}
}

func TestSettingsMaxBelowBaseIs422AndSavesNothing(t *testing.T) {
	d := newDashClient(t)
	before := spResilience(t, d)
	form := spCardForm(t, d, views.SectionConnectionCooldown, "connectionCooldown.apikey.baseCooldownMs", "5000",
		"connectionCooldown.apikey.maxCooldownMs", "4000")
	rec := d.do("POST", "/settings/resilience/connection-cooldown", form, true, http.StatusUnprocessableEntity)
	doc := dashCheckHTML(t, rec)
	const field = "connectionCooldown-apikey-maxCooldownMs"
	const msg = "The maximum cooldown must be at least the base cooldown (5000 ms)."
	if got := strings.TrimSpace(doc.Find("#" + field + "-error").Text()); got != msg {
		t.Errorf("inline error %q", got)
	}
	in := dashFind(t, doc, "input#"+field)
	if in.AttrOr("aria-invalid", "") != "true" || !strings.Contains(in.AttrOr("aria-describedby", ""), field+"-error") {
		t.Error("control not marked invalid")
	}
	if _, ok := in.Attr("autofocus"); !ok {
		t.Error("first invalid field not focused")
	}
	if in.AttrOr("value", "") != "4000" || doc.Find("#connectionCooldown-apikey-baseCooldownMs").AttrOr("value", "") != "5000" {
		t.Error("submitted values not kept")
	}
	summary := dashFind(t, doc, dashTID(views.ErrorSummaryID))
	if link := summary.Find(`a[href="#` + field + `"]`); !strings.Contains(link.Text(), msg) || !strings.Contains(link.Text(), "API-key connections") {
		t.Errorf("summary %q", summary.Text())
	}
	if after := spResilience(t, d); !spJSONEqual(before, after) {
		t.Error("a failed save changed the settings")
	}
	if len(dashEvents(t, rec)) != 0 {
		t.Errorf("422 announced events: %s", rec.Header().Get("HX-Trigger"))
	}

	// The same rule on the Model lockout card, and the generic sentences.
	form = spCardForm(t, d, views.SectionModelLockout, "modelLockout.maxCooldownMs", "60000", "modelLockout.maxBackoffSteps", "x",
		"modelLockout.errorCodes", "404, 700")
	doc = dashCheckHTML(t, d.do("POST", "/settings/resilience/model-lockout", form, true, http.StatusUnprocessableEntity))
	for id, want := range map[string]string{
		"modelLockout-maxCooldownMs":   "The maximum cooldown must be at least the base cooldown (120000 ms).",
		"modelLockout-maxBackoffSteps": "Enter a whole number.",
		"modelLockout-errorCodes":      "Status codes must be numbers from 400 to 599, separated by commas.",
	} {
		if got := strings.TrimSpace(doc.Find("#" + id + "-error").Text()); got != want {
			t.Errorf("#%s error %q, want %q", id, got, want)
		}
	}
	form = spCardForm(t, d, views.SectionProviderBreaker, "providerBreaker.oauth.degradationThreshold", "8")
	doc = dashCheckHTML(t, d.do("POST", "/settings/resilience/provider-breaker", form, true, http.StatusUnprocessableEntity))
	if got := strings.TrimSpace(doc.Find("#providerBreaker-oauth-degradationThreshold-error").Text()); got != "Degraded-at must be lower than open-at (8)." {
		t.Errorf("breaker error %q", got)
	}
	form = spCardForm(t, d, views.SectionRequestQueue, "requestQueue.maxWaitMs", "45000")
	doc = dashCheckHTML(t, d.do("POST", "/settings/resilience/request-queue", form, true, http.StatusUnprocessableEntity))
	if got := strings.TrimSpace(doc.Find("#requestQueue-maxWaitMs-error").Text()); got != "Must be between 1 and 30000." {
		t.Errorf("range error %q", got)
	}
	// Full page without script: 422, the page with the card in error.
	rec = d.do("POST", "/settings/resilience/request-queue", form, false, http.StatusUnprocessableEntity)
	if doc := dashCheckHTML(t, rec); doc.Find("main#content").Length() != 1 || doc.Find("#requestQueue-maxWaitMs-error").Length() != 1 {
		t.Error("full-page 422 lacks the layout or the error")
	}
	if after := spResilience(t, d); !spJSONEqual(before, after) {
		t.Error("a failed save changed the settings")
	}
}

func spJSONEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestSettingsStaleRevisionIs409AndReloadsTheCard(t *testing.T) {
	d := newDashClient(t)
	form := spCardForm(t, d, views.SectionWaitForCooldown, "waitForCooldown.maxRetries", "3")
	spAPI(t, d, "PATCH", "/api/resilience", `{"waitForCooldown": {"maxRetries": 7}}`) // another admin
	rec := d.do("POST", "/settings/resilience/wait-for-cooldown", form, true, http.StatusConflict)
	dashWantEvent(t, rec, views.EventSettingsStalePrefix+views.SectionWaitForCooldown)
	if got := dashToast(t, rec); got != "These settings were changed elsewhere. The card now shows the current values." {
		t.Errorf("toast %q", got)
	}
	if v := spSection(spResilience(t, d), "waitForCooldown.maxRetries"); v != 7.0 {
		t.Errorf("maxRetries %v: the stale save overwrote", v)
	}
	doc := dashParse(t, d.do("GET", "/settings/resilience/wait-for-cooldown", nil, true, http.StatusOK))
	card := dashFind(t, doc, dashTID(views.SettingsCardTestID(views.SectionWaitForCooldown)))
	if card.AttrOr("hx-trigger", "") != views.EventSettingsStalePrefix+views.SectionWaitForCooldown+" from:body" {
		t.Errorf("card does not reload on the stale event: %q", card.AttrOr("hx-trigger", ""))
	}
	if v := card.Find("#waitForCooldown-maxRetries").AttrOr("value", ""); v != "7" {
		t.Errorf("reloaded value %q", v)
	}
	// The cross-field rules of the waits read as sentences.
	form = spCardForm(t, d, views.SectionWaitForCooldown, "waitForCooldown.maxRetries", "0")
	doc = dashParse(t, d.do("POST", "/settings/resilience/wait-for-cooldown", form, true, http.StatusUnprocessableEntity))
	if got := strings.TrimSpace(doc.Find("#waitForCooldown-maxRetries-error").Text()); got != "Set retries and wait above 0, or switch this off." {
		t.Errorf("wait rule %q", got)
	}
	form = spCardForm(t, d, views.SectionWaitForCooldown, "waitForCooldown.budgetMs", "1000")
	doc = dashParse(t, d.do("POST", "/settings/resilience/wait-for-cooldown", form, true, http.StatusUnprocessableEntity))
	if got := strings.TrimSpace(doc.Find("#waitForCooldown-budgetMs-error").Text()); got != "The budget must be at least one wait (90000 ms)." {
		t.Errorf("budget rule %q", got)
	}
}

func TestSettingsErrorRulesEditor(t *testing.T) {
	d := newDashClient(t)
	// Add two rows (nothing saved), fill them, move the second up, save.
	form := spCardForm(t, d, views.SectionErrorRules)
	form.Set("op", "add")
	rec := d.do("POST", "/settings/resilience/error-rules/builder", form, true, http.StatusOK)
	card := dashFind(t, dashCheckHTML(t, rec), dashTID(views.SettingsCardTestID(views.SectionErrorRules))+" form")
	if _, ok := card.Find(`select[name="providerErrorRules.0.provider"]`).Attr("autofocus"); !ok {
		t.Error("new row's provider not focused")
	}
	form = spFormValues(t, card, "op", "add")
	card = dashFind(t, dashParse(t, d.do("POST", "/settings/resilience/error-rules/builder", form, true, http.StatusOK)),
		dashTID(views.SettingsCardTestID(views.SectionErrorRules))+" form")
	if n := card.Find(dashTID(views.ErrorRulesTableID) + " tbody tr[data-testid]").Length(); n != 2 {
		t.Fatalf("%d rows after two adds", n)
	}
	if len(spSection(spResilience(t, d), "providerErrorRules").([]any)) != 0 {
		t.Fatal("the builder saved rules")
	}
	form = spFormValues(t, card, "providerErrorRules.0.provider", "openai", "providerErrorRules.0.status", "429",
		"providerErrorRules.0.reason", "rate_limit", "providerErrorRules.0.scope", "connection",
		"providerErrorRules.1.provider", "anthropic", "providerErrorRules.1.status", "529", "providerErrorRules.1.match", "overloaded",
		"providerErrorRules.1.reason", "model_capacity", "providerErrorRules.1.scope", "model", "providerErrorRules.1.lockScope", "exact",
		"op", "up:1")
	card = dashFind(t, dashParse(t, d.do("POST", "/settings/resilience/error-rules/builder", form, true, http.StatusOK)),
		dashTID(views.SettingsCardTestID(views.SectionErrorRules))+" form")
	if got := card.Find(`select[name="providerErrorRules.0.provider"] option[selected]`).AttrOr("value", ""); got != "anthropic" {
		t.Fatalf("row 0 after up:1 is %q", got)
	}
	form = spFormValues(t, card)
	form.Del("op")
	rec = d.do("POST", "/settings/resilience/error-rules", form, true, http.StatusOK)
	dashWantEvent(t, rec, views.EventSettingsSaved)
	rules := spSection(spResilience(t, d), "providerErrorRules").([]any)
	if len(rules) != 2 || rules[0].(map[string]any)["provider"] != "anthropic" || rules[0].(map[string]any)["lockScope"] != "exact" ||
		rules[1].(map[string]any)["status"] != 429.0 {
		t.Fatalf("stored rules %v", rules)
	}

	// A shadowed rule and a bad status: 422 with the rule messages, nothing saved.
	card = dashFind(t, dashParse(t, rec), dashTID(views.SettingsCardTestID(views.SectionErrorRules))+" form")
	form = spFormValues(t, card, "op", "add")
	card = dashFind(t, dashParse(t, d.do("POST", "/settings/resilience/error-rules/builder", form, true, http.StatusOK)),
		dashTID(views.SettingsCardTestID(views.SectionErrorRules))+" form")
	form = spFormValues(t, card, "providerErrorRules.2.provider", "openai", "providerErrorRules.2.status", "42x")
	doc := dashCheckHTML(t, d.do("POST", "/settings/resilience/error-rules", form, true, http.StatusUnprocessableEntity))
	if got := strings.TrimSpace(doc.Find("#providerErrorRules-2-status-error").Text()); got != "Status must be a number from 100 to 599." {
		t.Errorf("status error %q", got)
	}
	form.Set("providerErrorRules.2.status", "429")
	form.Set("providerErrorRules.2.scope", "connection")
	doc = dashCheckHTML(t, d.do("POST", "/settings/resilience/error-rules", form, true, http.StatusUnprocessableEntity))
	if got := strings.TrimSpace(doc.Find("#providerErrorRules-2-error").Text()); got != "Rule 3 can never match: rule 2 above it has the same provider and status and an empty match text." {
		t.Errorf("shadow error %q", got)
	}
	if n := len(spSection(spResilience(t, d), "providerErrorRules").([]any)); n != 2 {
		t.Fatalf("%d rules stored after failed saves", n)
	}
	// Remove both: the list is empty again.
	form = spCardForm(t, d, views.SectionErrorRules, "op", "remove:0")
	card = dashFind(t, dashParse(t, d.do("POST", "/settings/resilience/error-rules/builder", form, true, http.StatusOK)),
		dashTID(views.SettingsCardTestID(views.SectionErrorRules))+" form")
	form = spFormValues(t, card, "op", "remove:0")
	card = dashFind(t, dashParse(t, d.do("POST", "/settings/resilience/error-rules/builder", form, true, http.StatusOK)),
		dashTID(views.SettingsCardTestID(views.SectionErrorRules))+" form")
	form = spFormValues(t, card)
	form.Del("op")
	d.do("POST", "/settings/resilience/error-rules", form, true, http.StatusOK)
	if n := len(spSection(spResilience(t, d), "providerErrorRules").([]any)); n != 0 {
		t.Fatalf("%d rules after removing all", n)
	}
}

func TestSettingsFlagToggleRoundTrip(t *testing.T) {
	d := newDashClient(t)
	lockout := d.app.Server.Resilience().Lockouts
	rec := d.do("PUT", "/settings/flags/modelLockout", url.Values{"value": {"on"}}, true, http.StatusOK)
	dashWantEvent(t, rec, views.EventFlagsChanged)
	if got := dashToast(t, rec); got != "Model lockout is on." {
		t.Errorf("toast %q", got)
	}
	row := dashFind(t, dashCheckHTML(t, rec), dashTID(views.RowID(views.RowFlag, "modelLockout")))
	if _, on := row.Find(dashTID(views.RowID(views.RowFlagSwitch, "modelLockout"))).Attr("checked"); !on {
		t.Error("row shows the switch off")
	}
	if got := row.Find(dashTID(views.RowID(views.RowFlagSource, "modelLockout"))).Text(); got != "Set on this dashboard" {
		t.Errorf("source %q", got)
	}
	if row.Find(dashTID(views.SettingsSavedID)).Length() != 1 {
		t.Error("no Saved line")
	}
	if !lockout.Enabled() || spSection(spResilience(t, d), "modelLockout.enabled") != true {
		t.Fatal("flag not applied")
	}
	// The settings card shows the same switch.
	doc := dashParse(t, d.do("GET", "/settings/resilience/model-lockout", nil, true, http.StatusOK))
	if _, on := doc.Find("#modelLockout-enabled").Attr("checked"); !on {
		t.Error("card disagrees with the flag")
	}
	// Off (unticked switch sends nothing), then reset to the default.
	d.do("PUT", "/settings/flags/modelLockout", url.Values{}, true, http.StatusOK)
	if lockout.Enabled() {
		t.Fatal("flag not switched off")
	}
	d.do("PUT", "/settings/flags/modelLockout", url.Values{"value": {"on"}}, true, http.StatusOK)
	rec = d.do("DELETE", "/settings/flags/modelLockout", nil, true, http.StatusOK)
	dashWantEvent(t, rec, views.EventFlagsChanged)
	if got := dashToast(t, rec); got != "Model lockout reset to its default." {
		t.Errorf("toast %q", got)
	}
	if lockout.Enabled() {
		t.Fatal("reset left lockout on")
	}
	var flags struct {
		Flags []struct {
			Key, Source string
		}
	}
	req := testkit.Request("GET", "/api/feature-flags", "")
	req.AddCookie(d.cookie)
	_ = json.Unmarshal(d.app.Do(req).Body.Bytes(), &flags)
	for _, f := range flags.Flags {
		if f.Key == "modelLockout" && f.Source != "default" {
			t.Errorf("source after reset %q", f.Source)
		}
	}
	// Emergency fallback needs a model; the row says so and nothing is saved.
	rec = d.do("PUT", "/settings/flags/emergencyFallback", url.Values{"value": {"on"}, "target": {""}}, true, http.StatusUnprocessableEntity)
	row = dashFind(t, dashCheckHTML(t, rec), dashTID(views.RowID(views.RowFlag, "emergencyFallback")))
	if got := strings.TrimSpace(row.Find("#" + views.FlagFieldID("emergencyFallback", "target") + "-error").Text()); got != "Choose the model to fall back to." {
		t.Errorf("fallback error %q", got)
	}
	if spSection(spResilience(t, d), "emergencyFallback.enabled") != false {
		t.Fatal("fallback switched on without a model")
	}
	// Unknown flag: 404.
	d.do("PUT", "/settings/flags/noSuchFlag", url.Values{"value": {"on"}}, true, http.StatusNotFound)
	// Without script: POST and a redirect.
	rec = d.do("POST", "/settings/flags/providerCooldown", url.Values{"value": {"on"}}, false, http.StatusSeeOther)
	if loc := rec.Header().Get("Location"); loc != "/settings/flags" {
		t.Errorf("Location %q", loc)
	}
}

func TestSettingsPasswordChangeRotatesSession(t *testing.T) {
	d := newDashClient(t)
	old := d.cookie
	other := d.app.Login()
	const next = "a brand new passphrase 42"

	// Validation: the rules and messages of setup, plus the wrong current password.
	for _, tc := range []struct {
		form  url.Values
		field string
		msg   string
	}{
		{url.Values{"current": {testkit.AdminPassword}, "new": {"short"}, "confirm": {"short"}}, "new", "Use at least 12 characters."},
		{url.Values{"current": {testkit.AdminPassword}, "new": {next}, "confirm": {next + "x"}}, "confirm", "The two passwords do not match."},
		{url.Values{"current": {"not the password"}, "new": {next}, "confirm": {next}}, "current", "The current password is wrong."},
	} {
		rec := d.do("POST", "/settings/account/password", tc.form, true, http.StatusUnprocessableEntity)
		doc := dashCheckHTML(t, rec)
		if got := strings.TrimSpace(doc.Find("#" + tc.field + "-error").Text()); got != tc.msg {
			t.Errorf("%s error %q, want %q", tc.field, got, tc.msg)
		}
		doc.Find("input[type=password]").Each(func(_ int, s *goquery.Selection) {
			if v := s.AttrOr("value", ""); v != "" {
				t.Errorf("password field %s echoes %q", s.AttrOr("id", ""), v)
			}
		})
		if rec.Header().Get("Set-Cookie") != "" {
			t.Error("a failed change issued a cookie")
		}
	}

	rec := d.do("POST", "/settings/account/password", url.Values{"current": {testkit.AdminPassword}, "new": {next}, "confirm": {next}}, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Password changed. Other sessions were signed out." {
		t.Errorf("toast %q", got)
	}
	var fresh *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if strings.HasSuffix(c.Name, "switchyard_session") && c.MaxAge > 0 {
			fresh = c
		}
	}
	if fresh == nil || fresh.Value == old.Value {
		t.Fatalf("no rotated cookie: %v", rec.Result().Cookies())
	}
	doc := dashCheckHTML(t, rec)
	list := dashFind(t, doc, "#"+views.SessionsListID+`[hx-swap-oob="outerHTML"]`)
	if n := list.Find("tbody tr[data-testid]").Length(); n != 1 || list.Find(dashTID(views.SessionCurrentTagID)).Length() != 1 {
		t.Errorf("sessions after change: %d rows", n)
	}
	for _, body := range d.bodies {
		if strings.Contains(body, next) || strings.Contains(body, testkit.AdminPassword) {
			t.Fatal("a response contains a password")
		}
	}

	// The old cookie and the other browser are signed out; the new cookie works.
	for _, c := range []*http.Cookie{old, other} {
		d.cookie = c
		d.do("GET", "/settings/account", nil, true, http.StatusUnauthorized)
	}
	d.cookie = fresh
	d.page("/settings/account", views.SessionCurrentTagID)
	// Sign-in takes the new password.
	form := url.Values{"password": {next}}
	req := testkit.Request("POST", "/login", form.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")
	if rec := d.app.Do(req); rec.Code != http.StatusSeeOther {
		t.Fatalf("sign-in with the new password: %d", rec.Code)
	}
}

func TestSettingsSessionsSignOut(t *testing.T) {
	d := newDashClient(t)
	second, third := d.app.Login(), d.app.Login()
	doc := dashParse(t, d.do("GET", "/settings/account", nil, false, http.StatusOK))
	var others []string
	doc.Find(dashTID(views.SessionsListID) + " tbody tr[data-testid]").Each(func(_ int, s *goquery.Selection) {
		if s.Find(dashTID(views.SessionCurrentTagID)).Length() == 0 {
			others = append(others, strings.TrimPrefix(s.AttrOr("data-testid", ""), views.RowSession+"-"))
		}
	})
	if len(others) != 2 {
		t.Fatalf("other sessions %v", others)
	}
	// One row: Sign out.
	rec := d.do("POST", "/settings/account/sessions/"+others[0]+"/end", nil, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Session signed out." {
		t.Errorf("toast %q", got)
	}
	if n := dashParse(t, rec).Find("tbody tr[data-testid]").Length(); n != 2 {
		t.Errorf("%d sessions left", n)
	}
	d.do("POST", "/settings/account/sessions/"+others[0]+"/end", nil, true, http.StatusNotFound)
	// All others: confirmation first, then the action.
	doc = dashCheckHTML(t, d.do("GET", "/settings/account/confirm-end-others", nil, true, http.StatusOK))
	panel := dashFind(t, doc, dashTID(views.ConfirmPanelID))
	if !strings.Contains(panel.Text(), "Sign out all other sessions?") || doc.Find(dashTID(views.ConfirmSubmitID)).AttrOr("hx-post", "") != "/settings/account/sessions/end-others" {
		t.Errorf("confirmation %q", panel.Text())
	}
	full := dashParse(t, d.do("GET", "/settings/account/confirm-end-others", nil, false, http.StatusOK))
	dashFind(t, full, "#"+views.SessionsSlotID+" "+dashTID(views.ConfirmPanelID))
	rec = d.do("POST", "/settings/account/sessions/end-others", nil, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Signed out 1 other session." {
		t.Errorf("toast %q", got)
	}
	for _, c := range []*http.Cookie{second, third} {
		probe := &dashClient{t: t, app: d.app, cookie: c}
		probe.do("GET", "/settings/account", nil, true, http.StatusUnauthorized)
	}
	d.do("GET", "/settings/account", nil, true, http.StatusOK)
	// This session cannot be ended from its own row.
	var own string
	dashParse(t, d.do("GET", "/settings/account", nil, true, http.StatusOK)).Find(dashTID(views.SessionsListID) + " tbody tr[data-testid]").Each(func(_ int, s *goquery.Selection) {
		own = strings.TrimPrefix(s.AttrOr("data-testid", ""), views.RowSession+"-")
	})
	d.do("POST", "/settings/account/sessions/"+own+"/end", nil, true, http.StatusConflict)
}

func TestSettingsLogsShowAGatewayRequest(t *testing.T) {
	f := newGW(t, "fk-missing", "fk-good")
	f.fu.ScriptModel("fk-missing", "m1", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found"})
	resp := f.post(t, chatBody)
	io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("gateway status %d", resp.StatusCode)
	}
	rid := resp.Header.Get("X-Switchyard-Request-Id")
	rows := waitLogs(t, f, 1)
	e := rows[0]
	if e.ID != rid || e.Attempts < 2 {
		t.Fatalf("log row %+v", e)
	}
	d := &dashClient{t: t, app: f.app, cookie: f.app.Login()}
	keys, _ := f.app.Server.Keys().List(context.Background(), "")

	full, _ := d.page("/logs", views.LogsListID, views.RowID(views.RowLog, rid))
	row := full.Find(dashTID(views.RowID(views.RowLog, rid)))
	if got := strings.TrimSpace(row.Find(`td[data-label="Status"] .badge`).Text()); got != "200" {
		t.Errorf("status cell %q", got)
	}
	if got := strings.TrimSpace(row.Find(`td[data-label="Attempts"]`).Text()); got != "2" {
		t.Errorf("attempts cell %q", got)
	}
	model := row.Find(`td[data-label="Model → served by"]`).Text()
	if !strings.Contains(model, "fake/m1") || !strings.Contains(model, "conn-1") {
		t.Errorf("model cell %q", model)
	}
	if key := row.Find(`td[data-label="API key"]`).Text(); !strings.Contains(key, "client") || !strings.Contains(key, keys[0].Prefix) {
		t.Errorf("key cell %q", key)
	}
	link := row.Find(dashTID(views.RowID(views.RowLogLink, rid)))
	if link.AttrOr("hx-get", "") != "/logs/"+rid || link.AttrOr("hx-target", "") != "#"+views.DrawerID {
		t.Error("row link does not open the drawer")
	}

	// Filters: by key shows it, by another outcome hides it.
	doc := dashParse(t, d.do("GET", "/logs?keyId="+keys[0].ID+"&stream=no", nil, false, http.StatusOK))
	dashFind(t, doc, dashTID(views.RowID(views.RowLog, rid)))
	if doc.Find(`select#keyId option[selected]`).AttrOr("value", "") != keys[0].ID {
		t.Error("key filter not kept")
	}
	doc = dashParse(t, d.do("GET", "/logs?outcome=client_error", nil, false, http.StatusOK))
	dashFind(t, doc, dashTID(views.LogsNoMatchID))
	dashFind(t, doc, dashTID(views.LogsClearID))
	// A reversed range: 422 with the message.
	rec := d.do("GET", "/logs?range=custom&since=2026-03-02T10:00&until=2026-03-01T10:00", nil, false, http.StatusUnprocessableEntity)
	doc = dashCheckHTML(t, rec)
	if got := strings.TrimSpace(doc.Find("#since-error").Text()); got != "The start must be before the end." {
		t.Errorf("range error %q", got)
	}

	// Detail: the drawer for htmx, the page with the drawer otherwise.
	rec = d.do("GET", "/logs/"+rid, nil, true, http.StatusOK)
	doc = dashCheckHTML(t, rec)
	drawer := dashFind(t, doc, dashTID(views.LogDetailID))
	if drawer.Find("[role=dialog]").AttrOr("aria-labelledby", "") != "log-detail-title" {
		t.Error("drawer is not a labelled dialog")
	}
	steps := drawer.Find(dashTID(views.LogTimelineID) + " > li")
	if steps.Length() != 2 {
		t.Fatalf("%d attempts in the timeline", steps.Length())
	}
	first, last := steps.First().Text(), steps.Last().Text()
	if !strings.Contains(first, "fake/m1") || !strings.Contains(first, "conn-0") || !strings.Contains(first, "404") || !strings.Contains(first, "model not found") {
		t.Errorf("attempt 1 %q", first)
	}
	if !strings.Contains(last, "conn-1") || !strings.Contains(last, "200") || !steps.Last().HasClass("timeline__item--success") {
		t.Errorf("last attempt %q", last)
	}
	full, _ = d.page("/logs/"+rid, views.LogDetailID)
	dashFind(t, full, dashTID(views.LogsListID))
	if full.Find(dashTID(views.LogDetailCloseID)).AttrOr("href", "") != "/logs" {
		t.Error("close link of a page-loaded drawer")
	}
	// No client or provider secret in any of it.
	for i, b := range d.bodies {
		for _, canary := range []string{f.key, "fk-missing", "fk-good"} {
			if strings.Contains(b, canary) {
				t.Errorf("response %d contains %q", i, canary)
			}
		}
	}
}

func TestSettingsPagesCrossSiteRefusedAndNothingChanges(t *testing.T) {
	d := newDashClient(t)
	d.app.Login() // a second session, which a refused end-others must keep
	snapshot := func() string {
		sessions, _ := d.app.Server.Auth().Sessions(context.Background())
		b, _ := json.Marshal([]any{spResilience(t, d), len(sessions)})
		return string(b)
	}
	before := snapshot()
	forms := map[string]url.Values{
		"/settings/resilience/model-lockout": {"modelLockout.enabled": {"on"}, "modelLockout.baseCooldownMs": {"60000"}},
		"/settings/account/password":         {"current": {testkit.AdminPassword}, "new": {"another long password"}, "confirm": {"another long password"}},
	}
	n := 0
	for _, r := range spRoutes {
		if r.method == "GET" {
			continue
		}
		n++
		path := strings.NewReplacer("{s}", "deadbeef", "{l}", "l_x").Replace(r.path)
		form := forms[r.path]
		if form == nil {
			form = url.Values{"value": {"on"}}
		}
		for _, site := range []string{"cross-site", "same-site"} {
			req := d.req(r.method, path, form, true)
			req.Header.Set("Sec-Fetch-Site", site)
			if rec := d.send(req); rec.Code != http.StatusForbidden {
				t.Errorf("%s %s from %s: %d, want 403", r.method, path, site, rec.Code)
			}
		}
		req := d.req(r.method, path, form, false)
		req.Header.Del("Sec-Fetch-Site")
		req.Header.Set("Origin", "https://evil.example")
		if rec := d.send(req); rec.Code != http.StatusForbidden {
			t.Errorf("%s %s with a foreign Origin: %d, want 403", r.method, path, rec.Code)
		}
	}
	if n < 10 {
		t.Fatalf("only %d mutation routes walked", n)
	}
	if after := snapshot(); after != before {
		t.Fatalf("a refused request changed state:\nbefore %s\nafter  %s", before, after)
	}
	if d.app.Server.Resilience().Lockouts.Enabled() {
		t.Fatal("lockout switched on by a cross-site request")
	}
}

func TestSettingsPagesNeedASessionAndKeepSecretsOut(t *testing.T) {
	d := newDashClient(t)
	dashSeed(t, d.app)
	_, clientKey := d.app.NewKey("canary-key")
	sessions, _ := d.app.Server.Auth().Sessions(context.Background())
	hash := sessions[0].IDHash

	// Every GET renders as page and fragment with the headers of §3.1 and §5.
	for _, r := range spRoutes {
		if r.method != "GET" || strings.Contains(r.path, "{") {
			continue
		}
		for _, htmx := range []bool{false, true} {
			rec := d.do("GET", r.path, nil, htmx, http.StatusOK)
			doc := dashCheckHTML(t, rec)
			if !htmx && doc.Find("script").Length() != 2 {
				t.Errorf("GET %s: %d scripts", r.path, doc.Find("script").Length())
			}
			for _, h := range []string{"X-Content-Type-Options", "Referrer-Policy", "X-Frame-Options"} {
				if rec.Header().Get(h) == "" {
					t.Errorf("GET %s lacks %s", r.path, h)
				}
			}
		}
	}
	// Mutations answer with the same headers.
	dashCheckHTML(t, d.do("POST", "/settings/resilience/model-lockout", spCardForm(t, d, views.SectionModelLockout), true, http.StatusOK))
	dashCheckHTML(t, d.do("PUT", "/settings/flags/modelLockout", url.Values{}, true, http.StatusOK))

	for i, b := range d.bodies {
		for _, canary := range []string{dashProviderKeyCanary, dashProxyCanary, clientKey, testkit.AdminPassword, d.cookie.Value} {
			if strings.Contains(b, canary) {
				t.Errorf("response %d contains a secret (%q…)", i, canary[:8])
			}
		}
	}

	// Without a session: 303 to sign in, or 401 with HX-Redirect for htmx.
	d.cookie = nil
	for _, r := range spRoutes {
		path := strings.NewReplacer("{s}", hash, "{l}", "l_x").Replace(r.path)
		rec := d.do(r.method, path, nil, false, http.StatusSeeOther)
		if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/login?next=") {
			t.Errorf("%s %s: Location %q", r.method, path, loc)
		}
		rec = d.do(r.method, path, nil, true, http.StatusUnauthorized)
		if hx := rec.Header().Get("HX-Redirect"); !strings.HasPrefix(hx, "/login?next=") {
			t.Errorf("%s %s: HX-Redirect %q", r.method, path, hx)
		}
	}
}
