// Package stats keeps the traffic of the last 24 hours in one-minute
// buckets in memory (40-admin-api §4.3, 50-dashboard §6.3): requests,
// success, failovers, client aborts, latency and first-byte percentiles,
// tokens, the estimated cost per client key, connection and model, and the
// failed dispatches per target. GET /api/metrics/summary and the Overview
// render its Summary; nothing reads the database.
//
// A Recorder is fed whole batches of request-log entries by the request-log
// writer's goroutine (Record), so the request path pays nothing for it;
// entries the writer drops (a full queue, counted in
// switchyard_request_log_dropped_total) are missing here too. The buckets
// start empty at every start: a window longer than the process's life is
// summarised "since start". It imports only services and the standard
// library.
package stats

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"switchyard/services"
)

// Windows of a summary.
const (
	Window1h  = "1h"
	Window24h = "24h"
)

// ParseWindow maps a window name to its span; ok is false for anything but 1h and 24h.
func ParseWindow(w string) (time.Duration, bool) {
	switch w {
	case Window1h:
		return time.Hour, true
	case Window24h:
		return 24 * time.Hour, true
	}
	return 0, false
}

// keep is how much history the ring holds.
const keep = 24 * 60

// Succeeded is the success rule of the Overview and the summary: a 2xx
// final status that, for a stream, ended without an in-band error (such a
// stream is logged as upstream_error). Client aborts are neither success
// nor failure.
func Succeeded(e *services.RequestLogEntry) bool {
	return e.Status >= 200 && e.Status < 300 && e.Outcome != services.RequestOutcomeUpstreamError &&
		e.Outcome != services.RequestOutcomeClientError && e.Outcome != services.RequestOutcomeAborted
}

// AttemptFailed reports a dispatch that failed for a reason of the
// target's: not a success, and not the client's doing or a local limit (the
// outcomes the dispatch metrics leave out, 30-routing §8.1).
func AttemptFailed(outcome string) bool {
	switch outcome {
	case "success", "client_abort", "caller_error", "local_limit":
		return false
	}
	return true
}

// Recorder holds the buckets. Safe for concurrent use: Record takes the
// lock once per batch, Summary once per call.
type Recorder struct {
	clock   services.Clock
	started time.Time

	mu   sync.Mutex
	ring [keep]*minute
}

// NewRecorder starts empty at clock.Now().
func NewRecorder(clock services.Clock) *Recorder {
	return &Recorder{clock: clock, started: clock.Now()}
}

// minute is one bucket.
type minute struct {
	at                                       int64 // unix minute
	requests, ok, failed, aborted, failovers int
	tokensIn, tokensOut                      int64
	cost                                     services.Cost
	unpriced                                 int
	latency, ttfb                            histogram
	// upstream and upstreamTTFB are the serving attempt's own share of
	// latency and ttfb (what remains once the time before it started is
	// taken off: waits, failed attempts); lat and ttfb hold the sums of the
	// judged requests' times and of their waits (Judge).
	upstream, upstreamTTFB histogram
	lat, first             waitSum
	byKey, byConn, byModel map[string]*Usage
	failing                map[failKey]*failAgg
}

func (m *minute) reset(at int64) {
	lat, ttfb, up, upTTFB := m.latency, m.ttfb, m.upstream, m.upstreamTTFB
	lat.reset()
	ttfb.reset()
	up.reset()
	upTTFB.reset()
	*m = minute{at: at, latency: lat, ttfb: ttfb, upstream: up, upstreamTTFB: upTTFB}
}

// waitSum is the total time of some requests and the part they spent waiting.
type waitSum struct{ totalMs, waitedMs int64 }

func (w *waitSum) merge(o waitSum) { w.totalMs += o.totalMs; w.waitedMs += o.waitedMs }

// Record counts a batch of finished requests into the minute each arrived
// in; entries older than the ring or from the future are ignored.
func (r *Recorder) Record(entries []services.RequestLogEntry) {
	if len(entries) == 0 {
		return
	}
	now := r.clock.Now().Unix() / 60
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		at := e.CreatedAt.Unix() / 60
		if at <= now-keep || at > now {
			continue
		}
		r.bucket(at).add(e)
	}
}

// bucket returns the minute at (unix minute), reset if it held an older one.
func (r *Recorder) bucket(at int64) *minute {
	slot := &r.ring[at%keep]
	if *slot == nil {
		*slot = &minute{at: at}
	} else if (*slot).at != at {
		(*slot).reset(at)
	}
	return *slot
}

