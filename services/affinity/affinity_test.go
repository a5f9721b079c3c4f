package affinity_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services/affinity"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func body(t *testing.T, js string) map[string]json.RawMessage {
	t.Helper()
	if js == "" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatalf("bad test body %s: %v", js, err)
	}
	return m
}

func TestSessionKey(t *testing.T) {
	long := strings.Repeat("a", 181)
	exact := strings.Repeat("b", 180)
	bigText := strings.Repeat("é", 5000)
	tests := []struct {
		name             string
		headers          map[string]string
		body             string
		wantKey, wantSrc string
		wantOK           bool
	}{
		{"nothing", nil, `{"model":"x"}`, "", "", false},
		{"nil body, no headers", nil, "", "", "", false},
		{"switchyard header", map[string]string{"X-Switchyard-Session": "s1"}, "", "header:s1", "header", true},
		{"codex header", map[string]string{"x-codex-session-id": "c-1"}, "", "header:c-1", "header", true},
		{"session-id header", map[string]string{"X-Session-Id": "s1"}, "", "header:s1", "header", true},
		{"switchyard header wins over codex and session-id",
			map[string]string{"X-Switchyard-Session": "a", "x-codex-session-id": "b", "X-Session-Id": "c"}, "", "header:a", "header", true},
		{"codex wins over session-id", map[string]string{"x-codex-session-id": "b", "X-Session-Id": "c"}, "", "header:b", "header", true},
		{"blank header falls through", map[string]string{"X-Switchyard-Session": "   ", "X-Session-Id": "c"}, "", "header:c", "header", true},
		{"header wins over body", map[string]string{"X-Session-Id": "h"}, `{"metadata":{"session_id":"m"}}`, "header:h", "header", true},
		{"header trimmed", map[string]string{"X-Session-Id": "  s1\t"}, "", "header:s1", "header", true},
		{"metadata.session_id", nil, `{"metadata":{"session_id":"m1","sessionId":"m2"},"conversation_id":"c"}`, "metadata:m1", "metadata", true},
		{"metadata.sessionId", nil, `{"metadata":{"sessionId":"m2"},"conversation_id":"c"}`, "metadata:m2", "metadata", true},
		{"conversation_id", nil, `{"conversation_id":"conv_1","session_id":"s"}`, "conversation:conv_1", "conversation", true},
		{"session_id", nil, `{"session_id":"sess.1","metadata":{"user_id":"u"}}`, "session:sess.1", "session", true},
		{"metadata.user_id", nil, `{"metadata":{"user_id":"user:42"},"prompt_cache_key":"p"}`, "metadata-user:user:42", "metadata-user", true},
		{"prompt_cache_key", nil, `{"prompt_cache_key":"pck","messages":[{"role":"user","content":"hi"}]}`, "prompt-cache:pck", "prompt-cache", true},
		{"number value kept as literal", nil, `{"conversation_id":12345}`, "conversation:12345", "conversation", true},
		{"null, bool and object values skipped", nil, `{"conversation_id":null,"session_id":true,"prompt_cache_key":{"a":1},"metadata":{"user_id":"u1"}}`, "metadata-user:u1", "metadata-user", true},
		{"empty string skipped", nil, `{"metadata":{"session_id":"  "},"session_id":"s2"}`, "session:s2", "session", true},
		{"metadata not an object", nil, `{"metadata":"x","session_id":"s3"}`, "session:s3", "session", true},
		{"value trimmed", nil, `{"session_id":"  s4  "}`, "session:s4", "session", true},
		{"180 chars kept", nil, `{"session_id":"` + exact + `"}`, "session:" + exact, "session", true},
		{"181 chars hashed", nil, `{"session_id":"` + long + `"}`, "session:sha256:" + hexSHA(long), "session", true},
		{"space hashed", map[string]string{"X-Session-Id": "a b"}, "", "header:sha256:" + hexSHA("a b"), "header", true},
		{"slash hashed", nil, `{"session_id":"a/b"}`, "session:sha256:" + hexSHA("a/b"), "session", true},
		{"unicode hashed", nil, `{"conversation_id":"café"}`, "conversation:sha256:" + hexSHA("café"), "conversation", true},
		{"hash of trimmed value", nil, `{"session_id":"  a b  "}`, "session:sha256:" + hexSHA("a b"), "session", true},
		{"chat string content", nil, `{"messages":[{"role":"system","content":"sys"},{"role":"user","content":"Hello"}]}`,
			"input:sha256:" + hexSHA("Hello"), "input", true},
		{"chat text parts joined, image skipped", nil,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]}]}`,
			"input:sha256:" + hexSHA("a\nb"), "input", true},
		{"first user message only", nil,
			`{"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"r"},{"role":"user","content":"second"}]}`,
			"input:sha256:" + hexSHA("first"), "input", true},
		{"user message without text skipped", nil,
			`{"messages":[{"role":"user","content":[{"type":"image","source":{}}]},{"role":"user","content":"later"}]}`,
			"input:sha256:" + hexSHA("later"), "input", true},
		{"anthropic tool_result skipped", nil,
			`{"messages":[{"role":"user","content":[{"type":"tool_result","content":"r"},{"type":"text","text":"q"}]}]}`,
			"input:sha256:" + hexSHA("q"), "input", true},
		{"short input still hashed", nil, `{"input":"hi"}`, "input:sha256:" + hexSHA("hi"), "input", true},
		{"responses input string trimmed", nil, `{"input":"  hi  "}`, "input:sha256:" + hexSHA("hi"), "input", true},
		{"responses input items", nil,
			`{"input":[{"type":"function_call_output","output":"x"},{"type":"message","role":"user","content":[{"type":"input_text","text":"q1"}]}]}`,
			"input:sha256:" + hexSHA("q1"), "input", true},
		{"responses item without type", nil, `{"input":[{"role":"user","content":"q2"}]}`, "input:sha256:" + hexSHA("q2"), "input", true},
		{"input cut at 4096 characters", nil, `{"input":"` + bigText + `"}`, "input:sha256:" + hexSHA(strings.Repeat("é", 4096)), "input", true},
		{"no user text", nil, `{"messages":[{"role":"system","content":"s"}]}`, "", "", false},
		{"malformed messages", nil, `{"messages":"oops"}`, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			key, src, ok := affinity.SessionKey(h, body(t, tc.body))
			if key != tc.wantKey || src != tc.wantSrc || ok != tc.wantOK {
				t.Fatalf("SessionKey = (%q, %q, %v), want (%q, %q, %v)", key, src, ok, tc.wantKey, tc.wantSrc, tc.wantOK)
			}
		})
	}
}

