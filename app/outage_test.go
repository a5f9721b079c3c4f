package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
	"switchyard/services"
)

// sharedApp is an in-process replica on a PostgreSQL schema of its own,
// reached through a proxy the test can cut: the database going away under
// a running replica (scale-out §3.7) without stopping the server other
// tests share.
type sharedApp struct {
	*apiApp
	proxy *testkit.TCPProxy
	dsn   string
}

func newSharedApp(t *testing.T, opts ...testkit.AppOption) *sharedApp {
	t.Helper()
	dsn := testkit.PostgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartTCPProxy(t, u.Host)
	opts = append([]testkit.AppOption{testkit.WithEnv("SWITCHYARD_DATABASE_URL", proxy.URL(t, dsn)),
		testkit.WithEnv("SWITCHYARD_SECRET_KEY", cluster.SecretKey)}, opts...)
	a := testkit.NewApp(t, opts...)
	return &sharedApp{apiApp: &apiApp{App: a, cookie: a.Login()}, proxy: proxy, dsn: dsn}
}

// publicHealth reads GET path without a credential.
func publicHealth(t *testing.T, a *testkit.App, path string) (int, string) {
	t.Helper()
	rec := a.Do(testkit.Request("GET", path, ""))
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	if len(m) != 1 {
		t.Errorf("GET %s without a credential says more than its status: %s", path, rec.Body.String())
	}
	s, _ := m["status"].(string)
	return rec.Code, s
}

