package translate

import (
	"errors"
	"testing"
)

// TestAnthropicToChatTable walks the rows of 10-gateway-api §6.3.
func TestAnthropicToChatTable(t *testing.T) {
	tests := []struct {
		name  string
		flags Flags
		in    string
		want  string
		warns []string
	}{
		{
			name: "system blocks, text and images, tool results before the rest of the turn",
			in: `{"model":"m","max_tokens":100,"system":[{"type":"text","text":"S1"},{"type":"text","text":"S2","cache_control":{"type":"ephemeral"}}],
				"messages":[
				{"role":"user","content":[{"type":"text","text":"see"},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}},
					{"type":"image","source":{"type":"url","url":"https://e.com/a.png"}}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"calling"},
					{"type":"tool_use","id":"toolu_1","name":"wx","input":{"city":"Oslo"}}]},
				{"role":"user","content":[{"type":"text","text":"and?"},
					{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"rain"},{"type":"text","text":"cold"}]}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"wx","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":"boom"}]}]}`,
			want: `{"model":"gpt","max_tokens":100,"messages":[
				{"role":"system","content":"S1\n\nS2"},
				{"role":"user","content":[{"type":"text","text":"see"},
					{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR"}},
					{"type":"image_url","image_url":{"url":"https://e.com/a.png"}}]},
				{"role":"assistant","content":"calling","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"wx","arguments":"{\"city\":\"Oslo\"}"}}]},
				{"role":"tool","tool_call_id":"toolu_1","content":"rain\n\ncold"},
				{"role":"user","content":"and?"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_2","type":"function","function":{"name":"wx","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"toolu_2","content":"Error: boom"}]}`,
			warns: []string{"content_dropped:thinking"},
		},
		{
			name: "documents and images inside tool results dropped",
			in: `{"max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"document","source":{"type":"text","data":"x"}},
				{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"A"}},{"type":"text","text":"ok"}]}]}]}`,
			want:  `{"model":"gpt","max_tokens":10,"messages":[{"role":"tool","tool_call_id":"t","content":"ok"}]}`,
			warns: []string{"content_dropped:document", "content_dropped:image_in_tool_result"},
		},
		{
			name: "custom tools kept, server tools dropped, tool_choice any, parallel off",
			in: `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[
				{"name":"wx","description":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
				{"type":"custom","name":"t2","input_schema":{"type":"object"}},
				{"type":"web_search_20250305","name":"web_search"}],
				"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			want: `{"model":"gpt","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[
				{"type":"function","function":{"name":"wx","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
				{"type":"function","function":{"name":"t2","parameters":{"type":"object"}}}],
				"tool_choice":"required","parallel_tool_calls":false}`,
			warns: []string{"param_dropped:tools.web_search_20250305"},
		},
		{
			name: "stop_sequences beyond 4, sampling, top_k, metadata, stream",
			in: `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["a","b","c","d","e"],
				"temperature":0.2,"top_p":0.8,"top_k":40,"metadata":{"user_id":"u-9"},"stream":true}`,
			want: `{"model":"gpt","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d"],
				"temperature":0.2,"top_p":0.8,"user":"u-9","stream":true,"stream_options":{"include_usage":true}}`,
			warns: []string{"param_dropped:stop_sequences", "param_dropped:top_k"},
		},
		{
			name:  "thinking without the reasoningEffort flag dropped",
			in:    `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":4000}}`,
			want:  `{"model":"gpt","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			warns: []string{"param_dropped:thinking"},
		},
		{
			name:  "flags: max_completion_tokens and thinking as reasoning_effort",
			flags: Flags{MaxCompletionTokens: true, ReasoningEffort: true},
			in:    `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":4000}}`,
			want:  `{"model":"gpt","max_completion_tokens":10,"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"medium"}`,
		},
		{
			name:  "unknown Anthropic fields named",
			in:    `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"service_tier":"auto","container":"c"}`,
			want:  `{"model":"gpt","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			warns: []string{"param_dropped:container", "param_dropped:service_tier"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, warns, err := AnthropicToChatWith(body(t, tc.in), "gpt", tc.flags)
			if err != nil {
				t.Fatalf("AnthropicToChat: %v", err)
			}
			jsonEqual(t, out, tc.want)
			wantCodes(t, warns, tc.warns...)
		})
	}
}

func TestAnthropicToChatToolChoiceRows(t *testing.T) {
	tests := map[string]string{
		`{"type":"auto"}`:             `"auto"`,
		`{"type":"any"}`:              `"required"`,
		`{"type":"none"}`:             `"none"`,
		`{"type":"tool","name":"wx"}`: `{"type":"function","function":{"name":"wx"}}`,
	}
	for in, want := range tests {
		b := `{"max_tokens":1,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"wx","input_schema":{"type":"object"}}],"tool_choice":` + in + `}`
		out, _, err := AnthropicToChat(body(t, b), "gpt")
		if err != nil {
			t.Fatal(err)
		}
		jsonEqual(t, mustJSON(path(t, out, "tool_choice")), want)
	}
}

func TestThinkingBudgetToEffort(t *testing.T) {
	for budget, want := range map[int]string{1024: "low", 2047: "low", 2048: "medium", 8191: "medium", 8192: "high", 32000: "high"} {
		b := body(t, `{"max_tokens":64000,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":`+itoaTest(budget)+`}}`)
		out, warns, err := AnthropicToChatWith(b, "gpt", Flags{ReasoningEffort: true})
		if err != nil || len(warns) != 0 {
			t.Fatalf("err %v warns %v", err, warns)
		}
		if got := path(t, out, "reasoning_effort"); got != want {
			t.Errorf("budget %d → %v, want %s", budget, got, want)
		}
	}
}

