package app

import (
	"net/http"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// Cookie names: the __Host- prefix needs Secure, so it is used only over TLS.
const (
	cookiePlain  = "switchyard_session"
	cookieSecure = "__Host-switchyard_session"
)

// cookieSessions keeps only the random session id in a signed and encrypted
// cookie; the session row lives in the database so sign-out and password
// change revoke it server-side.
type cookieSessions struct {
	store *sessions.CookieStore
}

func newCookieSessions(keys *services.Keyring) *cookieSessions {
	hashKey, blockKey := keys.CookieKeys()
	st := sessions.NewCookieStore(hashKey, blockKey)
	st.MaxAge(int(services.SessionMaxLifetime.Seconds()))
	return &cookieSessions{store: st}
}

func cookieName(r *http.Request) string {
	if r.TLS != nil {
		return cookieSecure
	}
	return cookiePlain
}

func (s *cookieSessions) options(r *http.Request, maxAge int) *sessions.Options {
	return &sessions.Options{Path: "/", MaxAge: maxAge, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode}
}

// Issue writes a cookie carrying sessionID. It is called before anything
// else is written to the response.
func (s *cookieSessions) Issue(c echo.Context, sessionID string) error {
	r := c.Request()
	sess := sessions.NewSession(s.store, cookieName(r))
	sess.Values["sid"] = sessionID
	sess.Options = s.options(r, int(services.SessionMaxLifetime.Seconds()))
	return s.store.Save(r, c.Response(), sess)
}

// Clear expires the cookie.
func (s *cookieSessions) Clear(c echo.Context) error {
	r := c.Request()
	sess := sessions.NewSession(s.store, cookieName(r))
	sess.Options = s.options(r, -1)
	return s.store.Save(r, c.Response(), sess)
}

// Read returns the session id in the request's cookie, or "".
func (s *cookieSessions) Read(r *http.Request) string {
	sess, err := s.store.Get(r, cookieName(r))
	if err != nil || sess.IsNew {
		return ""
	}
	id, _ := sess.Values["sid"].(string)
	return id
}
