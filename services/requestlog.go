package services

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// Request outcomes (RequestLogEntry.Outcome, the outcome filter of GET /api/logs).
const (
	RequestOutcomeSuccess           = "success"
	RequestOutcomeClientError       = "client_error"
	RequestOutcomeUpstreamError     = "upstream_error"
	RequestOutcomeFailover          = "failover"
	RequestOutcomeEmergencyFallback = "emergency_fallback"
	RequestOutcomeAborted           = "aborted"
)

// RequestOutcomes lists every valid RequestLogEntry.Outcome, in the order of 40-admin-api §8.
var RequestOutcomes = []string{
	RequestOutcomeSuccess, RequestOutcomeClientError, RequestOutcomeUpstreamError,
	RequestOutcomeFailover, RequestOutcomeEmergencyFallback, RequestOutcomeAborted,
}

// ValidRequestOutcome reports whether s is one of RequestOutcomes.
func ValidRequestOutcome(s string) bool {
	for _, o := range RequestOutcomes {
		if s == o {
			return true
		}
	}
	return false
}

// RequestLogEntry is the record of one /v1 POST (10-gateway-api §11), one row of
// request_logs. It never holds a client key beyond APIKeyPrefix, a provider
// credential, an Authorization, x-api-key, cookie, session or lease header value,
// or an upstream URL carrying credentials.
type RequestLogEntry struct {
	// ID is the request id (the row's primary key).
	ID string
	// CreatedAt is when the request was received; stored with millisecond precision.
	CreatedAt time.Time
	// ClientRequestID is the request id the client sent, if any.
	ClientRequestID string
	// APIKeyID, APIKeyName and APIKeyPrefix identify the client key; the prefix is
	// the only part of the key ever recorded.
	APIKeyID     string
	APIKeyName   string
	APIKeyPrefix string
	// Method is the HTTP method; stored as "POST" when empty.
	Method string
	// Endpoint is the /v1 path, e.g. "/v1/chat/completions".
	Endpoint string
	// InboundFormat is the client's API format.
	InboundFormat string
	// Stream says the client asked for a stream.
	Stream bool
	// StreamOutcome says how a stream ended ("completed", …); empty for non-stream.
	StreamOutcome string
	// RequestedModel is the model name as sent.
	RequestedModel string
	// ResolvedKind is "combo" or "direct".
	ResolvedKind string
	// ComboName is the combo the request resolved to; ComboPath is "outer>inner" for nested combos.
	ComboName string
	ComboPath string
	// Strategy is the combo strategy used.
	Strategy string
	// Provider, Model (upstream id) and ConnectionID name what finally served the request.
	Provider     string
	Model        string
	ConnectionID string
	// UpstreamFormat is the API format spoken to the final upstream.
	UpstreamFormat string
	// Status is the HTTP status sent to the client (499 on client abort).
	Status int
	// Outcome is one of RequestOutcomes.
	Outcome string
	// ErrorCode is the error code sent to the client, empty on success.
	ErrorCode string
	// Attempts is the number of dispatches; AttemptLog details them.
	Attempts   int
	AttemptLog []AttemptRecord
	// Waits are the times the request spent waiting between or before its
	// attempts (cooldown-aware waits, retry delays, slot and queue waits),
	// so that attempts + waits + the gaps between them add up to LatencyMs.
	// nil on rows written before the timeline was recorded (their attempts
	// have no start offsets); empty when the request never waited.
	Waits []WaitRecord
	// Skips are the targets and connections the walk passed over without
	// dispatching (breaker open, cooling, model locked, lease held, window
	// gate, …), in the order they were skipped; nil on rows written before
	// skips were recorded.
	Skips []SkipRecord
	// Token counts as reported by the upstream.
	PromptTokens     int64
	CachedTokens     int64
	CacheWriteTokens int64
	CompletionTokens int64
	ReasoningTokens  int64
	// LatencyMs is receipt → last byte written, in milliseconds.
	LatencyMs int64
	// TtftMs is receipt → first useful byte written, in milliseconds; nil for non-stream.
	TtftMs *int64
	// UpstreamLatencyMs is final dispatch → its last byte, in milliseconds.
	UpstreamLatencyMs int64
	// Warnings are the signalled losses of 10-gateway-api §6.8.
	Warnings []string
	// AffinityHit, LeaseManaged and EmergencyFallback describe how the
	// target was chosen. EmergencyFallback is set whenever the emergency
	// fallback was tried: Outcome emergency_fallback when it served, else
	// the failure it ended with.
	AffinityHit       bool
	LeaseManaged      bool
	EmergencyFallback bool
	// BodiesCaptured says bodies were captured for this request (logging.captureBodies).
	BodiesCaptured bool
	// EstimatedCost is the request's price from the model price table
	// (Prices) for its tokens; unknown when the served model has no price.
	// Always an estimate: list prices, not the provider's bill.
	EstimatedCost Cost
	// Bodies holds the captured bodies, nil when none were captured. List results
	// leave it nil to stay small; FindRequestLog fills it.
	Bodies *CapturedBodies
}

