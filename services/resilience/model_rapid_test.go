package resilience_test

// Model-based test (60-quality R2, reduced alphabet) of the provider circuit
// breaker, connection cooldowns and model lockouts (20-resilience §2, §4,
// §7). A reference model written from the spec tables, on an integer
// millisecond clock, runs next to the real Breakers, Cooldowns and Lockouts
// (memory stores, wired through the real Classifier and Engine, fake clock).
// After every action every observable gate is compared: breaker state,
// counters and Retry-After, every connection's cooldown deadline, backoff
// level, auth-failure count and terminal state, the blocker of every
// (connection, model) pair, and every lockout row still kept as escalation
// memory.
//
// TestRapidResilienceModelTwoMirrors runs the same model against two
// mirrors (two engines, as two replicas hold them) sharing one in-memory
// authority and a change feed between them: each action runs on a drawn
// mirror, bursts are spread over both while the feed holds the changes
// back (each mirror decides on a state the other has already left, so the
// episode rule must come from the compare-and-set), and notifications may
// be lost and recovered by a resync. The one model says what the fleet
// must do: N concurrent failures of one connection on two replicas are one
// episode, probes are bounded fleet-wide.
//
// Checks per run: 1,000 (per-commit), 100,000 with SWITCHYARD_LONG=1; an
// explicit -rapid.checks wins. Replay a failure with the -rapid.seed or
// -rapid.failfile rapid prints.

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/resilience"
)

// ---- the reference model ----

const (
	mdlMinuteMs       int64 = 60_000
	mdlBackoffRestart int64 = 600_000    // §4.1: a failure > 10 min after last_error_at restarts at level 0
	mdlDayMs          int64 = 86_400_000 // §4.3 auth ladder window
	mdlAuthBaseMs     int64 = 120_000    // §4.3: counts 1–3 cool 2, 4, 8 min
	mdlExpiredMax           = 3          // EXPIRED_RETRY_MAX
	mdlHalfOpenBusyMs int64 = 1_000      // §2.1 retryAfterMs when HALF_OPEN without a free slot
)

// mdlKind is one upstream outcome of the reduced alphabet.
type mdlKind int

const (
	kind429   mdlKind = iota // rate_limit, connection (family lock under the override)
	kind503                  // server_error, connection (exact lock under the override), breaker
	kind500                  // server_error, connection (500 is not a lockout status), breaker
	kind404                  // not_found, model (base)
	kind401                  // auth_error, connection, auth ladder
	kindReset                // transport reset before headers: transient, connection, breaker
	kindOK                   // success
)

var mdlKindNames = [...]string{"429", "503", "500", "404", "401", "reset", "ok"}

func (k mdlKind) String() string { return mdlKindNames[k] }

// mdlSettings is one run's configuration, drawn at the start.
type mdlSettings struct {
	// breaker (apikey profile)
	failThr, degThr int
	degExplicit     bool
	resetMs         int64
	halfOpen        int
	escalate        int
	maxMult         int
	// connection cooldown (apikey profile)
	cdBase, cdMax int64
	cdSteps       int
	// model lockout
	lockOn    bool
	lockBase  int64
	lockMax   int64
	lockSteps int
	lockExp   bool
}

type mdlBreaker struct {
	state    resilience.BreakerState
	failures int
	cycles   int
	openedAt int64
	gen      uint64
	inFlight int
	// probeUntil is when the latest probe grant lapses (0 = none): a grant
	// lives max(resetTimeout, 30 s), after which the next caller is
	// granted a probe although the old one has not ended (scale-out §3.4
	// row 2: a replica that died holding a probe must not block the
	// breaker for good).
	probeUntil int64
}

// mdlProbeLeaseMin is the shortest life of a probe grant.
const mdlProbeLeaseMin int64 = 30_000

type mdlConn struct {
	coolUntil  int64             // 0 = no deadline
	coolReason resilience.Reason // the reason that wrote the deadline (§9 waitability)
	level      int
	terminal   string
	authCount  int
	lastAuthAt int64 // valid when authCount > 0
	lastErrAt  int64
	hasErr     bool
}

type mdlLockKey struct {
	conn  string
	shape resilience.LockShape
	key   string
}

type mdlLock struct {
	reason     resilience.Reason
	count      int
	until      int64
	lastFailAt int64
	lastCoolMs int64
}

// mdlAdmission is a dispatch the breaker admitted, as the model saw it.
type mdlAdmission struct {
	provider string
	probe    bool
	gen      uint64
}

type refModel struct {
	set      mdlSettings
	now      int64
	breakers map[string]*mdlBreaker
	conns    map[string]*mdlConn
	locks    map[mdlLockKey]*mdlLock
}

func (s mdlSettings) deg() int {
	if s.degExplicit {
		return s.degThr
	}
	d := (6*s.failThr + 9) / 10 // ceil(0.6 × failureThreshold)
	d = min(d, s.failThr-1)
	return max(d, 1)
}

func (s mdlSettings) effResetMs(cycles int) int64 {
	if cycles <= s.escalate {
		return s.resetMs
	}
	exp := cycles - s.escalate
	ceiling := s.resetMs * int64(s.maxMult)
	if exp > 40 {
		return ceiling
	}
	return min(s.resetMs<<exp, ceiling)
}

func (m *refModel) breaker(p string) *mdlBreaker {
	b := m.breakers[p]
	if b == nil {
		b = &mdlBreaker{state: resilience.BreakerClosed}
		m.breakers[p] = b
	}
	return b
}

// refresh is the lazy OPEN → HALF_OPEN transition of any read (§2.1).
func (m *refModel) refresh(b *mdlBreaker) {
	if b.state == resilience.BreakerOpen && m.now-b.openedAt >= m.set.effResetMs(b.cycles) {
		b.state, b.inFlight, b.probeUntil = resilience.BreakerHalfOpen, 0, 0
		b.gen++
	}
}

// allow is Allow(): ok, and the admission to carry.
func (m *refModel) allow(p string) (bool, mdlAdmission) {
	b := m.breaker(p)
	m.refresh(b)
	switch b.state {
	case resilience.BreakerOpen:
		return false, mdlAdmission{}
	case resilience.BreakerHalfOpen:
		lapsed := b.probeUntil != 0 && m.now >= b.probeUntil
		if b.inFlight >= m.set.halfOpen && !lapsed {
			return false, mdlAdmission{}
		}
		if lapsed {
			b.inFlight = 0
		}
		b.inFlight++
		b.probeUntil = m.now + max(m.set.resetMs, mdlProbeLeaseMin)
		return true, mdlAdmission{provider: p, probe: true, gen: b.gen}
	}
	return true, mdlAdmission{provider: p, gen: b.gen}
}

