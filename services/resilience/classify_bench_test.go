package resilience

import (
	"net/http"
	"testing"
)

// BenchmarkClassify is one failure through the classification pipeline
// (reported without a target, 60-quality §5.3 (e)): a 429 with
// Retry-After, a 503 with an OpenAI error envelope, a transport reset.
func BenchmarkClassify(b *testing.B) {
	h := http.Header{}
	h.Set("Retry-After", "7")
	cases := map[string]Failure{
		"429-retry-after": {Provider: "openai", ProviderClass: "apikey", Model: "gpt-4o", Status: 429, Header: h,
			Body: []byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`),
			Code: "rate_limit_exceeded", Type: "requests", Message: "Rate limit reached", At: clsT0},
		"503-envelope": {Provider: "openai", ProviderClass: "apikey", Model: "gpt-4o", Status: 503,
			Body: []byte(`{"error":{"message":"The server is overloaded","type":"server_error"}}`),
			Type: "server_error", Message: "The server is overloaded", At: clsT0},
		"transport-reset": {Provider: "openai", ProviderClass: "apikey", Model: "gpt-4o", Transport: TransportReset, At: clsT0},
	}
	for name, f := range cases {
		b.Run(name, func(b *testing.B) {
			e := newClsEnv()
			b.ReportAllocs()
			for b.Loop() {
				e.c.Classify(f)
			}
		})
	}
}
