package latency

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistogramAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dist := range []string{"small", "lognormal", "wide"} {
		var h Histogram
		var vals []uint64
		for i := 0; i < 200_000; i++ {
			var v uint64
			switch dist {
			case "small":
				v = uint64(r.IntN(300))
			case "lognormal":
				v = uint64(20_000 * (1 + r.ExpFloat64()*r.ExpFloat64()))
			case "wide":
				v = r.Uint64() >> uint(r.IntN(64))
			}
			vals = append(vals, v)
			h.Record(v)
		}
		slices.Sort(vals)
		var sum float64
		for _, v := range vals {
			sum += float64(v)
		}
		for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999} {
			rank := int(float64(len(vals))*q+0.999999) - 1 // nearest rank
			exact := vals[rank]
			got := h.Quantile(q)
			diff := float64(got) - float64(exact)
			if diff < 0 {
				diff = -diff
			}
			if diff > float64(exact)*RelError+0.5 {
				t.Errorf("%s q=%v: got %d, exact %d (rel err %.4f > %.4f)", dist, q, got, exact, diff/float64(exact), RelError)
			}
		}
		if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] || h.Count() != uint64(len(vals)) {
			t.Errorf("%s: min/max/count not exact", dist)
		}
		if m := h.Mean(); m < sum/float64(len(vals))*(1-1e-12) || m > sum/float64(len(vals))*(1+1e-12) {
			t.Errorf("%s: mean %v, want %v", dist, m, sum/float64(len(vals)))
		}
	}
	var empty Histogram
	if s := empty.Summary(); s != (Summary{}) {
		t.Errorf("empty summary %+v", s)
	}
	// Every bucket's bounds round-trip through histIndex.
	for i := 0; i < histBuckets; i++ {
		lo, hi := histBounds(i)
		if histIndex(lo) != i || histIndex(hi) != i {
			t.Fatalf("bucket %d [%d,%d] maps to %d,%d", i, lo, hi, histIndex(lo), histIndex(hi))
		}
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, all Histogram
	for v := uint64(1); v < 100_000; v += 7 {
		all.Record(v * 13)
		if v%2 == 0 {
			a.Record(v * 13)
		} else {
			b.Record(v * 13)
		}
	}
	a.Merge(&b)
	if a.Summary() != all.Summary() || a.Min() != all.Min() {
		t.Errorf("merged %+v, want %+v", a.Summary(), all.Summary())
	}
}

func TestHistQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(uint64(i * 1000))
	}
	s := h.Summary()
	if s.Count != 1000 || s.Max != 1_000_000 || math.Abs(s.Mean-500_500) > 1e-6 {
		t.Fatalf("summary = %+v", s)
	}
	if d := math.Abs(float64(s.P50)-500_000) / 500_000; d > 0.01 {
		t.Errorf("p50 = %d", s.P50)
	}
	if d := math.Abs(float64(s.P99)-990_000) / 990_000; d > 0.01 {
		t.Errorf("p99 = %d", s.P99)
	}
	for v := uint64(0); v < 1<<20; v = v*3 + 1 {
		lo, hi := histBounds(histIndex(v))
		if v < lo || v > hi {
			t.Fatalf("value %d outside its bucket [%d,%d]", v, lo, hi)
		}
	}
}

// TestRank: the nearest rank, not lifted by float error above an integer.
func TestRank(t *testing.T) {
	for _, tc := range []struct {
		q    float64
		n    uint64
		want uint64
	}{
		{0.07, 100, 7}, {0.5, 1, 1}, {0.5, 2, 1}, {0.5, 3, 2}, {0.99, 100, 99}, {0.999, 1000, 999}, {0.0001, 10, 1}, {1, 10, 10},
	} {
		if got := Rank(tc.q, tc.n); got != tc.want {
			t.Errorf("Rank(%v, %d) = %d, want %d", tc.q, tc.n, got, tc.want)
		}
	}
}

// The buckets grow with the largest value, in whatever order values come
// and however histograms of different reach are merged, and stop at what
// that value needs.
func TestHistogramGrows(t *testing.T) {
	cases := []struct {
		name       string
		a, b       []uint64 // recorded into two histograms, then b merged into a
		maxBuckets int      // len(counts) after the merge
	}{
		{"small only", []uint64{0, 1, 127}, nil, histSub},
		{"up then down", []uint64{5, 1_000_000_000, 3}, nil, 4 * histSub * 8},
		{"a short, b long", []uint64{100, 200}, []uint64{50_000, 1 << 40}, (1 + 33 + 1) * histSub}, // 2^40's power of two: the 34th above the exact ones
		{"a long, b short", []uint64{1 << 40, 7}, []uint64{9, 130}, (1 + 33 + 1) * histSub},
		{"the largest value", []uint64{math.MaxUint64, 1}, []uint64{2}, histBuckets},
		{"one second", []uint64{1_000_000_000}, nil, 4 * histSub * 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a, b, all Histogram
			for _, v := range c.a {
				a.Record(v)
				all.Record(v)
			}
			for _, v := range c.b {
				b.Record(v)
				all.Record(v)
			}
			a.Merge(&b)
			if len(a.counts) > c.maxBuckets {
				t.Errorf("%d buckets, want at most %d", len(a.counts), c.maxBuckets)
			}
			vals := append(append([]uint64{}, c.a...), c.b...)
			slices.Sort(vals)
			for _, h := range []*Histogram{&a, &all} {
				if h.Count() != uint64(len(vals)) || h.Min() != vals[0] || h.Max() != vals[len(vals)-1] {
					t.Fatalf("count/min/max %d/%d/%d, want %d/%d/%d", h.Count(), h.Min(), h.Max(), len(vals), vals[0], vals[len(vals)-1])
				}
				for _, q := range []float64{0.01, 0.5, 0.99} {
					exact := vals[Rank(q, uint64(len(vals)))-1]
					got := h.Quantile(q)
					if diff := math.Abs(float64(got) - float64(exact)); diff > float64(exact)*RelError+0.5 {
						t.Errorf("q=%v: got %d, exact %d", q, got, exact)
					}
				}
				if n := len(h.CDF()); n == 0 || n > len(vals) {
					t.Errorf("CDF of %d points for %d values", n, len(vals))
				}
			}
			if a.Summary() != all.Summary() {
				t.Errorf("merged %+v, recorded together %+v", a.Summary(), all.Summary())
			}
		})
	}
}

// TestSummaryJSONWithoutSamples: a latency without a sample reads null,
// not 0 (which would read as a latency), and one with samples as numbers.
func TestSummaryJSONWithoutSamples(t *testing.T) {
	var h Histogram
	for _, tc := range []struct {
		record []uint64
		want   string
	}{
		{nil, `{"count":0,"mean":null,"p50":null,"p99":null,"p999":null,"max":null}`},
		{[]uint64{5}, `{"count":1,"mean":5,"p50":5,"p99":5,"p999":5,"max":5}`},
	} {
		for _, v := range tc.record {
			h.Record(v)
		}
		b, err := json.Marshal(h.Summary())
		if err != nil || string(b) != tc.want {
			t.Errorf("after %v: %s (%v), want %s", tc.record, b, err, tc.want)
		}
	}
}
