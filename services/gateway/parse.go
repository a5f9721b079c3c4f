package gateway

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"switchyard/services"
)

// Limits bound what a client may send (10-gateway-api §10).
type Limits struct {
	MaxBodyBytes int64
	MaxJSONDepth int
	MaxMessages  int
}

// DefaultLimits are the documented defaults.
func DefaultLimits() Limits {
	return Limits{MaxBodyBytes: 32 << 20, MaxJSONDepth: 64, MaxMessages: 10000}
}

func invalid(param, msg string) *services.GatewayError {
	return &services.GatewayError{Status: 400, Code: "invalid_request", Param: param, Message: msg}
}

// CheckDepth scans JSON for nesting deeper than max without decoding it,
// so a hostile body cannot make the decoder recurse.
func CheckDepth(b []byte, max int) *services.GatewayError {
	depth := 0
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if depth > max {
				return invalid("", fmt.Sprintf("The JSON body is nested deeper than %d levels.", max))
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// ParseChat validates the fields Switchyard needs from a chat completion
// request (10-gateway-api §5.1) and returns the top-level fields verbatim,
// so unknown fields are forwarded unchanged.
func ParseChat(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	if err := CheckDepth(body, lim.MaxJSONDepth); err != nil {
		return nil, "", false, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, "", false, invalid("", "The body is not a valid JSON object.")
	}
	var model string
	raw, ok := top["model"]
	if !ok || json.Unmarshal(raw, &model) != nil {
		return nil, "", false, invalid("model", "model is required and must be a string.")
	}
	if err := ValidateModel(model); err != nil {
		return nil, "", false, err
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil || len(msgs) == 0 {
		return nil, "", false, invalid("messages", "messages must be a non-empty array of message objects.")
	}
	if len(msgs) > lim.MaxMessages {
		return nil, "", false, invalid("messages", fmt.Sprintf("messages may hold at most %d entries.", lim.MaxMessages))
	}
	for i, m := range msgs {
		var role string
		if m == nil || json.Unmarshal(m["role"], &role) != nil || !chatRoles[role] {
			return nil, "", false, invalid(fmt.Sprintf("messages[%d].role", i), "role must be one of system, developer, user, assistant, tool.")
		}
	}
	stream := false
	if v, ok := top["stream"]; ok && string(v) != "null" {
		if json.Unmarshal(v, &stream) != nil {
			return nil, "", false, invalid("stream", "stream must be true or false.")
		}
	}
	for _, f := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := top[f]; ok && string(v) != "null" {
			var n int64
			if json.Unmarshal(v, &n) != nil || n <= 0 {
				return nil, "", false, invalid(f, f+" must be a positive integer.")
			}
		}
	}
	if v, ok := top["n"]; ok && string(v) != "null" {
		var n int
		if json.Unmarshal(v, &n) != nil || n < 1 || n > 16 {
			return nil, "", false, invalid("n", "n must be an integer from 1 to 16.")
		}
	}
	return top, model, stream, nil
}

// countTools returns len(tools) of a request body (0 when absent).
func countTools(top map[string]json.RawMessage) int {
	var tools []json.RawMessage
	if v, ok := top["tools"]; ok && json.Unmarshal(v, &tools) == nil {
		return len(tools)
	}
	return 0
}

// ParseMessages validates an Anthropic Messages request (10-gateway-api §5.2).
func ParseMessages(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	top, model, stream, err := parseCommon(body, lim)
	if err != nil {
		return nil, "", false, err
	}
	var maxTokens int64
	if json.Unmarshal(top["max_tokens"], &maxTokens) != nil || maxTokens <= 0 {
		return nil, "", false, invalid("max_tokens", "max_tokens is required and must be a positive integer.")
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil || len(msgs) == 0 {
		return nil, "", false, invalid("messages", "messages must be a non-empty array of message objects.")
	}
	if len(msgs) > lim.MaxMessages {
		return nil, "", false, invalid("messages", fmt.Sprintf("messages may hold at most %d entries.", lim.MaxMessages))
	}
	for i, m := range msgs {
		var role string
		if m == nil || json.Unmarshal(m["role"], &role) != nil || (role != "user" && role != "assistant") {
			return nil, "", false, invalid(fmt.Sprintf("messages[%d].role", i), "role must be user or assistant.")
		}
	}
	return top, model, stream, nil
}

// ParseResponses validates an OpenAI Responses request (10-gateway-api §5.3).
func ParseResponses(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	top, model, stream, err := parseCommon(body, lim)
	if err != nil {
		return nil, "", false, err
	}
	in, ok := top["input"]
	if !ok || len(in) == 0 || string(in) == "null" {
		return nil, "", false, invalid("input", "input is required: a string or an array of items.")
	}
	var items []json.RawMessage
	if in[0] == '[' {
		if json.Unmarshal(in, &items) != nil {
			return nil, "", false, invalid("input", "input must be a string or an array of items.")
		}
		if len(items) > lim.MaxMessages {
			return nil, "", false, invalid("input", fmt.Sprintf("input may hold at most %d items.", lim.MaxMessages))
		}
	} else {
		var s string
		if json.Unmarshal(in, &s) != nil {
			return nil, "", false, invalid("input", "input must be a string or an array of items.")
		}
	}
	return top, model, stream, nil
}

// ParseEmbeddings validates an embeddings request (10-gateway-api §5.4).
func ParseEmbeddings(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	top, model, _, err := parseCommon(body, lim)
	if err != nil {
		return nil, "", false, err
	}
	if v, ok := top["input"]; !ok || len(v) == 0 || string(v) == "null" {
		return nil, "", false, invalid("input", "input is required.")
	}
	return top, model, false, nil
}

func parseCommon(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	if err := CheckDepth(body, lim.MaxJSONDepth); err != nil {
		return nil, "", false, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, "", false, invalid("", "The body is not a valid JSON object.")
	}
	var model string
	raw, ok := top["model"]
	if !ok || json.Unmarshal(raw, &model) != nil {
		return nil, "", false, invalid("model", "model is required and must be a string.")
	}
	if err := ValidateModel(model); err != nil {
		return nil, "", false, err
	}
	stream := false
	if v, ok := top["stream"]; ok && string(v) != "null" {
		if json.Unmarshal(v, &stream) != nil {
			return nil, "", false, invalid("stream", "stream must be true or false.")
		}
	}
	return top, model, stream, nil
}

// CountTools is countTools for the handlers.
func CountTools(top map[string]json.RawMessage) int { return countTools(top) }

// jsonIter walks the members of an object, or the elements of an array, of
// a valid JSON document without decoding them (the caller has checked the
// document with json.Valid; on other input it stops early or yields
// garbage, but never reads out of bounds).
type jsonIter struct {
	b     []byte
	i     int
	end   byte // '}' or ']'
	first bool
	key   []byte // raw key of the current member, without its quotes
	val   []byte // raw current value, capacity trimmed to its length
}

// objectAt starts a walk over the object at b[i:] (after whitespace);
// false when no object starts there.
func objectAt(b []byte, i int) (jsonIter, bool) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return jsonIter{}, false
	}
	return jsonIter{b: b, i: i + 1, end: '}', first: true}, true
}

// arrayAt starts a walk over the array at b[i:] (after whitespace); false
// when no array starts there.
func arrayAt(b []byte, i int) (jsonIter, bool) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return jsonIter{}, false
	}
	return jsonIter{b: b, i: i + 1, end: ']', first: true}, true
}

