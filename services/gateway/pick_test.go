package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit/leasestore"
	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/affinity"
	"switchyard/services/leases"
	"switchyard/services/quota"
	"switchyard/services/resilience"
)

// pickClock is a fake clock the test moves by hand.
type pickClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *pickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *pickClock) Wait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func (c *pickClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// pickSource serves a connection list the test edits; Reload copies it.
type pickSource struct {
	cat   *services.Catalogue
	conns []services.Connection
}

func (s *pickSource) Catalogue() *services.Catalogue { return s.cat }
func (s *pickSource) ListConnections(context.Context) ([]services.Connection, error) {
	return slices.Clone(s.conns), nil
}
func (s *pickSource) ListCombos(context.Context) ([]services.Combo, error) { return nil, nil }

// recObs records the exclusions the gateway counts.
type recObs struct {
	nopObserver
	excluded []string
}

func (o *recObs) Excluded(reason string) { o.excluded = append(o.excluded, reason) }

type pickEnv struct {
	clock      *pickClock
	src        *pickSource
	reg        *Registry
	g          *Gateway
	cd         *resilience.Cooldowns
	lo         *resilience.Lockouts
	q          *quota.Tracker
	ls         *leases.Leases
	pins       *affinity.Pins
	selA, selB *accounts.Selector
	obs        *recObs
	lockOn     bool
	maxStale   time.Duration
	keys       []services.APIKey // keys[1:] may hold leases
	reqKeys    []services.APIKey // keys requests come with
	owners     []string
}

func newPickEnv(t *testing.T, n int, seed uint64) *pickEnv {
	t.Helper()
	ctx := context.Background()
	env := &pickEnv{clock: &pickClock{now: benchT0}, lockOn: true, maxStale: 24 * time.Hour, obs: &recObs{}}
	env.src = &pickSource{cat: services.NewCatalogue([]services.CustomProvider{
		{ID: "fake", Format: services.FormatOpenAI, AuthClass: services.AuthAPIKey, Models: []string{"m1", "m2"}},
		{ID: "other", Format: services.FormatOpenAI, AuthClass: services.AuthAPIKey, Models: []string{"m1"}},
	})}
	var ids []string
	for i := range n {
		id := fmt.Sprintf("conn-%02d", i)
		ids = append(ids, id)
		env.src.conns = append(env.src.conns, services.Connection{ID: id, Provider: "fake", Name: id, AuthClass: services.AuthAPIKey,
			Enabled: true, Priority: i / 3, BaseURL: "http://127.0.0.1:9/v1", CreatedAt: benchT0.Add(time.Duration(i) * time.Second)})
	}
	env.src.conns = append(env.src.conns, services.Connection{ID: "other-1", Provider: "other", Name: "o", AuthClass: services.AuthAPIKey,
		Enabled: true, BaseURL: "http://127.0.0.1:9/v1", CreatedAt: benchT0})
	doc := resilience.DefaultDocument()
	doc.ModelLockout.Enabled = true
	bc, cc, wc, lc, ec := doc.Breaker(), doc.Cooldown(), doc.WindowGate(), doc.Lockout(), doc.EgressLock()
	env.cd = resilience.NewCooldowns(env.clock, func() resilience.CooldownConfig { return cc }, nil, nil)
	env.lo = resilience.NewLockouts(env.clock, func() resilience.LockoutConfig {
		c := lc
		c.Enabled = env.lockOn
		return c
	}, nil, nil, nil)
	breakers := resilience.NewBreakers(env.clock, func() resilience.BreakerConfig { return bc }, resilience.NewMemoryBreakerStore(), nil)
	gate := resilience.NewWindowGate(env.clock, func() resilience.WindowGateConfig { return wc })
	res := resilience.NewEngine(env.clock, resilience.NewClassifier(nil, nil, env.clock.Now, nil), breakers, gate, env.cd, env.lo,
		func() *resilience.Document { return &doc }, func() resilience.EgressLockConfig { return ec })
	var err error
	if env.reg, err = NewRegistry(ctx, env.src); err != nil {
		t.Fatal(err)
	}
	env.selA = accounts.NewSelector(rand.New(rand.NewPCG(seed, 1)))
	env.selB = accounts.NewSelector(rand.New(rand.NewPCG(seed, 1)))
	env.q = quota.New(quota.Options{Clock: env.clock, MaxStale: func() time.Duration { return env.maxStale }})
	env.ls = leases.New(leasestore.New(), env.clock)
	env.pins = affinity.NewPins(env.clock, func() time.Duration { return time.Minute }, benchPinStore{})
	if env.g, err = New(ctx, Deps{Clock: env.clock, Registry: env.reg, Upstream: NewUpstream(nil, "test"), Selector: env.selA,
		Resilience: res, Observer: env.obs, Quota: env.q,
		Traffic: &Traffic{Pins: env.pins, Leases: env.ls, Doc: func() *resilience.Document { return &doc }}}); err != nil {
		t.Fatal(err)
	}
	env.keys = []services.APIKey{
		{ID: "k-plain", Enabled: true, Scopes: []string{services.ScopeInference}},
		{ID: "k-a", Enabled: true, Scopes: []string{services.ScopeInference, services.ScopeLeaseExclusive}, AllowedConnections: ids},
		{ID: "k-b", Enabled: true, Scopes: []string{services.ScopeInference, services.ScopeLeaseExclusive},
			AllowedConnections: []string{ids[0], ids[2], ids[n-1], "other-1"}},
	}
	// A lease-holding key's unmanaged requests: restricted as configured
	// (always the slow path), or with its allowances since lifted, so the
	// fast path must tell its own leases from others'.
	open := func(k services.APIKey) services.APIKey { k.AllowedConnections = nil; return k }
	env.reqKeys = []services.APIKey{env.keys[0], env.keys[0], env.keys[0], env.keys[1], env.keys[2],
		open(env.keys[1]), open(env.keys[2]), {ID: "k-other", Enabled: true, Scopes: []string{services.ScopeInference}}}
	for i := range 4 {
		env.owners = append(env.owners, "vlo_"+strings.Repeat(string(rune('a'+i)), 43))
	}
	return env
}

// activeLease returns a random live lease with its key and owner token.
func (env *pickEnv) activeLease(r *rand.Rand) (leases.Lease, services.APIKey, string, bool) {
	active := env.ls.Active()
	if len(active) == 0 {
		return leases.Lease{}, services.APIKey{}, "", false
	}
	l := active[r.IntN(len(active))]
	var key services.APIKey
	for _, k := range env.keys {
		if k.ID == l.KeyID {
			key = k
		}
	}
	for _, o := range env.owners {
		if leases.HashOwner(o) == l.OwnerHash {
			return l, key, o, true
		}
	}
	return leases.Lease{}, services.APIKey{}, "", false
}

func (env *pickEnv) ids() []string {
	var out []string
	for _, c := range env.src.conns {
		if c.Provider == "fake" {
			out = append(out, c.ID)
		}
	}
	return out
}

// mutate applies one random change of the state pick reads and returns
// what it did.
func (env *pickEnv) mutate(t *testing.T, r *rand.Rand) string {
	ctx := context.Background()
	ids := env.ids()
	id := ids[r.IntN(len(ids))]
	if r.IntN(8) == 0 {
		id = "other-1" // the single connection of provider other
	}
	now := env.clock.Now()
	dur := func(max time.Duration) time.Duration { return time.Duration(r.Int64N(int64(max))) }
	models := []string{"m1", "m1", "m2"}
	switch op := r.IntN(31); op {
	case 0, 1, 2:
		d := dur(20 * time.Second)
		env.clock.advance(d)
		return fmt.Sprintf("advance %v", d)
	case 3:
		d := dur(10 * time.Minute)
		env.clock.advance(d)
		return fmt.Sprintf("advance %v", d)
	case 4:
		reason := []resilience.Reason{resilience.ReasonRateLimit, resilience.ReasonServerError, resilience.ReasonForbidden}[r.IntN(3)]
		env.cd.Apply(ctx, resilience.ConnInfo{ID: id, Provider: "fake", Profile: services.AuthAPIKey},
			resilience.Classification{Status: 429, Reason: reason, Scope: resilience.ScopeConnection, Hint: dur(30 * time.Second)})
		return "cooldown " + id
	case 5:
		if r.IntN(3) == 0 {
			env.cd.Apply(ctx, resilience.ConnInfo{ID: id, Provider: "fake", Profile: services.AuthAPIKey},
				resilience.Classification{Status: 402, Reason: resilience.ReasonCreditsExhausted, Scope: resilience.ScopeConnection})
			return "credits " + id
		}
		at := now
		env.cd.Replace(id, services.ConnectionState{TerminalStatus: services.TerminalBanned, TerminalAt: &at})
		return "banned " + id
	case 6:
		u := now.Add(dur(time.Minute) - 5*time.Second)
		env.cd.Replace(id, services.ConnectionState{RateLimitedUntil: &u, BackoffLevel: r.IntN(3),
			CooldownReason: string([]resilience.Reason{resilience.ReasonRateLimit, resilience.ReasonForbidden}[r.IntN(2)])})
		return "replace cooling " + id
	case 7:
		switch r.IntN(4) {
		case 0:
			env.cd.Success(ctx, id)
			return "cooldown success " + id
		case 1:
			_ = env.cd.Reset(ctx, id)
			return "reset " + id
		case 2:
			_, _ = env.cd.ClearCooldowns(ctx, []string{id})
			return "clear cooldown " + id
		}
		env.cd.Forget(id)
		return "forget " + id
	case 8, 9:
		m := models[r.IntN(len(models))]
		status := []int{429, 503}[r.IntN(2)]
		reason := map[int]resilience.Reason{429: resilience.ReasonRateLimit, 503: resilience.ReasonServerError}[status]
		env.lo.Apply(ctx, "fake", id, m, resilience.Classification{Status: status, Reason: reason, Scope: resilience.ScopeModel,
			Hint: dur(40 * time.Second)})
		return "lock " + id + " " + m
	case 10, 22:
		// Mostly on a connection that holds a lock now.
		if l := env.lo.List(resilience.LockFilter{}); len(l) > 0 && r.IntN(4) > 0 {
			id = l[r.IntN(len(l))].ConnectionID
		}
		switch r.IntN(5) {
		case 0:
			env.lo.Success(ctx, "fake", id, models[r.IntN(len(models))])
			return "lock success " + id
		case 1:
			if l := env.lo.List(resilience.LockFilter{ConnectionID: id}); len(l) > 0 {
				_ = env.lo.ReEnable(ctx, l[r.IntN(len(l))].Key())
				return "re-enable " + id
			}
			return "re-enable none"
		case 2:
			_, _ = env.lo.Clear(ctx, resilience.LockFilter{ConnectionID: id, Model: models[r.IntN(len(models))]})
			return "clear locks " + id
		case 3:
			if err := env.lo.Load(ctx); err != nil {
				t.Fatal(err)
			}
			return "lockouts load"
		}
		_, _ = env.lo.Sweep(ctx)
		return "sweep"
	case 11:
		env.lockOn = !env.lockOn
		return fmt.Sprintf("lockout enabled %v", env.lockOn)
	case 12, 13:
		name := []string{quota.FiveH, quota.Daily, quota.Weekly, quota.Minute}[r.IntN(4)]
		used := []float64{0.1, 0.3, 0.55, 0.8, 0.97, 1}[r.IntN(6)]
		var reset time.Time
		if r.IntN(4) > 0 {
			reset = now.Add(dur(2*time.Hour) - 10*time.Minute)
		}
		env.q.ObserveWindows(id, []quota.Window{{Name: name, Used: used, ResetAt: reset}}, now.Add(-dur(30*time.Minute)))
		return fmt.Sprintf("quota %s %s %v", id, name, used)
	case 14:
		if r.IntN(2) == 0 {
			_ = env.q.Forget(ctx, id)
			return "quota forget " + id
		}
		env.maxStale = []time.Duration{10 * time.Minute, time.Hour, 24 * time.Hour}[r.IntN(3)]
		return fmt.Sprintf("max stale %v", env.maxStale)
	case 15, 16, 25:
		k := env.keys[1+r.IntN(2)]
		owner := env.owners[r.IntN(len(env.owners))]
		ttl := time.Second + dur(time.Minute)
		if r.IntN(2) == 0 {
			ttl = time.Second + dur(4*time.Second) // ends within a few advances
		}
		if l, err := env.ls.Acquire(ctx, k, owner, "fake", []string{id}, ttl); err == nil && r.IntN(3) == 0 {
			_, _ = env.ls.Release(ctx, k, owner, l.Generation, "")
			return "lease and release " + id
		}
		return fmt.Sprintf("lease %s %s %v", id, k.ID, ttl)
	case 17:
		_, _ = env.ls.Invalidate(ctx, id, leases.ReasonAdminEnded)
		return "lease invalidate " + id
	case 26:
		l, k, owner, ok := env.activeLease(r)
		if !ok {
			return "renew none"
		}
		ttl := time.Second + dur(time.Minute)
		_, _ = env.ls.Renew(ctx, k, owner, l.Generation, ttl)
		return fmt.Sprintf("lease renew %s %v", l.ConnectionID, ttl)
	case 27:
		l, k, owner, ok := env.activeLease(r)
		if !ok {
			return "release none"
		}
		_, _ = env.ls.Release(ctx, k, owner, l.Generation, "")
		return "lease release " + l.ConnectionID
	case 28:
		l, k, owner, ok := env.activeLease(r)
		if !ok {
			return "transition none"
		}
		_, _ = env.ls.Transition(ctx, k, owner, l.Generation, "fake", []string{id}, leases.ReasonHealthOrCooldown)
		return "lease transition " + l.ConnectionID + " → " + id
	case 29:
		k := env.keys[1+r.IntN(2)]
		_, _ = env.ls.InvalidateKey(ctx, k.ID, leases.ReasonManagedKeyRevoked)
		return "lease invalidate key " + k.ID
	case 30:
		if r.IntN(2) == 0 {
			_, _ = env.ls.Expire(ctx)
			return "lease sweep"
		}
		if err := env.ls.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return "leases load"
	case 18, 19:
		i := r.IntN(len(env.src.conns) - 1)
		c := &env.src.conns[i]
		switch r.IntN(3) {
		case 0:
			c.Enabled = !c.Enabled
		case 1:
			c.QuotaReservePercent = []int{0, 10, 50}[r.IntN(3)]
		default:
			c.Priority = r.IntN(5)
		}
		if err := env.reg.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		return "reload " + c.ID
	case 20, 21:
		rt := env.reg.Runtime(id)
		if r.IntN(3) == 0 {
			rt.lastUsedMs.Store(0)
		} else {
			rt.lastUsedMs.Store(now.Add(-dur(time.Hour)).UnixMilli())
		}
		rt.inFlight.Store(int64(r.IntN(3)))
		rt.successes.Store(int64(r.IntN(4)))
		rt.failures.Store(int64(r.IntN(4)))
		return "runtime " + id
	default:
		k := env.keys[r.IntN(len(env.keys))]
		_ = env.pins.Pin(ctx, affinity.PinID(k.ID, "fake", "header:s1"), k.ID, "fake", id)
		return "pin " + id
	}
}

// pickCase is one request's view of a pick.
type pickCase struct {
	t      target
	req    Request
	st     func() *attemptState
	set    Settings
	record bool
}

func (env *pickEnv) randomCase(r *rand.Rand) pickCase {
	ids := env.ids()
	anyID := func() string {
		if r.IntN(8) == 0 {
			return "other-1"
		}
		return ids[r.IntN(len(ids))]
	}
	s := env.reg.Snapshot()
	// Mostly provider fake; sometimes other, whose single connection a
	// lease or blocker leaves without any (the exclusion record).
	p, _ := s.Catalogue.Get("fake")
	if r.IntN(5) == 0 {
		p, _ = s.Catalogue.Get("other")
	}
	c := pickCase{t: target{provider: p, model: "m1"}, record: r.IntN(4) > 0, set: DefaultSettings()}
	strategies := []string{accounts.FillFirst, accounts.RoundRobin, accounts.P2C, accounts.Random, accounts.LeastUsed, accounts.StrictRandom}
	c.set.FallbackStrategy = strategies[r.IntN(len(strategies))]
	c.set.StickyLimit = 1 + r.IntN(3)
	if r.IntN(5) == 0 {
		c.set.ProviderStrategy = map[string]ProviderStrategy{"fake": {FallbackStrategy: strategies[r.IntN(len(strategies))]}}
	}
	if r.IntN(8) == 0 {
		c.t.connID = anyID()
	}
	if r.IntN(6) == 0 {
		c.t.prefConn = anyID()
	}
	c.req = Request{ID: "req", Key: env.reqKeys[r.IntN(len(env.reqKeys))], Inbound: InboundChat}
	if r.IntN(3) == 0 {
		c.req.SessionKey = "header:s1"
	}
	if r.IntN(10) == 0 {
		c.req.LeaseConnID = anyID()
	}
	var excluded []string
	if r.IntN(3) == 0 {
		for range 1 + r.IntN(3) {
			excluded = append(excluded, anyID())
		}
	}
	attempts, failed := r.IntN(2), r.IntN(4) == 0
	c.st = func() *attemptState {
		st := &attemptState{excluded: map[string]bool{}, failedProv: map[string]bool{}, skipModel: map[string]bool{},
			timers: map[string]bool{}, log: newLogRecord(&c.req), onlyLocal: true, attempts: attempts}
		for _, id := range excluded {
			st.excluded[id] = true
		}
		st.failedProv["fake"] = failed
		return st
	}
	return c
}

// pickOutcome is everything a pick leaves behind.
type pickOutcome struct {
	Conn        string
	Diag        []Exclusion
	WaitMin     time.Duration
	TimerWait   time.Duration
	NoTimer     bool
	Timers      map[string]bool
	AffinityHit bool
	Excluded    []string
}

func (env *pickEnv) run(c pickCase, cached bool) pickOutcome {
	st := c.st()
	st.g = env.g
	env.obs.excluded = nil
	var conn *services.Connection
	s := env.reg.Snapshot()
	if cached {
		env.g.sel = env.selA
		conn = env.g.pick(s, c.t, &c.req, st, &c.set, c.record)
	} else {
		env.g.sel = env.selB
		conn = env.g.pickUncached(s, c.t, &c.req, st, &c.set, c.record)
	}
	out := pickOutcome{Diag: st.diag, WaitMin: st.waitMin, TimerWait: st.timerWait, NoTimer: st.noTimer, Timers: st.timers,
		AffinityHit: st.log.AffinityHit, Excluded: env.obs.excluded}
	if conn != nil {
		out.Conn = conn.ID
	}
	return out
}

// The cached pick decides exactly as the uncached gate loop after any
// sequence of state changes: same connection (the two selectors see the
// same calls, so round-robin, random, p2c and strict-random compare too),
// same exclusion record, retry-after, waitable minimum and counted
// exclusions.
func TestPickMatchesUncached(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 99))
			env := newPickEnv(t, 12, seed)
			var log []string
			reused, checks, leased, own := 0, 0, 0, 0
			for step := range 1500 {
				log = append(log, env.mutate(t, r))
				if len(log) > 12 {
					log = log[1:]
				}
				for range 4 {
					c := env.randomCase(r)
					sl := env.g.picks.slot(c.t.provider.ID, "m1")
					before := sl.entry.Load()
					got := env.run(c, true)
					after := sl.entry.Load()
					if before != nil && after == before {
						reused++
					}
					if len(after.leased) > 0 {
						leased++
						for _, l := range after.leased {
							if l.key == c.req.Key.ID && c.req.Key.AllowedConnections == nil {
								own++
								break
							}
						}
					}
					want := env.run(c, false)
					checks++
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d: cached pick differs\n got  %+v\n want %+v\ncase %+v key %s session %q lease %q connID %q pref %q strategy %s\nlast changes:\n  %s",
							step, got, want, c.t, c.req.Key.ID, c.req.SessionKey, c.req.LeaseConnID, c.t.connID, c.t.prefConn,
							c.set.FallbackStrategy, strings.Join(log, "\n  "))
					}
				}
			}
			t.Logf("%d checks, %d on a reused entry, %d with live leases on the provider, %d by an unrestricted key holding one",
				checks, reused, leased, own)
			if reused < checks/3 {
				t.Fatalf("only %d of %d checks reused an entry: the test does not exercise the cache", reused, checks)
			}
			if leased < checks/8 || own < checks/100 {
				t.Fatalf("only %d (%d by their holder) of %d checks saw a lease: the test does not exercise the lease filter",
					leased, own, checks)
			}
		})
	}
}

