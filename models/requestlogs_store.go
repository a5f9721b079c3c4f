package models

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/migrations"
	"switchyard/models/sqlitefast"
	"switchyard/services"
)

// requestLogColumns lists request_logs in the order encodeRequestLogs writes values.
const requestLogColumns = "id, created_at, client_request_id, api_key_id, api_key_name, api_key_prefix, method, endpoint, " +
	"inbound_format, stream, stream_outcome, requested_model, resolved_kind, combo_name, combo_path, strategy, " +
	"provider, model, connection_id, upstream_format, status, outcome, error_code, attempts, attempt_log, " +
	"prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens, reasoning_tokens, latency_ms, ttft_ms, " +
	"upstream_latency_ms, warnings, affinity_hit, lease_managed, emergency_fallback, bodies_captured, bodies, " +
	"estimated_cost_nano_usd, attempted_connections, attempted_providers, waits, skips, ended_at"

// requestLogColumnCount is the number of names in requestLogColumns.
const requestLogColumnCount = 45

// purgeChunk bounds how long one retention DELETE holds the single write connection.
const purgeChunk = 5000

// RequestLogStore implements services.RequestLogSink, services.RequestLogStore
// and services.RequestLogPurger on request_logs.
type RequestLogStore struct {
	db *gorm.DB

	// mu serialises writes so they can share batch's buffers.
	mu    sync.Mutex
	batch sqlitefast.Batch
	// fast is cleared for good the first time the C-API path reports
	// sqlitefast.ErrUnsupported; from then on batches go through GORM.
	fast      atomic.Bool
	fallbacks atomic.Int64
	onSlow    func(reason error)
	// exec is sqlitefast.Exec (tests replace it to force the fallback).
	exec func(context.Context, *sql.Conn, *sqlitefast.Insert, *sqlitefast.Batch) error
	// pg: the database is PostgreSQL.
	pg bool
}

var (
	_ services.RequestLogSink   = (*RequestLogStore)(nil)
	_ services.RequestLogStore  = (*RequestLogStore)(nil)
	_ services.RequestLogPurger = (*RequestLogStore)(nil)
)

// requestLogInsert is the fast path's INSERT family; re-delivered ids are
// skipped.
var requestLogInsert = &sqlitefast.Insert{Prefix: "INSERT INTO request_logs (" + requestLogColumns + ") VALUES ",
	Columns: requestLogColumnCount, Suffix: " ON CONFLICT (id) DO NOTHING"}

// fallbackBatchRows bounds the rows of one GORM INSERT (43 columns each,
// well under SQLite's 32766 bound parameters).
const fallbackBatchRows = 64

// NewRequestLogStore builds the repository. On PostgreSQL the batches are
// multi-row INSERTs through GORM from the start (the C-API path is SQLite's
// own); that is the PostgreSQL sink, not a fallback, and is not counted as
// one.
func NewRequestLogStore(db *gorm.DB) *RequestLogStore {
	s := &RequestLogStore{db: db, exec: sqlitefast.Exec, pg: Dialect(db) == migrations.Postgres}
	s.fast.Store(!s.pg)
	return s
}

// OnSlowPath registers f, told once why the store left the C-API path for
// the GORM batch insert (the app logs it).
func (s *RequestLogStore) OnSlowPath(f func(reason error)) { s.onSlow = f }

// FallbackBatches counts the batches written through GORM because the
// C-API path was unavailable.
func (s *RequestLogStore) FallbackBatches() int64 { return s.fallbacks.Load() }

// WriteRequestLogs inserts a batch in one transaction. Entries whose id is
// already stored are skipped, so a re-delivered batch is harmless.
//
// The rows go through SQLite's C API (package sqlitefast), which skips
// database/sql's statement parsing: most of the cost of a logged request.
// When that path is unavailable (another driver, or driver versions it was
// not verified against) the store switches for good to a GORM batch insert
// with the same rows and the same transaction: slower, never a lost log.
func (s *RequestLogStore) WriteRequestLogs(ctx context.Context, entries []services.RequestLogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fast.Load() {
		err := s.writeFast(ctx, entries)
		if !errors.Is(err, sqlitefast.ErrUnsupported) {
			return translate(err, fmt.Sprintf("write %d request logs", len(entries)))
		}
		s.fast.Store(false)
		if s.onSlow != nil {
			s.onSlow(err)
		}
	}
	if !s.pg {
		s.fallbacks.Add(1)
	}
	return translate(s.writeGORM(ctx, entries), fmt.Sprintf("write %d request logs", len(entries)))
}