func (m *minute) add(e *services.RequestLogEntry) {
	m.requests++
	m.tokensIn += e.PromptTokens
	m.tokensOut += e.CompletionTokens
	if e.Attempts > 1 {
		m.failovers++
	}
	switch {
	case e.Outcome == services.RequestOutcomeAborted:
		m.aborted++
	case Succeeded(e):
		m.ok++
	default:
		m.failed++
	}
	if e.Outcome != services.RequestOutcomeAborted {
		if e.Stream {
			if e.TtftMs != nil {
				m.ttfb.add(*e.TtftMs)
				m.judge(&m.upstreamTTFB, &m.first, e, *e.TtftMs)
			}
		} else {
			m.latency.add(e.LatencyMs)
			m.judge(&m.upstream, &m.lat, e, e.LatencyMs)
		}
	}
	if e.EstimatedCost.Known {
		m.cost = m.cost.Plus(e.EstimatedCost)
	} else if e.PromptTokens+e.CompletionTokens > 0 {
		m.unpriced++
	}
	if e.APIKeyID != "" {
		u := usageOf(&m.byKey, e.APIKeyID)
		u.Name, u.Prefix = e.APIKeyName, e.APIKeyPrefix
		u.add(e)
	}
	if e.ConnectionID != "" {
		u := usageOf(&m.byConn, e.ConnectionID)
		u.Provider = e.Provider
		u.add(e)
	}
	if e.Provider != "" && e.Model != "" {
		u := usageOf(&m.byModel, e.Provider+"/"+e.Model)
		u.Provider = e.Provider
		u.add(e)
	}
	m.addFailures(e)
}

// judge records the upstream's own part of a request's time total (its
// latency, or its time to first byte) and the time it waited. The
// upstream's part is total minus the serving (last) attempt's start offset:
// everything before that attempt began — cooldown, slot and queue waits,
// retry delays, failed attempts — is the gateway's. Rows without a
// timeline (Waits nil: written before it was recorded, or refused before
// any attempt) are not judged.
func (m *minute) judge(up *histogram, sum *waitSum, e *services.RequestLogEntry, total int64) {
	if e.Waits == nil || len(e.AttemptLog) == 0 {
		return
	}
	last := &e.AttemptLog[len(e.AttemptLog)-1]
	up.add(min(max(total-last.StartOffsetMs, 0), total))
	var waited int64
	for i := range e.Waits {
		waited += e.Waits[i].WaitedMs
	}
	sum.totalMs += max(total, 0)
	sum.waitedMs += min(max(waited, 0), max(total, 0))
}

// Usage is the traffic of one client key, connection or served model.
type Usage struct {
	// ID is the key id, the connection id or "provider/model".
	ID string
	// Name and Prefix name a key (as the request log recorded it).
	Name, Prefix string
	// Provider is the connection's or model's provider.
	Provider  string
	Requests  int
	TokensIn  int64
	TokensOut int64
	// Cost is the estimated cost of the requests with a known price;
	// Unpriced counts those without one.
	Cost     services.Cost
	Unpriced int
}

func (u *Usage) add(e *services.RequestLogEntry) {
	u.Requests++
	u.TokensIn += e.PromptTokens
	u.TokensOut += e.CompletionTokens
	if e.EstimatedCost.Known {
		u.Cost = u.Cost.Plus(e.EstimatedCost)
	} else if e.PromptTokens+e.CompletionTokens > 0 {
		u.Unpriced++
	}
}

func (u *Usage) merge(o *Usage) {
	u.Requests += o.Requests
	u.TokensIn += o.TokensIn
	u.TokensOut += o.TokensOut
	u.Cost = u.Cost.Plus(o.Cost)
	u.Unpriced += o.Unpriced
	if o.Name != "" {
		u.Name, u.Prefix = o.Name, o.Prefix
	}
	if o.Provider != "" {
		u.Provider = o.Provider
	}
}

func usageOf(m *map[string]*Usage, id string) *Usage {
	if *m == nil {
		*m = map[string]*Usage{}
	}
	u := (*m)[id]
	if u == nil {
		u = &Usage{ID: id}
		(*m)[id] = u
	}
	return u
}

// failKey is one target on one connection.
type failKey struct{ provider, model, conn string }

// failAgg counts the failed dispatches of a target and keeps the newest.
type failAgg struct {
	n    int
	last Failure
}

// Failure is one failed dispatch as the request log holds it.
type Failure struct {
	// At is when the request arrived; Seq the attempt's place in it.
	At  time.Time
	Seq int
	// Status is the upstream status (0 when none arrived); Reason the
	// classified reason (20-resilience §1.4); Code the error code; Detail
	// the upstream's message or the classification's detail.
	Status int
	Reason string
	Code   string
	Detail string
}

// newer reports whether f happened after o (by arrival, then attempt order).
func (f Failure) newer(o Failure) bool {
	return f.At.After(o.At) || f.At.Equal(o.At) && f.Seq > o.Seq
}

