package resilience_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/resilience"
)

// The SQLite repository implements the store interface (checked here so
// models need not import services/resilience).
var _ resilience.ConnectionStateStore = (*models.ConnectionStateStore)(nil)

var cdT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func cdSec(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }

type cdEnv struct {
	ctx   context.Context
	clock *testkit.FakeClock
	store *resilience.MemoryConnectionStateStore
	cd    *resilience.Cooldowns
}

func newCDEnv(t *testing.T) *cdEnv {
	t.Helper()
	clock := testkit.NewFakeClock(cdT0)
	store := resilience.NewMemoryConnectionStateStore()
	return &cdEnv{ctx: context.Background(), clock: clock, store: store,
		cd: resilience.NewCooldowns(clock, nil, store, nil)}
}

// at moves the fake clock to t0 + d.
func (e *cdEnv) at(d time.Duration) { e.clock.Set(cdT0.Add(d)) }

func cdConn(id string, profile resilience.Profile) resilience.ConnInfo {
	return resilience.ConnInfo{ID: id, Provider: "openai", Profile: profile}
}

var cdAPIKey = cdConn("c_1", services.AuthAPIKey)

func cdCls(status int, reason resilience.Reason) resilience.Classification {
	return resilience.Classification{Status: status, Reason: reason, Scope: resilience.ScopeConnection, Failover: resilience.FailoverNext}
}

func cdHinted(c resilience.Classification, hint time.Duration) resilience.Classification {
	c.Hint = hint
	return c
}

// wantCooling fails unless id cools until exactly t0 + d.
func (e *cdEnv) wantCooling(t *testing.T, id string, d time.Duration) {
	t.Helper()
	until, cooling := e.cd.Cooling(id)
	if !cooling || !until.Equal(cdT0.Add(d)) {
		t.Fatalf("%s: Cooling = %v, %v; want until t0+%v", id, until.Sub(cdT0), cooling, d)
	}
}

func (e *cdEnv) wantNotCooling(t *testing.T, id string) {
	t.Helper()
	if until, cooling := e.cd.Cooling(id); cooling {
		t.Fatalf("%s: cooling until t0+%v, want not cooling", id, until.Sub(cdT0))
	}
}

func (e *cdEnv) wantLevel(t *testing.T, id string, level int) {
	t.Helper()
	if got := e.cd.State(id).BackoffLevel; got != level {
		t.Fatalf("%s: backoff level %d, want %d", id, got, level)
	}
}

// K1: apikey, seven hint-less 500s, each after the previous cooldown ended.
func TestCooldownK1BackoffLadderAPIKey(t *testing.T) {
	e := newCDEnv(t)
	wantS := []float64{3, 6, 12, 24, 48, 96, 96}
	wantLevels := []int{1, 2, 3, 4, 5, 5, 5}
	var now time.Duration
	for i, s := range wantS {
		e.at(now)
		eff := e.cd.Apply(e.ctx, cdAPIKey, cdCls(500, resilience.ReasonServerError))
		if !eff.NewEpisode || eff.LevelAfter != wantLevels[i] || !eff.Until.Equal(cdT0.Add(now+cdSec(s))) {
			t.Fatalf("500 #%d: effect %+v, want until t0+%v level %d", i+1, eff, now+cdSec(s), wantLevels[i])
		}
		e.wantCooling(t, cdAPIKey.ID, now+cdSec(s))
		e.wantLevel(t, cdAPIKey.ID, wantLevels[i])
		now += cdSec(s)
		e.at(now)
		e.wantNotCooling(t, cdAPIKey.ID) // lazily expired exactly at the deadline
	}
}

func TestCooldownLaddersOAuthAndLocal(t *testing.T) {
	cases := []struct {
		profile resilience.Profile
		seconds []float64
		levels  []int
	}{
		{services.AuthOAuth, []float64{5, 10, 20, 40, 80, 160, 300, 300, 300}, []int{1, 2, 3, 4, 5, 6, 7, 8, 8}},
		{services.AuthLocal, []float64{1, 2, 4, 8, 16, 16}, []int{1, 2, 3, 4, 4, 4}},
		{services.AuthAPIKey, []float64{3, 6, 12, 24, 48, 96, 96}, []int{1, 2, 3, 4, 5, 5, 5}},
	}
	for _, tc := range cases {
		t.Run(string(tc.profile), func(t *testing.T) {
			e := newCDEnv(t)
			conn := cdConn("c_"+string(tc.profile), tc.profile)
			var now time.Duration
			for i, s := range tc.seconds {
				e.at(now)
				e.cd.Apply(e.ctx, conn, cdCls(503, resilience.ReasonServerError))
				e.wantCooling(t, conn.ID, now+cdSec(s))
				e.wantLevel(t, conn.ID, tc.levels[i])
				now += cdSec(s)
			}
		})
	}
}

