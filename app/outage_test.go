package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
	"switchyard/internal/testkit/fakeupstream"
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

	for _, r := range apiRoutes(f) {
		if !r.unsafe() {
			continue
		}
		rec := a.bearer(manage, r.method, r.path(), r.body)
		t.Logf("%s → %d", r, rec.Code)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s during the outage: %d %s", r, rec.Code, rec.Body.String())
		}
	}
}
