package services

import "log/slog"

// Secret holds a credential. Printing, logging or encoding it shows a
// placeholder; Reveal is the one way to the value, used where it is sent
// upstream or sealed for storage.
type Secret string

func (Secret) String() string       { return "[redacted]" }
func (Secret) GoString() string     { return "[redacted]" }
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }
func (s Secret) Reveal() string     { return string(s) }

// MarshalText keeps JSON and form encoders from leaking it as well.
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Preview shows the shape of a secret without its value: "sk-…9f2a".
// Short secrets show only the ellipsis and their last two characters at most.
func (s Secret) Preview() string {
	v := string(s)
	if v == "" {
		return ""
	}
	head := ""
	if i := indexByte(v, '-'); i > 0 && i <= 4 && len(v) >= 16 {
		head = v[:i+1]
	}
	tailN := 4
	if len(v) < 12 {
		tailN = 2
	}
	if len(v) < 6 {
		tailN = 0
	}
	return head + "…" + v[len(v)-tailN:]
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}
