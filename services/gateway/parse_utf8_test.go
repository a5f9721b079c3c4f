package gateway

import "testing"

// TestModelNameMustBeValidUTF8 (issue 17 item 14): a model name that is
// not valid UTF-8 as sent — raw invalid bytes or a lone surrogate escape,
// both of which JSON decoding turns into U+FFFD — is a 400
// invalid_request; before, it was forwarded upstream as replacement
// characters.
func TestModelNameMustBeValidUTF8(t *testing.T) {
	for name, body := range map[string]string{
		"raw invalid byte":  "{\"model\":\"gpt-4o\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
		"overlong encoding": "{\"model\":\"\xc0\xafgpt\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
		"lone surrogate":    `{"model":"gpt-\ud800","messages":[{"role":"user","content":"hi"}]}`,
		"replacement char":  `{"model":"gpt-\ufffd","messages":[{"role":"user","content":"hi"}]}`,
	} {
		_, _, _, gerr := ParseChat([]byte(body), DefaultLimits())
		if gerr == nil || gerr.Status != 400 || gerr.Code != "invalid_request" || gerr.Param != "model" {
			t.Errorf("chat, %s: %+v", name, gerr)
		}
		_, _, _, gerr = ParseMessages([]byte(`{"max_tokens":10,`+body[1:]), DefaultLimits())
		if gerr == nil || gerr.Status != 400 || gerr.Param != "model" {
			t.Errorf("messages, %s: %+v", name, gerr)
		}
	}
	if err := ValidateModel("openai/gpt-4o-mini"); err != nil {
		t.Errorf("plain name refused: %v", err)
	}
	if err := ValidateModel("ollama/qwen2.5:7b-中文"); err != nil {
		t.Errorf("valid non-ASCII name refused: %v", err)
	}
}
