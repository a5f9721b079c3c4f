package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/health"
	"switchyard/services/resilience"
	"switchyard/services/settings"
	"switchyard/services/traffic"
	"switchyard/views"
)

// Handler tests with fakes: each handler is driven through its consumer
// interfaces only, so what a handler reads and calls is what these fakes
// offer.

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// fixedClock is always at t0 (internal/testkit imports app, which imports
// this package).
type fixedClock struct{}

func (fixedClock) Now() time.Time                                  { return t0 }
func (fixedClock) Wait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func newCtx(method, target, body string, headers ...string) (echo.Context, *httptest.ResponseRecorder) {
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	return echo.New().NewContext(r, rec), rec
}

// fakeStatus serves a fixed snapshot.
type fakeStatus struct{ snap resilience.Snapshot }

func (f *fakeStatus) Snapshot() resilience.Snapshot { return f.snap }
func (f *fakeStatus) SnapshotOf([]services.Connection) resilience.Snapshot {
	return f.snap
}
func (f *fakeStatus) Connection(c services.Connection) resilience.ConnectionStatus {
	st, _ := f.snap.Connection(c.ID)
	return st
}

// fakeEngine records the admin actions it is asked for.
type fakeEngine struct {
	cleared []string
	filters []resilience.LockFilter
	res     resilience.ClearCooldownsResult
}

func (f *fakeEngine) ClearCooldowns(_ context.Context, conns []services.Connection) (resilience.ClearCooldownsResult, int, error) {
	for _, c := range conns {
		f.cleared = append(f.cleared, c.ID)
	}
	return f.res, 2, nil
}
func (f *fakeEngine) ResetConnection(context.Context, services.Connection, bool) error { return nil }
func (f *fakeEngine) ResetBreaker(context.Context, string) error                       { return nil }
func (f *fakeEngine) ResetBreakers(context.Context) (int, error)                       { return 0, nil }
func (f *fakeEngine) ClearWindowGate(context.Context) (int, error)                     { return 0, nil }
func (f *fakeEngine) ClearLockouts(_ context.Context, lf resilience.LockFilter) (int, error) {
	f.filters = append(f.filters, lf)
	return 1, nil
}

type fakeCatalogue struct{}

func (fakeCatalogue) Catalogue() *services.Catalogue { return services.NewCatalogue(nil) }

func status(id, provider string, enabled bool, cond resilience.Condition, st services.ConnectionState) resilience.ConnectionStatus {
	c := services.Connection{ID: id, Provider: provider, Name: "name-" + id, AuthClass: services.AuthAPIKey, Enabled: enabled, State: st}
	cs := resilience.ConnectionStatus{Conn: c, Condition: cond, Status: c.Status(t0)}
	if cond == resilience.ConditionCooling {
		cs.Until = st.RateLimitedUntil
	}
	return cs
}

func sampleSnapshot() resilience.Snapshot {
	until := t0.Add(time.Minute)
	locked := status("c_lock", "openai", true, resilience.ConditionModelLocked, services.ConnectionState{})
	locked.Lockouts = []resilience.LockoutStatus{{Provider: "openai", ConnectionID: "c_lock", Model: "gpt-4o", Shape: resilience.ShapeExact,
		Reason: resilience.ReasonRateLimit, RemainingMs: 30_000, Until: t0.Add(30 * time.Second), LockedAt: t0, Active: true, Enforced: true}}
	return resilience.Snapshot{At: t0, LockoutsEnabled: true, Lockouts: locked.Lockouts,
		Breakers: []resilience.BreakerStatus{{Provider: "anthropic", State: resilience.BreakerOpen, RetryAfterMs: 5000}},
		Connections: []resilience.ConnectionStatus{
			status("c_term", "openai", true, resilience.ConditionTerminal, services.ConnectionState{TerminalStatus: services.TerminalBanned}),
			status("c_cool", "openai", true, resilience.ConditionCooling, services.ConnectionState{RateLimitedUntil: &until, BackoffLevel: 3}),
			locked,
			status("c_ok", "anthropic", false, resilience.ConditionHealthy, services.ConnectionState{}),
		}}
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return m
}

