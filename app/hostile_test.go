package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostileAttack is one row of the hostile-input tier: an attack from a
// hostile client, upstream or web page (or an admin's slip) against a real
// gateway, and what must hold. run fails the test when the defence does
// not hold and returns the figure the row measured.
type hostileAttack struct {
	item string // issue 17 item, or "held" for attacks that were already refused
	name string
	run  func(t *testing.T, e *hostileEnv) string
}

// TestHostileInputs is the hostile-input tier (issue 17 "Also"): every
// attack of the 2026 hardening review, the ones that got through and the
// ones that held, against one gateway started through app.Run, each with
// bounded sockets and durations (about a second per row), so none of them
// comes back. Its figures are logged per row.
func TestHostileInputs(t *testing.T) {
	e := startHostileEnv(t, nil, true)
	for _, a := range hostileAttacks() {
		t.Run(a.item+"/"+a.name, func(t *testing.T) {
			e.t = t
			fig := a.run(t, e)
			t.Logf("item %s, %s: %s", a.item, a.name, fig)
		})
	}
	e.t = t
}

// TestHostileSetupRebinding (issue 17 item 7, wiring): with no admin
// password yet, a DNS-rebound page (Host attacker.example, matching
// Origin) cannot run first-run setup; the dashboard and /api refuse the
// name with 421 before any handler, /v1 ignores Host. Before, the
// attacker's POST /setup set the admin password.
func TestHostileSetupRebinding(t *testing.T) {
	e := startHostileEnv(t, nil, false)
	form := url.Values{"password": {"attacker chosen pw 1"}, "confirm": {"attacker chosen pw 1"}}.Encode()
	st, _, b := e.do("POST", "/setup", form, "Host", "attacker.example:"+port(e.addr), "Origin", "http://attacker.example:"+port(e.addr),
		"Sec-Fetch-Site", "same-origin", "Content-Type", "application/x-www-form-urlencoded")
	if st != http.StatusMisdirectedRequest {
		t.Errorf("rebound POST /setup: %d %.200s", st, b)
	}
	if st, _, b := e.do("GET", "/setup", ""); st != 200 || !strings.Contains(string(b), `data-testid="setup-form"`) {
		t.Fatalf("setup no longer pending after the rebound POST: %d", st)
	}
	for _, p := range []string{"/login", "/api/monitoring/health", "/metrics", "/static/app.css", "/connections"} {
		if st, _, _ := e.do("GET", p, "", "Host", "attacker.example"); st != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with a foreign Host: %d", p, st)
		}
	}
	for _, h := range []string{"localhost:" + port(e.addr), e.addr, "[::1]:" + port(e.addr)} {
		if st, _, _ := e.do("GET", "/setup", "", "Host", h); st != 200 {
			t.Errorf("Host %s: %d", h, st)
		}
	}
	if st, _, _ := e.do("GET", "/v1/models", "", "Host", "attacker.example"); st != http.StatusUnauthorized {
		t.Errorf("/v1 is Host-agnostic: %d", st)
	}
	if st, _, _ := e.do("GET", "/healthz", "", "Host", "10.99.0.1"); st != 200 {
		t.Errorf("/healthz answers probes by address: %d", st)
	}
	// A name the operator lists is served.
	e2 := startHostileEnv(t, map[string]string{"SWITCHYARD_PUBLIC_HOSTS": "switchyard.example.com"}, false)
	if st, _, _ := e2.do("GET", "/setup", "", "Host", "switchyard.example.com"); st != 200 {
		t.Errorf("--public-host name: %d", st)
	}
}

func port(addr string) string {
	_, p, _ := strings.Cut(addr, ":")
	return p
}

var nonceRe = regexp.MustCompile(`nonce="([^"]+)"`)

