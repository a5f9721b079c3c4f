package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/gateway"
	"switchyard/services/resilience"
)

// Unit tests of the attempt loop (30-routing §6, 20-resilience): a gateway
// over real resilience state in memory, a fake clock, and the fake
// upstream on 127.0.0.1, driven through Gateway.Handle as the /v1 handler
// drives it.

var loopT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

type loopSource struct {
	cat   *services.Catalogue
	conns []services.Connection
}

func (s *loopSource) Catalogue() *services.Catalogue { return s.cat }
func (s *loopSource) ListConnections(context.Context) ([]services.Connection, error) {
	return s.conns, nil
}
func (s *loopSource) ListCombos(context.Context) ([]services.Combo, error) { return nil, nil }

// recordSink keeps the gateway's log records.
type recordSink struct {
	mu   sync.Mutex
	recs []*gateway.LogRecord
}

func (s *recordSink) Record(r *gateway.LogRecord) {
	s.mu.Lock()
	s.recs = append(s.recs, r)
	s.mu.Unlock()
}

func (s *recordSink) last(t *testing.T) *gateway.LogRecord {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recs) == 0 {
		t.Fatal("no log record")
	}
	return s.recs[len(s.recs)-1]
}

// countObs counts the observer's events; onFailure runs on each failure.
type countObs struct {
	mu        sync.Mutex
	attempts  []string
	failures  int
	onFailure func()
}

func (o *countObs) Attempt(_, outcome string) {
	o.mu.Lock()
	o.attempts = append(o.attempts, outcome)
	o.mu.Unlock()
}
func (o *countObs) Failure(string, string) {
	o.mu.Lock()
	o.failures++
	f := o.onFailure
	o.mu.Unlock()
	if f != nil {
		f()
	}
}
func (*countObs) Failover(string)            {}
func (*countObs) Excluded(string)            {}
func (*countObs) PoolExhausted(string)       {}
func (*countObs) TTFB(string, time.Duration) {}
func (*countObs) EmergencyFallback(string)   {}
func (*countObs) Waited(bool)                {}
func (*countObs) Used(string, time.Time)     {}
func (*countObs) StoreError(string, error)   {}

type loopEnv struct {
	t     *testing.T
	clock *testkit.FakeClock
	fu    *fakeupstream.Server
	doc   *resilience.Document
	set   *gateway.Settings
	res   *resilience.Engine
	g     *gateway.Gateway
	logs  *recordSink
	obs   *countObs
	key   services.APIKey
	conns []services.Connection
	src   *loopSource // what Registry.Reload re-reads
}

// newLoopEnv builds a gateway over provider "fake" (OpenAI format) and,
// when anthropic is set, "fakea" (Anthropic format), with one connection
// per credential in priority order, all at the fake upstream. The
// cooldown-aware waits are off unless a test turns them on.
func newLoopEnv(t *testing.T, creds ...string) *loopEnv {
	t.Helper()
	return newLoopEnvWith(t, nil, creds...)
}

