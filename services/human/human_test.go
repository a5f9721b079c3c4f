package human

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := []struct {
		d     time.Duration
		style Style
		want  string
	}{
		// Countdowns: rounded up to the second, two units, the format app.js ticks.
		{ms(84_000), Countdown, "1 m 24 s"},
		{ms(1), Countdown, "1 s"},
		{0, Countdown, "0 s"},
		{-time.Second, Countdown, "0 s"},
		{ms(59_001), Countdown, "1 m 0 s"},
		{20 * time.Minute, Countdown, "20 m 0 s"},
		{2*time.Hour + 5*time.Minute + 30*time.Second, Countdown, "2 h 5 m"},
		{72 * time.Hour, Countdown, "3 d 0 h"},
		{76*time.Hour + 59*time.Minute, Countdown, "3 d 4 h"},
		// Lengths: exact, largest unit first, zero parts left out.
		{30 * time.Second, Length, "30 s"},
		{250 * time.Second, Length, "4 min 10 s"},
		{4 * time.Minute, Length, "4 min"},
		{2 * time.Minute, Length, "2 min"},
		{90 * time.Minute, Length, "1 h 30 min"},
		{2 * time.Hour, Length, "2 h"},
		{24 * time.Hour, Length, "1 day"},
		{7 * 24 * time.Hour, Length, "7 days"},
		{36 * time.Hour, Length, "36 h"},
		{ms(4500), Length, "4.5 s"},
		{ms(61_500), Length, "1 min 1.5 s"},
		{ms(350), Length, "350 ms"},
		{0, Length, "0 s"},
		// Latencies: ms below 10 s, else seconds with one decimal.
		{ms(350), Latency, "350 ms"},
		{ms(1234), Latency, "1,234 ms"},
		{ms(9999), Latency, "9,999 ms"},
		{ms(12_345), Latency, "12.3 s"},
	}
	for _, tc := range tests {
		if got := Duration(tc.d, tc.style); got != tc.want {
			t.Errorf("Duration(%v, %d) = %q, want %q", tc.d, tc.style, got, tc.want)
		}
	}
}

func TestPluralAndThousands(t *testing.T) {
	tests := []struct{ got, want string }{
		{Plural(1, "model", "models"), "1 model"},
		{Plural(0, "model", "models"), "0 models"},
		{Plural(1204, "request", "requests"), "1,204 requests"},
		{Plural(1, "request has", "requests have"), "1 request has"},
		{Thousands(0), "0"},
		{Thousands(999), "999"},
		{Thousands(1000), "1,000"},
		{Thousands(1234567), "1,234,567"},
		{Thousands(-3000), "-3,000"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
