package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/leases"
	"switchyard/services/resilience"
	"switchyard/views"
)

// Runtime page, live Connections cells, incident badge and Health page
// (50-dashboard §2, §6.4, §6.8, §6.12), driven by real traffic through the
// gateway and the fake upstream.

// rtDash is a signed-in dashboard client on a gateway fixture's app.
func rtDash(t *testing.T, f *gwFixture) *dashClient {
	t.Helper()
	return &dashClient{t: t, app: f.app, cookie: f.app.Login()}
}

// rtChat sends one chat request for model (of provider "fake") and returns its status.
func rtChat(t *testing.T, f *gwFixture, model string) *http.Response {
	t.Helper()
	resp := f.post(t, `{"model":"fake/`+model+`","messages":[{"role":"user","content":"hi"}]}`)
	io.ReadAll(resp.Body)
	return resp
}

// hxTarget sends an htmx request whose target element is target (as htmx
// does with HX-Target) and fails unless the status is want.
func (d *dashClient) hxTarget(method, path, target string, form url.Values, want int) *httptest.ResponseRecorder {
	d.t.Helper()
	r := d.req(method, path, form, true)
	if target != "" {
		r.Header.Set("HX-Target", target)
	}
	rec := d.send(r)
	if rec.Code != want {
		d.t.Fatalf("%s %s (target %q): status %d, want %d\n%s", method, path, target, rec.Code, want, dashTrunc(rec.Body.String(), 3000))
	}
	return rec
}

func rtText(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

// rtIncidents returns the incident badge's link text ("" when hidden).
func rtIncidents(t *testing.T, d *dashClient) string {
	t.Helper()
	doc := dashCheckHTML(t, d.do("GET", "/nav/incidents", nil, true, http.StatusOK))
	slot := dashFind(t, doc, dashTID(views.IncidentBadgeID))
	if trig := slot.AttrOr("hx-trigger", ""); strings.Contains(trig, "load") || !strings.Contains(trig, "every 10s") ||
		!strings.Contains(trig, views.EventResilienceChanged+" from:body") || !strings.Contains(trig, "refresh") {
		t.Errorf("incident badge trigger %q", trig)
	}
	if _, ok := slot.Attr("data-poll"); !ok {
		t.Error("incident badge is not marked data-poll")
	}
	link := slot.Find(dashTID(views.IncidentLinkID))
	if link.Length() == 0 {
		if strings.TrimSpace(slot.Text()) != "" {
			t.Errorf("empty incident badge has text %q", slot.Text())
		}
		return ""
	}
	if href := link.AttrOr("href", ""); href != "/runtime" {
		t.Errorf("incident badge links to %q", href)
	}
	return rtText(link)
}

// rtPolled checks that a panel is a polled fragment of path without forms.
func rtPolled(t *testing.T, s *goquery.Selection, path string) {
	t.Helper()
	if _, ok := s.Attr("data-poll"); !ok {
		t.Errorf("%s: region is not data-poll", path)
	}
	if got := s.AttrOr("hx-get", ""); got != path {
		t.Errorf("region polls %q, want %q", got, path)
	}
	trig := s.AttrOr("hx-trigger", "")
	if !strings.Contains(trig, "every 5s") || !strings.Contains(trig, views.EventResilienceChanged+" from:body") || !strings.Contains(trig, "refresh") {
		t.Errorf("%s: hx-trigger %q", path, trig)
	}
	if s.Find("form, input:not([type=hidden]), select, textarea").Length() > 0 {
		t.Errorf("%s: polled region holds a form or an editor", path)
	}
	if s.AttrOr("aria-live", "") != "" {
		t.Errorf("%s: polled region is aria-live", path)
	}
}

func TestRuntimePagesRenderFreshInstall(t *testing.T) {
	d := newDashClient(t)
	full, frag := d.page("/runtime", views.RuntimePageID, views.RuntimeSummaryID, views.BreakersPanelID, views.CooldownsPanelID,
		views.ModelCooldownsCardID, views.LeasesPanelID, views.QueuesPanelID, views.BreakersConfirmID, views.CooldownsConfirmID,
		views.ModelCooldownsConfID, views.EventsPanelID, views.EventsEmptyID, views.AffinityLineID, views.AffinityConfirmID)
	if got := full.Find("title").Text(); got != "Runtime · Switchyard" {
		t.Errorf("title %q", got)
	}
	if full.Find(`nav a[aria-current="page"]`).First().Text() != "Runtime" {
		t.Error("Runtime is not the current nav entry")
	}
	for _, doc := range []*goquery.Document{full, frag} {
		rtPolled(t, dashFind(t, doc, dashTID(views.BreakersPanelID)), "/runtime/breakers")
		rtPolled(t, dashFind(t, doc, dashTID(views.CooldownsPanelID)), "/runtime/cooldowns")
		rtPolled(t, dashFind(t, doc, dashTID(views.ModelCooldownsCardID)), "/runtime/model-cooldowns")
		rtPolled(t, dashFind(t, doc, dashTID(views.RuntimeSummaryID)), "/runtime/summary")
		for id, want := range map[string]string{
			views.BreakersEmptyID:       "Every provider breaker is closed and has counted no failure.",
			views.ModelCooldownsEmptyID: "No model is locked out.",
		} {
			if got := rtText(dashFind(t, doc, dashTID(id))); got != want {
				t.Errorf("%s = %q, want %q", id, got, want)
			}
		}
		dashFind(t, doc, dashTID(views.CooldownsEmptyID))
		// Model lockout is off by default: the card says so and links to the settings.
		off := dashFind(t, doc, dashTID(views.ModelCooldownsOffID))
		if !strings.Contains(rtText(off), "Model lockout is off: existing entries are not enforced") ||
			off.Find(`a[href="/settings/resilience"]`).Length() != 1 {
			t.Errorf("lockout-off callout %q", rtText(off))
		}
		for _, id := range []string{views.RuntimeOpenID, views.RuntimeCoolingID, views.RuntimeTerminalID, views.RuntimeLockedID} {
			if got := strings.TrimSpace(doc.Find(dashTID(id) + " .tile__value").Text()); got != "0" {
				t.Errorf("KPI %s = %q, want 0", id, got)
			}
		}
		rtPolled(t, dashFind(t, doc, dashTID(views.LeasesPanelID)), "/runtime/leases")
		rtPolled(t, dashFind(t, doc, dashTID(views.QueuesPanelID)), "/runtime/queues")
		for id, want := range map[string]string{
			views.LeasesEmptyID: "No exclusive leases are held.",
			views.QueuesEmptyID: "No connection uses rate-limit protection or a concurrency limit.",
		} {
			if got := rtText(dashFind(t, doc, dashTID(id))); got != want {
				t.Errorf("%s = %q, want %q", id, got, want)
			}
		}
		if strings.Contains(rtText(doc.Selection), "not active in this version") {
			t.Error("the page still says leases or queues are not active")
		}
	}
	// Each panel's fragment, and the same URL as a full page without htmx.
	for path, id := range map[string]string{
		"/runtime/summary": views.RuntimeSummaryID, "/runtime/breakers": views.BreakersPanelID,
		"/runtime/cooldowns": views.CooldownsPanelID, "/runtime/model-cooldowns": views.ModelCooldownsCardID,
		"/runtime/breakers/confirm-reset": views.ConfirmPanelID, "/runtime/cooldowns/confirm-clear": views.ConfirmPanelID,
		"/runtime/model-cooldowns/confirm-clear": views.ConfirmPanelID, "/nav/incidents": views.IncidentBadgeID,
		"/runtime/leases": views.LeasesPanelID, "/runtime/queues": views.QueuesPanelID,
		"/runtime/events": views.EventsPanelID, "/runtime/affinity": views.AffinityLineID,
		"/runtime/affinity/confirm-clear": views.ConfirmPanelID, "/health/panel": views.HealthPanelID,
	} {
		full, frag := d.page(path, id)
		if frag.Find(dashTID(views.RuntimePageID)+", "+dashTID(views.HealthPageID)).Length() != 0 {
			t.Errorf("%s fragment carries the whole page", path)
		}
		if full.Find(dashTID(views.RuntimePageID)+", "+dashTID(views.HealthPageID)).Length() != 1 {
			t.Errorf("%s without htmx is not its page", path)
		}
	}
	if got := rtIncidents(t, d); got != "" {
		t.Errorf("fresh install incident badge %q", got)
	}

	// Health: status, version, database, key id (never the key), polled every 10 s.
	full, frag = d.page("/health", views.HealthPageID, views.HealthPanelID, views.HealthStatus, views.HealthKeyID)
	panel := dashFind(t, frag, dashTID(views.HealthPanelID))
	if panel.AttrOr("hx-get", "") != "/health/panel" || !strings.Contains(panel.AttrOr("hx-trigger", ""), "every 10s") {
		t.Errorf("health panel poll %q %q", panel.AttrOr("hx-get", ""), panel.AttrOr("hx-trigger", ""))
	}
	if got := rtText(full.Find(dashTID(views.HealthStatus))); got != "ok" {
		t.Errorf("health status %q", got)
	}
	if got := rtText(full.Find(dashTID(views.HealthKeyID))); got == "" || got != adminGet(t, d.app, "/api/monitoring/health")["secretKeyId"] {
		t.Errorf("health key id %q", got)
	}
	body := rtText(full.Find(dashTID(views.HealthPanelID)))
	for _, want := range []string{"switchyard.db", "Schema version", "Goroutines", "Queue depth", "Listen address"} {
		if !strings.Contains(body, want) {
			t.Errorf("health panel lacks %q: %s", want, body)
		}
	}

	// The incident badge's slot for the layout loads itself at once, then polls.
	var buf bytes.Buffer
	if err := views.IncidentBadgeSlot().Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `hx-trigger="load, every 10s`) || !strings.Contains(buf.String(), `hx-get="/nav/incidents"`) {
		t.Errorf("incident badge slot %s", buf.String())
	}
}

