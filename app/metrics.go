package app

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics holds the Prometheus registry and the counters the request path
// increments. Gauges of live state are read at scrape time by stateCollector,
// so nothing on the hot path maintains them.
type metrics struct {
	reg                *prometheus.Registry
	attempts           *prometheus.CounterVec
	failures           *prometheus.CounterVec
	failovers          *prometheus.CounterVec
	excluded           *prometheus.CounterVec
	poolExhausted      *prometheus.CounterVec
	ttfb               *prometheus.HistogramVec
	httpRequests       *prometheus.CounterVec
	httpDuration       *prometheus.HistogramVec
	cooldownsApplied   *prometheus.CounterVec
	lockoutsApplied    *prometheus.CounterVec
	breakerTransitions *prometheus.CounterVec
	egressLocks        *prometheus.CounterVec
	emergency          *prometheus.CounterVec
	waits              *prometheus.CounterVec
	storeErrors        *prometheus.CounterVec
	feedErrors         *prometheus.CounterVec
	sharedFallbacks    *prometheus.CounterVec
	// usage is when a dispatch last started on each connection.
	usage *connUsage
	// log receives one line per store error (set by the server).
	log *slog.Logger
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), usage: newConnUsage(usageFlushEvery)}
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_upstream_attempts_total", Help: "Upstream dispatches by outcome."}, []string{"provider", "outcome"})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_upstream_failures_total", Help: "Failed dispatches by classified reason."}, []string{"provider", "reason"})
	m.failovers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_failovers_total", Help: "Moves to another connection or target after a failure."}, []string{"kind"})
	m.excluded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_targets_excluded_total", Help: "Targets or connections skipped before dispatch."}, []string{"reason"})
	m.poolExhausted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_pool_exhausted_total", Help: "Requests answered without a dispatch."}, []string{"code"})
	m.ttfb = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchyard_upstream_ttfb_seconds", Help: "Time to the first useful upstream byte.", Buckets: prometheus.DefBuckets}, []string{"provider"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_http_requests_total", Help: "HTTP requests by route and status."}, []string{"route", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchyard_http_request_duration_seconds", Help: "HTTP request duration.", Buckets: prometheus.DefBuckets}, []string{"route"})
	m.cooldownsApplied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_cooldowns_applied_total", Help: "Connection cooldowns applied."}, []string{"provider", "reason"})
	m.lockoutsApplied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_model_lockouts_applied_total", Help: "Model lockouts applied."}, []string{"provider", "reason"})
	m.breakerTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_breaker_transitions_total", Help: "Provider breaker transitions."}, []string{"provider", "to"})
	m.egressLocks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_egress_locks_total", Help: "Egress-group locks applied."}, []string{"provider"})
	m.emergency = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_emergency_fallbacks_total", Help: "Emergency fallback attempts."}, []string{"outcome"})
	m.waits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_cooldown_waits_total", Help: "Cooldown-aware waits."}, []string{"kind", "outcome"})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_store_errors_total",
		Help: "Writes of state that failed after the answer was decided (memory kept the value), by store."}, []string{"store"})
	m.feedErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_change_feed_errors_total",
		Help: "Caches that could not apply a config or settings change, by kind."}, []string{"kind"})
	m.sharedFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_shared_state_fallback_total",
		Help: "Decisions of a fleet-wide limit taken by this replica alone because Redis (or, for login_throttle, the shared database) was unavailable, by mechanism."}, []string{"mechanism"})
	m.reg.MustRegister(m.sharedFallbacks, m.storeErrors, m.feedErrors, m.waits, m.emergency, m.attempts, m.failures, m.failovers, m.excluded, m.poolExhausted, m.ttfb, m.httpRequests, m.httpDuration,
		m.cooldownsApplied, m.lockoutsApplied, m.breakerTransitions, m.egressLocks,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// gateway.Observer
func (m *metrics) Attempt(provider, outcome string) {
	m.attempts.WithLabelValues(provider, outcome).Inc()
}
func (m *metrics) Failure(provider, reason string) {
	m.failures.WithLabelValues(provider, reason).Inc()
}
func (m *metrics) Failover(kind string)      { m.failovers.WithLabelValues(kind).Inc() }
func (m *metrics) Excluded(reason string)    { m.excluded.WithLabelValues(reason).Inc() }
func (m *metrics) PoolExhausted(code string) { m.poolExhausted.WithLabelValues(code).Inc() }
func (m *metrics) TTFB(provider string, d time.Duration) {
	m.ttfb.WithLabelValues(provider).Observe(d.Seconds())
}

// httpMiddleware counts requests by route pattern (never the raw path).
func (m *metrics) httpMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		if err != nil {
			if he, ok := err.(*echo.HTTPError); ok {
				status = he.Code
			}
		}
		m.httpRequests.WithLabelValues(route, http.StatusText(status)).Inc()
		m.httpDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		return err
	}
}

