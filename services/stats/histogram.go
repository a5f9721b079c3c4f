package stats

import "math/bits"

// histogram counts durations in milliseconds in log-linear buckets: exact
// below 64 ms, then eight buckets per power of two (at most 12.5 % wide, so
// a percentile read from it is within about 6 % of the exact one), up to
// about 4.6 hours (longer durations share the last bucket). Buckets merge
// by addition, which is what lets a window's percentiles come from its
// one-minute parts.
type histogram struct {
	counts   [histBuckets]uint32
	n        int
	min, max int64
}

const (
	histLinear  = 64 // exact buckets 0–63 ms
	histSubBits = 3  // eight buckets per power of two above
	histPowers  = 18 // 2^6 … 2^23 ms
	histBuckets = histLinear + histPowers<<histSubBits
)

// Percentiles of a window; Count is how many durations they are over (0 = none).
type Percentiles struct {
	Count    int
	P50, P95 int64
}

func (h *histogram) reset() { *h = histogram{} }

func (h *histogram) add(ms int64) {
	ms = max(ms, 0)
	if h.n == 0 || ms < h.min {
		h.min = ms
	}
	if h.n == 0 || ms > h.max {
		h.max = ms
	}
	h.n++
	h.counts[histIndex(ms)]++
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.n == 0 || o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

func histIndex(ms int64) int {
	if ms < histLinear {
		return int(ms)
	}
	e := bits.Len64(uint64(ms)) - 1 // ≥ 6
	if e >= 6+histPowers {
		return histBuckets - 1
	}
	sub := int(ms>>(e-histSubBits)) & (1<<histSubBits - 1)
	return histLinear + (e-6)<<histSubBits + sub
}

// histValue is the value a bucket stands for: its own below 64 ms, else its middle.
func histValue(i int) int64 {
	if i < histLinear {
		return int64(i)
	}
	e := 6 + (i-histLinear)>>histSubBits
	sub := int64((i - histLinear) & (1<<histSubBits - 1))
	width := int64(1) << (e - histSubBits)
	return (1<<histSubBits+sub)*width + width/2
}

// percentile is the nearest-rank percentile p (1–100), kept within the
// smallest and largest duration seen.
func (h *histogram) percentile(p int) int64 {
	rank := (p*h.n + 99) / 100
	rank = max(rank, 1)
	seen := 0
	for i, c := range h.counts {
		seen += int(c)
		if seen >= rank {
			return min(max(histValue(i), h.min), h.max)
		}
	}
	return h.max
}

func (h *histogram) percentiles() Percentiles {
	if h.n == 0 {
		return Percentiles{}
	}
	return Percentiles{Count: h.n, P50: h.percentile(50), P95: h.percentile(95)}
}