func TestRuntimeRetryAfterCooldownShownAndCleared(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	a := f.conns["fk-a"]
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "30", ErrorMessage: "Slow down"})
	if resp := rtChat(t, f, "m1"); resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	eng := f.app.Server.Resilience()
	if _, cooling := eng.Cooldowns.Cooling(a.ID); !cooling {
		t.Fatal("the 429 did not cool fk-a")
	}

	// The cooldowns panel lists it with a 30 s countdown and the last error.
	doc := dashCheckHTML(t, d.do("GET", "/runtime/cooldowns", nil, true, http.StatusOK))
	row := dashFind(t, doc, dashTID(views.RowID(views.RowCooling, a.ID)))
	cd := dashFind(t, doc, dashTID(views.RowID(views.RowCooling, a.ID))+` time[data-remaining-ms="30000"]`)
	if cd.Text() != "30 s" || cd.AttrOr("datetime", "") != views.RFC3339(f.app.Clock.Now().Add(30*time.Second)) {
		t.Errorf("countdown %q %q", cd.Text(), cd.AttrOr("datetime", ""))
	}
	if txt := rtText(row); !strings.Contains(txt, "conn-0") || !strings.Contains(txt, "rate limit") || !strings.Contains(txt, "429") {
		t.Errorf("cooling row %q", txt)
	}
	if got := strings.TrimSpace(dashFind(t, doc, `td[data-label="Backoff"]`).Text()); got != "0 / 5" {
		t.Errorf("backoff %q, want 0 / 5", got)
	}
	dashFind(t, doc, dashTID(views.CooldownsClearAllID))
	summary := dashParse(t, d.do("GET", "/runtime/summary", nil, true, http.StatusOK))
	if got := strings.TrimSpace(summary.Find(dashTID(views.RuntimeCoolingID) + " .tile__value").Text()); got != "1" {
		t.Errorf("cooling KPI %q", got)
	}
	if got := rtIncidents(t, d); got != "1 connection cooling" {
		t.Errorf("incident badge %q", got)
	}

	// The Connections page status cells say cooling with the same countdown and "backoff 0 / 5".
	st := dashParse(t, d.do("GET", "/connections/statuses", nil, true, http.StatusOK))
	if got := rtText(dashFind(t, st, "#"+views.RowID(views.RowConnStatus, a.ID)+" .badge")); got != "cooling" {
		t.Errorf("status %q", got)
	}
	cell := dashFind(t, st, "#"+views.RowID(views.RowConnCooldown, a.ID))
	if txt := rtText(cell); !strings.Contains(txt, "30 s") || !strings.Contains(txt, "backoff 0 / 5") || !strings.Contains(txt, "rate limit") {
		t.Errorf("cooldown cell %q", txt)
	}
	dashFind(t, st, dashTID(views.RowID(views.RowConnClear, a.ID)))

	// Clear from the Runtime panel: engine state cleared, panel re-rendered, event and toast.
	rec := d.hxTarget("POST", "/connections/"+a.ID+"/clear-cooldown", views.CooldownsPanelID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); got != "Cooldown of conn-0 cleared." {
		t.Errorf("toast %q", got)
	}
	if _, cooling := eng.Cooldowns.Cooling(a.ID); cooling || eng.Cooldowns.State(a.ID).RateLimitedUntil != nil {
		t.Fatalf("cooldown not cleared: %+v", eng.Cooldowns.State(a.ID))
	}
	doc = dashCheckHTML(t, rec)
	dashFind(t, doc, dashTID(views.CooldownsPanelID))
	dashFind(t, doc, dashTID(views.CooldownsEmptyID))
	if got := rtIncidents(t, d); got != "" {
		t.Errorf("incident badge after clear %q", got)
	}
	// The cleared connection is eligible for the next request again.
	if b := eng.ConnectionBlocker("fake", a.ID, "m1"); b != nil {
		t.Errorf("after clear, fk-a is blocked: %+v", b)
	}

	// From the Connections page the same action answers with the row.
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "30"})
	rtChat(t, f, "m1")
	rec = d.hxTarget("POST", "/connections/"+a.ID+"/clear-cooldown", views.RowID(views.RowConn, a.ID), nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	doc = dashCheckHTML(t, rec)
	if got := rtText(dashFind(t, doc, "#"+views.RowID(views.RowConnStatus, a.ID)+" .badge")); got != "healthy" {
		t.Errorf("row status after clear %q", got)
	}
	dashFind(t, doc, dashTID(views.RowID(views.RowConn, a.ID)))
	// Without htmx: a redirect back to the page.
	d.do("POST", "/connections/"+a.ID+"/clear-cooldown", nil, false, http.StatusSeeOther)
}

