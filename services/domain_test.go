package services_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

func TestMatchPattern(t *testing.T) {
	cases := []struct {
		p, name string
		want    bool
	}{
		{"openai/gpt-4o", "openai/gpt-4o", true},
		{"openai/gpt-4o", "openai/gpt-4o-mini", false},
		{"openai/*", "openai/gpt-4o", true},
		{"*/gpt-4o*", "openrouter/openai/gpt-4o-mini", true},
		{"*", "anything/at/all", true},
		{"team-*-prod", "team-a-prod", true},
		{"team-*-prod", "team-a-dev", false},
		{"OpenAI/*", "openai/gpt-4o", false},
	}
	for _, c := range cases {
		if got := services.MatchPattern(c.p, c.name); got != c.want {
			t.Errorf("MatchPattern(%q, %q) = %v, want %v", c.p, c.name, got, c.want)
		}
	}
}

func TestCatalogueLookup(t *testing.T) {
	cat := services.NewCatalogue([]services.CustomProvider{{ID: "my-node", Format: services.FormatAnthropic, AuthClass: services.AuthAPIKey}})
	for _, name := range []string{"openai", "anthropic", "gemini", "openrouter", "deepseek", "groq", "mistral", "glm", "minimax", "agentrouter", "opencode", "ollama", "lmstudio", "vllm"} {
		if _, ok := cat.Get(name); !ok {
			t.Errorf("catalogue lacks %s", name)
		}
	}
	if p, ok := cat.Lookup("DS"); !ok || p.ID != "deepseek" {
		t.Errorf("alias ds → %v %v", p.ID, ok)
	}
	if p, ok := cat.Lookup("my-node"); !ok || !p.Custom || p.Format != services.FormatAnthropic || p.AuthHeader != services.AuthHeaderXAPIKey {
		t.Errorf("custom node: %+v", p)
	}
	all := cat.All()
	if all[len(all)-1].ID != "my-node" {
		t.Error("custom nodes must come last")
	}
}

func TestEgressGuard(t *testing.T) {
	g, err := services.ParseEgressAllowlist("127.0.0.1:9999, 10.1.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url   string
		class services.AuthClass
		ok    bool
	}{
		{"https://api.openai.com/v1", services.AuthAPIKey, true},
		{"http://127.0.0.1:9999/v1", services.AuthAPIKey, true},
		{"http://127.0.0.1:8080/v1", services.AuthAPIKey, false},
		{"http://localhost:8080/v1", services.AuthAPIKey, false},
		{"http://10.1.2.3/v1", services.AuthAPIKey, true},
		{"http://10.2.0.1/v1", services.AuthAPIKey, false},
		{"http://169.254.169.254/latest", services.AuthAPIKey, false},
		{"http://[::1]:11434/v1", services.AuthAPIKey, false},
		{"http://127.0.0.1:11434/v1", services.AuthLocal, true},
		{"ftp://example.com", services.AuthAPIKey, false},
		{"http://user:pw@example.com", services.AuthAPIKey, false},
	}
	for _, c := range cases {
		if got := g.CheckBaseURL(c.url, c.class) == ""; got != c.ok {
			t.Errorf("CheckBaseURL(%q, %s) ok=%v, want %v", c.url, c.class, got, c.ok)
		}
	}
	if _, err := services.ParseEgressAllowlist("not an entry"); err == nil {
		t.Error("bad allowlist entry accepted")
	}
}

type env struct {
	conns  *services.Connections
	combos *services.Combos
	keys   *services.Keys
	clock  *testkit.FakeClock
}

func newEnv(t *testing.T) env {
	t.Helper()
	db := testkit.OpenDB(t)
	clock := testkit.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	cs := models.NewConnectionStore(db, testkit.Keyring(t))
	g, _ := services.ParseEgressAllowlist("")
	holder := services.NewCatalogueHolder(services.NewCatalogue(nil))
	keys, err := services.NewKeys(context.Background(), models.NewKeyStore(db), cs, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	conns := services.NewConnections(cs, clock, g, holder, nil)
	conns.UseReferenceStores(models.NewComboStore(db), models.NewKeyStore(db))
	return env{conns: conns, combos: services.NewCombos(models.NewComboStore(db), cs, clock, holder, nil), keys: keys, clock: clock}
}

func fieldsOf(t *testing.T, err error) map[string]string {
	t.Helper()
	var verr *services.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("want ValidationError, got %v", err)
	}
	return verr.Fields
}

