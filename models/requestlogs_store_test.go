package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/requestlog"
)

var logT0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func newLogStore(t *testing.T) *models.RequestLogStore {
	t.Helper()
	return models.NewRequestLogStore(testkit.OpenDB(t))
}

func writeLogs(t *testing.T, s *models.RequestLogStore, entries ...services.RequestLogEntry) {
	t.Helper()
	if err := s.WriteRequestLogs(context.Background(), entries); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func fullEntry() services.RequestLogEntry {
	ttft := int64(830)
	return services.RequestLogEntry{
		ID: "req_01JNQ7H2Q8ZK4M6T9V3XWYB5CD", CreatedAt: logT0.Add(48*time.Second + 120*time.Millisecond),
		ClientRequestID: "client-7", APIKeyID: "k_8", APIKeyName: "agent-a", APIKeyPrefix: "sk-sy-Ab12Cd",
		Method: "POST", Endpoint: "/v1/chat/completions", InboundFormat: "openai", Stream: true, StreamOutcome: "completed",
		RequestedModel: "fast", ResolvedKind: "combo", ComboName: "fast", ComboPath: "fast>glm-pool", Strategy: "priority",
		Provider: "glm", Model: "glm-4.6", ConnectionID: "c_2", UpstreamFormat: "openai", Status: 200,
		Outcome: services.RequestOutcomeFailover, ErrorCode: "", Attempts: 2,
		AttemptLog: []services.AttemptRecord{
			{Seq: 0, TargetID: "t1", Provider: "openai", Model: "gpt-4o-mini", ConnectionID: "c_7", Outcome: "rate_limit",
				Detail: "tpm", UpstreamStatus: 429, ErrorCode: "rate_limited", RetryHintSource: "retry-after", LatencyMs: 410,
				StartOffsetMs: 2, HintMs: 20000, Effects: []services.AttemptEffect{
					{Kind: "connection_cooldown", UntilMs: logT0.Add(68 * time.Second).UnixMilli()}, {Kind: "breaker_counted"}}},
			{Seq: 1, TargetID: "t3", Provider: "glm", Model: "glm-4.6", ConnectionID: "c_2", Outcome: "success", UpstreamStatus: 200, LatencyMs: 4815,
				StartOffsetMs: 415},
		},
		Waits:        []services.WaitRecord{{Kind: services.WaitKindQueue, Reason: "request_queue", Target: "c_2", StartOffsetMs: 412, WaitedMs: 3}},
		PromptTokens: 1200, CachedTokens: 300, CacheWriteTokens: 20, CompletionTokens: 310, ReasoningTokens: 40,
		LatencyMs: 5230, TtftMs: &ttft, UpstreamLatencyMs: 4815, Warnings: []string{"param_dropped:logprobs"},
		AffinityHit: true, LeaseManaged: true, EmergencyFallback: true, BodiesCaptured: true,
		EstimatedCost: services.Cost{NanoUSD: 1_402_000, Known: true},
		Bodies: &services.CapturedBodies{
			Request:  &services.CapturedBody{Text: `{"model":"fast"}`},
			Response: &services.CapturedBody{Text: "hello", Truncated: true},
		},
	}
}

func TestRequestLogRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	s := models.NewRequestLogStore(db)

	full := fullEntry()
	minimal := services.RequestLogEntry{ID: "req_min", CreatedAt: logT0, Endpoint: "/v1/embeddings", Outcome: services.RequestOutcomeSuccess}
	writeLogs(t, s, full, minimal)

	got, err := s.FindRequestLog(ctx, full.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, full) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, full)
	}

	got, err = s.FindRequestLog(ctx, minimal.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := minimal
	want.Method = "POST"
	want.AttemptLog = []services.AttemptRecord{}
	want.Warnings = []string{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("minimal round trip:\n got %+v\nwant %+v", got, want)
	}

	// The stored form: epoch ms, camelCase JSON, empty arrays rather than null.
	var raw struct {
		CreatedAt  int64
		AttemptLog string
		Warnings   string
		TtftMs     *int64
		Bodies     *string
	}
	db.Raw("SELECT created_at, attempt_log, warnings, ttft_ms, bodies FROM request_logs WHERE id = ?", minimal.ID).Scan(&raw)
	if raw.CreatedAt != logT0.UnixMilli() || raw.AttemptLog != "[]" || raw.Warnings != "[]" || raw.TtftMs != nil || raw.Bodies != nil {
		t.Fatalf("stored minimal row = %+v", raw)
	}
	db.Raw("SELECT attempt_log FROM request_logs WHERE id = ?", full.ID).Scan(&raw.AttemptLog)
	first := `{"seq":0,"targetId":"t1","provider":"openai","model":"gpt-4o-mini","connectionId":"c_7","outcome":"rate_limit",` +
		`"detail":"tpm","upstreamStatus":429,"errorCode":"rate_limited","retryHintSource":"retry-after","latencyMs":410,` +
		`"startOffsetMs":2,"hintMs":20000,"effects":[{"kind":"connection_cooldown","untilMs":` + strconv.FormatInt(logT0.Add(68*time.Second).UnixMilli(), 10) +
		`,"lockKey":"","terminalStatus":""},{"kind":"breaker_counted","untilMs":0,"lockKey":"","terminalStatus":""}]}`
	if raw.AttemptLog[:len(first)+1] != "["+first {
		t.Fatalf("stored attempt_log = %s", raw.AttemptLog)
	}
	// The cost in nano-USD (NULL when unknown) and the attempted connections
	// and providers as ",a,b," lists for the filters.
	var extra struct {
		EstimatedCostNanoUSD *int64
		AttemptedConnections string
		AttemptedProviders   string
	}
	db.Raw("SELECT estimated_cost_nano_usd, attempted_connections, attempted_providers FROM request_logs WHERE id = ?", full.ID).Scan(&extra)
	if extra.EstimatedCostNanoUSD == nil || *extra.EstimatedCostNanoUSD != 1_402_000 || extra.AttemptedConnections != ",c_7,c_2," ||
		extra.AttemptedProviders != ",openai,glm," {
		t.Fatalf("stored extras %+v", extra)
	}
	db.Raw("SELECT estimated_cost_nano_usd, attempted_connections, attempted_providers FROM request_logs WHERE id = ?", minimal.ID).Scan(&extra)
	if extra.EstimatedCostNanoUSD != nil || extra.AttemptedConnections != "" || extra.AttemptedProviders != "" {
		t.Fatalf("stored minimal extras %+v", extra)
	}

	// Lists leave the bodies out.
	page, err := s.ListRequestLogs(ctx, services.RequestLogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 || page.Items[0].ID != full.ID || page.NextCursor != "" {
		t.Fatalf("list = %+v", page)
	}
	listed := page.Items[0]
	if listed.Bodies != nil || !listed.BodiesCaptured {
		t.Fatalf("listed bodies = %+v, captured %v", listed.Bodies, listed.BodiesCaptured)
	}
	listed.Bodies = full.Bodies
	if !reflect.DeepEqual(listed, full) {
		t.Fatalf("listed:\n got %+v\nwant %+v", listed, full)
	}

	if _, err := s.FindRequestLog(ctx, "req_missing"); !errors.Is(err, services.ErrNotFound) {
		t.Fatalf("find missing = %v, want ErrNotFound", err)
	}
}

func TestRequestLogWriteSkipsStoredIDs(t *testing.T) {
	ctx := context.Background()
	s := newLogStore(t)
	writeLogs(t, s, services.RequestLogEntry{ID: "r0042", CreatedAt: logT0, Endpoint: "/v1/responses", Status: 201})

	// 250 entries (three INSERT chunks) in one batch, one of them already stored.
	batch := make([]services.RequestLogEntry, 250)
	for i := range batch {
		batch[i] = services.RequestLogEntry{ID: fmt.Sprintf("r%04d", i), CreatedAt: logT0, Endpoint: "/v1/chat/completions", Status: 200}
	}
	writeLogs(t, s, batch...)
	writeLogs(t, s) // an empty batch is a no-op

	ids := listAll(t, s, services.RequestLogQuery{Limit: 500})
	if len(ids) != 250 {
		t.Fatalf("stored %d entries, want 250", len(ids))
	}
	kept, err := s.FindRequestLog(ctx, "r0042")
	if err != nil {
		t.Fatal(err)
	}
	if kept.Status != 201 {
		t.Fatalf("stored entry overwritten: status %d", kept.Status)
	}
}

func TestRequestLogCancelledWriteStoresNothing(t *testing.T) {
	s := newLogStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.WriteRequestLogs(ctx, []services.RequestLogEntry{{ID: "r1", CreatedAt: logT0, Endpoint: "/v1/chat/completions"}})
	if err == nil {
		t.Fatal("write with a cancelled context succeeded")
	}
	if ids := listAll(t, s, services.RequestLogQuery{}); len(ids) != 0 {
		t.Fatalf("stored %v after a failed batch", ids)
	}
}

// listAll walks every page of q and returns the ids in order, failing on a
// page that is longer than the limit or empty before the end.
func listAll(t *testing.T, s *models.RequestLogStore, q services.RequestLogQuery) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("pagination does not end")
		}
		page, err := s.ListRequestLogs(context.Background(), q)
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		limit := q.Limit
		if limit == 0 {
			limit = services.DefaultRequestLogLimit
		}
		if len(page.Items) > limit {
			t.Fatalf("page of %d items, limit %d", len(page.Items), limit)
		}
		for _, e := range page.Items {
			ids = append(ids, e.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		if len(page.Items) == 0 {
			t.Fatal("empty page with a next cursor")
		}
		q.Cursor = page.NextCursor
	}
}

