package resilience_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/resilience"
)

var bkT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// bkAt is the instant t0 + ms milliseconds.
func bkAt(ms int64) time.Time { return bkT0.Add(time.Duration(ms) * time.Millisecond) }

func bkIntPtr(v int) *int { return &v }

// bkDefaults is the providerBreaker section with the defaults of 20-resilience §2.
func bkDefaults() resilience.BreakerConfig {
	return resilience.BreakerConfig{
		services.AuthOAuth: {DegradationThreshold: bkIntPtr(5), FailureThreshold: 8, ResetTimeoutMs: 60_000,
			HalfOpenRequests: 1, EscalateAfterCycles: 2, MaxBackoffMultiplier: 8},
		services.AuthAPIKey: {DegradationThreshold: bkIntPtr(7), FailureThreshold: 12, ResetTimeoutMs: 30_000,
			HalfOpenRequests: 1, EscalateAfterCycles: 3, MaxBackoffMultiplier: 4},
		services.AuthLocal: {FailureThreshold: 2, ResetTimeoutMs: 15_000,
			HalfOpenRequests: 1, EscalateAfterCycles: 3, MaxBackoffMultiplier: 4},
	}
}

// bkMemStore is the memory BreakerStore with the helpers these tests use.
type bkMemStore struct{ *resilience.MemoryBreakerStore }

func newBkMemStore() *bkMemStore { return &bkMemStore{resilience.NewMemoryBreakerStore()} }

func (s *bkMemStore) row(name string) (resilience.BreakerSnapshot, bool) { return s.Row(name) }

type bkEnv struct {
	clock *testkit.FakeClock
	cfg   resilience.BreakerConfig
	store *bkMemStore
	br    *resilience.Breakers
}

func newBkEnv(t *testing.T) *bkEnv {
	t.Helper()
	e := &bkEnv{clock: testkit.NewFakeClock(bkT0), cfg: bkDefaults(), store: newBkMemStore()}
	e.br = resilience.NewBreakers(e.clock, func() resilience.BreakerConfig { return e.cfg }, e.store, nil)
	return e
}

// fail records one counted failure on a new episode, admitted just now.
func (e *bkEnv) fail(t *testing.T, provider string, profile resilience.Profile) {
	t.Helper()
	ok, probe, gen, _ := e.br.Allow(provider, profile)
	if !ok || probe {
		t.Fatalf("Allow(%s) = ok %v probe %v, want a plain admission", provider, ok, probe)
	}
	e.br.Failure(provider, profile, gen, false, true, true, "server_error")
}

// open drives provider to OPEN at t=40 s with threshold counted failures and
// returns the generation the failures were admitted at.
func (e *bkEnv) open(t *testing.T, provider string, profile resilience.Profile) uint64 {
	t.Helper()
	threshold := e.cfg[profile].FailureThreshold
	_, _, gen, _ := e.br.Allow(provider, profile)
	for i := 1; i < threshold; i++ {
		e.clock.Set(bkAt(int64(i) * 1000))
		e.fail(t, provider, profile)
	}
	e.clock.Set(bkAt(40_000))
	e.fail(t, provider, profile)
	if s := e.br.Status(provider); s.State != resilience.BreakerOpen {
		t.Fatalf("after %d failures: state %s, want OPEN", threshold, s.State)
	}
	return gen
}

func wantBkStatus(t *testing.T, got resilience.BreakerStatus, state resilience.BreakerState, failures, cycles int, retryMs int64) {
	t.Helper()
	if got.State != state || got.FailureCount != failures || got.OpenCycleCount != cycles || got.RetryAfterMs != retryMs {
		t.Fatalf("status = %s failureCount %d openCycleCount %d retryAfterMs %d; want %s %d %d %d",
			got.State, got.FailureCount, got.OpenCycleCount, got.RetryAfterMs, state, failures, cycles, retryMs)
	}
}

