package services_test

import (
	"context"
	"testing"

	"switchyard/services"
)

// TestConnectionRepointNeedsCredential (issue 17 item 12, the rule): a
// changed baseUrl or proxyUrl is refused while the stored credential would
// silently follow it; typing the credential again or keepCredentials: true
// lets it through. Before, any edit could send the stored key elsewhere.
func TestConnectionRepointNeedsCredential(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("openai"), Name: services.Some("main"),
		APIKey: services.Some("sk-repoint-canary-0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, in services.ConnectionInput, field string) {
		t.Helper()
		_, err := e.conns.Update(ctx, c.ID, in)
		if f := fieldsOf(t, err); f[field] != services.MsgRepointCredential {
			t.Errorf("%s: fields %v", what, f)
		}
		got, _ := e.conns.Get(ctx, c.ID)
		if got.BaseURL != c.BaseURL || got.ProxyURL != c.ProxyURL {
			t.Errorf("%s: stored despite the refusal: %q %q", what, got.BaseURL, got.ProxyURL.Reveal())
		}
	}
	allowed := func(what string, in services.ConnectionInput) {
		t.Helper()
		var err error
		if c, err = e.conns.Update(ctx, c.ID, in); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	refused("new base URL", services.ConnectionInput{BaseURL: services.Some("https://collector.example.net/v1")}, "apiKey")
	refused("new proxy", services.ConnectionInput{ProxyURL: services.Some("http://proxy.example.net:3128")}, "apiKey")
	refused("keepCredentials false", services.ConnectionInput{BaseURL: services.Some("https://collector.example.net/v1"), KeepCredentials: services.Some(false)}, "apiKey")
	// The same destination written out is no change (the edit form sends
	// the catalogue's default back).
	allowed("default base URL written out", services.ConnectionInput{BaseURL: services.Some("https://api.openai.com/v1"), Name: services.Some("main")})
	allowed("other fields", services.ConnectionInput{Priority: services.Some(3)})
	allowed("credential typed again", services.ConnectionInput{BaseURL: services.Some("https://eu.api.example.com/v1"), APIKey: services.Some("sk-repoint-canary-0123456789")})
	allowed("keeping confirmed", services.ConnectionInput{ProxyURL: services.Some("http://proxy.example.net:3128"), KeepCredentials: services.Some(true)})
	allowed("proxy removed with the key typed", services.ConnectionInput{ProxyURL: services.Null[string](), APIKey: services.Some("sk-other-key-0123456789")})
	// Nothing stored, nothing to protect: a local provider without a key.
	l, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("ollama"), Name: services.Some("box"), BaseURL: services.Some("http://127.0.0.1:11434/v1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.conns.Update(ctx, l.ID, services.ConnectionInput{BaseURL: services.Some("http://10.0.0.9:11434/v1")}); err != nil {
		t.Errorf("keyless local connection: %v", err)
	}
}