func (m *refModel) retryAfterMs(b *mdlBreaker) int64 {
	switch b.state {
	case resilience.BreakerOpen:
		return b.openedAt + m.set.effResetMs(b.cycles) - m.now
	case resilience.BreakerHalfOpen:
		if b.inFlight >= m.set.halfOpen && (b.probeUntil == 0 || m.now < b.probeUntil) {
			return mdlHalfOpenBusyMs
		}
	}
	return 0
}

func mdlLower(model string) string { return strings.ToLower(strings.TrimSpace(model)) }

func mdlBase(model string) string {
	m := mdlLower(model)
	if i := strings.LastIndexByte(m, '['); i > 0 && strings.HasSuffix(m, "]") {
		return strings.TrimSpace(m[:i])
	}
	return m
}

// lockKeys are the family, base and exact keys of model on conn (§7; no
// quota-family table applies to the test provider, so family = the model).
func lockKeys(conn, model string) [3]mdlLockKey {
	return [3]mdlLockKey{
		{conn, resilience.ShapeFamily, mdlLower(model)},
		{conn, resilience.ShapeBase, mdlBase(model)},
		{conn, resilience.ShapeExact, mdlLower(model)},
	}
}

func (m *refModel) lockDead(l *mdlLock) bool {
	return m.now >= l.until && m.now-l.lastFailAt > l.lastCoolMs+m.set.resetMs
}

// locked is the model's "any of the three keys active" (only enforced with
// the master switch on): the latest end among the active keys, and the
// reason of the lock that ends then.
func (m *refModel) locked(conn, model string) (bool, int64, resilience.Reason) {
	if !m.set.lockOn {
		return false, 0, ""
	}
	var (
		until  int64
		reason resilience.Reason
	)
	ok := false
	for _, k := range lockKeys(conn, model) {
		if l := m.locks[k]; l != nil && m.now < l.until && l.until > until {
			ok, until, reason = true, l.until, l.reason
		}
	}
	return ok, until, reason
}

// mdlWaitable: §9, cooldowns and lockouts written by rate_limit,
// transient, server_error or model_capacity may be waited out.
func mdlWaitable(r resilience.Reason) bool {
	switch r {
	case resilience.ReasonRateLimit, resilience.ReasonTransient, resilience.ReasonServerError, resilience.ReasonModelCapacity:
		return true
	}
	return false
}

// classify is the §1.3 row and §1.6 step 3 of each kind.
func (m *refModel) classify(k mdlKind) (status int, reason resilience.Reason, scope resilience.Scope, shape resilience.LockShape, counted bool) {
	switch k {
	case kind429:
		status, reason, scope = 429, resilience.ReasonRateLimit, resilience.ScopeConnection
	case kind503:
		status, reason, scope, counted = 503, resilience.ReasonServerError, resilience.ScopeConnection, true
	case kind500:
		status, reason, scope, counted = 500, resilience.ReasonServerError, resilience.ScopeConnection, true
	case kind404:
		status, reason, scope = 404, resilience.ReasonNotFound, resilience.ScopeModel
	case kind401:
		status, reason, scope = 401, resilience.ReasonAuthError, resilience.ScopeConnection
	case kindReset:
		status, reason, scope, counted = 0, resilience.ReasonTransient, resilience.ScopeConnection, true
	}
	// §7 Shape: 429, 403, 402 → family; 404 → base; anything else → exact.
	switch status {
	case 429:
		shape = resilience.ShapeFamily
	case 404:
		shape = resilience.ShapeBase
	default:
		shape = resilience.ShapeExact
	}
	lockStatus := status == 403 || status == 404 || status == 429 || status == 502 || status == 503 || status == 504
	// §1.6 step 3: the lockout override.
	if m.set.lockOn && lockStatus && scope == resilience.ScopeConnection &&
		(reason == resilience.ReasonRateLimit || reason == resilience.ReasonServerError) {
		scope = resilience.ScopeModel
	}
	if scope == resilience.ScopeModel && !(m.set.lockOn && lockStatus) {
		scope = resilience.ScopeNone // BD 8: the request only moves on
	}
	return
}

func (m *refModel) backoff(level int) int64 {
	d := m.set.cdBase
	for range min(level, m.set.cdSteps) {
		if d >= m.set.cdMax {
			break
		}
		d *= 2
	}
	return min(d, m.set.cdMax)
}

// failure applies one failed dispatch (§1.6): the penalty of its scope,
// then the breaker, which counts it only when it opened a new penalty
// episode (§2.1 episode rule) or when it is the HALF_OPEN probe.
func (m *refModel) failure(adm mdlAdmission, conn, model string, k mdlKind, hintMs int64) {
	_, reason, scope, shape, counted := m.classify(k)
	newEpisode := true
	switch scope {
	case resilience.ScopeConnection:
		newEpisode = m.connFailure(conn, reason, hintMs)
	case resilience.ScopeModel:
		newEpisode = m.lockFailure(conn, model, reason, shape, hintMs)
	}
	b := m.breaker(adm.provider)
	if !counted {
		if adm.probe && b.state == resilience.BreakerHalfOpen && b.gen == adm.gen && b.inFlight > 0 {
			b.inFlight-- // the probe ends without a verdict
		}
		return
	}
	if adm.gen != b.gen {
		return // an older generation (§2.1)
	}
	switch {
	case adm.probe && b.state == resilience.BreakerHalfOpen:
		b.cycles++
		b.openedAt = m.now
		b.state, b.inFlight = resilience.BreakerOpen, 0
		b.gen++
	case !adm.probe && newEpisode && (b.state == resilience.BreakerClosed || b.state == resilience.BreakerDegraded):
		b.failures++
		switch {
		case b.failures >= m.set.failThr:
			b.state, b.openedAt = resilience.BreakerOpen, m.now
			b.gen++
		case b.state == resilience.BreakerClosed && b.failures >= m.set.deg():
			b.state = resilience.BreakerDegraded
		}
	}
}