// writeFast writes entries through the C API on the pool's connection.
func (s *RequestLogStore) writeFast(ctx context.Context, entries []services.RequestLogEntry) error {
	defer s.batch.Release()
	if err := encodeRequestLogs(&s.batch, entries); err != nil {
		return fmt.Errorf("models: write request logs: %w", err)
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return s.exec(ctx, conn, requestLogInsert, &s.batch)
}

// writeGORM is the fallback: multi-row INSERTs of fallbackBatchRows rows in
// one transaction, ids already stored skipped.
func (s *RequestLogStore) writeGORM(ctx context.Context, entries []services.RequestLogEntry) error {
	rows := requestLogRows(entries)
	if s.pg {
		for i := range rows {
			postgresRow(&rows[i])
		}
		return s.writePostgres(ctx, rows)
	}
	return runTx(ctx, s.db, func(tx *gorm.DB) error {
		return tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(&rows, fallbackBatchRows).Error
	})
}

// pgBatchRows bounds the rows of one PostgreSQL INSERT (43 bound
// parameters each, far under the protocol's 65,535).
const pgBatchRows = 256

// pgInsertSQL[n] is the INSERT of n rows, built once per size.
var pgInsertSQL sync.Map // int → string

func pgInsert(n int) string {
	if q, ok := pgInsertSQL.Load(n); ok {
		return q.(string)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO request_logs (" + requestLogColumns + ") VALUES ")
	p := 1
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range requestLogColumnCount {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(p))
			p++
		}
		b.WriteByte(')')
	}
	b.WriteString(" ON CONFLICT (id) DO NOTHING")
	q := b.String()
	pgInsertSQL.Store(n, q)
	return q
}

