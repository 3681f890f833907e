package export

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestFtraceLines: each event line as the kernel prints it: the columns
// of trace_print_context, then the event's TP_printk.
func TestFtraceLines(t *testing.T) {
	fio := &trace.BlockIO{Dev: 254<<20 | 16, Sector: 29120984, Bytes: 4096, CmdFlags: trace.OpWrite | trace.ReqSync,
		IssueNs: 2033_354219144, CompleteNs: 2033_391665144, IssueCPU: 0, CompleteCPU: 1, Tid: 4242, Tgid: 4240, Comm: "fio"}
	flush := &trace.BlockIO{Dev: 8 << 20, Sector: math.MaxUint64, CmdFlags: trace.OpFlush | trace.ReqPreflush,
		IssueNs: 5_000000001, CompleteNs: 5_000100000, IssueCPU: 12, CompleteCPU: 1234, Error: 10}
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"cpu_idle entry", appendCPUIdle(nil, 1, 1234_567890123, 2),
			"          <idle>-0       [001] d..1.  1234.567890123: cpu_idle: state=2 cpu_id=1\n"},
		{"cpu_idle exit", appendCPUIdle(nil, 1, 1234_567890123, cpuIdleExit),
			"          <idle>-0       [001] d..1.  1234.567890123: cpu_idle: state=4294967295 cpu_id=1\n"},
		{"early and late instants, a CPU beyond 999", appendCPUIdle(nil, 4095, 7, 0),
			"          <idle>-0       [4095] d..1.     0.000000007: cpu_idle: state=0 cpu_id=4095\n"},
		{"seconds wider than five columns", appendCPUIdle(nil, 0, 123456_000000000, 1),
			"          <idle>-0       [000] d..1. 123456.000000000: cpu_idle: state=1 cpu_id=0\n"},
		{"device IRQ", mustWake(t, 3, 10_000000005, trace.WakeIRQ, 36),
			"          <idle>-0       [003] d.h1.    10.000000005: irq_handler_entry: irq=36 name=unknown\n"},
		{"timer", mustWake(t, 0, 1, trace.WakeTimer, -1),
			"          <idle>-0       [000] d.h1.     0.000000001: local_timer_entry: vector=236\n"},
		{"tick", mustWake(t, 0, 1, trace.WakeTick, -1),
			"          <idle>-0       [000] d.h1.     0.000000001: local_timer_entry: vector=236\n"},
		{"reschedule IPI", mustWake(t, 0, 1, trace.WakeIPIResched, -1),
			"          <idle>-0       [000] d.h1.     0.000000001: reschedule_entry: vector=253\n"},
		{"function-call IPI", mustWake(t, 0, 1, trace.WakeIPICall, -1),
			"          <idle>-0       [000] d.h1.     0.000000001: call_function_single_entry: vector=251\n"},
		{"issue by a known task", appendIssue(nil, fio),
			"             fio-4242    [000] .....  2033.354219144: block_rq_issue: 254,16 WS 4096 () 29120984 + 8 [fio]\n"},
		{"completion on an idle CPU", appendComplete(nil, fio, true),
			"          <idle>-0       [001] .....  2033.391665144: block_rq_complete: 254,16 WS () 29120984 + 8 [0]\n"},
		{"issue by an unknown task, a sector never set", appendIssue(nil, flush),
			"           <...>-0       [012] .....     5.000000001: block_rq_issue: 8,0 FF 0 () 0 + 0 [<...>]\n"},
		{"failed completion on a busy CPU", appendComplete(nil, flush, false),
			"           <...>-0       [1234] .....     5.000100000: block_rq_complete: 8,0 FF () 0 + 0 [-5]\n"},
		{"a task name with a line break", appendHead(nil, "a\nb", 7, 0, flagsBlock, 0, "x"),
			"             a?b-7       [000] .....     0.000000000: x: "},
		{"a task name of 16 characters", appendHead(nil, "abcdefghijklmnop", 1234567, 0, flagsBlock, 0, "x"),
			"abcdefghijklmnop-1234567 [000] .....     0.000000000: x: "},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
	for _, c := range []trace.WakeCause{trace.WakeUnknown, trace.WakeRemoteNoIPI, trace.WakePollTimeout} {
		if b, ok := appendWake(nil, 0, 1, c, -1); ok || len(b) != 0 {
			t.Errorf("%v: wrote %q, want no event", c, b)
		}
	}
	for in, want := range map[string]string{"C1E": "C1E", "": "", "C6 deep\tx": "C6_deep_x", strings.Repeat("x", 300): strings.Repeat("x", 100)} {
		if got := idlestatName(in); got != want {
			t.Errorf("state name %q as %q, want %q", in, got, want)
		}
	}
	if b, ok := appendWake(nil, 0, 1, trace.WakeIRQ, -1); ok || len(b) != 0 {
		t.Errorf("an IRQ of unknown number: wrote %q, want no event", b)
	}
}

