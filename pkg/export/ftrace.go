package export

// The ftrace text: the events behind a trace's records in the kernel's
// text trace format (what `cat /sys/kernel/tracing/trace` prints with the
// nop tracer), time-ordered across CPUs as the kernel merges its per-CPU
// buffers, under the header Debian's idlestat 0.8 reads in --import mode
// (its "idlestat native" format, tracefile_idlestat.c):
//
//	idlestat version = 0.8       the first 16 characters are idlestat's magic
//	cpus=N                       idlestat's CPU count (sscanf "cpus=%u")
//	# tracer: nop                the kernel's header: comment lines, which
//	# ...                        idlestat's topology reader skips
//	clusterA:                    the topology (read_cpu_topo_info): the trace
//		core0                    records none, so one cluster, one core per CPU
//			cpu0                 written (recorded and selected)
//	cpuid 0:                     per such CPU, exactly 16 (MAXCSTATE) states:
//		POLL                     the name (sscanf "\t%s")
//		0                        the target residency in µs ("\t%d")
//	...
//	          <idle>-0       [000] d..1.  2033.066737291: cpu_idle: state=1 cpu_id=0
//
// idlestat parses an event line with "%*[^]]] %*s %lf:%*[^=]=%u%*[^=]=%d"
// (the timestamp as a double: nanoseconds are kept) and a wake-up with
// "%*[^[][%d] %*[^=]=%d%*[^=]=%16s" (irq_handler_entry). Perfetto's
// sources (not run here) take a file with "# tracer" in its first 64 bytes
// for ftrace text (trace_type.cc) and count a line that is not an event
// as a parse failure and go on (systrace_trace_parser.cc): hence the
// kernel's header right after idlestat's first two lines. Times are
// CLOCK_MONOTONIC, as the recorder read them (the trace clock "mono").

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Ftrace is the format name of the ftrace text.
const Ftrace = "ftrace"

const (
	// idlestatVersion is what the header's first line names.
	idlestatVersion = "0.8"
	// idlestatStates is idlestat's MAXCSTATE: its header holds exactly
	// this many states per CPU.
	idlestatStates = 16
	// cpuIdleExit is cpu_idle's state for an exit (PWR_EVENT_EXIT, -1 as u32).
	cpuIdleExit = math.MaxUint32

	// The x86 vectors the irq_vectors events print
	// (arch/x86/include/asm/irq_vectors.h).
	localTimerVector         = 0xec
	rescheduleVector         = 0xfd
	callFunctionSingleVector = 0xfb
)

// The latency-format flags column (irqs-off, need-resched, hardirq/softirq,
// preempt depth, migrate-disable), which the trace does not record: the
// idle loop runs cpu_idle with interrupts off, the wake events are
// interrupt handlers, and the block events' context is unknown.
const (
	flagsIdle  = "d..1."
	flagsIRQ   = "d.h1."
	flagsBlock = "....."
)

// ftracer writes one trace's ftrace text.
type ftracer struct {
	eventWriter
	idle []bool // per CPU: inside an idle period, as written so far
	// listed are the CPUs the header's topology and state table list:
	// those the trace records idle periods of (all where it does not
	// say), and of them those selected. idlestat takes every CPU of its
	// topology for one that ran (its cluster figures are the time all of
	// them were idle at once), and a cpu_idle line for a CPU beyond it
	// would crash it.
	listed []bool
	line   []byte
	// qos: the PM QoS changes written (each as a request event and
	// pm_qos_update_target) and the limits where the file begins.
	qos qosSelection
}

// WriteFtrace writes the ftrace text of r's records that o selects to w:
// per idle period its cpu_idle entry and exit and the event behind its
// wake cause, per IO request its block_rq_issue and block_rq_complete.
// Memory holds the events between the earliest time a chunk yet to be
// read may hold and the latest read (a chunk spans about a second; more
// while an IO request stays in flight). Summary.Events counts the lines.
func WriteFtrace(r *trace.Reader, o Options, w io.Writer) (Summary, error) {
	f := newFtracer(r, o, w)
	err := f.run()
	return f.sum, err
}

