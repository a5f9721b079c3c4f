package models

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"switchyard/services"
)

type comboRow struct {
	ID          string `gorm:"primaryKey"`
	Name        string
	Description string
	Strategy    string
	Enabled     bool
	Hidden      bool
	SortOrder   int
	Targets     string
	Config      string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (comboRow) TableName() string { return "combos" }

func comboToRow(c services.Combo) comboRow {
	targets, _ := json.Marshal(c.Targets)
	if c.Targets == nil {
		targets = []byte("[]")
	}
	return comboRow{ID: c.ID, Name: c.Name, Description: c.Description, Strategy: c.Strategy, Enabled: c.Enabled,
		Hidden: c.Hidden, SortOrder: c.Order, Targets: string(targets), Config: services.ConfigJSON(c.Config),
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

func (r comboRow) domain() services.Combo {
	c := services.Combo{ID: r.ID, Name: r.Name, Description: r.Description, Strategy: r.Strategy, Enabled: r.Enabled,
		Hidden: r.Hidden, Order: r.SortOrder, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	_ = json.Unmarshal([]byte(r.Targets), &c.Targets)
	_ = json.Unmarshal([]byte(r.Config), &c.Config)
	return c
}

// ComboStore implements services.ComboStore.
type ComboStore struct{ db *gorm.DB }

var _ services.ComboStore = (*ComboStore)(nil)

// NewComboStore builds the repository.
func NewComboStore(db *gorm.DB) *ComboStore { return &ComboStore{db: db} }

func (s *ComboStore) ListCombos(ctx context.Context) ([]services.Combo, error) {
	var rows []comboRow
	if err := s.db.WithContext(ctx).Order("sort_order, created_at, id").Find(&rows).Error; err != nil {
		return nil, translate(err, "list combos")
	}
	out := make([]services.Combo, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

func (s *ComboStore) FindComboByID(ctx context.Context, id string) (services.Combo, error) {
	var row comboRow
	if err := s.db.WithContext(ctx).First(&row, "id = ?", id).Error; err != nil {
		return services.Combo{}, translate(err, "find combo "+id)
	}
	return row.domain(), nil
}

func (s *ComboStore) CreateCombo(ctx context.Context, c services.Combo) error {
	row := comboToRow(c)
	return translate(s.db.WithContext(ctx).Create(&row).Error, "create combo")
}

func (s *ComboStore) UpdateCombo(ctx context.Context, c services.Combo) error {
	row := comboToRow(c)
	res := s.db.WithContext(ctx).Model(&comboRow{}).Where("id = ?", c.ID).Select("*").Omit("created_at").Updates(&row)
	if res.Error != nil {
		return translate(res.Error, "update combo "+c.ID)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "update combo "+c.ID)
	}
	return nil
}

func (s *ComboStore) DeleteCombo(ctx context.Context, id string) error {
	res := s.db.WithContext(ctx).Delete(&comboRow{}, "id = ?", id)
	if res.Error != nil {
		return translate(res.Error, "delete combo "+id)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "delete combo "+id)
	}
	return nil
}

func (s *ComboStore) ReorderCombos(ctx context.Context, ids []string) error {
	return runTx(ctx, s.db, func(tx *gorm.DB) error {
		for i, id := range ids {
			if err := tx.Model(&comboRow{}).Where("id = ?", id).Update("sort_order", i).Error; err != nil {
				return translate(err, "reorder combos")
			}
		}
		return nil
	})
}
