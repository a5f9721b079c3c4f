package models

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"gorm.io/gorm"
	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"

	"switchyard/services"
)

// requestLogColumns lists request_logs in the order logEncoder writes values.
const requestLogColumns = "id, created_at, client_request_id, api_key_id, api_key_name, api_key_prefix, method, endpoint, " +
	"inbound_format, stream, stream_outcome, requested_model, resolved_kind, combo_name, combo_path, strategy, " +
	"provider, model, connection_id, upstream_format, status, outcome, error_code, attempts, attempt_log, " +
	"prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens, reasoning_tokens, latency_ms, ttft_ms, " +
	"upstream_latency_ms, warnings, affinity_hit, lease_managed, emergency_fallback, bodies_captured, bodies"

// requestLogColumnCount is the number of names in requestLogColumns.
const requestLogColumnCount = 39

// purgeChunk bounds how long one retention DELETE holds the single write connection.
const purgeChunk = 5000

// RequestLogStore implements services.RequestLogSink, services.RequestLogStore
// and services.RequestLogPurger on request_logs.
type RequestLogStore struct {
	db *gorm.DB

	// mu serialises writes so they can share enc's buffers.
	mu  sync.Mutex
	enc logEncoder
}

var (
	_ services.RequestLogSink   = (*RequestLogStore)(nil)
	_ services.RequestLogStore  = (*RequestLogStore)(nil)
	_ services.RequestLogPurger = (*RequestLogStore)(nil)
)

// NewRequestLogStore builds the repository.
func NewRequestLogStore(db *gorm.DB) *RequestLogStore { return &RequestLogStore{db: db} }

// WriteRequestLogs inserts a batch in one transaction. Entries whose id is
// already stored are skipped, so a re-delivered batch is harmless.
//
// The rows go through SQLite's C API on the pool's connection rather than
// through database/sql, whose driver parses every statement anew: statement
// text made up most of the cost of a logged request. The connection keeps
// one prepared INSERT per power-of-two row count up to maxInsertRows
// (logConn), so after the first batches nothing is parsed; a batch binds its
// values to them and steps them inside BEGIN IMMEDIATE … COMMIT, exactly the
// transaction database/sql would have run.
func (s *RequestLogStore) WriteRequestLogs(ctx context.Context, entries []services.RequestLogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.enc.release()
	if err := s.enc.encode(entries); err != nil {
		return fmt.Errorf("models: write request logs: %w", err)
	}
	err := s.insert(ctx)
	return translate(err, fmt.Sprintf("write %d request logs", len(entries)))
}

// insert writes what s.enc holds in one transaction on the pool's connection.
func (s *RequestLogStore) insert(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		lc, err := logConnFor(dc)
		if err != nil {
			return err
		}
		// The driver's own transaction: BEGIN with the DSN's _txlock mode.
		begin, ok := dc.(driver.ConnBeginTx)
		if !ok {
			return fmt.Errorf("request logs: %T cannot begin a transaction", dc)
		}
		tx, err := begin.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return err
		}
		if err = lc.insert(ctx, &s.enc); err == nil {
			err = ctx.Err() // as database/sql would, refuse to commit once ctx has ended
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil && lc.inTransaction() {
			if rbErr := tx.Rollback(); rbErr != nil && lc.inTransaction() {
				// ErrBadConn makes database/sql close the connection, which
				// rolls back, rather than pool it with the transaction open.
				return errors.Join(err, fmt.Errorf("rollback: %w", rbErr), driver.ErrBadConn)
			}
		}
		return err
	})
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

// logParam is one bound value of an INSERT: an integer, a NULL, or a text
// held in logEncoder.text[v:v+n].
type logParam struct {
	v int64 // the integer, or the text's offset
	n int   // the text's length, or paramInt or paramNull
}

const (
	paramInt  = -1
	paramNull = -2
)

// maxKeptText is the most text a logEncoder or logConn keeps allocated
// between batches; a batch of large captured bodies does not pin its buffers.
const maxKeptText = 4 << 20

// logEncoder holds the values of a batch: requestLogColumnCount per row in
// requestLogColumns order, every text (the JSON columns included) in one
// buffer that logConn copies to C memory in one piece.
type logEncoder struct {
	params []logParam
	text   []byte
}

