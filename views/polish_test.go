package views

import (
	"testing"
	"time"

	"switchyard/services"
)

// A connection whose provider never reported a quota window shows one line,
// not four "unknown" ones (issue 21 item 9).
func TestConnQuotaCellNoneReported(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := NewConnectionRowVM(services.Connection{ID: "c_1", Name: "main", Enabled: true}, now)
	cell := renderCell(t, connQuotaCell(row, false)).Find("td#conn-c_1-quota")
	if got := squash(cell); got != "none reported" {
		t.Errorf("quota cell %q", got)
	}
	if n := cell.Find("li").Length(); n != 1 {
		t.Errorf("%d lines, want 1", n)
	}
	if cell.Find(`input[data-quota-sig]`).Length() != 1 {
		t.Error("the cell lost its poll signature")
	}
}
