package model

import (
	"testing"
)

func TestTEODecay(t *testing.T) {
	for _, tc := range []struct{ in, want uint32 }{
		{0, 0}, {7, 0}, {8, 7}, {1024, 896}, {15, 14},
	} {
		if got := teoDecay(tc.in); got != tc.want {
			t.Errorf("teoDecay(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestTEO619Form: histories that 6.19's, 7.0's and 7.1's teo.c answer
// differently (Debian's linux-source-7.3 is 7.1's form; 7.0's is 7.3's with
// 106a2662e655 reversed, 6.19's 7.0's without a971f984b845 and
// 4bd2221f231d), each expected choice worked out by hand from that source. On icx at HZ=250: POLL, C1 1/1, C1E 4/4, C6 170/600 µs,
// TICK 4 ms.
func TestTEO619Form(t *testing.T) {
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	tab := newTable(prof, nil, nil, -1)
	sel := func(sleep, dt int64, stopped bool) selInput {
		return selInput{latReq: noLimit, sleepLen: sleep, deltaTick: dt, tickStopped: stopped}
	}
	type choice struct {
		idx  int
		stop bool
	}
	for _, tc := range []struct {
		name    string
		history []teoStep
		final   selInput
		// want by release: 6.19, 7.0, 7.1 (= 7.3)
		want [3]choice
	}{{
		// 30 µs stays on a 10 ms timer are intercepts in C1E's bin,
		// every one within a tick: the intercepts call for a shallower
		// state and tick_intercepts (8192 against a total of 9216) keep
		// the tick for a shallow one, by 5/8 (6.19) or 2/3 (7.0+). With
		// the tick then stopped and the next timer 20 ms away, all three
		// end in C6, by two roads: 6.19's and 7.0's walk may not go below
		// the shallowest state reaching the tick (min_idx; on icx none
		// but the candidate, C6, does), while 7.1 walks to C1E and then,
		// the timer beyond 2 ticks, takes the deepest state that fits.
		name:    "stopped tick, far timer",
		history: []teoStep{{in: sel(10_000_000, 3_000_000, false), res: 30_000}},
		final:   sel(20_000_000, 20_000_000, true),
		want:    [3]choice{{3, true}, {3, true}, {3, true}},
	}, {
		// The same with the next timer 5 ms away (within 2 ticks): 7.1
		// stays in C1E, where min_idx keeps 6.19 and 7.0 in C6.
		name:    "stopped tick, near timer: 7.1 stays shallow",
		history: []teoStep{{in: sel(10_000_000, 3_000_000, false), res: 30_000}},
		final:   sel(5_000_000, 5_000_000, true),
		want:    [3]choice{{3, true}, {3, true}, {2, true}},
	}, {
		// 99 µs stays in C1E woken by a 100 µs timer: 6.19 counts
		// them hits in C1E's bin (timer and measured idle, 97 µs, in
		// the same bin); 7.0 also needs the sleep length minus the
		// measured idle (3 µs) below half C1E's exit latency (2 µs),
		// so they are intercepts there, and a tick's worth of them.
		// On a 10 ms timer 6.19 goes to C6 and stops the tick; 7.0 and
		// 7.1 walk to C1E and keep it (2/3 of total in
		// tick_intercepts).
		name:    "a timer wake-up before the timer is an intercept from 7.0",
		history: []teoStep{{in: sel(100_000, 100_000, false), res: 99_000}},
		final:   sel(10_000_000, 10_000_000, false),
		want:    [3]choice{{3, true}, {2, false}, {2, false}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for i, v := range []Version{{6, 19, -1}, {7, 0, -1}, {7, 3, 4}} {
				g := newTEOFor(tab, v)
				if _, ok := g.(*teo619Gov); !ok {
					t.Fatalf("%v: newTEOFor gives %T, want the 6.19+ form", v, g)
				}
				teoRun(g, tc.history, 12)
				in := tc.final
				idx, stop := g.selectState(&in)
				if w := tc.want[i]; idx != w.idx || stop != w.stop {
					t.Errorf("%v: idx=%d stop=%v, want %d stop=%v", v, idx, stop, w.idx, w.stop)
				}
			}
		})
	}
}