func TestRuntimeModelLockoutReEnable(t *testing.T) {
	f := newGW(t, "fk-a")
	d := rtDash(t, f)
	a := f.conns["fk-a"]
	eng := f.app.Server.Resilience()
	patchResilience(t, f.app, `{"modelLockout":{"enabled":true}}`)
	f.fu.ScriptModel("fk-a", "model-x", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found", ErrorMessage: "The model does not exist"})
	if resp := rtChat(t, f, "model-x"); resp.StatusCode != 404 {
		t.Fatalf("model-x: %d", resp.StatusCode)
	}
	locks := eng.Lockouts.List(resilience.LockFilter{})
	if len(locks) != 1 {
		t.Fatalf("lockouts %+v", locks)
	}
	l := locks[0]

	// The Model Cooldowns card has the row: provider, connection, model, reason, expires in.
	doc := dashCheckHTML(t, d.do("GET", "/runtime/model-cooldowns", nil, true, http.StatusOK))
	card := dashFind(t, doc, dashTID(views.ModelCooldownsCardID))
	if card.Find(dashTID(views.ModelCooldownsOffID)).Length() != 0 {
		t.Error("lockout-off callout shown while lockout is on")
	}
	row := dashFind(t, doc, dashTID(views.LockoutRowID(a.ID, l.Shape, l.LockKey)))
	if got := rtText(row.Find(`[data-label="Model"] .mono`)); got != "model-x" {
		t.Errorf("model %q", got)
	}
	fake, _ := f.app.Server.Connections().Catalogue().Get("fake")
	for label, want := range map[string]string{"Provider": fake.Name, "Connection": "conn-0", "Reason": "not found (404)"} {
		if got := rtText(row.Find(`[data-label="` + label + `"]`)); got != want {
			t.Errorf("%s = %q, want %q", label, got, want)
		}
	}
	expires := row.Find(`[data-label="Expires in"] time[data-remaining-ms]`)
	if ms, _ := strconv.ParseInt(expires.AttrOr("data-remaining-ms", ""), 10, 64); ms <= 0 || ms != l.RemainingMs {
		t.Errorf("expires countdown %q, want %d ms", expires.AttrOr("data-remaining-ms", ""), l.RemainingMs)
	}
	btn := dashFind(t, doc, dashTID(views.RowID(views.RowLockoutEnable, views.LockoutRowID(a.ID, l.Shape, l.LockKey))))
	var vals map[string]string
	if err := json.Unmarshal([]byte(btn.AttrOr("hx-vals", "")), &vals); err != nil || vals["provider"] != "fake" ||
		vals["connectionId"] != a.ID || vals["model"] != "model-x" || btn.AttrOr("hx-post", "") != "/runtime/model-cooldowns/re-enable" {
		t.Errorf("re-enable button vals %q post %q", btn.AttrOr("hx-vals", ""), btn.AttrOr("hx-post", ""))
	}
	if got := rtIncidents(t, d); got != "1 model locked" {
		t.Errorf("incident badge %q", got)
	}

	// Connections: the status stays the connection's own (one locked model
	// is not the connection locked); "1 model locked" beside it expands to
	// the model with Re-enable.
	st := dashParse(t, d.do("GET", "/connections/statuses", nil, true, http.StatusOK))
	status := dashFind(t, st, "#"+views.RowID(views.RowConnStatus, a.ID))
	if got := rtText(status.Find(".badge")); got != "healthy" {
		t.Errorf("status %q, want healthy next to the locked-model count", got)
	}
	list := dashFind(t, st, dashTID(views.RowID(views.RowConnLocks, a.ID)))
	if got := rtText(list.Find("summary")); got != "1 model locked" {
		t.Errorf("summary %q", got)
	}
	dashFind(t, st, dashTID(views.RowID(views.RowConnLockEnable, a.ID+"-model-x"))+`[hx-post="/runtime/model-cooldowns/re-enable"]`)

	// With the master switch off the entry stays listed, not enforced, and the card says so.
	patchResilience(t, f.app, `{"modelLockout":{"enabled":false}}`)
	doc = dashParse(t, d.do("GET", "/runtime/model-cooldowns", nil, true, http.StatusOK))
	dashFind(t, doc, dashTID(views.ModelCooldownsOffID))
	if !strings.Contains(rtText(dashFind(t, doc, dashTID(views.LockoutRowID(a.ID, l.Shape, l.LockKey)))), "not enforced") {
		t.Error("row not marked as not enforced")
	}
	if got := rtIncidents(t, d); got != "1 model locked (lockout off)" {
		t.Errorf("incident badge with lockout off %q", got)
	}
	patchResilience(t, f.app, `{"modelLockout":{"enabled":true}}`)

	// Re-enable: the row goes (empty answer), the event and toast go out, the engine forgets it.
	rec := d.do("POST", "/runtime/model-cooldowns/re-enable", url.Values{"provider": {"fake"}, "connectionId": {a.ID}, "model": {"model-x"}}, true, http.StatusOK)
	if rec.Body.Len() != 0 {
		t.Errorf("re-enable body %q", rec.Body.String())
	}
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); got != "Re-enabled model-x on conn-0." {
		t.Errorf("toast %q", got)
	}
	if n := len(eng.Lockouts.List(resilience.LockFilter{})); n != 0 {
		t.Fatalf("%d lockouts left", n)
	}
	doc = dashParse(t, d.do("GET", "/runtime/model-cooldowns", nil, true, http.StatusOK))
	dashFind(t, doc, dashTID(views.ModelCooldownsEmptyID))
	// The next request for model-x reaches the upstream.
	f.fu.Reset()
	f.fu.ClearScripts()
	if resp := rtChat(t, f, "model-x"); resp.StatusCode != 200 || len(f.fu.Hits()) != 1 {
		t.Fatalf("after re-enable: %d, %d hits", resp.StatusCode, len(f.fu.Hits()))
	}

	// Bad input: missing model is refused (422 toast, nothing swapped), unknown provider 404.
	rec = d.do("POST", "/runtime/model-cooldowns/re-enable", url.Values{"provider": {"fake"}}, true, http.StatusUnprocessableEntity)
	if rec.Header().Get("HX-Reswap") != "none" || dashToast(t, rec) == "" {
		t.Errorf("422 without reswap none or toast: %v", rec.Header())
	}
	d.do("POST", "/runtime/model-cooldowns/re-enable", url.Values{"provider": {"nope"}, "model": {"m"}}, true, http.StatusNotFound)

	// Clear all, through its confirmation.
	f.fu.ScriptModel("fk-a", "model-y", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found", ErrorMessage: "The model does not exist"})
	rtChat(t, f, "model-y")
	cf := dashParse(t, d.hxTarget("GET", "/runtime/model-cooldowns/confirm-clear", views.ModelCooldownsConfID, nil, http.StatusOK))
	submit := dashFind(t, cf, dashTID(views.ConfirmSubmitID))
	if submit.AttrOr("hx-post", "") != "/runtime/model-cooldowns/clear" || submit.AttrOr("hx-target", "") != "#"+views.ModelCooldownsCardID {
		t.Errorf("confirm submit %q → %q", submit.AttrOr("hx-post", ""), submit.AttrOr("hx-target", ""))
	}
	if _, ok := dashFind(t, cf, dashTID(views.ConfirmCancelID)).Attr("data-autofocus"); !ok {
		t.Error("Cancel does not take focus")
	}
	rec = d.hxTarget("POST", "/runtime/model-cooldowns/clear", views.ModelCooldownsCardID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); got != "Cleared 1 model lockout." {
		t.Errorf("toast %q", got)
	}
	doc = dashParse(t, rec)
	dashFind(t, doc, dashTID(views.ModelCooldownsEmptyID))
	dashFind(t, doc, "#"+views.ModelCooldownsConfID+`[hx-swap-oob="true"]`)
	if eng.Lockouts.Count() != 0 {
		t.Error("clear all left lockouts")
	}
}

func TestRuntimeBreakerResetAndResetAll(t *testing.T) {
	f := newGW(t, "fk-a")
	d := rtDash(t, f)
	eng := f.app.Server.Resilience()
	patchResilience(t, f.app, `{"providerBreaker":{"apikey":{"failureThreshold":2}}}`)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	openBreaker := func() {
		t.Helper()
		for i := 0; i < 2; i++ {
			f.app.Clock.Advance(time.Hour) // a new episode each time
			rtChat(t, f, "m1")
		}
		if s := eng.Breakers.Status("fake"); s.State != resilience.BreakerOpen {
			t.Fatalf("breaker %+v, want OPEN", s)
		}
	}
	openBreaker()

	doc := dashCheckHTML(t, d.do("GET", "/runtime/breakers", nil, true, http.StatusOK))
	row := dashFind(t, doc, dashTID(views.RowID(views.RowBreaker, "fake")))
	if got := rtText(row.Find(`[data-label="State"] .badge`)); got != "open" {
		t.Errorf("breaker state %q", got)
	}
	if got := rtText(row.Find(`[data-label="Failures / threshold"]`)); !strings.HasPrefix(got, "2 / 2") {
		t.Errorf("failures %q", got)
	}
	retry := row.Find(`[data-label="Retry in"] time[data-remaining-ms]`)
	if ms, _ := strconv.ParseInt(retry.AttrOr("data-remaining-ms", ""), 10, 64); ms <= 0 {
		t.Errorf("retry countdown %q", retry.AttrOr("data-remaining-ms", ""))
	}
	summary := dashParse(t, d.do("GET", "/runtime/summary", nil, true, http.StatusOK))
	if got := strings.TrimSpace(summary.Find(dashTID(views.RuntimeOpenID) + " .tile__value").Text()); got != "1" {
		t.Errorf("open breakers KPI %q", got)
	}
	if got := rtIncidents(t, d); got != "1 breaker open · 1 connection cooling" {
		t.Errorf("incident badge %q", got)
	}
	badge := dashParse(t, d.do("GET", "/nav/incidents", nil, true, http.StatusOK)).Find(dashTID(views.IncidentLinkID))
	if !badge.HasClass("incident-badge") || badge.HasClass("incident-badge--warning") {
		t.Errorf("an open breaker is not a danger badge: %q", badge.AttrOr("class", ""))
	}
	// The Connections group header shows the provider's breaker.
	st := dashParse(t, d.do("GET", "/connections/statuses", nil, true, http.StatusOK))
	hdr := dashFind(t, st, "#"+views.RowID(views.RowProviderBrk, "fake"))
	if got := rtText(hdr.Find(".badge")); got != "open" || hdr.Find("time[data-remaining-ms]").Length() != 1 {
		t.Errorf("group breaker %q", rtText(hdr))
	}

	// Reset one breaker: at once, panel re-rendered, event and toast.
	rec := d.hxTarget("POST", "/runtime/breakers/fake/reset", views.BreakersPanelID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	fake, _ := f.app.Server.Connections().Catalogue().Get("fake")
	if got := dashToast(t, rec); got != "Breaker of "+fake.Name+" reset to closed." {
		t.Errorf("toast %q", got)
	}
	if s := eng.Breakers.Status("fake"); s.State != resilience.BreakerClosed || s.FailureCount != 0 {
		t.Fatalf("after reset %+v", s)
	}
	dashFind(t, dashParse(t, rec), dashTID(views.BreakersEmptyID))
	d.do("POST", "/runtime/breakers/nope/reset", nil, true, http.StatusNotFound)

	// Reset all, through its confirmation (the submit refreshes the panel and empties the slot).
	openBreaker()
	cf := dashParse(t, d.hxTarget("GET", "/runtime/breakers/confirm-reset", views.BreakersConfirmID, nil, http.StatusOK))
	submit := dashFind(t, cf, dashTID(views.ConfirmSubmitID))
	if submit.AttrOr("hx-post", "") != "/runtime/breakers/reset" || submit.AttrOr("hx-target", "") != "#"+views.BreakersPanelID {
		t.Errorf("confirm submit %q → %q", submit.AttrOr("hx-post", ""), submit.AttrOr("hx-target", ""))
	}
	if eng.Breakers.Status("fake").State != resilience.BreakerOpen {
		t.Fatal("opening the confirmation changed the breaker")
	}
	// Opened directly, the confirmation is part of the full page.
	full := dashParse(t, d.do("GET", "/runtime/breakers/confirm-reset", nil, false, http.StatusOK))
	dashFind(t, full, "#"+views.BreakersConfirmID+" "+dashTID(views.ConfirmPanelID))
	rec = d.hxTarget("POST", "/runtime/breakers/reset", views.BreakersPanelID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); got != "Reset 1 breaker." {
		t.Errorf("toast %q", got)
	}
	doc = dashParse(t, rec)
	dashFind(t, doc, "#"+views.BreakersConfirmID+`[hx-swap-oob="true"]`)
	if eng.Breakers.Status("fake").State != resilience.BreakerClosed {
		t.Fatal("reset all left the breaker open")
	}

	// The window gate's entries are listed under the breakers, with Clear window gate.
	if err := eng.Gate.ProviderScope(context.Background(), "fake", services.AuthAPIKey, 60_000); err != nil {
		t.Fatal(err)
	}
	doc = dashParse(t, d.do("GET", "/runtime/breakers", nil, true, http.StatusOK))
	gate := dashFind(t, doc, dashTID(views.WindowGateTableID)+" "+dashTID(views.RowID(views.RowWindowGate, "fake")))
	if txt := rtText(gate); !strings.Contains(txt, fake.Name) || !strings.Contains(txt, "whole provider") ||
		gate.Find(`time[data-remaining-ms="60000"]`).Length() != 1 {
		t.Errorf("window gate row %q", txt)
	}
	summary = dashParse(t, d.do("GET", "/runtime/summary", nil, true, http.StatusOK))
	if got := strings.TrimSpace(summary.Find(dashTID(views.RuntimeWindowGateID) + " .tile__value").Text()); got != "1" {
		t.Errorf("window gate KPI %q", got)
	}
	rec = d.hxTarget("POST", "/runtime/window-gate/clear", views.BreakersPanelID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); got != "Cleared 1 window-gate entry." {
		t.Errorf("toast %q", got)
	}
	if n := len(eng.Gate.Entries()); n != 0 {
		t.Errorf("%d window-gate entries left", n)
	}
	if dashParse(t, rec).Find(dashTID(views.WindowGateTableID)).Length() != 0 {
		t.Error("window gate table still shown")
	}
}

func TestRuntimeBulkClearSkipsTerminalAndResetState(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b", "fk-c")
	d := rtDash(t, f)
	eng := f.app.Server.Resilience()
	a, b := f.conns["fk-a"], f.conns["fk-b"]
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "60"})
	f.fu.Script("fk-b", fakeupstream.Step{Status: 402, ErrorMessage: "Your credit balance is too low"})
	if resp := rtChat(t, f, "m1"); resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	if _, cooling := eng.Cooldowns.Cooling(a.ID); !cooling {
		t.Fatal("fk-a is not cooling")
	}
	if st := eng.Cooldowns.State(b.ID); st.TerminalStatus != services.TerminalCreditsExhausted {
		t.Fatalf("fk-b state %+v, want credits_exhausted", st)
	}

	doc := dashCheckHTML(t, d.do("GET", "/runtime/cooldowns", nil, true, http.StatusOK))
	dashFind(t, doc, dashTID(views.CooldownsCoolingID)+" "+dashTID(views.RowID(views.RowCooling, a.ID)))
	term := dashFind(t, doc, dashTID(views.CooldownsTerminalID)+" "+dashTID(views.RowID(views.RowTerminal, b.ID)))
	if got := rtText(term.Find(`[data-label="Terminal reason"]`)); got != "terminal: credits exhausted" {
		t.Errorf("terminal reason %q", got)
	}
	if doc.Find(dashTID(views.RowID(views.RowCooling, b.ID))).Length() != 0 {
		t.Error("a terminal connection is listed as cooling")
	}
	if got := rtIncidents(t, d); got != "1 connection terminal · 1 connection cooling" {
		t.Errorf("incident badge %q", got)
	}

	// Connections: terminal badge, Reset state offered; cooling row offers Clear cooldown.
	st := dashParse(t, d.do("GET", "/connections/statuses", nil, true, http.StatusOK))
	if got := rtText(dashFind(t, st, "#"+views.RowID(views.RowConnStatus, b.ID)+" .badge")); got != "terminal: credits exhausted" {
		t.Errorf("status %q", got)
	}
	dashFind(t, st, dashTID(views.RowID(views.RowConnReset, b.ID)))
	if st.Find("#"+views.RowID(views.RowConnCooldown, b.ID)+" time").Length() != 0 {
		t.Error("terminal connection shows a cooldown countdown")
	}

	// Bulk clear: confirmation first (nothing changes), then the toast reports the counts.
	cf := dashParse(t, d.hxTarget("GET", "/runtime/cooldowns/confirm-clear", views.CooldownsConfirmID, nil, http.StatusOK))
	if txt := rtText(dashFind(t, cf, dashTID(views.ConfirmPanelID))); !strings.Contains(txt, "1 cooling connection returns to rotation") ||
		!strings.Contains(txt, "1 terminal connection is left as it is") {
		t.Errorf("confirmation %q", txt)
	}
	if _, cooling := eng.Cooldowns.Cooling(a.ID); !cooling {
		t.Fatal("opening the confirmation cleared a cooldown")
	}
	rec := d.hxTarget("POST", "/runtime/cooldowns/clear", views.CooldownsPanelID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); got != "Cleared 1 cooldown. 1 terminal connection left as it is." {
		t.Errorf("toast %q", got)
	}
	if _, cooling := eng.Cooldowns.Cooling(a.ID); cooling {
		t.Error("bulk clear left fk-a cooling")
	}
	if st := eng.Cooldowns.State(b.ID); st.TerminalStatus != services.TerminalCreditsExhausted {
		t.Errorf("bulk clear touched the terminal connection: %+v", st)
	}
	doc = dashParse(t, rec)
	dashFind(t, doc, "#"+views.CooldownsConfirmID+`[hx-swap-oob="true"]`)
	dashFind(t, doc, dashTID(views.RowID(views.RowTerminal, b.ID)))
	if doc.Find(dashTID(views.CooldownsCoolingID)).Length() != 0 {
		t.Error("cooling table still shown")
	}

	// Reset state from the Runtime panel: confirmation above the panel, then the panel.
	cf = dashParse(t, d.hxTarget("GET", "/connections/"+b.ID+"/confirm-reset", views.CooldownsConfirmID, nil, http.StatusOK))
	submit := dashFind(t, cf, dashTID(views.ConfirmSubmitID))
	if submit.AttrOr("hx-post", "") != "/connections/"+b.ID+"/reset" || submit.AttrOr("hx-target", "") != "#"+views.CooldownsPanelID {
		t.Errorf("confirm submit %q → %q", submit.AttrOr("hx-post", ""), submit.AttrOr("hx-target", ""))
	}
	rec = d.hxTarget("POST", "/connections/"+b.ID+"/reset", views.CooldownsPanelID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if st := eng.Cooldowns.State(b.ID); st.TerminalStatus != "" {
		t.Fatalf("reset left %+v", st)
	}
	dashFind(t, dashParse(t, rec), dashTID(views.CooldownsEmptyID))

	// Reset state from the Connections page: confirm panel in the row slot, then the row.
	for _, k := range []string{"fk-a", "fk-b", "fk-c"} {
		f.fu.Script(k, fakeupstream.Step{Status: 402, ErrorMessage: "Your credit balance is too low"})
	}
	rtChat(t, f, "m1")
	if eng.Cooldowns.State(a.ID).TerminalStatus == "" {
		t.Fatal("fk-a not terminal")
	}
	cf = dashParse(t, d.hxTarget("GET", "/connections/"+a.ID+"/confirm-reset", views.RowID(views.RowConnSlot, a.ID), nil, http.StatusOK))
	submit = dashFind(t, cf, "td "+dashTID(views.ConfirmSubmitID))
	if submit.AttrOr("hx-post", "") != "/connections/"+a.ID+"/reset" || submit.AttrOr("hx-target", "") != "#"+views.RowID(views.RowConn, a.ID) {
		t.Errorf("confirm submit %q → %q", submit.AttrOr("hx-post", ""), submit.AttrOr("hx-target", ""))
	}
	full := dashParse(t, d.do("GET", "/connections/"+a.ID+"/confirm-reset", nil, false, http.StatusOK))
	dashFind(t, full, "#"+views.RowID(views.RowConnSlot, a.ID)+" "+dashTID(views.ConfirmPanelID))
	rec = d.hxTarget("POST", "/connections/"+a.ID+"/reset", views.RowID(views.RowConn, a.ID), nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); got != "State of conn-0 reset. It is back in rotation." {
		t.Errorf("toast %q", got)
	}
	doc = dashParse(t, rec)
	if got := rtText(dashFind(t, doc, "#"+views.RowID(views.RowConnStatus, a.ID)+" .badge")); got != "healthy" {
		t.Errorf("row after reset %q", got)
	}
	dashFind(t, doc, "#"+views.RowID(views.RowConnSlot, a.ID)+`[hx-swap-oob="true"]`)
	if eng.Cooldowns.State(a.ID).TerminalStatus != "" {
		t.Error("reset left fk-a terminal")
	}
	d.do("POST", "/connections/c_missing/reset", nil, true, http.StatusNotFound)
	d.do("POST", "/connections/c_missing/clear-cooldown", nil, true, http.StatusNotFound)
	d.do("GET", "/connections/c_missing/confirm-reset", nil, true, http.StatusNotFound)
}

func TestConnectionStatusesAreOutOfBandSwaps(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	a, b := f.conns["fk-a"], f.conns["fk-b"]
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "30"})
	rtChat(t, f, "m1")

	// The page carries the poller: every 5 s and on both events, sending the cell signatures.
	page := dashParse(t, d.do("GET", "/connections", nil, true, http.StatusOK))
	poll := dashFind(t, page, dashTID(views.ConnectionsStatusPollID))
	trig := poll.AttrOr("hx-trigger", "")
	if poll.AttrOr("hx-get", "") != "/connections/statuses" || poll.AttrOr("hx-swap", "") != "none" || !strings.Contains(trig, "every 5s") ||
		!strings.Contains(trig, views.EventResilienceChanged+" from:body") || !strings.Contains(trig, views.EventConnectionsChanged+" from:body") {
		t.Errorf("poller %q %q %q", poll.AttrOr("hx-get", ""), poll.AttrOr("hx-swap", ""), trig)
	}
	if _, ok := poll.Attr("data-poll"); !ok {
		t.Error("poller not data-poll")
	}

	rec := d.do("GET", "/connections/statuses", nil, true, http.StatusOK)
	doc := dashCheckHTML(t, rec)
	if strings.Contains(rec.Body.String(), "<html") {
		t.Fatal("statuses answered with a page")
	}
	// Every row's status, cooldown, last error and concurrency cells, each an oob swap inside a <template>.
	for _, id := range []string{a.ID, b.ID} {
		for _, kind := range []string{views.RowConnStatus, views.RowConnCooldown, views.RowConnError, views.RowConnConc} {
			cell := dashFind(t, doc, "template > td#"+views.RowID(kind, id))
			if cell.AttrOr("hx-swap-oob", "") != "true" {
				t.Errorf("%s is not an oob swap", views.RowID(kind, id))
			}
		}
	}
	dashFind(t, doc, "template > span#"+views.RowID(views.RowProviderBrk, "fake")+`[hx-swap-oob="true"]`)
	if got := rtText(doc.Find("#" + views.RowID(views.RowConnError, a.ID))); !strings.Contains(got, "429") {
		t.Errorf("last error cell %q", got)
	}
	// The live cells are the same as the page's rows: no form inside.
	if doc.Find("form").Length() != 0 {
		t.Error("status cells hold a form")
	}

	// Sending back what the page shows: nothing changed, nothing comes back.
	var sigs url.Values = url.Values{}
	doc.Find("[data-live-sig]").Each(func(_ int, s *goquery.Selection) { sigs.Add(views.LiveSigField, s.AttrOr("value", "")) })
	if len(sigs[views.LiveSigField]) != 9 {
		t.Fatalf("%d signatures, want 9", len(sigs[views.LiveSigField]))
	}
	rec = d.do("GET", "/connections/statuses", sigs, true, http.StatusOK)
	if strings.TrimSpace(rec.Body.String()) != "" {
		t.Errorf("unchanged cells were sent again: %s", dashTrunc(rec.Body.String(), 500))
	}
	// After the cooldown is cleared only fk-a's status and cooldown cells change.
	d.do("POST", "/connections/"+a.ID+"/clear-cooldown", nil, true, http.StatusOK)
	doc = dashParse(t, d.do("GET", "/connections/statuses", sigs, true, http.StatusOK))
	var sent []string
	doc.Find("[hx-swap-oob]").Each(func(_ int, s *goquery.Selection) { sent = append(sent, s.AttrOr("id", "")) })
	want := views.RowID(views.RowConnStatus, a.ID) + " " + views.RowID(views.RowConnCooldown, a.ID)
	if strings.Join(sent, " ") != want {
		t.Errorf("sent %q, want %q", sent, want)
	}
	if got := rtText(doc.Find("#" + views.RowID(views.RowConnStatus, a.ID) + " .badge")); got != "healthy" {
		t.Errorf("status %q", got)
	}

	// Without htmx the URL is the Connections page.
	full := dashParse(t, d.do("GET", "/connections/statuses", nil, false, http.StatusOK))
	dashFind(t, full, dashTID(views.ConnectionsPageID))
}