// newLoopEnvWith is newLoopEnv with deps adjusted by with (nil: none)
// before the gateway is built.
func newLoopEnvWith(t *testing.T, with func(*gateway.Deps), creds ...string) *loopEnv {
	t.Helper()
	ctx := context.Background()
	e := &loopEnv{t: t, clock: testkit.NewFakeClock(loopT0), logs: &recordSink{}, obs: &countObs{}}
	e.fu = fakeupstream.Start(t, fakeupstream.WithEvents(5), fakeupstream.WithClock(e.clock.Now))
	doc := resilience.DefaultDocument()
	doc.WaitForCooldown.Enabled, doc.ComboCooldownWait.Enabled = false, false
	e.doc = &doc
	src := &loopSource{cat: services.NewCatalogue([]services.CustomProvider{
		{ID: "fake", Format: services.FormatOpenAI, AuthClass: services.AuthAPIKey, Models: []string{"m1"}},
		{ID: "fakea", Format: services.FormatAnthropic, AuthClass: services.AuthAPIKey, Models: []string{"m1"}},
	})}
	for i, cred := range creds {
		provider := "fake"
		if strings.HasPrefix(cred, "ak-") {
			provider = "fakea"
		}
		src.conns = append(src.conns, services.Connection{ID: "c-" + cred, Provider: provider, Name: cred, AuthClass: services.AuthAPIKey,
			Enabled: true, Priority: i, BaseURL: e.fu.URL() + "/v1", Credentials: services.Credentials{APIKey: services.Secret(cred)},
			CreatedAt: loopT0.Add(time.Duration(i) * time.Second)})
	}
	e.conns, e.src = src.conns, src
	cur := func() *resilience.Document { return e.doc }
	breakers := resilience.NewBreakers(e.clock, func() resilience.BreakerConfig { return cur().Breaker() }, resilience.NewMemoryBreakerStore(), nil)
	cooldowns := resilience.NewCooldowns(e.clock, func() resilience.CooldownConfig { return cur().Cooldown() }, nil, nil)
	lockouts := resilience.NewLockouts(e.clock, func() resilience.LockoutConfig { return cur().Lockout() }, nil, resilience.NewMemoryLockoutStore(), nil)
	gate := resilience.NewWindowGate(e.clock, func() resilience.WindowGateConfig { return cur().WindowGate() })
	e.res = resilience.NewEngine(e.clock, resilience.NewClassifier(nil, nil, e.clock.Now, nil), breakers, gate, cooldowns, lockouts,
		cur, func() resilience.EgressLockConfig { return cur().EgressLock() })
	reg, err := gateway.NewRegistry(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	guard, err := services.ParseEgressAllowlist("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	set := gateway.DefaultSettings()
	e.set = &set
	deps := gateway.Deps{Clock: e.clock, Registry: reg, Upstream: gateway.NewUpstream(guard, "test"),
		Selector: accounts.NewSelector(rand.New(rand.NewPCG(1, 2))), Resilience: e.res,
		Settings: func() *gateway.Settings { return e.set }, Logs: e.logs, Observer: e.obs,
		Traffic: &gateway.Traffic{Doc: cur}}
	if with != nil {
		with(&deps)
	}
	e.g, err = gateway.New(ctx, deps)
	if err != nil {
		t.Fatal(err)
	}
	e.key = services.APIKey{ID: "k1", Name: "client", Enabled: true, Scopes: []string{services.ScopeInference}}
	return e
}

func chatBody(model string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":"hello"}]}`, model, stream)
}

// call serves one request through Handle; a refusal before routing comes
// back as the error.
func (e *loopEnv) call(ctx context.Context, ep gateway.Endpoint, body string, header ...string) (*httptest.ResponseRecorder, error) {
	r := httptest.NewRequest(http.MethodPost, ep.Path, strings.NewReader(body)).WithContext(ctx)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	err := e.g.Handle(w, r, &gateway.Call{ID: "req_test", Key: e.key, Endpoint: ep, Received: e.clock.Now(),
		ReadBody: func(_ http.ResponseWriter, r *http.Request, _ int64) ([]byte, error) { return io.ReadAll(r.Body) }})
	return w, err
}

func (e *loopEnv) chat(body string, header ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	w, err := e.call(context.Background(), gateway.EndpointChat, body, header...)
	if err != nil {
		e.t.Fatalf("refused before routing: %v", err)
	}
	return w
}

// hitKeys lists the credentials the fake upstream saw, in order.
func (e *loopEnv) hitKeys() []string {
	var out []string
	for _, h := range e.fu.Hits() {
		out = append(out, h.Credential)
	}
	return out
}

type errorBody struct {
	Error struct {
		Code string `json:"code"`
	} `json:"error"`
	Diagnostics gateway.Diagnostics `json:"diagnostics"`
}

func decodeError(t *testing.T, w *httptest.ResponseRecorder) errorBody {
	t.Helper()
	var b errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %q: %v", w.Body.String(), err)
	}
	return b
}

// A 429 or 503 on the first connection fails over to the next one of the
// same target, within the one client request.
func TestLoopFailsOverToNextConnection(t *testing.T) {
	for _, status := range []int{429, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			e := newLoopEnv(t, "fk-a", "fk-b")
			e.fu.Script("fk-a", fakeupstream.Step{Status: status})
			w := e.chat(chatBody("fake/m1", false))
			if w.Code != 200 || w.Header().Get("X-Switchyard-Selected-Connection-Id") != "c-fk-b" ||
				w.Header().Get("X-Switchyard-Fallback-Attempts") != "1" {
				t.Fatalf("status %d, headers %v: %s", w.Code, w.Header(), w.Body.String())
			}
			if got := e.hitKeys(); !slices.Equal(got, []string{"fk-a", "fk-b"}) {
				t.Fatalf("upstream hits %v", got)
			}
			rec := e.logs.last(t)
			if rec.Attempts != 2 || rec.Outcome != gateway.OutcomeFailover || rec.ConnectionID != "c-fk-b" ||
				rec.AttemptLog[1].Outcome != gateway.OutcomeSuccess || rec.AttemptLog[0].UpstreamStatus != status {
				t.Fatalf("log record %+v", rec)
			}
		})
	}
}

