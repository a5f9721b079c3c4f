package views

import (
	"strings"
	"testing"
	"time"

	"switchyard/services/traffic"
)

// The Waiting requests panel lists each waiting request with its reason,
// target (a slot's connection by name), age and latest resume, and counts
// every reason, zero included.
func TestWaitingPanel(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	list := []traffic.WaitEntry{
		{RequestID: "req-a", Reason: traffic.WaitCooldown, Target: "gpt-4o", Since: now.Add(-12 * time.Second), ResumeAt: now.Add(48 * time.Second)},
		{RequestID: "req-b", Reason: traffic.WaitSlot, Target: "c_1", Since: now.Add(-2 * time.Second)},
	}
	vm := NewWaitingPanelVM(list, map[string]string{"c_1": "work account"}, now)
	doc := renderDoc(t, WaitingPanel(vm))
	a := squash(doc.Find(`[data-testid="` + RowID(RowWaiting, "req-a") + `"]`))
	if !strings.Contains(a, "Cooldown wait") || !strings.Contains(a, "gpt-4o") || !strings.Contains(a, "12 s") || !strings.Contains(a, "48 s") {
		t.Errorf("cooldown row %q", a)
	}
	b := squash(doc.Find(`[data-testid="` + RowID(RowWaiting, "req-b") + `"]`))
	if !strings.Contains(b, "Concurrency slot") || !strings.Contains(b, "work account (c_1)") || !strings.Contains(b, "no limit") {
		t.Errorf("slot row %q", b)
	}
	if got := squash(doc.Find(`[data-testid="` + WaitingCountsID + `"]`)); got != "Cooldown wait: 1 · Concurrency slot: 1 · Request queue: 0" {
		t.Errorf("counts %q", got)
	}
	if doc.Find(`[data-testid="`+WaitingEmptyID+`"]`).Length() != 0 {
		t.Error("empty line with rows")
	}
	empty := renderDoc(t, WaitingPanel(NewWaitingPanelVM(nil, nil, now)))
	if squash(empty.Find(`[data-testid="`+WaitingEmptyID+`"]`)) != "No request is waiting." {
		t.Error("no empty line")
	}
}
