package handlers

import (
	"fmt"
	"net/http"
)

// RequestError is a problem with the HTTP request itself (unparsable JSON,
// wrong media type, body too large), found before any service is called.
type RequestError struct {
	Status  int
	Code    string
	Message string
}

func (e *RequestError) Error() string { return e.Message }

// Request errors shared by the management API.
func errInvalidJSON(detail string) error {
	return &RequestError{Status: http.StatusBadRequest, Code: "invalid_json", Message: "The body is not valid JSON: " + detail}
}

var (
	errMediaType = &RequestError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Message: "Send the body as Content-Type: application/json."}
	errTooLarge  = &RequestError{Status: http.StatusRequestEntityTooLarge, Code: "payload_too_large", Message: "The body is larger than 1 MiB."}
)

func errBadQuery(name, msg string) error {
	return &RequestError{Status: http.StatusBadRequest, Code: "validation_failed", Message: fmt.Sprintf("%s: %s", name, msg)}
}