// A 429 with Retry-After 7 cools its connection until t0+7 s: the next
// request goes straight to the other one, and after 7 s both serve again.
func TestLoopAppliesRetryAfterCooldown(t *testing.T) {
	e := newLoopEnv(t, "fk-a", "fk-b")
	e.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "7", Times: 1}, fakeupstream.Step{})
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 {
		t.Fatalf("first: %d %s", w.Code, w.Body.String())
	}
	b := e.res.ConnectionBlocker("fake", "c-fk-a", "m1")
	if b == nil || b.RetryAfter != 7*time.Second {
		t.Fatalf("blocker of c-fk-a %+v, want 7s", b)
	}
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 || w.Header().Get("X-Switchyard-Selected-Connection-Id") != "c-fk-b" {
		t.Fatalf("while cooling: %d via %s", w.Code, w.Header().Get("X-Switchyard-Selected-Connection-Id"))
	}
	e.clock.Advance(7 * time.Second)
	if b := e.res.ConnectionBlocker("fake", "c-fk-a", "m1"); b != nil {
		t.Fatalf("still blocked after 7 s: %+v", b)
	}
	if got := e.hitKeys(); !slices.Equal(got, []string{"fk-a", "fk-b", "fk-b"}) {
		t.Fatalf("upstream hits %v", got)
	}
}

