package models

import (
	"context"
	"strconv"
	"time"

	"gorm.io/gorm"

	"switchyard/migrations"
	"switchyard/services"
)

// LoginThrottleStore is the sign-in throttle of a shared database: a
// services.LoginThrottle over admin_login_failures (migration 0006), one
// row per reserved password check, so every replica counts the fleet's
// checks, per address and account-wide, with the in-memory throttle's rules
// (services.LoginWait). Reserve is one transaction — count the window's
// rows, insert the reservation only when the rules allow it — serialised
// across replicas by an advisory lock on PostgreSQL (SQLite's immediate
// transactions serialise it there), so attempts racing on several replicas
// cannot run more checks than one replica would allow.
type LoginThrottleStore struct{ db *gorm.DB }

var _ services.LoginThrottle = (*LoginThrottleStore)(nil)

// NewLoginThrottleStore builds the throttle on db.
func NewLoginThrottleStore(db *gorm.DB) *LoginThrottleStore { return &LoginThrottleStore{db: db} }

// loginFailureKeep is how long a row is kept (the window is 15 min); each
// reservation deletes the older ones.
const loginFailureKeep = time.Hour

// clearedPrefix marks the rows of an address whose password was then
// right: they no longer count for the address (its counter is cleared) but
// still count account-wide, as in the in-memory throttle. No client
// address starts with '~'.
const clearedPrefix = "~"

type loginCount struct {
	N    int
	Last int64
}

// Reserve implements services.LoginThrottle. The reservation's id is its
// row's at (epoch ms): rows of one address at one millisecond are alike, so
// Settle withdraws one of them.
func (s *LoginThrottleStore) Reserve(ctx context.Context, a services.LoginAttempt) (services.LoginReservation, error) {
	ip := PostgresText(a.IP)
	res := services.LoginReservation{IP: a.IP, At: a.At}
	err := runTx(ctx, s.db, func(tx *gorm.DB) error {
		res.ID, res.Wait = "", 0 // a retried transaction starts over
		if err := lockLoginFailures(tx); err != nil {
			return err
		}
		since := a.At.Add(-services.LoginWindow).UnixMilli()
		var byIP, all loginCount
		if err := tx.Raw(`SELECT COUNT(*) AS n, COALESCE(MAX(at), 0) AS last FROM admin_login_failures WHERE client_ip = ? AND at > ?`,
			ip, since).Scan(&byIP).Error; err != nil {
			return err
		}
		if err := tx.Raw(`SELECT COUNT(*) AS n, COALESCE(MAX(at), 0) AS last FROM admin_login_failures WHERE at > ?`,
			since).Scan(&all).Error; err != nil {
			return err
		}
		res.Wait = services.LoginWait(byIP.N, time.UnixMilli(byIP.Last), all.N, time.UnixMilli(all.Last), a.Loopback, a.At)
		if res.Wait > 0 {
			return nil
		}
		at := a.At.UnixMilli()
		if err := tx.Exec(`INSERT INTO admin_login_failures (client_ip, at) VALUES (?, ?)`, ip, at).Error; err != nil {
			return err
		}
		res.ID = strconv.FormatInt(at, 10)
		return tx.Exec(`DELETE FROM admin_login_failures WHERE at < ?`, a.At.Add(-loginFailureKeep).UnixMilli()).Error
	})
	if err != nil {
		return services.LoginReservation{}, translate(err, "reserve a sign-in check")
	}
	return res, nil
}

// Settle implements services.LoginThrottle: a wrong password leaves the
// row counted; a check that did not run withdraws it; a right password
// withdraws it and clears the address's earlier rows, which keep counting
// account-wide.
func (s *LoginThrottleStore) Settle(ctx context.Context, r services.LoginReservation, o services.LoginOutcome) error {
	if r.ID == "" || o == services.LoginFailed {
		return nil
	}
	at, err := strconv.ParseInt(r.ID, 10, 64)
	if err != nil {
		return nil
	}
	ip := PostgresText(r.IP)
	return translate(runTx(ctx, s.db, func(tx *gorm.DB) error {
		if err := lockLoginFailures(tx); err != nil {
			return err
		}
		if err := withdrawOne(tx, ip, at); err != nil {
			return err
		}
		if o != services.LoginSucceeded {
			return nil
		}
		return tx.Exec(`UPDATE admin_login_failures SET client_ip = ? WHERE client_ip = ?`, clearedPrefix+ip, ip).Error
	}), "settle a sign-in check")
}

// lockLoginFailures serialises the throttle's transactions across replicas
// on PostgreSQL (an advisory lock held to the end of the transaction);
// SQLite's immediate transactions already do.
func lockLoginFailures(tx *gorm.DB) error {
	if Dialect(tx) != migrations.Postgres {
		return nil
	}
	return tx.Exec(`SELECT pg_advisory_xact_lock(hashtext('admin_login_failures'))`).Error
}

// withdrawOne deletes one of the rows of ip at at (the table has no key:
// checks of one address in one millisecond make equal rows, and the others
// stay counted), the same statements on both dialects.
func withdrawOne(tx *gorm.DB, ip string, at int64) error {
	var n int64
	if err := tx.Raw(`SELECT COUNT(*) FROM admin_login_failures WHERE client_ip = ? AND at = ?`, ip, at).Scan(&n).Error; err != nil || n == 0 {
		return err
	}
	if err := tx.Exec(`DELETE FROM admin_login_failures WHERE client_ip = ? AND at = ?`, ip, at).Error; err != nil {
		return err
	}
	for range n - 1 {
		if err := tx.Exec(`INSERT INTO admin_login_failures (client_ip, at) VALUES (?, ?)`, ip, at).Error; err != nil {
			return err
		}
	}
	return nil
}
