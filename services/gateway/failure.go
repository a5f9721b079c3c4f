package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"switchyard/services"
)

// Failure kinds of one dispatch and what the attempt loop does with them.
type failKind int

const (
	failNone       failKind = iota
	failRetryConn           // try the next connection of this target (429, 5xx, auth, transport, timeout, bad body)
	failNextTarget          // the model is unknown here: move to the next target (404)
	failCaller              // the upstream rejected the request itself: relay and stop (400, 413, 422)
	failClientGone          // the client left: stop, write nothing
)

// failure describes one failed dispatch.
type failure struct {
	kind       failKind
	status     int    // upstream status, 0 for transport failures
	reason     string // rate_limit, server_error, auth_error, timeout, transport, not_found, malformed, empty_stream, caller_fault
	code       string // upstream error code when it looks like one
	message    string // sanitised upstream message
	retryAfter time.Duration
	hintSource string // header, body, or ""
}

var upstreamCode = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// classifyStatus decides what a non-2xx upstream answer means. Resilience
// rules (restatement, error rules, cooldowns) refine this later; here a
// failed connection is only skipped for this request.
func classifyStatus(status int, h http.Header, body []byte, now time.Time) failure {
	f := failure{status: status}
	f.code, f.message = parseUpstreamError(body)
	if f.message == "" {
		f.message = http.StatusText(status)
	}
	switch {
	case status == 429:
		f.kind, f.reason = failRetryConn, "rate_limit"
		f.retryAfter, f.hintSource = retryAfterOf(h, now)
	case status == 404:
		f.kind, f.reason = failNextTarget, "not_found"
	case status == 400 || status == 413 || status == 422:
		f.kind, f.reason = failCaller, "caller_fault"
	case status == 401 || status == 402 || status == 403 || status == 407:
		f.kind, f.reason = failRetryConn, "auth_error"
	case status == 408 || status == 504:
		f.kind, f.reason = failRetryConn, "timeout"
	case status >= 500:
		f.kind, f.reason = failRetryConn, "server_error"
		f.retryAfter, f.hintSource = retryAfterOf(h, now)
	default:
		f.kind, f.reason = failRetryConn, "upstream_error"
	}
	return f
}

// retryAfterOf reads Retry-After (seconds or HTTP-date), capped at one hour.
func retryAfterOf(h http.Header, now time.Time) (time.Duration, string) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, ""
	}
	var d time.Duration
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
		d = time.Duration(n * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d <= 0 {
		return 0, ""
	}
	if d > time.Hour {
		d = time.Hour
	}
	return d, "header"
}

// parseUpstreamError pulls code and message out of an OpenAI- or
// Anthropic-shaped error body.
func parseUpstreamError(body []byte) (code, msg string) {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Error) == 0 {
		return "", Sanitize(string(body))
	}
	var e struct {
		Code    any    `json:"code"`
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(v.Error, &e) != nil {
		var s string
		if json.Unmarshal(v.Error, &s) == nil {
			return "", Sanitize(s)
		}
		return "", ""
	}
	if s, ok := e.Code.(string); ok && upstreamCode.MatchString(s) {
		code = s
	} else if upstreamCode.MatchString(e.Type) {
		code = e.Type
	}
	return code, Sanitize(e.Message)
}

var secretLike = regexp.MustCompile(`(?i)(sk-[A-Za-z0-9_\-]{6,}|bearer\s+[A-Za-z0-9._\-]+|key=[^\s&"]+|[A-Za-z0-9+/_\-]{32,})`)

// Sanitize keeps the first line of upstream text, at most 1024 characters,
// with anything credential-like replaced (10-gateway-api §9.4).
func Sanitize(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if len(s) > 1024 {
		s = s[:1024]
	}
	return secretLike.ReplaceAllString(s, "[redacted]")
}

// errClientGone marks a dispatch ended by the client's departure.
var errClientGone = errors.New("client closed request")

// finalError turns the last failure of an exhausted request into the
// client-facing error (10-gateway-api §9.3).
func finalError(last *failure, attempted int, excludedByTimer time.Duration, anyConnection bool) *services.GatewayError {
	if last == nil {
		if excludedByTimer > 0 {
			return &services.GatewayError{Status: 503, Code: "all_targets_cooling_down", RetryAfter: ceilSeconds(excludedByTimer),
				Message: "Every target is cooling down; retry after " + strconv.Itoa(ceilSeconds(excludedByTimer)) + " s."}
		}
		msg := "No connection can serve this request: add or enable a connection for its provider, or check the key's allowed connections."
		if !anyConnection {
			msg = "No enabled connection can serve this model; add one in the dashboard."
		}
		return &services.GatewayError{Status: 404, Code: "no_executable_targets", Message: msg}
	}
	switch last.reason {
	case "rate_limit":
		ra := ceilSeconds(last.retryAfter)
		return &services.GatewayError{Status: 429, Code: "upstream_rate_limited", RetryAfter: ra,
			Message: "The upstream rate-limited every connection tried (429): " + last.message}
	case "not_found":
		return &services.GatewayError{Status: 404, Code: "model_not_found", Message: "The upstream does not know this model: " + last.message}
	case "timeout":
		return &services.GatewayError{Status: 504, Code: "upstream_timeout", Message: "The upstream did not answer in time."}
	}
	status := 502
	if last.status >= 500 {
		status = last.status
		if status == 529 {
			status = 503
		}
		if status > 599 {
			status = 502
		}
	}
	msg := "The upstream failed"
	if last.status > 0 {
		msg += " with " + strconv.Itoa(last.status)
	}
	if last.message != "" {
		msg += ": " + last.message
	}
	e := &services.GatewayError{Status: status, Code: "upstream_error", Message: msg}
	if status == 503 {
		e.RetryAfter = max(1, ceilSeconds(last.retryAfter))
	}
	return e
}

func ceilSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	if s > 3600 {
		s = 3600
	}
	return s
}
