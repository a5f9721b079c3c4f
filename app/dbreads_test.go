package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"switchyard/services"
)

// TestRuntimePageReadsNoConnectionRows guards 50-dashboard §6.8 against the
// database: a Runtime render (the page and every polled panel) takes the
// connection names from the gateway's in-memory snapshot and reads no
// connection row, so it never decrypts a credential.
func TestRuntimePageReadsNoConnectionRows(t *testing.T) {
	dir := t.TempDir()
	// example.com is httptest.NewRequest's Host: listed as a public host.
	env := map[string]string{"SWITCHYARD_ADMIN_PASSWORD": "correct horse battery staple", "SWITCHYARD_DATA_DIR": dir, "SWITCHYARD_PUBLIC_HOSTS": "example.com"}
	cfg, err := LoadConfig([]string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(context.Background(), cfg, Options{Argon2: &services.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, name := range []string{"one", "two", "three"} {
		if _, err := s.conns.Create(context.Background(), services.ConnectionInput{Provider: services.Some("openai"),
			Name: services.Some(name), APIKey: services.Some("sk-" + name + "-0123456789")}); err != nil {
			t.Fatal(err)
		}
	}
	do := func(r *http.Request) *httptest.ResponseRecorder {
		r.RemoteAddr = "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, r)
		return rec
	}
	login := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"password": {env["SWITCHYARD_ADMIN_PASSWORD"]}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	login.Header.Set("Sec-Fetch-Site", "same-origin")
	rec := do(login)
	if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) == 0 {
		t.Fatalf("login: %d", rec.Code)
	}
	cookies := rec.Result().Cookies()

	var reads atomic.Int64
	if err := s.db.Callback().Query().After("gorm:query").Register("count_connection_reads", func(db *gorm.DB) {
		if db.Statement.Table == "connections" {
			reads.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/runtime", "/runtime/summary", "/runtime/breakers", "/runtime/cooldowns",
		"/runtime/model-cooldowns", "/runtime/leases", "/runtime/queues", "/nav/incidents"} {
		reads.Store(0)
		for _, htmx := range []bool{false, true} {
			r := httptest.NewRequest("GET", path, nil)
			for _, c := range cookies {
				r.AddCookie(c)
			}
			if htmx {
				r.Header.Set("HX-Request", "true")
			}
			if rec := do(r); rec.Code != http.StatusOK {
				t.Fatalf("GET %s (htmx %v): %d", path, htmx, rec.Code)
			}
		}
		if n := reads.Load(); n != 0 {
			t.Errorf("GET %s (page and fragment) read the connections table %d times, want 0", path, n)
		}
	}
}