func TestBreakerB1ApikeyThresholds(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	_, _, gen0, _ := e.br.Allow(p, services.AuthAPIKey)
	for i := 1; i <= 6; i++ {
		e.clock.Set(bkAt(int64(i) * 1000))
		e.fail(t, p, services.AuthAPIKey)
	}
	wantBkStatus(t, e.br.Status(p), resilience.BreakerClosed, 6, 0, 0)
	e.clock.Set(bkAt(7000))
	e.fail(t, p, services.AuthAPIKey)
	wantBkStatus(t, e.br.Status(p), resilience.BreakerDegraded, 7, 0, 0)
	if ok, _, _, _ := e.br.Allow(p, services.AuthAPIKey); !ok {
		t.Fatal("DEGRADED must not exclude")
	}
	for i := 8; i <= 11; i++ {
		e.clock.Set(bkAt(int64(i) * 1000))
		e.fail(t, p, services.AuthAPIKey)
	}
	wantBkStatus(t, e.br.Status(p), resilience.BreakerDegraded, 11, 0, 0)
	e.clock.Set(bkAt(40_000))
	e.fail(t, p, services.AuthAPIKey)
	s := e.br.Status(p)
	wantBkStatus(t, s, resilience.BreakerOpen, 12, 0, 30_000)
	if s.EffectiveResetMs != 30_000 || s.FailureThreshold != 12 || s.DegradationThreshold != 7 || s.Profile != services.AuthAPIKey {
		t.Fatalf("status thresholds = %+v", s)
	}
	if s.OpenedAt == nil || !s.OpenedAt.Equal(bkAt(40_000)) || s.LastFailureAt == nil || !s.LastFailureAt.Equal(bkAt(40_000)) ||
		s.LastFailureReason != "server_error" {
		t.Fatalf("status instants = %+v", s)
	}
	ok, probe, _, retry := e.br.Allow(p, services.AuthAPIKey)
	if ok || probe || retry != 30*time.Second {
		t.Fatalf("Allow on OPEN = %v %v %v, want excluded for 30s", ok, probe, retry)
	}

	// Five 503s of requests admitted before the breaker opened change nothing.
	for range 5 {
		e.br.Failure(p, services.AuthAPIKey, gen0, false, true, true, "server_error")
		e.br.Success(p, gen0, false)
	}
	wantBkStatus(t, e.br.Status(p), resilience.BreakerOpen, 12, 0, 30_000)
	if row, ok := e.store.row(p); !ok || row.State != resilience.BreakerOpen || row.FailureCount != 12 ||
		!row.OpenedAt.Equal(bkAt(40_000)) {
		t.Fatalf("row = %+v %v, want OPEN 12 opened at t=40s", row, ok)
	}
}

func TestBreakerB2HalfOpenProbe(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	e.open(t, p, services.AuthAPIKey)

	e.clock.Set(bkAt(69_999))
	wantBkStatus(t, e.br.Status(p), resilience.BreakerOpen, 12, 0, 1)
	if ok, _, _, retry := e.br.Allow(p, services.AuthAPIKey); ok || retry != time.Millisecond {
		t.Fatalf("Allow at 69.999 s = %v retry %v, want excluded 1ms", ok, retry)
	}

	e.clock.Set(bkAt(70_000))
	if s := e.br.Status(p); s.State != resilience.BreakerHalfOpen || s.RetryAfterMs != 0 {
		t.Fatalf("status at 70 s = %s retry %d, want HALF_OPEN 0", s.State, s.RetryAfterMs)
	}
	if row, _ := e.store.row(p); row.State != resilience.BreakerHalfOpen {
		t.Fatalf("row state = %s, want HALF_OPEN written through", row.State)
	}
	ok, probe, gen, _ := e.br.Allow(p, services.AuthAPIKey)
	if !ok || !probe {
		t.Fatalf("first caller = %v probe %v, want the probe", ok, probe)
	}
	ok2, probe2, _, retry2 := e.br.Allow(p, services.AuthAPIKey)
	if ok2 || probe2 || retry2 != time.Second {
		t.Fatalf("concurrent caller = %v probe %v retry %v, want excluded 1000ms", ok2, probe2, retry2)
	}
	if s := e.br.Status(p); s.State != resilience.BreakerHalfOpen || s.RetryAfterMs != 1000 {
		t.Fatalf("status with busy probe = %s retry %d", s.State, s.RetryAfterMs)
	}

	e.br.Success(p, gen, true)
	s := e.br.Status(p)
	wantBkStatus(t, s, resilience.BreakerClosed, 0, 0, 0)
	if s.OpenedAt != nil {
		t.Fatalf("openedAt = %v after close", s.OpenedAt)
	}
	if _, ok := e.store.row(p); ok {
		t.Fatal("a CLOSED breaker with count 0 must have no row")
	}
	if len(e.br.All()) != 0 {
		t.Fatalf("All() = %+v, want empty", e.br.All())
	}
	if ok, probe, _, _ := e.br.Allow(p, services.AuthAPIKey); !ok || probe {
		t.Fatal("closed breaker must admit plainly")
	}
}