func newFtracer(r *trace.Reader, o Options, w io.Writer) *ftracer {
	f := &ftracer{eventWriter: newEventWriter(r, o, w)}
	f.idle = make([]bool, f.ncpus)
	f.listed = make([]bool, f.ncpus)
	some := false
	for c := range f.listed {
		f.listed[c] = f.recorded.Has(uint32(c)) && (f.sel.cpus == nil || inSet(f.sel.cpus, uint32(c)))
		some = some || f.listed[c]
	}
	if !some { // no selected CPU has idle periods: list the recorded ones (idlestat refuses a topology without a CPU)
		for c := range f.listed {
			f.listed[c] = f.recorded.Has(uint32(c))
		}
	}
	f.tl = newTimeline(r, f.write)
	return f
}

// run makes two passes over the trace: one counts the lines for the
// header's entries line, the next writes them.
func (f *ftracer) run() error {
	var lines uint64
	var all []trace.PMQoSChange
	err := f.r.Scan(trace.Visitor{
		Idle: func(p *trace.IdlePeriod) error {
			if f.keepIdle(p) {
				lines += 2
				if _, _, ok := wakeEvent(p.WakeCause, p.WakeIRQ); ok && f.wakeCauses {
					lines++
				}
			}
			return nil
		},
		BlockIO: func(b *trace.BlockIO) error {
			if f.sel.io(b) {
				lines += 2
			}
			return nil
		},
		PMQoS: func(q *trace.PMQoSChange) error {
			all = append(all, *q)
			return nil
		},
	})
	if err != nil {
		return err
	}
	f.qos = selectQoS(f.meta, &f.sel, all)
	lines += 2 * uint64(len(f.qos.changes))
	f.writeHeader(lines)
	for i, q := range f.qos.changes { // few: held from the start, written in their turn
		f.tl.hold(event{ns: q.TimeNs, kind: evQoSRequest, io: int32(i)})
		f.tl.hold(event{ns: q.TimeNs, kind: evQoSTarget, io: int32(i)})
	}
	err = f.tl.scan(f.r, trace.Visitor{Idle: f.addIdle, BlockIO: f.holdIO})
	if err == nil {
		err = f.out.Flush()
	}
	return err
}

// keepIdle says whether a period is written: possible and selected (so
// on a CPU the header lists).
func (f *ftracer) keepIdle(p *trace.IdlePeriod) bool { return !f.impossible(p) && f.sel.idle(p) }

func (f *ftracer) addIdle(p *trace.IdlePeriod) error {
	kept, err := f.holdPeriod(p)
	if !kept {
		return err
	}
	if _, _, ok := wakeEvent(p.WakeCause, p.WakeIRQ); ok && f.wakeCauses {
		f.tl.hold(event{ns: p.ExitNs, cpu: p.CPU, kind: evWake, cause: p.WakeCause, irq: p.WakeIRQ})
	}
	return nil
}

func (f *ftracer) write(e *event) error {
	b := f.line[:0]
	switch e.kind {
	case evEntry:
		b = appendCPUIdle(b, e.cpu, e.ns, e.state)
		f.idle[e.cpu] = true
	case evExit:
		b = appendCPUIdle(b, e.cpu, e.ns, cpuIdleExit)
		f.idle[e.cpu] = false
	case evWake:
		b, _ = appendWake(b, e.cpu, e.ns, e.cause, e.irq)
	case evQoSRequest:
		b = appendQoSRequest(b, &f.qos.changes[e.io])
	case evQoSTarget:
		b = appendQoSTarget(b, &f.qos.changes[e.io])
	case evIssue, evComplete:
		io := &f.tl.ios[e.io]
		if e.kind == evIssue {
			b = appendIssue(b, io)
		} else {
			b = appendComplete(b, io, int64(e.cpu) < int64(f.ncpus) && f.idle[e.cpu])
		}
	}
	f.line = b
	f.sum.Events++
	_, err := f.out.Write(b)
	return err
}

