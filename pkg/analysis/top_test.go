package analysis

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// topRecords is a stream with every kind of figure top shows: periods in
// each state on both CPUs, IO completions that woke a CPU (one arriving
// before its period, as the recorder delivers them: a period waits for the
// CPU's next entry) and one that did not, and remote wake-ups with a
// measured latency.
func topRecords(states int) []func(trace.Visitor) {
	var out []func(trace.Visitor)
	idle := func(p trace.IdlePeriod) { out = append(out, func(v trace.Visitor) { v.Idle(&p) }) }
	io := func(b trace.BlockIO) { out = append(out, func(v trace.Visitor) { v.BlockIO(&b) }) }
	t := uint64(2_000_000)
	for i := range 60 {
		cpu := uint32(i % 2)
		state := uint32(i % states)
		if states == 1 {
			state = 1 // no driver: the default idle routine
		}
		p := period(cpu, state, t, uint64(5+i*7)*us)
		switch i % 5 {
		case 1:
			p.WakeCause, p.WakeIRQ = trace.WakeIRQ, 24
			c := completion(cpu, p.ExitNs-1*us)
			if i%2 == 1 {
				io(c) // the completion reaches the recorder first
				idle(p)
			} else {
				idle(p)
				io(c)
			}
			t = p.ExitNs + 20*us
			continue
		case 2:
			p.WakeCause, p.WakeRequestNs = trace.WakeIPIResched, p.ExitNs-uint64(3+i)*us
		case 3:
			p.WakeCause = trace.WakeTick
			io(completion(cpu, p.ExitNs+500*us)) // the CPU was busy
		}
		idle(p)
		t = p.ExitNs + 20*us
	}
	return out
}

// TestTopIntervalsAddUp: however the live stream is cut into intervals,
// the intervals add up to what stats computes in one pass over the same
// records, and the running totals equal it; IO wake-ups whose completion
// and period fall in different intervals are not lost.
func TestTopIntervalsAddUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		meta   *trace.Metadata
		states int
	}{
		{"cpuidle driver", driverMeta(), 3},
		{"no cpuidle driver", noDriverMeta(), 1},
	} {
		recs := topRecords(tc.states)
		one := NewStatsBuilder(tc.meta, nil)
		for _, r := range recs {
			r(one.Visitor())
		}
		want := one.Finish(nil)
		if want.IO.WokeIdleCPU == 0 || len(want.WakeLatencyNs) == 0 {
			t.Fatalf("%s: the stream lacks IO wake-ups or wake latencies: %+v", tc.name, want.IO)
		}
		for _, every := range []int{1, 2, 3, 7, len(recs)} {
			name := fmt.Sprintf("%s, a frame every %d records", tc.name, every)
			now := tc.meta.Start.MonotonicNs
			top := NewTop(tc.meta, now)
			v := top.Visitor()
			type key struct {
				cpu  int
				what string
			}
			sum := map[key]uint64{}
			var frames []*TopFrame
			for i, r := range recs {
				r(v)
				if (i+1)%every == 0 || i == len(recs)-1 {
					now += 1_000_000_000
					f := top.Frame(now)
					frames = append(frames, f)
					if f.IntervalNs != 1_000_000_000 {
						t.Fatalf("%s: interval %d ns", name, f.IntervalNs)
					}
					for _, c := range f.Interval.CPUs {
						sum[key{c.CPU, "periods"}] += c.Periods
						sum[key{c.CPU, "idle"}] += c.IdleNs
						sum[key{c.CPU, "io woke"}] += c.IOWokeIdle
						for cause, n := range c.WakeCauses {
							sum[key{c.CPU, cause}] += n
						}
						for _, st := range c.States {
							sum[key{c.CPU, st.Name + " usage"}] += st.Usage
							sum[key{c.CPU, st.Name + " time"}] += st.TimeNs
							sum[key{c.CPU, st.Name + " above"}] += st.Above
							sum[key{c.CPU, st.Name + " below"}] += st.Below
						}
					}
					sum[key{-1, "io woke"}] += f.Interval.IO.WokeIdleCPU
					for name, l := range f.Interval.WakeLatencyNs {
						sum[key{-1, name + " wake n"}] += l.Count
					}
				}
			}
			got := map[key]uint64{}
			var woke uint64
			for _, c := range want.CPUs {
				got[key{c.CPU, "periods"}] = c.Periods
				got[key{c.CPU, "idle"}] = c.IdleNs
				got[key{c.CPU, "io woke"}] = c.IOWokeIdle
				woke += c.IOWokeIdle
				for cause, n := range c.WakeCauses {
					got[key{c.CPU, cause}] = n
				}
				for _, st := range c.States {
					got[key{c.CPU, st.Name + " usage"}] = st.Usage
					got[key{c.CPU, st.Name + " time"}] = st.TimeNs
					got[key{c.CPU, st.Name + " above"}] = st.Above
					got[key{c.CPU, st.Name + " below"}] = st.Below
				}
			}
			if woke != want.IO.WokeIdleCPU {
				t.Errorf("%s: per-CPU IO wake-ups add up to %d, woke_idle_cpu %d", name, woke, want.IO.WokeIdleCPU)
			}
			got[key{-1, "io woke"}] = want.IO.WokeIdleCPU
			for name, l := range want.WakeLatencyNs {
				got[key{-1, name + " wake n"}] = l.Count
			}
			for k, w := range got {
				if sum[k] != w {
					t.Errorf("%s: CPU %d %s: intervals add up to %d, stats %d", name, k.cpu, k.what, sum[k], w)
				}
			}
			total := frames[len(frames)-1].Total
			if total.IO.WokeIdleCPU != want.IO.WokeIdleCPU || totalPeriods(total) != totalPeriods(want) || total.IO.Requests != want.IO.Requests {
				t.Errorf("%s: totals %d periods, %d IO, %d woke; stats %d, %d, %d", name,
					totalPeriods(total), total.IO.Requests, total.IO.WokeIdleCPU, totalPeriods(want), want.IO.Requests, want.IO.WokeIdleCPU)
			}
			for st, l := range want.WakeLatencyNs {
				if total.WakeLatencyNs[st] != l {
					t.Errorf("%s: %s wake latency since start %+v, stats %+v", name, st, total.WakeLatencyNs[st], l)
				}
			}
		}
	}
}

