package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"switchyard/services"
)

// insertChunk is the rows per INSERT statement. The driver parses every
// statement anew (it keeps no prepared statements) and binds each parameter
// with a scan over all of them, so a batch is written as a few multi-row
// INSERTs whose values are SQL literals: 64 rows per statement write a
// 256-entry batch about 1.6 times as fast as gorm's 10-row statements with
// bound parameters (BenchmarkWriteRequestLogs).
const insertChunk = 64

// maxInlineText is the longest string written as a literal; longer ones
// (captured bodies) and any holding a NUL byte are bound parameters.
const maxInlineText = 1024

// requestLogColumns lists request_logs in the order appendRow writes values.
const requestLogColumns = "id, created_at, client_request_id, api_key_id, api_key_name, api_key_prefix, method, endpoint, " +
	"inbound_format, stream, stream_outcome, requested_model, resolved_kind, combo_name, combo_path, strategy, " +
	"provider, model, connection_id, upstream_format, status, outcome, error_code, attempts, attempt_log, " +
	"prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens, reasoning_tokens, latency_ms, ttft_ms, " +
	"upstream_latency_ms, warnings, affinity_hit, lease_managed, emergency_fallback, bodies_captured, bodies"

// purgeChunk bounds how long one retention DELETE holds the single write connection.
const purgeChunk = 5000

// RequestLogStore implements services.RequestLogSink, services.RequestLogStore
// and services.RequestLogPurger on request_logs.
type RequestLogStore struct{ db *gorm.DB }

var (
	_ services.RequestLogSink   = (*RequestLogStore)(nil)
	_ services.RequestLogStore  = (*RequestLogStore)(nil)
	_ services.RequestLogPurger = (*RequestLogStore)(nil)
)

// NewRequestLogStore builds the repository.
func NewRequestLogStore(db *gorm.DB) *RequestLogStore { return &RequestLogStore{db: db} }

// WriteRequestLogs inserts a batch in one transaction. Entries whose id is
// already stored are skipped, so a re-delivered batch is harmless.
func (s *RequestLogStore) WriteRequestLogs(ctx context.Context, entries []services.RequestLogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	rows := make([]RequestLogRow, len(entries))
	for i, e := range entries {
		row, err := requestLogToRow(e)
		if err != nil {
			return fmt.Errorf("models: write request logs: %w", err)
		}
		rows[i] = row
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ins insertBuilder
		for start := 0; start < len(rows); start += insertChunk {
			ins.reset()
			chunk := rows[start:min(start+insertChunk, len(rows))]
			for i := range chunk {
				if i > 0 {
					ins.sql = append(ins.sql, ',')
				}
				ins.appendRow(&chunk[i])
			}
			ins.sql = append(ins.sql, " ON CONFLICT (id) DO NOTHING"...)
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, string(ins.sql), ins.args...); err != nil {
				return err
			}
		}
		return nil
	})
	return translate(err, fmt.Sprintf("write %d request logs", len(entries)))
}

