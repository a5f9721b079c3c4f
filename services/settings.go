package services

import "context"

// SettingsStore keeps one JSON document per key with a revision counter, so
// PATCHes can use If-Match and concurrent writers never lose an update.
type SettingsStore interface {
	// GetSetting returns the document and its revision; ErrNotFound when absent.
	GetSetting(ctx context.Context, key string) (doc []byte, revision int64, err error)
	// PutSetting stores doc when the stored revision equals expected (0 = absent)
	// and returns the new revision; a mismatch is ErrConflict.
	PutSetting(ctx context.Context, key string, doc []byte, expected int64) (int64, error)
}

// Settings keys.
const (
	SettingsResilience = "resilience"
	SettingsGeneral    = "general"
	SettingsKeyCheck   = "secret_key_check"
)
