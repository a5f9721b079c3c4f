package translate

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// step is one upstream event and the client frames it must produce.
type step struct {
	event  string
	data   string
	want   []string // expected frame payloads (JSON), in order
	events []string // expected event names (Anthropic/Responses clients)
	useful bool
	done   bool
}

func fixedNow() time.Time { return t0 }

func runSteps(t *testing.T, s Stream, steps []step, named bool) {
	t.Helper()
	for i, st := range steps {
		frames, useful, done, err := s.Feed(st.event, []byte(st.data))
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, st.data, err)
		}
		got := parseFrames(t, frames, named)
		if len(got) != len(st.want) {
			var raws []string
			for _, g := range got {
				raws = append(raws, g.raw)
			}
			t.Fatalf("step %d (%s): %d frames, want %d:\n%s", i, st.data, len(got), len(st.want), strings.Join(raws, ""))
		}
		for j, w := range st.want {
			_, payload := parseFrame(frames[j])
			jsonEqual(t, payload, w)
			if named && got[j].event != st.events[j] {
				t.Fatalf("step %d frame %d: event %q, want %q", i, j, got[j].event, st.events[j])
			}
		}
		if useful != st.useful || done != st.done {
			t.Fatalf("step %d (%s): useful=%v done=%v, want %v %v", i, st.data, useful, done, st.useful, st.done)
		}
	}
}

const chunkHead = `"id":"msg_1","object":"chat.completion.chunk","created":1700000000,"model":"claude-x"`

func TestAnthropicToChatStream(t *testing.T) {
	s := NewAnthropicToChatStream("")
	s.Now = fixedNow
	steps := []step{
		{event: "message_start", data: `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":12,"cache_read_input_tokens":30,"cache_creation_input_tokens":2,"output_tokens":1}}}`,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`}},
		{event: "ping", data: `{"type":"ping"}`},
		{event: "content_block_start", data: `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`, useful: true},
		{event: "content_block_delta", data: `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`, useful: true,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"logprobs":null,"finish_reason":null}]}`}},
		{event: "content_block_delta", data: `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`, useful: true},
		{event: "content_block_stop", data: `{"type":"content_block_stop","index":0}`},
		{event: "content_block_start", data: `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`, useful: true},
		{event: "content_block_delta", data: `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}`, useful: true,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}]}`}},
		{event: "content_block_delta", data: `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}`, useful: true,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{"content":"lo"},"logprobs":null,"finish_reason":null}]}`}},
		{event: "content_block_stop", data: `{"type":"content_block_stop","index":1}`},
		{event: "content_block_start", data: `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"wx","input":{}}}`, useful: true,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"wx","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`}},
		{event: "content_block_delta", data: `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}`, useful: true,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}]}`}},
		{event: "content_block_delta", data: `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ty\":\"Oslo\"}"}}`, useful: true,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Oslo\"}"}}]},"logprobs":null,"finish_reason":null}]}`}},
		{event: "content_block_stop", data: `{"type":"content_block_stop","index":2}`},
		{event: "content_block_start", data: `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_2","name":"now","input":{}}}`, useful: true,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"toolu_2","type":"function","function":{"name":"now","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`}},
		{event: "content_block_stop", data: `{"type":"content_block_stop","index":3}`},
		{event: "message_delta", data: `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`, useful: true,
			want: []string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`}},
		{event: "message_stop", data: `{"type":"message_stop"}`, done: true,
			want: []string{`{` + chunkHead + `,"choices":[],"usage":{"prompt_tokens":44,"completion_tokens":42,"total_tokens":86,"prompt_tokens_details":{"cached_tokens":30}}}`}},
		{event: "ping", data: `{"type":"ping"}`, done: true},
	}
	runSteps(t, s, steps, false)
	if u := s.Usage(); u != (Usage{PromptTokens: 44, CompletionTokens: 42, CachedTokens: 30, CacheWriteTokens: 2}) {
		t.Fatalf("usage = %+v", u)
	}
}

func TestAnthropicToChatStreamOptions(t *testing.T) {
	s := NewAnthropicToChatStream("alias")
	s.IncludeUsage = false
	s.Now = fixedNow
	head := `"id":"m","object":"chat.completion.chunk","created":1700000000,"model":"alias"`
	runSteps(t, s, []step{
		// The event name is enough when the payload has no type.
		{event: "message_start", data: `{"message":{"id":"m","model":"up","usage":{"input_tokens":1}}}`,
			want: []string{`{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`}},
		// A tool_use whose input arrives whole in content_block_start.
		{data: `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"a":1}}}`, useful: true,
			want: []string{`{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"f","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`}},
		{data: `{"type":"content_block_stop","index":0}`,
			want: []string{`{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]},"logprobs":null,"finish_reason":null}]}`}},
		{data: `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":5}}`, useful: true,
			want: []string{`{` + head + `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}`}},
		{data: `{"type":"message_stop"}`, done: true},
	}, false)
}

