package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"switchyard/app"
	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

// Upstream models the fake answers differently (scripted per model for every key).
const (
	modelFast = "m1"   // healthy, no delay
	modelSlow = "slow" // healthy after a fixed delay (open loop)
	modelIdle = "idle" // one content event, then stalls until the client leaves
	modelSSE  = "sse"  // healthy stream, cfg.sseEventGap between content events
	modelFail = "mf"   // failure injection provider's model
)

// Upstream credentials of the gateway's connections (also the fake's script keys).
const (
	keyDirect = "fk-a" // what direct and baseline clients send
	keyFailA  = "fk-f1"
	keyFailB  = "fk-f2"
)

// topology is everything one run talks to, all on 127.0.0.1. With
// -topology procs (the default, 60-quality §5.2) the fake upstream, the bare
// proxy and the gateway (the real binary, built with go build) are child
// processes; with -topology inproc they run in this process (what
// -profile-dir needs).
type topology struct {
	procs       bool
	fu          *fakeupstream.Server // inproc only
	directURL   string               // the fake upstream, "http://127.0.0.1:port"
	baselineURL string               // the bare reverse proxy
	gatewayURL  string               // Switchyard
	clientKey   string               // inference key for the gateway
	adminKey    string               // manage key (settings, state, /metrics)
	srv         *app.Server          // inproc only
	dataDir     string
	workDir     string // procs: binary, child logs

	baseline          *http.Server    // inproc only
	baselineTransport *http.Transport // inproc only
	gateway           *http.Server    // inproc only
	closers           []func()

	// shared mode (-database-url, procs only): a second gateway binary on
	// PostgreSQL, seeded like the embedded one, served as "gateway-shared"
	sharedDSN                       string // the run's schema
	sharedRedis                     string // -redis-url: the shared-mode gateway's Redis ("" = none)
	gwShared                        *child
	sharedURL                       string
	sharedClientKey, sharedAdminKey string

	// procs
	fake, bare, gw *child
	gatewayBin     string
	pinned         bool   // proxies currently on CPU 0 with GOMAXPROCS=1
	gwPprof        string // -profile-dir: the gateway's SWITCHYARD_PPROF_ADDR
	barePprof      string // -profile-dir: the bare proxy's -pprof-addr
	profiling      bool
}

// loopbackListen refuses anything but a loopback address.
func loopbackListen() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("listener %s is not loopback", ln.Addr())
	}
	return ln, nil
}

func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// startTopology starts the fake upstream, the bare proxy and the gateway with
// every feature of 60-quality §5.2 "all features on".
func startTopology(ctx context.Context, cfg *config) (*topology, error) {
	if cfg.topology == "procs" {
		return startProcs(ctx, cfg)
	}
	t := &topology{}
	fu := newFake(cfg.sseEvents, cfg.sseEventGap, cfg.upstreamLatency)
	if err := fu.Listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	t.fu = fu
	t.closers = append(t.closers, fu.Close)
	t.directURL = fu.URL()
	if err := t.startBaseline(); err != nil {
		t.close()
		return nil, err
	}
	dir, err := os.MkdirTemp("", "switchyard-bench-*")
	if err != nil {
		t.close()
		return nil, err
	}
	t.dataDir = dir
	t.closers = append(t.closers, func() { os.RemoveAll(dir) })
	if err := t.startGateway(ctx, cfg); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// startBaseline runs the bare proxy in this process.
func (t *topology) startBaseline() error {
	h, tr, err := newBareProxy(t.directURL)
	if err != nil {
		return err
	}
	t.baselineTransport = tr
	ln, err := loopbackListen()
	if err != nil {
		return err
	}
	t.baseline = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: quietLog()}
	go t.baseline.Serve(ln)
	t.baselineURL = "http://" + ln.Addr().String()
	t.closers = append(t.closers, func() { t.baseline.Close() })
	return nil
}

// gatewayEnv is the environment the gateway runs with (in process or as
// the built binary): its data dir and the fake upstream allowed although
// it is on loopback.
func (t *topology) gatewayEnv() map[string]string {
	return map[string]string{"SWITCHYARD_DATA_DIR": t.dataDir, "SWITCHYARD_PRIVATE_UPSTREAMS": strings.TrimPrefix(t.directURL, "http://")}
}

