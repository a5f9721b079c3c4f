package quota

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Window names (30-routing §8.3). Minute windows feed the request queue's
// learning only; the others are the long windows routing reads.
const (
	Minute  = "minute"
	FiveH   = "5h"
	Daily   = "daily"
	Weekly  = "weekly"
	Monthly = "monthly"
)

// Sources: the header family a window was read from (quota_windows.source).
const (
	SourceOpenAI           = "openai"
	SourceAnthropic        = "anthropic"
	SourceAnthropicUnified = "anthropic-unified"
	SourceCodex            = "codex"
)

// Window is one quota window read from one upstream response.
type Window struct {
	// Name is minute, 5h, daily, weekly or monthly.
	Name string
	// Used is the used fraction u, in [0, 1].
	Used float64
	// ResetAt is when the window resets; zero when unknown.
	ResetAt time.Time
	// Limit and Remaining are the counts of the dimension a minute window
	// was taken from (requests or tokens); Limit 0 means unknown.
	Limit, Remaining int64
	// Source is the header family.
	Source string
}

// Header prefixes of the four families, lower case.
const (
	prefixOpenAI    = "x-ratelimit-"
	prefixAnthropic = "anthropic-ratelimit-"
	prefixUnified   = "anthropic-ratelimit-unified-"
	prefixCodex     = "x-codex-"
)

// HasHeaders reports whether h holds a header of a known quota family. It
// allocates nothing, so a response without quota headers costs one pass
// over its header names.
func HasHeaders(h http.Header) bool {
	for k := range h {
		if family(k) != familyNone {
			return true
		}
	}
	return false
}

// Header families, by prefix.
const (
	familyNone = iota
	familyOpenAI
	familyAnthropic
	familyUnified
	familyCodex
)

