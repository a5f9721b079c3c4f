package routing

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"unicode/utf8"
)

// CacheOptimized keeps one prompt prefix on one candidate so provider
// prompt caches stay warm (§10.17), by rendezvous hashing: each candidate
// scores the big-endian uint64 of the first 8 bytes of
// SHA-256(K ‖ 0x00 ‖ identity) and the scores sort descending (ties
// configured order), so removing a candidate moves only the keys it held.
// Identity is "<provider>/<model>@<connectionId>", or "combo:<name>" for a
// reference entry. Without a key (Request.CacheKey "") the order is the
// configured one.
//
// It is a candidate-level strategy: the caller expands each model entry
// without a pinned connection into one Entry per eligible connection
// (ConnectionID set), in configured order.
type CacheOptimized struct{}

// Name returns "cache-optimized".
func (CacheOptimized) Name() string { return NameCacheOptimized }

// Describe returns the builder line.
func (CacheOptimized) Describe() string { return describe(NameCacheOptimized) }

// Order sorts by rendezvous score.
func (CacheOptimized) Order(req Request, entries []Entry) []Entry {
	if req.CacheKey == "" {
		return configured(entries)
	}
	type keyed struct {
		pos   int
		score uint64
	}
	var buf [stackKeys]keyed
	ks := keysIn(buf[:], len(entries))
	for i, e := range entries {
		if e.Available {
			ks = append(ks, keyed{pos: i, score: entryScore(req.CacheKey, &e)})
		}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmp.Compare(b.score, a.score) })
	out := make([]Entry, 0, len(entries))
	for _, k := range ks {
		out = append(out, entries[k.pos])
	}
	return appendUnavailable(out, entries)
}

// entryScore is CacheScore(key, CandidateIdentity(e)) without building the
// identity string: the hash input is assembled in a stack buffer.
func entryScore(key string, e *Entry) uint64 {
	var stack [256]byte
	b := append(append(stack[:0], key...), 0)
	if e.IsRef() {
		b = append(append(b, "combo:"...), e.ComboRef...)
	} else {
		b = append(append(append(append(append(b, e.Provider...), '/'), e.Model...), '@'), e.ConnectionID...)
	}
	return scoreOf(b)
}

func scoreOf(b []byte) uint64 {
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}

// CacheAffinityKey builds the affinity key K of §10.17: "pck:" + the body's
// prompt_cache_key when it is 1–256 characters; else "sess:" + the session
// key; else, when prefixJSON (the canonical JSON of system text, tools and
// the first user message content) is non-empty and at least minPrefixBytes
// long (cache.minPrefixBytes, default 1024), "pfx:" + hex SHA-256 of it;
// else "" (no key: configured order).
func CacheAffinityKey(promptCacheKey, sessionKey string, prefixJSON []byte, minPrefixBytes int) string {
	if n := utf8.RuneCountInString(promptCacheKey); n >= 1 && n <= 256 {
		return "pck:" + promptCacheKey
	}
	if sessionKey != "" {
		return "sess:" + sessionKey
	}
	if len(prefixJSON) > 0 && len(prefixJSON) >= minPrefixBytes {
		sum := sha256.Sum256(prefixJSON)
		return "pfx:" + hex.EncodeToString(sum[:])
	}
	return ""
}
