package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"switchyard/services"
)

type settingRow struct {
	Key       string `gorm:"primaryKey"`
	Value     string
	Revision  int64
	UpdatedAt time.Time
}

func (settingRow) TableName() string { return "settings" }

// SettingsStore implements services.SettingsStore.
type SettingsStore struct{ db *gorm.DB }

var _ services.SettingsStore = (*SettingsStore)(nil)

// NewSettingsStore builds the repository.
func NewSettingsStore(db *gorm.DB) *SettingsStore { return &SettingsStore{db: db} }

func (s *SettingsStore) GetSetting(ctx context.Context, key string) ([]byte, int64, error) {
	var row settingRow
	if err := s.db.WithContext(ctx).First(&row, "key = ?", key).Error; err != nil {
		return nil, 0, translate(err, "get setting "+key)
	}
	return []byte(row.Value), row.Revision, nil
}

// PutSetting stores doc when the stored revision is expected (0 = absent).
// The compare-and-set is the write statement itself — an UPDATE … WHERE
// revision = expected, or an INSERT that does nothing when the key exists
// — and the rows it affected decide: none is services.ErrConflict. Two
// writers that read the same revision therefore never both succeed, on
// SQLite or on a database that does not serialise writers at BEGIN.
func (s *SettingsStore) PutSetting(ctx context.Context, key string, doc []byte, expected int64) (int64, error) {
	db := s.db.WithContext(ctx)
	var res *gorm.DB
	if expected == 0 {
		res = db.Exec(`INSERT INTO settings (key, value, revision, updated_at) VALUES (?, ?, 1, ?) ON CONFLICT (key) DO NOTHING`,
			key, string(doc), db.NowFunc())
	} else {
		res = db.Exec(`UPDATE settings SET value = ?, revision = revision + 1, updated_at = ? WHERE key = ? AND revision = ?`,
			string(doc), db.NowFunc(), key, expected)
	}
	if res.Error != nil {
		return 0, translate(res.Error, "put setting "+key)
	}
	if res.RowsAffected == 0 {
		return 0, fmt.Errorf("models: put setting %s: revision is not %d: %w", key, expected, services.ErrConflict)
	}
	return expected + 1, nil
}
