package app

import (
	"errors"
	"net"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// errMisdirected is 421: the request named a host this gateway does not
// answer to as a dashboard or management API.
var errMisdirected = &services.RequestError{Code: services.CodeMisdirectedRequest,
	Message: "This host name is not one Switchyard answers to. Start it with --public-host NAME (SWITCHYARD_PUBLIC_HOSTS) to reach the dashboard through NAME."}

// normalizePublicHost checks and lower-cases a --public-host entry: a host
// name or IP, optionally with a port, nothing else.
func normalizePublicHost(h string) (string, error) {
	h = strings.ToLower(strings.TrimSpace(h))
	if h == "" || strings.ContainsAny(h, "/@?# ") {
		return "", errors.New("is not a host name (write it without scheme or path, for example switchyard.example.com)")
	}
	host, port := h, ""
	if hh, p, err := net.SplitHostPort(h); err == nil {
		host, port = hh, p
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", errors.New("is not a host name")
	}
	if port != "" {
		return net.JoinHostPort(host, port), nil
	}
	return host, nil
}

// hostGuard answers 421 before any handler runs when the Host header is not
// the listen address, a loopback name or address, or a --public-host entry
// (issue 17 item 7). A page on attacker.example whose name was re-pointed at
// 127.0.0.1 (DNS rebinding) is same-origin to the browser, so neither the
// cross-origin checks nor the cookie's SameSite stop it; its Host header
// does. IP literals cannot be rebound, so when the listener is on every
// interface (0.0.0.0, ::) any IP literal is accepted; on a specific address
// only that one. The client API (/v1) does not use it: keys, not the
// browser, authenticate there.
func (s *Server) hostGuard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.hostAllowed(c.Request().Host) {
			return errMisdirected
		}
		return next(c)
	}
}

func (s *Server) hostAllowed(hostHeader string) bool {
	h := strings.ToLower(hostHeader)
	host, port := h, ""
	if hh, p, err := net.SplitHostPort(h); err == nil {
		host, port = hh, p
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".")
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	lhost, _, _ := net.SplitHostPort(s.listenAddr.Load().(string))
	if strings.EqualFold(strings.Trim(lhost, "[]"), host) {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Unmap().IsLoopback() {
			return true
		}
		lip, err := netip.ParseAddr(lhost)
		return err == nil && (lip.IsUnspecified() || lip.Unmap() == ip.Unmap())
	}
	for _, p := range s.cfg.PublicHosts {
		if p == host || (port != "" && p == net.JoinHostPort(host, port)) {
			return true
		}
	}
	return false
}
