package model

import (
	"cmp"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// teoStep is one selection and the stay that follows it: the stay's
// residency (last_residency_ns) and how it ended.
type teoStep struct {
	in               selInput
	res              int64
	tickWake, pollTO bool
}

func teoRun(g governor, history []teoStep, repeat int) {
	for r := 0; r < repeat; r++ {
		for _, s := range history {
			in := s.in
			idx, _ := g.selectState(&in)
			g.reflect(idx, s.res, s.tickWake, s.pollTO)
		}
	}
}

// TestTEO612Form: each case is a history that the 6.11–6.13 teo.c
// (Debian's 6.12.117 source) and the 6.14+ one (teo.go) answer
// differently, with what 6.12.117 selects and the 6.14+ form (the model
// for every release before this form existed) would have selected. On icx
// at HZ=250: POLL, C1 1/1, C1E 4/4, C6 170/600 µs, TICK 4 ms.
func TestTEO612Form(t *testing.T) {
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	tab := newTable(prof, nil, nil, -1)
	sel := func(sleep, dt int64) selInput {
		return selInput{latReq: noLimit, sleepLen: sleep, deltaTick: dt}
	}
	for _, tc := range []struct {
		name     string
		history  []teoStep
		reps     int // of history; 0: 12
		final    selInput
		want     int
		wantStop bool
		old      int // the 6.14+ form's idx
		oldStop  bool
	}{{
		// 6.12: with state 0 polling, a candidate below
		// RESIDENCY_THRESHOLD_NS never queries the sleep length
		// (and keeps the tick); 6.14+ queries it unless short
		// idles dominate, and a 2 µs timer moves it to C1.
		name:    "C1E candidate: no sleep-length query",
		history: []teoStep{{in: sel(2_000_000, 2_000_000), res: 30_000}},
		final:   sel(2_000, 2_000),
		want:    2, old: 1,
	}, {
		// 6.12: the deepest state's residency (600 µs) is below the
		// tick, so a sleep length of a tick or more puts the timer in
		// the extra hits-only bin; a 1 ms stay is then an intercept
		// in C6's bin, tick_intercept_sum counts it and the 5/8 rule
		// keeps the tick. 6.14+: a hit in C6's bin, the tick stops.
		name:    "tick_hits bin and tick_intercept_sum keep the tick",
		history: []teoStep{{in: sel(10_000_000, 3_000_000), res: 1_000_000}},
		final:   sel(10_000_000, 3_000_000),
		want:    3, wantStop: false,
		old: 3, oldStop: true,
	}, {
		// 6.12: a stay that lasts to the expected timer (time_span ≥
		// sleep_length) is measured as U64_MAX: a hit in the timer's
		// bin (C6 for 620 µs), and C6 stays. 6.14+ takes 620 − 170/2
		// = 535 µs: an intercept in C1E's bin, which moves it to C1E,
		// where 620 − 4/2 µs is a hit in C6's bin: it alternates.
		name:    "a wake-up at the timer is a hit whatever the exit latency",
		history: []teoStep{{in: sel(620_000, 620_000), res: 620_000}},
		reps:    13,
		final:   sel(620_000, 620_000),
		want:    3, old: 2,
	}, {
		// 6.12: total is recomputed from the decayed bins; the
		// intercepts of a burst of 30 µs stays on a 10 ms timer stay
		// in C1E's bin and the deepest bin (tick bin as the timer's),
		// and after 3 timer-length stays C6 is still not chosen
		// (intercepts > half of total − C6 hits): 6.14+ counts the
		// 10 ms stays as hits in C6's bin and tick_intercepts only
		// for intercepts past a tick, and goes back to C6 with the
		// tick stopped.
		name: "deepest-bin intercepts",
		history: []teoStep{
			{in: sel(10_000_000, 3_000_000), res: 30_000},
			{in: sel(10_000_000, 3_000_000), res: 30_000},
			{in: sel(10_000_000, 3_000_000), res: 2_000_000},
			{in: sel(10_000_000, 3_000_000), res: 2_000_000},
		},
		final: sel(10_000_000, 3_000_000),
		want:  3, wantStop: false,
		old: 3, oldStop: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []struct {
				v         Version
				want      int
				wantStop  bool
				wantClass string
			}{
				{Version{6, 12, 117}, tc.want, tc.wantStop, "*model.teo612Gov"},
				{Version{6, 18, 44}, tc.old, tc.oldStop, "*model.teoGov"},
			} {
				g := newTEOFor(tab, f.v)
				teoRun(g, tc.history, cmp.Or(tc.reps, 12))
				in := tc.final
				idx, stop := g.selectState(&in)
				if idx != f.want || stop != f.wantStop {
					t.Errorf("%v: idx=%d stop=%v, want %d stop=%v", f.v, idx, stop, f.want, f.wantStop)
				}
			}
		})
	}
}

