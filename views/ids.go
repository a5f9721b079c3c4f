// Package views holds the templ components of the dashboard, the view models
// shaped like the screen, and every id, test id and event name as a constant.
package views

import "strings"

// Regions, forms and test ids used by handlers, templates and tests.
const (
	ContentID         = "content"
	ToastsID          = "toasts"
	DrawerID          = "drawer"
	IncidentBadgeID   = "incident-badge"
	SetupFormID       = "setup-form"
	LoginFormID       = "login-form"
	LogoutButtonID    = "logout"
	ErrorSummaryID    = "error-summary"
	ConnectionsListID = "connections-list"
	ConnectionFormID  = "connection-form"
	CombosListID      = "combos-list"
	ComboFormID       = "combo-form"
	KeysListID        = "keys-list"
	KeyFormID         = "key-form"
	KeySecretPanelID  = "key-secret"
	KeySecretValueID  = "key-secret-value"
	ConfirmPanelID    = "confirm-panel"
)

// Events announced with HX-Trigger (50-dashboard §3.4).
const (
	EventShowToast          = "show-toast"
	EventConnectionsChanged = "connections-changed"
	EventCombosChanged      = "combos-changed"
	EventKeysChanged        = "keys-changed"
	EventResilienceChanged  = "resilience-changed"
	EventSettingsSaved      = "settings-saved"
	EventFlagsChanged       = "flags-changed"
)

// CellSlot marks where the row id goes in a cell kind: a kind holding it
// names one cell of a row rather than a row ("conn-{id}-status").
const CellSlot = "{id}"

// RowID builds a per-row id: RowID("conn", "c_1") → "conn-c_1". A cell kind
// takes the row id in place of CellSlot: RowID(RowConnStatus, "c_1") →
// "conn-c_1-status", the cell ids 50-dashboard §6.4 names.
func RowID(kind, id string) string {
	if before, after, ok := strings.Cut(kind, CellSlot); ok {
		return before + id + after
	}
	return kind + "-" + id
}
