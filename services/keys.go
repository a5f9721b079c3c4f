package services

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Client key scopes.
const (
	ScopeInference      = "inference"
	ScopeManage         = "manage"
	ScopeMetrics        = "metrics"
	ScopeLeaseExclusive = "lease:exclusive"
)

var allScopes = []string{ScopeInference, ScopeManage, ScopeMetrics, ScopeLeaseExclusive}

// Key states, in precedence order revoked > expired > disabled > active.
const (
	KeyActive   = "active"
	KeyDisabled = "disabled"
	KeyRevoked  = "revoked"
	KeyExpired  = "expired"
)

// KeyPrefix starts every client key Switchyard issues.
const KeyPrefix = "sk-sy-"

var keySyntax = regexp.MustCompile(`^sk-sy-[A-Za-z0-9_-]{43}$`)

// APIKey is a client key record. Only the SHA-256 of the secret and its
// 12-character display prefix are ever stored.
type APIKey struct {
	ID                    string
	Name                  string
	Prefix                string
	KeyHash               string
	Enabled               bool
	Scopes                []string
	AllowedModels         []string // nil = any, [] = none
	AllowedCombos         []string
	AllowedConnections    []string
	RequestsPerMinute     *int
	MaxConcurrentRequests *int
	ExpiresAt             *time.Time
	CreatedAt             time.Time
	LastUsedAt            *time.Time
	RevokedAt             *time.Time
}

// State derives the key state at now.
func (k APIKey) State(now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return KeyRevoked
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return KeyExpired
	case !k.Enabled:
		return KeyDisabled
	}
	return KeyActive
}

// HasScope reports whether the key carries scope.
func (k APIKey) HasScope(scope string) bool { return contains(k.Scopes, scope) }

// AllowsModel applies allowedModels to a canonical provider/model name.
func (k APIKey) AllowsModel(canonical string) bool { return allowedBy(k.AllowedModels, canonical) }

// AllowsCombo applies allowedCombos to a combo name.
func (k APIKey) AllowsCombo(name string) bool { return allowedBy(k.AllowedCombos, name) }

// AllowsConnection applies allowedConnections to a connection id.
func (k APIKey) AllowsConnection(id string) bool {
	return k.AllowedConnections == nil || contains(k.AllowedConnections, id)
}

func allowedBy(patterns []string, name string) bool {
	if patterns == nil {
		return true
	}
	for _, p := range patterns {
		if MatchPattern(p, name) {
			return true
		}
	}
	return false
}

// MatchPattern matches name against p, where * matches any run of characters
// (including '/') and everything else matches exactly, case-sensitively.
func MatchPattern(p, name string) bool {
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return p == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(name, mid)
		if i < 0 {
			return false
		}
		name = name[i+len(mid):]
	}
	return strings.HasSuffix(name, last)
}

// KeyStore persists client keys; models implements it.
type KeyStore interface {
	ListKeys(ctx context.Context) ([]APIKey, error)
	FindKeyByID(ctx context.Context, id string) (APIKey, error)
	CreateKey(ctx context.Context, k APIKey) error
	UpdateKey(ctx context.Context, k APIKey) error
	DeleteKey(ctx context.Context, id string) error
	TouchKey(ctx context.Context, id string, at time.Time) error
}

// KeyInput creates or edits a key; absent fields keep their value on edit.
type KeyInput struct {
	Name                  Opt[string]    `json:"name"`
	Enabled               Opt[bool]      `json:"enabled"`
	Scopes                Opt[[]string]  `json:"scopes"`
	AllowedModels         Opt[[]string]  `json:"allowedModels"`
	AllowedCombos         Opt[[]string]  `json:"allowedCombos"`
	AllowedConnections    Opt[[]string]  `json:"allowedConnections"`
	RequestsPerMinute     Opt[int]       `json:"requestsPerMinute"`
	MaxConcurrentRequests Opt[int]       `json:"maxConcurrentRequests"`
	ExpiresAt             Opt[time.Time] `json:"expiresAt"`
}

// Keys is the service behind the API keys page, /api/keys and /v1 key auth.
// Lookups on the request path read an in-memory index by digest, refreshed
// on every change, so authentication never touches the database.
type Keys struct {
	store    KeyStore
	conns    ConnectionStore
	clock    Clock
	index    atomic.Pointer[map[string]APIKey]
	feed     ChangeFeed
	reloadMu sync.Mutex
	touchMu  sync.Mutex // guards swaps of index (Touch, reload)
	touches  sync.WaitGroup
	onRevoke func(ctx context.Context, keyID string)
	// storeError sees a background last-used write that failed (nil = not reported).
	storeError func(store string, err error)
}

