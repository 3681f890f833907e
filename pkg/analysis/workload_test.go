package analysis

import (
	"fmt"
	"github.com/idletrace/idletrace/pkg/model"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestCountWorkloads writes periods with each TickStoppable value
// through the trace file and counts them back per CPU (unknown ones are
// not counted as known), with each CPU's idle time and span.
func TestCountWorkloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.trace")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewWriter(f, driverMeta())
	if err != nil {
		t.Fatal(err)
	}
	stoppable := []trace.Tristate{trace.Yes, trace.No, trace.No, trace.Unknown}
	for i := range 400 {
		p := period(uint32(i%2), 1, uint64(2_000_000+i*50_000), 10_000)
		p.TickStoppable = stoppable[(i/2)%4]
		if i%2 == 1 {
			p.TickStoppable = trace.Yes // CPU 1: always stoppable
		}
		if i%4 == 0 { // CPU 0's every other period ended by a reschedule IPI, 1 or 5 µs after its request
			p.WakeCause, p.WakeRequestNs = trace.WakeIPIResched, p.ExitNs-uint64(1_000+4_000*(i/4%2))
		}
		if err := w.AddIdle(&p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(&trace.End{StopReason: "duration"}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := CountWorkloads(r)
	if err != nil {
		t.Fatal(err)
	}
	// CPU 0's periods start at 2 ms, every 100 µs, and last 10 µs; CPU 1's
	// 50 µs later.
	want := Workloads{
		0: {TickKnown: 150, TickRefused: 100, Periods: 200, IdleNs: 200 * 10_000, FirstNs: 2_000_000, LastNs: 2_000_000 + 398*50_000 + 10_000},
		1: {TickKnown: 200, TickRefused: 0, Periods: 200, IdleNs: 200 * 10_000, FirstNs: 2_050_000, LastNs: 2_000_000 + 399*50_000 + 10_000},
	}
	if len(got.CPUs) != len(want) || got.CPUs[0] != want[0] || got.CPUs[1] != want[1] {
		t.Errorf("got %+v, want %+v", got.CPUs, want)
	}
	// 100 traced wake-ups, half at 1 µs, half at 5: the mean is 3 µs.
	if s := got.TracedWake.Summary(); s.Count != 100 || s.Mean != 3_000 || s.Max != 5_000 {
		t.Errorf("traced wake latency %+v, want 100 wake-ups, mean 3 µs, max 5 µs", s)
	}
	// A 20 ms span says nothing of the pace or the idle share.
	if r, i := got.PeriodsPerSecond(), got.IdleShare(); r != 0 || i != 0 {
		t.Errorf("over 20 ms: %v periods/s, idle share %v; want 0 (too short to say)", r, i)
	}
}

// TestWorkloadPace: idle periods per second and the idle share over the
// snapshots' window, else the span of every CPU's periods, a busy CPU
// counted as never idle.
func TestWorkloadPace(t *testing.T) {
	cpu := func(periods, idleNs, first, last uint64) CPUWorkload {
		return CPUWorkload{Periods: periods, IdleNs: idleNs, FirstNs: first, LastNs: last}
	}
	for _, tc := range []struct {
		name       string
		w          Workloads
		windowNs   uint64
		rate, idle float64
	}{
		{"two CPUs over 1 s", Workloads{0: cpu(1000, 500e6, 1e9, 2e9), 1: cpu(3000, 250e6, 1.5e9, 2e9)}, 0, 4000, 0.375},
		{"one CPU busy throughout", Workloads{0: cpu(200, 800e6, 1e9, 2e9), 1: {}}, 0, 200, 0.4},
		{"the snapshots' 2 s window", Workloads{0: cpu(200, 800e6, 1e9, 2e9), 1: {}}, 2e9, 100, 0.2},
		{"too short", Workloads{0: cpu(10, 5e6, 1, 50e6)}, 0, 0, 0},
		{"no CPU", Workloads{}, 1e9, 0, 0},
	} {
		w := &Workload{CPUs: tc.w, WindowNs: tc.windowNs}
		if r, i := w.PeriodsPerSecond(), w.IdleShare(); math.Abs(r-tc.rate) > 1e-9 || math.Abs(i-tc.idle) > 1e-9 {
			t.Errorf("%s: %v periods/s, idle share %v; want %v, %v", tc.name, r, i, tc.rate, tc.idle)
		}
	}
}

// TestWorkloadAgreesWithStats: on the bundled recording, the comparison's
// workload figures are stats' own: the periods it counts per CPU over its
// window, its idle fractions, and its wake-up latencies pooled over the
// states.
func TestWorkloadAgreesWithStats(t *testing.T) {
	open := func() *trace.Reader {
		r, err := trace.Open("../../testdata/demo.trace")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	st, err := StatsFromReader(open())
	if err != nil {
		t.Fatal(err)
	}
	w, err := CountWorkloads(open())
	if err != nil {
		t.Fatal(err)
	}
	var periods, wakes uint64
	var idle float64
	for _, c := range st.CPUs {
		periods += c.Periods
		idle += c.IdleFraction / float64(len(st.CPUs))
		if got := w.CPUs[uint32(c.CPU)].Periods; got != c.Periods {
			t.Errorf("CPU %d: %d periods, stats %d", c.CPU, got, c.Periods)
		}
	}
	for _, s := range st.WakeLatencyNs {
		wakes += s.Count
	}
	if w.WindowNs != st.DurationNs {
		t.Errorf("window %d ns, stats' duration %d", w.WindowNs, st.DurationNs)
	}
	if want := float64(periods) / (float64(st.DurationNs) / 1e9); math.Abs(w.PeriodsPerSecond()-want) > 1e-6*want {
		t.Errorf("%.1f periods/s, stats' counts give %.1f", w.PeriodsPerSecond(), want)
	}
	// Each CPU's window is its own instants (a few µs apart), the pooled
	// share the snapshots'.
	if math.Abs(w.IdleShare()-idle) > 1e-4 {
		t.Errorf("idle share %.5f, stats' idle fractions %.5f", w.IdleShare(), idle)
	}
	if n := w.TracedWake.Count(); n != wakes || n == 0 {
		t.Errorf("%d traced wake-ups, stats %d", n, wakes)
	}
}

// withTick gives c refused of known periods' tick states.
func withTick(c CPUWorkload, refused, known uint64) CPUWorkload {
	c.TickRefused, c.TickKnown = refused, known
	return c
}

func TestWorkloadMovedNotes(t *testing.T) {
	tick := func(refused, known uint64) CPUWorkload { return CPUWorkload{TickKnown: known, TickRefused: refused} }
	idle := func(pct, periods uint64) CPUWorkload {
		return CPUWorkload{Periods: periods, IdleNs: pct * 10_000_000, FirstNs: 1_000_000, LastNs: 1_001_000_000}
	}
	for _, tc := range []struct {
		name          string
		before, after Workloads
		want          [][]string // per note, what it says; none: no note
	}{
		{"unchanged", Workloads{0: tick(970, 1000), 1: tick(50, 1000)}, Workloads{0: tick(960, 1000), 1: tick(60, 1000)}, nil},
		// The lab's ladder → menu pair that failed: which CPU kept its
		// tick swapped between the recordings.
		{"tick swapped", Workloads{0: tick(970, 1000), 1: tick(50, 1000)}, Workloads{0: tick(40, 1000), 1: tick(980, 1000)},
			[][]string{{"CPU 0's 97 % before, 4 % after", "CPU 1's 5 % before, 98 % after", "b.trace, a.trace", "stop the tick"}}},
		{"tick moved by just under 20 points", Workloads{0: tick(100, 1000)}, Workloads{0: tick(299, 1000)}, nil},
		{"tick moved by 20 points", Workloads{0: tick(100, 1000)}, Workloads{0: tick(300, 1000)}, [][]string{{"CPU 0's 10 % before, 30 % after"}}},
		{"too few periods to tell", Workloads{0: tick(0, 99)}, Workloads{0: tick(99, 99)}, nil},
		{"a CPU only in one recording", Workloads{0: tick(0, 500)}, Workloads{1: tick(500, 500)}, nil},
		// A new user's experiment: fio moved from CPU 1 to CPU 0.
		{"work moved to another CPU", Workloads{0: idle(53, 5000), 1: idle(95, 5000)}, Workloads{0: idle(97, 5000), 1: idle(50, 5000)},
			[][]string{{"CPU 0 53 % idle before, 97 % after", "CPU 1 95 % idle before, 50 % after", "b.trace, a.trace", "taskset"}}},
		{"idle share moved by 19 points", Workloads{0: idle(50, 5000)}, Workloads{0: idle(69, 5000)}, nil},
		// A new user's haltpoll+qos=0 on a guest: polling cut the
		// ping-pong's wake-ups from 13 µs to 0.3 µs and it ran faster, so
		// both CPUs got busier: the policy's doing, not the work moving.
		{"every CPU busier", Workloads{0: idle(48, 5000), 1: idle(46, 5000)}, Workloads{0: idle(21, 20000), 1: idle(19, 20000)}, nil},
		{"every CPU idler", Workloads{0: idle(20, 5000), 1: idle(25, 5000)}, Workloads{0: idle(60, 2000), 1: idle(70, 2000)}, nil},
		{"one CPU moved, the other not", Workloads{0: idle(50, 5000), 1: idle(50, 5000)}, Workloads{0: idle(80, 5000), 1: idle(45, 5000)}, nil},
		// The tick note stands on its own: every CPU busier drops the
		// idle note only.
		{"tick moved, every CPU busier", Workloads{0: withTick(idle(48, 5000), 100, 1000), 1: withTick(idle(46, 5000), 100, 1000)},
			Workloads{0: withTick(idle(21, 20000), 400, 1000), 1: withTick(idle(19, 20000), 100, 1000)},
			[][]string{{"CPU 0's 10 % before, 40 % after", "stop the tick"}}},
		{"a recording too short to tell", Workloads{0: {Periods: 5, IdleNs: 5_000_000, FirstNs: 1_000_000, LastNs: 51_000_000}},
			Workloads{0: {Periods: 5, IdleNs: 45_000_000, FirstNs: 1_000_000, LastNs: 51_000_000}}, nil},
		// A CPU the work moved onto has few idle periods, and one with
		// none at all is busy throughout (CountWorkloads lists it).
		{"work moved onto a CPU", Workloads{0: idle(90, 5000), 1: idle(40, 5000)}, Workloads{0: idle(0, 0), 1: idle(90, 5000)},
			[][]string{{"CPU 0 90 % idle before, 0 % after", "CPU 1 40 % idle before, 90 % after"}}},
		{"a CPU not recorded after", Workloads{0: idle(90, 5000), 1: idle(40, 5000)}, Workloads{1: idle(40, 5000)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := WorkloadMovedNotes(tc.before, tc.after, true, "b.trace", "a.trace")
			// Where the shares are not comparable, no tick note.
			for _, n := range WorkloadMovedNotes(tc.before, tc.after, false, "b.trace", "a.trace") {
				if strings.Contains(n, "stop the tick") {
					t.Errorf("a tick note where the shares cannot be compared: %q", n)
				}
			}
			if len(notes) != len(tc.want) {
				t.Fatalf("notes %q, want %d", notes, len(tc.want))
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(notes[i], WorkloadMovedNote) {
					t.Errorf("note %q does not begin %q", notes[i], WorkloadMovedNote)
				}
				for _, w := range want {
					if !strings.Contains(notes[i], w) {
						t.Errorf("note %q lacks %q", notes[i], w)
					}
				}
			}
		})
	}
}

// TestCombineRunsKeepsWorkloadNotes: an experiment's report is its first
// pair's, but a later pair whose recordings moved says so too.
func TestCombineRunsKeepsWorkloadNotes(t *testing.T) {
	moved3 := WorkloadMovedNote + " (before-3.trace, after-3.trace), …"
	first := &ComparisonReport{Policy: "menu", Notes: []string{"knobs as recorded: …"}}
	third := &ComparisonReport{Policy: "menu", Notes: []string{"knobs", moved3}}
	rep := CombineRuns([]*ComparisonReport{first, {Policy: "menu"}, third})
	if got := strings.Join(rep.Notes, "|"); got != "knobs as recorded: …|"+moved3 {
		t.Errorf("notes %q", got)
	}
	if len(first.Notes) != 1 {
		t.Errorf("the first pair's own notes were changed: %q", first.Notes)
	}
}

// TestCombineRunsUnlikeRuns: a run whose recording replayed far fewer (or
// more) idle periods than the others of its side is named, and a later
// run's failed workload is kept.
func TestCombineRunsUnlikeRuns(t *testing.T) {
	run := func(i int, before, after uint64, notes ...string) *ComparisonReport {
		return &ComparisonReport{Policy: "menu", BeforeTrace: fmt.Sprintf("before-%d.trace", i), AfterTrace: fmt.Sprintf("after-%d.trace", i),
			Before: model.Result{IdlePeriods: before}, Measured: model.Result{IdlePeriods: after}, Notes: notes}
	}
	failed := WorkloadFailedNote + "after-2.trace's recording (sh exited with status 3): …"
	rep := CombineRuns([]*ComparisonReport{run(1, 52332, 50000), run(2, 51000, 49000, failed), run(3, 53, 51000)})
	got := strings.Join(rep.Notes, "|")
	for _, want := range []string{failed, "before-3.trace replayed 53 idle periods against a median of 51000 over the runs' before recordings"} {
		if !strings.Contains(got, want) {
			t.Errorf("notes %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "after-") && strings.Contains(got, "over the runs' after recordings") {
		t.Errorf("an after run named unlike, all within a factor 4: %q", got)
	}
}

// TestTickComparable: the tick-refused shares are held to each other only
// where the policy cannot have changed how often the kernel computed them.
func TestTickComparable(t *testing.T) {
	const none = trace.PMQoSNoGlobalLimitUs // what a trace records without a limit
	meta := func(gov string, qos int64, window uint64) *trace.Metadata {
		m := &trace.Metadata{CPUIdleGovernor: gov, PMQoS: trace.PMQoS{CPUDMALatencyUs: qos},
			States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{{Index: 0, Name: "POLL"}, {Index: 1, Name: "C1"}, {Index: 2, Name: "C6"}}}}}
		if gov == "haltpoll" {
			m.HaltPoll = &trace.HaltPollParams{GuestHaltPollNs: window}
		}
		return m
	}
	c6Off := meta("teo", none, 0)
	c6Off.States[0].States[2].Disabled = true
	for _, tc := range []struct {
		name          string
		before, after *trace.Metadata
		want          bool
	}{
		{"menu both", meta("menu", none, 0), meta("menu", none, 0), true},
		{"ladder both", meta("ladder", none, 0), meta("ladder", none, 0), true},
		{"haltpoll, no windows", meta("haltpoll", none, 0), meta("haltpoll", none, 0), true},
		{"the limit unreadable (-1)", meta("menu", -1, 0), meta("menu", -1, 0), false},
		// A new user's experiments.
		{"haltpoll, a window after", meta("haltpoll", none, 0), meta("haltpoll", none, 200000), false},
		{"haltpoll, qos=0 after", meta("haltpoll", none, 0), meta("haltpoll", 0, 0), false},
		{"haltpoll, qos=0 both: stop_tick never set", meta("haltpoll", 0, 0), meta("haltpoll", 0, 0), false},
		{"haltpoll to menu", meta("haltpoll", none, 0), meta("menu", 20, 0), false},
		{"menu, qos after", meta("menu", none, 0), meta("menu", 20, 0), false},
		// teo queries the sleep length as its candidates go: disable= moves that.
		{"teo, C6 disabled after", meta("teo", none, 0), c6Off, false},
		{"teo, C6 disabled in both", c6Off, c6Off, true},
	} {
		if got := TickComparable(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
