package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/resilience"
)

// External test package: models imports resilience, so an internal test
// importing testkit (→ models) would be an import cycle.

var lockT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

const lockResetAfter = 30 * time.Second // providerBreaker.apikey.resetTimeoutMs

// countingStore wraps the memory store and counts writes.
type countingStore struct {
	*resilience.MemoryLockoutStore
	saves atomic.Int64
}

func (s *countingStore) SaveLockout(ctx context.Context, r resilience.LockoutRecord) error {
	s.saves.Add(1)
	return s.MemoryLockoutStore.SaveLockout(ctx, r)
}

func (s *countingStore) CompareAndSaveLockout(ctx context.Context, expect int64, r resilience.LockoutRecord) (resilience.LockoutRecord, bool, bool, error) {
	s.saves.Add(1)
	return s.MemoryLockoutStore.CompareAndSaveLockout(ctx, expect, r)
}

func (s *countingStore) CompareAndDeleteLockout(ctx context.Context, k resilience.LockKey, expect int64) (resilience.LockoutRecord, bool, bool, error) {
	s.saves.Add(1)
	return s.MemoryLockoutStore.CompareAndDeleteLockout(ctx, k, expect)
}

type lockEnv struct {
	clock   *testkit.FakeClock
	mu      sync.Mutex
	cfg     resilience.LockoutConfig
	store   resilience.LockoutStore
	counter *countingStore
	l       *resilience.Lockouts
}

func defaultLockoutConfig() resilience.LockoutConfig {
	return resilience.LockoutConfig{
		Enabled:               true,
		ErrorCodes:            []int{403, 404, 429, 502, 503, 504},
		BaseCooldownMs:        120_000,
		MaxCooldownMs:         1_800_000,
		MaxBackoffSteps:       10,
		UseExponentialBackoff: true,
	}
}

func newLockEnv(t *testing.T, store resilience.LockoutStore) *lockEnv {
	t.Helper()
	e := &lockEnv{clock: testkit.NewFakeClock(lockT0), cfg: defaultLockoutConfig()}
	if store == nil {
		e.counter = &countingStore{MemoryLockoutStore: resilience.NewMemoryLockoutStore()}
		store = e.counter
	}
	e.store = store
	e.l = e.newLockouts()
	return e
}

func (e *lockEnv) newLockouts() *resilience.Lockouts {
	return resilience.NewLockouts(e.clock, e.config, func(string) time.Duration { return lockResetAfter }, e.store, nil)
}

func (e *lockEnv) config() resilience.LockoutConfig {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg
}

func (e *lockEnv) setEnabled(on bool) {
	e.mu.Lock()
	e.cfg.Enabled = on
	e.mu.Unlock()
}