// handler serves the text exposition format.
func (m *metrics) handler() echo.HandlerFunc {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

func (m *metrics) EmergencyFallback(outcome string) { m.emergency.WithLabelValues(outcome).Inc() }

func (m *metrics) Waited(combo bool) {
	kind := "single"
	if combo {
		kind = "combo"
	}
	m.waits.WithLabelValues(kind, "waited").Inc()
}

// Used records that a dispatch just started on a connection, whether it
// serves or fails (connections.last_used_at): an atomic store in memory, no
// database write on the request path.
func (m *metrics) Used(connectionID string, at time.Time) { m.usage.Used(connectionID, at) }

// StoreError counts and logs a persistence error no caller could return
// (gateway.Observer, and the app's own background writes).
func (m *metrics) StoreError(store string, err error) {
	m.storeErrors.WithLabelValues(store).Inc()
	if m.log != nil {
		m.log.Warn("state not stored; memory keeps it until the next write", "store", store, "err", err)
	}
}

// usageFlushEvery is how often the last-used times are written, at most.
const usageFlushEvery = 30 * time.Second

// lastUsedStore writes last-used times in one batch (models.ConnectionStore).
type lastUsedStore interface {
	TouchConnectionsLastUsed(ctx context.Context, at map[string]time.Time) error
}

// connUsage keeps when a dispatch last started on each connection:
// one atomic per connection, updated on the request path, written to the
// connection rows in one batch at most every flushEvery, on its own
// goroutine started by the Used call that finds the interval elapsed (no
// ticker runs while the gateway is idle). Close waits for that write and
// flushes the rest.
type connUsage struct {
	every time.Duration
	last  sync.Map // connection id → *usageEntry

	nextFlush atomic.Int64 // unix ms before which Used starts no flush

	mu       sync.Mutex
	store    lastUsedStore
	log      *slog.Logger
	flushing bool
	closed   bool
	wg       sync.WaitGroup
}

type usageEntry struct {
	at      atomic.Int64 // unix ms of the last dispatch
	written atomic.Int64 // unix ms last written to the store
}

func newConnUsage(every time.Duration) *connUsage { return &connUsage{every: every} }

// bind sets where the batches go; until then Used only keeps memory.
func (u *connUsage) bind(store lastUsedStore, log *slog.Logger) {
	u.mu.Lock()
	u.store, u.log = store, log
	u.mu.Unlock()
}

// Used moves a connection's last-used time forward to at.
func (u *connUsage) Used(connectionID string, at time.Time) {
	v, ok := u.last.Load(connectionID)
	if !ok {
		v, _ = u.last.LoadOrStore(connectionID, &usageEntry{})
	}
	e, ms := v.(*usageEntry), at.UnixMilli()
	for {
		cur := e.at.Load()
		if ms <= cur || e.at.CompareAndSwap(cur, ms) {
			break
		}
	}
	if ms >= u.nextFlush.Load() {
		u.startFlush(ms)
	}
}

// LastUsed is the last-used time held in memory (zero when none since start).
func (u *connUsage) LastUsed(connectionID string) time.Time {
	if v, ok := u.last.Load(connectionID); ok {
		if ms := v.(*usageEntry).at.Load(); ms != 0 {
			return time.UnixMilli(ms).UTC()
		}
	}
	return time.Time{}
}

// startFlush writes the pending times in the background unless a write is
// running, the tracker is closed or has no store.
func (u *connUsage) startFlush(nowMs int64) {
	u.mu.Lock()
	if u.flushing || u.closed || u.store == nil {
		u.mu.Unlock()
		return
	}
	u.flushing = true
	u.nextFlush.Store(nowMs + u.every.Milliseconds())
	u.wg.Add(1)
	u.mu.Unlock()
	go func() {
		defer u.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := u.Flush(ctx)
		cancel()
		u.mu.Lock()
		u.flushing = false
		log := u.log
		u.mu.Unlock()
		if err != nil && log != nil {
			log.Warn("write connection last-used times", "err", err)
		}
	}()
}

// Flush writes every time not yet written, in one batch.
func (u *connUsage) Flush(ctx context.Context) error {
	u.mu.Lock()
	store := u.store
	u.mu.Unlock()
	if store == nil {
		return nil
	}
	batch := map[string]time.Time{}
	marks := map[*usageEntry]int64{}
	u.last.Range(func(k, v any) bool {
		e := v.(*usageEntry)
		if at := e.at.Load(); at > e.written.Load() {
			batch[k.(string)] = time.UnixMilli(at).UTC()
			marks[e] = at
		}
		return true
	})
	if len(batch) == 0 {
		return nil
	}
	if err := store.TouchConnectionsLastUsed(ctx, batch); err != nil {
		return err
	}
	for e, at := range marks {
		for {
			cur := e.written.Load()
			if at <= cur || e.written.CompareAndSwap(cur, at) {
				break
			}
		}
	}
	return nil
}

// Close stops background writes, waits for a running one and writes the rest.
func (u *connUsage) Close(ctx context.Context) error {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	u.wg.Wait()
	return u.Flush(ctx)
}
