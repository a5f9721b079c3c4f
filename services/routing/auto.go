package routing

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"switchyard/services/settings"
)

// Auto scores every candidate on quota, health, cost, latency, task fit,
// stability, tier, session and cache affinity and tries the best first
// (§10.14). Score = Σ wᵢ·fᵢ with every fᵢ in [0, 1] and the weights
// normalised to sum 1. Weights: the request's mode pack (Request.Mode, the
// X-Switchyard-Mode header) > auto.modePack > auto.weights (replacing the
// defaults as a whole) > the defaults; a zero sum falls back to the
// defaults.
//
// Selection: when auto.explorationRate > 0 one Float64() is drawn; below the
// rate the chosen candidate is available candidate number IntN(k) in
// configured order. Otherwise the top group — candidates scoring at least
// best − auto.tieBand, by score then configured order — gives
// group[counter mod size], with a per-combo counter advancing every
// request. Order = [chosen] + the other available candidates by score
// (ties configured order) + the unavailable ones in configured order.
// A candidate whose provider breaker reads OPEN is never chosen and comes
// after every other available candidate.
//
// It is a candidate-level strategy. Inputs: Request.Quota (windows),
// Request.Prices, Request.Signals (breaker, latency p95 and stddev, tier,
// provider connections; nil: Stats' breaker, the rest unknown), Request.Task
// and Request.TaskFitness, Request.SessionEntryID, Request.CacheKey,
// Request.Mode and Request.Config.
type Auto struct {
	rng *lockedRand
	rot rotation
}

// Name returns "auto".
func (*Auto) Name() string { return NameAuto }

// Describe returns the builder line.
func (*Auto) Describe() string { return describe(NameAuto) }

// Factor names of auto (§10.14); auto.weights and mode packs are keyed by
// them.
const (
	FactorQuota               = "quota"
	FactorHealth              = "health"
	FactorCostInv             = "costInv"
	FactorLatencyInv          = "latencyInv"
	FactorTaskFit             = "taskFit"
	FactorStability           = "stability"
	FactorTierPriority        = "tierPriority"
	FactorContextAffinity     = "contextAffinity"
	FactorConnectionDensity   = "connectionDensity"
	FactorResetWindowAffinity = "resetWindowAffinity"
	FactorCacheAffinity       = "cacheAffinity"
)

// autoFactors lists the factors in table order; a factor's position is its
// index in the weight vectors below.
var autoFactors = []string{
	FactorQuota, FactorHealth, FactorCostInv, FactorLatencyInv, FactorTaskFit, FactorStability,
	FactorTierPriority, FactorContextAffinity, FactorConnectionDensity, FactorResetWindowAffinity,
	FactorCacheAffinity,
}

const numFactors = 11

type weightVec [numFactors]float64

var defaultAutoWeights = weightVec{0.15, 0.20, 0.15, 0.15, 0.08, 0.07, 0.05, 0.10, 0.05, 0, 0}

// Mode pack names (auto.modePack) and their weights (§10.14).
const (
	PackShipFast         = "ship-fast"
	PackCostSaver        = "cost-saver"
	PackQualityFirst     = "quality-first"
	PackReliabilityFirst = "reliability-first"
	PackOfflineFriendly  = "offline-friendly"
)

var modePacks = map[string]weightVec{
	PackShipFast:         {0.14, 0.28, 0.05, 0.32, 0.10, 0, 0.05, 0.03, 0.03, 0, 0},
	PackCostSaver:        {0.14, 0.19, 0.37, 0.05, 0.10, 0.05, 0.05, 0.03, 0.02, 0, 0},
	PackQualityFirst:     {0.10, 0.18, 0.05, 0.05, 0.37, 0.15, 0.05, 0.03, 0.02, 0, 0},
	PackReliabilityFirst: {0.14, 0.37, 0.04, 0.05, 0.10, 0.20, 0.05, 0.03, 0.02, 0, 0},
	PackOfflineFriendly:  {0.37, 0.28, 0.10, 0.05, 0, 0.10, 0.05, 0.03, 0.02, 0, 0},
}