func mustWake(t *testing.T, cpu uint32, ns uint64, c trace.WakeCause, irq int32) []byte {
	t.Helper()
	b, ok := appendWake(nil, cpu, ns, c, irq)
	if !ok {
		t.Fatalf("%v: no wake event", c)
	}
	return b
}

// TestFtraceRWBS: blk_fill_rwbs' letters for the operation and flags.
func TestFtraceRWBS(t *testing.T) {
	for _, tc := range []struct {
		flags uint32
		want  string
	}{
		{trace.OpRead, "R"},
		{trace.OpRead | trace.ReqRahead, "RA"},
		{trace.OpRead | trace.ReqSync | trace.ReqMeta, "RSM"},
		{trace.OpWrite, "W"},
		{trace.OpWrite | trace.ReqSync, "WS"},
		{trace.OpWrite | trace.ReqFUA | trace.ReqSync, "WFS"},
		{trace.OpWrite | trace.ReqPreflush | trace.ReqFUA | trace.ReqSync, "FWFS"},
		{trace.OpFlush | trace.ReqPreflush, "FF"},
		{trace.OpFlush, "F"},
		{trace.OpDiscard, "D"},
		{trace.OpSecureErase, "DE"},
		{9, "N"},                                                   // REQ_OP_WRITE_ZEROES
		{trace.OpWrite | 1<<8 | 1<<9 | 1<<10 | 1<<13 | 1<<14, "W"}, // failfast, prio and nomerge show nothing
	} {
		if got := string(appendRWBS(nil, tc.flags)); got != tc.want {
			t.Errorf("cmd_flags %#x: rwbs %q, want %q", tc.flags, got, tc.want)
		}
	}
}

// TestFtraceErrno: block_rq_complete's errno for the trace's status.
func TestFtraceErrno(t *testing.T) {
	for _, tc := range []struct{ status, want int32 }{
		{0, 0}, {1, -95}, {2, -110}, {3, -28}, {4, -67}, {5, -121}, {6, -52}, {7, -61}, {8, -84}, {9, -12},
		{10, -5}, {12, -11}, {13, -16}, {14, -5}, {200, -5},
		{-5, -5}, {-110, -110}, // the classic tracepoint's record holds the errno already
	} {
		if got := blkErrno(tc.status); got != tc.want {
			t.Errorf("status %d: errno %d, want %d", tc.status, got, tc.want)
		}
	}
}

// ftraceLine is one event line as a reader splits it.
type ftraceLine struct {
	comm        string
	pid, cpu    int
	flags       string
	ns          uint64
	event, args string
}

var ftraceLineRE = regexp.MustCompile(`^ *(.+)-(\d+) +\[(\d{3,})\] (.{5}) +(\d+)\.(\d{9}): ([a-z_]+): (.*)$`)

// ftraceText is an ftrace export split into idlestat's header, the
// kernel's header and the event lines.
type ftraceText struct {
	cpus     int
	entries  int
	topology []string
	states   map[int][][2]string // per CPU: name, target residency (µs)
	events   []ftraceLine
}

