package models_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/leases"
)

// twoPools opens the same database twice, as two replicas do: a SQLite file
// through two handles, or one PostgreSQL schema through two pools.
func twoPools(t *testing.T, dialect string, now func() time.Time) (*gorm.DB, *gorm.DB) {
	t.Helper()
	var open func() *gorm.DB
	switch dialect {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "switchyard.db")
		open = func() *gorm.DB {
			db, err := models.Open(context.Background(), path, now)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = models.Close(db) })
			return db
		}
	default:
		dsn := testkit.PostgresSchema(t)
		open = func() *gorm.DB {
			db, err := models.OpenPostgres(context.Background(), dsn, now, models.PostgresOptions{MaxOpenConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = models.Close(db) })
			return db
		}
	}
	return open(), open()
}

// Two replicas acquiring the same connection at the same instant for
// different owners: every round exactly one lease is granted, the other
// acquire is refused with LEASE_CAPACITY_UNAVAILABLE (never a 500), and the
// loser's replica reads the winner's lease through its own pool.
func TestLeaseStoreTwoReplicasOneWinnerPerRound(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			clock := testkit.NewFakeClock(pinT0)
			dbA, dbB := twoPools(t, dialect, clock.Now)
			stores := []*models.LeaseStore{models.NewLeaseStore(dbA), models.NewLeaseStore(dbB)}
			key := services.APIKey{ID: "k1", Enabled: true, Scopes: []string{services.ScopeLeaseExclusive}, AllowedConnections: []string{"c1"}}
			for round := range 20 {
				var wg sync.WaitGroup
				errs := make([]error, 2)
				won := make([]leases.Lease, 2)
				for i, s := range stores {
					wg.Go(func() {
						won[i], errs[i] = s.Acquire(context.Background(), leases.AcquireRequest{
							OwnerHash: leases.HashOwner(leaseOwner(byte(2*round + i))), KeyID: key.ID, Provider: "openai",
							Candidates: []string{"c1"}, TTL: time.Minute, Now: clock.Now()})
					})
				}
				wg.Wait()
				winners := 0
				for i, err := range errs {
					var le *leases.Error
					switch {
					case err == nil:
						winners++
					case errors.As(err, &le) && le.Code == leases.CodeCapacityUnavailable:
					default:
						t.Fatalf("round %d replica %d: %v", round, i, err)
					}
				}
				active, err := stores[1].LiveLeases(context.Background(), clock.Now())
				if winners != 1 || err != nil || len(active) != 1 {
					t.Fatalf("round %d: %d winners, %d active leases (%v)", round, winners, len(active), err)
				}
				for i := range stores {
					if errs[i] == nil {
						got, ok, err := stores[1-i].LiveByOwner(context.Background(), won[i].OwnerHash, clock.Now())
						if err != nil || !ok || got.ID != won[i].ID {
							t.Fatalf("round %d: the other replica reads %+v, %v, %v", round, got, ok, err)
						}
						if _, err := stores[i].Release(context.Background(), leases.FenceRequest{OwnerHash: won[i].OwnerHash,
							KeyID: key.ID, Generation: won[i].Generation, Now: clock.Now()}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		})
	}
}

// The read-through reads only live rows: an expired active row (not yet
// swept) is not a lease.
func TestLeaseStoreLiveReadsSkipExpired(t *testing.T) {
	testkit.Dialects(t, testkit.NewFakeClock(pinT0).Now, func(t *testing.T, db *gorm.DB) {
		s := models.NewLeaseStore(db)
		hash := leases.HashOwner(leaseOwner(1))
		l, err := s.Acquire(context.Background(), leases.AcquireRequest{OwnerHash: hash, KeyID: "k1", Provider: "openai",
			Candidates: []string{"c1"}, TTL: time.Minute, Now: pinT0})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.LiveByOwner(context.Background(), hash, pinT0.Add(59*time.Second)); err != nil || !ok || got.ID != l.ID {
			t.Fatalf("LiveByOwner before expiry = %+v, %v, %v", got, ok, err)
		}
		if _, ok, err := s.LiveByOwner(context.Background(), hash, pinT0.Add(time.Minute)); err != nil || ok {
			t.Fatalf("LiveByOwner at expiry = %v, %v; want none", ok, err)
		}
		if ls, err := s.LiveLeases(context.Background(), pinT0.Add(time.Minute)); err != nil || len(ls) != 0 {
			t.Fatalf("LiveLeases at expiry = %+v, %v", ls, err)
		}
	})
}