func TestRequestLogFilters(t *testing.T) {
	s := newLogStore(t)
	yes, no := true, false
	at := func(min int) time.Time { return logT0.Add(time.Duration(min) * time.Minute) }
	writeLogs(t, s,
		services.RequestLogEntry{ID: "a", CreatedAt: at(0), Endpoint: "/v1/chat/completions", Outcome: "success",
			RequestedModel: "fast", ResolvedKind: "combo", ComboName: "fast", Provider: "glm", ConnectionID: "c_2", APIKeyID: "k_1", Stream: true},
		services.RequestLogEntry{ID: "b", CreatedAt: at(10), Endpoint: "/v1/chat/completions", Outcome: "failover",
			RequestedModel: "openai/gpt-4o", ResolvedKind: "direct", Provider: "openai", ConnectionID: "c_7", APIKeyID: "k_1"},
		services.RequestLogEntry{ID: "c", CreatedAt: at(20), Endpoint: "/v1/messages", Outcome: "upstream_error",
			RequestedModel: "smart", ResolvedKind: "combo", ComboName: "fast", Provider: "anthropic", ConnectionID: "c_9", APIKeyID: "k_2", Stream: true,
			ClientRequestID: "my-req-1"},
		services.RequestLogEntry{ID: "d", CreatedAt: at(30), Endpoint: "/v1/chat/completions", Outcome: "aborted",
			RequestedModel: "fast", ResolvedKind: "combo", ComboName: "fast", Provider: "glm", ConnectionID: "c_3", APIKeyID: "k_2", Status: 499},
		// e failed on c_1x7 (openai) and c_7 twice, then glm's c_2 served;
		// f tried the emergency fallback and failed.
		services.RequestLogEntry{ID: "e", CreatedAt: at(40), Endpoint: "/v1/chat/completions", Outcome: "failover",
			RequestedModel: "fast", ResolvedKind: "combo", ComboName: "fast", Provider: "glm", ConnectionID: "c_2", APIKeyID: "k_3",
			AttemptLog: []services.AttemptRecord{{Seq: 0, Provider: "openai", ConnectionID: "c_1x7", Outcome: "server_error"},
				{Seq: 1, Provider: "openai", ConnectionID: "c_7", Outcome: "rate_limit"}, {Seq: 2, Provider: "openai", ConnectionID: "c_7", Outcome: "rate_limit"},
				{Seq: 3, Provider: "glm", ConnectionID: "c_2", Outcome: "success"}}},
		services.RequestLogEntry{ID: "f", CreatedAt: at(50), Endpoint: "/v1/chat/completions", Outcome: "upstream_error", Status: 503,
			RequestedModel: "smart", EmergencyFallback: true, APIKeyID: "k_3"},
		services.RequestLogEntry{ID: "g", CreatedAt: at(60), Endpoint: "/v1/chat/completions", Outcome: "emergency_fallback", Status: 200,
			RequestedModel: "smart", EmergencyFallback: true, APIKeyID: "k_3"},
	)
	cases := []struct {
		name string
		q    services.RequestLogQuery
		want string
	}{
		{"none", services.RequestLogQuery{Until: at(35)}, "d,c,b,a"},
		{"since inclusive", services.RequestLogQuery{Since: at(10), Until: at(35)}, "d,c,b"},
		{"until exclusive", services.RequestLogQuery{Until: at(20)}, "b,a"},
		{"window", services.RequestLogQuery{Since: at(5), Until: at(25)}, "c,b"},
		{"outcome", services.RequestLogQuery{Outcome: "failover"}, "e,b"},
		{"model as sent", services.RequestLogQuery{Model: "openai/gpt-4o"}, "b"},
		{"model matches combo", services.RequestLogQuery{Model: "fast"}, "e,d,c,a"},
		{"provider", services.RequestLogQuery{Provider: "glm", Until: at(35)}, "d,a"},
		{"connection", services.RequestLogQuery{ConnectionID: "c_7", Until: at(35)}, "b"},
		{"key", services.RequestLogQuery{KeyID: "k_2"}, "d,c"},
		// Attempts count: the failing connection and provider find the
		// request another one served; "_" in an id is no wildcard.
		{"connection attempted", services.RequestLogQuery{ConnectionID: "c_7"}, "e,b"},
		{"connection attempted, no wildcard", services.RequestLogQuery{ConnectionID: "c_1_7"}, ""},
		{"connection attempted once", services.RequestLogQuery{ConnectionID: "c_1x7"}, "e"},
		{"connection served", services.RequestLogQuery{ConnectionID: "c_2"}, "e,a"},
		{"provider attempted", services.RequestLogQuery{Provider: "openai"}, "e,b"},
		{"emergency fallback, served or failed", services.RequestLogQuery{Outcome: "emergency_fallback"}, "g,f"},
		{"stream", services.RequestLogQuery{Stream: &yes}, "c,a"},
		{"not stream", services.RequestLogQuery{Stream: &no, Until: at(35)}, "d,b"},
		{"request id", services.RequestLogQuery{RequestID: "b"}, "b"},
		{"client request id", services.RequestLogQuery{RequestID: "my-req-1"}, "c"},
		{"combined", services.RequestLogQuery{Model: "fast", KeyID: "k_2", Stream: &yes}, "c"},
		{"no match", services.RequestLogQuery{Provider: "mistral"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := fmt.Sprint(listAll(t, s, tc.q))
			want := "[" + tc.want + "]"
			if tc.want != "" {
				want = fmt.Sprint(splitComma(tc.want))
			}
			if got != want {
				t.Fatalf("ids = %s, want %s", got, want)
			}
		})
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func TestRequestLogQueryValidation(t *testing.T) {
	s := newLogStore(t)
	cases := []struct {
		name  string
		q     services.RequestLogQuery
		field string
	}{
		{"limit too big", services.RequestLogQuery{Limit: 501}, "limit"},
		{"limit negative", services.RequestLogQuery{Limit: -1}, "limit"},
		{"since not before until", services.RequestLogQuery{Since: logT0, Until: logT0}, "since"},
		{"unknown outcome", services.RequestLogQuery{Outcome: "ok"}, "outcome"},
		{"garbage cursor", services.RequestLogQuery{Cursor: "not a cursor"}, "cursor"},
		{"cursor without id", services.RequestLogQuery{Cursor: "eyJ0IjoxfQ"}, "cursor"}, // {"t":1}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ListRequestLogs(context.Background(), tc.q)
			var verr *services.ValidationError
			if !errors.As(err, &verr) || verr.Fields[tc.field] == "" {
				t.Fatalf("err = %v, want a validation error on %q", err, tc.field)
			}
		})
	}
}

