package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"switchyard/models"
	"switchyard/services"
	"switchyard/services/resilience"
)

// stateCollector reads live resilience state at scrape time, so the request
// path maintains no gauges.
type stateCollector struct {
	s           *Server
	breaker     *prometheus.Desc
	connections *prometheus.Desc
	lockouts    *prometheus.Desc
	windowGate  *prometheus.Desc
	logDepth    *prometheus.Desc
	logDropped  *prometheus.Desc
	logSlow     *prometheus.Desc
	queued      *prometheus.Desc
	rejections  *prometheus.Desc
	slotsInUse  *prometheus.Desc
	slotWaiters *prometheus.Desc
	failOpen    *prometheus.Desc
	pins        *prometheus.Desc
	leases      *prometheus.Desc
	waiting     *prometheus.Desc
}

// newStateCollector builds the scrape-time collector. Like the collector,
// the connection-usage tracker reads server state: it is bound here, once,
// to the connection store its batches go to.
func newStateCollector(s *Server) *stateCollector {
	s.metrics.usage.bind(models.NewConnectionStore(s.db, s.keyring), s.log.With("component", "connection-usage"))
	return &stateCollector{s: s,
		breaker:     prometheus.NewDesc("switchyard_breaker_state", "Provider breaker state: 0 closed, 1 degraded, 2 half-open, 3 open.", []string{"provider"}, nil),
		connections: prometheus.NewDesc("switchyard_connections", "Connections by provider and status.", []string{"provider", "status"}, nil),
		lockouts:    prometheus.NewDesc("switchyard_model_lockouts_active", "Active model lockouts.", []string{"provider"}, nil),
		windowGate:  prometheus.NewDesc("switchyard_window_gate_active", "Active window-gate entries.", []string{"provider"}, nil),
		logDepth:    prometheus.NewDesc("switchyard_request_log_queue_depth", "Request-log entries waiting to be written.", nil, nil),
		logDropped:  prometheus.NewDesc("switchyard_request_log_dropped_total", "Request-log entries dropped because the queue was full.", nil, nil),
		logSlow: prometheus.NewDesc("switchyard_request_log_fallback_batches_total",
			"Request-log batches written through the GORM fallback because SQLite's C API was unavailable (driver changed).", nil, nil),
		queued:      prometheus.NewDesc("switchyard_rate_limit_queued", "Requests waiting in a connection's request queue.", []string{"provider", "connection"}, nil),
		rejections:  prometheus.NewDesc("switchyard_rate_limit_rejections_total", "Requests refused by the local request queue.", []string{"code"}, nil),
		slotsInUse:  prometheus.NewDesc("switchyard_connection_slots_in_use", "max_concurrent slots in use.", []string{"connection"}, nil),
		slotWaiters: prometheus.NewDesc("switchyard_connection_slot_waiters", "Dispatches waiting for a max_concurrent slot.", []string{"connection"}, nil),
		failOpen:    prometheus.NewDesc("switchyard_connection_slot_fail_open_total", "Dispatches sent without a slot (fail-open).", []string{"connection", "cause"}, nil),
		pins:        prometheus.NewDesc("switchyard_affinity_pins", "Session-affinity pins.", nil, nil),
		leases:      prometheus.NewDesc("switchyard_leases_active", "Active exclusive leases.", nil, nil),
		waiting: prometheus.NewDesc("switchyard_waiting_requests",
			"Requests waiting inside the gateway now, by reason: cooldown (cooldown-aware wait), slot (max_concurrent), queue (request queue).", []string{"reason"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.breaker, c.connections, c.lockouts, c.windowGate, c.logDepth, c.logDropped, c.logSlow,
		c.queued, c.rejections, c.slotsInUse, c.slotWaiters, c.failOpen, c.pins, c.leases, c.waiting} {
		ch <- d
	}
}

var breakerValue = map[resilience.BreakerState]float64{resilience.BreakerClosed: 0, resilience.BreakerDegraded: 1, resilience.BreakerHalfOpen: 2, resilience.BreakerOpen: 3}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	if s.status == nil {
		return
	}
	snap := s.status.Snapshot()
	for _, b := range snap.Breakers {
		ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, breakerValue[b.State], b.Provider)
	}
	counts := map[[2]string]float64{}
	for _, cs := range snap.Connections {
		counts[[2]string{cs.Conn.Provider, cs.Status}]++
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(c.connections, prometheus.GaugeValue, v, k[0], k[1])
	}
	locks := map[string]float64{}
	for _, l := range snap.Lockouts {
		locks[l.Provider]++
	}
	for p, v := range locks {
		ch <- prometheus.MustNewConstMetric(c.lockouts, prometheus.GaugeValue, v, p)
	}
	gates := map[string]float64{}
	for _, e := range snap.WindowGate {
		if e.RetryAfterMs > 0 {
			gates[e.Provider]++
		}
	}
	for p, v := range gates {
		ch <- prometheus.MustNewConstMetric(c.windowGate, prometheus.GaugeValue, v, p)
	}
	if s.queues != nil {
		var full, timeout, exec int64
		for _, q := range s.queues.Stats() {
			ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(q.Queued), q.Provider, q.ConnectionID)
			full, timeout, exec = full+q.Rejections.QueueFull, timeout+q.Rejections.QueueTimeout, exec+q.Rejections.ExecutionTimeout
		}
		ch <- prometheus.MustNewConstMetric(c.rejections, prometheus.CounterValue, float64(full), services.CodeRateLimitQueueFull)
		ch <- prometheus.MustNewConstMetric(c.rejections, prometheus.CounterValue, float64(timeout), services.CodeRateLimitQueueTimeout)
		ch <- prometheus.MustNewConstMetric(c.rejections, prometheus.CounterValue, float64(exec), services.CodeRateLimitExecutionTimeout)
	}
	if s.slots != nil {
		for _, st := range s.slots.Stats() {
			ch <- prometheus.MustNewConstMetric(c.slotsInUse, prometheus.GaugeValue, float64(st.InFlight), st.ConnectionID)
			ch <- prometheus.MustNewConstMetric(c.slotWaiters, prometheus.GaugeValue, float64(st.Waiting), st.ConnectionID)
			ch <- prometheus.MustNewConstMetric(c.failOpen, prometheus.CounterValue, float64(st.FailOpenGrants.QueueFull), st.ConnectionID, "queue_full")
			ch <- prometheus.MustNewConstMetric(c.failOpen, prometheus.CounterValue, float64(st.FailOpenGrants.Timeout), st.ConnectionID, "timeout")
		}
	}
	if s.pins != nil {
		ch <- prometheus.MustNewConstMetric(c.pins, prometheus.GaugeValue, float64(s.pins.Count()))
	}
	if s.leases != nil {
		ch <- prometheus.MustNewConstMetric(c.leases, prometheus.GaugeValue, float64(len(s.leases.Active())))
	}
	if s.waiting != nil {
		for reason, n := range s.waiting.Counts().ByReason {
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), reason)
		}
	}
	if s.logWriter != nil {
		st := s.logWriter.Stats()
		ch <- prometheus.MustNewConstMetric(c.logDepth, prometheus.GaugeValue, float64(st.QueueDepth))
		ch <- prometheus.MustNewConstMetric(c.logDropped, prometheus.CounterValue, float64(st.Dropped))
	}
	if s.logStore != nil {
		ch <- prometheus.MustNewConstMetric(c.logSlow, prometheus.CounterValue, float64(s.logStore.FallbackBatches()))
	}
}
