package routing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"switchyard/services"
	"switchyard/services/settings"
)

// autoCase is the candidate set of the §10.14 cases: X =
// openai/gpt-4o@c1 (entry pinned to c1), Y = deepseek/deepseek-chat@c5,
// Z = anthropic/claude-sonnet-4@c3, in that configured order.
func autoCase() ([]Entry, Request) {
	es := []Entry{
		{Index: 0, ID: "X", Provider: "openai", Model: "gpt-4o", ConnectionID: "c1", Weight: 1, Available: true},
		{Index: 1, ID: "Y", Provider: "deepseek", Model: "deepseek-chat", ConnectionID: "c5", Weight: 1, Available: true},
		{Index: 2, ID: "Z", Provider: "anthropic", Model: "claude-sonnet-4", ConnectionID: "c3", Weight: 1, Available: true},
	}
	views := map[string]QuotaView{
		"c1": {Weekly: win(0.10, 3*day)},
		"c3": {FiveHour: win(0.60, 0), Weekly: win(0.30, 6*day)},
	}
	prices := map[string]Price{
		"openai/gpt-4o":             {2.50, 10.00},
		"deepseek/deepseek-chat":    {0.27, 1.10},
		"anthropic/claude-sonnet-4": {3.00, 15.00},
	}
	signals := map[string]CandidateSignals{
		"X": {Breaker: BreakerClosed, LatencyKnown: true, P95Ms: 1200, StddevMs: 300, Tier: "pro", ProviderConnections: 2},
		"Y": {Breaker: BreakerHalfOpen, LatencyKnown: true, P95Ms: 2400, StddevMs: 900, Tier: "standard", ProviderConnections: 1},
		"Z": {Breaker: BreakerClosed, Tier: "ultra", ProviderConnections: 1},
	}
	req := Request{
		ComboID: "cb", Now: T,
		Quota:   func(id string) QuotaView { return views[id] },
		Prices:  func(p, m string) (Price, bool) { pr, ok := prices[p+"/"+m]; return pr, ok },
		Signals: func(e Entry) CandidateSignals { return signals[e.ID] },
	}
	return es, req
}

func autoScoreMap(req Request, es []Entry) map[string]float64 {
	out := map[string]float64{}
	for _, s := range AutoScores(req, es) {
		out[es[s.Pos].ID] = round4(s.Score)
	}
	return out
}

// TestAutoSpec reproduces the cases of 30-routing §10.14.
func TestAutoSpec(t *testing.T) {
	if f := rand.New(rand.NewPCG(5, 6)).Float64(); round4(f) != 0.8395 {
		t.Fatalf("PCG(5,6) Float64 = %v", f)
	}
	r := rand.New(rand.NewPCG(13, 13))
	if f, n := r.Float64(), r.IntN(3); round4(f) != 0.0162 || n != 0 {
		t.Fatalf("PCG(13,13) Float64, IntN(3) = %v, %d", f, n)
	}
	for _, tc := range []struct {
		name       string
		a, b       uint64
		mode       string
		wantScores map[string]float64
		want       []string
		wantCalls  int64 // RNG source calls: Float64 1, IntN(3) 1
	}{
		{"(1) defaults, no exploration", 5, 6, "", map[string]float64{"X": 0.6317, "Z": 0.5080, "Y": 0.4916},
			[]string{"X", "Z", "Y"}, 1},
		{"(2) X-Switchyard-Mode cheap → cost-saver", 5, 6, "cheap", map[string]float64{"Y": 0.6546, "X": 0.5862, "Z": 0.4090},
			[]string{"Y", "X", "Z"}, 1},
		{"(3) exploration picks IntN(3) = 0 → X", 13, 13, "", nil, []string{"X", "Z", "Y"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, req := autoCase()
			req.Mode = tc.mode
			if tc.wantScores != nil {
				got := autoScoreMap(req, es)
				for id, want := range tc.wantScores {
					if got[id] != want {
						t.Errorf("score %s = %.4f, want %.4f", id, got[id], want)
					}
				}
			}
			reg, _, src := newReg(t, tc.a, tc.b)
			wantOrder(t, reg[NameAuto].Order(req, es), tc.want...)
			if n := src.calls.Load(); n != tc.wantCalls {
				t.Errorf("RNG source calls = %d, want %d", n, tc.wantCalls)
			}
		})
	}
}