// TestTEO612ShallowerStoppedTick: a03b2011808a reached 6.12.y in 6.12.64
// (Debian's linux-source-6.12 changelog lists it under ChangeLog-6.12.64):
// from then on the shallower state for a short sleep length is taken even
// when teo_state_ok rejects it with the tick stopped.
func TestTEO612ShallowerStoppedTick(t *testing.T) {
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	tab := newTable(prof, nil, nil, -1)
	for _, tc := range []struct {
		v    Version
		want int
	}{
		{Version{6, 11, -1}, 3},
		{Version{6, 12, -1}, 3},
		{Version{6, 12, 63}, 3}, // C1E (4 µs) is below the tick: stays in C6
		{Version{6, 12, 64}, 2},
		{Version{6, 12, 117}, 2}, // the lab kernel
		{Version{6, 13, -1}, 3},
	} {
		g := newTEOFor(tab, tc.v)
		if _, ok := g.(*teo612Gov); !ok {
			t.Fatalf("%v: %T, want the 6.11–6.13 form", tc.v, g)
		}
		idx, stop := g.selectState(&selInput{latReq: noLimit, sleepLen: 150_000, deltaTick: 150_000, tickStopped: true})
		if idx != tc.want || !stop {
			t.Errorf("%v: idx=%d stop=%v, want %d with the tick stopped", tc.v, idx, stop, tc.want)
		}
	}
}

// TestTEO612Update: teo_update's bins and total, step by step, as 6.12's
// teo.c computes them (icx, TICK 4 ms; the deepest residency 600 µs <
// TICK, so the tick_hits bin exists).
func TestTEO612Update(t *testing.T) {
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	tab := newTable(prof, nil, nil, -1)
	type want struct {
		hits, intercepts [4]uint32
		tickHits, total  uint32
	}
	for _, tc := range []struct {
		name  string
		steps []teoStep
		want  want
	}{
		{"stay past a tick on a far timer: tick_hits",
			[]teoStep{{in: selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 4_000_000}, res: 5_000_000}},
			want{tickHits: 1024, total: 1024}},
		{"stay short of a tick on a far timer: intercept in C6's bin",
			[]teoStep{{in: selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 4_000_000}, res: 1_000_000}},
			want{intercepts: [4]uint32{0, 0, 0, 1024}, total: 1024}},
		{"stay to the timer: U64_MAX, a hit in the timer's bin",
			[]teoStep{{in: selInput{latReq: noLimit, sleepLen: 620_000, deltaTick: 620_000}, res: 620_000}},
			want{hits: [4]uint32{0, 0, 0, 1024}, total: 1024}},
		{"stay short of the exit latency: halved, an intercept in C1E's bin",
			[]teoStep{{in: selInput{latReq: noLimit, sleepLen: 620_000, deltaTick: 620_000}, res: 150_000}},
			want{intercepts: [4]uint32{0, 0, 1024, 0}, total: 1024}},
		{"tick_hits decays; total is every bin plus the new pulse",
			[]teoStep{
				{in: selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 4_000_000}, res: 5_000_000},
				{in: selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 4_000_000}, res: 5_000_000},
				{in: selInput{latReq: noLimit, sleepLen: 620_000, deltaTick: 620_000}, res: 620_000},
			},
			// tick_hits 1024 → 896 + 1024 = 1920 → 1680; C6 hits 1024
			want{hits: [4]uint32{0, 0, 0, 1024}, tickHits: 1680, total: 2704}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTEO612(tab)
			teoRun(g, tc.steps, 1)
			g.selectState(&selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 4_000_000}) // runs teo_update
			got := want{tickHits: g.tickHits, total: g.total}
			copy(got.hits[:], g.hits[:4])
			copy(got.intercepts[:], g.intercepts[:4])
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTEOKernelDispatch: kernel= and the trace's release pick the form.
func TestTEOKernelDispatch(t *testing.T) {
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		release, policy string
		old             bool
	}{
		{"6.12.117+deb12-cloud-amd64", "teo", true},
		{"6.12.117-idletrace-lab", "teo", true},
		{"6.13.2", "teo", true},
		{"6.14.0", "teo", false},
		{"6.18.44-fc-v657", "teo", false},
		{"6.18.44-fc-v657", "teo+kernel=6.12", true},
		{"6.12.117+deb12-cloud-amd64", "teo+kernel=6.18", false},
	} {
		rp, err := NewReplay(prof, &trace.Metadata{HZ: 250, KernelRelease: tc.release}, []Policy{mustPolicy(t, tc.policy)})
		if err != nil {
			t.Fatal(err)
		}
		g := rp.pols[0].newCPU().gov
		if _, old := g.(*teo612Gov); old != tc.old {
			t.Errorf("%s, %s: %T", tc.release, tc.policy, g)
		}
	}
}
