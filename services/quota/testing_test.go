package quota

// Helpers only the tests of this package use.

import (
	"net/http"
	"time"
)

// Parse reads every quota window of §8.3 from the headers of one upstream
// response received at now. Malformed values are ignored: a window whose
// usage cannot be read is left out, a reset that cannot be read is unknown.
// Two readings of one window name (several families, Anthropic 7d variants,
// both Codex slots) keep the higher u. The result is nil when nothing is
// known.
func Parse(h http.Header, now time.Time) []Window {
	return parseInto(h, now, nil)
}
