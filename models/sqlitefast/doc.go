// Package sqlitefast writes batches of rows into SQLite through its C API,
// on a connection of the github.com/glebarez/go-sqlite driver, instead of
// through database/sql. The request log uses it: database/sql makes the
// driver parse every statement anew, and statement text was most of the cost
// of a logged request (27.6 → 9.6 µs per entry, docs/PERFORMANCE.md). Here a
// connection keeps one prepared multi-row INSERT per power-of-two row count,
// and a batch only binds values and steps them inside BEGIN … COMMIT.
//
// Why it is fragile, and what keeps that safe:
//
//   - The driver exports neither the libc thread state nor the sqlite3*
//     of a connection, so Exec reads them from its unexported fields "db"
//     and "tls" by reflection (handles). That shape is checked on every
//     connection; a connection of any other shape is ErrUnsupported.
//   - The layout behind those fields belongs to the versions in Verified.
//     Supported compares them with the modules linked into the binary (its
//     build info) and refuses the C API on any difference, so a driver
//     upgrade turns the fast path off by itself. TestDriverVersions fails
//     on such an upgrade until the versions are checked and Verified is
//     updated.
//   - On ErrUnsupported the caller must write the batch another way
//     (models.RequestLogStore falls back to a GORM batch insert): an upgrade
//     costs speed, never rows.
//   - Each connection's statements and C buffers are freed by a
//     SQLITE_TRACE_CLOSE hook, which replaces any trace hook the driver set
//     (it sets one only with its debug statement log on).
//   - Texts are bound SQLITE_STATIC from one C arena per connection that
//     outlives each step; a batch larger than maxKeptText frees the arena
//     after it, while the statements still point there until rebound.
//
// It imports the driver's C libraries (modernc.org/libc, modernc.org/sqlite)
// and the standard library only; nothing in services may import it.
package sqlitefast
