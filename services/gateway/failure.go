package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// result is how one dispatch ended, before classification.
type result struct {
	ok         bool
	gone       bool // the client left
	shutdown   bool // cut at the end of the shutdown drain (penalises nothing)
	status     int  // upstream status; 0 for transport failures
	transport  string
	header     http.Header
	body       []byte
	detail     string // empty_response, malformed (synthetic 502)
	message    string
	postCommit bool
	timeout    bool  // our own target or idle timeout
	localErr   error // a Switchyard limiter refused (penalises nothing)
	callerErr  error // the request cannot be translated for this upstream
	watchdog   bool  // the throughput watchdog aborted the attempt
	// latency is dispatch → first useful byte (stream) or → complete body
	// (non-stream), for the dispatch metrics of 30-routing §8.1.
	latency time.Duration
}

func resOK() result   { return result{ok: true} }
func resGone() result { return result{gone: true} }

func resStatus(status int, h http.Header, body []byte) result {
	return result{status: status, header: h, body: body}
}

// resBad is a synthetic 502 for an empty or unparsable upstream answer.
func resBad(detail, msg string) result {
	return result{status: 502, detail: detail, message: msg}
}

func resTransport(kind, msg string) result {
	return result{transport: kind, message: msg, timeout: kind == resilience.TransportHeadersTimeout || kind == resilience.TransportIdleTimeout}
}

var errTargetTimeout = errors.New("target timeout")
var errStreamIdle = errors.New("upstream stream idle")
var errExecTimeout = errors.New("request queue execution timeout")
var errWatchdog = errors.New("stream throughput too low")
var errClientGone = errors.New("client closed request")

// transportResult classifies a failed exchange: the client leaving, our own
// timeouts, or a transport error of a known kind.
// ErrShuttingDown is the cancellation cause the server gives requests it cuts
// when the shutdown drain runs out.
var ErrShuttingDown = errors.New("server shutting down")

func transportResult(ctx context.Context, err error) result {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errTargetTimeout):
		return resTransport(resilience.TransportHeadersTimeout, "no answer within the target timeout")
	case errors.Is(cause, errExecTimeout):
		return result{localErr: &traffic.LimitError{Code: traffic.CodeExecutionTimeout, Status: 504,
			Message: "The upstream did not send headers within requestQueue.maxWaitMs."}, message: "execution timeout"}
	case errors.Is(cause, ErrShuttingDown):
		return result{shutdown: true, message: ErrShuttingDown.Error()}
	case errors.Is(cause, errStreamIdle):
		return resTransport(resilience.TransportIdleTimeout, "the upstream stream went silent")
	case ctx.Err() != nil:
		return resGone()
	case errors.Is(err, ErrEgressRefused):
		return resTransport(resilience.TransportDial, ErrEgressRefused.Error())
	}
	var op *net.OpError
	var tlsErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case errors.As(err, &tlsErr) || errors.As(err, &recErr) || strings.Contains(err.Error(), "tls:"):
		return resTransport(resilience.TransportTLS, "TLS handshake with the upstream failed")
	case strings.Contains(err.Error(), "proxyconnect"):
		return resTransport(resilience.TransportProxy, "the outbound proxy failed")
	case errors.As(err, &op) && op.Op == "dial":
		return resTransport(resilience.TransportDial, "could not connect to the upstream")
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return resTransport(resilience.TransportReset, "the upstream closed the connection")
	}
	return resTransport(resilience.TransportReset, "connection to the upstream failed")
}

// redactResult replaces every spelling of the credentials sent for c in
// what the upstream answered, before anything reads it: the classifier,
// last_error, the request log, the client's error and the dashboard all
// take their text from the result (issue 17: an upstream echoing the key
// in a 401 put it everywhere). Successful results carry no upstream text.
func redactResult(res *result, c *services.Connection) {
	if res.ok || (len(res.body) == 0 && res.message == "") {
		return
	}
	rd := services.NewCredentialRedactor(services.ConnectionSecrets(c)...)
	res.body = rd.Bytes(res.body)
	res.message = rd.String(res.message)
}

var upstreamCode = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// parseUpstreamError pulls code, type and message out of an OpenAI-,
// Anthropic- or Gemini-shaped error body.
func parseUpstreamError(body []byte) (code, typ, msg string) {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Error) == 0 {
		return "", "", Sanitize(string(body))
	}
	var e struct {
		Code    any    `json:"code"`
		Type    string `json:"type"`
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if json.Unmarshal(v.Error, &e) != nil {
		var s string
		if json.Unmarshal(v.Error, &s) == nil {
			return "", "", Sanitize(s)
		}
		return "", "", ""
	}
	switch c := e.Code.(type) {
	case string:
		code = c
	}
	typ = e.Type
	if typ == "" {
		typ = e.Status
	}
	return code, typ, Sanitize(e.Message)
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

// failureOf turns a dispatch result into the classifier's input.
func failureOf(r result, t target, c *services.Connection, toolCount int, now time.Time) resilience.Failure {
	f := resilience.Failure{At: now}
	f.Provider, f.ProviderClass = t.provider.ID, t.provider.AuthClass
	f.PerModelQuota = t.provider.PerModelQuota || t.provider.PassthroughModels
	f.Custom = t.provider.Custom
	f.ConnectionID, f.Model = c.ID, t.model
	f.Status, f.Transport, f.Header, f.Body, f.Detail = r.status, r.transport, r.header, r.body, r.detail
	f.ToolCount = toolCount
	f.Phase = resilience.PhasePreCommit
	if r.postCommit {
		f.Phase = resilience.PhasePostCommit
	}
	f.ClientAbort = r.gone
	f.LocalErr = r.localErr
	if len(r.body) > 0 {
		f.Code, f.Type, f.Message = parseUpstreamError(r.body)
	}
	if f.Message == "" {
		f.Message = r.message
	}
	if f.Message == "" && r.status > 0 {
		f.Message = http.StatusText(r.status)
	}
	return f
}
