package testkit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"switchyard/app"
	"switchyard/services"
)

// AdminPassword is the admin password of apps built by NewApp.
const AdminPassword = "correct horse battery staple"

// TestHost is the Host of requests built with httptest.NewRequest (and so
// Request and Do); apps built here list it with --public-host, as an
// operator lists the name a reverse proxy forwards, so the dashboard and
// /api answer it (app's Host check refuses unknown names).
const TestHost = "example.com"

// App is a Switchyard built in-process for handler tests: real SQLite in a
// temp dir, a fake clock, requests served through httptest.
type App struct {
	T       testing.TB
	Server  *app.Server
	Clock   *FakeClock
	DataDir string
}

// AppOption adjusts the configuration of NewApp.
type AppOption func(*app.Config, map[string]string)

// WithoutAdminPassword leaves first-run setup pending.
func WithoutAdminPassword() AppOption {
	return func(_ *app.Config, env map[string]string) { delete(env, "SWITCHYARD_ADMIN_PASSWORD") }
}

// WithEnv sets an environment variable for LoadConfig.
func WithEnv(k, v string) AppOption {
	return func(_ *app.Config, env map[string]string) { env[k] = v }
}

// NewApp builds the app with an admin password already set.
func NewApp(t testing.TB, opts ...AppOption) *App {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{"SWITCHYARD_ADMIN_PASSWORD": AdminPassword, "SWITCHYARD_DATA_DIR": dir, "SWITCHYARD_PUBLIC_HOSTS": TestHost}
	var cfg app.Config
	for _, o := range opts {
		o(&cfg, env)
	}
	cfg, err := app.LoadConfig([]string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	clock := NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	srv, err := app.Build(context.Background(), cfg, app.Options{Clock: clock, Argon2: &CheapArgon2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &App{T: t, Server: srv, Clock: clock, DataDir: dir}
}

// Do serves req from a loopback peer and returns the recorded response.
func (a *App) Do(req *http.Request) *httptest.ResponseRecorder {
	if req.RemoteAddr == "" || req.RemoteAddr == "192.0.2.1:1234" {
		req.RemoteAddr = "127.0.0.1:40000"
	}
	rec := httptest.NewRecorder()
	a.Server.Handler().ServeHTTP(rec, req)
	return rec
}

// Request builds a request; body strings are sent as-is.
func Request(method, target, body string, headers ...string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// Login signs in with the admin password and returns the session cookie.
func (a *App) Login() *http.Cookie {
	a.T.Helper()
	form := url.Values{"password": {AdminPassword}}
	req := Request("POST", "/login", form.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")
	rec := a.Do(req)
	if rec.Code != http.StatusSeeOther {
		a.T.Fatalf("login: status %d: %s", rec.Code, rec.Body.String())
	}
	for _, c := range rec.Result().Cookies() {
		if strings.HasSuffix(c.Name, "switchyard_session") && c.MaxAge >= 0 {
			return c
		}
	}
	a.T.Fatal("login: no session cookie")
	return nil
}

// NewKey creates a client key with the given scopes and returns its secret.
func (a *App) NewKey(name string, scopes ...string) (services.APIKey, string) {
	a.T.Helper()
	if len(scopes) == 0 {
		scopes = []string{services.ScopeInference}
	}
	k, secret, err := a.Server.Keys().Create(context.Background(), services.KeyInput{Name: services.Some(name), Scopes: services.Some(scopes)})
	if err != nil {
		a.T.Fatal(err)
	}
	return k, secret
}

// Running is a Switchyard started through app.Run, as a user would.
type Running struct {
	BaseURL string
	Stdout  *LineBuffer
	cancel  context.CancelFunc
	done    chan error
}

// StartApp runs app.Run with --addr 127.0.0.1:0 and a temp data dir (unless
// args name one), waits for the listening line, and stops it on cleanup,
// failing the test if Run returned an error.
func StartApp(t testing.TB, args []string, env map[string]string) *Running {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	full := append([]string{"switchyard", "--addr", "127.0.0.1:0"}, args...)
	if _, ok := env["SWITCHYARD_DATA_DIR"]; !ok {
		env["SWITCHYARD_DATA_DIR"] = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	out := &LineBuffer{lines: make(chan string, 1024)}
	r := &Running{Stdout: out, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := app.Run(ctx, full, func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
		r.done <- err
	}()
	go out.consume(pr)
	line, err := out.WaitFor("listening on ", 10*time.Second)
	if err != nil {
		cancel()
		t.Fatalf("start: %v (run: %v)", err, <-r.done)
	}
	r.BaseURL = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("app.Run: %v", err)
		}
	})
	return r
}

// Stop cancels Run's context and returns its error (once).
func (r *Running) Stop() error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if !ok {
			return nil
		}
		close(r.done)
		return err
	case <-time.After(15 * time.Second):
		return errors.New("app.Run did not return within 15 s of cancel")
	}
}

// LineBuffer collects lines written by the app.
type LineBuffer struct {
	lines chan string
	all   []string
}

func (b *LineBuffer) consume(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		select {
		case b.lines <- sc.Text():
		default:
		}
	}
	close(b.lines)
}

// WaitFor returns the first line (from now on) that starts with prefix.
func (b *LineBuffer) WaitFor(prefix string, timeout time.Duration) (string, error) {
	for _, l := range b.all {
		if strings.HasPrefix(l, prefix) {
			return l, nil
		}
	}
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-b.lines:
			if !ok {
				return "", errors.New("output ended before a line starting with " + prefix)
			}
			b.all = append(b.all, l)
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		case <-deadline:
			return "", errors.New("no line starting with " + prefix)
		}
	}
}

// Serve starts a real HTTP server for the app on 127.0.0.1 and returns its base URL.
func (a *App) Serve() string {
	a.T.Helper()
	srv := httptest.NewServer(a.Server.Handler())
	a.T.Cleanup(srv.Close)
	return srv.URL
}

// AddConnection creates a connection through the service and fails the test on error.
func (a *App) AddConnection(in services.ConnectionInput) services.Connection {
	a.T.Helper()
	c, err := a.Server.Connections().Create(context.Background(), in)
	if err != nil {
		a.T.Fatalf("add connection: %v", err)
	}
	return c
}
