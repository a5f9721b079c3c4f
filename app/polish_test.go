package app_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"switchyard/internal/testkit"
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
