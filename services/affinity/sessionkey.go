package affinity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Session key sources, in precedence order (20-resilience §5). The source is
// also the prefix of the normalised key.
const (
	SourceHeader       = "header"
	SourceMetadata     = "metadata"
	SourceConversation = "conversation"
	SourceSession      = "session"
	SourceMetadataUser = "metadata-user"
	SourcePromptCache  = "prompt-cache"
	SourceInput        = "input"
)

// SessionHeaders are the client headers that carry a session id, in
// precedence order (10-gateway-api §8.1): Switchyard's own, then what Codex
// sent before (x-codex-session-id) and sends now (session-id), the common
// X-Session-Id, and Claude Code's x-claude-code-session-id. They are never
// forwarded upstream.
var SessionHeaders = []string{"X-Switchyard-Session", "X-Codex-Session-Id", "Session-Id", "X-Session-Id", "X-Claude-Code-Session-Id"}

// maxPlainKey is the longest value kept readable; longer or odd values are hashed.
const maxPlainKey = 180

// maxInputChars bounds the first user message text that keys a session.
const maxInputChars = 4096

var plainKey = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// SessionKey derives the session key of a request: the first non-empty of the
// session headers, metadata.session_id / metadata.sessionId, conversation_id,
// session_id, metadata.user_id, prompt_cache_key and finally the first user
// message's text (Chat or Anthropic messages, Responses input). The key is
// "source:value" when the trimmed value is at most 180 characters of
// [A-Za-z0-9._:-], else "source:sha256:<hex>"; input text is always hashed.
// ok is false when the request carries none of them.
func SessionKey(h http.Header, body map[string]json.RawMessage) (key string, source string, ok bool) {
	for _, name := range SessionHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return normalise(SourceHeader, v), SourceHeader, true
		}
	}
	var meta map[string]json.RawMessage
	if raw, found := body["metadata"]; found {
		_ = json.Unmarshal(raw, &meta) // not an object: no metadata keys
	}
	fields := []struct {
		from   map[string]json.RawMessage
		name   string
		source string
	}{
		{meta, "session_id", SourceMetadata},
		{meta, "sessionId", SourceMetadata},
		{body, "conversation_id", SourceConversation},
		{body, "session_id", SourceSession},
		{meta, "user_id", SourceMetadataUser},
		{body, "prompt_cache_key", SourcePromptCache},
	}
	for _, f := range fields {
		if v := scalar(f.from[f.name]); v != "" {
			return normalise(f.source, v), f.source, true
		}
	}
	if text := firstUserText(body); text != "" {
		return SourceInput + ":sha256:" + sha256Hex(text), SourceInput, true
	}
	return "", "", false
}

// PinID is the id of the pin of one session of one client key on one
// provider: hex SHA-256 of keyID NUL provider NUL sessionKey.
func PinID(keyID, provider, sessionKey string) string {
	return sha256Hex(keyID + "\x00" + provider + "\x00" + sessionKey)
}

func normalise(prefix, v string) string {
	v = strings.TrimSpace(v)
	if len(v) <= maxPlainKey && plainKey.MatchString(v) {
		return prefix + ":" + v
	}
	return prefix + ":sha256:" + sha256Hex(v)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// scalar returns a JSON string's trimmed value, or a number's literal; other
// JSON values (null, booleans, objects, arrays) carry no session id.
func scalar(raw json.RawMessage) string {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return strings.TrimSpace(s)
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return ""
		}
		return n.String()
	}
	return ""
}

// firstUserText returns the text of the first user message that has any:
// Chat and Anthropic "messages", else Responses "input" (a string or a list
// of items). Only text parts count (text, input_text); images, files and tool
// results do not. The result is trimmed and cut to 4096 characters.
func firstUserText(body map[string]json.RawMessage) string {
	for _, field := range []string{"messages", "input"} {
		raw, found := body[field]
		if !found {
			continue
		}
		if field == "input" {
			if s := scalarString(raw); s != "" {
				return clip(s)
			}
		}
		var items []struct {
			Role    string          `json:"role"`
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &items) != nil {
			continue
		}
		for _, it := range items {
			if it.Role != "user" || (it.Type != "" && it.Type != "message") {
				continue
			}
			if t := clip(contentText(it.Content)); t != "" {
				return t
			}
		}
	}
	return ""
}

func scalarString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// contentText joins the text parts of a message content: a plain string, or
// a list of parts of type "text" or "input_text".
func contentText(raw json.RawMessage) string {
	if s := scalarString(raw); s != "" {
		return s
	}
	var parts []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Type != "text" && p.Type != "input_text" {
			continue
		}
		if s := scalarString(p.Text); s != "" {
			texts = append(texts, s)
		}
	}
	return strings.Join(texts, "\n")
}

// clip keeps the first 4096 characters (runes) of s, trimmed.
func clip(s string) string {
	if utf8.RuneCountInString(s) > maxInputChars {
		n := 0
		for i := range s {
			if n == maxInputChars {
				s = s[:i]
				break
			}
			n++
		}
	}
	return strings.TrimSpace(s)
}
