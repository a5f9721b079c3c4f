package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/views"
)

// The live tail of the Request logs page in a real Chromium (50-dashboard
// §6.7, §3.5): switched on, a request sent through the gateway appears at
// the top of the table without a reload; while the detail drawer is open the
// poll is skipped (no request to /logs/rows), and closing the drawer brings
// what arrived meanwhile. Every wait is for a condition, under the step's
// timeout.

// ltTailHook records, in the page, each live tail poll htmx was about to
// send: it runs after app.js's listener, so defaultPrevented says app.js
// skipped it. Counts land on <html> as data-test-tail-sent and
// data-test-tail-skipped, and data-test-tail-sent-N and
// data-test-tail-skipped-N mark the N-th of each, so a test can wait for one.
const ltTailHook = `(function () {
  var root = document.documentElement;
  Array.from(root.attributes).forEach(function (a) {
    if (a.name.indexOf("data-test-tail-") === 0) { root.removeAttribute(a.name); }
  });
  root.setAttribute("data-test-tail-sent", "0");
  root.setAttribute("data-test-tail-skipped", "0");
  if (window.__tailHook) { return; }
  window.__tailHook = true;
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || elt.getAttribute("data-testid") !== "` + views.LogsTailID + `") { return; }
    var name = e.defaultPrevented ? "data-test-tail-skipped" : "data-test-tail-sent";
    var n = Number(root.getAttribute(name)) + 1;
    root.setAttribute(name, String(n));
    root.setAttribute(name + "-" + n, "");
  });
})()`

