package importer

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/export"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

const bundledTrace = "../../testdata/demo.trace"

// The three leading-column forms, with the event's own fields the same.
func TestImportParseLinePrefixes(t *testing.T) {
	tests := []struct {
		name, line string
		cpu        uint32
		ns         uint64
		pid        int64
		event      string
		fields     string
	}{
		{"perf script", "         swapper     0 [001]  2033.066751: power:cpu_idle: state=1 cpu_id=1",
			1, 2033066751000, 0, "cpu_idle", "state=1 cpu_id=1"},
		{"perf script --ns", "             fio  4242 [000] 12.000000123: block:block_rq_issue: 254,0 R 4096 () 8 + 8 be,0,4 [fio]",
			0, 12000000123, 4242, "block_rq_issue", "254,0 R 4096 () 8 + 8 be,0,4 [fio]"},
		{"perf script, comm with spaces", "  kworker/u4:1 my 77 [003]  5.5: power:cpu_idle: state=4294967295 cpu_id=3",
			3, 5500000000, 77, "cpu_idle", "state=4294967295 cpu_id=3"},
		{"trace-cmd report", "          <idle>-0     [001]  2033.066751: cpu_idle:             state=1 cpu_id=1",
			1, 2033066751000, 0, "cpu_idle", "state=1 cpu_id=1"},
		{"trace-cmd report, comm with a dash", "   kworker/0:1H-123   [000]    10.000002: block_rq_complete:    8,0 WS () 100 + 8 [0]",
			0, 10000002000, 123, "block_rq_complete", "8,0 WS () 100 + 8 [0]"},
		{"tracefs", "          <idle>-0       [000] d..1.  2033.066737291: cpu_idle: state=1 cpu_id=0",
			0, 2033066737291, 0, "cpu_idle", "state=1 cpu_id=0"},
		{"tracefs, old flags column", "            bash-1234  [002] d.h2   99.123456: irq_handler_entry: irq=36 name=virtio0",
			2, 99123456000, 1234, "irq_handler_entry", "irq=36 name=virtio0"},
		{"tracefs with tgid column", "            bash-1234  (   1234) [002] ....   99.123456: sched_waking: comm=a pid=1 prio=120 target_cpu=000",
			2, 99123456000, -1, "sched_waking", "comm=a pid=1 prio=120 target_cpu=000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := parseLine(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if ev.cpu != tc.cpu || ev.ns != tc.ns || ev.pid != tc.pid || ev.name != tc.event || ev.fields != tc.fields {
				t.Errorf("got cpu %d ns %d pid %d event %q fields %q, want %d %d %d %q %q", ev.cpu, ev.ns, ev.pid, ev.name, ev.fields, tc.cpu, tc.ns, tc.pid, tc.event, tc.fields)
			}
		})
	}
	for _, bad := range []string{"", "garbage", "[000] 1.5 cpu_idle: state=1", "comm 1 [000] 1.5: : x", "comm 1 [00x] 1.5: cpu_idle: state=1", "comm 1 [000] 1.5x: cpu_idle:"} {
		if _, err := parseLine(bad); err == nil {
			t.Errorf("parseLine(%q): no error", bad)
		}
	}
}