func TestCooldownConfigOverridesProfile(t *testing.T) {
	clock := testkit.NewFakeClock(cdT0)
	cfg := resilience.CooldownConfig{Profiles: map[resilience.Profile]resilience.CooldownProfile{
		services.AuthAPIKey: {BaseCooldownMs: 10_000, MaxBackoffSteps: 2, MaxCooldownMs: 25_000},
	}}
	cd := resilience.NewCooldowns(clock, func() resilience.CooldownConfig { return cfg }, nil, nil)
	var now time.Duration
	for _, s := range []float64{10, 20, 25, 25} {
		clock.Set(cdT0.Add(now))
		eff := cd.Apply(context.Background(), cdAPIKey, cdCls(502, resilience.ReasonServerError))
		if !eff.Until.Equal(cdT0.Add(now + cdSec(s))) {
			t.Fatalf("until t0+%v, want t0+%v", eff.Until.Sub(cdT0), now+cdSec(s))
		}
		now += cdSec(s)
	}
	if lvl := cd.State(cdAPIKey.ID).BackoffLevel; lvl != 2 {
		t.Fatalf("level %d, want 2 (maxBackoffSteps)", lvl)
	}
}

// K2: level 2, 16 concurrent 502s at t=0 → one deadline t+12 s, level 3.
func TestCooldownK2ConcurrentFailuresOneEpisode(t *testing.T) {
	e := newCDEnv(t)
	prev := cdT0.Add(-time.Second)
	e.cd.Replace(cdAPIKey.ID, services.ConnectionState{BackoffLevel: 2, LastErrorAt: &prev})
	var wg sync.WaitGroup
	effects := make([]resilience.CooldownEffect, 16)
	for i := range effects {
		wg.Go(func() {
			effects[i] = e.cd.Apply(e.ctx, cdAPIKey, cdCls(502, resilience.ReasonServerError))
		})
	}
	wg.Wait()
	newEpisodes := 0
	for _, eff := range effects {
		if eff.NewEpisode {
			newEpisodes++
		}
		if !eff.Until.Equal(cdT0.Add(12*time.Second)) || eff.LevelAfter != 3 {
			t.Errorf("effect %+v, want until t0+12s level 3", eff)
		}
	}
	if newEpisodes != 1 {
		t.Errorf("%d new episodes, want 1", newEpisodes)
	}
	e.wantCooling(t, cdAPIKey.ID, 12*time.Second)
	e.wantLevel(t, cdAPIKey.ID, 3)
	if st := e.cd.State(cdAPIKey.ID); st.LastErrorAt == nil || !st.LastErrorAt.Equal(cdT0) || st.LastErrorStatus != 502 {
		t.Errorf("last error: %+v", st)
	}
	// The other 15 only restated last_error* with identical values: one write.
	if n := e.store.Writes(); n != 1 {
		t.Errorf("%d store writes, want 1", n)
	}
}

// K3: then a 429 Retry-After 60 at t+1 s extends to t+61 s; Retry-After 5 at t+2 s changes nothing.
func TestCooldownK3HintExtendsOnlyLater(t *testing.T) {
	e := newCDEnv(t)
	prev := cdT0.Add(-time.Second)
	e.cd.Replace(cdAPIKey.ID, services.ConnectionState{BackoffLevel: 2, LastErrorAt: &prev})
	e.cd.Apply(e.ctx, cdAPIKey, cdCls(502, resilience.ReasonServerError))
	e.wantCooling(t, cdAPIKey.ID, 12*time.Second)

	e.at(time.Second)
	eff := e.cd.Apply(e.ctx, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), 60*time.Second))
	if eff.NewEpisode {
		t.Error("a failure during a cooldown opened a new episode")
	}
	e.wantCooling(t, cdAPIKey.ID, 61*time.Second)
	e.wantLevel(t, cdAPIKey.ID, 3)

	e.at(2 * time.Second)
	e.cd.Apply(e.ctx, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), 5*time.Second))
	e.wantCooling(t, cdAPIKey.ID, 61*time.Second)
	e.wantLevel(t, cdAPIKey.ID, 3)
	if st := e.cd.State(cdAPIKey.ID); st.LastErrorStatus != 429 || !st.LastErrorAt.Equal(cdT0.Add(2*time.Second)) {
		t.Errorf("last_error* not updated by the absorbed failure: %+v", st)
	}
}

