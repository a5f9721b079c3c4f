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
	Status      int
	Code        string
	Message     string
	Param       string
	RetryAfter  int // seconds; > 0 sets Retry-After
	Suggestions []string
	Diagnostics any
	// TopStatus is the top-level "status" extension ("waiting_for_capacity").
	TopStatus string
}

func (e *GatewayError) Error() string { return e.Message }

// openAIType and anthropicType map a gateway error to each dialect's type.
func (e *GatewayError) openAIType() string {
	if strings.HasPrefix(e.Code, "LEASE_") {
		return "lease_error"
	}
	switch {
	case e.Status == 401:
		return "authentication_error"
	case e.Status == 403:
		return "permission_error"
	case e.Status == 429:
		return "rate_limit_error"
	case e.Status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// AnthropicType is the Anthropic error type of e.
func (e *GatewayError) AnthropicType() string { return e.anthropicType() }

func (e *GatewayError) anthropicType() string {
	switch {
	case e.Status == 401:
		return "authentication_error"
	case e.Status == 403:
		return "permission_error"
	case e.Status == 404:
		return "not_found_error"
	case e.Status == 413:
		return "request_too_large"
	case e.Status == 429:
		return "rate_limit_error"
	case e.Status == 503:
		return "overloaded_error"
	case e.Status == 504:
		return "timeout_error"
	case e.Status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// GatewayErrorFromStatus builds a generic gateway error for a bare status.
func GatewayErrorFromStatus(status int, msg string) *GatewayError {
	code := "invalid_request"
	switch status {
	case 401:
		code = "invalid_api_key"
	case 404:
		code = "endpoint_not_found"
	case 405:
		code = "method_not_allowed"
	case 413:
		code = "request_too_large"
	case 415:
		code = "unsupported_media_type"
	case 429:
		code = "rate_limit_exceeded"
	}
	if status >= 500 {
		code = "internal_error"
	}
	return &GatewayError{Status: status, Code: code, Message: msg}
}

// WriteGatewayError writes e in the shape of the endpoint at path.
func WriteGatewayError(w http.ResponseWriter, path string, e *GatewayError, requestID string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	} else if e.Status == 429 || e.Status == 503 {
		h.Set("Retry-After", "1")
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
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}
