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

// claimPrefix marks the rows that claim the making of a summary (see
// ClaimHandoff); record ids are hex digests and never contain ':'.
const claimPrefix = "claim:"

// notClaim selects records, not claims.
const notClaim = "id NOT LIKE 'claim:%'"

func (r ContextHandoffRow) domain() (gateway.Handoff, bool) {
	h := gateway.Handoff{ID: r.ID, Source: r.SourceConnectionID, ExpiresAt: time.UnixMilli(r.ExpiresAt).UTC()}
	if json.Unmarshal([]byte(r.Payload), &h.Summary) != nil {
		return gateway.Handoff{}, false
	}
	_ = json.Unmarshal([]byte(r.Injected), &h.Injected)
	return h, true
}

// LoadHandoffs returns the records that have not expired at now.
func (s *HandoffStore) LoadHandoffs(ctx context.Context, now time.Time) ([]gateway.Handoff, error) {
	var rows []ContextHandoffRow
	if err := s.db.WithContext(ctx).Where("expires_at > ? AND "+notClaim, now.UnixMilli()).Order("id").Find(&rows).Error; err != nil {
		return nil, translate(err, "load context handoffs")
	}
	out := make([]gateway.Handoff, 0, len(rows))
	for _, r := range rows {
		if h, ok := r.domain(); ok {
			out = append(out, h)
		}
	}
	return out, nil
}

// LoadHandoff returns the record id if it has not expired at now: the
// read-through of a record another replica made.
func (s *HandoffStore) LoadHandoff(ctx context.Context, id string, now time.Time) (gateway.Handoff, bool, error) {
	var rows []ContextHandoffRow
	err := s.db.WithContext(ctx).Where("id = ? AND expires_at > ? AND "+notClaim, id, now.UnixMilli()).Limit(1).Find(&rows).Error
	if err != nil {
		return gateway.Handoff{}, false, translate(err, "load context handoff")
	}
	if len(rows) == 0 {
		return gateway.Handoff{}, false, nil
	}
	h, ok := rows[0].domain()
	return h, ok, nil
}

// ClaimHandoff claims the making of record id's summary until until, for
// the replicas of a fleet: true when no other claim is live at now. The
// claim is a row of its own (id "claim:<id>", no payload) written by one
// atomic upsert that only replaces an expired claim, so of two replicas
// claiming together exactly one wins, on both dialects; a replica that
// dies mid-summary leaves a claim that lapses at until.
func (s *HandoffStore) ClaimHandoff(ctx context.Context, id string, until, now time.Time) (bool, error) {
	row := ContextHandoffRow{ID: claimPrefix + id, Payload: "", Injected: "[]", ExpiresAt: until.UnixMilli()}
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "id"}},
		DoUpdates: clause.AssignmentColumns([]string{"expires_at"}),
		Where: clause.Where{Exprs: []clause.Expression{
			clause.Expr{SQL: "context_handoffs.expires_at <= ?", Vars: []any{now.UnixMilli()}}}},
	}).Create(&row)
	if res.Error != nil {
		return false, translate(res.Error, "claim context handoff")
	}
	return res.RowsAffected == 1, nil
}

// ReleaseHandoffClaim ends this replica's claim on id.
func (s *HandoffStore) ReleaseHandoffClaim(ctx context.Context, id string) error {
	err := s.db.WithContext(ctx).Where("id = ?", claimPrefix+id).Delete(&ContextHandoffRow{}).Error
	return translate(err, "release context handoff claim")
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