var escape = regexp.MustCompile("\x1b")

// TestRenderTop: a frame names every state, has a row per CPU (and all) in
// both per-CPU tables, holds no escape sequence, keeps to the terminal's
// size, and says honestly what a machine without a cpuidle driver lacks.
func TestRenderTop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		meta     *trace.Metadata
		states   []string
		noDriver bool
	}{
		{"cpuidle driver", driverMeta(), []string{"POLL", "C1", "C6"}, false},
		{"no cpuidle driver", noDriverMeta(), []string{NoDriverHLT}, true},
	} {
		top := NewTop(tc.meta, 1_000_000)
		for _, r := range topRecords(len(tc.states)) {
			r(top.Visitor())
		}
		f := top.Frame(1_001_000_000)
		var b strings.Builder
		if err := RenderTop(&b, f, TopView{Status: "trace: x.trace", Warnings: []string{"a warning"}}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if escape.MatchString(out) {
			t.Errorf("%s: escape sequences in a plain frame:\n%q", tc.name, out)
		}
		for _, want := range append([]string{"trace: x.trace", "warning: a warning", "idle %", "above", "below", "IO woke", "timer", "ipi-resched", "ipi-call", "p50 µs", "p99 µs"}, tc.states...) {
			if !strings.Contains(out, want) {
				t.Errorf("%s: frame lacks %q:\n%s", tc.name, want, out)
			}
		}
		for _, cpu := range []string{"0", "1", "all"} {
			if n := len(regexp.MustCompile(`(?m)^\s*`+cpu+`\s+\d`).FindAllString(out, -1)); n != 2 {
				t.Errorf("%s: %d rows for CPU %s, want 2 (states and wake causes):\n%s", tc.name, n, cpu, out)
			}
		}
		for _, st := range tc.states {
			rows := regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(st)+`\s.*$`).FindAllString(out, -1)
			if len(rows) != 2 {
				t.Errorf("%s: %d rows for state %s, want 2 (state, wake latency):\n%s", tc.name, len(rows), st, out)
				continue
			}
			states, wake := strings.Fields(rows[0]), strings.Fields(rows[1])
			if len(states) != 7 || len(wake) != 7 {
				t.Errorf("%s: state rows %q and %q, want 7 cells each", tc.name, rows[0], rows[1])
				continue
			}
			if gotDash := states[1] == dash && states[5] == dash && states[6] == dash; gotDash != tc.noDriver {
				t.Errorf("%s: state row %q: exit latency and above/below shown as %q %q %q", tc.name, rows[0], states[1], states[5], states[6])
			}
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "  ") && displayLen(l) > 80 {
				t.Errorf("%s: a table line wider than 80 columns: %q", tc.name, l)
			}
		}
		if !strings.Contains(out, "wake latency") {
			t.Errorf("%s: no wake latency table:\n%s", tc.name, out)
		}
		if strings.Contains(out, "No cpuidle driver") != tc.noDriver {
			t.Errorf("%s: the no-driver note is wrong:\n%s", tc.name, out)
		}
		// Without a driver no governor runs and nothing reads the PM QoS
		// limits, whatever sysfs names.
		if !regexp.MustCompile(`(?m)^PM QoS( \(no effect: no cpuidle driver\))?: cpu_dma_latency `).MatchString(out) {
			t.Errorf("%s: no PM QoS line:\n%s", tc.name, out)
		}
		// The PM QoS line's "(no effect: …)" stays on one line.
		flat := strings.Join(strings.Fields(out), " ")
		if strings.Contains(flat, "no governor runs") != tc.noDriver || strings.Contains(out, "PM QoS (no effect: no cpuidle driver): ") != tc.noDriver {
			t.Errorf("%s: the title or the PM QoS line misstates what runs:\n%s", tc.name, out)
		}

		b.Reset()
		if err := RenderTop(&b, f, TopView{Width: 60, Height: 12}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) > 12 {
			t.Errorf("%s: %d lines on a 12-line terminal", tc.name, len(lines))
		}
		// What the terminal leaves out is said on its last line.
		var unbounded strings.Builder
		if err := RenderTop(&unbounded, f, TopView{Width: 60}); err != nil {
			t.Fatal(err)
		}
		whole := strings.Count(unbounded.String(), "\n")
		if want := fmt.Sprintf("… %d more lines:", whole-11); whole <= 12 || !strings.HasPrefix(lines[len(lines)-1], want) {
			t.Errorf("%s: a %d-line frame on a 12-line terminal ends %q, want %q", tc.name, whole, lines[len(lines)-1], want)
		}
		for _, l := range lines {
			if displayLen(l) > 60 {
				t.Errorf("%s: line wider than 60: %q", tc.name, l)
			}
		}
	}
}