// Both block.h forms of each event: before and after the I/O priority.
func TestImportBlockRqFormats(t *testing.T) {
	tests := []struct {
		name, fields string
		issue        bool
		want         blockRq
	}{
		{"issue", "254,0 WS 4096 () 29120984 + 8 [fio]", true,
			blockRq{dev: 254 << 20, cmdFlags: trace.OpWrite | trace.ReqSync, bytes: 4096, sector: 29120984, sectors: 8, last: "fio"}},
		{"issue with ioprio", "8,16 RA 131072 () 2048 + 256 be,0,4 [kworker/u4:2]", true,
			blockRq{dev: 8<<20 | 16, cmdFlags: trace.OpRead | trace.ReqRahead, bytes: 131072, sector: 2048, sectors: 256, last: "kworker/u4:2"}},
		{"issue, comm with spaces, command bytes", "8,0 N 0 (12 00 00) 0 + 0 none,0,0 [my task]", true,
			blockRq{dev: 8 << 20, cmdFlags: reqOpOther, sector: 0, last: "my task"}},
		{"complete", "254,0 WS () 29120984 + 8 [0]", false,
			blockRq{dev: 254 << 20, cmdFlags: trace.OpWrite | trace.ReqSync, sector: 29120984, sectors: 8, last: "0"}},
		{"complete with ioprio", "8,0 FF () 0 + 0 none,0,0 [-5]", false,
			blockRq{dev: 8 << 20, cmdFlags: trace.ReqPreflush | trace.OpFlush, last: "-5"}},
		{"complete, preflush write FUA", "259,1 FWFS () 77 + 8 be,0,4 [0]", false,
			blockRq{dev: 259<<20 | 1, cmdFlags: trace.ReqPreflush | trace.OpWrite | trace.ReqFUA | trace.ReqSync, sector: 77, sectors: 8, last: "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseBlockRq(tc.fields, tc.issue)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	for _, bad := range []struct {
		fields string
		issue  bool
	}{
		{"254 WS 4096 () 1 + 8 [fio]", true}, {"254,0 XS 4096 () 1 + 8 [fio]", true}, {"254,0 W x () 1 + 8 [fio]", true},
		{"254,0 W 4096 1 + 8 [fio]", true}, {"254,0 W 4096 () 1 8 [fio]", true}, {"254,0 W 4096 () 1 + 8", true},
		{"254,0 W () 1 + 8 [x]", false}, {"254,0 W () 1 + 8 junk [0]", false}, {"254,0 W (", false},
	} {
		if _, err := parseBlockRq(bad.fields, bad.issue); err == nil {
			t.Errorf("parseBlockRq(%q): no error", bad.fields)
		}
	}
}

// importString imports a capture held in a string.
func importString(t *testing.T, capture string, o Options) (*trace.Reader, Summary, error) {
	t.Helper()
	var out bytes.Buffer
	sum, err := Import(strings.NewReader(capture), o, &out)
	if err != nil {
		return nil, sum, err
	}
	r, err := trace.NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return r, sum, nil
}

// Bad input is one error naming the line, never a panic.
func TestImportErrors(t *testing.T) {
	good := "          <idle>-0       [000] d..1.     1.000000000: cpu_idle: state=1 cpu_id=0\n"
	tests := []struct {
		name, capture, want string
		line                uint64
		events              []string // Options.Events
	}{
		{"empty", "", "no event lines", 0, nil},
		{"one line, cut", "          <idle>-0       [000] d..1.     1.000000000: cpu_idle: state=1 cpu_id=0", `no event lines: not a perf script, trace-cmd report or ftrace text capture (the last line, left out as it lacks its newline, was "          <idle>-0`, 0, nil},
		{"comments only", "# tracer: nop\n#\n", "no event lines", 0, nil},
		{"no cpu_idle", "  fio 1 [000] 1.0: block:block_rq_issue: 8,0 R 4096 () 8 + 8 [fio]\n", "no power:cpu_idle events", 0, nil},
		{"garbage first", "hello world\n" + good, "line 1: not an event line", 1, nil},
		{"garbage after events", good + "hello\n", "line 2: not an event line", 2, nil},
		// Cut lines inside the capture (a last one without its newline is
		// left out: TestImportCutLastLine).
		{"truncated fields", good + "          <idle>-0       [000] d..1.     1.000001000: cpu_idle: state=4294967295 cpu_\n" + good, "line 2: cpu_idle: no cpu_id= field", 2, nil},
		{"truncated prefix", good + "          <idle>-0       [000] d..1.     1.00\n" + good, "line 2: not an event line", 2, nil},
		{"bad state", "  swapper 0 [000] 1.0: power:cpu_idle: state=x cpu_id=0\n", "line 1: cpu_idle: state=\"x\" is not a number", 1, nil},
		{"bad block", good + "  fio 1 [000] 1.1: block:block_rq_issue: 8,0 R () 8 + 8 [fio]\n", "line 2: block_rq_issue: bytes", 2, nil},
		{"out of order", good + "          <idle>-0       [000] d..1.     0.500000000: cpu_idle: state=4294967295 cpu_id=0\n", "line 2: cpu_idle exit on CPU 0", 2, nil},
		{"huge CPU", "  swapper 0 [000] 1.0: power:cpu_idle: state=1 cpu_id=99999999\n", "line 1: cpu_idle: cpu_id=99999999", 1, nil},
		// Binary files: named, with what to do, not quoted line by line.
		{"an idletrace trace", trace.FileMagic + "\x01\x00ICHK", "an idletrace trace already: give it to stats", 0, nil},
		{"perf.data", "PERFILE2\x68\x00\x00", "a perf.data file: import its text, perf script", 0, nil},
		{"trace.dat", "\x17\x08\x44tracing6\x00", "a trace-cmd trace.dat file: import its text, trace-cmd report", 0, nil},
		{"other binary", "\x7fELF\x02\x01\x01\x00" + good, "not text (byte 0x7f at offset 0)", 0, nil},
		{"a Perfetto trace", "\x0a\x73\x50\x01\x68\x01 track\x0a", "not text (byte 0x01 at offset 3)", 0, nil},
		{"--events: a misspelt event", good, `event "irq:irq_handler_entri": not one whose presence the import uses (block:block_rq_complete, block:block_rq_issue, irq:irq_handler_entry,`, 0, []string{"irq:irq_handler_entri"}},
		{"--events: the wrong subsystem", good, `event "block:irq_handler_entry": not one whose presence`, 0, []string{"irq_vectors:local_timer_entry", "block:irq_handler_entry"}},
		{"--events: an event not imported", good, `event "sched:sched_waking": not one whose presence`, 0, []string{"sched:sched_waking"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := importString(t, tc.capture, Options{Events: tc.events})
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line with %q", err, tc.want)
			}
			if LineOf(err) != tc.line {
				t.Errorf("LineOf = %d, want %d", LineOf(err), tc.line)
			}
		})
	}
}

// TestImportStateBeyondProfile: with a table given (--profile), a state it
// lacks is an error naming the line; stats skipped such a period as
// impossible while whatif replayed it.
func TestImportStateBeyondProfile(t *testing.T) {
	capture := "  swapper 0 [000] 1.0: power:cpu_idle: state=1 cpu_id=0\n" +
		"  swapper 0 [000] 1.1: power:cpu_idle: state=4294967295 cpu_id=0\n" +
		"  swapper 0 [000] 1.2: power:cpu_idle: state=2 cpu_id=0\n"
	states := []trace.StateInfo{{Name: "POLL"}, {Name: "C1"}}
	_, _, err := importString(t, capture, Options{States: states})
	if err == nil || !strings.Contains(err.Error(), "line 3: cpu_idle: state=2 is beyond the profile's 2 states (0-1)") || LineOf(err) != 3 {
		t.Errorf("error %v (line %d), want line 3's state=2 named", err, LineOf(err))
	}
	// Without a table, the capture's states are whatever it entered.
	if _, _, err := importString(t, capture, Options{}); err != nil {
		t.Errorf("without a profile: %v", err)
	}
}

// TestImportCutLastLine: a capture whose last line lacks its newline (cut
// short) imports without that line, which the summary names; one that
// ends whole names none.
func TestImportCutLastLine(t *testing.T) {
	lines := []string{
		"         swapper     0 [001]    10.000010: power:cpu_idle: state=1 cpu_id=1\n",
		"         swapper     0 [001]    10.000050: power:cpu_idle: state=4294967295 cpu_id=1\n",
		"         swapper     0 [001]    10.000060: power:cpu_idle: state=1 cpu_id=1\n",
		"         swapper     0 [001]    10.000090: power:cpu_idle: state=4294967295 cpu_id=1\n",
	}
	whole := strings.Join(lines, "")
	for _, tc := range []struct {
		name, capture, cut string
		periods            uint64
	}{
		{"whole", whole, "", 2},
		// cpu_id=1 of cpu_id=12 would parse (and then name another CPU than
		// its [012]): the line is left out all the same.
		{"cut after a digit", whole + "         swapper     0 [012]    10.000100: power:cpu_idle: state=1 cpu_id=1", "cpu_id=1", 2},
		{"cut inside the fields", whole[:len(whole)-len(lines[3])] + lines[3][:60], "10.000090: power:cpu_", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sum, err := importString(t, tc.capture, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if sum.IdlePeriods != tc.periods || (tc.cut == "") != (sum.CutLastLine == "") || !strings.Contains(sum.CutLastLine, tc.cut) || sum.IdleOtherCPU != 0 {
				t.Errorf("%d periods, cut line %q, %d on another CPU; want %d, one with %q, 0", sum.IdlePeriods, sum.CutLastLine, sum.IdleOtherCPU, tc.periods, tc.cut)
			}
		})
	}
}

// TestImportIdleOtherCPU: a cpu_idle line whose cpu_id is not its [CPU]
// is counted (the kernel raises the event on the CPU it names).
func TestImportIdleOtherCPU(t *testing.T) {
	capture := "         swapper     0 [000]    10.000010: power:cpu_idle: state=1 cpu_id=0\n" +
		"         swapper     0 [000]    10.000050: power:cpu_idle: state=4294967295 cpu_id=7\n" +
		"         swapper     0 [000]    10.000060: power:cpu_idle: state=4294967295 cpu_id=0\n"
	_, sum, err := importString(t, capture, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.IdleOtherCPU != 1 {
		t.Errorf("IdleOtherCPU %d, want 1", sum.IdleOtherCPU)
	}
}

// A small perf script capture: periods paired per CPU, the first exit
// (a period begun before the capture) and unknown events skipped and
// counted, IO paired by device and sector, inputs the capture lacks marked.
func TestImportPerfScript(t *testing.T) {
	capture := `         swapper     0 [000]    10.000001: power:cpu_idle: state=4294967295 cpu_id=0
         swapper     0 [000]    10.000010: power:cpu_idle: state=2 cpu_id=0
         swapper     0 [001]    10.000020: power:cpu_idle: state=1 cpu_id=1
             fio  4242 [001]    10.000030: block:block_rq_issue: 254,0 R 4096 () 8 + 8 be,0,4 [fio]
         swapper     0 [000]    10.000050: irq:irq_handler_entry: irq=36 name=virtio1
         swapper     0 [000]    10.000051: block:block_rq_complete: 254,0 R () 8 + 8 be,0,4 [0]
         swapper     0 [000]    10.000052: power:cpu_idle: state=4294967295 cpu_id=0
         swapper     0 [000]    10.000053: sched:sched_migrate_task: comm=a pid=1 prio=120 orig_cpu=0 dest_cpu=1
         swapper     0 [000]    10.000060: block:block_rq_complete: 254,0 W () 99 + 8 be,0,4 [0]
         swapper     0 [000]    10.000070: block:block_rq_complete: 254,0 FF () 0 + 0 be,0,4 [0]
`
	r, sum, err := importString(t, capture, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Two completions without an issue: one in flight at the start, one a
	// flush sequence's (FF), which the block layer never issues.
	if sum.Format != PerfScript || sum.Events != 10 || sum.IdlePeriods != 1 || sum.BlockIOs != 1 || sum.OpenPeriods != 1 || sum.IOUnmatched != 2 || sum.IOUnissued != 1 ||
		sum.Skipped["sched_migrate_task"] != 1 || sum.Unused["irq_handler_entry"] != 1 || sum.IdleUnpaired != 0 {
		t.Errorf("summary %+v", sum)
	}
	m := r.Meta
	if m.NumCPUs != 2 || len(m.States) != 0 || !m.Inputs.BlockIO || m.Inputs.WakeCauses || m.Inputs.WakeRequests || m.Inputs.TickState || m.Inputs.TaskIO || m.Inputs.NextTimer || m.Start != nil {
		t.Errorf("metadata %+v", m)
	}
	var periods []trace.IdlePeriod
	var ios []trace.BlockIO
	if err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error { periods = append(periods, *p); return nil },
		BlockIO: func(b *trace.BlockIO) error { ios = append(ios, *b); return nil }}); err != nil {
		t.Fatal(err)
	}
	if len(periods) != 1 || periods[0].CPU != 0 || periods[0].State != 2 || periods[0].EntryNs != 10000010000 || periods[0].ExitNs != 10000052000 ||
		periods[0].WakeCause != trace.WakeUnknown || periods[0].NrIOWait != -1 || periods[0].TickStopped != trace.Unknown {
		t.Errorf("periods %+v", periods)
	}
	if len(ios) != 1 || ios[0].IssueCPU != 1 || ios[0].CompleteCPU != 0 || ios[0].LatencyNs() != 21000 || ios[0].Tid != 4242 || ios[0].Comm != "fio" || ios[0].Bytes != 4096 || ios[0].Dev != 254<<20 {
		t.Errorf("IO %+v", ios)
	}
	st, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CPUs[0]; len(c.States) == 0 || c.States[len(c.States)-1].Name != "state2" || c.States[len(c.States)-1].Usage != 1 {
		t.Errorf("stats CPU 0: %+v", c)
	}
	if st.Loss.IOInFlightAtStart != 1 || st.Loss.IOUnissued != 1 || st.Loss.Total() != 1 {
		t.Errorf("loss %+v: want 1 in flight at start, 1 flush sequence's not counted lost", st.Loss)
	}
}

// stateFigures is stats' usage and residency per CPU and state index.
type stateKey struct{ cpu, state int }
type stateFig struct {
	name          string
	usage, timeNs uint64
}

func figures(st *analysis.Stats) map[stateKey]stateFig {
	out := map[stateKey]stateFig{}
	for _, c := range st.CPUs {
		for _, s := range c.States {
			out[stateKey{c.CPU, s.Index}] = stateFig{s.Name, s.Usage, s.TimeNs}
		}
	}
	return out
}

// The round trip: idletrace's own ftrace export of the bundled trace (the
// periods stats counts), imported, gives stats' figures per CPU and state.
func TestImportRoundTrip(t *testing.T) {
	r, err := trace.Open(bundledTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if _, err := export.WriteFtrace(r, export.Options{StatsWindow: true}, &text); err != nil {
		t.Fatal(err)
	}
	ir, sum, err := importString(t, text.String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Format != Ftrace || sum.IdleUnpaired != 0 || sum.OpenPeriods != 0 || sum.IOUnmatched != 0 || sum.IOInFlight != 0 {
		t.Errorf("summary %+v", sum)
	}
	got, err := analysis.StatsFromReader(ir)
	if err != nil {
		t.Fatal(err)
	}
	w, g := figures(want), figures(got)
	if len(w) == 0 {
		t.Fatal("no states in the bundled trace's stats")
	}
	for k, wf := range w {
		gf := g[k]
		if wf.usage == 0 && gf.usage == 0 {
			continue
		}
		if gf.usage != wf.usage || gf.timeNs != wf.timeNs || gf.name != wf.name {
			t.Errorf("CPU %d state %d: import %s %d periods %d ns, stats %s %d periods %d ns", k.cpu, k.state, gf.name, gf.usage, gf.timeNs, wf.name, wf.usage, wf.timeNs)
		}
		t.Logf("CPU %d %s: usage %d, residency %d ns (import and original)", k.cpu, wf.name, gf.usage, gf.timeNs)
	}
	// Wake causes: the export writes one event per cause that has one
	// (the tick as local_timer_entry, no hrtimer_expire_entry), so the
	// tick comes back as timer, and a poll timeout or a wake-up without
	// an IPI (no event) as unknown.
	if !want.Inputs.WakeCauses || !got.Inputs.WakeCauses {
		t.Errorf("wake causes: original carries them %v, import %v (%s)", want.Inputs.WakeCauses, got.Inputs.WakeCauses, ir.Meta.Probes["wake causes"])
	}
	back := map[string]string{"tick": "timer", "poll-timeout": "unknown", "remote-no-ipi": "unknown"}
	for i, wc := range want.CPUs {
		exp := map[string]uint64{}
		for c, n := range wc.WakeCauses {
			if b, ok := back[c]; ok {
				c = b
			}
			if n > 0 {
				exp[c] += n
			}
		}
		gotC := map[string]uint64{}
		if i < len(got.CPUs) {
			for c, n := range got.CPUs[i].WakeCauses {
				if n > 0 {
					gotC[c] = n
				}
			}
		}
		if !maps.Equal(exp, gotC) {
			t.Errorf("CPU %d wake causes: import %v, original (tick as timer, no-event causes as unknown) %v", wc.CPU, gotC, exp)
		}
		t.Logf("CPU %d wake causes: %v", wc.CPU, gotC)
	}
	if !slices.Equal(got.WakeCauses.TopIRQs, want.WakeCauses.TopIRQs) {
		t.Errorf("top IRQs: import %v, original %v", got.WakeCauses.TopIRQs, want.WakeCauses.TopIRQs)
	}
	if got.IO.Requests != want.IO.Requests {
		t.Errorf("IO requests: import %d, original %d", got.IO.Requests, want.IO.Requests)
	}
	if got.IO.LatencyNs.P50 != want.IO.LatencyNs.P50 || got.IO.LatencyNs.Max != want.IO.LatencyNs.Max {
		t.Errorf("IO latency: import %+v, original %+v", got.IO.LatencyNs, want.IO.LatencyNs)
	}
}

// A profile's table names the states; without one or a header, state N.
func TestImportProfileStates(t *testing.T) {
	capture := "  swapper 0 [000] 1.0: power:cpu_idle: state=1 cpu_id=0\n  swapper 0 [000] 1.5: power:cpu_idle: state=4294967295 cpu_id=0\n"
	states := []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: "C1", ExitLatencyNs: 2000, TargetResidencyNs: 2000}}
	r, _, err := importString(t, capture, Options{States: states})
	if err != nil {
		t.Fatal(err)
	}
	st, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	f := figures(st)[stateKey{0, 1}]
	if f.name != "C1" || f.usage != 1 || f.timeNs != 500e6 {
		t.Errorf("state 1: %+v", f)
	}
	if len(r.Meta.States) != 1 || r.Meta.States[0].States[1].ExitLatencyNs != 2000 {
		t.Errorf("states %+v", r.Meta.States)
	}
}

// TestImportProfileAgainstHeader: a profile whose states are not named as
// the capture's own table (idletrace's export header) is refused, naming
// both; one that names them alike gives its numbers.
func TestImportProfileAgainstHeader(t *testing.T) {
	capture := trace.ExportStatesHeader + " cpu0: POLL:0:0:polling haltpoll%20idle:1000:1000\n" +
		"  swapper 0 [000] 1.0: power:cpu_idle: state=1 cpu_id=0\n  swapper 0 [000] 1.5: power:cpu_idle: state=4294967295 cpu_id=0\n"
	icx := []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: "C1", ExitLatencyNs: 1000, TargetResidencyNs: 1000},
		{Index: 2, Name: "C1E"}, {Index: 3, Name: "C6"}}
	_, _, err := importString(t, capture, Options{States: icx})
	if err == nil || !strings.Contains(err.Error(), "CPU 0 the states POLL, haltpoll idle, the profile POLL, C1, C1E, C6") {
		t.Errorf("a profile unlike the header's table: %v", err)
	}
	same := []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: "haltpoll idle", ExitLatencyNs: 5000, TargetResidencyNs: 5000}}
	r, _, err := importString(t, capture, Options{States: same})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Meta.States) != 1 || r.Meta.States[0].States[1].ExitLatencyNs != 5000 {
		t.Errorf("states %+v", r.Meta.States)
	}
	// A deeper capture's state beyond the profile: the header's table is
	// what is said, not the state number.
	deep := trace.ExportStatesHeader + " cpu0: POLL:0:0:polling C1:1000:1000 C1E:4000:4000 C6:170000:600000\n" +
		"  swapper 0 [000] 1.0: power:cpu_idle: state=3 cpu_id=0\n  swapper 0 [000] 1.5: power:cpu_idle: state=4294967295 cpu_id=0\n"
	if _, _, err := importString(t, deep, Options{States: same}); err == nil || !strings.Contains(err.Error(), "the states POLL, C1, C1E, C6, the profile POLL, haltpoll idle") {
		t.Errorf("a 4-state capture with a 2-state profile: %v", err)
	}
	// idlestat's part of the header alone (an export of an import, whose
	// exit latencies are unknown): its states are counted.
	idlestat := "idlestat version = 0.8\ncpus=1\ncpuid 0:\n\tPOLL\n\t0\n\tC1\n\t1\n\tC6\n\t600\n" + strings.Repeat("\t(null)\n\t0\n", 13) +
		"  swapper 0 [000] 1.0: power:cpu_idle: state=1 cpu_id=0\n  swapper 0 [000] 1.5: power:cpu_idle: state=4294967295 cpu_id=0\n"
	if _, _, err := importString(t, idlestat, Options{States: same}); err == nil || !strings.Contains(err.Error(), "gives CPU 0 3 states (POLL, C1, C6), the profile 2") {
		t.Errorf("idlestat's 3-state table with a 2-state profile: %v", err)
	}
	if _, _, err := importString(t, idlestat, Options{States: icx[:3]}); err != nil {
		t.Errorf("idlestat's 3-state table with a 3-state profile: %v", err)
	}
}

