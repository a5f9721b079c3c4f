package app_test

// The hostile-input tier's harness: a gateway started through app.Run as a
// user starts it (real listener, production argon2, the app's own server
// configuration), a well-behaved fake upstream, a hostile upstream, and
// clients that speak raw TCP where net/http would be too polite. Everything
// is set up over HTTP, as an operator would, so the tier needs no access
// to the server's internals.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
)

// hostileEnv is one running gateway with its upstreams and credentials.
type hostileEnv struct {
	t       *testing.T
	run     *testkit.Running
	base    string // http://127.0.0.1:port
	addr    string // 127.0.0.1:port
	fu      *fakeupstream.Server
	hostile *hostileUpstream
	cookie  *http.Cookie
	client  string // inference key
	manage  string // manage key
	hc      *http.Client
}

// hostileUpstreamEnv are the short bounds the tier runs with, so that each
// attack ends in about a second; the long tier uses the production defaults.
func hostileBoundsEnv() map[string]string {
	return map[string]string{
		"SWITCHYARD_BODY_FIRST_BYTE_TIMEOUT":  "1s",
		"SWITCHYARD_BODY_TIMEOUT":             "2s",
		"SWITCHYARD_CLIENT_BODY_TIMEOUT":      "3s",
		"SWITCHYARD_BODY_MIN_RATE":            "1024",
		"SWITCHYARD_UPSTREAM_MAX_EVENT_BYTES": "1MiB",
		"SWITCHYARD_UPSTREAM_MAX_BODY_BYTES":  "1MiB",
		"SWITCHYARD_UPSTREAM_BUFFER_BUDGET":   "16MiB",
	}
}

