package services

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// EgressGuard decides which upstream addresses a provider may reach. Private,
// loopback, link-local and unspecified addresses are refused for non-local
// providers unless the host is on the start-up allowlist
// (--allow-private-upstreams). The allowlist is configuration on purpose:
// nothing in the dashboard or API can widen it.
type EgressGuard struct {
	hostPorts map[string]bool
	prefixes  []netip.Prefix
}

// ParseEgressAllowlist reads a comma-separated list of host:port or CIDR entries.
func ParseEgressAllowlist(list string) (*EgressGuard, error) {
	g := &EgressGuard{hostPorts: map[string]bool{}}
	var bad []string
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			g.prefixes = append(g.prefixes, p.Masked())
			continue
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil || host == "" || port == "" {
			bad = append(bad, e)
			continue
		}
		g.hostPorts[strings.ToLower(net.JoinHostPort(host, port))] = true
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("private upstream allowlist: %q is neither host:port nor a CIDR", strings.Join(bad, ", "))
	}
	return g, nil
}

// Allow adds a host:port entry (the demo adds its own fake upstream).
func (g *EgressGuard) Allow(hostPort string) { g.hostPorts[strings.ToLower(hostPort)] = true }

// Entries lists the allowlist for display.
func (g *EgressGuard) Entries() []string {
	var out []string
	for hp := range g.hostPorts {
		out = append(out, hp)
	}
	for _, p := range g.prefixes {
		out = append(out, p.String())
	}
	return out
}

// IsPrivate reports loopback, private, link-local, CGNAT and unspecified addresses.
func IsPrivate(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsInterfaceLocalMulticast() || netip.MustParsePrefix("100.64.0.0/10").Contains(a)
}

// AllowedAddr says whether a dial to ip:port is allowed for a non-local provider.
// The dialer calls it with the resolved address, so a DNS name that points at
// a private address is caught too.
func (g *EgressGuard) AllowedAddr(host string, ip netip.Addr, port string) bool {
	if !IsPrivate(ip) {
		return true
	}
	if g == nil {
		return false
	}
	if g.hostPorts[strings.ToLower(net.JoinHostPort(host, port))] || g.hostPorts[strings.ToLower(net.JoinHostPort(ip.String(), port))] {
		return true
	}
	for _, p := range g.prefixes {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// Messages the dashboard and API show for base-URL problems (50-dashboard §6.4).
const (
	msgBaseURLScheme  = "Use an http:// or https:// URL."
	msgBaseURLPrivate = "This address is private. Only local providers may use it, or hosts listed at start-up with --allow-private-upstreams (SWITCHYARD_PRIVATE_UPSTREAMS)."
)

// CheckBaseURL validates an upstream base URL for a provider of the given
// auth class. Literal private addresses and "localhost" are refused here;
// names that resolve to private addresses are refused by the dialer.
func (g *EgressGuard) CheckBaseURL(raw string, class AuthClass) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return msgBaseURLScheme
	}
	if class == AuthLocal {
		return ""
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	var ip netip.Addr
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		ip = netip.MustParseAddr("127.0.0.1")
	} else if a, err := netip.ParseAddr(host); err == nil {
		ip = a
	} else {
		return ""
	}
	if !g.AllowedAddr(host, ip, port) {
		return msgBaseURLPrivate
	}
	return ""
}
