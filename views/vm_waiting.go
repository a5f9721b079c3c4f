package views

import (
	"time"

	"switchyard/services/traffic"
)

// WaitingPanelVM is the Runtime page's Waiting requests panel: every
// request waiting inside the gateway now, longest first, so a slow request
// says why while it is slow.
type WaitingPanelVM struct {
	Rows []WaitingRowVM
	// Counts has one entry per reason, in display order.
	Counts []WaitingReasonVM
}

// WaitingReasonVM is the count of one reason.
type WaitingReasonVM struct {
	Reason string // display label
	N      int
}

// WaitingRowVM is one waiting request.
type WaitingRowVM struct {
	RequestID string
	Reason    string // display label
	Target    string
	AgeMs     int64
	Resume    *CountdownVM // nil: unbounded or past
}

// waitReasonLabels name the reasons as the panel shows them.
var waitReasonLabels = map[string]string{
	traffic.WaitCooldown: "Cooldown wait",
	traffic.WaitSlot:     "Concurrency slot",
	traffic.WaitQueue:    "Request queue",
}

// WaitReasonLabel is the display label of a wait reason.
func WaitReasonLabel(reason string) string {
	if l, ok := waitReasonLabels[reason]; ok {
		return l
	}
	return reason
}

// NewWaitingPanelVM builds the panel from the board's list; names maps
// connection ids to names (slot targets read as the connection's name).
func NewWaitingPanelVM(list []traffic.WaitEntry, names map[string]string, now time.Time) WaitingPanelVM {
	vm := WaitingPanelVM{}
	counts := map[string]int{}
	for _, e := range list {
		counts[e.Reason]++
		target := e.Target
		if e.Reason == traffic.WaitSlot {
			if n := names[target]; n != "" {
				target = n + " (" + e.Target + ")"
			}
		}
		vm.Rows = append(vm.Rows, WaitingRowVM{RequestID: e.RequestID, Reason: WaitReasonLabel(e.Reason), Target: target,
			AgeMs: max(0, now.Sub(e.Since).Milliseconds()), Resume: NewCountdownVM(e.ResumeAt, now)})
	}
	for _, r := range traffic.WaitReasons {
		vm.Counts = append(vm.Counts, WaitingReasonVM{Reason: WaitReasonLabel(r), N: counts[r]})
	}
	return vm
}
