package translate

import (
	"errors"
	"testing"
)

// TestChatToAnthropicTable walks the rows of 10-gateway-api §6.2, each with
// the complete expected upstream body.
func TestChatToAnthropicTable(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  string
		warns []string
	}{
		{
			name: "system and developer joined wherever they appear, same-role turns merged",
			in: `{"model":"x","messages":[{"role":"system","content":"A"},{"role":"user","content":"hi"},
				{"role":"developer","content":[{"type":"text","text":"B"}]},{"role":"user","content":"there"}]}`,
			want: `{"model":"claude","system":"A\n\nB","max_tokens":4096,"messages":[
				{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"there"}]}]}`,
		},
		{
			name: "images: data URL, http URL, unsupported mime; audio and file parts dropped",
			in: `{"messages":[{"role":"user","content":[
				{"type":"text","text":"look"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR","detail":"high"}},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}},
				{"type":"image_url","image_url":{"url":"data:image/bmp;base64,Qk0"}},
				{"type":"input_audio","input_audio":{"data":"AAA","format":"wav"}},
				{"type":"file","file":{"file_id":"f1"}}]}]}`,
			want: `{"model":"claude","max_tokens":4096,"messages":[{"role":"user","content":[
				{"type":"text","text":"look"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}},
				{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}]}]}`,
			warns: []string{"content_dropped:image", "content_dropped:input_audio", "content_dropped:file"},
		},
		{
			name: "assistant content and tool_calls, tool results first in the next user turn",
			in: `{"messages":[{"role":"user","content":"weather?"},
				{"role":"assistant","content":"checking","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"wx","arguments":"{\"city\": \"Oslo\"}"}},
					{"id":"call_2","type":"function","function":{"name":"wx","arguments":"{\"city\":\"Rome\"}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"rain"},
				{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"sun"}]},
				{"role":"user","content":"thanks"}]}`,
			want: `{"model":"claude","max_tokens":4096,"messages":[
				{"role":"user","content":[{"type":"text","text":"weather?"}]},
				{"role":"assistant","content":[{"type":"text","text":"checking"},
					{"type":"tool_use","id":"call_1","name":"wx","input":{"city":"Oslo"}},
					{"type":"tool_use","id":"call_2","name":"wx","input":{"city":"Rome"}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"call_1","content":"rain"},
					{"type":"tool_result","tool_use_id":"call_2","content":"sun"},
					{"type":"text","text":"thanks"}]}]}`,
		},
		{
			name: "unparseable or non-object arguments repaired to {}",
			in: `{"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[
				{"id":"a","type":"function","function":{"name":"f","arguments":"{not json"}},
				{"id":"b","type":"function","function":{"name":"g","arguments":"[1,2]"}},
				{"id":"c","type":"function","function":{"name":"h","arguments":""}}]},
				{"role":"tool","tool_call_id":"a","content":"1"},{"role":"tool","tool_call_id":"b","content":"2"},
				{"role":"tool","tool_call_id":"c","content":"3"}]}`,
			want: `{"model":"claude","max_tokens":4096,"messages":[
				{"role":"user","content":[{"type":"text","text":"go"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},
					{"type":"tool_use","id":"b","name":"g","input":{}},{"type":"tool_use","id":"c","name":"h","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"1"},
					{"type":"tool_result","tool_use_id":"b","content":"2"},{"type":"tool_result","tool_use_id":"c","content":"3"}]}]}`,
			warns: []string{"tool_args_repaired"},
		},
		{
			name: "orphan tool result dropped; tool_use without result gets an empty one",
			in: `{"messages":[{"role":"user","content":"go"},
				{"role":"tool","tool_call_id":"nobody","content":"stray"},
				{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			want: `{"model":"claude","max_tokens":4096,"messages":[
				{"role":"user","content":[{"type":"text","text":"go"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":""}]}]}`,
			warns: []string{"content_dropped:orphan_tool_result"},
		},
		{
			name: "invalid id characters become _ on both sides",
			in: `{"messages":[{"role":"user","content":"go"},
				{"role":"assistant","tool_calls":[{"id":"call.1:ü","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call.1:ü","content":"ok"}]}`,
			want: `{"model":"claude","max_tokens":4096,"messages":[
				{"role":"user","content":[{"type":"text","text":"go"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"call_1__","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1__","content":"ok"}]}]}`,
		},
		{
			name: "tools, missing parameters, tool_choice required, parallel off",
			in: `{"messages":[{"role":"user","content":"go"}],"tools":[
				{"type":"function","function":{"name":"wx","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
				{"type":"function","function":{"name":"now"}},
				{"type":"function","function":{"name":"empty","parameters":{}}}],
				"tool_choice":"required","parallel_tool_calls":false}`,
			want: `{"model":"claude","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}],
				"tools":[{"name":"wx","description":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
					{"name":"now","input_schema":{"type":"object","properties":{}}},
					{"name":"empty","input_schema":{"type":"object"}}],
				"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
		},
		{
			name: "sampling, stop string, user, max_completion_tokens over max_tokens, stream",
			in: `{"messages":[{"role":"user","content":"go"}],"temperature":0.3,"top_p":0.9,"stop":"END",
				"user":"u-1","max_tokens":100,"max_completion_tokens":200,"stream":true,"stream_options":{"include_usage":true},
				"prompt_cache_key":"k"}`,
			want: `{"model":"claude","max_tokens":200,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}],
				"temperature":0.3,"top_p":0.9,"stop_sequences":["END"],"metadata":{"user_id":"u-1"},"stream":true}`,
		},
		{
			name: "temperature above 1 clamped, stop array",
			in:   `{"messages":[{"role":"user","content":"go"}],"temperature":1.7,"stop":["a","b"],"max_tokens":10}`,
			want: `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}],
				"temperature":1,"stop_sequences":["a","b"]}`,
			warns: []string{"param_clamped:temperature"},
		},
		{
			name: "reasoning_effort medium turns thinking on and removes sampling",
			in: `{"messages":[{"role":"user","content":"go"}],"reasoning_effort":"medium","max_tokens":8000,
				"temperature":0.5,"top_p":1}`,
			want: `{"model":"claude","max_tokens":8000,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}],
				"thinking":{"type":"enabled","budget_tokens":4096}}`,
			warns: []string{"param_dropped:temperature"},
		},
		{
			name: "reasoning_effort high capped below max_tokens; temperature 1 removed silently",
			in:   `{"messages":[{"role":"user","content":"go"}],"reasoning_effort":"high","max_tokens":5000,"temperature":1}`,
			want: `{"model":"claude","max_tokens":5000,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}],
				"thinking":{"type":"enabled","budget_tokens":4999}}`,
		},
		{
			name: "reasoning budget below 1024 omitted",
			in:   `{"messages":[{"role":"user","content":"go"}],"reasoning_effort":"low","max_tokens":600,"temperature":0.2}`,
			want: `{"model":"claude","max_tokens":600,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}],
				"temperature":0.2}`,
			warns: []string{"param_dropped:reasoning_effort"},
		},
		{
			name: "reasoning_effort minimal means no thinking, silently",
			in:   `{"messages":[{"role":"user","content":"go"}],"reasoning_effort":"minimal"}`,
			want: `{"model":"claude","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}]}`,
		},
		{
			name: "fields without an Anthropic counterpart are dropped and named",
			in: `{"messages":[{"role":"user","content":"go","name":"bob"}],"response_format":{"type":"json_object"},
				"logprobs":true,"top_logprobs":2,"logit_bias":{"1":1},"seed":7,"presence_penalty":0.1,"frequency_penalty":0.1,
				"service_tier":"auto","store":true,"metadata":{"a":"b"},"prediction":{},"modalities":["text"],"audio":{},
				"n":1,"seed_null":null}`,
			want: `{"model":"claude","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}]}`,
			warns: []string{"param_dropped:audio", "param_dropped:frequency_penalty", "param_dropped:logit_bias",
				"param_dropped:logprobs", "param_dropped:metadata", "param_dropped:modalities", "param_dropped:prediction",
				"param_dropped:presence_penalty", "param_dropped:response_format", "param_dropped:seed",
				"param_dropped:service_tier", "param_dropped:store", "param_dropped:top_logprobs"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, warns, err := ChatToAnthropic(body(t, tc.in), "claude", 0)
			if err != nil {
				t.Fatalf("ChatToAnthropic: %v", err)
			}
			jsonEqual(t, out, tc.want)
			wantCodes(t, warns, tc.warns...)
		})
	}
}

