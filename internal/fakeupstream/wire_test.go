package fakeupstream_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"switchyard/internal/fakeupstream"
)

func TestOpenAIChatJSON(t *testing.T) {
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	status, body := c.chat("fk-good", "model-x")
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var got struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	wantIn := fakeupstream.Tokens("be brief" + "hi")
	if got.Object != "chat.completion" || got.Model != "model-x" || len(got.Choices) != 1 ||
		got.Choices[0].Message.Role != "assistant" || got.Choices[0].Message.Content != fakeupstream.DefaultContent ||
		got.Choices[0].FinishReason != "stop" {
		t.Errorf("unexpected completion: %s", body)
	}
	if got.Usage.PromptTokens != wantIn || got.Usage.CompletionTokens != fakeupstream.DefaultEvents ||
		got.Usage.TotalTokens != wantIn+fakeupstream.DefaultEvents {
		t.Errorf("usage %+v, want prompt %d completion %d", got.Usage, wantIn, fakeupstream.DefaultEvents)
	}

	h := onlyHit(t, fu)
	if h.Path != "/v1/chat/completions" || h.Method != "POST" || h.Format != "openai" || h.Model != "model-x" ||
		h.Stream || h.Status != 200 || h.End != fakeupstream.EndCompleted || h.Action != "ok" ||
		h.Credential != "fk-good" || !strings.HasPrefix(h.KeyLabel, "key-") || h.EventsSent != fakeupstream.DefaultEvents {
		t.Errorf("hit %+v", h)
	}
	if h.Usage != (fakeupstream.Usage{InputTokens: wantIn, OutputTokens: fakeupstream.DefaultEvents, Sent: true}) {
		t.Errorf("hit usage %+v", h.Usage)
	}
	if h.THeaders.Before(h.TStart) || h.TEnd.Before(h.THeaders) || h.BytesSent != int64(len(body)) {
		t.Errorf("times %v %v %v bytes %d (body %d)", h.TStart, h.THeaders, h.TEnd, h.BytesSent, len(body))
	}
	if !slices.Contains(h.Headers, "Authorization") || len(h.Violations) != 0 {
		t.Errorf("headers %v violations %v", h.Headers, h.Violations)
	}
}

func TestOpenAIChatSSE(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		t.Run("include_usage="+map[bool]string{false: "false", true: "true"}[includeUsage], func(t *testing.T) {
			fu := fakeupstream.Start(t)
			fu.Script("fk", fakeupstream.Step{Content: "abcdefghij", Events: 5})
			c := newClient(t, fu)
			resp := c.must("POST", "/v1/chat/completions", "fk", openAIReq("m", true, includeUsage, "hello"))
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("content type %q", ct)
			}
			evs, err := newSSE(resp.Body).readAll()
			if err != nil {
				t.Fatal(err)
			}
			if evs[len(evs)-1].Data != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", evs[len(evs)-1].Data)
			}
			deltas := openAIDeltas(t, evs)
			if len(deltas) != 5 || strings.Join(deltas, "") != "abcdefghij" {
				t.Errorf("deltas %q", deltas)
			}
			finishes, usageChunks := 0, 0
			for i, ev := range evs[:len(evs)-1] {
				var chunk struct {
					Object  string `json:"object"`
					Choices []struct {
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
					Usage *struct {
						PromptTokens     int `json:"prompt_tokens"`
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(ev.Data), &chunk); err != nil || chunk.Object != "chat.completion.chunk" {
					t.Fatalf("event %d %q: %v", i, ev.Data, err)
				}
				for _, ch := range chunk.Choices {
					if ch.FinishReason != nil {
						finishes++
					}
				}
				if chunk.Usage != nil {
					usageChunks++
					if len(chunk.Choices) != 0 || chunk.Usage.CompletionTokens != 5 ||
						chunk.Usage.PromptTokens != fakeupstream.Tokens("be briefhello") {
						t.Errorf("usage chunk %s", ev.Data)
					}
				}
				// With include_usage every chunk carries "usage" (null but the last), as OpenAI does.
				if includeUsage != strings.Contains(ev.Data, `"usage":`) {
					t.Errorf("event %d usage field presence wrong: %s", i, ev.Data)
				}
			}
			if finishes != 1 {
				t.Errorf("%d finish_reason values, want 1", finishes)
			}
			if want := map[bool]int{false: 0, true: 1}[includeUsage]; usageChunks != want {
				t.Errorf("%d usage chunks, want %d", usageChunks, want)
			}
			h := onlyHit(t, fu)
			if !h.Stream || h.EventsSent != 5 || h.End != fakeupstream.EndCompleted || h.Usage.Sent != includeUsage ||
				h.Usage.OutputTokens != 5 {
				t.Errorf("hit %+v", h)
			}
		})
	}
}