// Every connection cooling: without a cooldown-aware wait the answer is
// 503 all_targets_cooling_down with Retry-After and the exclusion, and no
// upstream is asked; with the wait on, the request sleeps the cooldown out
// (+50 ms) on the clock and is served.
func TestLoopAllCoolingWaitsWithRetryAfter(t *testing.T) {
	e := newLoopEnv(t, "fk-a")
	e.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "2", Times: 1}, fakeupstream.Step{})
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 429 || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("first: %d Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	w := e.chat(chatBody("fake/m1", false))
	b := decodeError(t, w)
	if w.Code != 503 || b.Error.Code != "all_targets_cooling_down" || w.Header().Get("Retry-After") != "2" ||
		len(b.Diagnostics.Excluded) != 1 || b.Diagnostics.Excluded[0].RetryAfterMs == nil || *b.Diagnostics.Excluded[0].RetryAfterMs != 2000 {
		t.Fatalf("cooling: %d Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	if n := e.fu.Count(); n != 1 {
		t.Fatalf("%d upstream hits, want 1", n)
	}

	e.doc.WaitForCooldown.Enabled = true
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 {
		t.Fatalf("with the wait: %d %s", w.Code, w.Body.String())
	}
	if got := e.clock.Waits(); !slices.Equal(got, []time.Duration{2050 * time.Millisecond}) {
		t.Fatalf("waits %v, want [2.05s]", got)
	}
	if rec := e.logs.last(t); len(rec.Waits) != 1 || rec.Waits[0] != (gateway.Wait{Kind: "single", Reason: "cooldown", Target: rec.RequestedModel, StartOffsetMs: rec.Waits[0].StartOffsetMs, WaitedMs: 2050}) {
		t.Fatalf("logged waits %+v", rec.Waits)
	}
}

// A target that failed transiently is walked again after retryDelayMs
// (one retry pass by default), on the connection that failed once its
// cooldown (3 s for a transient failure) is over within the delay.
func TestLoopRetryPass(t *testing.T) {
	e := newLoopEnv(t, "fk-a")
	e.set.DirectCombo.RetryDelay = 3 * time.Second
	e.fu.Script("fk-a", fakeupstream.Step{Fault: fakeupstream.FaultReset, Times: 1}, fakeupstream.Step{})
	w := e.chat(chatBody("fake/m1", false))
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	if got := e.clock.Waits(); !slices.Equal(got, []time.Duration{3 * time.Second}) {
		t.Fatalf("waits %v, want the retry delay [3s]", got)
	}
	if got := e.hitKeys(); !slices.Equal(got, []string{"fk-a", "fk-a"}) {
		t.Fatalf("upstream hits %v", got)
	}
	if rec := e.logs.last(t); rec.Attempts != 2 || rec.Outcome != gateway.OutcomeFailover {
		t.Fatalf("log record %+v", rec)
	}

	// A delay shorter than the cooldown skips the pass instead of waiting
	// for nothing, and maxRetries 0 has none.
	for _, tweak := range []func(){
		func() { e.set.DirectCombo.RetryDelay = 2 * time.Second },
		func() { e.set.DirectCombo.MaxRetries = 0 },
	} {
		tweak()
		e.clock.Advance(time.Minute)
		e.fu.Script("fk-a", fakeupstream.Step{Fault: fakeupstream.FaultReset, Times: 1}, fakeupstream.Step{})
		before := len(e.clock.Waits())
		if w := e.chat(chatBody("fake/m1", false)); w.Code != 502 || len(e.clock.Waits()) != before {
			t.Fatalf("no retry pass expected: %d, waits %v", w.Code, e.clock.Waits())
		}
	}
}

// A client that leaves while the upstream works ends the request as 499
// aborted, and penalises nothing: no cooldown, no breaker failure, no
// failure counted.
func TestLoopClientAbortIsNotCounted(t *testing.T) {
	e := newLoopEnv(t, "fk-a", "fk-b")
	e.fu.Script("fk-a", fakeupstream.Step{Delay: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.call(ctx, gateway.EndpointChat, chatBody("fake/m1", false))
		done <- err
	}()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if _, err := e.fu.WaitHits(wait, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec := e.logs.last(t)
	if rec.Status != 499 || rec.Outcome != gateway.OutcomeAborted {
		t.Fatalf("log record: status %d outcome %q", rec.Status, rec.Outcome)
	}
	if b := e.res.ConnectionBlocker("fake", "c-fk-a", "m1"); b != nil {
		t.Fatalf("the abort cooled the connection: %+v", b)
	}
	if st := e.res.Breakers.Status("fake"); st.FailureCount != 0 {
		t.Fatalf("the abort counted in the breaker: %+v", st)
	}
	if e.obs.failures != 0 || !slices.Equal(e.obs.attempts, []string{"aborted"}) {
		t.Fatalf("observer: %d failures, attempts %v", e.obs.failures, e.obs.attempts)
	}
	if got := e.hitKeys(); !slices.Equal(got, []string{"fk-a"}) {
		t.Fatalf("upstream hits %v: the loop went on after the client left", got)
	}
}

// A stream is held until its first useful byte: one that dies before it
// (here after its preamble, retried once early on the same connection)
// fails over, and the client sees only the stream that served.
func TestLoopHoldsStreamUntilFirstByte(t *testing.T) {
	e := newLoopEnv(t, "fk-a", "fk-b")
	e.fu.Script("fk-a", fakeupstream.Step{Fault: fakeupstream.FaultCut, At: 0})
	w := e.chat(chatBody("fake/m1", true))
	body := w.Body.String()
	if w.Code != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Count(body, `"role":"assistant"`) != 1 {
		t.Fatalf("status %d, body:\n%s", w.Code, body)
	}
	if got := e.hitKeys(); !slices.Equal(got, []string{"fk-a", "fk-a", "fk-b"}) {
		t.Fatalf("upstream hits %v, want an early retry then the failover", got)
	}
	if rec := e.logs.last(t); rec.Outcome != gateway.OutcomeFailover || rec.StreamOutcome != "completed" || rec.ConnectionID != "c-fk-b" {
		t.Fatalf("log record %+v", rec)
	}
}

// A stream that fails after its first useful byte is never replayed: it
// ends with one in-band error frame and no [DONE].
func TestLoopMidStreamFailureEndsInBand(t *testing.T) {
	e := newLoopEnv(t, "fk-a", "fk-b")
	e.fu.Script("fk-a", fakeupstream.Step{Fault: fakeupstream.FaultCut, At: 3})
	w := e.chat(chatBody("fake/m1", true))
	body := w.Body.String()
	frames := strings.Split(strings.TrimSpace(body), "\n\n")
	lastFrame := frames[len(frames)-1]
	if w.Code != 200 || strings.Contains(body, "[DONE]") || !strings.Contains(lastFrame, `"error"`) ||
		strings.Count(body, `"error"`) != 1 {
		t.Fatalf("status %d, body:\n%s", w.Code, body)
	}
	if got := e.hitKeys(); !slices.Equal(got, []string{"fk-a"}) {
		t.Fatalf("upstream hits %v: a committed stream failed over", got)
	}
	rec := e.logs.last(t)
	if rec.Status != 200 || rec.Outcome != gateway.OutcomeUpstreamError || rec.ErrorCode == "" || rec.StreamOutcome != "error" {
		t.Fatalf("log record: status %d outcome %q code %q stream %q", rec.Status, rec.Outcome, rec.ErrorCode, rec.StreamOutcome)
	}
}

// No request dispatches more than routing.maxAttemptsPerRequest (30)
// times, however many connections fail.
func TestLoopCapsDispatchesAt30(t *testing.T) {
	creds := make([]string, 35)
	for i := range creds {
		creds[i] = fmt.Sprintf("fk-%02d", i)
	}
	e := newLoopEnv(t, creds...)
	// Neither the breaker nor the window gate may stop the walk first.
	e.doc.ProviderBreaker.APIKey.FailureThreshold = 1000
	e.doc.ProviderBreaker.APIKey.DegradationThreshold = 1000
	e.doc.ProviderCooldown.Enabled = false
	e.set.DirectCombo.MaxRetries = 0
	e.fu.SetDefault(fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 503}}})
	w := e.chat(chatBody("fake/m1", false))
	b := decodeError(t, w)
	if w.Code != 503 || b.Diagnostics.Attempted != 30 || b.Diagnostics.TerminalReason != "attempt_cap" {
		t.Fatalf("status %d, diagnostics %+v", w.Code, b.Diagnostics)
	}
	if n := e.fu.Count(); n != 30 {
		t.Fatalf("%d upstream hits, want 30", n)
	}
}

