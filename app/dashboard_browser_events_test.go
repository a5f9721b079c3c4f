package app_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/internal/testkit"
	"switchyard/views"
)

// The Runtime page's Recent events and Session affinity line in a real
// Chromium (50-dashboard §6.8): a failing request shows up as an event, the
// pins a session made are cleared through the confirmation panel, and the
// page has no serious or critical axe violation with rows in the panel.

// brChatSession sends one chat request of a client session (X-Session-Id)
// and fails unless it is answered 200.
func brChatSession(t *testing.T, ctx context.Context, base, key, model, session string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat of session %s: %d", session, resp.StatusCode)
	}
}

func TestDashboardBrowserRecentEvents(t *testing.T) {
	exe := brBrowserPath(t)
	// The demo: connection rate-limited answers 429 with Retry-After,
	// failing answers 503, healthy answers; the demo client key is printed.
	gw := testkit.StartApp(t, []string{"--demo"}, map[string]string{"SWITCHYARD_ADMIN_PASSWORD": brAdminPassword})
	base := gw.BaseURL
	line, err := gw.Stdout.WaitFor("demo client key: ", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clientKey := strings.TrimSpace(strings.TrimPrefix(line, "demo client key: "))
	b := brOpen(t, exe, brArtifacts(t, "switchyard-events-*"))

	b.step("1 sign in", brStepTimeout)
	b.do(chromedp.Navigate(base+"/runtime"), chromedp.WaitVisible(brTID(views.LoginFormID)),
		brFill("#password", brAdminPassword), chromedp.Click(brTID("login-submit")),
		chromedp.WaitVisible(brTID(views.RuntimePageID)), chromedp.WaitVisible(brTID(views.EventsEmptyID)))
	if got := strings.Join(strings.Fields(brRun(b, chromedp.Text(brTID(views.EventsEmptyID)))), " "); got != "No resilience events since the gateway started." {
		t.Errorf("empty events panel %q", got)
	}

	// A request of a session: the rate-limited and the failing demo
	// accounts fail before the healthy one answers. The panel shows the
	// cooldowns at its next refresh (its poll, or the tab showing again).
	b.step("2 failing request shows as an event", brStepTimeout)
	brChatSession(t, b.sctx, base, clientKey, "demo/demo-fast", "browser-session-1")
	b.do(chromedp.Evaluate[chromedp.Void](brRefreshPolls),
		chromedp.WaitVisible(brText(views.EventsTableID, "Cooldown set")),
		chromedp.WaitVisible(brText(views.EventsTableID, "rate limit (429)")),
		chromedp.WaitVisible(brText(views.EventsTableID, "rate-limited")),
		chromedp.WaitVisible(brText(views.AffinityPinsID, "1 active pin")), brSettled)
	b.shot("events-01-runtime-events.png")

	// Clear all pins: the confirmation opens below the line with Cancel
	// focused; confirming drops the pin, says so, and empties the slot.
	b.step("3 clear all pins", brStepTimeout)
	b.do(chromedp.Click(brTID(views.AffinityClearID)),
		chromedp.WaitVisible(chromedp.CSS("#"+views.AffinityConfirmID+` [data-testid="`+views.ConfirmPanelID+`"]`)),
		chromedp.WaitVisible(brText(views.ConfirmPanelID, "Clear all session pins?")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="`+views.ConfirmCancelID+`"]:focus`)))
	b.shot("events-02-confirm-clear-pins.png")
	b.do(chromedp.Click(brTID(views.ConfirmSubmitID)),
		chromedp.WaitVisible(brToast("Cleared 1 session pin.")),
		chromedp.WaitVisible(brText(views.AffinityPinsID, "0 active pins")),
		chromedp.WaitNotPresent(chromedp.CSS("#"+views.AffinityConfirmID+" *")),
		chromedp.WaitNotPresent(brTID(views.AffinityClearID)), brSettled)

	// The page with events, at both widths: no sideways scrolling, no
	// serious or critical axe violation.
	b.step("4 layout and accessibility", brStepTimeout)
	var audits []brAudit
	for _, vp := range brViewports {
		b.do(chromedp.EmulateViewport(vp.w, vp.h))
		audits = append(audits, b.auditCurrent("/runtime", vp.w))
	}
	b.do(chromedp.EmulateViewport(1280, 800))
	b.checkAudits(audits)
	for _, a := range audits {
		if a.serious() != 0 {
			t.Errorf("/runtime at %d px: %d serious or critical axe nodes", a.viewport, a.serious())
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, list := range []struct {
		what  string
		items []string
	}{{"console error", b.console}, {"uncaught exception", b.exceptions}, {"CSP violation", b.csp}, {"htmx response error", b.htmx}} {
		for _, it := range list.items {
			t.Errorf("%s: %s", list.what, it)
		}
	}
	host := brHost(t, base)
	for _, raw := range b.requests {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "data" || u.Scheme == "about" {
			continue
		}
		if u.Host != host {
			t.Errorf("request to %s, not to the gateway", raw)
		}
	}
}
