package services

import "net/http"

// Error codes: the one table of every code Switchyard answers with, and the
// HTTP status each one carries. The /v1 codes are those of 10-gateway-api
// §9.3, the /api codes those of 40-admin-api §1. An error names its code;
// its status follows from the code (StatusOfCode), except for the few codes
// whose status the upstream decides (upstream_error, a relayed caller fault,
// STREAM_THROUGHPUT_TOO_LOW after commit), which set it explicitly.

// Codes of the client API (/v1, 10-gateway-api §9.3).
const (
	CodeInvalidAPIKey          = "invalid_api_key"
	CodeInsufficientScope      = "insufficient_scope"
	CodeModelNotAllowed        = "model_not_allowed"
	CodeRateLimitExceeded      = "rate_limit_exceeded"
	CodeInvalidRequest         = "invalid_request"
	CodeUnsupportedParameter   = "unsupported_parameter"
	CodeUnsupportedMediaType   = "unsupported_media_type"
	CodeRequestTooLarge        = "request_too_large"
	CodeEndpointNotFound       = "endpoint_not_found"
	CodeMethodNotAllowed       = "method_not_allowed"
	CodeModelNotFound          = "model_not_found"
	CodeToolLimitExceeded      = "tool_limit_exceeded"
	CodeNoExecutableTargets    = "no_executable_targets"
	CodeAllTargetsCoolingDown  = "all_targets_cooling_down"
	CodeProviderCircuitOpen    = "provider_circuit_open"
	CodeModelCooldown          = "model_cooldown"
	CodeStreamThroughputTooLow = "STREAM_THROUGHPUT_TOO_LOW"
	CodeUpstreamTimeout        = "upstream_timeout"
	CodeUpstreamRateLimited    = "upstream_rate_limited"
	CodeUpstreamError          = "upstream_error"
	CodeServerShuttingDown     = "server_shutting_down"
	CodeInternalError          = "internal_error"
	// CodeClientClosedRequest is logged only (499), never sent.
	CodeClientClosedRequest = "client_closed_request"
)

// Codes of Switchyard's own limiters (services/traffic, 20-resilience §8, §10).
const (
	CodeConnectionSlotsBusy       = "CONNECTION_SLOTS_BUSY"
	CodeRateLimitQueueFull        = "RATE_LIMIT_QUEUE_FULL"
	CodeRateLimitQueueTimeout     = "RATE_LIMIT_QUEUE_TIMEOUT"
	CodeRateLimitExecutionTimeout = "RATE_LIMIT_EXECUTION_TIMEOUT"
	// CodeUpstreamBufferBusy: an oversized upstream answer found the
	// process-wide buffer budget spent (issue 17); penalises nothing.
	CodeUpstreamBufferBusy = "UPSTREAM_BUFFER_BUSY"
)

// Codes of exclusive session leases (services/leases, 20-resilience §6).
const (
	CodeLeaseContextRequired         = "LEASE_CONTEXT_REQUIRED"
	CodeLeaseContextInvalid          = "LEASE_CONTEXT_INVALID"
	CodeLeaseRequired                = "LEASE_REQUIRED"
	CodeLeaseFenceStale              = "LEASE_FENCE_STALE"
	CodeLeaseConnectionMismatch      = "LEASE_CONNECTION_MISMATCH"
	CodeLeaseUnsupportedRoute        = "LEASE_UNSUPPORTED_ROUTE"
	CodeLeaseScopeRequired           = "LEASE_SCOPE_REQUIRED"
	CodeLeaseKeyConfigurationInvalid = "LEASE_KEY_CONFIGURATION_INVALID"
	CodeLeaseCapacityUnavailable     = "LEASE_CAPACITY_UNAVAILABLE"
	CodeLeaseActionInvalid           = "LEASE_ACTION_INVALID"
	CodeLeaseOwnerConflict           = "LEASE_OWNER_CONFLICT"
)

// Codes of the management API (/api, 40-admin-api §1).
const (
	CodeInvalidJSON         = "invalid_json"
	CodeValidationFailed    = "validation_failed"
	CodeBadRequest          = "bad_request"
	CodeUnauthorized        = "unauthorized"
	CodeForbidden           = "forbidden"
	CodeCrossOriginRejected = "cross_origin_rejected"
	CodeNotFound            = "not_found"
	CodeConflict            = "conflict"
	CodePreconditionFailed  = "precondition_failed"
	CodePayloadTooLarge     = "payload_too_large"
	CodeRateLimited         = "rate_limited"
	CodeInternal            = "internal"
	CodeUnavailable         = "unavailable"
	// CodeMisdirectedRequest: the Host is not one the dashboard and /api
	// answer to (issue 17, DNS rebinding).
	CodeMisdirectedRequest = "misdirected_request"
)