// rtState is everything the runtime actions could change.
func rtState(t *testing.T, a *testkit.App) string {
	t.Helper()
	eng := a.Server.Resilience()
	conns, err := a.Server.Connections().List(context.Background(), services.ConnectionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]services.ConnectionState{}
	for i, c := range conns {
		states[c.ID] = eng.Cooldowns.State(c.ID)
		// The last-used time is written in the background after a dispatch,
		// whenever its batch lands: usage, not state an action changes.
		conns[i].LastUsedAt = nil
	}
	b, _ := json.Marshal([]any{eng.Breakers.All(), eng.Lockouts.List(resilience.LockFilter{}), eng.Gate.Entries(), states, conns,
		a.Server.Pins().Count()})
	return string(b)
}

// rtMutations are the POST routes of this file; {a} and {b} stand for connection ids.
var rtMutations = []string{
	"/runtime/breakers/fake/reset", "/runtime/breakers/reset", "/runtime/window-gate/clear", "/runtime/cooldowns/clear",
	"/runtime/model-cooldowns/re-enable", "/runtime/model-cooldowns/clear", "/runtime/leases/1/end", "/runtime/affinity/clear",
	"/connections/{a}/clear-cooldown", "/connections/{a}/reset", "/connections/{b}/reset",
}

var rtReads = []string{
	"/runtime", "/runtime/summary", "/runtime/breakers", "/runtime/breakers/confirm-reset", "/runtime/cooldowns",
	"/runtime/cooldowns/confirm-clear", "/runtime/model-cooldowns", "/runtime/model-cooldowns/confirm-clear",
	"/runtime/leases", "/runtime/queues", "/runtime/events", "/runtime/affinity", "/runtime/affinity/confirm-clear",
	"/connections/statuses", "/connections/{a}/confirm-reset", "/nav/incidents", "/health", "/health/panel",
}

