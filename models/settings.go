package models

import (
	"context"
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

// PutSetting compares the revision and writes in one immediate transaction.
func (s *SettingsStore) PutSetting(ctx context.Context, key string, doc []byte, expected int64) (int64, error) {
	var next int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row settingRow
		err := tx.First(&row, "key = ?", key).Error
		switch {
		case err == gorm.ErrRecordNotFound:
			if expected != 0 {
				return services.ErrConflict
			}
			next = 1
			return tx.Create(&settingRow{Key: key, Value: string(doc), Revision: next}).Error
		case err != nil:
			return err
		}
		if row.Revision != expected {
			return services.ErrConflict
		}
		next = row.Revision + 1
		return tx.Model(&settingRow{}).Where("key = ?", key).Updates(map[string]any{"value": string(doc), "revision": next, "updated_at": tx.NowFunc()}).Error
	})
	if err != nil {
		return 0, translate(err, "put setting "+key)
	}
	return next, nil
}