func TestBreakerB3EscalationLadders(t *testing.T) {
	tests := []struct {
		profile resilience.Profile
		initial int64
		wantS   []int64 // re-open time after probe failure 1, 2, …
	}{
		{services.AuthAPIKey, 30, []int64{30, 30, 30, 60, 120, 120}},
		{services.AuthOAuth, 60, []int64{60, 60, 120, 240, 480, 480, 480}},
	}
	for _, tc := range tests {
		t.Run(string(tc.profile), func(t *testing.T) {
			e := newBkEnv(t)
			const p = "prov"
			e.open(t, p, tc.profile)
			if s := e.br.Status(p); s.EffectiveResetMs != tc.initial*1000 {
				t.Fatalf("initial open: %d ms, want %d s", s.EffectiveResetMs, tc.initial)
			}
			openedAt := bkAt(40_000)
			reset := time.Duration(tc.initial) * time.Second
			for i, want := range tc.wantS {
				e.clock.Set(openedAt.Add(reset - time.Millisecond))
				if ok, _, _, _ := e.br.Allow(p, tc.profile); ok {
					t.Fatalf("cycle %d: admitted 1 ms before the reset", i)
				}
				e.clock.Set(openedAt.Add(reset))
				ok, probe, gen, _ := e.br.Allow(p, tc.profile)
				if !ok || !probe {
					t.Fatalf("cycle %d: no probe at the reset time", i)
				}
				e.br.Failure(p, tc.profile, gen, true, true, true, "server_error")
				openedAt = e.clock.Now()
				s := e.br.Status(p)
				wantBkStatus(t, s, resilience.BreakerOpen, s.FailureCount, i+1, want*1000)
				if s.EffectiveResetMs != want*1000 {
					t.Fatalf("probe failure %d: effectiveResetMs %d, want %d s", i+1, s.EffectiveResetMs, want)
				}
				reset = time.Duration(want) * time.Second
			}
		})
	}
}

func TestBreakerB4ConcurrentFailuresOneEpisode(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	e.fail(t, p, services.AuthAPIKey) // failureCount 1 before the burst
	_, _, gen, _ := e.br.Allow(p, services.AuthAPIKey)

	// 20 concurrent 502s on one connection that was not cooling: the first
	// to apply opens the cooldown episode; the others land inside it.
	var cooling atomic.Bool
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 20 {
		wg.Go(func() {
			<-start
			newEpisode := cooling.CompareAndSwap(false, true)
			e.br.Failure(p, services.AuthAPIKey, gen, false, true, newEpisode, "server_error")
		})
	}
	close(start)
	wg.Wait()
	wantBkStatus(t, e.br.Status(p), resilience.BreakerClosed, 2, 0, 0)
}

func TestBreakerB5UncountedFailuresUntouched(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	// 429, 401, client abort, RATE_LIMIT_QUEUE_FULL: all classified with the
	// breaker flag off (§1.4).
	for _, reason := range []string{"rate_limit", "auth_error", "client_abort", "local_limit"} {
		for range 100 {
			_, _, gen, _ := e.br.Allow(p, services.AuthAPIKey)
			e.br.Failure(p, services.AuthAPIKey, gen, false, false, true, reason)
		}
	}
	s := e.br.Status(p)
	wantBkStatus(t, s, resilience.BreakerClosed, 0, 0, 0)
	if s.LastFailureAt != nil || s.LastFailureReason != "" {
		t.Fatalf("last failure recorded: %+v", s)
	}
	if ops := e.store.Ops(); ops != 0 || len(e.br.All()) != 0 {
		t.Fatalf("store touched: %d writes; All %v", ops, e.br.All())
	}
}