func (e *logEncoder) encode(entries []services.RequestLogEntry) error {
	e.params = slices.Grow(e.params[:0], len(entries)*requestLogColumnCount)
	e.text = e.text[:0]
	for i := range entries {
		x := &entries[i]
		method := x.Method
		if method == "" {
			method = "POST"
		}
		e.str(x.ID)
		e.int(x.CreatedAt.UnixMilli())
		for _, v := range [...]string{x.ClientRequestID, x.APIKeyID, x.APIKeyName, x.APIKeyPrefix, method, x.Endpoint, x.InboundFormat} {
			e.str(v)
		}
		e.bool(x.Stream)
		for _, v := range [...]string{x.StreamOutcome, x.RequestedModel, x.ResolvedKind, x.ComboName, x.ComboPath, x.Strategy,
			x.Provider, x.Model, x.ConnectionID, x.UpstreamFormat} {
			e.str(v)
		}
		e.int(int64(x.Status))
		e.str(x.Outcome)
		e.str(x.ErrorCode)
		e.int(int64(x.Attempts))
		off := len(e.text)
		e.text = appendAttemptLog(e.text, x.AttemptLog)
		e.span(off)
		for _, v := range [...]int64{x.PromptTokens, x.CachedTokens, x.CacheWriteTokens, x.CompletionTokens, x.ReasoningTokens, x.LatencyMs} {
			e.int(v)
		}
		if x.TtftMs == nil {
			e.null()
		} else {
			e.int(*x.TtftMs)
		}
		e.int(x.UpstreamLatencyMs)
		off = len(e.text)
		e.text = appendWarnings(e.text, x.Warnings)
		e.span(off)
		for _, v := range [...]bool{x.AffinityHit, x.LeaseManaged, x.EmergencyFallback, x.BodiesCaptured} {
			e.bool(v)
		}
		if x.Bodies == nil {
			e.null()
		} else {
			off = len(e.text)
			e.text = appendBodies(e.text, x.Bodies)
			e.span(off)
		}
	}
	if len(e.params) != len(entries)*requestLogColumnCount {
		return fmt.Errorf("encoded %d values for %d rows of %d columns", len(e.params), len(entries), requestLogColumnCount)
	}
	return nil
}

// release drops buffers a batch of large entries grew.
func (e *logEncoder) release() {
	if cap(e.text) > maxKeptText {
		e.text = nil
	}
	if cap(e.params) > 1024*requestLogColumnCount {
		e.params = nil
	}
}

func (e *logEncoder) str(s string) {
	e.params = append(e.params, logParam{v: int64(len(e.text)), n: len(s)})
	e.text = append(e.text, s...)
}

// span records e.text[off:] as the next text value.
func (e *logEncoder) span(off int) {
	e.params = append(e.params, logParam{v: int64(off), n: len(e.text) - off})
}

func (e *logEncoder) int(v int64) { e.params = append(e.params, logParam{v: v, n: paramInt}) }

func (e *logEncoder) bool(v bool) {
	if v {
		e.int(1)
	} else {
		e.int(0)
	}
}

func (e *logEncoder) null() { e.params = append(e.params, logParam{n: paramNull}) }

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

// maxInsertRows is the most rows one INSERT writes. A batch is written as
// INSERTs of the powers of two that add up to its length, at most
// maxInsertRows each, so the connection keeps at most insertSizes prepared
// statements and a full writer batch of 256 runs the 64-row one four times.
// Once nothing is parsed, 64 rows per step instead of 1 still save 10-15 %
// of the CPU (the set-up of each step); 256 save nothing more measurable, and
// a statement's memory grows with its rows (~210 KB for 64, ~480 KB for all
// seven sizes).
const (
	maxInsertRows = 1 << (insertSizes - 1)
	insertSizes   = 7
)

// insertSQL is the INSERT of rows rows of bound parameters.
func insertSQL(rows int) string {
	row := "(" + strings.Repeat("?,", requestLogColumnCount-1) + "?)"
	return "INSERT INTO request_logs (" + requestLogColumns + ") VALUES " +
		strings.Repeat(row+",", rows-1) + row + " ON CONFLICT (id) DO NOTHING"
}

// logConn is the request log writer's state on one SQLite connection: its
// prepared INSERTs (stmts[j] writes 1<<j rows) and a C copy of the batch's
// texts, which the statements bind without copying (SQLITE_STATIC). It lives
// as long as the connection: a SQLITE_TRACE_CLOSE hook finalizes the
// statements when the connection closes, before SQLite checks that none is
// left, so closing works as it did without them.
type logConn struct {
	tls      *libc.TLS
	db       uintptr // sqlite3*
	stmts    [insertSizes]uintptr
	arena    uintptr
	arenaCap int
	pins     [len(allocatorPins)]uintptr
}

