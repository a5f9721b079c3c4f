package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// LogsAPI serves GET /api/logs and GET /api/logs/{id} (40-admin-api §8):
// the request log, newest first, and one request with its attempt timeline.
// The store is the one the Request logs page reads.
type LogsAPI struct {
	*API
	Logs services.RequestLogStore
}

// logAPIKeyJSON names the client key of a request.
type logAPIKeyJSON struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
}

// logServedJSON is what finally served a request (or answered last).
type logServedJSON struct {
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	ConnectionID string `json:"connectionId"`
}

// logJSON is one request of GET /api/logs.
type logJSON struct {
	ID              string         `json:"id"`
	RequestID       string         `json:"requestId"`
	ClientRequestID *string        `json:"clientRequestId"`
	Time            string         `json:"time"`
	APIKey          *logAPIKeyJSON `json:"apiKey"`
	Method          string         `json:"method"`
	Path            string         `json:"path"`
	RequestedModel  string         `json:"requestedModel"`
	Combo           *string        `json:"combo"`
	Served          *logServedJSON `json:"served"`
	Status          int            `json:"status"`
	Outcome         string         `json:"outcome"`
	ErrorCode       *string        `json:"errorCode"`
	Attempts        int            `json:"attempts"`
	Stream          bool           `json:"stream"`
	StreamOutcome   *string        `json:"streamOutcome"`
	LatencyMs       int64          `json:"latencyMs"`
	TTFBMs          *int64         `json:"ttfbMs"`
	TokensIn        int64          `json:"tokensIn"`
	TokensOut       int64          `json:"tokensOut"`
	CachedTokens    int64          `json:"cachedTokens"`
	ReasoningTokens int64          `json:"reasoningTokens"`
	// EstimatedCostUSD is the price-table estimate, null when no price is known.
	EstimatedCostUSD  *float64 `json:"estimatedCostUsd"`
	EmergencyFallback bool     `json:"emergencyFallback"`
	Warnings          []string `json:"warnings"`
}

// logEffectJSON is one state change an attempt caused (§8 effects[]).
type logEffectJSON struct {
	Kind           string  `json:"kind"`
	Until          *string `json:"until,omitempty"`
	LockKey        *string `json:"lockKey,omitempty"`
	TerminalStatus *string `json:"terminalStatus,omitempty"`
}

// logAttemptJSON is one attempt of the timeline. startOffsetMs is null on
// rows logged before start offsets were recorded.
type logAttemptJSON struct {
	Index         int             `json:"index"`
	Target        string          `json:"target"`
	ConnectionID  string          `json:"connectionId"`
	StartOffsetMs *int64          `json:"startOffsetMs"`
	DurationMs    int64           `json:"durationMs"`
	Status        int             `json:"status"`
	Reason        *string         `json:"reason"`
	Detail        *string         `json:"detail"`
	ErrorCode     *string         `json:"errorCode"`
	HintMs        *int64          `json:"hintMs"`
	HintSource    *string         `json:"hintSource"`
	Effects       []logEffectJSON `json:"effects"`
}

// logSkipJSON is a target the request passed over (§8: an attemptLog
// entry with "skipped"): skipped is the reason (circuit_open, cooling,
// model_lockout, …), retryAfterMs the timer left or null for a hard
// exclusion, connectionId the connection whose gate decided it.
type logSkipJSON struct {
	Index         int     `json:"index"`
	Target        string  `json:"target"`
	Skipped       string  `json:"skipped"`
	Detail        *string `json:"detail"`
	ConnectionID  *string `json:"connectionId"`
	RetryAfterMs  *int64  `json:"retryAfterMs"`
	StartOffsetMs int64   `json:"startOffsetMs"`
}

// logWaitJSON is one wait (§8 waits[]): kind combo or single (a
// cooldown-aware wait), retry_delay, slot or queue.
type logWaitJSON struct {
	Kind          string `json:"kind"`
	Reason        string `json:"reason"`
	Target        string `json:"target"`
	StartOffsetMs int64  `json:"startOffsetMs"`
	WaitedMs      int64  `json:"waitedMs"`
}

// logTimelineJSON sums the timeline: attemptsMs + waitsMs + gapsMs =
// totalMs (the request's latencyMs); gapsMs is time inside the gateway
// between them. recorded is false on rows logged before waits were.
type logTimelineJSON struct {
	Recorded   bool  `json:"recorded"`
	TotalMs    int64 `json:"totalMs"`
	AttemptsMs int64 `json:"attemptsMs"`
	WaitsMs    int64 `json:"waitsMs"`
	GapsMs     int64 `json:"gapsMs"`
}

