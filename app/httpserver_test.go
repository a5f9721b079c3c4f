package app

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// recordingDeadliner records every read deadline set.
type recordingDeadliner struct{ set []time.Time }

func (r *recordingDeadliner) SetReadDeadline(t time.Time) error {
	r.set = append(r.set, t)
	return nil
}

// scriptedBody returns its chunks one per Read, then its end error.
type scriptedBody struct {
	chunks []string
	end    error
}

func (s *scriptedBody) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, s.end
	}
	n := copy(p, s.chunks[0])
	s.chunks = s.chunks[1:]
	return n, nil
}
func (s *scriptedBody) Close() error { return nil }

// TestDeadlineBodyRule (issue 17 item 1, the rule): before any byte the
// deadline is the first-byte limit; each byte read buys 1/minRate s from
// there, never past the total; the end of the body clears the deadline (a
// long streamed response is then not cut); a deadline that passes reads as
// ErrBodyTimeout. Before, bodies had no deadline except a 60 s one on /v1.
func TestDeadlineBodyRule(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	rec := &recordingDeadliner{}
	body := &scriptedBody{chunks: []string{strings.Repeat("a", 1024), strings.Repeat("b", 4096), strings.Repeat("c", 100<<10)}, end: io.EOF}
	d, err := newDeadlineBody(body, rec, t0, 10*time.Second, 30*time.Second, 1024)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{t0.Add(10 * time.Second)}
	buf := make([]byte, 200<<10)
	for _, extra := range []time.Duration{11 * time.Second, 15 * time.Second, 30 * time.Second} {
		if _, err := d.Read(buf); err != nil {
			t.Fatal(err)
		}
		want = append(want, t0.Add(extra))
	}
	if _, err := d.Read(buf); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	want = append(want, time.Time{})
	if len(rec.set) != len(want) {
		t.Fatalf("deadlines %v, want %v", rec.set, want)
	}
	for i := range want {
		if !rec.set[i].Equal(want[i]) {
			t.Errorf("deadline %d: %v, want %v", i, rec.set[i], want[i])
		}
	}
	// Small steps do not move the deadline each time (at most one update
	// per 250 ms bought).
	rec = &recordingDeadliner{}
	body = &scriptedBody{chunks: []string{"x", "x", "x", "x"}, end: io.EOF}
	d, _ = newDeadlineBody(body, rec, t0, 10*time.Second, 30*time.Second, 1024)
	for range 4 {
		_, _ = d.Read(buf)
	}
	if len(rec.set) != 1 {
		t.Errorf("4 one-byte reads set %d deadlines", len(rec.set))
	}
	// A first-byte limit over the total is clamped; no minimum rate means
	// the total once a byte came.
	rec = &recordingDeadliner{}
	body = &scriptedBody{chunks: []string{"x"}, end: os.ErrDeadlineExceeded}
	d, _ = newDeadlineBody(body, rec, t0, 60*time.Second, 30*time.Second, 0)
	_, _ = d.Read(buf)
	if _, err := d.Read(buf); !errors.Is(err, ErrBodyTimeout) {
		t.Errorf("late body: %v", err)
	}
	if len(rec.set) != 1 || !rec.set[0].Equal(t0.Add(30*time.Second)) {
		t.Errorf("clamped deadlines %v", rec.set)
	}
}

// TestHostAllowedRule (issue 17 item 7, the rule): loopback names and
// addresses, the listen address (any IP literal when listening on every
// interface) and --public-host entries pass; other names do not.
func TestHostAllowedRule(t *testing.T) {
	cases := []struct {
		listen string
		public []string
		host   string
		ok     bool
	}{
		{"127.0.0.1:20128", nil, "127.0.0.1:20128", true},
		{"127.0.0.1:20128", nil, "localhost:20128", true},
		{"127.0.0.1:20128", nil, "LOCALHOST.", true},
		{"127.0.0.1:20128", nil, "app.localhost", true},
		{"127.0.0.1:20128", nil, "[::1]:20128", true},
		{"127.0.0.1:20128", nil, "127.0.0.2", true},
		{"127.0.0.1:20128", nil, "attacker.example:20128", false},
		{"127.0.0.1:20128", nil, "attacker.example", false},
		{"127.0.0.1:20128", nil, "", false},
		{"127.0.0.1:20128", nil, "10.0.0.5:20128", false},
		{"10.0.0.5:20128", nil, "10.0.0.5:20128", true},
		{"10.0.0.5:20128", nil, "10.0.0.6:20128", false},
		{"0.0.0.0:20128", nil, "192.168.1.20:20128", true},
		{"[::]:20128", nil, "[2001:db8::5]:20128", true},
		{"0.0.0.0:20128", nil, "rebind.attacker.example:20128", false},
		{"0.0.0.0:20128", []string{"switchyard.example.com"}, "switchyard.example.com", true},
		{"0.0.0.0:20128", []string{"switchyard.example.com"}, "SwitchYard.Example.com:443", true},
		{"0.0.0.0:20128", []string{"switchyard.example.com:8443"}, "switchyard.example.com:8443", true},
		{"0.0.0.0:20128", []string{"switchyard.example.com:8443"}, "switchyard.example.com:9999", false},
		{"0.0.0.0:20128", []string{"switchyard.example.com"}, "evil-switchyard.example.com", false},
		{"gateway.lan:20128", nil, "gateway.lan:20128", true},
	}
	for _, c := range cases {
		s := &Server{cfg: Config{PublicHosts: c.public}}
		s.listenAddr.Store(c.listen)
		if got := s.hostAllowed(c.host); got != c.ok {
			t.Errorf("listen %s public %v: Host %q allowed=%v, want %v", c.listen, c.public, c.host, got, c.ok)
		}
	}
	for in, want := range map[string]string{"Switchyard.Example.com.": "switchyard.example.com", "gw.example:8443": "gw.example:8443"} {
		if got, err := normalizePublicHost(in); err != nil || got != want {
			t.Errorf("normalizePublicHost(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"https://gw.example", "gw.example/path", "", "user@gw"} {
		if _, err := normalizePublicHost(bad); err == nil {
			t.Errorf("normalizePublicHost(%q) accepted", bad)
		}
	}
}

// TestSniffConnFlagsAmbiguousFraming (issue 17 item 13, the rule): both
// Content-Length and Transfer-Encoding in one header block are noticed,
// whatever the case and however the block is split across reads; a body
// or a second request after the blank line is not scanned; idle starts the
// next request's scan.
func TestSniffConnFlagsAmbiguousFraming(t *testing.T) {
	scan := func(parts ...string) *sniffConn {
		c := &sniffConn{}
		for _, p := range parts {
			c.scan([]byte(p))
		}
		return c
	}
	both := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
	if !scan(both).ambiguous() {
		t.Error("both headers not noticed")
	}
	if !scan(strings.ToLower(both[:40]), strings.ToUpper(both[40:70]), both[70:]).ambiguous() {
		t.Error("split and mixed case not noticed")
	}
	if scan("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nTransfer-Encoding: chunked\r\n\r\n").ambiguous() {
		t.Error("body bytes after the header block were scanned")
	}
	if scan("\r\nPOST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").ambiguous() {
		t.Error("one header alone flagged")
	}
	c := scan(both)
	c.idle()
	if c.ambiguous() {
		t.Error("idle did not reset")
	}
	if c.scan([]byte("GET / HTTP/1.1\nContent-length: 0\ntransfer-encoding: chunked\n\n")); !c.ambiguous() {
		t.Error("bare-LF header block after idle not noticed")
	}
}