// writeHeader writes idlestat's header around the kernel's: see the top
// of this file.
func (f *ftracer) writeHeader(lines uint64) {
	w := f.out
	fmt.Fprintf(w, "idlestat version = %s\ncpus=%d\n", idlestatVersion, f.ncpus)
	fmt.Fprintf(w, `# tracer: nop
#
# entries-in-buffer/entries-written: %d/%d   #P:%d
%s#
#                                _-----=> irqs-off/BH-disabled
#                               / _----=> need-resched
#                              | / _---=> hardirq/softirq
#                              || / _--=> preempt-depth
#                              ||| / _-=> migrate-disable
#                              |||| /     delay
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
`, lines, lines, f.ncpus, f.eventsLine()+f.recordingLine()+f.statesLines()+f.driverLine()+f.governorLine()+f.haltPollLine()+f.qos.headerLine(f.ncpus))
	w.WriteString("clusterA:\n")
	for cpu := range f.ncpus {
		if f.listed[cpu] {
			fmt.Fprintf(w, "\tcore%d\n\t\tcpu%d\n", cpu, cpu)
		}
	}
	tables := map[int][]trace.StateInfo{}
	for _, cs := range f.meta.States {
		tables[cs.CPU] = cs.States
	}
	noDriver := f.meta.NoCPUIdleDriver()
	for cpu := range f.ncpus {
		if !f.listed[cpu] {
			continue
		}
		var names [idlestatStates]string
		var residencyUs [idlestatStates]uint64
		for _, si := range tables[cpu] {
			if si.Index >= 0 && si.Index < idlestatStates {
				names[si.Index] = idlestatName(si.Name)
				residencyUs[si.Index] = si.TargetResidencyNs / 1000
			}
		}
		if noDriver && len(tables[cpu]) == 0 {
			names[0], names[1] = analysis.NoDriverPOLL, analysis.NoDriverHLT
		}
		fmt.Fprintf(w, "cpuid %d:\n", cpu)
		for i := range idlestatStates {
			name := names[i]
			if name == "" {
				name = "(null)" // what idlestat writes for a state the CPU lacks
			}
			fmt.Fprintf(w, "\t%s\n\t%d\n", name, min(residencyUs[i], math.MaxInt32))
		}
	}
}

// eventsLine lists, as comments, the events the file may hold: its text
// shows only those that fired, and an importer must not take an event
// that never fired for one the trace lacks. The wake events are listed
// where the trace carries wake causes; every function-call IPI is written
// as call_function_single_entry, so call_function_entry is covered too.
func (f *ftracer) eventsLine() string {
	events := []string{"power:cpu_idle", "block:block_rq_issue", "block:block_rq_complete"}
	if f.wakeCauses {
		events = append(events, "irq:irq_handler_entry", "irq_vectors:local_timer_entry", "irq_vectors:reschedule_entry",
			"irq_vectors:call_function_entry", "irq_vectors:call_function_single_entry")
	}
	if f.meta.Inputs.PMQoSTrace {
		events = append(events, "power:pm_qos_add_request", "power:pm_qos_update_request", "power:pm_qos_remove_request",
			"power:pm_qos_update_target", "power:dev_pm_qos_add_request", "power:dev_pm_qos_update_request",
			"power:dev_pm_qos_remove_request")
	}
	return string(appendComment(nil, "# idletrace export: events", events))
}