// No dispatch starts later than routing.requestDeadlineMs after receipt.
func TestLoopStopsAtTheDeadline(t *testing.T) {
	e := newLoopEnv(t, "fk-a", "fk-b")
	e.set.RequestDeadline = 10 * time.Second
	e.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	e.obs.onFailure = func() { e.clock.Advance(11 * time.Second) } // the first attempt took 11 s
	w := e.chat(chatBody("fake/m1", false))
	b := decodeError(t, w)
	if w.Code != 503 || b.Diagnostics.TerminalReason != "deadline" || b.Diagnostics.Attempted != 1 {
		t.Fatalf("status %d, diagnostics %+v", w.Code, b.Diagnostics)
	}
	if got := e.hitKeys(); !slices.Equal(got, []string{"fk-a"}) {
		t.Fatalf("upstream hits %v", got)
	}
}

// The key's own limits refuse before the body is read, with 429
// rate_limit_exceeded and Retry-After; the refusal is logged.
func TestHandleAppliesKeyLimitsBeforeTheBody(t *testing.T) {
	e := newLoopEnv(t, "fk-a")
	one := 1
	e.key.RequestsPerMinute = &one
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 {
		t.Fatalf("first: %d %s", w.Code, w.Body.String())
	}
	read := false
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody("fake/m1", false)))
	w := httptest.NewRecorder()
	err := e.g.Handle(w, r, &gateway.Call{ID: "req_2", Key: e.key, Endpoint: gateway.EndpointChat, Received: e.clock.Now(),
		ReadBody: func(http.ResponseWriter, *http.Request, int64) ([]byte, error) { read = true; return nil, nil }})
	var gerr *services.GatewayError
	if !errors.As(err, &gerr) || gerr.Status != 429 || gerr.Code != "rate_limit_exceeded" || gerr.RetryAfter != 60 || read {
		t.Fatalf("second: %v (body read: %t)", err, read)
	}
	if w.Header().Get("X-Switchyard-Error-Code") != "rate_limit_exceeded" {
		t.Fatalf("headers %v", w.Header())
	}
	if rec := e.logs.last(t); rec.ID != "req_2" || rec.Status != 429 || rec.Outcome != gateway.OutcomeClientError {
		t.Fatalf("log record %+v", rec)
	}
	e.clock.Advance(time.Minute)
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 {
		t.Fatalf("after a minute: %d", w.Code)
	}
}

