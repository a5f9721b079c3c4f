package routing

import (
	"slices"
	"testing"
)

func quotaShareCands(w1, w2, w3 int) []Entry {
	return []Entry{
		{Index: 0, ID: "e1", Provider: "p", Model: "m", ConnectionID: "c1", Weight: w1, Available: true},
		{Index: 1, ID: "e2", Provider: "p", Model: "m", ConnectionID: "c2", Weight: w2, Available: true},
		{Index: 2, ID: "e3", Provider: "p", Model: "m", ConnectionID: "c3", Weight: w3, Available: true},
	}
}

func connsOf(order []Entry) []string {
	out := make([]string, len(order))
	for i, e := range order {
		out[i] = e.ConnectionID
	}
	return out
}

// Case 1 of 30-routing §10.20: weights 2:1:1, idle → c1 c2 c3 c1 c1 c2 c3 c1
// and the deficits are back to zero after eight requests.
func TestQuotaShareSequence(t *testing.T) {
	q := &QuotaShare{}
	req := Request{ComboID: "cb"}
	var got []string
	for i := range 8 {
		order := q.Order(req, quotaShareCands(2, 1, 1))
		if i == 0 && !slices.Equal(connsOf(order), []string{"c1", "c2", "c3"}) {
			t.Fatalf("request 1 order = %v, want [c1 c2 c3]", connsOf(order))
		}
		got = append(got, order[0].ConnectionID)
	}
	want := []string{"c1", "c2", "c3", "c1", "c1", "c2", "c3", "c1"}
	if !slices.Equal(got, want) {
		t.Fatalf("chosen = %v, want %v", got, want)
	}
	for k, d := range q.deficits["cb"] {
		if d > 1e-9 || d < -1e-9 {
			t.Errorf("deficit %s = %v after 8 requests, want 0", k, d)
		}
	}
}

// Case 2: c1 has 2 in flight (no cap) → the less busy of the top two wins.
func TestQuotaShareFewerInFlight(t *testing.T) {
	q := &QuotaShare{}
	busy := map[string]int{"c1": 2}
	req := Request{ComboID: "cb", InFlight: func(id string) int { return busy[id] }}
	if got := connsOf(q.Order(req, quotaShareCands(2, 1, 1))); !slices.Equal(got, []string{"c2", "c1", "c3"}) {
		t.Fatalf("order = %v, want [c2 c1 c3]", got)
	}
}

// Case 3: c1 at max_concurrent 2 → set aside; c2 and c3 tie → c2.
func TestQuotaShareSaturatedDemoted(t *testing.T) {
	q := &QuotaShare{}
	busy := map[string]int{"c1": 2}
	req := Request{ComboID: "cb", InFlight: func(id string) int { return busy[id] },
		MaxConcurrent: func(id string) int {
			if id == "c1" {
				return 2
			}
			return 0
		}}
	if got := connsOf(q.Order(req, quotaShareCands(2, 1, 1))); !slices.Equal(got, []string{"c2", "c3", "c1"}) {
		t.Fatalf("order = %v, want [c2 c3 c1]", got)
	}
}

// Unavailable candidates accrue nothing and go last.
func TestQuotaShareUnavailableAccruesNothing(t *testing.T) {
	q := &QuotaShare{}
	cs := quotaShareCands(1, 1, 1)
	cs[0].Available = false
	got := connsOf(q.Order(Request{ComboID: "cb"}, cs))
	if !slices.Equal(got, []string{"c2", "c3", "c1"}) {
		t.Fatalf("order = %v, want [c2 c3 c1]", got)
	}
	if _, ok := q.deficits["cb"][candKey{"e1", "c1"}]; ok {
		t.Fatal("an unavailable candidate accrued a deficit")
	}
}