// statesLines gives, as comments, each listed CPU's whole state table:
// idlestat's header below holds only names and target residencies, and an
// import back (pkg/importer) needs the exit latencies too, lest a what-if
// take them for zero. A CPU's states follow its prefix in index order, on
// more than one line where they do not fit one:
//
//	# idletrace states cpu0: POLL:0:0:polling C1:1000:1000 C6:170000:600000:disabled
//
// (name:exit latency ns:target residency ns, then the flags; a name's
// blanks, colons and percent signs %-escaped: trace.ExportStateName).
func (f *ftracer) statesLines() string {
	if f.meta.ExitLatenciesUnknown {
		return "" // an import's table: its zeros are not exit latencies
	}
	var b []byte
	for _, cs := range f.meta.States {
		if cs.CPU < 0 || cs.CPU >= len(f.listed) || !f.listed[cs.CPU] || len(cs.States) == 0 {
			continue
		}
		var items []string
		for _, si := range cs.States {
			item := fmt.Sprintf("%s:%d:%d", trace.ExportStateName(si.Name), si.ExitLatencyNs, si.TargetResidencyNs)
			if si.Polling {
				item += ":polling"
			}
			if si.Disabled {
				item += ":disabled"
			}
			items = append(items, item)
		}
		b = appendComment(b, fmt.Sprintf("%s cpu%d:", trace.ExportStatesHeader, cs.CPU), items)
	}
	return string(b)
}

// driverLine names the recording's cpuidle driver (trace.ExportDriverHeader);
// none for an import, which does not know it.
func (f *ftracer) driverLine() string {
	if f.meta.CPUIdleDriver == "" || !trace.ExportWord(f.meta.CPUIdleDriver) {
		return ""
	}
	return trace.ExportDriverHeader + " " + f.meta.CPUIdleDriver + "\n"
}

// recordingLine gives what the import cannot learn from the events
// (trace.ExportRecordingHeader): kernel, HZ, host, the CPUs listed and the
// block devices' names.
func (f *ftracer) recordingLine() string {
	var cpus []int
	for c, on := range f.listed {
		if on {
			cpus = append(cpus, c)
		}
	}
	if items := trace.ExportRecording(f.meta, cpus); len(items) > 0 {
		return string(appendComment(nil, trace.ExportRecordingHeader, items))
	}
	return ""
}

// governorLine names the recording's cpuidle governor
// (trace.ExportGovernorHeader); none for an import, which does not know it.
func (f *ftracer) governorLine() string {
	if f.meta.CPUIdleGovernor == "" || !trace.ExportWord(f.meta.CPUIdleGovernor) {
		return ""
	}
	return trace.ExportGovernorHeader + " " + f.meta.CPUIdleGovernor + "\n"
}

// haltPollLine gives the haltpoll module's parameters the recording read
// (trace.ExportHaltPollHeader).
func (f *ftracer) haltPollLine() string {
	if f.meta.HaltPoll == nil {
		return ""
	}
	return trace.ExportHaltPollHeader + " " + trace.FormatHaltPoll(f.meta.HaltPoll) + "\n"
}

// idlestatLineMax bounds the header's comment lines. idlestat 0.8 reads
// its file in pieces of 256 bytes (fgets), takes what follows the first
// piece of a longer line for an event, and crashes on it: a 255-character
// comment line did, one of 250 did not.
const idlestatLineMax = 200

// appendComment appends prefix and the items, separated by spaces, on as
// many lines as keep each within idlestatLineMax (an item longer than a
// line gets one of its own): readers take the lines of one prefix together.
func appendComment(b []byte, prefix string, items []string) []byte {
	b = append(b, prefix...)
	lineStart := len(b) - len(prefix)
	for i, item := range items {
		if i > 0 && len(b)-lineStart+1+len(item) > idlestatLineMax {
			b = append(b, '\n')
			lineStart = len(b)
			b = append(b, prefix...)
		}
		b = append(b, ' ')
		b = append(b, item...)
	}
	return append(b, '\n')
}

// idlestatName is a state's name as one word (idlestat reads it with %s,
// into 128 bytes: a kernel's names have at most 15).
func idlestatName(s string) string {
	b := []byte(s[:min(len(s), 100)])
	for i, c := range b {
		if c <= ' ' || c == 0x7f {
			b[i] = '_'
		}
	}
	return string(b)
}