// ModePackForHeader maps an X-Switchyard-Mode value to its pack: fast →
// ship-fast, cheap → cost-saver, quality → quality-first, reliable →
// reliability-first, offline → offline-friendly; balanced → "" (no pack:
// the combo's own weights apply). ok is false for any other value, which
// the gateway ignores with warning mode_ignored (10-gateway-api).
func ModePackForHeader(v string) (pack string, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "fast":
		return PackShipFast, true
	case "cheap":
		return PackCostSaver, true
	case "quality":
		return PackQualityFirst, true
	case "reliable":
		return PackReliabilityFirst, true
	case "offline":
		return PackOfflineFriendly, true
	case "balanced":
		return "", true
	}
	return "", false
}

// CandidateSignals are the per-candidate inputs of auto that Request does
// not carry otherwise. The zero value means closed breaker, unknown
// latency, standard tier, one connection.
type CandidateSignals struct {
	// Breaker is the candidate's provider breaker state.
	Breaker BreakerState
	// LatencyKnown says P95Ms and StddevMs are known (≥ 10 successful
	// samples in the candidate's ring, §8.1).
	LatencyKnown bool
	P95Ms        float64
	StddevMs     float64
	// Tier is the connection's tier: ultra, pro, standard (default) or free.
	Tier string
	// ProviderConnections is the number of available connections of the
	// candidate's provider (connectionDensity).
	ProviderConnections int
}

// Tasks of routing.autoTaskFitness rules (§10.14).
const (
	TaskCode      = "code"
	TaskReasoning = "reasoning"
	TaskChat      = "chat"
)

// TaskOf classifies a request for taskFit: code when the last user message
// contains a fenced block (```) or tools are defined, reasoning when
// reasoning is requested, else chat.
func TaskOf(lastUserText string, hasTools, reasoningRequested bool) string {
	switch {
	case hasTools || strings.Contains(lastUserText, "```"):
		return TaskCode
	case reasoningRequested:
		return TaskReasoning
	}
	return TaskChat
}

