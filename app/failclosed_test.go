package app_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"switchyard/internal/testkit"
)

// 60-quality S16 "failure does not open": a database that cannot answer
// gives a typed 503 with Retry-After, never a 500 and never a request let
// through because its check failed.

// wantUnavailable checks a 503 with a positive Retry-After in whole seconds.
func wantUnavailable(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s: status %d, want 503: %.300s", what, rec.Code, rec.Body.String())
	}
	if s, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("%s: Retry-After %q, want whole seconds ≥ 1", what, rec.Header().Get("Retry-After"))
	}
	if b := rec.Body.String(); strings.Contains(b, "sql:") || strings.Contains(b, "SQLITE") || strings.Contains(b, "models:") {
		t.Errorf("%s: the body leaks the store error: %.300s", what, b)
	}
}

// wantAPIUnavailable checks the /api error shape with code "unavailable".
func wantAPIUnavailable(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	wantUnavailable(t, what, rec)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q, want JSON", what, ct)
	}
	var e apiError
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != "unavailable" || e.Error.Message == "" {
		t.Errorf("%s: error %+v (decode err %v), want code unavailable and a message: %s", what, e.Error, err, rec.Body.String())
	}
}

func TestFailClosedDatabaseClosed(t *testing.T) {
	a := newAPIApp(t)
	_, manage := a.NewKey("ops", "manage")
	if rec := a.admin("GET", "/api/keys", ""); rec.Code != http.StatusOK {
		t.Fatalf("before close: GET /api/keys %d", rec.Code)
	}
	// The store closes under the running handler, as at the end of a
	// shutdown drain.
	if err := a.Server.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("api with session cookie", func(t *testing.T) {
		// The session lookup itself fails: the request must not be admitted.
		for _, p := range []string{"/api/keys", "/api/connections", "/api/combos"} {
			wantAPIUnavailable(t, "GET "+p, a.admin("GET", p, ""))
		}
		wantAPIUnavailable(t, "POST /api/keys", a.admin("POST", "/api/keys", `{"name":"late"}`))
	})
	t.Run("api with bearer key", func(t *testing.T) {
		// Keys authenticate from memory; the handler's store call fails.
		wantAPIUnavailable(t, "GET /api/keys", a.bearer(manage, "GET", "/api/keys", ""))
		wantAPIUnavailable(t, "GET /api/connections", a.bearer(manage, "GET", "/api/connections", ""))
	})
	t.Run("dashboard page", func(t *testing.T) {
		for _, p := range []string{"/", "/keys", "/connections"} {
			req := testkit.Request("GET", p, "")
			req.AddCookie(a.cookie)
			rec := a.Do(req)
			wantUnavailable(t, "GET "+p, rec)
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("GET %s: Content-Type %q, want an HTML error page", p, ct)
			}
			if b := rec.Body.String(); !strings.Contains(b, "unavailable") {
				t.Errorf("GET %s: the error page does not say the service is unavailable: %.500s", p, b)
			}
		}
	})
	t.Run("dashboard htmx", func(t *testing.T) {
		req := testkit.Request("GET", "/keys", "", "HX-Request", "true")
		req.AddCookie(a.cookie)
		rec := a.Do(req)
		wantUnavailable(t, "htmx GET /keys", rec)
		if tr := rec.Header().Get("HX-Trigger"); !strings.Contains(tr, "show-toast") {
			t.Errorf("htmx GET /keys: HX-Trigger %q, want an error toast", tr)
		}
	})
}

func TestFailClosedDatabaseLocked(t *testing.T) {
	a := newAPIApp(t)
	_, manage := a.NewKey("ops", "manage")
	// Another process holds the write lock past the app's busy_timeout
	// (SQLITE_BUSY). Reads still work in WAL mode; writes cannot.
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(0)")
	other, err := sql.Open("sqlite", "file:"+filepath.Join(a.DataDir, "switchyard.db")+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
	})

	wantAPIUnavailable(t, "POST /api/keys", a.bearer(manage, "POST", "/api/keys", `{"name":"blocked"}`))

	// The lock is gone: the same request succeeds.
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if rec := a.bearer(manage, "POST", "/api/keys", `{"name":"after"}`); rec.Code != http.StatusCreated {
		t.Fatalf("after the lock: POST /api/keys %d: %s", rec.Code, rec.Body.String())
	}
}
