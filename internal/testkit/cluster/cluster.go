// Package cluster runs several gateway processes built from the tree against
// one shared PostgreSQL (and optionally Redis), with a round-robin front in
// the test process: the harness of the multi-replica tests (T1–T12 of the
// scale-out design). Replicas are real processes, so a test can SIGKILL one
// of them, restart it on the same configuration, or stop the database under
// them. Only tests and cmd/ import it.
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"switchyard/internal/testkit"
)

// SecretKey is the key material every replica shares (each would otherwise
// mint its own secret.key and refuse the others' sealed credentials).
const SecretKey = "cluster-test-secret-key-0123456789abcdef"

// Options configure a cluster.
type Options struct {
	// Replicas is the number of gateway processes. Default 3.
	Replicas int
	// DatabaseURL is the shared PostgreSQL database (SWITCHYARD_DATABASE_URL).
	DatabaseURL string
	// RedisURL, when set, is every replica's SWITCHYARD_REDIS_URL.
	RedisURL string
	// Upstreams are host:port entries the replicas may reach although they
	// are loopback (SWITCHYARD_PRIVATE_UPSTREAMS): the fake upstream.
	Upstreams []string
	// Env adds to every replica's environment.
	Env map[string]string
}

// Cluster is a running set of replicas and the front that spreads requests
// over them.
type Cluster struct {
	t        testing.TB
	bin      string
	opts     Options
	Replicas []*Replica
	front    *httptest.Server
	next     atomic.Uint64
}

// Replica is one gateway process.
type Replica struct {
	Name    string
	DataDir string
	env     []string
	bin     string

	mu      sync.Mutex
	proc    *proc
	last    *proc // the current or last run
	url     string
	Startup time.Duration // time from exec to the listening line, last start
	// Listening is when the last start printed its listening line; Killed
	// is when the last SIGKILL was sent.
	Listening, Killed time.Time
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary builds the gateway once per test process (go build -o <tmp>/switchyard
// from the module root; the build cache makes it cheap) and returns its path,
// or skips t with the reason.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("no go command: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "switchyard-cluster-bin-")
		if err != nil {
			buildErr = err
			return
		}
		bin := filepath.Join(dir, "switchyard")
		cmd := exec.Command(goBin, "build", "-o", bin, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		buildBin = bin
	})
	if buildErr != nil {
		t.Skipf("cluster test skipped: %v", buildErr)
	}
	return buildBin
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("module root not found above %s", dir)
		}
		dir = parent
	}
}

// Start builds the gateway and starts the replicas one after another (the
// first one applies the migrations and sets the admin password), then the
// front. Everything stops on cleanup.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Replicas <= 0 {
		opts.Replicas = 3
	}
	if opts.DatabaseURL == "" {
		t.Fatal("cluster: Options.DatabaseURL is required")
	}
	c := &Cluster{t: t, bin: Binary(t), opts: opts}
	for i := range opts.Replicas {
		r := c.newReplica(string(rune('A' + i)))
		c.Replicas = append(c.Replicas, r)
		r.Start(t)
	}
	c.front = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			r := c.pick()
			u, _ := url.Parse(r.URL())
			pr.SetURL(u)
			pr.Out.Host = u.Host
			pr.Out.Header.Set(ReplicaHeader, r.Name)
		},
		// The answer names the replica that served it, so a test can tell
		// which replica's requests it is counting.
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(ReplicaHeader, resp.Request.Header.Get(ReplicaHeader))
			return nil
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "front: "+err.Error(), http.StatusBadGateway)
		},
	})
	t.Cleanup(func() {
		c.front.Close()
		for _, r := range c.Replicas {
			r.Kill()
		}
	})
	return c
}

// ReplicaHeader is set by the front on each answer: the name of the replica
// that served it ("A", "B", …).
const ReplicaHeader = "X-Cluster-Replica"

// pick is the front's round robin over the running replicas, as a load
// balancer's health check would skip one that is down (all of them, when
// none runs, so the caller sees the failure).
func (c *Cluster) pick() *Replica {
	n := len(c.Replicas)
	start := int(c.next.Add(1)-1) % n
	for i := range n {
		if r := c.Replicas[(start+i)%n]; r.Running() {
			return r
		}
	}
	return c.Replicas[start]
}

func (c *Cluster) newReplica(name string) *Replica {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHYARD_") {
			env = append(env, kv)
		}
	}
	set := map[string]string{
		"SWITCHYARD_SECRET_KEY":        SecretKey,
		"SWITCHYARD_ADMIN_PASSWORD":    testkit.AdminPassword,
		"SWITCHYARD_DATABASE_URL":      c.opts.DatabaseURL,
		"SWITCHYARD_REPLICA_ID":        "replica-" + name,
		"SWITCHYARD_PRIVATE_UPSTREAMS": strings.Join(c.opts.Upstreams, ","),
	}
	if c.opts.RedisURL != "" {
		set["SWITCHYARD_REDIS_URL"] = c.opts.RedisURL
	}
	for k, v := range c.opts.Env {
		set[k] = v
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return &Replica{Name: name, DataDir: c.t.TempDir(), env: env, bin: c.bin}
}

