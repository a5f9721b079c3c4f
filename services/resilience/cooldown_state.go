package resilience

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"switchyard/services"
)

// Pure functions on one connection's state: whether it cools, the effect
// of a decision, entering a terminal state, the routing and error columns,
// copying and comparing.

func coolingAt(st services.ConnectionState, now time.Time) bool {
	return st.TerminalStatus == "" && st.RateLimitedUntil != nil && st.RateLimitedUntil.After(now)
}

func effectOf(st services.ConnectionState, now time.Time, newEpisode, entered bool) CooldownEffect {
	eff := CooldownEffect{NewEpisode: newEpisode, Terminal: st.TerminalStatus, EnteredTerminal: entered, LevelAfter: st.BackoffLevel}
	if coolingAt(st, now) {
		eff.Until = *st.RateLimitedUntil
	}
	return eff
}

func enterTerminal(st *services.ConnectionState, status string, now time.Time) {
	at := now
	st.TerminalStatus = status
	st.TerminalAt = &at
	st.RateLimitedUntil = nil
	st.CooldownReason = ""
	st.BackoffLevel = 0
}

func hasRoutingState(st services.ConnectionState) bool {
	return st.RateLimitedUntil != nil || st.BackoffLevel != 0 || st.AuthFailCount != 0 || st.RejectStreak != 0
}

func clearRoutingState(st *services.ConnectionState) {
	st.RateLimitedUntil = nil
	st.CooldownReason = ""
	st.BackoffLevel = 0
	st.AuthFailCount = 0
	st.LastAuthFailAt = nil
	st.RejectStreak = 0
}

func recordLastError(st *services.ConnectionState, info ConnInfo, cls Classification, now time.Time) {
	msg := info.Message
	if strings.TrimSpace(msg) == "" {
		msg = fallbackErrorText(cls)
	}
	at := now
	st.LastError = scrubLastError(msg)
	st.LastErrorReason = string(cls.Reason)
	st.LastErrorStatus = cls.Status
	st.ErrorCode = truncateRunes(scrubLastError(info.Code), 128)
	st.LastErrorAt = &at
}

func fallbackErrorText(cls Classification) string {
	s := string(cls.Reason)
	if cls.Status > 0 {
		s = fmt.Sprintf("HTTP %d %s", cls.Status, cls.Reason)
	}
	if cls.Detail != "" {
		s += " (" + cls.Detail + ")"
	}
	return s
}

func nextUTCMidnight(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

func cloneTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := *t
	return &v
}

func cloneConnectionState(st services.ConnectionState) services.ConnectionState {
	st.RateLimitedUntil = cloneTimePtr(st.RateLimitedUntil)
	st.TerminalAt = cloneTimePtr(st.TerminalAt)
	st.LastErrorAt = cloneTimePtr(st.LastErrorAt)
	st.LastAuthFailAt = cloneTimePtr(st.LastAuthFailAt)
	st.LastRejectAt = cloneTimePtr(st.LastRejectAt)
	return st
}

func timePtrEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func connectionStateEqual(a, b services.ConnectionState) bool {
	return timePtrEqual(a.RateLimitedUntil, b.RateLimitedUntil) && a.BackoffLevel == b.BackoffLevel &&
		a.TerminalStatus == b.TerminalStatus && timePtrEqual(a.TerminalAt, b.TerminalAt) &&
		a.LastError == b.LastError && a.LastErrorReason == b.LastErrorReason &&
		a.LastErrorStatus == b.LastErrorStatus && a.ErrorCode == b.ErrorCode &&
		timePtrEqual(a.LastErrorAt, b.LastErrorAt) && a.AuthFailCount == b.AuthFailCount &&
		timePtrEqual(a.LastAuthFailAt, b.LastAuthFailAt) && a.CooldownReason == b.CooldownReason &&
		a.RejectStreak == b.RejectStreak && timePtrEqual(a.LastRejectAt, b.LastRejectAt) &&
		a.TestStatus == b.TestStatus
}

// Scrubbing of last_error: upstream messages sometimes echo the credential
// that was sent, so anything credential-like is replaced before it is
// stored or shown.
var (
	scrubBearerRe   = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[^\s"',;]+`)
	scrubSKRe       = regexp.MustCompile(`\b(sk|pk|rk)-[A-Za-z0-9_\-]{6,}`)
	scrubKVRe       = regexp.MustCompile(`(?i)\b(api[_-]?key|x-api-key|key|access[_-]?token|refresh[_-]?token|id[_-]?token|token|client[_-]?secret|secret|password|passwd|authorization)(["']?\s*[:=]\s*["']?)([^\s"',;&}\]]+)`)
	scrubUserinfoRe = regexp.MustCompile(`://[^/\s:@]+:[^/\s@]+@`)
	scrubLongRunRe  = regexp.MustCompile(`[A-Za-z0-9+/_\-]{32,}={0,2}`)
)

// scrubLastError redacts credential-like substrings (sk-… keys, Bearer
// tokens, key=value secrets, URL passwords, runs of 32+ base64/hex
// characters holding both letters and digits), replaces control characters
// and caps the result at 1 024 characters.
func scrubLastError(s string) string {
	if s == "" {
		return ""
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = scrubBearerRe.ReplaceAllString(s, "$1 [redacted]")
	s = scrubSKRe.ReplaceAllString(s, "$1-[redacted]")
	s = scrubKVRe.ReplaceAllString(s, "$1$2[redacted]")
	s = scrubUserinfoRe.ReplaceAllString(s, "://[redacted]@")
	s = scrubLongRunRe.ReplaceAllStringFunc(s, func(run string) string {
		hasDigit := strings.ContainsAny(run, "0123456789")
		hasLetter := strings.IndexFunc(run, unicode.IsLetter) >= 0
		if hasDigit && hasLetter {
			return "[redacted]"
		}
		return run
	})
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return truncateRunes(strings.TrimSpace(s), lastErrorMaxChars)
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