func TestBreakerB6RestartRestoresOpen(t *testing.T) {
	db := testkit.OpenDB(t)
	store := models.NewBreakerStore(db)
	clock := testkit.NewFakeClock(bkT0)
	cfg := func() resilience.BreakerConfig { return bkDefaults() }
	ctx := context.Background()

	before := resilience.NewBreakers(clock, cfg, store, nil)
	if err := before.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		clock.Set(bkAt(int64(i) * 1000))
		if i == 12 {
			clock.Set(bkAt(40_000))
		}
		_, _, gen, _ := before.Allow("deepseek", services.AuthAPIKey)
		before.Failure("deepseek", services.AuthAPIKey, gen, false, true, true, "server_error")
	}
	// A second provider with a count-only change, flushed on shutdown.
	_, _, g2, _ := before.Allow("openai", services.AuthAPIKey)
	before.Failure("openai", services.AuthAPIKey, g2, false, true, true, "transient")
	before.Failure("openai", services.AuthAPIKey, g2, false, true, true, "transient")
	if err := before.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	clock.Set(bkAt(50_000)) // restart
	after := resilience.NewBreakers(clock, cfg, store, nil)
	if err := after.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	s := after.Status("deepseek")
	wantBkStatus(t, s, resilience.BreakerOpen, 12, 0, 20_000)
	if s.OpenedAt == nil || !s.OpenedAt.Equal(bkAt(40_000)) || s.LastFailureReason != "server_error" {
		t.Fatalf("restored instants = %+v", s)
	}
	wantBkStatus(t, after.Status("openai"), resilience.BreakerClosed, 2, 0, 0)
	if ok, _, _, retry := after.Allow("deepseek", services.AuthAPIKey); ok || retry != 20*time.Second {
		t.Fatalf("Allow after restart = %v %v", ok, retry)
	}

	clock.Set(bkAt(69_999))
	wantBkStatus(t, after.Status("deepseek"), resilience.BreakerOpen, 12, 0, 1)
	clock.Set(bkAt(70_000))
	ok, probe, gen, _ := after.Allow("deepseek", services.AuthAPIKey)
	if !ok || !probe {
		t.Fatalf("first read at 70 s = %v probe %v, want the HALF_OPEN probe", ok, probe)
	}

	// Restart with the probe in flight: the restored HALF_OPEN breaker has a
	// fresh probe allowance.
	third := resilience.NewBreakers(clock, cfg, store, nil)
	if err := third.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if s := third.Status("deepseek"); s.State != resilience.BreakerHalfOpen || s.RetryAfterMs != 0 {
		t.Fatalf("restored HALF_OPEN = %s retry %d", s.State, s.RetryAfterMs)
	}
	ok, probe, gen3, _ := third.Allow("deepseek", services.AuthAPIKey)
	if !ok || !probe || gen3 != gen {
		t.Fatalf("restored probe = %v %v gen %d (want %d)", ok, probe, gen3, gen)
	}
	third.Success("deepseek", gen3, true)
	rows, err := store.LoadBreakers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Name != "openai" {
		t.Fatalf("rows after close = %+v, want only openai", rows)
	}
}

func TestBreakerB7ProbeAnswered429(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	e.open(t, p, services.AuthAPIKey)
	e.clock.Set(bkAt(70_000))

	_, probe, gen, _ := e.br.Allow(p, services.AuthAPIKey)
	if !probe {
		t.Fatal("no probe")
	}
	e.br.Failure(p, services.AuthAPIKey, gen, true, false, true, "rate_limit") // 429
	wantBkStatus(t, e.br.Status(p), resilience.BreakerHalfOpen, 12, 0, 0)
	ok, probe, gen2, _ := e.br.Allow(p, services.AuthAPIKey)
	if !ok || !probe || gen2 != gen {
		t.Fatalf("next caller = %v probe %v gen %d, want the probe at gen %d", ok, probe, gen2, gen)
	}

	// ReleaseProbe (abort, never dispatched) frees the slot the same way.
	e.br.ReleaseProbe(p, gen2)
	if _, probe, _, _ := e.br.Allow(p, services.AuthAPIKey); !probe {
		t.Fatal("slot not freed by ReleaseProbe")
	}
	e.br.ReleaseProbe(p, gen2-1) // stale: ignored
	if ok, _, _, retry := e.br.Allow(p, services.AuthAPIKey); ok || retry != time.Second {
		t.Fatal("a stale ReleaseProbe freed the slot")
	}
}

