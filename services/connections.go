package services

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Terminal statuses (binding decision 4): never overwritten by a transient
// state; only new credentials or an admin reset clear them.
const (
	TerminalBanned           = "banned"
	TerminalExpired          = "expired"
	TerminalCreditsExhausted = "credits_exhausted"
)

// Connection statuses derived from state: disabled > terminal > cooling > active.
const (
	StatusActive   = "active"
	StatusCooling  = "cooling"
	StatusDisabled = "disabled"
)

// Tiers used by the auto strategy.
var connectionTiers = []string{"ultra", "pro", "standard", "free"}

// Credentials are a connection's upstream secrets, sealed at rest.
type Credentials struct {
	APIKey Secret      `json:"apiKey,omitempty"`
	OAuth  *OAuthGrant `json:"oauth,omitempty"`
}

// OAuthGrant holds the tokens of an OAuth subscription connection.
type OAuthGrant struct {
	AccessToken  Secret     `json:"accessToken"`
	RefreshToken Secret     `json:"refreshToken,omitempty"`
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
}

// Primary is the credential sent upstream: the API key, else the access token.
func (c Credentials) Primary() Secret {
	if c.APIKey != "" {
		return c.APIKey
	}
	if c.OAuth != nil {
		return c.OAuth.AccessToken
	}
	return ""
}

// RateLimitOverrides are per-connection overrides of the request-queue
// settings; nil inherits.
type RateLimitOverrides struct {
	RequestsPerMinute        *int `json:"requestsPerMinute"`
	MinTimeBetweenRequestsMs *int `json:"minTimeBetweenRequestsMs"`
	ConcurrentRequests       *int `json:"concurrentRequests"`
	MaxWaitMs                *int `json:"maxWaitMs"`
	MaxQueueDepth            *int `json:"maxQueueDepth"`
	QueueWaitMs              *int `json:"queueWaitMs"`
}

// ConnectionState is the live resilience state persisted on the row.
type ConnectionState struct {
	RateLimitedUntil *time.Time
	BackoffLevel     int
	TerminalStatus   string // "" or a Terminal* value
	TerminalAt       *time.Time
	LastError        string // scrubbed, ≤ 1024 chars
	LastErrorReason  string // the error type, a reason of 20-resilience §1.4
	LastErrorStatus  int
	ErrorCode        string // upstream error code, e.g. "model_not_found"
	LastErrorAt      *time.Time
	AuthFailCount    int
	// LastAuthFailAt is when the auth ladder last counted a failure: its
	// 24 h restart window is measured from it (20-resilience §4.3), not from
	// LastErrorAt, which every later failure moves.
	LastAuthFailAt *time.Time
	RejectStreak   int
	LastRejectAt   *time.Time
	// CooldownReason is the reason (20-resilience §1.4) that wrote the
	// running cooldown deadline, "" when none. Failures absorbed during the
	// episode change LastErrorReason but not this; it decides whether a
	// cooldown-aware wait may sleep the deadline out (§9).
	CooldownReason string
	TestStatus     string // "", "ok", "failed"
}

