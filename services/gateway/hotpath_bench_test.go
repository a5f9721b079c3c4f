package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/testkit/leasestore"
	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/affinity"
	"switchyard/services/leases"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/translate"
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

type benchPinStore struct{}

func (benchPinStore) LoadPins(context.Context) ([]affinity.Pin, error)             { return nil, nil }
func (benchPinStore) SavePin(context.Context, affinity.Pin) error                  { return nil }
func (benchPinStore) DeletePin(context.Context, string) error                      { return nil }
func (benchPinStore) DeletePinsForConnection(context.Context, string) (int, error) { return 0, nil }
func (benchPinStore) DeleteExpired(context.Context, time.Time) (int, error)        { return 0, nil }

// benchEnv is a gateway over provider "fake" with n connections: 20 %
// cooling, 5 % terminal (banned), 10 % locked out for model m1, and one
// leased by another key than the requester's: conn-0000, the connection
// fill-first would pick otherwise (60-quality §5.3 (e); the lease in the
// "spec" mix with n > 1 only). Combo "bench" routes fake/m1 then fakeb/m1.
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
	return newBenchEnvAt(b, n, strategy, mix, "http://127.0.0.1:9/v1")
}

// newBenchEnvAt builds the environment with every connection at baseURL.
func newBenchEnvAt(b testing.TB, n int, strategy, mix, baseURL string) *benchEnv {
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
			Priority: i / 10, BaseURL: baseURL, CreatedAt: benchT0.Add(time.Duration(i) * time.Second)})
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
		Enabled: true, BaseURL: baseURL, CreatedAt: benchT0})
	src.combos = []services.Combo{{ID: "cb1", Name: "bench", Strategy: "priority", Enabled: true, Targets: []services.Target{
		{ID: "t1", Kind: services.KindModel, Provider: "fake", Model: "m1"},
		{ID: "t2", Kind: services.KindModel, Provider: "fakeb", Model: "m1"},
	}}}
	lockouts := resilience.NewLockouts(clock, func() resilience.LockoutConfig { return lc }, nil, lockStore, nil)
	if err := lockouts.Load(ctx); err != nil {
		b.Fatal(err)
	}
	breakers := resilience.NewBreakers(clock, func() resilience.BreakerConfig { return bc }, resilience.NewMemoryBreakerStore(), nil)
	gate := resilience.NewWindowGate(clock, func() resilience.WindowGateConfig { return wc })
	cls := resilience.NewClassifier(nil, nil, clock.Now, nil)
	res := resilience.NewEngine(clock, cls, breakers, gate, cooldowns, lockouts, func() *resilience.Document { return &doc },
		func() resilience.EgressLockConfig { return ec })
	reg, err := NewRegistry(ctx, src)
	if err != nil {
		b.Fatal(err)
	}
	state, err := routing.NewMemoryState(ctx, routing.StateOptions{Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	env.pins = affinity.NewPins(clock, func() time.Duration { return affinity.DefaultTTL }, benchPinStore{})
	ls := leases.New(leasestore.New(), clock)
	if mix == "spec" && n > 1 {
		holder := services.APIKey{ID: "key-lease", Enabled: true, Scopes: []string{services.ScopeInference, services.ScopeLeaseExclusive},
			AllowedConnections: []string{env.ids[0]}}
		if _, err := ls.Acquire(ctx, holder, "vlo_"+strings.Repeat("b", 43), "fake", []string{env.ids[0]}, leases.MaxTTL); err != nil {
			b.Fatal(err)
		}
	}
	g, err := New(ctx, Deps{Clock: clock, Registry: reg, Upstream: NewUpstream(nil, "bench"),
		Selector: accounts.NewSelector(rand.New(rand.NewPCG(1, 2))), Resilience: res,
		Strategies: routing.NewRegistry(rand.New(rand.NewPCG(3, 4)), state), RouteState: state,
		Traffic: &Traffic{Pins: env.pins, Leases: ls, Doc: func() *resilience.Document { return &doc }}})
	if err != nil {
		b.Fatal(err)
	}
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
func (e *benchEnv) request(b testing.TB, pinCase string) *Request {
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

// BenchmarkSelectConnection is Gateway.pick, the connection gates of 30-routing
// §5 plus the account strategy, for the first combo target over 1,000
// connections (about 650 eligible). Target of 60-quality §5.4 for
// connection selection: ≤ 5 µs/op and 0 allocs/op in every case.
func BenchmarkSelectConnection(b *testing.B) {
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

// BenchmarkSelectConnectionMix isolates where pick's time goes: the spec mix,
// the same without model lockouts, and a pool with no resilience state.
func BenchmarkSelectConnectionMix(b *testing.B) {
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
// chatPassthrough.Feed (readChunk on every chunk) and clientWriter.frame
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
				for _, f := range frames { // the relay copies what it holds back
					prelude = append(prelude, bytes.Clone(f))
				}
				if useful {
					out.commitUseful(prelude)
					prelude = prelude[:0]
				}
			}
		}
	})
}