// connFailure is §4 for a connection-scoped failure; it reports whether the
// failure opened a new episode (the connection was not cooling).
func (m *refModel) connFailure(id string, reason resilience.Reason, hintMs int64) bool {
	c := m.conns[id]
	cooling := c.terminal == "" && c.coolUntil > m.now
	if c.terminal != "" {
		return true // BD 4: never rewritten; not cooling, so a new breaker episode
	}
	prevErr, hadErr := c.lastErrAt, c.hasErr
	c.lastErrAt, c.hasErr = m.now, true
	if cooling {
		// §4.2: an episode; only a later-ending hint extends the deadline.
		if hintMs > 0 && m.now+hintMs > c.coolUntil {
			c.coolUntil, c.coolReason = m.now+hintMs, reason
		}
		return false
	}
	level := c.level
	if hadErr && m.now-prevErr > mdlBackoffRestart {
		level = 0
	}
	var cd int64
	switch reason {
	case resilience.ReasonAuthError:
		// §4.3: restart at 1 when the previous auth failure is > 24 h old.
		count := c.authCount + 1
		if c.authCount == 0 || m.now-c.lastAuthAt > mdlDayMs {
			count = 1
		}
		c.authCount, c.lastAuthAt = count, m.now
		if count > mdlExpiredMax {
			c.terminal, c.coolUntil, c.level = resilience.TerminalExpired, 0, 0
			return true
		}
		cd = mdlAuthBaseMs << (count - 1)
	default:
		cd = m.backoff(level)
		if hintMs == 0 {
			level = min(level+1, m.set.cdSteps)
		}
	}
	if hintMs > 0 {
		cd = hintMs // BD 6
	}
	c.coolUntil, c.level, c.coolReason = m.now+cd, level, reason
	return true
}

// lockFailure is §7 for a model-scoped failure (the switch is on and the
// status is a lockout status).
func (m *refModel) lockFailure(conn, model string, reason resilience.Reason, shape resilience.LockShape, hintMs int64) bool {
	var key mdlLockKey
	for _, k := range lockKeys(conn, model) {
		if k.shape == shape {
			key = k
		}
	}
	l := m.locks[key]
	if l != nil && m.now < l.until {
		l.lastFailAt = m.now
		if hintMs > 0 {
			if h := min(hintMs, m.set.lockMax); m.now+h > l.until {
				l.until, l.lastCoolMs, l.reason = m.now+h, h, reason
			}
		}
		return false
	}
	n := 1
	if l != nil && m.now-l.lastFailAt <= l.lastCoolMs+m.set.resetMs {
		n = l.count + 1
	}
	var d int64
	switch {
	case hintMs > 0:
		d = min(hintMs, m.set.lockMax)
	case !m.set.lockExp:
		d = m.set.lockBase
	default:
		d = m.set.lockBase
		for range min(n-1, m.set.lockSteps) {
			if d >= m.set.lockMax {
				break
			}
			d *= 2
		}
		d = min(d, m.set.lockMax)
	}
	m.locks[key] = &mdlLock{reason: reason, count: n, until: m.now + d, lastFailAt: m.now, lastCoolMs: d}
	return true
}

// success is a 2xx on a dispatch (§2.1, §4.4, §7 recovery b).
func (m *refModel) success(adm mdlAdmission, conn, model string) {
	b := m.breaker(adm.provider)
	if adm.gen == b.gen {
		switch {
		case adm.probe && b.state == resilience.BreakerHalfOpen:
			b.state, b.failures, b.cycles, b.inFlight, b.openedAt = resilience.BreakerClosed, 0, 0, 0, 0
			b.gen++
		case b.state == resilience.BreakerClosed || b.state == resilience.BreakerDegraded:
			b.failures = max(0, b.failures-1)
			if b.state == resilience.BreakerDegraded && b.failures < m.set.deg() {
				b.state = resilience.BreakerClosed
			}
		}
	}
	c := m.conns[conn]
	c.coolUntil, c.level, c.authCount = 0, 0, 0
	if m.set.lockOn {
		for _, k := range lockKeys(conn, model) {
			if l := m.locks[k]; l != nil {
				l.count /= 2
				if l.count == 0 || m.lockDead(l) {
					delete(m.locks, k)
				}
			}
		}
	}
}

// ---- the system under test ----

// mdlBus is the change feed between mirrors: each mirror's publications
// go to its own subscribers (a no-op: it holds them already) and to the
// others', at once or, while held, queued until released.
type mdlBus struct {
	mu     sync.Mutex
	locals []*services.LocalFeed
	hold   bool
	queue  []mdlQueued
}

type mdlQueued struct {
	to int
	c  services.Change
}

func (b *mdlBus) feed(i int) services.ChangeFeed { return mdlBusFeed{b, i} }

// release delivers what was held, in order; drop discards it (lost
// notifications).
func (b *mdlBus) release(drop bool) {
	b.mu.Lock()
	q := b.queue
	b.queue, b.hold = nil, false
	b.mu.Unlock()
	if drop {
		return
	}
	for _, m := range q {
		_ = b.locals[m.to].Publish(context.Background(), m.c)
	}
}

type mdlBusFeed struct {
	bus *mdlBus
	i   int
}

func (f mdlBusFeed) Publish(ctx context.Context, c services.Change) error {
	err := f.bus.locals[f.i].Publish(ctx, c)
	for j, l := range f.bus.locals {
		if j == f.i {
			continue
		}
		f.bus.mu.Lock()
		held := f.bus.hold
		if held {
			f.bus.queue = append(f.bus.queue, mdlQueued{j, c})
		}
		f.bus.mu.Unlock()
		if !held {
			_ = l.Publish(context.Background(), c) // another process: not this one's context
		}
	}
	return err
}

func (f mdlBusFeed) Subscribe(kind services.ChangeKind, h services.ChangeHandler) {
	f.bus.locals[f.i].Subscribe(kind, h)
}

func (f mdlBusFeed) Resync(ctx context.Context, kind services.ChangeKind) error {
	return f.bus.locals[f.i].Resync(ctx, kind)
}

type mdlSystem struct {
	clock    *testkit.FakeClock
	t0       time.Time
	doc      resilience.Document
	brStore  *resilience.MemoryBreakerStore
	cdStore  *resilience.MemoryConnectionStateStore
	loStore  *resilience.MemoryLockoutStore
	engine   *resilience.Engine   // mirror 0
	engines  []*resilience.Engine // every mirror
	bus      *mdlBus
	mirrors  int
	provider map[string]string // connection → provider
}