func hostileAttacks() []hostileAttack {
	holdRoutes := []struct{ name, head string }{
		{"/v1", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n"},
		{"/login", "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"},
		{"/api", "POST /api/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n"},
		{"/healthz", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n"},
	}
	head := func(e *hostileEnv, tmpl string) string {
		if strings.Contains(tmpl, "/v1/") {
			return fmt.Sprintf(tmpl, e.client)
		}
		if strings.Contains(tmpl, "%s") {
			return fmt.Sprintf(tmpl, e.manage)
		}
		return tmpl
	}
	return []hostileAttack{
		{"1", "body holders and tricklers are closed", func(t *testing.T, e *hostileEnv) string {
			// 1 s to the first body byte, then 1 KiB/s: both variants end
			// at about 1 s on every route.
			var figs []string
			var all sync.WaitGroup
			var fmu sync.Mutex
			for _, r := range holdRoutes {
				all.Add(1)
				go func() {
					defer all.Done()
					var wg sync.WaitGroup
					var mu sync.Mutex
					worst, open := time.Duration(0), 0
					for i := range 10 {
						wg.Add(1)
						go func(trickle bool) {
							defer wg.Done()
							start := time.Now()
							c := e.rawConn(head(e, r.head))
							defer c.Close()
							if trickle {
								go func() {
									for range 40 {
										if _, err := c.Write([]byte("x")); err != nil {
											return
										}
										time.Sleep(100 * time.Millisecond)
									}
								}()
							}
							d, closed := closedWithin(c, start, 6*time.Second)
							mu.Lock()
							defer mu.Unlock()
							worst = max(worst, d)
							if !closed {
								open++
							}
						}(i%2 == 1)
					}
					wg.Wait()
					if open > 0 {
						t.Errorf("%s: %d of 10 sockets still open after 6 s", r.name, open)
					}
					fmu.Lock()
					figs = append(figs, fmt.Sprintf("%s %d/10 open, last closed at %v", r.name, open, worst.Round(10*time.Millisecond)))
					fmu.Unlock()
				}()
			}
			all.Wait()
			sort.Strings(figs)
			return strings.Join(figs, "; ")
		}},
		{"2", "proxyUrl on loopback, metadata and socks5 refused", func(t *testing.T, e *hostileEnv) string {
			refused := 0
			for _, p := range []string{"http://127.0.0.1:8080", "http://169.254.169.254:80", "http://[::1]:8080", "socks5://127.0.0.1:9", "http://2130706433:8080"} {
				st, b := e.admin("POST", "/api/connections", fmt.Sprintf(`{"provider":"openai","name":"px-%d","apiKey":"sk-proxy-canary-000111","proxyUrl":%q}`, refused, p))
				if st != 400 || !strings.Contains(string(b), "proxyUrl") {
					t.Errorf("proxy %s: %d %s", p, st, b)
					continue
				}
				refused++
			}
			return fmt.Sprintf("%d/5 proxy URLs refused at save", refused)
		}},
		{"3", "an oversized SSE line before the first byte is a typed 502", func(t *testing.T, e *hostileEnv) string {
			e.connection("h-line", "sk-hostile-line-0001", "http://"+e.hostile.addr+"/v1")
			before := e.hostile.written.Load()
			st, b := e.chat("h-line/huge-line", true)
			if st != 502 || !strings.Contains(string(b), "upstream_error") || !strings.Contains(string(b), "larger than 1 MiB") {
				t.Errorf("client got %d %.300s", st, b)
			}
			// The 1 MiB cap plus what loopback socket buffers absorb.
			if w := e.hostile.written.Load() - before; w > 24<<20 {
				t.Errorf("the gateway read on: the upstream wrote %d MiB", w>>20)
			}
			return fmt.Sprintf("%d, upstream wrote %d KiB of a 50 MB line", st, (e.hostile.written.Load()-before)>>10)
		}},
		{"3", "an oversized SSE line after the first byte ends in band without [DONE]", func(t *testing.T, e *hostileEnv) string {
			e.connection("h-late", "sk-hostile-late-0001", "http://"+e.hostile.addr+"/v1")
			before := e.hostile.written.Load()
			st, b := e.chat("h-late/huge-line-late", true)
			if st != 200 || !strings.Contains(string(b), "Hel") || !strings.Contains(string(b), "upstream_error") || strings.Contains(string(b), "[DONE]") {
				t.Errorf("client got %d %.400s", st, b)
			}
			w := e.hostile.written.Load() - before
			if w > 24<<20 {
				t.Errorf("the gateway read on: the upstream wrote %d MiB", w>>20)
			}
			return fmt.Sprintf("200 stream, in-band error, no [DONE]; upstream wrote %d KiB", w>>10)
		}},
		{"3", "an oversized JSON body is a typed 502", func(t *testing.T, e *hostileEnv) string {
			e.connection("h-json", "sk-hostile-json-0001", "http://"+e.hostile.addr+"/v1")
			before := e.hostile.written.Load()
			st, b := e.chat("h-json/huge-json", false)
			if st != 502 || !strings.Contains(string(b), "upstream_error") {
				t.Errorf("client got %d %.300s", st, b)
			}
			if w := e.hostile.written.Load() - before; w > 24<<20 {
				t.Errorf("the gateway read on: the upstream wrote %d MiB", w>>20)
			}
			return fmt.Sprintf("%d, upstream wrote %d KiB of a 300 MB body", st, (e.hostile.written.Load()-before)>>10)
		}},
		{"4", "a credential echoed in a 401 is redacted everywhere", func(t *testing.T, e *hostileEnv) string {
			const key = "AbCdEf123456GhIjKl"
			id := e.connection("h-echo", key, "http://"+e.hostile.addr+"/v1")
			_, b := e.chat("h-echo/echo-key", false)
			_, conn := e.admin("GET", "/api/connections/"+id, "")
			_, list := e.admin("GET", "/api/connections", "")
			_, _, page := e.do("GET", "/connections", "", "Cookie", e.cookie.Name+"="+e.cookie.Value)
			leaks := 0
			for where, text := range map[string][]byte{"client": b, "GET one": conn, "GET list": list, "page": page} {
				if strings.Contains(string(text), key) {
					leaks++
					t.Errorf("%s shows the key", where)
				}
			}
			if !strings.Contains(string(conn), "[redacted]") {
				t.Errorf("lastError not recorded with the key redacted: %.300s", conn)
			}
			return fmt.Sprintf("%d of 4 places show the key", leaks)
		}},
		{"6", "30 concurrent 9 MB passwords are refused before hashing", func(t *testing.T, e *hostileEnv) string {
			body := "password=" + strings.Repeat("p", 9<<20) // one copy, read by every request
			base := vmRSS("VmRSS")
			var peak float64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
						peak = max(peak, vmRSS("VmRSS"))
					}
				}
			}()
			start := time.Now()
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int]int{}
			for range 30 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", e.base+"/login", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					req.Header.Set("Sec-Fetch-Site", "same-origin")
					st := 0
					if resp, err := e.hc.Do(req); err == nil {
						st = resp.StatusCode
						resp.Body.Close()
					}
					mu.Lock()
					codes[st]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			took := time.Since(start)
			close(stop)
			<-sampled
			// The server answers 413 from the Content-Length alone and closes;
			// a client still writing its 9 MB may see the reset instead of
			// the answer (0 here), which is a refusal just as well.
			st := http.StatusRequestEntityTooLarge
			if codes[st] == 0 || codes[st]+codes[0] != 30 {
				t.Errorf("9 MB passwords: answers %v, want 30×413 (or resets)", codes)
			}
			st2, _, _ := e.do("POST", "/login", "password="+strings.Repeat("p", 2000), "Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")
			if st2 != http.StatusUnprocessableEntity {
				t.Errorf("2,000-byte password: %d", st2)
			}
			return fmt.Sprintf("30×9 MB forms: %v in %v, process RSS %.0f → peak %.0f MiB; 2,000-byte password %d", codes, took.Round(time.Millisecond), base, peak, st2)
		}},
		{"8", "a cookie write without Origin or Sec-Fetch-Site is refused", func(t *testing.T, e *hostileEnv) string {
			// A session of its own: were the defence missing, the logout
			// below would end it, not the one the other rows use.
			sc := e.signIn(nil)
			cookie := sc.Name + "=" + sc.Value
			st, _, b := e.do("POST", "/api/keys", `{"name":"no-origin","scopes":["inference"]}`, "Content-Type", "application/json", "Cookie", cookie)
			if st != 403 || !strings.Contains(string(b), "cross_origin_rejected") {
				t.Errorf("/api: %d %s", st, b)
			}
			st2, _, _ := noRedirectDo(e, "POST", "/logout", "Cookie", cookie)
			if st2 != 403 {
				t.Errorf("dashboard /logout: %d", st2)
			}
			st3, _, _ := e.do("POST", "/api/keys", `{"name":"bearer","scopes":["inference"]}`, "Content-Type", "application/json", "Authorization", "Bearer "+e.manage)
			if st3 != 201 {
				t.Errorf("Bearer write: %d", st3)
			}
			return fmt.Sprintf("/api %d, /logout %d, Bearer %d", st, st2, st3)
		}},
		{"9", "error pages carry the security headers", func(t *testing.T, e *hostileEnv) string {
			var out []string
			for _, c := range []struct {
				path string
				want int
				h    []string
			}{{"/no-such-page", 404, nil}, {"/logout", 405, nil}, {"/login", 421, []string{"Host", "attacker.example"}}, {"/static/nope.css", 404, nil}} {
				st, h, b := e.do("GET", c.path, "", c.h...)
				csp := h.Get("Content-Security-Policy")
				bad := st != c.want || !strings.Contains(csp, "frame-ancestors 'none'") || h.Get("X-Content-Type-Options") != "nosniff" ||
					h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "same-origin"
				for _, m := range nonceRe.FindAllSubmatch(b, -1) {
					bad = bad || !strings.Contains(csp, "'nonce-"+string(m[1])+"'")
				}
				if bad {
					t.Errorf("%s: %d, CSP %q, nosniff %q, XFO %q", c.path, st, csp, h.Get("X-Content-Type-Options"), h.Get("X-Frame-Options"))
				}
				out = append(out, fmt.Sprintf("%s %d", c.path, st))
			}
			return strings.Join(out, ", ") + ": all with CSP+nonce, nosniff, DENY, same-origin"
		}},
		{"10", "non-canonical spellings of 127.0.0.1 refused at save", func(t *testing.T, e *hostileEnv) string {
			refused := 0
			hosts := []string{"2130706433", "0x7f000001", "127.1", "0177.0.0.1", "017700000001", "127.000.000.001", "0x7f.1", "localhost.", "0", "2852039166", "[::127.0.0.1]"}
			for i, h := range hosts {
				st, b := e.admin("POST", "/api/connections", fmt.Sprintf(`{"provider":"openai","name":"sp-%d","apiKey":"sk-spelling-000111","baseUrl":"http://%s:8080/v1"}`, i, h))
				if st != 400 || !(strings.Contains(string(b), "This address is private") || strings.Contains(string(b), "metadata")) {
					t.Errorf("%s: %d %s", h, st, b)
					continue
				}
				refused++
			}
			return fmt.Sprintf("%d/%d spellings refused with the canonical form's message", refused, len(hosts))
		}},
		{"11", "a local provider cannot reach metadata", func(t *testing.T, e *hostileEnv) string {
			refused := 0
			for i, u := range []string{"http://169.254.169.254/latest", "http://metadata.google.internal/", "http://[fe80::1]:11434/"} {
				st, _ := e.admin("POST", "/api/connections", fmt.Sprintf(`{"provider":"lcl-%d","custom":{"wireFormat":"openai","authClass":"local"},"name":"m","baseUrl":%q}`, i, u))
				if st != 400 {
					t.Errorf("local provider at %s: %d", u, st)
					continue
				}
				refused++
			}
			st, _ := e.admin("POST", "/api/connections", `{"provider":"lcl-ok","custom":{"wireFormat":"openai","authClass":"local"},"name":"m","baseUrl":"http://127.0.0.1:11434/v1"}`)
			if st != 201 {
				t.Errorf("local provider on loopback: %d", st)
			}
			return fmt.Sprintf("%d/3 metadata targets refused, loopback %d", refused, st)
		}},
		{"12", "re-pointing a stored key needs it again or the password", func(t *testing.T, e *hostileEnv) string {
			id := e.connection("h-repoint", "sk-repoint-canary-0001", "https://api.example.com/v1")
			st1, b := e.admin("PATCH", "/api/connections/"+id, `{"baseUrl":"https://collector.example.net/v1"}`)
			if st1 != 400 || !strings.Contains(string(b), "apiKey") {
				t.Errorf("re-point without the key: %d %s", st1, b)
			}
			st2, _ := e.admin("PATCH", "/api/connections/"+id, `{"baseUrl":"https://collector.example.net/v1","keepCredentials":true}`)
			st3, _ := e.admin("PATCH", "/api/connections/"+id, `{"baseUrl":"https://collector.example.net/v1","keepCredentials":true,"currentPassword":"`+"correct horse battery staple"+`"}`)
			_, _, b4 := e.do("PATCH", "/api/connections/"+id, `{"proxyUrl":"http://proxy.example.net:3128","keepCredentials":true}`, "Content-Type", "application/json", "Authorization", "Bearer "+e.manage)
			if st2 != 400 || st3 != 200 || !strings.Contains(string(b4), "proxy.example.net") {
				t.Errorf("session keep without password %d, with password %d, manage key %s", st2, st3, b4)
			}
			return fmt.Sprintf("no key %d, keep w/o password %d, keep + password %d", st1, st2, st3)
		}},
		{"13", "Content-Length with Transfer-Encoding: answered, connection closed", func(t *testing.T, e *hostileEnv) string {
			c := e.rawConn("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
			defer c.Close()
			req, _ := http.NewRequest("POST", "/", nil)
			resp, _, err := readResponse(c, req)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			d, closed := closedWithin(c, time.Now(), 3*time.Second)
			if resp.StatusCode != 400 || !closed {
				t.Errorf("status %d, closed %v", resp.StatusCode, closed)
			}
			return fmt.Sprintf("%d, closed after %v", resp.StatusCode, d.Round(time.Millisecond))
		}},
		{"14", "a model name that is not UTF-8 is a 400", func(t *testing.T, e *hostileEnv) string {
			before := e.fu.Hits()
			st, _, b := e.do("POST", "/v1/chat/completions", "{\"model\":\"fake/m\xff\xfe\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
				"Content-Type", "application/json", "Authorization", "Bearer "+e.client)
			if st != 400 || !strings.Contains(string(b), "invalid_request") {
				t.Errorf("%d %s", st, b)
			}
			return fmt.Sprintf("%d, %d upstream hits", st, len(e.fu.Hits())-len(before))
		}},
		{"15", "signing in again revokes the presented session", func(t *testing.T, e *hostileEnv) string {
			first := e.signIn(nil)
			second := e.signIn(first)
			get := func(c string) int {
				st, _, _ := noRedirectDo(e, "GET", "/", "Cookie", c)
				return st
			}
			old, now := get(first.Name+"="+first.Value), get(second.Name+"="+second.Value)
			if first.Value == second.Value || old != 303 || now != 200 {
				t.Errorf("old cookie %d, new cookie %d", old, now)
			}
			return fmt.Sprintf("old cookie %d, new cookie %d", old, now)
		}},
		// Attacks that held before; kept so that they stay held.
		{"held", "cross-site and foreign-origin cookie writes refused", func(t *testing.T, e *hostileEnv) string {
			var sts []string
			for _, h := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "same-site"}} {
				st, _, _ := e.do("POST", "/api/keys", `{"name":"csrf","scopes":["manage"]}`, "Content-Type", "application/json", "Cookie", e.cookie.Name+"="+e.cookie.Value, h[0], h[1])
				if st != 403 {
					t.Errorf("%s: %s → %d", h[0], h[1], st)
				}
				sts = append(sts, fmt.Sprint(st))
			}
			return "answers " + strings.Join(sts, ", ")
		}},
		{"held", "private base URLs and api_base in the body reach nothing", func(t *testing.T, e *hostileEnv) string {
			st, _ := e.admin("POST", "/api/connections", `{"provider":"openai","name":"ssrf","apiKey":"sk-ssrf-00011122","baseUrl":"http://127.0.0.1:8080/v1"}`)
			if st != 400 {
				t.Errorf("loopback base URL: %d", st)
			}
			attacker := e.hostile.redirect
			before := attacker.hits.Load()
			for _, f := range []string{"api_base", "base_url", "baseURL"} {
				body := fmt.Sprintf(`{"model":"fake/m","%s":%q,"messages":[{"role":"user","content":"hi"}]}`, f, attacker.srv.URL)
				e.do("POST", "/v1/chat/completions", body, "Content-Type", "application/json", "Authorization", "Bearer "+e.client)
			}
			if n := attacker.hits.Load() - before; n != 0 {
				t.Errorf("attacker server hit %d times", n)
			}
			return fmt.Sprintf("base URL %d, attacker hits %d", st, attacker.hits.Load()-before)
		}},
		{"held", "upstream redirects are not followed", func(t *testing.T, e *hostileEnv) string {
			e.connection("h-redirect", "sk-hostile-redirect-01", "http://"+e.hostile.addr+"/v1")
			before := e.hostile.redirect.hits.Load()
			st, _ := e.chat("h-redirect/redirect", false)
			if n := e.hostile.redirect.hits.Load() - before; n != 0 || st < 400 {
				t.Errorf("status %d, redirect target hit %d times", st, n)
			}
			return fmt.Sprintf("%d, redirect target hits %d", st, e.hostile.redirect.hits.Load()-before)
		}},
		{"held", "keys in the query string, oversized headers and parse bombs are typed", func(t *testing.T, e *hostileEnv) string {
			st1, _, _ := e.do("POST", "/v1/chat/completions?api_key="+e.client, `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`, "Content-Type", "application/json")
			st2, _, _ := e.do("GET", "/v1/models", "", "Authorization", "Bearer "+e.client, "X-Big", strings.Repeat("h", 100<<10))
			st3, _, b3 := e.do("POST", "/v1/chat/completions", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}],"x":`+strings.Repeat("[", 1000)+strings.Repeat("]", 1000)+`}`,
				"Content-Type", "application/json", "Authorization", "Bearer "+e.client)
			if st1 != 401 || st2 != 431 || st3 != 400 || !strings.Contains(string(b3), "invalid_request") {
				t.Errorf("query key %d, 100 KiB header %d, 1000-deep JSON %d", st1, st2, st3)
			}
			return fmt.Sprintf("query key %d, 100 KiB header %d, 1000-deep JSON %d", st1, st2, st3)
		}},
		{"held", "markup in names renders escaped", func(t *testing.T, e *hostileEnv) string {
			payload := `<script>window.pwned=1</script>"><img src=x onerror=alert(1)>`
			st, b := e.admin("POST", "/api/keys", `{"name":`+jsonString(payload)+`,"scopes":["inference"]}`)
			if st != 201 {
				t.Fatalf("create key: %d %s", st, b)
			}
			_, _, page := e.do("GET", "/keys", "", "Cookie", e.cookie.Name+"="+e.cookie.Value)
			if strings.Contains(string(page), "<script>window.pwned") || strings.Contains(string(page), "<img src=x") {
				t.Error("the key name was rendered as markup")
			}
			return fmt.Sprintf("%d bytes of /keys scanned, payload escaped", len(page))
		}},
		// Last: it leaves 127.0.0.1 throttled for the next 30 s.
		{"5", "30 parallel wrong passwords: 5 checks", func(t *testing.T, e *hostileEnv) string {
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int]int{}
			for range 30 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, _, _ := e.do("POST", "/login", url.Values{"password": {"wrong password 30x"}}.Encode(),
						"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")
					mu.Lock()
					codes[st]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			if codes[401] != 5 || codes[429] != 25 {
				t.Errorf("answers %v, want 5×401 (checked) and 25×429", codes)
			}
			return fmt.Sprintf("%d checked (401), %d throttled (429)", codes[401], codes[429])
		}},
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// noRedirectDo is do without following redirects.
func noRedirectDo(e *hostileEnv, method, path string, headers ...string) (int, http.Header, []byte) {
	req, _ := http.NewRequest(method, e.base+path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := noRedirect(e.hc).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