// K4: eligible at t+61 s without a write; a success at t+62 s clears deadline and level.
func TestCooldownK4LazyExpiryAndSuccess(t *testing.T) {
	e := newCDEnv(t)
	until, errAt := cdT0.Add(61*time.Second), cdT0.Add(2*time.Second)
	e.cd.Replace(cdAPIKey.ID, services.ConnectionState{RateLimitedUntil: &until, BackoffLevel: 3,
		LastError: "rate limited", LastErrorReason: "rate_limit", LastErrorStatus: 429, LastErrorAt: &errAt})
	e.at(61 * time.Second)
	e.wantNotCooling(t, cdAPIKey.ID)
	if st := e.cd.State(cdAPIKey.ID); st.RateLimitedUntil == nil || st.BackoffLevel != 3 {
		t.Errorf("a read changed the state: %+v", st)
	}
	if n := e.store.Writes(); n != 0 {
		t.Fatalf("%d writes by reads, want 0", n)
	}
	e.at(62 * time.Second)
	e.cd.Success(e.ctx, cdAPIKey.ID)
	st := e.cd.State(cdAPIKey.ID)
	if st.RateLimitedUntil != nil || st.BackoffLevel != 0 {
		t.Errorf("after success: until %v level %d", st.RateLimitedUntil, st.BackoffLevel)
	}
	if st.LastError != "rate limited" || st.LastErrorStatus != 429 || st.LastErrorAt == nil {
		t.Errorf("success dropped last_error*: %+v", st)
	}
	e.cd.Success(e.ctx, cdAPIKey.ID)
	if n := e.store.Writes(); n != 1 {
		t.Errorf("%d writes, want 1 (second success has nothing to clear)", n)
	}
	saved, _ := e.store.LoadConnectionStates(e.ctx)
	if s := saved[cdAPIKey.ID]; s.RateLimitedUntil != nil || s.BackoffLevel != 0 || s.LastErrorStatus != 429 {
		t.Errorf("stored after success: %+v", s)
	}
}

// K5: 402 → credits_exhausted; later 429s and 503s leave it; admin reset → active.
func TestCooldownK5TerminalSurvivesAndAdminReset(t *testing.T) {
	e := newCDEnv(t)
	e.cd.Apply(e.ctx, cdAPIKey, cdCls(502, resilience.ReasonServerError)) // cooling, level 1
	e.at(time.Second)
	credits := cdCls(402, resilience.ReasonCreditsExhausted)
	credits.Terminal = resilience.TerminalCreditsExhausted
	eff := e.cd.Apply(e.ctx, cdAPIKey, credits)
	if eff.Terminal != services.TerminalCreditsExhausted || !eff.EnteredTerminal || !eff.Until.IsZero() || eff.LevelAfter != 0 {
		t.Fatalf("402 effect %+v", eff)
	}
	st := e.cd.State(cdAPIKey.ID)
	if st.TerminalStatus != services.TerminalCreditsExhausted || st.TerminalAt == nil || st.RateLimitedUntil != nil || st.BackoffLevel != 0 {
		t.Fatalf("after 402: %+v", st)
	}
	writes := e.store.Writes()
	e.at(2 * time.Second)
	e.cd.Apply(e.ctx, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), 30*time.Second))
	e.cd.Apply(e.ctx, cdAPIKey, cdCls(503, resilience.ReasonServerError))
	ban := cdCls(403, resilience.ReasonForbidden)
	ban.Terminal = resilience.TerminalBanned
	e.cd.Apply(e.ctx, cdAPIKey, ban)
	if got := e.cd.State(cdAPIKey.ID); got.TerminalStatus != services.TerminalCreditsExhausted || got.LastErrorStatus != 402 || got.RateLimitedUntil != nil {
		t.Fatalf("terminal rewritten: %+v", got)
	}
	if e.store.Writes() != writes {
		t.Error("later failures wrote to a terminal connection")
	}
	e.wantNotCooling(t, cdAPIKey.ID)

	if err := e.cd.Reset(e.ctx, cdAPIKey.ID); err != nil {
		t.Fatal(err)
	}
	c := services.Connection{Enabled: true, State: e.cd.State(cdAPIKey.ID)}
	if c.Status(e.clock.Now()) != services.StatusActive || c.State != (services.ConnectionState{}) {
		t.Fatalf("after reset: status %s state %+v", c.Status(e.clock.Now()), c.State)
	}
	saved, _ := e.store.LoadConnectionStates(e.ctx)
	if saved[cdAPIKey.ID] != (services.ConnectionState{}) {
		t.Errorf("stored after reset: %+v", saved[cdAPIKey.ID])
	}
}

// K6: rejection streak 1 (60 s), absorbed, 2 (300 s), banned; 25 h later it restarts at 1.
func TestCooldownK6RejectionStreak(t *testing.T) {
	e := newCDEnv(t)
	conn := cdConn("c_claude", services.AuthOAuth)
	rej := cdCls(403, resilience.ReasonRequestRejected)
	step := func(at time.Duration, streak int, cool time.Duration, terminal string) {
		t.Helper()
		e.at(at)
		e.cd.Apply(e.ctx, conn, rej)
		st := e.cd.State(conn.ID)
		if st.RejectStreak != streak || st.TerminalStatus != terminal {
			t.Fatalf("at %v: streak %d terminal %q, want %d %q", at, st.RejectStreak, st.TerminalStatus, streak, terminal)
		}
		if cool > 0 {
			e.wantCooling(t, conn.ID, cool)
		} else {
			e.wantNotCooling(t, conn.ID)
		}
	}
	step(0, 1, 60*time.Second, "")
	step(10*time.Second, 1, 60*time.Second, "") // absorbed
	step(61*time.Second, 2, 361*time.Second, "")
	step(362*time.Second, 3, 0, services.TerminalBanned)
	if st := e.cd.State(conn.ID); !strings.Contains(st.LastError, "3 consecutive request refusals within 24 h") || st.BackoffLevel != 0 {
		t.Errorf("ban state: %+v", st)
	}

	t.Run("restart after 24 h", func(t *testing.T) {
		e := newCDEnv(t)
		e.cd.Apply(e.ctx, conn, rej)
		e.at(25 * time.Hour)
		e.cd.Apply(e.ctx, conn, rej)
		if st := e.cd.State(conn.ID); st.RejectStreak != 1 || st.TerminalStatus != "" {
			t.Fatalf("refusal at 25 h: %+v", st)
		}
		e.wantCooling(t, conn.ID, 25*time.Hour+60*time.Second)
	})
}