func (s mdlSettings) breakerConfig() resilience.BreakerConfig {
	p := resilience.BreakerProfile{FailureThreshold: s.failThr, ResetTimeoutMs: s.resetMs, HalfOpenRequests: s.halfOpen,
		EscalateAfterCycles: s.escalate, MaxBackoffMultiplier: s.maxMult}
	if s.degExplicit {
		d := s.degThr
		p.DegradationThreshold = &d
	}
	return resilience.BreakerConfig{services.AuthAPIKey: p}
}

func (s mdlSettings) lockoutConfig() resilience.LockoutConfig {
	return resilience.LockoutConfig{Enabled: s.lockOn, ErrorCodes: []int{403, 404, 429, 502, 503, 504},
		BaseCooldownMs: s.lockBase, MaxCooldownMs: s.lockMax, MaxBackoffSteps: s.lockSteps, UseExponentialBackoff: s.lockExp}
}

// build (re)creates the state machines of every mirror on the shared
// stores, as a restart of the whole fleet does, each wired to the feed.
func (sys *mdlSystem) build(set mdlSettings) error {
	n := max(sys.mirrors, 1)
	sys.bus = &mdlBus{}
	sys.engines = nil
	for range n {
		sys.bus.locals = append(sys.bus.locals, services.NewLocalFeed(nil))
	}
	for i := range n {
		eng, err := sys.buildOne(set)
		if err != nil {
			return err
		}
		eng.UseFeed(sys.bus.feed(i))
		sys.engines = append(sys.engines, eng)
	}
	sys.engine = sys.engines[0]
	return nil
}

func (sys *mdlSystem) buildOne(set mdlSettings) (*resilience.Engine, error) {
	ctx := context.Background()
	clock := sys.clock
	br := resilience.NewBreakers(clock, set.breakerConfig, sys.brStore, nil)
	cd := resilience.NewCooldowns(clock, func() resilience.CooldownConfig {
		return resilience.CooldownConfig{Profiles: map[resilience.Profile]resilience.CooldownProfile{
			services.AuthAPIKey: {BaseCooldownMs: set.cdBase, MaxBackoffSteps: set.cdSteps, MaxCooldownMs: set.cdMax}}}
	}, sys.cdStore, nil)
	lo := resilience.NewLockouts(clock, set.lockoutConfig, func(string) time.Duration {
		return time.Duration(set.resetMs) * time.Millisecond
	}, sys.loStore, nil)
	if err := br.Restore(ctx); err != nil {
		return nil, err
	}
	if err := cd.Load(ctx); err != nil {
		return nil, err
	}
	if err := lo.Load(ctx); err != nil {
		return nil, err
	}
	cls := resilience.NewClassifier(nil, nil, clock.Now, nil)
	gate := resilience.NewWindowGate(clock, func() resilience.WindowGateConfig { return resilience.WindowGateConfig{} })
	doc := sys.doc
	return resilience.NewEngine(clock, cls, br, gate, cd, lo, func() *resilience.Document { return &doc },
		func() resilience.EgressLockConfig { return resilience.EgressLockConfig{} }), nil
}

// flushAll writes what every mirror deferred (batched leaks, diagnostics),
// so the mirrors agree with the store and each other.
func (sys *mdlSystem) flushAll() error {
	for _, e := range sys.engines {
		if err := e.Flush(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// failureOf is the upstream failure of kind k as the gateway reports it.
func (sys *mdlSystem) failureOf(conn, model string, k mdlKind, hintMs int64) resilience.Failure {
	f := resilience.Failure{Provider: sys.provider[conn], ProviderClass: services.AuthAPIKey, ConnectionID: conn, Model: model,
		Phase: resilience.PhasePreCommit, At: sys.clock.Now(), Header: http.Header{}}
	switch k {
	case kind429:
		f.Status, f.Body = 429, []byte(`{"error":{"message":"slow down","type":"requests"}}`)
	case kind503:
		f.Status, f.Body = 503, []byte(`{"error":{"message":"service unavailable"}}`)
	case kind500:
		f.Status, f.Body = 500, []byte(`{"error":{"message":"internal server error"}}`)
	case kind404:
		f.Status, f.Body = 404, []byte(`{"error":{"message":"no such thing"}}`)
	case kind401:
		f.Status, f.Body = 401, []byte(`{"error":{"message":"invalid credentials"}}`)
	case kindReset:
		f.Transport = resilience.TransportReset
	}
	if hintMs > 0 {
		f.Header.Set("Retry-After", strconv.FormatInt(hintMs/1000, 10))
	}
	return f
}

// ---- the state machine ----

type mdlPending struct {
	conn, model string
	eng         int // the mirror that admitted it and hears its outcome
	ref         mdlAdmission
	sut         resilience.Admission
}

type mdlMachine struct {
	ref      *refModel
	sys      *mdlSystem
	conns    []string
	models   []string
	provs    []string
	pending  []mdlPending
	log      []string
	rejected int
}

func (sm *mdlMachine) logf(format string, args ...any) {
	sm.log = append(sm.log, fmt.Sprintf("t=%dms ", sm.ref.now)+fmt.Sprintf(format, args...))
}

func newMdlMachine(t *rapid.T, mirrors int) *mdlMachine {
	var set mdlSettings
	set.failThr = rapid.IntRange(1, 5).Draw(t, "failureThreshold")
	if set.failThr >= 2 && rapid.Bool().Draw(t, "explicitDegradation") {
		set.degExplicit = true
		set.degThr = rapid.IntRange(1, set.failThr-1).Draw(t, "degradationThreshold")
	}
	set.resetMs = rapid.Int64Range(1, 10).Draw(t, "resetTimeoutS") * 1000
	set.halfOpen = rapid.IntRange(1, 2).Draw(t, "halfOpenRequests")
	set.escalate = rapid.IntRange(0, 3).Draw(t, "escalateAfterCycles")
	set.maxMult = rapid.IntRange(1, 8).Draw(t, "maxBackoffMultiplier")
	set.cdBase = rapid.Int64Range(1, 10).Draw(t, "baseCooldownS") * 1000
	set.cdSteps = rapid.IntRange(0, 5).Draw(t, "maxBackoffSteps")
	set.cdMax = set.cdBase * rapid.Int64Range(1, 40).Draw(t, "maxCooldownFactor")
	set.lockOn = rapid.Bool().Draw(t, "modelLockout")
	set.lockBase = rapid.Int64Range(1, 10).Draw(t, "lockBaseS") * 1000
	set.lockMax = set.lockBase * rapid.Int64Range(1, 20).Draw(t, "lockMaxFactor")
	set.lockSteps = rapid.IntRange(0, 10).Draw(t, "lockSteps")
	set.lockExp = rapid.Bool().Draw(t, "lockExponential")

	nProv := rapid.IntRange(1, 2).Draw(t, "providers")
	nConn := rapid.IntRange(1, 3).Draw(t, "connections")
	models := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"m-a", "m-b", "M-B[1m]"}), 1, 3, rapid.ID[string]).Draw(t, "models")

	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	doc := resilience.DefaultDocument()
	doc.ModelLockout.Enabled = set.lockOn
	doc.ModelLockout.ErrorCodes = set.lockoutConfig().ErrorCodes
	sm := &mdlMachine{
		ref: &refModel{set: set, breakers: map[string]*mdlBreaker{}, conns: map[string]*mdlConn{}, locks: map[mdlLockKey]*mdlLock{}},
		sys: &mdlSystem{clock: testkit.NewFakeClock(t0), t0: t0, doc: doc, brStore: resilience.NewMemoryBreakerStore(),
			cdStore: resilience.NewMemoryConnectionStateStore(), loStore: resilience.NewMemoryLockoutStore(), provider: map[string]string{},
			mirrors: mirrors},
		models: models,
	}
	for i := range nProv {
		sm.provs = append(sm.provs, fmt.Sprintf("prov%d", i))
	}
	for i := range nConn {
		id := fmt.Sprintf("c%d", i)
		sm.conns = append(sm.conns, id)
		sm.sys.provider[id] = sm.provs[i%nProv]
		sm.ref.conns[id] = &mdlConn{}
	}
	if err := sm.sys.build(set); err != nil {
		t.Fatal(err)
	}
	sm.logf("settings %+v providers %v connections %v models %v", set, sm.provs, sm.sys.provider, models)
	return sm
}