// addFailures counts the failed dispatches of e. A failed request without
// an attempt log counts once against the target that served it; one that
// reached no target is not counted.
func (m *minute) addFailures(e *services.RequestLogEntry) {
	add := func(k failKey, f Failure) {
		if m.failing == nil {
			m.failing = map[failKey]*failAgg{}
		}
		a := m.failing[k]
		if a == nil {
			a = &failAgg{last: f}
			m.failing[k] = a
		} else if f.newer(a.last) {
			a.last = f
		}
		a.n++
	}
	if len(e.AttemptLog) == 0 {
		if e.Provider != "" && !Succeeded(e) && e.Outcome != services.RequestOutcomeAborted {
			add(failKey{e.Provider, e.Model, e.ConnectionID}, Failure{At: e.CreatedAt, Status: e.Status, Code: e.ErrorCode})
		}
		return
	}
	for i := range e.AttemptLog {
		a := &e.AttemptLog[i]
		if a.Provider == "" || !AttemptFailed(a.Outcome) {
			continue
		}
		add(failKey{a.Provider, a.Model, a.ConnectionID}, Failure{At: e.CreatedAt, Seq: a.Seq, Status: a.UpstreamStatus,
			Reason: a.Outcome, Code: a.ErrorCode, Detail: a.Detail})
	}
}

// Summary is the traffic of one window.
type Summary struct {
	// Window is "1h" or "24h"; Span its length.
	Window string
	Span   time.Duration
	// At is when the summary was made; Since where it starts: the start of
	// the window, or the process's start when that is later (SinceStart).
	At         time.Time
	Since      time.Time
	SinceStart bool
	// Requests counts every request; Succeeded, Failed and Aborted split
	// them (client aborts are left out of the success rate).
	Requests, Succeeded, Failed, Aborted int
	// Failovers counts requests that needed more than one attempt.
	Failovers int
	// Latency is over non-streamed requests (receipt to last byte); TTFB
	// over streamed ones (receipt to first useful byte).
	Latency, TTFB Percentiles
	// LatencyJudgement and TTFBJudgement compare Latency and TTFB with the
	// upstream's own part of them (see Judgement).
	LatencyJudgement, TTFBJudgement Judgement
	// TokensIn and TokensOut are prompt and completion tokens.
	TokensIn, TokensOut int64
	// Cost is the estimated cost of the requests with a known price;
	// Unpriced counts requests with tokens but no price.
	Cost     services.Cost
	Unpriced int
	// PerMinute has one point per minute of the window, oldest first.
	PerMinute []Point
	// Failing are the targets whose dispatches failed, most failures first,
	// then the most recent failure; at most MaxFailing.
	Failing []FailingTarget
	// ByKey, ByConnection and ByModel are the traffic per client key, per
	// serving connection and per served "provider/model", the highest
	// estimated cost first, then the most requests.
	ByKey, ByConnection, ByModel []Usage
}

// Judgement says whether the gateway's percentile is far above what the
// upstreams themselves took: the same percentile of the serving attempt's
// own time (the request's time minus everything before that attempt
// started), and the share of the requests' time spent waiting (cooldown,
// slot and queue waits, retry delays).
type Judgement struct {
	// Upstream is the p50/p95 of the serving attempts' own time.
	Upstream Percentiles
	// WaitShare is waited / total time over the judged requests, 0–1;
	// valid when Upstream.Count > 0.
	WaitShare float64
	// Flagged: the p95 is at least FlagRatio times the upstream's p95 and
	// at least FlagMinExtraMs above it.
	Flagged bool
}

// A p95 is flagged when it is at least FlagRatio times the upstreams' own
// p95 and at least FlagMinExtraMs above it: twice the time, and a second
// more, is what a client notices; a fast model's 40 ms against 15 ms is not.
const (
	FlagRatio      = 2.0
	FlagMinExtraMs = 1000
)

func judgement(p95 int64, up *histogram, sum waitSum) Judgement {
	j := Judgement{Upstream: up.percentiles()}
	if j.Upstream.Count == 0 {
		return j
	}
	if sum.totalMs > 0 {
		j.WaitShare = float64(sum.waitedMs) / float64(sum.totalMs)
	}
	j.Flagged = float64(p95) >= FlagRatio*float64(j.Upstream.P95) && p95-j.Upstream.P95 >= FlagMinExtraMs
	return j
}

// SuccessRate is Succeeded / (Requests − Aborted); ok is false when no request counts.
func (s Summary) SuccessRate() (rate float64, ok bool) {
	n := s.Requests - s.Aborted
	if n <= 0 {
		return 0, false
	}
	return float64(s.Succeeded) / float64(n), true
}

// Point is one minute of the chart.
type Point struct {
	T       time.Time
	OK      int
	Failed  int
	Aborted int
}

