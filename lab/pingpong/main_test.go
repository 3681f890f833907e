package main

import "testing"

// TestClean: a sample is clean when exactly the stays it needs ended, each
// in the state asked for, and nothing else woke; "o" when a spin ran over.
func TestClean(t *testing.T) {
	d := &idle{cpus: []int{0, 1}, nstates: 3, overran: 0}
	for _, c := range []struct {
		name    string
		ended   [2][3]int64 // stays that ended, [cpu][state]
		overran int64
		stays   map[int]int
		want    string
	}{
		{"round trip, both in the turn's state", [2][3]int64{{0, 0, 1}, {0, 0, 1}}, 0, map[int]int{0: 2, 1: 2}, "1"},
		{"round trip, waker kept in state 1", [2][3]int64{{0, 1, 0}, {0, 0, 1}}, 0, map[int]int{0: 1, 1: 2}, "1"},
		{"waker's stay in the turn's state, not its own", [2][3]int64{{0, 0, 1}, {0, 0, 1}}, 0, map[int]int{0: 1, 1: 2}, "0"},
		{"a tick: two stays on one CPU", [2][3]int64{{0, 0, 1}, {0, 0, 2}}, 0, map[int]int{0: 2, 1: 2}, "0"},
		{"read, the other CPU woke too", [2][3]int64{{1, 0, 0}, {0, 0, 1}}, 0, map[int]int{1: 2}, "0"},
		{"read, the other CPU slept", [2][3]int64{{0, 0, 0}, {0, 0, 1}}, 0, map[int]int{1: 2}, "1"},
		{"stay begun in the previous turn's state", [2][3]int64{{0, 0, 0}, {0, 1, 0}}, 0, map[int]int{1: 2}, "0"},
		{"a spin ran over", [2][3]int64{{0, 0, 0}, {0, 0, 1}}, 1, map[int]int{1: 2}, "o"},
	} {
		before, after := d.counters(), d.counters()
		for cpu := range 2 {
			for s := range 3 {
				before[cpu][s] = 10
				after[cpu][s] = 10 + c.ended[cpu][s]
			}
		}
		after[2][0] = c.overran
		if got := d.clean(before, after, c.stays); got != c.want {
			t.Errorf("%s: clean = %q, want %q", c.name, got, c.want)
		}
	}
}