// K7: auth ladder 2, 4, 8 min then expired; concurrent 401s count once; a success resets it.
func TestCooldownK7AuthLadder(t *testing.T) {
	conn := cdConn("c_2", services.AuthAPIKey)
	auth := cdCls(401, resilience.ReasonAuthError)
	e := newCDEnv(t)
	for i, step := range []struct {
		at, until time.Duration
	}{{0, 120 * time.Second}, {120 * time.Second, 360 * time.Second}, {360 * time.Second, 840 * time.Second}} {
		e.at(step.at)
		e.cd.Apply(e.ctx, conn, auth)
		if n := e.cd.State(conn.ID).AuthFailCount; n != i+1 {
			t.Fatalf("at %v: auth_fail_count %d, want %d", step.at, n, i+1)
		}
		e.wantCooling(t, conn.ID, step.until)
	}
	e.at(840 * time.Second)
	eff := e.cd.Apply(e.ctx, conn, auth)
	if eff.Terminal != services.TerminalExpired || !eff.EnteredTerminal {
		t.Fatalf("4th 401: %+v", eff)
	}
	e.wantNotCooling(t, conn.ID)

	t.Run("16 concurrent 401s count once", func(t *testing.T) {
		e := newCDEnv(t)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() { e.cd.Apply(e.ctx, conn, auth) })
		}
		wg.Wait()
		if n := e.cd.State(conn.ID).AuthFailCount; n != 1 {
			t.Fatalf("auth_fail_count %d, want 1", n)
		}
		e.wantCooling(t, conn.ID, 120*time.Second)
	})

	t.Run("success resets the count", func(t *testing.T) {
		e := newCDEnv(t)
		e.cd.Apply(e.ctx, conn, auth)
		e.at(120 * time.Second)
		e.cd.Apply(e.ctx, conn, auth) // 2
		e.at(200 * time.Second)
		e.cd.Success(e.ctx, conn.ID)
		if st := e.cd.State(conn.ID); st.AuthFailCount != 0 || st.RateLimitedUntil != nil {
			t.Fatalf("after success: %+v", st)
		}
		e.at(201 * time.Second)
		e.cd.Apply(e.ctx, conn, auth)
		if n := e.cd.State(conn.ID).AuthFailCount; n != 1 {
			t.Fatalf("auth_fail_count %d after success, want 1", n)
		}
		e.wantCooling(t, conn.ID, 321*time.Second)
	})
}

// K8: restart while cooling until t+61 s → still cooling after reload (SQLite).
func TestCooldownK8SurvivesRestart(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	if err := models.NewConnectionStore(db, testkit.Keyring(t)).CreateConnection(ctx, services.Connection{
		ID: cdAPIKey.ID, Provider: "openai", Name: "k8", AuthClass: services.AuthAPIKey, Enabled: true,
		Credentials: services.Credentials{APIKey: "sk-k8"}, Tier: "standard", CreatedAt: cdT0, UpdatedAt: cdT0,
	}); err != nil {
		t.Fatal(err)
	}
	store := models.NewConnectionStateStore(db)
	clock := testkit.NewFakeClock(cdT0)
	cd := resilience.NewCooldowns(clock, nil, store, nil)
	if err := cd.Load(ctx); err != nil {
		t.Fatal(err)
	}
	cd.Apply(ctx, cdAPIKey, cdCls(502, resilience.ReasonServerError))
	cd.Apply(ctx, cdAPIKey, cdCls(502, resilience.ReasonServerError))
	clock.Set(cdT0.Add(time.Second))
	cd.Apply(ctx, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), 60*time.Second))

	clock.Set(cdT0.Add(30 * time.Second))
	restarted := resilience.NewCooldowns(clock, nil, store, nil)
	if err := restarted.Load(ctx); err != nil {
		t.Fatal(err)
	}
	until, cooling := restarted.Cooling(cdAPIKey.ID)
	if !cooling || !until.Equal(cdT0.Add(61*time.Second)) {
		t.Fatalf("after restart: cooling %v until t0+%v, want t0+61s", cooling, until.Sub(cdT0))
	}
	st := restarted.State(cdAPIKey.ID)
	if st.BackoffLevel != 1 || st.LastErrorStatus != 429 || st.LastErrorReason != "rate_limit" {
		t.Errorf("restored state: %+v", st)
	}
	// The restored episode still absorbs failures.
	if eff := restarted.Apply(ctx, cdAPIKey, cdCls(502, resilience.ReasonServerError)); eff.NewEpisode || eff.LevelAfter != 1 {
		t.Errorf("failure after restart: %+v", eff)
	}
	clock.Set(cdT0.Add(61 * time.Second))
	if _, cooling := restarted.Cooling(cdAPIKey.ID); cooling {
		t.Error("still cooling at the deadline")
	}
}