// startHostileEnv runs the gateway with env over hostileBoundsEnv; with
// admin, the admin password is set and a session, a client key and a
// manage key are made.
func startHostileEnv(t *testing.T, env map[string]string, admin bool) *hostileEnv {
	t.Helper()
	fu := fakeupstream.Start(t, fakeupstream.WithEvents(3))
	hu := startHostileUpstream(t)
	full := hostileBoundsEnv()
	full["SWITCHYARD_PRIVATE_UPSTREAMS"] = fu.Addr() + "," + hu.addr
	if admin {
		full["SWITCHYARD_ADMIN_PASSWORD"] = testkit.AdminPassword
	}
	for k, v := range env {
		full[k] = v
	}
	run := testkit.StartApp(t, nil, full)
	u, _ := url.Parse(run.BaseURL)
	e := &hostileEnv{t: t, run: run, base: run.BaseURL, addr: u.Host, fu: fu, hostile: hu,
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	t.Cleanup(e.hc.CloseIdleConnections)
	if !admin {
		return e
	}
	e.cookie = e.signIn(nil)
	e.mustAdmin("PATCH", "/api/resilience", `{"waitForCooldown":{"enabled":false}}`, 200)
	// One attempt per request: a retry pass would hold the stream past
	// its keepalive and turn pre-commit answers into in-band ones.
	e.mustAdmin("PATCH", "/api/settings", `{"routing":{"comboDefaults":{"maxRetries":0}}}`, 200)
	e.client = e.newKey("client", "inference")
	e.manage = e.newKey("ops", "manage")
	e.connection("fake", "fk-hostile-normal-01", fu.URL()+"/v1")
	return e
}

// do sends a request with headers (pairs) and returns status, headers and body.
func (e *hostileEnv) do(method, path, body string, headers ...string) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// admin sends a JSON request with the session cookie, as the dashboard's
// own scripts do.
func (e *hostileEnv) admin(method, path, body string, headers ...string) (int, []byte) {
	e.t.Helper()
	h := append([]string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin", "Cookie", e.cookie.Name + "=" + e.cookie.Value}, headers...)
	st, _, b := e.do(method, path, body, h...)
	return st, b
}

func (e *hostileEnv) mustAdmin(method, path, body string, want int) map[string]any {
	e.t.Helper()
	st, b := e.admin(method, path, body)
	if st != want {
		e.t.Fatalf("%s %s: %d, want %d: %s", method, path, st, want, b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// signIn posts the admin password, presenting cookie when given, and
// returns the new session cookie.
func (e *hostileEnv) signIn(cookie *http.Cookie) *http.Cookie {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.base+"/login", strings.NewReader(url.Values{"password": {testkit.AdminPassword}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := noRedirect(e.hc).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasSuffix(c.Name, "switchyard_session") && c.MaxAge >= 0 {
			return c
		}
	}
	e.t.Fatalf("sign-in: %d, no session cookie", resp.StatusCode)
	return nil
}

func noRedirect(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func (e *hostileEnv) newKey(name, scope string) string {
	e.t.Helper()
	m := e.mustAdmin("POST", "/api/keys", fmt.Sprintf(`{"name":%q,"scopes":[%q]}`, name, scope), 201)
	return m["secret"].(string)
}

// connection adds a custom OpenAI-format provider with one connection at
// baseURL and returns the connection id.
func (e *hostileEnv) connection(provider, apiKey, baseURL string) string {
	e.t.Helper()
	m := e.mustAdmin("POST", "/api/connections", fmt.Sprintf(`{"provider":%q,"custom":{"wireFormat":"openai","authClass":"apikey"},"name":"c1","apiKey":%q,"baseUrl":%q,"disableCooling":true}`,
		provider, apiKey, baseURL), 201)
	return m["id"].(string)
}

// chat posts a chat request for model with the client key.
func (e *hostileEnv) chat(model string, stream bool, extra ...string) (int, []byte) {
	e.t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
	st, _, b := e.do("POST", "/v1/chat/completions", body, append([]string{"Content-Type", "application/json", "Authorization", "Bearer " + e.client}, extra...)...)
	return st, b
}

// rawConn opens a TCP connection to the gateway and writes head.
func (e *hostileEnv) rawConn(head string) net.Conn {
	e.t.Helper()
	c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := io.WriteString(c, head); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// closedWithin reads c until the gateway closes it or limit passes; it
// returns when it closed (from start) and whether it did.
func closedWithin(c net.Conn, start time.Time, limit time.Duration) (time.Duration, bool) {
	_ = c.SetReadDeadline(start.Add(limit))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return time.Since(start), false
			}
			return time.Since(start), true
		}
	}
}

// readResponse reads one HTTP response from a raw connection.
func readResponse(c net.Conn, req *http.Request) (*http.Response, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, nil
}

// vmRSS is the process's resident set, in MiB (Linux; 0 elsewhere).
func vmRSS(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// hostileJunk is what oversized answers are made of, shared so that the
// hostile upstream itself adds nothing to the memory the tier measures.
var hostileJunk = bytes.Repeat([]byte("A"), 64<<10)

// hostileUpstream answers by model: oversized SSE lines and bodies, a 401
// that echoes the credential, a redirect to a listener that counts hits,
// or a normal answer.
type hostileUpstream struct {
	srv      *httptest.Server
	addr     string
	written  atomic.Int64 // bytes of oversized answers written
	hits     atomic.Int64
	redirect *countingServer
}

// countingServer counts the requests that reach it (an attacker's server
// or a metadata endpoint that must see none).
type countingServer struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func startCountingServer(t *testing.T) *countingServer {
	cs := &countingServer{}
	cs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.hits.Add(1)
		_, _ = io.WriteString(w, `{"stolen":true}`)
	}))
	t.Cleanup(cs.srv.Close)
	return cs
}

func startHostileUpstream(t *testing.T) *hostileUpstream {
	h := &hostileUpstream{redirect: startCountingServer(t)}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	h.addr = strings.TrimPrefix(h.srv.URL, "http://")
	return h
}

func (h *hostileUpstream) serve(w http.ResponseWriter, r *http.Request) {
	h.hits.Add(1)
	var req struct {
		Model string `json:"model"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
	junk := hostileJunk
	flood := func(total int) {
		for sent := 0; sent < total; sent += len(junk) {
			n, err := w.Write(junk)
			h.written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
	chunk := func(content string) string {
		return `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]}` + "\n\n"
	}
	switch req.Model {
	case "huge-line", "huge-line-late":
		w.Header().Set("Content-Type", "text/event-stream")
		if req.Model == "huge-line-late" {
			_, _ = io.WriteString(w, chunk("Hel"))
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"content":"`)
		flood(50 << 20) // one 50 MB line without a newline
	case "huge-json":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"`)
		flood(300 << 20)
	case "echo-key":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		_, _ = fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`, key)
	case "redirect":
		http.Redirect(w, r, h.redirect.srv.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}
}