// benchSecretKey seals the shared-mode gateway's credentials (shared mode
// needs SWITCHYARD_SECRET_KEY: every replica must use the same key).
const benchSecretKey = "bench-shared-mode-secret-key-0123456789"

// sharedEnv is the shared-mode gateway's environment: the embedded one's
// plus the database URL, the secret key and, with -redis-url, the Redis
// that makes its limits fleet-wide. Its data dir holds nothing the
// store needs.
func (t *topology) sharedEnv() map[string]string {
	env := t.gatewayEnv()
	env["SWITCHYARD_DATA_DIR"] = filepath.Join(t.workDir, "data-shared")
	env["SWITCHYARD_DATABASE_URL"] = t.sharedDSN
	env["SWITCHYARD_SECRET_KEY"] = benchSecretKey
	if t.sharedRedis != "" {
		env["SWITCHYARD_REDIS_URL"] = t.sharedRedis
	}
	return env
}

// startGateway builds Switchyard with app.Build in t.dataDir, serves it
// like app.Run does, and configures connections, combos, keys and the
// resilience switches through the services and the management API.
func (t *topology) startGateway(ctx context.Context, cfg *config) error {
	return t.startGatewayEnv(ctx, cfg, t.gatewayEnv())
}

func (t *topology) startGatewayEnv(ctx context.Context, cfg *config, env map[string]string) error {
	acfg, err := app.LoadConfig([]string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] })
	if err != nil {
		return err
	}
	srv, err := app.Build(ctx, acfg, app.Options{})
	if err != nil {
		return err
	}
	t.srv = srv
	ln, err := loopbackListen()
	if err != nil {
		srv.Close()
		return err
	}
	srv.SetListenAddr(ln.Addr().String(), true)
	// The same server settings as app.Run.
	t.gateway = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: 64 << 10, ErrorLog: quietLog()}
	go t.gateway.Serve(ln)
	t.gatewayURL = "http://" + ln.Addr().String()
	t.closers = append(t.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.gateway.Shutdown(sctx)
		cancel()
		t.gateway.Close()
		srv.Close()
	})
	return t.seed(ctx, cfg)
}

// startProcs runs every role as a child process: the fake upstream and the
// bare proxy are this binary's hidden subcommands, the gateway is the real
// binary built with go build on a data dir seeded in process first (and
// closed before the binary opens it).
func startProcs(ctx context.Context, cfg *config) (_ *topology, err error) {
	t := &topology{procs: true, profiling: cfg.profileDir != ""}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	if t.workDir, err = os.MkdirTemp("", "switchyard-bench-*"); err != nil {
		return nil, err
	}
	work := t.workDir
	t.closers = append(t.closers, func() { os.RemoveAll(work) })
	t.dataDir = filepath.Join(work, "data")
	if err := os.Mkdir(t.dataDir, 0o700); err != nil {
		return nil, err
	}
	t.gatewayBin = filepath.Join(work, "switchyard")
	fmt.Fprintf(os.Stderr, "bench: go build -o %s .\n", t.gatewayBin)
	build := exec.CommandContext(ctx, "go", "build", "-o", t.gatewayBin, ".")
	build.Dir = cfg.moduleDir
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v: %s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// One P: pinned, it shares CPU 1 with the load generator; unpinned, its
	// load is light (at most ~15 % of a core at 3,000 req/s).
	t.fake, err = spawn(ctx, work, "fakeupstream", []string{"GOMAXPROCS=1"}, readyPrefix, self, "fakeupstream",
		"-events", strconv.Itoa(cfg.sseEvents), "-event-gap", cfg.sseEventGap.String(), "-upstream-latency", cfg.upstreamLatency.String())
	if err != nil {
		return nil, err
	}
	t.closers = append(t.closers, func() { t.fake.stop(5 * time.Second) })
	t.directURL = t.fake.url
	// Seed the data dir in process, then hand it to the binary.
	seedCfg := *cfg
	if err := t.startGateway(ctx, &seedCfg); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	n := len(t.closers)
	t.closers[n-1]() // stop the in-process gateway: the binary takes the data dir
	t.closers = t.closers[:n-1]
	t.srv, t.gateway = nil, nil
	if cfg.databaseURL != "" {
		if err := t.seedShared(ctx, cfg); err != nil {
			return nil, fmt.Errorf("seed the shared-mode database: %w", err)
		}
	}
	t.closers = append(t.closers, func() {
		t.gw.stop(20 * time.Second)
		if t.gwShared != nil {
			t.gwShared.stop(20 * time.Second)
		}
		t.bare.stop(5 * time.Second)
	})
	if err := t.startProxies(ctx, false); err != nil {
		return nil, err
	}
	return t, nil
}