// No line makes the parsers panic.
func FuzzImportLine(f *testing.F) {
	for _, s := range []string{
		"          <idle>-0       [000] d..1.  2033.066737291: cpu_idle: state=1 cpu_id=0",
		"             fio  4242 [000] 12.000000123: block:block_rq_issue: 254,0 R 4096 () 8 + 8 be,0,4 [fio]",
		"   kworker/0:1H-123   [000]    10.000002: block_rq_complete:    8,0 WS () 100 + 8 [0]",
		"cpus=2", "cpuid 0:", "\tPOLL", "x [1] 1.1: a:b: (",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := newPass(Auto, nil)
		p.line(s)
		p.line(s)
		if ev, err := parseLine(s); err == nil {
			parseBlockRq(ev.fields, true)
			parseBlockRq(ev.fields, false)
		}
	})
}

// trace-cmd report's and tracefs' headers: the CPU count, empty CPUs,
// lost events counted, no state table.
func TestImportHeaders(t *testing.T) {
	tests := []struct {
		name, capture string
		cpus          int
		lost          uint64
	}{
		{"trace-cmd report", "version = 6\nCPU 2 is empty\ncpus=4\n" +
			"          <idle>-0     [001]    10.000001: cpu_idle:             state=1 cpu_id=1\n" +
			"CPU:1 [LOST 12 EVENTS]\n" +
			"          <idle>-0     [001]    10.000101: cpu_idle:             state=4294967295 cpu_id=1\n", 4, 12},
		{"tracefs", "# tracer: nop\n#\n# entries-in-buffer/entries-written: 2/2   #P:8\n#\n" +
			"          <idle>-0       [003] d..1.    10.000001000: cpu_idle: state=2 cpu_id=3\n" +
			"          <idle>-0       [003] d..1.    10.000101000: cpu_idle: state=4294967295 cpu_id=3\n", 8, 0},
		{"no header", "  swapper 0 [005] 1.0: power:cpu_idle: state=1 cpu_id=5\n  swapper 0 [005] 1.5: power:cpu_idle: state=4294967295 cpu_id=5\n", 6, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, sum, err := importString(t, tc.capture, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Meta.NumCPUs != tc.cpus || len(r.Meta.RecordedCPUs) != tc.cpus || sum.Lost != tc.lost || sum.IdlePeriods != 1 || len(r.Meta.States) != 0 {
				t.Errorf("CPUs %d (recorded %v), lost %d, periods %d, states %v; want %d CPUs, %d lost, 1 period", r.Meta.NumCPUs, r.Meta.RecordedCPUs, sum.Lost, sum.IdlePeriods, r.Meta.States, tc.cpus, tc.lost)
			}
		})
	}
}