func TestConnectionValidation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f := fieldsOf(t, func() error {
		_, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("nope"), Name: services.Some("x")})
		return err
	}())
	if !strings.Contains(f["provider"], "Unknown provider") {
		t.Errorf("unknown provider: %v", f)
	}
	_, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("openai"), Name: services.Some("a"),
		APIKey: services.Some("sk-1"), BaseURL: services.Some("http://10.0.0.5/v1"), MaxConcurrent: services.Some(-1),
		EgressGroup: services.Some("bad group!"), QuotaReservePercent: services.Some(60), ProxyURL: services.Some("ftp://x")})
	f = fieldsOf(t, err)
	for _, k := range []string{"baseUrl", "maxConcurrent", "egressGroup", "quotaReservePercent", "proxyUrl"} {
		if f[k] == "" {
			t.Errorf("no error for %s: %v", k, f)
		}
	}
	if _, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("openai"), Name: services.Some("a")}); fieldsOf(t, err)["apiKey"] != "Paste the provider's API key." {
		t.Errorf("missing key: %v", err)
	}
	c, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("openai"), Name: services.Some("a"), APIKey: services.Some("sk-1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("openai"), Name: services.Some("a"), APIKey: services.Some("sk-2")}); !strings.Contains(fieldsOf(t, err)["name"], "already has a connection named") {
		t.Errorf("duplicate name: %v", err)
	}
	// Local providers may use loopback.
	if _, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("ollama"), Name: services.Some("box"), BaseURL: services.Some("http://127.0.0.1:11434/v1")}); err != nil {
		t.Errorf("local loopback: %v", err)
	}
	_ = c
	list, _ := e.conns.List(ctx, services.ConnectionFilter{})
	if len(list) != 2 {
		t.Fatalf("list: %d", len(list))
	}
	// Custom node.
	cn, err := e.conns.Create(ctx, services.ConnectionInput{Provider: services.Some("my-llm"), Custom: services.Some(services.CustomSpec{WireFormat: "anthropic", AuthClass: "local"}),
		Name: services.Some("n"), BaseURL: services.Some("http://127.0.0.1:9000/v1")})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := e.conns.Catalogue().Get(cn.Provider); !ok || !p.Custom {
		t.Fatalf("custom provider not in catalogue")
	}
}

