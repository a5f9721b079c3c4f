package fakeupstream

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a running (or ready to run) fake upstream. All methods are safe for concurrent use.
// It is also an http.Handler, but faults that act on the connection (resets, FIN/RST cuts) need
// the real HTTP/1 server that Listen starts.
type Server struct {
	// Settings fixed by options at New.
	content  string
	events   int
	eventGap time.Duration
	latency  time.Duration
	seed     uint64
	hitLog   HitLog
	now      func() time.Time
	errorLog *log.Logger

	// mu guards the fields below it up to inflight, and every hitRec's hit.
	mu        sync.Mutex
	scripts   map[scriptKey]*scriptState
	def       *scriptState
	labels    map[string]string
	models    []string
	keyModels map[string][]string
	nonces    map[string]int
	seq       int64
	hits      []*hitRec
	bySeq     map[int64]*hitRec
	changed   chan struct{}
	closed    bool
	inflight  sync.WaitGroup

	srv       *http.Server
	ln        net.Listener
	closing   chan struct{}
	closeOnce sync.Once
	serveErr  chan error
}

type scriptKey struct{ key, model string }

// scriptState is a script plus its cursor. Cursors are shared by every request matching the
// entry, so "every 3rd request" means every 3rd request for that (key, model), whoever sends it.
type scriptState struct {
	script   Script
	idx      int    // next step
	used     int    // times the next step has answered
	arrivals uint64 // nonce-less random draws, for arrival-order replay
}

// Option configures a Server at New.
type Option func(*Server)

// WithContent sets the default assistant text (default DefaultContent).
func WithContent(text string) Option { return func(s *Server) { s.content = text } }

// WithEvents sets the default number of content events per answer (default DefaultEvents).
func WithEvents(n int) Option { return func(s *Server) { s.events = n } }

// WithEventGap sets the default pause between content events (default 0).
func WithEventGap(d time.Duration) Option { return func(s *Server) { s.eventGap = d } }

// WithLatency sets the default delay before headers for steps with no Delay (default 0).
func WithLatency(d time.Duration) Option { return func(s *Server) { s.latency = d } }

// WithSeed seeds the draws of uniform delays in steps without a Random schedule (default 1).
// Random schedules carry their own seed.
func WithSeed(seed uint64) Option { return func(s *Server) { s.seed = seed } }

// WithHitLog sets the hit log mode (default HitLogFull).
func WithHitLog(mode HitLog) Option { return func(s *Server) { s.hitLog = mode } }

// WithClock sets the clock of hit-log timestamps, `created` fields and header presets
// (Retry-After dates, rate-limit resets), so they line up with a gateway on a fake clock. Waits
// (delays, gaps, stalls) always use real time: they happen on real sockets.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithModels sets the default model list of GET /v1/models.
func WithModels(models ...string) Option {
	return func(s *Server) { s.models = slices.Clone(models) }
}

// WithErrorLog receives net/http's own server errors (default, and with nil: discarded, since a
// fake that resets connections on purpose makes net/http complain on purpose).
func WithErrorLog(l *log.Logger) Option {
	return func(s *Server) {
		if l == nil {
			l = log.New(io.Discard, "", 0)
		}
		s.errorLog = l
	}
}

// WithScript applies a script file at New; it panics if the file is invalid, since options are
// code written by the test.
func WithScript(sf ScriptFile) Option {
	return func(s *Server) {
		if err := s.Apply(sf); err != nil {
			panic(err)
		}
	}
}

// DefaultModels is the model list of GET /v1/models unless WithModels or a script file sets one.
var DefaultModels = []string{"gpt-4o-mini", "claude-3-5-haiku-20241022", "text-embedding-3-small"}