// TestTopPiped: piped, every line of a frame with a long status line and
// the closing summary fit 80 columns (trial 11 item 14).
func TestTopPiped(t *testing.T) {
	top := NewTop(driverMeta(), 1_000_000)
	for _, r := range topRecords(3) {
		r(top.Visitor())
	}
	f := top.Frame(1_001_000_000)
	var b strings.Builder
	status := "trace: /tmp/idletrace-top-1234567890/top.trace (temporary: removed at exit; -o FILE keeps it)"
	if err := RenderTop(&b, f, TopView{Status: status, Warnings: []string{strings.Repeat("a long warning ", 10)}}); err != nil {
		t.Fatal(err)
	}
	loss := trace.LossAccount{Known: true, IOInFlightAtStart: 1, IOInFlightAtStop: 2}
	if err := RenderTopEnd(&b, TopEnd{ElapsedSec: 5, StopReason: "quit", IdlePeriods: 133, BlockIOs: 538, Loss: loss, Kept: "temporary trace removed"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, l := range strings.Split(out, "\n") {
		if displayLen(l) > TopPipeWidth {
			t.Errorf("a %d-column line: %q", displayLen(l), l)
		}
	}
	joined := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{status, "idletrace top: 5.0s (quit): 133 idle periods, 538 IO requests in all, to the stop (the last frame counted to its own second); temporary trace removed; not recorded 3:"} {
		if !strings.Contains(joined, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestTopLossBrief: top's loss counts only what was lost, by record's
// names; IO in flight at the start or stop is not a lost event.
func TestTopLossBrief(t *testing.T) {
	for _, tc := range []struct {
		loss trace.LossAccount
		want string
	}{
		{trace.LossAccount{}, "nothing lost"},
		{trace.LossAccount{IOInFlightAtStart: 1, IOInFlightAtStop: 4}, "nothing lost"},
		{trace.LossAccount{RingBufferFull: 3, IOInFlightAtStart: 1}, "lost: ring buffer full 3"},
		{trace.LossAccount{Undelivered: 2, IOTableFull: 1}, "lost: not delivered by the kernel 2, IO pairing table full 1"},
	} {
		if got := lossBrief(&Stats{Loss: tc.loss}); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.loss, got, tc.want)
		}
	}
}

// TestTopPMQoS: a frame shows the latency constraints in force (the
// start's, then as each traced change left them), how many changes came in
// all and in its interval, and says where the limits are unknown or their
// changes not traced.
func TestTopPMQoS(t *testing.T) {
	traced := func(global int64, resume ...int64) *trace.Metadata {
		m := driverMeta()
		m.PMQoS = trace.PMQoS{CPUDMALatencyUs: global, ResumeLatencyUs: resume}
		m.Inputs.PMQoSTrace = true
		m.RecordedCPUs = nil // every CPU's, unless a case says otherwise
		return m
	}
	type step struct {
		changes []trace.PMQoSChange
		want    string // the frame's PM QoS line
	}
	for _, tc := range []struct {
		name  string
		meta  *trace.Metadata
		steps []step
	}{
		{"no limits, then a global and a CPU's, then the global removed", traced(trace.PMQoSNoGlobalLimitUs, -1, 50), []step{
			{nil, "PM QoS: cpu_dma_latency none; resume latency cpu1 50 µs; 0 changes since start, 0 in the last interval"},
			{[]trace.PMQoSChange{
				{CPU: trace.PMQoSGlobal, Action: trace.PMQoSAdd, LimitUs: 20, PrevUs: trace.PMQoSNoGlobalLimitUs},
				{CPU: 0, Action: trace.PMQoSUpdate, LimitUs: 0, PrevUs: -1},
				{CPU: 1, Action: trace.PMQoSUpdate, LimitUs: 10, PrevUs: 50},
			}, "PM QoS: cpu_dma_latency 20 µs; resume latency cpu0 0 µs (n/a: polling only), cpu1 10 µs; 3 changes since start, 3 in the last interval"},
			{[]trace.PMQoSChange{
				{CPU: trace.PMQoSGlobal, Action: trace.PMQoSRemove, LimitUs: trace.PMQoSNoGlobalLimitUs, PrevUs: 20},
			}, "PM QoS: cpu_dma_latency none; resume latency cpu0 0 µs (n/a: polling only), cpu1 10 µs; 4 changes since start, 1 in the last interval"},
		}},
		{"a CPU beyond the start's list", traced(7), []step{
			{[]trace.PMQoSChange{{CPU: 3, Action: trace.PMQoSUpdate, LimitUs: 5, PrevUs: -1}},
				"PM QoS: cpu_dma_latency 7 µs; resume latency cpu3 5 µs; 1 change since start, 1 in the last interval"},
		}},
		{"many CPUs' constraints: four named", traced(trace.PMQoSNoGlobalLimitUs, 1, 2, 3, 4, 5, 6), []step{
			{nil, "PM QoS: cpu_dma_latency none; resume latency cpu0 1 µs, cpu1 2 µs, cpu2 3 µs, cpu3 4 µs, 2 more; 0 changes since start, 0 in the last interval"},
		}},
		{"changes not traced, the start's limit unreadable", &trace.Metadata{PMQoS: trace.PMQoS{CPUDMALatencyUs: -1}}, []step{
			{nil, "PM QoS: cpu_dma_latency unknown; changes not traced"},
		}},
		// --cpus 1,2: CPU 0's and 3's constraints and changes are not shown.
		{"--cpus: the recorded CPUs' constraints", func() *trace.Metadata {
			m := traced(trace.PMQoSNoGlobalLimitUs, 5, 6, 7, 8)
			m.RecordedCPUs = []int{1, 2}
			return m
		}(), []step{
			{[]trace.PMQoSChange{
				{CPU: 0, Action: trace.PMQoSUpdate, LimitUs: 1, PrevUs: 5},
				{CPU: 2, Action: trace.PMQoSUpdate, LimitUs: 9, PrevUs: 7},
				{CPU: 3, Action: trace.PMQoSUpdate, LimitUs: 1, PrevUs: 8},
			}, "PM QoS: cpu_dma_latency none; resume latency cpu1 6 µs, cpu2 9 µs; 1 change since start, 1 in the last interval"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			startResume := slices.Clone(tc.meta.PMQoS.ResumeLatencyUs)
			top := NewTop(tc.meta, 1_000_000)
			now := uint64(1_000_000)
			var frames []*TopFrame
			for i, s := range tc.steps {
				for _, q := range s.changes {
					if err := top.Visitor().PMQoS(&q); err != nil {
						t.Fatal(err)
					}
				}
				now += 1_000_000_000
				frames = append(frames, top.Frame(now))
				if got := topPMQoSLine(frames[i].PMQoS, false); got != s.want {
					t.Errorf("frame %d:\n got %s\nwant %s", i+1, got, s.want)
				}
			}
			// A frame keeps what it showed, and the metadata is left alone,
			// whatever changes come later.
			for i, f := range frames {
				if got := topPMQoSLine(f.PMQoS, false); got != tc.steps[i].want {
					t.Errorf("frame %d changed after later changes: %s", i+1, got)
				}
			}
			if !slices.Equal(tc.meta.PMQoS.ResumeLatencyUs, startResume) {
				t.Errorf("the metadata's resume latencies changed: %v, were %v", tc.meta.PMQoS.ResumeLatencyUs, startResume)
			}
		})
	}
}

// TestTopAllIdleAgreesWithRows: a CPU whose period began before the
// interval counts it whole, and its row shows 100 %; the "all" row is the
// mean of what the rows show, not of the uncapped sums (which gave 100.0
// beside rows of 100.0 and 97.0).
func TestTopAllIdleAgreesWithRows(t *testing.T) {
	top := NewTop(driverMeta(), 1_000_000)
	v := top.Visitor()
	long := period(0, 2, 2_000_000, 1_500_000_000) // longer than the 1 s interval
	half := period(1, 2, 2_000_000, 500_000_000)
	for _, p := range []*trace.IdlePeriod{&long, &half} {
		if err := v.Idle(p); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	if err := RenderTop(&b, top.Frame(1_001_000_000), TopView{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"0": "100.0", "1": "50.0", "all": "75.0"}
	got := map[string]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && want[f[0]] != "" && got[f[0]] == "" {
			got[f[0]] = f[1] // the first table with CPU rows: idle %
		}
	}
	for cpu, w := range want {
		if got[cpu] != w {
			t.Errorf("CPU %s idle %% %q, want %s:\n%s", cpu, got[cpu], w, b.String())
		}
	}
}

// TestTopTitleWraps: a title too long for the width goes on at a part's
// boundary, indented, never with a line beginning "·" (piped, a long
// kernel release pushed "· HZ 250" onto a line of its own).
func TestTopTitleWraps(t *testing.T) {
	meta := noDriverMeta()
	meta.KernelRelease = "6.18.44-fc-v1272-a-long-local-version-string"
	top := NewTop(meta, 1_000_000)
	var b strings.Builder
	if err := RenderTop(&b, top.Frame(1_001_000_000), TopView{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.HasPrefix(lines[0], "idletrace top · ") || !strings.HasPrefix(lines[1], "    ") {
		t.Errorf("title not wrapped at a part:\n%s", b.String())
	}
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "·") || displayLen(l) > TopPipeWidth {
			t.Errorf("line %q: begins with · or passes %d columns", l, TopPipeWidth)
		}
	}
	if flat := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(flat, "no governor runs · HZ 250") && !strings.Contains(flat, "no governor runs HZ 250") {
		t.Errorf("title parts lost:\n%s", b.String())
	}
}
