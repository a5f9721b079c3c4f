package views

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"switchyard/services"
)

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }

func itoa(v int) string { return strconv.Itoa(v) }

// humanMs renders a remaining time as "1 m 24 s".
func humanMs(ms int64) string {
	s := (ms + 999) / 1000
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", s)
	case s < 3600:
		return fmt.Sprintf("%d m %d s", s/60, s%60)
	}
	return fmt.Sprintf("%d h %d m", s/3600, (s%3600)/60)
}

// HumanMs is humanMs for handlers and tests.
func HumanMs(ms int64) string { return humanMs(ms) }

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

func problemCount(n int) string {
	if n == 1 {
		return "There is 1 problem with this form"
	}
	return fmt.Sprintf("There are %d problems with this form", n)
}

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

// Ago renders a relative time such as "3 min ago".
func Ago(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in " + humanMs((-d).Milliseconds())
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
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
		return "$" + Thousands(int64(math.Round(usd)))
	case usd >= 1:
		return "$" + strconv.FormatFloat(usd, 'f', 2, 64)
	case usd < 0.000001:
		return "< $0.000001"
	}
	decimals := min(max(2, 1-int(math.Floor(math.Log10(usd)))), 6)
	return "$" + strconv.FormatFloat(usd, 'f', decimals, 64)
}