// TestResult is the outcome of the last connection test.
type TestResult struct {
	At        time.Time `json:"at"`
	OK        bool      `json:"ok"`
	Status    int       `json:"status"`
	LatencyMs int64     `json:"latencyMs"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	Models    []string  `json:"models,omitempty"`
}

// Connection is one account of a provider.
type Connection struct {
	ID                  string
	Provider            string
	Name                string
	AuthClass           AuthClass
	Enabled             bool
	Priority            int
	BaseURL             string // "" = the provider's default
	DefaultModel        string
	Credentials         Credentials
	MaxConcurrent       *int
	RateLimitProtection *bool
	RateLimitOverrides  RateLimitOverrides
	ProxyURL            Secret // may carry a password: sealed at rest, masked on display
	EgressGroup         string
	DisableCooling      bool
	QuotaReservePercent int
	Tier                string
	State               ConnectionState
	LastUsedAt          *time.Time
	LastTest            *TestResult
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// Status derives the display status at now.
func (c Connection) Status(now time.Time) string {
	switch {
	case !c.Enabled:
		return StatusDisabled
	case c.State.TerminalStatus != "":
		return c.State.TerminalStatus
	case c.State.RateLimitedUntil != nil && c.State.RateLimitedUntil.After(now):
		return StatusCooling
	}
	return StatusActive
}

// EffectiveBaseURL is the override or the provider default.
func (c Connection) EffectiveBaseURL(p Provider) string {
	if c.BaseURL != "" {
		return c.BaseURL
	}
	return p.BaseURL
}

// MaskedProxyURL shows the proxy with its password replaced by ****.
func (c Connection) MaskedProxyURL() string { return MaskURL(c.ProxyURL.Reveal()) }

// MaskURL replaces the password of a URL with ****.
func MaskURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "****"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxx")
			return strings.Replace(u.String(), ":xxxx@", ":****@", 1)
		}
	}
	return u.String()
}

// ConnectionFilter narrows a connection list.
type ConnectionFilter struct {
	Provider string
	Status   string
}

// ConnectionStore persists connections; models implements it.
type ConnectionStore interface {
	ListConnections(ctx context.Context) ([]Connection, error)
	FindConnectionByID(ctx context.Context, id string) (Connection, error)
	CreateConnection(ctx context.Context, c Connection) error
	// UpdateConnection writes every field of c (configuration and state).
	UpdateConnection(ctx context.Context, c Connection) error
	DeleteConnection(ctx context.Context, id string) error
	ListCustomProviders(ctx context.Context) ([]CustomProvider, error)
	CreateCustomProvider(ctx context.Context, p CustomProvider) error
	SetCustomProviderModels(ctx context.Context, id string, models []string) error
}

// CustomSpec declares a new custom compatible provider on create.
type CustomSpec struct {
	WireFormat string `json:"wireFormat"`
	AuthClass  string `json:"authClass"`
}

// OAuthInput carries OAuth tokens on create or edit.
type OAuthInput struct {
	AccessToken  string     `json:"accessToken"`
	RefreshToken string     `json:"refreshToken"`
	ExpiresAt    *time.Time `json:"expiresAt"`
}

// ConnectionInput is a create or edit request. Absent fields keep their
// value on edit; on create they take the defaults of 40-admin-api §5.
type ConnectionInput struct {
	Provider            Opt[string]             `json:"provider"`
	Custom              Opt[CustomSpec]         `json:"custom"`
	Name                Opt[string]             `json:"name"`
	APIKey              Opt[string]             `json:"apiKey"`
	OAuth               Opt[OAuthInput]         `json:"oauth"`
	BaseURL             Opt[string]             `json:"baseUrl"`
	DefaultModel        Opt[string]             `json:"defaultModel"`
	Priority            Opt[int]                `json:"priority"`
	Enabled             Opt[bool]               `json:"enabled"`
	MaxConcurrent       Opt[int]                `json:"maxConcurrent"`
	RateLimitProtection Opt[bool]               `json:"rateLimitProtection"`
	RateLimitOverrides  Opt[RateLimitOverrides] `json:"rateLimitOverrides"`
	ProxyURL            Opt[string]             `json:"proxyUrl"`
	EgressGroup         Opt[string]             `json:"egressGroup"`
	DisableCooling      Opt[bool]               `json:"disableCooling"`
	QuotaReservePercent Opt[int]                `json:"quotaReservePercent"`
	Tier                Opt[string]             `json:"tier"`
	// KeepCredentials (edit only, write-only) confirms that the stored
	// credential may be sent to a changed baseUrl or proxyUrl; without it,
	// or a credential entered again, such a change is refused.
	KeepCredentials Opt[bool] `json:"keepCredentials"`
	// CurrentPassword (edit only, write-only) is the admin password that
	// an admin session must add to keepCredentials; the handlers check it
	// (a manage key has no password).
	CurrentPassword Opt[string] `json:"currentPassword"`
}

// Messages of the re-point rule (issue 17 item 12).
const (
	MsgRepointCredential = "The base URL or proxy changed: enter the credential again, or confirm that the stored one may be sent to the new address."
	MsgConfirmPassword   = "Enter your admin password to keep the stored credential."
)

// NewCredentialsIn reports whether in carries a credential typed in.
func (in ConnectionInput) NewCredentialsIn() bool {
	return (in.APIKey.Set && !in.APIKey.Null && in.APIKey.V != "") || (in.OAuth.Set && !in.OAuth.Null)
}

// KeepsCredentials reports an explicit keepCredentials: true.
func (in ConnectionInput) KeepsCredentials() bool {
	return in.KeepCredentials.Set && !in.KeepCredentials.Null && in.KeepCredentials.V
}

var egressGroupRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Connections is the service behind the Connections page and /api/connections.
type Connections struct {
	store     ConnectionStore
	clock     Clock
	egress    *EgressGuard
	catalogue func() *Catalogue
	setCat    func(*Catalogue)
	// feed carries every committed change to the caches (the gateway's
	// snapshot, the catalogue); see Connections.publish.
	feed  ChangeFeed
	catMu sync.Mutex
	// onCredentials runs after new credentials were saved for a connection
	// that was terminal: the resilience state owner clears it (BD 4).
	onCredentials func(ctx context.Context, id string)
	onDelete      func(ctx context.Context, id string)
	comboStore    ComboStore
	keyStore      KeyStore
}

// NewConnections builds the service. It publishes every change on feed (nil
// = a feed of its own, for a service used alone) and subscribes the
// catalogue to ChangeCatalogue: cat is rebuilt from the stored custom
// providers whenever one changes, here or on another replica.
func NewConnections(store ConnectionStore, clock Clock, egress *EgressGuard, cat *CatalogueHolder, feed ChangeFeed) *Connections {
	if feed == nil {
		feed = NewLocalFeed(nil)
	}
	s := &Connections{store: store, clock: clock, egress: egress, catalogue: cat.Get, setCat: cat.Set, feed: feed}
	feed.Subscribe(ChangeCatalogue, s.reloadCatalogue)
	return s
}

// reloadCatalogue is the ChangeCatalogue subscriber: it rebuilds the
// catalogue from the stored custom providers.
func (s *Connections) reloadCatalogue(ctx context.Context, _ Change) error {
	s.catMu.Lock() // one reload at a time: an older read never replaces a newer
	defer s.catMu.Unlock()
	customs, err := s.store.ListCustomProviders(ctx)
	if err != nil {
		return fmt.Errorf("services: reload catalogue: %w", err)
	}
	s.setCat(NewCatalogue(customs))
	return nil
}

// publish tells the caches that a write committed; their errors come back
// (wrapped) so the write reports a cache it could not refresh.
func (s *Connections) publish(ctx context.Context, kind ChangeKind, id, payload string) error {
	return publish(ctx, s.feed, Change{Kind: kind, Key: id, Payload: payload})
}

// Catalogue returns the current provider catalogue.
func (s *Connections) Catalogue() *Catalogue { return s.catalogue() }

// List returns connections by provider (catalogue order), priority, name.
func (s *Connections) List(ctx context.Context, f ConnectionFilter) ([]Connection, error) {
	all, err := s.store.ListConnections(ctx)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := all[:0]
	for _, c := range all {
		if f.Provider != "" && c.Provider != f.Provider {
			continue
		}
		if f.Status != "" && c.Status(now) != f.Status {
			continue
		}
		out = append(out, c)
	}
	SortConnections(out, s.catalogue())
	return out, nil
}

// SortConnections orders by provider (catalogue order), priority, name, id.
func SortConnections(cs []Connection, cat *Catalogue) {
	rank := map[string]int{}
	for i, p := range cat.All() {
		rank[p.ID] = i
	}
	sortSlice(cs, func(a, b Connection) bool {
		if a.Provider != b.Provider {
			return rank[a.Provider] < rank[b.Provider]
		}
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
}

// Get returns one connection.
func (s *Connections) Get(ctx context.Context, id string) (Connection, error) {
	return s.store.FindConnectionByID(ctx, id)
}

// Create validates in and stores a new connection; nothing is stored on error.
func (s *Connections) Create(ctx context.Context, in ConnectionInput) (Connection, error) {
	fe := fieldErrors{}
	cat := s.catalogue()
	var prov Provider
	var newCustom *CustomProvider
	pid := strings.TrimSpace(in.Provider.V)
	switch {
	case !in.Provider.Set || in.Provider.Null || pid == "":
		fe.add("provider", "Choose a provider.")
	default:
		p, ok := cat.Get(pid)
		switch {
		case ok && in.Custom.Set && !in.Custom.Null && !p.Custom:
			fe.add("custom", "This is a built-in provider; remove the custom block.")
		case ok:
			prov = p
		case !in.Custom.Set || in.Custom.Null:
			fe.add("provider", fmt.Sprintf("Unknown provider %q. Choose one from the catalogue, or add a custom compatible provider.", pid))
		case !providerSlug.MatchString(pid):
			fe.add("provider", "Use 2–40 lower-case letters, digits and '-', starting with a letter or digit.")
		default:
			cp := CustomProvider{ID: pid, Format: WireFormat(in.Custom.V.WireFormat), AuthClass: AuthClass(in.Custom.V.AuthClass)}
			if cp.Format != FormatOpenAI && cp.Format != FormatAnthropic {
				fe.add("custom.wireFormat", `Choose "openai" or "anthropic".`)
			}
			if cp.AuthClass != AuthAPIKey && cp.AuthClass != AuthLocal {
				fe.add("custom.authClass", `Choose "apikey" or "local".`)
			}
			newCustom = &cp
			prov = cp.AsProvider()
		}
	}
	now := s.clock.Now().UTC()
	c := Connection{ID: NewID("c_"), Provider: prov.ID, AuthClass: prov.AuthClass, Enabled: true,
		Tier: "standard", CreatedAt: now, UpdatedAt: now}
	if !in.Name.Set {
		fe.add("name", "Enter a name.")
	}
	if prov.ID != "" && newCustom == nil && prov.Custom && prov.BaseURL == "" && (!in.BaseURL.Set || in.BaseURL.Null || in.BaseURL.V == "") {
		fe.add("baseUrl", "Enter the base URL of this compatible provider.")
	}
	if newCustom != nil && (!in.BaseURL.Set || in.BaseURL.Null || in.BaseURL.V == "") {
		fe.add("baseUrl", "Enter the base URL of this compatible provider.")
	}
	s.apply(ctx, &c, prov, in, fe, true)
	if prov.ID != "" && prov.AuthClass == AuthAPIKey && c.Credentials.APIKey == "" && c.Credentials.OAuth == nil {
		fe.add("apiKey", "Paste the provider's API key.")
	}
	if prov.ID != "" && prov.AuthClass == AuthOAuth && c.Credentials.OAuth == nil && c.Credentials.APIKey == "" {
		fe.add("oauth", "Paste the OAuth access token.")
	}
	if err := fe.Err(); err != nil {
		return Connection{}, err
	}
	if newCustom != nil {
		if err := s.store.CreateCustomProvider(ctx, *newCustom); err != nil {
			return Connection{}, fmt.Errorf("services: create custom provider %s: %w", newCustom.ID, err)
		}
		if err := s.publish(ctx, ChangeCatalogue, newCustom.ID, ""); err != nil {
			return Connection{}, err
		}
	}
	if err := s.store.CreateConnection(ctx, c); err != nil {
		return Connection{}, fmt.Errorf("services: create connection: %w", err)
	}
	if err := s.publish(ctx, ChangeConnection, c.ID, ""); err != nil {
		return c, err
	}
	return c, nil
}

// Update applies an edit; absent fields keep their value. New credentials
// clear a terminal state (binding decision 4).
func (s *Connections) Update(ctx context.Context, id string, in ConnectionInput) (Connection, error) {
	c, err := s.store.FindConnectionByID(ctx, id)
	if err != nil {
		return Connection{}, err
	}
	fe := fieldErrors{}
	if in.Provider.Set && in.Provider.V != c.Provider {
		fe.add("provider", "The provider cannot change after creation.")
	}
	if in.Custom.Set {
		fe.add("custom", "The provider cannot change after creation.")
	}
	prov, _ := s.catalogue().Get(c.Provider)
	wasTerminal := c.State.TerminalStatus != ""
	oldBase, oldProxy, hadCred := c.EffectiveBaseURL(prov), c.ProxyURL, c.Credentials.Primary() != ""
	s.apply(ctx, &c, prov, in, fe, false)
	// A stored credential follows a new destination only when it is typed
	// again or its keeping is confirmed: otherwise whoever holds an admin
	// session could point the connection at their own server and read the
	// key off the next request (issue 17 item 12).
	if hadCred && (c.EffectiveBaseURL(prov) != oldBase || c.ProxyURL != oldProxy) && !in.NewCredentialsIn() && !in.KeepsCredentials() {
		field := "apiKey"
		if c.Credentials.APIKey == "" && c.Credentials.OAuth != nil {
			field = "oauth.accessToken"
		}
		fe.add(field, MsgRepointCredential)
	}
	if err := fe.Err(); err != nil {
		return Connection{}, err
	}
	c.UpdatedAt = s.clock.Now().UTC()
	if err := s.store.UpdateConnection(ctx, c); err != nil {
		return Connection{}, fmt.Errorf("services: update connection %s: %w", id, err)
	}
	if wasTerminal && c.State.TerminalStatus == "" && s.onCredentials != nil {
		s.onCredentials(ctx, id)
	}
	if err := s.publish(ctx, ChangeConnection, id, ""); err != nil {
		return c, err
	}
	return c, nil
}

// OnDelete registers the hook that deletes the stored state of a deleted
// connection (leases, pins, lockouts, quota windows). It runs once, on the
// writer, before the ChangeConnection/ChangeDeleted change that makes every
// cache drop what it holds in memory.
func (s *Connections) OnDelete(f func(ctx context.Context, id string)) { s.onDelete = f }

// OnCredentialsChanged registers the hook that clears a terminal state when
// new credentials are saved. Like OnDelete it is a decision the writer makes
// once, not a cache refresh.
func (s *Connections) OnCredentialsChanged(f func(ctx context.Context, id string)) {
	s.onCredentials = f
}

// SetEnabled switches a connection on or off.
func (s *Connections) SetEnabled(ctx context.Context, id string, on bool) (Connection, error) {
	return s.Update(ctx, id, ConnectionInput{Enabled: Some(on)})
}

// Delete removes a connection.
func (s *Connections) Delete(ctx context.Context, id string) error {
	if _, err := s.store.FindConnectionByID(ctx, id); err != nil {
		return err
	}
	if err := s.checkDeletable(ctx, id); err != nil {
		return err
	}
	if err := s.store.DeleteConnection(ctx, id); err != nil {
		return fmt.Errorf("services: delete connection %s: %w", id, err)
	}
	if s.onDelete != nil {
		s.onDelete(ctx, id)
	}
	return s.publish(ctx, ChangeConnection, id, ChangeDeleted)
}

// RecordTest stores the outcome of a connection test; it touches no
// resilience state.
func (s *Connections) RecordTest(ctx context.Context, id string, r TestResult) (Connection, error) {
	c, err := s.store.FindConnectionByID(ctx, id)
	if err != nil {
		return Connection{}, err
	}
	c.LastTest = &r
	c.State.TestStatus = "failed"
	if r.OK {
		c.State.TestStatus = "ok"
	}
	if err := s.store.UpdateConnection(ctx, c); err != nil {
		return Connection{}, err
	}
	if err := s.publish(ctx, ChangeConnection, id, ""); err != nil {
		return c, err
	}
	return c, nil
}

// apply validates each present field of in and writes it to c, one family
// of fields at a time; the families are independent of each other.
func (s *Connections) apply(ctx context.Context, c *Connection, prov Provider, in ConnectionInput, fe fieldErrors, create bool) {
	s.applyName(ctx, c, prov, in, fe)
	applyCredentials(c, in, fe, create)
	s.applyEndpoints(c, prov, in, fe)
	applyRouting(c, in, fe)
	applyLimits(c, in, fe)
}

// applyName checks the name: present, short, clean and unique per provider.
func (s *Connections) applyName(ctx context.Context, c *Connection, prov Provider, in ConnectionInput, fe fieldErrors) {
	if in.Name.Set {
		name := in.Name.V
		switch {
		case in.Name.Null || strings.TrimSpace(name) == "":
			fe.add("name", "Enter a name.")
		case utf8.RuneCountInString(name) > 64:
			fe.add("name", "Use at most 64 characters.")
		case !trimmed(name) || hasControl(name):
			fe.add("name", "Remove leading or trailing spaces and control characters.")
		default:
			if prov.ID != "" && s.nameTaken(ctx, prov.ID, name, c.ID) {
				fe.add("name", fmt.Sprintf("This provider already has a connection named '%s'.", name))
			}
			c.Name = name
		}
	}
}

// applyCredentials writes a new API key or OAuth grant; new credentials on
// an existing connection clear its terminal state (20-resilience §3).
func applyCredentials(c *Connection, in ConnectionInput, fe fieldErrors, create bool) {
	credsChanged := false
	if in.APIKey.Set && !in.APIKey.Null && in.APIKey.V != "" {
		k := in.APIKey.V
		if len(k) > 4096 || hasControl(k) || strings.TrimSpace(k) != k {
			fe.add("apiKey", "Paste the key exactly, without spaces or line breaks.")
		} else {
			c.Credentials.APIKey = Secret(k)
			credsChanged = true
		}
	}
	if in.OAuth.Set && !in.OAuth.Null {
		o := in.OAuth.V
		if o.AccessToken == "" || hasControl(o.AccessToken) {
			fe.add("oauth.accessToken", "Paste the OAuth access token.")
		} else {
			c.Credentials.OAuth = &OAuthGrant{AccessToken: Secret(o.AccessToken), RefreshToken: Secret(o.RefreshToken), ExpiresAt: o.ExpiresAt}
			credsChanged = true
		}
	}
	if credsChanged && !create && c.State.TerminalStatus != "" {
		c.State.TerminalStatus, c.State.TerminalAt = "", nil
		c.State.AuthFailCount, c.State.RejectStreak = 0, 0
	}
}

// applyEndpoints checks where the connection sends requests: the base URL,
// the proxy (both through the egress guard) and the egress group.
func (s *Connections) applyEndpoints(c *Connection, prov Provider, in ConnectionInput, fe fieldErrors) {
	if in.BaseURL.Set {
		if in.BaseURL.Null || in.BaseURL.V == "" {
			c.BaseURL = ""
		} else if msg := s.egress.CheckBaseURL(in.BaseURL.V, prov.AuthClass); msg != "" {
			fe.add("baseUrl", msg)
		} else if len(in.BaseURL.V) > 2048 {
			fe.add("baseUrl", "Use at most 2048 characters.")
		} else {
			c.BaseURL = strings.TrimRight(in.BaseURL.V, "/")
		}
	}
	if in.ProxyURL.Set {
		if in.ProxyURL.Null || in.ProxyURL.V == "" {
			c.ProxyURL = ""
		} else if msg := s.egress.CheckProxyURL(in.ProxyURL.V, prov.AuthClass); msg != "" {
			fe.add("proxyUrl", msg)
		} else if len(in.ProxyURL.V) > 2048 {
			fe.add("proxyUrl", "Use at most 2048 characters.")
		} else {
			c.ProxyURL = Secret(in.ProxyURL.V)
		}
	}
	if in.EgressGroup.Set {
		if in.EgressGroup.Null || in.EgressGroup.V == "" {
			c.EgressGroup = ""
		} else if !egressGroupRe.MatchString(in.EgressGroup.V) {
			fe.add("egressGroup", "Use letters, digits, '-' and '_' (at most 64).")
		} else {
			c.EgressGroup = in.EgressGroup.V
		}
	}
}

// applyRouting writes what routing reads: default model, priority, the
// switches, the quota reserve and the tier.
func applyRouting(c *Connection, in ConnectionInput, fe fieldErrors) {
	if in.DefaultModel.Set {
		m := in.DefaultModel.V
		if len(m) > 200 || hasControl(m) {
			fe.add("defaultModel", "Use at most 200 characters, without control characters.")
		} else {
			c.DefaultModel = m
		}
	}
	if in.Priority.Set {
		if in.Priority.Null || in.Priority.V < 0 || in.Priority.V > 1_000_000 {
			fe.add("priority", "Enter a whole number from 0 to 1000000.")
		} else {
			c.Priority = in.Priority.V
		}
	}
	if in.Enabled.Set {
		if in.Enabled.Null {
			fe.add("enabled", "must be true or false")
		} else {
			c.Enabled = in.Enabled.V
		}
	}
	if in.DisableCooling.Set {
		if in.DisableCooling.Null {
			fe.add("disableCooling", "must be true or false")
		}
		c.DisableCooling = in.DisableCooling.V
	}
	if in.QuotaReservePercent.Set {
		if in.QuotaReservePercent.Null || in.QuotaReservePercent.V < 0 || in.QuotaReservePercent.V > 50 {
			fe.add("quotaReservePercent", "Enter a whole number from 0 to 50.")
		} else {
			c.QuotaReservePercent = in.QuotaReservePercent.V
		}
	}
	if in.Tier.Set {
		if in.Tier.Null || !contains(connectionTiers, in.Tier.V) {
			fe.add("tier", "Choose ultra, pro, standard or free.")
		} else {
			c.Tier = in.Tier.V
		}
	}
}

// applyLimits writes the connection's concurrency and rate limits.
func applyLimits(c *Connection, in ConnectionInput, fe fieldErrors) {
	if in.MaxConcurrent.Set {
		switch {
		case in.MaxConcurrent.Null:
			c.MaxConcurrent = nil
		case in.MaxConcurrent.V < 1 || in.MaxConcurrent.V > 1000:
			fe.add("maxConcurrent", "Enter a whole number from 1 to 1000, or leave it blank for no limit.")
		default:
			c.MaxConcurrent = in.MaxConcurrent.Ptr()
		}
	}
	if in.RateLimitProtection.Set {
		c.RateLimitProtection = in.RateLimitProtection.Ptr()
	}
	if in.RateLimitOverrides.Set {
		if in.RateLimitOverrides.Null {
			c.RateLimitOverrides = RateLimitOverrides{}
		} else {
			o := in.RateLimitOverrides.V
			checkRange(fe, "rateLimitOverrides.requestsPerMinute", o.RequestsPerMinute, 1, 1_000_000)
			checkRange(fe, "rateLimitOverrides.minTimeBetweenRequestsMs", o.MinTimeBetweenRequestsMs, 0, 3_600_000)
			checkRange(fe, "rateLimitOverrides.concurrentRequests", o.ConcurrentRequests, 1, 10_000)
			checkRange(fe, "rateLimitOverrides.maxWaitMs", o.MaxWaitMs, 1, 30_000)
			checkRange(fe, "rateLimitOverrides.maxQueueDepth", o.MaxQueueDepth, 0, 100_000)
			checkRange(fe, "rateLimitOverrides.queueWaitMs", o.QueueWaitMs, 0, 600_000)
			c.RateLimitOverrides = o
		}
	}
}

func (s *Connections) nameTaken(ctx context.Context, provider, name, selfID string) bool {
	all, err := s.store.ListConnections(ctx)
	if err != nil {
		return false
	}
	for _, o := range all {
		if o.Provider == provider && o.Name == name && o.ID != selfID {
			return true
		}
	}
	return false
}

func checkRange(fe fieldErrors, field string, v *int, lo, hi int) {
	if v != nil && (*v < lo || *v > hi) {
		fe.add(field, fmt.Sprintf("must be between %d and %d", lo, hi))
	}
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// SetCustomModels records the known models of a custom provider and
// refreshes the catalogue.
func (s *Connections) SetCustomModels(ctx context.Context, provider string, models []string) error {
	if err := s.store.SetCustomProviderModels(ctx, provider, models); err != nil {
		return err
	}
	return s.publish(ctx, ChangeCatalogue, provider, "")
}