// rtBusy puts every mechanism into a state: the first connection cooling
// with a locked model, fk-b terminal, the provider's breaker open.
func rtBusy(t *testing.T, f *gwFixture) {
	t.Helper()
	first := firstKey(f)
	patchResilience(t, f.app, `{"modelLockout":{"enabled":true,"errorCodes":[404]},"providerBreaker":{"apikey":{"failureThreshold":2}}}`)
	f.fu.Script(first, fakeupstream.Step{Status: 503})
	f.fu.ScriptModel(first, "model-x", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found", ErrorMessage: "The model does not exist"})
	f.fu.Script("fk-b", fakeupstream.Step{Status: 402, ErrorMessage: "Your credit balance is too low"})
	rtChat(t, f, "m1") // 503 on the first (breaker 1, cooling), 402 on fk-b (terminal)
	f.app.Clock.Advance(time.Minute)
	rtChat(t, f, "model-x") // 404: model-x locked on the first
	f.app.Clock.Advance(time.Minute)
	rtChat(t, f, "m1") // a second 503 episode opens the breaker
	eng := f.app.Server.Resilience()
	if eng.Breakers.Status("fake").State != resilience.BreakerOpen || eng.Lockouts.Count() == 0 ||
		eng.Cooldowns.State(f.conns["fk-b"].ID).TerminalStatus == "" {
		t.Fatalf("busy state not reached: %s", rtState(t, f.app))
	}
	if _, cooling := eng.Cooldowns.Cooling(f.conns[first].ID); !cooling {
		t.Fatalf("first connection not cooling: %s", rtState(t, f.app))
	}
}

func firstKey(f *gwFixture) string {
	for k, c := range f.conns {
		if c.Priority == 0 {
			return k
		}
	}
	return ""
}

func TestRuntimeCrossSiteMutationsAreRefused(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	rtBusy(t, f)
	before := rtState(t, f.app)
	r := strings.NewReplacer("{a}", f.conns["fk-a"].ID, "{b}", f.conns["fk-b"].ID)
	form := url.Values{"provider": {"fake"}, "connectionId": {f.conns["fk-a"].ID}, "model": {"model-x"}}
	for _, p := range rtMutations {
		path := r.Replace(p)
		for _, site := range []string{"cross-site", "same-site"} {
			req := d.req("POST", path, form, true)
			req.Header.Set("Sec-Fetch-Site", site)
			if rec := d.send(req); rec.Code != http.StatusForbidden {
				t.Errorf("POST %s from %s: %d, want 403", path, site, rec.Code)
			}
		}
		req := d.req("POST", path, form, false)
		req.Header.Del("Sec-Fetch-Site")
		req.Header.Set("Origin", "https://evil.example")
		if rec := d.send(req); rec.Code != http.StatusForbidden {
			t.Errorf("POST %s with a foreign Origin: %d, want 403", path, rec.Code)
		}
	}
	if after := rtState(t, f.app); after != before {
		t.Fatalf("a refused request changed state:\nbefore %s\nafter  %s", before, after)
	}
	// GETs change nothing either.
	for _, p := range rtReads {
		d.do("GET", r.Replace(p), nil, true, http.StatusOK)
		d.do("GET", r.Replace(p), nil, false, http.StatusOK)
	}
	if after := rtState(t, f.app); after != before {
		t.Fatalf("a GET changed state:\nbefore %s\nafter  %s", before, after)
	}
}

func TestRuntimeRoutesNeedASession(t *testing.T) {
	f := newGW(t, "fk-a")
	d := rtDash(t, f)
	d.cookie = nil
	id := f.conns["fk-a"].ID
	for _, p := range append(append([]string{}, rtReads...), rtMutations...) {
		path := strings.NewReplacer("{a}", id, "{b}", id).Replace(p)
		method := "GET"
		for _, m := range rtMutations {
			if m == p {
				method = "POST"
			}
		}
		rec := d.do(method, path, nil, false, http.StatusSeeOther)
		if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/login?next=") {
			t.Errorf("%s %s: Location %q", method, path, loc)
		}
		rec = d.do(method, path, nil, true, http.StatusUnauthorized)
		if hx := rec.Header().Get("HX-Redirect"); !strings.HasPrefix(hx, "/login?next=") {
			t.Errorf("%s %s: HX-Redirect %q", method, path, hx)
		}
	}
}

