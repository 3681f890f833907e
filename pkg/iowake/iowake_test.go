package iowake

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

const us = 1000

type period struct {
	cpu         uint32
	entry, exit uint64
	cause       trace.WakeCause
}

type comp struct {
	cpu uint32
	t   uint64
}

// record is one record of a trace in file order: a period or a completion.
type record struct {
	p *period
	c *comp
	i int // index of the completion, or of the period
}

// run feeds records in the order given and returns, per completion, the
// index of the period it matched (-1: none), failing on any completion
// reported twice or never.
func run(t *testing.T, recs []record, ncomp int) []int {
	t.Helper()
	got := make([]int, ncomp)
	seen := make([]int, ncomp)
	m := Matcher[int, int]{
		Match: func(_ trace.WakeCause, p, c int) { got[c] = p; seen[c]++ },
		Miss:  func(c int) { got[c] = -1; seen[c]++ },
	}
	for _, r := range recs {
		if r.p != nil {
			m.Period(r.p.cpu, r.p.entry, r.p.exit, r.p.cause, r.i)
		} else {
			m.Completion(r.c.cpu, r.c.t, r.i)
		}
	}
	m.Flush()
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("completion %d reported %d times", i, n)
		}
	}
	return got
}

// orders gives the file orders a trace can have: each type in time order
// per CPU, the two types interleaved as their chunks happened to fill.
func orders(ps []period, cs []comp, rng *rand.Rand) map[string][]record {
	var prs, crs []record
	for i := range ps {
		prs = append(prs, record{p: &ps[i], i: i})
	}
	for i := range cs {
		crs = append(crs, record{c: &cs[i], i: i})
	}
	out := map[string][]record{
		"periods first":     append(slices.Clone(prs), crs...),
		"completions first": append(slices.Clone(crs), prs...),
	}
	byTime := append(slices.Clone(prs), crs...)
	slices.SortStableFunc(byTime, func(a, b record) int {
		ta, tb := a.time(), b.time()
		switch {
		case ta < tb:
			return -1
		case ta > tb:
			return 1
		}
		return 0
	})
	out["by time"] = byTime
	for k := range 4 { // random chunk sizes
		var mixed []record
		i, j := 0, 0
		for i < len(prs) || j < len(crs) {
			n := 1 + rng.IntN(3)
			if rng.IntN(2) == 0 {
				for ; n > 0 && i < len(prs); n-- {
					mixed = append(mixed, prs[i])
					i++
				}
			} else {
				for ; n > 0 && j < len(crs); n-- {
					mixed = append(mixed, crs[j])
					j++
				}
			}
		}
		out["chunks "+string(rune('a'+k))] = mixed
	}
	return out
}

func (r record) time() uint64 {
	if r.p != nil {
		return r.p.exit
	}
	return r.c.t
}

func TestRule(t *testing.T) {
	ps := []period{
		{0, 10_000 * us, 10_200 * us, trace.WakeIRQ},     // 0
		{1, 20_000 * us, 20_200 * us, trace.WakeIRQ},     // 1
		{0, 30_000 * us, 30_200 * us, trace.WakeTimer},   // 2
		{0, 40_000 * us, 40_200 * us, trace.WakeIPICall}, // 3: blk-mq's remote completion
		{0, 40_220 * us, 40_400 * us, trace.WakeIRQ},     // 4: begins inside 3's window
		{1, 70_000 * us, 70_200 * us, trace.WakeUnknown}, // 5
	}
	cs := []struct {
		comp
		want int
		why  string
	}{
		{comp{0, 10_150 * us}, 0, "inside the period (HLT: handler before the exit event)"},
		{comp{0, 10_230 * us}, 0, "30 µs after the exit (MWAIT: exit event first)"},
		{comp{0, 10_250 * us}, 0, "at the window's edge"},
		{comp{0, 10_251 * us}, -1, "just past the window"},
		{comp{1, 20_100 * us}, 1, "inside CPU 1's period"},
		{comp{1, 20_300 * us}, -1, "100 µs after the exit"},
		{comp{0, 30_100 * us}, -1, "inside a timer-woken period"},
		{comp{0, 40_230 * us}, 3, "held by two periods: the earlier"},
		{comp{0, 40_300 * us}, 4, "inside the later one only"},
		{comp{0, 60_000 * us}, -1, "the CPU was busy"},
		{comp{1, 70_100 * us}, -1, "unknown wake cause"},
		{comp{2, 70_100 * us}, -1, "a CPU without idle periods"},
	}
	var comps []comp
	for _, c := range cs {
		comps = append(comps, c.comp)
	}
	for name, recs := range orders(ps, comps, rand.New(rand.NewPCG(1, 2))) {
		got := run(t, recs, len(comps))
		for i, c := range cs {
			if got[i] != c.want {
				t.Errorf("%s: completion %d (%s): matched %d, want %d", name, i, c.why, got[i], c.want)
			}
		}
	}
}

