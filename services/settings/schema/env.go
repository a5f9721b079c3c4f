package schema

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ReadEnv reads the fields' environment variables. An empty variable is
// unset; an unparsable or out-of-range one is ignored and reported in
// warnings (one sentence each).
func (s *Schema) ReadEnv(getenv func(string) string) (Values, []string) {
	out := Values{}
	var warnings []string
	if getenv == nil {
		return out, nil
	}
	for _, f := range s.fields {
		if f.Env == "" {
			continue
		}
		raw := getenv(f.Env)
		if strings.TrimSpace(raw) == "" {
			continue
		}
		val, msg := envValue(f, raw)
		if msg != "" {
			warnings = append(warnings, fmt.Sprintf("%s=%q is ignored (%s %s); using the default", f.Env, raw, f.Path, msg))
			continue
		}
		out[f.Path] = val
	}
	return out, warnings
}

// envValue parses one variable and runs the field's check on it.
func envValue(f *Field, raw string) (any, string) {
	var val any
	var msg string
	switch f.Kind {
	case Bool:
		b, ok := ParseEnvBool(raw)
		if !ok {
			msg = "must be true, 1, on, yes, false, 0, off or no"
		}
		val = b
	case Int:
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			msg = rangeMsg(f.Min, f.Max)
		case err != nil:
			msg = "must be a whole number"
		case n < f.Min || n > f.Max:
			msg = rangeMsg(f.Min, f.Max)
		}
		val = n
	case String:
		val, msg = stringValue(f, raw)
	default:
		msg = "cannot be set from the environment"
	}
	if msg == "" && f.Check != nil {
		var errs map[string]string
		val, errs = f.Check(val, false)
		if len(errs) > 0 {
			msg = errs[SortedKeys(errs)[0]]
		}
	}
	return val, msg
}

// ParseEnvBool reads an environment boolean: true|1|on|yes or false|0|off|no
// (any case, surrounding space ignored).
func ParseEnvBool(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "on", "yes":
		return true, true
	case "false", "0", "off", "no":
		return false, true
	}
	return false, false
}
