package analysis

import (
	"math"
	"math/bits"
)

// Histogram is a fixed-size log-linear (HDR-style) histogram of uint64
// values (nanoseconds here). Values below histSub are counted exactly; above,
// every power of two is split into histSub equal buckets, so a bucket is never
// wider than 1/histSub of its lower bound. Quantiles are reported as the
// midpoint of the bucket that holds the rank, clamped to the exact minimum and
// maximum, so their relative error is at most 1/(2·histSub) = 0.39 %
// (HistogramRelError). Count, minimum, maximum and the sum (hence the mean)
// are exact. Memory is fixed (about 58 KiB) whatever the number of samples.
type Histogram struct {
	counts       [histBuckets]uint64
	n            uint64
	min, max     uint64
	sumLo, sumHi uint64 // 128-bit sum: exact mean for any trace length
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // sub-buckets per power of two
	histBuckets = histSub + (64-histSubBits)*histSub

	// HistogramRelError is the largest relative error of a quantile.
	HistogramRelError = 1.0 / (2 * histSub)
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

// histBounds returns the smallest and largest value a bucket holds.
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
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	var c uint64
	h.sumLo, c = bits.Add64(h.sumLo, v, 0)
	h.sumHi += c
}

// Merge adds every sample of o.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	var c uint64
	h.sumLo, c = bits.Add64(h.sumLo, o.sumLo, 0)
	h.sumHi += o.sumHi + c
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are exact.
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

// Quantile returns the q-quantile (0 ≤ q ≤ 1) by the nearest-rank rule: the
// smallest recorded value v such that at least ⌈q·n⌉ samples are ≤ v, within
// HistogramRelError. 0 without samples.
func (h *Histogram) Quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			lo, hi := histBounds(i)
			v := lo + (hi-lo)/2
			if v < h.min {
				v = h.min
			}
			if v > h.max {
				v = h.max
			}
			return v
		}
	}
	return h.max
}

// Summary is the JSON-ready summary of a distribution in ns.
type Summary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   uint64  `json:"p50"`
	P99   uint64  `json:"p99"`
	P999  uint64  `json:"p999"`
	Max   uint64  `json:"max"`
}

// Summary returns count, mean, p50, p99, p99.9 and max.
func (h *Histogram) Summary() Summary {
	return Summary{Count: h.n, Mean: h.Mean(), P50: h.Quantile(0.50), P99: h.Quantile(0.99), P999: h.Quantile(0.999), Max: h.max}
}