func (e *lockEnv) stored(t *testing.T) []resilience.LockoutRecord {
	t.Helper()
	recs, err := e.store.LoadLockouts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func (e *lockEnv) locked(provider, conn, model string) bool {
	ok, _, _ := e.l.Locked(provider, conn, model)
	return ok
}

func fail(status int, reason resilience.Reason) resilience.Classification {
	return resilience.Classification{Status: status, Reason: reason, Scope: resilience.ScopeModel}
}

// M1. Off: a per-model 429 writes nothing and locks nothing.
func TestLockoutM1OffWritesNothing(t *testing.T) {
	e := newLockEnv(t, nil)
	e.setEnabled(false)
	applied, _, _ := e.l.Apply(context.Background(), "gemini", "c1", "gemini-2.5-flash", fail(429, resilience.ReasonRateLimit))
	if applied {
		t.Fatal("applied with the master switch off")
	}
	if n := e.counter.saves.Load(); n != 0 {
		t.Fatalf("store writes = %d, want 0", n)
	}
	if recs := e.stored(t); len(recs) != 0 {
		t.Fatalf("rows = %v, want none", recs)
	}
	if e.locked("gemini", "c1", "gemini-2.5-flash") || e.l.Count() != 0 || len(e.l.ListAll(resilience.LockFilter{})) != 0 {
		t.Fatal("something locked with the master switch off")
	}
}

// M2. Hint-less 503s right after each lock ends: 120, 240, 480, 960, 1800, 1800 s.
func TestLockoutM2ExponentialLadder(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	want := []int64{120, 240, 480, 960, 1800, 1800}
	for i, secs := range want {
		now := e.clock.Now()
		applied, rec, newEp := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		if !applied || !newEp {
			t.Fatalf("failure %d: applied=%v newEpisode=%v", i+1, applied, newEp)
		}
		if rec.Shape != resilience.ShapeExact || rec.Key != "gpt-4o" {
			t.Fatalf("failure %d: key %v, want exact gpt-4o", i+1, rec.LockKey)
		}
		if got := rec.Until.Sub(now); got != time.Duration(secs)*time.Second {
			t.Fatalf("failure %d: locked %v, want %d s", i+1, got, secs)
		}
		if rec.FailureCount != i+1 || rec.LastCooldownMs != secs*1000 {
			t.Fatalf("failure %d: count %d cooldown %d", i+1, rec.FailureCount, rec.LastCooldownMs)
		}
		if !e.locked("openai", "c1", "gpt-4o") {
			t.Fatalf("failure %d: not locked", i+1)
		}
		e.clock.Set(rec.Until) // the next 503 lands right as this lock ends
		if e.locked("openai", "c1", "gpt-4o") {
			t.Fatalf("failure %d: still locked at until", i+1)
		}
	}
}

// M3. failure_count 4, successes → 2 → 1 → row deleted, eligible before until.
func TestLockoutM3SuccessDecay(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	var rec resilience.LockoutRecord
	for i := 0; i < 4; i++ {
		_, rec, _ = e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		if i < 3 {
			e.clock.Set(rec.Until)
		}
	}
	if rec.FailureCount != 4 {
		t.Fatalf("count = %d, want 4", rec.FailureCount)
	}
	for _, want := range []int{2, 1} {
		e.l.Success(ctx, "openai", "c1", "gpt-4o")
		recs := e.stored(t)
		if len(recs) != 1 || recs[0].FailureCount != want {
			t.Fatalf("after success: %+v, want count %d", recs, want)
		}
		if !e.locked("openai", "c1", "gpt-4o") {
			t.Fatal("a success with count > 0 left after it unlocked the model")
		}
	}
	e.l.Success(ctx, "openai", "c1", "gpt-4o")
	if recs := e.stored(t); len(recs) != 0 {
		t.Fatalf("rows after the last success: %+v", recs)
	}
	if !e.clock.Now().Before(rec.Until) {
		t.Fatal("test clock passed until")
	}
	if e.locked("openai", "c1", "gpt-4o") {
		t.Fatal("still locked after failure_count reached 0")
	}
	// The next failure starts the ladder again.
	_, rec, _ = e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
	if rec.FailureCount != 1 || rec.LastCooldownMs != 120_000 {
		t.Fatalf("after decay: count %d cooldown %d, want 1, 120000", rec.FailureCount, rec.LastCooldownMs)
	}
}

// M4. 429 with Retry-After: 5 → family locked 5 s.
func TestLockoutM4HintBeatsBase(t *testing.T) {
	e := newLockEnv(t, nil)
	c := fail(429, resilience.ReasonRateLimit)
	c.Hint = 5 * time.Second
	_, rec, _ := e.l.Apply(context.Background(), "gemini", "c1", "gemini-2.5-flash", c)
	if rec.Shape != resilience.ShapeFamily || rec.Key != "gemini-2.5-flash" {
		t.Fatalf("key %v, want family gemini-2.5-flash", rec.LockKey)
	}
	if got := rec.Until.Sub(lockT0); got != 5*time.Second {
		t.Fatalf("locked %v, want 5 s", got)
	}
	e.clock.Advance(4999 * time.Millisecond)
	if !e.locked("gemini", "c1", "gemini-2.5-flash") {
		t.Fatal("unlocked before 5 s")
	}
	e.clock.Advance(time.Millisecond)
	if e.locked("gemini", "c1", "gemini-2.5-flash") {
		t.Fatal("locked at 5 s")
	}
}

// M4 variant: a hint longer than maxCooldownMs is capped.
func TestLockoutHintCappedAtMaxCooldown(t *testing.T) {
	e := newLockEnv(t, nil)
	c := fail(503, resilience.ReasonModelCapacity)
	c.Hint = 2 * time.Hour
	_, rec, _ := e.l.Apply(context.Background(), "openai", "c1", "gpt-4o", c)
	if rec.LastCooldownMs != 1_800_000 {
		t.Fatalf("cooldown %d, want 1800000", rec.LastCooldownMs)
	}
}

// M5. perModelQuota provider, hint-less quota 429 at 22:30 UTC → locked until 00:00 UTC.
func TestLockoutM5QuotaUntilDailyReset(t *testing.T) {
	e := newLockEnv(t, nil)
	e.clock.Set(time.Date(2026, 3, 1, 22, 30, 0, 0, time.UTC))
	_, rec, _ := e.l.Apply(context.Background(), "gemini", "c1", "gemini-2.5-pro", fail(429, resilience.ReasonQuotaExhausted))
	if want := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC); !rec.Until.Equal(want) {
		t.Fatalf("until %v, want %v", rec.Until, want)
	}
	if rec.Shape != resilience.ShapeFamily || rec.LastCooldownMs != 5_400_000 {
		t.Fatalf("shape %s cooldown %d", rec.Shape, rec.LastCooldownMs)
	}
	// Later failures of the same quota still end at the reset: no ladder.
	e.clock.Set(rec.Until)
	_, rec, _ = e.l.Apply(context.Background(), "gemini", "c1", "gemini-2.5-pro", fail(429, resilience.ReasonQuotaExhausted))
	if want := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC); !rec.Until.Equal(want) || rec.FailureCount != 2 {
		t.Fatalf("second: until %v count %d, want %v, 2", rec.Until, rec.FailureCount, want)
	}
}

