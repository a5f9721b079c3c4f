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

// decodeJSON reads a strict JSON body into dst: the media type must be JSON,
// the body at most 1 MiB, every key known and every value of the right type.
// Unknown keys and type errors come back together as one ValidationError.
func decodeJSON(c echo.Context, dst any) error {
	r := c.Request()
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		return errMediaType
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, MaxAPIBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge
		}
		return errInvalidJSON("the body could not be read")
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
