package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"switchyard/services"
	"switchyard/views"
)

// The Request logs page's live tail (50-dashboard §6.7, §3.5): the switch,
// its poll GET /logs/rows?after=<cursor>&<filters> and what the poll answers.

// ltWrite stores request log entries, i seconds after the clock's now each.
func ltWrite(t *testing.T, d *dashClient, entries ...services.RequestLogEntry) {
	t.Helper()
	for i := range entries {
		if entries[i].Endpoint == "" {
			entries[i].Endpoint = "/v1/chat/completions"
		}
		if entries[i].Status == 0 {
			entries[i].Status, entries[i].Outcome, entries[i].Attempts = 200, services.RequestOutcomeSuccess, 1
		}
	}
	if err := d.app.Server.RequestLogs().WriteRequestLogs(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
}

// ltEntry is an entry at the clock's now plus sec seconds.
func ltEntry(d *dashClient, id string, sec int, keyID string) services.RequestLogEntry {
	return services.RequestLogEntry{ID: id, CreatedAt: d.app.Clock.Now().Add(time.Duration(sec) * time.Second), APIKeyID: keyID,
		RequestedModel: "m1"}
}

// ltList asks for the list region as the filter form does.
func ltList(t *testing.T, d *dashClient, query string) *goquery.Document {
	t.Helper()
	req := d.req("GET", "/logs?"+query, nil, true)
	req.Header.Set("HX-Target", views.LogsListID)
	rec := d.send(req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /logs?%s: %d %s", query, rec.Code, dashTrunc(rec.Body.String(), 2000))
	}
	return dashCheckHTML(t, rec)
}

// ltPoll sends the poll the page would send and parses the answer inside a
// table, where htmx swaps it (a top-level <tbody> would be dropped).
func ltPoll(t *testing.T, d *dashClient, path string, want int) *goquery.Document {
	t.Helper()
	rec := d.do("GET", path, nil, true, want)
	if want == http.StatusNoContent {
		if rec.Body.Len() != 0 {
			t.Fatalf("GET %s: 204 with a body %q", path, rec.Body.String())
		}
		return nil
	}
	body := rec.Body.String()
	if strings.HasPrefix(body, "<tbody") {
		body = "<table>" + body + "</table>"
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// ltPollURL is the poll of a document: the live tail element's hx-get, ""
// when nothing polls.
func ltPollURL(t *testing.T, doc *goquery.Document) string {
	t.Helper()
	p := doc.Find(dashTID(views.LogsTailID))
	if p.Length() > 1 {
		t.Fatalf("%d live tail polls", p.Length())
	}
	if p.Length() == 0 {
		return ""
	}
	if !p.Is("[data-poll]") || p.AttrOr("hx-trigger", "") != views.LogTailTrigger || p.AttrOr("hx-swap", "") != "outerHTML" ||
		p.AttrOr("data-poll-pause", "") != "drawer" || p.AttrOr("aria-live", "") != "" {
		h, _ := goquery.OuterHtml(p)
		t.Fatalf("the live tail poll is not a paused-with-the-drawer polled region: %s", h)
	}
	if p.Find("form, input, select, textarea, button").Length() > 0 {
		t.Fatal("the polled live tail region holds a control")
	}
	return p.AttrOr("hx-get", "")
}

// ltRowIDs are the request ids of the rows in doc, in order.
func ltRowIDs(doc *goquery.Document) []string {
	var ids []string
	doc.Find("tbody > tr[data-testid]").Each(func(_ int, s *goquery.Selection) {
		if id, ok := strings.CutPrefix(s.AttrOr("data-testid", ""), views.RowLog+"-"); ok {
			ids = append(ids, id)
		}
	})
	return ids
}

func ltCursor(e services.RequestLogEntry) string {
	return services.RequestLogCursor{CreatedAt: e.CreatedAt, ID: e.ID}.String()
}

func TestLogsLiveTailPollsForNewerRows(t *testing.T) {
	d := newDashClient(t)
	older := []services.RequestLogEntry{ltEntry(d, "req_a1", 0, "k1"), ltEntry(d, "req_a2", 1, "k2"), ltEntry(d, "req_a3", 2, "k1")}
	ltWrite(t, d, older...)

	// Off by default: the switch is there, unchecked, in the filter form, and nothing polls.
	doc := ltList(t, d, "")
	sw := dashFind(t, doc, dashTID(views.LogsTailSwitchID))
	if _, on := sw.Attr("checked"); on || sw.AttrOr("form", "") != views.LogsFiltersID || sw.AttrOr("name", "") != views.LogTailParam ||
		sw.AttrOr("role", "") != "switch" || sw.AttrOr("hx-push-url", "") != "true" {
		h, _ := goquery.OuterHtml(sw)
		t.Fatalf("switch %s", h)
	}
	if label := strings.TrimSpace(sw.Parent().Text()); !sw.Parent().Is("label") || label != "Live tail" {
		t.Errorf("switch label %q", label)
	}
	if got := ltPollURL(t, doc); got != "" {
		t.Fatalf("the tail polls while off: %s", got)
	}

	// On (the full page, as after a reload): the poll asks for what is newer than the newest row.
	full := dashCheckHTML(t, d.do("GET", "/logs?tail=on", nil, false, http.StatusOK))
	if _, on := full.Find(dashTID(views.LogsTailSwitchID)).Attr("checked"); !on {
		t.Error("the switch is off after a reload with tail=on")
	}
	poll := ltPollURL(t, full)
	if want := "/logs/rows?after=" + url.QueryEscape(ltCursor(older[2])); poll != want {
		t.Fatalf("poll %q, want %q", poll, want)
	}

	// Nothing new: 204, no body, which htmx leaves alone.
	ltPoll(t, d, poll, http.StatusNoContent)

	// Two requests arrive in one interval: both, newest first, led by the
	// poll again with the newest as its cursor.
	fresh := []services.RequestLogEntry{ltEntry(d, "req_b1", 3, "k2"), ltEntry(d, "req_b2", 4, "k1")}
	ltWrite(t, d, fresh...)
	got := ltPoll(t, d, poll, http.StatusOK)
	if ids := ltRowIDs(got); strings.Join(ids, ",") != "req_b2,req_b1" {
		t.Fatalf("poll rows %v, want req_b2,req_b1", ids)
	}
	if got.Find(dashTID(views.LogsTailGapID)).Length() != 0 {
		t.Error("a gap row without a gap")
	}
	next := ltPollURL(t, got)
	if want := "/logs/rows?after=" + url.QueryEscape(ltCursor(fresh[1])); next != want {
		t.Fatalf("next poll %q, want %q", next, want)
	}
	if dashFind(t, got, "table > tbody").First().AttrOr("data-testid", "") != views.LogsTailID {
		t.Error("the answer does not start with the poll")
	}
	// The next poll starts after them: no row twice.
	ltPoll(t, d, next, http.StatusNoContent)
	ltWrite(t, d, ltEntry(d, "req_b3", 5, "k2"))
	if ids := ltRowIDs(ltPoll(t, d, next, http.StatusOK)); strings.Join(ids, ",") != "req_b3" {
		t.Fatalf("following poll rows %v, want req_b3", ids)
	}

	// With filters: the poll carries them and only matching rows come.
	doc = ltList(t, d, "tail=on&keyId=k1")
	poll = ltPollURL(t, doc)
	u, err := url.Parse(poll)
	if err != nil || u.Path != views.LogRowsPath || u.Query().Get("keyId") != "k1" || u.Query().Get("after") != ltCursor(fresh[1]) ||
		u.Query().Has(views.LogTailParam) {
		t.Fatalf("filtered poll %q", poll)
	}
	ltWrite(t, d, ltEntry(d, "req_c1", 6, "k2"), ltEntry(d, "req_c2", 7, "k1"), ltEntry(d, "req_c3", 8, "k2"))
	if ids := ltRowIDs(ltPoll(t, d, poll, http.StatusOK)); strings.Join(ids, ",") != "req_c2" {
		t.Fatalf("filtered poll rows %v, want req_c2 (key k1 only)", ids)
	}
	// The pager keeps the switch in its links; filters keep it too.
	if _, on := doc.Find(dashTID(views.LogsTailSwitchID)).Attr("checked"); !on {
		t.Error("switch off in the filtered list")
	}
}

func TestLogsLiveTailRejectsABadCursorAndNeedsASession(t *testing.T) {
	d := newDashClient(t)
	ltWrite(t, d, ltEntry(d, "req_a1", 0, "k1"))
	for _, after := range []string{"garbage", "eyJ0IjoxfQ"} { // not base64 JSON; {"t":1} without an id
		rec := d.do("GET", "/logs/rows?after="+after, nil, true, http.StatusUnprocessableEntity)
		if rec.Body.Len() != 0 || rec.Header().Get("HX-Reswap") != "none" {
			t.Errorf("after=%s: the htmx answer would swap: %q (HX-Reswap %q)", after, rec.Body.String(), rec.Header().Get("HX-Reswap"))
		}
		d.do("GET", "/logs/rows?after="+after, nil, false, http.StatusUnprocessableEntity)
	}
	// The page's own filter checks apply: a reversed range is 422 too.
	reversed := "range=custom&since=2026-03-02T10:00&until=2026-03-01T10:00"
	d.do("GET", "/logs/rows?"+reversed, nil, true, http.StatusUnprocessableEntity)
	// On the page, the error keeps the switch as it was, and nothing polls.
	req := d.req("GET", "/logs?tail=on&"+reversed, nil, true)
	req.Header.Set("HX-Target", views.LogsListID)
	rec := d.send(req)
	if rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("reversed range: %d", rec.Code)
	}
	doc := dashCheckHTML(t, rec)
	dashFind(t, doc, dashTID(views.ErrorSummaryID))
	if _, on := dashFind(t, doc, dashTID(views.LogsTailSwitchID)).Attr("checked"); !on || ltPollURL(t, doc) != "" {
		t.Errorf("with a filter error: switch on %v, poll %q", on, ltPollURL(t, doc))
	}

	// Without a session: as /logs, a redirect to sign in.
	anon := &dashClient{t: t, app: d.app}
	for _, path := range []string{"/logs", "/logs/rows?after=" + url.QueryEscape(ltCursor(ltEntry(d, "req_a1", 0, "k1")))} {
		rec := anon.do("GET", path, nil, true, http.StatusUnauthorized)
		if !strings.HasPrefix(rec.Header().Get("HX-Redirect"), "/login?next=") || rec.Body.Len() != 0 {
			t.Errorf("%s without a session: HX-Redirect %q, body %q", path, rec.Header().Get("HX-Redirect"), rec.Body.String())
		}
		rec = anon.do("GET", path, nil, false, http.StatusSeeOther)
		if !strings.HasPrefix(rec.Header().Get("Location"), "/login?next=") {
			t.Errorf("%s without a session: Location %q", path, rec.Header().Get("Location"))
		}
	}
}

func TestLogsLiveTailOnAnEmptyList(t *testing.T) {
	d := newDashClient(t)
	// No request yet: the poll wraps the empty state and asks for everything.
	doc := ltList(t, d, "tail=on")
	dashFind(t, doc, dashTID(views.LogsTailID)+" "+dashTID(views.LogsEmptyID))
	poll := ltPollURL(t, doc)
	if poll != views.LogRowsPath {
		t.Fatalf("poll of the empty list %q", poll)
	}
	ltPoll(t, d, poll, http.StatusNoContent)
	// The first request: the poll's answer is the table, polling after it.
	first := ltEntry(d, "req_first", 0, "k1")
	ltWrite(t, d, first)
	rec := d.do("GET", poll, nil, true, http.StatusOK)
	got := dashCheckHTML(t, rec)
	if ids := ltRowIDs(got); strings.Join(ids, ",") != "req_first" {
		t.Fatalf("rows %v", ids)
	}
	if next := ltPollURL(t, got); next != "/logs/rows?after="+url.QueryEscape(ltCursor(first)) {
		t.Fatalf("next poll %q", next)
	}
	dashFind(t, got, "table caption")
	// A filter that matches nothing yet: the "no match" state polls with the filter.
	doc = ltList(t, d, "tail=on&keyId=k9")
	dashFind(t, doc, dashTID(views.LogsTailID)+" "+dashTID(views.LogsNoMatchID))
	if poll := ltPollURL(t, doc); poll != views.LogRowsPath+"?keyId=k9" {
		t.Fatalf("poll of the filtered empty list %q", poll)
	}
}

// More than a page (50) arrives between two polls: the newest 50, and a row
// saying the older ones are left out, linking to the list.
func TestLogsLiveTailCapsAPoll(t *testing.T) {
	d := newDashClient(t)
	start := ltEntry(d, "req_000", 0, "k1")
	ltWrite(t, d, start)
	poll := ltPollURL(t, ltList(t, d, "tail=on"))
	var burst []services.RequestLogEntry
	for i := 1; i <= services.DefaultRequestLogLimit+3; i++ {
		burst = append(burst, ltEntry(d, fmt.Sprintf("req_%03d", i), i, "k1"))
	}
	ltWrite(t, d, burst...)
	got := ltPoll(t, d, poll, http.StatusOK)
	ids := ltRowIDs(got)
	if len(ids) != services.DefaultRequestLogLimit || ids[0] != "req_053" || ids[len(ids)-1] != "req_004" {
		t.Fatalf("%d rows, %v … %v", len(ids), ids[:1], ids[len(ids)-1:])
	}
	gap := dashFind(t, got, "tbody:last-child > tr:last-child"+dashTID(views.LogsTailGapID))
	if href := gap.Find("a").AttrOr("href", ""); href != "/logs?tail=on" {
		t.Errorf("gap row links to %q", href)
	}
	if next := ltPollURL(t, got); next != "/logs/rows?after="+url.QueryEscape(ltCursor(burst[len(burst)-1])) {
		t.Fatalf("next poll %q", next)
	}

	// The switch is on the first page only; the Older page neither shows nor polls it.
	doc := ltList(t, d, "tail=on")
	older := dashFind(t, doc, dashTID(views.LogsOlderID)).AttrOr("hx-get", "")
	if !strings.Contains(older, "tail=on") {
		t.Errorf("Older link %q drops the switch", older)
	}
	req := d.req("GET", older, nil, true)
	req.Header.Set("HX-Target", views.LogsListID)
	page2 := dashCheckHTML(t, d.send(req))
	if page2.Find(dashTID(views.LogsTailSwitchID)).Length() != 0 || ltPollURL(t, page2) != "" {
		t.Error("the second page shows the live tail")
	}
	dashFind(t, page2, dashTID(views.LogsNewestID))
}

// A request that arrived before the rows on screen but ended after them (a
// long stream) is not lost: the tail follows when requests ended, so the
// next poll prepends it, and the one after does not repeat it.
func TestLogsLiveTailShowsARequestThatEndsLate(t *testing.T) {
	d := newDashClient(t)
	ltWrite(t, d, ltEntry(d, "req_a1", 0, "k1"), ltEntry(d, "req_a2", 10, "k1"))
	poll := ltPollURL(t, ltList(t, d, "tail=on"))
	if poll == "" {
		t.Fatal("the tail does not poll")
	}
	// Arrived at +5 s, between the two, and ran for two minutes.
	long := ltEntry(d, "req_long", 5, "k2")
	long.Stream, long.LatencyMs = true, 120_000
	ltWrite(t, d, long)
	got := ltPoll(t, d, poll, http.StatusOK)
	if ids := ltRowIDs(got); strings.Join(ids, ",") != "req_long" {
		t.Fatalf("poll rows %v, want the late-ending req_long", ids)
	}
	ltPoll(t, d, ltPollURL(t, got), http.StatusNoContent)
}
