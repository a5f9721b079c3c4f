package translate

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Unix(1700000000, 0)

func TestAnthropicToChatResponse(t *testing.T) {
	up := `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4",
		"content":[{"type":"thinking","thinking":"let me see","signature":"abc"},{"type":"text","text":"Hello "},
			{"type":"text","text":"world"},{"type":"tool_use","id":"toolu_9","name":"wx","input":{"city":"Oslo"}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output_tokens":7}}`
	out, u, warns, err := AnthropicToChatResponseWith([]byte(up), ResponseOptions{Created: t0})
	if err != nil || warns != nil {
		t.Fatalf("err %v warns %v", err, warns)
	}
	jsonEqual(t, out, `{"id":"msg_01","object":"chat.completion","created":1700000000,"model":"claude-sonnet-4",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Hello world","reasoning_content":"let me see",
			"tool_calls":[{"id":"toolu_9","type":"function","function":{"name":"wx","arguments":"{\"city\":\"Oslo\"}"}}]},
			"logprobs":null,"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":105,"completion_tokens":7,"total_tokens":112,"prompt_tokens_details":{"cached_tokens":90}}}`)
	if u != (Usage{PromptTokens: 105, CompletionTokens: 7, CachedTokens: 90, CacheWriteTokens: 5}) {
		t.Fatalf("usage = %+v", u)
	}
}

// TestAcceptanceCase10 is 10-gateway-api §12 case 10.
func TestAcceptanceCase10(t *testing.T) {
	up := `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"hi"}],
		"stop_reason":"end_turn","usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":5}}`
	out, _, err := AnthropicToChatResponse([]byte(up), "")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, mustJSON(path(t, out, "usage")), `{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"prompt_tokens_details":{"cached_tokens":90}}`)
}

func TestAnthropicToChatResponseContentNullOnlyWithToolCalls(t *testing.T) {
	up := `{"id":"m","type":"message","content":[{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"tool_use","usage":{}}`
	out, _, err := AnthropicToChatResponse([]byte(up), "alias")
	if err != nil {
		t.Fatal(err)
	}
	if c := path(t, out, "choices", 0, "message", "content"); c != nil {
		t.Fatalf("content = %v, want null", c)
	}
	if m := path(t, out, "model"); m != "alias" {
		t.Fatalf("model = %v, want the requested alias", m)
	}
	up = `{"id":"m","type":"message","content":[],"stop_reason":"end_turn","usage":{}}`
	out, _, _ = AnthropicToChatResponse([]byte(up), "")
	if c := path(t, out, "choices", 0, "message", "content"); c != "" {
		t.Fatalf("content = %v, want empty string", c)
	}
}

