package app_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"switchyard/internal/fakeupstream"
)

// The client conformance matrix in Go: the official openai-go and
// anthropic-sdk-go, unmodified, against a real gateway and the fake
// upstream (the Node suite in conformance/ runs the same matrix with the
// Node SDKs, Claude Code and Codex).

const toolMarker = "sy-tool-ok"

func scriptToolLoop(f *gwFixture, key string) {
	f.fu.ScriptModel(key, "tools", fakeupstream.Step{Content: "done", Events: 2,
		ToolCall: &fakeupstream.ToolCall{Name: "Bash", Arguments: `{"command":"echo ` + toolMarker + `"}`}})
}

func toolResultHits(f *gwFixture, key string) []fakeupstream.Hit {
	return f.fu.HitsWhere(func(h fakeupstream.Hit) bool { return h.Credential == key && h.Model == "tools" })
}

func TestConformanceOpenAIGo(t *testing.T) {
	f := clientsGW(t, false)
	if err := f.app.Server.Connections().SetCustomModels(context.Background(), "fake", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	scriptToolLoop(f, "fk-a")
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey(f.key), option.WithMaxRetries(0))
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}

	t.Run("chat JSON and stream accumulation", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m1", Messages: user})
		if err != nil || resp.Choices[0].Message.Content != fakeupstream.DefaultContent || resp.Model != "m1" {
			t.Fatalf("%v %+v", err, resp)
		}
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "fakeant/c1", Messages: user})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != fakeupstream.DefaultContent {
			t.Fatalf("stream (translated from anthropic): %v %+v", err, acc.Choices)
		}
	})

	t.Run("tool-call round trip on both wire formats", func(t *testing.T) {
		scriptToolLoop(f, "fk-ant")
		tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "Bash", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}})}
		for _, c := range []struct{ model, key string }{{"fake/tools", "fk-a"}, {"fakeant/tools", "fk-ant"}} {
			for _, stream := range []bool{false, true} {
				params := openai.ChatCompletionNewParams{Model: c.model, Messages: user, Tools: tools}
				var msg openai.ChatCompletionMessage
				if stream {
					s := client.Chat.Completions.NewStreaming(ctx, params)
					acc := openai.ChatCompletionAccumulator{}
					for s.Next() {
						acc.AddChunk(s.Current())
					}
					if err := s.Err(); err != nil {
						t.Fatal(err)
					}
					msg = acc.Choices[0].Message
				} else {
					resp, err := client.Chat.Completions.New(ctx, params)
					if err != nil {
						t.Fatal(err)
					}
					msg = resp.Choices[0].Message
				}
				if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "Bash" || !strings.Contains(msg.ToolCalls[0].Function.Arguments, toolMarker) {
					t.Fatalf("%s stream=%v: tool calls %+v", c.model, stream, msg.ToolCalls)
				}
				params.Messages = append(append([]openai.ChatCompletionMessageParamUnion{}, user...), msg.ToParam(),
					openai.ToolMessage(toolMarker+" printed", msg.ToolCalls[0].ID))
				resp, err := client.Chat.Completions.New(ctx, params)
				if err != nil || resp.Choices[0].Message.Content != "done" {
					t.Fatalf("%s: second turn %v %+v", c.model, err, resp)
				}
				hits := toolResultHits(f, c.key)
				if last := hits[len(hits)-1]; !last.HasToolResult || last.ToolResult != toolMarker+" printed" {
					t.Fatalf("%s: the tool result did not reach the upstream: %+v", c.model, last)
				}
			}
		}
	})

	t.Run("Responses JSON and stream", func(t *testing.T) {
		params := responses.ResponseNewParams{Model: "fake/m1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
		resp, err := client.Responses.New(ctx, params)
		if err != nil || resp.OutputText() != fakeupstream.DefaultContent {
			t.Fatalf("%v %+v", err, resp)
		}
		s := client.Responses.NewStreaming(ctx, params)
		var text strings.Builder
		completed := false
		for s.Next() {
			ev := s.Current()
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed":
				completed = ev.Response.OutputText() == fakeupstream.DefaultContent
			}
		}
		if err := s.Err(); err != nil || text.String() != fakeupstream.DefaultContent || !completed {
			t.Fatalf("stream %v %q completed=%v", err, text.String(), completed)
		}
	})

	t.Run("embeddings and Models.Get(provider/model)", func(t *testing.T) {
		emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "fake/e1", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
		if err != nil || len(emb.Data) != 2 || len(emb.Data[0].Embedding) != fakeupstream.DefaultEmbeddingDims {
			t.Fatalf("%v %+v", err, emb)
		}
		m, err := client.Models.Get(ctx, "fake/m1")
		if err != nil || m.ID != "fake/m1" {
			t.Fatalf("Models.Get: %v %+v", err, m)
		}
	})

	t.Run("typed errors 401, 404, 429 and the retry on Retry-After", func(t *testing.T) {
		var apierr *openai.Error
		bad := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey("sk-sy-"+strings.Repeat("x", 43)))
		_, err := bad.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m1", Messages: user})
		if !errors.As(err, &apierr) || apierr.StatusCode != 401 {
			t.Fatalf("401: %v", err)
		}
		f.fu.ScriptModel("fk-a", "no-such", fakeupstream.Step{Preset: "model_not_found_404"})
		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/no-such", Messages: user})
		if !errors.As(err, &apierr) || apierr.StatusCode != 404 {
			t.Fatalf("404: %v", err)
		}
		f.fu.ScriptModel("fk-a", "limited", fakeupstream.Step{Status: 429, RetryAfter: "1", Times: 1}, fakeupstream.Step{})
		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/limited", Messages: user})
		if !errors.As(err, &apierr) || apierr.StatusCode != 429 {
			t.Fatalf("429: %v", err)
		}
		// The SDK's own retry: it waits the gateway's Retry-After (1 s) and
		// asks again. The gateway's clock is a fake one, so the middleware
		// moves it past the connection's cooldown before the retry is sent.
		f.fu.ScriptModel("fk-a", "limited", fakeupstream.Step{Status: 429, RetryAfter: "1", Times: 1}, fakeupstream.Step{})
		var retryAfter []string
		retrying := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey(f.key), option.WithMaxRetries(2),
			option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				if len(retryAfter) > 0 {
					f.app.Clock.Advance(2 * time.Second)
				}
				resp, err := next(r)
				if resp != nil {
					retryAfter = append(retryAfter, resp.Header.Get("Retry-After"))
				}
				return resp, err
			}))
		resp, err := retrying.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/limited", Messages: user})
		if err != nil || resp.Choices[0].Message.Content != fakeupstream.DefaultContent || len(retryAfter) < 2 || retryAfter[0] != "1" {
			t.Fatalf("retry: %v, Retry-After per attempt %q", err, retryAfter)
		}
	})
}

