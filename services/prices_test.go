package services_test

import (
	"testing"

	"switchyard/services"
)

// The estimate prices prompt tokens at the input price and completion
// tokens at the output price, in nano-USD; an override replaces the
// built-in list price and gives one to a model the table lacks.
func TestPricesEstimate(t *testing.T) {
	p := services.NewPrices(nil)
	// gpt-4o-mini lists at $0.15 / $0.60 per 1M tokens.
	got := p.Estimate("openai", "gpt-4o-mini", 1000, 500)
	if want := (services.Cost{NanoUSD: 1000*150 + 500*600, Known: true}); got != want {
		t.Fatalf("built-in %+v, want %+v", got, want)
	}
	if got.USD() != 0.00045 {
		t.Errorf("USD %v", got.USD())
	}
	if c := p.Estimate("fake", "m1", 1000, 500); c.Known || c.NanoUSD != 0 {
		t.Fatalf("unknown model priced %+v", c)
	}
	if c := p.Estimate("openai", "gpt-4o-mini", 0, 0); c.Known {
		t.Fatalf("no tokens priced %+v", c)
	}
	p = fixedPrices(map[string]services.ModelPrice{"fake/m1": {InputPerMTok: 1, OutputPerMTok: 2}, "openai/gpt-4o-mini": {InputPerMTok: 0, OutputPerMTok: 1}})
	if c := p.Estimate("fake", "m1", 1000, 500); c != (services.Cost{NanoUSD: 1000*1000 + 500*2000, Known: true}) {
		t.Fatalf("override of an unknown model %+v", c)
	}
	if mp, src, _ := p.Lookup("openai", "gpt-4o-mini"); src != services.PriceOverride || mp.InputPerMTok != 0 {
		t.Fatalf("override of a built-in %+v %s", mp, src)
	}
	if _, src, _ := p.Lookup("openai", "gpt-4o"); src != services.PriceBuiltin {
		t.Fatalf("untouched model %s", src)
	}
	sum := services.Cost{}.Plus(services.Cost{NanoUSD: 5, Known: true}).Plus(services.Cost{})
	if sum != (services.Cost{NanoUSD: 5, Known: true}) {
		t.Fatalf("sum %+v", sum)
	}
	var table []services.PriceEntry
	for _, e := range p.Table() {
		if e.Model == "fake/m1" || e.Model == "openai/gpt-4o-mini" {
			table = append(table, e)
		}
	}
	if len(table) != 2 || table[0].Source != services.PriceOverride || table[0].Builtin != nil ||
		table[1].Builtin == nil || table[1].Builtin.InputPerMTok != 0.15 {
		t.Fatalf("table %+v", table)
	}
}

func TestPricesLookupDoesNotAllocate(t *testing.T) {
	p := fixedPrices(map[string]services.ModelPrice{"fake/m1": {InputPerMTok: 1, OutputPerMTok: 2}})
	n := testing.AllocsPerRun(100, func() {
		_ = p.Estimate("anthropic", "claude-3-5-haiku-latest", 100, 100)
		_ = p.Estimate("fake", "m1", 100, 100)
	})
	if n != 0 {
		t.Fatalf("%v allocations per estimate", n)
	}
}

// fixedPrices is the price table with a fixed set of overrides.
func fixedPrices(overrides map[string]services.ModelPrice) *services.Prices {
	return services.NewPrices(func() *map[string]services.ModelPrice { return &overrides })
}