func TestAutoFactors(t *testing.T) {
	es, req := autoCase()
	got := map[string]map[string]float64{}
	for _, s := range AutoScores(req, es) {
		m := map[string]float64{}
		for f, v := range s.Factors {
			m[f] = round4(v)
		}
		got[es[s.Pos].ID] = m
	}
	want := map[string]map[string]float64{
		"X": {"quota": 0.9, "health": 1, "costInv": 0.2949, "latencyInv": 0.5, "taskFit": 0.5, "stability": 0.6667,
			"tierPriority": 0.716, "contextAffinity": 0.5, "connectionDensity": 0.1, "resetWindowAffinity": 0.5714, "cacheAffinity": 0.5},
		"Y": {"quota": 1, "health": 0.5, "costInv": 0.9228, "latencyInv": 0, "taskFit": 0.5, "stability": 0,
			"tierPriority": 0.264, "contextAffinity": 0.5, "connectionDensity": 0, "resetWindowAffinity": 0, "cacheAffinity": 0.5},
		"Z": {"quota": 0.4, "health": 1, "costInv": 0, "latencyInv": 0.5, "taskFit": 0.5, "stability": 0.5,
			"tierPriority": 0.96, "contextAffinity": 0.5, "connectionDensity": 0, "resetWindowAffinity": 0.1429, "cacheAffinity": 0.5},
	}
	for id, fs := range want {
		for f, v := range fs {
			if got[id][f] != v {
				t.Errorf("%s %s = %v, want %v", id, f, got[id][f], v)
			}
		}
		if len(got[id]) != len(AutoFactors()) {
			t.Errorf("%s has %d factors", id, len(got[id]))
		}
	}
}

func TestAutoWeights(t *testing.T) {
	sum := func(m map[string]float64) float64 {
		s := 0.0
		for _, v := range m {
			s += v
		}
		return s
	}
	if s := sum(DefaultAutoWeights()); round4(s) != 1 {
		t.Errorf("default weights sum %v", s)
	}
	for _, p := range services.ModePacks {
		w, ok := ModePackWeights(p)
		if !ok || round4(sum(w)) != 1 {
			t.Errorf("pack %s: %v (sum %v)", p, ok, sum(w))
		}
	}
	for v, want := range map[string]string{"fast": PackShipFast, "cheap": PackCostSaver, "quality": PackQualityFirst,
		"reliable": PackReliabilityFirst, "offline": PackOfflineFriendly, "balanced": "", " Cheap ": PackCostSaver} {
		if got, ok := ModePackForHeader(v); !ok || got != want {
			t.Errorf("ModePackForHeader(%q) = %q, %v", v, got, ok)
		}
	}
	if _, ok := ModePackForHeader("turbo"); ok {
		t.Error("unknown mode accepted")
	}

	cfgWith := func(mut func(*AutoConfig)) *StrategyConfig {
		c := DefaultStrategyConfig()
		mut(&c.Auto)
		return &c
	}
	cheap, _ := ModePackWeights(PackCostSaver)
	quality, _ := ModePackWeights(PackQualityFirst)
	for _, tc := range []struct {
		name string
		mode string
		cfg  *StrategyConfig
		want map[string]float64
	}{
		{"defaults", "", nil, DefaultAutoWeights()},
		{"header pack", "cheap", nil, cheap},
		{"header beats combo pack", "cheap", cfgWith(func(a *AutoConfig) { a.ModePack = PackQualityFirst }), cheap},
		{"balanced → combo pack", "balanced", cfgWith(func(a *AutoConfig) { a.ModePack = PackQualityFirst }), quality},
		{"unknown header ignored", "turbo", cfgWith(func(a *AutoConfig) { a.ModePack = PackQualityFirst }), quality},
		{"combo pack beats weights", "", cfgWith(func(a *AutoConfig) {
			a.ModePack, a.Weights = PackQualityFirst, map[string]float64{"quota": 1}
		}), quality},
		{"weights replace the defaults, normalised", "", cfgWith(func(a *AutoConfig) {
			a.Weights = map[string]float64{"quota": 3, "health": 1, "nonsense": 5}
		}), map[string]float64{"quota": 0.75, "health": 0.25}},
		{"zero sum → defaults", "", cfgWith(func(a *AutoConfig) { a.Weights = map[string]float64{"quota": 0} }), DefaultAutoWeights()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := autoWeights(Request{Mode: tc.mode}, &strategyConfig(Request{Config: tc.cfg}).Auto)
			for i, f := range autoFactors {
				if round4(w[i]) != round4(tc.want[f]) {
					t.Errorf("%s = %v, want %v", f, w[i], tc.want[f])
				}
			}
		})
	}
}

