package app_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/events"
	"switchyard/views"
)

// The Runtime page's Recent events panel and Session affinity line
// (50-dashboard §6.8), driven by real traffic through the gateway and the
// fake upstream.

// evNewest returns the newest event of the app's ring, failing when it is
// not of type want.
func evNewest(t *testing.T, a *testkit.App, want events.Type) events.Event {
	t.Helper()
	list := a.Server.Events().Snapshot()
	if len(list) == 0 || list[0].Type != want {
		t.Fatalf("newest event is not %s: %+v", want, list)
	}
	return list[0]
}

// evSessionActor is how an event names an admin session: its internal
// id's hash prefix, as the audit log does.
var evSessionActor = regexp.MustCompile(`^admin session [0-9a-f]{12}$`)

// evRows reads the rows of the events panel as "event | subject | cause".
func evRows(t *testing.T, doc *goquery.Document) []string {
	t.Helper()
	var out []string
	dashFind(t, doc, dashTID(views.EventsPanelID)).Find("tbody tr").Each(func(_ int, tr *goquery.Selection) {
		out = append(out, rtText(tr.Find(`[data-label="Event"]`))+" | "+rtText(tr.Find(`[data-label="Subject"]`))+" | "+
			rtText(tr.Find(`[data-label="Cause"]`)))
	})
	return out
}