func TestBreakerProbeFailureFencesOlderOutcomes(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	e.open(t, p, services.AuthAPIKey)
	e.clock.Set(bkAt(70_000))
	_, _, gen, _ := e.br.Allow(p, services.AuthAPIKey)
	e.br.Failure(p, services.AuthAPIKey, gen, true, true, true, "transient")
	wantBkStatus(t, e.br.Status(p), resilience.BreakerOpen, 12, 1, 30_000)
	// A late duplicate outcome of the same probe is from an older generation.
	e.br.Success(p, gen, true)
	e.br.Failure(p, services.AuthAPIKey, gen, true, true, true, "transient")
	wantBkStatus(t, e.br.Status(p), resilience.BreakerOpen, 12, 1, 30_000)
	if row, _ := e.store.row(p); row.State != resilience.BreakerOpen || row.OpenCycleCount != 1 ||
		!row.OpenedAt.Equal(bkAt(70_000)) || row.Generation != gen+1 {
		t.Fatalf("row = %+v", row)
	}
}

func TestBreakerSuccessLeaksAndRecovers(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	for range 8 {
		e.fail(t, p, services.AuthAPIKey)
	}
	wantBkStatus(t, e.br.Status(p), resilience.BreakerDegraded, 8, 0, 0)
	_, _, gen, _ := e.br.Allow(p, services.AuthAPIKey)
	e.br.Success(p, gen, false)
	wantBkStatus(t, e.br.Status(p), resilience.BreakerDegraded, 7, 0, 0)
	e.br.Success(p, gen, false)
	wantBkStatus(t, e.br.Status(p), resilience.BreakerClosed, 6, 0, 0)
	if row, _ := e.store.row(p); row.State != resilience.BreakerClosed || row.FailureCount != 6 {
		t.Fatalf("DEGRADED → CLOSED not written through: %+v", row)
	}
	for range 10 {
		e.br.Success(p, gen, false)
	}
	wantBkStatus(t, e.br.Status(p), resilience.BreakerClosed, 0, 0, 0)

	// Back at zero: the next flush deletes the row.
	e.clock.Advance(time.Second)
	if err := e.br.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.store.row(p); ok {
		t.Fatal("row kept for CLOSED with count 0")
	}
}

func TestBreakerLocalDerivedDegradation(t *testing.T) {
	e := newBkEnv(t)
	const p = "ollama"
	e.fail(t, p, services.AuthLocal)
	s := e.br.Status(p)
	wantBkStatus(t, s, resilience.BreakerDegraded, 1, 0, 0)
	if s.DegradationThreshold != 1 || s.FailureThreshold != 2 {
		t.Fatalf("thresholds = %d/%d, want 1/2", s.DegradationThreshold, s.FailureThreshold)
	}
	e.fail(t, p, services.AuthLocal)
	wantBkStatus(t, e.br.Status(p), resilience.BreakerOpen, 2, 0, 15_000)
}

// Counted failures reach the store at once, each one an increment (the
// fleet's count is exact: scale-out §3.4 row 2); the success leak is
// batched to one write per second, except when it ends DEGRADED, and Flush
// writes what is pending.
func TestBreakerCountedFailuresExactLeakBatched(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	for i := 1; i <= 7; i++ {
		e.clock.Advance(100 * time.Millisecond)
		e.fail(t, p, services.AuthAPIKey)
		if row, ok := e.store.row(p); !ok || row.FailureCount != i {
			t.Fatalf("after %d counted failures the row holds %+v %v", i, row, ok)
		}
	}
	if row, _ := e.store.row(p); row.State != resilience.BreakerDegraded {
		t.Fatalf("7th failure: row %+v, want DEGRADED", row)
	}
	_, _, gen, _ := e.br.Allow(p, services.AuthAPIKey)
	e.br.Success(p, gen, false) // 6 < 7: DEGRADED → CLOSED, written at once
	if row, _ := e.store.row(p); row.State != resilience.BreakerClosed || row.FailureCount != 6 {
		t.Fatalf("transition not written through: %+v", row)
	}
	e.clock.Advance(10 * time.Millisecond)
	e.br.Success(p, gen, false)
	e.clock.Advance(10 * time.Millisecond)
	e.br.Success(p, gen, false)
	if row, _ := e.store.row(p); row.FailureCount != 6 {
		t.Fatalf("row count %d within a second of the last leak, want still 6", row.FailureCount)
	}
	wantBkStatus(t, e.br.Status(p), resilience.BreakerClosed, 4, 0, 0)
	if err := e.br.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if row, _ := e.store.row(p); row.FailureCount != 4 || row.State != resilience.BreakerClosed {
		t.Fatalf("after Flush: %+v", row)
	}
	ops := e.store.Ops()
	if err := e.br.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.store.Ops() != ops {
		t.Fatal("Flush rewrote a clean breaker")
	}
	e.clock.Advance(time.Second)
	e.br.Success(p, gen, false) // a second after the last leak: written at once
	if row, _ := e.store.row(p); row.FailureCount != 3 {
		t.Fatalf("row count %d, want 3", row.FailureCount)
	}
}