// parseFtrace reads an export as idlestat and a ftrace reader do, and
// fails on any line that fits neither.
func parseFtrace(t testing.TB, data []byte) ftraceText {
	t.Helper()
	if !bytes.Contains(data[:min(64, len(data))], []byte("# tracer")) {
		t.Errorf("no \"# tracer\" in the first 64 bytes (Perfetto's sniff): %q", data[:min(64, len(data))])
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	next := func(what string) string {
		if !sc.Scan() {
			t.Fatalf("the text ends before %s", what)
		}
		return sc.Text()
	}
	p := ftraceText{states: map[int][][2]string{}}
	if l := next("the version line"); !strings.HasPrefix(l, "idlestat version") {
		t.Fatalf("first line %q: not idlestat's magic", l)
	}
	if _, err := fmt.Sscanf(next("the CPU count"), "cpus=%d", &p.cpus); err != nil || p.cpus <= 0 {
		t.Fatalf("second line: %v (cpus=%d)", err, p.cpus)
	}
	l := next("the topology")
	for ; strings.HasPrefix(l, "#"); l = next("the topology") {
		if _, err := fmt.Sscanf(l, "# entries-in-buffer/entries-written: %d/", &p.entries); err == nil {
			var cpus int
			if i := strings.Index(l, "#P:"); i < 0 {
				t.Errorf("%q: no #P:", l)
			} else if cpus, _ = strconv.Atoi(l[i+3:]); cpus != p.cpus {
				t.Errorf("%q: #P is not cpus=%d", l, p.cpus)
			}
		}
	}
	var listed []int
	for ; !strings.HasPrefix(l, "cpuid "); l = next("the state table") {
		p.topology = append(p.topology, l)
		var cpu int
		if _, err := fmt.Sscanf(l, "\t\tcpu%d", &cpu); err == nil {
			listed = append(listed, cpu)
		}
	}
	for k, cpu := range listed {
		if l != fmt.Sprintf("cpuid %d:", cpu) {
			t.Fatalf("%q, want cpuid %d:", l, cpu)
		}
		for range idlestatStates {
			name, res := next("a state's name"), next("a state's residency")
			if !strings.HasPrefix(name, "\t") || strings.ContainsAny(name[1:], " \t") || !strings.HasPrefix(res, "\t") {
				t.Fatalf("cpu %d: state %q / %q is not \\tNAME / \\tRESIDENCY", cpu, name, res)
			}
			if _, err := strconv.Atoi(res[1:]); err != nil {
				t.Fatalf("cpu %d: residency %q: %v", cpu, res, err)
			}
			p.states[cpu] = append(p.states[cpu], [2]string{name[1:], res[1:]})
		}
		if k < len(listed)-1 {
			l = next("the next CPU's states")
		}
	}
	for sc.Scan() {
		m := ftraceLineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("not an event line: %q", sc.Text())
		}
		pid, _ := strconv.Atoi(m[2])
		cpu, _ := strconv.Atoi(m[3])
		s, _ := strconv.ParseUint(m[5], 10, 64)
		ns, _ := strconv.ParseUint(m[6], 10, 64)
		p.events = append(p.events, ftraceLine{comm: m[1], pid: pid, cpu: cpu, flags: m[4], ns: s*1e9 + ns, event: m[7], args: m[8]})
	}
	if len(p.events) != p.entries {
		t.Errorf("%d event lines, the header says %d", len(p.events), p.entries)
	}
	return p
}