func TestChatToAnthropicToolChoice(t *testing.T) {
	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	tests := []struct {
		choice, parallel string
		want             string // tool_choice, or "" for absent
	}{
		{`"auto"`, "", `{"type":"auto"}`},
		{`"none"`, "", `{"type":"none"}`},
		{`"required"`, "", `{"type":"any"}`},
		{`{"type":"function","function":{"name":"f"}}`, "", `{"type":"tool","name":"f"}`},
		{`{"type":"function","function":{"name":"f"}}`, "false", `{"type":"tool","name":"f","disable_parallel_tool_use":true}`},
		{"", "false", `{"type":"auto","disable_parallel_tool_use":true}`},
		{`"none"`, "false", `{"type":"none"}`},
		{"", "true", ""},
	}
	for _, tc := range tests {
		t.Run(tc.choice+"/"+tc.parallel, func(t *testing.T) {
			in := `{"messages":[{"role":"user","content":"go"}],` + tools
			if tc.choice != "" {
				in += `,"tool_choice":` + tc.choice
			}
			if tc.parallel != "" {
				in += `,"parallel_tool_calls":` + tc.parallel
			}
			out, _, err := ChatToAnthropic(body(t, in+"}"), "claude", 4096)
			if err != nil {
				t.Fatal(err)
			}
			got := path(t, out, "tool_choice")
			if tc.want == "" {
				if got != nil {
					t.Fatalf("tool_choice = %v, want absent", got)
				}
				return
			}
			jsonEqual(t, mustJSON(got), tc.want)
		})
	}
}

func TestChatToAnthropicDefaultMaxTokensSetting(t *testing.T) {
	out, _, err := ChatToAnthropic(body(t, `{"messages":[{"role":"user","content":"go"}]}`), "claude", 1234)
	if err != nil {
		t.Fatal(err)
	}
	if got := path(t, out, "max_tokens"); got != 1234.0 {
		t.Fatalf("max_tokens = %v, want the setting 1234", got)
	}
}

func TestChatToAnthropicNAboveOneUnsupported(t *testing.T) {
	_, _, err := ChatToAnthropic(body(t, `{"messages":[{"role":"user","content":"go"}],"n":2}`), "claude", 0)
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Param != "n" || ue.Message == "" {
		t.Fatalf("err = %v, want *UnsupportedError for n", err)
	}
}

func TestChatToAnthropicMalformed(t *testing.T) {
	for _, in := range []string{
		`{"messages":"nope"}`,
		`{"messages":[{"role":"user","content":5}]}`,
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":"many"}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":{}}`,
	} {
		_, _, err := ChatToAnthropic(body(t, in), "claude", 0)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", in, err)
		}
	}
}
