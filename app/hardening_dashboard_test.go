package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/views"
)

// TestDashboardRepointNeedsCredentialOrPassword (issue 17 item 12, the
// dashboard): saving the edit form with a new proxy URL and no key is
// refused with the choice to paste the key again or keep it with the admin
// password; a wrong password keeps refusing; the right one saves the proxy
// and keeps the key. Before, the form saved the new proxy and the stored
// key went to it with the next request.
func TestDashboardRepointNeedsCredentialOrPassword(t *testing.T) {
	d := newDashClient(t)
	ctx := context.Background()
	conn := d.app.AddConnection(services.ConnectionInput{Provider: services.Some("openai"), Name: services.Some("main"), APIKey: services.Some(dashProviderKeyCanary)})
	form := dashConnForm("apiKey", "", "proxyUrl", "http://proxy.example.net:3128")
	rec := d.do("PUT", "/connections/"+conn.ID, form, true, http.StatusUnprocessableEntity)
	doc := dashParse(t, rec)
	if doc.Find(`[data-testid="`+views.ConnectionKeepID+`"]`).Length() != 1 || doc.Find(`input[name="currentPassword"]`).Length() != 1 {
		t.Fatalf("no keep-credential choice in the refused form: %s", dashTrunc(rec.Body.String(), 2000))
	}
	if !strings.Contains(rec.Body.String(), "enter the credential again") {
		t.Error("the refusal does not say what to do")
	}
	form.Set("keepCredentials", "on")
	form.Set("currentPassword", "not the admin password")
	rec = d.do("PUT", "/connections/"+conn.ID, form, true, http.StatusUnprocessableEntity)
	if !strings.Contains(rec.Body.String(), services.MsgCurrentWrong) {
		t.Errorf("wrong password: %s", dashTrunc(rec.Body.String(), 1500))
	}
	if c, _ := d.app.Server.Connections().Get(ctx, conn.ID); c.ProxyURL != "" {
		t.Fatalf("proxy saved without confirmation: %s", c.ProxyURL.Reveal())
	}
	form.Set("currentPassword", testkit.AdminPassword)
	d.do("PUT", "/connections/"+conn.ID, form, true, http.StatusOK)
	c, _ := d.app.Server.Connections().Get(ctx, conn.ID)
	if c.ProxyURL.Reveal() != "http://proxy.example.net:3128" || c.Credentials.APIKey.Reveal() != dashProviderKeyCanary {
		t.Fatalf("after confirmation: proxy %q", c.ProxyURL.Reveal())
	}
	// Pasting the key again works without the password.
	d.do("PUT", "/connections/"+conn.ID, dashConnForm("apiKey", dashProviderKeyCanary, "proxyUrl", ""), true, http.StatusOK)
	for _, b := range d.bodies {
		if strings.Contains(b, testkit.AdminPassword) || strings.Contains(b, dashProviderKeyCanary) {
			t.Fatal("a response echoed the admin password or the key")
		}
	}
}
