package models

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services"
)

// auditRow is one admin action (migration 0007).
type auditRow struct {
	ID        string `gorm:"primaryKey"`
	CreatedAt int64  `gorm:"autoCreateTime:false"`
	ActorKind string
	ActorID   string `gorm:"column:actor_id"`
	ActorName string
	KeyPrefix string
	ClientIP  string `gorm:"column:client_ip"`
	UserAgent string
	RequestID string `gorm:"column:request_id"`
	Method    string
	Route     string
	Path      string
	Action    string
	TargetID  string `gorm:"column:target_id"`
	Status    int
	Changes   string
}

func (auditRow) TableName() string { return "audit_log" }

// AuditStore implements services.AuditSink, services.AuditStore and
// services.AuditPurger on audit_log. Admin actions are few, so batches go
// through GORM (the request log's C-API path is not needed here).
type AuditStore struct{ db *gorm.DB }

var (
	_ services.AuditSink   = (*AuditStore)(nil)
	_ services.AuditStore  = (*AuditStore)(nil)
	_ services.AuditPurger = (*AuditStore)(nil)
)

// NewAuditStore builds the repository.
func NewAuditStore(db *gorm.DB) *AuditStore { return &AuditStore{db: db} }

// WriteAuditEntries inserts a batch in one statement; ids already stored are skipped.
func (s *AuditStore) WriteAuditEntries(ctx context.Context, entries []services.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	rows := make([]auditRow, len(entries))
	for i, e := range entries {
		changes := e.Changes
		if changes == nil {
			changes = []services.AuditChange{}
		}
		b, err := json.Marshal(changes)
		if err != nil {
			return err
		}
		rows[i] = auditRow{ID: e.ID, CreatedAt: e.CreatedAt.UnixMilli(), ActorKind: e.ActorKind, ActorID: e.ActorID,
			ActorName: e.ActorName, KeyPrefix: e.KeyPrefix, ClientIP: e.ClientIP, UserAgent: e.UserAgent, RequestID: e.RequestID,
			Method: e.Method, Route: e.Route, Path: e.Path, Action: e.Action, TargetID: e.TargetID, Status: e.Status, Changes: string(b)}
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 200).Error
	return translate(err, "write audit entries")
}

// ListAuditEntries returns one page newest first, keyset-paginated on (created_at, id).
func (s *AuditStore) ListAuditEntries(ctx context.Context, q services.AuditQuery) (services.AuditPage, error) {
	q, err := q.Normalize()
	if err != nil {
		return services.AuditPage{}, err
	}
	tx := s.db.WithContext(ctx).Model(&auditRow{})
	if !q.Since.IsZero() {
		tx = tx.Where("created_at >= ?", q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		tx = tx.Where("created_at < ?", q.Until.UnixMilli())
	}
	if q.ActorKind != "" {
		tx = tx.Where("actor_kind = ?", q.ActorKind)
	}
	if q.ActorID != "" {
		tx = tx.Where("actor_id = ?", q.ActorID)
	}
	if q.Method != "" {
		tx = tx.Where("method = ?", q.Method)
	}
	if q.Route != "" {
		r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
		tx = tx.Where(`route LIKE ? ESCAPE '\'`, r.Replace(q.Route)+"%")
	}
	if q.TargetID != "" {
		tx = tx.Where("target_id = ?", q.TargetID)
	}
	var rows []auditRow
	if err := keysetPage(tx, q.Cursor, q.Limit, &rows); err != nil {
		return services.AuditPage{}, translate(err, "list audit entries")
	}
	items, next := pageOf(rows, q.Limit, auditRow.domain, func(e services.AuditEntry) (time.Time, string) { return e.CreatedAt, e.ID })
	return services.AuditPage{Items: items, NextCursor: next}, nil
}

// PurgeAuditEntries deletes the entries created before before.
func (s *AuditStore) PurgeAuditEntries(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("created_at < ?", before.UnixMilli()).Delete(&auditRow{})
	return res.RowsAffected, translate(res.Error, "purge audit entries")
}

func (r auditRow) domain() services.AuditEntry {
	e := services.AuditEntry{ID: r.ID, CreatedAt: time.UnixMilli(r.CreatedAt).UTC(), ActorKind: r.ActorKind, ActorID: r.ActorID,
		ActorName: r.ActorName, KeyPrefix: r.KeyPrefix, ClientIP: r.ClientIP, UserAgent: r.UserAgent, RequestID: r.RequestID,
		Method: r.Method, Route: r.Route, Path: r.Path, Action: r.Action, TargetID: r.TargetID, Status: r.Status,
		Changes: []services.AuditChange{}}
	if err := json.Unmarshal([]byte(r.Changes), &e.Changes); err != nil || e.Changes == nil {
		e.Changes = []services.AuditChange{}
	}
	return e
}
