package views

// Ids, test ids and events of the Request logs page's live tail
// (50-dashboard §6.7).
const (
	// LogsTailSwitchID is the live tail switch; LogsTailID the element that
	// polls (an empty <tbody> above the rows, or the box around an empty
	// state); LogsTailGapID the row that says a poll left entries out.
	LogsTailSwitchID = "logs-tail-switch"
	LogsTailID       = "logs-tail"
	LogsTailGapID    = "logs-tail-gap"
)

// EventDrawerClosed is what app.js dispatches on the document when a detail
// drawer closes (the live tail, paused meanwhile, polls at once).
const EventDrawerClosed = "drawer-closed"
