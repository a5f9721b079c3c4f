package app_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"switchyard/internal/testkit"
)

func form(vals url.Values) string { return vals.Encode() }

func postForm(a *testkit.App, path string, vals url.Values, cookie *http.Cookie, remote string, extra ...string) *http.Response {
	req := testkit.Request("POST", path, form(vals), append([]string{"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin"}, extra...)...)
	if remote != "" {
		req.RemoteAddr = remote
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return a.Do(req).Result()
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if strings.HasSuffix(c.Name, "switchyard_session") && c.MaxAge >= 0 {
			return c
		}
	}
	return nil
}

func TestFirstRunSetup(t *testing.T) {
	a := testkit.NewApp(t, testkit.WithoutAdminPassword())
	// Every page redirects to setup until it is done.
	if resp := a.Do(testkit.Request("GET", "/connections", "")).Result(); resp.StatusCode != 303 || resp.Header.Get("Location") != "/setup" {
		t.Fatalf("before setup: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Only from loopback, without proxy headers.
	remote := testkit.Request("GET", "/setup", "")
	remote.RemoteAddr = "203.0.113.5:5555"
	if rec := a.Do(remote); rec.Code != 403 || !strings.Contains(rec.Body.String(), "only available from this machine") {
		t.Fatalf("remote setup: %d", rec.Code)
	}
	if rec := a.Do(testkit.Request("GET", "/setup", "", "X-Forwarded-For", "203.0.113.5")); rec.Code != 403 {
		t.Fatalf("proxied setup: %d", rec.Code)
	}
	if resp := postForm(a, "/setup", url.Values{"password": {"long enough pw 1"}, "confirm": {"long enough pw 1"}}, nil, "203.0.113.5:5555"); resp.StatusCode != 403 {
		t.Fatalf("remote POST setup: %d", resp.StatusCode)
	}
	if rec := a.Do(testkit.Request("GET", "/setup", "")); rec.Code != 200 || !strings.Contains(rec.Body.String(), `data-testid="setup-form"`) {
		t.Fatalf("loopback setup form: %d", rec.Code)
	}
	// Validation keeps nothing.
	resp := postForm(a, "/setup", url.Values{"password": {"short"}, "confirm": {"short"}}, nil, "")
	if resp.StatusCode != 422 {
		t.Fatalf("short password: %d", resp.StatusCode)
	}
	resp = postForm(a, "/setup", url.Values{"password": {"long enough pw 1"}, "confirm": {"long enough pw 1"}}, nil, "")
	if resp.StatusCode != 303 || sessionCookie(resp) == nil {
		t.Fatalf("setup: %d", resp.StatusCode)
	}
	// Signed in right away.
	req := testkit.Request("GET", "/", "")
	req.AddCookie(sessionCookie(resp))
	if rec := a.Do(req); rec.Code != 200 {
		t.Fatalf("after setup: %d", rec.Code)
	}
	// A second setup is 404.
	if rec := a.Do(testkit.Request("GET", "/setup", "")); rec.Code != 404 {
		t.Fatalf("second setup: %d", rec.Code)
	}
}

func TestLoginThrottlingOverHTTP(t *testing.T) {
	a := testkit.NewApp(t)
	remote := "198.51.100.7:4000"
	for i := 1; i <= 5; i++ {
		resp := postForm(a, "/login", url.Values{"password": {"wrong password!"}}, nil, remote)
		if resp.StatusCode != 401 {
			t.Fatalf("failure %d: %d", i, resp.StatusCode)
		}
	}
	resp := postForm(a, "/login", url.Values{"password": {testkit.AdminPassword}}, nil, remote)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("throttled: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	a.Clock.Advance(31e9)
	resp = postForm(a, "/login", url.Values{"password": {testkit.AdminPassword}, "next": {"//evil.example/x"}}, nil, remote)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/" {
		t.Fatalf("login after wait: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestLogoutRevokesTheSessionServerSide(t *testing.T) {
	a := testkit.NewApp(t)
	cookie := a.Login()
	get := func() int {
		req := testkit.Request("GET", "/", "")
		req.AddCookie(cookie)
		return a.Do(req).Code
	}
	if code := get(); code != 200 {
		t.Fatalf("signed in: %d", code)
	}
	if rec := a.Do(testkit.Request("GET", "/logout", "")); rec.Code != 405 {
		t.Fatalf("GET /logout: %d", rec.Code)
	}
	resp := postForm(a, "/logout", nil, cookie, "")
	if resp.StatusCode != 303 {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	// Replaying the old cookie fails.
	if code := get(); code != 303 {
		t.Fatalf("old cookie after logout: %d", code)
	}
	// Cross-site logout is refused.
	cookie = a.Login()
	if resp := postForm(a, "/logout", nil, cookie, "", "Sec-Fetch-Site", "cross-site"); resp.StatusCode != 403 {
		t.Fatalf("cross-site logout: %d", resp.StatusCode)
	}
	if code := get(); code != 200 {
		t.Fatalf("session must survive a refused cross-site logout: %d", code)
	}
}

func TestCookieFlags(t *testing.T) {
	a := testkit.NewApp(t)
	c := a.Login()
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure || c.Name != "switchyard_session" {
		t.Fatalf("cookie %+v", c)
	}
	if strings.Contains(c.Value, testkit.AdminPassword) {
		t.Fatal("password in cookie")
	}
}
