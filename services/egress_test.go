package services_test

import (
	"net/netip"
	"strings"
	"testing"

	"switchyard/services"
)

// privateMsg is the sentence every refused private address gets.
const privateMsg = "This address is private."

// TestEgressNonCanonicalSpellingsRefusedAtSave (issue 17 item 10): every
// spelling of a loopback or metadata address is refused when a base URL or a
// proxy URL is saved, with the sentence its canonical form gets; before,
// only the canonical forms were refused here and the rest only at dial time.
func TestEgressNonCanonicalSpellingsRefusedAtSave(t *testing.T) {
	g, err := services.ParseEgressAllowlist("")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ host, canonical string }{
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"127.000.000.001", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"localhost.", "127.0.0.1"},
		{"LOCALHOST", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"2852039166", "169.254.169.254"},
		{"[::127.0.0.1]", "127.0.0.1"},
		{"[::ffff:7f00:1]", "127.0.0.1"},
		{"[0:0:0:0:0:0:0:1]", "[::1]"},
		{"[64:ff9b::a9fe:a9fe]", "169.254.169.254"},
	}
	checks := []struct {
		name  string
		check func(raw string, class services.AuthClass) string
		url   func(host string) string
	}{
		{"baseUrl", g.CheckBaseURL, func(h string) string { return "http://" + h + ":8080/v1" }},
		{"proxyUrl", g.CheckProxyURL, func(h string) string { return "http://" + h + ":8080" }},
		{"socks5 proxyUrl", g.CheckProxyURL, func(h string) string { return "socks5://" + h + ":1080" }},
	}
	for _, ck := range checks {
		for _, c := range cases {
			want := ck.check(ck.url(c.canonical), services.AuthAPIKey)
			if want == "" {
				t.Fatalf("%s: canonical %s accepted", ck.name, c.canonical)
			}
			if got := ck.check(ck.url(c.host), services.AuthAPIKey); got != want {
				t.Errorf("%s %s: %q, want the canonical form's %q", ck.name, c.host, got, want)
			}
		}
	}
	// A public address in a legacy spelling is refused too (resolvers
	// disagree on it), with the spelling to use.
	if got := g.CheckBaseURL("http://134744072/v1", services.AuthAPIKey); !strings.Contains(got, "8.8.8.8") {
		t.Errorf("legacy spelling of a public address: %q", got)
	}
	for _, ok := range []string{"https://api.openai.com/v1", "http://123.example.com/v1", "https://[2001:db8::1]:443/", "http://1.1.1.1/"} {
		if got := g.CheckBaseURL(ok, services.AuthAPIKey); got != "" {
			t.Errorf("%s refused: %q", ok, got)
		}
	}
}

// TestEgressProxyURLGuardedLikeBaseURL (issue 17 item 2, save time): the
// proxy's address follows the base-URL rules; before, any http, https or
// socks5 proxy was accepted.
func TestEgressProxyURLGuardedLikeBaseURL(t *testing.T) {
	g, err := services.ParseEgressAllowlist("127.0.0.1:3128, 10.9.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url   string
		class services.AuthClass
		ok    bool
	}{
		{"http://127.0.0.1:8080", services.AuthAPIKey, false},
		{"http://169.254.169.254:80", services.AuthAPIKey, false},
		{"http://[::1]:8080", services.AuthAPIKey, false},
		{"socks5://127.0.0.1:9", services.AuthAPIKey, false},
		{"http://localhost:8080", services.AuthAPIKey, false},
		{"http://192.168.1.2:3128", services.AuthAPIKey, false},
		{"http://ops:secret@127.0.0.1:3128", services.AuthAPIKey, true}, // allowlisted host:port
		{"http://10.9.1.1:3128", services.AuthAPIKey, true},             // allowlisted CIDR
		{"http://proxy.example.com:3128", services.AuthAPIKey, true},    // names: the dialer checks
		{"https://203.0.113.7:443", services.AuthAPIKey, true},
		{"http://127.0.0.1:8080", services.AuthLocal, true},
		{"http://169.254.169.254:80", services.AuthLocal, false},
		{"ftp://proxy.example.com", services.AuthAPIKey, false},
		{"proxy.example.com:3128", services.AuthAPIKey, false},
	}
	for _, c := range cases {
		if got := g.CheckProxyURL(c.url, c.class); (got == "") != c.ok {
			t.Errorf("CheckProxyURL(%q, %s) = %q, want ok=%v", c.url, c.class, got, c.ok)
		}
	}
	if got := g.CheckProxyURL("http://127.0.0.1:8080", services.AuthAPIKey); !strings.HasPrefix(got, privateMsg) {
		t.Errorf("message %q", got)
	}
}

// TestEgressLocalProvidersNeverReachMetadata (issue 17 item 11): local
// providers keep loopback and private addresses, but link-local ranges and
// metadata endpoints need the allowlist, at save time and at dial time.
func TestEgressLocalProvidersNeverReachMetadata(t *testing.T) {
	open, _ := services.ParseEgressAllowlist("")
	listed, err := services.ParseEgressAllowlist("169.254.169.254:80, fe80::/10")
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		"http://169.254.169.254/latest/meta-data", "http://169.254.170.2/v2/credentials", "http://[fe80::1]:11434/",
		"http://[fd00:ec2::254]/", "http://100.100.100.200/", "http://metadata.google.internal/computeMetadata/v1/",
		"http://metadata.goog/", "http://instance-data/latest/", "http://2852039166/", "http://[::ffff:169.254.169.254]/",
	} {
		if got := open.CheckBaseURL(raw, services.AuthLocal); got == "" {
			t.Errorf("local provider may save %s", raw)
		}
	}
	for _, raw := range []string{"http://127.0.0.1:11434/v1", "http://localhost:1234", "http://10.0.0.5:8000/v1", "http://[::1]:11434/", "http://192.168.1.9/"} {
		if got := open.CheckBaseURL(raw, services.AuthLocal); got != "" {
			t.Errorf("local provider refused %s: %q", raw, got)
		}
	}
	if got := listed.CheckBaseURL("http://169.254.169.254/", services.AuthLocal); got != "" {
		t.Errorf("allowlisted metadata address refused: %q", got)
	}
	// Dial time: every resolved address.
	meta := netip.MustParseAddr("169.254.169.254")
	if open.AllowedLocalAddr("ollama.internal", meta, "80") || open.Allowed(true, "x", netip.MustParseAddr("fe80::1"), "80") {
		t.Error("local dial to a metadata address allowed")
	}
	if !open.AllowedLocalAddr("ollama.internal", netip.MustParseAddr("10.0.0.5"), "11434") {
		t.Error("local dial to a private address refused")
	}
	if !listed.AllowedLocalAddr("x", meta, "80") {
		t.Error("allowlisted metadata dial refused")
	}
	if open.AllowedAddr("x", netip.MustParseAddr("::7f00:1"), "80") || open.AllowedAddr("x", netip.MustParseAddr("64:ff9b::7f00:1"), "80") {
		t.Error("IPv6 spellings of 127.0.0.1 allowed at dial time")
	}
}