func (sm *mdlMachine) drawKind(t *rapid.T) (mdlKind, int64) {
	k := rapid.SampledFrom([]mdlKind{kind429, kind503, kind500, kind404, kind401, kind401, kindReset, kindOK, kindOK}).Draw(t, "kind")
	var hint int64
	if (k == kind429 || k == kind503 || k == kind500) && rapid.Bool().Draw(t, "withHint") {
		hint = rapid.SampledFrom([]int64{1, 2, 5, 30, 90, 600, 3600}).Draw(t, "hintS") * 1000
	}
	return k, hint
}

// mirror draws the mirror an action runs on.
func (sm *mdlMachine) mirror(t *rapid.T) int {
	if len(sm.sys.engines) < 2 {
		return 0
	}
	return rapid.IntRange(0, len(sm.sys.engines)-1).Draw(t, "mirror")
}

// dispatch asks the model's breaker and a drawn mirror's for an admission
// at the same instant.
func (sm *mdlMachine) dispatch(t *rapid.T, conn string) (mdlPending, bool) {
	return sm.dispatchOn(t, conn, sm.mirror(t))
}

func (sm *mdlMachine) dispatchOn(t *rapid.T, conn string, eng int) (mdlPending, bool) {
	p := sm.sys.provider[conn]
	okRef, ref := sm.ref.allow(p)
	sut, blk := sm.sys.engines[eng].AllowProvider(p, services.AuthAPIKey, "")
	if okRef != (blk == nil) || (okRef && ref.probe != sut.Probe) {
		t.Fatalf("admission on %s via mirror %d: model ok=%v probe=%v, real blocker=%+v probe=%v\n%s", p, eng, okRef, ref.probe, blk, sut.Probe, sm.trace())
	}
	if !okRef {
		sm.rejected++
		return mdlPending{}, false
	}
	return mdlPending{conn: conn, eng: eng, ref: ref, sut: sut}, true
}

func (sm *mdlMachine) complete(pd mdlPending, k mdlKind, hintMs int64) {
	ctx := context.Background()
	sm.logf("complete %s/%s on mirror %d probe=%v kind=%s hint=%dms", pd.conn, pd.model, pd.eng, pd.ref.probe, k, hintMs)
	eng := sm.sys.engines[pd.eng]
	if k == kindOK {
		sm.ref.success(pd.ref, pd.conn, pd.model)
		eng.Success(ctx, pd.sut, pd.conn, pd.model)
		return
	}
	sm.ref.failure(pd.ref, pd.conn, pd.model, k, hintMs)
	conn := resilience.ConnRef{ID: pd.conn, Provider: sm.sys.provider[pd.conn], Profile: services.AuthAPIKey}
	eng.Failure(ctx, pd.sut, conn, sm.sys.failureOf(pd.conn, pd.model, k, hintMs), nil)
}

// Outcome: one dispatch that ends at once.
func (sm *mdlMachine) Outcome(t *rapid.T) {
	conn := rapid.SampledFrom(sm.conns).Draw(t, "conn")
	model := rapid.SampledFrom(sm.models).Draw(t, "model")
	k, hint := sm.drawKind(t)
	pd, ok := sm.dispatch(t, conn)
	if !ok {
		sm.logf("outcome %s/%s %s: breaker refused", conn, model, k)
		return
	}
	pd.model = model
	lost := len(sm.sys.engines) > 1 && rapid.Bool().Draw(t, "notificationsLost")
	if lost {
		sm.sys.bus.mu.Lock()
		sm.sys.bus.hold = true
		sm.sys.bus.mu.Unlock()
	}
	sm.complete(pd, k, hint)
	if lost {
		// The others' listeners lost what this outcome published; their
		// reconnect resyncs every kind.
		sm.sys.bus.release(true)
		sm.logf("notifications lost; every other mirror resyncs")
		for i, l := range sm.sys.bus.locals {
			if i == pd.eng {
				continue
			}
			for _, kind := range []services.ChangeKind{services.ChangeConnectionState, services.ChangeModelLockout, services.ChangeBreaker} {
				if err := l.Resync(context.Background(), kind); err != nil {
					t.Fatalf("resync %s on mirror %d: %v", kind, i, err)
				}
			}
		}
	}
}