func TestRequestLogPagination(t *testing.T) {
	cases := []struct {
		name      string
		n, limit  int
		wantPages int
	}{
		{"default limit", 137, 0, 3},
		{"uneven", 137, 10, 14},
		{"exact multiple", 120, 10, 12}, // no trailing empty page
		{"one page", 7, 10, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newLogStore(t)
			// Five entries share each millisecond, so the id tie-break matters.
			entries := make([]services.RequestLogEntry, tc.n)
			for i := range entries {
				entries[i] = services.RequestLogEntry{ID: fmt.Sprintf("r%03d", (i*37)%tc.n), CreatedAt: logT0.Add(time.Duration(i/5) * time.Millisecond),
					Endpoint: "/v1/chat/completions"}
			}
			writeLogs(t, s, entries...)

			// The expected order: newest first, then id descending.
			sort.Slice(entries, func(i, j int) bool {
				if !entries[i].CreatedAt.Equal(entries[j].CreatedAt) {
					return entries[i].CreatedAt.After(entries[j].CreatedAt)
				}
				return entries[i].ID > entries[j].ID
			})
			var want []string
			for _, e := range entries {
				want = append(want, e.ID)
			}

			q := services.RequestLogQuery{Limit: tc.limit}
			var got []string
			pages := 0
			for {
				page, err := s.ListRequestLogs(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, e := range page.Items {
					got = append(got, e.ID)
				}
				if page.NextCursor == "" {
					break
				}
				q.Cursor = page.NextCursor
			}
			if pages != tc.wantPages {
				t.Errorf("%d pages, want %d", pages, tc.wantPages)
			}
			seen := map[string]bool{}
			for _, id := range got {
				if seen[id] {
					t.Fatalf("duplicate %s", id)
				}
				seen[id] = true
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("walked %d ids, want %d in order\n got %v\nwant %v", len(got), len(want), got, want)
			}
		})
	}

	// Entries written between pages appear on no later page and shift nothing.
	t.Run("stable under inserts", func(t *testing.T) {
		s := newLogStore(t)
		for i := range 30 {
			writeLogs(t, s, services.RequestLogEntry{ID: fmt.Sprintf("r%02d", i), CreatedAt: logT0.Add(time.Duration(i) * time.Second), Endpoint: "/v1/chat/completions"})
		}
		page, err := s.ListRequestLogs(context.Background(), services.RequestLogQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		writeLogs(t, s, services.RequestLogEntry{ID: "r99", CreatedAt: logT0.Add(time.Hour), Endpoint: "/v1/chat/completions"})
		rest := listAll(t, s, services.RequestLogQuery{Limit: 10, Cursor: page.NextCursor})
		if len(rest) != 20 || rest[0] != "r19" || rest[19] != "r00" {
			t.Fatalf("rest = %v", rest)
		}
	})
}

func TestPurgeRequestLogs(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	s := models.NewRequestLogStore(db)
	cut := logT0.Add(7 * 24 * time.Hour)

	// More old rows than one purge chunk (inserted in SQL: the test is about the
	// purge), plus rows on and after the boundary.
	const old = 12345
	insert := `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
		INSERT INTO request_logs (id, created_at, endpoint) SELECT printf('old%05d', i), ? + i * 1000, '/v1/chat/completions' FROM n`
	if testkit.UsingPostgres() {
		insert = `INSERT INTO request_logs (id, created_at, endpoint)
			SELECT 'old' || lpad(i::text, 5, '0'), ?::bigint + i * 1000, '/v1/chat/completions' FROM generate_series(0, ? - 1) AS i`
	}
	args := []any{old, logT0.UnixMilli()}
	if testkit.UsingPostgres() {
		args = []any{logT0.UnixMilli(), old}
	}
	err := db.Exec(insert, args...).Error
	if err != nil {
		t.Fatal(err)
	}
	writeLogs(t, s,
		services.RequestLogEntry{ID: "boundary", CreatedAt: cut, Endpoint: "/v1/chat/completions"},
		services.RequestLogEntry{ID: "new", CreatedAt: cut.Add(time.Millisecond), Endpoint: "/v1/chat/completions"},
	)

	n, err := s.PurgeRequestLogs(ctx, cut)
	if err != nil {
		t.Fatal(err)
	}
	if n != old {
		t.Fatalf("purged %d, want %d", n, old)
	}
	if got := fmt.Sprint(listAll(t, s, services.RequestLogQuery{})); got != "[new boundary]" {
		t.Fatalf("left %s, want [new boundary]", got)
	}
	if n, err := s.PurgeRequestLogs(ctx, cut); err != nil || n != 0 {
		t.Fatalf("second purge = %d, %v; want 0, nil", n, err)
	}
}

// The batch writer and the store together, on a real database.
func TestRequestLogWriterToStore(t *testing.T) {
	s := newLogStore(t)
	w := requestlog.New(s, nil, requestlog.Options{})
	for i := range 600 {
		e := fullEntry()
		e.ID = fmt.Sprintf("r%04d", i)
		e.CreatedAt = logT0.Add(time.Duration(i) * time.Millisecond)
		if !w.Add(e) {
			t.Fatalf("Add(%d) refused", i)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Written != 600 || st.FailedBatches != 0 || st.Dropped != 0 || st.QueueDepth != 0 {
		t.Fatalf("stats = %+v", st)
	}
	ids := listAll(t, s, services.RequestLogQuery{Limit: 500})
	if len(ids) != 600 || ids[0] != "r0599" || ids[599] != "r0000" {
		t.Fatalf("stored %d ids, first %v", len(ids), ids[:min(3, len(ids))])
	}
}

// BenchmarkWriteRequestLogs writes one full writer batch (256 entries) per
// op: full entries (every field set, captured bodies, two attempts) and
// typical ones (a non-stream request served by its first attempt).
func BenchmarkWriteRequestLogs(b *testing.B) {
	ttft := int64(120)
	typical := services.RequestLogEntry{
		CreatedAt: logT0, APIKeyID: "k_8", APIKeyName: "agent-a", APIKeyPrefix: "sk-sy-Ab12Cd",
		Method: "POST", Endpoint: "/v1/chat/completions", InboundFormat: "openai-chat",
		RequestedModel: "fast", ResolvedKind: "combo", ComboName: "fast", ComboPath: "fast", Strategy: "priority",
		Provider: "glm", Model: "glm-4.6", ConnectionID: "c_2", UpstreamFormat: "openai", Status: 200,
		Outcome: services.RequestOutcomeSuccess, Attempts: 1,
		AttemptLog: []services.AttemptRecord{{Seq: 0, TargetID: "t1", Provider: "glm", Model: "glm-4.6", ConnectionID: "c_2",
			Outcome: "success", UpstreamStatus: 200, LatencyMs: 130}},
		PromptTokens: 52, CompletionTokens: 9, LatencyMs: 131, TtftMs: &ttft, UpstreamLatencyMs: 130,
	}
	for _, c := range []struct {
		name     string
		entry    services.RequestLogEntry
		fallback bool
	}{{"full", fullEntry(), false}, {"typical", typical, false}, {"typical-gorm-fallback", typical, true}} {
		b.Run(c.name, func(b *testing.B) {
			s := models.NewRequestLogStore(testkit.OpenDB(b))
			if c.fallback {
				models.BreakRequestLogFastPath(s)
			}
			batch := make([]services.RequestLogEntry, 256)
			n := 0
			for b.Loop() {
				for i := range batch {
					batch[i] = c.entry
					batch[i].ID = fmt.Sprintf("r%08d", n)
					n++
				}
				if err := s.WriteRequestLogs(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Values are written as SQL literals or, when long or holding a NUL, as bound
// parameters; either way every byte comes back as stored.
func TestRequestLogStringsRoundTrip(t *testing.T) {
	s := newLogStore(t)
	odd := []string{
		"", "'", "''", "it's", "'; DROP TABLE request_logs; --", `\'`, "a\x00b", "\x00", "line\nbreak\r\t",
		"snow ☃ 雪", "bad utf-8 \xff\xfe", "?", "?1", ":name", "$1", strings.Repeat("x'", 600), strings.Repeat("y", 5000) + "\x00",
	}
	var batch []services.RequestLogEntry
	for i, v := range odd {
		e := fullEntry()
		e.ID = fmt.Sprintf("r%02d%s", i, v)
		e.CreatedAt = logT0.Add(time.Duration(i) * time.Millisecond)
		e.ClientRequestID, e.Model, e.ErrorCode = v, v, v
		e.Warnings = []string{v}
		e.Bodies = &services.CapturedBodies{Request: &services.CapturedBody{Text: v}}
		batch = append(batch, e)
	}
	writeLogs(t, s, batch...)
	for _, want := range batch {
		got, err := s.FindRequestLog(context.Background(), want.ID)
		if err != nil {
			t.Fatalf("find %q: %v", want.ID, err)
		}
		want := storedForm(want)
		if got.ClientRequestID != want.ClientRequestID || got.Model != want.Model || got.ErrorCode != want.ErrorCode {
			t.Errorf("%q: got %q %q %q", want.ID, got.ClientRequestID, got.Model, got.ErrorCode)
		}
		if !reflect.DeepEqual(got.Warnings, wantJSONString(want.Warnings)) || got.Bodies == nil ||
			got.Bodies.Request.Text != wantJSONString([]string{want.Bodies.Request.Text})[0] {
			t.Errorf("%q: warnings %q, bodies %+v", want.ID, got.Warnings, got.Bodies)
		}
	}
}

// wantJSONString is what a JSON round trip makes of ss (each invalid UTF-8
// byte becomes U+FFFD).
func wantJSONString(ss []string) []string {
	b, _ := json.Marshal(ss)
	var out []string
	_ = json.Unmarshal(b, &out)
	return out
}

// variedEntry is entry i of a batch test: every column differs between
// entries, some strings are longer than a page or hold NULs and quotes, and
// the nullable columns alternate, so a value bound to the wrong parameter or
// read from the wrong place shows.
func variedEntry(i int) services.RequestLogEntry {
	s := func(col string) string {
		switch i % 5 {
		case 1:
			return fmt.Sprintf("%s-%d-'quoted'\x00nul", col, i)
		case 3:
			return fmt.Sprintf("%s-%d-", col, i) + strings.Repeat("é", 700+i) // over 1 KiB
		default:
			return fmt.Sprintf("%s-%d", col, i)
		}
	}
	n := int64(i)
	e := services.RequestLogEntry{
		ID: fmt.Sprintf("r%05d", i), CreatedAt: logT0.Add(time.Duration(i) * time.Millisecond), ClientRequestID: s("client"),
		APIKeyID: s("key"), APIKeyName: s("name"), APIKeyPrefix: s("prefix"), Method: s("method"), Endpoint: s("endpoint"),
		InboundFormat: s("in"), Stream: i%2 == 0, StreamOutcome: s("so"), RequestedModel: s("req"), ResolvedKind: s("kind"),
		ComboName: s("combo"), ComboPath: s("path"), Strategy: s("strategy"), Provider: s("provider"), Model: s("model"),
		ConnectionID: s("conn"), UpstreamFormat: s("up"), Status: 100 + i, Outcome: s("outcome"), ErrorCode: s("error"),
		Attempts: i % 4, PromptTokens: n * 3, CachedTokens: n * 5, CacheWriteTokens: n * 7, CompletionTokens: n * 11,
		ReasoningTokens: n * 13, LatencyMs: n * 17, UpstreamLatencyMs: n * 19, AffinityHit: i%3 == 0, LeaseManaged: i%3 == 1,
		EmergencyFallback: i%4 == 0, BodiesCaptured: i%4 != 0, AttemptLog: []services.AttemptRecord{}, Warnings: []string{},
	}
	if i%2 == 1 {
		ttft := -n
		e.TtftMs = &ttft
	}
	for a := range i % 3 {
		e.AttemptLog = append(e.AttemptLog, services.AttemptRecord{Seq: a, TargetID: s("target"), Model: s("am"), UpstreamStatus: 500 + a, LatencyMs: n})
		e.Warnings = append(e.Warnings, s("warning"))
	}
	if i%3 != 2 {
		e.Bodies = &services.CapturedBodies{Response: &services.CapturedBody{Text: s("body"), Truncated: i%2 == 0}}
	}
	if i%7 == 0 {
		e.Method = "" // stored as POST
	}
	return e
}

func variedEntries(from, n int) []services.RequestLogEntry {
	out := make([]services.RequestLogEntry, n)
	for i := range out {
		out[i] = variedEntry(from + i)
	}
	return out
}

// storedForm is e as the test database keeps it: on PostgreSQL, text
// without NULs and invalid UTF-8 (models.PostgresText).
func storedForm(e services.RequestLogEntry) services.RequestLogEntry {
	if !testkit.UsingPostgres() {
		return e
	}
	for _, f := range []*string{&e.ID, &e.ClientRequestID, &e.APIKeyID, &e.APIKeyName, &e.APIKeyPrefix, &e.Method,
		&e.Endpoint, &e.InboundFormat, &e.StreamOutcome, &e.RequestedModel, &e.ResolvedKind, &e.ComboName,
		&e.ComboPath, &e.Strategy, &e.Provider, &e.Model, &e.ConnectionID, &e.UpstreamFormat, &e.Outcome, &e.ErrorCode} {
		*f = models.PostgresText(*f)
	}
	return e
}

// checkStored fails unless every entry reads back as written.
func checkStored(t *testing.T, s *models.RequestLogStore, entries []services.RequestLogEntry) {
	t.Helper()
	for _, want := range entries {
		got, err := s.FindRequestLog(context.Background(), want.ID)
		if err != nil {
			t.Fatalf("find %s: %v", want.ID, err)
		}
		if want.Method == "" {
			want.Method = "POST"
		}
		want = storedForm(want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", want.ID, got, want)
		}
	}
}

func countLogs(t *testing.T, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Raw("SELECT count(*) FROM request_logs").Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// Batches are written with prepared statements of 1, 2, 4, … 64 rows that
// the connection keeps between batches; batches of any length, one after
// another, put every value of every row in its place.
func TestRequestLogBatchesOfEveryShape(t *testing.T) {
	s := newLogStore(t)
	var all []services.RequestLogEntry
	for _, n := range []int{1, 3, 64, 2, 65, 127, 128, 7, 256, 300, 1, 100} {
		batch := variedEntries(len(all), n)
		writeLogs(t, s, batch...)
		all = append(all, batch...)
	}
	checkStored(t, s, all)
}

// A batch that fails part way stores none of its rows, leaves no transaction
// open, and the statements it used work for the next batch. The trigger is
// also a schema change, which SQLite answers by re-preparing the kept
// statements.
func TestRequestLogFailedBatchRollsBack(t *testing.T) {
	db := testkit.OpenDB(t)
	s := models.NewRequestLogStore(db)
	first := variedEntries(0, 100) // 64 + 32 + 4 rows
	writeLogs(t, s, first...)
	trigger, drop := `CREATE TRIGGER request_logs_boom BEFORE INSERT ON request_logs WHEN NEW.id = 'boom'
		BEGIN SELECT RAISE(ABORT, 'boom'); END`, "DROP TRIGGER request_logs_boom"
	if testkit.UsingPostgres() {
		trigger = `CREATE FUNCTION request_logs_boom() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.id = 'boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$;
			CREATE TRIGGER request_logs_boom BEFORE INSERT ON request_logs FOR EACH ROW EXECUTE FUNCTION request_logs_boom()`
		drop = "DROP TRIGGER request_logs_boom ON request_logs"
	}
	if err := db.Exec(trigger).Error; err != nil {
		t.Fatal(err)
	}
	second := variedEntries(100, 100)
	second[80].ID = "boom" // in the second statement, after 64 rows went in
	if err := s.WriteRequestLogs(context.Background(), second); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("write through the failing trigger = %v, want the trigger's error", err)
	}
	if n := countLogs(t, db); n != 100 {
		t.Fatalf("%d rows after the failed batch, want the first batch's 100", n)
	}
	if err := db.Exec(drop).Error; err != nil {
		t.Fatal(err)
	}
	writeLogs(t, s, second...)
	writeLogs(t, s, variedEntries(200, 3)...)
	if n := countLogs(t, db); n != 203 {
		t.Fatalf("%d rows, want 203", n)
	}
	checkStored(t, s, append(first, second...))
}

// The statements kept on a connection are finalized when it closes, so the
// database closes as it would without them: the last connection checkpoints
// and removes the WAL, which a connection left open by an unfinalized
// statement would keep. That holds for a pool that replaces its connection
// between batches too.
func TestRequestLogStoreClosesCleanly(t *testing.T) {
	testkit.SQLiteOnly(t) // WAL and the C-API statements of SQLite
	for _, replace := range []bool{false, true} {
		t.Run(fmt.Sprintf("replace=%v", replace), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "switchyard.db")
			db, err := models.Open(context.Background(), path, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if replace {
				sqlDB, err := db.DB()
				if err != nil {
					t.Fatal(err)
				}
				sqlDB.SetMaxIdleConns(0) // every connection closes when released
			}
			s := models.NewRequestLogStore(db)
			var all []services.RequestLogEntry
			for _, n := range []int{100, 5, 64} {
				batch := variedEntries(len(all), n)
				writeLogs(t, s, batch...)
				all = append(all, batch...)
			}
			if err := models.Close(db); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("WAL after close: %v", err)
			}
			db = testkit.OpenDBAt(t, path, time.Now)
			checkStored(t, models.NewRequestLogStore(db), all)
		})
	}
}

// A batch of large bodies goes through, and so do the small batches after it.
func TestRequestLogLargeBodies(t *testing.T) {
	s := newLogStore(t)
	big := variedEntries(0, 3)
	for i := range big {
		big[i].Bodies = &services.CapturedBodies{Request: &services.CapturedBody{Text: strings.Repeat(string(rune('a'+i)), 3<<20)}}
	}
	writeLogs(t, s, big...)
	small := variedEntries(3, 10)
	writeLogs(t, s, small...)
	checkStored(t, s, append(big, small...))
}

// The JSON columns hold exactly what encoding/json makes of the values (the
// store encodes them itself). Every field of AttemptRecord and CapturedBody is
// set, so a field added there and not to the store's encoder fails here.
func TestRequestLogJSONColumnsMatchEncodingJSON(t *testing.T) {
	db := testkit.OpenDB(t)
	s := models.NewRequestLogStore(db)
	odd := []string{
		"", "plain", `"quoted" \ back\slash /`, "<b>&amp;</b>", "\x00\x01\x07\x1f\x7f", "\b\f\n\r\t", "\u2028 \u2029",
		"bad \xff\xfe utf-8", "cut rune \xe2\x82", "\xed\xa0\x80 surrogate", "snow ☃ 雪 🎉", "\ufffd", strings.Repeat(`x"<`, 1000),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aZ09 \"\\/<>&'\x00\x1f\x7f\n\t\xc3\xa9\xe2\x80\xa8\xff\xf0\x9f\x8e\x89"
	for range 200 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		odd = append(odd, string(b))
	}
	var fill func(v reflect.Value, s string, n int)
	fill = func(v reflect.Value, s string, n int) {
		for i := range v.NumField() {
			switch f := v.Field(i); f.Kind() {
			case reflect.String:
				f.SetString(s + v.Type().Field(i).Name)
			case reflect.Int, reflect.Int64:
				f.SetInt(int64(n*31 + i - 40))
			case reflect.Bool:
				f.SetBool((n+i)%2 == 0)
			case reflect.Slice: // nil, empty or two filled elements
				if k := (n + i) % 3; k > 0 {
					f.Set(reflect.MakeSlice(f.Type(), 2*(k-1), 2*(k-1)))
					for j := range f.Len() {
						fill(f.Index(j), s, n+j)
					}
				}
			default:
				t.Fatalf("%s.%s: no test value for %s", v.Type(), v.Type().Field(i).Name, f.Kind())
			}
		}
	}
	var batch []services.RequestLogEntry
	for i, str := range odd {
		e := services.RequestLogEntry{ID: fmt.Sprintf("j%03d", i), CreatedAt: logT0, Endpoint: "/v1/chat/completions",
			Warnings: []string{str, str + "2"}}
		for a := range i % 3 {
			var rec services.AttemptRecord
			fill(reflect.ValueOf(&rec).Elem(), str, i+a)
			e.AttemptLog = append(e.AttemptLog, rec)
		}
		if i%3 != 1 {
			e.Waits = make([]services.WaitRecord, i%3)
			for w := range e.Waits {
				fill(reflect.ValueOf(&e.Waits[w]).Elem(), str, i+w)
			}
		}
		if i%3 == 2 {
			e.Skips = make([]services.SkipRecord, 1+i%2)
			for k := range e.Skips {
				fill(reflect.ValueOf(&e.Skips[k]).Elem(), str, i+k)
			}
		}
		if i%4 != 3 {
			e.Bodies = &services.CapturedBodies{}
			bodies := []**services.CapturedBody{&e.Bodies.Request, &e.Bodies.UpstreamRequest, &e.Bodies.Response}
			for k, p := range bodies {
				if (i+k)%3 != 0 {
					*p = &services.CapturedBody{}
					fill(reflect.ValueOf(*p).Elem(), str, i+k)
				}
			}
		}
		batch = append(batch, e)
	}
	writeLogs(t, s, batch...)
	for _, e := range batch {
		var got struct {
			AttemptLog string
			Warnings   string
			Bodies     *string
			Waits      *string
			Skips      *string
		}
		if err := db.Raw("SELECT attempt_log, warnings, bodies, waits, skips FROM request_logs WHERE id = ?", e.ID).Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		attempts := e.AttemptLog
		if attempts == nil {
			attempts = []services.AttemptRecord{}
		}
		for _, c := range []struct {
			col string
			got *string
			v   any
		}{{"attempt_log", &got.AttemptLog, attempts}, {"warnings", &got.Warnings, e.Warnings}, {"bodies", got.Bodies, e.Bodies},
			{"waits", got.Waits, e.Waits}, {"skips", got.Skips, e.Skips}} {
			want, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if c.got == nil {
				if c.col == "waits" && e.Waits != nil || c.col == "bodies" && e.Bodies != nil || c.col == "skips" && len(e.Skips) > 0 {
					t.Errorf("%s %s is NULL, want %s", e.ID, c.col, want)
				}
				continue
			}
			if *c.got != string(want) {
				t.Errorf("%s %s:\n got %q\nwant %q", e.ID, c.col, *c.got, want)
			}
		}
	}
}