// OnRevoke registers a hook run after a key is revoked (its leases end).
func (s *Keys) OnRevoke(f func(ctx context.Context, keyID string)) { s.onRevoke = f }

// OnStoreError registers where a failed background last-used write is
// reported (metrics); the index keeps the new time either way.
func (s *Keys) OnStoreError(f func(store string, err error)) { s.storeError = f }

// NewKeys builds the service and loads the index. Every change is published
// on feed (nil = a feed of its own) and the index follows ChangeKey, so a key
// written here or on another replica is (re)read from the store.
func NewKeys(ctx context.Context, store KeyStore, conns ConnectionStore, clock Clock, feed ChangeFeed) (*Keys, error) {
	if feed == nil {
		feed = NewLocalFeed(nil)
	}
	s := &Keys{store: store, conns: conns, clock: clock, feed: feed}
	if err := s.reload(ctx); err != nil {
		return nil, err
	}
	feed.Subscribe(ChangeKey, func(ctx context.Context, _ Change) error { return s.reload(ctx) })
	return s, nil
}

// reload rebuilds the whole index from the store. A key change rereads every
// key: the index is small and is swapped as one immutable map. Reloads run
// one at a time (a slower one must not store an older read over a newer),
// and a last-used time Touch put in memory and not yet stored survives.
func (s *Keys) reload(ctx context.Context) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	all, err := s.store.ListKeys(ctx)
	if err != nil {
		return err
	}
	idx := make(map[string]APIKey, len(all))
	for _, k := range all {
		idx[k.KeyHash] = k
	}
	s.touchMu.Lock()
	defer s.touchMu.Unlock()
	if cur := s.index.Load(); cur != nil {
		for h, k := range idx {
			if c, ok := (*cur)[h]; ok && c.LastUsedAt != nil && (k.LastUsedAt == nil || c.LastUsedAt.After(*k.LastUsedAt)) {
				k.LastUsedAt = c.LastUsedAt
				idx[h] = k
			}
		}
	}
	s.index.Store(&idx)
	return nil
}

// changed publishes a committed write of key id; the index refreshes through
// the feed.
func (s *Keys) changed(ctx context.Context, id, payload string) error {
	return s.feed.Publish(ctx, Change{Kind: ChangeKey, Key: id, Payload: payload})
}

// KeyAuthError says why a presented key was refused; its message names the cause.
type KeyAuthError struct{ Reason string }

func (e *KeyAuthError) Error() string { return "Invalid API key: " + e.Reason + "." }
func (e *KeyAuthError) Unwrap() error { return ErrUnauthorized }

// Authenticate finds the active key for a presented secret, from memory.
func (s *Keys) Authenticate(secret string) (APIKey, error) {
	if secret == "" {
		return APIKey{}, &KeyAuthError{Reason: "missing"}
	}
	if !keySyntax.MatchString(secret) {
		return APIKey{}, &KeyAuthError{Reason: "malformed"}
	}
	k, ok := (*s.index.Load())[SHA256Hex(secret)]
	if !ok {
		return APIKey{}, &KeyAuthError{Reason: "unknown"}
	}
	switch k.State(s.clock.Now()) {
	case KeyRevoked:
		return APIKey{}, &KeyAuthError{Reason: "revoked"}
	case KeyExpired:
		return APIKey{}, &KeyAuthError{Reason: "expired"}
	case KeyDisabled:
		return APIKey{}, &KeyAuthError{Reason: "disabled"}
	}
	return k, nil
}

// List returns keys, newest first, filtered by state ("" or "all" = every key).
func (s *Keys) List(ctx context.Context, state string) ([]APIKey, error) {
	all, err := s.store.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := all[:0]
	for _, k := range all {
		if state == "" || state == "all" || k.State(now) == state {
			out = append(out, k)
		}
	}
	sortSlice(out, func(a, b APIKey) bool { return a.CreatedAt.After(b.CreatedAt) })
	return out, nil
}

// Get returns one key.
func (s *Keys) Get(ctx context.Context, id string) (APIKey, error) {
	return s.store.FindKeyByID(ctx, id)
}