// M5 variants: the catalogue reset zone, an absolute reset hint (not capped by
// maxCooldownMs) and a learned quota window.
func TestLockoutQuotaResetSources(t *testing.T) {
	shanghai := time.FixedZone("UTC+8", 8*3600)
	t.Run("reset zone", func(t *testing.T) {
		e := newLockEnv(t, nil)
		e.l.ResetLocation = func(p string) *time.Location {
			if p == "glm" {
				return shanghai
			}
			return nil
		}
		e.clock.Set(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)) // 18:00 in UTC+8
		_, rec, _ := e.l.Apply(context.Background(), "glm", "c1", "glm-4.6", fail(429, resilience.ReasonQuotaExhausted))
		if want := time.Date(2026, 3, 1, 16, 0, 0, 0, time.UTC); !rec.Until.Equal(want) {
			t.Fatalf("until %v, want %v", rec.Until, want)
		}
	})
	t.Run("hint", func(t *testing.T) {
		e := newLockEnv(t, nil)
		c := fail(429, resilience.ReasonQuotaExhausted)
		c.Hint = 5 * time.Hour
		_, rec, _ := e.l.Apply(context.Background(), "codex", "c1", "gpt-5", c)
		if got := rec.Until.Sub(lockT0); got != 5*time.Hour {
			t.Fatalf("locked %v, want 5 h", got)
		}
	})
	t.Run("hint capped at maxRetryHint", func(t *testing.T) {
		e := newLockEnv(t, nil)
		e.l.MaxRetryHint = func() time.Duration { return 3 * time.Hour }
		c := fail(429, resilience.ReasonQuotaExhausted)
		c.Hint = 5 * time.Hour
		_, rec, _ := e.l.Apply(context.Background(), "codex", "c1", "gpt-5", c)
		if got := rec.Until.Sub(lockT0); got != 3*time.Hour {
			t.Fatalf("locked %v, want 3 h", got)
		}
	})
	t.Run("learned window", func(t *testing.T) {
		e := newLockEnv(t, nil)
		reset := lockT0.Add(3*time.Hour + 17*time.Minute)
		e.l.QuotaResetAt = func(p, conn, model string) (time.Time, bool) {
			return reset, p == "codex" && conn == "c1"
		}
		_, rec, _ := e.l.Apply(context.Background(), "codex", "c1", "gpt-5", fail(429, resilience.ReasonQuotaExhausted))
		if !rec.Until.Equal(reset) {
			t.Fatalf("until %v, want %v", rec.Until, reset)
		}
	})
}

// M6. 404 for claude-x[1m] → base claude-x locked; its other models served.
func TestLockoutM6BaseShape(t *testing.T) {
	e := newLockEnv(t, nil)
	_, rec, _ := e.l.Apply(context.Background(), "anthropic", "c1", "claude-x[1m]", fail(404, resilience.ReasonNotFound))
	if rec.Shape != resilience.ShapeBase || rec.Key != "claude-x" || rec.LastCooldownMs != 120_000 {
		t.Fatalf("rec %+v, want base claude-x 120 s", rec)
	}
	for model, want := range map[string]bool{"claude-x": true, "claude-x[1m]": true, "Claude-X": true, "claude-y": false, "claude-x-mini": false} {
		if got := e.locked("anthropic", "c1", model); got != want {
			t.Errorf("Locked(%q) = %v, want %v", model, got, want)
		}
	}
	if e.locked("anthropic", "c2", "claude-x") {
		t.Error("locked on another connection")
	}
	ok, until, key := e.l.Locked("anthropic", "c1", "claude-x")
	if !ok || !until.Equal(lockT0.Add(120*time.Second)) || key != rec.LockKey {
		t.Errorf("Locked = %v %v %v", ok, until, key)
	}
}

// A 404 for model A leaves model B usable on the same connection.
func TestLockout404LeavesOtherModelUsable(t *testing.T) {
	e := newLockEnv(t, nil)
	e.l.Apply(context.Background(), "openai", "c1", "gpt-4o", fail(404, resilience.ReasonNotFound))
	if !e.locked("openai", "c1", "gpt-4o") || e.locked("openai", "c1", "gpt-4o-mini") {
		t.Fatal("want gpt-4o locked, gpt-4o-mini usable")
	}
}

// The family shape locks every sibling of the family.
func TestLockoutFamilyLocksSiblings(t *testing.T) {
	e := newLockEnv(t, nil)
	_, rec, _ := e.l.Apply(context.Background(), "codex", "c1", "gpt-5-codex", fail(429, resilience.ReasonRateLimit))
	if rec.Shape != resilience.ShapeFamily || rec.Key != "gpt-5" {
		t.Fatalf("key %v, want family gpt-5", rec.LockKey)
	}
	for _, m := range []string{"gpt-5", "gpt-5-codex", "gpt-5.1-codex-max", "GPT-5-mini"} {
		if !e.locked("codex", "c1", m) {
			t.Errorf("%s not locked by its family", m)
		}
	}
	if e.locked("codex", "c1", "gpt-5.3-codex-spark") {
		t.Error("the Spark quota is its own family")
	}
	// Elsewhere a model is its own family.
	e.l.Apply(context.Background(), "openai", "c1", "gpt-5", fail(429, resilience.ReasonRateLimit))
	if e.locked("openai", "c1", "gpt-5-mini") {
		t.Error("openai gpt-5 429 locked gpt-5-mini")
	}
}