// startProxies (re)starts the bare proxy and the gateway binary. Pinned:
// both on CPU 0 with GOMAXPROCS=1, the fake upstream and this process (the
// load generator) on CPU 1 (60-quality §5.2); otherwise everything may run
// anywhere with the default GOMAXPROCS.
func (t *topology) startProxies(ctx context.Context, pinned bool) error {
	if t.gw != nil {
		if err := t.gw.stop(20 * time.Second); err != nil {
			return err
		}
	}
	if t.bare != nil {
		t.bare.stop(5 * time.Second)
	}
	var env []string
	if pinned {
		env = append(env, "GOMAXPROCS=1")
	}
	var err error
	bareArgs := []string{mustExecutable(), "bareproxy", "-target", t.directURL}
	genv := env
	for k, v := range t.gatewayEnv() {
		genv = append(genv, k+"="+v)
	}
	if t.profiling {
		if t.gwPprof, err = freeLoopbackAddr(); err != nil {
			return err
		}
		if t.barePprof, err = freeLoopbackAddr(); err != nil {
			return err
		}
		genv = append(genv, "SWITCHYARD_PPROF_ADDR="+t.gwPprof)
		bareArgs = append(bareArgs, "-pprof-addr", t.barePprof)
	}
	if t.bare, err = spawn(ctx, t.workDir, "bareproxy", env, readyPrefix, bareArgs...); err != nil {
		return err
	}
	if t.sharedDSN != "" {
		if t.gwShared != nil {
			if err := t.gwShared.stop(20 * time.Second); err != nil {
				return err
			}
		}
		senv := env
		for k, v := range t.sharedEnv() {
			senv = append(senv, k+"="+v)
		}
		if t.gwShared, err = spawn(ctx, t.workDir, "gateway-shared", senv, readyPrefix, t.gatewayBin, "--addr", "127.0.0.1:0"); err != nil {
			return err
		}
		t.sharedURL = t.gwShared.url
	}
	if t.gw, err = spawn(ctx, t.workDir, "gateway", genv, readyPrefix, t.gatewayBin, "--addr", "127.0.0.1:0"); err != nil {
		return err
	}
	t.baselineURL, t.gatewayURL = t.bare.url, t.gw.url
	t.pinned = pinned
	proxies, rest := allCPUs(), allCPUs()
	if pinned {
		proxies, rest = maskOf(0), maskOf(1)
	}
	pids := []int{t.bare.pid(), t.gw.pid()}
	if t.gwShared != nil {
		pids = append(pids, t.gwShared.pid())
	}
	for _, pid := range pids {
		if err := setAffinity(pid, proxies); err != nil {
			return fmt.Errorf("pin proxies: %w", err)
		}
	}
	for _, pid := range []int{t.fake.pid(), 0} {
		if err := setAffinity(pid, rest); err != nil {
			return fmt.Errorf("pin upstream and load generator: %w", err)
		}
	}
	// The load generator on one CPU runs best with one P.
	if pinned {
		runtime.GOMAXPROCS(1)
	} else {
		runtime.GOMAXPROCS(runtime.NumCPU())
	}
	return nil
}

