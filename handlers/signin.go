package handlers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// First-run setup and signing in and out (50-dashboard §4). These pages have
// no API twin: keys never reach password or session routes.

// SetupAuth is what first-run setup calls (services.Auth).
type SetupAuth interface {
	NeedsSetup() bool
	SetInitialPassword(ctx context.Context, password, confirm string) error
	OpenSession(ctx context.Context, ip, userAgent string) (string, error)
}

// Setup serves first-run setup, from this machine only.
type Setup struct {
	Layout
	Auth    SetupAuth
	Cookies SessionCookies
	// ListenPort is shown in the refusal text.
	ListenPort func() string
	// IsLoopback tells whether a request may run setup.
	IsLoopback func(r *http.Request) bool
	// ClientIP is the peer address recorded on the session.
	ClientIP func(r *http.Request) string
}

// New shows the setup form (GET /setup).
func (h *Setup) New(c echo.Context) error {
	if !h.Auth.NeedsSetup() {
		return services.ErrNotFound
	}
	vm := views.SetupVM{Port: h.ListenPort()}
	if !h.IsLoopback(c.Request()) {
		vm.Denied = true
		return h.bare(c, http.StatusForbidden, "Set up", views.SetupPage(vm))
	}
	return h.bare(c, http.StatusOK, "Set up", views.SetupPage(vm))
}

// Create stores the first admin password and signs the admin in (POST /setup).
func (h *Setup) Create(c echo.Context) error {
	if !h.Auth.NeedsSetup() {
		return services.ErrNotFound
	}
	if !h.IsLoopback(c.Request()) {
		return h.bare(c, http.StatusForbidden, "Set up", views.SetupPage(views.SetupVM{Denied: true, Port: h.ListenPort()}))
	}
	ctx := c.Request().Context()
	err := h.Auth.SetInitialPassword(ctx, c.FormValue("password"), c.FormValue("confirm"))
	var verr *services.ValidationError
	switch {
	case errors.As(err, &verr):
		return h.bare(c, http.StatusUnprocessableEntity, "Set up", views.SetupPage(views.SetupVM{Errors: verr.Fields}))
	case errors.Is(err, services.ErrSetupDone):
		return redirect(c, "/login?notice=setup-done")
	case err != nil:
		return err
	}
	sid, err := h.Auth.OpenSession(ctx, h.ClientIP(c.Request()), c.Request().UserAgent())
	if err != nil {
		return err
	}
	if err := h.Cookies.Issue(c, sid); err != nil {
		return err
	}
	// The Overview shows the welcome toast for ?welcome=1; an htmx caller
	// following HX-Redirect loads that page too.
	return redirect(c, "/?welcome=1")
}

// SignInAuth is what signing in and out calls (services.Auth).
type SignInAuth interface {
	NeedsSetup() bool
	// SignIn checks the password and opens a session, revoking the session
	// the browser presented (presented may be "").
	SignIn(ctx context.Context, ip string, loopback bool, userAgent, password, presented string) (string, error)
	Logout(ctx context.Context, sessionID string) error
}

// SignIn serves the sign-in form and signing out.
type SignIn struct {
	Layout
	Auth    SignInAuth
	Cookies SessionCookies
	// ClientIP is the peer address used for throttling.
	ClientIP func(r *http.Request) string
}

var notices = map[string]string{
	"signed-out": "Signed out.",
	"setup-done": "Setup was already completed.",
}

// New shows the sign-in form (GET /login).
func (h *SignIn) New(c echo.Context) error {
	if h.Auth.NeedsSetup() {
		return c.Redirect(http.StatusSeeOther, "/setup")
	}
	vm := views.LoginVM{Next: safeNext(c.QueryParam("next")), Notice: notices[c.QueryParam("notice")]}
	return h.bare(c, http.StatusOK, "Sign in", views.LoginPage(vm))
}

// Create checks the password (throttled) and opens a session (POST /login).
func (h *SignIn) Create(c echo.Context) error {
	r := c.Request()
	next := safeNext(c.FormValue("next"))
	ip := h.ClientIP(r)
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	loopback := net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()
	sid, err := h.Auth.SignIn(r.Context(), ip, loopback, r.UserAgent(), c.FormValue("password"), h.Cookies.Read(r))
	var verr *services.ValidationError
	var terr *services.ThrottledError
	switch {
	case errors.As(err, &verr):
		return h.bare(c, http.StatusUnprocessableEntity, "Sign in", views.LoginPage(views.LoginVM{Next: next, Errors: verr.Fields}))
	case errors.As(err, &terr):
		secs := int((terr.RetryAfter + time.Second - 1) / time.Second)
		c.Response().Header().Set("Retry-After", itoa(secs))
		return h.bare(c, http.StatusTooManyRequests, "Sign in", views.LoginPage(views.LoginVM{Next: next,
			Errors: views.FieldErrors{"password": terr.Error()}, RetryAfterMs: terr.RetryAfter.Milliseconds()}))
	case errors.Is(err, services.ErrUnauthorized):
		return h.bare(c, http.StatusUnauthorized, "Sign in", views.LoginPage(views.LoginVM{Next: next, Errors: views.FieldErrors{"password": services.MsgWrongPassword}}))
	case err != nil:
		return err
	}
	if err := h.Cookies.Issue(c, sid); err != nil {
		return err
	}
	return redirect(c, next)
}

// Delete ends the session server-side and expires the cookie (POST /logout).
func (h *SignIn) Delete(c echo.Context) error {
	if id := SessionID(c); id != "" {
		if err := h.Auth.Logout(c.Request().Context(), id); err != nil {
			return err
		}
	}
	if err := h.Cookies.Clear(c); err != nil {
		return err
	}
	return redirect(c, "/login?notice=signed-out")
}