func TestStopReasonTable(t *testing.T) {
	a2c := map[string]string{"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "something_new": "stop",
		"max_tokens": "length", "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}
	for stop, want := range a2c {
		up := `{"id":"m","type":"message","content":[{"type":"text","text":"x"}],"stop_reason":"` + stop + `","usage":{}}`
		out, _, err := AnthropicToChatResponse([]byte(up), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := path(t, out, "choices", 0, "finish_reason"); got != want {
			t.Errorf("%s → %v, want %s", stop, got, want)
		}
	}
	c2a := map[string]string{"stop": "end_turn", "null": "end_turn", "other": "end_turn", "length": "max_tokens",
		"tool_calls": "tool_use", "function_call": "tool_use", "content_filter": "refusal"}
	for finish, want := range c2a {
		fr := `"` + finish + `"`
		if finish == "null" {
			fr = "null"
		}
		up := `{"id":"c","model":"g","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":` + fr + `}]}`
		out, _, err := ChatToAnthropicResponse([]byte(up), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := path(t, out, "stop_reason"); got != want {
			t.Errorf("%s → %v, want %s", finish, got, want)
		}
		if got := path(t, out, "stop_sequence"); got != nil {
			t.Errorf("stop_sequence = %v, want null", got)
		}
	}
}

func TestChatToAnthropicResponse(t *testing.T) {
	up := `{"id":"chatcmpl-7","object":"chat.completion","created":1,"model":"gpt-4o",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Sure.","reasoning_content":"think",
			"tool_calls":[{"id":"call_1","type":"function","function":{"name":"wx","arguments":"{\"city\":\"Oslo\"}"}},
				{"id":"call_2","type":"function","function":{"name":"bad","arguments":"oops"}}]},"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,
			"prompt_tokens_details":{"cached_tokens":60},"completion_tokens_details":{"reasoning_tokens":8}}}`
	out, u, warns, err := ChatToAnthropicResponseWith([]byte(up), ResponseOptions{Model: "my-alias"})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"msg_chatcmpl-7","type":"message","role":"assistant","model":"my-alias",
		"content":[{"type":"thinking","thinking":"think","signature":""},{"type":"text","text":"Sure."},
			{"type":"tool_use","id":"call_1","name":"wx","input":{"city":"Oslo"}},
			{"type":"tool_use","id":"call_2","name":"bad","input":{}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":40,"output_tokens":20,"cache_read_input_tokens":60,"cache_creation_input_tokens":0}}`)
	wantCodes(t, warns, "tool_args_repaired")
	if u != (Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 60, ReasoningTokens: 8}) {
		t.Fatalf("usage = %+v", u)
	}
}

func TestUpstreamErrorBodies(t *testing.T) {
	_, _, err := AnthropicToChatResponse([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`), "")
	var ue *UpstreamError
	if !errors.As(err, &ue) || ue.Type != "overloaded_error" || ue.Message != "busy" {
		t.Fatalf("err = %v", err)
	}
	_, _, err = ChatToAnthropicResponse([]byte(`{"error":{"message":"nope","type":"server_error","code":"x_1"}}`), "")
	if !errors.As(err, &ue) || ue.Code != "x_1" {
		t.Fatalf("err = %v", err)
	}
	for _, b := range []string{`[]`, `{"choices":[]}`, `not json`} {
		if _, _, err := ChatToResponsesResponse([]byte(b), "", nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", b, err)
		}
	}
}

// TestChatToResponsesResponse is the §6.7 synthesis of a non-stream object.
func TestChatToResponsesResponse(t *testing.T) {
	up := `{"id":"chatcmpl-abc","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Here.",
			"reasoning_content":"hidden","tool_calls":[{"id":"call_1","type":"function","function":{"name":"wx","arguments":"{\"c\":1}"}}]},
			"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":50,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":20},"completion_tokens_details":{"reasoning_tokens":4}}}`
	out, u, _, err := ChatToResponsesResponseWith([]byte(up), ResponseOptions{RequestID: "req_01HZX", Created: t0})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"resp_01HZX","object":"response","created_at":1700000000,"status":"completed","background":false,
		"error":null,"incomplete_details":null,"model":"gpt-4o","output":[
			{"id":"msg_01HZX","type":"message","status":"completed","role":"assistant",
				"content":[{"type":"output_text","text":"Here.","annotations":[]}]},
			{"id":"fc_01HZX_0","type":"function_call","status":"completed","arguments":"{\"c\":1}","call_id":"call_1","name":"wx"}],
		"usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":20},"output_tokens":10,
			"output_tokens_details":{"reasoning_tokens":4},"total_tokens":60}}`)
	if u.ReasoningTokens != 4 || u.CachedTokens != 20 {
		t.Fatalf("usage = %+v", u)
	}
}

func TestChatToResponsesResponseIncomplete(t *testing.T) {
	for finish, reason := range map[string]string{"length": "max_output_tokens", "content_filter": "content_filter"} {
		up := `{"id":"chatcmpl-1","model":"g","choices":[{"index":0,"message":{"content":"partial"},"finish_reason":"` + finish + `"}]}`
		out, _, err := ChatToResponsesResponse([]byte(up), "alias", []Warning{{Code: "background_mode_degraded", Message: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		if s := path(t, out, "status"); s != "incomplete" {
			t.Fatalf("status = %v", s)
		}
		if r := path(t, out, "incomplete_details", "reason"); r != reason {
			t.Fatalf("reason = %v, want %s", r, reason)
		}
		if id := path(t, out, "id"); id != "resp_1" {
			t.Fatalf("id = %v, want resp_ + upstream suffix", id)
		}
		if b := path(t, out, "background"); b != false {
			t.Fatalf("background = %v", b)
		}
		if m := path(t, out, "model"); m != "alias" {
			t.Fatalf("model = %v", m)
		}
	}
}

// TestResponsesNoTextNoMessageItem: a pure tool call has no message item.
func TestResponsesNoTextNoMessageItem(t *testing.T) {
	up := `{"id":"c","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"k","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	out, _, err := ChatToResponsesResponse([]byte(up), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if typ := path(t, out, "output", 0, "type"); typ != "function_call" {
		t.Fatalf("output[0].type = %v", typ)
	}
}
