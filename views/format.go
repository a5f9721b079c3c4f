package views

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"switchyard/services"
	"switchyard/services/human"
)

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }

func itoa(v int) string { return strconv.Itoa(v) }

// millis is a millisecond count of a view model as a duration, for
// human.Duration.
func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func errorTitle(status int) string {
	switch status {
	case 404:
		return "Not found"
	case 403:
		return "Not allowed"
	case 409:
		return "Conflict"
	}
	if status >= 500 {
		return "Something went wrong"
	}
	return "Request problem"
}

// problemCount is the title of a form's error summary.
func problemCount(n int) string { return "This form has " + human.Plural(n, "problem", "problems") }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fieldAnchor turns a dotted field path into an element id ("targets.1.weight" → "targets-1-weight").
func fieldAnchor(field string) string { return strings.ReplaceAll(field, ".", "-") }

// RFC3339 formats an instant for <time datetime>.
func RFC3339(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// Ago renders a relative time such as "3 min ago" (50-dashboard §4): the
// age in human.Length words, cut to its largest unit below two days.
func Ago(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in " + human.Duration(-d, human.Countdown)
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		d = d.Truncate(time.Minute)
	case d < 48*time.Hour:
		d = d.Truncate(time.Hour)
	default:
		d = d.Truncate(24 * time.Hour)
	}
	return human.Duration(d, human.Length) + " ago"
}

// CostText renders an estimated cost in US dollars with two significant
// digits below a dollar ("$0.0045", "$1.23", "$1,234"), "—" when no price
// was known. Callers mark it as an estimate next to it.
func CostText(c services.Cost) string {
	if !c.Known {
		return "—"
	}
	usd := c.USD()
	switch {
	case c.NanoUSD == 0:
		return "$0"
	case usd >= 1000:
		return "$" + human.Thousands(int64(math.Round(usd)))
	case usd >= 1:
		return "$" + strconv.FormatFloat(usd, 'f', 2, 64)
	case usd < 0.000001:
		return "< $0.000001"
	}
	decimals := min(max(2, 1-int(math.Floor(math.Log10(usd)))), 6)
	return "$" + strconv.FormatFloat(usd, 'f', decimals, 64)
}