// allocatorPins are the sizes of the C blocks a logConn holds only so that
// libc's allocator keeps a page of their size classes mapped. It hands out
// blocks up to 256 KiB from 1 MiB pages of one size class and unmaps a page
// as soon as its last block is freed, so SQLite's short-lived scratch space
// for splitting B-tree pages (12-24 KiB) and for multi-row statements'
// in-memory statement journals (64 KiB chunks) cost an mmap, page faults and
// an munmap per use: a quarter to a third of the CPU of a batch
// (BenchmarkWriteRequestLogs profiles). One held block per class keeps its page, for every statement on
// any connection.
var allocatorPins = [...]int{12 << 10, 24 << 10, 96 << 10}

// logConns maps an open connection's sqlite3* to its logConn.
var logConns struct {
	sync.Mutex
	m map[uintptr]*logConn
}

// logConnFor returns the logConn of the driver connection dc, which the
// caller holds (sql.Conn.Raw).
func logConnFor(dc any) (*logConn, error) {
	tls, db, ok := sqliteHandles(dc)
	if !ok {
		return nil, fmt.Errorf("request logs: %T is not the SQLite driver's connection", dc)
	}
	logConns.Lock()
	lc := logConns.m[db]
	logConns.Unlock()
	if lc != nil && lc.tls == tls {
		return lc, nil
	}
	if lc != nil {
		// Left by a closed connection whose close hook did not run (another
		// trace hook replaced it). Its statements, if any, keep it a zombie
		// until they are finalized, which any thread state can do.
		lc.free(tls)
	}
	lc = &logConn{tls: tls, db: db}
	// The only trace hook on the connection: the driver sets one only with
	// its debug statement logging on, which this would replace.
	if rc := sqlite3.Xsqlite3_trace_v2(tls, db, sqlite3.SQLITE_TRACE_CLOSE, logConnCloseHook, db); rc != sqlite3.SQLITE_OK {
		return nil, lc.error(rc)
	}
	for i, n := range allocatorPins {
		lc.pins[i] = libc.Xmalloc(tls, types.Size_t(n))
	}
	logConns.Lock()
	if logConns.m == nil {
		logConns.m = map[uintptr]*logConn{}
	}
	logConns.m[db] = lc
	logConns.Unlock()
	return lc, nil
}

// sqliteHandles reads the libc thread state and sqlite3* out of the driver
// connection (github.com/glebarez/go-sqlite's conn, which exports neither).
// It reports false for anything of another shape.
func sqliteHandles(dc any) (*libc.TLS, uintptr, bool) {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, 0, false
	}
	db, tls := v.Elem().FieldByName("db"), v.Elem().FieldByName("tls")
	if db.Kind() != reflect.Uintptr || db.Uint() == 0 || !tls.IsValid() || tls.Type() != reflect.TypeFor[*libc.TLS]() || tls.IsNil() {
		return nil, 0, false
	}
	return (*libc.TLS)(tls.UnsafePointer()), uintptr(db.Uint()), true
}

// logConnCloseHook is closeLogConn as a C function pointer.
var logConnCloseHook = *(*uintptr)(unsafe.Pointer(&struct {
	f func(*libc.TLS, uint32, uintptr, uintptr, uintptr) int32
}{closeLogConn}))

// closeLogConn is the SQLITE_TRACE_CLOSE callback: SQLite calls it from
// sqlite3_close_v2 with the connection's mutex held and key = its sqlite3*.
func closeLogConn(tls *libc.TLS, _ uint32, key, _, _ uintptr) int32 {
	logConns.Lock()
	lc := logConns.m[key]
	delete(logConns.m, key)
	logConns.Unlock()
	if lc != nil {
		lc.free(tls)
	}
	return 0
}

// free finalizes lc's statements and frees its C memory, with tls.
func (lc *logConn) free(tls *libc.TLS) {
	for j, p := range lc.stmts {
		sqlite3.Xsqlite3_finalize(tls, p) // a no-op on 0
		lc.stmts[j] = 0
	}
	libc.Xfree(tls, lc.arena)
	lc.arena, lc.arenaCap = 0, 0
	for i, p := range lc.pins {
		libc.Xfree(tls, p)
		lc.pins[i] = 0
	}
}

// inTransaction reports whether the connection has a transaction open.
func (lc *logConn) inTransaction() bool { return sqlite3.Xsqlite3_get_autocommit(lc.tls, lc.db) == 0 }

