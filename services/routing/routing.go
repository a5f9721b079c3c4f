package routing

import (
	"math/rand/v2"
	"sync"
	"time"

	"switchyard/services"
	"switchyard/services/settings"
)

// Entry is one element a strategy orders: a combo entry (entry-level
// strategies) or one (entry, connection) candidate (candidate-level ones,
// 30-routing §1), with what the strategies read.
//
// Order treats the position in the slice it receives as the configured
// order; the caller builds the slice in configured order (entries by their
// position in targets; candidates then by connection priority and id).
type Entry struct {
	// Index is the entry's configured position in the combo's targets.
	// Candidates of one entry share it. Strategies carry it through.
	Index int
	// ID is the combo entry id (stable across edits and reorders); all
	// per-entry state is keyed by it.
	ID string
	// Provider and Model name a model entry; both empty for a reference entry.
	Provider, Model string
	// ConnectionID is the pinned connection of the entry, or the connection
	// of a candidate; "" when the account selector chooses it.
	ConnectionID string
	// ComboRef is the referenced combo's name for a reference entry
	// (kind "combo"), "" for a model entry. Reference entries have unknown
	// price and context window (§8.2).
	ComboRef string
	// Weight is the entry's weight, 0–100 (weighted).
	Weight int
	// Available is the availability snapshot of §5, taken once per request.
	// Every strategy puts the available elements first, in its own order,
	// and the unavailable ones last, in configured order (§10).
	Available bool
}

// IsRef reports whether e is a reference to another combo.
func (e Entry) IsRef() bool { return e.ComboRef != "" }

// Request is what a strategy may read about one client request.
type Request struct {
	// ComboID keys the per-combo state (tickets, decks, counters, LKGP).
	ComboID string
	// Now is the request's clock reading (the quota strategies compare
	// window resets with it).
	Now time.Time
	// PromptTokens is the prompt estimate of §10.16, ⌈bytes/4⌉ (see
	// EstimateTokens); MaxOutputTokens is max_tokens ?? max_completion_tokens
	// ?? max_output_tokens, 0 when the request sets none (then 4096).
	PromptTokens    int
	MaxOutputTokens int
	// CacheKey is the affinity key K of §10.17 with its prefix ("pck:…",
	// "sess:…", "pfx:…"; see CacheAffinityKey); "" = no key.
	CacheKey string
	// StickyRoundRobinLimit and StickyWeightedLimit are the effective combo
	// config keys of §3; values below 1 act as 1 (the default).
	StickyRoundRobinLimit int
	StickyWeightedLimit   int
	// Stats gives read-only live dispatch metrics per entry id (§8.1);
	// nil means every metric is unknown.
	Stats Stats
	// Prices returns the $ per 1M tokens of (provider, model) (§8.2); nil
	// or ok = false means unknown.
	Prices func(provider, model string) (p Price, ok bool)
	// Context returns the context window in tokens of (provider, model)
	// (§8.2); nil or ok = false means unknown.
	Context func(provider, model string) (tokens int, ok bool)
	// InFlight returns the dispatches in progress on a connection and
	// MaxConcurrent its max_concurrent (0 = no cap); quota-share (§10.20)
	// reads them. nil means 0.
	InFlight      func(connectionID string) int
	MaxConcurrent func(connectionID string) int

	// The fields below feed the candidate-level strategies reset-aware,
	// reset-window, headroom and auto; every one is optional.

	// Quota returns the long quota windows of a connection evaluated at Now
	// (§8.3; services/quota produces them). nil means every window is
	// unknown.
	Quota func(connectionID string) QuotaView
	// Config is the typed resetAware.*, resetWindow.* and auto.* part of the
	// combo's effective config (StrategyConfigFrom); nil means the defaults.
	Config *StrategyConfig
	// Signals returns auto's per-candidate inputs (breaker, latency p95 and
	// stddev, tier, available connections of the provider); nil means the
	// breaker from Stats and everything else unknown.
	Signals func(e Entry) CandidateSignals
	// Mode is the request's X-Switchyard-Mode header value ("" none); see
	// ModePackForHeader.
	Mode string
	// Task is the request's task for taskFit (TaskOf); "" counts as chat.
	Task string
	// TaskFitness is routing.autoTaskFitness.
	TaskFitness []settings.TaskFitnessRule
	// SessionEntryID is the entry named by the request's session preference
	// record (§6.4), "" when there is none (auto contextAffinity).
	SessionEntryID string
}