func TestCooldownDefaultPenalties(t *testing.T) {
	quota := cdCls(429, resilience.ReasonQuotaExhausted)
	daily := quota
	daily.Detail = "daily_quota"
	rule := quota
	rule.RuleID = "newapi-user-quota"
	ruleMs := cdCls(402, resilience.ReasonQuotaExhausted)
	ruleMs.RuleID, ruleMs.CooldownMs = "openrouter-402", 120_000
	forbidden := cdCls(403, resilience.ReasonForbidden)
	transient := cdCls(0, resilience.ReasonTransient)
	cases := []struct {
		name      string
		start     time.Duration
		info      resilience.ConnInfo
		cls       resilience.Classification
		wantUntil time.Duration // from t0; 0 = not cooling
		wantLevel int
	}{
		{"rate limit backoff", 0, cdAPIKey, cdCls(429, resilience.ReasonRateLimit), 3 * time.Second, 1},
		{"rate limit hint keeps level", 0, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), 7*time.Second), 7 * time.Second, 0},
		{"transient backoff", 0, cdAPIKey, transient, 3 * time.Second, 1},
		{"quota default 1 h", 0, cdAPIKey, quota, time.Hour, 0},
		{"quota hint", 0, cdAPIKey, cdHinted(quota, 2*time.Hour), 2 * time.Hour, 0},
		{"quota daily → next midnight UTC", 0, cdAPIKey, daily, 14 * time.Hour, 0},
		{"quota learned window reset", 0, func() resilience.ConnInfo {
			c := cdAPIKey
			c.QuotaResetAt = cdT0.Add(5 * time.Hour)
			return c
		}(), quota, 5 * time.Hour, 0},
		{"quota rule runs the ladder (C1)", 0, cdAPIKey, rule, 3 * time.Second, 1},
		{"rule cooldownMs replaces the base", 0, cdAPIKey, ruleMs, 120 * time.Second, 1},
		{"forbidden fixed 300 s", 0, cdAPIKey, forbidden, 300 * time.Second, 0},
		{"forbidden hint", 0, cdAPIKey, cdHinted(forbidden, 10*time.Second), 10 * time.Second, 0},
		{"hint floored at 1 s", 0, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), 10*time.Millisecond), time.Second, 0},
		{"hint capped at 7 days", 0, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), 30*24*time.Hour), 7 * 24 * time.Hour, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newCDEnv(t)
			e.at(tc.start)
			eff := e.cd.Apply(e.ctx, tc.info, tc.cls)
			if !eff.NewEpisode {
				t.Error("not a new episode")
			}
			e.wantCooling(t, tc.info.ID, tc.wantUntil)
			e.wantLevel(t, tc.info.ID, tc.wantLevel)
			if st := e.cd.State(tc.info.ID); st.LastErrorReason != string(tc.cls.Reason) || st.LastErrorStatus != tc.cls.Status {
				t.Errorf("last_error*: %+v", st)
			}
		})
	}

	t.Run("rule cooldownMs ladder is capped", func(t *testing.T) {
		e := newCDEnv(t)
		var now time.Duration
		for _, s := range []float64{120, 240, 300, 300} {
			e.at(now)
			e.cd.Apply(e.ctx, cdAPIKey, ruleMs)
			e.wantCooling(t, cdAPIKey.ID, now+cdSec(s))
			now += cdSec(s)
		}
	})
}

func TestCooldownNonConnectionScopes(t *testing.T) {
	e := newCDEnv(t)
	model := cdCls(429, resilience.ReasonRateLimit)
	model.Scope = resilience.ScopeModel
	eff := e.cd.Apply(e.ctx, cdAPIKey, model)
	if !eff.NewEpisode || !eff.Until.IsZero() {
		t.Errorf("model scope effect %+v", eff)
	}
	e.wantNotCooling(t, cdAPIKey.ID)
	if st := e.cd.State(cdAPIKey.ID); st.LastErrorStatus != 429 || st.BackoffLevel != 0 {
		t.Errorf("model scope state %+v", st)
	}
	writes := e.store.Writes()
	for _, r := range []resilience.Reason{resilience.ReasonCallerError, resilience.ReasonClientAbort, resilience.ReasonLocalLimit} {
		c := cdCls(400, r)
		c.Scope = resilience.ScopeNone
		e.cd.Apply(e.ctx, cdConn("c_quiet", services.AuthAPIKey), c)
	}
	if e.store.Writes() != writes || e.cd.State("c_quiet") != (services.ConnectionState{}) {
		t.Error("caller_error / client_abort / local_limit changed state")
	}
}