// C2. Rule newapi-model-denied (lockScope exact, cooldownMs 21 600 000) → exact 1 800 000 ms.
func TestLockoutC2RuleCooldownCapped(t *testing.T) {
	e := newLockEnv(t, nil)
	c := fail(403, resilience.ReasonForbidden)
	c.RuleID, c.LockScope, c.CooldownMs, c.ScopeFixed = "newapi-model-denied", resilience.ShapeExact, 21_600_000, true
	_, rec, _ := e.l.Apply(context.Background(), "my-node", "c1", "GPT-X", c)
	if rec.Shape != resilience.ShapeExact || rec.Key != "gpt-x" || rec.LastCooldownMs != 1_800_000 {
		t.Fatalf("rec %+v, want exact gpt-x 1800000", rec)
	}
	// A rule cooldown below the cap is used as is, without a ladder.
	e.clock.Set(rec.Until)
	c.CooldownMs = 300_000
	_, rec, _ = e.l.Apply(context.Background(), "my-node", "c1", "gpt-x", c)
	if rec.LastCooldownMs != 300_000 || rec.FailureCount != 2 {
		t.Fatalf("second: cooldown %d count %d, want 300000, 2", rec.LastCooldownMs, rec.FailureCount)
	}
}

func TestLockoutRetiredModelLocksForMax(t *testing.T) {
	e := newLockEnv(t, nil)
	c := fail(404, resilience.ReasonNotFound)
	c.Detail = "retired_model"
	_, rec, _ := e.l.Apply(context.Background(), "openai", "c1", "gpt-4-0314", c)
	if rec.Shape != resilience.ShapeBase || rec.LastCooldownMs != 1_800_000 {
		t.Fatalf("rec %+v, want base, 1800000", rec)
	}
}

func TestLockoutWithoutExponentialBackoff(t *testing.T) {
	e := newLockEnv(t, nil)
	e.cfg.UseExponentialBackoff = false
	for i := 0; i < 3; i++ {
		_, rec, _ := e.l.Apply(context.Background(), "openai", "c1", "gpt-4o", fail(502, resilience.ReasonServerError))
		if rec.LastCooldownMs != 120_000 || rec.FailureCount != i+1 {
			t.Fatalf("failure %d: cooldown %d count %d", i+1, rec.LastCooldownMs, rec.FailureCount)
		}
		e.clock.Set(rec.Until)
	}
}

func TestLockoutMaxBackoffSteps(t *testing.T) {
	e := newLockEnv(t, nil)
	e.cfg.MaxBackoffSteps = 1
	want := []int64{120_000, 240_000, 240_000}
	for i, w := range want {
		_, rec, _ := e.l.Apply(context.Background(), "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		if rec.LastCooldownMs != w {
			t.Fatalf("failure %d: cooldown %d, want %d", i+1, rec.LastCooldownMs, w)
		}
		e.clock.Set(rec.Until)
	}
}

func TestLockoutOnlyErrorCodesLock(t *testing.T) {
	e := newLockEnv(t, nil)
	for _, st := range []int{0, 400, 401, 402, 500} {
		if applied, _, _ := e.l.Apply(context.Background(), "openai", "c1", "gpt-4o", fail(st, resilience.ReasonServerError)); applied {
			t.Errorf("status %d applied", st)
		}
	}
	if e.counter.saves.Load() != 0 || e.l.Count() != 0 {
		t.Fatal("statuses outside errorCodes wrote a lockout")
	}
}

// BD 3: a failure while the key is active is the running episode.
func TestLockoutRunningEpisode(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	_, first, _ := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))

	e.clock.Advance(10 * time.Second)
	applied, rec, newEp := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
	if !applied || newEp || rec.FailureCount != 1 || !rec.Until.Equal(first.Until) {
		t.Fatalf("absorbed: applied=%v newEpisode=%v %+v", applied, newEp, rec)
	}
	if !rec.LastFailureAt.Equal(lockT0.Add(10 * time.Second)) {
		t.Fatalf("last failure %v", rec.LastFailureAt)
	}
	// A hint ending earlier changes nothing.
	c := fail(503, resilience.ReasonModelCapacity)
	c.Hint = 30 * time.Second
	_, rec, _ = e.l.Apply(ctx, "openai", "c1", "gpt-4o", c)
	if !rec.Until.Equal(first.Until) || rec.Reason != string(resilience.ReasonServerError) {
		t.Fatalf("earlier hint moved the lock: %+v", rec)
	}
	// A hint ending later extends it, still without escalation.
	c.Hint = 300 * time.Second
	_, rec, newEp = e.l.Apply(ctx, "openai", "c1", "gpt-4o", c)
	if newEp || rec.FailureCount != 1 || !rec.Until.Equal(lockT0.Add(310*time.Second)) || rec.LastCooldownMs != 300_000 {
		t.Fatalf("later hint: newEpisode=%v %+v", newEp, rec)
	}
	if rec.Reason != string(resilience.ReasonModelCapacity) || !rec.LockedAt.Equal(lockT0) {
		t.Fatalf("extended lock: reason %s lockedAt %v", rec.Reason, rec.LockedAt)
	}
	if st := e.stored(t); len(st) != 1 || !st[0].Until.Equal(rec.Until) {
		t.Fatalf("store %+v", st)
	}
}