func TestComboValidation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, _, err := e.combos.Create(ctx, services.ComboInput{Name: "fast", Targets: []services.Target{{Provider: "oai", Model: "gpt-4o"}}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Targets[0].Provider != "openai" || len(a.Targets[0].ID) < 6 || a.Strategy != "priority" {
		t.Fatalf("normalised: %+v", a)
	}
	if _, _, err := e.combos.Create(ctx, services.ComboInput{Name: "FAST", Targets: []services.Target{{Provider: "openai", Model: "x"}}}); !strings.Contains(fieldsOf(t, err)["name"], "already exists") {
		t.Errorf("case-insensitive duplicate: %v", err)
	}
	w := 101
	_, _, err = e.combos.Create(ctx, services.ComboInput{Name: "combo/x", Strategy: "bogus", Config: map[string]any{"maxRetries": float64(9), "nope": true},
		Targets: []services.Target{{Provider: "openai", Model: "m", Weight: &w}, {Provider: "openai", Model: "m", Weight: &w}}})
	f := fieldsOf(t, err)
	for _, k := range []string{"name", "strategy", "config.maxRetries", "config.nope", "targets.0.weight", "targets.1.model"} {
		if f[k] == "" {
			t.Errorf("no error for %s: %v", k, f)
		}
	}
	// Cycles are refused.
	b, _, err := e.combos.Create(ctx, services.ComboInput{Name: "outer", Targets: []services.Target{{Kind: "combo", ComboID: a.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.combos.Replace(ctx, a.ID, services.ComboInput{Name: "fast", Targets: []services.Target{{Provider: "openai", Model: "gpt-4o"}, {Kind: "combo", ComboID: b.ID}}})
	if !strings.Contains(fieldsOf(t, err)["targets.1.comboId"], "refers back") {
		t.Errorf("cycle: %v", err)
	}
	// Delete refuses while referenced unless forced.
	if err := e.combos.Delete(ctx, a.ID, false); !errors.Is(err, services.ErrConflict) {
		t.Errorf("referenced delete: %v", err)
	}
	if err := e.combos.Delete(ctx, a.ID, true); err != nil {
		t.Fatal(err)
	}
	got, _ := e.combos.Get(ctx, b.ID)
	if len(got.Targets) != 0 {
		t.Errorf("forced delete left the reference: %+v", got.Targets)
	}
}

func TestKeysAuthenticateAndPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k, secret, err := e.keys.Create(ctx, services.KeyInput{Name: services.Some("agent"), AllowedModels: services.Some([]string{"openai/*"})})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "sk-sy-") || len(secret) != 49 || k.Prefix != secret[:12] || k.KeyHash != services.SHA256Hex(secret) {
		t.Fatalf("key shape: %q %+v", secret, k)
	}
	if _, err := e.keys.Authenticate(secret); err != nil {
		t.Fatal(err)
	}
	if !k.AllowsModel("openai/gpt-4o") || k.AllowsModel("anthropic/claude") || !k.AllowsCombo("any") {
		t.Error("policy")
	}
	for _, bad := range []string{"", "sk-sy-short", "sk-sy-" + strings.Repeat("A", 43)} {
		if _, err := e.keys.Authenticate(bad); !errors.Is(err, services.ErrUnauthorized) {
			t.Errorf("Authenticate(%q) = %v", bad, err)
		}
	}
	if _, err := e.keys.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	var kerr *services.KeyAuthError
	if _, err := e.keys.Authenticate(secret); !errors.As(err, &kerr) || kerr.Reason != "revoked" {
		t.Fatalf("revoked key: %v", err)
	}
	exp := e.clock.Now().Add(time.Hour)
	k2, s2, _ := e.keys.Create(ctx, services.KeyInput{Name: services.Some("temp"), ExpiresAt: services.Some(exp)})
	e.clock.Advance(2 * time.Hour)
	if _, err := e.keys.Authenticate(s2); !errors.As(err, &kerr) || kerr.Reason != "expired" {
		t.Fatalf("expired key: %v", err)
	}
	if err := e.keys.Delete(ctx, k2.ID); !errors.Is(err, services.ErrConflict) {
		t.Fatalf("delete unrevoked: %v", err)
	}
	// lease:exclusive needs allowed connections.
	_, _, err = e.keys.Create(ctx, services.KeyInput{Name: services.Some("lease"), Scopes: services.Some([]string{"inference", "lease:exclusive"})})
	if fieldsOf(t, err)["allowedConnections"] == "" {
		t.Fatal("lease key without connections accepted")
	}
}

// Static nesting deeper than maxComboDepth is refused on save, and an
// unknown provider names its field.
func TestComboDepthAndProviderChecks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	prev, _, err := e.combos.Create(ctx, services.ComboInput{Name: "d1", Targets: []services.Target{{Provider: "openai", Model: "gpt-4o"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"d2", "d3"} {
		if prev, _, err = e.combos.Create(ctx, services.ComboInput{Name: name, Targets: []services.Target{{Kind: "combo", ComboID: prev.ID}}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	_, _, err = e.combos.Create(ctx, services.ComboInput{Name: "d4", Targets: []services.Target{{Kind: "combo", ComboID: prev.ID}}})
	if fieldsOf(t, err)["targets"] == "" && fieldsOf(t, err)["targets.0.comboId"] == "" {
		t.Fatalf("depth 4 with maxComboDepth 3 accepted: %v", err)
	}
	if _, _, err := e.combos.Create(ctx, services.ComboInput{Name: "d4", Config: map[string]any{"maxComboDepth": float64(4)},
		Targets: []services.Target{{Kind: "combo", ComboID: prev.ID}}}); err != nil {
		t.Fatalf("depth 4 with maxComboDepth 4: %v", err)
	}
	_, _, err = e.combos.Create(ctx, services.ComboInput{Name: "nope", Targets: []services.Target{{Provider: "no-such", Model: "m"}}})
	if fieldsOf(t, err)["targets.0.provider"] == "" {
		t.Fatalf("unknown provider: %v", err)
	}
}