// Create issues a new key and returns its secret, the one time it exists.
func (s *Keys) Create(ctx context.Context, in KeyInput) (APIKey, string, error) {
	now := s.clock.Now().UTC()
	k := APIKey{ID: NewID("k_"), Enabled: true, Scopes: []string{ScopeInference}, CreatedAt: now}
	fe := fieldErrors{}
	if !in.Name.Set {
		fe.add("name", "Enter a name.")
	}
	s.apply(ctx, &k, in, fe)
	if err := fe.Err(); err != nil {
		return APIKey{}, "", err
	}
	secret := KeyPrefix + RandomToken(32)
	k.KeyHash = SHA256Hex(secret)
	k.Prefix = secret[:12]
	if err := s.store.CreateKey(ctx, k); err != nil {
		return APIKey{}, "", fmt.Errorf("services: create key: %w", err)
	}
	return k, secret, s.changed(ctx, k.ID, "")
}

// Update edits a key.
func (s *Keys) Update(ctx context.Context, id string, in KeyInput) (APIKey, error) {
	k, err := s.store.FindKeyByID(ctx, id)
	if err != nil {
		return APIKey{}, err
	}
	fe := fieldErrors{}
	s.apply(ctx, &k, in, fe)
	if err := fe.Err(); err != nil {
		return APIKey{}, err
	}
	if err := s.store.UpdateKey(ctx, k); err != nil {
		return APIKey{}, fmt.Errorf("services: update key %s: %w", id, err)
	}
	return k, s.changed(ctx, id, "")
}

// Revoke revokes a key; idempotent.
func (s *Keys) Revoke(ctx context.Context, id string) (APIKey, error) {
	k, err := s.store.FindKeyByID(ctx, id)
	if err != nil {
		return APIKey{}, err
	}
	if k.RevokedAt != nil {
		return k, nil
	}
	now := s.clock.Now().UTC()
	k.RevokedAt = &now
	if err := s.store.UpdateKey(ctx, k); err != nil {
		return APIKey{}, err
	}
	if s.onRevoke != nil {
		s.onRevoke(ctx, k.ID)
	}
	return k, s.changed(ctx, k.ID, "")
}

// Delete removes a revoked key; an unrevoked key is a conflict.
func (s *Keys) Delete(ctx context.Context, id string) error {
	k, err := s.store.FindKeyByID(ctx, id)
	if err != nil {
		return err
	}
	if k.RevokedAt == nil {
		return &ConflictError{Msg: "Revoke the key before deleting it."}
	}
	if err := s.store.DeleteKey(ctx, id); err != nil {
		return err
	}
	return s.changed(ctx, id, ChangeDeleted)
}

// Touch records use of a key at most once per minute (10-gateway-api §3.3).
// The in-memory index is updated at once; the row is written in the
// background so the request path never waits on the database.
func (s *Keys) Touch(ctx context.Context, k APIKey) {
	now := s.clock.Now().UTC()
	if k.LastUsedAt != nil && now.Sub(*k.LastUsedAt) < time.Minute {
		return
	}
	s.touchMu.Lock()
	idx := *s.index.Load()
	cur, ok := idx[k.KeyHash]
	if !ok || (cur.LastUsedAt != nil && now.Sub(*cur.LastUsedAt) < time.Minute) {
		s.touchMu.Unlock()
		return
	}
	next := make(map[string]APIKey, len(idx))
	for h, v := range idx {
		next[h] = v
	}
	cur.LastUsedAt = &now
	next[k.KeyHash] = cur
	s.index.Store(&next)
	s.touchMu.Unlock()
	s.touches.Add(1)
	go func() {
		defer s.touches.Done()
		if err := s.store.TouchKey(context.WithoutCancel(ctx), k.ID, now); err != nil && s.storeError != nil {
			s.storeError("api_key_last_used", err)
		}
	}()
}

// WaitTouches waits for background last-used writes (shutdown, tests).
func (s *Keys) WaitTouches() { s.touches.Wait() }