func TestBreakerStoreErrorRetriedOnFlush(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	e.store.SetFailure(errors.New("disk full"))
	e.fail(t, p, services.AuthAPIKey)
	wantBkStatus(t, e.br.Status(p), resilience.BreakerClosed, 1, 0, 0) // memory is authoritative
	if err := e.br.Flush(context.Background()); err == nil {
		t.Fatal("Flush hid the store error")
	}
	e.store.SetFailure(nil)
	if err := e.br.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if row, ok := e.store.row(p); !ok || row.FailureCount != 1 {
		t.Fatalf("row after retry = %+v %v", row, ok)
	}
}

func TestBreakerResetAndResetAll(t *testing.T) {
	e := newBkEnv(t)
	ctx := context.Background()
	e.open(t, "deepseek", services.AuthAPIKey)
	e.fail(t, "openai", services.AuthAPIKey)
	e.fail(t, "claude", services.AuthOAuth)
	_, _, oldGen, _ := e.br.Allow("openai", services.AuthAPIKey)

	if err := e.br.Reset(ctx, "deepseek"); err != nil {
		t.Fatal(err)
	}
	wantBkStatus(t, e.br.Status("deepseek"), resilience.BreakerClosed, 0, 0, 0)
	if _, ok := e.store.row("deepseek"); ok {
		t.Fatal("row kept after Reset")
	}
	if err := e.br.Reset(ctx, "never-seen"); err != nil {
		t.Fatalf("Reset of an unknown provider: %v", err)
	}
	if got := len(e.br.All()); got != 2 {
		t.Fatalf("All() has %d breakers, want 2", got)
	}

	n, err := e.br.ResetAll(ctx)
	if err != nil || n != 2 {
		t.Fatalf("ResetAll = %d, %v; want 2", n, err)
	}
	if rows, _ := e.store.LoadBreakers(ctx); len(rows) != 0 || len(e.br.All()) != 0 {
		t.Fatalf("rows %+v, All %+v after ResetAll", rows, e.br.All())
	}
	// An outcome of a request admitted before the reset is ignored.
	e.br.Failure("openai", services.AuthAPIKey, oldGen, false, true, true, "server_error")
	wantBkStatus(t, e.br.Status("openai"), resilience.BreakerClosed, 0, 0, 0)
	if n, _ := e.br.ResetAll(ctx); n != 0 {
		t.Fatalf("second ResetAll = %d, want 0", n)
	}
}

func TestBreakerSettingsApplyAtNextEvaluation(t *testing.T) {
	e := newBkEnv(t)
	const p = "deepseek"
	for range 5 {
		e.fail(t, p, services.AuthAPIKey)
	}
	// Lowering the threshold below the count flips nothing by itself.
	c := e.cfg[services.AuthAPIKey]
	c.FailureThreshold, c.DegradationThreshold = 4, bkIntPtr(2)
	e.cfg = resilience.BreakerConfig{services.AuthAPIKey: c}
	wantBkStatus(t, e.br.Status(p), resilience.BreakerClosed, 5, 0, 0)
	e.fail(t, p, services.AuthAPIKey)
	wantBkStatus(t, e.br.Status(p), resilience.BreakerOpen, 6, 0, 30_000)
}

func TestBreakerUnknownProfileUsesDefaults(t *testing.T) {
	clock := testkit.NewFakeClock(bkT0)
	br := resilience.NewBreakers(clock, func() resilience.BreakerConfig { return nil }, nil, nil)
	for range 8 {
		_, _, gen, _ := br.Allow("claude", services.AuthOAuth)
		br.Failure("claude", services.AuthOAuth, gen, false, true, true, "server_error")
	}
	if s := br.Status("claude"); s.State != resilience.BreakerOpen || s.EffectiveResetMs != 60_000 {
		t.Fatalf("oauth defaults not applied: %+v", s)
	}
	if s := br.Status("nobody"); s.State != resilience.BreakerClosed || s.FailureCount != 0 {
		t.Fatalf("unknown provider = %+v", s)
	}
}