// Escalation memory: the previous failure counts while within
// last_cooldown_ms + resetAfter of it; later the row is forgotten.
func TestLockoutEscalationMemory(t *testing.T) {
	ctx := context.Background()
	t.Run("within the window escalates", func(t *testing.T) {
		e := newLockEnv(t, nil)
		e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		e.clock.Set(lockT0.Add(120*time.Second + lockResetAfter))
		if got := len(e.l.ListAll(resilience.LockFilter{})); got != 1 {
			t.Fatalf("memory rows %d, want 1", got)
		}
		if got := len(e.l.List(resilience.LockFilter{})); got != 0 {
			t.Fatalf("active rows %d, want 0", got)
		}
		_, rec, newEp := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		if !newEp || rec.FailureCount != 2 || rec.LastCooldownMs != 240_000 {
			t.Fatalf("got %+v", rec)
		}
	})
	t.Run("after the window starts over", func(t *testing.T) {
		e := newLockEnv(t, nil)
		e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		e.clock.Set(lockT0.Add(120*time.Second + lockResetAfter + time.Millisecond))
		if got := len(e.l.ListAll(resilience.LockFilter{})); got != 0 {
			t.Fatalf("forgotten row still listed: %d", got)
		}
		_, rec, _ := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		if rec.FailureCount != 1 || rec.LastCooldownMs != 120_000 {
			t.Fatalf("got %+v", rec)
		}
	})
	t.Run("sweep deletes dead rows only", func(t *testing.T) {
		e := newLockEnv(t, nil)
		e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		e.clock.Advance(100 * time.Second)
		e.l.Apply(ctx, "openai", "c1", "gpt-4o-mini", fail(503, resilience.ReasonServerError))
		e.clock.Set(lockT0.Add(151 * time.Second)) // first forgotten, second active
		n, err := e.l.Sweep(ctx)
		if err != nil || n != 1 {
			t.Fatalf("sweep = %d, %v; want 1", n, err)
		}
		if st := e.stored(t); len(st) != 1 || st[0].Key != "gpt-4o-mini" {
			t.Fatalf("store after sweep: %+v", st)
		}
	})
	t.Run("load drops dead rows", func(t *testing.T) {
		e := newLockEnv(t, nil)
		e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
		e.clock.Advance(time.Hour)
		l2 := e.newLockouts()
		if err := l2.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if len(l2.ListAll(resilience.LockFilter{})) != 0 || len(e.stored(t)) != 0 {
			t.Fatal("dead row survived Load")
		}
	})
}

// BD 8: off → nothing new written, existing entries listed but not enforced.
func TestLockoutMasterSwitchOffNotEnforced(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
	saves := e.counter.saves.Load()

	e.setEnabled(false)
	if e.l.Enabled() || e.locked("openai", "c1", "gpt-4o") {
		t.Fatal("lock enforced with the master switch off")
	}
	if applied, _, _ := e.l.Apply(ctx, "openai", "c1", "gpt-4o-mini", fail(503, resilience.ReasonServerError)); applied {
		t.Fatal("applied while off")
	}
	e.l.Success(ctx, "openai", "c1", "gpt-4o") // entries only expire while off
	if e.counter.saves.Load() != saves || len(e.stored(t)) != 1 {
		t.Fatal("store changed while off")
	}
	items := e.l.List(resilience.LockFilter{})
	if len(items) != 1 || !items[0].Active || items[0].Enforced || e.l.Count() != 1 {
		t.Fatalf("listed while off: %+v", items)
	}

	e.setEnabled(true)
	if !e.locked("openai", "c1", "gpt-4o") {
		t.Fatal("lock not enforced again after switching on")
	}
	e.clock.Advance(120 * time.Second)
	e.setEnabled(false)
	e.setEnabled(true)
	if e.locked("openai", "c1", "gpt-4o") {
		t.Fatal("lock did not expire normally")
	}
}

func TestLockoutReEnable(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	_, rec, _ := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(404, resilience.ReasonNotFound))
	if err := e.l.ReEnable(ctx, rec.LockKey); err != nil {
		t.Fatal(err)
	}
	if e.locked("openai", "c1", "gpt-4o") || len(e.stored(t)) != 0 {
		t.Fatal("still locked after ReEnable")
	}
	err := e.l.ReEnable(ctx, rec.LockKey)
	if !errors.Is(err, services.ErrNotFound) {
		t.Fatalf("second ReEnable: %v, want ErrNotFound", err)
	}
	// Re-enabling also drops the escalation memory.
	_, rec, _ = e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(404, resilience.ReasonNotFound))
	if rec.FailureCount != 1 {
		t.Fatalf("count after re-enable %d, want 1", rec.FailureCount)
	}
}

