package sqlitefast

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrUnsupported says the fast path cannot run here: the driver modules are
// not the Verified versions, or the connection is not the driver's of the
// known shape. Nothing was written; write the batch another way.
var ErrUnsupported = errors.New("sqlitefast: SQLite C API unavailable on this connection")

// Param is one bound value of a row: an integer, a NULL, or a text held in
// Batch.Text[V:V+N].
type Param struct {
	V int64 // the integer, or the text's offset
	N int   // the text's length, or ParamInt or ParamNull
}

// Kinds of Param that are not texts.
const (
	ParamInt  = -1
	ParamNull = -2
)

// maxKeptText is the most text a Batch or a connection keeps allocated
// between batches; a batch of large values does not pin its buffers.
const maxKeptText = 4 << 20

// Batch holds the values of rows, Insert.Columns per row in column order,
// with every text in one buffer that Exec copies to C memory in one piece.
// Reuse one Batch (Reset, then Release) so its buffers are kept.
type Batch struct {
	Params []Param
	Text   []byte
}

// Reset empties b for rows values, keeping its buffers.
func (b *Batch) Reset(values int) {
	b.Params = slices.Grow(b.Params[:0], values)
	b.Text = b.Text[:0]
}

// Release drops buffers a batch of large rows grew.
func (b *Batch) Release() {
	if cap(b.Text) > maxKeptText {
		b.Text = nil
	}
	if cap(b.Params) > 1<<16 {
		b.Params = nil
	}
}

// Str appends a text value.
func (b *Batch) Str(s string) {
	b.Params = append(b.Params, Param{V: int64(len(b.Text)), N: len(s)})
	b.Text = append(b.Text, s...)
}

// Span appends b.Text[off:] (written by the caller) as a text value.
func (b *Batch) Span(off int) {
	b.Params = append(b.Params, Param{V: int64(off), N: len(b.Text) - off})
}

// Int appends an integer value.
func (b *Batch) Int(v int64) { b.Params = append(b.Params, Param{V: v, N: ParamInt}) }

// Bool appends 1 or 0.
func (b *Batch) Bool(v bool) {
	if v {
		b.Int(1)
	} else {
		b.Int(0)
	}
}

// Null appends a NULL.
func (b *Batch) Null() { b.Params = append(b.Params, Param{N: ParamNull}) }

// Insert is a family of multi-row INSERTs into one table: Prefix, then
// Columns placeholders per row, then Suffix, e.g. "INSERT INTO t (a, b)
// VALUES " … " ON CONFLICT (a) DO NOTHING". Keep one Insert for the process's
// lifetime: connections cache their prepared statements by its address.
type Insert struct {
	Prefix  string
	Columns int
	Suffix  string
}

// maxInsertRows is the most rows one INSERT writes. A batch is written as
// INSERTs of the powers of two that add up to its length, at most
// maxInsertRows each, so a connection keeps at most insertSizes prepared
// statements per Insert and a batch of 256 runs the 64-row one four times.
// Once nothing is parsed, 64 rows per step instead of 1 still save 10-15 %
// of the CPU (the set-up of each step); 256 save nothing more measurable, and
// a statement's memory grows with its rows (~210 KB for 64 rows of 39
// columns, ~480 KB for all seven sizes).
const (
	maxInsertRows = 1 << (insertSizes - 1)
	insertSizes   = 7
)

// sql is the INSERT of rows rows.
func (ins *Insert) sql(rows int) string {
	row := "(" + strings.Repeat("?,", ins.Columns-1) + "?)"
	return ins.Prefix + strings.Repeat(row+",", rows-1) + row + ins.Suffix
}

// Exec writes the rows of b in one transaction on conn: BEGIN (with the
// DSN's _txlock mode, as database/sql would run it), the INSERTs, COMMIT,
// checking ctx between statements and before the commit. A failed batch is
// rolled back whole. It returns ErrUnsupported, having done nothing, when
// Supported fails or conn is not the driver's connection.
func Exec(ctx context.Context, conn *sql.Conn, ins *Insert, b *Batch) error {
	if err := Supported(); err != nil {
		return err
	}
	if ins.Columns <= 0 || len(b.Params)%ins.Columns != 0 {
		return fmt.Errorf("sqlitefast: %d values for rows of %d columns", len(b.Params), ins.Columns)
	}
	if len(b.Params) == 0 {
		return nil
	}
	return conn.Raw(func(dc any) error {
		c, err := connFor(dc)
		if err != nil {
			return err
		}
		begin, ok := dc.(driver.ConnBeginTx)
		if !ok {
			return fmt.Errorf("%w: %T cannot begin a transaction", ErrUnsupported, dc)
		}
		tx, err := begin.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return err
		}
		if err = c.insert(ctx, ins, b); err == nil {
			err = ctx.Err() // as database/sql would, refuse to commit once ctx has ended
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil && c.inTransaction() {
			if rbErr := tx.Rollback(); rbErr != nil && c.inTransaction() {
				// ErrBadConn makes database/sql close the connection, which
				// rolls back, rather than pool it with the transaction open.
				return errors.Join(err, fmt.Errorf("rollback: %w", rbErr), driver.ErrBadConn)
			}
		}
		return err
	})
}

