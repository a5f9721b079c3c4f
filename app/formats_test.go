package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

// newAnthropicGW is the gateway in front of the fake upstream spoken to in
// the Anthropic format (provider "fakeant").
func newAnthropicGW(t *testing.T) *gwFixture {
	t.Helper()
	f := newGW(t)
	c := f.app.AddConnection(services.ConnectionInput{Provider: services.Some("fakeant"),
		Custom: services.Some(services.CustomSpec{WireFormat: "anthropic", AuthClass: "apikey"}),
		Name:   services.Some("ant-1"), APIKey: services.Some("fk-ant"), BaseURL: services.Some(f.fu.URL() + "/v1")})
	f.conns["fk-ant"] = c
	return f
}

func TestAnthropicSDKOverOpenAIUpstream(t *testing.T) {
	f := newGW(t, "fk-a")
	client := anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey(f.key), aoption.WithMaxRetries(0))
	ctx := context.Background()
	params := anthropic.MessageNewParams{MaxTokens: 64, Model: "fake/m1",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))}}
	msg, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) == 0 || msg.Content[0].Text != fakeupstream.DefaultContent || string(msg.StopReason) != "end_turn" {
		t.Fatalf("non-stream: %+v stop %s", msg.Content, msg.StopReason)
	}
	stream := client.Messages.NewStreaming(ctx, params)
	var text strings.Builder
	stop := ""
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "content_block_delta":
			text.WriteString(ev.Delta.Text)
		case "message_delta":
			stop = string(ev.Delta.StopReason)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != fakeupstream.DefaultContent || stop != "end_turn" {
		t.Fatalf("stream text %q stop %q", text.String(), stop)
	}
	if h := f.fu.Hits(); len(h) != 2 || h[0].Path != "/v1/chat/completions" {
		t.Fatalf("upstream hits %+v", h)
	}
}

func TestOpenAISDKOverAnthropicUpstream(t *testing.T) {
	f := newAnthropicGW(t)
	client := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey(f.key), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "fakeant/claude-x",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Say hello")}}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) == 0 || resp.Choices[0].Message.Content != fakeupstream.DefaultContent || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("non-stream: %+v", resp.Choices)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != fakeupstream.DefaultContent {
		t.Fatalf("stream text %q", text.String())
	}
	hits := f.fu.Hits()
	if len(hits) != 2 || hits[0].Path != "/v1/messages" || hits[0].Format != "anthropic" {
		t.Fatalf("upstream hits %+v", hits)
	}
}

func TestMessagesPassthroughAndErrors(t *testing.T) {
	f := newAnthropicGW(t)
	resp, b := postKey(t, f.url+"/v1/messages", f.key, `{"model":"fakeant/claude-x","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("request-id") == "" || !strings.Contains(string(b), `"type":"message"`) {
		t.Fatalf("passthrough: %d %s", resp.StatusCode, b)
	}
	// Anthropic error shape on /v1/messages.
	resp, b = postKey(t, f.url+"/v1/messages", f.key, `{"model":"fakeant/claude-x","messages":[{"role":"user","content":"hi"}]}`)
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message, Code string
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	json.Unmarshal(b, &e)
	if resp.StatusCode != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || e.RequestID == "" {
		t.Fatalf("error shape: %d %s", resp.StatusCode, b)
	}
}

func TestResponsesAndEmbeddings(t *testing.T) {
	f := newGW(t, "fk-a")
	resp, b := postKey(t, f.url+"/v1/responses", f.key, `{"model":"fake/m1","input":"Say hello","background":true}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"object":"response"`) || !strings.Contains(string(b), fakeupstream.DefaultContent) ||
		resp.Header.Get("X-Switchyard-Warning") == "" {
		t.Fatalf("responses: %d %v %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"), b)
	}
	resp, b = postKey(t, f.url+"/v1/responses", f.key, `{"model":"fake/m1","input":"Say hello","stream":true}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "response.output_text.delta") || !strings.Contains(string(b), "response.completed") {
		t.Fatalf("responses stream: %d %s", resp.StatusCode, b)
	}
	resp, b = postKey(t, f.url+"/v1/embeddings", f.key, `{"model":"fake/emb-1","input":["a","b"]}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"embedding"`) {
		t.Fatalf("embeddings: %d %s", resp.StatusCode, b)
	}

}
