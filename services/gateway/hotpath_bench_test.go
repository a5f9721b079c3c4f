package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/affinity"
	"switchyard/services/resilience"
	"switchyard/services/routing"
)

// Benchmarks of the gateway's per-request hot path (60-quality §5.3 (e)):
// model resolution and connection selection over a 1,000-connection
// snapshot, and the SSE relay of one event. No network: the relay writes to
// an httptest.ResponseRecorder.

var benchT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

type benchClock struct{ now time.Time }

func (c benchClock) Now() time.Time { return c.now }
func (c benchClock) Wait(ctx context.Context, _ time.Duration) error {
	return ctx.Err()
}

type benchSource struct {
	cat    *services.Catalogue
	conns  []services.Connection
	combos []services.Combo
}

func (s benchSource) Catalogue() *services.Catalogue { return s.cat }
func (s benchSource) ListConnections(context.Context) ([]services.Connection, error) {
	return s.conns, nil
}
func (s benchSource) ListCombos(context.Context) ([]services.Combo, error) { return s.combos, nil }

type benchBreakerStore struct{}

func (benchBreakerStore) LoadBreakers(context.Context) ([]resilience.BreakerSnapshot, error) {
	return nil, nil
}
func (benchBreakerStore) SaveBreaker(context.Context, resilience.BreakerSnapshot) error { return nil }
func (benchBreakerStore) DeleteBreaker(context.Context, string) error                   { return nil }
func (benchBreakerStore) DeleteAllBreakers(context.Context) error                       { return nil }

type benchPinStore struct{}

func (benchPinStore) LoadPins(context.Context) ([]affinity.Pin, error)             { return nil, nil }
func (benchPinStore) SavePin(context.Context, affinity.Pin) error                  { return nil }
func (benchPinStore) DeletePin(context.Context, string) error                      { return nil }
func (benchPinStore) DeletePinsForConnection(context.Context, string) (int, error) { return 0, nil }
func (benchPinStore) DeleteExpired(context.Context, time.Time) (int, error)        { return 0, nil }

// benchEnv is a gateway over provider "fake" with n connections: 20 %
// cooling, 5 % terminal (banned), 10 % locked out for model m1
// (60-quality §5.3 (e)); combo "bench" routes fake/m1 then fakeb/m1.
type benchEnv struct {
	g    *Gateway
	snap *Snapshot
	key  services.APIKey
	set  *Settings
	pins *affinity.Pins
	ids  []string
}

func newBenchEnv(b *testing.B, n int, strategy string) *benchEnv {
	return newBenchEnvMix(b, n, strategy, "spec")
}

