// Package handlers holds the echo adapters: bind the request, call a service,
// pick a component or JSON shape, write it. There is one handler per
// resource, each holding the small interfaces it consumes, declared next to
// it. Errors are returned with their code, never a status: the error handler
// in app maps them (services/errcodes.go). The exceptions are the form
// re-renders of 50-dashboard §3.3 (422) and the sign-in answers (401, 429),
// which are pages, not errors. Request bodies are read by one function,
// readJSONBody (decode.go); durations and counts are written by
// services/human.
//
// Naming rule. Types: a dashboard resource is named after it (Connections,
// Combos, Runtime), its management API twin in api_*.go adds API
// (ConnectionsAPI), the client API is V1. Methods, by what they answer:
//
//   - the handler's own resource: List, Show, New (the empty form), Create,
//     Edit (the filled form), Update, Replace (PUT), Delete;
//   - another action on it: the verb alone (Test, Reset, Revoke, Reorder,
//     Duplicate, Explain); a single switch is named after its field
//     (Enabled);
//   - a part or collection the handler also serves: verb then noun
//     (ListCooldowns, ResetBreaker, ClearModelCooldowns, UpdatePassword,
//     ShowSummary);
//   - a confirmation panel: Confirm then the action it confirms
//     (ConfirmDelete, ConfirmClearCooldowns);
//   - a dashboard fragment (a polled or swapped part of a page): the noun of
//     its component (Readiness, Statuses, Panel, Breakers);
//   - the client API: the endpoint (ChatCompletions, Messages, Models).
//
// The package must not import models (handlers reach the store only through
// services), app or the test kit; app/imports_test.go checks it.
package handlers
