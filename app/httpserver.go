package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// isClientAPIPath reports the client API (/v1 and the unprefixed inference
// paths), whose bodies may be up to limits.maxBodyBytes (32 MiB) and so get
// ClientAPITotal to arrive; every other route's body is at most 1 MiB.
func isClientAPIPath(p string) bool {
	if p == "/v1" || strings.HasPrefix(p, "/v1/") {
		return true
	}
	for _, pre := range []string{"/chat/completions", "/messages", "/responses", "/embeddings"} {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// withBodyDeadline bounds the read of every request body (issue 17 item 1):
// before the handler runs, the connection's read deadline is set to the
// first-byte limit; each byte read extends it by 1/MinRate, never past the
// total; when the body is read to its end the deadline is cleared, so the
// background read net/http starts then, and a long streamed response, are
// not cut. A body that is late fails the read; net/http then closes the
// connection after the answer (the unread rest of the body is undefined). A
// body the handler never reads is discarded by net/http under the same
// first-byte deadline. Requests without a body are untouched. Writers that
// cannot set deadlines (httptest recorders) are served unbounded.
func withBodyDeadline(bt BodyTimeouts, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		total := bt.Total
		if isClientAPIPath(r.URL.Path) {
			total = bt.ClientAPITotal
		}
		d, err := newDeadlineBody(r.Body, http.NewResponseController(w), time.Now(), bt.FirstByte, total, bt.MinRate)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		r.Body = d
		next.ServeHTTP(w, r)
	})
}

// readDeadliner is the part of http.ResponseController the body uses.
type readDeadliner interface {
	SetReadDeadline(time.Time) error
}

// newDeadlineBody arms the first-byte deadline (never past the total) and
// returns the body to hand to the handler; an error means the connection
// cannot take deadlines.
func newDeadlineBody(body io.ReadCloser, rc readDeadliner, now time.Time, firstByte, total time.Duration, minRate int64) (*deadlineBody, error) {
	d := &deadlineBody{body: body, rc: rc, firstByte: now.Add(firstByte), last: now.Add(total), minRate: minRate}
	d.deadline = d.firstByte
	if d.deadline.After(d.last) {
		d.deadline = d.last
	}
	if err := rc.SetReadDeadline(d.deadline); err != nil {
		return nil, err
	}
	return d, nil
}

// ErrBodyTimeout is what a handler reads when a body arrives too slowly.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")

// deadlineBody is a request body read under a moving deadline.
type deadlineBody struct {
	body      io.ReadCloser
	rc        readDeadliner
	firstByte time.Time // deadline before any byte
	last      time.Time // the total's end
	deadline  time.Time // currently set
	minRate   int64
	read      int64
	done      bool
}

// extendStep is how far a new deadline must move before it is set again:
// one deadline change per read would cost a timer update per 4 KiB.
const extendStep = 250 * time.Millisecond

func (d *deadlineBody) Read(p []byte) (int, error) {
	n, err := d.body.Read(p)
	d.read += int64(n)
	switch {
	case err == io.EOF:
		if !d.done {
			d.done = true
			_ = d.rc.SetReadDeadline(time.Time{})
		}
	case err != nil:
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, ErrBodyTimeout
		}
	case n > 0 && d.minRate > 0:
		next := d.firstByte.Add(time.Duration(float64(d.read) / float64(d.minRate) * float64(time.Second)))
		if next.After(d.last) {
			next = d.last
		}
		if next.Sub(d.deadline) >= extendStep || (next.Equal(d.last) && !d.deadline.Equal(d.last)) {
			d.deadline = next
			_ = d.rc.SetReadDeadline(next)
		}
	case n > 0 && !d.deadline.Equal(d.last):
		d.deadline = d.last
		_ = d.rc.SetReadDeadline(d.last)
	}
	return n, err
}

func (d *deadlineBody) Close() error { return d.body.Close() }

// The ambiguous-framing check (issue 17 item 13, RFC 9112 §6.3): a request
// carrying both Content-Length and Transfer-Encoding may be an attempt at
// request smuggling through a front proxy that reads the other header.
// net/http follows Transfer-Encoding and deletes Content-Length before any
// handler sees the request, so the listener's connections note the two
// header names while the header block goes by, and the handler answers 400
// and closes the connection.

type sniffKey struct{}

// sniffListener wraps accepted connections in sniffConn.
type sniffListener struct{ net.Listener }

func (l sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c}, nil
}

// sniffConn scans the header block of each request for the Content-Length
// and Transfer-Encoding names (only the header bytes: scanning stops at the
// blank line and starts again when the connection turns idle).
type sniffConn struct {
	net.Conn
	mu         sync.Mutex
	headerDone bool
	sawLine    bool
	prefix     [18]byte
	plen       int
	lineLen    int
	sawCL      bool
	sawTE      bool
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.scan(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

func (c *sniffConn) scan(p []byte) {
	for _, b := range p {
		if c.headerDone {
			return
		}
		switch b {
		case '\n':
			if c.lineLen == 0 {
				c.headerDone = c.sawLine // leading blank lines come before a request line
			} else {
				name := string(c.prefix[:c.plen])
				c.sawCL = c.sawCL || strings.HasPrefix(name, "content-length:")
				c.sawTE = c.sawTE || strings.HasPrefix(name, "transfer-encoding:")
				c.sawLine = true
			}
			c.lineLen, c.plen = 0, 0
		case '\r':
		default:
			if c.plen < len(c.prefix) {
				if 'A' <= b && b <= 'Z' {
					b += 'a' - 'A'
				}
				c.prefix[c.plen] = b
				c.plen++
			}
			c.lineLen++
		}
	}
}

// idle starts the scan of the next request's header block.
func (c *sniffConn) idle() {
	c.mu.Lock()
	c.headerDone, c.sawLine, c.sawCL, c.sawTE, c.lineLen, c.plen = false, false, false, false, 0, 0
	c.mu.Unlock()
}

func (c *sniffConn) ambiguous() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sawCL && c.sawTE
}

// withFramingCheck answers 400 and closes the connection for a request
// that carried both Content-Length and Transfer-Encoding.
func withFramingCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(sniffKey{}).(*sniffConn); ok && c.ambiguous() {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, "400 Bad Request: a request must not carry both Content-Length and Transfer-Encoding\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// newHTTPServer is the listener's configuration (10-gateway-api §7.5): a
// header timeout, an idle timeout, the header cap, no WriteTimeout (streams
// use per-write deadlines), and the body bounds and the framing check
// around the product's handler. Serve it with sniffListener.
func (s *Server) newHTTPServer(base context.Context, log *slog.Logger) *http.Server {
	return &http.Server{
		BaseContext: func(net.Listener) context.Context { return base },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*sniffConn); ok {
				return context.WithValue(ctx, sniffKey{}, sc)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if sc, ok := c.(*sniffConn); ok && st == http.StateIdle {
				sc.idle()
			}
		},
		Handler:           withFramingCheck(s.Handler()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// No WriteTimeout: streams use per-write deadlines instead.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