// next moves to the next member or element; false at the end.
func (it *jsonIter) next() bool {
	b := it.b
	i := skipSpace(b, it.i)
	if i >= len(b) || b[i] == it.end {
		it.i = i
		return false
	}
	if !it.first {
		i = skipSpace(b, i+1) // the comma
	}
	it.first = false
	if it.end == '}' {
		if i >= len(b) || b[i] != '"' {
			it.i = len(b)
			return false
		}
		ks := i
		i = skipString(b, i)
		it.key = b[ks+1 : max(i-1, ks+1)]
		i = skipSpace(b, min(skipSpace(b, i)+1, len(b))) // the colon
	}
	vs := i
	i = skipValue(b, vs)
	if i <= vs {
		it.i = len(b)
		return false
	}
	it.val = b[vs:i:i]
	it.i = i
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string whose quote is at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// fieldOf matches a raw object key against names: its index, -1 for an
// unrelated key, -2 for a key the standard decoder might still match to one
// of them (escapes, non-ASCII bytes, another letter case).
func fieldOf(key []byte, names ...string) int {
	for _, c := range key {
		if c == '\\' || c >= utf8.RuneSelf {
			return -2
		}
	}
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	for _, n := range names {
		if asciiFoldEqual(key, n) {
			return -2
		}
	}
	return -1
}

func asciiFoldEqual(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