// Front is the URL of the round-robin front: one address for the fleet.
func (c *Cluster) Front() string { return c.front.URL }

// Replica returns replica i (0 = A).
func (c *Cluster) Replica(i int) *Replica { return c.Replicas[i] }

// Running reports whether the replica's process runs (started and not
// killed or stopped since).
func (r *Replica) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil
}

// URL is the replica's base URL (it changes on restart: the port is free).
func (r *Replica) URL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.url
}

// Start runs the replica and waits for its listening line (up to 45 s: a
// replica waits for an unreachable database for up to 30 s at start).
func (r *Replica) Start(t testing.TB) {
	t.Helper()
	if err := r.start(); err != nil {
		t.Fatalf("replica %s: %v", r.Name, err)
	}
}

func (r *Replica) start() error {
	cmd := exec.Command(r.bin, "--addr", "127.0.0.1:0", "--data-dir", r.DataDir)
	cmd.Env = r.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	deadline := time.After(45 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				<-p.exited
				return fmt.Errorf("exited before listening (%v): %s", p.err, p.stderr)
			}
			if rest, found := strings.CutPrefix(l, "listening on "); found {
				r.mu.Lock()
				r.proc, r.last, r.url, r.Startup, r.Listening = p, p, strings.TrimSpace(rest), time.Since(begin), time.Now()
				r.mu.Unlock()
				go func() { // keep draining stdout so the child never blocks
					for range lines {
					}
				}()
				return nil
			}
		case <-deadline:
			p.kill()
			return fmt.Errorf("no listening line within 45 s: %s", p.stderr)
		}
	}
}

// Kill SIGKILLs the replica and waits for it to exit (no-op when stopped).
func (r *Replica) Kill() {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	if p != nil {
		r.Killed = time.Now()
	}
	r.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Stop sends SIGTERM (a graceful drain) and waits up to 20 s.
func (r *Replica) Stop() {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.kill()
	}
}

// Restart kills the replica if it runs and starts it again with the same
// configuration and data dir.
func (r *Replica) Restart(t testing.TB) {
	t.Helper()
	r.Kill()
	r.Start(t)
}

// Stderr is what the replica wrote to stderr in its current run.
func (r *Replica) Stderr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return ""
	}
	return r.proc.stderr.String()
}

// Signal sends sig to the running replica (SIGQUIT makes Go print every
// goroutine's stack to stderr: see LastStderr).
func (r *Replica) Signal(sig os.Signal) {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// LastStderr is what the replica wrote to stderr in its last run, also
// after it was killed or stopped.
func (r *Replica) LastStderr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return ""
	}
	return r.last.stderr.String()
}

type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	err    error
	once   sync.Once
}

func (p *proc) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Client calls one base URL (a replica or the front) with a bearer key.
type Client struct {
	Base string
	Key  string
	HC   *http.Client
}

// NewClient returns a client with a 15 s timeout and a small idle pool.
func NewClient(base, key string) *Client {
	return &Client{Base: base, Key: key, HC: &http.Client{Timeout: 15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
}

// Response is a buffered answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map (nil when it is not an object).
func (r Response) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Do sends method path with an optional JSON body and extra header pairs.
func (c *Client) Do(ctx context.Context, method, path, body string, headers ...string) (Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, strings.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.HC.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// Must is Do that fails t on a transport error or a status other than want.
func (c *Client) Must(t testing.TB, method, path, body string, want int, headers ...string) Response {
	t.Helper()
	r, err := c.Do(context.Background(), method, path, body, headers...)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, c.Base, path, err)
	}
	if r.Status != want {
		t.Fatalf("%s %s%s: %d %s, want %d", method, c.Base, path, r.Status, r.Body, want)
	}
	return r
}

// ManageKey signs in to base with the admin password and creates a client
// key with scope manage, for the management API of every replica.
func ManageKey(t testing.TB, base string) string {
	t.Helper()
	hc := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"password": {testkit.AdminPassword}}
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", base)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.MaxAge >= 0 && strings.HasSuffix(ck.Name, "switchyard_session") {
			cookie = ck
		}
	}
	if cookie == nil {
		t.Fatalf("login: %d, no session cookie", resp.StatusCode)
	}
	req, _ = http.NewRequest("POST", base+"/api/keys", strings.NewReader(`{"name":"cluster-ops","scopes":["manage"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", base)
	req.AddCookie(cookie)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatalf("create manage key: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	secret, _ := m["secret"].(string)
	if resp.StatusCode != http.StatusCreated || secret == "" {
		t.Fatalf("create manage key: %d %s", resp.StatusCode, b)
	}
	return secret
}