// New builds a Server that is not yet listening; call Listen.
func New(opts ...Option) *Server {
	s := &Server{
		content:   DefaultContent,
		events:    DefaultEvents,
		seed:      1,
		now:       time.Now,
		errorLog:  log.New(io.Discard, "", 0),
		scripts:   map[scriptKey]*scriptState{},
		def:       &scriptState{},
		labels:    map[string]string{},
		models:    slices.Clone(DefaultModels),
		keyModels: map[string][]string{},
		nonces:    map[string]int{},
		bySeq:     map[int64]*hitRec{},
		changed:   make(chan struct{}),
		closing:   make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// TB is the part of testing.TB that Start uses. *testing.T and *testing.B satisfy it; the package
// declares it instead of importing testing so the gateway binary can link the fake for --demo.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
	Name() string
}

// Start listens on 127.0.0.1:0 and registers Close with t.Cleanup. When the test fails, the
// cleanup first writes the hit log as JSON lines into $SWITCHYARD_ARTIFACTS (or a new temp dir)
// and logs the path. With a nil t, a listen error panics and the caller must Close.
func Start(t TB, opts ...Option) *Server {
	if t != nil {
		t.Helper()
	}
	s := New(opts...)
	if err := s.Listen("127.0.0.1:0"); err != nil {
		if t == nil {
			panic(err)
		}
		t.Fatalf("fakeupstream: %v", err)
	}
	if t != nil {
		t.Cleanup(func() {
			s.Close()
			if t.Failed() {
				s.dumpArtifacts(t)
			}
		})
	}
	return s
}

func (s *Server) dumpArtifacts(t TB) {
	dir := os.Getenv("SWITCHYARD_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "switchyard-artifacts-*"); err != nil {
			t.Logf("fakeupstream: no artifact dir: %v", err)
			return
		}
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	path := filepath.Join(dir, name+"-fakeupstream-hits.jsonl")
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(s.WriteHitLog(f), f.Close())
	}
	if err != nil {
		t.Logf("fakeupstream: writing hit log artifact: %v", err)
		return
	}
	t.Logf("fakeupstream: hit log written to %s", path)
}

// Listen binds addr, which must be a loopback address ("127.0.0.1:0", "[::1]:0", "localhost:0"):
// the fake refuses to be reachable from outside the machine. It serves in the background until
// Close.
func (s *Server) Listen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("fakeupstream: listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("fakeupstream: listen %q: refusing a non-loopback address", addr)
	}
	s.mu.Lock()
	if s.srv != nil || s.closed {
		s.mu.Unlock()
		return errors.New("fakeupstream: Listen called twice or after Close")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("fakeupstream: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		s.mu.Unlock()
		return fmt.Errorf("fakeupstream: listen %q bound %s, not loopback", addr, ln.Addr())
	}
	// No WriteTimeout: it would kill long streams, which are the point. ReadHeaderTimeout and
	// IdleTimeout keep forgotten connections from piling up.
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          s.errorLog,
	}
	s.ln = ln
	s.serveErr = make(chan error, 1)
	srv := s.srv
	s.mu.Unlock()
	go func() { s.serveErr <- srv.Serve(ln) }()
	return nil
}

// Addr is the bound host:port ("" before Listen).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// URL is "http://host:port"; the OpenAI base URL is URL()+"/v1", the Anthropic one URL().
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops the server, ends every running handler (stalls and delays return at once) and
// waits for them, so no goroutine of the fake outlives it. Safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.mu.Lock()
		s.closed = true
		srv := s.srv
		s.mu.Unlock()
		if srv != nil {
			srv.Close()
			<-s.serveErr
		}
		s.inflight.Wait()
	})
}

// enter registers a running handler unless the server is closed. The flag and the WaitGroup move
// together under mu so that Close's Wait never races an Add.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// Label names a credential in the hit log (KeyLabel) and lets scripts, HitsFor and SetModels
// refer to it by that name. Use it when the key itself must not appear in artifacts.
func (s *Server) Label(credential, label string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.labels[credential] = label
}

func (s *Server) labelLocked(credential string) string {
	if credential == "" {
		return ""
	}
	if l, ok := s.labels[credential]; ok {
		return l
	}
	sum := sha256.Sum256([]byte(credential))
	return "key-" + hex.EncodeToString(sum[:4])
}

// Script scripts every model for key (a credential, a label, or "*" for any key). With one step
// and the default Then (repeat_last) the key answers that way every time. Steps run in order, each
// for its Times. Invalid steps panic: they are a bug in the test.
func (s *Server) Script(key string, steps ...Step) {
	s.SetScript(key, "*", Script{Steps: steps})
}

// ScriptModel scripts one model for key; it wins over Script(key, …) for that model, and
// ScriptModel("*", model, …) applies to keys that have no script of their own.
func (s *Server) ScriptModel(key, model string, steps ...Step) {
	s.SetScript(key, model, Script{Steps: steps})
}

