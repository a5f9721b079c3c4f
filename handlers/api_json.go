package handlers

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// API is what every management API handler (/api, 40-admin-api) shares:
// the clock its answers are stamped with and the audit log. The handlers,
// one per resource (ConnectionsAPI, CombosAPI, KeysAPI, ResilienceAPI,
// TrafficAPI, SettingsAPI), bind the request, call one service and write the
// JSON shape of the spec; errors go back to the app's error handler
// unchanged.
type API struct {
	Clock services.Clock
	// Log receives one audit line per successful mutation; nil discards them.
	Log *slog.Logger
}

// audit records a successful mutation: who did what to which id, as a log
// line and as the action of the request's audit-log entry. Callers pass ids
// and names only, never a secret.
func (h *API) audit(c echo.Context, action string, attrs ...any) {
	NoteAudit(c, action, "")
	if h.Log == nil {
		return
	}
	h.Log.Info("audit", append([]any{"actor", Actor(c), "action", action}, attrs...)...)
}

// writeAPIJSON answers with v; management responses describe configuration
// and are never cached.
func writeAPIJSON(c echo.Context, status int, v any) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(status, v)
}

// writeAPICreated answers 201 with v and a Location header.
func writeAPICreated(c echo.Context, location string, v any) error {
	c.Response().Header().Set("Location", location)
	return writeAPIJSON(c, http.StatusCreated, v)
}

// apiItemsJSON is the list envelope of 40-admin-api: {"items": [...]}.
type apiItemsJSON[T any] struct {
	Items []T `json:"items"`
}

func apiItems[T any](v []T) apiItemsJSON[T] {
	if v == nil {
		v = []T{}
	}
	return apiItemsJSON[T]{Items: v}
}

// apiTimeLayout is RFC 3339 in UTC with milliseconds (40-admin-api §1).
const apiTimeLayout = "2006-01-02T15:04:05.000Z"

func apiInstant(t time.Time) string { return t.UTC().Format(apiTimeLayout) }

func apiInstantPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := apiInstant(*t)
	return &s
}

// nullIfZero is nil for the zero value, so JSON shows null for "not set".
func nullIfZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// ---- connections (40-admin-api §5) ----

type secretJSON struct {
	Set     bool    `json:"set"`
	Preview *string `json:"preview"`
}

type rateLimitOverridesJSON struct {
	RequestsPerMinute        *int `json:"requestsPerMinute"`
	MinTimeBetweenRequestsMs *int `json:"minTimeBetweenRequestsMs"`
	ConcurrentRequests       *int `json:"concurrentRequests"`
	MaxWaitMs                *int `json:"maxWaitMs"`
	MaxQueueDepth            *int `json:"maxQueueDepth"`
	QueueWaitMs              *int `json:"queueWaitMs"`
}

type connectionStateJSON struct {
	Status              string  `json:"status"`
	RateLimitedUntil    *string `json:"rateLimitedUntil"`
	CooldownRemainingMs int64   `json:"cooldownRemainingMs"`
	BackoffLevel        int     `json:"backoffLevel"`
	TerminalStatus      *string `json:"terminalStatus"`
	TerminalAt          *string `json:"terminalAt"`
	LastError           *string `json:"lastError"`
	LastErrorReason     *string `json:"lastErrorReason"`
	LastErrorStatus     *int    `json:"lastErrorStatus"`
	LastErrorAt         *string `json:"lastErrorAt"`
	AuthFailCount       int     `json:"authFailCount"`
	RejectStreak        int     `json:"rejectStreak"`
	LockedModels        int     `json:"lockedModels"`
}

type lastTestJSON struct {
	At        string `json:"at"`
	OK        bool   `json:"ok"`
	Status    int    `json:"status"`
	LatencyMs int64  `json:"latencyMs"`
}