func TestAnthropicToChatStreamFailures(t *testing.T) {
	s := NewAnthropicToChatStream("")
	_, _, _, err := s.Feed("error", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	var ue *UpstreamError
	if !errors.As(err, &ue) || ue.Type != "overloaded_error" || ue.Message != "Overloaded" {
		t.Fatalf("err = %v", err)
	}
	if _, _, _, err := s.Feed("", []byte(`{"type":`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	// A message_stop without a stop reason still closes with a finish chunk.
	s = NewAnthropicToChatStream("m")
	s.IncludeUsage = false
	frames, _, done, _ := s.Feed("", []byte(`{"type":"message_stop"}`))
	if !done || len(frames) != 1 || !strings.Contains(string(frames[0]), `"finish_reason":"stop"`) {
		t.Fatalf("frames %q done %v", frames, done)
	}
}

func TestChatToAnthropicStream(t *testing.T) {
	s := NewChatToAnthropicStream("")
	c := func(delta string, finish string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
	}
	steps := []step{
		{data: c(`{"role":"assistant","content":""}`, "null"),
			events: []string{"message_start"},
			want:   []string{`{"type":"message_start","message":{"id":"msg_chatcmpl-1","type":"message","role":"assistant","model":"gpt-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`}},
		{data: c(`{"reasoning_content":"think"}`, "null"), useful: true,
			events: []string{"content_block_start", "content_block_delta"},
			want: []string{`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think"}}`}},
		{data: c(`{"content":"Hel"}`, "null"), useful: true,
			events: []string{"content_block_stop", "content_block_start", "content_block_delta"},
			want: []string{`{"type":"content_block_stop","index":0}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}`}},
		{data: c(`{"content":"lo"}`, "null"), useful: true,
			events: []string{"content_block_delta"},
			want:   []string{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}`}},
		{data: c(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"wx","arguments":""}}]}`, "null"), useful: true,
			events: []string{"content_block_stop", "content_block_start"},
			want: []string{`{"type":"content_block_stop","index":1}`,
				`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_1","name":"wx","input":{}}}`}},
		{data: c(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\""}}]}`, "null"), useful: true,
			events: []string{"content_block_delta"},
			want:   []string{`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\""}}`}},
		{data: c(`{"tool_calls":[{"index":0,"function":{"arguments":":\"Oslo\"}"}}]}`, "null"), useful: true,
			events: []string{"content_block_delta"},
			want:   []string{`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":":\"Oslo\"}"}}`}},
		{data: c(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]}`, "null"), useful: true,
			events: []string{"content_block_stop", "content_block_start", "content_block_delta"},
			want: []string{`{"type":"content_block_stop","index":2}`,
				`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"call_2","name":"now","input":{}}}`,
				`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{}"}}`}},
		{data: c(`{}`, `"tool_calls"`), useful: true,
			events: []string{"content_block_stop"},
			want:   []string{`{"type":"content_block_stop","index":3}`}},
		{data: `{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":40}}}`, done: true,
			events: []string{"message_delta", "message_stop"},
			want: []string{`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":60,"output_tokens":9,"cache_read_input_tokens":40}}`,
				`{"type":"message_stop"}`}},
		{data: `[DONE]`, done: true},
	}
	runSteps(t, s, steps, true)
	if u := s.Usage(); u.PromptTokens != 100 || u.CachedTokens != 40 || u.CompletionTokens != 9 {
		t.Fatalf("usage = %+v", u)
	}
}

