package app_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
)

func TestStreamKeepaliveWhileWaitingForFirstByte(t *testing.T) {
	f := newGW(t, "fk-a")
	set := f.app.Server.Gateway().Settings()
	set.KeepaliveIdle = 40 * time.Millisecond
	f.app.Server.Gateway().SetSettings(set)
	f.fu.Script("fk-a", fakeupstream.Step{Delay: 400 * time.Millisecond})
	resp := f.post(t, streamBody)
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if first != ": keepalive\n" {
		t.Fatalf("first line %q, want a keepalive comment", first)
	}
	rest, _ := io.ReadAll(br)
	if !strings.HasSuffix(strings.TrimSpace(string(rest)), "data: [DONE]") {
		t.Fatalf("stream did not complete: %q", rest)
	}
	// The keepalive committed before a dispatch produced a byte: no per-dispatch headers.
	if resp.Header.Get("X-Switchyard-Selected-Connection-Id") != "" {
		t.Fatal("per-dispatch headers sent with a keepalive commit")
	}
}

func TestTargetTimeoutFailsOver(t *testing.T) {
	f := newGW(t, "fk-slow", "fk-fast")
	set := f.app.Server.Gateway().Settings()
	set.TargetTimeout = 150 * time.Millisecond
	f.app.Server.Gateway().SetSettings(set)
	f.fu.Script("fk-slow", fakeupstream.Step{Delay: 5 * time.Second})
	for _, body := range []string{chatBody, streamBody} {
		resp := f.post(t, body)
		io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-fast"].ID {
			t.Fatalf("status %d served by %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Selected-Connection-Id"))
		}
	}
}

func TestAllConnectionsFailingGivesTypedError(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	f.fu.Script("fk-b", fakeupstream.Step{Status: 429, RetryAfter: "12"})
	resp := f.post(t, chatBody)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "12" || !strings.Contains(string(b), "upstream_rate_limited") ||
		resp.Header.Get("X-Switchyard-Error-Code") != "upstream_rate_limited" || resp.Header.Get("X-Switchyard-Fallback-Attempts") != "1" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, b)
	}
	f.fu.Script("fk-b", fakeupstream.Step{Status: 502})
	f.app.Clock.Advance(time.Hour) // both connections cooled down after the first request
	resp = f.post(t, chatBody)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 502 || !strings.Contains(string(b), `"code":"upstream_error"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	// A caller fault is relayed at once and stops the request.
	f.fu.Reset()
	f.app.Clock.Advance(time.Hour)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too long"})
	resp = f.post(t, chatBody)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "context_length_exceeded") || len(f.fu.Hits()) != 1 {
		t.Fatalf("caller fault: %d %s hits %d", resp.StatusCode, b, len(f.fu.Hits()))
	}
}

func TestUpstreamRedirectIsNotFollowed(t *testing.T) {
	f := newGW(t, "fk-a")
	var followed atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	defer target.Close()
	f.fu.Script("fk-a", fakeupstream.Step{Status: 302, Headers: map[string]string{"Location": target.URL + "/v1/chat/completions"}})
	resp := f.post(t, chatBody)
	io.ReadAll(resp.Body)
	if resp.StatusCode != 502 || followed.Load() != 0 {
		t.Fatalf("status %d, redirect followed %d times", resp.StatusCode, followed.Load())
	}
}

func TestConnectionProxyIsUsed(t *testing.T) {
	f := newGW(t)
	var proxied atomic.Int32
	up, _ := url.Parse(f.fu.URL())
	rp := httputil.NewSingleHostReverseProxy(up)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	// A proxy on loopback is a private address: only the start-up allowlist admits it.
	f.app.Server.Egress().Allow(strings.TrimPrefix(proxy.URL, "http://"))
	c := f.app.AddConnection(services.ConnectionInput{Provider: services.Some("fake"), Custom: services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"}),
		Name: services.Some("via-proxy"), APIKey: services.Some("fk-p"), BaseURL: services.Some(f.fu.URL() + "/v1"),
		ProxyURL: services.Some("http://ops:secret@" + strings.TrimPrefix(proxy.URL, "http://"))})
	resp := f.post(t, chatBody)
	io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != c.ID || proxied.Load() != 1 {
		t.Fatalf("status %d, proxied %d", resp.StatusCode, proxied.Load())
	}
}

func TestUpstreamNeverSeesClientSecretsOrSessionHeaders(t *testing.T) {
	f := newGW(t, "fk-a")
	var got http.Header
	spy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	defer spy.Close()
	f.app.Server.Egress().Allow(strings.TrimPrefix(spy.URL, "http://"))
	if _, err := f.app.Server.Connections().Update(context.Background(), f.conns["fk-a"].ID, services.ConnectionInput{BaseURL: services.Some(spy.URL), KeepCredentials: services.Some(true)}); err != nil {
		t.Fatal(err)
	}
	resp := f.post(t, chatBody, "X-Session-Id", "sess-1", "X-Switchyard-Session", "s2", "Cookie", "a=b", "X-Request-Id", "client-1")
	io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got.Get("Authorization") != "Bearer fk-a" {
		t.Fatalf("upstream auth %q", got.Get("Authorization"))
	}
	for _, h := range []string{"X-Session-Id", "X-Switchyard-Session", "Cookie", "X-Request-Id", "X-Api-Key"} {
		if got.Get(h) != "" {
			t.Errorf("%s forwarded upstream", h)
		}
	}
	if strings.Contains(strings.Join(got.Values("Authorization"), ""), f.key) {
		t.Error("client key forwarded upstream")
	}
}

func TestConnectionTestRecordsOutcomeWithoutTouchingState(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.Script("fk-a", fakeupstream.Step{Status: 401, ErrorMessage: "bad key"})
	c := f.app.Login()
	req := testkit.Request("POST", "/api/connections/"+f.conns["fk-a"].ID+"/test", "", "Sec-Fetch-Site", "same-origin")
	req.AddCookie(c)
	rec := f.app.Do(req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"ok":false`) || !strings.Contains(rec.Body.String(), `"status":401`) ||
		!strings.Contains(rec.Body.String(), "check the API key") {
		t.Fatalf("test: %d %s", rec.Code, rec.Body.String())
	}
	if st := f.app.Server.Resilience().Cooldowns.State(f.conns["fk-a"].ID); st.AuthFailCount != 0 || st.RateLimitedUntil != nil {
		t.Fatalf("a connection test changed resilience state: %+v", st)
	}
	got, _ := f.app.Server.Connections().Get(context.Background(), f.conns["fk-a"].ID)
	if got.LastTest == nil || got.LastTest.OK || got.LastTest.Status != 401 {
		t.Fatalf("lastTest %+v", got.LastTest)
	}
	f.fu.ClearScripts()
	rec = f.app.Do(req)
	if !strings.Contains(rec.Body.String(), `"ok":true`) {
		t.Fatalf("healthy test: %s", rec.Body.String())
	}
}