// AfterCooldown waits exactly until one (connection, model) is eligible
// again (its cooldown and its lockouts ended) and dispatches to it, as a
// retrying client does: this walks the ladders (backoff levels, the auth
// ladder up to expired, lockout escalation).
func (sm *mdlMachine) AfterCooldown(t *rapid.T) {
	conn := rapid.SampledFrom(sm.conns).Draw(t, "conn")
	model := rapid.SampledFrom(sm.models).Draw(t, "model")
	end := sm.ref.conns[conn].coolUntil
	if locked, until, _ := sm.ref.locked(conn, model); locked {
		end = max(end, until)
	}
	if d := end - sm.ref.now; d > 0 {
		sm.ref.now += d
		sm.sys.clock.Advance(time.Duration(d) * time.Millisecond)
		sm.logf("advance %dms until %s/%s is eligible", d, conn, model)
	}
	k, hint := sm.drawKind(t)
	pd, ok := sm.dispatch(t, conn)
	if !ok {
		sm.logf("outcome %s/%s %s: breaker refused", conn, model, k)
		return
	}
	pd.model = model
	sm.complete(pd, k, hint)
}

// Start: a dispatch that stays in flight (a slow request), ended later by Finish.
func (sm *mdlMachine) Start(t *rapid.T) {
	if len(sm.pending) >= 4 {
		t.Skip("enough in flight")
	}
	conn := rapid.SampledFrom(sm.conns).Draw(t, "conn")
	pd, ok := sm.dispatch(t, conn)
	if !ok {
		sm.logf("start %s: breaker refused", conn)
		return
	}
	pd.model = rapid.SampledFrom(sm.models).Draw(t, "model")
	sm.logf("start %s/%s probe=%v gen=%d", pd.conn, pd.model, pd.ref.probe, pd.ref.gen)
	sm.pending = append(sm.pending, pd)
}

// Finish ends one in-flight dispatch, possibly of an older breaker generation.
func (sm *mdlMachine) Finish(t *rapid.T) {
	if len(sm.pending) == 0 {
		t.Skip("nothing in flight")
	}
	i := rapid.IntRange(0, len(sm.pending)-1).Draw(t, "which")
	pd := sm.pending[i]
	sm.pending = slices.Delete(sm.pending, i, i+1)
	k, hint := sm.drawKind(t)
	sm.complete(pd, k, hint)
}

// Burst: k dispatches admitted at one instant, then all failing the same way
// (16 concurrent 502s are one episode, B4/K2).
func (sm *mdlMachine) Burst(t *rapid.T) {
	conn := rapid.SampledFrom(sm.conns).Draw(t, "conn")
	model := rapid.SampledFrom(sm.models).Draw(t, "model")
	n := rapid.IntRange(2, 5).Draw(t, "burst")
	k, hint := sm.drawKind(t)
	var pds []mdlPending
	for range n {
		if pd, ok := sm.dispatch(t, conn); ok {
			pd.model = model
			pds = append(pds, pd)
		}
	}
	sm.logf("burst %d×%s on %s/%s, %d admitted", n, k, conn, model, len(pds))
	// Concurrent outcomes on several replicas: none hears of the others'
	// decisions until the burst is over.
	held := len(sm.sys.engines) > 1
	if held {
		sm.sys.bus.mu.Lock()
		sm.sys.bus.hold = true
		sm.sys.bus.mu.Unlock()
	}
	for _, pd := range pds {
		sm.complete(pd, k, hint)
	}
	if held {
		sm.sys.bus.release(false)
	}
}

// Advance moves both clocks: by 0, 1 ms, a random span, to a pending deadline
// (or 1 ms before it), or past the 24 h windows.
func (sm *mdlMachine) Advance(t *rapid.T) {
	var deadlines []int64
	for _, c := range sm.ref.conns {
		if c.coolUntil > sm.ref.now {
			deadlines = append(deadlines, c.coolUntil)
		}
	}
	for _, l := range sm.ref.locks {
		if l.until > sm.ref.now {
			deadlines = append(deadlines, l.until)
		}
		if end := l.lastFailAt + l.lastCoolMs + sm.ref.set.resetMs; end >= sm.ref.now {
			deadlines = append(deadlines, end, end+1)
		}
	}
	for _, b := range sm.ref.breakers {
		if b.state == resilience.BreakerOpen {
			deadlines = append(deadlines, b.openedAt+sm.ref.set.effResetMs(b.cycles))
		}
	}
	for _, c := range sm.ref.conns {
		if c.hasErr {
			deadlines = append(deadlines, c.lastErrAt+mdlBackoffRestart, c.lastErrAt+mdlBackoffRestart+1)
		}
		if c.authCount > 0 {
			deadlines = append(deadlines, c.lastAuthAt+mdlDayMs, c.lastAuthAt+mdlDayMs+1)
		}
	}
	slices.Sort(deadlines)
	deadlines = slices.Compact(deadlines)
	var d int64
	switch mode := rapid.IntRange(0, 5).Draw(t, "advanceMode"); {
	case mode == 0:
		d = rapid.SampledFrom([]int64{0, 1}).Draw(t, "tiny")
	case mode == 1:
		d = rapid.Int64Range(1, 10*mdlMinuteMs).Draw(t, "span")
	case mode == 2:
		d = rapid.SampledFrom([]int64{mdlDayMs + 1, 25 * 60 * mdlMinuteMs}).Draw(t, "day")
	default:
		if len(deadlines) == 0 {
			d = rapid.Int64Range(1, 30_000).Draw(t, "span")
			break
		}
		target := rapid.SampledFrom(deadlines).Draw(t, "deadline") - rapid.Int64Range(0, 1).Draw(t, "minus")
		d = max(target-sm.ref.now, 0)
	}
	sm.ref.now += d
	sm.sys.clock.Advance(time.Duration(d) * time.Millisecond)
	sm.logf("advance %dms", d)
}

