package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"

	"switchyard/app"
	"switchyard/internal/testkit/fakeupstream"
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

// topology is everything one run talks to, all on 127.0.0.1 in this process.
type topology struct {
	fu          *fakeupstream.Server
	directURL   string // the fake upstream, "http://127.0.0.1:port"
	baselineURL string // the bare reverse proxy
	gatewayURL  string // Switchyard
	clientKey   string // inference key for the gateway
	srv         *app.Server
	dataDir     string

	baseline          *http.Server
	baselineTransport *http.Transport
	gateway           *http.Server
	closers           []func()
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
	t := &topology{}
	fu := fakeupstream.New(fakeupstream.WithHitLog(fakeupstream.HitLogOff), fakeupstream.WithEvents(cfg.sseEvents))
	if err := fu.Listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	t.fu = fu
	t.closers = append(t.closers, fu.Close)
	t.directURL = fu.URL()
	fu.ScriptModel("*", modelSlow, fakeupstream.Step{Delay: cfg.upstreamLatency})
	fu.ScriptModel("*", modelSSE, fakeupstream.Step{EventGap: cfg.sseEventGap})
	fu.ScriptModel("*", modelIdle, fakeupstream.Step{Fault: fakeupstream.FaultStall, At: 1, StallFor: 10 * time.Minute})

	if err := t.startBaseline(); err != nil {
		t.close()
		return nil, err
	}
	if err := t.startGateway(ctx, cfg); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// bufferPool is the sync.Pool BufferPool of 32 KiB buffers of the baseline.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v := b.p.Get(); v != nil {
		return *(v.(*[]byte))
	}
	return make([]byte, 32<<10)
}
func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// startBaseline runs the bare proxy: httputil.ReverseProxy with a pooled
// buffer, FlushInterval -1 and a keep-alive transport (MaxIdleConnsPerHost 4096).
func (t *topology) startBaseline() error {
	target, err := url.Parse(t.directURL)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.BufferPool = &bufferPool{}
	rp.ErrorLog = quietLog()
	t.baselineTransport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	rp.Transport = t.baselineTransport
	// The request body (about 530 bytes) is read before it is forwarded, as
	// the gateway does. Streamed straight through, a few streams in a
	// thousand with gaps between events died mid-body on this Go version
	// ("use of closed network connection" on the upstream read).
	inner := rp.Director
	rp.Director = func(r *http.Request) {
		if b, err := io.ReadAll(r.Body); err == nil {
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
		}
		inner(r)
	}
	ln, err := loopbackListen()
	if err != nil {
		return err
	}
	t.baseline = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: quietLog()}
	go t.baseline.Serve(ln)
	t.baselineURL = "http://" + ln.Addr().String()
	t.closers = append(t.closers, func() { t.baseline.Close() })
	return nil
}

// startGateway builds Switchyard with app.Build in a temp data dir, serves
// it like app.Run does, and configures connections, combos, keys and the
// resilience switches through the services and the management API.
func (t *topology) startGateway(ctx context.Context, cfg *config) error {
	dir, err := os.MkdirTemp("", "switchyard-bench-*")
	if err != nil {
		return err
	}
	t.dataDir = dir
	t.closers = append(t.closers, func() { os.RemoveAll(dir) })
	env := map[string]string{"SWITCHYARD_DATA_DIR": dir, "SWITCHYARD_PRIVATE_UPSTREAMS": t.fu.Addr()}
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
	base := t.fu.URL() + "/v1"
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
	_, secret, err := t.srv.Keys().Create(ctx, services.KeyInput{Name: services.Some("bench-client"), Scopes: services.Some([]string{services.ScopeInference})})
	if err != nil {
		return err
	}
	t.clientKey = secret
	_, admin, err := t.srv.Keys().Create(ctx, services.KeyInput{Name: services.Some("bench-admin"), Scopes: services.Some([]string{services.ScopeManage})})
	if err != nil {
		return err
	}
	patch := `{"modelLockout":{"enabled":true},"providerCooldown":{"enabled":true}}`
	if cfg.features == "minimal" {
		patch = `{"modelLockout":{"enabled":false},"providerCooldown":{"enabled":false}}`
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPatch, t.gatewayURL+"/api/resilience", bytes.NewReader([]byte(patch)))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PATCH /api/resilience: %d %s", resp.StatusCode, b)
	}
	return nil
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
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
	t.closers = nil
}

// path is one way to reach the fake upstream.
type path struct {
	name   string // direct, baseline, gateway, gateway-min
	url    string // full chat completions URL
	auth   string // Authorization header value
	model  func(kind string) string
	header http.Header
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
	return map[string]*path{
		"direct":      {name: "direct", url: t.directURL + "/v1/chat/completions", auth: "Bearer " + keyDirect, model: upstreamModel},
		"baseline":    {name: "baseline", url: t.baselineURL + "/v1/chat/completions", auth: "Bearer " + keyDirect, model: upstreamModel},
		"gateway":     {name: "gateway", url: t.gatewayURL + "/v1/chat/completions", auth: "Bearer " + t.clientKey, model: comboModel},
		"gateway-min": {name: "gateway-min", url: t.gatewayURL + "/v1/chat/completions", auth: "Bearer " + t.clientKey, model: func(kind string) string { return "fakemin/" + kind }},
	}
}

// checkPaths sends one JSON and one stream request on every path and
// checks the answers, so a broken setup fails before any measurement.
func (t *topology) checkPaths(ctx context.Context, cfg *config) error {
	cl := newClient(4)
	for _, name := range []string{"direct", "baseline", "gateway", "gateway-min"} {
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
