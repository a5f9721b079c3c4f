package handlers

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"switchyard/services"
)

// failingBody is a body whose read breaks off (a client gone mid-upload).
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
func (failingBody) Close() error             { return nil }

// TestReadJSONBody drives the one body reader through each refusal and the
// three audiences' wording of it: /api, /v1 and the lease endpoint.
func TestReadJSONBody(t *testing.T) {
	req := func(ct string, body io.Reader, length int64) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", body)
		r.Header.Set("Content-Type", ct)
		r.ContentLength = length
		return r
	}
	tests := []struct {
		name              string
		r                 *http.Request
		want              bodyProblem
		apiCode, gwCode   string
		apiStatus, status int
	}{
		{"json", req("application/json; charset=utf-8", strings.NewReader(`{"a":1}`), 7), bodyOK, "", "", 0, 0},
		{"form", req("application/x-www-form-urlencoded", strings.NewReader("a=1"), 3), bodyNotJSON,
			services.CodeUnsupportedMediaType, services.CodeUnsupportedMediaType, 415, 415},
		{"announced too large", req("application/json", strings.NewReader("{}"), 11), bodyTooLarge,
			services.CodePayloadTooLarge, services.CodeRequestTooLarge, 413, 413},
		{"read too large", req("application/json", strings.NewReader(strings.Repeat(" ", 11)), -1), bodyTooLarge,
			services.CodePayloadTooLarge, services.CodeRequestTooLarge, 413, 413},
		{"unreadable", req("application/json", failingBody{}, -1), bodyUnreadable,
			services.CodeInvalidJSON, services.CodeInvalidRequest, 400, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, p := readJSONBody(httptest.NewRecorder(), tc.r, 10)
			if p != tc.want {
				t.Fatalf("problem %d, want %d", p, tc.want)
			}
			if p == bodyOK {
				if string(b) != `{"a":1}` {
					t.Fatalf("body %q", b)
				}
				return
			}
			var rerr *services.RequestError
			if !errors.As(p.apiError(), &rerr) || rerr.Code != tc.apiCode || rerr.HTTPStatus() != tc.apiStatus {
				t.Errorf("api error %v, want %s %d", p.apiError(), tc.apiCode, tc.apiStatus)
			}
			if g := p.gatewayError(10); g.Code != tc.gwCode || g.HTTPStatus() != tc.status {
				t.Errorf("gateway error %s %d, want %s %d", g.Code, g.HTTPStatus(), tc.gwCode, tc.status)
			}
		})
	}
}