// DefaultMaxOutputTokens is added to the prompt estimate when the request
// names no output limit (§10.16).
const DefaultMaxOutputTokens = 4096

// RequiredTokens is the context a request needs: PromptTokens plus
// MaxOutputTokens (DefaultMaxOutputTokens when unset).
func (r Request) RequiredTokens() int {
	out := r.MaxOutputTokens
	if out <= 0 {
		out = DefaultMaxOutputTokens
	}
	return r.PromptTokens + out
}

// EstimateTokens is ⌈textBytes/4⌉, the prompt estimate of §10.16 from the
// UTF-8 bytes of the system prompt, message texts, tool-call arguments,
// tool results and the JSON of tools.
func EstimateTokens(textBytes int) int {
	if textBytes <= 0 {
		return 0
	}
	return (textBytes + 3) / 4
}

// Price is the pricing-table entry of one (provider, model), in $ per 1M
// tokens.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// BreakerState is a provider circuit-breaker state as p2c reads it. The
// values equal resilience.BreakerState's, so the caller converts with
// routing.BreakerState(s). The zero value counts as closed.
type BreakerState string

// Breaker states that change a p2c score (§10.6); OPEN makes an entry
// unavailable instead.
const (
	BreakerClosed   BreakerState = "CLOSED"
	BreakerDegraded BreakerState = "DEGRADED"
	BreakerHalfOpen BreakerState = "HALF_OPEN"
	BreakerOpen     BreakerState = "OPEN"
)

// EntryStats are the merged dispatch metrics of one entry (§8.1). The zero
// value means "nothing known".
type EntryStats struct {
	// Samples is the number of recorded outcomes; SuccessRate is unknown
	// when it is 0.
	Samples     int
	SuccessRate float64
	// OKSamples is the number of successful outcomes; AvgLatencyMs (mean over
	// them) is unknown when it is 0.
	OKSamples    int
	AvgLatencyMs float64
	// Breaker is the provider breaker state of the entry.
	Breaker BreakerState
}

// Stats looks up the live metrics of an entry by id. Implementations must be
// safe for concurrent use; Order only reads.
type Stats interface {
	EntryStats(entryID string) (EntryStats, bool)
}

// Strategy orders the entries of one request; failover is walking the
// result (STYLE §4).
type Strategy interface {
	// Name is the strategy's name of 30-routing §10.
	Name() string
	// Describe is the one-line explanation shown in the combo builder,
	// identical to services.LookupStrategy(Name()).Describe.
	Describe() string
	// Order returns a new slice holding every element of entries exactly
	// once: available ones first in the strategy's order, then unavailable
	// ones in configured order. entries is not modified. Order is called
	// once per request (per pass over the routing, §6.3 re-runs included):
	// it advances tickets, decks and RNG draws.
	Order(req Request, entries []Entry) []Entry
}

// ConnectionPreferrer is implemented by strategies that name a preferred
// connection for an entry, given to the account selector as step 3 of §11
// (lkgp). The gateway asks after Order, for the entry it is about to serve.
type ConnectionPreferrer interface {
	PreferredConnection(comboID, entryID string) (connectionID string, ok bool)
}

// Strategy names implemented here.
const (
	NamePriority         = "priority"
	NameWeighted         = "weighted"
	NameRoundRobin       = "round-robin"
	NameFillFirst        = "fill-first"
	NameP2C              = "p2c"
	NameRandom           = "random"
	NameStrictRandom     = "strict-random"
	NameLeastUsed        = "least-used"
	NameCostOptimized    = "cost-optimized"
	NameLKGP             = "lkgp"
	NameContextOptimized = "context-optimized"
	NameCacheOptimized   = "cache-optimized"
	NameResetAware       = "reset-aware"
	NameResetWindow      = "reset-window"
	NameHeadroom         = "headroom"
	NameAuto             = "auto"
)

// NewRegistry returns the explicit registry of every strategy in this
// package, keyed by name. All strategies share rng, behind one mutex held
// for all the draws of one Order, so a seeded rng (tests:
// rand.New(rand.NewPCG(a, b))) reproduces the draws of §10. rng must not be
// used by anything else; production passes its own
// rand.New(rand.NewChaCha8(seed)) (§9). A nil rng draws from math/rand/v2's
// randomly seeded top-level generator. A nil state gets a fresh in-memory
// one without LKGP persistence.
func NewRegistry(rng *rand.Rand, state *MemoryState) map[string]Strategy {
	if state == nil {
		state = newMemoryState(StateOptions{})
	}
	g := newRNG(rng)
	list := []Strategy{
		Priority{},
		FillFirst{},
		&Weighted{rng: g, state: state},
		&RoundRobin{state: state},
		&P2C{rng: g},
		&Random{rng: g},
		&StrictRandom{rng: g, state: state},
		&LeastUsed{state: state},
		CostOptimized{},
		&LKGP{state: state},
		ContextOptimized{},
		CacheOptimized{},
		&QuotaShare{},
		ContextRelay{},
		&ResetAware{},
		&ResetWindow{},
		Headroom{},
		&Auto{rng: g},
	}
	reg := make(map[string]Strategy, len(list))
	for _, s := range list {
		reg[s.Name()] = s
	}
	return reg
}