// sqliteConn is the package's state on one SQLite connection: its prepared
// INSERTs (stmts[ins][j] writes 1<<j rows) and a C copy of the batch's texts,
// which the statements bind without copying (SQLITE_STATIC). It lives as
// long as the connection: a SQLITE_TRACE_CLOSE hook finalizes the statements
// when the connection closes, before SQLite checks that none is left, so
// closing works as it did without them.
type sqliteConn struct {
	tls      *libc.TLS
	db       uintptr // sqlite3*
	stmts    map[*Insert]*[insertSizes]uintptr
	arena    uintptr
	arenaCap int
	pins     [len(allocatorPins)]uintptr
}

// allocatorPins are the sizes of the C blocks a connection holds only so that
// libc's allocator keeps a page of their size classes mapped. It hands out
// blocks up to 256 KiB from 1 MiB pages of one size class and unmaps a page
// as soon as its last block is freed, so SQLite's short-lived scratch space
// for splitting B-tree pages (12-24 KiB) and for multi-row statements'
// in-memory statement journals (64 KiB chunks) cost an mmap, page faults and
// an munmap per use: a quarter to a third of the CPU of a batch
// (BenchmarkWriteRequestLogs profiles). One held block per class keeps its
// page, for every statement on any connection.
var allocatorPins = [...]int{12 << 10, 24 << 10, 96 << 10}

// conns maps an open connection's sqlite3* to its state.
var conns struct {
	sync.Mutex
	m map[uintptr]*sqliteConn
}

// connFor returns the state of the driver connection dc, which the caller
// holds (sql.Conn.Raw).
func connFor(dc any) (*sqliteConn, error) {
	tls, db, ok := handles(dc)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not the SQLite driver's connection", ErrUnsupported, dc)
	}
	conns.Lock()
	c := conns.m[db]
	conns.Unlock()
	if c != nil && c.tls == tls {
		return c, nil
	}
	if c != nil {
		// Left by a closed connection whose close hook did not run (another
		// trace hook replaced it). Its statements, if any, keep it a zombie
		// until they are finalized, which any thread state can do.
		c.free(tls)
	}
	c = &sqliteConn{tls: tls, db: db, stmts: map[*Insert]*[insertSizes]uintptr{}}
	// The only trace hook on the connection: the driver sets one only with
	// its debug statement logging on, which this would replace.
	if rc := sqlite3.Xsqlite3_trace_v2(tls, db, sqlite3.SQLITE_TRACE_CLOSE, closeHook, db); rc != sqlite3.SQLITE_OK {
		return nil, c.error(rc)
	}
	for i, n := range allocatorPins {
		c.pins[i] = libc.Xmalloc(tls, types.Size_t(n))
	}
	conns.Lock()
	if conns.m == nil {
		conns.m = map[uintptr]*sqliteConn{}
	}
	conns.m[db] = c
	conns.Unlock()
	return c, nil
}

// handles reads the libc thread state and sqlite3* out of the driver
// connection (github.com/glebarez/go-sqlite's conn, which exports neither:
// fields db uintptr and tls *libc.TLS). It reports false for anything of
// another shape.
func handles(dc any) (*libc.TLS, uintptr, bool) {
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

// closeHook is closeConn as a C function pointer.
var closeHook = *(*uintptr)(unsafe.Pointer(&struct {
	f func(*libc.TLS, uint32, uintptr, uintptr, uintptr) int32
}{closeConn}))

// closeConn is the SQLITE_TRACE_CLOSE callback: SQLite calls it from
// sqlite3_close_v2 with the connection's mutex held and key = its sqlite3*.
func closeConn(tls *libc.TLS, _ uint32, key, _, _ uintptr) int32 {
	conns.Lock()
	c := conns.m[key]
	delete(conns.m, key)
	conns.Unlock()
	if c != nil {
		c.free(tls)
	}
	return 0
}

// free finalizes c's statements and frees its C memory, with tls.
func (c *sqliteConn) free(tls *libc.TLS) {
	for ins, stmts := range c.stmts {
		for _, p := range stmts {
			sqlite3.Xsqlite3_finalize(tls, p) // a no-op on 0
		}
		delete(c.stmts, ins)
	}
	libc.Xfree(tls, c.arena)
	c.arena, c.arenaCap = 0, 0
	for i, p := range c.pins {
		libc.Xfree(tls, p)
		c.pins[i] = 0
	}
}

// inTransaction reports whether the connection has a transaction open.
func (c *sqliteConn) inTransaction() bool { return sqlite3.Xsqlite3_get_autocommit(c.tls, c.db) == 0 }

// insert writes the rows of b inside the caller's transaction, checking ctx
// between statements.
func (c *sqliteConn) insert(ctx context.Context, ins *Insert, b *Batch) error {
	if err := c.load(b.Text); err != nil {
		return err
	}
	defer func() {
		if c.arenaCap > maxKeptText {
			libc.Xfree(c.tls, c.arena)
			c.arena, c.arenaCap = 0, 0 // the statements still point there, but only until rebound
		}
	}()
	params := b.Params
	for len(params) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		j := min(bits.Len(uint(len(params)/ins.Columns))-1, insertSizes-1)
		stmt, err := c.stmt(ins, j)
		if err != nil {
			return err
		}
		n := ins.Columns << j
		if err := c.exec(stmt, params[:n]); err != nil {
			return err
		}
		params = params[n:]
	}
	return nil
}