func TestPinID(t *testing.T) {
	id := affinity.PinID("k1", "openai", "header:s1")
	if want := hexSHA("k1\x00openai\x00header:s1"); id != want {
		t.Fatalf("PinID = %s, want %s", id, want)
	}
	if len(id) != 64 || strings.ToLower(id) != id {
		t.Fatalf("PinID %q is not 64 lowercase hex", id)
	}
	// A7: one session id from two client keys → two independent pins.
	if affinity.PinID("k2", "openai", "header:s1") == id {
		t.Fatal("two keys share a pin id")
	}
	if affinity.PinID("k1", "anthropic", "header:s1") == id {
		t.Fatal("two providers share a pin id")
	}
	// The NUL separator keeps field boundaries apart.
	if affinity.PinID("ab", "c", "d") == affinity.PinID("a", "bc", "d") {
		t.Fatal("field boundaries collide")
	}
}

// memStore is an affinity.Store in memory that counts writes.
type memStore struct {
	mu    sync.Mutex
	rows  map[string]affinity.Pin
	saves int
	fail  error
}

func newMemStore() *memStore { return &memStore{rows: map[string]affinity.Pin{}} }

func (m *memStore) LoadPins(context.Context) ([]affinity.Pin, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []affinity.Pin
	for _, p := range m.rows {
		out = append(out, p)
	}
	return out, nil
}

func (m *memStore) SavePin(_ context.Context, p affinity.Pin) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.saves++
	m.rows[p.ID] = p
	return nil
}

func (m *memStore) DeletePin(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, id)
	return nil
}

func (m *memStore) DeletePinsForConnection(_ context.Context, conn string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, p := range m.rows {
		if p.ConnectionID == conn {
			delete(m.rows, id)
			n++
		}
	}
	return n, nil
}

func (m *memStore) DeleteExpired(_ context.Context, now time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, p := range m.rows {
		if !now.Before(p.ExpiresAt) {
			delete(m.rows, id)
			n++
		}
	}
	return n, nil
}

func (m *memStore) row(id string) (affinity.Pin, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.rows[id]
	return p, ok
}

func (m *memStore) state() (rows, saves int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rows), m.saves
}

// ttlVar is a settable TTL source.
type ttlVar struct {
	mu sync.Mutex
	d  time.Duration
}

func (v *ttlVar) get() time.Duration  { v.mu.Lock(); defer v.mu.Unlock(); return v.d }
func (v *ttlVar) set(d time.Duration) { v.mu.Lock(); v.d = d; v.mu.Unlock() }