// BenchmarkChunkProbe is a JSON decode of a chunk into chunkProbe, what
// chatPassthrough did for every event before readChunk.
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

// BenchmarkReadChunk is the per-event read of chatPassthrough: a validity
// check and a byte scan of the chunk.
func BenchmarkReadChunk(b *testing.B) {
	data := chunk("Hel", false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if f, err := readChunk(data); err != nil || !f.useful {
			b.Fatal("read")
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

// referenceChatFeed is chatPassthrough.Feed as a plain decode into
// chunkProbe: the behaviour the byte-scanning reader must keep.
func referenceChatFeed(data []byte) (useful, finished bool, u *translate.Usage, err error) {
	var probe chunkProbe
	if err := json.Unmarshal(data, &probe); err != nil {
		return false, false, nil, translate.ErrMalformed
	}
	if len(probe.Error) > 0 && string(probe.Error) != "null" {
		code, typ, msg := parseUpstreamError(append(append([]byte(`{"error":`), probe.Error...), '}'))
		return false, false, nil, &translate.UpstreamError{Code: code, Type: typ, Message: msg}
	}
	if probe.Usage != nil {
		c := probe.Usage.counts()
		u = &c
	}
	return probe.useful(), probe.finished(), u, nil
}

// genChunk builds a random chat chunk from the fields the relay reads, in
// the spellings, types, repetitions and spacing a decoder must cope with.
func genChunk(r *rand.Rand) []byte {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	sp := func() string { return pick("", "", "", " ", "\n ", "\t") }
	obj := func(members []string) string {
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		var b strings.Builder
		b.WriteString("{" + sp())
		for i, m := range members {
			if i > 0 {
				b.WriteString(sp() + "," + sp())
			}
			b.WriteString(m)
		}
		b.WriteString(sp() + "}")
		return b.String()
	}
	str := func() string {
		return pick(`null`, `""`, `"x"`, `"Hel"`, `"\u00e9"`, `"\n"`, `"é"`, "\"\xff\"", `1`, `true`, `[]`, `{}`, `"\""`)
	}
	member := func(key, val string) string { return `"` + key + `"` + sp() + ":" + sp() + val }
	// some includes each key with probability 1/2, the last (an odd
	// spelling) with 1/6.
	some := func(keys []string, val func(string) string) []string {
		var out []string
		for i, k := range keys {
			if (i < len(keys)-1 && r.IntN(2) == 0) || (i == len(keys)-1 && r.IntN(6) == 0) {
				out = append(out, member(k, val(k)))
				if r.IntN(6) == 0 { // the same key again, with its own value
					out = append(out, member(k, val(k)))
				}
			}
		}
		return out
	}
	delta := func() string {
		return pick(`null`, `1`, `"d"`, obj(some([]string{"content", "role", "contenT"}, func(string) string { return str() })), obj(some([]string{"content", "tool_calls", "reasoning_content", "reasoning", "role",
			pick("Content", "CONTENT", "tool_Calls", `c\u006fntent`, "reasoninG", "cont", "contenT")}, func(k string) string {
			if k == "tool_calls" || k == "tool_Calls" {
				return pick(`null`, `[]`, `[{"index":0,"function":{"arguments":"{}"}}]`, `""`, `1`)
			}
			return str()
		})))
	}
	choice := func() string {
		return pick(`null`, `1`, `[]`, `{"index":0,"delta":`+delta()+`}`, obj(some([]string{"delta", "finish_reason", "index", "logprobs", pick("Delta", "finish_Reason", "FINISH_REASON", `d\u0065lta`)},
			func(k string) string {
				switch k {
				case "delta", "Delta", `d\u0065lta`:
					return delta()
				case "index":
					return pick(`0`, `1`, `-1`, `1.5`)
				}
				return pick(`null`, `null`, `null`, `"stop"`, `""`, `"length"`, `1`, `{}`)
			})))
	}
	top := some([]string{"choices", "usage", "error", "id", "model", pick("Choices", "USAGE", "Error", `ch\u006fices`, "choıces", "ſ")}, func(k string) string {
		switch k {
		case "choices", "Choices", `ch\u006fices`:
			n := r.IntN(4)
			els := make([]string, n)
			for i := range els {
				els[i] = choice()
			}
			return pick(`null`, `"c"`, `{}`, "["+strings.Join(els, ",")+"]", "["+strings.Join(els, ",")+"]")
		case "usage", "USAGE":
			return pick(`null`, `1`, `"u"`, `{"prompt_tokens":3,"completion_tokens":4}`, `{"prompt_tokens":1.5}`,
				`{"prompt_tokens":"x"}`, `{"Prompt_Tokens":7,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}`,
				`{"prompt_tokens_details":null}`, `{"prompt_tokens":99999999999999999999}`,
				`{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2,"Cached_Tokens":1}}`, `{"completion_tokens_details":{"reasoning_tokens":1.5}}`,
				`{"prompt_tokens_details":{"cached_tokens":null},"completion_tokens":-4}`, `{"prompt_tokens_details":[]}`, `{"completion_tokens":"4"}`,
				`{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}`, `{"completion_tokens_details":{"reasoning_tokens":7},"completion_tokens":9}`,
				`{"prompt_tokens":1,"prompt_tokens":2}`, `{"prompt_tokens_details":{"audio_tokens":1}}`, `{"prompt_tokens":true}`,
				`{"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":{}}`)
		case "error", "Error":
			return pick(`null`, `{"message":"boom","code":"overloaded","type":"server_error"}`, `"plain"`, `1`, `{}`, `[]`)
		}
		return pick(`"chatcmpl-1"`, `null`, `1`, `{"choices":1}`, `["choices"]`)
	})
	doc := obj(top)
	switch r.IntN(40) {
	case 0:
		doc = pick(`null`, `[]`, `"s"`, `1`, ``, `{`, `{"choices":[}`, `{"choices":[{"delta":{"content":"x"}}]}x`)
	case 1: // a random byte edit
		if len(doc) > 0 {
			i := r.IntN(len(doc))
			doc = doc[:i] + pick("", "}", "]", ",", `"`, "\\", " ", "\x00", "n") + doc[i+1:]
		}
	}
	return []byte(sp() + doc + sp())
}

// The byte-scanning chunk reader answers exactly as decoding does.
func TestChatFeedMatchesDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for n := range 60000 {
		data := genChunk(r)
		wu, wf, wusage, werr := referenceChatFeed(data)
		a := newChatPassthrough()
		frames, useful, _, err := a.Feed("", data)
		if _, _, _, ok := scanChunk(data); ok && json.Valid(data) {
			fast++
		}
		if fmt.Sprint(err) != fmt.Sprint(werr) || (err == nil) != (werr == nil) {
			t.Fatalf("case %d %s: err %v, want %v", n, data, err, werr)
		}
		if err != nil {
			continue
		}
		var gotUsage *translate.Usage
		if a.usage != (translate.Usage{}) || wusage != nil && *wusage == (translate.Usage{}) {
			gotUsage = &a.usage
		}
		if useful != wu || a.finished != wf || fmt.Sprint(gotUsage) != fmt.Sprint(wusage) {
			t.Fatalf("case %d %s: useful %v finished %v usage %v, want %v %v %v", n, data, useful, a.finished, gotUsage, wu, wf, wusage)
		}
		if len(frames) != 1 || string(frames[0]) != "data: "+string(data)+"\n\n" {
			t.Fatalf("case %d: frames %q", n, frames)
		}
	}
	if fast < 15000 {
		t.Fatalf("only %d of 60000 chunks took the scanning path", fast)
	}
}

// relayThrough relays the SSE body an upstream answers with status through
// relayStream and returns the verdict and what the client received.
func relayThrough(t *testing.T, status int, sse string) (result, string) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		// Written in small pieces so that events and lines straddle reads.
		for rest := sse; rest != ""; {
			n := min(len(rest), 700)
			_, _ = io.WriteString(w, rest[:n])
			w.(http.Flusher).Flush()
			rest = rest[n:]
		}
	}))
	defer up.Close()
	e := newBenchEnvAt(t, 1, accounts.FillFirst, "healthy", up.URL+"/v1")
	guard, err := services.ParseEgressAllowlist("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	e.g.up = NewUpstream(guard, "test")
	c, ok := e.snap.Connection("conn-0000")
	if !ok {
		t.Fatal("no connection")
	}
	p, _ := e.snap.Catalogue.Get("fake")
	req := &Request{ID: "req_relay", Key: e.key, Endpoint: "/v1/chat/completions", Model: "fake/m1", Stream: true, Inbound: InboundChat}
	rec := httptest.NewRecorder()
	out := newClientWriter(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), req, e.set)
	ctx, cancel := context.WithCancelCause(context.Background())
	res := e.g.relayStream(ctx, cancel, out, target{provider: p, model: "m1"}, c, "/chat/completions", []byte(`{}`),
		newChatPassthrough(), e.set, e.newState(req), func(int, http.Header) {})
	return res, rec.Body.String()
}