func itoaTest(n int) string { return string(mustJSON(n)) }

// TestResponsesToChatTable walks 10-gateway-api §6.4.
func TestResponsesToChatTable(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  string
		warns []string
	}{
		{
			name: "instructions and string input",
			in:   `{"model":"x","instructions":"Be brief.","input":"hello","max_output_tokens":50,"stream":true,"background":true,"store":false}`,
			want: `{"model":"gpt","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hello"}],
				"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "items: messages, function calls merged, outputs, reasoning, images, files",
			in: `{"input":[
				{"role":"developer","content":"rules"},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},
					{"type":"input_image","image_url":"data:image/png;base64,AAA","detail":"low"},
					{"type":"input_image","file_id":"file-1"},{"type":"input_file","file_id":"file-2"}]},
				{"type":"reasoning","id":"rs_1","summary":[]},
				{"type":"message","role":"assistant","content":[{"type":"output_text","text":"calling"}]},
				{"type":"function_call","id":"fc_1","call_id":"call_a","name":"wx","arguments":"{\"c\":1}"},
				{"type":"function_call","id":"fc_2","call_id":"call_b","name":"wx","arguments":"{\"c\":2}"},
				{"type":"function_call_output","call_id":"call_a","output":"rain"},
				{"type":"function_call_output","call_id":"call_b","output":[{"type":"input_text","text":"sun"}]},
				{"type":"item_reference","id":"x"}]}`,
			want: `{"model":"gpt","messages":[
				{"role":"developer","content":"rules"},
				{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA","detail":"low"}}]},
				{"role":"assistant","content":"calling","tool_calls":[
					{"id":"call_a","type":"function","function":{"name":"wx","arguments":"{\"c\":1}"}},
					{"id":"call_b","type":"function","function":{"name":"wx","arguments":"{\"c\":2}"}}]},
				{"role":"tool","tool_call_id":"call_a","content":"rain"},
				{"role":"tool","tool_call_id":"call_b","content":"sun"}]}`,
			warns: []string{"content_dropped:input_image", "content_dropped:input_file", "content_dropped:item_reference"},
		},
		{
			name: "function_call without a preceding assistant message",
			in: `{"input":[{"role":"user","content":"go"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			want: `{"model":"gpt","messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
		},
		{
			name: "tools, tool_choice, text.format, reasoning and carried fields",
			in: `{"input":"x","tools":[{"type":"function","name":"wx","description":"d","parameters":{"type":"object"},"strict":true},
				{"type":"web_search"}],"tool_choice":{"type":"function","name":"wx"},
				"text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true}},
				"reasoning":{"effort":"high"},"temperature":0.1,"top_p":0.5,"parallel_tool_calls":false,"user":"u",
				"prompt_cache_key":"pk","include":["reasoning.encrypted_content"],"truncation":"auto","service_tier":"auto","metadata":{"a":"b"}}`,
			want: `{"model":"gpt","messages":[{"role":"user","content":"x"}],
				"tools":[{"type":"function","function":{"name":"wx","description":"d","parameters":{"type":"object"},"strict":true}}],
				"tool_choice":{"type":"function","function":{"name":"wx"}},
				"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":true}},
				"reasoning_effort":"high","temperature":0.1,"top_p":0.5,"parallel_tool_calls":false,"user":"u","prompt_cache_key":"pk"}`,
			warns: []string{"param_dropped:tools.web_search"},
		},
		{
			name: "json_object format, string tool_choice, unknown fields",
			in:   `{"input":"x","text":{"format":{"type":"json_object"}},"tool_choice":"auto","max_tool_calls":3,"reasoning":{"effort":"low","summary":"auto"}}`,
			want: `{"model":"gpt","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},
				"tool_choice":"auto","reasoning_effort":"low"}`,
			warns: []string{"param_dropped:reasoning.summary", "param_dropped:max_tool_calls"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, warns, err := ResponsesToChat(body(t, tc.in), "gpt")
			if err != nil {
				t.Fatalf("ResponsesToChat: %v", err)
			}
			jsonEqual(t, out, tc.want)
			wantCodes(t, warns, tc.warns...)
		})
	}
}

func TestResponsesToChatMaxCompletionTokensFlag(t *testing.T) {
	out, _, err := ResponsesToChatWith(body(t, `{"input":"x","max_output_tokens":9}`), "gpt", Flags{MaxCompletionTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"model":"gpt","messages":[{"role":"user","content":"x"}],"max_completion_tokens":9}`)
}

func TestResponsesToChatPreviousResponseUnsupported(t *testing.T) {
	_, _, err := ResponsesToChat(body(t, `{"input":"x","previous_response_id":"resp_1"}`), "gpt")
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Param != "previous_response_id" {
		t.Fatalf("err = %v, want *UnsupportedError", err)
	}
}