// eventsOf exports path with o in an event format (WriteFtrace,
// WritePerfetto), or with any other write of one output.
func eventsOf(t testing.TB, path string, o Options, write func(*trace.Reader, Options, io.Writer) (Summary, error)) ([]byte, Summary) {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var buf bytes.Buffer
	sum, err := write(r, o, &buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

// ftraceOf exports path as ftrace text with o and parses it.
func ftraceOf(t testing.TB, path string, o Options) (ftraceText, Summary) {
	t.Helper()
	data, sum := eventsOf(t, path, o, WriteFtrace)
	p := parseFtrace(t, data)
	if uint64(len(p.events)) != sum.Events {
		t.Errorf("%d event lines, the summary says %d", len(p.events), sum.Events)
	}
	return p, sum
}

// TestFtraceText: the export of the bundled and the synthetic trace, with
// and without filters, holds the events of the same records as the
// tables do with the same options, in time order: per idle period its
// entry and exit (their times give the period's duration), its wake event
// right after the exit, per IO request its issue and completion.
func TestFtraceText(t *testing.T) {
	synth := writeSynth(t, t.TempDir(), 3_000)
	for _, tc := range []struct {
		path string
		o    Options
	}{
		{bundledTrace, Options{}},
		{synth, Options{}},
		{synth, Options{StatsWindow: true, CPUs: []int{1}}},
		{synth, Options{From: 20_000 * us, To: 80_000 * us, HasFrom: true, HasTo: true}},
	} {
		name := fmt.Sprintf("%s %+v", tc.path, tc.o)
		p, sum := ftraceOf(t, tc.path, tc.o)
		rows := exportTrace(t, tc.path, "csv", tc.o)
		if sum.IdlePeriods != rows.sum.IdlePeriods || sum.IORequests != rows.sum.IORequests {
			t.Errorf("%s: %d idle periods and %d IO requests, the tables %d and %d", name, sum.IdlePeriods, sum.IORequests, rows.sum.IdlePeriods, rows.sum.IORequests)
		}
		want := map[string][2]int64{} // cpu/state: periods, ns
		causes := map[string]int{}
		for _, r := range rows.idle {
			k := fmt.Sprintf("%d/%d", r.int(t, "cpu"), r.int(t, "state"))
			want[k] = [2]int64{want[k][0] + 1, want[k][1] + r.int(t, "duration_ns")}
			if r.str("wake_cause") != "" {
				causes[r.str("wake_cause")]++
			}
		}
		got := map[string][2]int64{}
		open := map[int]ftraceLine{}
		var last uint64
		events := map[string]int{}
		var issues, completes int
		for i, e := range p.events {
			if e.ns < last {
				t.Fatalf("%s: line %d at %d ns after %d ns", name, i, e.ns, last)
			}
			last = e.ns
			events[e.event]++
			switch e.event {
			case "cpu_idle":
				var state uint64
				var cpu int
				if _, err := fmt.Sscanf(e.args, "state=%d cpu_id=%d", &state, &cpu); err != nil || cpu != e.cpu || e.comm != "<idle>" || e.flags != flagsIdle {
					t.Fatalf("%s: %+v", name, e)
				}
				entry, isOpen := open[cpu]
				switch {
				case state == cpuIdleExit && isOpen:
					k := fmt.Sprintf("%d/%s", cpu, strings.TrimPrefix(entry.args[:strings.Index(entry.args, " ")], "state="))
					got[k] = [2]int64{got[k][0] + 1, got[k][1] + int64(e.ns-entry.ns)}
					delete(open, cpu)
				case state != cpuIdleExit && !isOpen:
					open[cpu] = e
				default:
					t.Fatalf("%s: line %d, %+v: CPU %d's entries and exits do not alternate", name, i, e, cpu)
				}
			case "irq_handler_entry", "local_timer_entry", "reschedule_entry", "call_function_single_entry":
				if prev := p.events[i-1]; prev.event != "cpu_idle" || prev.args != fmt.Sprintf("state=4294967295 cpu_id=%d", e.cpu) || prev.ns != e.ns {
					t.Errorf("%s: %+v does not follow its CPU's exit (%+v)", name, e, prev)
				}
			case "pm_qos_add_request", "pm_qos_update_request", "pm_qos_remove_request",
				"dev_pm_qos_add_request", "dev_pm_qos_update_request", "dev_pm_qos_remove_request":
				if next := p.events[i+1]; next.event != "pm_qos_update_target" || next.ns != e.ns {
					t.Errorf("%s: %+v is not followed by its pm_qos_update_target (%+v)", name, e, next)
				}
			case "pm_qos_update_target":
			case "block_rq_issue":
				issues++
			case "block_rq_complete":
				completes++
				onIdle := false
				if _, ok := open[e.cpu]; ok {
					onIdle = true
				}
				if (e.comm == "<idle>") != onIdle {
					t.Errorf("%s: %+v: the task is %s, the CPU idle %v", name, e, e.comm, onIdle)
				}
			default:
				t.Errorf("%s: unexpected event %+v", name, e)
			}
		}
		if len(open) != 0 {
			t.Errorf("%s: periods left open at the end: %v", name, open)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: periods and time per cpu/state\n got %v\nwant %v (the tables)", name, got, want)
		}
		for cause, event := range map[string]string{"irq": "irq_handler_entry", "ipi-resched": "reschedule_entry", "ipi-call": "call_function_single_entry"} {
			if events[event] != causes[cause] {
				t.Errorf("%s: %d %s lines, %d periods woken by %s", name, events[event], event, causes[cause], cause)
			}
		}
		if events["local_timer_entry"] != causes["timer"]+causes["tick"] {
			t.Errorf("%s: %d local_timer_entry lines, %d periods woken by the timer or tick", name, events["local_timer_entry"], causes["timer"]+causes["tick"])
		}
		if uint64(issues) != sum.IORequests || uint64(completes) != sum.IORequests {
			t.Errorf("%s: %d issues and %d completions for %d IO requests", name, issues, completes, sum.IORequests)
		}
		if changes := qosChangeRows(t, tc.path, tc.o); events["pm_qos_update_target"] != changes {
			t.Errorf("%s: %d pm_qos_update_target lines, %d changes in pm_qos_changes", name, events["pm_qos_update_target"], changes)
		}
		t.Logf("%s: %d lines, %v", name, len(p.events), events)
	}
}

// TestFtraceHeader: idlestat's header gives the CPU count, one cluster of
// one core per CPU written (the trace records no topology; the CPUs it
// records, of them those selected) and each such CPU's states from the
// trace's table, idlestat's 16 slots filled with (null) beyond it; without
// a cpuidle driver, POLL and HLT. Every cpu_idle line is on a listed CPU.
func TestFtraceHeader(t *testing.T) {
	synth := writeSynth(t, t.TempDir(), 100)
	table := [][2]string{{"POLL", "0"}, {"C1", "2"}, {"C6", "400"}}
	for _, tc := range []struct {
		path   string
		o      Options
		cpus   int
		listed []int
		states [][2]string
	}{
		{synth, Options{}, 4, []int{0, 1}, table}, // 4 CPUs, of which 0 and 1 recorded
		{synth, Options{CPUs: []int{1, 3}}, 4, []int{1}, table},
		{synth, Options{CPUs: []int{3}}, 4, []int{0, 1}, table}, // CPU 3's IO only: the recorded CPUs, without periods
		{bundledTrace, Options{}, 2, []int{0, 1}, [][2]string{{"POLL", "0"}, {"HLT", "0"}}},
		{bundledTrace, Options{CPUs: []int{1}}, 2, []int{1}, [][2]string{{"POLL", "0"}, {"HLT", "0"}}},
	} {
		name := fmt.Sprintf("%s %v", tc.path, tc.o.CPUs)
		p, _ := ftraceOf(t, tc.path, tc.o)
		if p.cpus != tc.cpus {
			t.Errorf("%s: cpus=%d, want %d", name, p.cpus, tc.cpus)
		}
		want := []string{"clusterA:"}
		for _, cpu := range tc.listed {
			want = append(want, fmt.Sprintf("\tcore%d", cpu), fmt.Sprintf("\t\tcpu%d", cpu))
		}
		if fmt.Sprint(p.topology) != fmt.Sprint(want) {
			t.Errorf("%s: topology %q, want %q", name, p.topology, want)
		}
		if len(p.states) != len(tc.listed) {
			t.Errorf("%s: state tables for CPUs %v, want %v", name, p.states, tc.listed)
		}
		for _, cpu := range tc.listed {
			for i, s := range p.states[cpu] {
				w := [2]string{"(null)", "0"}
				if i < len(tc.states) {
					w = tc.states[i]
				}
				if s != w {
					t.Errorf("%s: cpu %d state %d: %v, want %v", name, cpu, i, s, w)
				}
			}
		}
		for _, e := range p.events {
			if e.event == "cpu_idle" && (!slices.Contains(tc.listed, e.cpu) || tc.o.CPUs != nil && !slices.Contains(tc.o.CPUs, e.cpu)) {
				t.Fatalf("%s: %+v on a CPU the header does not list or not selected", name, e)
			}
		}
	}
}

// qosChangeRows counts the changes (not the limits in force) the
// pm_qos_changes table gives of path with o.
func qosChangeRows(t testing.TB, path string, o Options) int {
	t.Helper()
	table, _ := eventsOf(t, path, o, func(r *trace.Reader, o Options, w io.Writer) (Summary, error) {
		return Write(r, o, "csv", map[string]io.Writer{PMQoSChanges: w})
	})
	_, rows := readCSV(t, table)
	n := 0
	for _, rw := range rows {
		if rw.str("action") != "in_force" {
			n++
		}
	}
	return n
}
