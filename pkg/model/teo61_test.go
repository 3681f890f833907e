package model

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// The icx table at HZ=250: POLL, C1 1/1, C1E 4/4, C6 170/600 µs (exit
// latency/target residency), TICK 4 ms.
func teo61Table(t *testing.T) *table {
	t.Helper()
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	return newTable(prof, nil, nil, -1)
}

// A far timer (10 ms) with the tick running; stays of 5 ms are hits in
// C6's bin, stays of 100 µs (less half of C6's exit latency: halved, 50
// µs) intercepts in C1E's.
var (
	teo61Far   = selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 4_000_000}
	teo61Hit   = teoStep{in: teo61Far, res: 5_000_000}
	teo61Short = teoStep{in: teo61Far, res: 100_000}
)

func teo61Steps(parts ...any) []teoStep {
	var out []teoStep
	for i := 0; i < len(parts); i += 2 {
		for range parts[i].(int) {
			out = append(out, parts[i+1].(teoStep))
		}
	}
	return out
}

// TestTEO61Update: teo_update's bins, total and recent-intercept ring,
// step by step, as 6.1.192's teo.c computes them.
func TestTEO61Update(t *testing.T) {
	tab := teo61Table(t)
	type want struct {
		hits, intercepts, recent [4]uint32
		total                    uint32
	}
	for _, tc := range []struct {
		name  string
		steps []teoStep
		want  want
	}{
		{"stay past a tick on a far timer: a hit in C6's bin (no tick_hits bin)",
			teo61Steps(1, teo61Hit),
			want{hits: [4]uint32{0, 0, 0, 1024}, total: 1024}},
		{"stay short of the exit latency: halved, an intercept in C1E's bin, one recent",
			teo61Steps(1, teo61Short),
			want{intercepts: [4]uint32{0, 0, 1024, 0}, recent: [4]uint32{0, 0, 1, 0}, total: 1024}},
		{"nine intercepts fill the ring",
			teo61Steps(9, teo61Short),
			// 1024, 1920, 2704, 3390, 3991, 4517, 4977, 5379, 5731
			want{intercepts: [4]uint32{0, 0, 5731, 0}, recent: [4]uint32{0, 0, 9, 0}, total: 5731}},
		{"the tenth takes the first one's slot; a hit then frees a slot",
			teo61Steps(10, teo61Short, 1, teo61Hit),
			// 5731 → 6039 → 5285; the hit's slot held an intercept
			want{hits: [4]uint32{0, 0, 0, 1024}, intercepts: [4]uint32{0, 0, 5285, 0}, recent: [4]uint32{0, 0, 8, 0}, total: 6309}},
		{"a wake-up by the tick on a far timer counts as the whole sleep length: a hit",
			[]teoStep{{in: teo61Far, res: 3_000_000, tickWake: true}},
			want{hits: [4]uint32{0, 0, 0, 1024}, total: 1024}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTEO61(tab)
			teoRun(g, tc.steps, 1)
			g.selectState(&selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 4_000_000}) // runs teo_update
			got := want{total: g.total}
			copy(got.hits[:], g.hits[:4])
			copy(got.intercepts[:], g.intercepts[:4])
			copy(got.recent[:], g.recent[:4])
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTEO61Select: selections of 6.1.192's teo_select, each worked out by
// hand from its source, several where the 6.11 form (teo612.go, the model
// 6.1 replayed with before) answers otherwise.
func TestTEO61Select(t *testing.T) {
	tab := teo61Table(t)
	stopped := teo61Far
	stopped.tickStopped = true
	limited := teo61Far
	limited.latReq = 100_000
	for _, tc := range []struct {
		name     string
		history  []teoStep
		final    selInput
		want     int
		wantStop bool
	}{
		// 60 hits leave C6's hits at 8192; 4 intercepts then decay them to
		// 4802 and give C1E's bin 3390, a total of 8192: 2·3390 < 8192, and
		// 4 recent intercepts are not more than NR_RECENT/2.
		{"four recent intercepts: C6, the tick stopped",
			teo61Steps(60, teo61Hit, 4, teo61Short), teo61Far, 3, true},
		// A fifth: 2·3991 < 8193 (4202 + 3991) still, but 5 recent > 4 (alt_recent): the
		// walk takes C1E at once, with the middle of its bin (302 µs) as
		// the duration, below a tick: the tick kept.
		{"five recent intercepts: C1E by alt_recent, the tick kept",
			teo61Steps(60, teo61Hit, 5, teo61Short), teo61Far, 2, false},
		// The same with the tick stopped: C1E's span fails teo_time_ok, so
		// the first suitable state, the candidate C6, stays.
		{"five recent intercepts, the tick stopped: C6",
			teo61Steps(60, teo61Hit, 5, teo61Short), stopped, 3, true},
		// A 100 µs latency limit: C6 (170 µs) is over it; the constraint is
		// applied after the walk, and the duration stays the sleep length:
		// the tick stopped (6.11's form keeps it for C1E, below a tick).
		{"latency limit: C1E with the sleep length, the tick stopped",
			nil, limited, 2, true},
		// State 1's residency beyond the sleep length: POLL at once, the
		// tick kept (the duration is below a tick).
		{"sleep length below C1's residency: POLL",
			nil, selInput{latReq: noLimit, sleepLen: 500, deltaTick: 500}, 0, false},
		// A sleep length within C1E but not C6: C1E, the duration (300 µs)
		// below a tick, so the tick is kept.
		{"sleep length between C1E and C6: C1E, the tick kept",
			nil, selInput{latReq: noLimit, sleepLen: 300_000, deltaTick: 300_000}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTEO61(tab)
			teoRun(g, tc.history, 1)
			in := tc.final
			idx, stop := g.selectState(&in)
			if idx != tc.want || stop != tc.wantStop {
				t.Errorf("idx=%d stop=%v, want %d stop=%v (hits %v intercepts %v recent %v total %d)",
					idx, stop, tc.want, tc.wantStop, g.hits[:4], g.intercepts[:4], g.recent[:4], g.total)
			}
		})
	}
}

// TestTEO61Disabled: teo_select's handling of disabled states in the 6.1
// form: a disabled state 0 makes the first enabled state idx0 (taken even
// beyond the sleep length), and the latency constraint falls back to state
// 0, disabled or not, as the kernel leaves it.
func TestTEO61Disabled(t *testing.T) {
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		disable  []int
		in       selInput
		want     int
		wantStop bool
	}{
		{"POLL disabled, a short sleep length: C1 (idx0) beyond it",
			[]int{0}, selInput{latReq: noLimit, sleepLen: 500, deltaTick: 500}, 1, false},
		{"POLL disabled, a limit below C1's exit latency: state 0 all the same",
			[]int{0}, selInput{latReq: 0, sleepLen: 10_000_000, deltaTick: 4_000_000}, 0, false},
		{"C1E disabled, sleep length between C1E and C6: C1",
			[]int{2}, selInput{latReq: noLimit, sleepLen: 300_000, deltaTick: 300_000}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := newTable(prof, tc.disable, nil, -1)
			g := newTEO61(tab)
			in := tc.in
			idx, stop := g.selectState(&in)
			if idx != tc.want || stop != tc.wantStop {
				t.Errorf("idx=%d stop=%v, want %d stop=%v", idx, stop, tc.want, tc.wantStop)
			}
		})
	}
}