// The state table through idletrace's own ftrace export and back: whole
// (exit latencies included) from the export's comment line; from
// idlestat's part of the header alone (names and target residencies),
// marked as lacking exit latencies, which the recorded profile then
// refuses rather than take them for zero, while a profile given for the
// states replays it.
func TestImportStateTables(t *testing.T) {
	table := []trace.StateInfo{
		{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "C1", ExitLatencyNs: 1000, TargetResidencyNs: 1000},
		{Index: 2, Name: "C1E", ExitLatencyNs: 4000, TargetResidencyNs: 4000, Disabled: true},
		{Index: 3, Name: "C6", ExitLatencyNs: 170000, TargetResidencyNs: 600000},
	}
	meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0},
		CPUIdleDriver: "intel_idle", CPUIdleGovernor: "menu", States: []trace.CPUStates{{CPU: 0, States: table}}}
	periods := tracetest.Periods(20, 1, 0, 1e6, 5e5)
	for i := range periods {
		periods[i].State = uint32(i % 4)
	}
	r := tracetest.Build(t, meta, periods, nil)
	var text bytes.Buffer
	if _, err := export.WriteFtrace(r, export.Options{}, &text); err != nil {
		t.Fatal(err)
	}
	var idlestatOnly strings.Builder
	for line := range strings.Lines(text.String()) {
		if !strings.HasPrefix(line, trace.ExportStatesHeader) {
			idlestatOnly.WriteString(line)
		}
	}
	idlestatTable := []trace.StateInfo{{Index: 0, Name: "POLL"}, {Index: 1, Name: "C1", TargetResidencyNs: 1000},
		{Index: 2, Name: "C1E", TargetResidencyNs: 4000}, {Index: 3, Name: "C6", TargetResidencyNs: 600000}}
	tests := []struct {
		name, capture string
		want          []trace.StateInfo
		unknownExit   bool
	}{
		{"the export's whole table", text.String(), table, false},
		{"idlestat's header alone", idlestatOnly.String(), idlestatTable, true},
		{"a line that cannot be read whole", strings.Replace(text.String(), "C6:170000:600000", "C6:170000", 1), idlestatTable, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ir, _, err := importString(t, tc.capture, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ir.Meta.States) != 1 || !slices.Equal(ir.Meta.States[0].States, tc.want) || ir.Meta.ExitLatenciesUnknown != tc.unknownExit {
				t.Fatalf("states %+v (exit latencies unknown: %v), want %+v (%v)", ir.Meta.States, ir.Meta.ExitLatenciesUnknown, tc.want, tc.unknownExit)
			}
			_, err = model.Recorded(ir.Meta)
			if tc.unknownExit != (err != nil) || err != nil && !strings.Contains(err.Error(), "no exit latencies") {
				t.Errorf("recorded profile: %v", err)
			}
			prof, err := model.LoadProfile("icx", ir.Meta)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := model.NewReplay(prof, ir.Meta, []model.Policy{mustParse(t, "menu")}); err != nil {
				t.Errorf("a replay on a profile given for the states: %v", err)
			}
		})
	}
}

