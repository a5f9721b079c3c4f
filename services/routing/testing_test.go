package routing

// Test doubles and spec-table views of the strategies: the tests compare
// them with 30-routing; nothing in production needs them.

import (
	"context"
	"slices"
	"sync"
)

// MemoryLKGPStore is an LKGPStore in memory, safe for concurrent use. It
// survives a MemoryState, not the process.
type MemoryLKGPStore struct {
	mu   sync.Mutex
	recs map[string]LKGPRecord
}

var _ LKGPStore = (*MemoryLKGPStore)(nil)

// NewMemoryLKGPStore returns an empty store.
func NewMemoryLKGPStore() *MemoryLKGPStore {
	return &MemoryLKGPStore{recs: map[string]LKGPRecord{}}
}

// Load returns every record, in no particular order.
func (m *MemoryLKGPStore) Load(ctx context.Context) ([]LKGPRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]LKGPRecord, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, r)
	}
	return out, nil
}

// Save stores rec under rec.ComboID.
func (m *MemoryLKGPStore) Save(ctx context.Context, rec LKGPRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[rec.ComboID] = rec
	return nil
}

// Delete removes the record of comboID.
func (m *MemoryLKGPStore) Delete(ctx context.Context, comboID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, comboID)
	return nil
}

// AutoFactors returns the factor names auto.weights accepts, in the order
// of §10.14.
func AutoFactors() []string { return slices.Clone(autoFactors) }

// DefaultAutoWeights returns the default weights of §10.14.
func DefaultAutoWeights() map[string]float64 { return weightMap(defaultAutoWeights) }

// ModePackWeights returns the weights of a mode pack.
func ModePackWeights(pack string) (map[string]float64, bool) {
	w, ok := modePacks[pack]
	if !ok {
		return nil, false
	}
	return weightMap(w), true
}

func weightMap(w weightVec) map[string]float64 {
	m := make(map[string]float64, numFactors)
	for i, f := range autoFactors {
		m[f] = w[i]
	}
	return m
}

// AutoScores returns the auto evaluation of every available candidate of
// entries, in configured order (diagnostics and tests). It draws nothing
// and advances no counter.
func AutoScores(req Request, entries []Entry) []AutoScore {
	cands := autoScores(req, entries, new(autoScratch))
	out := make([]AutoScore, len(cands))
	for i, c := range cands {
		m := make(map[string]float64, numFactors)
		for j, f := range autoFactors {
			m[f] = c.f[j]
		}
		out[i] = AutoScore{Pos: c.pos, Factors: m, Score: c.score}
	}
	return out
}

// CandidateIdentity is the identity cache-optimized hashes:
// "<provider>/<model>@<connectionId>", or "combo:<name>" for a reference
// entry.
func CandidateIdentity(e Entry) string {
	if e.IsRef() {
		return "combo:" + e.ComboRef
	}
	return e.Provider + "/" + e.Model + "@" + e.ConnectionID
}

// CacheScore is the rendezvous score of a candidate identity for key K:
// the big-endian uint64 of the first 8 bytes of SHA-256(K ‖ 0x00 ‖ identity).
func CacheScore(key, identity string) uint64 {
	var stack [256]byte
	return scoreOf(append(append(append(stack[:0], key...), 0), identity...))
}

// StatsMap is a Stats backed by a map.
type StatsMap map[string]EntryStats

// EntryStats returns m[entryID].
func (m StatsMap) EntryStats(entryID string) (EntryStats, bool) {
	s, ok := m[entryID]
	return s, ok
}

var _ Stats = StatsMap(nil)

// AutoScore is one candidate's auto evaluation: its position in the input,
// each factor's value and the weighted score.
type AutoScore struct {
	Pos     int
	Factors map[string]float64
	Score   float64
}