// family classifies a header name by its prefix, case-insensitively.
func family(k string) int {
	if len(k) < len(prefixCodex) { // the shortest prefix
		return familyNone
	}
	switch k[0] | 0x20 {
	case 'x':
		switch {
		case hasPrefixFold(k, prefixOpenAI):
			return familyOpenAI
		case hasPrefixFold(k, prefixCodex):
			return familyCodex
		}
	case 'a':
		switch {
		case hasPrefixFold(k, prefixUnified):
			return familyUnified
		case hasPrefixFold(k, prefixAnthropic):
			return familyAnthropic
		}
	}
	return familyNone
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// dim is one request or token dimension of a minute-window family.
type dim struct {
	limit, remaining, reset string
}

// unifiedVariant is one <w> of the Anthropic unified headers; name is a
// slice of the header name, in its original case.
type unifiedVariant struct {
	name                       string
	utilization, reset, status string
}

// maxUnified bounds the unified variants read from one response (5h, 7d
// and its per-model variants); further ones are ignored.
const maxUnified = 8

// codexSlot is the primary or secondary Codex window.
type codexSlot struct {
	used, minutes, resetAt, resetAfter string
}

// fields collects the raw values of one response, by family.
type fields struct {
	openai    [3]dim // requests, tokens, unsuffixed
	anthropic [4]dim // requests, tokens, input-tokens, output-tokens
	unified   [maxUnified]unifiedVariant
	nUnified  int
	uStatus   string
	uClaim    string
	uReset    string
	codex     [2]codexSlot // primary, secondary
}

// parseInto is Parse appending to out, so the hot path can pass a buffer
// on its stack.
func parseInto(h http.Header, now time.Time, out []Window) []Window {
	var (
		f   fields
		buf [64]byte
	)
	for k, vs := range h {
		fam := family(k)
		if fam == familyNone || len(vs) == 0 {
			continue
		}
		v := strings.TrimSpace(vs[0])
		switch fam {
		case familyUnified:
			f.unifiedField(k[len(prefixUnified):], lower(buf[:0], k[len(prefixUnified):]), v)
		case familyAnthropic:
			f.anthropicField(lower(buf[:0], k[len(prefixAnthropic):]), v)
		case familyOpenAI:
			f.openaiField(lower(buf[:0], k[len(prefixOpenAI):]), v)
		case familyCodex:
			f.codexField(lower(buf[:0], k[len(prefixCodex):]), v)
		}
	}
	if w, ok := minuteWindow(f.openai[:], now, SourceOpenAI); ok {
		out = merge(out, w)
	}
	if w, ok := minuteWindow(f.anthropic[:], now, SourceAnthropic); ok {
		out = merge(out, w)
	}
	out = f.unifiedWindows(now, out)
	for i := range f.codex {
		if w, ok := f.codex[i].window(i == 0, now); ok {
			out = merge(out, w)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// lower appends the ASCII lower case of s to b. Names longer than b's
// capacity still work (append grows it).
func lower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// merge adds w to ws, keeping the higher u when the name is already there
// (equal u: the later reset; an unknown reset counts as earliest).
func merge(ws []Window, w Window) []Window {
	for i := range ws {
		if ws[i].Name != w.Name {
			continue
		}
		if w.Used > ws[i].Used || (w.Used == ws[i].Used && w.ResetAt.After(ws[i].ResetAt)) {
			ws[i] = w
		}
		return ws
	}
	return append(ws, w)
}

// openaiField stores x-ratelimit-{limit,remaining,reset}[-{requests,tokens}]
// (rest is lower case).
func (f *fields) openaiField(rest []byte, v string) {
	kind, dimName := rest, rest[:0]
	if i := bytes.IndexByte(rest, '-'); i >= 0 {
		kind, dimName = rest[:i], rest[i+1:]
	}
	var d *dim
	switch string(dimName) {
	case "requests":
		d = &f.openai[0]
	case "tokens":
		d = &f.openai[1]
	case "":
		d = &f.openai[2]
	default:
		return
	}
	d.set(kind, v)
}

// anthropicField stores anthropic-ratelimit-<dim>-{limit,remaining,reset}.
func (f *fields) anthropicField(rest []byte, v string) {
	i := bytes.LastIndexByte(rest, '-')
	if i < 0 {
		return
	}
	var d *dim
	switch string(rest[:i]) {
	case "requests":
		d = &f.anthropic[0]
	case "tokens":
		d = &f.anthropic[1]
	case "input-tokens":
		d = &f.anthropic[2]
	case "output-tokens":
		d = &f.anthropic[3]
	default:
		return
	}
	d.set(rest[i+1:], v)
}

func (d *dim) set(kind []byte, v string) {
	switch string(kind) {
	case "limit":
		d.limit = v
	case "remaining":
		d.remaining = v
	case "reset":
		d.reset = v
	}
}

// minuteWindow is u = max over dimensions of 1 − remaining/limit, with the
// reset of that dimension.
func minuteWindow(dims []dim, now time.Time, source string) (Window, bool) {
	var best Window
	found := false
	for _, d := range dims {
		limit, ok1 := parseCount(d.limit)
		remaining, ok2 := parseCount(d.remaining)
		if !ok1 || !ok2 || limit <= 0 {
			continue
		}
		w := Window{Name: Minute, Used: clamp01(1 - remaining/limit), ResetAt: ParseReset(d.reset, now),
			Limit: int64(limit), Remaining: int64(remaining), Source: source}
		if !found || w.Used > best.Used || (w.Used == best.Used && w.ResetAt.After(best.ResetAt)) {
			best, found = w, true
		}
	}
	return best, found
}

// parseCount reads a non-negative, finite count below 2⁶².
func parseCount(v string) (float64, bool) {
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f < 1<<62) {
		return 0, false
	}
	return f, true
}

// unifiedField stores anthropic-ratelimit-unified-<w>-{utilization,reset,status}
// and the unified status, representative-claim and reset. orig is the
// header name after the prefix, rest its lower case.
func (f *fields) unifiedField(orig string, rest []byte, v string) {
	switch string(rest) {
	case "status":
		f.uStatus = v
		return
	case "representative-claim":
		f.uClaim = v
		return
	case "reset":
		f.uReset = v
		return
	}
	i := bytes.LastIndexByte(rest, '-')
	if i <= 0 {
		return
	}
	name, field := rest[:i], rest[i+1:]
	if string(name) != "5h" && !bytes.HasPrefix(name, []byte("7d")) {
		return
	}
	var u *unifiedVariant
	for j := range f.nUnified {
		if strings.EqualFold(f.unified[j].name, orig[:i]) {
			u = &f.unified[j]
			break
		}
	}
	if u == nil {
		if f.nUnified == maxUnified {
			return
		}
		u = &f.unified[f.nUnified]
		u.name = orig[:i]
		f.nUnified++
	}
	switch string(field) {
	case "utilization":
		u.utilization = v
	case "reset":
		u.reset = v
	case "status":
		u.status = v
	}
}

// unifiedWindows appends the 5h and weekly windows of the unified headers.
func (f *fields) unifiedWindows(now time.Time, out []Window) []Window {
	for _, u := range f.unified[:f.nUnified] {
		name := FiveH
		if !strings.EqualFold(u.name, "5h") {
			name = Weekly
		}
		used, ok := parseFraction(u.utilization)
		if strings.EqualFold(u.status, "rejected") {
			used, ok = 1, true
		}
		if !ok {
			continue
		}
		out = merge(out, Window{Name: name, Used: used, ResetAt: ParseReset(u.reset, now), Source: SourceAnthropicUnified})
	}
	if strings.EqualFold(f.uStatus, "rejected") {
		name := ""
		switch claim := f.uClaim; {
		case strings.EqualFold(claim, "five_hour"):
			name = FiveH
		case len(claim) >= 9 && strings.EqualFold(claim[:9], "seven_day"):
			name = Weekly
		}
		if name != "" {
			w := Window{Name: name, Used: 1, ResetAt: ParseReset(f.uReset, now), Source: SourceAnthropicUnified}
			for _, o := range out {
				if o.Name == name && o.Source == SourceAnthropicUnified && !o.ResetAt.IsZero() {
					w.ResetAt = o.ResetAt
				}
			}
			out = merge(out, w)
		}
	}
	return out
}

// parseFraction reads a utilization in [0, 1] (larger values count as 1).
func parseFraction(v string) (float64, bool) {
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return clamp01(f), true
}

// codexField stores x-codex-{primary,secondary}-….
func (f *fields) codexField(rest []byte, v string) {
	i := bytes.IndexByte(rest, '-')
	if i < 0 {
		return
	}
	var c *codexSlot
	switch string(rest[:i]) {
	case "primary":
		c = &f.codex[0]
	case "secondary":
		c = &f.codex[1]
	default:
		return
	}
	switch string(rest[i+1:]) {
	case "used-percent":
		c.used = v
	case "window-minutes":
		c.minutes = v
	case "reset-at":
		c.resetAt = v
	case "reset-after-seconds":
		c.resetAfter = v
	}
}

// window maps a Codex slot: u = percent/100; the window by its minutes
// (≤ 360 5h, ≤ 1440 daily, ≤ 10 080 weekly, else monthly; absent: primary
// 5h, secondary weekly); reset-at preferred over reset-after-seconds.
func (c *codexSlot) window(primary bool, now time.Time) (Window, bool) {
	if c.used == "" {
		return Window{}, false
	}
	pct, err := strconv.ParseFloat(c.used, 64)
	if err != nil || math.IsNaN(pct) {
		return Window{}, false
	}
	name := Weekly
	if primary {
		name = FiveH
	}
	if m, ok := parseCount(c.minutes); ok && m > 0 {
		switch {
		case m <= 360:
			name = FiveH
		case m <= 1440:
			name = Daily
		case m <= 10_080:
			name = Weekly
		default:
			name = Monthly
		}
	}
	reset := ParseReset(c.resetAt, now)
	if reset.IsZero() {
		reset = ParseReset(c.resetAfter, now)
	}
	return Window{Name: name, Used: clamp01(pct / 100), ResetAt: reset, Source: SourceCodex}, true
}

// ParseReset reads a reset value received at now (§8.3): a Go duration
// ("20ms", "6m0s") is relative to now; a number v is relative seconds when
// v < 10⁹, epoch seconds when v < 10¹², else epoch milliseconds; an RFC 3339
// timestamp is absolute. Anything else — empty, negative, not finite,
// out of range — is unknown (the zero time). A relative value never
// yields an instant before now.
func ParseReset(v string, now time.Time) time.Time {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return time.Time{}
	case numeric(v):
		f, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil || !(f >= 0): // malformed, negative or NaN
			return time.Time{}
		case f < 1e9:
			return now.Add(time.Duration(f * float64(time.Second)))
		case f < 1e12:
			sec, frac := math.Modf(f)
			return time.Unix(int64(sec), int64(frac*1e9)).UTC()
		case f < 1<<62:
			return time.UnixMilli(int64(f)).UTC()
		}
		return time.Time{}
	case strings.IndexByte(v, ':') >= 0:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
		return time.Time{}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(d)
	}
	return time.Time{}
}

// numeric reports whether v is made of the characters of a decimal number
// (so the parsers that allocate on failure are tried only where they fit).
func numeric(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case '0' <= c && c <= '9', c == '.', c == '+', c == '-', c == 'e', c == 'E':
		default:
			return false
		}
	}
	return true
}

func clamp01(x float64) float64 {
	switch {
	case x > 1:
		return 1
	case x >= 0:
		return x
	}
	return 0 // negative or NaN
}