// logDetailJSON is GET /api/logs/{id}: the list fields, the attempt
// timeline, the waits and the captured bodies. Headers are not captured
// (10-gateway-api §11), so both header objects are null.
type logDetailJSON struct {
	logJSON
	// AttemptLog holds logAttemptJSON and logSkipJSON entries in order.
	AttemptLog          []any                  `json:"attemptLog"`
	Waits               []logWaitJSON          `json:"waits"`
	Timeline            logTimelineJSON        `json:"timeline"`
	RequestHeaders      map[string]string      `json:"requestHeaders"`
	ResponseHeaders     map[string]string      `json:"responseHeaders"`
	RequestBody         *services.CapturedBody `json:"requestBody"`
	UpstreamRequestBody *services.CapturedBody `json:"upstreamRequestBody"`
	ResponseBody        *services.CapturedBody `json:"responseBody"`
}

func presentLog(e services.RequestLogEntry) logJSON {
	out := logJSON{ID: e.ID, RequestID: e.ID, ClientRequestID: nullIfZero(e.ClientRequestID), Time: apiInstant(e.CreatedAt),
		Method: e.Method, Path: e.Endpoint, RequestedModel: e.RequestedModel, Combo: nullIfZero(e.ComboName),
		Status: e.Status, Outcome: e.Outcome, ErrorCode: nullIfZero(e.ErrorCode), Attempts: e.Attempts, Stream: e.Stream,
		LatencyMs: e.LatencyMs, TTFBMs: e.TtftMs, TokensIn: e.PromptTokens, TokensOut: e.CompletionTokens,
		CachedTokens: e.CachedTokens, ReasoningTokens: e.ReasoningTokens, EmergencyFallback: e.EmergencyFallback, Warnings: e.Warnings}
	if out.Method == "" {
		out.Method = http.MethodPost
	}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	if e.Stream {
		out.StreamOutcome = nullIfZero(e.StreamOutcome)
	}
	if e.APIKeyID != "" {
		out.APIKey = &logAPIKeyJSON{ID: e.APIKeyID, Name: e.APIKeyName, Prefix: e.APIKeyPrefix}
	}
	if e.Provider != "" {
		out.Served = &logServedJSON{Provider: e.Provider, Model: e.Model, ConnectionID: e.ConnectionID}
	}
	if e.EstimatedCost.Known {
		usd := e.EstimatedCost.USD()
		out.EstimatedCostUSD = &usd
	}
	return out
}

func presentLogDetail(e services.RequestLogEntry) logDetailJSON {
	out := logDetailJSON{logJSON: presentLog(e), AttemptLog: make([]any, 0, len(e.AttemptLog)+len(e.Skips)), Waits: []logWaitJSON{}}
	tl := e.Timeline()
	out.Timeline = logTimelineJSON{Recorded: tl.Recorded, TotalMs: tl.TotalMs, AttemptsMs: tl.AttemptsMs, WaitsMs: tl.WaitsMs, GapsMs: tl.GapsMs}
	for _, row := range tl.Rows {
		switch {
		case row.Attempt != nil:
			out.AttemptLog = append(out.AttemptLog, presentAttempt(len(out.AttemptLog), row.Attempt, tl.Recorded))
		case row.Skip != nil:
			out.AttemptLog = append(out.AttemptLog, presentSkip(len(out.AttemptLog), row.Skip))
		}
	}
	for _, w := range e.Waits {
		out.Waits = append(out.Waits, logWaitJSON{Kind: w.Kind, Reason: w.Reason, Target: w.Target, StartOffsetMs: w.StartOffsetMs, WaitedMs: w.WaitedMs})
	}
	if b := e.Bodies; b != nil {
		out.RequestBody, out.UpstreamRequestBody, out.ResponseBody = b.Request, b.UpstreamRequest, b.Response
	}
	return out
}