func TestLockoutListAndCount(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	hinted := fail(429, resilience.ReasonRateLimit)
	hinted.Hint = 10 * time.Second
	e.l.Apply(ctx, "gemini", "c1", "gemini-2.5-flash", hinted)
	e.clock.Advance(time.Second)
	e.l.Apply(ctx, "gemini", "c2", "gemini-2.5-pro", fail(503, resilience.ReasonModelCapacity))
	e.l.Apply(ctx, "openai", "c3", "gpt-4o", fail(404, resilience.ReasonNotFound))
	e.clock.Advance(time.Second)

	items := e.l.List(resilience.LockFilter{})
	if len(items) != 3 || e.l.Count() != 3 {
		t.Fatalf("list %d count %d, want 3", len(items), e.l.Count())
	}
	if items[2].Model != "gemini-2.5-flash" || items[2].RemainingMs != 8000 {
		t.Fatalf("shortest last: %+v", items[2])
	}
	if items[0].RemainingMs != 119_000 || items[1].RemainingMs != 119_000 {
		t.Fatalf("remaining %d %d", items[0].RemainingMs, items[1].RemainingMs)
	}
	got := items[2]
	want := resilience.LockoutStatus{Provider: "gemini", ConnectionID: "c1", Model: "gemini-2.5-flash",
		Shape: resilience.ShapeFamily, LockKey: "gemini-2.5-flash", Reason: resilience.ReasonRateLimit,
		LastStatus: 429, FailureCount: 1, LockedAt: lockT0, Until: lockT0.Add(10 * time.Second),
		RemainingMs: 8000, LastFailureAt: lockT0, Active: true, Enforced: true}
	if got != want {
		t.Fatalf("item\n got %+v\nwant %+v", got, want)
	}
	if got.Key() != (resilience.LockKey{Provider: "gemini", ConnectionID: "c1", Shape: resilience.ShapeFamily, Key: "gemini-2.5-flash"}) {
		t.Fatalf("Key() = %v", got.Key())
	}
	if n := len(e.l.List(resilience.LockFilter{Provider: "gemini"})); n != 2 {
		t.Fatalf("gemini items %d", n)
	}
	if n := len(e.l.List(resilience.LockFilter{Provider: "gemini", ConnectionID: "c2"})); n != 1 {
		t.Fatalf("gemini c2 items %d", n)
	}
	if n := len(e.l.List(resilience.LockFilter{Model: "GPT-4o"})); n != 1 {
		t.Fatalf("gpt-4o items %d", n)
	}
}

// M8. DELETE {provider, model} without connectionId clears every connection of the provider.
func TestLockoutM8ClearProviderModel(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	for _, conn := range []string{"c1", "c2", "c3"} {
		e.l.Apply(ctx, "gemini", conn, "gemini-2.5-flash", fail(429, resilience.ReasonRateLimit))
		e.l.Apply(ctx, "gemini", conn, "gemini-2.5-flash", fail(503, resilience.ReasonModelCapacity))
	}
	e.l.Apply(ctx, "gemini", "c1", "gemini-2.5-pro", fail(429, resilience.ReasonRateLimit))
	e.l.Apply(ctx, "groq", "c9", "gemini-2.5-flash", fail(429, resilience.ReasonRateLimit))

	n, err := e.l.Clear(ctx, resilience.LockFilter{Provider: "gemini", Model: "gemini-2.5-flash"})
	if err != nil || n != 6 {
		t.Fatalf("Clear = %d, %v; want 6 (family and exact on three connections)", n, err)
	}
	for _, conn := range []string{"c1", "c2", "c3"} {
		if e.locked("gemini", conn, "gemini-2.5-flash") {
			t.Errorf("still locked on %s", conn)
		}
	}
	if !e.locked("gemini", "c1", "gemini-2.5-pro") || !e.locked("groq", "c9", "gemini-2.5-flash") {
		t.Fatal("cleared too much")
	}
	if st := e.stored(t); len(st) != 2 {
		t.Fatalf("store rows %d, want 2", len(st))
	}
	// One connection only.
	n, _ = e.l.Clear(ctx, resilience.LockFilter{Provider: "groq", ConnectionID: "c9", Model: "gemini-2.5-flash"})
	if n != 1 {
		t.Fatalf("connection clear = %d", n)
	}
	// Everything.
	n, _ = e.l.Clear(ctx, resilience.LockFilter{})
	if n != 1 || e.l.Count() != 0 || len(e.stored(t)) != 0 {
		t.Fatalf("clear all = %d, count %d", n, e.l.Count())
	}
}

