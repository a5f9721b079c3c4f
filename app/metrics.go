package app

import (
	"net/http"
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
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
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
	m.reg.MustRegister(m.waits, m.emergency, m.attempts, m.failures, m.failovers, m.excluded, m.poolExhausted, m.ttfb, m.httpRequests, m.httpDuration,
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
