package human

import (
	"strconv"
	"strings"
	"time"
)

// Style is one of the ways the product writes a duration. The wording
// differs by what the duration is, and 50-dashboard.md fixes each one.
type Style uint8

const (
	// Countdown is a time left or elapsed, to the second (rounded up), in
	// its two largest units: "45 s", "1 m 24 s", "2 h 5 m", "3 d 4 h".
	// static/app.js (formatRemaining) ticks countdowns down in exactly this
	// format, so the text does not jump at the first tick; change both
	// together. Negative durations read as "0 s".
	Countdown Style = iota
	// Length is an exact amount of time in words, largest unit first and
	// zero parts left out: "30 s", "4 min 10 s", "2 min", "1 h 30 min",
	// "7 days", "1.5 s", "350 ms". It writes configured values (a lockout
	// ladder "2 min → 4 min → 8 min") and the waits of messages ("Try again
	// in 4 min 10 s."). Whole days only read as days ("1 day", not
	// "24 h"); anything else stays in hours.
	Length
	// Latency is a measured time: milliseconds with thousands separators
	// below 10 s, else seconds with one decimal ("350 ms", "1,234 ms",
	// "12.3 s"), 50-dashboard.md §4 "Numbers".
	Latency
)

// Duration writes d for people in the given style.
func Duration(d time.Duration, s Style) string {
	switch s {
	case Length:
		return length(d)
	case Latency:
		return latency(d)
	}
	return countdown(d)
}

// countdown is Style Countdown.
func countdown(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64((d + time.Second - 1) / time.Second)
	days, s := s/86400, s%86400
	h, s := s/3600, s%3600
	m, s := s/60, s%60
	switch {
	case days > 0:
		return itoa(days) + " d " + itoa(h) + " h"
	case h > 0:
		return itoa(h) + " h " + itoa(m) + " m"
	case m > 0:
		return itoa(m) + " m " + itoa(s) + " s"
	}
	return itoa(s) + " s"
}

// length is Style Length.
func length(d time.Duration) string {
	ms := d.Milliseconds()
	switch {
	case ms <= 0:
		return "0 s"
	case ms < 1000:
		return itoa(ms) + " ms"
	case ms%86_400_000 == 0:
		return Plural(int(ms/86_400_000), "day", "days")
	}
	h, rest := ms/3_600_000, ms%3_600_000
	m, rest := rest/60_000, rest%60_000
	parts := make([]string, 0, 3)
	if h > 0 {
		parts = append(parts, itoa(h)+" h")
	}
	if m > 0 {
		parts = append(parts, itoa(m)+" min")
	}
	if rest > 0 {
		parts = append(parts, strconv.FormatFloat(float64(rest)/1000, 'f', -1, 64)+" s")
	}
	return strings.Join(parts, " ")
}

// latency is Style Latency.
func latency(d time.Duration) string {
	ms := d.Milliseconds()
	if ms < 10_000 {
		return Thousands(ms) + " ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
}

// Plural is a count and its noun: "1 model", "0 models", "1,204 requests".
// one and many may carry more words than the noun ("request has",
// "requests have"), so a sentence agrees with its count.
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Thousands(int64(n)) + " " + many
}

// Thousands writes a count with thousands separators ("1,204", "-3,000").
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
