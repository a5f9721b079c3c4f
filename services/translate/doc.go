// Package translate converts requests, responses and streams between the
// three wire formats Switchyard speaks (10-gateway-api §6): OpenAI chat
// completions (the hub), Anthropic Messages and OpenAI Responses.
//
// Requests: ChatToAnthropic, AnthropicToChat, ResponsesToChat.
// Non-stream responses: AnthropicToChatResponse, ChatToAnthropicResponse,
// ChatToResponsesResponseWith. Streams: incremental translators fed one upstream
// SSE event at a time (NewAnthropicToChatStream, NewChatToAnthropicStream,
// NewChatToResponsesStream; Compose chains two of them through the hub).
//
// Every loss is reported as a Warning whose Code is the §6.8 token the
// gateway puts into X-Switchyard-Warning. Translation never panics on
// hostile input; malformed input yields an error wrapping ErrMalformed.
//
// The package is pure: it imports only the standard library and must not
// import switchyard/services, models, handlers or app.
package translate