// codeStatus is the HTTP status of every code whose status is fixed.
var codeStatus = map[string]int{
	CodeInvalidAPIKey:          http.StatusUnauthorized,
	CodeInsufficientScope:      http.StatusForbidden,
	CodeModelNotAllowed:        http.StatusForbidden,
	CodeRateLimitExceeded:      http.StatusTooManyRequests,
	CodeInvalidRequest:         http.StatusBadRequest,
	CodeUnsupportedParameter:   http.StatusBadRequest,
	CodeUnsupportedMediaType:   http.StatusUnsupportedMediaType,
	CodeRequestTooLarge:        http.StatusRequestEntityTooLarge,
	CodeEndpointNotFound:       http.StatusNotFound,
	CodeMethodNotAllowed:       http.StatusMethodNotAllowed,
	CodeModelNotFound:          http.StatusNotFound,
	CodeToolLimitExceeded:      http.StatusBadRequest,
	CodeNoExecutableTargets:    http.StatusNotFound,
	CodeAllTargetsCoolingDown:  http.StatusServiceUnavailable,
	CodeProviderCircuitOpen:    http.StatusServiceUnavailable,
	CodeModelCooldown:          http.StatusTooManyRequests,
	CodeStreamThroughputTooLow: http.StatusGatewayTimeout,
	CodeUpstreamTimeout:        http.StatusGatewayTimeout,
	CodeUpstreamRateLimited:    http.StatusTooManyRequests,
	CodeUpstreamError:          http.StatusBadGateway,
	CodeServerShuttingDown:     http.StatusServiceUnavailable,
	CodeInternalError:          http.StatusInternalServerError,
	CodeClientClosedRequest:    499,

	CodeConnectionSlotsBusy:       http.StatusTooManyRequests,
	CodeRateLimitQueueFull:        http.StatusTooManyRequests,
	CodeRateLimitQueueTimeout:     http.StatusServiceUnavailable,
	CodeRateLimitExecutionTimeout: http.StatusGatewayTimeout,
	CodeUpstreamBufferBusy:        http.StatusServiceUnavailable,

	CodeLeaseContextRequired:         http.StatusBadRequest,
	CodeLeaseContextInvalid:          http.StatusBadRequest,
	CodeLeaseRequired:                http.StatusConflict,
	CodeLeaseFenceStale:              http.StatusConflict,
	CodeLeaseConnectionMismatch:      http.StatusConflict,
	CodeLeaseUnsupportedRoute:        http.StatusBadRequest,
	CodeLeaseScopeRequired:           http.StatusForbidden,
	CodeLeaseKeyConfigurationInvalid: http.StatusForbidden,
	CodeLeaseCapacityUnavailable:     http.StatusTooManyRequests,
	CodeLeaseActionInvalid:           http.StatusBadRequest,
	CodeLeaseOwnerConflict:           http.StatusConflict,

	CodeInvalidJSON:         http.StatusBadRequest,
	CodeValidationFailed:    http.StatusBadRequest,
	CodeBadRequest:          http.StatusBadRequest,
	CodeUnauthorized:        http.StatusUnauthorized,
	CodeForbidden:           http.StatusForbidden,
	CodeCrossOriginRejected: http.StatusForbidden,
	CodeNotFound:            http.StatusNotFound,
	CodeConflict:            http.StatusConflict,
	CodePreconditionFailed:  http.StatusPreconditionFailed,
	CodePayloadTooLarge:     http.StatusRequestEntityTooLarge,
	CodeRateLimited:         http.StatusTooManyRequests,
	CodeInternal:            http.StatusInternalServerError,
	CodeUnavailable:         http.StatusServiceUnavailable,
	CodeMisdirectedRequest:  http.StatusMisdirectedRequest,
}

// StatusOfCode is the HTTP status of an error code; 0 for a code the table
// does not fix (an upstream code relayed as a caller fault).
func StatusOfCode(code string) int { return codeStatus[code] }

// APICodeOfStatus names a management API error by its status, for an error
// that carries no code of its own (40-admin-api §1).
func APICodeOfStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusConflict:
		return CodeConflict
	case http.StatusPreconditionFailed:
		return CodePreconditionFailed
	case http.StatusRequestEntityTooLarge:
		return CodePayloadTooLarge
	case http.StatusUnsupportedMediaType:
		return CodeUnsupportedMediaType
	case http.StatusTooManyRequests:
		return CodeRateLimited
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	if status >= 500 {
		return CodeInternal
	}
	return CodeBadRequest
}

// GatewayCodeOfStatus names a /v1 error by its status, for an error that
// carries no code of its own (a bare echo error, a recovered panic).
func GatewayCodeOfStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return CodeInvalidAPIKey
	case http.StatusNotFound:
		return CodeEndpointNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return CodeRequestTooLarge
	case http.StatusUnsupportedMediaType:
		return CodeUnsupportedMediaType
	case http.StatusTooManyRequests:
		return CodeRateLimitExceeded
	}
	if status >= 500 {
		return CodeInternalError
	}
	return CodeInvalidRequest
}

// RequestError is a problem with an HTTP request itself (unparsable JSON,
// wrong media type, body too large, a cross-origin write), found before
// any service is called. Its status follows from its code.
type RequestError struct {
	Code    string
	Message string
}

func (e *RequestError) Error() string { return e.Message }

// HTTPStatus is the status of the error's code.
func (e *RequestError) HTTPStatus() int {
	if s := StatusOfCode(e.Code); s != 0 {
		return s
	}
	return http.StatusBadRequest
}