func TestDashboardBrowserLiveTail(t *testing.T) {
	exe := brBrowserPath(t)
	fu := fakeupstream.Start(t)
	env := map[string]string{"SWITCHYARD_DATA_DIR": t.TempDir(), "SWITCHYARD_ADMIN_PASSWORD": brAdminPassword}
	gw := testkit.StartApp(t, []string{"--allow-private-upstreams", fu.Addr()}, env)
	base := gw.BaseURL
	b := brOpen(t, exe, brArtifacts(t, "switchyard-livetail-*"))
	api := &brAPI{t: t, b: b, base: base, client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}

	b.step("sign in and seed", brStepTimeout)
	secret := brSignInWithConnection(b, api, base, fu.URL(), "fake-a", "fk-good", "tail")
	_, first := brChat(t, b.sctx, base, secret, "fake/m1", "first")
	api.waitOK("/logs/" + first)

	// Off by default; switching it on puts it in the address and starts the poll.
	b.step("switch the live tail on", brStepTimeout)
	b.do(chromedp.Navigate(base+"/logs"), chromedp.WaitVisible(brTID(views.RowID(views.RowLog, first))))
	if ltPolls(b) != 0 || brRun(b, chromedp.Evaluate[bool](`document.querySelector('[data-testid="`+views.LogsTailSwitchID+`"]').checked`)) {
		t.Fatal("the live tail is on before it was switched on")
	}
	b.swap("#"+views.LogsListID, chromedp.Click(brTID(views.LogsTailSwitchID)))
	b.do(chromedp.WaitReady(chromedp.CSS(`[data-testid="` + views.LogsTailID + `"][data-poll]`)))
	if loc := brRun(b, chromedp.Location()); !strings.Contains(loc, views.LogTailParam+"=on") {
		t.Errorf("the address %s does not keep the switch", loc)
	}
	// A reload keeps it on.
	b.do(chromedp.Reload(), chromedp.WaitVisible(brTID(views.RowID(views.RowLog, first))),
		chromedp.WaitReady(chromedp.CSS(`[data-testid="`+views.LogsTailID+`"][data-poll]`)))
	if !brRun(b, chromedp.Evaluate[bool](`document.querySelector('[data-testid="`+views.LogsTailSwitchID+`"]').checked`)) {
		t.Fatal("the switch is off after a reload")
	}

	// A new request appears at the top, without a reload.
	b.step("a new request appears", brStepTimeout)
	b.do(chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`), chromedp.Evaluate[chromedp.Void](ltTailHook))
	_, second := brChat(t, b.sctx, base, secret, "fake/m1", "second")
	// Settled: htmx has wired up the new row's link (a click before that would load the page).
	b.do(chromedp.WaitVisible(brTID(views.RowID(views.RowLog, second))), brSettled)
	if !brRun(b, chromedp.Evaluate[bool](`window.__sameDocument === true`)) {
		t.Fatal("the page reloaded")
	}
	if got := ltRowOrder(b); len(got) < 2 || got[0] != second || got[1] != first {
		t.Fatalf("rows %v, want %s then %s", got, second, first)
	}
	if ltPolls(b) == 0 {
		t.Fatal("the row came without a request to " + views.LogRowsPath)
	}

	// The drawer open: the poll is skipped, so a request sent meanwhile
	// stays off the table until it closes.
	b.step("no poll while the drawer is open", brStepTimeout)
	link := views.RowID(views.RowLogLink, second)
	b.do(chromedp.Click(brTID(link)), chromedp.WaitVisible(brTID(views.LogDetailID)), brSettled)
	b.do(chromedp.Evaluate[chromedp.Void](ltTailHook)) // counts from now
	_, third := brChat(t, b.sctx, base, secret, "fake/m1", "third")
	api.waitOK("/logs/" + third)
	// The first poll due: any request sent before the drawer opened has
	// been seen by now. Then the next one (or a poll sent, which fails).
	b.do(chromedp.WaitReady(chromedp.CSS(`html[data-test-tail-skipped-1], html[data-test-tail-sent-1]`)))
	before := ltPolls(b)
	b.do(chromedp.WaitReady(chromedp.CSS(`html[data-test-tail-skipped-2], html[data-test-tail-sent-1]`)))
	if sent := brRun(b, chromedp.Evaluate[string](`document.documentElement.getAttribute("data-test-tail-sent")`)); sent != "0" {
		t.Errorf("%s live tail polls sent while the drawer was open", sent)
	}
	if after := ltPolls(b); after != before {
		t.Errorf("%d requests to %s while the drawer was open", after-before, views.LogRowsPath)
	}
	if brRun(b, chromedp.Evaluate[bool](`document.querySelector('[data-testid="`+views.RowID(views.RowLog, third)+`"]') !== null`)) {
		t.Error("a row was added while the drawer was open")
	}
	// Closing it polls at once.
	b.do(chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(brTID(views.LogDetailID)),
		chromedp.WaitVisible(brTID(views.RowID(views.RowLog, third))))
	if got := ltRowOrder(b); len(got) < 3 || got[0] != third || got[1] != second || got[2] != first {
		t.Fatalf("rows %v, want %s, %s, %s", got, third, second, first)
	}
	b.shot("logs-live-tail.png")
	if got := brRun(b, chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ""`)); got != link {
		t.Errorf("focus after Esc on %q, want the row link %q", got, link)
	}
	if !brRun(b, chromedp.Evaluate[bool](`window.__sameDocument === true`)) {
		t.Fatal("the page reloaded")
	}

	b.step("a failed poll marks the tail stale", brStepTimeout)
	ltFailedPoll(b, 3)

	// axe and the layout check, with the switch on, at both widths.
	b.checkAudits(b.auditPages(base, []string{"/logs?" + views.LogTailParam + "=on"}))
	ltNoPageErrors(b, base)
}

// ltFailedPoll answers the live tail's polls with 500 (through the DevTools
// protocol): the table keeps its rows, the poll gets the stale note and
// class every polled region gets, and both go with the next answer.
func ltFailedPoll(b *brBrowser, rows int) {
	b.t.Helper()
	b.expectFailure(views.LogRowsPath, http.StatusInternalServerError)
	paused := make(chan fetch.RequestID, 16)
	if err := chromedp.Listen(b.sctx, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			select {
			case paused <- e.RequestID:
			default:
			}
		}
	}); err != nil {
		b.t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case id := <-paused:
				_, _ = chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: id, ResponseCode: http.StatusInternalServerError})
			case <-done:
				return
			}
		}
	}()
	if _, err := chromedp.Call(b.sctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*" + views.LogRowsPath + "*"}}}); err != nil {
		b.t.Fatal(err)
	}
	note := chromedp.CSS(`[data-testid="` + views.LogsListID + `"] .stale-note`)
	b.do(chromedp.Evaluate[chromedp.Void](brRefreshPolls), chromedp.WaitVisible(note),
		chromedp.WaitReady(chromedp.CSS(`[data-testid="`+views.LogsTailID+`"].is-stale`)))
	if got := strings.TrimSpace(brRun(b, chromedp.Text(note))); got != "Couldn't refresh — retrying" {
		b.t.Errorf("stale note %q", got)
	}
	if got := ltRowOrder(b); len(got) != rows {
		b.t.Errorf("%d rows after a failed poll, want %d kept", len(got), rows)
	}
	if _, err := chromedp.Call(b.sctx, fetch.Disable, cdp.Empty{}); err != nil {
		b.t.Fatal(err)
	}
	b.do(chromedp.Evaluate[chromedp.Void](brRefreshPolls), chromedp.WaitNotPresent(note), chromedp.WaitNotPresent(chromedp.CSS(".is-stale")))
	// The page's reports of the failures provoked here (the recorder's and
	// htmx's own) are expected.
	b.mu.Lock()
	defer b.mu.Unlock()
	b.htmx = ltDrop(b.htmx, "htmx:responseError 500 "+views.LogRowsPath)
	b.console = ltDrop(b.console, "Response Status Error Code 500 from "+views.LogRowsPath)
}