func lookup(t *testing.T, p *affinity.Pins, id, want string) {
	t.Helper()
	got, ok := p.Lookup(id)
	if want == "" {
		if ok {
			t.Fatalf("Lookup(%s) = %q, want nothing", id[:8], got)
		}
		return
	}
	if !ok || got != want {
		t.Fatalf("Lookup(%s) = (%q, %v), want %q", id[:8], got, ok, want)
	}
}

func TestPinsLifecycle(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	store := newMemStore()
	pins := affinity.NewPins(clock, func() time.Duration { return affinity.DefaultTTL }, store)
	id := affinity.PinID("k1", "openai", "header:s1")

	lookup(t, pins, id, "")
	if err := pins.Pin(ctx, id, "k1", "openai", "c2"); err != nil {
		t.Fatal(err)
	}
	lookup(t, pins, id, "c2")
	row, ok := store.row(id)
	if !ok || row.ConnectionID != "c2" || row.KeyID != "k1" || row.Provider != "openai" ||
		!row.CreatedAt.Equal(t0) || !row.ExpiresAt.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("stored row = %+v", row)
	}
	if pins.Count() != 1 {
		t.Fatalf("Count = %d, want 1", pins.Count())
	}

	// A2: failover drops the pin, the success re-pins, the next request follows.
	if err := pins.Drop(ctx, id); err != nil {
		t.Fatal(err)
	}
	lookup(t, pins, id, "")
	if _, ok := store.row(id); ok {
		t.Fatal("dropped pin still stored")
	}
	if err := pins.Pin(ctx, id, "k1", "openai", "c3"); err != nil {
		t.Fatal(err)
	}
	lookup(t, pins, id, "c3")

	// A change of connection is written at once.
	clock.Advance(time.Second)
	if err := pins.Pin(ctx, id, "k1", "openai", "c1"); err != nil {
		t.Fatal(err)
	}
	if row, _ := store.row(id); row.ConnectionID != "c1" {
		t.Fatalf("moved pin stored on %s, want c1", row.ConnectionID)
	}

	// DropConnection removes every pin of the connection only.
	other := affinity.PinID("k1", "openai", "header:s2")
	third := affinity.PinID("k2", "openai", "header:s1")
	_ = pins.Pin(ctx, other, "k1", "openai", "c1")
	_ = pins.Pin(ctx, third, "k2", "openai", "c2")
	n, err := pins.DropConnection(ctx, "c1")
	if err != nil || n != 2 {
		t.Fatalf("DropConnection = (%d, %v), want 2 rows", n, err)
	}
	lookup(t, pins, id, "")
	lookup(t, pins, other, "")
	lookup(t, pins, third, "c2")
	if rows, _ := store.state(); rows != 1 {
		t.Fatalf("%d rows stored, want 1", rows)
	}

	if _, err := pins.ClearAll(ctx); err != nil {
		t.Fatal(err)
	}
	lookup(t, pins, third, "")
	if rows, _ := store.state(); rows != 0 || pins.Count() != 0 {
		t.Fatalf("after Clear: %d rows, Count %d", rows, pins.Count())
	}
}

// ClearAll (Clear all pins, DELETE /api/resilience/affinity) drops every
// pin and reports how many were live: an expired pin is not counted.
func TestPinsClearAllCounts(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	store := newMemStore()
	pins := affinity.NewPins(clock, func() time.Duration { return 100 * time.Second }, store)
	if !pins.On() {
		t.Fatal("a TTL of 100 s is not on")
	}
	_ = pins.Pin(ctx, affinity.PinID("k1", "openai", "header:old"), "k1", "openai", "c1")
	clock.Advance(100 * time.Second)
	for _, s := range []string{"a", "b"} {
		if err := pins.Pin(ctx, affinity.PinID("k1", "openai", "header:"+s), "k1", "openai", "c1"); err != nil {
			t.Fatal(err)
		}
	}
	n, err := pins.ClearAll(ctx)
	if err != nil || n != 2 {
		t.Fatalf("ClearAll = (%d, %v), want 2 live pins", n, err)
	}
	if rows, _ := store.state(); rows != 0 || pins.Count() != 0 {
		t.Fatalf("after ClearAll: %d rows, Count %d", rows, pins.Count())
	}
	if n, err := pins.ClearAll(ctx); err != nil || n != 0 {
		t.Fatalf("second ClearAll = (%d, %v)", n, err)
	}
	if affinity.NewPins(clock, func() time.Duration { return 0 }, store).On() {
		t.Fatal("a TTL of 0 is on")
	}
}

