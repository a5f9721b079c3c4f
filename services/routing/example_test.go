package routing_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"switchyard/services/routing"
)

// The gateway's side: build the registry once, then per request build the
// entries with their availability snapshot, call Order once, walk the
// result and report outcomes.
func Example() {
	state, err := routing.NewMemoryState(context.Background(), routing.StateOptions{
		LKGP: routing.NewMemoryLKGPStore(), // production passes the database store (models)
		Now:  func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		panic(err)
	}
	reg := routing.NewRegistry(rand.New(rand.NewPCG(8, 8)), state)

	strat, ok := routing.Lookup(reg, "weighted")
	if !ok {
		fmt.Println("unknown strategy, running priority") // the caller logs
	}
	entries := []routing.Entry{
		{Index: 0, ID: "t7Qx2a", Provider: "anthropic", Model: "claude-sonnet-4", Weight: 60, Available: true},
		{Index: 1, ID: "k3Lm9c", Provider: "openai", Model: "gpt-4o", Weight: 30, Available: true},
		{Index: 2, ID: "p9Zr4d", Provider: "deepseek", Model: "deepseek-chat", Weight: 10, Available: false},
	}
	order := strat.Order(routing.Request{ComboID: "cb_7", StickyWeightedLimit: 1}, entries)
	for i, e := range order {
		if !e.Available {
			fmt.Println("skip", e.ID, "(unavailable)")
			continue
		}
		state.OnDispatch("cb_7", e.ID)
		if i == 0 {
			state.OnFailure("cb_7", e.ID) // say the first one answers 500
			fmt.Println("failed", e.Provider+"/"+e.Model)
			continue
		}
		state.OnSuccess("cb_7", e.ID, "c1")
		fmt.Println("served by", e.Provider+"/"+e.Model)
		break
	}

	_, ok = routing.Lookup(reg, "no-such-strategy")
	fmt.Println("unknown name found:", ok)
	// Output:
	// failed anthropic/claude-sonnet-4
	// served by openai/gpt-4o
	// unknown name found: false
}