func TestConformanceAnthropicGo(t *testing.T) {
	f := clientsGW(t, false)
	scriptToolLoop(f, "fk-ant")
	ctx := context.Background()
	client := anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey(f.key), aoption.WithMaxRetries(0))
	hi := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}

	t.Run("messages JSON and stream accumulation", func(t *testing.T) {
		for _, model := range []string{"fakeant/c1", "fake/m1"} {
			msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, Messages: hi})
			if err != nil || msg.Content[0].Text != fakeupstream.DefaultContent {
				t.Fatalf("%s: %v %+v", model, err, msg)
			}
			s := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, Messages: hi})
			acc := anthropic.Message{}
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil || len(acc.Content) == 0 || acc.Content[0].Text != fakeupstream.DefaultContent {
				t.Fatalf("%s stream: %v %+v", model, err, acc.Content)
			}
		}
	})

	t.Run("mid-conversation system entry", func(t *testing.T) {
		msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi")), anthropic.NewAssistantMessage(anthropic.NewTextBlock("hello")),
			{OfSystem: &anthropic.SystemMessageParam{Content: []anthropic.TextBlockParam{{Text: "Be brief."}}}},
			anthropic.NewUserMessage(anthropic.NewTextBlock("again"))}
		for _, model := range []string{"fakeant/c1", "fake/m1"} {
			msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, Messages: msgs},
				aoption.WithHeader("anthropic-beta", "mid-conversation-system-2026-04-07"))
			if err != nil || msg.Content[0].Text != fakeupstream.DefaultContent {
				t.Fatalf("%s: %v", model, err)
			}
		}
	})

	t.Run("tool-call round trip", func(t *testing.T) {
		tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "Bash",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}}}}}
		first, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "fakeant/tools", MaxTokens: 64, Messages: hi, Tools: tools})
		if err != nil || first.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("%v %+v", err, first)
		}
		var use anthropic.ContentBlockUnion
		for _, b := range first.Content {
			if b.Type == "tool_use" {
				use = b
			}
		}
		if use.Name != "Bash" || !strings.Contains(string(use.Input), toolMarker) {
			t.Fatalf("tool_use %+v", use)
		}
		msgs := append(append([]anthropic.MessageParam{}, hi...), first.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, toolMarker+" printed", false)))
		second, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "fakeant/tools", MaxTokens: 64, Messages: msgs, Tools: tools})
		if err != nil || second.Content[0].Text != "done" {
			t.Fatalf("second turn: %v %+v", err, second)
		}
		hits := toolResultHits(f, "fk-ant")
		if last := hits[len(hits)-1]; !last.HasToolResult || last.ToolResult != toolMarker+" printed" {
			t.Fatalf("the tool result did not reach the upstream: %+v", last)
		}
	})

	t.Run("count_tokens", func(t *testing.T) {
		for _, model := range []string{"fakeant/c1", "fake/m1"} {
			n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(model), Messages: hi})
			if err != nil || n.InputTokens <= 0 {
				t.Fatalf("%s: %v %+v", model, err, n)
			}
		}
	})

	t.Run("typed errors 401, 404, 429", func(t *testing.T) {
		var apierr *anthropic.Error
		bad := anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey("sk-sy-"+strings.Repeat("x", 43)))
		_, err := bad.Messages.New(ctx, anthropic.MessageNewParams{Model: "fakeant/c1", MaxTokens: 8, Messages: hi})
		if !errors.As(err, &apierr) || apierr.StatusCode != 401 {
			t.Fatalf("401: %v", err)
		}
		_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: "no-such-model", MaxTokens: 8, Messages: hi})
		if !errors.As(err, &apierr) || apierr.StatusCode != 404 {
			t.Fatalf("404: %v", err)
		}
		f.fu.ScriptModel("fk-ant", "limited", fakeupstream.Step{Status: 429, RetryAfter: "1"})
		_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: "fakeant/limited", MaxTokens: 8, Messages: hi})
		if !errors.As(err, &apierr) || apierr.StatusCode != 429 {
			t.Fatalf("429: %v", err)
		}
	})
}
