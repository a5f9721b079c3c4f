package services

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strconv"
	"testing"
)

// TestEveryCodeHasItsStatus keeps the table whole: every Code* constant of
// errcodes.go has a status, and the statuses of 10-gateway-api §9.3 and
// 40-admin-api §1 hold for a sample.
func TestEveryCodeHasItsStatus(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errcodes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				code, _ := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				n++
				if StatusOfCode(code) == 0 {
					t.Errorf("%s (%q) has no status", name.Name, code)
				}
			}
		}
	}
	if n < 50 {
		t.Fatalf("found %d codes; the table is not being read", n)
	}
	for code, want := range map[string]int{CodeInvalidAPIKey: 401, CodeModelNotAllowed: 403, CodeAllTargetsCoolingDown: 503,
		CodeModelCooldown: 429, CodeLeaseFenceStale: 409, CodeRateLimitExecutionTimeout: 504, CodePreconditionFailed: 412,
		CodeCrossOriginRejected: 403, CodeInvalidJSON: 400, CodeUnavailable: 503} {
		if got := StatusOfCode(code); got != want {
			t.Errorf("%s: status %d, want %d", code, got, want)
		}
	}
}

func TestGatewayErrorStatusFollowsItsCode(t *testing.T) {
	if e := NewGatewayError(CodeRateLimitExceeded, "slow down"); e.HTTPStatus() != http.StatusTooManyRequests || e.Status != 429 {
		t.Errorf("rate_limit_exceeded: %d / %d", e.HTTPStatus(), e.Status)
	}
	// An upstream-decided status wins over the code's.
	if e := (&GatewayError{Status: 503, Code: CodeUpstreamError}); e.HTTPStatus() != 503 {
		t.Errorf("upstream_error with 503: %d", e.HTTPStatus())
	}
	// A relayed upstream code the table does not know is a caller fault.
	if e := (&GatewayError{Code: "context_length_exceeded"}); e.HTTPStatus() != 400 {
		t.Errorf("relayed code: %d", e.HTTPStatus())
	}
	// A bare status names the code the table gives back the same status for.
	for _, s := range []int{401, 404, 405, 413, 415, 429, 500} {
		if e := GatewayErrorFromStatus(s, "x"); StatusOfCode(e.Code) != s {
			t.Errorf("status %d: code %s, whose status is %d", s, e.Code, StatusOfCode(e.Code))
		}
	}
	for _, s := range []int{401, 403, 404, 405, 409, 412, 413, 415, 429, 503} {
		if c := APICodeOfStatus(s); StatusOfCode(c) != s {
			t.Errorf("api status %d: code %s, whose status is %d", s, c, StatusOfCode(c))
		}
	}
	if (&RequestError{Code: CodePayloadTooLarge}).HTTPStatus() != 413 {
		t.Error("payload_too_large is not 413")
	}
}
