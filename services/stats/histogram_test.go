package stats

import "testing"

// Every duration reads back within half a bucket: exact below 64 ms, within
// 1/16 above; beyond the range, the last bucket.
func TestHistogramResolution(t *testing.T) {
	for v := int64(0); v < 1<<24; v += 1 + v/97 {
		got := histValue(histIndex(v))
		if v < histLinear && got != v {
			t.Fatalf("%d ms reads %d", v, got)
		}
		if d := got - v; v >= histLinear && (d < 0 && -d*16 > v || d > 0 && d*16 > v) {
			t.Fatalf("%d ms reads %d", v, got)
		}
	}
	if histIndex(1<<40) != histBuckets-1 || histIndex(-5) != 0 && histIndex(0) != 0 {
		t.Fatal("out-of-range durations")
	}
	var h histogram
	for _, v := range []int64{3, 700000, 5} {
		h.add(v)
	}
	if p := h.percentiles(); p.Count != 3 || p.P50 != 5 || p.P95 > 700000 || p.P95 < 650000 {
		t.Fatalf("percentiles %+v", p)
	}
}