func TestChatToAnthropicStreamDoneWithoutUsage(t *testing.T) {
	s := NewChatToAnthropicStream("alias")
	runSteps(t, s, []step{
		{data: `{"id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`, useful: true,
			events: []string{"message_start", "content_block_start", "content_block_delta"},
			want: []string{`{"type":"message_start","message":{"id":"msg_c","type":"message","role":"assistant","model":"alias","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`}},
		{data: `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`, useful: true,
			events: []string{"content_block_stop"}, want: []string{`{"type":"content_block_stop","index":0}`}},
		{data: `[DONE]`, done: true, events: []string{"message_delta", "message_stop"},
			want: []string{`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":0,"output_tokens":0}}`,
				`{"type":"message_stop"}`}},
	}, true)
}

// TestChatToAnthropicStreamUsageOnFinishChunk: upstreams that attach usage
// to the finish chunk end the message at once.
func TestChatToAnthropicStreamUsageOnFinishChunk(t *testing.T) {
	s := NewChatToAnthropicStream("m")
	frames, useful, done, err := s.Feed("", []byte(`{"id":"g","choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}},{"id":"b","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`))
	if err != nil || !useful || !done {
		t.Fatalf("useful %v done %v err %v", useful, done, err)
	}
	var evs []string
	for _, f := range parseFrames(t, frames, true) {
		evs = append(evs, f.event)
	}
	want := "message_start content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(evs, " ") != want {
		t.Fatalf("events %v\nwant %s", evs, want)
	}
}