// wakeEvent is the event behind a wake cause, as x86 kernels trace it:
// the device's irq_handler_entry, the local timer's interrupt (the timer
// and the tick alike: which hrtimer ran the trace does not keep), the
// reschedule IPI, and for a function-call IPI call_function_single_entry
// (the trace does not tell single from many; remote wake-ups queue their
// task with a single-CPU call). No event for a poll that timed out, a
// wake-up without an IPI (its sched_wake_idle_without_ipi is on the waking
// CPU, which the trace does not keep) or an unknown cause.
func wakeEvent(c trace.WakeCause, irq int32) (event string, vector int, ok bool) {
	switch c {
	case trace.WakeIRQ:
		return "irq_handler_entry", 0, irq >= 0
	case trace.WakeTimer, trace.WakeTick:
		return "local_timer_entry", localTimerVector, true
	case trace.WakeIPIResched:
		return "reschedule_entry", rescheduleVector, true
	case trace.WakeIPICall:
		return "call_function_single_entry", callFunctionSingleVector, true
	}
	return "", 0, false
}

// appendHead appends an event line's leading columns as the kernel's
// trace_print_context prints them (the task's name right-aligned in 16
// columns, its pid left-aligned in 7, the CPU in 3 digits, the flags),
// the timestamp in seconds with nanoseconds, and the event's name.
func appendHead(b []byte, comm string, pid, cpu uint32, flags string, ns uint64, event string) []byte {
	for i := len(comm); i < 16; i++ {
		b = append(b, ' ')
	}
	for i := 0; i < len(comm); i++ {
		c := comm[i]
		if c < ' ' || c == 0x7f { // a line break would end the line
			c = '?'
		}
		b = append(b, c)
	}
	b = append(b, '-')
	n := len(b)
	b = strconv.AppendUint(b, uint64(pid), 10)
	for len(b)-n < 7 {
		b = append(b, ' ')
	}
	b = append(b, " ["...)
	b = appendPadded(b, uint64(cpu), 3, '0')
	b = append(b, "] "...)
	b = append(b, flags...)
	b = append(b, ' ')
	b = appendPadded(b, ns/1e9, 5, ' ')
	b = append(b, '.')
	b = appendPadded(b, ns%1e9, 9, '0')
	b = append(b, ": "...)
	b = append(b, event...)
	return append(b, ": "...)
}

// appendPadded appends v right-aligned in width columns, padded with pad.
func appendPadded(b []byte, v uint64, width int, pad byte) []byte {
	var d [20]byte
	s := strconv.AppendUint(d[:0], v, 10)
	for i := len(s); i < width; i++ {
		b = append(b, pad)
	}
	return append(b, s...)
}

// appendCPUIdle appends a cpu_idle line (power.h: "state=%lu cpu_id=%lu").
func appendCPUIdle(b []byte, cpu uint32, ns uint64, state uint32) []byte {
	b = appendHead(b, "<idle>", 0, cpu, flagsIdle, ns, "cpu_idle")
	b = append(b, "state="...)
	b = strconv.AppendUint(b, uint64(state), 10)
	b = append(b, " cpu_id="...)
	b = strconv.AppendUint(b, uint64(cpu), 10)
	return append(b, '\n')
}

// appendWake appends the wake event's line (irq.h: "irq=%d name=%s";
// irq_vectors.h: "vector=%d"); ok is false for a cause without one. The
// trace keeps the device IRQ's number, not its name.
func appendWake(b []byte, cpu uint32, ns uint64, c trace.WakeCause, irq int32) ([]byte, bool) {
	event, vector, ok := wakeEvent(c, irq)
	if !ok {
		return b, false
	}
	b = appendHead(b, "<idle>", 0, cpu, flagsIRQ, ns, event)
	if c == trace.WakeIRQ {
		b = append(b, "irq="...)
		b = strconv.AppendInt(b, int64(irq), 10)
		b = append(b, " name=unknown\n"...)
		return b, true
	}
	b = append(b, "vector="...)
	b = strconv.AppendInt(b, int64(vector), 10)
	return append(b, '\n'), true
}