func TestRuntimePagesHoldNoSecret(t *testing.T) {
	const secretKey = "runtime-canary-SECRET-KEY-0123456789abcdef"
	const providerKey = "sk-canary-RUNTIME-PROVIDER-9d8c7b6a5f4e"
	fu := fakeupstream.Start(t, fakeupstream.WithEvents(5))
	a := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_PRIVATE_UPSTREAMS", fu.Addr()), testkit.WithEnv("SWITCHYARD_SECRET_KEY", secretKey))
	f := &gwFixture{app: a, fu: fu, conns: map[string]services.Connection{}}
	for i, k := range []string{providerKey, "fk-b"} {
		in := services.ConnectionInput{Provider: services.Some("fake"), Name: services.Some("conn-" + strconv.Itoa(i)), APIKey: services.Some(k),
			BaseURL: services.Some(fu.URL() + "/v1"), Priority: services.Some(i)}
		if i == 0 {
			in.Custom = services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})
		}
		f.conns[k] = a.AddConnection(in)
	}
	var clientKey string
	_, clientKey = a.NewKey("client")
	f.key, f.url = clientKey, a.Serve()
	patchResilience(t, a, `{"waitForCooldown":{"enabled":false},"comboCooldownWait":{"enabled":false}}`)
	d := rtDash(t, f)
	rtBusy(t, f)

	r := strings.NewReplacer("{a}", f.conns[providerKey].ID, "{b}", f.conns["fk-b"].ID)
	for _, p := range rtReads {
		d.do("GET", r.Replace(p), nil, false, http.StatusOK)
		d.do("GET", r.Replace(p), nil, true, http.StatusOK)
	}
	d.do("GET", "/connections", nil, false, http.StatusOK)
	d.hxTarget("POST", r.Replace("/connections/{a}/clear-cooldown"), views.CooldownsPanelID, nil, http.StatusOK)
	d.hxTarget("POST", r.Replace("/connections/{b}/reset"), views.RowID(views.RowConn, f.conns["fk-b"].ID), nil, http.StatusOK)
	d.hxTarget("POST", "/runtime/breakers/reset", views.BreakersPanelID, nil, http.StatusOK)
	if len(d.bodies) < 30 {
		t.Fatalf("only %d bodies checked", len(d.bodies))
	}
	for i, body := range d.bodies {
		for _, canary := range []string{secretKey, providerKey, clientKey, testkit.AdminPassword, d.cookie.Value} {
			if strings.Contains(body, canary) {
				t.Errorf("response %d contains the secret %q", i, canary)
			}
		}
	}
}