func TestChatStreamIncompleteAndErrors(t *testing.T) {
	for _, s := range []Stream{NewChatToAnthropicStream("m"), NewChatToResponsesStream("m", "req_1")} {
		if _, _, _, err := s.Feed("", []byte(`{"id":"c","choices":[{"index":0,"delta":{"content":"x"}}]}`)); err != nil {
			t.Fatal(err)
		}
		if _, _, done, err := s.Feed("", []byte(`[DONE]`)); !errors.Is(err, ErrIncomplete) || done {
			t.Fatalf("[DONE] without finish: done %v err %v", done, err)
		}
		_, _, _, err := s.Feed("", []byte(`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`))
		var ue *UpstreamError
		if !errors.As(err, &ue) || ue.Code != "insufficient_quota" {
			t.Fatalf("err = %v", err)
		}
		if _, _, _, err := s.Feed("", []byte(`{{`)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestChatUsefulness(t *testing.T) {
	tests := []struct {
		chunk  string
		useful bool
	}{
		{`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant"}}]}`, false},
		{`{"id":"c","choices":[{"index":0,"delta":{"content":""}}]}`, false},
		{`{"id":"c","choices":[{"index":0,"delta":{"content":"a"}}]}`, true},
		{`{"id":"c","choices":[{"index":0,"delta":{"reasoning":"r"}}]}`, true},
		{`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f"}}]}}]}`, true},
		{`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, true},
	}
	for _, tc := range tests {
		for _, s := range []Stream{NewChatToAnthropicStream("m"), NewChatToResponsesStream("m", "")} {
			_, useful, _, err := s.Feed("", []byte(tc.chunk))
			if err != nil || useful != tc.useful {
				t.Errorf("%T %s: useful %v err %v, want %v", s, tc.chunk, useful, err, tc.useful)
			}
		}
	}
}

func TestChatToResponsesStream(t *testing.T) {
	s := NewChatToResponsesStream("", "req_01ABC")
	s.Now = fixedNow
	c := func(delta string, finish string) string {
		return `{"id":"chatcmpl-9","model":"gpt-x","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
	}
	resp := func(status, output, usage string) string {
		return `{"id":"resp_01ABC","object":"response","created_at":1700000000,"status":"` + status + `","background":false,"error":null,"incomplete_details":null,"model":"gpt-x","output":` + output + `,"usage":` + usage + `}`
	}
	msgDone := `{"id":"msg_01ABC","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello","annotations":[]}]}`
	fcDone := `{"id":"fc_01ABC_0","type":"function_call","status":"completed","arguments":"{\"c\":1}","call_id":"call_1","name":"wx"}`
	steps := []step{
		{data: c(`{"role":"assistant"}`, "null"),
			events: []string{"response.created", "response.in_progress"},
			want: []string{`{"type":"response.created","sequence_number":0,"response":` + resp("in_progress", "[]", "null") + `}`,
				`{"type":"response.in_progress","sequence_number":1,"response":` + resp("in_progress", "[]", "null") + `}`}},
		{data: c(`{"reasoning_content":"hidden"}`, "null"), useful: true},
		{data: c(`{"content":"Hel"}`, "null"), useful: true,
			events: []string{"response.output_item.added", "response.content_part.added", "response.output_text.delta"},
			want: []string{`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_01ABC","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
				`{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_01ABC","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
				`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_01ABC","output_index":0,"content_index":0,"delta":"Hel","logprobs":[]}`}},
		{data: c(`{"content":"lo"}`, "null"), useful: true,
			events: []string{"response.output_text.delta"},
			want:   []string{`{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_01ABC","output_index":0,"content_index":0,"delta":"lo","logprobs":[]}`}},
		{data: c(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"wx","arguments":""}}]}`, "null"), useful: true,
			events: []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.output_item.added"},
			want: []string{`{"type":"response.output_text.done","sequence_number":6,"item_id":"msg_01ABC","output_index":0,"content_index":0,"text":"Hello","logprobs":[]}`,
				`{"type":"response.content_part.done","sequence_number":7,"item_id":"msg_01ABC","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Hello","annotations":[]}}`,
				`{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":` + msgDone + `}`,
				`{"type":"response.output_item.added","sequence_number":9,"output_index":1,"item":{"id":"fc_01ABC_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"wx"}}`}},
		{data: c(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"c\""}}]}`, "null"), useful: true,
			events: []string{"response.function_call_arguments.delta"},
			want:   []string{`{"type":"response.function_call_arguments.delta","sequence_number":10,"item_id":"fc_01ABC_0","output_index":1,"delta":"{\"c\""}`}},
		{data: c(`{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}`, "null"), useful: true,
			events: []string{"response.function_call_arguments.delta"},
			want:   []string{`{"type":"response.function_call_arguments.delta","sequence_number":11,"item_id":"fc_01ABC_0","output_index":1,"delta":":1}"}`}},
		{data: c(`{}`, `"tool_calls"`), useful: true,
			events: []string{"response.function_call_arguments.done", "response.output_item.done"},
			want: []string{`{"type":"response.function_call_arguments.done","sequence_number":12,"item_id":"fc_01ABC_0","output_index":1,"name":"wx","arguments":"{\"c\":1}"}`,
				`{"type":"response.output_item.done","sequence_number":13,"output_index":1,"item":` + fcDone + `}`}},
		{data: `{"id":"chatcmpl-9","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":6,"prompt_tokens_details":{"cached_tokens":5},"completion_tokens_details":{"reasoning_tokens":2}}}`, done: true,
			events: []string{"response.completed"},
			want: []string{`{"type":"response.completed","sequence_number":14,"response":` + resp("completed", `[`+msgDone+`,`+fcDone+`]`,
				`{"input_tokens":20,"input_tokens_details":{"cached_tokens":5},"output_tokens":6,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":26}`) + `}`}},
		{data: `[DONE]`, done: true},
	}
	runSteps(t, s, steps, true)
}

func TestChatToResponsesStreamIncomplete(t *testing.T) {
	s := NewChatToResponsesStream("m", "req_Z")
	s.Feed("", []byte(`{"id":"c","choices":[{"index":0,"delta":{"content":"cut"},"finish_reason":null}]}`))
	s.Feed("", []byte(`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`))
	frames, _, done, err := s.Feed("", []byte(`[DONE]`))
	if err != nil || !done || len(frames) != 1 {
		t.Fatalf("frames %q done %v err %v", frames, done, err)
	}
	f := parseFrames(t, frames, true)[0]
	if f.event != "response.incomplete" {
		t.Fatalf("event %s", f.event)
	}
	r := f.data["response"].(map[string]any)
	if r["status"] != "incomplete" || r["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Fatalf("response %v", r)
	}
}

func TestErrorFrames(t *testing.T) {
	chat := NewAnthropicToChatStream("m").ErrorFrame("upstream_error", "Upstream cut the stream.", "server_error")
	if string(chat) != `data: {"error":{"message":"Upstream cut the stream.","type":"server_error","code":"upstream_error","param":null}}`+"\n\n" {
		t.Fatalf("chat error frame %q", chat)
	}
	anth := NewChatToAnthropicStream("m").ErrorFrame("upstream_timeout", "Too slow.", "timeout_error")
	if string(anth) != "event: error\n"+`data: {"type":"error","error":{"type":"timeout_error","message":"Too slow.","code":"upstream_timeout"}}`+"\n\n" {
		t.Fatalf("anthropic error frame %q", anth)
	}
	rs := NewChatToResponsesStream("m", "req_Q")
	rs.Now = fixedNow
	rs.Feed("", []byte(`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"par"}}]}`))
	f := parseFrames(t, [][]byte{rs.ErrorFrame("STREAM_THROUGHPUT_TOO_LOW", "Too slow.", "server_error")}, true)[0]
	jsonEqual(t, mustJSON(f.data), `{"type":"response.failed","sequence_number":5,"response":{"id":"resp_Q","object":"response",
		"created_at":1700000000,"status":"failed","background":false,"error":{"code":"STREAM_THROUGHPUT_TOO_LOW","message":"Too slow."},
		"incomplete_details":null,"model":"m","output":[{"id":"msg_Q","type":"message","status":"in_progress","role":"assistant",
		"content":[{"type":"output_text","text":"par","annotations":[]}]}],"usage":null}}`)
	// Before any upstream event (keepalive commit, routing exhausted).
	f = parseFrames(t, [][]byte{NewChatToResponsesStream("m", "req_R").ErrorFrame("all_targets_cooling_down", "Wait.", "")}, true)[0]
	if f.data["sequence_number"] != 0.0 || f.data["response"].(map[string]any)["id"] != "resp_R" {
		t.Fatalf("early failure %v", f.data)
	}
}

// TestComposeAnthropicToResponses: Anthropic events → chat → Responses.
func TestComposeAnthropicToResponses(t *testing.T) {
	s := Compose(NewAnthropicToChatStream("claude"), NewChatToResponsesStream("claude", "req_C"))
	events := []struct {
		data         string
		useful, done bool
		wantEvents   string
	}{
		{`{"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":7}}}`, false, false, "response.created response.in_progress"},
		{`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, true, false, ""},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, true, false,
			"response.output_item.added response.content_part.added response.output_text.delta"},
		{`{"type":"content_block_stop","index":0}`, false, false, ""},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`, true, false,
			"response.output_text.done response.content_part.done response.output_item.done"},
		{`{"type":"message_stop"}`, false, true, "response.completed"},
	}
	for i, e := range events {
		frames, useful, done, err := s.Feed("", []byte(e.data))
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		var names []string
		for _, f := range parseFrames(t, frames, true) {
			names = append(names, f.event)
		}
		if strings.Join(names, " ") != e.wantEvents || useful != e.useful || done != e.done {
			t.Fatalf("event %d: %v useful %v done %v; want %q %v %v", i, names, useful, done, e.wantEvents, e.useful, e.done)
		}
		if done {
			r := parseFrames(t, frames, true)[0].data["response"].(map[string]any)
			u := r["usage"].(map[string]any)
			if u["input_tokens"] != 7.0 || u["output_tokens"] != 3.0 {
				t.Fatalf("usage %v", u)
			}
		}
	}
	if u := s.Usage(); u.PromptTokens != 7 || u.CompletionTokens != 3 {
		t.Fatalf("usage = %+v", u)
	}
}

func TestWantsUsageChunk(t *testing.T) {
	for in, want := range map[string]bool{
		`{}`:                      false,
		`{"stream_options":null}`: false,
		`{"stream_options":{"include_usage":false}}`: false,
		`{"stream_options":{"include_usage":true}}`:  true,
	} {
		if got := WantsUsageChunk(body(t, in)); got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}

func TestNoHTMLEscaping(t *testing.T) {
	s := NewChatToAnthropicStream("m")
	frames, _, _, err := s.Feed("", []byte(`{"id":"c","choices":[{"index":0,"delta":{"content":"a && b < c"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if last := string(frames[len(frames)-1]); !strings.Contains(last, `"a && b < c"`) {
		t.Fatalf("frame %q", last)
	}
	out, _, err := ChatToAnthropic(body(t, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","description":"<b>&</b>","parameters":{"type":"object","description":"<i>"}}}]}`), "c", 0)
	if err != nil || strings.Contains(string(out), `\u003c`) {
		t.Fatalf("out %s err %v", out, err)
	}
}
