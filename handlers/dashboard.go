package handlers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/leases"
	"switchyard/services/quota"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
	"switchyard/views"
)

// Dashboard holds what every dashboard handler needs; page handlers for each
// resource hang off it.
type Dashboard struct {
	Auth    *services.Auth
	Cookies SessionCookies
	Conns   *services.Connections
	Combos  *services.Combos
	Keys    *services.Keys
	Clock   services.Clock
	// Engine is the resilience state (runtime pages, re-enable and reset actions).
	Engine *resilience.Engine
	// Settings owns the resilience and general settings documents and the flags.
	Settings *resilience.SettingsService
	// Logs reads the request log.
	Logs services.RequestLogStore
	// Leases are the exclusive session leases (Runtime: active leases, End lease).
	Leases *leases.Leases
	// Slots are the max_concurrent connection slots (Runtime, Connections concurrency cell).
	Slots *traffic.Slots
	// Queues are the request queues of rate-limit protection (Runtime).
	Queues *traffic.Queues
	// Quota holds the quota windows learned from upstream headers
	// (Connections: quota windows cell); nil shows every window unknown.
	Quota QuotaWindows
	// Dispatch is the gateway's view of the live dispatch metrics and the
	// quota gate (Combos: target metrics, readiness dots); nil leaves both out.
	Dispatch DispatchView
	// HealthReport builds the same report as GET /api/monitoring/health (admin body).
	HealthReport func(ctx context.Context) any
	Version      string
	Demo         bool
	// PlainHTTP is set when the listener is not on loopback and TLS is off.
	PlainHTTP func() bool
	// ListenPort is shown in the setup refusal text.
	ListenPort func() string
	// IsLoopback tells whether a request may run first-run setup.
	IsLoopback func(r *http.Request) bool
	// ClientIP is the peer address used for throttling.
	ClientIP func(r *http.Request) string
}

// QuotaWindows reads the learned quota windows of a connection as they
// count at now (services/quota.Tracker).
type QuotaWindows interface {
	Windows(connID string, now time.Time) quota.View
}

// DispatchView is what the Combos page reads from the gateway: the dispatch
// metrics of a target (30-routing §8.1) and gate 10, the quota gate (§8.4).
type DispatchView interface {
	TargetStats(provider, model, connID string) gateway.TargetStats
	QuotaBlocker(c *services.Connection) *resilience.Blocker
}

// layout builds the layout view model for a page.
func (d *Dashboard) layout(title, active string) views.LayoutVM {
	plain := false
	if d.PlainHTTP != nil {
		plain = d.PlainHTTP()
	}
	return views.LayoutVM{Title: title, Active: active, Version: d.Version, Demo: d.Demo, PlainHTTP: plain, SignedIn: true}
}

// page renders a full page in the layout, or only the content for htmx.
func (d *Dashboard) page(c echo.Context, status int, title, active string, content templ.Component) error {
	full := templ.ComponentFunc(func(ctx contextT, w writerT) error {
		return views.Layout(d.layout(title, active)).Render(templ.WithChildren(ctx, content), w)
	})
	return render(c, status, content, full)
}

// bare renders a page without navigation (setup, sign-in).
func (d *Dashboard) bare(c echo.Context, status int, title string, content templ.Component) error {
	full := templ.ComponentFunc(func(ctx contextT, w writerT) error {
		return views.Bare(title).Render(templ.WithChildren(ctx, content), w)
	})
	return render(c, status, content, full)
}

// ErrorPage renders the not-found or error page: in the layout when signed
// in, bare otherwise.
func (d *Dashboard) ErrorPage(c echo.Context, status int, message string) error {
	content := views.ErrorPage(status, message, "/")
	if SessionID(c) != "" {
		return d.page(c, status, "Error", "", content)
	}
	return d.bare(c, status, "Error", content)
}