func TestCooldownBackoffRestartsAfterTenMinutes(t *testing.T) {
	for _, tc := range []struct {
		gap       time.Duration
		wantUntil time.Duration
		wantLevel int
	}{
		{600 * time.Second, 24 * time.Second, 4}, // exactly 600 000 ms: keeps climbing
		{601 * time.Second, 3 * time.Second, 1},  // more: restarts at level 0
		{2 * time.Hour, 3 * time.Second, 1},
	} {
		e := newCDEnv(t)
		errAt := cdT0.Add(-tc.gap)
		e.cd.Replace(cdAPIKey.ID, services.ConnectionState{BackoffLevel: 3, LastErrorAt: &errAt})
		e.cd.Apply(e.ctx, cdAPIKey, cdCls(500, resilience.ReasonServerError))
		e.wantCooling(t, cdAPIKey.ID, tc.wantUntil)
		e.wantLevel(t, cdAPIKey.ID, tc.wantLevel)
	}
}

func TestCooldownTerminalAppliesWhileCooling(t *testing.T) {
	e := newCDEnv(t)
	e.cd.Apply(e.ctx, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), time.Hour))
	e.at(time.Second)
	ban := cdCls(403, resilience.ReasonForbidden)
	ban.Terminal = resilience.TerminalBanned
	eff := e.cd.Apply(e.ctx, cdAPIKey, ban)
	if eff.Terminal != services.TerminalBanned || eff.NewEpisode {
		t.Fatalf("ban while cooling: %+v", eff)
	}
	st := e.cd.State(cdAPIKey.ID)
	if st.TerminalStatus != services.TerminalBanned || st.RateLimitedUntil != nil || !st.TerminalAt.Equal(cdT0.Add(time.Second)) {
		t.Fatalf("state %+v", st)
	}
	if e.store.Disabled(cdAPIKey.ID) {
		t.Error("disabled without autoDisableBannedAccounts")
	}

	t.Run("ban rule", func(t *testing.T) {
		e := newCDEnv(t)
		rule := cdCls(403, resilience.ReasonForbidden)
		rule.RuleID, rule.Ban = "op-ban", true
		if eff := e.cd.Apply(e.ctx, cdAPIKey, rule); eff.Terminal != services.TerminalBanned {
			t.Fatalf("ban rule: %+v", eff)
		}
	})
	t.Run("credits on a model scope stays timed elsewhere", func(t *testing.T) {
		e := newCDEnv(t)
		c := cdCls(402, resilience.ReasonCreditsExhausted)
		c.Scope = resilience.ScopeModel
		if eff := e.cd.Apply(e.ctx, cdAPIKey, c); eff.Terminal != "" {
			t.Fatalf("model-scoped credits made the connection terminal: %+v", eff)
		}
	})
}

func TestCooldownDisableCooling(t *testing.T) {
	e := newCDEnv(t)
	conn := cdAPIKey
	conn.DisableCooling = true
	for _, c := range []resilience.Classification{
		cdCls(500, resilience.ReasonServerError),
		cdHinted(cdCls(429, resilience.ReasonRateLimit), time.Minute),
		cdCls(429, resilience.ReasonQuotaExhausted),
		cdCls(403, resilience.ReasonForbidden),
	} {
		if eff := e.cd.Apply(e.ctx, conn, c); !eff.Until.IsZero() || eff.LevelAfter != 0 {
			t.Fatalf("%s: effect %+v", c.Reason, eff)
		}
		e.wantNotCooling(t, conn.ID)
	}
	if st := e.cd.State(conn.ID); st.LastErrorStatus != 403 || st.BackoffLevel != 0 {
		t.Errorf("state %+v", st)
	}
	// Ladders count without cooling; their terminal still applies.
	for i := range 4 {
		e.at(time.Duration(i+1) * time.Second)
		e.cd.Apply(e.ctx, conn, cdCls(401, resilience.ReasonAuthError))
		e.wantNotCooling(t, conn.ID)
	}
	if st := e.cd.State(conn.ID); st.TerminalStatus != services.TerminalExpired {
		t.Errorf("auth ladder without cooling: %+v", st)
	}
	// Immediate terminals apply as well.
	e2 := newCDEnv(t)
	credits := cdCls(402, resilience.ReasonCreditsExhausted)
	if eff := e2.cd.Apply(e2.ctx, conn, credits); eff.Terminal != services.TerminalCreditsExhausted {
		t.Errorf("credits with disableCooling: %+v", eff)
	}
}