// The answer does not depend on how the two record types interleave in the
// file, however far apart their chunks lie, within the memory bound.
func TestOrderDoesNotMatter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ps []period
	var cs []comp
	for cpu := uint32(0); cpu < 4; cpu++ {
		tm := uint64(1_000 * us)
		for range 5000 {
			d := uint64(5*us + rng.IntN(400*us))
			cause := []trace.WakeCause{trace.WakeIRQ, trace.WakeIPICall, trace.WakeTimer, trace.WakeIPIResched}[rng.IntN(4)]
			ps = append(ps, period{cpu, tm, tm + d, cause})
			if rng.IntN(3) == 0 {
				cs = append(cs, comp{cpu, tm + uint64(rng.IntN(int(d)+80*us))})
			}
			tm += d + uint64(rng.IntN(100*us))
		}
	}
	// Each type in time order across CPUs, as the recorder writes them.
	slices.SortStableFunc(ps, func(a, b period) int { return int(int64(a.exit) - int64(b.exit)) })
	slices.SortStableFunc(cs, func(a, b comp) int { return int(int64(a.t) - int64(b.t)) })
	var want []int
	for name, recs := range orders(ps, cs, rng) {
		got := run(t, recs, len(cs))
		if want == nil {
			want = got
			matched := 0
			for _, g := range got {
				if g >= 0 {
					matched++
				}
			}
			if matched == 0 || matched == len(cs) {
				t.Fatalf("%s: %d of %d matched: the test needs both answers", name, matched, len(cs))
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: answers differ from the first order's", name)
		}
	}
}

// Past MaxPending held records the oldest are released; a completion that
// then falls where a released period was is counted as uncertain.
func TestBound(t *testing.T) {
	for _, lateIO := range []bool{false, true} {
		var misses int
		m := Matcher[struct{}, struct{}]{
			Match: func(trace.WakeCause, struct{}, struct{}) { t.Error("matched a released period") },
			Miss:  func(struct{}) { misses++ },
		}
		n := MaxPending + 1000
		for i := range n {
			e := uint64(1_000*us + i*100*us)
			m.Period(uint32(i%2), e, e+10*us, trace.WakeIRQ, struct{}{})
			if m.Pending() > MaxPending {
				t.Fatalf("holds %d records, bound %d", m.Pending(), MaxPending)
			}
		}
		if lateIO { // all IO at the end of the file, from the start of the recording
			m.Completion(0, 1_000*us+5*us, struct{}{})
		}
		m.Flush()
		if m.Dropped == 0 || (m.Uncertain > 0) != lateIO || misses != map[bool]int{false: 0, true: 1}[lateIO] {
			t.Errorf("lateIO=%v: dropped %d, uncertain %d, misses %d", lateIO, m.Dropped, m.Uncertain, misses)
		}
	}
}
