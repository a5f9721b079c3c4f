package services_test

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"switchyard/services"
)

// TestRedactCredentialsEveryForm (issue 17 item 4): the exact credential
// sent, URL-encoded, base64 (also inside a longer blob such as Basic auth)
// and each dot-separated half of <id>.<secret> keys are replaced; before,
// only text matching an sk-/Bearer/long-run pattern was, so an 18-character
// key or a GLM key's secret half went through verbatim.
func TestRedactCredentialsEveryForm(t *testing.T) {
	plain := "AbCdEf123456GhIjKl"
	glmID, glmSecret := "0123456789abcdef0123456789abcdef", "Zq9sEcReTgLm7Tok"
	glm := glmID + "." + glmSecret
	slashy := "k+y/with=odd&chars"
	texts := map[string]struct{ text, secret string }{
		"verbatim":        {"Incorrect API key provided: " + plain + ".", plain},
		"url-encoded":     {"GET /check?key=" + url.QueryEscape(slashy) + " failed", slashy},
		"path-escaped":    {"no such key /keys/" + url.PathEscape(slashy), slashy},
		"base64":          {"token " + base64.StdEncoding.EncodeToString([]byte(plain)) + " invalid", plain},
		"base64 raw url":  {"token " + base64.RawURLEncoding.EncodeToString([]byte(slashy)) + " invalid", slashy},
		"basic auth":      {"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+plain)), plain},
		"glm whole":       {"invalid api key " + glm, glm},
		"glm secret half": {"secret " + glmSecret + " does not match id", glm},
		"glm id half":     {"unknown key id " + glmID, glm},
		"json-escaped":    {`{"error":"bad key k\u003cey\u0026AbCdEf"}`, "k<ey&AbCdEf"},
		"twice":           {plain + " and again " + plain, plain},
		"hex":             {"key hex 416243644566313233343536 rejected", "AbCdEf123456"},
	}
	for name, c := range texts {
		got := redactCredentials(c.text, c.secret)
		for _, part := range append([]string{c.secret}, strings.Split(c.secret, ".")...) {
			if len(part) >= 6 && strings.Contains(got, part) {
				t.Errorf("%s: %q still holds %q", name, got, part)
			}
		}
		if !strings.Contains(got, services.Redacted) {
			t.Errorf("%s: nothing redacted in %q", name, got)
		}
	}
	if got := redactCredentials("base64 "+base64.StdEncoding.EncodeToString([]byte(plain)), plain); strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(plain))) {
		t.Errorf("base64 form kept: %q", got)
	}
	// Text without the credential is returned as is; short credentials and
	// short halves do not eat ordinary words.
	if got := redactCredentials("rate limited, retry in 1s", plain); got != "rate limited, retry in 1s" {
		t.Errorf("unrelated text changed: %q", got)
	}
	if got := redactCredentials("the key is abc", "abc"); got != "the key is abc" {
		t.Errorf("3-character credential redacted: %q", got)
	}
	if got := redactCredentials("model gpt.x failed", "ab.gpt.x9"); got != "model gpt.x failed" {
		t.Errorf("short halves redacted: %q", got)
	}
	rd := services.NewCredentialRedactor(plain, "")
	if b := []byte("nothing here"); &rd.Bytes(b)[0] != &b[0] {
		t.Error("Bytes copied a text without the credential")
	}
	// The proxy password travels too.
	c := &services.Connection{Credentials: services.Credentials{APIKey: services.Secret(plain)}, ProxyURL: "http://ops:Pr0xyPassw0rd@proxy.example:3128"}
	if got := redactCredentials("407 for Pr0xyPassw0rd", services.ConnectionSecrets(c)...); strings.Contains(got, "Pr0xyPassw0rd") {
		t.Errorf("proxy password kept: %q", got)
	}
}

// redactCredentials redacts every form of secrets in s, as one redactor does.
func redactCredentials(s string, secrets ...string) string {
	return services.NewCredentialRedactor(secrets...).String(s)
}