func TestCooldownAutoDisableBanned(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	conns := models.NewConnectionStore(db, testkit.Keyring(t))
	for _, id := range []string{"c_auto", "c_keep"} {
		if err := conns.CreateConnection(ctx, services.Connection{ID: id, Provider: "anthropic", Name: id,
			AuthClass: services.AuthOAuth, Enabled: true, Credentials: services.Credentials{APIKey: services.Secret("sk-" + id)},
			Tier: "standard", CreatedAt: cdT0, UpdatedAt: cdT0}); err != nil {
			t.Fatal(err)
		}
	}
	clock := testkit.NewFakeClock(cdT0)
	cd := resilience.NewCooldowns(clock, nil, models.NewConnectionStateStore(db), nil)
	ban := cdCls(403, resilience.ReasonForbidden)
	ban.Terminal = resilience.TerminalBanned

	auto := cdConn("c_auto", services.AuthOAuth)
	auto.AutoDisableBanned = true
	cd.Apply(ctx, auto, ban)
	cd.Apply(ctx, cdConn("c_keep", services.AuthOAuth), ban)

	for id, wantEnabled := range map[string]bool{"c_auto": false, "c_keep": true} {
		c, err := conns.FindConnectionByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Enabled != wantEnabled || c.State.TerminalStatus != services.TerminalBanned {
			t.Errorf("%s: enabled %v terminal %q, want enabled %v banned", id, c.Enabled, c.State.TerminalStatus, wantEnabled)
		}
		if c.Credentials.APIKey.Reveal() != "sk-"+id {
			t.Errorf("%s: credentials changed", id)
		}
	}
	// The rejection streak ban disables too; credits_exhausted never does.
	credits := cdCls(402, resilience.ReasonCreditsExhausted)
	e := newCDEnv(t)
	credit := cdConn("c_credit", services.AuthAPIKey)
	credit.AutoDisableBanned = true
	e.cd.Apply(e.ctx, credit, credits)
	if e.store.Disabled("c_credit") {
		t.Error("credits_exhausted disabled the connection")
	}
	rej := cdConn("c_rej", services.AuthOAuth)
	rej.AutoDisableBanned = true
	for _, at := range []time.Duration{0, 61 * time.Second, 362 * time.Second} {
		e.at(at)
		e.cd.Apply(e.ctx, rej, cdCls(403, resilience.ReasonRequestRejected))
	}
	if !e.store.Disabled("c_rej") {
		t.Error("rejection-streak ban did not disable the connection")
	}
}

func TestCooldownScrubsLastError(t *testing.T) {
	cases := []struct {
		name, msg string
		gone      []string
		kept      []string
	}{
		{"openai key", "Incorrect API key provided: sk-proj-AbCdEf0123456789xyz. You can find your key", []string{"AbCdEf0123456789xyz"}, []string{"Incorrect API key provided", "sk-[redacted]"}},
		{"anthropic key", "invalid x-api-key sk-ant-api03-ZZZ999", []string{"api03-ZZZ999"}, []string{"invalid x-api-key"}},
		{"bearer", `upstream said: Authorization: Bearer eyJhbGciOi.payload.sig denied`, []string{"eyJhbGciOi"}, []string{"denied"}},
		{"key=value", `request failed: api_key=AIzaSyShort&model=x`, []string{"AIzaSyShort"}, []string{"model=x"}},
		{"json token", `{"access_token": "ya29.a0Short", "ok": false}`, []string{"ya29.a0Short"}, []string{`"ok": false`}},
		{"url password", "proxy http://bob:hunter2@proxy.local:3128 refused", []string{"hunter2", "bob"}, []string{"proxy.local:3128 refused"}},
		{"hex run", "signature 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 mismatch", []string{"9f86d081884c7d659a2feaa0c55ad015"}, []string{"signature", "mismatch"}},
		{"base64 run", "token dGhpcyBpcyBhIHZlcnkgc2VjcmV0IHRva2VuIDEyMzQ1Ng== rejected", []string{"dGhpcyBpcyBhIHZlcnkgc2VjcmV0"}, []string{"rejected"}},
		{"plain words kept", "organization_quota_exceeded_for_this_account_please_upgrade (code 429)", nil, []string{"organization_quota_exceeded_for_this_account_please_upgrade (code 429)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newCDEnv(t)
			conn := cdAPIKey
			conn.Message = tc.msg
			e.cd.Apply(e.ctx, conn, cdCls(401, resilience.ReasonAuthError))
			got := e.cd.State(conn.ID).LastError
			for _, g := range tc.gone {
				if strings.Contains(got, g) {
					t.Errorf("last_error %q still holds %q", got, g)
				}
			}
			for _, k := range tc.kept {
				if !strings.Contains(got, k) {
					t.Errorf("last_error %q lost %q", got, k)
				}
			}
		})
	}
	t.Run("capped at 1024 chars", func(t *testing.T) {
		e := newCDEnv(t)
		conn := cdAPIKey
		conn.Message = strings.Repeat("é rror ", 400)
		conn.Code = "insufficient_quota"
		e.cd.Apply(e.ctx, conn, cdCls(500, resilience.ReasonServerError))
		st := e.cd.State(conn.ID)
		if n := utf8.RuneCountInString(st.LastError); n != 1024 {
			t.Errorf("last_error has %d chars, want 1024", n)
		}
		if st.ErrorCode != "insufficient_quota" {
			t.Errorf("error_code %q", st.ErrorCode)
		}
	})
	t.Run("fallback text", func(t *testing.T) {
		e := newCDEnv(t)
		e.cd.Apply(e.ctx, cdAPIKey, cdCls(502, resilience.ReasonServerError))
		if got := e.cd.State(cdAPIKey.ID).LastError; got != "HTTP 502 server_error" {
			t.Errorf("last_error %q", got)
		}
	})
}

