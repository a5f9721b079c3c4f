package views

// Ids and test ids of the Settings pages (Resilience, Feature flags,
// Account) and the Request logs page. Per-row ids are built with RowID from
// the row kinds below.
const (
	// Settings → Resilience. Each card's id is its section (SettingsCardDefs),
	// e.g. "model-lockout"; the ids below are the parts the tests touch.
	ResiliencePageID       = "resilience-page"
	ModelLockoutCardID     = "model-lockout-card"
	SettingsSavedID        = "settings-saved"
	SettingsSaveID         = "settings-save"
	SettingsDefaultsID     = "settings-defaults"
	SettingsDefaultsNoteID = "settings-defaults-note"
	ErrorRulesTableID      = "error-rules-table"
	ErrorRulesAddID        = "error-rules-add"
	ErrorRulesBuiltinID    = "error-rules-builtin"
	LockoutActiveLinkID    = "lockout-active-link"

	// Settings → Feature flags.
	FlagsPageID = "flags-page"
	FlagsListID = "flags-list"

	// Settings → Account.
	AccountPageID       = "account-page"
	PasswordFormID      = "password-form"
	PasswordSubmitID    = "password-submit"
	SessionsListID      = "sessions-list"
	SessionsSlotID      = "sessions-slot"
	SessionsEndOthersID = "sessions-end-others"
	SessionCurrentTagID = "session-current"

	// Request logs.
	LogsPageID       = "logs-page"
	LogsFiltersID    = "logs-filters"
	LogsListID       = "logs-list"
	LogsEmptyID      = "logs-empty"
	LogsNoMatchID    = "logs-no-match"
	LogsOlderID      = "logs-older"
	LogsNewestID     = "logs-newest"
	LogsClearID      = "logs-clear"
	LogDetailID      = "log-detail"
	LogDetailCloseID = "log-detail-close"
	LogTimelineID    = "log-timeline"
	// LogTimelineSumID is the line adding the timeline up to the total;
	// LogAttemptEffectsID an attempt's effects.
	LogTimelineSumID    = "log-timeline-sum"
	LogAttemptEffectsID = "log-attempt-effects"
	LogDetailCostID     = "log-detail-cost"

	// Audit log.
	AuditPageID    = "audit-page"
	AuditFiltersID = "audit-filters"
	AuditListID    = "audit-list"
	AuditEmptyID   = "audit-empty"
	AuditNoMatchID = "audit-no-match"
	AuditOlderID   = "audit-older"
	AuditNewestID  = "audit-newest"
	AuditClearID   = "audit-clear"

	// Settings → Model prices.
	PricesPageID      = "prices-page"
	PricesTableID     = "prices-table"
	PriceFormID       = "price-form"
	PriceFormSubmitID = "price-form-submit"
)

// Row kinds of the Settings and Request logs pages.
const (
	RowSettingsCard      = "settings"            // RowID(RowSettingsCard, section) is a card's id
	RowRule              = "rule"                // provider error rule row (by index)
	RowFlag              = "flag"                // feature flag row (by key)
	RowFlagSwitch        = "flag-switch"         // its switch
	RowFlagSave          = "flag-save"           // its Save button
	RowFlagReset         = "flag-reset"          // its Reset button
	RowFlagSource        = "flag-source"         // its source text
	RowSession           = "session"             // admin session row (by id hash)
	RowSessionEnd        = "session-end"         // its Sign out button
	RowLog               = "log"                 // request log row (by id)
	RowLogLink           = "log-link"            // the link opening its detail
	RowAttempt           = "attempt"             // attempt timeline entry (by index)
	RowWait              = "wait"                // wait timeline entry (by index)
	RowSkip              = "skip"                // skipped-target timeline entry (by index)
	RowLogCost           = "log-cost"            // a request's estimated cost cell
	RowLogFallbackFailed = "log-fallback-failed" // its "emergency fallback failed" tag
	RowAudit             = "audit"               // audit log row (by id)
	RowPrice             = "price"               // model price row (by provider/model)
	RowPriceRemove       = "price-remove"        // its "Remove override" button
	CardRevision         = "revision"            // RowID(CardRevision, section): a card's hidden revision input
	CardStatus           = "settings-status"     // RowID(CardStatus, section): a card's "Saved" line
)

// Settings → Resilience sections: the URL segment of each card
// (/settings/resilience/{section}), in page order.
const (
	SectionRequestQueue          = "request-queue"
	SectionConnectionCooldown    = "connection-cooldown"
	SectionProviderBreaker       = "provider-breaker"
	SectionProviderCooldown      = "provider-cooldown"
	SectionWaitForCooldown       = "wait-for-cooldown"
	SectionComboCooldownWait     = "combo-cooldown-wait"
	SectionConnectionConcurrency = "connection-concurrency"
	SectionSessionAffinity       = "session-affinity"
	SectionStreamRecovery        = "stream-recovery"
	SectionEmergencyFallback     = "emergency-fallback"
	SectionModelLockout          = "model-lockout"
	SectionErrorRules            = "error-rules"
)

// Events of the Settings pages. EventSettingsStalePrefix + section asks a
// card to reload itself after a save lost a race with another writer.
const EventSettingsStalePrefix = "settings-stale-"