// Reset is the admin reset of one connection (POST /api/connections/{id}/reset).
func (sm *mdlMachine) Reset(t *rapid.T) {
	conn := rapid.SampledFrom(sm.conns).Draw(t, "conn")
	eng := sm.mirror(t)
	sm.logf("admin reset %s on mirror %d", conn, eng)
	sm.ref.conns[conn] = &mdlConn{}
	if err := sm.sys.engines[eng].Cooldowns.Reset(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
}

// Restart persists and rebuilds every state machine from its store; in-flight
// dispatches die with the process (a restored HALF_OPEN gets fresh probe slots).
func (sm *mdlMachine) Restart(t *rapid.T) {
	sm.logf("restart (%d in flight dropped)", len(sm.pending))
	if err := sm.sys.flushAll(); err != nil {
		t.Fatal(err)
	}
	sm.pending = nil
	for _, b := range sm.ref.breakers {
		if b.state == resilience.BreakerHalfOpen {
			b.inFlight, b.probeUntil = 0, 0
		}
	}
	if err := sm.sys.build(sm.ref.set); err != nil {
		t.Fatal(err)
	}
}

func (sm *mdlMachine) trace() string {
	tail := sm.log
	if len(tail) > 60 {
		tail = tail[len(tail)-60:]
	}
	return strings.Join(tail, "\n")
}

// Check compares every observable gate; the breaker reads are reads (they
// turn an elapsed OPEN breaker HALF_OPEN) on both sides.
func (sm *mdlMachine) Check(t *rapid.T) {
	if len(sm.sys.engines) > 1 {
		// A replica's batched success leak reaches the others within a
		// second (the design's bound); the model has no such lag.
		if err := sm.sys.flushAll(); err != nil {
			t.Fatal(err)
		}
	}
	for i, eng := range sm.sys.engines {
		sm.checkMirror(t, i, eng)
	}
}

func (sm *mdlMachine) checkMirror(t *rapid.T, mirror int, eng *resilience.Engine) {
	now := sm.ref.now
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("divergence at t=%dms on mirror %d: %s\ntrace:\n%s", now, mirror, fmt.Sprintf(format, args...), sm.trace())
	}
	if got := sm.sys.clock.Now().Sub(sm.sys.t0).Milliseconds(); got != now {
		fail("clocks apart: %d", got)
	}
	for _, p := range sm.provs {
		b := sm.ref.breaker(p)
		sm.ref.refresh(b)
		st := eng.Breakers.Status(p)
		want := struct {
			State          resilience.BreakerState
			Failures, Cyc  int
			RetryAfterMs   int64
			HalfOpenFlight int
		}{b.state, b.failures, b.cycles, sm.ref.retryAfterMs(b), b.inFlight}
		got := want
		got.State, got.Failures, got.Cyc, got.RetryAfterMs, got.HalfOpenFlight = st.State, st.FailureCount, st.OpenCycleCount, st.RetryAfterMs, st.HalfOpenInFlight
		if b.state != resilience.BreakerHalfOpen {
			got.HalfOpenFlight = want.HalfOpenFlight
		}
		if got != want {
			fail("breaker %s: got %+v, want %+v", p, got, want)
		}
	}
	for _, id := range sm.conns {
		c := sm.ref.conns[id]
		st := eng.Cooldowns.State(id)
		var gotUntil int64
		if st.RateLimitedUntil != nil && st.RateLimitedUntil.After(sm.sys.clock.Now()) {
			gotUntil = st.RateLimitedUntil.Sub(sm.sys.t0).Milliseconds()
		}
		wantUntil := c.coolUntil
		if wantUntil <= now {
			wantUntil = 0
		}
		if gotUntil != wantUntil || st.BackoffLevel != c.level || st.TerminalStatus != c.terminal || st.AuthFailCount != c.authCount {
			fail("connection %s: got until=%d level=%d terminal=%q authFails=%d, want until=%d level=%d terminal=%q authFails=%d",
				id, gotUntil, st.BackoffLevel, st.TerminalStatus, st.AuthFailCount, wantUntil, c.level, c.terminal, c.authCount)
		}
		for _, model := range sm.models {
			// Only the fields the spec defines are compared.
			type blocker struct {
				Reason     string
				RetryAfter time.Duration
				Waitable   bool
			}
			var want *blocker
			if locked, until, reason := sm.ref.locked(id, model); c.terminal != "" {
				want = &blocker{Reason: c.terminal}
			} else if locked {
				want = &blocker{"model_lockout", time.Duration(until-now) * time.Millisecond, mdlWaitable(reason)}
			} else if c.coolUntil > now {
				want = &blocker{"cooling", time.Duration(c.coolUntil-now) * time.Millisecond, mdlWaitable(c.coolReason)}
			}
			var got *blocker
			if b := eng.ConnectionBlocker(sm.sys.provider[id], id, model); b != nil {
				got = &blocker{b.Reason, b.RetryAfter, b.Waitable}
			}
			if (got == nil) != (want == nil) || (got != nil && *got != *want) {
				fail("blocker %s/%s: got %+v, want %+v", id, model, got, want)
			}
		}
	}
	// Lockout rows kept as lock or escalation memory.
	type row struct {
		count int
		until int64
	}
	wantRows := map[mdlLockKey]row{}
	for k, l := range sm.ref.locks {
		if !sm.ref.lockDead(l) {
			wantRows[k] = row{l.count, l.until}
		}
	}
	gotRows := map[mdlLockKey]row{}
	for _, s := range eng.Lockouts.ListAll(resilience.LockFilter{}) {
		gotRows[mdlLockKey{s.ConnectionID, s.Shape, s.LockKey}] = row{s.FailureCount, s.Until.Sub(sm.sys.t0).Milliseconds()}
	}
	if !maps.Equal(gotRows, wantRows) {
		fail("lockout rows: got %+v, want %+v", gotRows, wantRows)
	}
}

// mdlFlags sets rapid's check count for this run unless -rapid.checks (or
// RAPID_CHECKS) was given: 1,000 per commit, 100,000 in the LONG tier. Fail
// files are not written into the source tree; rapid prints the seed to replay.
// Sequences average 50 actions.
func mdlFlags(t *testing.T) {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	want := map[string]string{}
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set["rapid.checks"] && !env {
		want["rapid.checks"] = "1000"
		if os.Getenv("SWITCHYARD_LONG") == "1" {
			want["rapid.checks"] = "100000"
		}
	}
	if _, env := os.LookupEnv("RAPID_STEPS"); !set["rapid.steps"] && !env {
		want["rapid.steps"] = "50" // long enough to walk the auth ladder to expired
	}
	if _, env := os.LookupEnv("RAPID_NOFAILFILE"); !set["rapid.nofailfile"] && !set["rapid.failfile"] && !env {
		want["rapid.nofailfile"] = "true"
	}
	for name, v := range want {
		f := flag.Lookup(name)
		if f == nil {
			t.Fatalf("flag %s not registered", name)
		}
		old := f.Value.String()
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = flag.Set(name, old) })
	}
}