// connectionJSON is a connection as the API shows it. Credentials appear
// only as secretJSON; the proxy URL is masked.
type connectionJSON struct {
	ID                  string                 `json:"id"`
	Provider            string                 `json:"provider"`
	Name                string                 `json:"name"`
	AuthClass           string                 `json:"authClass"`
	Enabled             bool                   `json:"enabled"`
	Priority            int                    `json:"priority"`
	BaseURL             *string                `json:"baseUrl"`
	DefaultModel        *string                `json:"defaultModel"`
	Secret              secretJSON             `json:"secret"`
	MaxConcurrent       *int                   `json:"maxConcurrent"`
	RateLimitProtection *bool                  `json:"rateLimitProtection"`
	RateLimitOverrides  rateLimitOverridesJSON `json:"rateLimitOverrides"`
	ProxyURL            *string                `json:"proxyUrl"`
	EgressGroup         *string                `json:"egressGroup"`
	DisableCooling      bool                   `json:"disableCooling"`
	QuotaReservePercent int                    `json:"quotaReservePercent"`
	Tier                string                 `json:"tier"`
	State               connectionStateJSON    `json:"state"`
	LastUsedAt          *string                `json:"lastUsedAt"`
	LastTest            *lastTestJSON          `json:"lastTest"`
	CreatedAt           string                 `json:"createdAt"`
	UpdatedAt           string                 `json:"updatedAt"`
}

// connectionDetailJSON is GET one: the connection plus what points at it.
type connectionDetailJSON struct {
	connectionJSON
	References services.ConnectionReferences `json:"references"`
}

// presentConnection shapes c at now; baseUrl is the effective upstream URL
// (the override, else the provider's default).
func presentConnection(c services.Connection, cat *services.Catalogue, now time.Time) connectionJSON {
	prov, _ := cat.Get(c.Provider)
	secret := secretJSON{}
	if p := c.Credentials.Primary(); p != "" {
		preview := p.Preview()
		secret = secretJSON{Set: true, Preview: &preview}
	}
	st := c.State
	state := connectionStateJSON{
		Status:           c.Status(now),
		RateLimitedUntil: apiInstantPtr(st.RateLimitedUntil),
		BackoffLevel:     st.BackoffLevel,
		TerminalStatus:   nullIfZero(st.TerminalStatus),
		TerminalAt:       apiInstantPtr(st.TerminalAt),
		LastError:        nullIfZero(st.LastError),
		LastErrorReason:  nullIfZero(st.LastErrorReason),
		LastErrorStatus:  nullIfZero(st.LastErrorStatus),
		LastErrorAt:      apiInstantPtr(st.LastErrorAt),
		AuthFailCount:    st.AuthFailCount,
		RejectStreak:     st.RejectStreak,
		LockedModels:     0, // model lockouts are not tracked yet
	}
	if st.RateLimitedUntil != nil && st.RateLimitedUntil.After(now) {
		state.CooldownRemainingMs = st.RateLimitedUntil.Sub(now).Milliseconds()
	}
	var lastTest *lastTestJSON
	if t := c.LastTest; t != nil {
		lastTest = &lastTestJSON{At: apiInstant(t.At), OK: t.OK, Status: t.Status, LatencyMs: t.LatencyMs}
	}
	o := c.RateLimitOverrides
	return connectionJSON{
		ID:                  c.ID,
		Provider:            c.Provider,
		Name:                c.Name,
		AuthClass:           string(c.AuthClass),
		Enabled:             c.Enabled,
		Priority:            c.Priority,
		BaseURL:             nullIfZero(c.EffectiveBaseURL(prov)),
		DefaultModel:        nullIfZero(c.DefaultModel),
		Secret:              secret,
		MaxConcurrent:       c.MaxConcurrent,
		RateLimitProtection: c.RateLimitProtection,
		RateLimitOverrides: rateLimitOverridesJSON{
			RequestsPerMinute:        o.RequestsPerMinute,
			MinTimeBetweenRequestsMs: o.MinTimeBetweenRequestsMs,
			ConcurrentRequests:       o.ConcurrentRequests,
			MaxWaitMs:                o.MaxWaitMs,
			MaxQueueDepth:            o.MaxQueueDepth,
			QueueWaitMs:              o.QueueWaitMs,
		},
		ProxyURL:            nullIfZero(c.MaskedProxyURL()),
		EgressGroup:         nullIfZero(c.EgressGroup),
		DisableCooling:      c.DisableCooling,
		QuotaReservePercent: c.QuotaReservePercent,
		Tier:                c.Tier,
		State:               state,
		LastUsedAt:          apiInstantPtr(c.LastUsedAt),
		LastTest:            lastTest,
		CreatedAt:           apiInstant(c.CreatedAt),
		UpdatedAt:           apiInstant(c.UpdatedAt),
	}
}

// ---- combos (40-admin-api §6) ----

// modelTargetJSON keeps "connectionId": null when the target is not pinned.
type modelTargetJSON struct {
	ID           string  `json:"id"`
	Kind         string  `json:"kind"`
	Provider     string  `json:"provider"`
	Model        string  `json:"model"`
	ConnectionID *string `json:"connectionId"`
	Weight       int     `json:"weight"`
	Label        *string `json:"label"`
	Enabled      bool    `json:"enabled"`
	Prompt       string  `json:"prompt,omitempty"`
}

