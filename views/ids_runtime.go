package views

// Ids and test ids of the Runtime and Health pages, the incident badge and
// the live parts of the Connections page (50-dashboard §2, §6.4, §6.8, §6.12).
const (
	// Runtime page.
	RuntimePageID = "runtime-page"
	// RuntimeSummaryID is the KPI strip (polled).
	RuntimeSummaryID    = "runtime-summary"
	RuntimeOpenID       = "runtime-open-breakers"
	RuntimeCoolingID    = "runtime-cooling"
	RuntimeTerminalID   = "runtime-terminal"
	RuntimeLockedID     = "runtime-locked-models"
	RuntimeWindowGateID = "runtime-window-gate"

	// BreakersPanelID is the provider breakers panel (anchor #breakers, polled).
	BreakersPanelID       = "breakers"
	BreakersEmptyID       = "breakers-empty"
	BreakersConfirmID     = "breakers-confirm"
	BreakersResetAllID    = "breakers-reset-all"
	WindowGateTableID     = "window-gate"
	WindowGateClearID     = "window-gate-clear"
	CooldownsPanelID      = "cooldowns"
	CooldownsEmptyID      = "cooldowns-empty"
	CooldownsConfirmID    = "cooldowns-confirm"
	CooldownsClearAllID   = "cooldowns-clear-all"
	CooldownsCoolingID    = "cooldowns-cooling"
	CooldownsTerminalID   = "cooldowns-terminal"
	ModelCooldownsCardID  = "model-cooldowns"
	ModelCooldownsEmptyID = "model-cooldowns-empty"
	ModelCooldownsOffID   = "model-cooldowns-off"
	ModelCooldownsConfID  = "model-cooldowns-confirm"
	ModelCooldownsClearID = "model-cooldowns-clear-all"
	LeasesPanelID         = "leases"
	LeasesEmptyID         = "leases-empty"
	LeasesConfirmID       = "leases-confirm"
	QueuesPanelID         = "queues"
	WaitingPanelID        = "waiting"
	WaitingCountsID       = "waiting-counts"
	WaitingEmptyID        = "waiting-empty"
	WaitingTableID        = "waiting-table"
	QueuesEmptyID         = "queues-empty"
	QueuesTableID         = "queues-queues"
	SlotsTableID          = "queues-slots"
	SlotsOffID            = "queues-slots-off"
	// EventsPanelID is the Recent events panel (anchor #events, polled).
	EventsPanelID   = "events"
	EventsEmptyID   = "events-empty"
	EventsTableID   = "events-table"
	EventsReplicaID = "events-replica"
	// AffinityLineID is the Session affinity line under the KPI strip
	// (polled): the live pins and Clear all pins.
	AffinityLineID    = "affinity"
	AffinityPinsID    = "affinity-pins"
	AffinityClearID   = "affinity-clear-all"
	AffinityConfirmID = "affinity-confirm"

	// Health page.
	HealthPageID     = "health-page"
	HealthPanelID    = "health-panel"
	HealthStatus     = "health-status"
	HealthKeyID      = "health-key-id"
	HealthFleetID    = "health-fleet"
	HealthRedisID    = "health-redis"
	HealthReservesID = "health-reserves"

	// Incident badge: the link inside the polled IncidentBadgeID slot.
	IncidentLinkID = "incident-link"

	// Connections page: the hidden elements that poll GET /connections/statuses
	// and GET /connections/quota-windows.
	ConnectionsStatusPollID = "connections-statuses"
	ConnectionsQuotaPollID  = "connections-quota-windows"
)

// Row kinds of the Runtime page and of the live Connections cells, for RowID.
const (
	RowBreaker        = "breaker"
	RowBreakerReset   = "breaker-reset"
	RowWindowGate     = "window-gate"
	RowCooling        = "cooling"
	RowCoolingClear   = "cooling-clear"
	RowTerminal       = "terminal"
	RowTerminalReset  = "terminal-reset"
	RowLockout        = "lockout"
	RowLockoutEnable  = "lockout-re-enable"
	RowLease          = "lease"
	RowLeaseEnd       = "lease-end"
	RowQueue          = "queue"
	RowSlot           = "slot"
	RowWaiting        = "waiting"
	RowEvent          = "event"
	RowConnCooldown   = "conn-" + CellSlot + "-cooldown"    // conn-<id>-cooldown
	RowConnError      = "conn-" + CellSlot + "-error"       // conn-<id>-error
	RowConnConc       = "conn-" + CellSlot + "-concurrency" // conn-<id>-concurrency
	RowConnQuota      = "conn-" + CellSlot + "-quota"       // conn-<id>-quota: the quota windows cell
	RowConnLocks      = "conn-locks"
	RowConnLock       = "conn-lock"
	RowConnLockEnable = "conn-lock-re-enable"
	RowConnClear      = "conn-clear-cooldown"
	RowConnReset      = "conn-reset"
	RowProviderBrk    = "provider-breaker"
)

// LiveSigField is the query field of GET /connections/statuses that carries,
// per live cell, the signature of what the page shows ("<cell id>=<sig>").
const LiveSigField = "sig"

// QuotaSigField is LiveSigField of GET /connections/quota-windows, which
// refreshes the quota windows cells.
const QuotaSigField = "qsig"
