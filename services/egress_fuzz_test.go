package services

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// FuzzBaseURL (60-quality R14): the base-URL validator never panics, answers
// one of its fixed messages, and never accepts what it must refuse — a
// scheme other than http/https, no host, user info, or (for a non-local
// provider) a literal private, loopback or link-local address or localhost
// that the allowlist does not name. The form stored (trailing slashes
// trimmed, as Connections does) gets the same verdict as the form checked.
func FuzzBaseURL(f *testing.F) {
	for _, s := range []string{
		"https://api.openai.com/v1", "http://example.com:8080/", "https://api.example.com/v1///",
		"http://127.0.0.1:11434/v1", "http://localhost:1234", "http://LOCALHOST./", "http://foo.localhost/v1",
		"http://10.0.0.5", "http://[::1]:8080/", "http://[::ffff:127.0.0.1]/", "http://[fe80::1%25eth0]/",
		"http://169.254.169.254/latest/meta-data", "http://100.64.0.1/", "http://0.0.0.0/", "http://[::]/",
		"http://127.1/", "http://2130706433/", "http://0x7f000001/", "https://user:pw@api.example.com/",
		"ftp://example.com/", "javascript:alert(1)", "//example.com/v1", "http:///v1", "", " http://a/", "http://a b/",
		"http://192.168.1.10:20128/v1", "https://[2001:db8::1]:443/", "http://%31%32%37.0.0.1/", "http://a/%zz",
	} {
		f.Add(s, false, false)
		f.Add(s, true, false)
	}
	f.Add("http://192.168.1.10:20128/v1", false, true)
	f.Add("http://10.1.2.3/", false, true)

	open, err := ParseEgressAllowlist("")
	if err != nil {
		f.Fatal(err)
	}
	listed, err := ParseEgressAllowlist("192.168.1.10:20128, 10.0.0.0/8")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string, local, allowlisted bool) {
		class := AuthAPIKey
		if local {
			class = AuthLocal
		}
		g := open
		if allowlisted {
			g = listed
		}
		msg := g.CheckBaseURL(raw, class)
		switch {
		case msg == "", msg == msgBaseURLScheme, msg == msgBaseURLPrivate, msg == msgBaseURLMeta, strings.HasPrefix(msg, msgSpellingPrefix):
		default:
			t.Fatalf("unexpected message %q", msg)
		}
		if again := g.CheckBaseURL(raw, class); again != msg {
			t.Fatalf("second check %q, first %q", again, msg)
		}
		if local && msg == msgBaseURLPrivate {
			t.Fatalf("local provider refused as private: %q", raw)
		}
		if msg == "" {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				t.Fatalf("accepted %q: parse err %v", raw, err)
			}
			if !local {
				host := u.Hostname()
				lh := strings.ToLower(host)
				if !allowlisted && (lh == "localhost" || strings.HasSuffix(lh, ".localhost")) {
					t.Fatalf("accepted localhost for a non-local provider: %q", raw)
				}
				if a, err := netip.ParseAddr(host); err == nil && IsPrivate(a) && !allowlisted {
					t.Fatalf("accepted private address %v for a non-local provider: %q", a, raw)
				}
				if a, ok := ParseLegacyIPv4(host); ok && IsPrivate(a) && !allowlisted {
					t.Fatalf("accepted a spelling of private address %v for a non-local provider: %q", a, raw)
				}
			}
			if a, _, ok := ParseHostIP(u.Hostname()); ok && IsMetadata(a) && !allowlisted {
				t.Fatalf("accepted metadata address %v: %q", a, raw)
			}
			if stored := strings.TrimRight(raw, "/"); g.CheckBaseURL(stored, class) != "" {
				t.Fatalf("%q accepted but its stored form %q is refused: %q", raw, stored, g.CheckBaseURL(stored, class))
			}
		}
	})
}