func TestCooldownClearCooldownsSkipsTerminal(t *testing.T) {
	e := newCDEnv(t)
	e.cd.Apply(e.ctx, cdConn("c_cool", services.AuthAPIKey), cdCls(500, resilience.ReasonServerError))
	credits := cdCls(402, resilience.ReasonCreditsExhausted)
	e.cd.Apply(e.ctx, cdConn("c_term", services.AuthAPIKey), credits)
	e.cd.Replace("c_clean", services.ConnectionState{LastError: "old", LastErrorStatus: 500})
	e.cd.Replace("c_auth", services.ConnectionState{AuthFailCount: 2})

	res, err := e.cd.ClearCooldownsDetailed(e.ctx, []string{"c_cool", "c_term", "c_clean", "c_missing"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Cleared, ",") != "c_cool" || strings.Join(res.SkippedTerminal, ",") != "c_term" ||
		strings.Join(res.Unchanged, ",") != "c_clean,c_missing" {
		t.Fatalf("result %+v", res)
	}
	e.wantNotCooling(t, "c_cool")
	if st := e.cd.State("c_cool"); st.BackoffLevel != 0 || st.LastErrorStatus != 500 {
		t.Errorf("cleared state %+v (keeps last_error*)", st)
	}
	if st := e.cd.State("c_term"); st.TerminalStatus != services.TerminalCreditsExhausted {
		t.Errorf("terminal cleared: %+v", st)
	}

	e.cd.Apply(e.ctx, cdConn("c_cool", services.AuthAPIKey), cdCls(500, resilience.ReasonServerError))
	n, err := e.cd.ClearCooldowns(e.ctx, nil)
	if err != nil || n != 2 { // c_cool and c_auth
		t.Fatalf("ClearCooldowns(nil) = %d, %v; want 2", n, err)
	}
	if e.cd.State("c_auth").AuthFailCount != 0 || e.cd.State("c_term").TerminalStatus == "" {
		t.Error("bulk clear wrong")
	}
	saved, _ := e.store.LoadConnectionStates(e.ctx)
	if saved["c_cool"].RateLimitedUntil != nil || saved["c_term"].TerminalStatus == "" {
		t.Errorf("stored after bulk clear: %+v", saved)
	}
}

func TestCooldownForgetReplaceAndLoad(t *testing.T) {
	e := newCDEnv(t)
	e.cd.Apply(e.ctx, cdAPIKey, cdCls(500, resilience.ReasonServerError))
	e.cd.Forget(cdAPIKey.ID)
	e.wantNotCooling(t, cdAPIKey.ID)
	if e.cd.State(cdAPIKey.ID) != (services.ConnectionState{}) {
		t.Error("forgotten connection kept state")
	}

	// New credentials: the caller stored the cleared state and replaces memory.
	credits := cdCls(402, resilience.ReasonCreditsExhausted)
	e.cd.Apply(e.ctx, cdAPIKey, credits)
	writes := e.store.Writes()
	e.cd.Replace(cdAPIKey.ID, services.ConnectionState{})
	if e.cd.State(cdAPIKey.ID).TerminalStatus != "" || e.store.Writes() != writes {
		t.Error("Replace did not reset memory, or wrote")
	}
	e.cd.Apply(e.ctx, cdAPIKey, cdCls(500, resilience.ReasonServerError))
	e.wantCooling(t, cdAPIKey.ID, 3*time.Second)

	// Load replaces memory with the store's view.
	until := cdT0.Add(time.Hour)
	other := resilience.NewMemoryConnectionStateStore()
	_ = other.SaveConnectionState(e.ctx, "c_9", services.ConnectionState{RateLimitedUntil: &until, BackoffLevel: 2})
	cd := resilience.NewCooldowns(e.clock, nil, other, nil)
	cd.Replace(cdAPIKey.ID, services.ConnectionState{RateLimitedUntil: &until}) // memory only
	if err := cd.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, cooling := cd.Cooling(cdAPIKey.ID); cooling {
		t.Error("Load kept a connection the store does not have")
	}
	if u, cooling := cd.Cooling("c_9"); !cooling || !u.Equal(until) {
		t.Errorf("c_9 after Load: %v %v", u, cooling)
	}
}

func TestCooldownApplyAfterDeleteIsDropped(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	cd := resilience.NewCooldowns(testkit.NewFakeClock(cdT0), nil, models.NewConnectionStateStore(db), nil)
	// No such row: the write fails with not found and memory forgets it.
	cd.Apply(ctx, cdConn("c_gone", services.AuthAPIKey), cdCls(500, resilience.ReasonServerError))
	if _, cooling := cd.Cooling("c_gone"); cooling {
		t.Error("a deleted connection kept a cooldown")
	}
	if err := cd.Reset(ctx, "c_gone"); err == nil {
		t.Error("Reset of an unknown connection succeeded")
	}
}
