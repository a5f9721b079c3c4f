package app_test

// Admin state across replicas (issue 19 item 5, scale-out §3.4 rows 19 and
// 20): request logs, dashboard sessions and the sign-in throttle are the
// fleet's, not one replica's.

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
)

// dash is a browser of the dashboard: a session cookie and requests that
// pass the cookie-write origin check.
type dash struct {
	hc     *http.Client
	cookie *http.Cookie
}

func newDash() *dash {
	return &dash{hc: &http.Client{Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn posts the password to base's sign-in form and returns the status;
// on success the session cookie is kept.
func (d *dash) signIn(t *testing.T, base, password string) int {
	t.Helper()
	form := url.Values{"password": {password}}
	resp := d.do(t, "POST", base, "/login", form.Encode(), "application/x-www-form-urlencoded")
	for _, ck := range resp.cookies {
		if ck.MaxAge >= 0 && strings.HasSuffix(ck.Name, "switchyard_session") {
			d.cookie = ck
		}
	}
	return resp.status
}

type dashResponse struct {
	status  int
	body    string
	header  http.Header
	cookies []*http.Cookie
}

func (d *dash) do(t *testing.T, method, base, path, body, contentType string) dashResponse {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", base)
	if d.cookie != nil {
		req.AddCookie(d.cookie)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return dashResponse{status: resp.StatusCode, body: string(b), header: resp.Header, cookies: resp.Cookies()}
}

// signedIn reports whether the session is valid on base: GET /api/keys with
// the cookie answers 200 (401 without a valid session).
func (d *dash) signedIn(t *testing.T, base string) bool {
	t.Helper()
	switch st := d.do(t, "GET", base, "/api/keys", "", "").status; st {
	case http.StatusOK:
		return true
	case http.StatusUnauthorized:
		return false
	default:
		t.Fatalf("GET %s/api/keys with a session: %d", base, st)
		return false
	}
}

// A session signed in through A is valid on B and C; signing out on B ends
// it on every replica at once (the next request, no propagation wait);
// a password change on C ends every session, whichever replica opened it.
// Any replica's request-log page lists the requests every replica served.
func TestClusterAdminSessionsAndRequestLogsAreShared(t *testing.T) {
	f, _ := startFleet(t, nil, "fk-admin")
	base := func(i int) string { return f.c.Replica(i).URL() }

	a := newDash()
	if st := a.signIn(t, base(0), testkit.AdminPassword); st != http.StatusSeeOther {
		t.Fatalf("sign in on A: %d", st)
	}
	for i := range 3 {
		if !a.signedIn(t, base(i)) {
			t.Fatalf("the session opened on A is not valid on %s", f.c.Replica(i).Name)
		}
	}
	if st := a.do(t, "POST", base(1), "/logout", "", "application/x-www-form-urlencoded").status; st != http.StatusSeeOther {
		t.Fatalf("sign out on B: %d", st)
	}
	for i := range 3 {
		if a.signedIn(t, base(i)) {
			t.Errorf("signed out on B, the session is still valid on %s", f.c.Replica(i).Name)
		}
	}

	// Two sessions on two replicas, the password changed on a third.
	s1, s2 := newDash(), newDash()
	if s1.signIn(t, base(0), testkit.AdminPassword) != http.StatusSeeOther || s2.signIn(t, base(1), testkit.AdminPassword) != http.StatusSeeOther {
		t.Fatal("sign in on A and B")
	}
	changer := newDash()
	if changer.signIn(t, base(2), testkit.AdminPassword) != http.StatusSeeOther {
		t.Fatal("sign in on C")
	}
	const next = "another correct horse battery"
	form := url.Values{"current": {testkit.AdminPassword}, "new": {next}, "confirm": {next}}
	resp := changer.do(t, "POST", base(2), "/settings/account/password", form.Encode(), "application/x-www-form-urlencoded")
	if resp.status >= 300 && resp.status != http.StatusSeeOther {
		t.Fatalf("password change on C: %d %.300s", resp.status, resp.body)
	}
	for _, ck := range resp.cookies {
		if ck.MaxAge >= 0 && strings.HasSuffix(ck.Name, "switchyard_session") {
			changer.cookie = ck
		}
	}
	for i := range 3 {
		if s1.signedIn(t, base(i)) || s2.signedIn(t, base(i)) {
			t.Errorf("after the password change on C, an older session is still valid on %s", f.c.Replica(i).Name)
		}
	}
	if !changer.signedIn(t, base(0)) {
		t.Error("the session the password change rotated to is not valid on A")
	}
	if st := newDash().signIn(t, base(1), testkit.AdminPassword); st == http.StatusSeeOther {
		t.Error("the old password still signs in on B")
	}
	if st := newDash().signIn(t, base(0), next); st != http.StatusSeeOther {
		t.Errorf("the new password does not sign in on A: %d", st)
	}

	// Requests through the front: every replica serves some; A's request-log
	// page lists all of them once their replica flushed (≤ 1 s).
	var ids []string
	for range 9 {
		r := f.chat(t, f.c.Front(), "fleet/m1")
		if r.Status != http.StatusOK {
			t.Fatalf("chat through the front: %d %s", r.Status, r.Body)
		}
		ids = append(ids, r.Header.Get("X-Switchyard-Request-Id"))
	}
	for i := range 3 {
		viewer := changer
		page := ""
		ok := testkit.PollUntil(5*time.Second, func() bool {
			page = viewer.do(t, "GET", base(i), "/logs", "", "").body
			for _, id := range ids {
				if !strings.Contains(page, "/logs/"+url.PathEscape(id)) {
					return false
				}
			}
			return true
		})
		if !ok {
			var missing []string
			for _, id := range ids {
				if !strings.Contains(page, "/logs/"+url.PathEscape(id)) {
					missing = append(missing, id)
				}
			}
			t.Errorf("%s's request-log page lacks %d of the %d requests served through the front: %v", f.c.Replica(i).Name, len(missing), len(ids), missing)
		}
	}
	// And one request's detail, served by B, opens on C.
	if r := changer.do(t, "GET", base(2), "/logs/"+url.PathEscape(ids[1]), "", ""); r.status != http.StatusOK {
		t.Errorf("the detail of a request another replica served: %d", r.status)
	}
}

// Wrong passwords spread round-robin over two replicas are throttled as
// one count (issue 19 item 5): the first 5 are checked (401), every later
// one waits (429 with Retry-After), exactly as through one replica. With
// each replica counting its own failures, 10 would have been checked.
func TestClusterSignInThrottleCountsForTheFleet(t *testing.T) {
	c := cluster.Start(t, cluster.Options{DatabaseURL: testkit.PostgresSchema(t), Replicas: 2})
	d := newDash()
	checked, throttled := 0, 0
	served := map[string]int{}
	for i := range 12 {
		r := d.do(t, "POST", c.Front(), "/login", url.Values{"password": {"not the password at all"}}.Encode(), "application/x-www-form-urlencoded")
		served[r.header.Get(cluster.ReplicaHeader)]++
		switch r.status {
		case http.StatusUnauthorized:
			checked++
			if throttled > 0 {
				t.Errorf("attempt %d was checked after an earlier one was throttled", i+1)
			}
		case http.StatusTooManyRequests:
			throttled++
			if r.header.Get("Retry-After") == "" {
				t.Errorf("attempt %d: 429 without Retry-After", i+1)
			}
		default:
			t.Fatalf("attempt %d: %d %.200s", i+1, r.status, r.body)
		}
	}
	t.Logf("12 wrong passwords over %v: %d checked, %d throttled", served, checked, throttled)
	if len(served) != 2 {
		t.Fatalf("the attempts did not reach both replicas: %v", served)
	}
	if checked != 5 || throttled != 7 {
		t.Fatalf("%d checked and %d throttled across two replicas, want 5 and 7 (one count for the fleet)", checked, throttled)
	}
	// The right password is refused too while the address waits, on either
	// replica: the wait is the fleet's.
	for i := range 2 {
		if st := newDash().signIn(t, c.Replica(i).URL(), testkit.AdminPassword); st != http.StatusTooManyRequests {
			t.Errorf("the right password via %s while the address waits: %d, want 429", c.Replica(i).Name, st)
		}
	}
}