func TestResilienceAPIListCooldownsRendersTheConditions(t *testing.T) {
	h := &ResilienceAPI{API: &API{Clock: fixedClock{}}, Status: &fakeStatus{snap: sampleSnapshot()}, Engine: &fakeEngine{},
		Catalogue: fakeCatalogue{}}
	c, rec := newCtx("GET", "/api/resilience/cooldowns", "")
	if err := h.ListCooldowns(c); err != nil {
		t.Fatal(err)
	}
	items := decode(t, rec)["connections"].([]any)
	want := map[string]string{"c_term": "terminal", "c_cool": "cooling", "c_lock": "model_locked", "c_ok": "healthy"}
	if len(items) != len(want) {
		t.Fatalf("%d items", len(items))
	}
	for _, it := range items {
		m := it.(map[string]any)
		id := m["id"].(string)
		if m["status"] != want[id] {
			t.Errorf("%s: status %v, want %s", id, m["status"], want[id])
		}
		cooling := id == "c_cool"
		if (m["rateLimitedUntil"] != nil) != cooling || (m["cooldownRemainingMs"] == float64(60_000)) != cooling {
			t.Errorf("%s: rateLimitedUntil %v remaining %v", id, m["rateLimitedUntil"], m["cooldownRemainingMs"])
		}
		if locks := m["lockouts"].([]any); (len(locks) == 1) != (id == "c_lock") {
			t.Errorf("%s: lockouts %v", id, locks)
		}
	}
	c, rec = newCtx("GET", "/api/resilience/cooldowns?provider=anthropic", "")
	if err := h.ListCooldowns(c); err != nil {
		t.Fatal(err)
	}
	if items := decode(t, rec)["connections"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != "c_ok" {
		t.Errorf("provider filter: %v", items)
	}
}

func TestResilienceAPIClearCooldownsTargetsKnownConnections(t *testing.T) {
	eng := &fakeEngine{res: resilience.ClearCooldownsResult{Cleared: []string{"c_cool"}, SkippedTerminal: []string{"c_term"}}}
	h := &ResilienceAPI{API: &API{Clock: fixedClock{}}, Status: &fakeStatus{snap: sampleSnapshot()}, Engine: eng, Catalogue: fakeCatalogue{}}
	c, rec := newCtx("POST", "/api/resilience/cooldowns", `{"connectionIds": ["c_term", "c_cool", "c_gone"]}`, "Content-Type", "application/json")
	if err := h.ClearCooldowns(c); err != nil {
		t.Fatal(err)
	}
	m := decode(t, rec)
	if m["cleared"] != float64(1) || m["skippedTerminal"] != float64(1) || m["notFound"] != float64(1) || m["lockoutsCleared"] != float64(2) {
		t.Errorf("answer %v", m)
	}
	if strings.Join(eng.cleared, ",") != "c_term,c_cool" {
		t.Errorf("engine asked to clear %v", eng.cleared)
	}
}

func TestRuntimeClearCooldownsTakesTheConnectionsFromTheSnapshot(t *testing.T) {
	eng := &fakeEngine{res: resilience.ClearCooldownsResult{Cleared: []string{"c_cool"}, SkippedTerminal: []string{"c_term"}}}
	h := &Runtime{Status: &fakeStatus{snap: sampleSnapshot()}, Engine: eng, Catalogue: fakeCatalogue{}, Clock: fixedClock{}}
	c, rec := newCtx("POST", "/runtime/cooldowns/clear", "", "HX-Request", "true")
	if err := h.ClearCooldowns(c); err != nil {
		t.Fatal(err)
	}
	if strings.Join(eng.cleared, ",") != "c_term,c_cool,c_lock,c_ok" {
		t.Errorf("engine asked to clear %v", eng.cleared)
	}
	if trig := rec.Header().Get("HX-Trigger"); !strings.Contains(trig, "Cleared 1 cooldown. 1 terminal connection left as it is.") ||
		!strings.Contains(trig, "resilience-changed") {
		t.Errorf("HX-Trigger %s", trig)
	}
}

func TestRuntimeIncidentBadgeCountsEnabledConnections(t *testing.T) {
	snap := sampleSnapshot()
	// A switched-off terminal connection is out of rotation anyway.
	snap.Connections = append(snap.Connections, status("c_off", "openai", false, resilience.ConditionTerminal,
		services.ConnectionState{TerminalStatus: services.TerminalExpired}))
	h := &Runtime{Status: &fakeStatus{snap: snap}, Engine: &fakeEngine{}, Catalogue: fakeCatalogue{}, Clock: fixedClock{}}
	c, rec := newCtx("GET", "/nav/incidents", "", "HX-Request", "true")
	if err := h.Incidents(c); err != nil {
		t.Fatal(err)
	}
	body := strings.Join(strings.Fields(rec.Body.String()), " ")
	for _, want := range []string{"1 breaker open", "1 connection terminal", "1 connection cooling", "1 model locked"} {
		if !strings.Contains(body, want) {
			t.Errorf("badge lacks %q: %s", want, body)
		}
	}
}

func TestRuntimeReEnableModelNamesTheConnectionFromMemory(t *testing.T) {
	eng := &fakeEngine{}
	h := &Runtime{Status: &fakeStatus{snap: sampleSnapshot()}, Engine: eng, Catalogue: fakeCatalogue{}, Clock: fixedClock{}}
	form := "provider=openai&connectionId=c_lock&model=gpt-4o"
	c, rec := newCtx("POST", "/runtime/model-cooldowns/re-enable", form, "Content-Type", "application/x-www-form-urlencoded", "HX-Request", "true")
	if err := h.ReEnableModel(c); err != nil {
		t.Fatal(err)
	}
	if len(eng.filters) != 1 || eng.filters[0] != (resilience.LockFilter{Provider: "openai", ConnectionID: "c_lock", Model: "gpt-4o"}) {
		t.Errorf("filters %v", eng.filters)
	}
	if !strings.Contains(rec.Header().Get("HX-Trigger"), "Re-enabled gpt-4o on name-c_lock.") {
		t.Errorf("HX-Trigger %s", rec.Header().Get("HX-Trigger"))
	}
	c, _ = newCtx("POST", "/runtime/model-cooldowns/re-enable", "provider=openai&connectionId=c_gone&model=gpt-4o",
		"Content-Type", "application/x-www-form-urlencoded")
	if err := h.ReEnableModel(c); !errors.Is(err, services.ErrNotFound) {
		t.Errorf("unknown connection: %v", err)
	}
}

type fakeQueues struct{ stats []traffic.QueueStats }

func (f fakeQueues) Stats() []traffic.QueueStats      { return f.stats }
func (fakeQueues) Reset(context.Context) (int, error) { return 0, nil }
func (fakeQueues) ResetConnection(context.Context, string) (int, error) {
	return 0, nil
}
func (fakeSlots) Stats() []traffic.SlotStats {
	return []traffic.SlotStats{{ConnectionID: "c_ok", Limit: 2}}
}
func (fakeSlots) Reset(context.Context) (int, error) { return 0, nil }
func (fakeSlots) ResetConnection(_ context.Context, id string) (int, error) {
	return 1, nil
}

type fakeSlots struct{}

func TestTrafficAPIListsTheQueuesOfProtectedConnectionsOnly(t *testing.T) {
	snap := sampleSnapshot()
	snap.Connections[0].QueueProtected = true
	h := &TrafficAPI{API: &API{Clock: fixedClock{}}, Status: &fakeStatus{snap: snap},
		Queues: fakeQueues{stats: []traffic.QueueStats{{ConnectionID: "c_term", Queued: 2}, {ConnectionID: "c_cool", Queued: 1}}},
		Slots:  fakeSlots{}}
	c, rec := newCtx("GET", "/api/concurrency", "")
	if err := h.ShowConcurrency(c); err != nil {
		t.Fatal(err)
	}
	m := decode(t, rec)
	queues, slots := m["queues"].([]any), m["slots"].([]any)
	if len(queues) != 1 || queues[0].(map[string]any)["connectionId"] != "c_term" {
		t.Errorf("queues %v", queues)
	}
	if len(slots) != 1 || slots[0].(map[string]any)["provider"] != "anthropic" {
		t.Errorf("slots %v", slots)
	}
	// The reset body is decoded strictly, as every /api body is.
	c, _ = newCtx("POST", "/api/concurrency/reset", `{"target": "all", "extra": 1}`, "Content-Type", "application/json")
	var verr *services.ValidationError
	if err := h.ResetConcurrency(c); !errors.As(err, &verr) || verr.Fields["extra"] == "" {
		t.Errorf("unknown field: %v", err)
	}
}

type fakeReporter struct{ r health.Report }

func (f fakeReporter) HealthReport(context.Context) health.Report { return f.r }

func TestHealthAPIShowsTheFullReportToAdminsOnly(t *testing.T) {
	h := &HealthAPI{Reports: fakeReporter{r: health.Report{Status: health.StatusDegraded, Version: "9.9.9", Reasons: []string{"x"}}}}
	c, rec := newCtx("GET", "/api/monitoring/health", "")
	if err := h.Show(c); err != nil {
		t.Fatal(err)
	}
	if m := decode(t, rec); len(m) != 1 || m["status"] != "ok" {
		t.Errorf("public body %v", m)
	}
	c, rec = newCtx("GET", "/api/monitoring/health", "")
	SetSessionID(c, "s1")
	if err := h.Show(c); err != nil {
		t.Fatal(err)
	}
	if m := decode(t, rec); m["version"] != "9.9.9" || m["status"] != "degraded" {
		t.Errorf("admin body %v", m)
	}
	// A key without scope manage gets the public body.
	c, rec = newCtx("GET", "/api/monitoring/health", "")
	SetAPIKey(c, services.APIKey{ID: "k1", Scopes: []string{services.ScopeInference}})
	if err := h.Show(c); err != nil {
		t.Fatal(err)
	}
	if m := decode(t, rec); len(m) != 1 {
		t.Errorf("inference key body %v", m)
	}
	h.Reports = fakeReporter{r: health.Report{Status: health.StatusDown}}
	c, rec = newCtx("GET", "/api/monitoring/health", "")
	if err := h.Show(c); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "5" || decode(t, rec)["status"] != "down" {
		t.Errorf("down: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
}

// fakeSettings answers every PATCH with err.
type fakeSettings struct {
	SettingsDocument[resilience.Document]
	err error
}

func (f fakeSettings) Patch(context.Context, []byte, string) (*settings.Snapshot[resilience.Document], error) {
	return nil, f.err
}

func TestSettingsAPIReturnsTheServiceErrorUnchanged(t *testing.T) {
	for _, want := range []error{settings.ErrPreconditionFailed, settings.ErrEmptyPatch, &settings.JSONError{Detail: "x"}} {
		h := &SettingsAPI{API: &API{}, Resilience: fakeSettings{err: want}}
		c, _ := newCtx("PATCH", "/api/resilience", `{}`, "Content-Type", "application/json")
		if err := h.UpdateResilience(c); !errors.Is(err, want) {
			t.Errorf("got %v, want %v (the error handler picks the status)", err, want)
		}
	}
}

// A replica with Redis shows what it holds in reserve on the Replicas card.
func TestHealthPageShowsReserves(t *testing.T) {
	r := health.Report{Status: health.StatusOK, At: t0, Shared: health.Shared{Mode: health.ModeShared, Replica: "r1",
		Redis: health.RedisUp, Limits: health.LimitsFleet, Reserves: &health.Reserves{SpareGrants: 3, BlockTokens: 61}}}
	var b strings.Builder
	if err := views.HealthPanel(healthVM(r, t0)).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `data-testid="health-reserves"`) || !strings.Contains(b.String(), "3 spare grants · 61 tokens") {
		t.Fatalf("Replicas card without the reserves:\n%s", b.String())
	}
	r.Shared = health.Shared{Mode: health.ModeEmbedded, Redis: health.RedisOff, Limits: health.LimitsPerReplica}
	b.Reset()
	_ = views.HealthPanel(healthVM(r, t0)).Render(context.Background(), &b)
	if strings.Contains(b.String(), "health-reserves") {
		t.Fatal("reserves shown without Redis")
	}
}

func TestHealthPageRendersTheReportType(t *testing.T) {
	r := health.Report{Status: health.StatusOK, Version: "1.0.0", KeyID: "key-7", At: t0, UptimeS: 90,
		Database: health.Database{OK: true, Path: "/data/switchyard.db", PingMs: 1.25}}
	vm := healthVM(r, t0.Add(time.Minute))
	if vm.Status != "ok" || vm.KeyID != "key-7" || vm.DBPing != "1.2 ms" && vm.DBPing != "1.3 ms" || vm.Generated == nil {
		t.Errorf("view model %+v", vm)
	}
}
