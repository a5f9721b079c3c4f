package services

import (
	"regexp"
	"strings"
)

// AuthClass selects default thresholds (breaker, cooldown) and which
// credentials a connection needs.
type AuthClass string

const (
	AuthOAuth  AuthClass = "oauth"
	AuthAPIKey AuthClass = "apikey"
	AuthLocal  AuthClass = "local"
)

// WireFormat is the API dialect a provider speaks upstream.
type WireFormat string

const (
	FormatOpenAI    WireFormat = "openai"
	FormatAnthropic WireFormat = "anthropic"
)

// AuthHeaderStyle says how a credential travels upstream.
type AuthHeaderStyle string

const (
	AuthHeaderBearer  AuthHeaderStyle = "bearer"    // Authorization: Bearer <key>
	AuthHeaderXAPIKey AuthHeaderStyle = "x-api-key" // x-api-key: <key> (+ anthropic-version)
	AuthHeaderNone    AuthHeaderStyle = "none"      // local servers without auth
)

// Provider is one upstream service kind: a catalogue entry or a custom node.
type Provider struct {
	ID         string
	Alias      string
	Name       string
	Format     WireFormat
	BaseURL    string
	AuthHeader AuthHeaderStyle
	AuthClass  AuthClass
	// PerModelQuota marks providers whose 429s are usually per model, not per account.
	PerModelQuota bool
	// PassthroughModels marks providers that accept any model id the client names.
	PassthroughModels bool
	// ListsModels says GET {base}/models works, used by connection tests.
	ListsModels bool
	// Models are well-known model ids, used for bare-name resolution and datalists.
	Models []string
	// Custom marks an operator-defined openai- or anthropic-compatible node.
	Custom bool
}