type comboTargetJSON struct {
	ID      string  `json:"id"`
	Kind    string  `json:"kind"`
	ComboID string  `json:"comboId"`
	Weight  int     `json:"weight"`
	Label   *string `json:"label"`
	Enabled bool    `json:"enabled"`
	Prompt  string  `json:"prompt,omitempty"`
}

// comboJSON is a combo as the API shows it.
type comboJSON struct {
	ID          string               `json:"id"`
	Name        string               `json:"name"`
	Description string               `json:"description"`
	Strategy    string               `json:"strategy"`
	Enabled     bool                 `json:"enabled"`
	Hidden      bool                 `json:"hidden"`
	Order       int                  `json:"order"`
	Targets     []any                `json:"targets"`
	Config      services.ComboConfig `json:"config"`
	CreatedAt   string               `json:"createdAt"`
	UpdatedAt   string               `json:"updatedAt"`
}

// comboWarningsJSON is a created or replaced combo with its non-blocking warnings.
type comboWarningsJSON struct {
	comboJSON
	Warnings []string `json:"warnings,omitempty"`
}

func presentCombo(c services.Combo) comboJSON {
	targets := make([]any, len(c.Targets))
	for i, t := range c.Targets {
		if t.Kind == services.KindCombo {
			targets[i] = comboTargetJSON{ID: t.ID, Kind: t.Kind, ComboID: t.ComboID, Weight: t.WeightValue(),
				Label: t.Label, Enabled: t.IsEnabled(), Prompt: t.Prompt}
			continue
		}
		targets[i] = modelTargetJSON{ID: t.ID, Kind: t.Kind, Provider: t.Provider, Model: t.Model,
			ConnectionID: t.ConnectionID, Weight: t.WeightValue(), Label: t.Label, Enabled: t.IsEnabled(), Prompt: t.Prompt}
	}
	return comboJSON{
		ID: c.ID, Name: c.Name, Description: c.Description, Strategy: c.Strategy,
		Enabled: c.Enabled, Hidden: c.Hidden, Order: c.Order, Targets: targets, Config: c.Config,
		CreatedAt: apiInstant(c.CreatedAt), UpdatedAt: apiInstant(c.UpdatedAt),
	}
}

// ---- client keys (40-admin-api §7) ----

// keyJSON is a client key as the API shows it: never the secret or its hash.
type keyJSON struct {
	ID                    string   `json:"id"`
	Name                  string   `json:"name"`
	Prefix                string   `json:"prefix"`
	Enabled               bool     `json:"enabled"`
	State                 string   `json:"state"`
	Scopes                []string `json:"scopes"`
	AllowedModels         []string `json:"allowedModels"`
	AllowedCombos         []string `json:"allowedCombos"`
	AllowedConnections    []string `json:"allowedConnections"`
	RequestsPerMinute     *int     `json:"requestsPerMinute"`
	MaxConcurrentRequests *int     `json:"maxConcurrentRequests"`
	ExpiresAt             *string  `json:"expiresAt"`
	CreatedAt             string   `json:"createdAt"`
	LastUsedAt            *string  `json:"lastUsedAt"`
	RevokedAt             *string  `json:"revokedAt"`
}

// createdKeyJSON carries the secret, the one time it is ever shown.
type createdKeyJSON struct {
	Key    keyJSON `json:"key"`
	Secret string  `json:"secret"`
}

// presentKey shapes k at now. Allow-lists keep their meaning on the wire:
// null = any, [] = none.
func presentKey(k services.APIKey, now time.Time) keyJSON {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return keyJSON{
		ID: k.ID, Name: k.Name, Prefix: k.Prefix, Enabled: k.Enabled, State: k.State(now),
		Scopes:                scopes,
		AllowedModels:         k.AllowedModels,
		AllowedCombos:         k.AllowedCombos,
		AllowedConnections:    k.AllowedConnections,
		RequestsPerMinute:     k.RequestsPerMinute,
		MaxConcurrentRequests: k.MaxConcurrentRequests,
		ExpiresAt:             apiInstantPtr(k.ExpiresAt),
		CreatedAt:             apiInstant(k.CreatedAt),
		LastUsedAt:            apiInstantPtr(k.LastUsedAt),
		RevokedAt:             apiInstantPtr(k.RevokedAt),
	}
}
