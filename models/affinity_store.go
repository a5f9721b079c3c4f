package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/affinity"
)

// AffinityStore implements affinity.Store on session_affinity_pins
// (20-resilience §5). Instants are epoch milliseconds.
type AffinityStore struct{ db *gorm.DB }

var _ affinity.Store = (*AffinityStore)(nil)

// NewAffinityStore builds the repository.
func NewAffinityStore(db *gorm.DB) *AffinityStore { return &AffinityStore{db: db} }

func pinRowOf(p affinity.Pin) AffinityPinRow {
	return AffinityPinRow{
		PinID:        p.ID,
		APIKeyID:     p.KeyID,
		Provider:     p.Provider,
		ConnectionID: p.ConnectionID,
		CreatedAt:    p.CreatedAt.UnixMilli(),
		LastUsedAt:   p.LastUsedAt.UnixMilli(),
		ExpiresAt:    p.ExpiresAt.UnixMilli(),
	}
}

func (r AffinityPinRow) domain() affinity.Pin {
	return affinity.Pin{
		ID:           r.PinID,
		KeyID:        r.APIKeyID,
		Provider:     r.Provider,
		ConnectionID: r.ConnectionID,
		CreatedAt:    time.UnixMilli(r.CreatedAt).UTC(),
		LastUsedAt:   time.UnixMilli(r.LastUsedAt).UTC(),
		ExpiresAt:    time.UnixMilli(r.ExpiresAt).UTC(),
	}
}

// LoadPins returns every stored pin, ordered by id.
func (s *AffinityStore) LoadPins(ctx context.Context) ([]affinity.Pin, error) {
	var rows []AffinityPinRow
	if err := s.db.WithContext(ctx).Order("pin_id").Find(&rows).Error; err != nil {
		return nil, translate(err, "load pins")
	}
	out := make([]affinity.Pin, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// SavePin inserts the pin or replaces every column of the row with its id.
func (s *AffinityStore) SavePin(ctx context.Context, p affinity.Pin) error {
	row := pinRowOf(p)
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "pin_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"api_key_id", "provider", "connection_id",
			"created_at", "last_used_at", "expires_at"}),
	}).Create(&row).Error
	return translate(err, "save pin "+p.ID)
}

// DeletePin deletes the row of id; a missing row is no error.
func (s *AffinityStore) DeletePin(ctx context.Context, id string) error {
	err := s.db.WithContext(ctx).Where("pin_id = ?", id).Delete(&AffinityPinRow{}).Error
	return translate(err, "delete pin "+id)
}

// DeletePinsForConnection deletes the pins of a connection and returns how many.
func (s *AffinityStore) DeletePinsForConnection(ctx context.Context, connID string) (int, error) {
	res := s.db.WithContext(ctx).Where("connection_id = ?", connID).Delete(&AffinityPinRow{})
	if res.Error != nil {
		return 0, translate(res.Error, "delete pins of connection "+connID)
	}
	return int(res.RowsAffected), nil
}

// DeleteExpired deletes the pins with expires_at ≤ now and returns how many.
func (s *AffinityStore) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", now.UnixMilli()).Delete(&AffinityPinRow{})
	if res.Error != nil {
		return 0, translate(res.Error, "delete expired pins")
	}
	return int(res.RowsAffected), nil
}