// newBenchEnvMix builds the environment with a state mix: "spec" (above),
// "no-lockouts" (cooling and terminal only) or "healthy" (no state at all).
func newBenchEnvMix(b *testing.B, n int, strategy, mix string) *benchEnv {
	b.Helper()
	ctx := context.Background()
	clock := benchClock{now: benchT0}
	cat := services.NewCatalogue([]services.CustomProvider{
		{ID: "fake", Format: services.FormatOpenAI, AuthClass: services.AuthAPIKey, Models: []string{"m1"}},
		{ID: "fakeb", Format: services.FormatOpenAI, AuthClass: services.AuthAPIKey, Models: []string{"m1"}},
	})
	src := benchSource{cat: cat}
	doc := resilience.DefaultDocument()
	doc.ModelLockout.Enabled = true
	doc.ProviderCooldown.Enabled = true
	bc, cc, wc, lc, ec := doc.Breaker(), doc.Cooldown(), doc.WindowGate(), doc.Lockout(), doc.EgressLock()
	cooldowns := resilience.NewCooldowns(clock, func() resilience.CooldownConfig { return cc }, nil, nil)
	lockStore := resilience.NewMemoryLockoutStore()
	env := &benchEnv{}
	until := benchT0.Add(10 * time.Minute)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("conn-%04d", i)
		env.ids = append(env.ids, id)
		src.conns = append(src.conns, services.Connection{ID: id, Provider: "fake", Name: id, AuthClass: services.AuthAPIKey, Enabled: true,
			Priority: i / 10, BaseURL: "http://127.0.0.1:9/v1", CreatedAt: benchT0.Add(time.Duration(i) * time.Second)})
		switch {
		case mix == "healthy":
		case i%20 == 2:
			at := benchT0
			cooldowns.Replace(id, services.ConnectionState{TerminalStatus: services.TerminalBanned, TerminalAt: &at})
		case i%5 == 1:
			u, at := until, benchT0
			cooldowns.Replace(id, services.ConnectionState{RateLimitedUntil: &u, BackoffLevel: 2, LastErrorAt: &at, LastErrorStatus: 429})
		case i%10 == 3 && mix == "spec":
			k := resilience.LockKeysFor("fake", id, "m1")[2]
			if err := lockStore.SaveLockout(ctx, resilience.LockoutRecord{LockKey: k, Model: "m1", Reason: "server_error", LastStatus: 503,
				FailureCount: 1, LockedAt: benchT0, Until: until, LastFailureAt: benchT0, LastCooldownMs: 600000}); err != nil {
				b.Fatal(err)
			}
		}
	}
	src.conns = append(src.conns, services.Connection{ID: "connb-1", Provider: "fakeb", Name: "b", AuthClass: services.AuthAPIKey,
		Enabled: true, BaseURL: "http://127.0.0.1:9/v1", CreatedAt: benchT0})
	src.combos = []services.Combo{{ID: "cb1", Name: "bench", Strategy: "priority", Enabled: true, Targets: []services.Target{
		{ID: "t1", Kind: services.KindModel, Provider: "fake", Model: "m1"},
		{ID: "t2", Kind: services.KindModel, Provider: "fakeb", Model: "m1"},
	}}}
	lockouts := resilience.NewLockouts(clock, func() resilience.LockoutConfig { return lc }, nil, lockStore, nil)
	if err := lockouts.Load(ctx); err != nil {
		b.Fatal(err)
	}
	breakers := resilience.NewBreakers(clock, func() resilience.BreakerConfig { return bc }, benchBreakerStore{}, nil)
	gate := resilience.NewWindowGate(clock, func() resilience.WindowGateConfig { return wc })
	cls := resilience.NewClassifier(nil, nil, clock.Now, nil)
	res := resilience.NewEngine(clock, cls, breakers, gate, cooldowns, lockouts, func() *resilience.Document { return &doc },
		func() resilience.EgressLockConfig { return ec })
	reg, err := NewRegistry(ctx, src)
	if err != nil {
		b.Fatal(err)
	}
	g := New(clock, reg, nil, accounts.NewSelector(rand.New(rand.NewPCG(1, 2))), res, nil, nil)
	state, err := routing.NewMemoryState(ctx, routing.StateOptions{Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	g.SetStrategies(routing.NewRegistry(rand.New(rand.NewPCG(3, 4)), state), state)
	env.pins = affinity.NewPins(clock, func() time.Duration { return affinity.DefaultTTL }, benchPinStore{})
	g.SetTraffic(&Traffic{Pins: env.pins, Doc: func() *resilience.Document { return &doc }})
	set := DefaultSettings()
	set.FallbackStrategy = strategy
	g.SetSettings(set)
	env.g, env.snap, env.set = g, reg.Snapshot(), g.current()
	env.key = services.APIKey{ID: "key-1", Name: "bench", Enabled: true, Scopes: []string{services.ScopeInference}}
	return env
}

// pinCase prepares the request's session and pin: hit (pinned to an
// eligible connection), miss (a session without a pin), ineligible (pinned
// to a cooling connection), none (no session key).
func (e *benchEnv) request(b *testing.B, pinCase string) *Request {
	req := &Request{ID: "req_bench", Key: e.key, Endpoint: "/v1/chat/completions", Model: "bench", Inbound: InboundChat,
		Body: map[string]json.RawMessage{"model": json.RawMessage(`"bench"`)}}
	pin := func(session, conn string) {
		req.SessionKey = session
		if err := e.pins.Pin(context.Background(), affinity.PinID(e.key.ID, "fake", session), e.key.ID, "fake", conn); err != nil {
			b.Fatal(err)
		}
	}
	switch pinCase {
	case "pin-hit":
		pin("header:s-hit", "conn-0100") // 100: not cooling, terminal or locked
	case "pin-ineligible":
		pin("header:s-cooling", "conn-0101") // 101 % 5 == 1: cooling
	case "pin-miss":
		req.SessionKey = "header:s-unpinned"
	}
	return req
}

func (e *benchEnv) newState(req *Request) *attemptState {
	return &attemptState{excluded: map[string]bool{}, failedProv: map[string]bool{}, skipModel: map[string]bool{},
		timers: map[string]bool{}, log: newLogRecord(req), onlyLocal: true}
}

// BenchmarkGatewayPick is Gateway.pick, the connection gates of 30-routing
// §5 plus the account strategy, for the first combo target over 1,000
// connections (about 650 eligible). Target of 60-quality §5.4 for
// connection selection: ≤ 5 µs/op and 0 allocs/op in every case.
func BenchmarkGatewayPick(b *testing.B) {
	for _, strategy := range []string{accounts.FillFirst, accounts.RoundRobin, accounts.LeastUsed, accounts.Random} {
		for _, pc := range []string{"pin-hit", "pin-miss", "pin-ineligible", "no-session"} {
			b.Run("n=1000/"+strategy+"/"+pc, func(b *testing.B) {
				e := newBenchEnv(b, 1000, strategy)
				req := e.request(b, pc)
				route, gerr := Resolve(e.snap, e.key, "bench")
				if gerr != nil {
					b.Fatal(gerr)
				}
				t := e.g.expand(e.snap, route, req)[0]
				st := e.newState(req)
				b.ReportAllocs()
				for b.Loop() {
					if c := e.g.pick(e.snap, t, req, st, e.set, true); c == nil {
						b.Fatal("nothing picked")
					}
				}
			})
		}
	}
}

// BenchmarkGatewayPickMix isolates where pick's time goes: the spec mix,
// the same without model lockouts, and a pool with no resilience state.
func BenchmarkGatewayPickMix(b *testing.B) {
	for _, mix := range []string{"spec", "no-lockouts", "healthy"} {
		b.Run("n=1000/fill-first/"+mix, func(b *testing.B) {
			e := newBenchEnvMix(b, 1000, accounts.FillFirst, mix)
			req := e.request(b, "no-session")
			route, gerr := Resolve(e.snap, e.key, "bench")
			if gerr != nil {
				b.Fatal(gerr)
			}
			t := e.g.expand(e.snap, route, req)[0]
			st := e.newState(req)
			b.ReportAllocs()
			for b.Loop() {
				if c := e.g.pick(e.snap, t, req, st, e.set, true); c == nil {
					b.Fatal("nothing picked")
				}
			}
		})
	}
}

// BenchmarkResolvePick is what a request does before its first dispatch:
// resolve the model against the snapshot, expand the combo through its
// strategy, pass the provider gates (breaker, window gate) and pick a
// connection, with a fresh attempt state as Serve builds one.
func BenchmarkResolvePick(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run("n="+strconv.Itoa(n)+"/fill-first/pin-hit", func(b *testing.B) {
			e := newBenchEnv(b, n, accounts.FillFirst)
			req := e.request(b, "pin-hit")
			if n < 101 {
				req.SessionKey = ""
			}
			b.ReportAllocs()
			for b.Loop() {
				route, gerr := Resolve(e.g.reg.Snapshot(), e.key, "bench")
				if gerr != nil {
					b.Fatal(gerr)
				}
				req.Route = route
				st := e.newState(req)
				t := e.g.expand(e.snap, route, req)[0]
				adm, blk := e.g.res.AllowProvider(t.provider.ID, t.provider.AuthClass, t.connID)
				if blk != nil {
					b.Fatal(blk.Reason)
				}
				if c := e.g.pick(e.snap, t, req, st, e.set, true); c == nil {
					b.Fatal("nothing picked")
				}
				e.g.res.Release(adm)
			}
		})
	}
}