// place puts the processes where a scenario wants them: pinned for (b) and
// (d) streaming cost, unpinned for the others. In process, or without
// pinning (-pin off, one CPU), it does nothing.
func (t *topology) place(ctx context.Context, cfg *config, pinned bool) error {
	if !t.procs || !canPin(cfg) {
		pinned = false
	}
	if !t.procs || t.pinned == pinned {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: restarting the proxies (pinned: %v)\n", pinned)
	return t.startProxies(ctx, pinned)
}

func mustExecutable() string {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return self
}

// pidOf is the process that serves a path (0: this process, in process).
func (t *topology) pidOf(path string) int {
	if !t.procs {
		return 0
	}
	switch path {
	case "baseline":
		return t.bare.pid()
	case "gateway", "gateway-min":
		return t.gw.pid()
	case "gateway-shared":
		return t.gwShared.pid()
	}
	return t.fake.pid()
}

// proxyLabel says which process a path's CPU and RSS figures are of.
func (t *topology) proxyLabel(path string) string {
	if !t.procs {
		return "whole process"
	}
	switch path {
	case "baseline":
		return "bare-proxy process"
	case "gateway", "gateway-min":
		return "gateway process"
	case "gateway-shared":
		return "shared-mode gateway process"
	}
	return "fake-upstream process"
}

// seed creates the configuration of "all features on":
//   - provider "fake" (custom, openai wire format, API-key profile) with 3
//     connections and provider "fakeb" with 1, each with max_concurrent
//     1,000, the product maximum (a slot is taken on every request) and rate-limit protection on
//     with non-binding limits (every dispatch passes the request queue);
//   - combos "bench", "bench-slow", "bench-idle" and "bench-sse": 2-target priority combos
//     (fake/<model>, fakeb/<model>);
//   - provider "fakemin" with one plain connection (the "minimal" path:
//     direct provider/model, no slot, no queue);
//   - provider "fakef" with two connections for failure injection;
//   - window gate (providerCooldown) and model lockout switched on through
//     PATCH /api/resilience (breaker, cooldowns, affinity, request log and
//     metrics are on by default).
func (t *topology) seed(ctx context.Context, cfg *config) error {
	base := t.directURL + "/v1"
	guarded := func(provider, name, key string, prio int, custom bool) services.ConnectionInput {
		in := services.ConnectionInput{Provider: services.Some(provider), Name: services.Some(name), APIKey: services.Some(key),
			BaseURL: services.Some(base), Priority: services.Some(prio),
			MaxConcurrent:       services.Some(1000), // the product caps max_concurrent at 1,000 (spec §5.2 says 10,000)
			RateLimitProtection: services.Some(true),
			RateLimitOverrides: services.Some(services.RateLimitOverrides{RequestsPerMinute: ptr(1000000), MinTimeBetweenRequestsMs: ptr(0),
				ConcurrentRequests: ptr(10000), MaxWaitMs: ptr(30000)}),
		}
		if custom {
			in.Custom = services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})
		}
		return in
	}
	plain := func(provider, name, key string, prio int, custom bool) services.ConnectionInput {
		in := services.ConnectionInput{Provider: services.Some(provider), Name: services.Some(name), APIKey: services.Some(key),
			BaseURL: services.Some(base), Priority: services.Some(prio)}
		if custom {
			in.Custom = services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})
		}
		return in
	}
	inputs := []services.ConnectionInput{
		guarded("fake", "fake-1", keyDirect, 0, true),
		guarded("fake", "fake-2", "fk-b", 1, false),
		guarded("fake", "fake-3", "fk-c", 2, false),
		guarded("fakeb", "fakeb-1", "fk-d", 0, true),
		plain("fakemin", "fakemin-1", "fk-min", 0, true),
		plain("fakef", "fakef-1", keyFailA, 0, true),
		plain("fakef", "fakef-2", keyFailB, 1, false),
	}
	for _, in := range inputs {
		if _, err := t.srv.Connections().Create(ctx, in); err != nil {
			return fmt.Errorf("create connection %s: %w%s", in.Name.V, err, fields(err))
		}
	}
	for _, c := range []struct{ name, model string }{{"bench", modelFast}, {"bench-slow", modelSlow}, {"bench-idle", modelIdle}, {"bench-sse", modelSSE}} {
		if _, _, err := t.srv.Combos().Create(ctx, services.ComboInput{Name: c.name, Strategy: "priority",
			Targets: []services.Target{{Provider: "fake", Model: c.model}, {Provider: "fakeb", Model: c.model}}}); err != nil {
			return fmt.Errorf("create combo %s: %w", c.name, err)
		}
	}
	// The client key carries non-binding limits, so every request passes
	// the per-key rate and concurrency limiter (on Redis in shared mode
	// with -redis-url).
	_, secret, err := t.srv.Keys().Create(ctx, services.KeyInput{Name: services.Some("bench-client"), Scopes: services.Some([]string{services.ScopeInference}),
		RequestsPerMinute: services.Some(1_000_000), MaxConcurrentRequests: services.Some(1_000_000)})
	if err != nil {
		return err
	}
	t.clientKey = secret
	_, admin, err := t.srv.Keys().Create(ctx, services.KeyInput{Name: services.Some("bench-admin"), Scopes: services.Some([]string{services.ScopeManage})})
	if err != nil {
		return err
	}
	t.adminKey = admin
	patch := `{"modelLockout":{"enabled":true},"providerCooldown":{"enabled":true}}`
	if cfg.features == "minimal" {
		patch = `{"modelLockout":{"enabled":false},"providerCooldown":{"enabled":false}}`
	}
	_, err = call(ctx, http.MethodPatch, t.gatewayURL+"/api/resilience", admin, []byte(patch), http.StatusOK)
	return err
}

