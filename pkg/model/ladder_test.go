package model

import "testing"

// icxTable is the lab's icx table (POLL, C1 1/1, C1E 4/4, C6 170/600 µs),
// on which ladder was measured against Debian's 6.12.117.
func icxTable() *table {
	return newTable(mkProfile("icx", 250, []State{
		{Name: "POLL", Polling: true},
		{Name: "C1", ExitLatencyNs: 1000, TargetResidencyNs: 1000},
		{Name: "C1E", ExitLatencyNs: 4000, TargetResidencyNs: 4000},
		{Name: "C6", ExitLatencyNs: 170000, TargetResidencyNs: 600000},
	}), nil, nil, -1)
}

type ladderStep struct {
	res    int64 // residency reflected before this selection (-1: none)
	aborts int   // aborted attempts before it
	latReq int64 // 0 means noLimit here; use ladderQoS0 for a real 0
	want   int
}

const ladderQoS0 = -1

// TestLadderKernel612 holds ladderGov to drivers/cpuidle/governors/ladder.c
// of Linux 6.12 step by step. Each case starts from a fresh device
// (ladder_enable_device: last_state_idx = 1 with POLL, counters 0) and
// reflects every selection as entered, as the cpuidle core does.
func TestLadderKernel612(t *testing.T) {
	const long = 1_000_000
	cases := []struct {
		name  string
		steps []ladderStep
	}{
		{"promotion after four long stays", []ladderStep{
			{res: long, want: 1}, {res: long, want: 1}, {res: long, want: 1}, {res: long, want: 2},
		}},
		{"stay in C6 longer than its exit latency but under 2×: demotes", []ladderStep{
			{long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 2},
			{long, 0, 0, 2}, {long, 0, 0, 2}, {long, 0, 0, 2}, {long, 0, 0, 3},
			{200_000, 0, 0, 2}, // 200 − 170 = 30 µs < 170 µs
		}},
		// s64 last_residency against u64 demotion_time_ns: negative is huge.
		{"stay in C6 shorter than its exit latency: no demotion (unsigned compare)", []ladderStep{
			{long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 2},
			{long, 0, 0, 2}, {long, 0, 0, 2}, {long, 0, 0, 2}, {long, 0, 0, 3},
			{100_000, 0, 0, 3},
		}},
		{"stay in C1E shorter than its exit latency: a promotion step", []ladderStep{
			{long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 2},
			{2_000, 0, 0, 2}, {2_000, 0, 0, 2}, {2_000, 0, 0, 2}, {2_000, 0, 0, 3},
		}},
		// call_cpuidle: an aborted attempt ran select and left
		// last_residency_ns 0 (no reflect); 0 − el is a long stay.
		{"aborted attempt after a short C6 stay: no demotion", []ladderStep{
			{long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 2},
			{long, 0, 0, 2}, {long, 0, 0, 2}, {long, 0, 0, 2}, {long, 0, 0, 3},
			// the aborted select demotes on 30 µs (to C1E), the next one
			// sees 0 in C1E: a promotion step, C1E stays
			{200_000, 1, 0, 2},
		}},
		{"aborted attempts count as promotion steps", []ladderStep{
			{long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 2},
			{long, 1, 0, 2}, // aborted select: step 1, this one: step 2
			{long, 1, 0, 3}, // aborted: step 3, this one: 4, promote
		}},
		{"two aborts promote with the next selection", []ladderStep{
			{long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 2},
			{long, 3, 0, 3},
		}},
		// ladder_enable_device leaves states[0]'s thresholds 0 with POLL.
		{"after latency_req 0, one stay promotes out of POLL", []ladderStep{
			{long, 0, ladderQoS0, 0},
			{50_000, 0, 0, 1},
		}},
		{"out of POLL: a zero residency is no promotion step", []ladderStep{
			{long, 0, ladderQoS0, 0},
			{0, 0, 0, 0},
		}},
		{"forced demotion by latency_req", []ladderStep{
			{long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 1}, {long, 0, 0, 2},
			{long, 0, 0, 2}, {long, 0, 0, 2}, {long, 0, 0, 2}, {long, 0, 0, 3},
			{long, 0, 5_000, 2},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newLadder(icxTable())
			for i, st := range c.steps {
				lat := int64(noLimit)
				switch st.latReq {
				case 0:
				case ladderQoS0:
					lat = 0
				default:
					lat = st.latReq
				}
				if i > 0 && st.res >= 0 {
					g.reflect(g.last, st.res, false, false)
				}
				idx, stop := g.selectState(&selInput{latReq: lat, aborts: st.aborts})
				if idx != st.want || !stop {
					t.Fatalf("step %d (res %d, aborts %d): idx=%d stop=%v, want %d (promo %v demo %v)", i, st.res, st.aborts, idx, stop, st.want, g.promo[:4], g.demo[:4])
				}
				g.last = idx // what the kernel's last_state_idx holds before reflect
			}
		})
	}
}

// TestLadderResync: agreement's model follows a recorded move it missed,
// so a promotion count out of phase is not carried into later visits.
func TestLadderResync(t *testing.T) {
	g := newLadder(icxTable())
	in := &selInput{latReq: noLimit}
	for range 3 { // C1 → C1E
		g.selectState(in)
		g.reflect(1, 1_000_000, false, false)
	}
	if idx, _ := g.selectState(in); idx != 2 {
		t.Fatalf("idx=%d, want 2", idx)
	}
	g.reflect(2, 1_000_000, false, false)
	// Two long stays in C1E; the kernel (with counts from before) promotes.
	g.selectState(in)
	g.reflect(2, 1_000_000, false, false)
	idx, _ := g.selectState(in)
	if idx != 2 {
		t.Fatalf("idx=%d, want 2", idx)
	}
	g.resync(idx, 3)
	if g.promo[2] != 0 {
		t.Fatalf("C1E promotion count %d after a recorded promotion, want 0", g.promo[2])
	}
	g.resync(2, 2) // agreement: nothing to do
}
