package views

// Ids and test ids of the Overview traffic and resilience tiles, the
// connection and combo tests, the combo readiness dots and the routing
// preview (50-dashboard §6.3–§6.5).
const (
	// OverviewStatsID is the polled region holding the window switch and
	// every tile (GET /overview/stats).
	OverviewStatsID       = "overview-stats"
	OverviewWindowID      = "overview-window" // RowID(OverviewWindowID, "1h") is one switch link
	OverviewTrafficNoteID = "overview-traffic-note"
	OverviewRequestsID    = "overview-requests"
	OverviewSuccessID     = "overview-success-rate"
	OverviewP50ID         = "overview-latency-p50"
	OverviewP95ID         = "overview-latency-p95"
	OverviewTTFBP50ID     = "overview-ttfb-p50"
	OverviewTTFBP95ID     = "overview-ttfb-p95"
	OverviewTokensID      = "overview-tokens"
	OverviewFailoversID   = "overview-failovers"
	OverviewAbortsID      = "overview-aborts"
	OverviewResilienceID  = "overview-resilience"
	OverviewBreakersID    = "overview-open-breakers"
	OverviewCoolingID     = "overview-cooling"
	OverviewTerminalID    = "overview-terminal"
	OverviewLockedID      = "overview-locked-models"
	OverviewLeasesID      = "overview-leases"
	OverviewQueuedID      = "overview-queued"
	OverviewWaitingID     = "overview-waiting"
	// OverviewChartID is the requests chart; OverviewChartTableID its
	// visually hidden data table.
	OverviewChartID        = "overview-chart"
	OverviewChartTableID   = "overview-chart-data"
	OverviewChartEmptyID   = "overview-chart-empty"
	OverviewFailingID      = "overview-failing"
	OverviewFailingEmptyID = "overview-failing-empty"
	// OverviewCostID is the tile of the window's estimated cost;
	// OverviewCostPanelID the tables per key, connection and model.
	OverviewCostID        = "overview-cost"
	OverviewCostPanelID   = "overview-cost-panel"
	OverviewCostByKeyID   = "overview-cost-by-key"
	OverviewCostByConnID  = "overview-cost-by-connection"
	OverviewCostByModelID = "overview-cost-by-model"

	// CombosReadinessPollID is the hidden element that polls GET /combos/readiness.
	CombosReadinessPollID = "combos-readiness"
)

// Row kinds of the connection and combo tests and previews, for RowID.
const (
	RowConnTest        = "conn-test"        // the "Last used / test" cell of a connection
	RowConnTestButton  = "conn-test-button" // its Test button
	RowConnTestResult  = "conn-test-result" // the result line a test leaves in it
	RowComboTargets    = "combo-chips"      // the targets cell of a combo (refreshed out of band)
	RowComboTraffic    = "combo-traffic"    // the last-hour requests and success rate of a combo
	RowComboDot        = "combo-dot"        // RowID(RowComboDot, comboID+"-"+index): one target chip with its dot
	RowComboMetrics    = "combo-metrics"    // RowID(RowComboMetrics, comboID+"-"+index): one target's dispatch metrics
	RowComboTest       = "combo-test"       // a combo's Test button
	RowComboPreview    = "combo-preview"    // a combo's Preview routing button
	RowComboResults    = "combo-results"    // the test results panel under a combo
	RowComboRoute      = "combo-route"      // the routing preview panel under a combo
	RowComboForceTest  = "combo-test-force" // "Test the held-back targets too"
	RowComboPanelClose = "combo-panel-close"
	RowSettingsSave    = "settings-save"    // RowID(RowSettingsSave, section): a card's Save button (element id)
	RowSettingsSubmit  = "settings-submit"  // RowID(RowSettingsSubmit, section): its hidden default submit button
	RowFailing         = "overview-failing" // RowID(RowFailing, "1"): the first of the top failing targets
)

// ComboDotID is the test id of the chip of target index of a combo.
func ComboDotID(comboID string, index int) string {
	return RowID(RowComboDot, comboID+"-"+itoa(index))
}

// ComboMetricsID is the test id of the dispatch metrics of target index of a combo.
func ComboMetricsID(comboID string, index int) string {
	return RowID(RowComboMetrics, comboID+"-"+itoa(index))
}
