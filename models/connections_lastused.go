package models

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// TouchConnectionsLastUsed stores, in one transaction, when a dispatch last
// started on each connection, served or failed (connections.last_used_at, ms). A
// value only ever moves forward: an older time than the stored one, or an
// id that no longer exists, changes nothing. The request path never calls
// this; the in-memory tracker flushes its batch here.
func (s *ConnectionStore) TouchConnectionsLastUsed(ctx context.Context, at map[string]time.Time) error {
	if len(at) == 0 {
		return nil
	}
	return translate(s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for id, t := range at {
			v := t.UnixMilli()
			if err := tx.Model(&connectionRow{}).Where("id = ? AND (last_used_at IS NULL OR last_used_at < ?)", id, v).
				UpdateColumn("last_used_at", v).Error; err != nil {
				return err
			}
		}
		return nil
	}), "touch connections last used")
}