// writePostgres is the PostgreSQL sink: multi-row INSERTs with the values
// bound in column order, in one transaction. GORM's CreateInBatches did the
// same through reflection and hooks per row, which made a logged request
// cost noticeably more CPU in shared mode than in embedded mode.
func (s *RequestLogStore) writePostgres(ctx context.Context, rows []RequestLogRow) error {
	args := make([]any, 0, min(len(rows), pgBatchRows)*requestLogColumnCount)
	return runTx(ctx, s.db, func(tx *gorm.DB) error {
		for start := 0; start < len(rows); start += pgBatchRows {
			chunk := rows[start:min(start+pgBatchRows, len(rows))]
			args = args[:0]
			for i := range chunk {
				r := &chunk[i]
				args = append(args, r.ID, r.CreatedAt, r.ClientRequestID, r.APIKeyID, r.APIKeyName, r.APIKeyPrefix, r.Method,
					r.Endpoint, r.InboundFormat, r.Stream, r.StreamOutcome, r.RequestedModel, r.ResolvedKind, r.ComboName,
					r.ComboPath, r.Strategy, r.Provider, r.Model, r.ConnectionID, r.UpstreamFormat, r.Status, r.Outcome,
					r.ErrorCode, r.Attempts, r.AttemptLog, r.PromptTokens, r.CachedTokens, r.CacheWriteTokens,
					r.CompletionTokens, r.ReasoningTokens, r.LatencyMs, r.TtftMs, r.UpstreamLatencyMs, r.Warnings,
					r.AffinityHit, r.LeaseManaged, r.EmergencyFallback, r.BodiesCaptured, r.Bodies,
					r.EstimatedCostNanoUSD, r.AttemptedConnections, r.AttemptedProviders, r.Waits, r.Skips, r.EndedAt)
			}
			// Straight to the transaction's connection: GORM's statement
			// builder would walk the ~10,000 values once more.
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, pgInsert(len(chunk)), args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListRequestLogs returns one page newest first, keyset-paginated on (created_at, id);
// with After, the requests that ended since, by (ended_at, id). Bodies are not read.
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
	switch q.Outcome {
	case "":
	case services.RequestOutcomeEmergencyFallback:
		// Served by the fallback, or tried it and failed.
		tx = tx.Where("(outcome = ? OR emergency_fallback = ?)", q.Outcome, true)
	default:
		tx = tx.Where("outcome = ?", s.text(q.Outcome))
	}
	if q.Model != "" {
		tx = tx.Where("(requested_model = ? OR combo_name = ?)", s.text(q.Model), s.text(q.Model))
	}
	// Provider and connection match what served and what any attempt was
	// dispatched to, so a failing connection's rows include requests that
	// another connection finally served.
	if q.Provider != "" {
		tx = tx.Where(`(provider = ? OR attempted_providers LIKE ? ESCAPE '\')`, s.text(q.Provider), listedPattern(s.text(q.Provider)))
	}
	if q.ConnectionID != "" {
		tx = tx.Where(`(connection_id = ? OR attempted_connections LIKE ? ESCAPE '\')`, s.text(q.ConnectionID), listedPattern(s.text(q.ConnectionID)))
	}
	if q.KeyID != "" {
		tx = tx.Where("api_key_id = ?", s.text(q.KeyID))
	}
	if q.Stream != nil {
		tx = tx.Where("stream = ?", *q.Stream)
	}
	if q.RequestID != "" {
		tx = tx.Where("(id = ? OR client_request_id = ?)", s.text(q.RequestID), s.text(q.RequestID))
	}
	var rows []RequestLogRow
	if q.After != "" {
		err = tailPage(tx, q.After, q.Limit, &rows)
	} else {
		err = keysetPage(tx, q.Cursor, q.Limit, &rows)
	}
	if err != nil {
		return services.RequestLogPage{}, translate(err, "list request logs")
	}
	items, next := pageOf(rows, q.Limit, RequestLogRow.domain, func(e services.RequestLogEntry) (time.Time, string) { return e.CreatedAt, e.ID })
	return services.RequestLogPage{Items: items, NextCursor: next}, nil
}

// keysetPage reads one page newest first, in (created_at DESC, id DESC)
// order: strictly older than cursor (the next page), and one row more than
// limit (which says there are more). The created_at term lets the database
// range-scan the (created_at DESC, id DESC) index.
func keysetPage[R any](tx *gorm.DB, cursor string, limit int, rows *[]R) error {
	if cursor != "" {
		c, err := services.ParseRequestLogCursor(cursor)
		if err != nil {
			return services.Invalid("cursor", "is not a cursor returned by this list")
		}
		t := c.CreatedAt.UnixMilli()
		tx = tx.Where("created_at <= ? AND (created_at < ? OR id < ?)", t, t, c.ID)
	}
	return tx.Order("created_at DESC, id DESC").Limit(limit + 1).Find(rows).Error
}

// tailPage reads the requests that ended strictly after the position after
// ((ended_at, id), services.RequestLogQuery.After), those that ended last
// first, and one row more than limit, on the (ended_at DESC, id DESC) index.
func tailPage(tx *gorm.DB, after string, limit int, rows *[]RequestLogRow) error {
	c, err := services.ParseRequestLogCursor(after)
	if err != nil {
		return services.Invalid("after", "is not a cursor returned by this list")
	}
	t := c.CreatedAt.UnixMilli()
	return tx.Where("ended_at >= ? AND (ended_at > ? OR id > ?)", t, t, c.ID).
		Order("ended_at DESC, id DESC").Limit(limit + 1).Find(rows).Error
}

// pageOf maps the rows of keysetPage and, when it read one row more than
// limit, drops it and returns the cursor after the last item kept.
func pageOf[R, T any](rows []R, limit int, domain func(R) T, key func(T) (time.Time, string)) ([]T, string) {
	items := make([]T, 0, min(len(rows), limit))
	next := ""
	for i, r := range rows {
		if i == limit {
			at, id := key(items[len(items)-1])
			next = services.RequestLogCursor{CreatedAt: at, ID: id}.String()
			break
		}
		items = append(items, domain(r))
	}
	return items, next
}

// FindRequestLog returns one entry with its captured bodies.
func (s *RequestLogStore) FindRequestLog(ctx context.Context, id string) (services.RequestLogEntry, error) {
	var row RequestLogRow
	if err := s.db.WithContext(ctx).First(&row, "id = ?", s.text(id)).Error; err != nil {
		return services.RequestLogEntry{}, translate(err, "find request log "+id)
	}
	return row.domain(), nil
}

// PurgeRequestLogs deletes the entries created before before, in chunks so the
// log writer and other writers are never locked out for long, and returns how many.
//
// On PostgreSQL every replica runs the retention job, but only the one that
// holds the purge's advisory lock deletes (the others return 0): the chunks
// of two replicas would otherwise fight over the same rows.
func (s *RequestLogStore) PurgeRequestLogs(ctx context.Context, before time.Time) (int64, error) {
	cut := before.UnixMilli()
	if s.pg {
		return s.purgePostgres(ctx, cut)
	}
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

func (s *RequestLogStore) purgePostgres(ctx context.Context, cut int64) (int64, error) {
	var total int64
	for {
		var n int64
		err := runTx(ctx, s.db, func(tx *gorm.DB) error {
			var mine bool
			if err := tx.Raw(`SELECT pg_try_advisory_xact_lock(hashtext('request_log_purge'))`).Scan(&mine).Error; err != nil || !mine {
				return err
			}
			res := tx.Exec(`DELETE FROM request_logs WHERE id IN
				(SELECT id FROM request_logs WHERE created_at < ? LIMIT ?)`, cut, purgeChunk)
			n = res.RowsAffected
			return res.Error
		})
		if err != nil {
			return total, translate(err, "purge request logs")
		}
		total += n
		if n < purgeChunk {
			return total, nil
		}
	}
}

// postgresRow makes every text column of r storable in PostgreSQL
// (PostgresText); the JSON columns are already valid UTF-8 without NULs.
func postgresRow(r *RequestLogRow) {
	for _, f := range []*string{&r.ID, &r.ClientRequestID, &r.APIKeyID, &r.APIKeyName, &r.APIKeyPrefix, &r.Method,
		&r.Endpoint, &r.InboundFormat, &r.StreamOutcome, &r.RequestedModel, &r.ResolvedKind, &r.ComboName,
		&r.ComboPath, &r.Strategy, &r.Provider, &r.Model, &r.ConnectionID, &r.UpstreamFormat, &r.Outcome, &r.ErrorCode,
		&r.AttemptedConnections, &r.AttemptedProviders} {
		*f = PostgresText(*f)
	}
}

// text is how a query compares a client-given value with stored text.
func (s *RequestLogStore) text(v string) string {
	if s.pg {
		return PostgresText(v)
	}
	return v
}

// listedPattern is the LIKE pattern finding v in a ",a,b," list, with the
// wildcards of LIKE (connection ids hold "_") escaped.
func listedPattern(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%," + r.Replace(v) + ",%"
}

// appendAttempted appends the ",a,b," list of the distinct values field
// picks from the attempts ("" when none).
func appendAttempted(b []byte, log []services.AttemptRecord, field func(*services.AttemptRecord) string) []byte {
	start := len(b)
	for i := range log {
		v := field(&log[i])
		if v == "" || strings.Contains(v, ",") {
			continue
		}
		if listed(b[start:], v) {
			continue
		}
		if len(b) == start {
			b = append(b, ',')
		}
		b = append(append(b, v...), ',')
	}
	return b
}

// listed reports whether v is an item of the ",a,b," list.
func listed(list []byte, v string) bool {
	for len(list) > 1 {
		list = list[1:]
		i := bytes.IndexByte(list, ',')
		if i < 0 {
			return false
		}
		if string(list[:i]) == v {
			return true
		}
		list = list[i:]
	}
	return false
}

func attemptConnection(a *services.AttemptRecord) string { return a.ConnectionID }
func attemptProvider(a *services.AttemptRecord) string   { return a.Provider }

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
	if r.EstimatedCostNanoUSD != nil {
		e.EstimatedCost = services.Cost{NanoUSD: *r.EstimatedCostNanoUSD, Known: true}
	}
	if err := json.Unmarshal([]byte(r.AttemptLog), &e.AttemptLog); err != nil || e.AttemptLog == nil {
		e.AttemptLog = []services.AttemptRecord{}
	}
	if r.Waits != nil {
		if err := json.Unmarshal([]byte(*r.Waits), &e.Waits); err != nil || e.Waits == nil {
			e.Waits = []services.WaitRecord{}
		}
	}
	if r.Skips != nil {
		if err := json.Unmarshal([]byte(*r.Skips), &e.Skips); err != nil {
			e.Skips = nil
		}
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

// encodeRequestLogs appends the values of entries to b, requestLogColumnCount
// per row in requestLogColumns order; the JSON columns are encoded here
// (appendAttemptLog, appendWarnings, appendBodies).
func encodeRequestLogs(b *sqlitefast.Batch, entries []services.RequestLogEntry) error {
	b.Reset(len(entries) * requestLogColumnCount)
	for i := range entries {
		x := &entries[i]
		method := x.Method
		if method == "" {
			method = "POST"
		}
		b.Str(x.ID)
		b.Int(x.CreatedAt.UnixMilli())
		for _, v := range [...]string{x.ClientRequestID, x.APIKeyID, x.APIKeyName, x.APIKeyPrefix, method, x.Endpoint, x.InboundFormat} {
			b.Str(v)
		}
		b.Bool(x.Stream)
		for _, v := range [...]string{x.StreamOutcome, x.RequestedModel, x.ResolvedKind, x.ComboName, x.ComboPath, x.Strategy,
			x.Provider, x.Model, x.ConnectionID, x.UpstreamFormat} {
			b.Str(v)
		}
		b.Int(int64(x.Status))
		b.Str(x.Outcome)
		b.Str(x.ErrorCode)
		b.Int(int64(x.Attempts))
		off := len(b.Text)
		b.Text = appendAttemptLog(b.Text, x.AttemptLog)
		b.Span(off)
		for _, v := range [...]int64{x.PromptTokens, x.CachedTokens, x.CacheWriteTokens, x.CompletionTokens, x.ReasoningTokens, x.LatencyMs} {
			b.Int(v)
		}
		if x.TtftMs == nil {
			b.Null()
		} else {
			b.Int(*x.TtftMs)
		}
		b.Int(x.UpstreamLatencyMs)
		off = len(b.Text)
		b.Text = appendWarnings(b.Text, x.Warnings)
		b.Span(off)
		for _, v := range [...]bool{x.AffinityHit, x.LeaseManaged, x.EmergencyFallback, x.BodiesCaptured} {
			b.Bool(v)
		}
		if x.Bodies == nil {
			b.Null()
		} else {
			off = len(b.Text)
			b.Text = appendBodies(b.Text, x.Bodies)
			b.Span(off)
		}
		if x.EstimatedCost.Known {
			b.Int(x.EstimatedCost.NanoUSD)
		} else {
			b.Null()
		}
		off = len(b.Text)
		b.Text = appendAttempted(b.Text, x.AttemptLog, attemptConnection)
		b.Span(off)
		off = len(b.Text)
		b.Text = appendAttempted(b.Text, x.AttemptLog, attemptProvider)
		b.Span(off)
		if x.Waits == nil {
			b.Null()
		} else {
			off = len(b.Text)
			b.Text = appendWaits(b.Text, x.Waits)
			b.Span(off)
		}
		if len(x.Skips) == 0 {
			b.Null()
		} else {
			off = len(b.Text)
			b.Text = appendSkips(b.Text, x.Skips)
			b.Span(off)
		}
		b.Int(x.CreatedAt.UnixMilli() + x.LatencyMs)
	}
	if len(b.Params) != len(entries)*requestLogColumnCount {
		return fmt.Errorf("encoded %d values for %d rows of %d columns", len(b.Params), len(entries), requestLogColumnCount)
	}
	return nil
}

// requestLogRows is the fallback's form of entries: the rows GORM inserts,
// with the JSON columns encoded as the fast path encodes them.
func requestLogRows(entries []services.RequestLogEntry) []RequestLogRow {
	rows := make([]RequestLogRow, len(entries))
	var buf []byte
	for i := range entries {
		x := &entries[i]
		method := x.Method
		if method == "" {
			method = "POST"
		}
		buf = appendAttemptLog(buf[:0], x.AttemptLog)
		attempts := string(buf)
		buf = appendWarnings(buf[:0], x.Warnings)
		warnings := string(buf)
		var bodies *string
		if x.Bodies != nil {
			buf = appendBodies(buf[:0], x.Bodies)
			s := string(buf)
			bodies = &s
		}
		var cost *int64
		if x.EstimatedCost.Known {
			n := x.EstimatedCost.NanoUSD
			cost = &n
		}
		buf = appendAttempted(buf[:0], x.AttemptLog, attemptConnection)
		attemptedConns := string(buf)
		buf = appendAttempted(buf[:0], x.AttemptLog, attemptProvider)
		attemptedProviders := string(buf)
		var waits *string
		if x.Waits != nil {
			buf = appendWaits(buf[:0], x.Waits)
			w := string(buf)
			waits = &w
		}
		ended := x.CreatedAt.UnixMilli() + x.LatencyMs
		var skips *string
		if len(x.Skips) > 0 {
			buf = appendSkips(buf[:0], x.Skips)
			sk := string(buf)
			skips = &sk
		}
		rows[i] = RequestLogRow{ID: x.ID, CreatedAt: x.CreatedAt.UnixMilli(), ClientRequestID: x.ClientRequestID,
			APIKeyID: x.APIKeyID, APIKeyName: x.APIKeyName, APIKeyPrefix: x.APIKeyPrefix, Method: method,
			Endpoint: x.Endpoint, InboundFormat: x.InboundFormat, Stream: x.Stream, StreamOutcome: x.StreamOutcome,
			RequestedModel: x.RequestedModel, ResolvedKind: x.ResolvedKind, ComboName: x.ComboName, ComboPath: x.ComboPath,
			Strategy: x.Strategy, Provider: x.Provider, Model: x.Model, ConnectionID: x.ConnectionID,
			UpstreamFormat: x.UpstreamFormat, Status: x.Status, Outcome: x.Outcome, ErrorCode: x.ErrorCode,
			Attempts: x.Attempts, AttemptLog: attempts, PromptTokens: x.PromptTokens, CachedTokens: x.CachedTokens,
			CacheWriteTokens: x.CacheWriteTokens, CompletionTokens: x.CompletionTokens, ReasoningTokens: x.ReasoningTokens,
			LatencyMs: x.LatencyMs, TtftMs: x.TtftMs, UpstreamLatencyMs: x.UpstreamLatencyMs, Warnings: warnings,
			AffinityHit: x.AffinityHit, LeaseManaged: x.LeaseManaged, EmergencyFallback: x.EmergencyFallback,
			BodiesCaptured: x.BodiesCaptured, Bodies: bodies, EstimatedCostNanoUSD: cost,
			AttemptedConnections: attemptedConns, AttemptedProviders: attemptedProviders, Waits: waits, Skips: skips,
			EndedAt: &ended}
	}
	return rows
}

// The JSON columns are written byte for byte as encoding/json.Marshal writes
// them (TestRequestLogJSONColumnsMatchEncodingJSON), without its reflection.

// appendAttemptLog appends log as a JSON array; nil is "[]".
func appendAttemptLog(b []byte, log []services.AttemptRecord) []byte {
	b = append(b, '[')
	for i := range log {
		a := &log[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `{"seq":`...), int64(a.Seq), 10)
		b = appendJSONString(append(b, `,"targetId":`...), a.TargetID)
		b = appendJSONString(append(b, `,"provider":`...), a.Provider)
		b = appendJSONString(append(b, `,"model":`...), a.Model)
		b = appendJSONString(append(b, `,"connectionId":`...), a.ConnectionID)
		b = appendJSONString(append(b, `,"outcome":`...), a.Outcome)
		b = appendJSONString(append(b, `,"detail":`...), a.Detail)
		b = strconv.AppendInt(append(b, `,"upstreamStatus":`...), int64(a.UpstreamStatus), 10)
		b = appendJSONString(append(b, `,"errorCode":`...), a.ErrorCode)
		b = appendJSONString(append(b, `,"retryHintSource":`...), a.RetryHintSource)
		b = strconv.AppendInt(append(b, `,"latencyMs":`...), a.LatencyMs, 10)
		b = strconv.AppendInt(append(b, `,"startOffsetMs":`...), a.StartOffsetMs, 10)
		b = strconv.AppendInt(append(b, `,"hintMs":`...), a.HintMs, 10)
		b = append(b, `,"effects":`...)
		if a.Effects == nil {
			b = append(b, "null"...)
		} else {
			b = appendEffects(b, a.Effects)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendEffects appends an attempt's effects as a JSON array.
func appendEffects(b []byte, effects []services.AttemptEffect) []byte {
	b = append(b, '[')
	for i := range effects {
		f := &effects[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(append(b, `{"kind":`...), f.Kind)
		b = strconv.AppendInt(append(b, `,"untilMs":`...), f.UntilMs, 10)
		b = appendJSONString(append(b, `,"lockKey":`...), f.LockKey)
		b = appendJSONString(append(b, `,"terminalStatus":`...), f.TerminalStatus)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendWaits appends a request's waits as a JSON array.
func appendWaits(b []byte, waits []services.WaitRecord) []byte {
	b = append(b, '[')
	for i := range waits {
		w := &waits[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(append(b, `{"kind":`...), w.Kind)
		b = appendJSONString(append(b, `,"reason":`...), w.Reason)
		b = appendJSONString(append(b, `,"target":`...), w.Target)
		b = strconv.AppendInt(append(b, `,"startOffsetMs":`...), w.StartOffsetMs, 10)
		b = strconv.AppendInt(append(b, `,"waitedMs":`...), w.WaitedMs, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendSkips appends the targets a request skipped as a JSON array.
func appendSkips(b []byte, skips []services.SkipRecord) []byte {
	b = append(b, '[')
	for i := range skips {
		k := &skips[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(append(b, `{"target":`...), k.Target)
		b = appendJSONString(append(b, `,"connectionId":`...), k.ConnectionID)
		b = appendJSONString(append(b, `,"reason":`...), k.Reason)
		b = appendJSONString(append(b, `,"detail":`...), k.Detail)
		b = strconv.AppendInt(append(b, `,"retryAfterMs":`...), k.RetryAfterMs, 10)
		b = strconv.AppendInt(append(b, `,"atOffsetMs":`...), k.AtOffsetMs, 10)
		b = strconv.AppendInt(append(b, `,"afterAttempts":`...), int64(k.AfterAttempts), 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendWarnings appends w as a JSON array; nil is "[]".
func appendWarnings(b []byte, w []string) []byte {
	b = append(b, '[')
	for i, s := range w {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendBodies appends c as a JSON object without its nil members.
func appendBodies(b []byte, c *services.CapturedBodies) []byte {
	b = append(b, '{')
	for _, m := range [...]struct {
		key  string
		body *services.CapturedBody
	}{{`"request":`, c.Request}, {`"upstreamRequest":`, c.UpstreamRequest}, {`"response":`, c.Response}} {
		if m.body == nil {
			continue
		}
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = appendJSONString(append(append(b, m.key...), `{"text":`...), m.body.Text)
		b = append(strconv.AppendBool(append(b, `,"truncated":`...), m.body.Truncated), '}')
	}
	return append(b, '}')
}

// jsonSafe marks the ASCII bytes encoding/json copies into a string as they
// are (it escapes <, > and & for HTML).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = !strings.ContainsRune(`"\<>&`, c)
	}
	return t
}()

// appendJSONString appends s quoted as encoding/json does: HTML characters,
// control characters, U+2028 and U+2029 escaped, invalid UTF-8 replaced by
// U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
