// Package fakeupstream is a scriptable stand-in for the LLM providers Switchyard talks to.
//
// It is a real net/http server on a loopback port (never httptest.ResponseRecorder), because the
// behaviour under test lives at the socket: headers that arrive late, streams that stall, bodies
// cut mid-chunk, connections reset before any byte. It speaks the OpenAI chat, embeddings and
// models routes and the Anthropic messages route, JSON and SSE, with deterministic content and
// token usage so that accounting can be reconciled exactly against the hit log.
//
// Three entry points share this package: Start in tests, cmd/fakeupstream as a process, and the
// gateway's --demo mode (New + Listen, in-process). For that reason the package depends on the
// standard library only — not even on package testing (Start takes the small TB interface that
// *testing.T satisfies) — so linking it into the gateway binary costs nothing.
//
// It must not import anything from the gateway (services, handlers, app): a fake that shares
// code with the thing it tests would share its bugs too. It lives beside internal/testkit, not in
// it, because --demo links it into the binary; the test kit is for tests only. TestImportGraph
// (app/imports_test.go) checks both rules.
//
// Behaviour is chosen per request by a Script looked up by (credential, model); see Server.Script
// and ScriptFile. Every request to /v1 is recorded in a hit log (Server.Hits) whose entries say
// how each exchange ended, which is what resilience tests assert against.
package fakeupstream
