package app

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/services"
)

// requestID gives every request an id, echoed as X-Request-Id.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := services.NewRequestID(time.Now())
		handlers.SetRequestID(c, id)
		c.Response().Header().Set("X-Request-Id", id)
		return next(c)
	}
}

// gatewayAudience marks a client-API route (handlers.SetGatewayAudience):
// the error handler then answers in the gateway's JSON shapes.
func gatewayAudience(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		handlers.SetGatewayAudience(c)
		return next(c)
	}
}

// aliasOtherMethods are the methods an unprefixed alias answers with 405.
var aliasOtherMethods = []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// methodNotAllowed answers 405 method_not_allowed with an Allow header
// (10-gateway-api §1).
func methodNotAllowed(allow string) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Allow", allow)
		c.Response().Header().Set("X-Switchyard-Request-Id", handlers.RequestID(c))
		return services.NewGatewayError(services.CodeMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s; use %s.", c.Request().Method, c.Request().URL.Path, allow))
	}
}

// recoverer turns a panic into a 500 that the error handler logs once.
func recoverer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}

// securityHeaders sets the headers of 50-dashboard §5 and a fresh CSP nonce
// per response, handed to templ through the request context.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		setSecurityHeaders(c)
		return next(c)
	}
}

// setSecurityHeaders writes the browser-facing headers and puts a fresh
// nonce in the request context, once per response: the dashboard group's
// middleware does it for its routes, the error handler for every HTML error
// page (404s of unknown paths and 405s, 421s and 413s that no dashboard
// middleware saw), so no page goes out without them (issue 17 item 9).
func setSecurityHeaders(c echo.Context) {
	h := c.Response().Header()
	if h.Get("Content-Security-Policy") != "" {
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	nonce := base64.StdEncoding.EncodeToString(b)
	r := c.Request()
	c.SetRequest(r.WithContext(templ.WithNonce(r.Context(), nonce)))
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
}

// unsafeMethod is a method that may change state.
func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// lacksBrowserOrigin reports a state-changing request with neither Origin
// nor Sec-Fetch-Site. net/http's CrossOriginProtection lets those through
// as non-browser traffic; for a request riding on the session cookie that
// is too generous (issue 17 item 8): every browser that can hold the
// cookie sends one of the two, so without either the request did not come
// from the dashboard.
func lacksBrowserOrigin(r *http.Request) bool {
	return unsafeMethod(r.Method) && r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == ""
}

// requireBrowserOrigin refuses cookie-authenticated state changes without
// Origin or Sec-Fetch-Site (the dashboard group; /api does it in apiAuth).
func requireBrowserOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if lacksBrowserOrigin(c.Request()) {
			return errCrossOrigin
		}
		return next(c)
	}
}

// credentialFormMax bounds the sign-in, setup and password forms: a
// password is at most 1,024 bytes (services.PasswordMaxBytes), the rest
// of the form a few fields.
const credentialFormMax = 8 << 10

var errFormTooLarge = &services.RequestError{Code: services.CodePayloadTooLarge, Message: "The form is too large."}

// limitForm reads and parses a form body of at most max bytes before the
// handler runs, and answers 413 otherwise: 30 sign-ins with 9 MB passwords
// took the process from 62 to 693 MB and ran argon2 over 9 MB each
// (issue 17 item 6).
func limitForm(max int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength > max {
				return errFormTooLarge
			}
			r.Body = http.MaxBytesReader(c.Response(), r.Body, max)
			if err := r.ParseForm(); err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					return errFormTooLarge
				}
			}
			return next(c)
		}
	}
}

// errCrossOrigin is 403 cross_origin_rejected.
var errCrossOrigin = &services.RequestError{Code: services.CodeCrossOriginRejected, Message: "Cross-origin request rejected."}

// crossOrigin refuses unsafe cross-site requests that ride on the cookie,
// using net/http's CrossOriginProtection (Sec-Fetch-Site, then Origin).
func crossOrigin() echo.MiddlewareFunc {
	cop := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := cop.Check(c.Request()); err != nil {
				return errCrossOrigin
			}
			return next(c)
		}
	}
}