// TestImportNoDriver: the export of a trace recorded without a cpuidle
// driver names it, and its import has no state table (not idlestat's
// header's POLL and HLT, whose exit latencies it would not know), so the
// recorded profile replays HLT as the recording's does. Without the line
// (another tool's capture) the driver is unknown.
func TestImportNoDriver(t *testing.T) {
	meta := &trace.Metadata{KernelRelease: "6.18.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0}, CPUIdleDriver: trace.CPUIdleDriverNone}
	r := tracetest.Build(t, meta, tracetest.Periods(20, 1, 1, 1e6, 5e5), nil)
	var text bytes.Buffer
	if _, err := export.WriteFtrace(r, export.Options{}, &text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), trace.ExportDriverHeader+" none\n") {
		t.Fatalf("the export does not name the driver:\n%.600s", text.String())
	}
	withoutLine := strings.Replace(text.String(), trace.ExportDriverHeader+" none\n", "", 1)
	for _, tc := range []struct {
		name, capture, driver string
		recorded              bool // the recorded profile loads
	}{
		{"idletrace's export", text.String(), trace.CPUIdleDriverNone, true},
		{"without the driver line", withoutLine, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ir, _, err := importString(t, tc.capture, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if ir.Meta.CPUIdleDriver != tc.driver {
				t.Errorf("driver %q, want %q", ir.Meta.CPUIdleDriver, tc.driver)
			}
			prof, err := model.Recorded(ir.Meta)
			if tc.recorded != (err == nil) {
				t.Fatalf("recorded profile: %v", err)
			}
			if tc.recorded && (len(ir.Meta.States) != 0 || len(prof.States) != 2 || prof.States[1].ExitLatencyNs != 1000) {
				t.Errorf("states %+v, recorded profile %+v: want no table, and HLT's assumed 1 µs", ir.Meta.States, prof.States)
			}
		})
	}
}

