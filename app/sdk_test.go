package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"switchyard/internal/fakeupstream"
)

// The official OpenAI Go SDK, pointed at the gateway, completes a
// non-stream and a stream request and reads the deltas in order.
func TestOpenAISDKAgainstGateway(t *testing.T) {
	f := newGW(t, "fk-a")
	client := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey(f.key), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "fake/m1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) == 0 || resp.Choices[0].Message.Content != fakeupstream.DefaultContent {
		t.Fatalf("non-stream: %+v", resp.Choices)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var deltas []string
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			deltas = append(deltas, ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, ""); got != fakeupstream.DefaultContent || len(deltas) != 5 {
		t.Fatalf("stream deltas %q (%d), want %q in 5", got, len(deltas), fakeupstream.DefaultContent)
	}
	want := fakeupstream.SplitContent(fakeupstream.DefaultContent, 5)
	for i := range want {
		if deltas[i] != want[i] {
			t.Fatalf("delta %d = %q, want %q (order)", i, deltas[i], want[i])
		}
	}
}
