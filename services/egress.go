package services

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// EgressGuard decides which upstream addresses a provider may reach, for base
// URLs and outbound proxies alike, at save time (literal addresses and
// well-known names) and at dial time (every resolved address):
//   - non-local providers never reach loopback, private, link-local, CGNAT,
//     unspecified or other non-global addresses;
//   - local providers may reach loopback and private addresses, but never
//     link-local ranges or cloud metadata endpoints;
//
// unless the host is on the start-up allowlist (--allow-private-upstreams).
// The allowlist is configuration on purpose: nothing in the dashboard or API
// can widen it.
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

// nonGlobal are special-purpose ranges that netip's predicates do not name
// but that must not be reached as if they were the public internet:
// "this network", CGNAT (RFC 6598), IETF protocol assignments, benchmarking
// and the reserved class E block (with the broadcast address).
var nonGlobal = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// metadataRanges are link-local ranges and the cloud metadata endpoints
// outside them (AWS IMDS over IPv6, Alibaba Cloud). Local providers may reach
// private addresses, but never these, unless the allowlist names them.
var metadataRanges = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// metadataNames are host names whose only purpose is a cloud metadata
// service; they are refused at save time for every provider class.
var metadataNames = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
	"metadata.tencentyun.com":    true,
	"metadata.azure.internal":    true,
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// embeddedV4 returns the IPv4 address an IPv6 address stands for when a
// kernel or a NAT64 gateway would route it there (IPv4-mapped,
// IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::/96), else a unchanged.
func embeddedV4(a netip.Addr) netip.Addr {
	a = a.WithZone("")
	if a.Is4In6() {
		return a.Unmap()
	}
	if a.Is6() {
		b := a.As16()
		compat := true
		for _, x := range b[:12] {
			compat = compat && x == 0
		}
		// ::/96 minus :: and ::1, which are IPv6's own unspecified and loopback.
		if (compat && (b[12] != 0 || b[13] != 0 || b[14] != 0 || b[15] > 1)) || nat64.Contains(a) {
			return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		}
	}
	return a
}