func TestLockoutForgetConnection(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(404, resilience.ReasonNotFound))
	e.l.Apply(ctx, "openai", "c1", "gpt-4o-mini", fail(503, resilience.ReasonServerError))
	e.l.Apply(ctx, "openai", "c2", "gpt-4o", fail(404, resilience.ReasonNotFound))
	if err := e.l.ForgetConnection(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if e.locked("openai", "c1", "gpt-4o") || e.locked("openai", "c1", "gpt-4o-mini") || !e.locked("openai", "c2", "gpt-4o") {
		t.Fatal("ForgetConnection touched the wrong rows")
	}
	if st := e.stored(t); len(st) != 1 || st[0].ConnectionID != "c2" {
		t.Fatalf("store %+v", st)
	}
}

// M7 / BD 9. A restart over the same SQLite database keeps locks and memory.
func TestLockoutM7RestartKeepsLocks(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	e := newLockEnv(t, models.NewLockoutStore(db))
	e.clock.Set(lockT0.Add(123 * time.Millisecond))
	_, first, _ := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
	e.clock.Set(first.Until)
	_, rec, _ := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
	e.l.Apply(ctx, "codex", "c2", "gpt-5-codex", fail(429, resilience.ReasonRateLimit))
	e.clock.Advance(time.Minute)
	before := e.l.ListAll(resilience.LockFilter{})

	restarted := resilience.NewLockouts(e.clock, e.config, func(string) time.Duration { return lockResetAfter },
		models.NewLockoutStore(db), nil)
	if err := restarted.Load(ctx); err != nil {
		t.Fatal(err)
	}
	after := restarted.ListAll(resilience.LockFilter{})
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("state changed across restart\nbefore %+v\nafter  %+v", before, after)
	}
	ok, until, _ := restarted.Locked("openai", "c1", "gpt-4o")
	if !ok || !until.Equal(rec.Until) {
		t.Fatalf("after reload: locked %v until %v, want %v", ok, until, rec.Until)
	}
	if ok, _, _ := restarted.Locked("codex", "c2", "gpt-5"); !ok {
		t.Fatal("family lock lost")
	}
	// Escalation continues where it left off.
	e.clock.Set(rec.Until)
	_, next, _ := restarted.Apply(ctx, "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
	if next.FailureCount != 3 || next.LastCooldownMs != 480_000 {
		t.Fatalf("after reload: count %d cooldown %d, want 3, 480000", next.FailureCount, next.LastCooldownMs)
	}
}

// Concurrent failures, successes, reads and admin calls; run with -race.
func TestLockoutConcurrent(t *testing.T) {
	e := newLockEnv(t, nil)
	ctx := context.Background()
	var newEpisodes atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			conn := fmt.Sprintf("c%d", g%4)
			for i := 0; i < 200; i++ {
				switch i % 5 {
				case 0, 1:
					if _, _, ne := e.l.Apply(ctx, "openai", "hot", "gpt-4o", fail(503, resilience.ReasonServerError)); ne {
						newEpisodes.Add(1)
					}
					e.l.Apply(ctx, "openai", conn, fmt.Sprintf("m%d", i%7), fail(429, resilience.ReasonRateLimit))
				case 2:
					e.l.Locked("openai", "hot", "gpt-4o")
					e.l.Locked("openai", conn, "m3")
				case 3:
					e.l.List(resilience.LockFilter{Provider: "openai"})
					e.l.Count()
				case 4:
					if g == 0 && i%50 == 4 {
						e.l.Clear(ctx, resilience.LockFilter{ConnectionID: "c1"})
					}
					e.l.Success(ctx, "openai", conn, "m1")
				}
			}
		}(g)
	}
	wg.Wait()
	// The clock never moved, so the hot key's concurrent 503s were one episode.
	if n := newEpisodes.Load(); n != 1 {
		t.Fatalf("new episodes on the hot key = %d, want 1", n)
	}
	ok, until, _ := e.l.Locked("openai", "hot", "gpt-4o")
	if !ok || !until.Equal(lockT0.Add(120*time.Second)) {
		t.Fatalf("hot key: %v until %v", ok, until)
	}
	// Memory and store agree.
	mem := e.l.ListAll(resilience.LockFilter{})
	if st := e.stored(t); len(st) != len(mem) {
		t.Fatalf("store has %d rows, memory %d", len(st), len(mem))
	}
}

func TestLockShapeForStatus(t *testing.T) {
	cases := map[int]resilience.LockShape{
		429: resilience.ShapeFamily, 403: resilience.ShapeFamily, 402: resilience.ShapeFamily,
		404: resilience.ShapeBase,
		500: resilience.ShapeExact, 502: resilience.ShapeExact, 503: resilience.ShapeExact, 504: resilience.ShapeExact,
	}
	for st, want := range cases {
		if got := resilience.LockShapeForStatus(st); got != want {
			t.Errorf("status %d: %s, want %s", st, got, want)
		}
	}
	// A rule's lockScope wins over the status.
	e := newLockEnv(t, nil)
	c := fail(429, resilience.ReasonRateLimit)
	c.LockScope = resilience.ShapeExact
	_, rec, _ := e.l.Apply(context.Background(), "codex", "c1", "gpt-5-codex", c)
	if rec.Shape != resilience.ShapeExact || rec.Key != "gpt-5-codex" || e.locked("codex", "c1", "gpt-5") {
		t.Fatalf("lockScope ignored: %+v", rec)
	}
}

