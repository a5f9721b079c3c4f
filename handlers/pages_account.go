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

// sessionsList loads the sessions; currentID is this request's session id.
func (d *Dashboard) sessionsList(ctx context.Context, currentID string) (views.SessionsListVM, error) {
	sessions, err := d.Auth.Sessions(ctx)
	if err != nil {
		return views.SessionsListVM{}, err
	}
	return views.NewSessionsListVM(sessions, services.SHA256Hex(currentID), d.Clock.Now()), nil
}

// accountPage renders the page, fragment for htmx.
func (d *Dashboard) accountPage(c echo.Context, status int, fragment templComponent, vm views.AccountPageVM) error {
	list, err := d.sessionsList(c.Request().Context(), SessionID(c))
	if err != nil {
		return err
	}
	list.Confirm = vm.Sessions.Confirm
	vm.Sessions = list
	page := views.AccountPage(vm)
	if fragment == nil {
		fragment = page
	}
	return d.pageParts(c, status, accountTitle, accountHref, fragment, page)
}

// AccountPage shows the password form and the sessions.
func (d *Dashboard) AccountPage(c echo.Context) error {
	return d.accountPage(c, http.StatusOK, nil, views.AccountPageVM{})
}

// AccountPassword changes the password: every session ends and this one is
// rotated to a new id, whose cookie is issued before anything is written.
func (d *Dashboard) AccountPassword(c echo.Context) error {
	r := c.Request()
	v := form(c)
	sid, err := d.Auth.ChangePassword(r.Context(), d.ClientIP(r), r.UserAgent(), v.Get("current"), v.Get("new"), v.Get("confirm"))
	if verr, ok := validation(err); ok {
		pf := views.PasswordFormVM{Errors: views.NewFieldErrors(verr.Fields, nil)}
		return d.accountPage(c, http.StatusUnprocessableEntity, views.PasswordForm(pf), views.AccountPageVM{Password: pf})
	}
	if err != nil {
		return err
	}
	if err := d.Cookies.Issue(c, sid); err != nil {
		return err
	}
	SetSessionID(c, sid)
	toast(c, "success", "Password changed. Other sessions were signed out.")
	return afterMutation(c, accountHref, func() error {
		list, err := d.sessionsList(r.Context(), sid)
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

// SessionEnd signs out one other session by its id hash.
func (d *Dashboard) SessionEnd(c echo.Context) error {
	ctx := c.Request().Context()
	hash := c.Param("id")
	if hash == services.SHA256Hex(SessionID(c)) {
		return &services.ConflictError{Msg: "This is your current session. Use Sign out in the top bar to end it."}
	}
	sessions, err := d.Auth.Sessions(ctx)
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
	if err := d.Auth.EndSession(ctx, hash); err != nil {
		return err
	}
	toast(c, "success", "Session signed out.")
	return afterMutation(c, accountHref, func() error { return d.renderSessions(c) })
}

// SessionsConfirmEndOthers shows what "Sign out all other sessions" does.
func (d *Dashboard) SessionsConfirmEndOthers(c echo.Context) error {
	list, err := d.sessionsList(c.Request().Context(), SessionID(c))
	if err != nil {
		return err
	}
	cf := views.SessionsEndOthersConfirm(list.Others())
	return d.accountPage(c, http.StatusOK, views.ConfirmPanel(*cf), views.AccountPageVM{Sessions: views.SessionsListVM{Confirm: cf}})
}

// SessionsEndOthers signs out every session but this one.
func (d *Dashboard) SessionsEndOthers(c echo.Context) error {
	ctx := c.Request().Context()
	before, err := d.sessionsList(ctx, SessionID(c))
	if err != nil {
		return err
	}
	if err := d.Auth.EndOtherSessions(ctx, SessionID(c)); err != nil {
		return err
	}
	switch n := before.Others(); n {
	case 1:
		toast(c, "success", "Signed out 1 other session.")
	default:
		toast(c, "success", "Signed out "+itoa(n)+" other sessions.")
	}
	return afterMutation(c, accountHref, func() error { return d.renderSessions(c) })
}

func (d *Dashboard) renderSessions(c echo.Context) error {
	list, err := d.sessionsList(c.Request().Context(), SessionID(c))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.SessionsList(list), nil)
}
