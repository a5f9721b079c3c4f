package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/settings"
)

// statusOf maps any error to an HTTP status, using errors.Is/As so wrapping
// never changes the answer. Typed errors carry their code and the status
// follows from it (services/errcodes.go); sentinels map here. The management
// API's table (40-admin-api §1) wins for validation errors there: 400, not 422.
func statusOf(err error, api bool) int {
	var verr *services.ValidationError
	var rerr *services.RequestError
	var herr *echo.HTTPError
	var terr *services.ThrottledError
	var gerr *services.GatewayError
	var jerr *settings.JSONError
	switch {
	case errors.Is(err, services.ErrUnavailable):
		// First: a store that cannot answer is 503 whatever wrapped it.
		return http.StatusServiceUnavailable
	case errors.As(err, &gerr):
		return gerr.HTTPStatus()
	case errors.As(err, &rerr):
		return rerr.HTTPStatus()
	case errors.Is(err, settings.ErrPreconditionFailed):
		return services.StatusOfCode(services.CodePreconditionFailed)
	case errors.Is(err, settings.ErrEmptyPatch):
		return services.StatusOfCode(services.CodeValidationFailed)
	case errors.As(err, &jerr):
		return services.StatusOfCode(services.CodeInvalidJSON)
	case errors.As(err, &verr):
		if api {
			return http.StatusBadRequest
		}
		return http.StatusUnprocessableEntity
	case errors.As(err, &terr):
		return http.StatusTooManyRequests
	case errors.Is(err, services.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, services.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, services.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, services.ErrForbidden):
		return http.StatusForbidden
	case errors.As(err, &herr):
		return herr.Code
	}
	return http.StatusInternalServerError
}

// apiCode names an /api error (40-admin-api §1): its own code, else the
// code of its status.
func apiCode(err error, status int) string {
	var rerr *services.RequestError
	var verr *services.ValidationError
	var jerr *settings.JSONError
	switch {
	case errors.As(err, &rerr):
		return rerr.Code
	case errors.As(err, &verr), errors.Is(err, settings.ErrEmptyPatch):
		return services.CodeValidationFailed
	case errors.As(err, &jerr):
		return services.CodeInvalidJSON
	}
	return services.APICodeOfStatus(status)
}

// msgStaleSettings is the /api message of a stale If-Match.
const msgStaleSettings = "The settings changed since you read them (If-Match is stale). GET them again and retry with the new ETag."

// publicMessage is what a caller may read: the error text for 4xx, a fixed
// sentence for 5xx (never SQL, stacks or secrets).
func publicMessage(err error, status int, requestID string) string {
	if status == http.StatusServiceUnavailable && errors.Is(err, services.ErrUnavailable) {
		return fmt.Sprintf("The database is busy or unavailable right now (request %s). Try again in a few seconds.", requestID)
	}
	if status >= 500 {
		return fmt.Sprintf("Something went wrong (request %s). Details are in the server log.", requestID)
	}
	var herr *echo.HTTPError
	if errors.As(err, &herr) {
		if m, ok := herr.Message.(string); ok {
			return m
		}
		return http.StatusText(herr.Code)
	}
	var verr *services.ValidationError
	if errors.As(err, &verr) {
		return verr.Error()
	}
	if errors.Is(err, settings.ErrPreconditionFailed) {
		return msgStaleSettings
	}
	msg := err.Error()
	// Strip wrapping prefixes such as "services: update combo x: not found".
	if errors.Is(err, services.ErrNotFound) {
		return "Nothing here. It may have been deleted."
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 && (errors.Is(err, services.ErrUnauthorized) || errors.Is(err, services.ErrForbidden)) {
		msg = msg[:i]
	}
	return msg
}

// errorHandler serves the three audiences: the client API (gateway JSON,
// chosen by the route group: /v1 and the unprefixed aliases), /api
// (management JSON) and the dashboard (status policy of 50-dashboard §3.3).
// Only 5xx are logged, once, here.
func errorHandler(log *slog.Logger, pages handlers.Layout) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		err = failClosed(err)
		c.Response().Header().Set("X-Content-Type-Options", "nosniff")
		path := c.Request().URL.Path
		isAPI := strings.HasPrefix(path, "/api/") || path == "/api" || path == "/metrics"
		status := statusOf(err, isAPI)
		rid := handlers.RequestID(c)
		if status >= 500 {
			log.Error("request failed", "request_id", rid, "method", c.Request().Method, "path", path, "err", err)
		}
		var terr *services.ThrottledError
		if errors.As(err, &terr) {
			c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(terr)))
		}
		var uerr *services.UnavailableError
		if errors.As(err, &uerr) {
			c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(uerr.Wait())))
		}
		switch {
		case handlers.GatewayAudience(c):
			writeGatewayError(c, err, status, rid)
		case isAPI:
			body := map[string]any{"code": apiCode(err, status), "message": publicMessage(err, status, rid)}
			var verr *services.ValidationError
			if errors.As(err, &verr) {
				body["fields"] = verr.Fields
			}
			if status == http.StatusServiceUnavailable && c.Response().Header().Get("Retry-After") == "" {
				c.Response().Header().Set("Retry-After", "5")
			}
			_ = c.JSON(status, map[string]any{"error": body})
		default:
			dashboardError(c, pages, err, status, rid)
		}
	}
}

