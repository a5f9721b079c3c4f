package models_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/affinity"
	"switchyard/services/leases"
)

var pinT0 = time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC)

func openStoreDB(t *testing.T, clock *testkit.FakeClock) *gorm.DB {
	t.Helper()
	return testkit.OpenDBAt(t, filepath.Join(t.TempDir(), "switchyard.db"), clock.Now)
}

func TestAffinityStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := openStoreDB(t, testkit.NewFakeClock(pinT0))
	s := models.NewAffinityStore(db)
	pin := func(id, conn string, expires time.Duration) affinity.Pin {
		return affinity.Pin{ID: id, KeyID: "k1", Provider: "openai", ConnectionID: conn,
			CreatedAt: pinT0, LastUsedAt: pinT0.Add(time.Second), ExpiresAt: pinT0.Add(expires)}
	}
	a, b, c := pin("a", "c1", time.Minute), pin("b", "c1", 2*time.Minute), pin("c", "c2", 3*time.Minute)
	for _, p := range []affinity.Pin{a, b, c} {
		if err := s.SavePin(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LoadPins(ctx)
	if err != nil || !reflect.DeepEqual(got, []affinity.Pin{a, b, c}) {
		t.Fatalf("LoadPins = %+v, %v", got, err)
	}

	// Saving an existing id replaces every column.
	a2 := a
	a2.ConnectionID, a2.KeyID, a2.CreatedAt, a2.ExpiresAt = "c3", "k2", pinT0.Add(time.Hour), pinT0.Add(2*time.Hour)
	if err := s.SavePin(ctx, a2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadPins(ctx); !reflect.DeepEqual(got[0], a2) || len(got) != 3 {
		t.Fatalf("after upsert %+v", got)
	}

	if err := s.DeletePin(ctx, "missing"); err != nil {
		t.Fatalf("delete of a missing pin: %v", err)
	}
	if n, err := s.DeletePinsForConnection(ctx, "c1"); err != nil || n != 1 {
		t.Fatalf("DeletePinsForConnection = (%d, %v), want 1", n, err)
	}
	// expires_at ≤ now is expired: c ends exactly at +3 min.
	if n, err := s.DeleteExpired(ctx, pinT0.Add(3*time.Minute)); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = (%d, %v), want 1", n, err)
	}
	if err := s.DeletePin(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadPins(ctx); len(got) != 0 {
		t.Fatalf("left %+v", got)
	}
}

func leaseOwner(n byte) string {
	return "vlo_" + base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat(string(rune('a'+n)), 32)))
}

func acquireReq(ownerHash, key string, now time.Time, conns ...string) leases.AcquireRequest {
	return leases.AcquireRequest{OwnerHash: ownerHash, KeyID: key, Provider: "openai",
		Candidates: conns, TTL: time.Minute, Now: now}
}