// ltDrop is lines without those that contain s.
func ltDrop(lines []string, s string) []string {
	var kept []string
	for _, l := range lines {
		if !strings.Contains(l, s) {
			kept = append(kept, l)
		}
	}
	return kept
}

// brSignInWithConnection signs the browser in with brAdminPassword and, through
// the management API, adds one openai-format connection named name with
// apiKey on the fake upstream at fakeURL and a client key named keyName,
// whose secret it returns.
func brSignInWithConnection(b *brBrowser, api *brAPI, base, fakeURL, name, apiKey, keyName string) string {
	b.t.Helper()
	b.do(chromedp.Navigate(base+"/login"), chromedp.WaitVisible(brTID(views.LoginFormID)),
		brFill("#password", brAdminPassword), chromedp.Click(brTID("login-submit")),
		chromedp.WaitVisible(brTID(views.OverviewCountsID)))
	ltAPIPost(api, "/api/connections", fmt.Sprintf(`{"provider":"fake","name":%q,"apiKey":%q,"baseUrl":"%s/v1",`+
		`"custom":{"wireFormat":"openai","authClass":"apikey"}}`, name, apiKey, fakeURL))
	secret, _ := ltAPIPost(api, "/api/keys", fmt.Sprintf(`{"name":%q}`, keyName))["secret"].(string)
	if secret == "" {
		b.t.Fatal("no key secret")
	}
	return secret
}

// ltAPIPost sends a management API POST with the browser's session and
// returns the 201 answer.
func ltAPIPost(a *brAPI, path, body string) map[string]any {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.b.sctx, http.MethodPost, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(a.cookie())
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &out) != nil {
		a.t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	return out
}

// ltPolls counts the browser's requests to /logs/rows so far.
func ltPolls(b *brBrowser) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, raw := range b.requests {
		if u, err := url.Parse(raw); err == nil && u.Path == views.LogRowsPath {
			n++
		}
	}
	return n
}

// ltRowOrder is the request ids of the table's rows, top to bottom.
func ltRowOrder(b *brBrowser) []string {
	b.t.Helper()
	js := `Array.from(document.querySelectorAll('[data-testid="` + views.LogsListID + `"] tbody > tr[data-testid^="` + views.RowLog + `-"]')).map(function (r) {
  return r.getAttribute("data-testid").slice(` + fmt.Sprint(len(views.RowLog)+1) + `);
})`
	return brRun(b, chromedp.Evaluate[[]string](js))
}

// ltNoPageErrors fails the test for any console error, exception, CSP
// violation, htmx response error or request to another host the page made.
func ltNoPageErrors(b *brBrowser, base string) {
	b.t.Helper()
	host := brHost(b.t, base)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, list := range []struct {
		what  string
		items []string
	}{{"console error", b.console}, {"uncaught exception", b.exceptions}, {"CSP violation", b.csp}, {"htmx response error", b.htmx}} {
		for _, it := range list.items {
			b.t.Errorf("%s: %s", list.what, it)
		}
	}
	for _, raw := range b.requests {
		if u, err := url.Parse(raw); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != host {
			b.t.Errorf("request to %s, not to the gateway", raw)
		}
	}
}
