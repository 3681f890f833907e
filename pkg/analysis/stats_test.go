package analysis

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/trace"
)

const us = 1000

// driverMeta is a machine with a three-state table on two CPUs.
func driverMeta() *trace.Metadata {
	tab := []trace.StateInfo{
		{Index: 0, Name: "POLL", ExitLatencyNs: 0, TargetResidencyNs: 0, Polling: true},
		{Index: 1, Name: "C1", ExitLatencyNs: 2 * us, TargetResidencyNs: 2 * us},
		{Index: 2, Name: "C6", ExitLatencyNs: 133 * us, TargetResidencyNs: 400 * us},
	}
	return &trace.Metadata{
		KernelRelease: "6.18.0-test", HZ: 250, CPUIdleDriver: "intel_idle", CPUIdleGovernor: "menu",
		NumCPUs: 2, RecordedCPUs: []int{0, 1},
		States:       []trace.CPUStates{{CPU: 0, States: tab}, {CPU: 1, States: tab}},
		BlockDevices: []trace.BlockDevice{{Name: "vda", Major: 253, Minor: 0}},
		Probes:       map[string]string{"cpu_idle": "tp_btf", "block_rq_complete": "tracepoint"},
		Inputs:       trace.Inputs{WakeCauses: true, WakeRequests: true, BlockIO: true},
		Start:        &trace.Snapshot{MonotonicNs: 1_000_000},
	}
}

// period builds an idle period starting at entry with residency res.
func period(cpu, state uint32, entry, res uint64) trace.IdlePeriod {
	return trace.IdlePeriod{CPU: cpu, State: state, EntryNs: entry, ExitNs: entry + res, WakeCause: trace.WakeTimer, WakeIRQ: -1}
}

// synthetic periods on CPU 0 with known classification:
//
//	POLL 5 µs: below (5-0 ≥ tr(C1)=2)
//	C1 1 µs: above (< 2 µs, POLL enabled); C1 500 µs: below (498 ≥ 400);
//	C1 100 µs: neither
//	C6 300 µs: above; C6 1 ms: neither (no deeper state)
func syntheticPeriods() []trace.IdlePeriod {
	t := uint64(2_000_000)
	var out []trace.IdlePeriod
	for _, p := range []struct {
		state uint32
		res   uint64
	}{{0, 5 * us}, {1, 1 * us}, {1, 500 * us}, {1, 100 * us}, {2, 300 * us}, {2, 1000 * us}} {
		out = append(out, period(0, p.state, t, p.res))
		t += p.res + 10*us
	}
	return out
}

type scanFunc = func(trace.Visitor) error

// scanOf streams periods, then IO requests, like a file with one chunk of each.
func scanOf(periods []trace.IdlePeriod, ios []trace.BlockIO) scanFunc {
	return func(v trace.Visitor) error {
		idle, blockIO := v.Idle, v.BlockIO
		for i := range periods {
			p := periods[i] // records are only valid during the callback
			if err := idle(&p); err != nil {
				return err
			}
		}
		for i := range ios {
			b := ios[i]
			if err := blockIO(&b); err != nil {
				return err
			}
		}
		return nil
	}
}

func counters(cpu int, st ...trace.StateCounters) trace.CPUCounters {
	return trace.CPUCounters{CPU: cpu, States: st}
}

// endWith builds an end record whose cpuidle counters are start + delta.
func endWith(deltas []trace.CPUCounters) *trace.End {
	return &trace.End{StopReason: "duration", Snapshot: &trace.Snapshot{MonotonicNs: 100_000_000, CPUIdle: deltas}}
}

