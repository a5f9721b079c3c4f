package translate

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The fuzz targets assert that hostile input never panics and that every
// successful translation is valid JSON (requests) or well-framed SSE
// (streams).

func FuzzChatToAnthropic(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c.1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c.1","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","parallel_tool_calls":false,"reasoning_effort":"high","max_tokens":100,"temperature":2,"stop":["x"],"user":"u","logprobs":true}`))
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"x","content":[{"type":"text","text":"t"}]},{"role":"assistant","tool_calls":[{"id":"","function":{"arguments":{"inline":true}}}]}],"n":1}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"data:;base64,"},{"type":"file"}]}],"tool_choice":{"type":"function"},"stop":"s"}`))
	f.Add([]byte(`{"messages":[],"n":3}`))
	f.Add([]byte(`{"messages":[{"role":"developer"}],"max_completion_tokens":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return
		}
		out, _, err := ChatToAnthropic(m, "claude", 4096)
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON output %s", out)
		}
		// The same body read as Responses must not panic either.
		out, _, err = ResponsesToChat(m, "gpt")
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON output %s", out)
		}
		// Responses re-encoding of an upstream chat body.
		if out, _, err := ChatToResponsesResponse(data, "m", nil); err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON output %s", out)
		}
		if out, _, err := ChatToAnthropicResponse(data, "m"); err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON output %s", out)
		}
	})
}

func FuzzAnthropicToChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}},{"type":"tool_result","tool_use_id":"t","is_error":true,"content":[{"type":"text","text":"e"}]}]},{"role":"assistant","content":[{"type":"thinking","thinking":"x"},{"type":"tool_use","id":"t","name":"f","input":{}}]}],"tools":[{"name":"f","input_schema":{}},{"type":"bash_20250124","name":"bash"}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},"thinking":{"type":"enabled","budget_tokens":5000},"stop_sequences":["a","b","c","d","e"],"top_k":3,"metadata":{"user_id":"u"},"stream":true}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""}],"system":"s"}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"document"},{"type":"image","source":null}]}],"thinking":{"type":"adaptive"}}`))
	f.Add([]byte(`{"id":"msg_1","type":"message","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"t","name":"f","input":[1]}],"stop_reason":"tool_use","usage":{"input_tokens":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) == nil {
			for _, fl := range []Flags{{}, {MaxCompletionTokens: true, ReasoningEffort: true}} {
				out, _, err := AnthropicToChatWith(m, "gpt", fl)
				if err == nil && !json.Valid(out) {
					t.Fatalf("invalid JSON output %s", out)
				}
			}
		}
		if out, _, err := AnthropicToChatResponse(data, "m"); err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON output %s", out)
		}
	})
}

// splitEvents turns fuzz input into events: one per line, an optional
// "name|" prefix as the event name.
func splitEvents(data []byte) (names []string, payloads [][]byte) {
	for _, line := range bytes.Split(data, []byte("\n")) {
		name := ""
		if i := bytes.IndexByte(line, '|'); i >= 0 && i < 32 {
			name, line = string(line[:i]), line[i+1:]
		}
		names = append(names, name)
		payloads = append(payloads, line)
	}
	return names, payloads
}

// checkFrames fails on any frame that is not `[event: x\n]data: <json>\n\n`.
func checkFrames(t *testing.T, frames [][]byte) {
	t.Helper()
	for _, f := range frames {
		if !bytes.HasSuffix(f, []byte("\n\n")) {
			t.Fatalf("unterminated frame %q", f)
		}
		_, payload := parseFrame(f)
		if !json.Valid(payload) {
			t.Fatalf("frame payload is not JSON: %q", f)
		}
	}
}

func feedAll(t *testing.T, s Stream, data []byte) {
	names, payloads := splitEvents(data)
	for i := range payloads {
		frames, _, _, err := s.Feed(names[i], payloads[i])
		checkFrames(t, frames)
		if err != nil {
			break
		}
	}
	checkFrames(t, [][]byte{s.ErrorFrame("upstream_error", "m\"x\n", "")})
	_ = s.Usage()
}

func FuzzAnthropicStream(f *testing.F) {
	f.Add([]byte(`message_start|{"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":3}}}
{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}
{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}
{"type":"content_block_stop","index":0}
{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"a":1}}}
{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"b\":"}}
{"type":"content_block_stop","index":1}
{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":4}}
{"type":"message_stop"}`))
	f.Add([]byte(`ping|{"type":"ping"}
error|{"type":"error","error":{"type":"overloaded_error","message":"x"}}`))
	f.Add([]byte(`{"type":"content_block_delta","index":7,"delta":{"type":"input_json_delta","partial_json":"x"}}
{"type":"message_delta","delta":null}
{"type":"message_stop"}
{"type":"message_stop"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		feedAll(t, NewAnthropicToChatStream(""), data)
		feedAll(t, Compose(NewAnthropicToChatStream("m"), NewChatToResponsesStream("m", "req_F")), data)
	})
}

func FuzzChatStream(f *testing.F) {
	f.Add([]byte(`{"id":"c","model":"g","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}
{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"r"}}]}
{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}
{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]}}]}
{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}
{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}
{"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":9}}}
[DONE]`))
	f.Add([]byte(`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"id":"a"},{"id":"b","function":{"arguments":{"x":1}}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"error":{"message":"x","code":429}}
[DONE]`))
	f.Add([]byte(`{"choices":[{"index":1,"delta":{"content":"other choice"}}]}
{"choices":null}
[DONE]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		feedAll(t, NewChatToAnthropicStream(""), data)
		feedAll(t, NewChatToResponsesStream("", ""), data)
		feedAll(t, Compose(NewChatToAnthropicStream("m"), NewAnthropicToChatStream("m")), data)
	})
}
