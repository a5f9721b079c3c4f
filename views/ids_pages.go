package views

// Ids and test ids of the Overview, Connections, Combos and API keys pages.
// Per-row ids are built with RowID from the row kinds below.
const (
	// Overview.
	OverviewCountsID      = "overview-counts"
	OverviewConnCountID   = "overview-connections"
	OverviewComboCountID  = "overview-combos"
	OverviewKeyCountID    = "overview-keys"
	OverviewBaseURLID     = "overview-base-url"
	OverviewBaseURLCopyID = "overview-base-url-copy"
	OverviewCurlID        = "overview-curl"
	OverviewCurlCopyID    = "overview-curl-copy"
	OverviewAnthropicID   = "overview-curl-anthropic"
	OverviewAnthropicCopy = "overview-curl-anthropic-copy"
	OverviewChecklistID   = "get-started"

	// Connections.
	ConnectionsPageID       = "connections-page"
	ConnectionPanelID       = "connection-panel"
	ConnectionAddID         = "connection-add"
	ConnectionsEmptyID      = "connections-empty"
	ConnectionFieldsID      = "connection-provider-fields"
	ConnectionSubmitID      = "connection-submit"
	ConnectionCancelID      = "connection-cancel"
	ConnectionProviderID    = "provider"
	ConnectionPanelCloseTID = "connection-panel-close"
	ConnectionKeepID        = "connection-keep-credentials"

	// Combos.
	CombosPageID        = "combos-page"
	CombosEmptyID       = "combos-empty"
	ComboNewID          = "combo-new"
	ComboSavedID        = "combo-saved"
	ComboTargetsID      = "combo-targets"
	ComboAddTargetID    = "combo-add-target"
	ComboStrategyID     = "strategy"
	ComboStrategyHelpID = "strategy-help"
	ComboSaveID         = "combo-save"
	ComboAdvancedID     = "combo-advanced"

	// API keys.
	KeysPageID          = "keys-page"
	KeysEmptyID         = "keys-empty"
	KeyPanelID          = "key-panel"
	KeyNewID            = "key-new"
	KeySubmitID         = "key-submit"
	KeyCancelID         = "key-cancel"
	KeySecretCopyID     = "key-secret-copy"
	KeySecretCurlID     = "key-secret-curl"
	KeySecretCurlCopyID = "key-secret-curl-copy"
	KeySecretDismissID  = "key-secret-dismiss"

	// Confirmation panels (one per page at a time).
	ConfirmSubmitID = "confirm-submit"
	ConfirmCancelID = "confirm-cancel"
)

// Row kinds for RowID: RowID(RowConn, id) is the row, RowID(RowConnSlot, id)
// the slot under it where a confirmation panel appears.
const (
	RowConn         = "conn"
	RowConnSlot     = "conn-slot"
	RowConnStatus   = "conn-" + CellSlot + "-status" // the status cell: conn-<id>-status
	RowConnEdit     = "conn-edit"
	RowConnEnabled  = "conn-enabled"
	RowConnDelete   = "conn-delete"
	RowConnGroup    = "provider"
	RowCombo        = "combo"
	RowComboSlot    = "combo-slot"
	RowComboName    = "combo-name"
	RowComboCopy    = "combo-copy"
	RowComboEnabled = "combo-enabled"
	RowComboUp      = "combo-up"
	RowComboDown    = "combo-down"
	RowComboEdit    = "combo-edit"
	RowComboDup     = "combo-duplicate"
	RowComboDelete  = "combo-delete"
	RowKey          = "key"
	RowKeySlot      = "key-slot"
	RowKeyEdit      = "key-edit"
	RowKeyRevoke    = "key-revoke"
	RowKeyDelete    = "key-delete"
)