// SetupForm shows first-run setup (only from this machine).
func (d *Dashboard) SetupForm(c echo.Context) error {
	if !d.Auth.NeedsSetup() {
		return services.ErrNotFound
	}
	vm := views.SetupVM{Port: d.ListenPort()}
	if !d.IsLoopback(c.Request()) {
		vm.Denied = true
		return d.bare(c, http.StatusForbidden, "Set up", views.SetupPage(vm))
	}
	return d.bare(c, http.StatusOK, "Set up", views.SetupPage(vm))
}

// Setup stores the first admin password and signs the admin in.
func (d *Dashboard) Setup(c echo.Context) error {
	if !d.Auth.NeedsSetup() {
		return services.ErrNotFound
	}
	if !d.IsLoopback(c.Request()) {
		return d.bare(c, http.StatusForbidden, "Set up", views.SetupPage(views.SetupVM{Denied: true, Port: d.ListenPort()}))
	}
	ctx := c.Request().Context()
	err := d.Auth.SetInitialPassword(ctx, c.FormValue("password"), c.FormValue("confirm"))
	var verr *services.ValidationError
	switch {
	case errors.As(err, &verr):
		return d.bare(c, http.StatusUnprocessableEntity, "Set up", views.SetupPage(views.SetupVM{Errors: verr.Fields}))
	case errors.Is(err, services.ErrSetupDone):
		return redirect(c, "/login?notice=setup-done")
	case err != nil:
		return err
	}
	sid, err := d.Auth.OpenSession(ctx, d.ClientIP(c.Request()), c.Request().UserAgent())
	if err != nil {
		return err
	}
	if err := d.Cookies.Issue(c, sid); err != nil {
		return err
	}
	toast(c, "success", "Admin password set. Welcome to Switchyard.")
	return redirect(c, "/?welcome=1")
}

var notices = map[string]string{
	"signed-out": "Signed out.",
	"setup-done": "Setup was already completed.",
}

// LoginForm shows the sign-in form.
func (d *Dashboard) LoginForm(c echo.Context) error {
	if d.Auth.NeedsSetup() {
		return c.Redirect(http.StatusSeeOther, "/setup")
	}
	vm := views.LoginVM{Next: safeNext(c.QueryParam("next")), Notice: notices[c.QueryParam("notice")]}
	return d.bare(c, http.StatusOK, "Sign in", views.LoginPage(vm))
}

// Login checks the password (throttled) and opens a session.
func (d *Dashboard) Login(c echo.Context) error {
	r := c.Request()
	next := safeNext(c.FormValue("next"))
	ip := d.ClientIP(r)
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	loopback := net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()
	sid, err := d.Auth.Login(r.Context(), ip, loopback, r.UserAgent(), c.FormValue("password"))
	var verr *services.ValidationError
	var terr *services.ThrottledError
	switch {
	case errors.As(err, &verr):
		return d.bare(c, http.StatusUnprocessableEntity, "Sign in", views.LoginPage(views.LoginVM{Next: next, Errors: verr.Fields}))
	case errors.As(err, &terr):
		secs := int((terr.RetryAfter + time.Second - 1) / time.Second)
		c.Response().Header().Set("Retry-After", itoa(secs))
		return d.bare(c, http.StatusTooManyRequests, "Sign in", views.LoginPage(views.LoginVM{Next: next,
			Errors: views.FieldErrors{"password": terr.Error()}, RetryAfterMs: terr.RetryAfter.Milliseconds()}))
	case errors.Is(err, services.ErrUnauthorized):
		return d.bare(c, http.StatusUnauthorized, "Sign in", views.LoginPage(views.LoginVM{Next: next, Errors: views.FieldErrors{"password": services.MsgWrongPassword}}))
	case err != nil:
		return err
	}
	if err := d.Cookies.Issue(c, sid); err != nil {
		return err
	}
	return redirect(c, next)
}

// Logout ends the session server-side and expires the cookie.
func (d *Dashboard) Logout(c echo.Context) error {
	if id := SessionID(c); id != "" {
		if err := d.Auth.Logout(c.Request().Context(), id); err != nil {
			return err
		}
	}
	if err := d.Cookies.Clear(c); err != nil {
		return err
	}
	return redirect(c, "/login?notice=signed-out")
}
