package services

import (
	"context"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The audit log of admin actions (40-admin-api §1 Audit, issue 21 item 5):
// one entry per successful mutation through /api or the dashboard, naming
// who (the admin session's internal id or the client key), when, from where
// (client address, user agent), what (method, route, target id, action) and,
// for settings, a redacted before/after of every changed field. Entries are
// written in batches off the request path and pruned with the request log
// (logging.retentionDays).

// Audit actor kinds.
const (
	AuditActorSession = "session"
	AuditActorKey     = "key"
)

// AuditEntry is one admin action.
type AuditEntry struct {
	// ID orders entries made in the same millisecond (a request id).
	ID        string
	CreatedAt time.Time
	// ActorKind is AuditActorSession or AuditActorKey; ActorID the session's
	// internal id (a hash prefix, never the cookie value) or the key id.
	ActorKind string
	ActorID   string
	// ActorName and KeyPrefix name a key (its name and 12-character prefix);
	// empty for the admin session.
	ActorName string
	KeyPrefix string
	// ClientIP and UserAgent say where the action came from.
	ClientIP  string
	UserAgent string
	// RequestID is the X-Request-Id of the action.
	RequestID string
	// Method and Route are the HTTP method and the route pattern
	// ("/api/connections/:id"); Path the requested path.
	Method string
	Route  string
	Path   string
	// Action names the mutation ("combo.create") when the handler names
	// it, else it is empty and Route says what was done.
	Action string
	// TargetID is the id the action was about (path parameter, or the id of
	// what a create made), empty when none.
	TargetID string
	// Status is the HTTP status answered.
	Status int
	// Changes are the settings fields the action changed, before and after,
	// secrets redacted; empty for other actions.
	Changes []AuditChange
}

// Actor is the actor as 40-admin-api §1 words it: "admin:<session id>" or "key:<key id>".
func (e AuditEntry) Actor() string {
	if e.ActorKind == AuditActorKey {
		return "key:" + e.ActorID
	}
	return "admin:" + e.ActorID
}

// AuditChange is one changed settings field: its dotted path and its JSON
// value before and after (null when unset).
type AuditChange struct {
	Path   string          `json:"path"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// AuditSink persists batches of audit entries; like RequestLogSink it is
// called from one goroutine and must not keep the slice. Entries whose ID is
// already stored are skipped.
type AuditSink interface {
	WriteAuditEntries(ctx context.Context, entries []AuditEntry) error
}

// AuditQuery filters GET /api/audit. Zero values mean "no filter".
type AuditQuery struct {
	// Since (inclusive) and Until (exclusive) bound CreatedAt.
	Since, Until time.Time
	// ActorKind is AuditActorSession or AuditActorKey; ActorID one actor.
	ActorKind string
	ActorID   string
	// Method is an HTTP method; Route a route pattern, matched as a prefix
	// ("/api/connections" finds every connection route).
	Method string
	Route  string
	// TargetID is the id acted on.
	TargetID string
	// Limit is the page size, 1–500; 0 means 50. Cursor continues a list.
	Limit  int
	Cursor string
}

// Normalize validates q and fills the default limit; problems are a
// *ValidationError keyed by query parameter name.
func (q AuditQuery) Normalize() (AuditQuery, error) {
	fe := fieldErrors{}
	q.Limit = checkTimePage(fe, q.Limit, q.Since, q.Until, q.Cursor)
	switch q.ActorKind {
	case "", AuditActorSession, AuditActorKey:
	default:
		fe.add("actorKind", "must be session or key")
	}
	if q.Method != "" {
		q.Method = strings.ToUpper(q.Method)
		switch q.Method {
		case "POST", "PUT", "PATCH", "DELETE":
		default:
			fe.add("method", "must be one of POST, PUT, PATCH, DELETE")
		}
	}
	return q, fe.Err()
}

// AuditPage is one page of audit entries, newest first.
type AuditPage struct {
	Items      []AuditEntry
	NextCursor string
}

// AuditStore lists audit entries newest first, keyset-paginated on
// (CreatedAt, ID) with the request log's cursor format.
type AuditStore interface {
	ListAuditEntries(ctx context.Context, q AuditQuery) (AuditPage, error)
}

// AuditPurger deletes old audit entries (logging.retentionDays).
type AuditPurger interface {
	PurgeAuditEntries(ctx context.Context, before time.Time) (int64, error)
}

// redactedJSON is what a secret's value becomes in an audit change: the
// JSON string of Redacted.
const redactedJSON = `"` + Redacted + `"`

// secretName matches the JSON names whose values are credentials.
var secretName = regexp.MustCompile(`(?i)(secret|password|passwd|api_?key|token$|credential|authorization|cookie|proxy_?url)`)

// AuditDiff compares two JSON documents field by field and returns every
// leaf that differs, by dotted path in path order. Objects are walked;
// arrays and scalars are compared whole. Values under a name that holds a
// credential (apiKey, password, accessToken, proxyUrl …) are replaced by
// "[redacted]" on both sides, so an audit entry says that a secret changed,
// never what it is.
func AuditDiff(before, after []byte) []AuditChange {
	var b, a any
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	flat := func(v any) map[string]any {
		out := map[string]any{}
		flattenJSON("", v, out)
		return out
	}
	fb, fa := flat(b), flat(a)
	paths := map[string]bool{}
	for p := range fb {
		paths[p] = true
	}
	for p := range fa {
		paths[p] = true
	}
	var out []AuditChange
	for p := range paths {
		vb, inB := fb[p]
		va, inA := fa[p]
		eb, _ := json.Marshal(vb)
		ea, _ := json.Marshal(va)
		if inB == inA && string(eb) == string(ea) {
			continue
		}
		c := AuditChange{Path: p, Before: json.RawMessage("null"), After: json.RawMessage("null")}
		if inB {
			c.Before = eb
		}
		if inA {
			c.After = ea
		}
		if secretPath(p) {
			if inB && vb != nil {
				c.Before = json.RawMessage(redactedJSON)
			}
			if inA && va != nil {
				c.After = json.RawMessage(redactedJSON)
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	// An empty object that gained (or lost) fields is said by those fields.
	kept := out[:0]
	for i, c := range out {
		if i+1 < len(out) && strings.HasPrefix(out[i+1].Path, c.Path+".") {
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// flattenJSON records the leaves of v by dotted path. An empty object is a
// leaf of its own, so a map emptied by a change still shows.
func flattenJSON(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || (len(m) == 0 && prefix != "") {
		if prefix != "" {
			out[prefix] = v
		}
		return
	}
	for k, x := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flattenJSON(p, x, out)
	}
}

// secretPath reports a path with a credential-bearing name in it.
func secretPath(p string) bool {
	for _, part := range strings.Split(p, ".") {
		if secretName.MatchString(part) {
			return true
		}
	}
	return false
}