// setupGate sends every dashboard page to /setup until an admin password exists.
func setupGate(auth *services.Auth) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if auth.NeedsSetup() {
				if c.Request().Header.Get("HX-Request") == "true" {
					c.Response().Header().Set("HX-Redirect", "/setup")
					return c.NoContent(http.StatusUnauthorized)
				}
				return c.Redirect(http.StatusSeeOther, "/setup")
			}
			return next(c)
		}
	}
}

// requireAdmin admits requests with a valid admin session cookie.
func requireAdmin(auth *services.Auth, cookies *cookieSessions) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := cookies.Read(c.Request())
			if _, err := auth.Session(c.Request().Context(), id); err != nil {
				return err
			}
			handlers.SetSessionID(c, id)
			return next(c)
		}
	}
}

var errKeyInQuery = &services.RequestError{Code: services.CodeBadRequest, Message: "Send the key in the Authorization header, never in the URL."}

// apiAuth admits a Bearer client key with the scope, or the admin session
// cookie (with cross-origin protection on unsafe methods). A present
// Authorization header is the only credential considered.
func apiAuth(auth *services.Auth, keys *services.Keys, cookies *cookieSessions, scopes ...string) echo.MiddlewareFunc {
	cop := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			q := r.URL.Query()
			for _, name := range []string{"key", "api_key", "apikey", "access_token"} {
				if q.Has(name) {
					return errKeyInQuery
				}
			}
			if h := r.Header.Get("Authorization"); h != "" {
				scheme, token, ok := strings.Cut(h, " ")
				if !ok || !strings.EqualFold(scheme, "Bearer") {
					return services.ErrUnauthorized
				}
				k, err := keys.Authenticate(strings.TrimSpace(token))
				if err != nil {
					return services.ErrUnauthorized
				}
				allowed := false
				for _, s := range scopes {
					allowed = allowed || k.HasScope(s)
				}
				if !allowed {
					return fmt.Errorf("this key lacks the %s scope: %w", scopes[0], services.ErrForbidden)
				}
				// A management or metrics call is a use of the key, like an
				// inference request (written in the background, at most once a minute).
				keys.Touch(r.Context(), k)
				handlers.SetAPIKey(c, k)
				return next(c)
			}
			id := cookies.Read(r)
			if _, err := auth.Session(r.Context(), id); err != nil {
				if errors.Is(err, services.ErrUnauthorized) {
					return services.ErrUnauthorized
				}
				return err
			}
			if err := cop.Check(r); err != nil || lacksBrowserOrigin(r) {
				return errCrossOrigin
			}
			handlers.SetSessionID(c, id)
			return next(c)
		}
	}
}

// adminIfPresent recognises an admin credential without requiring one
// (GET /api/monitoring/health answers everyone, the full report only to an
// admin): a Bearer key is recorded on the request, else a valid session
// cookie. A present Authorization header is the only credential considered.
func adminIfPresent(auth *services.Auth, keys *services.Keys, cookies *cookieSessions) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if h := r.Header.Get("Authorization"); h != "" {
				if scheme, token, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
					if k, err := keys.Authenticate(strings.TrimSpace(token)); err == nil {
						keys.Touch(r.Context(), k)
						handlers.SetAPIKey(c, k)
					}
				}
			} else if id := cookies.Read(r); id != "" {
				if _, err := auth.Session(r.Context(), id); err == nil {
					handlers.SetSessionID(c, id)
				}
			}
			return next(c)
		}
	}
}

// isLoopbackPeer reports a loopback TCP peer with no proxy headers: the only
// requests allowed to run first-run setup.
func isLoopbackPeer(r *http.Request) bool {
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-IP"} {
		if r.Header.Get(h) != "" {
			return false
		}
	}
	return isLoopbackAddr(r.RemoteAddr)
}

func isLoopbackAddr(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// clientIP is the TCP peer address (proxy headers are not trusted).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