// SetScript registers sc for (key, model), replacing any previous script there and starting it
// from its first step. Lookup order for a request: (key, model), (key, "*"), ("*", model), the
// default script; key matches the received credential or its label. It panics on an invalid
// script; use Apply for scripts read from files.
func (s *Server) SetScript(key, model string, sc Script) {
	if err := sc.Validate(); err != nil {
		panic(fmt.Sprintf("fakeupstream: script %s/%s: %v", key, model, err))
	}
	if model == "" {
		model = "*"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[scriptKey{key, model}] = &scriptState{script: cloneScript(sc)}
}

// SetDefault sets the script of requests no entry matches (initially: always healthy).
func (s *Server) SetDefault(sc Script) {
	if err := sc.Validate(); err != nil {
		panic(fmt.Sprintf("fakeupstream: default script: %v", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = &scriptState{script: cloneScript(sc)}
}

// SetModels sets the GET /v1/models list for key (a credential or a label).
func (s *Server) SetModels(key string, models ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keyModels[key] = slices.Clone(models)
}

// ClearScripts removes every script and restores the healthy default.
func (s *Server) ClearScripts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts = map[scriptKey]*scriptState{}
	s.def = &scriptState{}
}

// Apply merges a script file into the server: labels and model lists are added, the default and
// each entry replace what was registered for the same key and model.
func (s *Server) Apply(sf ScriptFile) error {
	if err := sf.Validate(); err != nil {
		return fmt.Errorf("fakeupstream: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for cred, label := range sf.Labels {
		s.labels[cred] = label
	}
	if len(sf.Models) > 0 {
		s.models = slices.Clone(sf.Models)
	}
	for key, models := range sf.KeyModels {
		s.keyModels[key] = slices.Clone(models)
	}
	if sf.Default != nil {
		s.def = &scriptState{script: cloneScript(*sf.Default)}
	}
	for _, e := range sf.Scripts {
		model := e.Model
		if model == "" {
			model = "*"
		}
		s.scripts[scriptKey{e.Key, model}] = &scriptState{script: cloneScript(e.Script)}
	}
	return nil
}

// Reset empties the hit log, forgets nonce attempt counts and rewinds every script to its first
// step, so the next phase of a test starts from a known state. Scripts stay registered; hit
// sequence numbers keep increasing so an old Seq never names a new hit.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hits = nil
	s.bySeq = map[int64]*hitRec{}
	s.nonces = map[string]int{}
	for _, st := range s.scripts {
		st.idx, st.used, st.arrivals = 0, 0, 0
	}
	s.def.idx, s.def.used, s.def.arrivals = 0, 0, 0
	s.broadcastLocked()
}

func cloneScript(sc Script) Script {
	sc.Steps = slices.Clone(sc.Steps)
	if sc.Random != nil {
		r := *sc.Random
		sc.Random = &r
	}
	return sc
}

// modelsLocked is the /v1/models list for a credential: its own list if set (by credential, then
// label), else the default list plus every model scripted for it or for any key.
func (s *Server) modelsLocked(cred, label string) []string {
	for _, k := range []string{cred, label} {
		if m, ok := s.keyModels[k]; ok && k != "" {
			return slices.Clone(m)
		}
	}
	out := slices.Clone(s.models)
	for k := range s.scripts {
		if k.model != "*" && (k.key == cred || k.key == label || k.key == "*") && !slices.Contains(out, k.model) {
			out = append(out, k.model)
		}
	}
	slices.Sort(out[len(s.models):])
	return out
}

// decision is what answers one request.
type decision struct {
	step   Step
	action string
	rng    *rand.Rand // for uniform delays; from the schedule's seed when one drew
}

// resolveLocked picks the step for a request and advances the matching script.
func (s *Server) resolveLocked(cred, label, model, format, nonce string, attempt int, seq int64, events int) decision {
	var keys []string
	for _, k := range []string{cred, label} {
		if k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var candidates []scriptKey
	if model != "" {
		for _, k := range keys {
			candidates = append(candidates, scriptKey{k, model})
		}
	}
	for _, k := range keys {
		candidates = append(candidates, scriptKey{k, "*"})
	}
	if model != "" {
		candidates = append(candidates, scriptKey{"*", model})
	}
	candidates = append(candidates, scriptKey{"*", "*"})
	st := s.def
	for _, c := range candidates {
		if sc, ok := s.scripts[c]; ok {
			st = sc
			break
		}
	}
	d, toDefault := s.drawLocked(st, format, nonce, attempt, seq, events)
	if toDefault && st != s.def {
		d, toDefault = s.drawLocked(s.def, format, nonce, attempt, seq, events)
	}
	if toDefault { // the default script itself ran out with then=default: healthy
		d = decision{action: "ok", rng: s.requestRNG(s.seed, nonce, attempt, seq)}
	}
	return d
}

// drawLocked answers from one script: a Random draw first, then the step cursor.
func (s *Server) drawLocked(st *scriptState, format, nonce string, attempt int, seq int64, events int) (decision, bool) {
	sc := st.script
	rng := s.requestRNG(s.seed, nonce, attempt, seq)
	if rd := sc.Random; rd != nil {
		var drng *rand.Rand
		if nonce != "" {
			drng = s.requestRNG(rd.Seed, nonce, attempt, 0)
		} else {
			// Arrival order within this script: reproducible for a serial client only.
			st.arrivals++
			drng = rand.New(rand.NewPCG(rd.Seed^0x6a09e667f3bcc909, st.arrivals))
		}
		if drng.Float64() < rd.Rate {
			name := pickWeighted(drng, rd.Mix)
			step := namedFault(rd, name, drng, events, format)
			return decision{step: step, action: "random:" + name, rng: drng}, false
		}
		rng = drng
	}
	if len(sc.Steps) == 0 {
		return decision{action: "ok", rng: rng}, false
	}
	if st.idx >= len(sc.Steps) {
		switch sc.Then {
		case ThenCycle:
			st.idx, st.used = 0, 0
		case ThenDefault:
			return decision{}, true
		default: // repeat_last
			step := sc.Steps[len(sc.Steps)-1]
			return decision{step: step, action: actionOf(step), rng: rng}, false
		}
	}
	step := sc.Steps[st.idx]
	st.used++
	if st.used >= max(1, step.Times) {
		st.idx, st.used = st.idx+1, 0
	}
	return decision{step: step, action: actionOf(step), rng: rng}, false
}

// requestRNG derives a generator from (seed, nonce, attempt) — or (seed, arrival seq) without a
// nonce — so that a request's random choices do not depend on what other requests drew.
func (s *Server) requestRNG(seed uint64, nonce string, attempt int, seq int64) *rand.Rand {
	if nonce == "" {
		return rand.New(rand.NewPCG(seed, uint64(seq)))
	}
	h := fnv.New64a()
	h.Write([]byte(nonce))
	return rand.New(rand.NewPCG(seed, h.Sum64()^(uint64(attempt)*0x9e3779b97f4a7c15)))
}

// pickWeighted draws a name from mix (DefaultMix when empty). Names are sorted first because map
// order is random and the draw must replay.
func pickWeighted(rng *rand.Rand, mix map[string]float64) string {
	if len(mix) == 0 {
		mix = DefaultMix()
	}
	names := make([]string, 0, len(mix))
	var total float64
	for name, w := range mix {
		if w > 0 {
			names = append(names, name)
			total += w
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "server_503"
	}
	x := rng.Float64() * total
	for _, name := range names {
		if x < mix[name] {
			return name
		}
		x -= mix[name]
	}
	return names[len(names)-1]
}

// actionOf names a step for the hit log.
func actionOf(st Step) string {
	switch {
	case st.Name != "":
		return st.Name
	case st.Fault != FaultNone:
		if st.Fault == FaultReset || st.Fault == FaultEmpty200 || st.Fault == FaultHTML502 {
			return string(st.Fault)
		}
		return string(st.Fault) + "@" + strconv.Itoa(st.At)
	case st.Preset != "":
		return st.Preset
	case st.Status >= 400 || st.ErrorCode != "":
		if st.ErrorCode != "" {
			return fmt.Sprintf("status_%d:%s", max(st.Status, 400), st.ErrorCode)
		}
		return "status_" + strconv.Itoa(st.Status)
	}
	return "ok"
}
