package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refTypical is get_typical_interval written as the kernel loops: every
// round re-reads the eight samples against the thresholds. Before 6.6 there
// is no "if (!max)" test: zeros average to 0 (Debian's 6.1.192 source). The optimised
// detector (sorted samples, running sums) must agree with it everywhere.
func refTypical(iv [menuIntervals]uint32, f menuFlags) uint32 {
	if !f.twoSided {
		thresh := uint32(math.MaxInt32)
		for {
			var maxV uint32
			var sum, div uint64
			for _, v := range iv {
				if v <= thresh {
					sum += uint64(v)
					div++
					maxV = max(maxV, v)
				}
			}
			if div == 0 || maxV == 0 && f.skipQuery {
				return math.MaxUint32
			}
			avg := sum / div
			var variance uint64
			for _, v := range iv {
				if v <= thresh {
					d := int64(v) - int64(avg)
					variance += uint64(d * d)
				}
			}
			variance /= div
			if variance <= math.MaxUint64/36 && ((avg*avg > variance*36 && div*4 >= 24) || variance <= 400) {
				return uint32(avg)
			}
			if div*4 <= 24 {
				if f.maxReturn && div >= 4 {
					return maxV
				}
				return math.MaxUint32
			}
			thresh = maxV - 1
		}
	}
	minT, maxT := int64(-1), int64(math.MaxUint32)
	for {
		var maxV uint32
		minV := uint32(math.MaxUint32)
		var avg, variance, div uint64
		for _, v := range iv {
			if int64(v) <= minT || int64(v) >= maxT {
				continue
			}
			div++
			avg += uint64(v)
			variance += uint64(v) * uint64(v)
			maxV = max(maxV, v)
			minV = min(minV, v)
		}
		if maxV == 0 {
			return math.MaxUint32
		}
		avg /= div
		variance /= div
		avgSq := avg * avg
		variance -= avgSq
		if variance <= math.MaxUint64/36 && ((avgSq > variance*36 && div*4 >= 24) || variance <= 400) {
			return uint32(avg)
		}
		if div*4 <= 24 {
			if f.maxReturn && div >= 4 {
				return maxV
			}
			return math.MaxUint32
		}
		if avg-uint64(minV) > uint64(maxV)-avg {
			minT = int64(minV)
		} else {
			maxT = int64(maxV)
		}
	}
}

func TestTypicalMatchesReference(t *testing.T) {
	tab := newTable(seedIntel(250), nil, nil, -1)
	rng := rand.New(rand.NewPCG(11, 12))
	sample := func() uint32 {
		switch rng.IntN(12) {
		case 0:
			return math.MaxUint32
		case 1:
			return 0
		case 2:
			return math.MaxUint32 - uint32(rng.IntN(3))
		case 3:
			return math.MaxInt32 + uint32(rng.IntN(5)) - 2
		case 4:
			return uint32(rng.Uint64())
		case 5:
			return uint32(rng.IntN(4)) * 100
		}
		return uint32(rng.IntN(1 << uint(rng.IntN(25)+1)))
	}
	for _, v := range []Version{{6, 18, 44}, {6, 16, -1}, {6, 12, -1}, {6, 12, 40}, {6, 1, 192}, {6, 1, 150}} {
		f := menuFlagsFor(v)
		m := newMenu(tab, &f)
		for trial := 0; trial < 300_000; trial++ {
			m.push(sample())
			if got, want := m.typical(), refTypical(m.intervals, f); got != want {
				t.Fatalf("%v: typical(%v) = %d, reference %d", v, m.intervals, got, want)
			}
			if trial%1000 == 0 { // setIntervals agrees with a pushed ring
				var iv [menuIntervals]uint32
				for i := range iv {
					iv[i] = sample()
				}
				m.setIntervals(iv)
				if got, want := m.typical(), refTypical(iv, f); got != want {
					t.Fatalf("%v: typical(%v) = %d, reference %d", v, iv, got, want)
				}
			}
		}
	}
}

// sort8's network sorts every input (0-1 principle: all 256 binary inputs).
func TestSort8Network(t *testing.T) {
	for x := 0; x < 256; x++ {
		var v, out [menuIntervals]uint32
		for i := range v {
			v[i] = uint32(x>>i) & 1
		}
		sort8(&v, &out)
		for i := 1; i < menuIntervals; i++ {
			if out[i-1] > out[i] {
				t.Fatalf("sort8(%v) = %v", v, out)
			}
		}
	}
}

// The per-state rows the replay reads agree with the public definitions:
// stateRow.classify with ClassifyMiss, table.walk with the kernel's scan,
// on random tables (unordered ones and disabled states included).
func TestTableRowsMatchDefinitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 3000; trial++ {
		n := 1 + rng.IntN(MaxStates)
		st := make([]State, n)
		var el, tr uint64
		sorted := rng.IntN(2) == 0
		for i := range st {
			if sorted {
				el += uint64(rng.IntN(50_000))
				tr += uint64(rng.IntN(200_000))
			} else {
				el, tr = uint64(rng.IntN(300_000)), uint64(rng.IntN(900_000))
			}
			st[i] = State{Name: string(rune('A' + i)), ExitLatencyNs: el, TargetResidencyNs: tr, Disabled: rng.IntN(4) == 0, Power: 1}
		}
		tab := newTable(&Profile{Name: "r", HZ: 250, States: st}, nil, nil, -1)
		for k := 0; k < 20; k++ {
			d := int64(rng.IntN(1_200_000))
			s := rng.IntN(n)
			a1, b1 := ClassifyMiss(st, s, uint64(d))
			a2, b2 := tab.rows[s].classify(d)
			if a1 != a2 || b1 != b2 {
				t.Fatalf("classify state %d of %+v at %d: (%v,%v), ClassifyMiss (%v,%v)", s, st, d, a2, b2, a1, b1)
			}
			pred, lat := uint64(rng.IntN(1_000_000)), int64(rng.IntN(400_000))
			want := 0
			for _, e := range tab.en[:tab.nen] {
				if tab.rows[e].el > lat || uint64(tab.rows[e].tr) > pred {
					break
				}
				want++
			}
			if got := tab.walk(pred, lat); got != want {
				t.Fatalf("walk(%d, %d) on %+v = %d, want %d", pred, lat, st, got, want)
			}
		}
	}
}