func retryAfterSeconds(t *services.ThrottledError) int {
	return ceilSeconds(t.RetryAfter)
}

// ceilSeconds is a Retry-After value: whole seconds, rounded up, at least 1.
func ceilSeconds(d time.Duration) int {
	s := int((d.Milliseconds() + 999) / 1000)
	if s < 1 {
		s = 1
	}
	return s
}

// failClosed types a database that cannot answer (closed during shutdown,
// locked or busy past busy_timeout) as services.UnavailableError, also when
// the error reached here untranslated (a store or handler that returned the
// driver's error as is), so it answers 503 with Retry-After instead of 500
// (60-quality S16). Middleware never admits a request on such an error; it
// returns it, and this decides the answer.
func failClosed(err error) error {
	if err == nil || errors.Is(err, services.ErrUnavailable) || !models.IsUnavailable(err) {
		return err
	}
	return &services.UnavailableError{Err: err}
}

// dashboardError follows the status policy: htmx requests get an empty body
// and an error toast (or HX-Redirect on 401); full pages get the error page
// or a redirect to sign in.
func dashboardError(c echo.Context, pages handlers.Layout, err error, status int, rid string) {
	setSecurityHeaders(c)
	r := c.Request()
	htmx := r.Header.Get("HX-Request") == "true"
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Add("Vary", "HX-Request")
	if status == http.StatusUnauthorized && !strings.HasPrefix(r.URL.Path, "/login") {
		next := "/login?next=" + url.QueryEscape(currentPage(r))
		if htmx {
			c.Response().Header().Set("HX-Redirect", next)
			_ = c.NoContent(http.StatusUnauthorized)
			return
		}
		_ = c.Redirect(http.StatusSeeOther, next)
		return
	}
	if htmx {
		payload, _ := json.Marshal(map[string]any{"show-toast": map[string]string{"level": "error", "text": publicMessage(err, status, rid)}})
		c.Response().Header().Set("HX-Trigger", string(payload))
		// A 422 that reaches here had no form to re-render: never blank the target.
		c.Response().Header().Set("HX-Reswap", "none")
		_ = c.NoContent(status)
		return
	}
	_ = pages.ErrorPage(c, status, publicMessage(err, status, rid))
}

// currentPage is the page the admin was on: the htmx current URL's path when
// present, else the request path, always a local path.
func currentPage(r *http.Request) string {
	if cu := r.Header.Get("HX-Current-URL"); cu != "" {
		if u, err := url.Parse(cu); err == nil && strings.HasPrefix(u.Path, "/") {
			if u.RawQuery != "" {
				return u.Path + "?" + u.RawQuery
			}
			return u.Path
		}
	}
	if r.Method == http.MethodGet {
		return r.URL.RequestURI()
	}
	return "/"
}

// writeGatewayError writes the OpenAI or Anthropic error shape (10-gateway-api §9.1).
func writeGatewayError(c echo.Context, err error, status int, rid string) {
	var gerr *services.GatewayError
	if !errors.As(err, &gerr) {
		gerr = services.GatewayErrorFromStatus(status, publicMessage(err, status, rid))
	}
	services.WriteGatewayError(c.Response(), c.Request().URL.Path, gerr, rid)
}