func TestAnthropicMessagesJSON(t *testing.T) {
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	resp := c.must("POST", "/v1/messages", "fk-ant", anthropicReq("claude-x", false, "hello there"))
	body := must(io.ReadAll(resp.Body))
	var got struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || got.Type != "message" || got.Role != "assistant" || got.Model != "claude-x" ||
		got.StopReason != "end_turn" || len(got.Content) != 1 || got.Content[0].Type != "text" ||
		got.Content[0].Text != fakeupstream.DefaultContent {
		t.Errorf("message %d %s", resp.StatusCode, body)
	}
	if got.Usage.InputTokens != fakeupstream.Tokens("hello there") || got.Usage.OutputTokens != fakeupstream.DefaultEvents {
		t.Errorf("usage %+v", got.Usage)
	}
	h := onlyHit(t, fu)
	if h.Format != "anthropic" || h.Credential != "fk-ant" || len(h.Violations) != 0 {
		t.Errorf("hit %+v", h)
	}
}

func TestAnthropicMessagesSSE(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk-ant", fakeupstream.Step{Content: "one two three", Events: 3})
	c := newClient(t, fu)
	resp := c.must("POST", "/v1/messages", "fk-ant", anthropicReq("claude-x", true, "hello"))
	evs, err := newSSE(resp.Body).readAll()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var text strings.Builder
	for _, ev := range evs {
		names = append(names, ev.Event)
		var d struct {
			Type  string `json:"type"`
			Delta struct {
				Type, Text string
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
			Usage struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatalf("event %s data %q: %v", ev.Event, ev.Data, err)
		}
		if d.Type != ev.Event {
			t.Errorf("event %q carries type %q", ev.Event, d.Type)
		}
		switch ev.Event {
		case "content_block_delta":
			if d.Delta.Type != "text_delta" {
				t.Errorf("delta type %q", d.Delta.Type)
			}
			text.WriteString(d.Delta.Text)
		case "message_delta":
			if d.Delta.StopReason != "end_turn" || d.Usage.OutputTokens != 3 {
				t.Errorf("message_delta %s", ev.Data)
			}
		}
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names, want) {
		t.Errorf("events %v\nwant   %v", names, want)
	}
	if text.String() != "one two three" {
		t.Errorf("text %q", text.String())
	}
	if h := onlyHit(t, fu); h.EventsSent != 3 || !h.Usage.Sent || h.End != fakeupstream.EndCompleted {
		t.Errorf("hit %+v", h)
	}
}

func TestRequestViolations(t *testing.T) {
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	resp := c.must("POST", "/v1/chat/completions", "", openAIReq("m", false, false, "x"))
	resp.Body.Close()
	req := must(c.send(t.Context(), "POST", "/v1/chat/completions", "fk", "{not json"))
	req.Body.Close()
	if req.StatusCode != 400 {
		t.Errorf("invalid JSON answered %d", req.StatusCode)
	}
	hits := fu.Hits()
	if len(hits) != 2 || !slices.Contains(hits[0].Violations, "missing_credential") ||
		!slices.Contains(hits[1].Violations, "invalid_json") || hits[1].Action != "invalid_json" {
		t.Fatalf("hits %+v", hits)
	}
	fu.Reset()
	hreq := must(c.send(t.Context(), "GET", "/v1/nope", "fk", ""))
	hreq.Body.Close()
	if hreq.StatusCode != 404 {
		t.Errorf("unknown route answered %d", hreq.StatusCode)
	}
	wrong := must(c.send(t.Context(), "GET", "/v1/chat/completions", "fk", ""))
	wrong.Body.Close()
	if wrong.StatusCode != 405 {
		t.Errorf("wrong method answered %d", wrong.StatusCode)
	}
	hits = fu.Hits()
	if len(hits) != 2 || !slices.Contains(hits[0].Violations, "unknown_route") || !slices.Contains(hits[1].Violations, "wrong_method") {
		t.Fatalf("hits %+v", hits)
	}
}

func TestAnthropicMissingHeadersAreViolations(t *testing.T) {
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	// c.send would add both headers on /v1/messages; build this one by hand with Bearer only.
	req := must(newRequest(t.Context(), "POST", fu.URL()+"/v1/messages", anthropicReq("m", false, "x")))
	req.Header.Set("Authorization", "Bearer fk")
	req.Header.Set("Content-Type", "application/json")
	resp := must(c.hc.Do(req))
	resp.Body.Close()
	h := onlyHit(t, fu)
	if resp.StatusCode != 200 || h.Credential != "fk" ||
		!slices.Equal(h.Violations, []string{"anthropic_missing_x_api_key", "anthropic_missing_version"}) {
		t.Errorf("status %d hit %+v", resp.StatusCode, h)
	}
}

func TestModels(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.ScriptModel("fk", "model-x", fakeupstream.Step{})
	fu.SetModels("fk-own", "a", "b")
	c := newClient(t, fu)
	list := func(key string, anthropic bool) []string {
		t.Helper()
		req := must(newRequest(t.Context(), "GET", fu.URL()+"/v1/models", ""))
		req.Header.Set("Authorization", "Bearer "+key)
		if anthropic {
			req.Header.Set("anthropic-version", "2023-06-01")
		}
		resp := must(c.hc.Do(req))
		defer resp.Body.Close()
		var got struct {
			Object string `json:"object"`
			Data   []struct {
				ID, Object, Type string
			} `json:"data"`
			HasMore *bool `json:"has_more"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range got.Data {
			ids = append(ids, m.ID)
			if anthropic && (m.Type != "model" || got.HasMore == nil) || !anthropic && (m.Object != "model" || got.Object != "list") {
				t.Errorf("wrong list shape for anthropic=%v: %+v", anthropic, got)
			}
		}
		return ids
	}
	if got, want := list("fk", false), append(slices.Clone(fakeupstream.DefaultModels), "model-x"); !slices.Equal(got, want) {
		t.Errorf("fk models %v, want %v", got, want)
	}
	if got := list("fk-own", true); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("fk-own models %v", got)
	}
}

func TestEmbeddings(t *testing.T) {
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	embed := func(body string) (vecs [][]float64, raw []string, prompt int) {
		t.Helper()
		resp := c.must("POST", "/v1/embeddings", "fk", body)
		var got struct {
			Object string `json:"object"`
			Data   []struct {
				Index     int             `json:"index"`
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Object != "list" {
			t.Fatalf("embeddings: %v %+v", err, got)
		}
		for i, d := range got.Data {
			var v []float64
			json.Unmarshal(d.Embedding, &v)
			vecs = append(vecs, v)
			raw = append(raw, string(d.Embedding))
			if d.Index != i {
				t.Errorf("index %d at %d", d.Index, i)
			}
		}
		return vecs, raw, got.Usage.PromptTokens
	}
	v1, _, prompt := embed(`{"model":"e","input":["alpha","beta"]}`)
	v2, _, _ := embed(`{"model":"e","input":"alpha"}`)
	if len(v1) != 2 || len(v1[0]) != fakeupstream.DefaultEmbeddingDims || !slices.Equal(v1[0], v2[0]) || slices.Equal(v1[0], v1[1]) {
		t.Fatalf("vectors %v %v", v1, v2)
	}
	if !slices.Equal(v1[0], fakeupstream.Embedding("alpha", 8)) {
		t.Errorf("vector differs from fakeupstream.Embedding")
	}
	var norm float64
	for _, f := range v1[0] {
		norm += f * f
	}
	if math.Abs(norm-1) > 1e-4 || prompt != fakeupstream.Tokens("alpha")+fakeupstream.Tokens("beta") {
		t.Errorf("norm² %v prompt %d", norm, prompt)
	}
	v3, _, _ := embed(`{"model":"e","input":"alpha","dimensions":3}`)
	if len(v3[0]) != 3 {
		t.Errorf("dimensions 3 gave %d", len(v3[0]))
	}
	_, raw, _ := embed(`{"model":"e","input":"alpha","encoding_format":"base64"}`)
	var b64 string
	json.Unmarshal([]byte(raw[0]), &b64)
	bin, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(bin) != 4*8 || math.Abs(float64(math.Float32frombits(binary.LittleEndian.Uint32(bin)))-v1[0][0]) > 1e-6 {
		t.Errorf("base64 embedding %q: %v", b64, err)
	}
}

func TestSplitContent(t *testing.T) {
	tests := []struct {
		text string
		n    int
		want []string
	}{
		{"abcdef", 3, []string{"ab", "cd", "ef"}},
		{"abcdefg", 3, []string{"abc", "de", "fg"}},
		{"ab", 5, []string{"a", "b", " ", "a", "b"}},
		{"héllo", 5, []string{"h", "é", "l", "l", "o"}},
	}
	for _, tc := range tests {
		if got := fakeupstream.SplitContent(tc.text, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("SplitContent(%q, %d) = %q, want %q", tc.text, tc.n, got, tc.want)
		}
	}
	if got := fakeupstream.SplitContent(fakeupstream.DefaultContent, 100); len(got) != 100 {
		t.Errorf("100 events gave %d chunks", len(got))
	}
}
