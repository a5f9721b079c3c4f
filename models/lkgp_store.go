package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/routing"
)

// ComboLKGPRow is the last-known-good record of one combo (combo_lkgp).
type ComboLKGPRow struct {
	ComboID      string `gorm:"column:combo_id;primaryKey"`
	EntryID      string `gorm:"column:entry_id"`
	ConnectionID string `gorm:"column:connection_id"`
	UpdatedAt    int64  `gorm:"column:updated_at"` // epoch ms
}

// TableName maps the row to its table.
func (ComboLKGPRow) TableName() string { return "combo_lkgp" }

// LKGPStore implements routing.LKGPStore on combo_lkgp.
type LKGPStore struct{ db *gorm.DB }

var _ routing.LKGPStore = (*LKGPStore)(nil)

// NewLKGPStore builds the repository.
func NewLKGPStore(db *gorm.DB) *LKGPStore { return &LKGPStore{db: db} }

// Load returns every stored record.
func (s *LKGPStore) Load(ctx context.Context) ([]routing.LKGPRecord, error) {
	var rows []ComboLKGPRow
	if err := s.db.WithContext(ctx).Order("combo_id").Find(&rows).Error; err != nil {
		return nil, translate(err, "load lkgp records")
	}
	out := make([]routing.LKGPRecord, len(rows))
	for i, r := range rows {
		out[i] = routing.LKGPRecord{ComboID: r.ComboID, EntryID: r.EntryID, ConnectionID: r.ConnectionID,
			UpdatedAt: time.UnixMilli(r.UpdatedAt).UTC()}
	}
	return out, nil
}

// Save inserts or replaces the record of rec.ComboID.
func (s *LKGPStore) Save(ctx context.Context, rec routing.LKGPRecord) error {
	row := ComboLKGPRow{ComboID: rec.ComboID, EntryID: rec.EntryID, ConnectionID: rec.ConnectionID, UpdatedAt: rec.UpdatedAt.UnixMilli()}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error
	return translate(err, "save lkgp record "+rec.ComboID)
}

// Delete removes the record of a combo; a missing record is no error.
func (s *LKGPStore) Delete(ctx context.Context, comboID string) error {
	err := s.db.WithContext(ctx).Where("combo_id = ?", comboID).Delete(&ComboLKGPRow{}).Error
	return translate(err, "delete lkgp record "+comboID)
}
