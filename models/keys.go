package models

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"switchyard/services"
)

type apiKeyRow struct {
	ID                    string `gorm:"primaryKey"`
	Name                  string
	Prefix                string
	KeyHash               string
	Enabled               bool
	Scopes                string
	AllowedModels         *string
	AllowedCombos         *string
	AllowedConnections    *string
	RequestsPerMinute     *int
	MaxConcurrentRequests *int
	ExpiresAt             *time.Time
	CreatedAt             time.Time
	LastUsedAt            *time.Time
	RevokedAt             *time.Time
}

func (apiKeyRow) TableName() string { return "api_keys" }

// nullableList stores nil as NULL ("any") and [] as "[]" ("none").
func nullableList(v []string) *string {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	s := string(b)
	return &s
}

func parseList(s *string) []string {
	if s == nil {
		return nil
	}
	out := []string{}
	_ = json.Unmarshal([]byte(*s), &out)
	return out
}

func keyToRow(k services.APIKey) apiKeyRow {
	scopes, _ := json.Marshal(k.Scopes)
	return apiKeyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, KeyHash: k.KeyHash, Enabled: k.Enabled, Scopes: string(scopes),
		AllowedModels: nullableList(k.AllowedModels), AllowedCombos: nullableList(k.AllowedCombos),
		AllowedConnections: nullableList(k.AllowedConnections), RequestsPerMinute: k.RequestsPerMinute,
		MaxConcurrentRequests: k.MaxConcurrentRequests, ExpiresAt: k.ExpiresAt, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt}
}

func (r apiKeyRow) domain() services.APIKey {
	k := services.APIKey{ID: r.ID, Name: r.Name, Prefix: r.Prefix, KeyHash: r.KeyHash, Enabled: r.Enabled,
		AllowedModels: parseList(r.AllowedModels), AllowedCombos: parseList(r.AllowedCombos),
		AllowedConnections: parseList(r.AllowedConnections), RequestsPerMinute: r.RequestsPerMinute,
		MaxConcurrentRequests: r.MaxConcurrentRequests, ExpiresAt: utcPtr(r.ExpiresAt), CreatedAt: r.CreatedAt.UTC(),
		LastUsedAt: utcPtr(r.LastUsedAt), RevokedAt: utcPtr(r.RevokedAt)}
	k.Scopes = []string{}
	_ = json.Unmarshal([]byte(r.Scopes), &k.Scopes)
	return k
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// KeyStore implements services.KeyStore.
type KeyStore struct{ db *gorm.DB }

var _ services.KeyStore = (*KeyStore)(nil)

// NewKeyStore builds the repository.
func NewKeyStore(db *gorm.DB) *KeyStore { return &KeyStore{db: db} }

func (s *KeyStore) ListKeys(ctx context.Context) ([]services.APIKey, error) {
	var rows []apiKeyRow
	if err := s.db.WithContext(ctx).Order("created_at DESC, id").Find(&rows).Error; err != nil {
		return nil, translate(err, "list keys")
	}
	out := make([]services.APIKey, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

func (s *KeyStore) FindKeyByID(ctx context.Context, id string) (services.APIKey, error) {
	var row apiKeyRow
	if err := s.db.WithContext(ctx).First(&row, "id = ?", id).Error; err != nil {
		return services.APIKey{}, translate(err, "find key "+id)
	}
	return row.domain(), nil
}

func (s *KeyStore) CreateKey(ctx context.Context, k services.APIKey) error {
	row := keyToRow(k)
	return translate(s.db.WithContext(ctx).Create(&row).Error, "create key")
}

func (s *KeyStore) UpdateKey(ctx context.Context, k services.APIKey) error {
	row := keyToRow(k)
	res := s.db.WithContext(ctx).Model(&apiKeyRow{}).Where("id = ?", k.ID).Select("*").Omit("created_at", "key_hash", "prefix").Updates(&row)
	if res.Error != nil {
		return translate(res.Error, "update key "+k.ID)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "update key "+k.ID)
	}
	return nil
}

func (s *KeyStore) DeleteKey(ctx context.Context, id string) error {
	res := s.db.WithContext(ctx).Delete(&apiKeyRow{}, "id = ?", id)
	if res.Error != nil {
		return translate(res.Error, "delete key "+id)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "delete key "+id)
	}
	return nil
}

func (s *KeyStore) TouchKey(ctx context.Context, id string, at time.Time) error {
	return translate(s.db.WithContext(ctx).Model(&apiKeyRow{}).Where("id = ?", id).Update("last_used_at", at).Error, "touch key "+id)
}
