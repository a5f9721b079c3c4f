package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"switchyard/services"
)

type customProviderRow struct {
	ID         string `gorm:"primaryKey"`
	WireFormat string
	AuthClass  string
	Models     string
	CreatedAt  time.Time
}

func (customProviderRow) TableName() string { return "custom_providers" }

type connectionRow struct {
	ID                  string `gorm:"primaryKey"`
	Provider            string
	AuthClass           string
	Name                string
	Enabled             bool
	Priority            int
	BaseURL             string `gorm:"column:base_url"`
	DefaultModel        string
	CredentialsEnc      []byte
	SecretPreview       string
	MaxConcurrent       *int
	RateLimitProtection *bool
	RateLimitOverrides  string
	ProxyURLEnc         []byte `gorm:"column:proxy_url_enc"`
	EgressGroup         string
	DisableCooling      bool
	QuotaReservePercent int
	Tier                string
	RateLimitedUntil    *int64
	BackoffLevel        int
	TerminalStatus      sql.NullString
	TerminalAt          *int64
	LastError           string
	LastErrorReason     string
	LastErrorStatus     int
	ErrorCode           string
	LastErrorAt         *int64
	AuthFailCount       int
	LastAuthFailAt      *int64
	RejectStreak        int
	LastRejectAt        *int64
	CooldownReason      string
	TestStatus          string
	LastTest            sql.NullString
	LastUsedAt          *int64
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

func (connectionRow) TableName() string { return "connections" }

// ConnectionStore implements services.ConnectionStore. Credentials and the
// proxy URL are sealed with AES-GCM, bound to the connection id.
type ConnectionStore struct {
	db   *gorm.DB
	keys *services.Keyring
}

var _ services.ConnectionStore = (*ConnectionStore)(nil)

// NewConnectionStore builds the repository.
func NewConnectionStore(db *gorm.DB, keys *services.Keyring) *ConnectionStore {
	return &ConnectionStore{db: db, keys: keys}
}

func (s *ConnectionStore) toRow(c services.Connection) (connectionRow, error) {
	creds, err := json.Marshal(credentialsJSON(c.Credentials))
	if err != nil {
		return connectionRow{}, err
	}
	over, _ := json.Marshal(c.RateLimitOverrides)
	r := connectionRow{
		ID: c.ID, Provider: c.Provider, AuthClass: string(c.AuthClass), Name: c.Name, Enabled: c.Enabled,
		Priority: c.Priority, BaseURL: c.BaseURL, DefaultModel: c.DefaultModel,
		CredentialsEnc: s.keys.Seal(creds, []byte("conn-credentials:"+c.ID)),
		SecretPreview:  c.Credentials.Primary().Preview(),
		MaxConcurrent:  c.MaxConcurrent, RateLimitProtection: c.RateLimitProtection, RateLimitOverrides: string(over),
		EgressGroup: c.EgressGroup, DisableCooling: c.DisableCooling, QuotaReservePercent: c.QuotaReservePercent, Tier: c.Tier,
		RateLimitedUntil: ms(c.State.RateLimitedUntil), BackoffLevel: c.State.BackoffLevel,
		TerminalStatus: sql.NullString{String: c.State.TerminalStatus, Valid: c.State.TerminalStatus != ""},
		TerminalAt:     ms(c.State.TerminalAt), LastError: c.State.LastError, LastErrorReason: c.State.LastErrorReason,
		LastErrorStatus: c.State.LastErrorStatus, ErrorCode: c.State.ErrorCode, LastErrorAt: ms(c.State.LastErrorAt),
		AuthFailCount: c.State.AuthFailCount, LastAuthFailAt: ms(c.State.LastAuthFailAt), RejectStreak: c.State.RejectStreak,
		LastRejectAt: ms(c.State.LastRejectAt), CooldownReason: c.State.CooldownReason, TestStatus: c.State.TestStatus, LastUsedAt: ms(c.LastUsedAt), CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
	}
	if c.ProxyURL != "" {
		r.ProxyURLEnc = s.keys.Seal([]byte(c.ProxyURL.Reveal()), []byte("conn-proxy:"+c.ID))
	}
	if c.LastTest != nil {
		b, _ := json.Marshal(c.LastTest)
		r.LastTest = sql.NullString{String: string(b), Valid: true}
	}
	return r, nil
}

// credentialsJSON is the sealed form; Secret fields would encode as [redacted].
type credentialsDoc struct {
	APIKey string    `json:"apiKey,omitempty"`
	OAuth  *oauthDoc `json:"oauth,omitempty"`
}

type oauthDoc struct {
	AccessToken  string     `json:"accessToken"`
	RefreshToken string     `json:"refreshToken,omitempty"`
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
}

func credentialsJSON(c services.Credentials) credentialsDoc {
	d := credentialsDoc{APIKey: c.APIKey.Reveal()}
	if c.OAuth != nil {
		d.OAuth = &oauthDoc{AccessToken: c.OAuth.AccessToken.Reveal(), RefreshToken: c.OAuth.RefreshToken.Reveal(), ExpiresAt: c.OAuth.ExpiresAt}
	}
	return d
}

func (s *ConnectionStore) fromRow(r connectionRow) (services.Connection, error) {
	c := services.Connection{
		ID: r.ID, Provider: r.Provider, AuthClass: services.AuthClass(r.AuthClass), Name: r.Name, Enabled: r.Enabled,
		Priority: r.Priority, BaseURL: r.BaseURL, DefaultModel: r.DefaultModel, MaxConcurrent: r.MaxConcurrent,
		RateLimitProtection: r.RateLimitProtection, EgressGroup: r.EgressGroup, DisableCooling: r.DisableCooling,
		QuotaReservePercent: r.QuotaReservePercent, Tier: r.Tier, LastUsedAt: fromMs(r.LastUsedAt),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		State: services.ConnectionState{
			RateLimitedUntil: fromMs(r.RateLimitedUntil), BackoffLevel: r.BackoffLevel, TerminalStatus: r.TerminalStatus.String,
			TerminalAt: fromMs(r.TerminalAt), LastError: r.LastError, LastErrorReason: r.LastErrorReason,
			LastErrorStatus: r.LastErrorStatus, ErrorCode: r.ErrorCode, LastErrorAt: fromMs(r.LastErrorAt),
			AuthFailCount: r.AuthFailCount, LastAuthFailAt: fromMs(r.LastAuthFailAt), RejectStreak: r.RejectStreak,
			LastRejectAt: fromMs(r.LastRejectAt), CooldownReason: r.CooldownReason, TestStatus: r.TestStatus,
		},
	}
	_ = json.Unmarshal([]byte(r.RateLimitOverrides), &c.RateLimitOverrides)
	if len(r.CredentialsEnc) > 0 {
		plain, err := s.keys.Open(r.CredentialsEnc, []byte("conn-credentials:"+r.ID))
		if err != nil {
			return services.Connection{}, fmt.Errorf("models: connection %s credentials: %w", r.ID, err)
		}
		var d credentialsDoc
		if err := json.Unmarshal(plain, &d); err != nil {
			return services.Connection{}, err
		}
		c.Credentials.APIKey = services.Secret(d.APIKey)
		if d.OAuth != nil {
			c.Credentials.OAuth = &services.OAuthGrant{AccessToken: services.Secret(d.OAuth.AccessToken), RefreshToken: services.Secret(d.OAuth.RefreshToken), ExpiresAt: d.OAuth.ExpiresAt}
		}
	}
	if len(r.ProxyURLEnc) > 0 {
		plain, err := s.keys.Open(r.ProxyURLEnc, []byte("conn-proxy:"+r.ID))
		if err != nil {
			return services.Connection{}, fmt.Errorf("models: connection %s proxy: %w", r.ID, err)
		}
		c.ProxyURL = services.Secret(plain)
	}
	if r.LastTest.Valid {
		var t services.TestResult
		if json.Unmarshal([]byte(r.LastTest.String), &t) == nil {
			c.LastTest = &t
		}
	}
	return c, nil
}

func (s *ConnectionStore) ListConnections(ctx context.Context) ([]services.Connection, error) {
	var rows []connectionRow
	if err := s.db.WithContext(ctx).Order("provider, priority, name, id").Find(&rows).Error; err != nil {
		return nil, translate(err, "list connections")
	}
	out := make([]services.Connection, 0, len(rows))
	for _, r := range rows {
		c, err := s.fromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *ConnectionStore) FindConnectionByID(ctx context.Context, id string) (services.Connection, error) {
	var row connectionRow
	if err := s.db.WithContext(ctx).First(&row, "id = ?", id).Error; err != nil {
		return services.Connection{}, translate(err, "find connection "+id)
	}
	return s.fromRow(row)
}

func (s *ConnectionStore) CreateConnection(ctx context.Context, c services.Connection) error {
	row, err := s.toRow(c)
	if err != nil {
		return err
	}
	return translate(s.db.WithContext(ctx).Create(&row).Error, "create connection")
}

func (s *ConnectionStore) UpdateConnection(ctx context.Context, c services.Connection) error {
	row, err := s.toRow(c)
	if err != nil {
		return err
	}
	// The live resilience state is owned by the cooldown state machine
	// (ConnectionStateStore); a configuration edit never overwrites it.
	res := s.db.WithContext(ctx).Model(&connectionRow{}).Where("id = ?", c.ID).Select("*").Omit(append([]string{"created_at", "last_used_at"}, liveStateColumns...)...).Updates(&row)
	if res.Error != nil {
		return translate(res.Error, "update connection "+c.ID)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "update connection "+c.ID)
	}
	return nil
}

func (s *ConnectionStore) DeleteConnection(ctx context.Context, id string) error {
	return runTx(ctx, s.db, func(tx *gorm.DB) error {
		res := tx.Delete(&connectionRow{}, "id = ?", id)
		if res.Error != nil {
			return translate(res.Error, "delete connection "+id)
		}
		if res.RowsAffected == 0 {
			return translate(gorm.ErrRecordNotFound, "delete connection "+id)
		}
		// State keyed on the connection goes with it.
		for _, m := range []any{&ModelLockoutRow{}, &AffinityPinRow{}, &QuotaWindowRow{}} {
			if err := tx.Where("connection_id = ?", id).Delete(m).Error; err != nil {
				return translate(err, "delete connection state "+id)
			}
		}
		return nil
	})
}

func (s *ConnectionStore) ListCustomProviders(ctx context.Context) ([]services.CustomProvider, error) {
	var rows []customProviderRow
	if err := s.db.WithContext(ctx).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, translate(err, "list custom providers")
	}
	out := make([]services.CustomProvider, len(rows))
	for i, r := range rows {
		out[i] = services.CustomProvider{ID: r.ID, Format: services.WireFormat(r.WireFormat), AuthClass: services.AuthClass(r.AuthClass)}
		_ = json.Unmarshal([]byte(r.Models), &out[i].Models)
	}
	return out, nil
}

func (s *ConnectionStore) CreateCustomProvider(ctx context.Context, p services.CustomProvider) error {
	models, _ := json.Marshal(p.Models)
	if p.Models == nil {
		models = []byte("[]")
	}
	row := customProviderRow{ID: p.ID, WireFormat: string(p.Format), AuthClass: string(p.AuthClass), Models: string(models)}
	return translate(s.db.WithContext(ctx).Create(&row).Error, "create custom provider "+p.ID)
}

// SetCustomProviderModels replaces the known model list of a custom provider.
func (s *ConnectionStore) SetCustomProviderModels(ctx context.Context, id string, models []string) error {
	b, _ := json.Marshal(models)
	res := s.db.WithContext(ctx).Model(&customProviderRow{}).Where("id = ?", id).Update("models", string(b))
	if res.Error != nil {
		return translate(res.Error, "set models of "+id)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "set models of "+id)
	}
	return nil
}

// liveStateColumns are written only by the resilience state store: the
// same list it saves, so a column added there is never overwritten by a
// configuration edit.
var liveStateColumns = connectionStateColumns