func TestAutoTaskAndAffinity(t *testing.T) {
	for _, tc := range []struct {
		text             string
		tools, reasoning bool
		want             string
	}{
		{"hi", false, false, TaskChat},
		{"fix:\n```go\nx\n```", false, true, TaskCode},
		{"hi", true, false, TaskCode},
		{"think", false, true, TaskReasoning},
	} {
		if got := TaskOf(tc.text, tc.tools, tc.reasoning); got != tc.want {
			t.Errorf("TaskOf(%q, %v, %v) = %s, want %s", tc.text, tc.tools, tc.reasoning, got, tc.want)
		}
	}
	es, req := autoCase()
	req.Task = TaskCode
	req.TaskFitness = []settings.TaskFitnessRule{
		{ModelPattern: "claude-*", Task: TaskChat, Score: 0.1}, // other task
		{ModelPattern: "Anthropic/*", Task: TaskCode, Score: 0.9},
		{ModelPattern: "*", Task: TaskCode, Score: 0.2},
	}
	req.SessionEntryID = "Y"
	req.CacheKey = "pck:conv-42"
	fs := map[string]map[string]float64{}
	for _, s := range AutoScores(req, es) {
		fs[es[s.Pos].ID] = s.Factors
	}
	if fs["Z"]["taskFit"] != 0.9 || fs["X"]["taskFit"] != 0.2 || fs["Y"]["taskFit"] != 0.2 {
		t.Errorf("taskFit X %v Y %v Z %v", fs["X"]["taskFit"], fs["Y"]["taskFit"], fs["Z"]["taskFit"])
	}
	if fs["Y"]["contextAffinity"] != 1 || fs["X"]["contextAffinity"] != 0 || fs["Z"]["contextAffinity"] != 0 {
		t.Error("contextAffinity wrong")
	}
	// Exactly one cache winner: the rendezvous top of the three identities.
	winners := 0
	for _, f := range fs {
		if f["cacheAffinity"] == 1 {
			winners++
		} else if f["cacheAffinity"] != 0 {
			t.Errorf("cacheAffinity %v with a key", f["cacheAffinity"])
		}
	}
	if winners != 1 {
		t.Errorf("%d cache winners", winners)
	}
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"gpt-4*", "gpt-4o", true}, {"*sonnet*", "claude-sonnet-4", true}, {"gpt-4", "gpt-4o", false},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"", "", true}, {"*", "", true},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
}

func TestAutoOpenBreakerNeverFirst(t *testing.T) {
	es, req := autoCase()
	base := req.Signals
	req.Signals = func(e Entry) CandidateSignals {
		s := base(e)
		if e.ID == "X" {
			s.Breaker = BreakerOpen
		}
		return s
	}
	// Quota-only weights make X (u .10) the best score despite health 0.
	cfg := DefaultStrategyConfig()
	cfg.Auto.Weights = map[string]float64{"quota": 1}
	cfg.Auto.ExplorationRate = 0.5
	req.Config = &cfg
	for seed := range uint64(200) {
		reg := NewRegistry(rand.New(rand.NewPCG(seed, seed)), nil)
		got := reg[NameAuto].Order(req, es)
		if got[0].ID == "X" || got[len(got)-1].ID != "X" {
			t.Fatalf("seed %d: order %v", seed, ids(got))
		}
	}
	// Unavailable candidates are never drawn by exploration either.
	es2, req2 := autoCase()
	es2[0].Available = false
	req2.Config = &cfg
	for seed := range uint64(200) {
		reg := NewRegistry(rand.New(rand.NewPCG(seed, seed)), nil)
		if got := reg[NameAuto].Order(req2, es2); got[0].ID == "X" || got[2].ID != "X" {
			t.Fatalf("seed %d: order %v", seed, ids(got))
		}
	}
}

func TestAutoTopGroupRotates(t *testing.T) {
	es := cands("a", "b", "c")
	cfg := DefaultStrategyConfig()
	cfg.Auto.ExplorationRate = 0
	views := map[string]QuotaView{"c": {Weekly: win(0.9, day)}}
	req := quotaReq("cb", views)
	req.Config = &cfg
	reg, _, src := newReg(t, 1, 1)
	a := reg[NameAuto]
	var firsts []string
	for range 4 {
		o := a.Order(req, es)
		firsts = append(firsts, o[0].ID)
		if o[2].ID != "c" {
			t.Fatalf("order %v", ids(o))
		}
	}
	if fmt.Sprint(firsts) != "[a b a b]" {
		t.Fatalf("firsts %v, want [a b a b]", firsts)
	}
	if src.calls.Load() != 0 {
		t.Fatal("explorationRate 0 drew from the RNG")
	}
	// Nothing available: no IntN, configured order.
	cfg.Auto.ExplorationRate = 0.5
	wantOrder(t, a.Order(req, cands("a!", "b!")), "a", "b")
	// Prices all unknown → costInv 0.5; all zero → 1.
	req.Prices = func(string, string) (Price, bool) { return Price{}, true }
	for _, s := range AutoScores(req, es) {
		if s.Factors["costInv"] != 1 {
			t.Fatalf("free prices: costInv %v", s.Factors["costInv"])
		}
	}
	req.Prices = nil
	for _, s := range AutoScores(req, es) {
		if s.Factors["costInv"] != 0.5 {
			t.Fatalf("unknown prices: costInv %v", s.Factors["costInv"])
		}
	}
}

// The save-time check of auto.weights (services.AutoFactors) accepts
// exactly the factors auto scores.
func TestAutoFactorsMatchSaveTimeList(t *testing.T) {
	got := AutoFactors()
	slices.Sort(got)
	want := slices.Clone(services.AutoFactors)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("routing factors %v, services list %v", got, want)
	}
}
