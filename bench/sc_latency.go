package main

import (
	"context"
	"fmt"
	"net/http"
)

// runLatency is scenario (a): sequential requests (c = 1, one keep-alive
// connection per path), warm-up, then rounds in which every path sends
// perRound requests, the order of the paths rotated each round. Per path:
// median of the round medians, IQR of the round medians, p99 of all samples.
func runLatency(ctx context.Context, cfg *config, t *topology, rep *report) error {
	names := []string{"direct", "baseline", "gateway"}
	if cfg.minimal {
		names = append(names, "gateway-min")
	}
	ps := t.paths()
	if _, ok := ps["gateway-shared"]; ok {
		names = append(names, "gateway-shared")
	}
	clients := map[string]*http.Client{}
	bodies := map[string][]byte{}
	for _, n := range names {
		clients[n] = newClient(1)
		bodies[n] = chatBody(ps[n].model(modelFast), false, "latency")
		defer clients[n].CloseIdleConnections()
	}
	errs := map[string]int{}
	for _, n := range names {
		for i := 0; i < cfg.warmup; i++ {
			if _, err := doJSON(ctx, clients[n], ps[n], bodies[n], "lat-session"); err != nil {
				errs[n]++
			}
		}
	}
	all := map[string][]float64{}
	roundMed := map[string][]float64{}
	for r := 0; r < cfg.rounds && ctx.Err() == nil; r++ {
		for k := range names {
			n := names[(k+r)%len(names)]
			var s []float64
			for i := 0; i < cfg.perRound && ctx.Err() == nil; i++ {
				d, err := doJSON(ctx, clients[n], ps[n], bodies[n], "lat-session")
				if err != nil {
					errs[n]++
					continue
				}
				s = append(s, durMs(d))
			}
			all[n] = append(all[n], s...)
			roundMed[n] = append(roundMed[n], median(s))
		}
	}
	for n, e := range errs {
		if e > 0 {
			rep.warn("latency: %d failed requests on %s", e, n)
		}
	}
	p50 := map[string]float64{}
	p99 := map[string]float64{}
	for _, n := range names {
		p50[n] = median(roundMed[n])
		p99[n] = percentile(all[n], 99)
		q := iqr(roundMed[n])
		rep.add(result{Scenario: "a latency", Metric: "p50 " + n, Unit: "ms", Value: p50[n], Samples: len(all[n]), IQR: &q,
			Note: fmt.Sprintf("median of %d round medians; p99 %.3f ms", len(roundMed[n]), p99[n])})
	}
	hop := p50["baseline"] - p50["direct"]
	added := p50["gateway"] - p50["direct"]
	rep.add(result{Scenario: "a latency", Metric: "added p50 (gateway − direct)", Unit: "ms", Value: added, Baseline: f64(hop),
		Ratio: ratio(added, hop), Target: "≤ 1.5× hop and ≤ 0.5 ms", Pass: boolp(added <= 1.5*hop && added <= 0.5),
		Samples: len(all["gateway"])})
	if cfg.minimal {
		addedMin := p50["gateway-min"] - p50["direct"]
		rep.add(result{Scenario: "a latency", Metric: "added p50, minimal path", Unit: "ms", Value: addedMin, Baseline: f64(hop),
			Ratio: ratio(addedMin, hop), Target: "", Samples: len(all["gateway-min"])})
	}
	if _, ok := ps["gateway-shared"]; ok {
		// Shared mode: the request path reads the same mirrors, so its added
		// latency stays within 10 % of embedded mode on PostgreSQL alone and
		// within 15 % with the Redis round trips of the fleet-wide limits.
		addedShared := p50["gateway-shared"] - p50["direct"]
		limit, target, what := cfg.sharedTarget()
		rep.add(result{Scenario: "a latency", Metric: "added p50, shared mode / embedded", Unit: "ms", Value: addedShared, Baseline: f64(added),
			Ratio: ratio(addedShared, added), Target: target, Pass: boolp(added > 0 && addedShared <= limit*added),
			Samples: len(all["gateway-shared"]), Note: what + " against the embedded gateway, same run, interleaved rounds"})
	}
	addedP99 := p99["gateway"] - p99["direct"]
	hopP99 := p99["baseline"] - p99["direct"]
	var p99Ratio *float64
	if addedP99 > 0 && hopP99 > 0 {
		p99Ratio = ratio(addedP99, hopP99)
	}
	rep.add(result{Scenario: "a latency", Metric: "added p99 (gateway − direct)", Unit: "ms", Value: addedP99, Baseline: f64(hopP99),
		Ratio: p99Ratio, Target: "≤ 2 ms", Pass: boolp(addedP99 <= 2), Samples: len(all["gateway"])})
	rep.detail("latency_round_medians_ms", roundMed)
	return nil
}
