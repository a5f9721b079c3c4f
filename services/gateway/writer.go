package gateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"switchyard/services"
	"switchyard/services/translate"
)

// clientWriter owns the client side of one request: headers, commit state,
// per-write deadlines, keepalives and the terminal frame. Only the request's
// goroutine writes through it; the mutex guards against the keepalive path.
type clientWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	r   *http.Request
	req *Request
	set *Settings

	mu         sync.Mutex
	isCommit   bool // status line written
	useful     bool // the first useful byte was written
	isGone     bool // a write failed or the client left
	lastWrite  time.Time
	dispatched bool
	startedAt  time.Time
	firstByte  time.Time
	status     int
	streamEnd  string // completed, error, aborted
	kaFrame    []byte
	errFrame   func(*services.GatewayError) []byte
}

func newClientWriter(w http.ResponseWriter, r *http.Request, req *Request, set *Settings) *clientWriter {
	h := w.Header()
	h.Set("X-Switchyard-Request-Id", req.ID)
	o := &clientWriter{w: w, rc: http.NewResponseController(w), r: r, req: req, set: set, startedAt: time.Now(), lastWrite: time.Now()}
	// Keepalives and the in-band error frame speak the client's format.
	switch req.Inbound {
	case InboundMessages:
		a := newMessagesPassthrough()
		o.kaFrame, o.errFrame = a.Keepalive(), a.ErrorFrame
	case InboundResponses:
		rs := &translated{s: translate.NewChatToResponsesStream(req.Model, req.ID)}
		o.kaFrame, o.errFrame = chatKeepalive, rs.ErrorFrame
	default:
		a := newChatPassthrough()
		o.kaFrame, o.errFrame = a.Keepalive(), a.ErrorFrame
	}
	if req.Inbound == InboundMessages {
		w.Header().Set("request-id", req.ID)
	}
	return o
}

// setDispatch records the routing headers of the current dispatch; they are
// sent only if the response is not committed yet.
func (o *clientWriter) setDispatch(connID, provider, model string, fallbacks int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dispatched = true
	if o.isCommit {
		return
	}
	h := o.w.Header()
	h.Set("X-Switchyard-Selected-Connection-Id", connID)
	h.Set("X-Switchyard-Provider", provider)
	h.Set("X-Switchyard-Model", model)
	h.Set("X-Switchyard-Fallback-Attempts", strconv.Itoa(fallbacks))
}

func (o *clientWriter) gone() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isGone {
		return true
	}
	// A request cut at the end of the shutdown drain still has its client.
	ctx := o.r.Context()
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrShuttingDown)
}

func (o *clientWriter) committed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.isCommit
}

func (o *clientWriter) committedUseful() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.useful
}

// write writes p with a fresh write deadline and flushes; false when the
// client is gone.
func (o *clientWriter) writeLocked(p []byte) bool {
	if o.isGone {
		return false
	}
	if o.set.WriteTimeout > 0 {
		_ = o.rc.SetWriteDeadline(time.Now().Add(o.set.WriteTimeout))
	}
	if _, err := o.w.Write(p); err != nil {
		o.isGone = true
		return false
	}
	if err := o.rc.Flush(); err != nil {
		o.isGone = true
		return false
	}
	o.lastWrite = time.Now()
	return true
}

func (o *clientWriter) commitStreamLocked() {
	if o.isCommit {
		return
	}
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	o.isCommit = true
	o.status = http.StatusOK
}

// keepalive writes an SSE comment if the client has heard nothing for the
// idle interval. The first one commits 200 without the per-dispatch headers.
func (o *clientWriter) keepalive(now time.Time, _ []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isGone || o.set.KeepaliveIdle <= 0 || now.Sub(o.lastWrite) < o.set.KeepaliveIdle {
		return
	}
	if !o.isCommit {
		h := o.w.Header()
		for _, k := range []string{"X-Switchyard-Selected-Connection-Id", "X-Switchyard-Provider", "X-Switchyard-Model", "X-Switchyard-Fallback-Attempts"} {
			h.Del(k)
		}
		o.commitStreamLocked()
	}
	o.writeLocked(o.kaFrame)
}

// commitUseful commits the stream at the first useful event and writes the
// buffered prelude and that event.
func (o *clientWriter) commitUseful(frames [][]byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commitStreamLocked()
	o.useful = true
	o.firstByte = time.Now()
	for _, f := range frames {
		if !o.writeLocked(f) {
			return false
		}
	}
	return true
}

// frame relays one event after the commit.
func (o *clientWriter) frame(f []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writeLocked(f)
}

// done writes the clean terminal frame of the client's format (if any).
func (o *clientWriter) done(terminal []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.streamEnd = "completed"
	if len(terminal) == 0 {
		return !o.isGone
	}
	return o.writeLocked(terminal)
}

// streamError writes exactly one in-band error frame and no [DONE].
func (o *clientWriter) streamError(e *services.GatewayError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.streamEnd != "" {
		return
	}
	o.streamEnd = "error"
	ce := *e
	if e.RetryAfter > 0 && !o.useful {
		ce.Message += " (retry after " + strconv.Itoa(e.RetryAfter) + " s)"
	}
	o.writeLocked(o.errFrame(&ce))
}

func errType(e *services.GatewayError) string {
	switch status := e.HTTPStatus(); {
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// ttfb is the time from the start to the first useful byte (0 when none).
func (o *clientWriter) ttfb() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.firstByte.IsZero() {
		return 0
	}
	return o.firstByte.Sub(o.startedAt)
}

// firstByteSince is the time from since to the first useful byte, or to
// now when none was written yet (a non-stream body completes before it is
// written).
func (o *clientWriter) firstByteSince(since time.Time) time.Duration {
	o.mu.Lock()
	fb := o.firstByte
	o.mu.Unlock()
	if fb.IsZero() || fb.Before(since) {
		return time.Since(since)
	}
	return fb.Sub(since)
}

// writeJSON writes a complete non-stream success.
func (o *clientWriter) writeJSON(b []byte, warning string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if warning != "" {
		h.Set("X-Switchyard-Warning", warning)
	}
	o.w.WriteHeader(http.StatusOK)
	o.isCommit, o.useful, o.status = true, true, http.StatusOK
	o.firstByte = time.Now()
	return o.writeLocked(b)
}

// writeError writes an HTTP error response (nothing committed yet).
func (o *clientWriter) writeError(e *services.GatewayError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isCommit || o.isGone {
		return
	}
	o.w.Header().Set("X-Switchyard-Error-Code", e.Code)
	o.isCommit, o.status = true, e.HTTPStatus()
	services.WriteGatewayError(o.w, o.req.Endpoint, e, o.req.ID)
}

// dropWarning removes one token from X-Switchyard-Warning while headers are
// still open.
func (o *clientWriter) dropWarning(token string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isCommit {
		return
	}
	h := o.w.Header()
	kept := slices.DeleteFunc(strings.Split(h.Get("X-Switchyard-Warning"), ", "), func(w string) bool { return w == token || w == "" })
	if len(kept) == 0 {
		h.Del("X-Switchyard-Warning")
		return
	}
	h.Set("X-Switchyard-Warning", strings.Join(kept, ", "))
}

// setWarning sets X-Switchyard-Warning while headers are still open.
func (o *clientWriter) setWarning(v string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.isCommit && v != "" {
		o.w.Header().Set("X-Switchyard-Warning", v)
	}
}
