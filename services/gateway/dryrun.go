package gateway

import (
	"net/http"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
)

// DryRunFailure builds the classifier's input for an upstream answer
// exactly as a failed dispatch to provider p does (error envelope parsed
// from the body, the provider's quota flags), for the classify dry run
// (POST /api/resilience/classify). Status 0 is a transport failure of kind
// transport (resilience.Transport*).
func DryRunFailure(p services.Provider, connectionID, model string, status int, transport string, h http.Header, body []byte, now time.Time) resilience.Failure {
	r := resStatus(status, h, body)
	if status == 0 {
		r = resTransport(transport, "transport failure: "+transport)
		r.header, r.body = h, body
	}
	return failureOf(r, target{provider: p, model: model}, &services.Connection{ID: connectionID}, 0, now)
}