func ptr[T any](v T) *T { return &v }

// fields lists the fields of a validation error.
func fields(err error) string {
	var ve *services.ValidationError
	if errors.As(err, &ve) {
		return fmt.Sprintf(" %v", ve.Fields)
	}
	return ""
}

func (t *topology) close() {
	if t.procs {
		setAffinity(0, allCPUs()) // the load generator may have been pinned
	}
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
	t.closers = nil
}

// path is one way to reach the fake upstream.
type path struct {
	name  string // direct, baseline, gateway, gateway-min
	url   string // full chat completions URL
	auth  string // Authorization header value
	model func(kind string) string
}

func (t *topology) paths() map[string]*path {
	upstreamModel := func(kind string) string { return kind }
	comboModel := func(kind string) string {
		switch kind {
		case modelSlow:
			return "bench-slow"
		case modelIdle:
			return "bench-idle"
		case modelSSE:
			return "bench-sse"
		}
		return "bench"
	}
	ps := map[string]*path{
		"direct":      {name: "direct", url: t.directURL + "/v1/chat/completions", auth: "Bearer " + keyDirect, model: upstreamModel},
		"baseline":    {name: "baseline", url: t.baselineURL + "/v1/chat/completions", auth: "Bearer " + keyDirect, model: upstreamModel},
		"gateway":     {name: "gateway", url: t.gatewayURL + "/v1/chat/completions", auth: "Bearer " + t.clientKey, model: comboModel},
		"gateway-min": {name: "gateway-min", url: t.gatewayURL + "/v1/chat/completions", auth: "Bearer " + t.clientKey, model: func(kind string) string { return "fakemin/" + kind }},
	}
	if t.gwShared != nil {
		ps["gateway-shared"] = &path{name: "gateway-shared", url: t.sharedURL + "/v1/chat/completions", auth: "Bearer " + t.sharedClientKey, model: comboModel}
	}
	return ps
}

// checkPaths sends one JSON and one stream request on every path and
// checks the answers, so a broken setup fails before any measurement.
func (t *topology) checkPaths(ctx context.Context, cfg *config) error {
	cl := newClient(4)
	names := []string{"direct", "baseline", "gateway", "gateway-min"}
	if t.gwShared != nil {
		names = append(names, "gateway-shared")
	}
	for _, name := range names {
		p := t.paths()[name]
		if _, err := doJSON(ctx, cl, p, chatBody(p.model(modelFast), false, "check"), "check"); err != nil {
			return fmt.Errorf("%s JSON: %w", name, err)
		}
		r := streamOnce(ctx, cl, p, chatBody(p.model(modelFast), true, "check"), "check", 0)
		if r.err != nil {
			return fmt.Errorf("%s stream: %w", name, r.err)
		}
		if r.events != cfg.sseEvents {
			return fmt.Errorf("%s stream: %d content events, want %d", name, r.events, cfg.sseEvents)
		}
	}
	p := &path{name: "faults", url: t.gatewayURL + "/v1/chat/completions", auth: "Bearer " + t.clientKey}
	if _, err := doJSON(ctx, cl, p, chatBody("fakef/"+modelFail, false, "check"), "check"); err != nil {
		return fmt.Errorf("faults route: %w", err)
	}
	cl.CloseIdleConnections()
	return nil
}

var errStatus = errors.New("unexpected status")