// A3: a pin created at t=0 and read at t=900 s is expired, deleted, not returned.
func TestPinsExpireLazily(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	store := newMemStore()
	pins := affinity.NewPins(clock, func() time.Duration { return 900 * time.Second }, store)
	id := affinity.PinID("k1", "openai", "header:s1")
	if err := pins.Pin(ctx, id, "k1", "openai", "c1"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(900*time.Second - time.Millisecond)
	lookup(t, pins, id, "c1")
	clock.Advance(time.Millisecond)
	if pins.Count() != 0 {
		t.Fatalf("Count = %d at expiry, want 0", pins.Count())
	}
	lookup(t, pins, id, "")
	if _, ok := store.row(id); ok {
		t.Fatal("expired row not deleted on read")
	}
}

func TestPinsShorterTTLAppliesToOldPins(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	ttl := &ttlVar{d: 900 * time.Second}
	pins := affinity.NewPins(clock, ttl.get, newMemStore())
	id := affinity.PinID("k1", "openai", "header:s1")
	_ = pins.Pin(ctx, id, "k1", "openai", "c1")
	clock.Advance(2 * time.Minute)
	ttl.set(time.Minute)
	lookup(t, pins, id, "")
}

// Touches on the same connection extend the pin in memory at once but
// rewrite its row at most once per 60 s.
func TestPinsTouchesCoalesced(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	store := newMemStore()
	pins := affinity.NewPins(clock, func() time.Duration { return 900 * time.Second }, store)
	id := affinity.PinID("k1", "openai", "header:s1")
	_ = pins.Pin(ctx, id, "k1", "openai", "c1")
	for range 59 {
		clock.Advance(time.Second)
		if err := pins.Pin(ctx, id, "k1", "openai", "c1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, saves := store.state(); saves != 1 {
		t.Fatalf("%d writes within 59 s, want 1", saves)
	}
	if row, _ := store.row(id); !row.LastUsedAt.Equal(t0) {
		t.Fatalf("row touched early: %v", row.LastUsedAt)
	}
	clock.Advance(time.Second) // t=60 s
	_ = pins.Pin(ctx, id, "k1", "openai", "c1")
	if _, saves := store.state(); saves != 2 {
		t.Fatalf("%d writes at 60 s, want 2", saves)
	}
	row, _ := store.row(id)
	if !row.LastUsedAt.Equal(t0.Add(time.Minute)) || !row.ExpiresAt.Equal(t0.Add(time.Minute+900*time.Second)) ||
		!row.CreatedAt.Equal(t0) {
		t.Fatalf("touched row = %+v", row)
	}
	// Memory follows every touch: alive 900 s after the last one at 89 s.
	for range 29 {
		clock.Advance(time.Second)
		_ = pins.Pin(ctx, id, "k1", "openai", "c1")
	}
	clock.Advance(899 * time.Second)
	lookup(t, pins, id, "c1")
}

// The sweep rewrites a live pin whose row lags behind coalesced touches
// before deleting expired rows, and drops dead pins from memory.
func TestPinsSweep(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	store := newMemStore()
	pins := affinity.NewPins(clock, func() time.Duration { return 100 * time.Second }, store)
	live := affinity.PinID("k1", "openai", "header:live")
	dead := affinity.PinID("k1", "openai", "header:dead")
	_ = pins.Pin(ctx, live, "k1", "openai", "c1")
	_ = pins.Pin(ctx, dead, "k1", "openai", "c2")
	clock.Advance(50 * time.Second)
	_ = pins.Pin(ctx, live, "k1", "openai", "c1") // coalesced: row still ends at 100 s
	clock.Advance(60 * time.Second)               // t=110 s
	n, err := pins.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = (%d, %v), want 1 row deleted", n, err)
	}
	if _, ok := store.row(dead); ok {
		t.Fatal("dead row survived the sweep")
	}
	row, ok := store.row(live)
	if !ok || !row.ExpiresAt.Equal(t0.Add(150*time.Second)) {
		t.Fatalf("live row = %+v, %v; want rewritten to expire at 150 s", row, ok)
	}
	lookup(t, pins, live, "c1")
}

// A4: TTL 0 → no row written, existing pins ignored.
func TestPinsTTLZeroIsOff(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	store := newMemStore()
	ttl := &ttlVar{d: 900 * time.Second}
	pins := affinity.NewPins(clock, ttl.get, store)
	old := affinity.PinID("k1", "openai", "header:old")
	_ = pins.Pin(ctx, old, "k1", "openai", "c1")

	ttl.set(0)
	lookup(t, pins, old, "")
	id := affinity.PinID("k1", "openai", "header:new")
	if err := pins.Pin(ctx, id, "k1", "openai", "c2"); err != nil {
		t.Fatal(err)
	}
	if rows, saves := store.state(); rows != 1 || saves != 1 {
		t.Fatalf("with TTL 0: %d rows, %d writes; want the old row only", rows, saves)
	}
	lookup(t, pins, id, "")
	if pins.Count() != 0 {
		t.Fatalf("Count = %d with TTL 0", pins.Count())
	}
	// Switched on again within its lifetime, the old pin is honoured.
	ttl.set(900 * time.Second)
	lookup(t, pins, old, "c1")
}

func TestPinsStoreErrorReturned(t *testing.T) {
	store := newMemStore()
	store.fail = errors.New("disk full")
	pins := affinity.NewPins(testkit.NewFakeClock(t0), func() time.Duration { return time.Minute }, store)
	id := affinity.PinID("k1", "openai", "header:s1")
	if err := pins.Pin(context.Background(), id, "k1", "openai", "c1"); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Pin error = %v", err)
	}
	lookup(t, pins, id, "c1") // memory still serves the pin
}