func TestModelKeys(t *testing.T) {
	cases := []struct {
		provider, model, family, base, exact string
	}{
		{"codex", "gpt-5", "gpt-5", "gpt-5", "gpt-5"},
		{"codex", " GPT-5-Codex ", "gpt-5", "gpt-5-codex", "gpt-5-codex"},
		{"codex", "gpt-5.1-codex-mini[1m]", "gpt-5", "gpt-5.1-codex-mini", "gpt-5.1-codex-mini[1m]"},
		{"codex", "gpt-5.3-codex-spark", "codex-spark", "gpt-5.3-codex-spark", "gpt-5.3-codex-spark"},
		{"codex", "o4-mini", "o4-mini", "o4-mini", "o4-mini"},
		{"openai", "gpt-5-mini", "gpt-5-mini", "gpt-5-mini", "gpt-5-mini"},
		{"anthropic", "Claude-X[1M]", "claude-x[1m]", "claude-x", "claude-x[1m]"},
		{"openrouter", "anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4"},
		{"x", "[odd]", "[odd]", "[odd]", "[odd]"},
	}
	for _, tc := range cases {
		if got := resilience.QuotaFamily(tc.provider, tc.model); got != tc.family {
			t.Errorf("QuotaFamily(%q, %q) = %q, want %q", tc.provider, tc.model, got, tc.family)
		}
		if got := resilience.BaseModel(tc.model); got != tc.base {
			t.Errorf("BaseModel(%q) = %q, want %q", tc.model, got, tc.base)
		}
		if got := resilience.ExactModel(tc.model); got != tc.exact {
			t.Errorf("ExactModel(%q) = %q, want %q", tc.model, got, tc.exact)
		}
		keys := resilience.LockKeysFor(tc.provider, "c1", tc.model)
		if keys[0].Key != tc.family || keys[1].Key != tc.base || keys[2].Key != tc.exact {
			t.Errorf("LockKeysFor(%q) = %v", tc.model, keys)
		}
	}
}

func TestLockoutLockedAllocFree(t *testing.T) {
	e := newLockEnv(t, nil)
	e.l.Apply(context.Background(), "openai", "c1", "gpt-4o", fail(503, resilience.ReasonServerError))
	allocs := testing.AllocsPerRun(100, func() {
		e.l.Locked("openai", "c1", "gpt-4o")
		e.l.Locked("openai", "c2", "gpt-4o-mini")
	})
	if allocs != 0 {
		t.Fatalf("Locked allocates %.0f times", allocs)
	}
}

// failingDeletes is a lockout store whose deletes fail while broken is set.
type failingDeletes struct {
	*resilience.MemoryLockoutStore
	broken atomic.Bool
}

var errStoreDown = errors.New("store down")

func (s *failingDeletes) DeleteLockout(ctx context.Context, k resilience.LockKey) error {
	if s.broken.Load() {
		return errStoreDown
	}
	return s.MemoryLockoutStore.DeleteLockout(ctx, k)
}

func (s *failingDeletes) DeleteLockouts(ctx context.Context, f resilience.LockFilter) (int, error) {
	if s.broken.Load() {
		return 0, errStoreDown
	}
	return s.MemoryLockoutStore.DeleteLockouts(ctx, f)
}

// A Clear or ReEnable whose delete fails keeps the lock in memory too:
// memory cleared first would have let the stored row bring the lock back at
// the next start while the admin was told it failed.
func TestLockoutClearDeletesStoreBeforeMemory(t *testing.T) {
	ctx := context.Background()
	store := &failingDeletes{MemoryLockoutStore: resilience.NewMemoryLockoutStore()}
	e := newLockEnv(t, store)
	_, rec, _ := e.l.Apply(ctx, "openai", "c1", "gpt-4o", fail(404, resilience.ReasonNotFound))
	store.broken.Store(true)

	if n, err := e.l.Clear(ctx, resilience.LockFilter{}); !errors.Is(err, errStoreDown) || n != 0 {
		t.Fatalf("Clear with a failing store = %d, %v; want 0 and the store's error", n, err)
	}
	if err := e.l.ReEnable(ctx, rec.LockKey); !errors.Is(err, errStoreDown) {
		t.Fatalf("ReEnable with a failing store = %v; want the store's error", err)
	}
	if !e.locked("openai", "c1", "gpt-4o") {
		t.Fatal("lock gone from memory although its row could not be deleted")
	}
	restarted := e.newLockouts()
	if err := restarted.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := restarted.Locked("openai", "c1", "gpt-4o"); !ok {
		t.Fatal("the stored row was lost")
	}

	// Once the store answers, Clear clears both.
	store.broken.Store(false)
	if n, err := e.l.Clear(ctx, resilience.LockFilter{}); err != nil || n != 1 {
		t.Fatalf("Clear = %d, %v; want 1, nil", n, err)
	}
	if e.locked("openai", "c1", "gpt-4o") || len(e.stored(t)) != 0 {
		t.Fatal("Clear left the lock behind")
	}
}