// load copies text to the C arena.
func (c *sqliteConn) load(text []byte) error {
	if c.arenaCap < max(len(text), 1) {
		libc.Xfree(c.tls, c.arena)
		c.arena, c.arenaCap = 0, 0
		n := max(len(text), 64<<10)
		p := libc.Xmalloc(c.tls, types.Size_t(n))
		if p == 0 {
			return &Error{code: sqlite3.SQLITE_NOMEM, msg: "out of memory (7)"}
		}
		c.arena, c.arenaCap = p, n
	}
	copy(unsafe.Slice((*byte)(cPointer(c.arena)), len(text)), text)
	return nil
}

// stmt returns the prepared INSERT of 1<<j rows of ins, preparing it on
// first use.
func (c *sqliteConn) stmt(ins *Insert, j int) (uintptr, error) {
	stmts := c.stmts[ins]
	if stmts == nil {
		stmts = new([insertSizes]uintptr)
		c.stmts[ins] = stmts
	}
	if p := stmts[j]; p != 0 {
		return p, nil
	}
	sql := ins.sql(1 << j)
	z, err := libc.CString(sql)
	if err != nil {
		return 0, err
	}
	defer libc.Xfree(c.tls, z)
	pp := c.tls.Alloc(int(unsafe.Sizeof(uintptr(0))))
	defer c.tls.Free(int(unsafe.Sizeof(uintptr(0))))
	rc := sqlite3.Xsqlite3_prepare_v3(c.tls, c.db, z, int32(len(sql)+1), sqlite3.SQLITE_PREPARE_PERSISTENT, pp, 0)
	if rc != sqlite3.SQLITE_OK {
		return 0, c.error(rc)
	}
	stmts[j] = *(*uintptr)(cPointer(pp))
	return stmts[j], nil
}

// exec binds params to stmt and runs it once.
func (c *sqliteConn) exec(stmt uintptr, params []Param) error {
	for i, p := range params {
		var rc int32
		switch p.N {
		case ParamInt:
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, stmt, int32(i+1), p.V)
		case ParamNull:
			rc = sqlite3.Xsqlite3_bind_null(c.tls, stmt, int32(i+1))
		default: // SQLITE_STATIC (0): the arena outlives the step
			rc = sqlite3.Xsqlite3_bind_text64(c.tls, stmt, int32(i+1), c.arena+uintptr(p.V), uint64(p.N), 0, sqlite3.SQLITE_UTF8)
		}
		if rc != sqlite3.SQLITE_OK {
			return c.error(rc)
		}
	}
	var err error
	if rc := sqlite3.Xsqlite3_step(c.tls, stmt); rc != sqlite3.SQLITE_DONE {
		err = c.error(rc)
	}
	sqlite3.Xsqlite3_reset(c.tls, stmt) // repeats step's error, reported above
	return err
}

// error describes the connection's last error as the driver does (so the
// caller's busy-database check recognises it).
func (c *sqliteConn) error(rc int32) error {
	str := libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc))
	msg := libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
	busy := ""
	if rc == sqlite3.SQLITE_BUSY {
		busy = " (SQLITE_BUSY)"
	}
	if msg == str {
		return &Error{code: int(rc), msg: fmt.Sprintf("%s (%d)%s", str, rc, busy)}
	}
	return &Error{code: int(rc), msg: fmt.Sprintf("%s: %s (%d)%s", str, msg, rc, busy)}
}

// Error is a SQLite result code with its message, shaped like the driver's
// errors (a Code method).
type Error struct {
	code int
	msg  string
}

func (e *Error) Error() string { return e.msg }

// Code returns the (extended) result code, as the driver's errors do.
func (e *Error) Code() int { return e.code }

// cPointer turns an address in C memory (libc's allocator, outside the Go
// heap) into a pointer.
func cPointer(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