// The key's concurrency unit is held for the whole request and given back
// when it ends, refusals included.
func TestHandleReleasesTheKeyGrant(t *testing.T) {
	e := newLoopEnv(t, "fk-a")
	one := 1
	e.key.MaxConcurrentRequests = &one
	e.fu.Script("fk-a", fakeupstream.Step{Status: 400, Times: 1}, fakeupstream.Step{})
	for i, want := range []int{400, 200, 200} {
		if w := e.chat(chatBody("fake/m1", false)); w.Code != want {
			t.Fatalf("request %d: %d, want %d", i, w.Code, want)
		}
	}
	if _, err := e.call(context.Background(), gateway.EndpointChat, `{"model":`); err == nil {
		t.Fatal("a malformed body was routed")
	}
	if w := e.chat(chatBody("fake/m1", false)); w.Code != 200 {
		t.Fatalf("after a refused body: %d", w.Code)
	}
}

// anthropic-beta travels in the request: sent from /v1/messages to an
// Anthropic-format upstream, never from another endpoint.
func TestAnthropicBetaForwardedFromMessagesOnly(t *testing.T) {
	e := newLoopEnv(t, "ak-a")
	msg := `{"model":"fakea/m1","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`
	if w, err := e.call(context.Background(), gateway.EndpointMessages, msg, "anthropic-beta", "tools-2024"); err != nil || w.Code != 200 {
		t.Fatalf("messages: %v %d %s", err, w.Code, w.Body.String())
	}
	if w := e.chat(chatBody("fakea/m1", false), "anthropic-beta", "tools-2024"); w.Code != 200 {
		t.Fatalf("chat: %d %s", w.Code, w.Body.String())
	}
	hits := e.fu.Hits()
	if len(hits) != 2 || !slices.Contains(hits[0].Headers, "Anthropic-Beta") || slices.Contains(hits[1].Headers, "Anthropic-Beta") {
		t.Fatalf("headers per hit: %v / %v", hits[0].Headers, hits[len(hits)-1].Headers)
	}
}