func TestRuntimeLeasesPanelEndLease(t *testing.T) {
	f := newGW(t, "fk-1", "fk-2")
	d := rtDash(t, f)
	c1 := f.conns["fk-1"].ID
	key, secret, err := f.app.Server.Keys().Create(t.Context(), services.KeyInput{Name: services.Some("agent-a"),
		Scopes: services.Some([]string{"inference", "lease:exclusive"}), AllowedConnections: services.Some([]string{c1})})
	if err != nil {
		t.Fatal(err)
	}
	owner := "vlo_" + strings.Repeat("R", 43)
	if resp, b := postKey(t, f.url+"/v1/session-leases", secret, `{"action":"acquire","model":"fake/m1"}`, "X-Switchyard-Lease-Owner", owner); resp.StatusCode != 200 {
		t.Fatalf("acquire: %d %s", resp.StatusCode, b)
	}
	items, _ := adminGet(t, f.app, "/api/resilience/leases")["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("API lists %d leases, want 1", len(items))
	}
	id, _ := items[0].(map[string]any)["id"].(string)
	rowSel := dashTID(views.RowID(views.RowLease, id))

	// The polled panel lists it: key name and prefix, provider, connection, generation, countdown.
	rec := d.do("GET", "/runtime/leases", nil, true, http.StatusOK)
	doc := dashCheckHTML(t, rec)
	rtPolled(t, dashFind(t, doc, dashTID(views.LeasesPanelID)), "/runtime/leases")
	row := dashFind(t, doc, rowSel)
	fake, _ := f.app.Server.Connections().Catalogue().Get("fake")
	for label, want := range map[string]string{"API key": "agent-a " + key.Prefix + "…", "Provider": fake.Name,
		"Connection": "conn-0", "Generation": "1", "State": "active"} {
		if got := rtText(row.Find(`[data-label="` + label + `"]`)); got != want {
			t.Errorf("%s = %q, want %q", label, got, want)
		}
	}
	expires := row.Find(`[data-label="Expires in"] time[data-remaining-ms]`)
	if ms, _ := strconv.ParseInt(expires.AttrOr("data-remaining-ms", ""), 10, 64); ms <= 0 {
		t.Errorf("expires countdown %q", expires.AttrOr("data-remaining-ms", ""))
	}
	if doc.Find(dashTID(views.LeasesEmptyID)).Length() != 0 {
		t.Error("empty state shown next to a lease")
	}
	// The whole page carries the same row; neither shows the owner token or its hash.
	full := d.do("GET", "/runtime", nil, false, http.StatusOK)
	dashFind(t, dashCheckHTML(t, full), dashTID(views.LeasesPanelID)+" "+rowSel)
	for _, body := range []string{rec.Body.String(), full.Body.String()} {
		if strings.Contains(body, owner) || strings.Contains(body, leases.HashOwner(owner)) {
			t.Fatal("the leases panel shows the owner token or its hash")
		}
	}

	// End lease opens its confirmation above the panel; nothing changes yet.
	end := dashFind(t, doc, dashTID(views.RowID(views.RowLeaseEnd, id)))
	if end.AttrOr("hx-get", "") != "/runtime/leases/"+id+"/confirm-end" || end.AttrOr("hx-target", "") != "#"+views.LeasesConfirmID {
		t.Errorf("End lease %q → %q", end.AttrOr("hx-get", ""), end.AttrOr("hx-target", ""))
	}
	cf := dashCheckHTML(t, d.hxTarget("GET", "/runtime/leases/"+id+"/confirm-end", views.LeasesConfirmID, nil, http.StatusOK))
	if txt := rtText(dashFind(t, cf, dashTID(views.ConfirmPanelID))); !strings.Contains(txt, "End the lease of agent-a on conn-0?") ||
		!strings.Contains(txt, "The client's next request with this generation will be rejected as stale.") {
		t.Errorf("confirmation %q", txt)
	}
	submit := dashFind(t, cf, dashTID(views.ConfirmSubmitID))
	if submit.AttrOr("hx-post", "") != "/runtime/leases/"+id+"/end" || submit.AttrOr("hx-target", "") != "#"+views.LeasesPanelID {
		t.Errorf("confirm submit %q → %q", submit.AttrOr("hx-post", ""), submit.AttrOr("hx-target", ""))
	}
	if _, ok := dashFind(t, cf, dashTID(views.ConfirmCancelID)).Attr("data-autofocus"); !ok {
		t.Error("Cancel does not take focus")
	}
	fullCf := dashParse(t, d.do("GET", "/runtime/leases/"+id+"/confirm-end", nil, false, http.StatusOK))
	dashFind(t, fullCf, "#"+views.LeasesConfirmID+" "+dashTID(views.ConfirmPanelID))
	if items, _ := adminGet(t, f.app, "/api/resilience/leases")["items"].([]any); len(items) != 1 {
		t.Fatal("opening the confirmation ended the lease")
	}

	// Confirmed: the lease ends (admin_ended), the panel comes back empty, the slot is emptied.
	rec = d.hxTarget("POST", "/runtime/leases/"+id+"/end", views.LeasesPanelID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); !strings.HasPrefix(got, "Lease of agent-a on conn-0 ended.") {
		t.Errorf("toast %q", got)
	}
	doc = dashCheckHTML(t, rec)
	dashFind(t, doc, dashTID(views.LeasesEmptyID))
	dashFind(t, doc, "#"+views.LeasesConfirmID+`[hx-swap-oob="true"]`)
	if doc.Find(rowSel).Length() != 0 {
		t.Error("the ended lease is still listed")
	}
	if items, _ := adminGet(t, f.app, "/api/resilience/leases")["items"].([]any); len(items) != 0 {
		t.Fatalf("GET /api/resilience/leases still lists %d leases", len(items))
	}
	dashFind(t, dashParse(t, d.do("GET", "/runtime/leases", nil, true, http.StatusOK)), dashTID(views.LeasesEmptyID))
	// The client's next request under that generation is refused without reaching the upstream.
	f.fu.Reset()
	r, b := postKey(t, f.url+"/v1/chat/completions", secret, chatBody, "X-Switchyard-Lease-Owner", owner, "X-Switchyard-Lease-Generation", "1")
	if r.StatusCode != http.StatusConflict || len(f.fu.Hits()) != 0 {
		t.Errorf("request after End lease: %d %s, %d hits", r.StatusCode, b, len(f.fu.Hits()))
	}

	// Ending it again is reported, not an error; its confirmation is gone; without htmx a redirect.
	rec = d.hxTarget("POST", "/runtime/leases/"+id+"/end", views.LeasesPanelID, nil, http.StatusOK)
	if got := dashToast(t, rec); got != "That lease had already ended." {
		t.Errorf("toast %q", got)
	}
	if _, ok := dashEvents(t, rec)[views.EventResilienceChanged]; ok {
		t.Error("ending an ended lease announced a change")
	}
	d.do("GET", "/runtime/leases/"+id+"/confirm-end", nil, true, http.StatusNotFound)
	d.do("POST", "/runtime/leases/"+id+"/end", nil, false, http.StatusSeeOther)
}