// Lookup finds the strategy for a combo's stored strategy name, resolving
// the aliases of §2 (usage, context, weekly-reset). A name that is unknown,
// or known but not in reg, returns the registry's priority strategy and
// false: the combo is executed as priority and the caller logs it.
func Lookup(reg map[string]Strategy, name string) (Strategy, bool) {
	if info, ok := services.LookupStrategy(name); ok {
		name = info.Name
	}
	if s, ok := reg[name]; ok {
		return s, true
	}
	if s, ok := reg[NamePriority]; ok {
		return s, false
	}
	return Priority{}, false
}

// describe returns the builder line of a strategy from services.
func describe(name string) string {
	info, _ := services.LookupStrategy(name)
	return info.Describe
}

// lockedRand is the registry's one RNG. Each Order that draws holds mu for
// all of its draws, so one request's calls stay consecutive.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRNG(r *rand.Rand) *lockedRand {
	if r == nil {
		r = rand.New(globalSource{})
	}
	return &lockedRand{r: r}
}

// globalSource draws from math/rand/v2's top-level generator, which is
// randomly seeded and safe for concurrent use.
type globalSource struct{}

func (globalSource) Uint64() uint64 { return rand.Uint64() }

// emit builds the final order of §10: the available entries among
// entries[perm[0]], entries[perm[1]], … in that order, then every unavailable
// entry in configured (input) order. perm must list every available
// position once; positions of unavailable entries in it are ignored.
func emit(entries []Entry, perm []int) []Entry {
	out := make([]Entry, 0, len(entries))
	for _, p := range perm {
		if entries[p].Available {
			out = append(out, entries[p])
		}
	}
	return appendUnavailable(out, entries)
}

// appendUnavailable appends the unavailable entries in configured order.
func appendUnavailable(out, entries []Entry) []Entry {
	for i := range entries {
		if !entries[i].Available {
			out = append(out, entries[i])
		}
	}
	return out
}

// configured is the shared ordering of priority and fill-first, and the
// fallback of every strategy with nothing to decide.
func configured(entries []Entry) []Entry {
	out := make([]Entry, 0, len(entries))
	for i := range entries {
		if entries[i].Available {
			out = append(out, entries[i])
		}
	}
	return appendUnavailable(out, entries)
}

// countAvailable returns how many entries are available.
func countAvailable(entries []Entry) int {
	k := 0
	for i := range entries {
		if entries[i].Available {
			k++
		}
	}
	return k
}

// nthAvailable returns the position in entries of the n-th (0-based)
// available entry.
func nthAvailable(entries []Entry, n int) int {
	for i := range entries {
		if entries[i].Available {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

// front returns the order with entries[pos] first and the rest in
// configured order. An unavailable entries[pos] goes to the tail with the
// other unavailable ones, which is the configured order.
func front(entries []Entry, pos int) []Entry {
	if !entries[pos].Available {
		return configured(entries)
	}
	out := make([]Entry, 0, len(entries))
	out = append(out, entries[pos])
	for i := range entries {
		if i != pos && entries[i].Available {
			out = append(out, entries[i])
		}
	}
	return appendUnavailable(out, entries)
}

// stackKeys is how many entries a strategy orders with its sort keys in a
// stack array; larger combos allocate the key slice. Every ordering then
// allocates once, for its result (60-quality §5.4: ≤ 1 allocation).
const stackKeys = 128

// positionsIn returns [0, 1, …, n−1], in buf when it has room.
func positionsIn(buf []int, n int) []int {
	if n > cap(buf) {
		buf = make([]int, n)
	}
	buf = buf[:n]
	for i := range buf {
		buf[i] = i
	}
	return buf
}

// keysIn returns buf[:0] when it can hold n keys, else a new slice.
func keysIn[K any](buf []K, n int) []K {
	if n > cap(buf) {
		return make([]K, 0, n)
	}
	return buf[:0]
}