// The relay reads SSE as before: CRLF and LF lines, comments, event names,
// multi-line data, empty data lines and lines longer than its buffer; it
// passes each data payload on as one frame and ends with [DONE].
func TestRelayStreamReadsSSE(t *testing.T) {
	long := strings.Repeat("é", 3000) // a 6 KiB line
	var sse, want strings.Builder
	frame := func(data string) { want.WriteString("data: " + data + "\n\n") }
	sse.WriteString(": hello\r\n\r\n")
	c0 := `{"choices":[{"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	sse.WriteString("data: " + c0 + "\r\n\r\n")
	frame(c0)
	c1 := string(chunk("Hel", false))
	sse.WriteString("event: completion\ndata:" + c1 + "\n\n")
	frame(c1)
	c2 := string(chunk(long, false))
	sse.WriteString("data: " + c2 + "\n\n")
	frame(c2)
	sse.WriteString("data:\n\n")                          // empty: no event
	sse.WriteString("data: {\"choices\":\ndata: []}\n\n") // two data lines make one payload
	frame("{\"choices\":\n[]}")
	c3 := string(chunk("", true))
	sse.WriteString("data: " + c3 + "\n\n")
	frame(c3)
	sse.WriteString("data: [DONE]\n\n")
	want.WriteString("data: [DONE]\n\n")
	res, got := relayThrough(t, 200, sse.String())
	if !res.ok {
		t.Fatalf("verdict %+v", res)
	}
	if got != want.String() {
		t.Fatalf("client got\n%q\nwant\n%q", got, want.String())
	}

	// The body may end without a blank line after the last event.
	res, got = relayThrough(t, 200, "data: "+c1+"\n\ndata: "+c3)
	if !res.ok || got != "data: "+c1+"\n\ndata: "+c3+"\n\ndata: [DONE]\n\n" {
		t.Fatalf("verdict %+v, client got %q", res, got)
	}
	// Content, then the end of the body without a finish reason.
	if res, _ = relayThrough(t, 200, "data: "+c1+"\n\n"); res.ok || res.transport != resilience.TransportReset {
		t.Fatalf("cut stream: verdict %+v", res)
	}
	// An error status ends the attempt with its body, nothing written.
	if res, got = relayThrough(t, 429, `{"error":{"message":"slow down"}}`); res.status != 429 || string(res.body) != `{"error":{"message":"slow down"}}` || got != "" {
		t.Fatalf("429: verdict %+v, client got %q", res, got)
	}
	// A malformed chunk before any useful event fails the attempt quietly.
	if res, got = relayThrough(t, 200, "data: {\"choices\":[\n\n"); res.detail != resilience.DetailMalformed || got != "" {
		t.Fatalf("malformed: verdict %+v, client got %q", res, got)
	}
}

// A completed stream leaves its upstream connection reusable: the relay
// reads the end of the body after the terminal event.
func TestRelayStreamReusesUpstreamConnection(t *testing.T) {
	var conns atomic.Int32
	delivered := make(chan struct{}, 1) // the client has the terminal event
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+string(chunk("Hel", false))+"\n\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "data: "+string(chunk("", true))+"\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		// The end of the body comes on its own, after the client got [DONE]
		// (bounded, should the relay ever wait for the end first).
		select {
		case <-delivered:
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	e := newBenchEnvAt(t, 1, accounts.FillFirst, "healthy", up.URL+"/v1")
	guard, err := services.ParseEgressAllowlist("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	e.g.up = NewUpstream(guard, "test")
	c, _ := e.snap.Connection("conn-0000")
	p, _ := e.snap.Catalogue.Get("fake")
	for i := range 5 {
		req := &Request{ID: "req_relay", Key: e.key, Endpoint: "/v1/chat/completions", Model: "fake/m1", Stream: true, Inbound: InboundChat}
		out := newClientWriter(&doneSpy{ResponseRecorder: httptest.NewRecorder(), done: delivered},
			httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), req, e.set)
		ctx, cancel := context.WithCancelCause(context.Background())
		res := e.g.relayStream(ctx, cancel, out, target{provider: p, model: "m1"}, c, "/chat/completions", []byte(`{}`),
			newChatPassthrough(), e.set, e.newState(req), func(int, http.Header) {})
		if !res.ok {
			t.Fatalf("stream %d: verdict %+v", i, res)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 streams used %d upstream connections, want 1", n)
	}
}

// doneSpy is a client that reports the [DONE] event it receives.
type doneSpy struct {
	*httptest.ResponseRecorder
	done chan<- struct{}
}

func (d *doneSpy) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("[DONE]")) {
		select {
		case d.done <- struct{}{}:
		default:
		}
	}
	return d.ResponseRecorder.Write(p)
}

// refParseCommon, refParseChat and refParseMessages are the request parsers
// as plain decodes with encoding/json: the behaviour the scanning parsers
// must keep.
func refParseCommon(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	if err := CheckDepth(body, lim.MaxJSONDepth); err != nil {
		return nil, "", false, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, "", false, invalid("", "The body is not a valid JSON object.")
	}
	var model string
	raw, ok := top["model"]
	if !ok || json.Unmarshal(raw, &model) != nil {
		return nil, "", false, invalid("model", "model is required and must be a string.")
	}
	if err := ValidateModel(model); err != nil {
		return nil, "", false, err
	}
	stream := false
	if v, ok := top["stream"]; ok && string(v) != "null" {
		if json.Unmarshal(v, &stream) != nil {
			return nil, "", false, invalid("stream", "stream must be true or false.")
		}
	}
	return top, model, stream, nil
}

func refMessages(raw json.RawMessage, lim Limits, roleOK func(string) bool, roleMsg func(string) string) *services.GatewayError {
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return invalid("messages", "messages must be a non-empty array of message objects.")
	}
	if len(msgs) > lim.MaxMessages {
		return invalid("messages", fmt.Sprintf("messages may hold at most %d entries.", lim.MaxMessages))
	}
	for i, m := range msgs {
		var role string
		if m == nil || json.Unmarshal(m["role"], &role) != nil || !roleOK(role) {
			return invalid(fmt.Sprintf("messages[%d].role", i), roleMsg(role))
		}
	}
	return nil
}

func refParseChat(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	if err := CheckDepth(body, lim.MaxJSONDepth); err != nil {
		return nil, "", false, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, "", false, invalid("", "The body is not a valid JSON object.")
	}
	var model string
	raw, ok := top["model"]
	if !ok || json.Unmarshal(raw, &model) != nil {
		return nil, "", false, invalid("model", "model is required and must be a string.")
	}
	if err := ValidateModel(model); err != nil {
		return nil, "", false, err
	}
	if err := refMessages(top["messages"], lim, func(r string) bool { return chatRoles[r] }, func(string) string { return "role must be one of system, developer, user, assistant, tool." }); err != nil {
		return nil, "", false, err
	}
	stream := false
	if v, ok := top["stream"]; ok && string(v) != "null" {
		if json.Unmarshal(v, &stream) != nil {
			return nil, "", false, invalid("stream", "stream must be true or false.")
		}
	}
	for _, f := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := top[f]; ok && string(v) != "null" {
			var n int64
			if json.Unmarshal(v, &n) != nil || n <= 0 {
				return nil, "", false, invalid(f, f+" must be a positive integer.")
			}
		}
	}
	if v, ok := top["n"]; ok && string(v) != "null" {
		var n int
		if json.Unmarshal(v, &n) != nil || n < 1 || n > 16 {
			return nil, "", false, invalid("n", "n must be an integer from 1 to 16.")
		}
	}
	return top, model, stream, nil
}

func refParseMessages(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	top, model, stream, err := refParseCommon(body, lim)
	if err != nil {
		return nil, "", false, err
	}
	var maxTokens int64
	if json.Unmarshal(top["max_tokens"], &maxTokens) != nil || maxTokens <= 0 {
		return nil, "", false, invalid("max_tokens", "max_tokens is required and must be a positive integer.")
	}
	if err := refMessages(top["messages"], lim, func(r string) bool { return r == "user" || r == "assistant" || r == "system" },
		func(r string) string {
			return fmt.Sprintf("Unexpected role %q for input message role: expected user, assistant or system.", r)
		}); err != nil {
		return nil, "", false, err
	}
	return top, model, stream, nil
}

// genBody builds a random request body around the fields the parsers
// check, in the types, spellings, repetitions and spacing clients send.
func genBody(r *rand.Rand) []byte {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	sp := func() string { return pick("", "", "", " ", "\n  ", "\t") }
	obj := func(members []string) string {
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		return "{" + sp() + strings.Join(members, sp()+","+sp()) + sp() + "}"
	}
	member := func(k, v string) string { return `"` + k + `"` + sp() + ":" + sp() + v }
	message := func() string {
		if r.IntN(4) != 0 {
			return `{"role":` + pick(`"user"`, `"assistant"`) + `,"content":"hi"}`
		}
		var ms []string
		if r.IntN(8) != 0 {
			ms = append(ms, member(pick("role", "role", "role", "Role", `r\u006fle`, "rôle"),
				pick(`"user"`, `"assistant"`, `"system"`, `"tool"`, `"developer"`, `"wizard"`, `null`, `1`, `"us\u0065r"`, `""`, `"User"`)))
			if r.IntN(8) == 0 {
				ms = append(ms, member("role", pick(`"user"`, `"wizard"`, `"system"`)))
			}
		}
		ms = append(ms, member("content", pick(`"hi"`, `"<b>&amp;</b>"`, `[{"type":"text","text":"x"}]`, `null`, "\"\u2028\"", `"é"`)))
		return pick(obj(ms), obj(ms), obj(ms), `null`, `1`, `"m"`, `[]`)
	}
	var members []string
	add := func(k, v string) {
		members = append(members, member(k, v))
		if r.IntN(12) == 0 { // the same key again
			members = append(members, member(k, v))
		}
	}
	if r.IntN(10) != 0 {
		add(pick("model", "model", "model", "Model", `m\u006fdel`), pick(`"gpt-4o-mini"`, `"fake/m1"`, `"combo"`, `"gpt-4o-mini"`, `"fake/m1"`, `"combo"`, `""`, `null`, `1`, `"m\u0000x"`, `"gpt\u002d4o"`, `"é"`, "\"\xff\""))
	}
	if r.IntN(8) != 0 {
		n := r.IntN(6)
		ms := make([]string, n)
		for i := range ms {
			ms[i] = message()
		}
		add("messages", pick("["+sp()+strings.Join(ms, ","+sp())+sp()+"]", "["+strings.Join(ms, ",")+"]", `null`, `{}`, `"m"`))
	}
	for _, f := range []struct{ k, vals string }{
		{"stream", `true|false|null|"yes"|1`},
		{"max_tokens", `64|0|-1|1.5|1e3|"5"|null|99999999999999999999|9223372036854775807`},
		{"max_completion_tokens", `5|0|null|true`},
		{"n", `1|16|17|0|2.0|null|"2"`},
		{"temperature", `0.2|1|null`},
		{"tools", `[]|[{"type":"function"}]|null`},
		{"metadata", `{"a":"<x>","b":[1,2,{"c":null}]}|{}`},
		{"stream_options", `{"include_usage":true}`},
		{"m\u00f6del", `"x"`},
	} {
		if r.IntN(3) == 0 {
			vals := strings.Split(f.vals, "|")
			add(f.k, vals[r.IntN(len(vals))])
		}
	}
	doc := obj(members)
	switch r.IntN(30) {
	case 0:
		doc = pick(`null`, `[]`, `"s"`, `1`, ``, `{`, `{"model":"m",}`, `{"model":"m"}x`, `]]]]{"model":"m"}`)
	case 1: // a random byte edit
		if len(doc) > 0 {
			i := r.IntN(len(doc))
			doc = doc[:i] + pick("", "}", "]", ",", `"`, "\\", " ", "\x00", "[[[[[[[[[[") + doc[i+1:]
		}
	}
	return []byte(sp() + doc + sp())
}

// The scanning request parsers answer exactly as decoding does: same
// fields, model, stream flag and errors.
func TestParsersMatchDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	lims := []Limits{DefaultLimits(), {MaxBodyBytes: 1 << 20, MaxJSONDepth: 4, MaxMessages: 3}}
	parsers := []struct {
		name      string
		got, want func([]byte, Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError)
	}{{"chat", ParseChat, refParseChat}, {"messages", ParseMessages, refParseMessages}, {"common", parseCommon, refParseCommon}}
	accepted := 0
	for n := range 10000 {
		body := genBody(r)
		if n < len(parseSeeds) {
			body = []byte(parseSeeds[n])
		}
		lim := lims[n%len(lims)]
		for _, p := range parsers {
			top, model, stream, gerr := p.got(body, lim)
			wtop, wmodel, wstream, werr := p.want(body, lim)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) || (gerr == nil) != (werr == nil) ||
				gerr != nil && (gerr.Param != werr.Param || gerr.Code != werr.Code || gerr.Status != werr.Status) {
				t.Fatalf("%s %q: error %+v, want %+v", p.name, body, gerr, werr)
			}
			if gerr != nil {
				continue
			}
			accepted++
			if model != wmodel || stream != wstream || !reflect.DeepEqual(top, wtop) {
				t.Fatalf("%s %q: %q %v %q, want %q %v %q", p.name, body, model, stream, top, wmodel, wstream, wtop)
			}
		}
	}
	t.Logf("%d accepted", accepted)
	if accepted < 1500 {
		t.Fatalf("only %d accepted bodies", accepted)
	}
}

// refRequestBody is requestBody as a map copy and json.Marshal.
func refRequestBody(fields map[string]json.RawMessage, model string) ([]byte, error) {
	m := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		m[k] = v
	}
	mb, _ := json.Marshal(model)
	m["model"] = mb
	return json.Marshal(m)
}

// The upstream body is byte for byte what json.Marshal made of the parsed
// fields, whatever their spacing, escapes and characters.
func TestRequestBodyMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	models := []string{"m1", "gpt-4o-mini", "a<b>&c", "a&b", "a>b", "é", "\u2028", "tab\there", `q"uote`, "\xff", ""}
	checked := 0
	for n := range 10000 {
		body := genBody(r)
		if n < len(parseSeeds) {
			body = []byte(parseSeeds[n])
		}
		top := decodeTop(body)
		if top == nil {
			continue
		}
		if n%7 == 0 {
			delete(top, "model")
			top["extra"] = nil // a field set to a nil value
		}
		model := models[n%len(models)]
		got, err := encodeBody(top, model)
		want, werr := refRequestBody(top, model)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q with model %q:\n got %s (%v)\nwant %s (%v)", body, model, got, err, want, werr)
		}
		checked++
	}
	for _, v := range []string{`{"a" : [1, 2]}`, "\"\u2028\"", "\"\u2029\"", `"…"`, `"\u2028"`, `"a\"b <"`, `"a&b"`, `"a>b"`,
		`[ ]`, "[\n1]", "[1,\t2]", "[1,\r2]", `{"k":"\\\" "}`, `["\"", 1]`} {
		top := map[string]json.RawMessage{"v": json.RawMessage(v)}
		got, _ := encodeBody(top, "m")
		want, _ := refRequestBody(top, "m")
		if !bytes.Equal(got, want) {
			t.Fatalf("value %q: got %s, want %s", v, got, want)
		}
	}
	if checked < 5000 {
		t.Fatalf("only %d bodies checked", checked)
	}
}

// refPassChat is passChat as a plain decode.
func refPassChat(b []byte) ([]byte, translate.Usage, error) {
	var probe struct {
		Choices json.RawMessage `json:"choices"`
		Usage   *usage          `json:"usage"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &probe) != nil {
		return nil, translate.Usage{}, errEmpty
	}
	if len(probe.Error) > 0 && string(probe.Error) != "null" {
		return nil, translate.Usage{}, &translate.UpstreamError{Message: "error object in a 200 response"}
	}
	if len(probe.Choices) == 0 || bytes.Equal(probe.Choices, []byte("[]")) {
		return nil, translate.Usage{}, errEmpty
	}
	return b, probe.Usage.counts(), nil
}

// passChat judges a non-stream body as decoding it does.
func TestPassChatMatchesDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for n := range 20000 {
		b := genChunk(r)
		if n%5 == 0 {
			b = bytes.Replace(b, []byte(`"choices":[]`), []byte(`"choices":[ ]`), 1)
		}
		got, gu, gerr := passChat(nil, "", b)
		want, wu, werr := refPassChat(b)
		if !bytes.Equal(got, want) || gu != wu || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("%s: %v %v, want %v %v", b, gu, gerr, wu, werr)
		}
	}
}

// refCheckDepth is CheckDepth as a byte-at-a-time state machine.
func refCheckDepth(b []byte, max int) *services.GatewayError {
	depth := 0
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if depth > max {
				return invalid("", fmt.Sprintf("The JSON body is nested deeper than %d levels.", max))
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// CheckDepth answers as the state machine does on any bytes.
func TestCheckDepthMatchesStateMachine(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	alphabet := []byte(`{}[]"\\ax `)
	for n := range 30000 {
		var b []byte
		switch n % 3 {
		case 0:
			b = genBody(r)
		case 1:
			b = genChunk(r)
		default:
			b = make([]byte, r.IntN(40))
			for i := range b {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
		}
		for _, max := range []int{1, 2, 3, 64} {
			if got, want := CheckDepth(b, max), refCheckDepth(b, max); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%q depth %d: %v, want %v", b, max, got, want)
			}
		}
	}
}

// BenchmarkPassChat is the check of a non-stream chat completion body
// before it is relayed.
func BenchmarkPassChat(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-bench0123456789","object":"chat.completion","created":1772359200,"model":"m1","system_fingerprint":"fp_bench",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?"},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":52,"completion_tokens":9,"total_tokens":61,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := passChat(nil, "", body); err != nil {
			b.Fatal(err)
		}
	}
}