func TestRuntimeQueuesAndSlotsPanel(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	a, b := f.conns["fk-a"], f.conns["fk-b"]
	ctx := t.Context()
	queues := func() *goquery.Document {
		t.Helper()
		doc := dashCheckHTML(t, d.do("GET", "/runtime/queues", nil, true, http.StatusOK))
		rtPolled(t, dashFind(t, doc, dashTID(views.QueuesPanelID)), "/runtime/queues")
		return doc
	}
	concCell := func() string {
		t.Helper()
		st := dashParse(t, d.do("GET", "/connections/statuses", nil, true, http.StatusOK))
		return rtText(dashFind(t, st, "#"+views.RowID(views.RowConnConc, a.ID)))
	}
	dashFind(t, queues(), dashTID(views.QueuesEmptyID))

	// max_concurrent 2 on fk-a: "0 / 2" in the slots table and in the Connections cell.
	if _, err := f.app.Server.Connections().Update(ctx, a.ID, services.ConnectionInput{MaxConcurrent: services.Some(2)}); err != nil {
		t.Fatal(err)
	}
	doc := queues()
	if doc.Find(dashTID(views.QueuesEmptyID)).Length() != 0 || doc.Find(dashTID(views.QueuesTableID)).Length() != 0 {
		t.Error("empty state or queue table shown with only a concurrency limit")
	}
	slot := dashFind(t, doc, dashTID(views.SlotsTableID)+" "+dashTID(views.RowID(views.RowSlot, a.ID)))
	if got := rtText(slot.Find(`[data-label="In flight / limit"]`)); got != "0 / 2" {
		t.Errorf("slots in flight %q, want 0 / 2", got)
	}
	if got := rtText(slot.Find(`[data-label="Waiting"]`)); got != "0" {
		t.Errorf("waiting %q", got)
	}
	if doc.Find(dashTID(views.RowID(views.RowSlot, b.ID))).Length() != 0 {
		t.Error("a connection without max_concurrent is listed under slots")
	}
	if got := concCell(); got != "0 / 2" {
		t.Errorf("connections cell %q, want 0 / 2", got)
	}
	page := dashParse(t, d.do("GET", "/connections", nil, false, http.StatusOK))
	if got := rtText(dashFind(t, page, "#"+views.RowID(views.RowConnConc, a.ID))); got != "0 / 2" {
		t.Errorf("connections page cell %q, want 0 / 2", got)
	}
	if got := rtText(dashFind(t, page, "#"+views.RowID(views.RowConnConc, b.ID))); got != "∞ no limit" {
		t.Errorf("unlimited cell %q", got)
	}

	// A request in flight holds one slot: both views show 1 / 2, then 0 / 2 once it ends.
	f.fu.Script("fk-a", fakeupstream.Step{Delay: 1500 * time.Millisecond})
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+f.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	busy := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if busy = rtText(queues().Find(dashTID(views.RowID(views.RowSlot, a.ID)) + ` [data-label="In flight / limit"]`)); busy == "1 / 2" {
			break
		}
	}
	if busy != "1 / 2" {
		t.Errorf("slots in flight during a request %q, want 1 / 2", busy)
	} else if got := concCell(); got != "1 / 2" {
		t.Errorf("connections cell during a request %q, want 1 / 2", got)
	}
	if st := <-done; st != http.StatusOK {
		t.Fatalf("slow request: %d", st)
	}
	// The slot is released right after the last byte: poll (bounded) for it.
	after := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if after = rtText(queues().Find(dashTID(views.RowID(views.RowSlot, a.ID)) + ` [data-label="In flight / limit"]`)); after == "0 / 2" {
			break
		}
	}
	if after != "0 / 2" {
		t.Errorf("slots after the request %q, want 0 / 2", after)
	}
	if got := concCell(); got != "0 / 2" {
		t.Errorf("connections cell after the request %q, want 0 / 2", got)
	}

	// Rate-limit protection on fk-b: its queue is listed with the effective settings, before and
	// after traffic, and GET /api/concurrency agrees.
	on := true
	rpm := 30
	if _, err := f.app.Server.Connections().Update(ctx, b.ID, services.ConnectionInput{RateLimitProtection: services.Some(on),
		RateLimitOverrides: services.Some(services.RateLimitOverrides{RequestsPerMinute: &rpm})}); err != nil {
		t.Fatal(err)
	}
	row := dashFind(t, queues(), dashTID(views.QueuesTableID)+" "+dashTID(views.QueueRowID(b.ID, "")))
	for label, want := range map[string]string{"Queued": "0", "Running": "0 / 6", "Rate": "30 rpm 350 ms apart"} {
		if got := rtText(row.Find(`[data-label="` + label + `"]`)); got != want {
			t.Errorf("queue %s = %q, want %q", label, got, want)
		}
	}
	var rej []string
	row.Find(`[data-label="Rejections since start"] div`).Each(func(_ int, s *goquery.Selection) { rej = append(rej, rtText(s)) })
	if got := strings.Join(rej, ", "); got != "0 queue full, 0 queue timeout, 0 execution timeout" {
		t.Errorf("rejections %q", got)
	}
	// After a request through fk-b the limiter key is live; the row stays one row, and the API
	// twin lists the same key.
	if _, err := f.app.Server.Connections().Update(ctx, a.ID, services.ConnectionInput{Enabled: services.Some(false)}); err != nil {
		t.Fatal(err)
	}
	if resp := rtChat(t, f, "m1"); resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != b.ID {
		t.Fatalf("chat through fk-b: %d via %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	doc = queues()
	if n := doc.Find(dashTID(views.QueuesTableID) + " tbody tr").Length(); n != 1 {
		t.Errorf("%d queue rows, want 1", n)
	}
	row = dashFind(t, doc, dashTID(views.QueueRowID(b.ID, "")))
	if got := rtText(row.Find(`[data-label="Rate"]`)); got != "30 rpm 350 ms apart" {
		t.Errorf("rate after traffic %q", got)
	}
	api := adminGet(t, f.app, "/api/concurrency")
	qs, _ := api["queues"].([]any)
	ss, _ := api["slots"].([]any)
	if len(qs) != 1 || qs[0].(map[string]any)["connectionId"] != b.ID || len(ss) != 1 || ss[0].(map[string]any)["connectionId"] != a.ID {
		t.Errorf("GET /api/concurrency %v", api)
	}
}
