package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
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
	return services.NewGatewayError(services.CodeInvalidRequest, msg).WithParam(param)
}

// CheckDepth scans JSON for nesting deeper than max without decoding it,
// so a hostile body cannot make the decoder recurse.
func CheckDepth(b []byte, max int) *services.GatewayError {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
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
	top := decodeTop(body)
	if top == nil {
		return nil, "", false, invalid("", "The body is not a valid JSON object.")
	}
	raw, ok := top["model"]
	model, isString := decodeString(raw)
	if !ok || !isString {
		return nil, "", false, invalid("model", "model is required and must be a string.")
	}
	if err := ValidateModel(model); err != nil {
		return nil, "", false, err
	}
	if err := checkMessages(top["messages"], lim.MaxMessages, func(role string) bool { return chatRoles[role] },
		func(string) string { return "role must be one of system, developer, user, assistant, tool." }); err != nil {
		return nil, "", false, err
	}
	stream := false
	if v, ok := top["stream"]; ok && string(v) != "null" {
		if stream, ok = decodeBool(v); !ok {
			return nil, "", false, invalid("stream", "stream must be true or false.")
		}
	}
	for _, f := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := top[f]; ok && string(v) != "null" {
			if n, err := strconv.ParseInt(string(v), 10, 64); err != nil || n <= 0 {
				return nil, "", false, invalid(f, f+" must be a positive integer.")
			}
		}
	}
	if v, ok := top["n"]; ok && string(v) != "null" {
		if n, err := strconv.ParseInt(string(v), 10, 64); err != nil || n < 1 || n > 16 {
			return nil, "", false, invalid("n", "n must be an integer from 1 to 16.")
		}
	}
	return top, model, stream, nil
}

// checkMessages validates a "messages" value as json.Unmarshal into
// []map[string]json.RawMessage followed by the count and per-message role
// checks would: a non-empty array of objects, at most max of them, each
// with a "role" string that roleOK accepts.
func checkMessages(raw []byte, max int, roleOK func(string) bool, roleMsg func(role string) string) *services.GatewayError {
	arr, ok := arrayAt(raw, 0)
	n := 0
	for ok && arr.next() {
		if c := arr.val[0]; c != '{' && c != 'n' {
			ok = false
		}
		n++
	}
	if !ok || n == 0 {
		return invalid("messages", "messages must be a non-empty array of message objects.")
	}
	if n > max {
		return invalid("messages", fmt.Sprintf("messages may hold at most %d entries.", max))
	}
	arr, _ = arrayAt(raw, 0)
	for i := 0; arr.next(); i++ {
		role, ok := memberValue(arr.val, "role")
		var s string
		if ok {
			s, ok = decodeString(role)
			ok = ok && roleOK(s)
		}
		if !ok {
			return invalid(fmt.Sprintf("messages[%d].role", i), roleMsg(s))
		}
	}
	return nil
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
	if n, err := strconv.ParseInt(string(top["max_tokens"]), 10, 64); err != nil || n <= 0 {
		return nil, "", false, invalid("max_tokens", "max_tokens is required and must be a positive integer.")
	}
	if err := checkAnthropicMessages(top["messages"], lim.MaxMessages); err != nil {
		return nil, "", false, err
	}
	return top, model, stream, nil
}

// checkAnthropicMessages accepts the roles of 10-gateway-api §5.2: user,
// assistant and the mid-conversation system message. Other roles get the
// real API's wording, which clients' own fallbacks recognise.
func checkAnthropicMessages(raw []byte, max int) *services.GatewayError {
	return checkMessages(raw, max, func(role string) bool { return role == "user" || role == "assistant" || role == "system" },
		func(role string) string {
			return fmt.Sprintf("Unexpected role %q for input message role: expected user, assistant or system.", role)
		})
}

// ParseCountTokens validates a POST /v1/messages/count_tokens body: a
// Messages request without max_tokens (10-gateway-api §5.2).
func ParseCountTokens(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	top, model, _, err := parseCommon(body, lim)
	if err != nil {
		return nil, "", false, err
	}
	if err := checkAnthropicMessages(top["messages"], lim.MaxMessages); err != nil {
		return nil, "", false, err
	}
	return top, model, false, nil
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
	top, model, stream, err := parseCommon(body, lim)
	if err != nil {
		return nil, "", false, err
	}
	if v, ok := top["input"]; !ok || len(v) == 0 || string(v) == "null" {
		return nil, "", false, invalid("input", "input is required.")
	}
	if stream {
		return nil, "", false, services.NewGatewayError(services.CodeUnsupportedParameter,
			"Embeddings do not stream: remove stream or set it to false.").WithParam("stream")
	}
	return top, model, false, nil
}

func parseCommon(body []byte, lim Limits) (map[string]json.RawMessage, string, bool, *services.GatewayError) {
	if err := CheckDepth(body, lim.MaxJSONDepth); err != nil {
		return nil, "", false, err
	}
	top := decodeTop(body)
	if top == nil {
		return nil, "", false, invalid("", "The body is not a valid JSON object.")
	}
	raw, ok := top["model"]
	model, isString := decodeString(raw)
	if !ok || !isString {
		return nil, "", false, invalid("model", "model is required and must be a string.")
	}
	if err := ValidateModel(model); err != nil {
		return nil, "", false, err
	}
	stream := false
	if v, ok := top["stream"]; ok && string(v) != "null" {
		if stream, ok = decodeBool(v); !ok {
			return nil, "", false, invalid("stream", "stream must be true or false.")
		}
	}
	return top, model, stream, nil
}