func TestRuntimeEventsPanelRecordsTransitions(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	a, b := f.conns["fk-a"], f.conns["fk-b"]
	fake, _ := f.app.Server.Connections().Catalogue().Get("fake")

	// Fresh: the polled panel says there is nothing yet, on the page and as a fragment.
	full, frag := d.page("/runtime/events", views.EventsPanelID, views.EventsEmptyID)
	for _, doc := range []*goquery.Document{full, frag} {
		rtPolled(t, dashFind(t, doc, dashTID(views.EventsPanelID)), "/runtime/events")
		if got := rtText(dashFind(t, doc, dashTID(views.EventsEmptyID))); got != "No resilience events since the gateway started." {
			t.Errorf("empty state %q", got)
		}
		if doc.Find(dashTID(views.EventsReplicaID)).Length() != 0 {
			t.Error("a single gateway says its events are per replica")
		}
	}
	// Normal successful traffic records nothing.
	if resp := rtChat(t, f, "m1"); resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	if n := len(f.app.Server.Events().Snapshot()); n != 0 {
		t.Fatalf("a plain success recorded %d events", n)
	}

	// A 429 with Retry-After from the fake upstream cools fk-a: cooldown set, cause rate limit (429).
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "30"})
	if resp := rtChat(t, f, "m1"); resp.StatusCode != 200 {
		t.Fatalf("chat after 429: %d", resp.StatusCode)
	}
	e := evNewest(t, f.app, events.CooldownSet)
	if e.ConnectionID != a.ID || e.Provider != "fake" || e.Cause != "rate_limit" || e.Status != 429 || !e.At.Equal(f.app.Clock.Now()) {
		t.Fatalf("cooldown event %+v", e)
	}

	// The admin clears it from the Runtime page: cooldown cleared, cause admin.
	d.hxTarget("POST", "/connections/"+a.ID+"/clear-cooldown", views.CooldownsPanelID, nil, http.StatusOK)
	e = evNewest(t, f.app, events.CooldownCleared)
	if e.ConnectionID != a.ID || e.Cause != events.CauseAdmin || !evSessionActor.MatchString(e.Actor) {
		t.Fatalf("clear event %+v, want the admin session named", e)
	}
	session := strings.TrimPrefix(e.Actor, "admin ") // "session <id>", as the panel words it

	// Two 503 episodes on both connections open the provider breaker.
	patchResilience(t, f.app, `{"providerBreaker":{"apikey":{"failureThreshold":2}}}`)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	f.fu.Script("fk-b", fakeupstream.Step{Status: 503})
	rtChat(t, f, "m1")
	if e := evNewest(t, f.app, events.BreakerOpened); e.Provider != "fake" || e.Cause != "server_error" {
		t.Fatalf("breaker event %+v", e)
	}
	d.hxTarget("POST", "/runtime/breakers/fake/reset", views.BreakersPanelID, nil, http.StatusOK)
	if e := evNewest(t, f.app, events.BreakerClosed); e.Cause != events.CauseAdmin {
		t.Fatalf("breaker reset event %+v", e)
	}

	// With model lockout on, a 404 for one model locks it on fk-a.
	f.app.Clock.Advance(time.Hour)
	f.fu.ClearScripts()
	patchResilience(t, f.app, `{"modelLockout":{"enabled":true}}`)
	f.fu.ScriptModel("fk-a", "model-x", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found", ErrorMessage: "The model does not exist"})
	f.fu.ScriptModel("fk-b", "model-x", fakeupstream.Step{Status: 404, ErrorCode: "model_not_found", ErrorMessage: "The model does not exist"})
	rtChat(t, f, "model-x")
	if e := evNewest(t, f.app, events.LockoutSet); e.Model != "model-x" || e.Cause != "not_found" || e.Status != 404 {
		t.Fatalf("lockout event %+v", e)
	}

	// The page shows them newest first, with names resolved at render time.
	doc := dashCheckHTML(t, d.do("GET", "/runtime/events", nil, true, http.StatusOK))
	rows := evRows(t, doc)
	want := []string{
		"Lockout set | model-x on conn-1 | not found (404)",
		"Lockout set | model-x on conn-0 | not found (404)",
		"Breaker closed | " + fake.Name + " | admin · " + session,
		"Breaker opened | " + fake.Name + " | server error",
	}
	if len(rows) < len(want) || strings.Join(rows[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant first:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(strings.Join(rows, "\n"), "Cooldown cleared | conn-0 · "+fake.Name+" | admin · "+session) ||
		!strings.Contains(strings.Join(rows, "\n"), "Cooldown set | conn-0 · "+fake.Name+" | rate limit (429)") {
		t.Errorf("cooldown rows missing:\n%s", strings.Join(rows, "\n"))
	}
	when := doc.Find(dashTID(views.RowID(views.RowEvent, "0")) + ` [data-label="Time"] time`)
	if when.AttrOr("datetime", "") != views.RFC3339(f.app.Clock.Now()) || !strings.HasSuffix(when.AttrOr("title", ""), " UTC") {
		t.Errorf("time cell datetime %q title %q", when.AttrOr("datetime", ""), when.AttrOr("title", ""))
	}
	if doc.Find(dashTID(views.EventsEmptyID)).Length() != 0 {
		t.Error("empty state next to events")
	}
	// The whole page carries the panel, after the other panels.
	page := dashCheckHTML(t, d.do("GET", "/runtime", nil, false, http.StatusOK))
	rtPolled(t, dashFind(t, page, dashTID(views.EventsPanelID)), "/runtime/events")
	if got := len(evRows(t, page)); got != len(rows) {
		t.Errorf("page lists %d events, fragment %d", got, len(rows))
	}

	// The admin clears the lockouts: one lockout cleared per model and connection, cause admin.
	d.hxTarget("POST", "/runtime/model-cooldowns/clear", views.ModelCooldownsCardID, nil, http.StatusOK)
	list := f.app.Server.Events().Snapshot()
	if list[0].Type != events.LockoutCleared || list[1].Type != events.LockoutCleared || list[0].Cause != events.CauseAdmin ||
		list[2].Type == events.LockoutCleared {
		t.Fatalf("after clear all: %+v", list[:3])
	}

	// A 402 makes fk-b terminal; Reset state ends it.
	f.fu.ClearScripts()
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	f.fu.Script("fk-b", fakeupstream.Step{Status: 402, ErrorMessage: "Your credit balance is too low"})
	f.app.Clock.Advance(time.Hour)
	rtChat(t, f, "m1")
	if e := evNewest(t, f.app, events.TerminalSet); e.ConnectionID != b.ID || e.Cause != "credits_exhausted" || e.Status != 402 {
		t.Fatalf("terminal event %+v", e)
	}
	// This time a manage key resets it through the API: the event names the key.
	ops, opsSecret := f.app.NewKey("ops", services.ScopeManage)
	if rec := f.app.Do(testkit.Request("POST", "/api/connections/"+b.ID+"/reset", "{}", "Authorization", "Bearer "+opsSecret,
		"Content-Type", "application/json")); rec.Code != http.StatusOK {
		t.Fatalf("API reset: %d %s", rec.Code, rec.Body.String())
	}
	if e := evNewest(t, f.app, events.TerminalReset); e.ConnectionID != b.ID || e.Cause != events.CauseAdmin ||
		e.Actor != "key ops "+ops.Prefix {
		t.Fatalf("terminal reset event %+v, want the manage key named", e)
	}

	// The API twin lists the same events, newest first, with the subject in words.
	got := adminGet(t, f.app, "/api/resilience/events")
	items, _ := got["events"].([]any)
	if len(items) != len(f.app.Server.Events().Snapshot()) {
		t.Fatalf("API lists %d events", len(items))
	}
	first, _ := items[0].(map[string]any)
	if first["type"] != "terminal_reset" || first["subject"] != "conn-1 · "+fake.Name || first["cause"] != "admin" ||
		first["actor"] != "key ops "+ops.Prefix ||
		first["connectionId"] != b.ID || first["at"] != f.app.Clock.Now().UTC().Format("2006-01-02T15:04:05.000Z") {
		t.Errorf("API event %v", first)
	}
}

func TestRuntimeEventsLeaseEnded(t *testing.T) {
	f := newGW(t, "fk-1")
	d := rtDash(t, f)
	c1 := f.conns["fk-1"].ID
	_, secret, err := f.app.Server.Keys().Create(t.Context(), services.KeyInput{Name: services.Some("agent-a"),
		Scopes: services.Some([]string{"inference", "lease:exclusive"}), AllowedConnections: services.Some([]string{c1})})
	if err != nil {
		t.Fatal(err)
	}
	owner := "vlo_" + strings.Repeat("E", 43)
	if resp, body := postKey(t, f.url+"/v1/session-leases", secret, `{"action":"acquire","model":"fake/m1"}`, "X-Switchyard-Lease-Owner", owner); resp.StatusCode != 200 {
		t.Fatalf("acquire: %d %s", resp.StatusCode, body)
	}
	items, _ := adminGet(t, f.app, "/api/resilience/leases")["items"].([]any)
	id, _ := items[0].(map[string]any)["id"].(string)
	if n := len(f.app.Server.Events().Snapshot()); n != 0 {
		t.Fatalf("acquiring a lease recorded %d events", n)
	}
	d.hxTarget("POST", "/runtime/leases/"+id+"/end", views.LeasesPanelID, nil, http.StatusOK)
	e := evNewest(t, f.app, events.LeaseEnded)
	if e.LeaseID != id || e.ConnectionID != c1 || e.Cause != events.CauseAdmin {
		t.Fatalf("lease event %+v", e)
	}
	rows := evRows(t, dashCheckHTML(t, d.do("GET", "/runtime/events", nil, true, http.StatusOK)))
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "Lease ended | lease "+id+" on conn-0 | admin · session ") {
		t.Fatalf("rows %q", rows)
	}
}

// evWaitPins waits until the app holds n session pins: a request pins its
// session once its answer is sent, so the client may see the answer first.
func evWaitPins(t *testing.T, a *testkit.App, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for a.Server.Pins().Count() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d session pins, want %d", a.Server.Pins().Count(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRuntimeAffinityLineClearAllPins(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	d := rtDash(t, f)
	line := func() *goquery.Selection {
		t.Helper()
		doc := dashCheckHTML(t, d.do("GET", "/runtime/affinity", nil, true, http.StatusOK))
		s := dashFind(t, doc, dashTID(views.AffinityLineID))
		rtPolled(t, s, "/runtime/affinity")
		return s
	}
	if got := rtText(line().Find(dashTID(views.AffinityPinsID))); got != "0 active pins" {
		t.Fatalf("fresh line %q", got)
	}
	if line().Find(dashTID(views.AffinityClearID)).Length() != 0 {
		t.Error("Clear all pins offered with no pin")
	}
	for _, s := range []string{"sess-1", "sess-2"} {
		if r, body := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody, "X-Session-Id", s); r.StatusCode != 200 {
			t.Fatalf("chat: %d %s", r.StatusCode, body)
		}
	}
	evWaitPins(t, f.app, 2)
	l := line()
	if got := rtText(l.Find(dashTID(views.AffinityPinsID))); got != "2 active pins" {
		t.Fatalf("line %q, want 2 active pins", got)
	}
	// The line sits in the KPI strip's place on the whole page.
	page := dashCheckHTML(t, d.do("GET", "/runtime", nil, false, http.StatusOK))
	if got := rtText(dashFind(t, page, dashTID(views.AffinityPinsID))); got != "2 active pins" {
		t.Errorf("page line %q", got)
	}
	dashFind(t, page, "#"+views.AffinityConfirmID)

	// Clear all pins opens its confirmation in the slot below the line; nothing is cleared yet.
	btn := dashFind(t, dashParse(t, d.do("GET", "/runtime/affinity", nil, true, http.StatusOK)), dashTID(views.AffinityClearID))
	if btn.AttrOr("hx-get", "") != "/runtime/affinity/confirm-clear" || btn.AttrOr("hx-target", "") != "#"+views.AffinityConfirmID {
		t.Errorf("Clear all pins %q → %q", btn.AttrOr("hx-get", ""), btn.AttrOr("hx-target", ""))
	}
	cf := dashCheckHTML(t, d.hxTarget("GET", "/runtime/affinity/confirm-clear", views.AffinityConfirmID, nil, http.StatusOK))
	if txt := rtText(dashFind(t, cf, dashTID(views.ConfirmPanelID))); !strings.Contains(txt, "Clear all session pins?") ||
		!strings.Contains(txt, "2 active pins are dropped.") {
		t.Errorf("confirmation %q", txt)
	}
	submit := dashFind(t, cf, dashTID(views.ConfirmSubmitID))
	if submit.AttrOr("hx-post", "") != "/runtime/affinity/clear" || submit.AttrOr("hx-target", "") != "#"+views.AffinityLineID {
		t.Errorf("confirm submit %q → %q", submit.AttrOr("hx-post", ""), submit.AttrOr("hx-target", ""))
	}
	if _, ok := dashFind(t, cf, dashTID(views.ConfirmCancelID)).Attr("data-autofocus"); !ok {
		t.Error("Cancel does not take focus")
	}
	full := dashParse(t, d.do("GET", "/runtime/affinity/confirm-clear", nil, false, http.StatusOK))
	dashFind(t, full, "#"+views.AffinityConfirmID+" "+dashTID(views.ConfirmPanelID))
	if n := f.app.Server.Pins().Count(); n != 2 {
		t.Fatalf("opening the confirmation changed the pins: %d", n)
	}

	// Confirmed: the pins go (same service call as DELETE /api/resilience/affinity),
	// the line comes back at 0, its slot is emptied, the toast and resilience-changed go out.
	rec := d.hxTarget("POST", "/runtime/affinity/clear", views.AffinityLineID, nil, http.StatusOK)
	dashWantEvent(t, rec, views.EventResilienceChanged)
	if got := dashToast(t, rec); got != "Cleared 2 session pins." {
		t.Errorf("toast %q", got)
	}
	doc := dashCheckHTML(t, rec)
	if got := rtText(dashFind(t, doc, dashTID(views.AffinityPinsID))); got != "0 active pins" {
		t.Errorf("line after clear %q", got)
	}
	dashFind(t, doc, "#"+views.AffinityConfirmID+`[hx-swap-oob="true"]`)
	if n := f.app.Server.Pins().Count(); n != 0 {
		t.Fatalf("%d pins left", n)
	}
	// Again: nothing to clear, said plainly; without htmx a redirect back.
	rec = d.hxTarget("POST", "/runtime/affinity/clear", views.AffinityLineID, nil, http.StatusOK)
	if got := dashToast(t, rec); got != "Cleared 0 session pins." {
		t.Errorf("second toast %q", got)
	}
	d.do("POST", "/runtime/affinity/clear", nil, false, http.StatusSeeOther)

	// The API twin answers from the same service method.
	if r, body := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody, "X-Session-Id", "sess-3"); r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, body)
	}
	evWaitPins(t, f.app, 1)
	req := testkit.Request("DELETE", "/api/resilience/affinity", "", "Sec-Fetch-Site", "same-origin")
	req.AddCookie(f.app.Login())
	rec = f.app.Do(req)
	var out map[string]int
	if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != 200 || err != nil || out["pinsCleared"] != 1 {
		t.Fatalf("DELETE /api/resilience/affinity: %d %s", rec.Code, rec.Body.String())
	}

	// With affinity switched off the line says so and offers nothing.
	patchResilience(t, f.app, `{"sessionAffinity":{"ttlMs":0}}`)
	if got := rtText(line().Find(dashTID(views.AffinityPinsID))); !strings.HasPrefix(got, "off") {
		t.Errorf("line with affinity off %q", got)
	}
}

