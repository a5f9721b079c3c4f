package translate

// Helpers only the tests of this package use.

// ChatToResponsesResponse synthesises an OpenAI Responses object from a
// non-stream chat.completion (10-gateway-api §6.7). requestedModel is
// written into `model` (empty keeps the upstream's). warnings are the
// request's warnings: the object has no slot for them (they travel in
// X-Switchyard-Warning), but background_mode_degraded among them is why the
// object always says `background: false`. Ids derive from the upstream id;
// ChatToResponsesResponseWith names them after the request id (§6.7).
func ChatToResponsesResponse(upstream []byte, requestedModel string, warnings []Warning) ([]byte, Usage, error) {
	_ = warnings
	b, u, _, err := ChatToResponsesResponseWith(upstream, ResponseOptions{Model: requestedModel})
	return b, u, err
}