// insert writes the rows of e inside the caller's transaction, checking ctx
// between statements.
func (lc *logConn) insert(ctx context.Context, e *logEncoder) error {
	if err := lc.load(e.text); err != nil {
		return err
	}
	defer func() {
		if lc.arenaCap > maxKeptText {
			libc.Xfree(lc.tls, lc.arena)
			lc.arena, lc.arenaCap = 0, 0 // the statements still point there, but only until rebound
		}
	}()
	params := e.params
	for len(params) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		j := min(bits.Len(uint(len(params)/requestLogColumnCount))-1, insertSizes-1)
		stmt, err := lc.stmt(j)
		if err != nil {
			return err
		}
		n := requestLogColumnCount << j
		if err := lc.exec(stmt, params[:n]); err != nil {
			return err
		}
		params = params[n:]
	}
	return nil
}

// load copies text to the C arena.
func (lc *logConn) load(text []byte) error {
	if lc.arenaCap < max(len(text), 1) {
		libc.Xfree(lc.tls, lc.arena)
		lc.arena, lc.arenaCap = 0, 0
		n := max(len(text), 64<<10)
		p := libc.Xmalloc(lc.tls, types.Size_t(n))
		if p == 0 {
			return &sqliteError{code: sqlite3.SQLITE_NOMEM, msg: "out of memory (7)"}
		}
		lc.arena, lc.arenaCap = p, n
	}
	copy(unsafe.Slice((*byte)(cPointer(lc.arena)), len(text)), text)
	return nil
}

// stmt returns the prepared INSERT of 1<<j rows, preparing it on first use.
func (lc *logConn) stmt(j int) (uintptr, error) {
	if p := lc.stmts[j]; p != 0 {
		return p, nil
	}
	sql := insertSQL(1 << j)
	z, err := libc.CString(sql)
	if err != nil {
		return 0, err
	}
	defer libc.Xfree(lc.tls, z)
	pp := lc.tls.Alloc(int(unsafe.Sizeof(uintptr(0))))
	defer lc.tls.Free(int(unsafe.Sizeof(uintptr(0))))
	rc := sqlite3.Xsqlite3_prepare_v3(lc.tls, lc.db, z, int32(len(sql)+1), sqlite3.SQLITE_PREPARE_PERSISTENT, pp, 0)
	if rc != sqlite3.SQLITE_OK {
		return 0, lc.error(rc)
	}
	lc.stmts[j] = *(*uintptr)(cPointer(pp))
	return lc.stmts[j], nil
}

// exec binds params to stmt and runs it once.
func (lc *logConn) exec(stmt uintptr, params []logParam) error {
	for i, p := range params {
		var rc int32
		switch p.n {
		case paramInt:
			rc = sqlite3.Xsqlite3_bind_int64(lc.tls, stmt, int32(i+1), p.v)
		case paramNull:
			rc = sqlite3.Xsqlite3_bind_null(lc.tls, stmt, int32(i+1))
		default: // SQLITE_STATIC (0): the arena outlives the step
			rc = sqlite3.Xsqlite3_bind_text64(lc.tls, stmt, int32(i+1), lc.arena+uintptr(p.v), uint64(p.n), 0, sqlite3.SQLITE_UTF8)
		}
		if rc != sqlite3.SQLITE_OK {
			return lc.error(rc)
		}
	}
	var err error
	if rc := sqlite3.Xsqlite3_step(lc.tls, stmt); rc != sqlite3.SQLITE_DONE {
		err = lc.error(rc)
	}
	sqlite3.Xsqlite3_reset(lc.tls, stmt) // repeats step's error, reported above
	return err
}

// error describes the connection's last error as the driver does (so
// IsUnavailable recognises a busy database).
func (lc *logConn) error(rc int32) error {
	str := libc.GoString(sqlite3.Xsqlite3_errstr(lc.tls, rc))
	msg := libc.GoString(sqlite3.Xsqlite3_errmsg(lc.tls, lc.db))
	busy := ""
	if rc == sqlite3.SQLITE_BUSY {
		busy = " (SQLITE_BUSY)"
	}
	if msg == str {
		return &sqliteError{code: int(rc), msg: fmt.Sprintf("%s (%d)%s", str, rc, busy)}
	}
	return &sqliteError{code: int(rc), msg: fmt.Sprintf("%s: %s (%d)%s", str, msg, rc, busy)}
}

// sqliteError is a SQLite result code with its message.
type sqliteError struct {
	code int
	msg  string
}

func (e *sqliteError) Error() string { return e.msg }

// Code returns the (extended) result code, as the driver's errors do.
func (e *sqliteError) Code() int { return e.code }

// cPointer turns an address in C memory (libc's allocator, outside the Go
// heap) into a pointer.
func cPointer(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