// chunk is an OpenAI chat.completion.chunk as providers (and the fake
// upstream) send them.
func chunk(content string, finish bool) []byte {
	fr := "null"
	delta := `{"content":` + strconv.Quote(content) + `}`
	if finish {
		fr, delta = `"stop"`, `{}`
	}
	return []byte(`{"id":"chatcmpl-bench0123456789","object":"chat.completion.chunk","created":1772359200,"model":"m1",` +
		`"system_fingerprint":"fp_bench","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + fr + `}]}`)
}

func benchWriter() (*clientWriter, *httptest.ResponseRecorder) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	req := &Request{ID: "req_bench", Inbound: InboundChat}
	set := DefaultSettings()
	return newClientWriter(rec, r, req, &set), rec
}

// BenchmarkSSERelay measures the relay of chat chunks on the stream path:
// chatPassthrough.Feed (the JSON probe of every chunk) and clientWriter.frame
// (write deadline, write, flush) into a recorder. event: one content chunk
// per op; stream-20: a whole stream per op (role chunk, 20 content chunks,
// finish chunk, [DONE]) through a fresh adapter, as one request sees it.
func BenchmarkSSERelay(b *testing.B) {
	content := chunk("Hel", false)
	b.Run("event", func(b *testing.B) {
		out, rec := benchWriter()
		a := newChatPassthrough()
		if !out.commitUseful(nil) {
			b.Fatal("commit")
		}
		b.SetBytes(int64(len(content)))
		b.ReportAllocs()
		for b.Loop() {
			rec.Body.Reset()
			frames, _, _, err := a.Feed("", content)
			if err != nil {
				b.Fatal(err)
			}
			for _, f := range frames {
				if !out.frame(f) {
					b.Fatal("write")
				}
			}
		}
	})
	b.Run("stream-20", func(b *testing.B) {
		events := [][]byte{[]byte(`{"id":"chatcmpl-bench0123456789","object":"chat.completion.chunk","created":1772359200,"model":"m1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)}
		for i := 0; i < 20; i++ {
			events = append(events, chunk("tok"+strconv.Itoa(i), false))
		}
		events = append(events, chunk("", true), []byte("[DONE]"))
		out, rec := benchWriter()
		b.ReportAllocs()
		for b.Loop() {
			rec.Body.Reset()
			out.useful = false
			a := newChatPassthrough()
			var prelude [][]byte
			for _, ev := range events {
				frames, useful, done, err := a.Feed("", ev)
				if err != nil {
					b.Fatal(err)
				}
				if done {
					out.done(a.Terminal())
					break
				}
				if out.committedUseful() {
					for _, f := range frames {
						out.frame(f)
					}
					continue
				}
				prelude = append(prelude, frames...)
				if useful {
					out.commitUseful(prelude)
					prelude = prelude[:0]
				}
			}
		}
	})
}

