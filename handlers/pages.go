package handlers

import (
	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// The dashboard is one handler per resource (Connections, Combos, Keys,
// Runtime, ...), each holding the small interfaces it consumes, declared
// next to it. What every page shares is the Layout.

// Layout is the data of the layout around every dashboard page.
type Layout struct {
	Version string
	Demo    bool
	// PlainHTTP reports a listener that is not on loopback with TLS off (the
	// layout warns); nil = never.
	PlainHTTP func() bool
}

// vm builds the layout view model for a page.
func (l Layout) vm(title, active string) views.LayoutVM {
	plain := l.PlainHTTP != nil && l.PlainHTTP()
	return views.LayoutVM{Title: title, Active: active, Version: l.Version, Demo: l.Demo, PlainHTTP: plain, SignedIn: true}
}

// page renders a full page in the layout, or only the content for htmx.
func (l Layout) page(c echo.Context, status int, title, active string, content templ.Component) error {
	return l.pageParts(c, status, title, active, content, content)
}

// pageFlash is page with a toast rendered into the layout (a message that
// survived a redirect); htmx requests get the content alone, as with page.
func (l Layout) pageFlash(c echo.Context, status int, title, active string, content templ.Component, flash views.FlashVM) error {
	vm := l.vm(title, active)
	vm.Flash = &flash
	full := templ.ComponentFunc(func(ctx contextT, w writerT) error {
		return views.Layout(vm).Render(templ.WithChildren(ctx, content), w)
	})
	return render(c, status, content, full)
}

// pageParts renders fragment for htmx and, for every other request, the page
// content inside the layout (a panel opened directly shows the whole page).
func (l Layout) pageParts(c echo.Context, status int, title, active string, fragment, content templ.Component) error {
	full := templ.ComponentFunc(func(ctx contextT, w writerT) error {
		return views.Layout(l.vm(title, active)).Render(templ.WithChildren(ctx, content), w)
	})
	return render(c, status, fragment, full)
}

// bare renders a page without navigation (setup, sign-in).
func (l Layout) bare(c echo.Context, status int, title string, content templ.Component) error {
	full := templ.ComponentFunc(func(ctx contextT, w writerT) error {
		return views.Bare(title).Render(templ.WithChildren(ctx, content), w)
	})
	return render(c, status, content, full)
}

// ErrorPage renders the not-found or error page: in the layout when signed
// in, bare otherwise.
func (l Layout) ErrorPage(c echo.Context, status int, message string) error {
	content := views.ErrorPage(status, message, "/")
	if SessionID(c) != "" {
		return l.page(c, status, "Error", "", content)
	}
	return l.bare(c, status, "Error", content)
}

// Catalogue reads the current provider catalogue (services.Connections).
type Catalogue interface {
	Catalogue() *services.Catalogue
}

// providerNames maps catalogue ids to display names.
func providerNames(cat Catalogue) map[string]string {
	out := map[string]string{}
	for _, p := range cat.Catalogue().All() {
		out[p.ID] = p.Name
	}
	return out
}
