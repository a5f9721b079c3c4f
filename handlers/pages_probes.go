package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/views"
)

// Probes serves the dashboard controls that send real upstream requests or
// ask the router: the connection and combo Test buttons and the routing
// preview (50-dashboard §6.4, §6.5). It is the Dashboard plus the gateway
// behind the same /api twins (POST /api/connections/{id}/test, POST
// /api/combos/{id}/test, GET /api/combos/{id}/explain).
type Probes struct {
	*Dashboard
	Tester      ConnectionTester
	ComboTester ComboTester
	Explainer   ComboExplainer
}

// ConnectionTest sends the connection test (one minimal request, 15 s
// timeout, never touching resilience state), records it as lastTest and
// answers with the row's "Last used / test" cell carrying the result line
// (twin POST /api/connections/{id}/test). Without script it renders the
// Connections page with the result in the row.
func (p *Probes) ConnectionTest(c echo.Context) error {
	ctx := c.Request().Context()
	conn, res, err := runConnectionTest(ctx, p.Conns, p.Tester, c.Param("id"))
	if err != nil {
		return err
	}
	result := views.NewConnTestResultVM(res)
	row := p.liveConnectionRow(conn)
	row.TestResult = &result
	if isHTMX(c.Request()) {
		return render(c, http.StatusOK, views.ConnTestCell(row), nil)
	}
	list, err := p.connectionsList(ctx)
	if err != nil {
		return err
	}
	for gi := range list.Groups {
		for ri := range list.Groups[gi].Rows {
			if list.Groups[gi].Rows[ri].ID == conn.ID {
				list.Groups[gi].Rows[ri].TestResult = &result
			}
		}
	}
	return p.page(c, http.StatusOK, connectionsTitle, connectionsHref, views.ConnectionsPage(views.ConnectionsPageVM{List: list}))
}