// autoWeights resolves and normalises the weights of one request.
func autoWeights(req Request, cfg *AutoConfig) weightVec {
	var w weightVec
	switch pack, _ := ModePackForHeader(req.Mode); {
	case pack != "":
		w = modePacks[pack]
	case cfg.ModePack != "" && hasPack(cfg.ModePack):
		w = modePacks[cfg.ModePack]
	case cfg.Weights != nil:
		for i, f := range autoFactors {
			if v := cfg.Weights[f]; v > 0 && !math.IsInf(v, 0) {
				w[i] = v
			}
		}
	default:
		w = defaultAutoWeights
	}
	sum := 0.0
	for _, v := range w {
		sum += v
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		w, sum = defaultAutoWeights, 0
		for _, v := range w {
			sum += v
		}
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

func hasPack(name string) bool { _, ok := modePacks[name]; return ok }

// autoCand is one scored candidate.
type autoCand struct {
	pos   int
	open  bool // provider breaker OPEN: never first
	f     weightVec
	score float64
}

// Order scores the available candidates and picks the first.
func (a *Auto) Order(req Request, entries []Entry) []Entry {
	cfg := &strategyConfig(req).Auto
	counter := a.rot.next(req.ComboID)
	sc := autoScratchPool.Get().(*autoScratch)
	defer autoScratchPool.Put(sc)
	cands := autoScores(req, entries, sc)

	k := 0 // eligible: available and breaker not open
	for i := range cands {
		if !cands[i].open {
			k++
		}
	}
	chosen := -1 // index into cands
	if cfg.ExplorationRate > 0 {
		a.rng.mu.Lock()
		x := a.rng.r.Float64()
		if x < cfg.ExplorationRate && k > 0 {
			n := a.rng.r.IntN(k)
			for i := range cands { // cands are in configured order here
				if !cands[i].open {
					if n == 0 {
						chosen = i
						break
					}
					n--
				}
			}
		}
		a.rng.mu.Unlock()
	}
	chosenPos := -1
	if chosen >= 0 {
		chosenPos = cands[chosen].pos
	}
	// Eligible by score desc (ties configured order), then open ones. The
	// sort moves small keys, not the candidates with their factor vectors.
	type key struct {
		pos   int
		open  bool
		score float64
	}
	var buf [stackKeys]key
	ks := keysIn(buf[:], len(cands))
	for _, c := range cands {
		ks = append(ks, key{pos: c.pos, open: c.open, score: c.score})
	}
	slices.SortStableFunc(ks, func(x, y key) int {
		if x.open != y.open {
			if x.open {
				return 1
			}
			return -1
		}
		return cmp.Compare(y.score, x.score)
	})
	if chosenPos < 0 && k > 0 {
		n := 0
		for n < k && ks[n].score >= ks[0].score-cfg.TieBand-scoreEps {
			n++
		}
		chosenPos = ks[int(counter%uint64(n))].pos
	}
	out := make([]Entry, 0, len(entries))
	if chosenPos >= 0 {
		out = append(out, entries[chosenPos])
	}
	for _, c := range ks {
		if c.pos != chosenPos {
			out = append(out, entries[c.pos])
		}
	}
	return appendUnavailable(out, entries)
}

// autoScratch holds autoScores' working slices; Order reuses them through
// autoScratchPool so that scoring allocates nothing once they have grown.
type autoScratch struct {
	cands      []autoCand
	sigs       []CandidateSignals
	views      []QuotaView
	costs      []float64
	known      []bool
	knownCosts []float64
}

var autoScratchPool = sync.Pool{New: func() any { return new(autoScratch) }}

// autoScores evaluates the available candidates in configured order. The
// result lives in sc.
func autoScores(req Request, entries []Entry, sc *autoScratch) []autoCand {
	cfg := &strategyConfig(req).Auto
	w := autoWeights(req, cfg)
	cands, sigs, views := sc.cands[:0], sc.sigs[:0], sc.views[:0]
	defer func() { sc.cands, sc.sigs, sc.views = cands[:0], sigs[:0], views[:0] }()
	for i := range entries {
		e := &entries[i]
		if !e.Available {
			continue
		}
		s := signalsOf(req, e)
		cands = append(cands, autoCand{pos: i, open: s.Breaker == BreakerOpen})
		sigs = append(sigs, s)
		views = append(views, quotaOf(req, e))
	}
	if len(cands) == 0 {
		return cands
	}

	costs := append(sc.costs[:0], make([]float64, len(cands))...)
	known := append(sc.known[:0], make([]bool, len(cands))...)
	knownCosts := sc.knownCosts[:0]
	defer func() { sc.costs, sc.known, sc.knownCosts = costs[:0], known[:0], knownCosts[:0] }()
	n := autoNorms{task: req.Task, cacheWinner: cacheWinnerOf(&req, entries, cands)}
	knownCosts, n.maxCost = autoCosts(&req, entries, cands, costs, known, knownCosts)
	n.pricesKnown = len(knownCosts) > 0
	for _, s := range sigs {
		if s.LatencyKnown {
			n.maxP95, n.maxSD = max(n.maxP95, s.P95Ms), max(n.maxSD, s.StddevMs)
		}
	}
	if n.task == "" {
		n.task = TaskChat
	}
	for i := range cands {
		f := &cands[i].f
		candidateFactors(f, &req, &entries[cands[i].pos], &sigs[i], &views[i], costs[i], i, &n)
		score := 0.0
		for j := range f {
			score += w[j] * f[j]
		}
		cands[i].score = score
	}
	return cands
}

// autoNorms is what the factors of one candidate are measured against: the
// maxima over all candidates, the task and the cache winner.
type autoNorms struct {
	maxCost, maxP95, maxSD float64
	pricesKnown            bool
	task                   string
	cacheWinner            int // index into the candidates, -1 without a cache key
}

// autoCosts fills costs with c = 0.6·in + 0.4·out per candidate (unknown =
// median of the known ones) and returns the known costs and the maximum.
func autoCosts(req *Request, entries []Entry, cands []autoCand, costs []float64, known []bool, knownCosts []float64) ([]float64, float64) {
	for i, c := range cands {
		e := &entries[c.pos]
		if req.Prices == nil || e.IsRef() {
			continue
		}
		if p, ok := req.Prices(e.Provider, e.Model); ok {
			costs[i], known[i] = 0.6*p.InputPerMTok+0.4*p.OutputPerMTok, true
			knownCosts = append(knownCosts, costs[i])
		}
	}
	maxC := 0.0
	if len(knownCosts) > 0 {
		med := median(knownCosts)
		for i := range costs {
			if !known[i] {
				costs[i] = med
			}
			maxC = max(maxC, costs[i])
		}
	}
	return knownCosts, maxC
}

// cacheWinnerOf is the candidate (not behind an open breaker) the request's
// cache key hashes to, or -1 without a cache key.
func cacheWinnerOf(req *Request, entries []Entry, cands []autoCand) int {
	winner := -1
	if req.CacheKey == "" {
		return winner
	}
	var best uint64
	for i, c := range cands {
		if c.open {
			continue
		}
		if sc := entryScore(req.CacheKey, &entries[c.pos]); winner < 0 || sc > best {
			winner, best = i, sc
		}
	}
	return winner
}

// candidateFactors computes the eleven factors of candidate i, each in
// [0, 1], in the order of autoFactors (30-routing §10.14).
func candidateFactors(f *weightVec, req *Request, e *Entry, s *CandidateSignals, v *QuotaView, cost float64, i int, n *autoNorms) {
	f[0] = 1 - v.MaxUsed()
	f[1] = healthOf(s.Breaker)
	switch {
	case !n.pricesKnown:
		f[2] = 0.5
	case n.maxCost > 0:
		f[2] = clamp01(1 - cost/n.maxCost)
	default:
		f[2] = 1 // every price is 0
	}
	f[3], f[5] = 0.5, 0.5
	if s.LatencyKnown {
		f[3] = ratioInv(s.P95Ms, n.maxP95)
		f[5] = ratioInv(s.StddevMs, n.maxSD)
	}
	f[4] = taskFit(req.TaskFitness, e, n.task)
	f[6] = 0.8*tierScore(s.Tier) + 0.2*weeklyBonus(v.Weekly, req.Now, 30*24*time.Hour)
	switch {
	case req.SessionEntryID == "":
		f[7] = 0.5
	case req.SessionEntryID == e.ID:
		f[7] = 1
	}
	f[8] = clamp01(float64(s.ProviderConnections-1) / 10)
	f[9] = weeklyBonus(v.Weekly, req.Now, OneWeek)
	switch {
	case req.CacheKey == "":
		f[10] = 0.5
	case i == n.cacheWinner:
		f[10] = 1
	}
}

// signalsOf returns the candidate's signals, falling back to the entry
// stats' breaker.
func signalsOf(req Request, e *Entry) CandidateSignals {
	if req.Signals != nil {
		return req.Signals(*e)
	}
	var s CandidateSignals
	if req.Stats != nil {
		if st, ok := req.Stats.EntryStats(e.ID); ok {
			s.Breaker = st.Breaker
		}
	}
	return s
}

// healthOf maps a breaker state to the health factor.
func healthOf(b BreakerState) float64 {
	switch b {
	case BreakerDegraded:
		return 0.75
	case BreakerHalfOpen:
		return 0.5
	case BreakerOpen:
		return 0
	}
	return 1
}

// ratioInv is 1 − x/maxX, 1 when maxX is 0.
func ratioInv(x, maxX float64) float64 {
	if !(maxX > 0) {
		return 1
	}
	return clamp01(1 - x/maxX)
}

// tierScore maps a connection tier to its tierPriority value.
func tierScore(tier string) float64 {
	switch tier {
	case "ultra":
		return 1
	case "pro":
		return 0.67
	case "free":
		return 0
	}
	return 0.33 // standard, the default
}

// weeklyBonus is max(0, 1 − (time to the weekly reset)/span) for a known
// weekly window with a future reset, else 0.
func weeklyBonus(w QuotaWindow, now time.Time, span time.Duration) float64 {
	if !w.Known || w.ResetAt.IsZero() || !w.ResetAt.After(now) {
		return 0
	}
	return clamp01(1 - float64(w.ResetAt.Sub(now))/float64(span))
}

// taskFit is the score of the first rule matching the candidate and task,
// else 0.5. A pattern holding "/" is matched against "provider/model",
// one without against the model id; "*" matches any run of characters and
// case is ignored.
func taskFit(rules []settings.TaskFitnessRule, e *Entry, task string) float64 {
	if e.IsRef() {
		return 0.5
	}
	for _, r := range rules {
		if r.Task != task {
			continue
		}
		subject := e.Model
		if strings.Contains(r.ModelPattern, "/") {
			subject = e.Provider + "/" + e.Model
		}
		if globMatch(strings.ToLower(r.ModelPattern), strings.ToLower(subject)) {
			return clamp01(r.Score)
		}
	}
	return 0.5
}

// globMatch reports whether s matches pattern, where "*" matches any run of
// bytes (possibly empty) and every other byte matches itself.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// median of a non-empty slice (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
