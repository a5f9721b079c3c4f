package services

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// GatewayError is a /v1 error with its code of 10-gateway-api §9.3. The
// error handler writes it in the caller's dialect (OpenAI or Anthropic).
type GatewayError struct {
	// Code names the error (the Code* constants, or an upstream code relayed
	// as a caller fault).
	Code string
	// Status is the HTTP status: the code's (NewGatewayError), or the
	// upstream's where the upstream decides it (upstream_error ≥ 500, a
	// relayed caller fault). 0 reads as the code's status.
	Status      int
	Message     string
	Param       string
	RetryAfter  int // seconds; > 0 sets Retry-After
	Suggestions []string
	Diagnostics any
	// TopStatus is the top-level "status" extension ("waiting_for_capacity").
	TopStatus string
}

func (e *GatewayError) Error() string { return e.Message }

// NewGatewayError builds the error of code with the code's status
// (StatusOfCode; 400 for a code the table does not fix).
func NewGatewayError(code, msg string) *GatewayError {
	return &GatewayError{Status: codeStatusOr400(code), Code: code, Message: msg}
}

// WithParam names the request field the error is about.
func (e *GatewayError) WithParam(param string) *GatewayError {
	e.Param = param
	return e
}

// WithRetryAfter sets Retry-After, in seconds.
func (e *GatewayError) WithRetryAfter(seconds int) *GatewayError {
	e.RetryAfter = seconds
	return e
}

func codeStatusOr400(code string) int {
	if s := StatusOfCode(code); s != 0 {
		return s
	}
	return http.StatusBadRequest
}

// HTTPStatus is the status the error answers with: Status when set, else
// the code's (400 for a code the table does not know).
func (e *GatewayError) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return codeStatusOr400(e.Code)
}

// openAIType and anthropicType map a gateway error to each dialect's type.
func (e *GatewayError) openAIType() string {
	if strings.HasPrefix(e.Code, "LEASE_") {
		return "lease_error"
	}
	switch status := e.HTTPStatus(); {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// AnthropicType is the Anthropic error type of e.
func (e *GatewayError) AnthropicType() string { return e.anthropicType() }

func (e *GatewayError) anthropicType() string {
	switch status := e.HTTPStatus(); {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 413:
		return "request_too_large"
	case status == 429:
		return "rate_limit_error"
	case status == 503:
		return "overloaded_error"
	case status == 504:
		return "timeout_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// GatewayErrorFromStatus builds a generic gateway error for a bare status
// (an error that carries no code of its own).
func GatewayErrorFromStatus(status int, msg string) *GatewayError {
	return &GatewayError{Status: status, Code: GatewayCodeOfStatus(status), Message: msg}
}

// callerFault lists the statuses a retry cannot fix (10-gateway-api §8.2).
func callerFault(status int) bool {
	switch status {
	case 400, 401, 403, 404, 413, 415, 422:
		return true
	}
	return false
}

// WriteGatewayError writes e in the shape of the endpoint at path.
func WriteGatewayError(w http.ResponseWriter, path string, e *GatewayError, requestID string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	status := e.HTTPStatus()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	} else if status == 429 || status == 503 {
		h.Set("Retry-After", "1")
	}
	if callerFault(e.Status) {
		// The official SDKs and coding agents honour it and stop retrying a
		// request that cannot succeed (10-gateway-api §8.2).
		h.Set("x-should-retry", "false")
	}
	if e.Code != "" && h.Get("X-Switchyard-Error-Code") == "" {
		h.Set("X-Switchyard-Error-Code", e.Code)
	}
	var body any
	if strings.HasPrefix(path, "/v1/messages") || strings.HasPrefix(path, "/messages") {
		body = map[string]any{"type": "error", "error": map[string]any{"type": e.anthropicType(), "message": e.Message, "code": e.Code}, "request_id": requestID}
	} else {
		inner := map[string]any{"message": e.Message, "type": e.openAIType(), "code": e.Code, "param": nil}
		if e.Param != "" {
			inner["param"] = e.Param
		}
		if e.Suggestions != nil {
			inner["suggestions"] = e.Suggestions
		}
		m := map[string]any{"error": inner}
		if e.Diagnostics != nil {
			m["diagnostics"] = e.Diagnostics
		}
		if e.TopStatus != "" {
			m["status"] = e.TopStatus
		}
		body = m
	}
	b, _ := json.Marshal(body)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
