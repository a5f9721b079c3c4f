package models

import (
	"context"
	"time"

	"gorm.io/gorm"

	"switchyard/services"
)

type adminCredentialRow struct {
	ID           int `gorm:"primaryKey"`
	PasswordHash string
	UpdatedAt    time.Time
}

func (adminCredentialRow) TableName() string { return "admin_credentials" }

type adminSessionRow struct {
	IDHash     string `gorm:"primaryKey;column:id_hash"`
	CreatedAt  time.Time
	LastSeenAt time.Time
	ClientIP   string `gorm:"column:client_ip"`
	UserAgent  string
}

func (adminSessionRow) TableName() string { return "admin_sessions" }

func (r adminSessionRow) domain() services.AdminSession {
	return services.AdminSession{IDHash: r.IDHash, CreatedAt: r.CreatedAt.UTC(), LastSeenAt: r.LastSeenAt.UTC(), ClientIP: r.ClientIP, UserAgent: r.UserAgent}
}

// AdminStore implements services.AdminStore.
type AdminStore struct{ db *gorm.DB }

var _ services.AdminStore = (*AdminStore)(nil)

// NewAdminStore builds the repository.
func NewAdminStore(db *gorm.DB) *AdminStore { return &AdminStore{db: db} }

func (s *AdminStore) PasswordHash(ctx context.Context) (string, error) {
	var row adminCredentialRow
	if err := s.db.WithContext(ctx).First(&row, "id = 1").Error; err != nil {
		return "", translate(err, "read admin password")
	}
	return row.PasswordHash, nil
}

func (s *AdminStore) SetPasswordHash(ctx context.Context, hash string, onlyIfUnset bool) error {
	return runTx(ctx, s.db, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&adminCredentialRow{}).Where("id = 1").Count(&n).Error; err != nil {
			return translate(err, "read admin password")
		}
		if n > 0 {
			if onlyIfUnset {
				return services.ErrConflict
			}
			return translate(tx.Model(&adminCredentialRow{}).Where("id = 1").Updates(map[string]any{"password_hash": hash, "updated_at": tx.NowFunc()}).Error, "update admin password")
		}
		return translate(tx.Create(&adminCredentialRow{ID: 1, PasswordHash: hash}).Error, "store admin password")
	})
}

func (s *AdminStore) CreateSession(ctx context.Context, a services.AdminSession) error {
	row := adminSessionRow{IDHash: a.IDHash, CreatedAt: a.CreatedAt, LastSeenAt: a.LastSeenAt, ClientIP: a.ClientIP, UserAgent: a.UserAgent}
	return translate(s.db.WithContext(ctx).Create(&row).Error, "create session")
}

func (s *AdminStore) FindSession(ctx context.Context, idHash string) (services.AdminSession, error) {
	var row adminSessionRow
	if err := s.db.WithContext(ctx).First(&row, "id_hash = ?", idHash).Error; err != nil {
		return services.AdminSession{}, translate(err, "find session")
	}
	return row.domain(), nil
}

func (s *AdminStore) TouchSession(ctx context.Context, idHash string, at time.Time) error {
	return translate(s.db.WithContext(ctx).Model(&adminSessionRow{}).Where("id_hash = ?", idHash).Update("last_seen_at", at).Error, "touch session")
}

func (s *AdminStore) DeleteSession(ctx context.Context, idHash string) error {
	return translate(s.db.WithContext(ctx).Delete(&adminSessionRow{}, "id_hash = ?", idHash).Error, "delete session")
}

func (s *AdminStore) DeleteSessionsExcept(ctx context.Context, keep string) error {
	return translate(s.db.WithContext(ctx).Where("id_hash <> ?", keep).Delete(&adminSessionRow{}).Error, "delete sessions")
}

func (s *AdminStore) ListSessions(ctx context.Context) ([]services.AdminSession, error) {
	var rows []adminSessionRow
	if err := s.db.WithContext(ctx).Order("last_seen_at DESC").Find(&rows).Error; err != nil {
		return nil, translate(err, "list sessions")
	}
	out := make([]services.AdminSession, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}