// Pins survive a restart through SQLite; expired rows are not restored.
func TestPinsRestoreAfterRestart(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	path := filepath.Join(t.TempDir(), "switchyard.db")
	ttl := func() time.Duration { return 900 * time.Second }

	db1 := testkit.OpenDBAt(t, path, clock.Now)
	pins := affinity.NewPins(clock, ttl, models.NewAffinityStore(db1))
	if err := pins.Load(ctx); err != nil {
		t.Fatal(err)
	}
	a := affinity.PinID("k1", "openai", "header:a")
	b := affinity.PinID("k1", "openai", "header:b")
	_ = pins.Pin(ctx, a, "k1", "openai", "c1")
	clock.Advance(600 * time.Second)
	if err := pins.Pin(ctx, b, "k1", "openai", "c2"); err != nil {
		t.Fatal(err)
	}
	if err := models.Close(db1); err != nil {
		t.Fatal(err)
	}

	clock.Advance(400 * time.Second) // t=1000 s: a expired at 900 s, b lives until 1500 s
	db2 := testkit.OpenDBAt(t, path, clock.Now)
	store2 := models.NewAffinityStore(db2)
	restored := affinity.NewPins(clock, ttl, store2)
	if err := restored.Load(ctx); err != nil {
		t.Fatal(err)
	}
	lookup(t, restored, a, "")
	lookup(t, restored, b, "c2")
	rows, err := store2.LoadPins(ctx)
	if err != nil || len(rows) != 1 || rows[0].ID != b {
		t.Fatalf("rows after restore = %+v, %v; want only b", rows, err)
	}
}

// A5: 16 concurrent first requests of one session → one pin row.
func TestPinsConcurrentFirstRequestsOneRow(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(t0)
	db := testkit.OpenDBAt(t, filepath.Join(t.TempDir(), "switchyard.db"), clock.Now)
	store := models.NewAffinityStore(db)
	pins := affinity.NewPins(clock, func() time.Duration { return affinity.DefaultTTL }, store)
	id := affinity.PinID("k1", "openai", "header:s1")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pins.Lookup(id)
			errs <- pins.Pin(ctx, id, "k1", "openai", []string{"c1", "c2"}[i%2])
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, err := store.LoadPins(ctx)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%d rows (%v), want 1", len(rows), err)
	}
	got, _ := pins.Lookup(id)
	if rows[0].ConnectionID != got {
		t.Fatalf("row on %s, memory on %s", rows[0].ConnectionID, got)
	}
}

// Codex's session-id and Claude Code's x-claude-code-session-id are session
// keys, after the headers that precede them (10-gateway-api §8.1).
func TestSessionKeyAgentHeaders(t *testing.T) {
	for _, c := range []struct {
		headers map[string]string
		want    string
	}{
		{map[string]string{"session-id": "codex-1"}, "header:codex-1"},
		{map[string]string{"x-claude-code-session-id": "cc-1"}, "header:cc-1"},
		{map[string]string{"x-claude-code-session-id": "cc-1", "X-Session-Id": "s-1"}, "header:s-1"},
		{map[string]string{"X-Session-Id": "s-1", "session-id": "codex-1"}, "header:codex-1"},
		{map[string]string{"session-id": "codex-1", "x-codex-session-id": "old"}, "header:old"},
	} {
		h := http.Header{}
		for k, v := range c.headers {
			h.Set(k, v)
		}
		if got, _, ok := affinity.SessionKey(h, nil); !ok || got != c.want {
			t.Fatalf("%v: %q, want %q", c.headers, got, c.want)
		}
	}
}
