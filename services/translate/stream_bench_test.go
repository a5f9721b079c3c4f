package translate

import "testing"

// BenchmarkTranslateChunk is one content chunk of a streamed chat answer
// translated for another inbound format (reported without a target,
// 60-quality §5.3 (e)). The stream is started once, so each iteration is a
// mid-stream content delta.
func BenchmarkTranslateChunk(b *testing.B) {
	first := []byte(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	chunk := []byte(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello, world"},"finish_reason":null}]}`)
	for _, c := range []struct {
		name string
		s    interface {
			Feed(event string, data []byte) ([][]byte, bool, bool, error)
		}
	}{{"chat-to-anthropic", NewChatToAnthropicStream("claude-x")}, {"chat-to-responses", NewChatToResponsesStream("gpt-x", "resp_1")}} {
		b.Run(c.name, func(b *testing.B) {
			if _, _, _, err := c.s.Feed("", first); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := c.s.Feed("", chunk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("anthropic-to-chat", func(b *testing.B) {
		s := NewAnthropicToChatStream("gpt-x")
		start := []byte(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":5,"output_tokens":0}}}`)
		block := []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		delta := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, world"}}`)
		for _, ev := range []struct {
			name string
			data []byte
		}{{"message_start", start}, {"content_block_start", block}} {
			if _, _, _, err := s.Feed(ev.name, ev.data); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := s.Feed("content_block_delta", delta); err != nil {
				b.Fatal(err)
			}
		}
	})
}
