package gateway

import (
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/translate"
)

// LogRecord is what the gateway knows about one client request when it
// ends; the request log turns it into a row. No secret is ever put here.
type LogRecord struct {
	ID                string
	CreatedAt         time.Time
	ClientRequestID   string
	KeyID             string
	KeyName           string
	KeyPrefix         string
	Endpoint          string
	Stream            bool
	StreamOutcome     string
	RequestedModel    string
	ResolvedKind      string
	ComboName         string
	Strategy          string
	Provider          string
	Model             string
	ConnectionID      string
	Status            int
	Outcome           string
	ErrorCode         string
	Attempts          int
	AttemptLog        []AttemptLog
	PromptTokens      int64
	CachedTokens      int64
	CompletionTok     int64
	CacheWriteTokens  int64
	ReasoningTokens   int64
	LatencyMs         int64
	TtftMs            *int64
	UpstreamMs        int64
	AffinityHit       bool
	EmergencyFallback bool
	Inbound           string
	UpstreamFormat    string
	Warnings          []string
	Waits             []Wait
	Skips             []services.SkipRecord
	LeaseManaged      bool
	current           int
}

// addWarnings records the warning tokens a dispatch sent in
// X-Switchyard-Warning (10-gateway-api §6.8, §11), each once, in order of
// first occurrence.
func (r *LogRecord) addWarnings(pre []string, ws []translate.Warning) {
	add := func(code string) {
		for _, w := range r.Warnings {
			if w == code {
				return
			}
		}
		r.Warnings = append(r.Warnings, code)
	}
	for _, w := range pre {
		add(w)
	}
	for _, w := range ws {
		add(w.Code)
	}
}

// AttemptLog is one dispatch of a request.
type AttemptLog struct {
	Seq            int
	TargetID       string
	Provider       string
	Model          string
	ConnectionID   string
	Outcome        string // success or a failure reason
	Detail         string
	UpstreamStatus int
	ErrorCode      string
	HintSource     string
	HintMs         int64
	LatencyMs      int64
	// StartOffset is the attempt's start after the request's receipt
	// (CreatedAt, on the gateway's clock like every offset of the record).
	StartOffset time.Duration
	Effects     []resilience.Effect
}

func newLogRecord(req *Request) *LogRecord {
	r := &LogRecord{ID: req.ID, CreatedAt: req.Received, ClientRequestID: req.ClientRequestID, KeyID: req.Key.ID, Inbound: req.Inbound,
		KeyName: req.Key.Name, KeyPrefix: req.Key.Prefix, Endpoint: req.Endpoint, Stream: req.Stream, RequestedModel: req.Model,
		ResolvedKind: "direct", current: -1, LeaseManaged: req.LeaseConnID != ""}
	if req.Route.Combo != nil {
		r.ResolvedKind = "combo"
	} else {
		r.Provider, r.Model = req.Route.Provider.ID, req.Route.Model
	}
	return r
}

type attemptHandle struct {
	rec *LogRecord
	i   int
}

func (r *LogRecord) startAttempt(t target, c *services.Connection, now time.Time) attemptHandle {
	r.AttemptLog = append(r.AttemptLog, AttemptLog{Seq: len(r.AttemptLog), TargetID: t.id, Provider: t.provider.ID,
		Model: t.model, ConnectionID: c.ID, StartOffset: r.offset(now)})
	r.Attempts = len(r.AttemptLog)
	r.Provider, r.Model, r.ConnectionID = t.provider.ID, t.model, c.ID
	return attemptHandle{rec: r, i: len(r.AttemptLog) - 1}
}

// offset is t after the request's receipt (0 when the receipt is unknown).
// CreatedAt is the origin of every offset of the record and of LatencyMs,
// all on the gateway's clock, so the timeline adds up to the total.
func (r *LogRecord) offset(t time.Time) time.Duration {
	if r.CreatedAt.IsZero() || t.Before(r.CreatedAt) {
		return 0
	}
	return t.Sub(r.CreatedAt)
}

// admitted moves the attempt's start past the slot and queue waits its
// admission took (recorded as waits of their own), so the attempt's
// duration is its exchange with the upstream.
func (h attemptHandle) admitted(now time.Time) {
	a := &h.rec.AttemptLog[h.i]
	if off := h.rec.offset(now); off > a.StartOffset {
		a.StartOffset = off
	}
}

func (h attemptHandle) finish(now time.Time, res result) {
	a := &h.rec.AttemptLog[h.i]
	a.LatencyMs = (h.rec.offset(now) - a.StartOffset).Milliseconds()
	a.UpstreamStatus = res.status
	switch {
	case res.ok:
		a.Outcome = OutcomeSuccess
		if a.UpstreamStatus == 0 {
			a.UpstreamStatus = 200
		}
		h.rec.UpstreamMs = a.LatencyMs
	case res.gone:
		a.Outcome = attemptClientAbort
	default:
		a.Detail = res.message
		if res.detail != "" {
			a.Detail = res.detail
		}
	}
	h.rec.current = h.i
}

// noteOutcome records the classification of the last failed attempt.
func (r *LogRecord) noteOutcome(o resilience.Outcome) {
	if r.current < 0 || r.current >= len(r.AttemptLog) {
		return
	}
	a := &r.AttemptLog[r.current]
	a.Outcome = string(o.Reason)
	a.HintSource = o.HintSource
	a.HintMs = o.Hint.Milliseconds()
	a.Effects = o.Effects
	if o.Detail != "" {
		a.Detail = o.Detail
	}
}

