package services

import (
	"math"
	"sort"
	"strings"
	"sync/atomic"
)

// Cost is an estimated price in billionths of a US dollar (nano-USD), an
// integer so that sums over many requests stay exact. Known is false when
// no price is known for the model; such a request adds nothing to a sum.
// Every cost Switchyard shows is an estimate from list prices (or the
// admin's overrides), never the provider's bill.
type Cost struct {
	NanoUSD int64
	Known   bool
}

// USD is the cost in US dollars.
func (c Cost) USD() float64 { return float64(c.NanoUSD) / 1e9 }

// Plus adds two costs; the sum is known when either part is.
func (c Cost) Plus(o Cost) Cost {
	return Cost{NanoUSD: c.NanoUSD + o.NanoUSD, Known: c.Known || o.Known}
}

// ModelPrice is a list price in USD per 1M tokens.
type ModelPrice struct {
	InputPerMTok  float64 `json:"inputPerMTok"`
	OutputPerMTok float64 `json:"outputPerMTok"`
}

// Price sources (PriceEntry.Source).
const (
	PriceBuiltin  = "builtin"
	PriceOverride = "override"
)

// PriceEntry is one row of the price table.
type PriceEntry struct {
	// Model is "provider/model".
	Model string
	ModelPrice
	// Source is PriceBuiltin or PriceOverride.
	Source string
	// Builtin is the built-in list price, when there is one (also for an overridden model).
	Builtin *ModelPrice
}

// Prices is the model price table: the built-in list prices of
// services/modelmeta.go with the admin's overrides (the general settings
// field pricing.models) on top. It prices the request log's estimated cost
// and cost-optimized routing. Safe for concurrent use; Lookup and Estimate
// do not allocate (the request log prices every request).
type Prices struct {
	// src returns the current overrides; a new pointer means they changed
	// (the field of a newly published settings document), so the index is
	// rebuilt once per change and never per lookup.
	src func() *map[string]ModelPrice
	cur atomic.Pointer[pricesAt]
}

type pricesAt struct {
	from *map[string]ModelPrice
	idx  priceIndex
}

// priceIndex is provider → model → price, so a lookup needs no key built
// from the two names.
type priceIndex map[string]map[string]ModelPrice

func newPriceIndex(flat map[string]ModelPrice) priceIndex {
	idx := priceIndex{}
	for k, p := range flat {
		provider, model, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		if idx[provider] == nil {
			idx[provider] = map[string]ModelPrice{}
		}
		idx[provider][model] = p
	}
	return idx
}

// builtinPrices indexes the prices of the built-in model table.
var builtinPrices = func() priceIndex {
	flat := map[string]ModelPrice{}
	for k, m := range modelMeta {
		if m.InputPerMTok != 0 || m.OutputPerMTok != 0 {
			flat[k] = ModelPrice{InputPerMTok: m.InputPerMTok, OutputPerMTok: m.OutputPerMTok}
		}
	}
	return newPriceIndex(flat)
}()

// NewPrices returns the table over the overrides src returns (keys
// "provider/model"; nil src = none), such as the address of the
// pricing.models field of the current general settings document.
func NewPrices(src func() *map[string]ModelPrice) *Prices { return &Prices{src: src} }

// overrides is the index of the current overrides, nil when none.
func (p *Prices) overrides() priceIndex {
	if p == nil || p.src == nil {
		return nil
	}
	m := p.src()
	if m == nil {
		return nil
	}
	if c := p.cur.Load(); c != nil && c.from == m {
		return c.idx
	}
	c := &pricesAt{from: m, idx: newPriceIndex(*m)}
	p.cur.Store(c)
	return c.idx
}

// Lookup returns the price of (provider, model): the override, else the
// built-in list price.
func (p *Prices) Lookup(provider, model string) (ModelPrice, string, bool) {
	if mp, ok := p.overrides()[provider][model]; ok {
		return mp, PriceOverride, true
	}
	if mp, ok := builtinPrices[provider][model]; ok {
		return mp, PriceBuiltin, true
	}
	return ModelPrice{}, "", false
}

// Estimate prices a request to (provider, model) with its token counts.
// Prompt tokens (cached ones included, which providers often bill lower)
// are priced at the input price and completion tokens (reasoning included)
// at the output price, so the estimate errs high.
func (p *Prices) Estimate(provider, model string, promptTokens, completionTokens int64) Cost {
	if provider == "" || model == "" || promptTokens+completionTokens <= 0 {
		return Cost{}
	}
	mp, _, ok := p.Lookup(provider, model)
	if !ok {
		return Cost{}
	}
	// $ per 1M tokens × tokens / 1e6 × 1e9 nano-USD per $ = price × tokens × 1000.
	nano := float64(promptTokens)*mp.InputPerMTok*1000 + float64(completionTokens)*mp.OutputPerMTok*1000
	return Cost{NanoUSD: int64(math.Round(nano)), Known: true}
}

// Table lists every priced model: built-in ones and overrides, sorted by name.
func (p *Prices) Table() []PriceEntry {
	rows := map[string]*PriceEntry{}
	for provider, models := range builtinPrices {
		for model, mp := range models {
			b := mp
			rows[provider+"/"+model] = &PriceEntry{Model: provider + "/" + model, ModelPrice: mp, Source: PriceBuiltin, Builtin: &b}
		}
	}
	for provider, models := range p.overrides() {
		for model, mp := range models {
			k := provider + "/" + model
			row := rows[k]
			if row == nil {
				row = &PriceEntry{Model: k}
				rows[k] = row
			}
			row.ModelPrice, row.Source = mp, PriceOverride
		}
	}
	out := make([]PriceEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}
