package views

// Ids of the layout and polish work (issue 21 item 9).
const (
	// FlashToastID is a toast rendered with the page (the setup welcome).
	FlashToastID = "flash-toast"
)

// Settings → Resilience layout.
const (
	// SettingsNavID is the in-page nav of the resilience sections.
	SettingsNavID = "settings-nav"
	// LockoutPreviewID is the Model lockout card's escalation preview;
	// LockoutPreviewURL re-renders it from the values being typed.
	LockoutPreviewID  = "lockout-preview"
	LockoutPreviewURL = "/settings/resilience/model-lockout/preview"
	// RowSettingsLastSaved prefixes a card's last-saved line: RowID(RowSettingsLastSaved, section).
	RowSettingsLastSaved = "last-saved"
)

// RowComboWeights prefixes a combo's weights bar: RowID(RowComboWeights, id).
const RowComboWeights = "combo-weights"