// A pick over 1,000 connections allocates nothing once its entry and the
// request's buffers exist, in every bench case: the spec pool with one
// connection (conn-0000) leased by another key, which pick never returns;
// and, on the slow path, a request of the lease's own key (its allowances
// lifted), whose fill-first pick is its leased connection.
func TestSelectConnectionZeroAlloc(t *testing.T) {
	for _, strategy := range []string{accounts.FillFirst, accounts.RoundRobin, accounts.LeastUsed, accounts.Random} {
		for _, pc := range []string{"pin-hit", "pin-miss", "pin-ineligible", "no-session", "own-lease"} {
			e := newBenchEnvAt(t, 1000, strategy, "spec", "http://127.0.0.1:9/v1")
			req := e.request(t, pc)
			if pc == "own-lease" {
				req.Key.ID = "key-lease"
			}
			route, gerr := Resolve(e.snap, e.key, "bench")
			if gerr != nil {
				t.Fatal(gerr)
			}
			tg := e.g.expand(e.snap, route, req)[0]
			st := e.newState(req)
			c := e.g.pick(e.snap, tg, req, st, e.set, true)
			if en := e.g.picks.slot("fake", "m1").entry.Load(); len(en.leased) != 1 || en.conns[en.leased[0].conn].ID != "conn-0000" {
				t.Fatalf("%s/%s: entry leases %+v, want conn-0000's", strategy, pc, en.leased)
			}
			if c == nil || c.ID == "conn-0000" && pc != "own-lease" ||
				pc == "own-lease" && strategy == accounts.FillFirst && c.ID != "conn-0000" {
				t.Fatalf("%s/%s: picked %v", strategy, pc, c)
			}
			n := testing.AllocsPerRun(50, func() {
				if c := e.g.pick(e.snap, tg, req, st, e.set, true); c == nil || c.ID == "conn-0000" && pc != "own-lease" {
					t.Fatalf("%s/%s: picked %v", strategy, pc, c)
				}
			})
			if n != 0 {
				t.Errorf("%s/%s: %v allocs per pick", strategy, pc, n)
			}
		}
	}
}
