package models

import (
	"context"
	"database/sql"
	"fmt"

	"switchyard/models/sqlitefast"
)

// BreakRequestLogFastPath makes s's C-API path answer ErrUnsupported, as it
// does after a driver upgrade, so tests run the GORM fallback through the
// store's own switch.
func BreakRequestLogFastPath(s *RequestLogStore) {
	s.exec = func(context.Context, *sql.Conn, *sqlitefast.Insert, *sqlitefast.Batch) error {
		return fmt.Errorf("%w: forced by the test", sqlitefast.ErrUnsupported)
	}
}

// RunTx is runTx, for the retry test.
var RunTx = runTx
