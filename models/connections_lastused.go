package models

import (
	"context"
	"maps"
	"slices"
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
	// Rows in id order: two replicas flushing overlapping batches lock them
	// in the same order, so they wait for each other instead of deadlocking.
	ids := slices.Sorted(maps.Keys(at))
	return translate(runTx(ctx, s.db, func(tx *gorm.DB) error {
		for _, id := range ids {
			v := at[id].UnixMilli()
			if err := tx.Model(&connectionRow{}).Where("id = ? AND (last_used_at IS NULL OR last_used_at < ?)", id, v).
				UpdateColumn("last_used_at", v).Error; err != nil {
				return err
			}
		}
		return nil
	}), "touch connections last used")
}