// qosEvents are the request events by action, global and per device.
var qosEvents = [2][3]string{
	{"pm_qos_add_request", "pm_qos_update_request", "pm_qos_remove_request"},
	{"dev_pm_qos_add_request", "dev_pm_qos_update_request", "dev_pm_qos_remove_request"},
}

// qosActionNames are pm_qos_update_target's actions (enum pm_qos_req_action).
var qosActionNames = [3]string{"ADD_REQ", "UPDATE_REQ", "REMOVE_REQ"}

// appendQoSRequest appends a PM QoS request's line (power.h: the global
// limit's "CPU_DMA_LATENCY value=%d", a device's "device=%s type=%s
// new_value=%d"). The trace keeps the constraint's value after the
// change, not the request's own: that is the value written, and -1
// (PM_QOS_DEFAULT_VALUE) for a removal, as the kernel prints it. The
// request's CPU is not recorded: 0.
func appendQoSRequest(b []byte, q *trace.PMQoSChange) []byte {
	dev := 0
	if q.CPU >= 0 {
		dev = 1
	}
	b = appendHead(b, "<...>", q.Tid, 0, flagsBlock, q.TimeNs, qosEvents[dev][min(q.Action, 2)])
	v := trace.PMQoSToKernel(q.CPU, q.LimitUs)
	if q.Action == trace.PMQoSRemove {
		v = -1
	}
	if dev == 0 {
		b = append(b, "CPU_DMA_LATENCY value="...)
	} else {
		b = append(b, "device=cpu"...)
		b = strconv.AppendInt(b, int64(q.CPU), 10)
		b = append(b, " type=DEV_PM_QOS_RESUME_LATENCY new_value="...)
	}
	b = strconv.AppendInt(b, v, 10)
	return append(b, '\n')
}

// appendQoSTarget appends the pm_qos_update_target line that follows a
// request ("action=%s prev_value=%d curr_value=%d").
func appendQoSTarget(b []byte, q *trace.PMQoSChange) []byte {
	b = appendHead(b, "<...>", q.Tid, 0, flagsBlock, q.TimeNs, "pm_qos_update_target")
	b = append(b, "action="...)
	b = append(b, qosActionNames[min(q.Action, 2)]...)
	b = append(b, " prev_value="...)
	b = strconv.AppendInt(b, trace.PMQoSToKernel(q.CPU, q.PrevUs), 10)
	b = append(b, " curr_value="...)
	b = strconv.AppendInt(b, trace.PMQoSToKernel(q.CPU, q.LimitUs), 10)
	return append(b, '\n')
}

// appendIssue appends a block_rq_issue line in the kernel's form before
// it added the I/O priority (block.h: "%d,%d %s %u (%s) %llu + %u [%s]":
// device, rwbs, bytes, the empty command, sector, sectors, task), from the
// issuing task's context.
func appendIssue(b []byte, io *trace.BlockIO) []byte {
	comm, pid := io.Comm, io.Tid
	if io.Tid == 0 {
		comm = "<...>" // ftrace's name for a task it does not know
	}
	b = appendHead(b, comm, pid, io.IssueCPU, flagsBlock, io.IssueNs, "block_rq_issue")
	b = appendDev(b, io)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(io.Bytes), 10)
	b = append(b, " () "...)
	b = appendSectors(b, io)
	b = append(b, " ["...)
	b = append(b, comm...)
	return append(b, "]\n"...)
}

