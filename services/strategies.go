package services

// StrategyInfo names a combo routing strategy and its one-line explanation
// shown in the combo builder. The list is the contract of 30-routing §10;
// the orderings themselves live with the router.
type StrategyInfo struct {
	Name     string
	Describe string
	// UsesWeights says the builder shows weight fields.
	UsesWeights bool
}

var strategyInfos = []StrategyInfo{
	{"priority", "Tries targets in the listed order; moves on only when one fails or is unavailable.", false},
	{"weighted", "Draws a target at random in proportion to its weight; the others, heaviest first, are the fallbacks.", true},
	{"round-robin", "Rotates the first target from request to request (staying N requests on each); the rest follow in order.", false},
	{"fill-first", "Keeps using the first target until a cooldown, quota window or lockout takes it out, then the next; listed order.", false},
	{"p2c", "Picks two targets at random and puts the one with the better recent success rate and latency first.", false},
	{"random", "Shuffles all targets for every request.", false},
	{"strict-random", "Deals targets from a shuffled deck, so each is used once per round before any repeats.", false},
	{"least-used", "Sends to the target this combo has used least.", false},
	{"cost-optimized", "Cheapest target first by input price; targets without a price go last.", false},
	{"lkgp", "Starts with the target that last succeeded for this combo.", false},
	{"context-optimized", "Targets whose context window fits the request first, largest window first; unknown windows next, too-small ones last.", false},
	{"reset-aware", "Prefers connections whose remaining quota is about to reset anyway.", false},
	{"reset-window", "Soonest quota reset first.", false},
	{"headroom", "The connection with the most unused quota first.", false},
	{"cache-optimized", "Keeps the same prompt prefix on the same target so provider prompt caches stay warm.", false},
	{"context-relay", "Listed order; when a session has to move to another account, a summary of the conversation moves with it.", false},
	{"auto", "Scores every candidate on health, latency, cost, quota and fit, and tries the best first.", false},
	{"fusion", "Asks several models at once and lets a judge model merge their answers (not a failover order).", false},
	{"pipeline", "Runs the targets one after another, each step's output feeding the next.", false},
	{"quota-share", "Shares accounts fairly in proportion to their weights, preferring the less busy of the two most under-served.", true},
}

// strategyAliases are rewritten on save (30-routing §2).
var strategyAliases = map[string]string{"usage": "least-used", "context": "context-optimized", "weekly-reset": "reset-window"}

// Strategies lists every strategy in picker order.
func Strategies() []StrategyInfo {
	out := make([]StrategyInfo, len(strategyInfos))
	copy(out, strategyInfos)
	return out
}

// LookupStrategy finds a strategy by name (aliases resolved).
func LookupStrategy(name string) (StrategyInfo, bool) {
	if a, ok := strategyAliases[name]; ok {
		name = a
	}
	for _, s := range strategyInfos {
		if s.Name == name {
			return s, true
		}
	}
	return StrategyInfo{}, false
}

// Account strategies choose a connection inside one provider (30-routing §11).
var accountStrategies = []string{"fill-first", "round-robin", "p2c", "random", "least-used", "strict-random"}

// AccountStrategies lists the names accepted for routing.fallbackStrategy.
func AccountStrategies() []string { return append([]string(nil), accountStrategies...) }
