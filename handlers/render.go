package handlers

import (
	"encoding/json"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// isHTMX reports a request that wants a fragment (not a history restore).
func isHTMX(r *http.Request) bool {
	return r.Header.Get("HX-Request") == "true" && r.Header.Get("HX-History-Restore-Request") != "true"
}

// render writes fragment for htmx requests and page (when not nil) for
// everything else. It renders into a buffer first, so a render error can
// still become a proper error response.
func render(c echo.Context, status int, fragment, page templ.Component) error {
	c.Response().Header().Add("Vary", "HX-Request")
	c.Response().Header().Set("Cache-Control", "no-store")
	r, comp := c.Request(), fragment
	if page != nil && !isHTMX(r) {
		comp = page
	}
	buf := templ.GetBuffer()
	defer templ.ReleaseBuffer(buf)
	if err := comp.Render(r.Context(), buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// trigger adds an event to the HX-Trigger header, merging with events
// already set on this response.
func trigger(c echo.Context, name string, payload any) {
	h := c.Response().Header()
	events := map[string]any{}
	if cur := h.Get("HX-Trigger"); cur != "" {
		_ = json.Unmarshal([]byte(cur), &events)
	}
	if payload == nil {
		payload = true
	}
	events[name] = payload
	b, _ := json.Marshal(events)
	h.Set("HX-Trigger", string(b))
}

// toast announces a message in the toast region.
func toast(c echo.Context, level, text string) {
	trigger(c, "show-toast", map[string]string{"level": level, "text": text})
}

// redirect answers htmx with HX-Redirect and everything else with 303.
func redirect(c echo.Context, to string) error {
	if isHTMX(c.Request()) {
		c.Response().Header().Set("HX-Redirect", to)
		return c.NoContent(http.StatusOK)
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// safeNext keeps post-login redirects local: a path starting with "/", not
// "//", with no scheme; anything else becomes "/".
func safeNext(next string) string {
	if next == "" || next[0] != '/' || (len(next) > 1 && (next[1] == '/' || next[1] == '\\')) {
		return "/"
	}
	for i := 0; i < len(next); i++ {
		if next[i] < 0x20 {
			return "/"
		}
	}
	return next
}