// Failure of the store is not failure of the gateway (issue 19 item 6): with
// the shared database unreachable, /v1 keeps serving from the mirrors, every
// admin write answers 503 with Retry-After (never 500), the health report
// says database degraded while the public health endpoint and /healthz stay
// 200 with status "degraded" (a load balancer keeps the replica), and all of
// it recovers when the database is back.
func TestSharedDatabaseOutageServesV1AndRefusesAdminWrites(t *testing.T) {
	fu := fakeupstream.Start(t)
	a := newSharedApp(t, testkit.WithEnv("SWITCHYARD_PRIVATE_UPSTREAMS", fu.Addr()))
	_, manage := a.NewKey("ops", services.ScopeManage)
	_, infer := a.NewKey("traffic", services.ScopeInference)
	body := `{"provider":"fleet","name":"k1","apiKey":"fk-outage","baseUrl":"` + fu.URL() + `/v1","custom":{"wireFormat":"openai","authClass":"apikey"}}`
	if rec := a.bearer(manage, "POST", "/api/connections", body); rec.Code != http.StatusCreated {
		t.Fatalf("create connection: %d %s", rec.Code, rec.Body.String())
	}
	chat := func() *httptest.ResponseRecorder {
		return a.bearer(infer, "POST", "/v1/chat/completions", `{"model":"fleet/m1","messages":[{"role":"user","content":"hi"}]}`)
	}
	if rec := chat(); rec.Code != http.StatusOK {
		t.Fatalf("chat before the outage: %d %s", rec.Code, rec.Body.String())
	}
	f := newFixture(t, a.App)

	a.proxy.Cut()
	a.Clock.Advance(2 * time.Second) // past the health report's one-second cache

	for i := range 5 {
		if rec := chat(); rec.Code != http.StatusOK {
			t.Fatalf("chat %d during the outage: %d %s", i, rec.Code, rec.Body.String())
		}
	}
	if code, st := publicHealth(t, a.App, "/api/monitoring/health"); code != 200 || st != "degraded" {
		t.Errorf("public health during the outage: %d %q, want 200 degraded", code, st)
	}
	if code, st := publicHealth(t, a.App, "/healthz"); code != 200 || st != "degraded" {
		t.Errorf("/healthz during the outage: %d %q, want 200 degraded", code, st)
	}
	rec := a.bearer(manage, "GET", "/api/monitoring/health", "")
	var rep struct {
		Status   string   `json:"status"`
		Reasons  []string `json:"reasons"`
		Database struct {
			OK     bool   `json:"ok"`
			Status string `json:"status"`
			Mode   string `json:"mode"`
		} `json:"database"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rec.Code != 200 {
		t.Fatalf("admin health: %d %s", rec.Code, rec.Body.String())
	}
	if rep.Status != "degraded" || rep.Database.OK || rep.Database.Status != "degraded" || rep.Database.Mode != "shared" {
		t.Errorf("admin health during the outage: %+v", rep)
	}

	// Every management write: 503 with Retry-After. Three do not need the
	// database: ending a lease the mirror does not know (404), the
	// in-memory slot reset and the classify dry run (it writes nothing).
	noStore := map[string]int{"DELETE /api/resilience/leases/:id": 404, "POST /api/concurrency/reset": 200,
		"POST /api/resilience/classify": 200}
	for _, r := range apiRoutes(f) {
		if !r.unsafe() {
			continue
		}
		rec := a.bearer(manage, r.method, r.path(), r.body)
		if want, ok := noStore[r.String()]; ok {
			if rec.Code != want {
				t.Errorf("%s during the outage: %d, want %d: %s", r, rec.Code, want, rec.Body.String())
			}
			continue
		}
		wantAPIUnavailable(t, r.String()+" during the outage", rec)
	}
	// Every dashboard write, with a session: the session check itself needs
	// the database, so each answers 503 (never 500, never admitted).
	e := a.Server.Echo()
	for _, r := range e.Routes() {
		if r.Method == "GET" || r.Method == "HEAD" || r.Method == "echo_route_not_found" || r.Method == "OPTIONS" || r.Method == "CONNECT" || r.Method == "TRACE" ||
			strings.HasPrefix(r.Path, "/api") || strings.HasPrefix(r.Path, "/v1") || !strings.HasPrefix(r.Path, "/") ||
			r.Path == "/login" || r.Path == "/setup" || r.Path == "/*" || echoAliasOfV1(r.Path) {
			continue
		}
		path := strings.NewReplacer(":id", f.conn, ":provider", "openai").Replace(r.Path)
		req := testkit.Request(r.Method, path, "x=1", "Content-Type", "application/x-www-form-urlencoded",
			"Sec-Fetch-Site", "same-origin", "HX-Request", "true")
		req.AddCookie(a.cookie)
		rec := a.Do(req)
		wantUnavailable(t, r.Method+" "+r.Path+" during the outage", rec)
	}
	// Signing in needs the stored password hash.
	form := url.Values{"password": {testkit.AdminPassword}}
	wantUnavailable(t, "POST /login during the outage", a.Do(testkit.Request("POST", "/login", form.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")))

	// The database is back: writes succeed, health is ok again, and the
	// request-log rows of the requests served during the outage were held
	// and written, not lost.
	if !testkit.PollUntil(5*time.Second, func() bool { return a.Server.RequestLogStats().HeldBatches > 0 }) {
		t.Fatalf("the request log never tried its batch during the outage: %+v", a.Server.RequestLogStats())
	}
	a.proxy.Restore(t)
	if !testkit.PollUntil(10*time.Second, func() bool {
		return a.bearer(manage, "POST", "/api/keys", `{"name":"after-the-outage"}`).Code == http.StatusCreated
	}) {
		t.Fatal("admin writes did not recover after the database came back")
	}
	a.Clock.Advance(2 * time.Second)
	if code, st := publicHealth(t, a.App, "/api/monitoring/health"); code != 200 || st != "ok" {
		t.Errorf("public health after the outage: %d %q", code, st)
	}
	if !testkit.PollUntil(10*time.Second, func() bool {
		page, err := a.Server.RequestLogs().ListRequestLogs(context.Background(), services.RequestLogQuery{Limit: 100})
		return err == nil && len(page.Items) >= 6
	}) {
		st := a.Server.RequestLogStats()
		t.Fatalf("the request-log rows of the requests served during the outage were lost: %+v", st)
	}
	if st := a.Server.RequestLogStats(); st.FailedBatches != 0 || st.Dropped != 0 || st.HeldBatches == 0 {
		t.Errorf("request log after the outage: %+v, want held batches and nothing lost", st)
	}
	if rec := chat(); rec.Code != http.StatusOK {
		t.Fatalf("chat after the outage: %d %s", rec.Code, rec.Body.String())
	}
}

// echoAliasOfV1 reports the unprefixed /v1 aliases (/chat/completions …),
// which belong to the client API.
func echoAliasOfV1(path string) bool {
	for _, p := range []string{"/chat/completions", "/messages", "/responses", "/embeddings", "/models"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