// BenchmarkChunkProbe is the per-event JSON decode of chatPassthrough.
func BenchmarkChunkProbe(b *testing.B) {
	data := chunk("Hel", false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var p chunkProbe
		if err := json.Unmarshal(data, &p); err != nil || !p.useful() {
			b.Fatal("probe")
		}
	}
}

// benchChatBody is a ~530-byte chat completion request (the bench payload).
const benchChatBody = `{"model":"bench","temperature":0.2,"max_tokens":64,"messages":[{"role":"system","content":"You are a benchmark. ` +
	`Answer with a short greeting. This text pads the request to a realistic size for a small chat completion: a system prompt, ` +
	`one user turn, and a few parameters. Nothing in it matters to the fake upstream, which answers deterministically whatever ` +
	`it is asked."},{"role":"user","content":"hello bench"}]}`

// BenchmarkParseChat is the request validation of /v1/chat/completions.
func BenchmarkParseChat(b *testing.B) {
	body := []byte(benchChatBody)
	lim := DefaultLimits()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := ParseChat(body, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestBody is the upstream body rebuild of a same-format
// dispatch (model replaced, other fields verbatim).
func BenchmarkRequestBody(b *testing.B) {
	top, _, _, gerr := ParseChat([]byte(benchChatBody), DefaultLimits())
	if gerr != nil {
		b.Fatal(gerr)
	}
	req := &Request{Body: top}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := requestBody(req, "m1"); err != nil {
			b.Fatal(err)
		}
	}
}
