package translate

import (
	"testing"
)

// TestRoundTripChatAnthropicChat: an OpenAI request with system,
// multi-part user content with an image, assistant tool_calls and tool
// results goes to Anthropic and back with messages, tool calls and tool
// results intact.
func TestRoundTripChatAnthropicChat(t *testing.T) {
	messages := `[
		{"role":"system","content":"You are terse."},
		{"role":"user","content":[{"type":"text","text":"What is this, and the weather?"},
			{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ"}}]},
		{"role":"assistant","content":"Let me check.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"18C"},
		{"role":"tool","tool_call_id":"call_2","content":"21C"},
		{"role":"assistant","content":"A cat. Paris 18C, Rome 21C."},
		{"role":"user","content":"thanks"}]`
	tools := `[{"type":"function","function":{"name":"get_weather","description":"Weather by city",
		"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	in := `{"model":"client-name","messages":` + messages + `,"tools":` + tools + `,"tool_choice":"auto",
		"max_tokens":300,"temperature":0.4,"stop":["###"],"user":"u-7","stream":true}`

	anth, warns, err := ChatToAnthropic(body(t, in), "claude-sonnet-4", 4096)
	if err != nil {
		t.Fatalf("ChatToAnthropic: %v", err)
	}
	wantCodes(t, warns)
	back, warns, err := AnthropicToChat(body(t, string(anth)), "gpt-4o")
	if err != nil {
		t.Fatalf("AnthropicToChat: %v", err)
	}
	wantCodes(t, warns)
	jsonEqual(t, back, `{"model":"gpt-4o","messages":`+messages+`,"tools":`+tools+`,"tool_choice":"auto",
		"max_tokens":300,"temperature":0.4,"stop":["###"],"user":"u-7","stream":true,"stream_options":{"include_usage":true}}`)
}

// TestRoundTripAnthropicChatAnthropic is the reverse trip.
func TestRoundTripAnthropicChatAnthropic(t *testing.T) {
	in := `{"model":"x","max_tokens":512,"system":"Be kind.","messages":[
		{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","url":"https://e.com/i.png"}}]},
		{"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"toolu_01","name":"f","input":{"a":[1,2]}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"done"},{"type":"text","text":"next?"}]}],
		"tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"array"}}}}],
		"tool_choice":{"type":"tool","name":"f"},"stop_sequences":["Z"],"top_p":0.9,"metadata":{"user_id":"u"}}`
	chat, warns, err := AnthropicToChat(body(t, in), "gpt")
	if err != nil {
		t.Fatal(err)
	}
	wantCodes(t, warns)
	back, warns, err := ChatToAnthropic(body(t, string(chat)), "claude", 4096)
	if err != nil {
		t.Fatal(err)
	}
	wantCodes(t, warns)
	jsonEqual(t, back, `{"model":"claude","max_tokens":512,"system":"Be kind.","messages":[
		{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","url":"https://e.com/i.png"}}]},
		{"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"toolu_01","name":"f","input":{"a":[1,2]}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"done"},{"type":"text","text":"next?"}]}],
		"tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"array"}}}}],
		"tool_choice":{"type":"tool","name":"f"},"stop_sequences":["Z"],"top_p":0.9,"metadata":{"user_id":"u"}}`)
}

// TestRoundTripResponsesThroughAnthropic composes responses→chat→anthropic
// for the request and anthropic→chat→responses for the answer.
func TestRoundTripResponsesThroughAnthropic(t *testing.T) {
	chat, _, err := ResponsesToChat(body(t, `{"model":"r","instructions":"I","input":[{"role":"user","content":"q"}],
		"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"max_output_tokens":64}`), "hub")
	if err != nil {
		t.Fatal(err)
	}
	anth, _, err := ChatToAnthropic(body(t, string(chat)), "claude", 4096)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, anth, `{"model":"claude","system":"I","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],
		"tools":[{"name":"f","input_schema":{"type":"object"}}]}`)

	up := `{"id":"msg_1","type":"message","model":"claude","content":[{"type":"text","text":"a"},
		{"type":"tool_use","id":"toolu_1","name":"f","input":{"x":1}}],"stop_reason":"tool_use",
		"usage":{"input_tokens":3,"cache_read_input_tokens":2,"output_tokens":4}}`
	mid, _, err := AnthropicToChatResponse([]byte(up), "")
	if err != nil {
		t.Fatal(err)
	}
	out, u, _, err := ChatToResponsesResponseWith(mid, ResponseOptions{RequestID: "req_X", Created: t0})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"resp_X","object":"response","created_at":1700000000,"status":"completed","background":false,
		"error":null,"incomplete_details":null,"model":"claude","output":[
		{"id":"msg_X","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[]}]},
		{"id":"fc_X_0","type":"function_call","status":"completed","arguments":"{\"x\":1}","call_id":"toolu_1","name":"f"}],
		"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":2},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":9}}`)
	if u.PromptTokens != 5 || u.CachedTokens != 2 {
		t.Fatalf("usage = %+v", u)
	}
}
