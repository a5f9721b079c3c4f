package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// MaxAPIBody is the management API's body limit (40-admin-api §1).
const MaxAPIBody = 1 << 20

// bodyProblem says why readJSONBody refused a body. Each audience words it
// in its own error format: apiError for /api (40-admin-api §1),
// gatewayError for /v1 (10-gateway-api §2 step 7).
type bodyProblem uint8

const (
	bodyOK         bodyProblem = iota
	bodyNotJSON                // the Content-Type is not application/json: 415
	bodyTooLarge               // over the limit, announced or read: 413
	bodyUnreadable             // the read failed (client gone, body deadline): 400
)

// readJSONBody is the one body reader of the handlers: the media type must be
// JSON and the body at most max bytes. A Content-Length over max is refused
// before anything is read. The read is bounded in time by the server's body
// deadline (app: first byte, minimum rate, total), which also closes a
// connection that sends too slowly.
// w is the response the request came with (an oversized body closes the
// connection after the answer).
func readJSONBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bodyProblem) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return nil, bodyNotJSON
	}
	if r.ContentLength > max {
		return nil, bodyTooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyTooLarge
		}
		return nil, bodyUnreadable
	}
	return b, bodyOK
}

// apiError is the management API's answer to a refused body (the limit is
// always MaxAPIBody there).
func (p bodyProblem) apiError() error {
	switch p {
	case bodyNotJSON:
		return errMediaType
	case bodyTooLarge:
		return errTooLarge
	}
	return errInvalidJSON("the body could not be read")
}

// gatewayError is the client API's answer to a refused body of at most max bytes.
func (p bodyProblem) gatewayError(max int64) *services.GatewayError {
	switch p {
	case bodyNotJSON:
		return gwErr(services.CodeUnsupportedMediaType, "Send the body as Content-Type: application/json.")
	case bodyTooLarge:
		return gwErr(services.CodeRequestTooLarge, fmt.Sprintf("The body is larger than %d bytes.", max))
	}
	return gwErr(services.CodeInvalidRequest, "The body could not be read.")
}

// gatewayBody reads a /v1 body for the gateway (gateway.Call.ReadBody),
// refusing it in the client API's error format.
func gatewayBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	body, p := readJSONBody(w, r, max)
	if p != bodyOK {
		return nil, p.gatewayError(max)
	}
	return body, nil
}

// apiBody reads a management API body (JSON, at most 1 MiB); the caller or
// the service it hands the bytes to decodes strictly.
func apiBody(c echo.Context) ([]byte, error) {
	body, p := readJSONBody(c.Response(), c.Request(), MaxAPIBody)
	if p != bodyOK {
		return nil, p.apiError()
	}
	return body, nil
}

// decodeJSON reads a strict JSON body into dst: the media type must be JSON,
// the body at most 1 MiB, every key known and every value of the right type.
// Unknown keys and type errors come back together as one ValidationError.
func decodeJSON(c echo.Context, dst any) error {
	body, err := apiBody(c)
	if err != nil {
		return err
	}
	return decodeStrict(body, dst)
}

// decodeStrict decodes body into dst and reports unknown and mistyped fields.
func decodeStrict(body []byte, dst any) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return errInvalidJSON("expected a JSON object")
		}
		return errInvalidJSON(syntaxDetail(err))
	}
	fields := map[string]string{}
	known := jsonFieldNames(reflect.TypeOf(dst).Elem())
	for k := range raw {
		if !known[k] {
			fields[k] = "unknown field"
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if len(fields) == 0 {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			name := ute.Field
			if name == "" {
				name = "body"
			}
			fields[name] = fmt.Sprintf("must be %s", jsonKind(ute.Type))
		} else if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			fields[strings.Trim(name, `"`)] = "unknown field"
		} else if len(fields) == 0 {
			fields["body"] = err.Error()
		}
	}
	if len(fields) > 0 {
		return &services.ValidationError{Fields: fields}
	}
	return nil
}

func syntaxDetail(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return err.Error()
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && strings.HasPrefix(t.Name(), "Opt[") {
		if f, ok := t.FieldByName("V"); ok {
			return jsonKind(f.Type)
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		if t.String() == "time.Time" {
			return "an RFC 3339 time"
		}
		return "an object"
	}
	return "of another type"
}

// jsonFieldNames lists the JSON keys of a struct type.
func jsonFieldNames(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Name
		if tag := f.Tag.Get("json"); tag != "" {
			if tag == "-" {
				continue
			}
			name = strings.Split(tag, ",")[0]
		}
		out[name] = true
	}
	return out
}