func (r *LogRecord) served(t target, c *services.Connection, attempts int) {
	r.Provider, r.Model, r.ConnectionID = t.provider.ID, t.model, c.ID
	r.Status = 200
	r.Outcome = OutcomeSuccess
	if attempts > 1 {
		r.Outcome = OutcomeFailover
	}
}

// addCounts records token usage from a translated or relayed response.
func (r *LogRecord) addCounts(u translate.Usage) {
	if u == (translate.Usage{}) {
		return
	}
	r.PromptTokens, r.CompletionTok, r.CachedTokens, r.ReasoningTokens = u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.ReasoningTokens
	r.CacheWriteTokens = u.CacheWriteTokens
}

// finish fills the timing and the final status from the client writer.
// LatencyMs runs from the receipt to now on the gateway's clock, the clock
// of the attempts' and waits' offsets, so the timeline adds up to it.
func (r *LogRecord) finish(now time.Time, out *clientWriter) {
	out.mu.Lock()
	defer out.mu.Unlock()
	if r.CreatedAt.IsZero() {
		r.LatencyMs = time.Since(out.startedAt).Milliseconds()
	} else {
		r.LatencyMs = r.offset(now).Milliseconds()
	}
	if r.Stream && !out.firstByte.IsZero() {
		t := out.firstByte.Sub(out.startedAt).Milliseconds()
		r.TtftMs = &t
	}
	if r.Stream {
		r.StreamOutcome = out.streamEnd
	}
	if out.isGone || out.r.Context().Err() != nil {
		if r.Outcome != OutcomeSuccess && r.Outcome != OutcomeFailover || out.streamEnd != "completed" && r.Stream {
			r.Status, r.Outcome, r.ErrorCode = 499, OutcomeAborted, services.CodeClientClosedRequest
			if r.Stream {
				r.StreamOutcome = "aborted"
			}
		}
	}
	if r.Status == 0 {
		r.Status = out.status
	}
}

// LogRejected records a request refused before routing (auth, limits, body,
// validation, resolution), so every client request has a log row.
func (g *Gateway) LogRejected(id, clientRequestID string, key services.APIKey, endpoint, model string, stream bool, received time.Time, e *services.GatewayError) {
	r := &LogRecord{ID: id, CreatedAt: received, ClientRequestID: clientRequestID, KeyID: key.ID, KeyName: key.Name, KeyPrefix: key.Prefix,
		Endpoint: endpoint, Stream: stream, RequestedModel: model, Status: e.HTTPStatus(), ErrorCode: e.Code, Outcome: OutcomeClientError,
		LatencyMs: g.clock.Now().Sub(received).Milliseconds()}
	if e.HTTPStatus() >= 500 {
		r.Outcome = OutcomeUpstreamError
	}
	g.logs.Record(r)
}

// LogCount records a count_tokens request: status 200, the upstream that
// counted (none when counted locally) and the estimate warning.
func (g *Gateway) LogCount(req *Request, res CountResult) {
	r := newLogRecord(req)
	r.Status, r.Outcome = 200, OutcomeSuccess
	if req.Route.Combo != nil {
		r.ComboName, r.Strategy = req.Route.Combo.Name, req.Route.Combo.Strategy
	}
	if res.ConnectionID != "" {
		r.Provider, r.ConnectionID, r.UpstreamFormat = res.Provider, res.ConnectionID, string(services.FormatAnthropic)
	}
	if res.Estimated {
		r.Warnings = []string{WarnTokenCountEstimated}
	}
	r.PromptTokens = int64(res.InputTokens)
	r.LatencyMs = g.clock.Now().Sub(req.Received).Milliseconds()
	g.logs.Record(r)
}

// Wait is one wait of a request: a cooldown-aware wait, a retry delay, a
// slot or queue wait before a dispatch.
type Wait = services.WaitRecord

// waited records a wait that started at start and ended at end.
func (r *LogRecord) waited(kind, reason, target string, start, end time.Time) {
	from := r.offset(start)
	r.Waits = append(r.Waits, Wait{Kind: kind, Reason: reason, Target: target, StartOffsetMs: from.Milliseconds(),
		WaitedMs: (r.offset(end) - from).Milliseconds()})
}

// maxLoggedSkips bounds the skips one request's log keeps: a request that
// waits out cooldowns over many passes skips the same targets each pass.
const maxLoggedSkips = 32

// skipped records an exclusion of the walk at now, between the attempts
// dispatched so far and the next.
func (r *LogRecord) skipped(e Exclusion, now time.Time) {
	if len(r.Skips) >= maxLoggedSkips {
		return
	}
	s := services.SkipRecord{Target: e.Target, Reason: e.Reason, Detail: e.Detail,
		AtOffsetMs: r.offset(now).Milliseconds(), AfterAttempts: len(r.AttemptLog)}
	if e.ConnectionID != nil {
		s.ConnectionID = *e.ConnectionID
	}
	if e.RetryAfterMs != nil {
		s.RetryAfterMs = *e.RetryAfterMs
	}
	r.Skips = append(r.Skips, s)
}
