package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Errors of a settings PATCH that are not field problems. The HTTP layer maps
// them: ErrPreconditionFailed → 412 precondition_failed, ErrEmptyPatch → 400
// "no settings to update", *JSONError → 400 invalid_json.
var (
	ErrPreconditionFailed = errors.New("the settings changed since they were read; GET them again and retry with the new ETag")
	ErrEmptyPatch         = errors.New("no settings to update")
)

// JSONError says a PATCH body is not a JSON object.
type JSONError struct{ Detail string }

func (e *JSONError) Error() string { return "The body is not valid JSON: " + e.Detail }

// DecodePatch parses a PATCH body: a non-empty JSON object, numbers kept
// exact (json.Number).
func DecodePatch(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &JSONError{Detail: fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)}
		}
		if errors.Is(err, io.EOF) {
			return nil, &JSONError{Detail: "the body is empty"}
		}
		return nil, &JSONError{Detail: err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &JSONError{Detail: "unexpected data after the JSON object"}
	}
	m, ok := root.(map[string]any)
	if !ok {
		return nil, &JSONError{Detail: "expected a JSON object"}
	}
	if len(m) == 0 {
		return nil, ErrEmptyPatch
	}
	return m, nil
}