// builtinProviders is the catalogue, in resolution order. It is data: adding
// a provider is adding a row.
var builtinProviders = []Provider{
	{ID: "openai", Alias: "oai", Name: "OpenAI", Format: FormatOpenAI, BaseURL: "https://api.openai.com/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey, ListsModels: true,
		Models: []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o3", "o4-mini", "gpt-5", "gpt-5-mini"}},
	{ID: "anthropic", Alias: "cc", Name: "Anthropic", Format: FormatAnthropic, BaseURL: "https://api.anthropic.com/v1", AuthHeader: AuthHeaderXAPIKey, AuthClass: AuthAPIKey, ListsModels: true,
		Models: []string{"claude-sonnet-4", "claude-opus-4", "claude-3-5-haiku-latest", "claude-sonnet-4-5"}},
	{ID: "gemini", Alias: "gc", Name: "Google Gemini (OpenAI-compatible)", Format: FormatOpenAI, BaseURL: "https://generativelanguage.googleapis.com/v1beta/openai", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey, PerModelQuota: true, ListsModels: true,
		Models: []string{"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.0-flash"}},
	{ID: "openrouter", Alias: "or", Name: "OpenRouter", Format: FormatOpenAI, BaseURL: "https://openrouter.ai/api/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey, PassthroughModels: true, ListsModels: true},
	{ID: "deepseek", Alias: "ds", Name: "DeepSeek", Format: FormatOpenAI, BaseURL: "https://api.deepseek.com/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey, ListsModels: true,
		Models: []string{"deepseek-chat", "deepseek-reasoner"}},
	{ID: "groq", Alias: "groq", Name: "Groq", Format: FormatOpenAI, BaseURL: "https://api.groq.com/openai/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey, PerModelQuota: true, ListsModels: true,
		Models: []string{"llama-3.3-70b-versatile", "llama-3.1-8b-instant"}},
	{ID: "mistral", Alias: "mis", Name: "Mistral", Format: FormatOpenAI, BaseURL: "https://api.mistral.ai/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey, ListsModels: true,
		Models: []string{"mistral-large-latest", "mistral-small-latest", "codestral-latest"}},
	{ID: "glm", Alias: "glm", Name: "Zhipu GLM", Format: FormatOpenAI, BaseURL: "https://api.z.ai/api/paas/v4", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey,
		Models: []string{"glm-4.6", "glm-4.5", "glm-4.5-air"}},
	{ID: "minimax", Alias: "mm", Name: "MiniMax", Format: FormatAnthropic, BaseURL: "https://api.minimax.io/anthropic/v1", AuthHeader: AuthHeaderXAPIKey, AuthClass: AuthAPIKey,
		Models: []string{"MiniMax-M2"}},
	{ID: "agentrouter", Alias: "ar", Name: "AgentRouter", Format: FormatOpenAI, BaseURL: "https://agentrouter.org/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey, PassthroughModels: true},
	{ID: "opencode", Alias: "oc", Name: "OpenCode Zen", Format: FormatOpenAI, BaseURL: "https://opencode.ai/zen/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthAPIKey, PassthroughModels: true},
	{ID: "codex", Alias: "cx", Name: "OpenAI Codex (OAuth)", Format: FormatOpenAI, BaseURL: "https://chatgpt.com/backend-api/codex", AuthHeader: AuthHeaderBearer, AuthClass: AuthOAuth, PerModelQuota: true,
		Models: []string{"gpt-5", "gpt-5-codex"}},
	{ID: "claude-code", Alias: "ccd", Name: "Claude Code (OAuth)", Format: FormatAnthropic, BaseURL: "https://api.anthropic.com/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthOAuth,
		Models: []string{"claude-sonnet-4", "claude-opus-4"}},
	{ID: "ollama", Alias: "ol", Name: "Ollama", Format: FormatOpenAI, BaseURL: "http://127.0.0.1:11434/v1", AuthHeader: AuthHeaderNone, AuthClass: AuthLocal, PassthroughModels: true, ListsModels: true},
	{ID: "lmstudio", Alias: "lms", Name: "LM Studio", Format: FormatOpenAI, BaseURL: "http://127.0.0.1:1234/v1", AuthHeader: AuthHeaderNone, AuthClass: AuthLocal, PassthroughModels: true, ListsModels: true},
	{ID: "vllm", Alias: "vllm", Name: "vLLM", Format: FormatOpenAI, BaseURL: "http://127.0.0.1:8000/v1", AuthHeader: AuthHeaderBearer, AuthClass: AuthLocal, PassthroughModels: true, ListsModels: true},
}

// CustomProvider is an operator-defined compatible node, persisted so later
// connections of it omit the "custom" block.
type CustomProvider struct {
	ID        string
	Format    WireFormat
	AuthClass AuthClass
	Models    []string // known model ids, listed in /v1/models
}

// AsProvider expands a custom node into a catalogue entry. Custom nodes have no
// default base URL: each connection names its own.
func (c CustomProvider) AsProvider() Provider {
	header := AuthHeaderBearer
	if c.Format == FormatAnthropic {
		header = AuthHeaderXAPIKey
	}
	if c.AuthClass == AuthLocal {
		header = AuthHeaderNone
	}
	name := "Custom OpenAI-compatible"
	if c.Format == FormatAnthropic {
		name = "Custom Anthropic-compatible"
	}
	// A custom node accepts any model id (resolution never needs a list),
	// but it is not a passthrough aggregator: its 429s concern the account.
	return Provider{ID: c.ID, Alias: c.ID, Name: name + " (" + c.ID + ")", Format: c.Format,
		AuthHeader: header, AuthClass: c.AuthClass, ListsModels: c.Format == FormatOpenAI, Custom: true,
		Models: append([]string(nil), c.Models...)}
}

var providerSlug = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,39}$`)

// Catalogue answers provider look-ups over built-in entries and custom nodes.
// It is an immutable value: the service that owns custom nodes builds a new
// one when they change.
type Catalogue struct {
	providers []Provider
	byID      map[string]int
	byAlias   map[string]int
}

// NewCatalogue builds a catalogue of the built-ins followed by custom nodes
// (in the given order, which is creation order).
func NewCatalogue(custom []CustomProvider) *Catalogue {
	c := &Catalogue{byID: map[string]int{}, byAlias: map[string]int{}}
	for _, p := range builtinProviders {
		c.add(p)
	}
	for _, cp := range custom {
		if _, dup := c.byID[cp.ID]; !dup {
			c.add(cp.AsProvider())
		}
	}
	return c
}

func (c *Catalogue) add(p Provider) {
	i := len(c.providers)
	c.providers = append(c.providers, p)
	c.byID[p.ID] = i
	if p.Alias != "" {
		if _, taken := c.byAlias[p.Alias]; !taken {
			c.byAlias[p.Alias] = i
		}
	}
}

// All returns every provider in resolution order (custom nodes last).
func (c *Catalogue) All() []Provider { return c.providers }

// Get finds a provider by its canonical id.
func (c *Catalogue) Get(id string) (Provider, bool) {
	i, ok := c.byID[id]
	if !ok {
		return Provider{}, false
	}
	return c.providers[i], true
}

// Lookup matches a model-name prefix case-insensitively against provider ids,
// then aliases (10-gateway-api §4.2 step 3).
func (c *Catalogue) Lookup(prefix string) (Provider, bool) {
	p := strings.ToLower(prefix)
	if i, ok := c.byID[p]; ok {
		return c.providers[i], true
	}
	if i, ok := c.byAlias[p]; ok {
		return c.providers[i], true
	}
	return Provider{}, false
}