// IsPrivate reports loopback, private, link-local, CGNAT, unspecified,
// multicast and other non-global addresses, IPv6 spellings of IPv4 ones
// included.
func IsPrivate(a netip.Addr) bool {
	a = embeddedV4(a)
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return true
	}
	for _, p := range nonGlobal {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// IsMetadata reports link-local and cloud metadata addresses.
func IsMetadata(a netip.Addr) bool {
	a = embeddedV4(a)
	for _, p := range metadataRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// listed reports whether the allowlist names host:port, ip:port or a prefix
// holding ip.
func (g *EgressGuard) listed(host string, ip netip.Addr, port string) bool {
	if g == nil {
		return false
	}
	if g.hostPorts[strings.ToLower(net.JoinHostPort(host, port))] {
		return true
	}
	if !ip.IsValid() {
		return false
	}
	ip = ip.WithZone("")
	if g.hostPorts[strings.ToLower(net.JoinHostPort(ip.String(), port))] ||
		g.hostPorts[strings.ToLower(net.JoinHostPort(embeddedV4(ip).String(), port))] {
		return true
	}
	for _, p := range g.prefixes {
		if p.Contains(ip.Unmap()) || p.Contains(embeddedV4(ip)) {
			return true
		}
	}
	return false
}

// AllowedAddr says whether a dial to ip:port is allowed for a non-local provider.
// The dialer calls it with the resolved address, so a DNS name that points at
// a private address is caught too.
func (g *EgressGuard) AllowedAddr(host string, ip netip.Addr, port string) bool {
	return !IsPrivate(ip) || g.listed(host, ip, port)
}

// AllowedLocalAddr says whether a dial to ip:port is allowed for a local
// provider: anything but link-local and metadata addresses, which need the
// allowlist.
func (g *EgressGuard) AllowedLocalAddr(host string, ip netip.Addr, port string) bool {
	return !IsMetadata(ip) || g.listed(host, ip, port)
}

// Allowed is AllowedLocalAddr for local providers, AllowedAddr otherwise.
func (g *EgressGuard) Allowed(local bool, host string, ip netip.Addr, port string) bool {
	if local {
		return g.AllowedLocalAddr(host, ip, port)
	}
	return g.AllowedAddr(host, ip, port)
}

// Messages the dashboard and API show for base-URL and proxy problems (50-dashboard §6.4).
const (
	msgBaseURLScheme  = "Use an http:// or https:// URL."
	msgProxyScheme    = "Use http://, https:// or socks5://."
	msgBaseURLPrivate = "This address is private. Only local providers may use it, or hosts listed at start-up with --allow-private-upstreams (SWITCHYARD_PRIVATE_UPSTREAMS)."
	msgBaseURLMeta    = "This is a link-local or cloud metadata address. No provider may use it unless it is listed at start-up with --allow-private-upstreams (SWITCHYARD_PRIVATE_UPSTREAMS)."
	msgSpellingPrefix = "Write the address in its usual form: "
)

// ParseHostIP reads a URL host the way the many IPv4 parsers of the world
// do (inet_aton: 1 to 4 parts, each decimal, 0x-hex or 0-octal, the last
// filling the remaining bytes), so that 2130706433, 0x7f000001, 127.1,
// 0177.0.0.1 and 127.000.000.001 are all seen as 127.0.0.1; IPv6 literals
// (brackets already stripped), IPv4 spelled inside IPv6 and localhost names
// (one trailing dot allowed) too. ok is false for host names. canonical
// reports the one spelling Go's resolver and every other reader agree on.
func ParseHostIP(host string) (ip netip.Addr, canonical, ok bool) {
	lower := strings.ToLower(host)
	name := strings.TrimSuffix(lower, ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), lower == name, true
	}
	if a, err := netip.ParseAddr(host); err == nil {
		v4 := embeddedV4(a)
		if a.Is6() && v4.Is4() && !a.Is4In6() {
			// ::127.0.0.1 and 64:ff9b::7f00:1 stand for an IPv4 address.
			return v4, false, true
		}
		return a, a.Is4() || a.WithZone("").String() == strings.ToLower(strings.SplitN(host, "%", 2)[0]), true
	}
	if a, ok := parseInetAton(name); ok {
		return a, false, true
	}
	return netip.Addr{}, false, false
}

// ParseLegacyIPv4 reads an IPv4 address in any inet_aton spelling
// (2130706433, 0x7f.1, 0177.0.0.1…, the usual one included); false for names.
func ParseLegacyIPv4(host string) (netip.Addr, bool) {
	return parseInetAton(strings.TrimSuffix(strings.ToLower(host), "."))
}

// parseInetAton parses the legacy IPv4 forms; a host that is not one is a name.
func parseInetAton(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		digits := p
		switch {
		case strings.HasPrefix(p, "0x"):
			base, digits = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" && base != 16 {
			return netip.Addr{}, false
		}
		if digits == "" {
			digits = "0" // "0x" alone is 0 to inet_aton
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	if vals[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// hostPortOf returns the URL's host and port, the scheme's default port when
// none is written.
func hostPortOf(u *url.URL) (string, string) {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080"
		default:
			port = "80"
		}
	}
	return u.Hostname(), port
}

// checkHost applies the guard to a URL's host at save time: literal
// addresses in any spelling, localhost names and metadata names.
// Non-literal names are left to the dialer, which checks every address they
// resolve to.
func (g *EgressGuard) checkHost(host, port string, class AuthClass) string {
	if host == "" {
		return ""
	}
	local := class == AuthLocal
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if metadataNames[name] && !g.listed(host, netip.Addr{}, port) && !g.listed(name, netip.Addr{}, port) {
		return msgBaseURLMeta
	}
	ip, canonical, ok := ParseHostIP(host)
	if !ok {
		return ""
	}
	canonHost := ip.WithZone("").String()
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		canonHost = name
	}
	listHost := host
	if !canonical {
		listHost = canonHost
	}
	switch {
	case IsMetadata(ip) && !g.listed(listHost, ip, port):
		return msgBaseURLMeta
	case !local && IsPrivate(ip) && !g.listed(listHost, ip, port):
		return msgBaseURLPrivate
	case !canonical:
		return msgSpellingPrefix + canonHost + "."
	}
	return ""
}

// CheckBaseURL validates an upstream base URL for a provider of the given
// auth class. Literal private addresses in any spelling, localhost names and
// metadata names are refused here; names that resolve to such addresses are
// refused by the dialer.
func (g *EgressGuard) CheckBaseURL(raw string, class AuthClass) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return msgBaseURLScheme
	}
	host, port := hostPortOf(u)
	return g.checkHost(host, port, class)
}

// CheckProxyURL validates an outbound proxy URL exactly as a base URL: the
// proxy receives the provider key and every request, so the same rules
// apply to its address. User info (the proxy's own login) is allowed.
func (g *EgressGuard) CheckProxyURL(raw string, class AuthClass) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") {
		return msgProxyScheme
	}
	host, port := hostPortOf(u)
	return g.checkHost(host, port, class)
}
