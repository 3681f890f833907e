// Package latency holds the one distribution every latency figure of
// idletrace is summarised from (stats' wake-up and IO latencies, whatif's
// replayed IO and task IO latencies): a bounded log-linear histogram,
// its summary and its CDF.
package latency

import (
	"encoding/json"
	"math"
	"math/bits"
)

// Histogram is a log-linear (HDR-style) histogram of uint64 values
// (nanoseconds here). Values below histSub are counted exactly; above, each
// power of two is split into histSub equal buckets, so a bucket is never
// wider than 1/histSub of its lower bound. A quantile is the midpoint of the
// bucket that holds its rank, clamped to the exact minimum and maximum: its
// relative error is at most RelError. Count, minimum, maximum and the sum
// (so the mean) are exact. The buckets are allocated up to about the
// largest value seen (58 KiB at most, see grow): memory does not grow with the
// number of samples, and an unused histogram costs nothing. The zero value
// is empty and ready.
type Histogram struct {
	counts       []uint64
	n            uint64
	min, max     uint64
	sumLo, sumHi uint64 // 128-bit sum: an exact mean for any trace length
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // sub-buckets per power of two
	histBuckets = histSub + (64-histSubBits)*histSub

	// RelError is the largest relative error of a quantile.
	RelError = 1.0 / (2 * histSub)
)

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - 1 // v in [2^e, 2^(e+1)), e >= histSubBits
	shift := e - histSubBits
	sub := int(v>>uint(shift)) - histSub
	return histSub + shift*histSub + sub
}

// histBounds returns the smallest and largest value bucket i holds.
func histBounds(i int) (lo, hi uint64) {
	if i < histSub {
		return uint64(i), uint64(i)
	}
	shift := (i - histSub) / histSub
	sub := (i - histSub) % histSub
	lo = uint64(histSub+sub) << uint(shift)
	return lo, lo + (uint64(1)<<uint(shift) - 1)
}

// Record adds one value.
func (h *Histogram) Record(v uint64) {
	i := histIndex(v)
	if i >= len(h.counts) {
		h.grow(i)
	}
	h.counts[i]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n++
	var c uint64
	h.sumLo, c = bits.Add64(h.sumLo, v, 0)
	h.sumHi += c
}

// grow makes room for bucket i. The buckets stop near the largest value
// seen, not at 2^64: at the end of its power of two, or at up to twice
// that where values rose step by step (each growth at least doubles, so
// copies stay few). A maximum of a second needs 3 Ki buckets and ends
// with 3–4 Ki (24–32 KiB), of 100 µs 1.4–2 Ki, of the 7.4 Ki a full table
// has (58 KiB). That matters where a caller keeps one per CPU and state
// (pkg/fleet), and in the page faults of a short command.
func (h *Histogram) grow(i int) {
	n := min(max(2*len(h.counts), (i/histSub+1)*histSub), histBuckets)
	c := make([]uint64, n)
	copy(c, h.counts)
	h.counts = c
}

// Merge adds every sample of o.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if len(o.counts) > len(h.counts) {
		h.grow(len(o.counts) - 1)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	var c uint64
	h.sumLo, c = bits.Add64(h.sumLo, o.sumLo, 0)
	h.sumHi += o.sumHi + c
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are exact; 0 without samples.
func (h *Histogram) Min() uint64 { return h.min }
func (h *Histogram) Max() uint64 { return h.max }

// Mean is exact up to float64 rounding; 0 without samples.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	sum := float64(h.sumHi)*math.Exp2(64) + float64(h.sumLo)
	return sum / float64(h.n)
}

// Rank is the nearest-rank rule every quantile here follows: the q-quantile
// of n samples is the ⌈q·n⌉-th smallest (1-based, within [1, n]). The
// product is rounded down first when float error alone lifts it just above
// an integer (0.07·100 is 7.000000000000001 in float64).
func Rank(q float64, n uint64) uint64 {
	return max(min(uint64(math.Ceil(q*float64(n)-1e-9)), n), 1)
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) by Rank, within RelError;
// 0 without samples.
func (h *Histogram) Quantile(q float64) uint64 {
	switch {
	case h.n == 0:
		return 0
	case q <= 0:
		return h.min
	case q >= 1:
		return h.max
	}
	rank := Rank(q, h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if c != 0 && seen >= rank {
			lo, hi := histBounds(i)
			return max(min(lo+(hi-lo)/2, h.max), h.min)
		}
	}
	return h.max
}

// Summary is the JSON-ready summary of a distribution in ns: the shape of
// every latency object in stats' and whatif's JSON.
type Summary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   uint64  `json:"p50"`
	P99   uint64  `json:"p99"`
	P999  uint64  `json:"p999"`
	Max   uint64  `json:"max"`
}

// MarshalJSON writes the figures of a Summary without samples as null:
// there is no latency to give, and 0 would read as one.
func (s Summary) MarshalJSON() ([]byte, error) {
	if s.Count == 0 {
		return []byte(`{"count":0,"mean":null,"p50":null,"p99":null,"p999":null,"max":null}`), nil
	}
	type plain Summary // without this method
	return json.Marshal(plain(s))
}

// Summary returns count, mean, p50, p99, p99.9 and max; the zero Summary
// without samples.
func (h *Histogram) Summary() Summary {
	if h.n == 0 {
		return Summary{}
	}
	return Summary{Count: h.n, Mean: h.Mean(), P50: h.Quantile(0.50), P99: h.Quantile(0.99), P999: h.Quantile(0.999), Max: h.max}
}

// CDFPoint is one point of an empirical CDF: the share of samples at or
// below ValueNs.
type CDFPoint struct {
	ValueNs  uint64
	Fraction float64
}

// CDF is one point per non-empty bucket, at its upper bound (the maximum
// for the last), in increasing order; nil without samples.
func (h *Histogram) CDF() []CDFPoint {
	if h.n == 0 {
		return nil
	}
	var out []CDFPoint
	var cum uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		cum += c
		_, hi := histBounds(i)
		out = append(out, CDFPoint{ValueNs: min(hi, h.max), Fraction: float64(cum) / float64(h.n)})
	}
	return out
}