// appendComplete appends a block_rq_complete line ("%d,%d %s (%s) %llu +
// %u [%d]": device, rwbs, the empty command, sector, sectors, errno), in
// the context of the idle task when the completing CPU was idle, else of
// a task the trace does not know.
func appendComplete(b []byte, io *trace.BlockIO, onIdle bool) []byte {
	comm := "<...>"
	if onIdle {
		comm = "<idle>"
	}
	b = appendHead(b, comm, 0, io.CompleteCPU, flagsBlock, io.CompleteNs, "block_rq_complete")
	b = appendDev(b, io)
	b = append(b, " () "...)
	b = appendSectors(b, io)
	b = append(b, " ["...)
	b = strconv.AppendInt(b, int64(blkErrno(io.Error)), 10)
	return append(b, "]\n"...)
}

// appendDev appends "MAJ,MIN RWBS".
func appendDev(b []byte, io *trace.BlockIO) []byte {
	b = strconv.AppendUint(b, uint64(io.DevMajor()), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(io.DevMinor()), 10)
	b = append(b, ' ')
	return appendRWBS(b, io.CmdFlags)
}

// appendSectors appends "SECTOR + NR_SECTORS" (a sector never set, -1,
// prints 0 as blk_rq_trace_sector has it).
func appendSectors(b []byte, io *trace.BlockIO) []byte {
	sector := io.Sector
	if sector == math.MaxUint64 {
		sector = 0
	}
	b = strconv.AppendUint(b, sector, 10)
	b = append(b, " + "...)
	return strconv.AppendUint(b, uint64(io.Bytes>>9), 10)
}

// appendRWBS appends the request's rwbs as the kernel's blk_fill_rwbs
// writes it: F for a preflush, the operation (R, W, D, DE, F; N for any
// other), then F for FUA, A read-ahead, S sync, M metadata.
func appendRWBS(b []byte, flags uint32) []byte {
	if flags&trace.ReqPreflush != 0 {
		b = append(b, 'F')
	}
	switch flags & trace.OpMask {
	case trace.OpWrite:
		b = append(b, 'W')
	case trace.OpDiscard:
		b = append(b, 'D')
	case trace.OpSecureErase:
		b = append(b, 'D', 'E')
	case trace.OpFlush:
		b = append(b, 'F')
	case trace.OpRead:
		b = append(b, 'R')
	default:
		b = append(b, 'N')
	}
	if flags&trace.ReqFUA != 0 {
		b = append(b, 'F')
	}
	if flags&trace.ReqRahead != 0 {
		b = append(b, 'A')
	}
	if flags&trace.ReqSync != 0 {
		b = append(b, 'S')
	}
	if flags&trace.ReqMeta != 0 {
		b = append(b, 'M')
	}
	return b
}

// blkErrno is the errno block_rq_complete prints for a completion's
// status (blk_status_to_errno). The trace holds the blk_status_t where
// the recorder read the request (tp_btf), a negative errno already where
// it read the classic tracepoint's record. Statuses above 13, whose
// numbers moved between releases, print as -EIO, the kernel's own
// fallback.
func blkErrno(status int32) int32 {
	if status <= 0 {
		return status
	}
	errnos := [...]int32{
		0,    // BLK_STS_OK
		-95,  // BLK_STS_NOTSUPP: -EOPNOTSUPP
		-110, // BLK_STS_TIMEOUT: -ETIMEDOUT
		-28,  // BLK_STS_NOSPC: -ENOSPC
		-67,  // BLK_STS_TRANSPORT: -ENOLINK
		-121, // BLK_STS_TARGET: -EREMOTEIO
		-52,  // BLK_STS_RESV_CONFLICT, formerly BLK_STS_NEXUS: -EBADE
		-61,  // BLK_STS_MEDIUM: -ENODATA
		-84,  // BLK_STS_PROTECTION: -EILSEQ
		-12,  // BLK_STS_RESOURCE: -ENOMEM
		-5,   // BLK_STS_IOERR: -EIO
		-5,   // 11: BLK_STS_DM_REQUEUE in older kernels (device-mapper's own)
		-11,  // BLK_STS_AGAIN: -EAGAIN
		-16,  // BLK_STS_DEV_RESOURCE: -EBUSY
	}
	if int(status) < len(errnos) {
		return errnos[status]
	}
	return -5
}
