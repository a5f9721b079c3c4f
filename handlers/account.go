package handlers

import (
	"context"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// Settings → Account (50-dashboard §6.11): change the admin password
// (Auth.ChangePassword) and end sessions (Auth.EndSession,
// Auth.EndOtherSessions). These routes have no API twin: keys never reach
// password or session routes.

const accountTitle, accountHref = "Account", "/settings/account"

// AccountAuth is what the Account page calls (services.Auth).
type AccountAuth interface {
	Sessions(ctx context.Context) ([]services.AdminSession, error)
	ChangePassword(ctx context.Context, ip, userAgent, current, next, confirm string) (string, error)
	EndSession(ctx context.Context, idHash string) error
	EndOtherSessions(ctx context.Context, currentID string) error
}

// Account serves Settings → Account: the password and the admin sessions.
type Account struct {
	Layout
	Auth    AccountAuth
	Cookies SessionCookies
	// ClientIP is the peer address recorded on the rotated session.
	ClientIP func(r *http.Request) string
	Clock    services.Clock
}

// sessionsList loads the sessions; currentID is this request's session id.
func (h *Account) sessionsList(ctx context.Context, currentID string) (views.SessionsListVM, error) {
	sessions, err := h.Auth.Sessions(ctx)
	if err != nil {
		return views.SessionsListVM{}, err
	}
	return views.NewSessionsListVM(sessions, services.SHA256Hex(currentID), h.Clock.Now()), nil
}

// accountPage renders the page, fragment for htmx.
func (h *Account) accountPage(c echo.Context, status int, fragment templComponent, vm views.AccountPageVM) error {
	list, err := h.sessionsList(c.Request().Context(), SessionID(c))
	if err != nil {
		return err
	}
	list.Confirm = vm.Sessions.Confirm
	vm.Sessions = list
	page := views.AccountPage(vm)
	if fragment == nil {
		fragment = page
	}
	return h.pageParts(c, status, accountTitle, accountHref, fragment, page)
}

// Show shows the password form and the sessions.
func (h *Account) Show(c echo.Context) error {
	return h.accountPage(c, http.StatusOK, nil, views.AccountPageVM{})
}

// UpdatePassword changes the password: every session ends and this one is
// rotated to a new id, whose cookie is issued before anything is written.
func (h *Account) UpdatePassword(c echo.Context) error {
	r := c.Request()
	v := form(c)
	sid, err := h.Auth.ChangePassword(r.Context(), h.ClientIP(r), r.UserAgent(), v.Get("current"), v.Get("new"), v.Get("confirm"))
	if verr, ok := validation(err); ok {
		pf := views.PasswordFormVM{Errors: views.NewFieldErrors(verr.Fields, nil)}
		return h.accountPage(c, http.StatusUnprocessableEntity, views.PasswordForm(pf), views.AccountPageVM{Password: pf})
	}
	if err != nil {
		return err
	}
	if err := h.Cookies.Issue(c, sid); err != nil {
		return err
	}
	SetSessionID(c, sid)
	toast(c, "success", "Password changed. Other sessions were signed out.")
	return afterMutation(c, accountHref, func() error {
		list, err := h.sessionsList(r.Context(), sid)
		if err != nil {
			return err
		}
		list.OOB = true
		return render(c, http.StatusOK, passwordChanged(list), nil)
	})
}

// passwordChanged is a fresh form and the sessions list out of band.
func passwordChanged(list views.SessionsListVM) templComponent {
	return templ.ComponentFunc(func(ctx contextT, w writerT) error {
		if err := views.PasswordForm(views.PasswordFormVM{}).Render(ctx, w); err != nil {
			return err
		}
		return views.SessionsList(list).Render(ctx, w)
	})
}

// DeleteSession signs out one other session by its id hash.
func (h *Account) DeleteSession(c echo.Context) error {
	ctx := c.Request().Context()
	hash := c.Param("id")
	if hash == services.SHA256Hex(SessionID(c)) {
		return &services.ConflictError{Msg: "This is your current session. Use Sign out in the top bar to end it."}
	}
	sessions, err := h.Auth.Sessions(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, s := range sessions {
		found = found || s.IDHash == hash
	}
	if !found {
		return services.ErrNotFound
	}
	if err := h.Auth.EndSession(ctx, hash); err != nil {
		return err
	}
	toast(c, "success", "Session signed out.")
	return afterMutation(c, accountHref, func() error { return h.renderSessions(c) })
}

// ConfirmDeleteOtherSessions shows what "Sign out all other sessions" does.
func (h *Account) ConfirmDeleteOtherSessions(c echo.Context) error {
	list, err := h.sessionsList(c.Request().Context(), SessionID(c))
	if err != nil {
		return err
	}
	cf := views.SessionsEndOthersConfirm(list.Others())
	return h.accountPage(c, http.StatusOK, views.ConfirmPanel(*cf), views.AccountPageVM{Sessions: views.SessionsListVM{Confirm: cf}})
}

// DeleteOtherSessions signs out every session but this one.
func (h *Account) DeleteOtherSessions(c echo.Context) error {
	ctx := c.Request().Context()
	before, err := h.sessionsList(ctx, SessionID(c))
	if err != nil {
		return err
	}
	if err := h.Auth.EndOtherSessions(ctx, SessionID(c)); err != nil {
		return err
	}
	switch n := before.Others(); n {
	case 1:
		toast(c, "success", "Signed out 1 other session.")
	default:
		toast(c, "success", "Signed out "+itoa(n)+" other sessions.")
	}
	return afterMutation(c, accountHref, func() error { return h.renderSessions(c) })
}

func (h *Account) renderSessions(c echo.Context) error {
	list, err := h.sessionsList(c.Request().Context(), SessionID(c))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.SessionsList(list), nil)
}