// mdlRegressionSystem is a fresh engine on in-memory stores with one apikey
// connection c0 of prov0, for replaying a shrunk counter-example. restart
// rebuilds every state machine from its store, as a process restart does.
func mdlRegressionSystem(t *testing.T) (sys *mdlSystem, fail func(mdlKind), restart func()) {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	sys = &mdlSystem{clock: testkit.NewFakeClock(t0), t0: t0, doc: resilience.DefaultDocument(),
		brStore: resilience.NewMemoryBreakerStore(), cdStore: resilience.NewMemoryConnectionStateStore(),
		loStore: resilience.NewMemoryLockoutStore(), provider: map[string]string{"c0": "prov0"}}
	set := mdlSettings{failThr: 5, resetMs: 30_000, halfOpen: 1, maxMult: 1, cdBase: 3_000, cdSteps: 5, cdMax: 300_000,
		lockBase: 120_000, lockMax: 1_800_000, lockSteps: 10, lockExp: true}
	if err := sys.build(set); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn := resilience.ConnRef{ID: "c0", Provider: "prov0", Profile: services.AuthAPIKey}
	fail = func(k mdlKind) {
		adm, _ := sys.engine.AllowProvider("prov0", services.AuthAPIKey, "")
		sys.engine.Failure(ctx, adm, conn, sys.failureOf("c0", "m-a", k, 0), nil)
	}
	restart = func() {
		if err := sys.engine.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sys.build(set); err != nil {
			t.Fatal(err)
		}
	}
	return sys, fail, restart
}

// TestRapidRegression_1 is the first counter-example rapid found: the auth
// ladder's 24 h restart window (20-resilience §4.3, "restarting at 1 if the
// previous one is > 24 h old") must be measured from the previous counted
// auth failure (last_auth_fail_at), not from last_error_at, which unrelated
// failures move; otherwise sparse 401s days apart end in `expired`. The
// replay: a 401, 24 h + 1 ms of silence, a 429, then a 401 once that
// cooldown ended → count 1 and a 120 s cooldown (not 2 and 240 s), with and
// without a restart between the steps.
func TestRapidRegression_1(t *testing.T) {
	for _, withRestart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", withRestart), func(t *testing.T) {
			sys, fail, restart := mdlRegressionSystem(t)
			maybeRestart := func() {
				if withRestart {
					restart()
				}
			}
			fail(kind401)
			maybeRestart()
			sys.clock.Advance(time.Duration(mdlDayMs+1) * time.Millisecond)
			fail(kind429)
			maybeRestart()
			sys.clock.Advance(3 * time.Second)
			fail(kind401)
			maybeRestart()
			st := sys.engine.Cooldowns.State("c0")
			if st.AuthFailCount != 1 || st.RateLimitedUntil == nil || !st.RateLimitedUntil.Equal(sys.clock.Now().Add(2*time.Minute)) {
				t.Fatalf("401 at t=0, 429 at t=24h+1ms, 401 at t=24h+3.001s: auth_fail_count=%d cooling until %v; "+
					"20-resilience §4.3 wants count 1 and a 120 s cooldown", st.AuthFailCount, st.RateLimitedUntil)
			}

			// Within 24 h of the previous auth failure the ladder climbs,
			// however many other failures came in between.
			sys.clock.Advance(2*time.Minute + time.Second)
			fail(kind429) // level 1: cools 6 s
			maybeRestart()
			sys.clock.Advance(7 * time.Second)
			fail(kind401)
			st = sys.engine.Cooldowns.State("c0")
			if st.AuthFailCount != 2 || st.RateLimitedUntil == nil || !st.RateLimitedUntil.Equal(sys.clock.Now().Add(4*time.Minute)) {
				t.Fatalf("second 401 within 24 h: auth_fail_count=%d cooling until %v; want count 2 and a 240 s cooldown",
					st.AuthFailCount, st.RateLimitedUntil)
			}
		})
	}
}

// TestRapidRegression_2 is the second counter-example: the waitability of a
// connection cooldown (20-resilience §9: cooldowns written by rate_limit,
// transient, server_error or model_capacity; never auth_error, forbidden,
// quota …) must come from the reason that wrote the deadline
// (cooldown_reason), not from last_error_reason, which failures absorbed
// during the episode overwrite. A 401 then a 429 at t=0: the 120 s cooldown
// was written by auth_error and stays not waitable (else a single-model
// request sleeps and re-sends to credentials that were just refused); a 429
// then a 401: the rate_limit cooldown stays waitable. Both survive a restart.
func TestRapidRegression_2(t *testing.T) {
	cases := []struct {
		name     string
		kinds    []mdlKind
		waitable bool
	}{
		{"auth_error then absorbed 429", []mdlKind{kind401, kind429}, false},
		{"rate_limit then absorbed 401", []mdlKind{kind429, kind401}, true},
	}
	for _, tc := range cases {
		for _, withRestart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%v", tc.name, withRestart), func(t *testing.T) {
				sys, fail, restart := mdlRegressionSystem(t)
				for _, k := range tc.kinds {
					fail(k)
				}
				if withRestart {
					restart()
				}
				b := sys.engine.ConnectionBlocker("prov0", "c0", "m-a")
				if b == nil || b.Reason != "cooling" || b.Waitable != tc.waitable {
					t.Fatalf("blocker %+v; want cooling with waitable=%v (20-resilience §9)", b, tc.waitable)
				}
				if st := sys.engine.Cooldowns.State("c0"); st.LastErrorReason == st.CooldownReason {
					t.Errorf("last_error_reason %q and cooldown_reason %q should differ after the absorbed failure",
						st.LastErrorReason, st.CooldownReason)
				}
			})
		}
	}
}

func TestRapidResilienceModel(t *testing.T) {
	mdlFlags(t)
	t.Logf("rapid.checks=%s", flag.Lookup("rapid.checks").Value.String())
	rapid.Check(t, func(rt *rapid.T) {
		sm := newMdlMachine(rt, 1)
		rt.Repeat(rapid.StateMachineActions(sm))
	})
}

func TestRapidResilienceModelTwoMirrors(t *testing.T) {
	mdlFlags(t)
	t.Logf("rapid.checks=%s", flag.Lookup("rapid.checks").Value.String())
	rapid.Check(t, func(rt *rapid.T) {
		sm := newMdlMachine(rt, 2)
		rt.Repeat(rapid.StateMachineActions(sm))
	})
}