// FailingTarget is a provider/model on one connection whose dispatches failed.
type FailingTarget struct {
	Provider, Model, ConnectionID string
	Failures                      int
	Last                          Failure
}

// LastError is "502 server_error": the last failure's status and reason (or code).
func (f FailingTarget) LastError() string {
	var s string
	if f.Last.Status != 0 {
		s = strconv.Itoa(f.Last.Status)
	}
	word := f.Last.Reason
	if word == "" {
		word = f.Last.Code
	}
	if word != "" {
		if s != "" {
			s += " "
		}
		s += word
	}
	return s
}

// MaxFailing is how many failing targets a summary lists.
const MaxFailing = 5

// Summary summarises the window ending now; the window must be one ParseWindow knows.
func (r *Recorder) Summary(window string) Summary {
	span, ok := ParseWindow(window)
	if !ok {
		span, window = time.Hour, Window1h
	}
	now := r.clock.Now()
	s := Summary{Window: window, Span: span, At: now, Since: now.Add(-span)}
	if r.started.After(s.Since) {
		s.Since, s.SinceStart = r.started, true
	}
	end := now.Unix() / 60
	first := end - int64(span/time.Minute) + 1
	var lat, ttfb, up, upTTFB histogram
	var latSum, ttfbSum waitSum
	byKey, byConn, byModel := map[string]*Usage{}, map[string]*Usage{}, map[string]*Usage{}
	failing := map[failKey]*failAgg{}
	s.PerMinute = make([]Point, 0, end-first+1)
	r.mu.Lock()
	for at := first; at <= end; at++ {
		p := Point{T: time.Unix(at*60, 0).UTC()}
		m := r.ring[at%keep]
		if m == nil || m.at != at {
			s.PerMinute = append(s.PerMinute, p)
			continue
		}
		p.OK, p.Failed, p.Aborted = m.ok, m.failed, m.aborted
		s.PerMinute = append(s.PerMinute, p)
		s.Requests += m.requests
		s.Succeeded += m.ok
		s.Failed += m.failed
		s.Aborted += m.aborted
		s.Failovers += m.failovers
		s.TokensIn += m.tokensIn
		s.TokensOut += m.tokensOut
		s.Cost = s.Cost.Plus(m.cost)
		s.Unpriced += m.unpriced
		lat.merge(&m.latency)
		ttfb.merge(&m.ttfb)
		up.merge(&m.upstream)
		upTTFB.merge(&m.upstreamTTFB)
		latSum.merge(m.lat)
		ttfbSum.merge(m.first)
		mergeUsage(byKey, m.byKey)
		mergeUsage(byConn, m.byConn)
		mergeUsage(byModel, m.byModel)
		for k, a := range m.failing {
			t := failing[k]
			if t == nil {
				cp := *a
				failing[k] = &cp
				continue
			}
			t.n += a.n
			if a.last.newer(t.last) {
				t.last = a.last
			}
		}
	}
	r.mu.Unlock()
	s.Latency, s.TTFB = lat.percentiles(), ttfb.percentiles()
	s.LatencyJudgement = judgement(s.Latency.P95, &up, latSum)
	s.TTFBJudgement = judgement(s.TTFB.P95, &upTTFB, ttfbSum)
	s.ByKey, s.ByConnection, s.ByModel = sortedUsage(byKey), sortedUsage(byConn), sortedUsage(byModel)
	for k, a := range failing {
		s.Failing = append(s.Failing, FailingTarget{Provider: k.provider, Model: k.model, ConnectionID: k.conn, Failures: a.n, Last: a.last})
	}
	sort.Slice(s.Failing, func(i, j int) bool {
		a, b := s.Failing[i], s.Failing[j]
		switch {
		case a.Failures != b.Failures:
			return a.Failures > b.Failures
		case !a.Last.At.Equal(b.Last.At):
			return a.Last.At.After(b.Last.At)
		}
		return a.Provider+"/"+a.Model+"\x00"+a.ConnectionID < b.Provider+"/"+b.Model+"\x00"+b.ConnectionID
	})
	if len(s.Failing) > MaxFailing {
		s.Failing = s.Failing[:MaxFailing]
	}
	return s
}

func mergeUsage(dst, src map[string]*Usage) {
	for id, u := range src {
		d := dst[id]
		if d == nil {
			d = &Usage{ID: id}
			dst[id] = d
		}
		d.merge(u)
	}
}

func sortedUsage(m map[string]*Usage) []Usage {
	out := make([]Usage, 0, len(m))
	for _, u := range m {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Cost.NanoUSD != b.Cost.NanoUSD:
			return a.Cost.NanoUSD > b.Cost.NanoUSD
		case a.Requests != b.Requests:
			return a.Requests > b.Requests
		}
		return a.ID < b.ID
	})
	return out
}