// decodeTop reads a request body into its top-level fields, as
// json.Unmarshal into map[string]json.RawMessage does, without decoding
// the values: they are the body's own bytes (capacity trimmed). nil when
// the body is not a JSON object.
func decodeTop(body []byte) map[string]json.RawMessage {
	if !validJSON(body) {
		return nil
	}
	it, ok := objectAt(body, 0)
	if !ok {
		return nil
	}
	top := make(map[string]json.RawMessage, 8)
	for it.next() {
		top[keyString(it.key)] = it.val
	}
	return top
}

// keyString is the decoded form of a raw object key; the keys of the
// request formats come back without allocating.
func keyString(raw []byte) string {
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			var s string
			q := make([]byte, 0, len(raw)+2)
			_ = json.Unmarshal(append(append(append(q, '"'), raw...), '"'), &s)
			return s
		}
	}
	switch string(raw) {
	case "model":
		return "model"
	case "messages":
		return "messages"
	case "stream":
		return "stream"
	case "stream_options":
		return "stream_options"
	case "temperature":
		return "temperature"
	case "top_p":
		return "top_p"
	case "max_tokens":
		return "max_tokens"
	case "max_completion_tokens":
		return "max_completion_tokens"
	case "n":
		return "n"
	case "stop":
		return "stop"
	case "tools":
		return "tools"
	case "tool_choice":
		return "tool_choice"
	case "parallel_tool_calls":
		return "parallel_tool_calls"
	case "response_format":
		return "response_format"
	case "seed":
		return "seed"
	case "user":
		return "user"
	case "metadata":
		return "metadata"
	case "system":
		return "system"
	case "input":
		return "input"
	case "instructions":
		return "instructions"
	case "reasoning_effort":
		return "reasoning_effort"
	case "thinking":
		return "thinking"
	case "role":
		return "role"
	case "content":
		return "content"
	}
	return string(raw)
}

// memberValue returns the raw value of the last member called name of the
// object raw (a valid JSON value); false when raw is not an object or has
// no such member.
func memberValue(raw []byte, name string) ([]byte, bool) {
	it, ok := objectAt(raw, 0)
	if !ok {
		return nil, false
	}
	var v []byte
	found := false
	for it.next() {
		if string(it.key) == name || fieldOf(it.key, name) == -2 && keyString(it.key) == name {
			v, found = it.val, true
		}
	}
	return v, found
}

// decodeString is json.Unmarshal of raw into a string: false when raw is
// missing or not a string (JSON null gives "", true, as it does there).
func decodeString(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		s := raw[1 : len(raw)-1]
		plain := true
		for _, c := range s {
			if c == '\\' || c == '"' || c < 0x20 {
				plain = false
				break
			}
		}
		if plain && utf8.Valid(s) {
			return string(s), true
		}
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err == nil
}

// decodeBool is json.Unmarshal of a non-null raw value into a bool.
func decodeBool(raw []byte) (v, ok bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// CountTools is countTools for the handlers.
func CountTools(top map[string]json.RawMessage) int { return countTools(top) }

// jsonIter walks the members of an object, or the elements of an array, of
// a valid JSON document without decoding them (the caller has checked the
// document with validJSON; on other input it stops early or yields
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

// skipString returns the index after the string whose quote is at b[i]
// (len(b) when it does not end): the next quote not escaped by an odd run
// of backslashes.
func skipString(b []byte, i int) int {
	for i++; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		i += q
		n := 0
		for n < q && b[i-1-n] == '\\' {
			n++
		}
		i++
		if n%2 == 0 {
			return i
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

// validJSON reports whether b is one valid JSON value, exactly as
// json.Valid does (the same grammar, no UTF-8 check inside strings, at
// most 10,000 levels of nesting), in one pass without the decoder's
// per-byte state machine.
func validJSON(b []byte) bool {
	const maxDepth = 10000 // encoding/json's maxNestingDepth
	var stackArr [64]byte
	stack := stackArr[:0] // open containers, '{' or '['
	i := skipSpace(b, 0)
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return false
		}
		ok := true
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxDepth {
				return false
			}
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' and ']' follow '{' and '[' by two
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i, ok = validKey(b, i); !ok {
					return false
				}
			}
			continue
		case c == '"':
			i, ok = validString(b, i)
		case c == '-' || '0' <= c && c <= '9':
			i, ok = validNumber(b, i)
		case c == 't':
			i, ok = validLiteral(b, i, "true")
		case c == 'f':
			i, ok = validLiteral(b, i, "false")
		case c == 'n':
			i, ok = validLiteral(b, i, "null")
		default:
			return false
		}
		if !ok {
			return false
		}
		// After a value: close containers until a comma or the end.
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return false
			}
			i = skipSpace(b, i+1)
			if top == '{' {
				if i, ok = validKey(b, i); !ok {
					return false
				}
			}
			break
		}
	}
}

// validKey checks an object key and its colon at b[i:] and returns the
// index of the value after them.
func validKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := validString(b, i)
	if !ok {
		return i, false
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
}

// stringStop marks the bytes a JSON string cannot hold as they are.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// validString checks the string whose quote is at b[i] and returns the
// index after it.
func validString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		c := b[i]
		if !stringStop[c] {
			continue
		}
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		}
		// An escape.
		if i++; i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if i+4 >= len(b) {
				return i, false
			}
			for _, h := range b[i+1 : i+5] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return i, false
				}
			}
			i += 4
		default:
			return i, false
		}
	}
	return i, false
}

// validNumber checks the number at b[i:] and returns the index after it.
func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// validLiteral checks that word (true, false or null) is at b[i:].
func validLiteral(b []byte, i int, word string) (int, bool) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}