func TestBreakerConcurrentUse(t *testing.T) {
	e := newBkEnv(t)
	providers := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 500 {
				p := providers[(w+i)%len(providers)]
				ok, probe, gen, _ := e.br.Allow(p, services.AuthLocal)
				if !ok {
					if i%7 == 0 {
						e.clock.Advance(time.Second)
					}
					continue
				}
				switch {
				case i%3 == 0:
					e.br.Failure(p, services.AuthLocal, gen, probe, true, true, "server_error")
				case i%3 == 1 && probe:
					e.br.ReleaseProbe(p, gen)
				default:
					e.br.Success(p, gen, probe)
				}
				if i%50 == 0 {
					_ = e.br.Status(p)
					_ = e.br.All()
				}
				if w == 0 && i == 250 {
					_, _ = e.br.ResetAll(context.Background())
				}
			}
		})
	}
	wg.Wait()
	if err := e.br.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range providers {
		s := e.br.Status(p)
		if s.FailureCount < 0 || s.HalfOpenInFlight < 0 || s.HalfOpenInFlight > s.HalfOpenRequests {
			t.Fatalf("%s: inconsistent %+v", p, s)
		}
		row, ok := e.store.row(p)
		if (s.State == resilience.BreakerClosed && s.FailureCount == 0) == ok {
			t.Fatalf("%s: row presence %v disagrees with %+v", p, ok, s)
		}
		if ok && (row.State != s.State || row.FailureCount != s.FailureCount || row.OpenCycleCount != s.OpenCycleCount) {
			t.Fatalf("%s: row %+v, memory %+v", p, row, s)
		}
	}
}

func TestBreakerAllowClosedNoAllocs(t *testing.T) {
	e := newBkEnv(t)
	e.fail(t, "deepseek", services.AuthAPIKey)
	allocs := testing.AllocsPerRun(1000, func() {
		e.br.Allow("deepseek", services.AuthAPIKey)
		e.br.Allow("never-failed", services.AuthAPIKey)
	})
	if allocs != 0 {
		t.Fatalf("Allow allocates %.1f times per call pair", allocs)
	}
}

func BenchmarkAllowClosed(b *testing.B) {
	clock := testkit.NewFakeClock(bkT0)
	cfg := bkDefaults()
	br := resilience.NewBreakers(clock, func() resilience.BreakerConfig { return cfg }, newBkMemStore(), nil)
	for _, p := range []string{"openai", "anthropic", "gemini", "deepseek", "mistral", "groq"} {
		_, _, gen, _ := br.Allow(p, services.AuthAPIKey)
		br.Failure(p, services.AuthAPIKey, gen, false, true, true, "server_error")
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if ok, _, _, _ := br.Allow("deepseek", services.AuthAPIKey); !ok {
				b.Fatal("excluded")
			}
		}
	})
}

func BenchmarkAllowClosedSerial(b *testing.B) {
	clock := testkit.NewFakeClock(bkT0)
	cfg := bkDefaults()
	br := resilience.NewBreakers(clock, func() resilience.BreakerConfig { return cfg }, newBkMemStore(), nil)
	_, _, gen, _ := br.Allow("deepseek", services.AuthAPIKey)
	br.Failure("deepseek", services.AuthAPIKey, gen, false, true, true, "server_error")
	b.ReportAllocs()
	for b.Loop() {
		br.Allow("deepseek", services.AuthAPIKey)
	}
}

func BenchmarkSuccessClosedZero(b *testing.B) {
	clock := testkit.NewFakeClock(bkT0)
	cfg := bkDefaults()
	br := resilience.NewBreakers(clock, func() resilience.BreakerConfig { return cfg }, newBkMemStore(), nil)
	_, _, gen, _ := br.Allow("deepseek", services.AuthAPIKey)
	br.Failure("deepseek", services.AuthAPIKey, gen, false, true, true, "server_error")
	br.Success("deepseek", gen, false)
	clock.Advance(time.Second)
	_ = br.Flush(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		br.Success("deepseek", gen, false)
	}
}
