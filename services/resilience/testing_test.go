package resilience

// Helpers only the tests of this package use.

import (
	"net/http"
	"time"
)

// ParseRetryHint returns the upstream's retry hint and its source (header,
// body_json or body_text), or (0, "") when there is none (20-resilience
// §1.5). Sources in precedence order, the first valid one wins:
// Retry-After-Ms; Retry-After (delta seconds, decimals allowed, or HTTP-date);
// X-RateLimit-Reset (< 1e9 delta seconds, < 1e12 epoch seconds, else epoch
// ms); OpenAI x-ratelimit-reset-{requests,tokens} (Go durations);
// Anthropic anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset
// (RFC 3339); Codex x-codex-{primary,secondary}-reset-after-seconds|-reset-at
// of a window whose used-percent is ≥ 100; body JSON retry_after,
// error.retry_after (seconds) and Google RetryInfo retryDelay ("26.6s"); body
// text ("retry after N s", "try again in N ms|s|seconds|minutes", "resets in
// 1h2m3s", "reset(s) at <RFC 3339>"). Of several dimension headers the one
// whose remaining count is 0 wins, else the largest. Zero, negative, past and
// unparsable values are skipped. The result is not floored or capped: the
// classifier does that, other callers (quota windows) decide for themselves.
func ParseRetryHint(h http.Header, body []byte, now time.Time) (time.Duration, string) {
	return parseRetryHint(h, body, clsDecodeJSON(body), now)
}