// ListRequestLogs returns one page newest first, keyset-paginated on (created_at, id).
// Bodies are not read.
func (s *RequestLogStore) ListRequestLogs(ctx context.Context, q services.RequestLogQuery) (services.RequestLogPage, error) {
	q, err := q.Normalize()
	if err != nil {
		return services.RequestLogPage{}, err
	}
	tx := s.db.WithContext(ctx).Model(&RequestLogRow{}).Omit("bodies")
	if !q.Since.IsZero() {
		tx = tx.Where("created_at >= ?", q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		tx = tx.Where("created_at < ?", q.Until.UnixMilli())
	}
	if q.Outcome != "" {
		tx = tx.Where("outcome = ?", q.Outcome)
	}
	if q.Model != "" {
		tx = tx.Where("(requested_model = ? OR combo_name = ?)", q.Model, q.Model)
	}
	if q.Provider != "" {
		tx = tx.Where("provider = ?", q.Provider)
	}
	if q.ConnectionID != "" {
		tx = tx.Where("connection_id = ?", q.ConnectionID)
	}
	if q.KeyID != "" {
		tx = tx.Where("api_key_id = ?", q.KeyID)
	}
	if q.Stream != nil {
		tx = tx.Where("stream = ?", *q.Stream)
	}
	if q.RequestID != "" {
		tx = tx.Where("(id = ? OR client_request_id = ?)", q.RequestID, q.RequestID)
	}
	if q.Cursor != "" {
		c, err := services.ParseRequestLogCursor(q.Cursor)
		if err != nil {
			return services.RequestLogPage{}, services.Invalid("cursor", "is not a cursor returned by this list")
		}
		// Strictly after the cursor in (created_at DESC, id DESC) order; the
		// first term lets SQLite range-scan request_logs_time.
		t := c.CreatedAt.UnixMilli()
		tx = tx.Where("created_at <= ? AND (created_at < ? OR id < ?)", t, t, c.ID)
	}
	var rows []RequestLogRow
	if err := tx.Order("created_at DESC, id DESC").Limit(q.Limit + 1).Find(&rows).Error; err != nil {
		return services.RequestLogPage{}, translate(err, "list request logs")
	}
	page := services.RequestLogPage{Items: make([]services.RequestLogEntry, 0, min(len(rows), q.Limit))}
	for i, r := range rows {
		if i == q.Limit {
			last := page.Items[len(page.Items)-1]
			page.NextCursor = services.RequestLogCursor{CreatedAt: last.CreatedAt, ID: last.ID}.String()
			break
		}
		page.Items = append(page.Items, r.domain())
	}
	return page, nil
}

// FindRequestLog returns one entry with its captured bodies.
func (s *RequestLogStore) FindRequestLog(ctx context.Context, id string) (services.RequestLogEntry, error) {
	var row RequestLogRow
	if err := s.db.WithContext(ctx).First(&row, "id = ?", id).Error; err != nil {
		return services.RequestLogEntry{}, translate(err, "find request log "+id)
	}
	return row.domain(), nil
}

// PurgeRequestLogs deletes the entries created before before, in chunks so the
// log writer and other writers are never locked out for long, and returns how many.
func (s *RequestLogStore) PurgeRequestLogs(ctx context.Context, before time.Time) (int64, error) {
	cut := before.UnixMilli()
	var total int64
	for {
		res := s.db.WithContext(ctx).Exec(`DELETE FROM request_logs WHERE rowid IN
			(SELECT rowid FROM request_logs WHERE created_at < ? LIMIT ?)`, cut, purgeChunk)
		if res.Error != nil {
			return total, translate(res.Error, "purge request logs")
		}
		total += res.RowsAffected
		if res.RowsAffected < purgeChunk {
			return total, nil
		}
	}
}

func requestLogToRow(e services.RequestLogEntry) (RequestLogRow, error) {
	attempts := e.AttemptLog
	if attempts == nil {
		attempts = []services.AttemptRecord{}
	}
	attemptLog, err := json.Marshal(attempts)
	if err != nil {
		return RequestLogRow{}, err
	}
	warningList := e.Warnings
	if warningList == nil {
		warningList = []string{}
	}
	warnings, err := json.Marshal(warningList)
	if err != nil {
		return RequestLogRow{}, err
	}
	var bodies *string
	if e.Bodies != nil {
		b, err := json.Marshal(e.Bodies)
		if err != nil {
			return RequestLogRow{}, err
		}
		s := string(b)
		bodies = &s
	}
	method := e.Method
	if method == "" {
		method = "POST"
	}
	return RequestLogRow{
		ID: e.ID, CreatedAt: e.CreatedAt.UnixMilli(), ClientRequestID: e.ClientRequestID,
		APIKeyID: e.APIKeyID, APIKeyName: e.APIKeyName, APIKeyPrefix: e.APIKeyPrefix,
		Method: method, Endpoint: e.Endpoint, InboundFormat: e.InboundFormat,
		Stream: e.Stream, StreamOutcome: e.StreamOutcome,
		RequestedModel: e.RequestedModel, ResolvedKind: e.ResolvedKind, ComboName: e.ComboName, ComboPath: e.ComboPath,
		Strategy: e.Strategy, Provider: e.Provider, Model: e.Model, ConnectionID: e.ConnectionID,
		UpstreamFormat: e.UpstreamFormat, Status: e.Status, Outcome: e.Outcome, ErrorCode: e.ErrorCode,
		Attempts: e.Attempts, AttemptLog: string(attemptLog),
		PromptTokens: e.PromptTokens, CachedTokens: e.CachedTokens, CacheWriteTokens: e.CacheWriteTokens,
		CompletionTokens: e.CompletionTokens, ReasoningTokens: e.ReasoningTokens,
		LatencyMs: e.LatencyMs, TtftMs: e.TtftMs, UpstreamLatencyMs: e.UpstreamLatencyMs,
		Warnings: string(warnings), AffinityHit: e.AffinityHit, LeaseManaged: e.LeaseManaged,
		EmergencyFallback: e.EmergencyFallback, BodiesCaptured: e.BodiesCaptured, Bodies: bodies,
	}, nil
}

// domain maps a row back. Unreadable JSON columns come back empty rather than
// failing the whole list: a log view should still show the rest of the row.
func (r RequestLogRow) domain() services.RequestLogEntry {
	e := services.RequestLogEntry{
		ID: r.ID, CreatedAt: time.UnixMilli(r.CreatedAt).UTC(), ClientRequestID: r.ClientRequestID,
		APIKeyID: r.APIKeyID, APIKeyName: r.APIKeyName, APIKeyPrefix: r.APIKeyPrefix,
		Method: r.Method, Endpoint: r.Endpoint, InboundFormat: r.InboundFormat,
		Stream: r.Stream, StreamOutcome: r.StreamOutcome,
		RequestedModel: r.RequestedModel, ResolvedKind: r.ResolvedKind, ComboName: r.ComboName, ComboPath: r.ComboPath,
		Strategy: r.Strategy, Provider: r.Provider, Model: r.Model, ConnectionID: r.ConnectionID,
		UpstreamFormat: r.UpstreamFormat, Status: r.Status, Outcome: r.Outcome, ErrorCode: r.ErrorCode,
		Attempts: r.Attempts, AttemptLog: []services.AttemptRecord{},
		PromptTokens: r.PromptTokens, CachedTokens: r.CachedTokens, CacheWriteTokens: r.CacheWriteTokens,
		CompletionTokens: r.CompletionTokens, ReasoningTokens: r.ReasoningTokens,
		LatencyMs: r.LatencyMs, TtftMs: r.TtftMs, UpstreamLatencyMs: r.UpstreamLatencyMs,
		Warnings: []string{}, AffinityHit: r.AffinityHit, LeaseManaged: r.LeaseManaged,
		EmergencyFallback: r.EmergencyFallback, BodiesCaptured: r.BodiesCaptured,
	}
	if err := json.Unmarshal([]byte(r.AttemptLog), &e.AttemptLog); err != nil || e.AttemptLog == nil {
		e.AttemptLog = []services.AttemptRecord{}
	}
	if err := json.Unmarshal([]byte(r.Warnings), &e.Warnings); err != nil || e.Warnings == nil {
		e.Warnings = []string{}
	}
	if r.Bodies != nil {
		var b services.CapturedBodies
		if json.Unmarshal([]byte(*r.Bodies), &b) == nil {
			e.Bodies = &b
		}
	}
	return e
}

// insertBuilder assembles one multi-row INSERT into request_logs.
type insertBuilder struct {
	sql  []byte
	args []any
}

func (b *insertBuilder) reset() {
	b.sql = append(b.sql[:0], "INSERT INTO request_logs ("+requestLogColumns+") VALUES "...)
	clear(b.args)
	b.args = b.args[:0]
}

// appendRow writes the parenthesised values of r in requestLogColumns order.
func (b *insertBuilder) appendRow(r *RequestLogRow) {
	b.sql = append(b.sql, '(')
	b.text(r.ID)
	b.int(r.CreatedAt)
	for _, v := range [...]string{r.ClientRequestID, r.APIKeyID, r.APIKeyName, r.APIKeyPrefix, r.Method, r.Endpoint, r.InboundFormat} {
		b.text(v)
	}
	b.bool(r.Stream)
	for _, v := range [...]string{r.StreamOutcome, r.RequestedModel, r.ResolvedKind, r.ComboName, r.ComboPath, r.Strategy,
		r.Provider, r.Model, r.ConnectionID, r.UpstreamFormat} {
		b.text(v)
	}
	b.int(int64(r.Status))
	b.text(r.Outcome)
	b.text(r.ErrorCode)
	b.int(int64(r.Attempts))
	b.text(r.AttemptLog)
	for _, v := range [...]int64{r.PromptTokens, r.CachedTokens, r.CacheWriteTokens, r.CompletionTokens, r.ReasoningTokens, r.LatencyMs} {
		b.int(v)
	}
	if r.TtftMs == nil {
		b.null()
	} else {
		b.int(*r.TtftMs)
	}
	b.int(r.UpstreamLatencyMs)
	b.text(r.Warnings)
	for _, v := range [...]bool{r.AffinityHit, r.LeaseManaged, r.EmergencyFallback, r.BodiesCaptured} {
		b.bool(v)
	}
	if r.Bodies == nil {
		b.null()
	} else {
		b.text(*r.Bodies)
	}
	b.sql[len(b.sql)-1] = ')' // replaces the last separator
}

// text writes s as a quoted SQL literal (a quote is doubled; SQLite has no
// other escapes), or as a bound parameter when it is long or holds a NUL,
// which would end the statement text early.
func (b *insertBuilder) text(s string) {
	if len(s) > maxInlineText || strings.IndexByte(s, 0) >= 0 {
		b.sql = append(b.sql, "?,"...)
		b.args = append(b.args, s)
		return
	}
	b.sql = append(b.sql, '\'')
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			break
		}
		b.sql = append(append(b.sql, s[:i+1]...), '\'')
		s = s[i+1:]
	}
	b.sql = append(append(b.sql, s...), '\'', ',')
}

func (b *insertBuilder) int(n int64) {
	b.sql = append(strconv.AppendInt(b.sql, n, 10), ',')
}

func (b *insertBuilder) bool(v bool) {
	if v {
		b.sql = append(b.sql, "1,"...)
	} else {
		b.sql = append(b.sql, "0,"...)
	}
}

func (b *insertBuilder) null() { b.sql = append(b.sql, "NULL,"...) }