// AttemptRecord is one dispatch of a request (10-gateway-api §11 attemptLog).
type AttemptRecord struct {
	// Seq numbers the attempts from 0 in dispatch order.
	Seq int `json:"seq"`
	// TargetID is the combo entry id, empty for a direct model.
	TargetID     string `json:"targetId"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	ConnectionID string `json:"connectionId"`
	// Outcome is "success" or a reason of 20-resilience §1.4 ("rate_limit", "transient", …).
	Outcome string `json:"outcome"`
	// Detail refines Outcome ("empty_response", …).
	Detail string `json:"detail"`
	// UpstreamStatus is the upstream HTTP status, 0 when none was received.
	UpstreamStatus int    `json:"upstreamStatus"`
	ErrorCode      string `json:"errorCode"`
	// RetryHintSource names where a retry hint came from (20-resilience §1.5), empty when none.
	RetryHintSource string `json:"retryHintSource"`
	// LatencyMs is the attempt's duration in milliseconds, from its
	// admission (after any slot or queue wait) to its last byte.
	LatencyMs int64 `json:"latencyMs"`
	// StartOffsetMs is when the attempt started, in milliseconds after the
	// request was received (meaningless on rows written before it was
	// recorded: their entry's Waits is nil).
	StartOffsetMs int64 `json:"startOffsetMs"`
	// HintMs is the retry hint the upstream gave (RetryHintSource says
	// where), 0 when none.
	HintMs int64 `json:"hintMs"`
	// Effects are the state changes the attempt's failure applied.
	Effects []AttemptEffect `json:"effects"`
}

// AttemptEffect is one state change a failed attempt applied (40-admin-api
// §8 effects[]): kind connection_cooldown or model_lockout (until UntilMs),
// terminal (TerminalStatus), breaker_counted, breaker_opened, window_gate,
// egress_lock.
type AttemptEffect struct {
	Kind string `json:"kind"`
	// UntilMs is the Unix time in milliseconds the cooldown or lockout
	// ends, 0 when the effect has no end.
	UntilMs        int64  `json:"untilMs"`
	LockKey        string `json:"lockKey"`
	TerminalStatus string `json:"terminalStatus"`
}

// SkipRecord is one target (or one connection of it) the walk passed over
// without dispatching (40-admin-api §8 attemptLog entries with
// "skipped").
type SkipRecord struct {
	// Target is "provider/model"; ConnectionID names the connection whose
	// gate decided it, empty when the whole target was skipped.
	Target       string `json:"target"`
	ConnectionID string `json:"connectionId"`
	// Reason is the exclusion reason of diagnostics.excluded
	// ("circuit_open", "cooling", "model_lockout", …); Detail refines it.
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// RetryAfterMs is how long the skipping timer had left, 0 for a hard
	// exclusion (20-resilience: timer vs hard exclusion).
	RetryAfterMs int64 `json:"retryAfterMs"`
	// AtOffsetMs is when the target was skipped, in milliseconds after the
	// request was received; AfterAttempts is how many attempts had been
	// dispatched by then, so the skip sits between attempts exactly.
	AtOffsetMs    int64 `json:"atOffsetMs"`
	AfterAttempts int   `json:"afterAttempts"`
}

// Cause is what kept the target out: the gate for a target that was
// "unavailable" because of one (circuit_open, cooling, model_lockout,
// lease_held, window_gate, …), else the exclusion reason.
func (k SkipRecord) Cause() string {
	if k.Reason == "unavailable" && k.Detail != "" {
		return k.Detail
	}
	return k.Reason
}

// Kinds of WaitRecord. A cooldown-aware wait (20-resilience §9) is combo or
// single, as 40-admin-api §8 names it.
const (
	WaitKindCombo      = "combo"
	WaitKindSingle     = "single"
	WaitKindRetryDelay = "retry_delay"
	WaitKindSlot       = "slot"
	WaitKindQueue      = "queue"
)

// WaitRecord is one wait of a request (request log waits[]).
type WaitRecord struct {
	// Kind is one of the WaitKind constants.
	Kind string `json:"kind"`
	// Reason says what the request waited for: for a cooldown wait or a
	// retry delay the failure reason of the last attempt ("rate_limit", …),
	// for a slot wait "max_concurrent", for a queue wait "request_queue".
	Reason string `json:"reason"`
	// Target is what the wait was on: the requested model or combo, or the
	// connection id of a slot or queue wait.
	Target string `json:"target"`
	// StartOffsetMs is when the wait started, in milliseconds after the
	// request was received; WaitedMs how long it lasted.
	StartOffsetMs int64 `json:"startOffsetMs"`
	WaitedMs      int64 `json:"waitedMs"`
}

// CapturedBodies are the bodies recorded while logging.captureBodies is on,
// each already truncated to logging.captureMaxBytes and scrubbed.
type CapturedBodies struct {
	Request         *CapturedBody `json:"request,omitempty"`
	UpstreamRequest *CapturedBody `json:"upstreamRequest,omitempty"`
	// Response is the upstream response; for streams the concatenated text and tool-call arguments.
	Response *CapturedBody `json:"response,omitempty"`
}

// CapturedBody is one captured body.
type CapturedBody struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
}

// RequestLogSink persists batches of request log entries. The batch writer calls
// it from a single goroutine; the slice is reused afterwards and must not be kept.
// A batch is written atomically; entries whose ID is already stored are skipped.
type RequestLogSink interface {
	WriteRequestLogs(ctx context.Context, entries []RequestLogEntry) error
}

// Request log list limits (40-admin-api §1 Lists).
const (
	DefaultRequestLogLimit = 50
	MaxRequestLogLimit     = 500
)

// RequestLogQuery filters GET /api/logs. Zero values mean "no filter".
type RequestLogQuery struct {
	// Since (inclusive) and Until (exclusive) bound CreatedAt; Since must be before Until.
	Since time.Time
	Until time.Time
	// Outcome is one of RequestOutcomes. emergency_fallback matches every
	// request that tried the emergency fallback, served by it or not.
	Outcome string
	// Model matches the requested model or the combo name.
	Model string
	// Provider and ConnectionID match the provider or connection that
	// served and every one an attempt was dispatched to, so the rows of a
	// failing connection include the requests another one finally served.
	Provider     string
	ConnectionID string
	// KeyID matches the client key id.
	KeyID string
	// Stream, when set, matches streamed (true) or non-streamed (false) requests.
	Stream *bool
	// RequestID matches the request id or the client's request id.
	RequestID string
	// Limit is the page size, 1–500; 0 means 50.
	Limit int
	// Cursor is the NextCursor of the previous page, empty for the first page.
	Cursor string
	// After asks instead for the entries of requests that ended after this
	// position (the dashboard's live tail): a RequestLogCursor whose time
	// is when a request ended (TailCursor of the entries on screen). Rows
	// are written when a request ends, so following the end time misses
	// no request, however long it ran. They come the last ended first, at
	// most Limit of them: when more ended, Items are the last Limit and
	// NextCursor is set (it continues older by arrival from the last item).
	// After and Cursor cannot be combined.
	After string
}

// EndedAt is when the request ended: receipt plus its latency.
func (e *RequestLogEntry) EndedAt() time.Time {
	return e.CreatedAt.Add(time.Duration(e.LatencyMs) * time.Millisecond)
}

// TailCursor is the After position past every entry of items: the one
// that ended last ("" when there are none).
func TailCursor(items []RequestLogEntry) string {
	var last RequestLogCursor
	for i := range items {
		e := &items[i]
		at := e.EndedAt()
		if last.ID == "" || at.After(last.CreatedAt) || at.Equal(last.CreatedAt) && e.ID > last.ID {
			last = RequestLogCursor{CreatedAt: at, ID: e.ID}
		}
	}
	if last.ID == "" {
		return ""
	}
	return last.String()
}

// Normalize validates q and fills the default limit. Problems are reported as a
// *ValidationError keyed by query parameter name.
func (q RequestLogQuery) Normalize() (RequestLogQuery, error) {
	fe := fieldErrors{}
	q.Limit = checkTimePage(fe, q.Limit, q.Since, q.Until, q.Cursor)
	if q.Outcome != "" && !ValidRequestOutcome(q.Outcome) {
		fe.add("outcome", "must be one of success, client_error, upstream_error, failover, emergency_fallback, aborted")
	}
	if q.After != "" {
		if _, err := ParseRequestLogCursor(q.After); err != nil {
			fe.add("after", "is not a cursor returned by this list")
		} else if q.Cursor != "" {
			fe.add("after", "cannot be combined with cursor")
		}
	}
	return q, fe.Err()
}

// checkTimePage checks what every time-ordered list shares (the request
// log, the audit log): the page size (0 = the default), since before until,
// a cursor of this list format. It returns the limit to use.
func checkTimePage(fe fieldErrors, limit int, since, until time.Time, cursor string) int {
	if limit == 0 {
		limit = DefaultRequestLogLimit
	}
	if limit < 1 || limit > MaxRequestLogLimit {
		fe.add("limit", "must be between 1 and 500")
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		fe.add("since", "must be before until")
	}
	if cursor != "" {
		if _, err := ParseRequestLogCursor(cursor); err != nil {
			fe.add("cursor", "is not a cursor returned by this list")
		}
	}
	return limit
}

// RequestLogPage is one page of request logs, newest first.
type RequestLogPage struct {
	Items []RequestLogEntry
	// NextCursor continues the list; empty at the end.
	NextCursor string
}

// RequestLogStore lists and reads request logs.
type RequestLogStore interface {
	// ListRequestLogs returns the entries matching q, newest first, keyset-paginated
	// on (CreatedAt, ID). Entries have Bodies nil.
	ListRequestLogs(ctx context.Context, q RequestLogQuery) (RequestLogPage, error)
	// FindRequestLog returns one entry with its bodies, or ErrNotFound.
	FindRequestLog(ctx context.Context, id string) (RequestLogEntry, error)
}

// RequestLogPurger deletes old request logs (retention, logging.retentionDays).
type RequestLogPurger interface {
	// PurgeRequestLogs deletes the entries created before before and returns how many.
	PurgeRequestLogs(ctx context.Context, before time.Time) (int64, error)
}

// RequestLogCursor is the decoded position of a request log page: the last entry returned.
type RequestLogCursor struct {
	CreatedAt time.Time
	ID        string
}

type cursorJSON struct {
	T  int64  `json:"t"`
	ID string `json:"id"`
}

var errBadCursor = errors.New("services: bad request log cursor")

// String encodes the cursor as opaque URL-safe text.
func (c RequestLogCursor) String() string {
	b, _ := json.Marshal(cursorJSON{T: c.CreatedAt.UnixMilli(), ID: c.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseRequestLogCursor decodes a cursor made by RequestLogCursor.String.
func ParseRequestLogCursor(s string) (RequestLogCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return RequestLogCursor{}, errBadCursor
	}
	var c cursorJSON
	if err := json.Unmarshal(b, &c); err != nil || c.ID == "" {
		return RequestLogCursor{}, errBadCursor
	}
	return RequestLogCursor{CreatedAt: time.UnixMilli(c.T).UTC(), ID: c.ID}, nil
}

// Kinds of TimelineRow.
const (
	TimelineAttempt = "attempt"
	TimelineWait    = "wait"
	// TimelineSkip is a target passed over; it takes no time.
	TimelineSkip = "skip"
	// TimelineGap is time inside the gateway between the rows around it:
	// reading and routing the request, picking the next target, writing
	// the answer.
	TimelineGap = "gap"
)

// TimelineRow is one row of a request's timeline: an attempt, a wait, or
// the gap before the next of them (or before the end).
type TimelineRow struct {
	Kind          string
	StartOffsetMs int64
	DurationMs    int64
	// Attempt, Wait or Skip is the row's record (all nil for a gap).
	Attempt *AttemptRecord
	Wait    *WaitRecord
	Skip    *SkipRecord
}

// Timeline is a request's attempts and waits in time order with the gaps
// between them, so that AttemptsMs + WaitsMs + GapsMs = TotalMs. Offsets
// and durations are truncated to milliseconds from the same origin, so a
// row never reaches past the next one and the sum is exact; should rows
// overlap anyway, the overlap is not counted as a gap.
type Timeline struct {
	// Recorded is false for rows logged before start offsets and waits
	// were recorded: Rows then lists the attempts without gaps.
	Recorded                             bool
	Rows                                 []TimelineRow
	TotalMs, AttemptsMs, WaitsMs, GapsMs int64
}

// Timeline orders e's attempts and waits by start offset and fills the
// gaps between them up to LatencyMs.
func (e *RequestLogEntry) Timeline() Timeline {
	tl := Timeline{Recorded: e.Waits != nil, TotalMs: e.LatencyMs}
	rows := make([]TimelineRow, 0, len(e.AttemptLog)+len(e.Waits))
	for i := range e.AttemptLog {
		a := &e.AttemptLog[i]
		rows = append(rows, TimelineRow{Kind: TimelineAttempt, StartOffsetMs: a.StartOffsetMs, DurationMs: a.LatencyMs, Attempt: a})
		tl.AttemptsMs += a.LatencyMs
	}
	if !tl.Recorded {
		tl.Rows = rows
		return tl
	}
	for i := range e.Waits {
		w := &e.Waits[i]
		rows = append(rows, TimelineRow{Kind: TimelineWait, StartOffsetMs: w.StartOffsetMs, DurationMs: w.WaitedMs, Wait: w})
		tl.WaitsMs += w.WaitedMs
	}
	sortTimeline(rows)
	rows = placeSkips(rows, e.Skips)
	var at int64
	out := make([]TimelineRow, 0, 2*len(rows)+1)
	gap := func(to int64) {
		if to > at {
			out = append(out, TimelineRow{Kind: TimelineGap, StartOffsetMs: at, DurationMs: to - at})
			tl.GapsMs += to - at
		}
	}
	for _, r := range rows {
		gap(r.StartOffsetMs)
		out = append(out, r)
		at = max(at, r.StartOffsetMs+r.DurationMs)
	}
	gap(tl.TotalMs)
	tl.Rows = out
	return tl
}

// placeSkips inserts the skips into rows (attempts and waits in time
// order): a skip made after n attempts goes after the n-th attempt and
// before any wait that started no earlier than it (the walk skips a
// cooling target first, then waits for it).
func placeSkips(rows []TimelineRow, skips []SkipRecord) []TimelineRow {
	if len(skips) == 0 {
		return rows
	}
	out := make([]TimelineRow, 0, len(rows)+len(skips))
	attempts, next := 0, 0
	for _, r := range rows {
		for next < len(skips) && skips[next].AfterAttempts <= attempts &&
			(r.Kind == TimelineAttempt || skips[next].AtOffsetMs <= r.StartOffsetMs) {
			s := &skips[next]
			out = append(out, TimelineRow{Kind: TimelineSkip, StartOffsetMs: s.AtOffsetMs, Skip: s})
			next++
		}
		out = append(out, r)
		if r.Kind == TimelineAttempt {
			attempts++
		}
	}
	for ; next < len(skips); next++ {
		s := &skips[next]
		out = append(out, TimelineRow{Kind: TimelineSkip, StartOffsetMs: s.AtOffsetMs, Skip: s})
	}
	return out
}

// sortTimeline orders rows by start offset, then by end: of two rows
// starting in the same millisecond the one that ended first came first
// (an attempt answered within a millisecond, then the wait after it).
// Stable, so equal rows keep their attempts-then-waits order.
func sortTimeline(rows []TimelineRow) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && timelineBefore(rows[j], rows[j-1]); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
}

func timelineBefore(a, b TimelineRow) bool {
	if a.StartOffsetMs != b.StartOffsetMs {
		return a.StartOffsetMs < b.StartOffsetMs
	}
	return a.StartOffsetMs+a.DurationMs < b.StartOffsetMs+b.DurationMs
}