// evWait waits until the newest event of the app's ring is of type want: a
// request's last records (a success, the emergency fallback that answered)
// are made once its answer is sent.
func evWait(t *testing.T, a *testkit.App, want events.Type) events.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if list := a.Server.Events().Snapshot(); len(list) > 0 && list[0].Type == want {
			return list[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event: %+v", want, a.Server.Events().Snapshot())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// evFallbackTo turns the emergency fallback on, to target.
func evFallbackTo(t *testing.T, f *gwFixture, target string) {
	t.Helper()
	patchResilience(t, f.app, `{"emergencyFallback":{"target":"`+target+`"}}`)
	req := testkit.Request("PATCH", "/api/feature-flags", `{"emergencyFallback":true}`, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
	req.AddCookie(f.app.Login())
	if rec := f.app.Do(req); rec.Code != 200 {
		t.Fatalf("PATCH /api/feature-flags: %d %s", rec.Code, rec.Body.String())
	}
}

func TestRuntimeEventsEmergencyFallbackUsed(t *testing.T) {
	f := twoProviders(t)
	d := rtDash(t, f)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	evFallbackTo(t, f, "fakeb/m2")
	resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Emergency-Fallback") == "" {
		t.Fatalf("fallback: %d %v", resp.StatusCode, resp.Header)
	}
	e := evWait(t, f.app, events.EmergencyFallback)
	if e.Model != "fake/m1" || e.Target != "fakeb/m2" || e.Cause != "server_error" {
		t.Fatalf("fallback event %+v", e)
	}
	// Before it: the 503 that cooled fk-a.
	if list := f.app.Server.Events().Snapshot(); len(list) != 2 || list[1].Type != events.CooldownSet {
		t.Fatalf("events %+v", list)
	}
	rows := evRows(t, dashCheckHTML(t, d.do("GET", "/runtime/events", nil, true, http.StatusOK)))
	if len(rows) == 0 || rows[0] != "Emergency fallback used | fake/m1 → fakeb/m2 | server error" {
		t.Fatalf("rows %q", rows)
	}
}

// An emergency fallback that fails too is an event of its own, with the
// fallback's own failure as the cause.
func TestRuntimeEventsEmergencyFallbackFailed(t *testing.T) {
	f := twoProviders(t)
	d := rtDash(t, f)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	f.fu.Script("fk-b", fakeupstream.Step{Status: 429, RetryAfter: "30"})
	evFallbackTo(t, f, "fakeb/m2")
	resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	if resp.StatusCode < 400 {
		t.Fatalf("both failed, answered %d", resp.StatusCode)
	}
	e := evWait(t, f.app, events.EmergencyFallbackFailed)
	if e.Model != "fake/m1" || e.Target != "fakeb/m2" || e.Cause != "rate_limit" {
		t.Fatalf("fallback event %+v, want the fallback's own rate limit", e)
	}
	rows := evRows(t, dashCheckHTML(t, d.do("GET", "/runtime/events", nil, true, http.StatusOK)))
	if len(rows) == 0 || rows[0] != "Emergency fallback failed | fake/m1 → fakeb/m2 | rate limit" {
		t.Fatalf("rows %q", rows)
	}
}