// TestImportHaltpollRecording: the export of a haltpoll guest's recording
// carries its governor, haltpoll's parameters and its state names as they
// were ("haltpoll idle", not idlestat's "haltpoll_idle"), so that a
// haltpoll what-if on the import replays the recording's window and
// --measured takes the two for the same machine.
func TestImportHaltpollRecording(t *testing.T) {
	hp := &trace.HaltPollParams{GuestHaltPollNs: 0, Grow: 2, Shrink: 2, GrowStart: 50000, AllowShrink: true}
	states := []trace.StateInfo{
		{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "haltpoll idle", ExitLatencyNs: 1000, TargetResidencyNs: 1000},
	}
	meta := &trace.Metadata{KernelRelease: "6.18.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0},
		CPUIdleDriver: "haltpoll", CPUIdleGovernor: "haltpoll", HaltPoll: hp, States: []trace.CPUStates{{CPU: 0, States: states}}}
	r := tracetest.Build(t, meta, tracetest.Periods(20, 1, 1, 1e6, 5e5), nil)
	var text bytes.Buffer
	if _, err := export.WriteFtrace(r, export.Options{}, &text); err != nil {
		t.Fatal(err)
	}
	ir, _, err := importString(t, text.String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := ir.Meta
	if m.CPUIdleGovernor != "haltpoll" || m.HaltPoll == nil || *m.HaltPoll != *hp {
		t.Errorf("governor %q, haltpoll %+v: want haltpoll and %+v", m.CPUIdleGovernor, m.HaltPoll, hp)
	}
	if len(m.States) != 1 || !slices.Equal(m.States[0].States, states) {
		t.Errorf("states %+v, want %+v", m.States, states)
	}
}

func mustParse(t *testing.T, spec string) model.Policy {
	t.Helper()
	p, err := model.ParsePolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHeaderStatesLines: a CPU's table from idletrace's export, on one
// line or going on over several; a later run of the same CPU's lines (two
// files joined) is a new table, not more states; a line that does not
// read drops the CPU's table.
func TestHeaderStatesLines(t *testing.T) {
	const h = trace.ExportStatesHeader
	for _, tc := range []struct {
		name  string
		lines []string
		want  string // cpu0's state names, "" for none
	}{
		{"one line", []string{h + " cpu0: POLL:0:0:polling C1:1000:1000 C6:170000:600000"}, "POLL C1 C6"},
		{"two lines", []string{h + " cpu0: POLL:0:0:polling C1:1000:1000", h + " cpu0: C6:170000:600000:disabled"}, "POLL C1 C6"},
		{"a second run", []string{h + " cpu0: POLL:0:0:polling C1:1000:1000", h + " cpu1: POLL:0:0:polling", h + " cpu0: POLL:0:0:polling C1E:2000:4000"}, "POLL C1E"},
		{"a bad line", []string{h + " cpu0: POLL:0:0:polling C1:1000:1000", h + " cpu0: C6:x:600000"}, ""},
	} {
		p := newPass(Auto, nil)
		for _, l := range tc.lines {
			p.headerStates(l)
		}
		var names []string
		for _, si := range p.fullStates[0] {
			names = append(names, si.Name)
		}
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("%s: cpu0's states %q, want %q", tc.name, got, tc.want)
		}
		for i, si := range p.fullStates[0] {
			if si.Index != i {
				t.Errorf("%s: state %s has index %d, want %d", tc.name, si.Name, si.Index, i)
			}
		}
	}
}

// TestImportBlockEventsListed: a capture whose header lists both block
// events recorded block IO, none of which happened in its window (0
// requests, not unknown); without the header it did not record it.
func TestImportBlockEventsListed(t *testing.T) {
	idle := `         swapper     0 [000]    10.000010: power:cpu_idle: state=1 cpu_id=0
         swapper     0 [000]    10.000052: power:cpu_idle: state=4294967295 cpu_id=0
`
	header := "# event : name = block:block_rq_issue, , id = { 1 }, type = 2\n# event : name = block:block_rq_complete, , id = { 2 }, type = 2\n"
	for _, tc := range []struct {
		name, capture string
		want          bool
	}{
		{"listed", header + idle, true},
		{"one listed", header[:strings.Index(header, "\n")+1] + idle, false},
		{"not listed", idle, false},
	} {
		r, _, err := importString(t, tc.capture, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Meta.Inputs.BlockIO != tc.want || strings.HasPrefix(r.Meta.Probes["block:block_rq_issue"], "imported") != tc.want {
			t.Errorf("%s: block IO %v (%q), want %v", tc.name, r.Meta.Inputs.BlockIO, r.Meta.Probes["block:block_rq_issue"], tc.want)
		}
	}
}

// TestImportPerfHeaderHost: perf script --header names the host, its
// kernel and CPU; the import keeps them (fleet rows are keyed by host, and
// a what-if replays that kernel's governors). idletrace's own export
// header, where both are there, is the recording's word.
func TestImportPerfHeaderHost(t *testing.T) {
	idle := "         swapper     0 [000]    10.000010: power:cpu_idle: state=1 cpu_id=0\n" +
		"         swapper     0 [000]    10.000052: power:cpu_idle: state=4294967295 cpu_id=0\n"
	perf := "# ========\n# captured on    : Mon Dec  7 11:05:47 2026\n# hostname : db-17\n# os release : 6.12.57-cloud\n# perf version : 6.1.187\n# cpudesc : Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\n# nrcpus online : 2\n"
	r, _, err := importString(t, perf+idle, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := r.Meta; m.Hostname != "db-17" || m.KernelRelease != "6.12.57-cloud" || m.CPUModel != "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz" {
		t.Errorf("host %q, kernel %q, CPU %q", m.Hostname, m.KernelRelease, m.CPUModel)
	}
	r, _, err = importString(t, trace.ExportRecordingHeader+" kernel=6.18.1 host=vm dev=254:0:vda\n"+trace.ExportRecordingHeader+" dev=259:2:nvme0n1p2 dev=x\n"+perf+idle, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := r.Meta; m.Hostname != "vm" || m.KernelRelease != "6.18.1" {
		t.Errorf("with idletrace's header: host %q, kernel %q", m.Hostname, m.KernelRelease)
	}
	// The export's devices name the block events' numbers again.
	if want := []trace.BlockDevice{{Name: "vda", Major: 254}, {Name: "nvme0n1p2", Major: 259, Minor: 2}}; !slices.Equal(r.Meta.BlockDevices, want) {
		t.Errorf("devices %+v, want %+v", r.Meta.BlockDevices, want)
	}
}

// TestImportLostCompletion: perf drops events without a LOST line; where
// a completion is missing, the same device and sector's next issue shows
// it, and the next completion pairs with that issue, not the stale one (a
// dsync dd, which rewrites one sector, had every latency after the first
// drop taken from a request nine earlier). A requeued request is not one.
func TestImportLostCompletion(t *testing.T) {
	capture := `         swapper     0 [000]    10.000010: power:cpu_idle: state=1 cpu_id=0
              dd  4242 [001]    10.000100: block:block_rq_issue: 254,0 WS 4096 () 8 + 8 be,0,4 [dd]
              dd  4242 [001]    10.000200: block:block_rq_issue: 254,0 WS 4096 () 8 + 8 be,0,4 [dd]
         swapper     0 [000]    10.000240: block:block_rq_complete: 254,0 WS () 8 + 8 be,0,4 [0]
              dd  4242 [001]    10.000300: block:block_rq_issue: 254,0 WS 4096 () 8 + 8 be,0,4 [dd]
         swapper     0 [000]    10.000345: block:block_rq_complete: 254,0 WS () 8 + 8 be,0,4 [0]
         swapper     0 [000]    10.000400: power:cpu_idle: state=4294967295 cpu_id=0
`
	r, sum, err := importString(t, capture, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var lat []uint64
	if err := r.Scan(trace.Visitor{BlockIO: func(b *trace.BlockIO) error { lat = append(lat, b.LatencyNs()); return nil }}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lat) != "[40000 45000]" || sum.IOOrphaned != 1 || sum.IOUnmatched != 0 {
		t.Errorf("latencies %v ns, %d issues without their completion, %d completions without an issue; want [40000 45000], 1, 0", lat, sum.IOOrphaned, sum.IOUnmatched)
	}
	st, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if st.Loss.Undelivered != 1 || st.Loss.UndeliveredReason != requeueLacking {
		t.Errorf("loss %+v: want the lost completion as not delivered, and that the capture lacks block_rq_requeue", st.Loss)
	}
	// A capture recorded with block_rq_requeue (perf script --header
	// lists it) lost the completion: no requeue to blame.
	r, _, err = importString(t, "# event : name = block:block_rq_requeue, , id = { 3 }, type = 2\n"+capture, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err = analysis.StatsFromReader(r); err != nil || st.Loss.Undelivered != 1 || st.Loss.UndeliveredReason != "" {
		t.Errorf("with block_rq_requeue recorded: loss %+v (%v), want 1 not delivered and no reason", st.Loss, err)
	}

	// A request put back (block_rq_requeue) and issued again lost nothing.
	requeued := `         swapper     0 [000]    10.000010: power:cpu_idle: state=1 cpu_id=0
              dd  4242 [001]    10.000100: block:block_rq_issue: 254,0 WS 4096 () 8 + 8 be,0,4 [dd]
              dd  4242 [001]    10.000150: block:block_rq_requeue: 254,0 WS () 8 + 8 be,0,4 [0]
              dd  4242 [001]    10.000200: block:block_rq_issue: 254,0 WS 4096 () 8 + 8 be,0,4 [dd]
         swapper     0 [000]    10.000240: block:block_rq_complete: 254,0 WS () 8 + 8 be,0,4 [0]
         swapper     0 [000]    10.000400: power:cpu_idle: state=4294967295 cpu_id=0
`
	r, sum, err = importString(t, requeued, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lat = nil
	if err := r.Scan(trace.Visitor{BlockIO: func(b *trace.BlockIO) error { lat = append(lat, b.LatencyNs()); return nil }}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lat) != "[40000]" || sum.IOOrphaned != 0 {
		t.Errorf("requeued: latencies %v ns, %d issues without their completion; want [40000], 0", lat, sum.IOOrphaned)
	}
}
