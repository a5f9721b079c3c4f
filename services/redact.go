package services

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
)

// Redacted replaces a credential in upstream text.
const Redacted = "[redacted]"

// Minimum lengths of what a CredentialRedactor looks for: shorter values would
// redact ordinary words, and a credential that short protects nothing.
const (
	redactMinWhole = 4
	redactMinPart  = 6
)

// credentialForms lists the spellings of secret an upstream may echo: the
// value itself, URL-encoded (query and path), base64 (standard and URL
// alphabets, with and without padding, and the stable middle of its
// encoding at the two other byte alignments, as inside "Basic user:key"),
// hex, JSON-escaped, and the same for each dot-separated part of keys shaped
// "<id>.<secret>" (GLM and others) that is long enough to identify.
func credentialForms(secret string, add func(string)) {
	if len(secret) < redactMinWhole {
		return
	}
	one := func(v string) {
		add(v)
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
		add(hex.EncodeToString([]byte(v)))
		if js, err := json.Marshal(v); err == nil {
			add(string(js[1 : len(js)-1]))
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			add(enc.EncodeToString([]byte(v)))
			add(strings.TrimRight(enc.EncodeToString([]byte(v)), "="))
			for pad := 1; pad <= 2; pad++ {
				s := enc.EncodeToString(append(make([]byte, pad), v...))
				// Characters mixing the pad bytes in, and the tail that
				// depends on what follows, differ with the surroundings.
				start, end := (pad*8+5)/6+1, len(s)-4
				if end-start >= redactMinPart+2 {
					add(s[start:end])
				}
			}
		}
	}
	one(secret)
	if strings.Contains(secret, ".") {
		for _, part := range strings.Split(secret, ".") {
			if len(part) >= redactMinPart {
				one(part)
			}
		}
	}
}

// CredentialRedactor replaces every spelling of a set of credentials. Build
// it once per upstream call (NewCredentialRedactor) and apply it to every
// text that call produced before the text is stored, logged, returned or
// rendered; pattern-based scrubbing (sk-…, Bearer …) runs after it and
// catches only what looks like a secret, this catches the exact one sent.
type CredentialRedactor struct {
	forms []string
	r     *strings.Replacer
}

// NewCredentialRedactor builds the redactor for the given credentials
// (empty ones are ignored).
func NewCredentialRedactor(secrets ...string) *CredentialRedactor {
	seen := map[string]bool{}
	var forms []string
	for _, s := range secrets {
		credentialForms(s, func(f string) {
			if len(f) >= redactMinWhole && !seen[f] {
				seen[f] = true
				forms = append(forms, f)
			}
		})
	}
	if len(forms) == 0 {
		return &CredentialRedactor{}
	}
	// Longest first, so a form that contains another is replaced whole.
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	return &CredentialRedactor{forms: forms, r: strings.NewReplacer(pairs...)}
}

// String redacts s.
func (c *CredentialRedactor) String(s string) string {
	if c == nil || c.r == nil || s == "" {
		return s
	}
	return c.r.Replace(s)
}

// Bytes redacts b, returning b itself when nothing matched.
func (c *CredentialRedactor) Bytes(b []byte) []byte {
	if c == nil || c.r == nil || len(b) == 0 {
		return b
	}
	for _, f := range c.forms {
		if bytes.Contains(b, []byte(f)) {
			return []byte(c.r.Replace(string(b)))
		}
	}
	return b
}

// ConnectionSecrets are the credentials the gateway sends for c: the
// primary credential (API key or OAuth access token) and the outbound
// proxy's password.
func ConnectionSecrets(c *Connection) []string {
	out := []string{c.Credentials.Primary().Reveal()}
	if p := c.ProxyURL.Reveal(); p != "" {
		if u, err := url.Parse(p); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				out = append(out, pw)
			}
		}
	}
	return out
}
