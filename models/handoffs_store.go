package models

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/gateway"
)

// ContextHandoffRow is one context-relay summary (context_handoffs).
type ContextHandoffRow struct {
	ID                 string `gorm:"column:id;primaryKey"`
	SourceConnectionID string `gorm:"column:source_connection_id"`
	Payload            string `gorm:"column:payload"`  // JSON of the summary fields
	Injected           string `gorm:"column:injected"` // JSON array of connection ids
	ExpiresAt          int64  `gorm:"column:expires_at"`
}

// TableName maps the row to its table.
func (ContextHandoffRow) TableName() string { return "context_handoffs" }

// HandoffStore implements gateway.HandoffStore on context_handoffs.
type HandoffStore struct{ db *gorm.DB }

var _ gateway.HandoffStore = (*HandoffStore)(nil)

// NewHandoffStore builds the repository.
func NewHandoffStore(db *gorm.DB) *HandoffStore { return &HandoffStore{db: db} }

// LoadHandoffs returns the records that have not expired at now.
func (s *HandoffStore) LoadHandoffs(ctx context.Context, now time.Time) ([]gateway.Handoff, error) {
	var rows []ContextHandoffRow
	if err := s.db.WithContext(ctx).Where("expires_at > ?", now.UnixMilli()).Order("id").Find(&rows).Error; err != nil {
		return nil, translate(err, "load context handoffs")
	}
	out := make([]gateway.Handoff, 0, len(rows))
	for _, r := range rows {
		h := gateway.Handoff{ID: r.ID, Source: r.SourceConnectionID, ExpiresAt: time.UnixMilli(r.ExpiresAt).UTC()}
		if json.Unmarshal([]byte(r.Payload), &h.Summary) != nil {
			continue
		}
		_ = json.Unmarshal([]byte(r.Injected), &h.Injected)
		out = append(out, h)
	}
	return out, nil
}

// SaveHandoff inserts or replaces a record.
func (s *HandoffStore) SaveHandoff(ctx context.Context, h gateway.Handoff) error {
	payload, _ := json.Marshal(h.Summary)
	injected, _ := json.Marshal(h.Injected)
	if h.Injected == nil {
		injected = []byte("[]")
	}
	row := ContextHandoffRow{ID: h.ID, SourceConnectionID: h.Source, Payload: string(payload), Injected: string(injected),
		ExpiresAt: h.ExpiresAt.UnixMilli()}
	return translate(s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error, "save context handoff")
}

// DeleteExpiredHandoffs removes the records expired at now.
func (s *HandoffStore) DeleteExpiredHandoffs(ctx context.Context, now time.Time) (int, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", now.UnixMilli()).Delete(&ContextHandoffRow{})
	return int(res.RowsAffected), translate(res.Error, "delete expired context handoffs")
}