// apply validates each present field of in and writes it to k. The lease
// rule runs last: it reads the scopes and connections just written.
func (s *Keys) apply(ctx context.Context, k *APIKey, in KeyInput, fe fieldErrors) {
	applyKeyIdentity(k, in, fe)
	keyPatterns(fe, "allowedModels", in.AllowedModels, &k.AllowedModels, true)
	keyPatterns(fe, "allowedCombos", in.AllowedCombos, &k.AllowedCombos, false)
	s.applyAllowedConnections(ctx, k, in, fe)
	keyLimit(fe, "requestsPerMinute", in.RequestsPerMinute, &k.RequestsPerMinute)
	keyLimit(fe, "maxConcurrentRequests", in.MaxConcurrentRequests, &k.MaxConcurrentRequests)
	if in.ExpiresAt.Set {
		if in.ExpiresAt.Null {
			k.ExpiresAt = nil
		} else if !in.ExpiresAt.V.After(s.clock.Now()) {
			fe.add("expiresAt", "Choose a date in the future.")
		} else {
			t := in.ExpiresAt.V.UTC()
			k.ExpiresAt = &t
		}
	}
	if k.HasScope(ScopeLeaseExclusive) && len(k.AllowedConnections) == 0 {
		fe.add("allowedConnections", "a key with lease:exclusive needs at least one allowed connection")
	}
}

// applyKeyIdentity writes the name, the switch and the scopes.
func applyKeyIdentity(k *APIKey, in KeyInput, fe fieldErrors) {
	if in.Name.Set {
		switch n := in.Name.V; {
		case in.Name.Null || strings.TrimSpace(n) == "":
			fe.add("name", "Enter a name.")
		case utf8.RuneCountInString(n) > 64:
			fe.add("name", "Use at most 64 characters.")
		case hasControl(n):
			fe.add("name", "Remove control characters.")
		default:
			k.Name = n
		}
	}
	if in.Enabled.Set {
		if in.Enabled.Null {
			fe.add("enabled", "must be true or false")
		}
		k.Enabled = in.Enabled.V
	}
	if in.Scopes.Set {
		if in.Scopes.Null {
			fe.add("scopes", "Choose at least one scope.")
		}
		seen := map[string]bool{}
		var scopes []string
		for _, sc := range in.Scopes.V {
			if !contains(allScopes, sc) {
				fe.add("scopes", fmt.Sprintf("Unknown scope %q; use inference, manage, metrics or lease:exclusive.", sc))
				continue
			}
			if !seen[sc] {
				seen[sc] = true
				scopes = append(scopes, sc)
			}
		}
		if scopes == nil {
			scopes = []string{}
		}
		k.Scopes = scopes
	}
}

// keyPatterns writes a list of allowed model (model: provider/model) or
// combo name patterns, where * matches any run of characters.
func keyPatterns(fe fieldErrors, field string, o Opt[[]string], dst *[]string, model bool) {
	if !o.Set {
		return
	}
	if o.Null {
		*dst = nil
		return
	}
	out := []string{}
	for i, p := range o.V {
		if p == "" || len(p) > 256 || hasControl(p) || strings.ContainsAny(p, " \t") {
			fe.add(field, fmt.Sprintf("Line %d: enter a model name such as openai/gpt-4o; * matches any run of characters.", i+1))
			continue
		}
		if model && !strings.Contains(p, "/") && p != "*" {
			fe.add(field, fmt.Sprintf("Line %d: enter a model name such as openai/gpt-4o; * matches any run of characters.", i+1))
			continue
		}
		out = append(out, p)
	}
	*dst = out
}

// applyAllowedConnections writes the connections a key may use; each must exist.
func (s *Keys) applyAllowedConnections(ctx context.Context, k *APIKey, in KeyInput, fe fieldErrors) {
	if in.AllowedConnections.Set {
		if in.AllowedConnections.Null {
			k.AllowedConnections = nil
		} else {
			known := map[string]bool{}
			if cs, err := s.conns.ListConnections(ctx); err == nil {
				for _, c := range cs {
					known[c.ID] = true
				}
			}
			out := []string{}
			for _, id := range in.AllowedConnections.V {
				if !known[id] {
					fe.add("allowedConnections", fmt.Sprintf("Connection %q does not exist.", id))
					continue
				}
				if !contains(out, id) {
					out = append(out, id)
				}
			}
			k.AllowedConnections = out
		}
	}
}

// keyLimit writes one of the key's own limits (blank: none).
func keyLimit(fe fieldErrors, field string, o Opt[int], dst **int) {
	if !o.Set {
		return
	}
	if o.Null {
		*dst = nil
		return
	}
	if o.V < 0 || o.V > 1_000_000 {
		fe.add(field, "Enter a whole number, or leave it blank for no limit.")
		return
	}
	*dst = o.Ptr()
}