// The partial unique indexes admit one active row per connection and per
// owner, any number of ended ones; a row they reject becomes a lease error.
func TestLeaseStoreDuplicateBecomesLeaseError(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(pinT0)
	db := openStoreDB(t, clock)
	s := models.NewLeaseStore(db)
	now := pinT0.UnixMilli()
	raw := func(id, owner, conn, state string, expires time.Duration) error {
		return db.Create(&models.LeaseRow{ID: id, OwnerHash: owner, APIKeyID: "k2", Provider: "openai",
			ConnectionID: conn, Generation: 1, State: state, AcquiredAt: now, RenewedAt: now,
			ExpiresAt: pinT0.Add(expires).UnixMilli()}).Error
	}
	if err := raw("r1", "hx", "c1", "active", 40*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := raw("r2", "hy", "c1", "active", time.Minute); !errors.Is(err, gorm.ErrDuplicatedKey) {
		t.Fatalf("second active row on c1: %v, want duplicate key", err)
	}
	if err := raw("r3", "hx", "c9", "active", time.Minute); !errors.Is(err, gorm.ErrDuplicatedKey) {
		t.Fatalf("second active row of owner hx: %v, want duplicate key", err)
	}
	if err := raw("r4", "hy", "c1", "released", time.Minute); err != nil {
		t.Fatalf("ended row beside an active one: %v", err)
	}

	// The insert on c1 is refused by the index: 429, not a 500.
	_, err := s.Acquire(ctx, acquireReq("hz", "k1", pinT0, "c1"))
	var le *leases.Error
	if !errors.As(err, &le) || le.Code != leases.CodeCapacityUnavailable || le.Status != 429 || le.RetryAfter != 40*time.Second {
		t.Fatalf("acquire of a held connection: %#v", err)
	}
	// The refused insert does not spoil the transaction: the next candidate is taken.
	l, err := s.Acquire(ctx, acquireReq("hz", "k1", pinT0, "c1", "c2"))
	if err != nil || l.ConnectionID != "c2" || l.Generation != 1 {
		t.Fatalf("acquire with a free second candidate: %+v, %v", l, err)
	}
	// Owner hx is active under k2: acquiring under k1 is an owner conflict.
	_, err = s.Acquire(ctx, acquireReq("hx", "k1", pinT0, "c3"))
	if !errors.As(err, &le) || le.Code != leases.CodeOwnerConflict || le.Status != 409 {
		t.Fatalf("owner under another key: %#v", err)
	}
	if _, err := s.Acquire(ctx, acquireReq("hq", "k1", pinT0)); !errors.Is(err, leases.ErrNoEligible) {
		t.Fatalf("no candidates: %v", err)
	}
	var n int64
	db.Model(&models.LeaseRow{}).Where("state = 'active'").Count(&n)
	if n != 2 {
		t.Fatalf("%d active rows, want 2", n)
	}
}

// L1: the owner token exists only as its SHA-256; expiry and release write
// the end columns, and an active row has them NULL.
func TestLeaseStoreRows(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(pinT0)
	db := openStoreDB(t, clock)
	svc := leases.New(models.NewLeaseStore(db), clock)
	key := services.APIKey{ID: "k1", Scopes: []string{services.ScopeLeaseExclusive}, AllowedConnections: []string{"c1", "c2"}}
	o1, o2 := leaseOwner(1), leaseOwner(2)
	if _, err := svc.Acquire(ctx, key, o1, "openai", []string{"c1"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Acquire(ctx, key, o2, "openai", []string{"c2"}, time.Minute); err != nil {
		t.Fatal(err)
	}

	rows, err := db.Raw("SELECT * FROM exclusive_leases").Rows()
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	var dump strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			fmt.Fprintf(&dump, "%v|%s|", v, v)
		}
	}
	rows.Close()
	for _, o := range []string{o1, o2, o1[4:], o2[4:]} {
		if strings.Contains(dump.String(), o) {
			t.Fatalf("owner token stored in the clear: %s", dump.String())
		}
	}
	if !strings.Contains(dump.String(), services.SHA256Hex(o1)) {
		t.Fatal("owner hash missing")
	}

	var active models.LeaseRow
	if err := db.First(&active, "owner_hash = ?", services.SHA256Hex(o2)).Error; err != nil {
		t.Fatal(err)
	}
	if active.State != "active" || active.EndedAt != nil || active.EndReason != nil ||
		active.ExpiresAt != pinT0.Add(time.Minute).UnixMilli() || active.Generation != 1 {
		t.Fatalf("active row %+v", active)
	}

	clock.Advance(15 * time.Second)
	if n, err := svc.Expire(ctx); err != nil || n != 1 {
		t.Fatalf("Expire = (%d, %v)", n, err)
	}
	var expired models.LeaseRow
	db.First(&expired, "owner_hash = ?", services.SHA256Hex(o1))
	if expired.State != "expired" || expired.EndedAt == nil || *expired.EndedAt != pinT0.Add(10*time.Second).UnixMilli() ||
		expired.EndReason == nil || *expired.EndReason != "ttl_expired" {
		t.Fatalf("expired row %+v", expired)
	}

	if _, err := svc.Release(ctx, key, o2, 1, leases.ReasonClientCancelled); err != nil {
		t.Fatal(err)
	}
	var released models.LeaseRow
	db.First(&released, "owner_hash = ?", services.SHA256Hex(o2))
	if released.State != "released" || released.EndedAt == nil || *released.EndedAt != clock.Now().UnixMilli() ||
		released.EndReason == nil || *released.EndReason != "client_cancelled" {
		t.Fatalf("released row %+v", released)
	}
}
