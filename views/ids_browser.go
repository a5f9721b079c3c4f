package views

// Test ids that the browser test (app/dashboard_browser_test.go) touches and
// that had no constant yet (50-dashboard §3.2).
const (
	// ConnectionProviderSelectID is the data-testid of the provider select
	// of the add-connection form (its element id is ConnectionProviderID).
	ConnectionProviderSelectID = "connection-provider"
)