func TestClassificationExact(t *testing.T) {
	meta := driverMeta()
	// Kernel counters at start are non-zero so deltas are exercised.
	meta.Start.CPUIdle = []trace.CPUCounters{
		counters(0, trace.StateCounters{Index: 0, Usage: 10, TimeUs: 100}, trace.StateCounters{Index: 1, Usage: 7, TimeUs: 70, Above: 3}, trace.StateCounters{Index: 2, Usage: 1, TimeUs: 5}),
		counters(1, trace.StateCounters{Index: 0}, trace.StateCounters{Index: 1}, trace.StateCounters{Index: 2}),
	}
	end := endWith([]trace.CPUCounters{
		counters(0, trace.StateCounters{Index: 0, Usage: 11, TimeUs: 105, Below: 1}, trace.StateCounters{Index: 1, Usage: 10, TimeUs: 671, Above: 4, Below: 1}, trace.StateCounters{Index: 2, Usage: 3, TimeUs: 1305, Above: 1}),
		counters(1, trace.StateCounters{Index: 0}, trace.StateCounters{Index: 1}, trace.StateCounters{Index: 2}),
	})
	s, err := ComputeStats(meta, end, nil, scanOf(syntheticPeriods(), nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []StateStats{
		{Index: 0, Name: "POLL", Usage: 1, TimeNs: 5 * us, Above: 0, Below: 1},
		{Index: 1, Name: "C1", Usage: 3, TimeNs: 601 * us, Above: 1, Below: 1},
		{Index: 2, Name: "C6", Usage: 2, TimeNs: 1300 * us, Above: 1, Below: 0},
	}
	if len(s.CPUs) != 2 || s.CPUs[0].CPU != 0 || s.CPUs[1].CPU != 1 {
		t.Fatalf("cpus = %+v", s.CPUs)
	}
	for _, st := range []struct {
		name string
		got  []StateStats
	}{{"trace", s.CPUs[0].States}, {"kernel", s.Kernel.CPUs[0].States}} {
		if len(st.got) != len(want) {
			t.Fatalf("%s: %d states, want %d", st.name, len(st.got), len(want))
		}
		for i, w := range want {
			g := st.got[i]
			if g.Index != w.Index || g.Name != w.Name || g.Usage != w.Usage || g.TimeNs != w.TimeNs || g.Above != w.Above || g.Below != w.Below {
				t.Errorf("%s state %d = %+v, want %+v", st.name, i, g, w)
			}
		}
	}
	if !s.Kernel.Available {
		t.Fatalf("kernel counters not available: %s", s.Kernel.Note)
	}
	if len(s.Mismatches) != 0 {
		t.Errorf("mismatches on agreeing counters: %+v", s.Mismatches)
	}
	if got, want := s.DurationNs, uint64(99_000_000); got != want {
		t.Errorf("duration %d, want %d", got, want)
	}
	if s.CPUs[0].IdleNs != 1906*us || s.CPUs[0].Periods != 6 {
		t.Errorf("cpu0 idle %d ns in %d periods", s.CPUs[0].IdleNs, s.CPUs[0].Periods)
	}
	if f := s.CPUs[0].IdleFraction; f < 0.01925 || f > 0.01926 { // 1.906 ms / 99 ms
		t.Errorf("idle fraction %v", f)
	}
}

func TestMismatchesFlagged(t *testing.T) {
	meta := driverMeta()
	meta.Start.CPUIdle = []trace.CPUCounters{counters(0, trace.StateCounters{Index: 0}, trace.StateCounters{Index: 1}, trace.StateCounters{Index: 2})}
	end := endWith([]trace.CPUCounters{counters(0,
		trace.StateCounters{Index: 0, Usage: 1, TimeUs: 5, Below: 1},
		trace.StateCounters{Index: 1, Usage: 4, TimeUs: 601, Above: 1, Below: 1}, // usage differs
		trace.StateCounters{Index: 2, Usage: 2, TimeUs: 1310, Above: 0},          // residency -0.76 %, above differs
	)})
	for _, lost := range []uint64{0, 5} {
		s, err := ComputeStats(meta, end, []trace.Loss{{CPU: 0, IdleLost: lost}}, scanOf(syntheticPeriods(), nil))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range s.Mismatches {
			got = append(got, m.Name+"."+m.Field)
		}
		want := []string{"C1.usage", "C6.time_ns", "C6.above"}
		if lost > 0 {
			want = want[1:] // usage is not compared where records were lost
		}
		if !slices.Equal(got, want) {
			t.Errorf("lost=%d: mismatches %v, want %v", lost, got, want)
		}
		if s.LostEvents != lost {
			t.Errorf("lost_events %d, want %d", s.LostEvents, lost)
		}
		var buf bytes.Buffer
		if err := RenderStats(&buf, s, "text"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "MISMATCH above") || !strings.Contains(buf.String(), "residency -0.76 %") {
			t.Errorf("text output does not flag the mismatches:\n%s", buf.String())
		}
	}
}

func TestResidencyTolerance(t *testing.T) {
	for _, c := range []struct {
		traced, kernel uint64
		ok             bool
	}{
		{1_000_000, 1_000_000, true},
		{1_004_999, 1_000_000, true},
		{1_005_001, 1_000_000, false},
		{994_000, 1_000_000, false},
		{1500, 0, true}, // sysfs µs truncation at both ends
		{5000, 0, false},
	} {
		if got := ResidencyAgrees(c.traced, c.kernel); got != c.ok {
			t.Errorf("ResidencyAgrees(%d, %d) = %v", c.traced, c.kernel, got)
		}
	}
}

func noDriverMeta() *trace.Metadata {
	return &trace.Metadata{
		KernelRelease: "6.18.44", HZ: 250, CPUIdleDriver: "none", NumCPUs: 2, RecordedCPUs: []int{0, 1},
		Inputs: trace.Inputs{WakeCauses: true, WakeRequests: true},
		Start:  &trace.Snapshot{MonotonicNs: 1000},
	}
}

func TestNoCPUIdleDriver(t *testing.T) {
	meta := noDriverMeta()
	end := &trace.End{Snapshot: &trace.Snapshot{MonotonicNs: 10_000_000}}
	ps := []trace.IdlePeriod{
		period(0, 1, 10_000, 3*us),
		period(0, 1, 20_000, 900*us), // would be "below" with any table
		period(1, 0, 10_000, 1*us),   // cpu_idle_poll
		period(1, 1, 20_000, 50*us),
	}
	ps[1].WakeCause, ps[1].WakeRequestNs = trace.WakeIPIResched, ps[1].ExitNs-20*us
	s, err := ComputeStats(meta, end, nil, scanOf(ps, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.CPUs) != 2 {
		t.Fatalf("cpus %+v", s.CPUs)
	}
	c0 := s.CPUs[0].States
	if len(c0) != 1 || c0[0].Index != 1 || c0[0].Name != NoDriverHLT || c0[0].Usage != 2 || c0[0].TimeNs != 903*us || c0[0].Above != 0 || c0[0].Below != 0 {
		t.Errorf("cpu0 states %+v", c0)
	}
	c1 := s.CPUs[1].States
	if len(c1) != 2 || c1[0].Name != NoDriverPOLL || c1[1].Name != NoDriverHLT {
		t.Errorf("cpu1 states %+v", c1)
	}
	if s.Kernel.Available || s.Kernel.Note == "" || len(s.Kernel.CPUs) != 2 {
		t.Fatalf("kernel %+v", s.Kernel)
	}
	for _, k := range s.Kernel.CPUs {
		if k.States == nil || len(k.States) != 0 {
			t.Errorf("kernel cpu %d states %v, want empty array", k.CPU, k.States)
		}
	}
	if l := s.WakeLatencyNs[NoDriverHLT]; l.Count != 1 || l.Max != 20*us {
		t.Errorf("wake latency %+v", l)
	}
	var buf bytes.Buffer
	if err := RenderStats(&buf, s, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"states": []`) {
		t.Errorf("kernel states must be an empty JSON array:\n%s", buf.String())
	}
	buf.Reset()
	if err := RenderStats(&buf, s, "text"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "no cpuidle driver") || !strings.Contains(buf.String(), NoDriverHLT) {
		t.Errorf("text does not explain the missing driver:\n%s", buf.String())
	}
}

// TestStateOfUncountedPeriods: a state whose periods the kernel counted
// none of (rejected entries) is still listed, with no usage, so that a
// CPU's periods are all in its states (the fleet's state rows split them),
// whether or not the trace has a state table.
func TestStateOfUncountedPeriods(t *testing.T) {
	for _, withTable := range []bool{false, true} {
		meta := noDriverMeta()
		meta.CPUIdleDriver, meta.NumCPUs, meta.RecordedCPUs = "acpi_idle", 1, []int{0}
		if withTable {
			meta.States = []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{
				{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: "C1", ExitLatencyNs: 1 * us, TargetResidencyNs: 1 * us}}}}
		}
		ps := []trace.IdlePeriod{period(0, 0, 10_000, 3*us), period(0, 1, 20_000, 50*us), period(0, 0, 100_000, 4*us)}
		ps[0].KernelKnown, ps[2].KernelKnown = true, true // rejected: known to the core, not counted
		ps[1].KernelKnown, ps[1].KernelCounted, ps[1].KernelResidencyNs = true, true, 49*us
		s, err := ComputeStats(meta, &trace.End{Snapshot: &trace.Snapshot{MonotonicNs: 10_000_000}}, nil, scanOf(ps, nil))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, st := range s.CPUs[0].States {
			got = append(got, fmt.Sprintf("%d usage %d time %d", st.Index, st.Usage, st.TimeNs))
		}
		if want := []string{"0 usage 0 time 0", "1 usage 1 time 49000"}; !slices.Equal(got, want) || s.CPUs[0].Periods != 3 {
			t.Errorf("table %v: states %q, periods %d; want %q and 3", withTable, got, s.CPUs[0].Periods, want)
		}
	}
}

func TestWindowFiltering(t *testing.T) {
	meta := driverMeta()
	// CPUTimeNs is parallel to CPUIdle (here listed CPU 1 first).
	meta.Start.CPUIdle = []trace.CPUCounters{counters(1), counters(0)}
	// Per-CPU window for CPU 0: (5 ms, 8 ms]; CPU 1 was not pinned (0).
	meta.Start.CPUTimeNs = []uint64{0, 5_000_000}
	end := endWith([]trace.CPUCounters{counters(1), counters(0)})
	end.Snapshot.CPUTimeNs = []uint64{0, 8_000_000}
	ps := []trace.IdlePeriod{
		period(0, 1, 4_000_000, 500*us),  // exits at 4.5 ms: before
		period(0, 1, 4_900_000, 200*us),  // straddles the start, exits inside: counted
		period(0, 1, 7_900_000, 100*us),  // exits at 8 ms exactly: counted
		period(0, 1, 7_950_000, 100*us),  // exits after the end
		period(1, 1, 500_000, 100*us),    // before the global start (1 ms)
		period(1, 1, 50_000_000, 100*us), // inside
		period(1, 1, 99_950_000, 100*us), // after the global end (100 ms)
	}
	ios := []trace.BlockIO{
		{Dev: 253 << 20, IssueNs: 10_000_000, CompleteNs: 10_080_000},
		{Dev: 253 << 20, IssueNs: 100, CompleteNs: 200}, // before the start
	}
	s, err := ComputeStats(meta, end, nil, scanOf(ps, ios))
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUs[0].Periods != 2 || s.CPUs[1].Periods != 1 {
		t.Errorf("periods %d, %d; want 2, 1", s.CPUs[0].Periods, s.CPUs[1].Periods)
	}
	if s.CPUs[0].WindowNs != 3_000_000 {
		t.Errorf("cpu0 window %d", s.CPUs[0].WindowNs)
	}
	if s.OutsideWindow.IdlePeriods != 4 || s.OutsideWindow.IORequests != 1 || s.IO.Requests != 1 {
		t.Errorf("outside %+v, io %d", s.OutsideWindow, s.IO.Requests)
	}
}

func irqPeriod(cpu uint32, entry, res uint64) trace.IdlePeriod {
	p := period(cpu, 1, entry, res)
	p.WakeCause, p.WakeIRQ = trace.WakeIRQ, 24
	return p
}

func completion(cpu uint32, done uint64) trace.BlockIO {
	return trace.BlockIO{Dev: 253 << 20, IssueNs: done - 80*us, CompleteNs: done, CompleteCPU: cpu}
}

func TestIOWokeIdleCPU(t *testing.T) {
	meta := driverMeta()
	ps := []trace.IdlePeriod{
		irqPeriod(0, 10_000_000, 200*us), // exit 10.2 ms
		irqPeriod(1, 20_000_000, 200*us), // exit 20.2 ms
		period(0, 1, 30_000_000, 200*us),
		irqPeriod(0, 40_000_000, 200*us), // exit 40.2 ms
		period(1, 1, 70_000_000, 200*us),
		period(0, 1, 70_000_000, 200*us),
	}
	ps[3].WakeCause = trace.WakeIPICall // blk-mq remote completion
	ios := []trace.BlockIO{
		completion(0, 10_150_000), // inside the period (HLT: handler before the exit event): woke
		completion(0, 10_230_000), // 30 µs after the exit (MWAIT order): woke
		completion(1, 20_100_000), // inside CPU 1's period: woke
		completion(1, 20_300_000), // 100 µs after the exit: beyond the window
		completion(0, 30_100_000), // inside a timer-woken period: not an IO wake-up
		completion(0, 40_210_000), // woke (IPI)
		completion(0, 60_000_000), // CPU busy
	}
	type ev struct {
		t  uint64
		fn func(v trace.Visitor)
	}
	byTime := func(v trace.Visitor) error {
		var evs []ev
		for i := range ps {
			p := ps[i]
			evs = append(evs, ev{p.ExitNs, func(v trace.Visitor) { v.Idle(&p) }})
		}
		for i := range ios {
			b := ios[i]
			evs = append(evs, ev{b.CompleteNs, func(v trace.Visitor) { v.BlockIO(&b) }})
		}
		slices.SortStableFunc(evs, func(a, b ev) int { return int(int64(a.t) - int64(b.t)) })
		for _, e := range evs {
			e.fn(v)
		}
		return nil
	}
	orders := map[string]scanFunc{
		"periods first": scanOf(ps, ios),
		"ios first": func(v trace.Visitor) error {
			return scanOf(nil, ios)(v) // then the periods
		},
		"by time": byTime,
	}
	orders["ios first"] = func(v trace.Visitor) error {
		if err := scanOf(nil, ios)(v); err != nil {
			return err
		}
		return scanOf(ps, nil)(v)
	}
	for name, scan := range orders {
		b := NewStatsBuilder(meta, nil)
		if err := scan(b.Visitor()); err != nil {
			t.Fatal(err)
		}
		s := b.Finish(nil)
		if s.IO.WokeIdleCPU != 4 || s.IO.WokeIdleCPUByCause["irq"] != 3 || s.IO.WokeIdleCPUByCause["ipi-call"] != 1 {
			t.Errorf("%s: woke_idle_cpu %d (%v), want 4 (3 irq, 1 ipi-call)", name, s.IO.WokeIdleCPU, s.IO.WokeIdleCPUByCause)
		}
		if s.IO.Requests != uint64(len(ios)) || s.IO.LatencyNs.P50 != 80*us || s.IO.LatencyNs.Max != 80*us {
			t.Errorf("%s: io %+v", name, s.IO)
		}
		if b.iowake.Pending() > 2 {
			t.Errorf("%s: %d records still held after both streams ended", name, b.iowake.Pending())
		}
	}
}

// TestIOWokeChunked feeds the two streams the way a file stores them: chunks
// of each type, the IO chunks lagging behind the idle chunks by a whole chunk,
// and checks the exact count and that what is held stays bounded.
func TestIOWokeChunked(t *testing.T) {
	const n = 200_000
	const chunk = 4096
	var ps []trace.IdlePeriod
	var ios []trace.BlockIO
	want := uint64(0)
	for i := 0; i < n; i++ {
		cpu := uint32(i % 4)
		entry := uint64(1_000_000 + i*100_000)
		if i%3 == 0 {
			ps = append(ps, irqPeriod(cpu, entry, 40*us))
			if i%2 == 0 { // inside the period
				ios = append(ios, completion(cpu, entry+39*us))
			} else { // just after the exit
				ios = append(ios, completion(cpu, entry+45*us))
			}
			want++
		} else {
			ps = append(ps, period(cpu, 1, entry, 40*us))
			if i%5 == 0 { // completion on a busy CPU
				ios = append(ios, completion(cpu, entry+90*us))
			}
		}
	}
	// lead "idle": idle chunks run one chunk ahead of IO chunks; "io": the reverse.
	meta := driverMeta()
	meta.NumCPUs, meta.RecordedCPUs = 4, []int{0, 1, 2, 3}
	for _, lead := range []string{"idle", "io"} {
		b := NewStatsBuilder(meta, nil)
		maxHeld := 0
		pi, ii := 0, 0
		for pi < len(ps) || ii < len(ios) {
			if lead == "idle" {
				for k := 0; k < chunk && pi < len(ps); k++ {
					b.AddIdle(&ps[pi])
					pi++
				}
				var limit uint64
				switch {
				case pi == len(ps):
					limit = 1 << 63
				case pi > chunk:
					limit = ps[pi-chunk].ExitNs
				}
				for ii < len(ios) && ios[ii].CompleteNs <= limit {
					b.AddBlockIO(&ios[ii])
					ii++
				}
			} else {
				for k := 0; k < chunk && ii < len(ios); k++ {
					b.AddBlockIO(&ios[ii])
					ii++
				}
				var limit uint64
				switch {
				case ii == len(ios):
					limit = 1 << 63
				case ii > chunk:
					limit = ios[ii-chunk].CompleteNs
				}
				for pi < len(ps) && ps[pi].ExitNs <= limit {
					b.AddIdle(&ps[pi])
					pi++
				}
			}
			maxHeld = max(maxHeld, b.iowake.Pending())
		}
		s := b.Finish(nil)
		if s.IO.WokeIdleCPU != want {
			t.Errorf("%s ahead: woke_idle_cpu %d, want %d", lead, s.IO.WokeIdleCPU, want)
		}
		if maxHeld > 3*chunk || maxHeld == 0 {
			t.Errorf("%s ahead: held up to %d records; bounded by the chunk drift (%d) expected", lead, maxHeld, 3*chunk)
		}
	}
}

func TestBlockCounters(t *testing.T) {
	meta := driverMeta()
	meta.Start.Block = []trace.BlockCounter{{Name: "vda", Major: 253, Minor: 0, Stat: []uint64{100, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}}}
	end := endWith(nil)
	end.Snapshot.Block = []trace.BlockCounter{{Name: "vda", Major: 253, Minor: 0, Stat: []uint64{102, 9, 0, 0, 51, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8}}}
	ios := []trace.BlockIO{
		{Dev: 253 << 20, IssueNs: 2_000_000, CompleteNs: 2_100_000},
		{Dev: 253 << 20, IssueNs: 2_000_000, CompleteNs: 2_200_000, Op: trace.OpWrite},
		{Dev: 253 << 20, IssueNs: 2_000_000, CompleteNs: 2_300_000, Op: trace.OpFlush, Error: -5},
	}
	s, err := ComputeStats(meta, end, nil, scanOf(nil, ios))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.IO.Devices) != 1 {
		t.Fatalf("devices %+v", s.IO.Devices)
	}
	d := s.IO.Devices[0]
	if d.Name != "vda" || d.Requests != 3 || d.KernelCompleted == nil || *d.KernelCompleted != 4 || d.Errors != 1 {
		t.Errorf("device %+v", d)
	}
	if len(s.Mismatches) != 1 || s.Mismatches[0].Field != "completed" {
		t.Errorf("mismatches %+v", s.Mismatches)
	}
	// The one missing completion is one whose issue the recorder did not see.
	meta.Start.IOUnmatched, end.Snapshot.IOUnmatched = 10, 11
	s, _ = ComputeStats(meta, end, nil, scanOf(nil, ios))
	if !s.IO.KernelDiffExplained || len(s.Mismatches) != 0 || *s.IO.WithoutIssueInWindow != 1 {
		t.Errorf("explained %v, unmatched %v, mismatches %+v", s.IO.KernelDiffExplained, s.IO.WithoutIssueInWindow, s.Mismatches)
	}
	if s.IO.LatencyNs.Mean != 200_000 {
		t.Errorf("mean %v", s.IO.LatencyNs.Mean)
	}
}

// Under steady IO a snapshot's reads of a device do not hold still: the
// kernel's count in the window is a range, and the trace is held to it
// (with the requests it lacks by the recording's account, split over the
// devices), in the report a user reads as in its JSON.
func TestBlockCountersUnsettled(t *testing.T) {
	// A device the kernel counted 100 completions on between the reads
	// kept; moved start and end: the counts the reads around each
	// instant moved by (the instant's count up to that much lower).
	type device struct {
		name      string
		traced    int
		moved     [2]uint64
		wantRange *[2]uint64
		wantCheck string
	}
	for _, tc := range []struct {
		name          string
		devs          []device
		unmatched     uint64 // completions without a traced issue in the window
		wantExplained bool
		wantMismatch  []string
		wantLine      string
	}{
		{name: "settled, equal", devs: []device{{name: "vda", traced: 100, wantCheck: "ok"}}},
		{name: "settled, one more traced", devs: []device{{name: "vda", traced: 101, wantCheck: "MISMATCH +1"}}, wantMismatch: []string{"vda"}},
		{name: "settled, short by the account", unmatched: 5, wantExplained: true,
			devs: []device{{name: "vda", traced: 95, wantCheck: "ok: 5 without a traced issue or not delivered"}}},
		{name: "moved, more traced within", wantExplained: true,
			devs: []device{{name: "vda", traced: 125, moved: [2]uint64{30, 20}, wantRange: &[2]uint64{80, 130}, wantCheck: "ok: within the range"}}},
		{name: "moved, fewer traced within", wantExplained: true,
			devs: []device{{name: "vda", traced: 85, moved: [2]uint64{30, 20}, wantRange: &[2]uint64{80, 130}, wantCheck: "ok: within the range"}}},
		{name: "moved, beyond", devs: []device{{name: "vda", traced: 131, moved: [2]uint64{30, 20}, wantRange: &[2]uint64{80, 130}, wantCheck: "MISMATCH: outside 80–130"}}, wantMismatch: []string{"vda"}},
		{name: "moved, short", devs: []device{{name: "vda", traced: 79, moved: [2]uint64{30, 20}, wantRange: &[2]uint64{80, 130}, wantCheck: "MISMATCH: outside 80–130"}}, wantMismatch: []string{"vda"}},
		{name: "moved, short by the account", unmatched: 5, wantExplained: true,
			devs: []device{{name: "vda", traced: 76, moved: [2]uint64{30, 20}, wantRange: &[2]uint64{80, 130}, wantCheck: "ok: 4 or more without a traced issue or not delivered"}}},
		// The account beyond what the range leaves room for: no device is
		// outside its own range, and the report says the account exceeds
		// the room.
		{name: "moved, account beyond the range", unmatched: 50, wantLine: "leave room for at most 45",
			devs: []device{{name: "vda", traced: 85, moved: [2]uint64{30, 20}, wantRange: &[2]uint64{80, 130}, wantCheck: "ok: within the range"}}},
		// One device's slack does not cover another's shortfall.
		{name: "a settled device short, another moved", wantMismatch: []string{"vda"},
			devs: []device{
				{name: "vda", traced: 95, wantCheck: "MISMATCH -5"},
				{name: "vdb", traced: 110, moved: [2]uint64{30, 0}, wantRange: &[2]uint64{100, 130}, wantCheck: "ok: within the range"},
			}},
		{name: "two devices, the account split", unmatched: 20, wantExplained: true,
			devs: []device{
				{name: "vda", traced: 95, wantCheck: "ok: 5 without a traced issue or not delivered"},
				{name: "vdb", traced: 90, moved: [2]uint64{30, 0}, wantRange: &[2]uint64{100, 130}, wantCheck: "ok: 10 or more without a traced issue or not delivered"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := driverMeta()
			meta.Start.IOUnmatched = 7
			end := endWith(nil)
			end.Snapshot.IOUnmatched = 7 + tc.unmatched
			var ios []trace.BlockIO
			for i, d := range tc.devs {
				minor := uint32(16 * i)
				meta.Start.Block = append(meta.Start.Block, trace.BlockCounter{Name: d.name, Major: 253, Minor: minor, Stat: []uint64{1000}, Unsettled: d.moved[0]})
				end.Snapshot.Block = append(end.Snapshot.Block, trace.BlockCounter{Name: d.name, Major: 253, Minor: minor, Stat: []uint64{1100}, Unsettled: d.moved[1]})
				for j := range d.traced {
					ios = append(ios, trace.BlockIO{Dev: 253<<20 | minor, IssueNs: 2_000_000, CompleteNs: 2_100_000 + uint64(j)})
				}
			}
			slices.SortFunc(ios, func(a, b trace.BlockIO) int { return cmp.Compare(a.CompleteNs, b.CompleteNs) })
			s, err := ComputeStats(meta, end, nil, scanOf(nil, ios))
			if err != nil {
				t.Fatal(err)
			}
			var mismatched []string
			for _, m := range s.Mismatches {
				if m.Kind == "block" {
					mismatched = append(mismatched, m.Device)
				}
			}
			if s.IO.KernelDiffExplained != tc.wantExplained || !slices.Equal(mismatched, tc.wantMismatch) {
				t.Errorf("explained %v, mismatched %v; want %v, %v", s.IO.KernelDiffExplained, mismatched, tc.wantExplained, tc.wantMismatch)
			}
			var buf bytes.Buffer
			if err := RenderStats(&buf, s, "text"); err != nil {
				t.Fatal(err)
			}
			text := buf.String()
			for i, want := range tc.devs {
				d := s.IO.Devices[i]
				if d.Name != want.name || !reflect.DeepEqual(d.KernelCompletedRange, want.wantRange) || *d.KernelCompleted != 100 {
					t.Errorf("%s: kernel %d, range %v, want 100 and %v", d.Name, *d.KernelCompleted, d.KernelCompletedRange, want.wantRange)
				}
				row := ""
				for _, l := range strings.Split(text, "\n") {
					if strings.Contains(l, fmt.Sprintf(" %s ", want.name)) && strings.Contains(l, "253:") {
						row = l
					}
				}
				if !strings.Contains(row, want.wantCheck+" ") {
					t.Errorf("%s: device row %q, want %q", want.name, row, want.wantCheck)
				}
			}
			moved := slices.ContainsFunc(tc.devs, func(d device) bool { return d.wantRange != nil })
			if said := strings.Contains(text, "known to a range"); said != moved {
				t.Errorf("the report says the counts moved: %v, want %v", said, moved)
			}
			if tc.wantLine != "" && !strings.Contains(strings.Join(strings.Fields(text), " "), tc.wantLine) {
				t.Errorf("the report does not say %q:\n%s", tc.wantLine, text)
			}
		})
	}
}

// TestStatsJSONContract checks every key the contract (docs/DESIGN.md and
// ../shared/checks/contract.sh) requires, for both kinds of machine.
func TestStatsJSONContract(t *testing.T) {
	for name, meta := range map[string]*trace.Metadata{"driver": driverMeta(), "none": noDriverMeta()} {
		ps := append(syntheticPeriods(), period(1, 1, 3_000_000, 10*us))
		ps[0].WakeRequestNs, ps[0].WakeCause = ps[0].ExitNs-1000, trace.WakeIPIResched
		s, err := ComputeStats(meta, nil, nil, scanOf(ps, []trace.BlockIO{{Dev: 253 << 20, IssueNs: 2e6, CompleteNs: 3e6}}))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := RenderStats(&buf, s, "json"); err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		need(t, name, v, "lost_events", "duration_ns", "cpus", "kernel", "io", "wake_latency_ns")
		cpus := v["cpus"].([]any)
		kcpus := v["kernel"].(map[string]any)["cpus"].([]any)
		if len(cpus) == 0 || len(kcpus) == 0 {
			t.Errorf("%s: empty cpus/kernel.cpus", name)
		}
		for _, c := range append(cpus, kcpus...) {
			cm := c.(map[string]any)
			need(t, name+" cpu", cm, "cpu", "states")
			if _, ok := cm["states"].([]any); !ok {
				t.Errorf("%s: states is not an array: %v", name, cm["states"])
			}
			for _, st := range cm["states"].([]any) {
				need(t, name+" state", st.(map[string]any), "index", "name", "usage", "time_ns", "above", "below")
			}
		}
		ioo := v["io"].(map[string]any)
		need(t, name+" io", ioo, "requests", "latency_ns")
		need(t, name+" io latency", ioo["latency_ns"].(map[string]any), "mean", "p50", "p99", "max")
		wl := v["wake_latency_ns"].(map[string]any)
		if len(wl) == 0 {
			t.Errorf("%s: no wake latency", name)
		}
		for _, l := range wl {
			need(t, name+" wake latency", l.(map[string]any), "count", "p50", "p99", "max")
		}
		for _, k := range []string{"lost_events", "duration_ns"} {
			if f, ok := v[k].(float64); !ok || f != float64(uint64(f)) {
				t.Errorf("%s: %s is not an integer: %v", name, k, v[k])
			}
		}
	}
}

func need(t *testing.T, where string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q (has %v)", where, k, keysOf(m))
		}
	}
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestRenderStatsDeterministic(t *testing.T) {
	meta := driverMeta()
	meta.Start.CPUIdle = []trace.CPUCounters{counters(0, trace.StateCounters{Index: 1})}
	end := endWith([]trace.CPUCounters{counters(0, trace.StateCounters{Index: 1, Usage: 3, TimeUs: 601, Above: 1, Below: 1})})
	ps := syntheticPeriods()
	for i := range ps {
		ps[i].WakeCause = trace.WakeCause(i % 8)
		ps[i].WakeIRQ = int32(i)
		ps[i].WakeRequestNs = ps[i].EntryNs + 1
	}
	for _, format := range []string{"text", "markdown", "json"} {
		var a, b bytes.Buffer
		for _, buf := range []*bytes.Buffer{&a, &b} {
			s, err := ComputeStats(meta, end, []trace.Loss{{CPU: 1, IOUnmatched: 2}}, scanOf(ps, nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := RenderStats(buf, s, format); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s output differs between two renders", format)
		}
		if a.Len() == 0 {
			t.Errorf("%s: empty output", format)
		}
	}
	if err := RenderStats(&bytes.Buffer{}, &Stats{}, "yaml"); err == nil {
		t.Error("unknown format accepted")
	}
}

func TestMarkdownTable(t *testing.T) {
	meta := noDriverMeta()
	s, _ := ComputeStats(meta, nil, nil, scanOf([]trace.IdlePeriod{period(0, 1, 5000, 100)}, nil))
	var buf bytes.Buffer
	if err := RenderStats(&buf, s, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "## idletrace stats") || !strings.Contains(out, "|---") && !strings.Contains(out, "|:--") && !strings.Contains(out, "|--") {
		t.Errorf("not markdown:\n%s", out)
	}
}

// Garbage must not panic: impossible CPUs and states, reversed times.
func TestGarbageRecords(t *testing.T) {
	ps := []trace.IdlePeriod{
		{CPU: 1 << 30, State: 1, EntryNs: 5, ExitNs: 10},
		{CPU: 0, State: 1 << 31, EntryNs: 5, ExitNs: 10},
		{CPU: 0, State: 1, EntryNs: 50, ExitNs: 10, WakeCause: 200, WakeRequestNs: 30},
	}
	ios := []trace.BlockIO{{CompleteCPU: 1 << 31, CompleteNs: 5}, {IssueNs: 10, CompleteNs: 5}}
	for _, meta := range []*trace.Metadata{nil, driverMeta(), noDriverMeta()} {
		s, err := ComputeStats(meta, &trace.End{}, nil, scanOf(ps, ios))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"text", "markdown", "json"} {
			if err := RenderStats(&bytes.Buffer{}, s, f); err != nil {
				t.Fatal(err)
			}
		}
		if s.Invalid != 2 {
			t.Errorf("invalid %d, want 2", s.Invalid)
		}
	}
}

func BenchmarkStatsAddIdle(b *testing.B) {
	bld := NewStatsBuilder(driverMeta(), nil)
	ps := make([]trace.IdlePeriod, 4096)
	for i := range ps {
		ps[i] = period(uint32(i%2), 1+uint32(i%3)%2, uint64(2_000_000+i*50_000), uint64(1000+i*37%500_000))
		ps[i].WakeCause = trace.WakeCause(i % 7)
		if ps[i].WakeCause.IsRemoteWake() {
			ps[i].WakeRequestNs = ps[i].ExitNs - 5000
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := ps[i%len(ps)]
		off := uint64(i/len(ps)) * 4096 * 50_000
		p.EntryNs += off
		p.ExitNs += off
		if p.WakeRequestNs != 0 {
			p.WakeRequestNs += off
		}
		bld.AddIdle(&p)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mperiods/s")
}

// Past the memory bound, held spans are dropped; a warning appears only if
// a completion then falls where a dropped span was.
func TestIOWakeBound(t *testing.T) {
	for _, lateIO := range []bool{false, true} {
		b := NewStatsBuilder(driverMeta(), nil)
		n := iowake.MaxPending + 1000
		for i := 0; i < n; i++ {
			p := irqPeriod(uint32(i%2), uint64(1_000_000+i*100_000), 10*us)
			b.AddIdle(&p)
		}
		if b.iowake.Pending() > iowake.MaxPending {
			t.Fatalf("holds %d records, bound %d", b.iowake.Pending(), iowake.MaxPending)
		}
		if lateIO { // all IO at the end of the file, from the start of the recording
			c := completion(0, 1_000_000+5*us)
			b.AddBlockIO(&c)
		}
		s := b.Finish(nil)
		warned := false
		for _, w := range s.Warnings {
			warned = warned || strings.Contains(w, "woke_idle_cpu may miss")
		}
		if warned != lateIO {
			t.Errorf("lateIO=%v: warning %v (%v)", lateIO, warned, s.Warnings)
		}
	}
}

func TestWakeLatencyP50ForMeasured(t *testing.T) {
	p := period(0, 1, 10_000, 50*us)
	p.WakeCause, p.WakeRequestNs = trace.WakeIPIResched, p.ExitNs-20*us
	s, _ := ComputeStats(noDriverMeta(), nil, nil, scanOf([]trace.IdlePeriod{p}, nil))
	m := s.WakeLatencyP50()
	if m["HLT"] != 20*us || m[NoDriverHLT] != 20*us {
		t.Errorf("%v", m)
	}
}

// TestStreamsEndApart: in a trace cut short, IO records that end well
// before the idle periods (the cut fell between the two streams' chunks of
// one write) are named in a warning, as are idle periods ending early and
// IO records all lost; two streams that end together, or a finished
// trace, give none.
func TestStreamsEndApart(t *testing.T) {
	const s = 1_000_000_000
	for _, tc := range []struct {
		name         string
		idleTo, ioTo uint64 // when the last period and completion come, after the start snapshot
		finished     bool
		want         string // "" for no warning
	}{
		{"IO ends a second early", 3 * s, 2 * s, false, "the block IO records end at +2.000 s, the idle periods at +3.000 s"},
		{"idle ends a second early", 2 * s, 3 * s, false, "the idle periods end at +2.000 s, the block IO records at +3.000 s"},
		{"together", 3 * s, 3*s - 100_000_000, false, ""},
		{"finished", 3 * s, 1 * s, true, ""},
		// ioTo 0: no IO record at all (a full disk lost the IO chunk).
		{"no IO record left", 3 * s, 0, false, "no block IO record is left, the idle periods end at +3.000 s"},
		{"no IO record, short", 400_000_000, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := driverMeta()
			const start = 1_000_000_000
			meta.Start = &trace.Snapshot{MonotonicNs: start}
			var ps []trace.IdlePeriod
			for e := uint64(start + 10_000_000); e+200*us < start+tc.idleTo-200*us; e += 10_000_000 {
				ps = append(ps, irqPeriod(0, e, 200*us))
			}
			ps = append(ps, irqPeriod(0, start+tc.idleTo-200*us, 200*us)) // the last exit at idleTo
			var ios []trace.BlockIO
			for c := uint64(start + 5_000_000); tc.ioTo > 0 && c < start+tc.ioTo; c += 10_000_000 {
				ios = append(ios, completion(1, c))
			}
			if tc.ioTo > 0 {
				ios = append(ios, completion(1, start+tc.ioTo))
			}
			var end *trace.End
			if tc.finished {
				end = &trace.End{Snapshot: &trace.Snapshot{MonotonicNs: start + 4*s}}
			}
			b := NewStatsBuilder(meta, end)
			if err := scanOf(ps, ios)(b.Visitor()); err != nil {
				t.Fatal(err)
			}
			st := b.Finish(nil)
			var got string
			for _, w := range st.Warnings {
				if strings.HasPrefix(w, "cut short: ") {
					got = w
				}
			}
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("warning %q, want one with %q", got, tc.want)
			}
		})
	}
}

// fullLayoutTrace writes a trace with every column of the current layout
// in use: a driver's state tables and counters' window, periods with the
// governor inputs and remote wake requests, IO with the issuing task,
// reads and writes of two sizes, some completing in the IRQ-woken periods.
func fullLayoutTrace(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, driverMeta())
	if err != nil {
		t.Fatal(err)
	}
	now := [2]uint64{2_000_000, 2_000_000}
	residencies := []uint64{1 * us, 5 * us, 80 * us, 300 * us, 700 * us, 2_000 * us}
	for i := range 3000 {
		cpu := uint32(i % 2)
		p := period(cpu, uint32(i/2%3), now[cpu]+uint64(3+i%7)*us, residencies[i/2%len(residencies)])
		p.NextTimerNs, p.NextTimerKnown = int64(p.ResidencyNs()+uint64(i%5)*us), true
		p.NextEventNs, p.NextEventKnown = p.NextTimerNs-int64(us), i%2 == 0
		p.TickStopped, p.TickStoppedBefore, p.GotTick = trace.Yes, trace.No, trace.Yes
		p.NrIOWait, p.AbortsBefore, p.IdleLoopEntry = int32(i%3), int8(i%2), trace.Yes
		switch i / 2 % 4 {
		case 0:
			p.WakeCause, p.WakeRequestNs = trace.WakeIPIResched, p.ExitNs-p.ResidencyNs()/3
		case 1:
			p.WakeCause, p.WakeIRQ = trace.WakeIRQ, 24
			op, size := uint8(trace.OpRead), uint32(4096)
			if i%3 == 0 {
				op, size = trace.OpWrite, 65536
			}
			issue := p.EntryNs - 40*us
			io := trace.BlockIO{Dev: 253 << 20, Sector: uint64(8 * i), Bytes: size, Op: op, CmdFlags: uint32(op),
				IssueNs: issue, CompleteNs: p.ExitNs - p.ResidencyNs()/2, IssueCPU: cpu, CompleteCPU: cpu,
				Tid: uint32(500 + i%4), Tgid: 500, Comm: "fio", TaskCPU: 1 - cpu}
			io.TaskWokenNs, io.TaskRunNs = io.CompleteNs+2*us, io.CompleteNs+9*us
			if err := w.AddBlockIO(&io); err != nil {
				t.Fatal(err)
			}
		}
		now[cpu] = p.ExitNs
		if err := w.AddIdle(&p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(&trace.End{StopReason: "duration", Snapshot: &trace.Snapshot{MonotonicNs: max(now[0], now[1]) + 1}}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The fields stats' Visitor lets Scan skip are fields stats never reads:
// a trace gives the same Stats whether they are decoded or not, with and
// without an IO filter (which reads some of them): the bundled trace
// (an older layout: no governor inputs but the timer, no task) and one
// with every column in use.
func TestStatsSkipsOnlyUnreadFields(t *testing.T) {
	demo, err := os.ReadFile("../../testdata/demo.trace")
	if err != nil {
		t.Fatal(err)
	}
	traces := map[string][]byte{"bundled": demo, "full layout": fullLayoutTrace(t)}
	for name, data := range traces {
		for _, spec := range []string{"", "op=read,size=4k-16k"} {
			open := func() *trace.Reader {
				r, err := trace.NewReader(bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			r := open()
			defer r.Close()
			f, err := trace.ParseIOFilter(spec, r.Meta)
			if err != nil {
				t.Fatal(err)
			}
			lean, err := FilteredStatsFromReader(r, f)
			if err != nil {
				t.Fatal(err)
			}
			b := NewStatsBuilder(r.Meta, r.End)
			b.SetIOFilter(f)
			v := b.Visitor()
			if spec == "" && v.Skip != trace.IdleGovernorInputs|trace.BlockIOShape|trace.BlockIOTask {
				t.Fatalf("stats skips %03b: the fields it skips changed, check this test still holds them", v.Skip)
			}
			v.Skip = 0
			if err := r.Scan(v); err != nil {
				t.Fatal(err)
			}
			full := b.Finish(nil)
			full.Warnings = append(append([]string{}, r.Warnings()...), full.Warnings...)
			lj, _ := json.Marshal(lean)
			fj, _ := json.Marshal(full)
			if !bytes.Equal(lj, fj) {
				t.Errorf("%s, filter %q: stats differ when every field is decoded:\nlean %s\nfull %s", name, spec, lj, fj)
			}
			if full.IO.Requests == 0 || len(full.WakeLatencyNs) == 0 {
				t.Fatalf("%s, filter %q: %d requests, %d wake latencies: the trace exercises nothing", name, spec, full.IO.Requests, len(full.WakeLatencyNs))
			}
			var above, below, ioWoke uint64
			for _, c := range full.CPUs {
				ioWoke += c.IOWokeIdle
				for _, st := range c.States {
					above, below = above+st.Above, below+st.Below
				}
			}
			if name == "full layout" && (full.IO.TaskLatencyNs == nil || full.IO.TaskLatencyNs.Count == 0 || above == 0 || below == 0 || ioWoke == 0) {
				t.Fatalf("%s, filter %q: no task latency, above or IO wake-up: the trace exercises too little: %s", name, spec, fj)
			}
		}
	}
}

// A snapshot whose counters name state -1 (a corrupt trace) gives a row
// named state-1, not a panic.
func TestStatsCorruptCounterIndex(t *testing.T) {
	meta := driverMeta()
	meta.Start.CPUIdle = []trace.CPUCounters{counters(0, trace.StateCounters{Index: -1})}
	end := endWith([]trace.CPUCounters{counters(0, trace.StateCounters{Index: -1, Usage: 3})})
	s, err := ComputeStats(meta, end, nil, scanOf(syntheticPeriods(), nil))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(s)
	if !bytes.Contains(js, []byte(`"state-1"`)) {
		t.Errorf("no state-1 row: %s", js)
	}
}

func stopped(p trace.IdlePeriod) trace.IdlePeriod {
	p.TickStopped = trace.Yes
	return p
}

// Each state's period lengths and tick-stopped share, and each CPU's tick
// stops beside the kernel's idle_sleeps: counted from the periods in the
// window, shown in the text, warned about only where the trace has more
// than the kernel allows.
func TestTickStopsAndLengths(t *testing.T) {
	tick := func(cpu int, sleeps uint64) trace.TickCounters {
		return trace.TickCounters{CPU: cpu, IdleCalls: sleeps + 5, IdleSleeps: sleeps}
	}
	// CPU 0: C1 periods of 100, 200, 300 µs, tick stopped, kept, unknown;
	// C6 1 ms, stopped. CPU 1: one C1 period of 50 µs, stopped.
	ps := []trace.IdlePeriod{
		period(0, 1, 2_000_000, 100*us), period(0, 1, 3_000_000, 200*us), period(0, 1, 4_000_000, 300*us),
		period(0, 2, 5_000_000, 1000*us), period(1, 1, 2_000_000, 50*us),
		period(0, 1, 200_000_000, 7*us), // outside the window: not counted
	}
	for i, ts := range []trace.Tristate{trace.Yes, trace.No, trace.Unknown, trace.Yes, trace.Yes, trace.Yes} {
		ps[i].TickStopped = ts
	}
	// When the governor chose: CPU 0's first C1 period found it stopped,
	// the second running; the rest unknown.
	ps[0].TickStoppedBefore, ps[1].TickStoppedBefore = trace.Yes, trace.No
	// CPU 1's stopped entries beyond ps' one, each 1 µs, from entry on, 10
	// µs apart.
	stoppedFrom := func(n int, entry uint64) []trace.IdlePeriod {
		var out []trace.IdlePeriod
		for i := range n {
			out = append(out, stopped(period(1, 0, entry+uint64(i)*10*us, us)))
		}
		return out
	}
	running := func(n int, entry uint64) []trace.IdlePeriod {
		out := stoppedFrom(n, entry)
		for i := range out {
			out[i].TickStopped = trace.No
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		start, end   []trace.TickCounters
		extra        []trace.IdlePeriod
		holdEndNs    uint64   // the start snapshot's tick read's end, held from 1 ms (0: unknown)
		kernel       []string // CPU 0's, CPU 1's kernel tick stops, "" for null
		kernelColumn bool
		warn         string // the start of the one tick warning, "" for none
	}{
		{"no counters (an older trace)", nil, nil, nil, 0, []string{"", ""}, false, ""},
		{"the kernel counted aborted attempts too", []trace.TickCounters{tick(0, 10), tick(1, 10)}, []trace.TickCounters{tick(0, 19), tick(1, 11)}, nil, 0, []string{"9", "1"}, true, ""},
		{"a period across each snapshot", []trace.TickCounters{tick(0, 10), tick(1, 10)}, []trace.TickCounters{tick(0, 10), tick(1, 10)}, nil, 0, []string{"0", "0"}, true, ""},
		// CPU 1: 11 periods entered with the tick stopped, none counted:
		// more than the ten refusals for softirqs a boot.
		{"more than the kernel allows", []trace.TickCounters{tick(0, 1000), tick(1, 10)}, []trace.TickCounters{tick(0, 1000), tick(1, 10)},
			stoppedFrom(10, 3_000_000), 0, []string{"0", "0"}, true, "CPU 1: 11 idle periods"},
		{"as many as the softirq refusals allow", []trace.TickCounters{tick(0, 1000), tick(1, 10)}, []trace.TickCounters{tick(0, 1000), tick(1, 10)},
			stoppedFrom(9, 3_000_000), 0, []string{"0", "0"}, true, ""},
		// 16, 6 of them in the start snapshot's hold: the kernel may have
		// counted their stops before the window (16 ≤ 10 + 6).
		{"slipped past the start's hold", []trace.TickCounters{tick(0, 1000), tick(1, 10)}, []trace.TickCounters{tick(0, 1000), tick(1, 10)},
			append(stoppedFrom(6, 1_100_000), stoppedFrom(9, 3_000_000)...), 1_200_000, []string{"0", "0"}, true, ""},
		{"entered after the start's hold", []trace.TickCounters{tick(0, 1000), tick(1, 10)}, []trace.TickCounters{tick(0, 1000), tick(1, 10)},
			append(stoppedFrom(6, 1_100_000), stoppedFrom(9, 3_000_000)...), 1_050_000, []string{"0", "0"}, true, "CPU 1: 16 idle periods"},
		// 5 stopped in the hold and 3 with the tick running: only the 5
		// may have been counted before.
		{"periods with the tick running in the hold", []trace.TickCounters{tick(0, 1000), tick(1, 10)}, []trace.TickCounters{tick(0, 1000), tick(1, 10)},
			slices.Concat(stoppedFrom(5, 1_100_000), running(3, 1_150_000), stoppedFrom(10, 3_000_000)), 1_200_000, []string{"0", "0"}, true, "CPU 1: 16 idle periods"},
		{"one CPU without counters", []trace.TickCounters{tick(1, 10)}, []trace.TickCounters{tick(1, 12)}, nil, 0, []string{"", "2"}, true, ""},
		{"counters that went back (a reboot?)", []trace.TickCounters{tick(0, 10), tick(1, 10)}, []trace.TickCounters{tick(0, 5), tick(1, 11)}, nil, 0, []string{"", "1"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := driverMeta()
			meta.Start.Tick = tc.start
			if tc.holdEndNs > 0 {
				meta.Start.CPUTimeNs = []uint64{1_000_000, 1_000_000}
				meta.Start.TickReadStartNs, meta.Start.TickReadEndNs = 1_000_500, tc.holdEndNs
			}
			end := &trace.End{StopReason: "duration", Snapshot: &trace.Snapshot{MonotonicNs: 100_000_000, Tick: tc.end}}
			s, err := ComputeStats(meta, end, nil, scanOf(append(slices.Clone(ps), tc.extra...), nil))
			if err != nil {
				t.Fatal(err)
			}
			c1, c6 := s.StatePeriods["C1"], s.StatePeriods["C6"]
			if c1.LengthNs.Count != 4 || c1.LengthNs.Max < 299*us || c1.LengthNs.Max > 301*us || c1.TickStopped != (TickStopped{Stopped: 2, Known: 3}) {
				t.Errorf("C1: %+v", c1)
			}
			if c6.LengthNs.Count != 1 || c6.TickStopped != (TickStopped{Stopped: 1, Known: 1}) {
				t.Errorf("C6: %+v", c6)
			}
			if got := s.CPUs[0].TickStopped; got != (TickStopped{Stopped: 2, Known: 3}) {
				t.Errorf("CPU 0 tick stopped %+v", got)
			}
			if got, c1 := s.CPUs[0].TickStoppedBefore, c1.TickStoppedBefore; got != (TickStopped{Stopped: 1, Known: 2}) || c1 != got {
				t.Errorf("CPU 0 tick stopped before the choice %+v, C1's %+v", got, c1)
			}
			if got := c6.TickStoppedBefore; got != (TickStopped{}) {
				t.Errorf("C6 tick stopped before the choice %+v, want unknown", got)
			}
			for i, want := range tc.kernel {
				got := ""
				if k := s.CPUs[i].KernelTickStops; k != nil {
					got = fmt.Sprint(*k)
				}
				if got != want {
					t.Errorf("CPU %d kernel tick stops %q, want %q", i, got, want)
				}
			}
			var warned []string
			for _, w := range s.Warnings {
				if strings.Contains(w, "tick stopped") {
					warned = append(warned, w)
				}
			}
			if tc.warn == "" && len(warned) > 0 || tc.warn != "" && (len(warned) != 1 || !strings.HasPrefix(warned[0], tc.warn)) {
				t.Errorf("tick warnings %q, want %q", warned, tc.warn)
			}
			var out bytes.Buffer
			if err := RenderStats(&out, s, "text"); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			if got := strings.Contains(text, "Tick-off entries trace / kernel"); got != tc.kernelColumn {
				t.Errorf("kernel column shown %v, want %v:\n%s", got, tc.kernelColumn, text)
			}
			if !strings.Contains(text, "Idle period length per state") || !strings.Contains(text, "66.7 %") || !strings.Contains(text, "50.0 %") {
				t.Errorf("no period length table with C1's 66.7 %% tick off at entry and 50.0 %% at the choice:\n%s", text)
			}
		})
	}
}

// TestStatsSaysDamageItDoesNotRead: a damaged chunk of a kind stats does
// not read (haltpoll changes) is the file's damage all the same: stats
// counts and warns of it as info does (a new user's flipped byte in a
// haltpoll chunk showed in info and whatif, and stats said nothing).
func TestStatsSaysDamageItDoesNotRead(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, driverMeta())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		p := period(uint32(i%2), 1, uint64(1_000_000+i*100_000), 40*us)
		must(t, w.AddIdle(&p))
	}
	must(t, w.Flush())
	for i := range 50 {
		must(t, w.AddHaltPoll(&trace.HaltPollChange{TimeNs: uint64(2_000_000 + i*1000), CPU: 0, Grow: i%2 == 0, NewNs: uint32(i * 1000), OldNs: 1000}))
	}
	must(t, w.Close(&trace.End{StopReason: "duration"}))
	data := buf.Bytes()
	flipped := false
	for off := 16; off+49 < len(data); off++ { // the haltpoll chunk's first payload byte
		if string(data[off:off+4]) == "ICHK" && data[off+4] == byte(trace.ChunkHaltPoll) {
			data[off+48] ^= 0x40
			flipped = true
			break
		}
	}
	if !flipped {
		t.Fatal("no haltpoll chunk in the trace")
	}
	r, err := trace.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if s.Damage.Chunks != 1 || !strings.Contains(strings.Join(s.Warnings, "\n"), "haltpoll") {
		t.Errorf("damage %+v, warnings %q: want the haltpoll chunk's", s.Damage, s.Warnings)
	}
	if got := totalPeriods(s); got != 100 {
		t.Errorf("%d idle periods, want 100", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatsJSONWithoutBlockIO: a trace recorded without block IO (record
// --no-io) has no IO counts to give: null in JSON, as in the fleet rows,
// not 0 (which a trace that recorded block IO and saw none gives).
func TestStatsJSONWithoutBlockIO(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blockIO bool
		want    []string
	}{
		{"not recorded", false, []string{`"requests":null`, `"errors":null`, `"task_waited":null`}},
		{"recorded, none", true, []string{`"requests":0`, `"errors":0`}},
	} {
		meta := driverMeta()
		meta.Inputs.BlockIO = tc.blockIO
		// The snapshots read the kernel's block counters with --no-io too:
		// a device the kernel counted is no block IO the trace recorded.
		stat := func(done uint64) []trace.BlockCounter {
			return []trace.BlockCounter{{Name: "vda", Major: 253, Stat: []uint64{done, 0, 8 * done, 0, 0, 0, 0, 0, 0, 0, 0}}}
		}
		meta.Start = &trace.Snapshot{MonotonicNs: 1_000_000, Block: stat(100)}
		end := &trace.End{Snapshot: &trace.Snapshot{MonotonicNs: 9_000_000, Block: stat(250)}}
		b := NewStatsBuilder(meta, end)
		p := period(0, 1, 2_000_000, 40*us)
		must(t, b.AddIdle(&p))
		out, err := json.Marshal(b.Finish(nil).IO)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: %s, want %s", tc.name, out, w)
			}
		}
	}
}

// A CPU whose counters no delta compares (offline at a snapshot, or brought
// back online in between, which restarts them) is not checked, and its
// counts are no mismatch; the other CPUs still are.
func TestKernelCountersUnchecked(t *testing.T) {
	counters := func(cpu int, ino, usage uint64) trace.CPUCounters {
		return trace.CPUCounters{CPU: cpu, DeviceIno: ino, States: []trace.StateCounters{{Index: 1, Usage: usage, TimeUs: usage * 10}}}
	}
	ps := []trace.IdlePeriod{period(0, 1, 2_000_000, 10*us), period(1, 1, 2_000_000, 10*us)}
	for _, tc := range []struct {
		name       string
		start, end []trace.CPUCounters
		want       string // CPU 1's Unchecked
	}{
		{"both checked", []trace.CPUCounters{counters(0, 7, 5), counters(1, 8, 5)}, []trace.CPUCounters{counters(0, 7, 6), counters(1, 8, 6)}, ""},
		{"offline at the start", []trace.CPUCounters{counters(0, 7, 5)}, []trace.CPUCounters{counters(0, 7, 6), counters(1, 9, 1)}, "offline at the start"},
		{"offline at the end", []trace.CPUCounters{counters(0, 7, 5), counters(1, 8, 5)}, []trace.CPUCounters{counters(0, 7, 6)}, "offline at the end"},
		{"restarted", []trace.CPUCounters{counters(0, 7, 5), counters(1, 8, 5)}, []trace.CPUCounters{counters(0, 7, 6), counters(1, 9, 1)}, "restarted"},
		// As the recorder writes them: the offline CPU's entry, no states.
		{"offline at the start, as recorded", []trace.CPUCounters{counters(0, 7, 5), {CPU: 1}}, []trace.CPUCounters{counters(0, 7, 6), counters(1, 9, 1)}, "offline at the start"},
		{"offline at the end, as recorded", []trace.CPUCounters{counters(0, 7, 5), counters(1, 8, 5)}, []trace.CPUCounters{counters(0, 7, 6), {CPU: 1}}, "offline at the end"},
		{"inode unknown (older trace)", []trace.CPUCounters{counters(0, 0, 5), counters(1, 0, 5)}, []trace.CPUCounters{counters(0, 0, 6), counters(1, 0, 6)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := driverMeta()
			meta.Start = &trace.Snapshot{MonotonicNs: 1_000_000, CPUIdle: tc.start}
			end := &trace.End{Snapshot: &trace.Snapshot{MonotonicNs: 10_000_000, CPUIdle: tc.end}}
			s, err := ComputeStats(meta, end, nil, scanOf(ps, nil))
			if err != nil {
				t.Fatal(err)
			}
			for _, kc := range s.Kernel.CPUs {
				want := ""
				if kc.CPU == 1 {
					want = tc.want
				}
				if want == "" && kc.Unchecked != "" || !strings.Contains(kc.Unchecked, want) {
					t.Errorf("CPU %d unchecked %q, want %q", kc.CPU, kc.Unchecked, want)
				}
			}
			if len(s.Mismatches) > 0 {
				t.Errorf("mismatches %+v", s.Mismatches)
			}
			// Down during the window: its idle share counts that as busy,
			// and the report says so.
			var out strings.Builder
			if err := RenderStats(&out, s, "text"); err != nil {
				t.Fatal(err)
			}
			wentDown := strings.Contains(tc.want, "restarted") || strings.Contains(tc.want, "offline at the end")
			if got := strings.Contains(strings.Join(strings.Fields(out.String()), " "), "CPU 1 went offline during the window"); got != wentDown {
				t.Errorf("the report says CPU 1 went offline: %v, want %v", got, wentDown)
			}
		})
	}
}

// A CPU that came online during the recording was not idle, nor busy,
// while it was offline: its window (and so its idle fraction) begins with
// its first idle period, and the report says so; the others keep the
// snapshots' window.
func TestStatsCameOnline(t *testing.T) {
	meta := driverMeta()
	meta.RecordedCPUs = []int{0}
	meta.CameOnline = []int{1, 3}
	end := &trace.End{Snapshot: &trace.Snapshot{MonotonicNs: 11_000_000}}
	ps := []trace.IdlePeriod{period(0, 1, 2_000_000, 5_000*us), period(1, 1, 6_000_000, 2_500*us)}
	s, err := ComputeStats(meta, end, nil, scanOf(ps, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cpu          int
		windowNs     uint64
		idleFraction float64
		cameOnline   bool
	}{
		{0, 10_000_000, 0.5, false},
		{1, 5_000_000, 0.5, true}, // 6 ms (its first entry) to 11 ms
		{3, 0, 0, true},           // no idle period: no window to give, not a busy one
	} {
		i := slices.IndexFunc(s.CPUs, func(c CPUStats) bool { return c.CPU == tc.cpu })
		if i < 0 {
			t.Fatalf("no CPU %d in %+v", tc.cpu, s.CPUs)
		}
		c := s.CPUs[i]
		if c.WindowNs != tc.windowNs || c.IdleFraction != tc.idleFraction || c.CameOnline != tc.cameOnline {
			t.Errorf("CPU %d: window %d ns, idle %.3f, came online %v; want %d, %.3f, %v", tc.cpu, c.WindowNs, c.IdleFraction, c.CameOnline, tc.windowNs, tc.idleFraction, tc.cameOnline)
		}
	}
	var out strings.Builder
	if err := RenderStats(&out, s, "text"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "CPUs 1, 3 came online during the recording: the window of each begins with its first idle period.") {
		t.Errorf("the report does not say CPU 1 came online:\n%s", out.String())
	}
}

// The per-state tables go shallowest first, as the CPUs' tables order the
// states (POLL, C1, C6), not by name (C1, C6, POLL).
func TestStatsStatesByDepth(t *testing.T) {
	s, err := ComputeStats(driverMeta(), nil, nil, scanOf(syntheticPeriods(), nil))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := RenderStats(&out, s, "text"); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	section := text[strings.Index(text, "Idle period length per state"):]
	var order []string
	for _, line := range strings.Split(section, "\n") {
		f := strings.Fields(strings.Trim(line, "│ "))
		if len(f) > 1 && (f[0] == "POLL" || f[0] == "C1" || f[0] == "C6") && !slices.Contains(order, f[0]) {
			order = append(order, f[0])
		}
		if len(order) == 3 {
			break
		}
	}
	if !slices.Equal(order, []string{"POLL", "C1", "C6"}) {
		t.Errorf("idle period length rows %v, want POLL, C1, C6:\n%s", order, section)
	}
}

// An imported capture says why its figures differ from a recording's of
// the same events: no kernel counters, residencies entry to exit, the
// window its records'.
func TestStatsImportedNote(t *testing.T) {
	meta := driverMeta()
	meta.Start = nil
	meta.Clock = trace.ImportedClockPrefix + " (test)"
	s, err := ComputeStats(meta, nil, nil, scanOf(syntheticPeriods(), nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Kernel.Available || !strings.Contains(s.Kernel.Note, "an imported capture has no snapshot") || !strings.Contains(s.Kernel.Note, "entry to exit") {
		t.Errorf("kernel counters available %v, note %q", s.Kernel.Available, s.Kernel.Note)
	}
}