// TestTEOFormNote: teoFormNote notes the releases whose teo is not modelled as
// they run it (6.3–6.10: util-awareness; before 6.1: not read), and no
// other.
func TestTEOFormNote(t *testing.T) {
	for _, tc := range []struct {
		v    Version
		note bool
	}{
		{Version{5, 10, -1}, true},
		{Version{5, 15, 100}, true},
		{Version{6, 1, 192}, false},
		{Version{6, 2, -1}, false},
		{Version{6, 3, -1}, true},
		{Version{6, 6, 50}, true},
		{Version{6, 10, 14}, true},
		{Version{6, 11, -1}, false},
		{Version{6, 12, 117}, false},
	} {
		n := teoFormNote(tc.v)
		if (n != "") != tc.note || (n != "" && !strings.Contains(n, tc.v.String())) {
			t.Errorf("%v: note %q, want one: %v", tc.v, n, tc.note)
		}
	}
}

// TestTEO61Dispatch: the trace's release and kernel= pick the 6.1 form for
// releases before 6.3 only.
func TestTEO61Dispatch(t *testing.T) {
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		release, policy, want string
	}{
		{"6.1.0-57-cloud-amd64", "teo", "*model.teo61Gov"},
		{"6.1.192-idletrace-lab", "teo", "*model.teo61Gov"},
		{"5.15.0-91-generic", "teo", "*model.teo61Gov"},
		{"6.12.117+deb12-cloud-amd64", "teo+kernel=6.2", "*model.teo61Gov"},
		{"6.1.0-57-cloud-amd64", "teo+kernel=6.3", "*model.teo612Gov"},
		{"6.6.50", "teo", "*model.teo612Gov"},
		{"6.12.117-idletrace-lab", "teo", "*model.teo612Gov"},
	} {
		rp, err := NewReplay(prof, &trace.Metadata{HZ: 250, KernelRelease: tc.release}, []Policy{mustPolicy(t, tc.policy)})
		if err != nil {
			t.Fatal(err)
		}
		if g := fmt.Sprintf("%T", rp.pols[0].newCPU().gov); g != tc.want {
			t.Errorf("%s, %s: %s, want %s", tc.release, tc.policy, g, tc.want)
		}
	}
}