// presentAttempt is entry index of the attempt log: attempt a.
func presentAttempt(index int, a *services.AttemptRecord, timed bool) logAttemptJSON {
	at := logAttemptJSON{Index: index, Target: a.Provider + "/" + a.Model, ConnectionID: a.ConnectionID, DurationMs: a.LatencyMs,
		Status: a.UpstreamStatus, Detail: nullIfZero(a.Detail), ErrorCode: nullIfZero(a.ErrorCode),
		HintSource: nullIfZero(a.RetryHintSource), Effects: make([]logEffectJSON, 0, len(a.Effects))}
	if a.Outcome != "success" {
		at.Reason = nullIfZero(a.Outcome)
	}
	if timed {
		off := a.StartOffsetMs
		at.StartOffsetMs = &off
	}
	if a.HintMs > 0 {
		hint := a.HintMs
		at.HintMs = &hint
	}
	for _, f := range a.Effects {
		ef := logEffectJSON{Kind: f.Kind, LockKey: nullIfZero(f.LockKey), TerminalStatus: nullIfZero(f.TerminalStatus)}
		if f.UntilMs != 0 {
			until := apiInstant(time.UnixMilli(f.UntilMs))
			ef.Until = &until
		}
		at.Effects = append(at.Effects, ef)
	}
	return at
}

// presentSkip is entry index of the attempt log: the skip k, named by
// its cause.
func presentSkip(index int, k *services.SkipRecord) logSkipJSON {
	sk := logSkipJSON{Index: index, Target: k.Target, Skipped: k.Cause(), Detail: nullIfZero(k.Detail),
		ConnectionID: nullIfZero(k.ConnectionID), StartOffsetMs: k.AtOffsetMs}
	if sk.Skipped == k.Detail {
		sk.Detail = nil
	}
	if k.RetryAfterMs > 0 {
		ms := k.RetryAfterMs
		sk.RetryAfterMs = &ms
	}
	return sk
}

// logQuery reads the filters of GET /api/logs; a malformed value is a 400
// naming the parameter.
func logQuery(v url.Values) (services.RequestLogQuery, error) {
	q := services.RequestLogQuery{Outcome: v.Get("outcome"), Model: v.Get("model"), Provider: v.Get("provider"),
		ConnectionID: v.Get("connectionId"), KeyID: v.Get("keyId"), RequestID: v.Get("requestId"), Cursor: v.Get("cursor")}
	var err error
	if q.Since, err = apiTimeParam(v, "since"); err != nil {
		return q, err
	}
	if q.Until, err = apiTimeParam(v, "until"); err != nil {
		return q, err
	}
	if s := v.Get("stream"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, services.Invalid("stream", "must be true or false")
		}
		q.Stream = &b
	}
	if q.Limit, err = apiLimitParam(v); err != nil {
		return q, err
	}
	return q.Normalize()
}

// apiTimeParam reads an RFC 3339 instant (zero when absent).
func apiTimeParam(v url.Values, name string) (time.Time, error) {
	s := v.Get(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, services.Invalid(name, "must be an RFC 3339 time such as 2026-03-01T09:30:00Z")
	}
	return t.UTC(), nil
}

// apiLimitParam reads limit (0 when absent; the query's Normalize checks the range).
func apiLimitParam(v url.Values) (int, error) {
	s := v.Get("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > services.MaxRequestLogLimit {
		return 0, services.Invalid("limit", "must be between 1 and 500")
	}
	return n, nil
}

// apiPageJSON is a keyset-paginated list: {"items": [...], "nextCursor": …|null}.
type apiPageJSON[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

func apiPage[T any](items []T, next string) apiPageJSON[T] {
	if items == nil {
		items = []T{}
	}
	return apiPageJSON[T]{Items: items, NextCursor: nullIfZero(next)}
}

// List answers GET /api/logs with the filters of §8, newest first.
func (h *LogsAPI) List(c echo.Context) error {
	q, err := logQuery(c.QueryParams())
	if err != nil {
		return err
	}
	page, err := h.Logs.ListRequestLogs(c.Request().Context(), q)
	if err != nil {
		return err
	}
	items := make([]logJSON, len(page.Items))
	for i, e := range page.Items {
		items[i] = presentLog(e)
	}
	return writeAPIJSON(c, http.StatusOK, apiPage(items, page.NextCursor))
}

// Show answers GET /api/logs/{id}: the request with its attempt log, waits
// and captured bodies; 404 for an unknown id.
func (h *LogsAPI) Show(c echo.Context) error {
	e, err := h.Logs.FindRequestLog(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeAPIJSON(c, http.StatusOK, presentLogDetail(e))
}