// validJSON agrees with json.Valid on generated documents, their byte
// edits and random byte strings.
func TestValidJSONMatchesStandard(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	pieces := []string{`{`, `}`, `[`, `]`, `,`, `:`, `"`, `"a"`, `\`, `\"`, `\u00e9`, `\u12`, `\x`, `\/`, `\b`, ` `, "\t", "\n", "\r", "\x00", "\x1f",
		"\xff", "é", `0`, `-`, `-0`, `01`, `1.`, `.5`, `1.5`, `1e`, `1e+`, `1E-2`, `2e10`, `-1.5e3`, `+1`, `true`, `tru`, `false`, `null`, `nul`, `nulls`, `x`}
	check := func(b []byte) {
		t.Helper()
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", b, got, want)
		}
	}
	for n := range 40000 {
		var b []byte
		switch n % 4 {
		case 0:
			b = genBody(r)
		case 1:
			b = genChunk(r)
		case 2: // a valid document with a few random edits
			b = genChunk(r)
			for range 1 + r.IntN(3) {
				i := r.IntN(len(b) + 1)
				p := pieces[r.IntN(len(pieces))]
				if r.IntN(2) == 0 && i < len(b) {
					b = append(b[:i:i], b[i+1:]...) // delete a byte
				} else {
					b = append(b[:i:i], append([]byte(p), b[i:]...)...)
				}
			}
		default: // a random sequence of pieces
			var s strings.Builder
			for range r.IntN(12) {
				s.WriteString(pieces[r.IntN(len(pieces))])
			}
			b = []byte(s.String())
		}
		check(b)
	}
	for _, s := range []string{``, ` `, `""`, `"\u0041"`, `"\uD800"`, `[1,2 ,3]`, `{"a" : {"b":[]} }`, `[] `, ` []x`, `{"a":1}{`, `"abc`, `[`,
		`-`, `-01`, `0.0e0`, `1e0001`, "\"\x7f\"", `{"a"}`, `{"a":}`, `[,1]`, `[1,]`, `{"a":1,}`, `tRue`, `[true false]`} {
		check([]byte(s))
	}
	// The nesting bound.
	for _, depth := range []int{9999, 10000, 10001} {
		check([]byte(strings.Repeat("[", depth) + strings.Repeat("]", depth)))
		check([]byte(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)))
	}
}

// HasSystemEntries runs on every /v1/messages request: it finds the
// mid-conversation system entry, escaped spellings included, without
// allocating.
func TestHasSystemEntries(t *testing.T) {
	for body, want := range map[string]bool{
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]`:        false,
		`[{"role":"user","content":"hi"},{"role":"system","content":"x"}]`:           true,
		`[{"content":"hi","role":"\u0073ystem"}]`:                                    true,
		`[{"role":"user","content":[{"type":"text","text":"\"role\":\"system\""}]}]`: false,
	} {
		if got := HasSystemEntries([]byte(body)); got != want {
			t.Fatalf("%s: %v, want %v", body, got, want)
		}
	}
	plain := []byte(`[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"again"}]`)
	if n := testing.AllocsPerRun(100, func() { HasSystemEntries(plain) }); n != 0 {
		t.Fatalf("HasSystemEntries allocates %v times per call", n)
	}
}
