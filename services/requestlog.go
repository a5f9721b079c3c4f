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
	// LatencyMs is the attempt's duration in milliseconds.
	LatencyMs int64 `json:"latencyMs"`
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
}

// Normalize validates q and fills the default limit. Problems are reported as a
// *ValidationError keyed by query parameter name.
func (q RequestLogQuery) Normalize() (RequestLogQuery, error) {
	fe := fieldErrors{}
	q.Limit = checkTimePage(fe, q.Limit, q.Since, q.Until, q.Cursor)
	if q.Outcome != "" && !ValidRequestOutcome(q.Outcome) {
		fe.add("outcome", "must be one of success, client_error, upstream_error, failover, emergency_fallback, aborted")
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
