package handlers

import (
	"fmt"

	"switchyard/services"
)

// Request errors of the management API: problems with the request itself,
// found before any service is called. Each names its code; the status
// follows from the code (services/errcodes.go).
func errInvalidJSON(detail string) error {
	return &services.RequestError{Code: services.CodeInvalidJSON, Message: "The body is not valid JSON: " + detail}
}

var (
	errMediaType = &services.RequestError{Code: services.CodeUnsupportedMediaType, Message: "Send the body as Content-Type: application/json."}
	errTooLarge  = &services.RequestError{Code: services.CodePayloadTooLarge, Message: "The body is larger than 1 MiB."}
)

func errBadQuery(name, msg string) error {
	return &services.RequestError{Code: services.CodeValidationFailed, Message: fmt.Sprintf("%s: %s", name, msg)}
}
