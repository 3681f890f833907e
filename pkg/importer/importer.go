// Package importer turns another tracer's text capture of the kernel's
// idle and block events (perf script of a perf record capture, trace-cmd
// report, the tracefs trace file, idletrace's own ftrace export) into an
// idletrace trace file that stats and whatif read. Lines are read by the
// event's name and its fields, never by column position: the leading
// columns differ between tools, their versions and trace clocks.
//
// A capture holds only the events: no state table, no kernel counters, no
// tick state, no remote wake requests, no issuing task's wait. The trace's
// metadata says so (its Inputs are false, its Probes name each input as
// missing), so that stats and whatif report those figures as unknown,
// never as zero.
//
// Wake causes are imported where the capture was recorded with
// irq_handler_entry, local_timer_entry, reschedule_entry,
// call_function_entry and call_function_single_entry (a line of each, or
// perf script --header's or idletrace's export header listing it), by
// the recorder's BPF rule (wake.go): the first wake event while idle, the
// last in a polling state, else the next one within 50 µs of the exit;
// hrtimer_expire_entry of the tick's function with local_timer_exit tells
// the tick from other timers. A capture lacking any of the five keeps
// every cause unknown and its Probes entry names what it lacks.
package importer

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/idletrace/idletrace/pkg/trace"
)

// The formats Import reads.
const (
	Auto       = "auto"
	PerfScript = "perf-script"
	Ftrace     = "ftrace" // trace-cmd report, the tracefs trace file, idletrace export --format ftrace
)

// Formats lists the --format values.
var Formats = []string{Auto, PerfScript, Ftrace}

// cpuIdleExit is cpu_idle's state for an exit (PWR_EVENT_EXIT, -1 as u32).
const cpuIdleExit = math.MaxUint32

// maxLine is the longest line read (a block event's command may be long).
const maxLine = 1 << 20

// Options are what the capture does not say itself.
type Options struct {
	// Format is Auto, PerfScript or Ftrace. Auto takes perf script's
	// "comm PID [CPU]" form or ftrace's "comm-PID [CPU]" from the first
	// event line.
	Format string
	// States is the idle-state table to give every CPU (a profile's), nil
	// for none: the states are then named by index (state0, state1, ...),
	// unless the capture's header (idletrace's ftrace export) lists them.
	States []trace.StateInfo
	// Source names the capture in the trace's metadata (its file name).
	Source string
	// ToolVersion is the idletrace version writing the trace.
	ToolVersion string
	// Events are events the capture was recorded with besides those its
	// text shows ("irq:irq_handler_entry" or "irq_handler_entry"): a text
	// shows only the events that fired, so one that never did looks like
	// one not recorded, and trace-cmd report and tracefs text, unlike perf
	// script --header, list none. Each must be one the import reads.
	Events []string
}

// Summary is what an import read and wrote.
type Summary struct {
	Format      string
	Lines       uint64 // lines read
	Events      uint64 // event lines
	IdlePeriods uint64
	BlockIOs    uint64
	CPUs        int
	// Skipped counts the events of other kinds, by name.
	Skipped map[string]uint64
	// Unused counts events recognised but not turned into records (wake
	// and scheduler events: see the README), by name.
	Unused map[string]uint64
	// IdleUnpaired: a cpu_idle entry while a period was open on its CPU
	// (its exit is missing) or an exit with none open after the CPU's
	// first event (the first exit of each CPU closes a period that began
	// before the capture and is not counted).
	IdleUnpaired uint64
	OpenPeriods  uint64 // periods still open at the capture's end
	IOUnmatched  uint64 // completions without an issue in the capture
	IOUnissued   uint64 // of them, flush sequences' (preflush or FUA): not in flight at start
	IOOrphaned   uint64 // issues whose completion the capture lost (the same device and sector issued again)
	IOInFlight   uint64 // issues without a completion
	PMQoSChanges uint64 // changes of a CPU latency limit (pmqos.go)
	Lost         uint64 // events the tracer said it lost ("LOST N EVENTS")
	// IdleOtherCPU counts cpu_idle events whose cpu_id is not the CPU
	// that raised them (the line's [CPU]): the kernel raises the event on
	// the CPU it names, so these are damaged lines; imported by cpu_id.
	IdleOtherCPU uint64
	// CutLastLine is the capture's last line, left out as it lacks its
	// newline (the capture was cut short); "" when it ends whole.
	CutLastLine string
	// WakeCauses is the trace's "wake causes" probe: "imported: ..." or
	// "missing: the capture lacks ...".
	WakeCauses string
	FirstNs    uint64
	LastNs     uint64
}

// lineError is bad input: which line, and why.
type lineError struct {
	line uint64
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// LineOf is the line a parse error names, 0 for another error.
func LineOf(err error) uint64 {
	var le *lineError
	if errors.As(err, &le) {
		return le.line
	}
	return 0
}

// wakeEvents are the events behind wake causes and remote wake requests:
// recognised; counted as unused where they are not turned into the
// trace's wake causes (wake.go: a capture lacking part of the set) and
// for the remote wake requests, which are not imported.
var wakeEvents = map[string]bool{
	"irq_handler_entry": true, "local_timer_entry": true, "reschedule_entry": true,
	"call_function_entry": true, "call_function_single_entry": true,
	"local_timer_exit": true, "hrtimer_expire_entry": true,
	"sched_waking": true, "sched_switch": true, "sched_wakeup": true,
}

// declarable are the events Options.Events may name, with their
// subsystems: those whose presence decides what the import carries (the
// idle and IO events, the wake-cause set and the tick's, PM QoS's).
var declarable = map[string]string{
	"cpu_idle": "power", "block_rq_issue": "block", "block_rq_complete": "block",
	"irq_handler_entry": "irq", "local_timer_entry": "irq_vectors", "local_timer_exit": "irq_vectors",
	"reschedule_entry": "irq_vectors", "call_function_entry": "irq_vectors", "call_function_single_entry": "irq_vectors",
	"hrtimer_expire_entry": "timer",
	"pm_qos_add_request":   "power", "pm_qos_update_request": "power", "pm_qos_remove_request": "power", "pm_qos_update_target": "power",
	"dev_pm_qos_add_request": "power", "dev_pm_qos_update_request": "power", "dev_pm_qos_remove_request": "power",
}

// CheckEvents says whether every event of events is one Options.Events may
// name (an error naming the first that is not, and those it may).
func CheckEvents(events []string) error {
	for _, e := range events {
		if _, err := declaredEvent(e); err != nil {
			return err
		}
	}
	return nil
}

// declaredEvent is the bare name of an event Options.Events names, with or
// without its subsystem, or an error naming those it may.
func declaredEvent(e string) (string, error) {
	e = strings.TrimSpace(e)
	sub, name, ok := strings.Cut(e, ":")
	if !ok {
		sub, name = "", e
	}
	if want, known := declarable[name]; known && (sub == "" || sub == want) {
		return name, nil
	}
	var names []string
	for n, sub := range declarable {
		names = append(names, sub+":"+n)
	}
	slices.Sort(names)
	return "", fmt.Errorf("event %q: not one whose presence the import uses (%s)", e, strings.Join(names, ", "))
}

// Import reads a capture from in (read twice: a first pass finds the CPUs
// and the events present, for the metadata the trace file starts with)
// and writes the trace to out.
func Import(in io.ReadSeeker, o Options, out io.Writer) (Summary, error) {
	format := o.Format
	if format == "" {
		format = Auto
	}
	if !slices.Contains(Formats, format) {
		return Summary{}, fmt.Errorf("format %q: must be one of %s", format, strings.Join(Formats, ", "))
	}
	if err := notText(in); err != nil {
		return Summary{}, err
	}
	p := newPass(format, nil)
	p.given = o.States
	for _, e := range o.Events {
		name, err := declaredEvent(e)
		if err != nil {
			return Summary{}, err
		}
		p.listed[name] = true
	}
	if err := p.run(in); err != nil {
		return p.sum, err
	}
	cut := ""
	if p.sum.CutLastLine != "" {
		cut = fmt.Sprintf(" (the last line, left out as it lacks its newline, was %q)", p.sum.CutLastLine)
	}
	if p.sum.Events == 0 {
		return p.sum, errors.New("no event lines: not a perf script, trace-cmd report or ftrace text capture" + cut)
	}
	if p.seen["cpu_idle"] == 0 {
		return p.sum, errors.New("no power:cpu_idle events: record with -e power:cpu_idle" + cut)
	}
	meta := p.metadata(o)
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return p.sum, err
	}
	w, err := trace.NewWriter(out, meta)
	if err != nil {
		return p.sum, err
	}
	p2 := newPass(p.format, w)
	p2.ncpus = meta.NumCPUs
	p2.polling = pollingStates(meta)
	p2.decideWake(p)
	err = p2.run(in)
	if err == nil {
		err = p2.finish()
	}
	if cerr := w.Close(p2.end()); err == nil {
		err = cerr
	}
	p2.sum.CPUs = meta.NumCPUs
	p2.sum.WakeCauses = meta.Probes["wake causes"]
	return p2.sum, err
}

// binaryKinds are the binary files a capture is often confused with, by
// their magic, and what to do instead.
var binaryKinds = []struct{ magic, what string }{
	{trace.FileMagic, "an idletrace trace already: give it to stats, whatif or export as it is"},
	{"PERFILE2", "a perf.data file: import its text, perf script --header --ns -i FILE > FILE.txt"},
	{"\x17\x08\x44tracing", "a trace-cmd trace.dat file: import its text, trace-cmd report -i FILE > FILE.txt"},
}

// notText refuses, in one line, a file that is not text: import reads perf
// script, trace-cmd report and ftrace text. It leaves in at its start.
func notText(in io.ReadSeeker) error {
	head := make([]byte, 4096)
	n, err := io.ReadFull(in, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return err
	}
	head = head[:n]
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return err
	}
	for _, k := range binaryKinds {
		if bytes.HasPrefix(head, []byte(k.magic)) {
			return fmt.Errorf("this is %s (import reads perf script, trace-cmd report and ftrace text)", k.what)
		}
	}
	// A control byte (NUL, or another but tab and CR) in the first line
	// with text: a binary file (one further on is a damaged capture, which
	// the line it is on names).
	lead := len(head) - len(bytes.TrimLeft(head, "\r\n")) // a protobuf (Perfetto) opens with 0x0a
	first, _, _ := bytes.Cut(head[lead:], []byte{'\n'})
	if k := bytes.IndexFunc(first, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\r' || r == 0x7f }); k >= 0 {
		return fmt.Errorf("not text (byte 0x%02x at offset %d): import reads perf script, trace-cmd report and ftrace text", first[k], lead+k)
	}
	return nil
}

// pass is one read of the capture: the first only looks, the second
// (w set) writes.
type pass struct {
	format string
	w      *trace.Writer
	sum    Summary
	seen   map[string]uint64

	// The header's facts, where it has them.
	headerCPUs int
	driver     string                    // the recording's cpuidle driver, from idletrace's export (trace.ExportDriverHeader)
	recording  trace.ExportedRecording   // kernel, HZ, host, listed CPUs and devices, from idletrace's export (trace.ExportRecordingHeader)
	governor   string                    // and its governor (trace.ExportGovernorHeader)
	haltPoll   *trace.HaltPollParams     // and haltpoll's parameters (trace.ExportHaltPollHeader)
	perfHost   perfHeaderHost            // perf script --header's host, kernel and CPU
	states     map[int][]trace.StateInfo // idletrace's ftrace export's header (idlestat's part: no exit latencies)
	// fullStates: the whole tables idletrace's export lists in comments
	// (trace.ExportStatesHeader), which take precedence.
	fullStates map[int][]trace.StateInfo
	// given is the table Options.States gives (nil: none): a cpu_idle
	// state beyond it is an error, and so is a header's table unlike it.
	given []trace.StateInfo
	// statesLineCPU is the CPU of the last fullStates line read (-1:
	// none), statesLineBad whether a line of its run did not read.
	statesLineCPU int
	statesLineBad bool
	inHeader      bool // within the idlestat header's state table
	curCPU        int
	curState      []trace.StateInfo
	pendName      string

	maxCPU int
	ncpus  int // second pass: the metadata's CPU count

	open    []openPeriod // per CPU
	started []bool       // per CPU: an idle event was seen
	loss    []trace.Loss
	ios     map[ioKey][]trace.BlockIO

	// Wake causes (wake.go).
	listed      map[string]bool // events a header lists as recorded
	tickSymbols bool            // hrtimer_expire_entry names its functions
	wakeOn      bool            // second pass: wake causes are imported
	tickOn      bool            // second pass: the tick is told from other timers
	polling     map[int][]int   // per CPU, the polling states; nil: state 0
	wake        []wakeState     // per CPU

	// PM QoS requests waiting for their pm_qos_update_target, by task,
	// and the limits where the capture begins, where its header says
	// (pmqos.go).
	qosPending     map[int64]qosRequest
	qosStartGlobal *int64
	qosStartCPUs   map[int]int64
}

type openPeriod struct {
	entryNs uint64
	state   uint32
	open    bool
}

type ioKey struct {
	dev    uint32
	sector uint64
}

func newPass(format string, w *trace.Writer) *pass {
	return &pass{format: format, w: w, seen: map[string]uint64{}, maxCPU: -1,
		states: map[int][]trace.StateInfo{}, fullStates: map[int][]trace.StateInfo{}, statesLineCPU: -1, ios: map[ioKey][]trace.BlockIO{}, curCPU: -1, listed: map[string]bool{},
		sum: Summary{Format: format, Skipped: map[string]uint64{}, Unused: map[string]uint64{}}}
}

func (p *pass) run(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	// A last line without its newline is what a capture cut short (a full
	// disk, an interrupted perf script) ends with: left out, with a
	// warning, rather than the whole capture refused for it or a field it
	// cut (cpu_id=1 of cpu_id=12) read as whole.
	unterminated := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		if atEOF && tok != nil && bytes.IndexByte(data[:adv], '\n') < 0 {
			unterminated = true
		}
		return adv, tok, err
	})
	for sc.Scan() {
		if unterminated {
			if strings.TrimSpace(sc.Text()) != "" {
				p.sum.CutLastLine = clip(sc.Text())
			}
			break
		}
		p.sum.Lines++
		if err := p.line(sc.Text()); err != nil {
			if he := (*headerError)(nil); errors.As(err, &he) {
				return err // of the header, not of the line it ended at
			}
			return &lineError{p.sum.Lines, err.Error()}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &lineError{p.sum.Lines + 1, fmt.Sprintf("longer than %d bytes", maxLine)}
		}
		return err
	}
	p.endHeaderState()
	return nil
}

func (p *pass) line(s string) error {
	t := strings.TrimSpace(s)
	if t == "" || t[0] == '#' {
		if p.sum.Events == 0 {
			p.headerEvents(t)
			p.headerStates(t)
			p.headerQoS(t)
			if d, ok := strings.CutPrefix(t, trace.ExportDriverHeader); ok && strings.TrimSpace(d) != "" {
				p.driver = strings.TrimSpace(d)
			}
			if g, ok := strings.CutPrefix(t, trace.ExportGovernorHeader); ok && strings.TrimSpace(g) != "" {
				p.governor = strings.TrimSpace(g)
			}
			if r, ok := strings.CutPrefix(t, trace.ExportRecordingHeader); ok {
				p.recording.Add(r)
			}
			p.perfHost.add(t)
			if h, ok := strings.CutPrefix(t, trace.ExportHaltPollHeader); ok {
				if hp, err := trace.ParseHaltPoll(h); err == nil {
					p.haltPoll = hp
				} // else unknown, as in any other capture
			}
		}
		// tracefs' header gives the CPU count: "... #P:N".
		if k := strings.Index(t, "#P:"); k >= 0 && p.sum.Events == 0 {
			if n, err := strconv.Atoi(strings.TrimSpace(t[k+3:])); err == nil && n > 0 && n <= trace.MaxCPUs {
				p.headerCPUs = n
			}
		}
		return nil
	}
	ev, err := parseLine(s)
	if err != nil {
		if p.sum.Events == 0 && p.header(s, t) {
			return nil
		}
		if strings.Contains(t, "LOST") && strings.Contains(t, "EVENTS") {
			p.lost(t)
			return nil
		}
		return fmt.Errorf("%v: %q", err, clip(s))
	}
	if p.sum.Events == 0 {
		p.endHeaderState()
		if err := p.statesAgree(); err != nil {
			return err
		}
		if p.format == Auto {
			p.format = detect(s)
			p.sum.Format = p.format
		}
	}
	p.sum.Events++
	if p.sum.FirstNs == 0 || ev.ns < p.sum.FirstNs {
		p.sum.FirstNs = ev.ns
	}
	p.sum.LastNs = max(p.sum.LastNs, ev.ns)
	p.seen[ev.name]++
	if int(ev.cpu) >= trace.MaxCPUs {
		return fmt.Errorf("CPU %d is beyond %d", ev.cpu, trace.MaxCPUs)
	}
	p.maxCPU = max(p.maxCPU, int(ev.cpu))
	switch ev.name {
	case "cpu_idle":
		state, cpu, err := cpuIdle(ev.fields)
		if err != nil {
			return fmt.Errorf("cpu_idle: %v: %q", err, clip(s))
		}
		if cpu >= trace.MaxCPUs {
			return fmt.Errorf("cpu_idle: cpu_id=%d is beyond %d", cpu, trace.MaxCPUs)
		}
		if state != cpuIdleExit && state >= 1<<16 {
			return fmt.Errorf("cpu_idle: state=%d is no idle state", state)
		}
		// The table given (--profile) names every state the capture may
		// enter: stats would skip a period beyond it as impossible while
		// whatif replayed it.
		if n := len(p.given); n > 0 && state != cpuIdleExit && state >= uint64(n) {
			return fmt.Errorf("cpu_idle: state=%d is beyond the profile's %d states (0-%d): %q", state, n, n-1, clip(s))
		}
		if uint32(cpu) != ev.cpu {
			p.sum.IdleOtherCPU++
		}
		p.maxCPU = max(p.maxCPU, int(cpu))
		return p.cpuIdle(uint32(cpu), state, ev.ns)
	case "block_rq_issue", "block_rq_complete":
		issue := ev.name == "block_rq_issue"
		b, err := parseBlockRq(ev.fields, issue)
		if err != nil {
			return fmt.Errorf("%s: %v: %q", ev.name, err, clip(s))
		}
		return p.block(&ev, &b, issue)
	case "block_rq_requeue":
		// Back to the queue, to be issued again: no longer waiting for a
		// completion (the recorder drops its pending issue too), lest the
		// next issue take it for one whose completion was lost.
		b, err := parseBlockRq(ev.fields, false)
		if err != nil {
			return fmt.Errorf("%s: %v: %q", ev.name, err, clip(s))
		}
		p.dequeue(ioKey{b.dev, b.sector})
		return nil
	case qosTargetEvent:
		if err := p.qosUpdateTarget(&ev); err != nil {
			return fmt.Errorf("%s: %v: %q", ev.name, err, clip(s))
		}
		return nil
	}
	if action, ok := qosRequestEvents[ev.name]; ok {
		if err := p.qosRequestEvent(&ev, action); err != nil {
			return fmt.Errorf("%s: %v: %q", ev.name, err, clip(s))
		}
		return nil
	}
	if cause, ok := wakeCauseEvents[ev.name]; ok {
		if p.wakeOn {
			return p.wakeEvent(&ev, cause)
		}
		p.sum.Unused[ev.name]++
		return nil
	}
	switch ev.name {
	case "local_timer_exit":
		if p.wakeOn {
			return p.localTimerExit(&ev)
		}
	case "hrtimer_expire_entry":
		p.hrtimerExpire(&ev)
		if p.tickOn {
			return nil
		}
	}
	if wakeEvents[ev.name] {
		p.sum.Unused[ev.name]++
	} else {
		p.sum.Skipped[ev.name]++
	}
	return nil
}

// detect tells perf script's "comm PID [CPU]" from ftrace's "comm-PID [CPU]".
func detect(line string) string {
	k := strings.IndexByte(line, '[')
	if k > 0 {
		before := strings.TrimRight(line[:k], " \t")
		if j := strings.LastIndexAny(before, " \t"); j >= 0 {
			if _, err := strconv.ParseUint(before[j+1:], 10, 64); err == nil {
				return PerfScript
			}
		}
	}
	return Ftrace
}

// perfHeaderHost is what perf script --header says of the machine perf
// recorded on ("# hostname : db-17", "# os release : 6.12.57", "# cpudesc :
// ..."): the host that keys fleet rows, and the kernel whose governors a
// what-if replays.
type perfHeaderHost struct {
	hostname, osRelease, cpuDesc string
}

func (h *perfHeaderHost) add(t string) {
	k, v, ok := strings.Cut(strings.TrimPrefix(t, "#"), " : ")
	if !ok {
		return
	}
	v = strings.TrimSpace(v)
	switch strings.TrimSpace(k) {
	case "hostname":
		h.hostname = v
	case "os release":
		h.osRelease = v
	case "cpudesc":
		h.cpuDesc = v
	}
}

// header reads the lines before the first event: trace-cmd report's
// "version = N", "cpus=N" and "CPU N is empty", and the header
// idletrace's ftrace export writes for idlestat ("idlestat version",
// "cpus=N", a topology, and per CPU "cpuid N:" with a name and a target
// residency in µs per state). It says whether the line was one.
func (p *pass) header(s, t string) bool {
	switch {
	case strings.HasPrefix(t, "idlestat version"), strings.HasPrefix(t, "version ="), strings.HasPrefix(t, "version:"):
		return true
	case strings.HasPrefix(t, "cpus="):
		n, err := strconv.Atoi(strings.TrimPrefix(t, "cpus="))
		if err == nil && n > 0 && n <= trace.MaxCPUs {
			p.headerCPUs = n
			return true
		}
		return false
	case strings.HasPrefix(t, "CPU ") && strings.HasSuffix(t, " is empty"):
		return true
	case strings.HasPrefix(t, "cluster") && strings.HasSuffix(t, ":"),
		strings.HasPrefix(t, "core") && !strings.ContainsAny(t, " :"),
		strings.HasPrefix(t, "cpu") && !strings.ContainsAny(t, " :") && !p.inHeader:
		return true
	case strings.HasPrefix(t, "cpuid ") && strings.HasSuffix(t, ":"):
		p.endHeaderState()
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(t, "cpuid "), ":"))
		if err != nil || n < 0 || n >= trace.MaxCPUs {
			return false
		}
		p.inHeader, p.curCPU, p.curState, p.pendName = true, n, nil, ""
		return true
	case p.inHeader && strings.HasPrefix(s, "\t"):
		if p.pendName == "" {
			p.pendName = t
			return true
		}
		us, err := strconv.ParseUint(t, 10, 32)
		if err != nil {
			return false
		}
		if p.pendName != "(null)" {
			p.curState = append(p.curState, trace.StateInfo{Index: len(p.curState), Name: p.pendName, TargetResidencyNs: us * 1000})
		} else {
			p.curState = append(p.curState, trace.StateInfo{Index: -1})
		}
		p.pendName = ""
		return true
	}
	return false
}

// headerStates reads a CPU's whole table from idletrace's export
// ("# idletrace states cpu0: POLL:0:0:polling C1:1000:1000 ..."), whose
// states may go on over more lines of the same prefix; should a line not
// read whole, the CPU's lines are ignored and the idlestat table stands.
func (p *pass) headerStates(t string) {
	rest, ok := strings.CutPrefix(t, trace.ExportStatesHeader+" cpu")
	if !ok {
		return
	}
	cpuStr, list, ok := strings.Cut(rest, ":")
	cpu, err := strconv.Atoi(cpuStr)
	if !ok || err != nil || cpu < 0 || cpu >= trace.MaxCPUs {
		return
	}
	if cpu != p.statesLineCPU { // a CPU's lines follow each other: a later run is a new table
		delete(p.fullStates, cpu)
		p.statesLineCPU, p.statesLineBad = cpu, false
	}
	if p.statesLineBad {
		return
	}
	sts := p.fullStates[cpu]
	bad := func() {
		delete(p.fullStates, cpu)
		p.statesLineBad = true
	}
	for _, f := range strings.Fields(list) {
		i := len(sts)
		parts := strings.Split(f, ":")
		if len(parts) < 3 || i >= maxHeaderStates {
			bad()
			return
		}
		exit, err1 := strconv.ParseUint(parts[1], 10, 64)
		res, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			bad()
			return
		}
		si := trace.StateInfo{Index: i, Name: trace.ParseExportStateName(parts[0]), ExitLatencyNs: exit, TargetResidencyNs: res}
		for _, flag := range parts[3:] {
			switch flag {
			case "polling":
				si.Polling = true
			case "disabled":
				si.Disabled = true
			default:
				bad()
				return
			}
		}
		sts = append(sts, si)
	}
	if len(sts) > 0 {
		p.fullStates[cpu] = sts
	}
}

// headerError is an error of the capture's header as a whole, found at
// its end (the first event), which names no line.
type headerError struct{ msg string }

func (e *headerError) Error() string { return e.msg }

// statesAgree refuses a table given (a profile's) whose states are not
// named as those of the capture's own tables (idletrace's export lists the
// recording's), or, where only idlestat's part of the header is there
// (names it may have cut), not as many: the capture's state numbers then
// mean other states, and stats would judge a haltpoll guest's periods by a
// server's table. It runs at the first event, when the header is read.
func (p *pass) statesAgree() error {
	given := p.given
	if len(given) == 0 {
		return nil
	}
	names := func(sts []trace.StateInfo) string {
		var n []string
		for _, s := range sts {
			n = append(n, s.Name)
		}
		return strings.Join(n, ", ")
	}
	for _, cpu := range slices.Sorted(maps.Keys(p.fullStates)) {
		own := p.fullStates[cpu]
		if names(own) != names(given) {
			return &headerError{fmt.Sprintf("the capture's header gives CPU %d the states %s, the profile %s: import without a profile to keep the recording's table (whatif --profile replays it on another)",
				cpu, names(own), names(given))}
		}
	}
	if p.driver == trace.CPUIdleDriverNone {
		return nil // idlestat's table then names the POLL and HLT the export assumed
	}
	for _, cpu := range slices.Sorted(maps.Keys(p.states)) {
		if _, full := p.fullStates[cpu]; !full && len(p.states[cpu]) != len(given) {
			return &headerError{fmt.Sprintf("the capture's header gives CPU %d %d states (%s), the profile %d (%s): import without a profile, or with one of the recording's machine",
				cpu, len(p.states[cpu]), names(p.states[cpu]), len(given), names(given))}
		}
	}
	return nil
}

// maxHeaderStates bounds a table read from a header (the kernel allows 10
// states; idlestat's format has room for 16).
const maxHeaderStates = 16

// endHeaderState keeps the CPU's table the header has just listed.
func (p *pass) endHeaderState() {
	if p.inHeader && p.curCPU >= 0 {
		var sts []trace.StateInfo
		for _, si := range p.curState {
			if si.Index >= 0 {
				sts = append(sts, si)
			}
		}
		if len(sts) > 0 {
			p.states[p.curCPU] = sts
		}
	}
	p.inHeader, p.curCPU, p.curState, p.pendName = false, -1, nil, ""
}

// lost reads perf's and trace-cmd's "LOST N EVENTS" lines.
func (p *pass) lost(t string) {
	f := strings.Fields(t)
	for i, w := range f {
		if strings.Contains(w, "LOST") && i+1 < len(f) {
			if n, err := strconv.ParseUint(f[i+1], 10, 64); err == nil {
				p.sum.Lost += n
				return
			}
		}
	}
	p.sum.Lost++
}

// grow makes the per-CPU state hold cpu.
func (p *pass) grow(cpu uint32) {
	for int(cpu) >= len(p.open) {
		p.open = append(p.open, openPeriod{})
		p.started = append(p.started, false)
		p.loss = append(p.loss, trace.Loss{CPU: uint32(len(p.loss))})
		p.wake = append(p.wake, wakeState{irq: -1})
	}
}

func (p *pass) cpuIdle(cpu uint32, state uint64, ns uint64) error {
	p.grow(cpu)
	o := &p.open[cpu]
	first := !p.started[cpu]
	p.started[cpu] = true
	if state == cpuIdleExit {
		if !o.open {
			if !first {
				p.sum.IdleUnpaired++
				p.loss[cpu].IdleUnpaired++
			}
			return nil
		}
		o.open = false
		if ns < o.entryNs {
			return fmt.Errorf("cpu_idle exit on CPU %d at %d ns is before its entry at %d ns (lines out of time order)", cpu, ns, o.entryNs)
		}
		p.sum.IdlePeriods++
		if p.w == nil {
			return nil
		}
		rec := trace.IdlePeriod{EntryNs: o.entryNs, ExitNs: ns, CPU: cpu, State: o.state, WakeIRQ: -1, NrIOWait: -1, AbortsBefore: -1}
		return p.wakeExit(&rec)
	}
	if p.w != nil && p.wakeOn {
		if err := p.wakeEntry(cpu); err != nil {
			return err
		}
	}
	if o.open {
		p.sum.IdleUnpaired++
		p.loss[cpu].IdleUnpaired++
	}
	*o = openPeriod{entryNs: ns, state: uint32(state), open: true}
	return nil
}

func (p *pass) block(ev *event, b *blockRq, issue bool) error {
	p.grow(ev.cpu)
	k := ioKey{b.dev, b.sector}
	if issue {
		r := trace.BlockIO{Dev: b.dev, Sector: b.sector, Bytes: b.bytes, Op: uint8(b.cmdFlags & 0xff), CmdFlags: b.cmdFlags,
			IssueNs: ev.ns, IssueCPU: ev.cpu, Comm: b.last}
		if ev.pid > 0 && ev.pid <= math.MaxUint32 {
			r.Tid = uint32(ev.pid)
		}
		// The same device and sector issued again while an issue waits:
		// the capture lost that one's completion (perf drops events
		// without a LOST line). The recorder's rule: it is counted as not
		// delivered, not paired with a later request's completion, which
		// would give every request after it a neighbour's latency.
		for _, lost := range p.ios[k] {
			p.grow(lost.IssueCPU)
			p.sum.IOOrphaned++
			p.loss[lost.IssueCPU].IOOrphaned++
		}
		p.ios[k] = append(p.ios[k][:0], r)
		return nil
	}
	p.loss[ev.cpu].IOCompletions++
	q := p.ios[k]
	if len(q) == 0 {
		p.sum.IOUnmatched++
		p.loss[ev.cpu].IOUnmatched++
		if b.cmdFlags&(trace.ReqPreflush|trace.ReqFUA) != 0 {
			// The original request of a flush sequence: the block layer
			// completes it without issuing it (its flush_rq is issued in
			// its place), as the recorder counts it; not one in flight
			// at the capture's start.
			p.sum.IOUnissued++
			p.loss[ev.cpu].IOUnissued++
		}
		return nil
	}
	r := q[0]
	if b.sectors > 0 && r.Bytes>>9 > b.sectors {
		// A partial completion (blk_update_request): the rest of the
		// request stays in flight from the next sector.
		p.loss[ev.cpu].IOCompletions--
		rest := r
		rest.Sector += uint64(b.sectors)
		p.dequeue(k)
		nk := ioKey{b.dev, rest.Sector}
		p.ios[nk] = append(p.ios[nk], rest)
		return nil
	}
	p.dequeue(k)
	r.CompleteNs, r.CompleteCPU = ev.ns, ev.cpu
	e, _ := strconv.ParseInt(b.last, 10, 32)
	r.Error = int32(e) // a negative errno, as the classic tracepoint's record holds it
	p.sum.BlockIOs++
	if p.w == nil {
		return nil
	}
	if r.CompleteNs < r.IssueNs {
		return fmt.Errorf("block_rq_complete at %d ns is before its issue at %d ns (lines out of time order)", r.CompleteNs, r.IssueNs)
	}
	return p.w.AddBlockIO(&r)
}

func (p *pass) dequeue(k ioKey) {
	q := p.ios[k]
	if len(q) <= 1 {
		delete(p.ios, k)
		return
	}
	p.ios[k] = q[1:]
}

// finish counts what the capture left open and gives the writer the loss counters.
func (p *pass) finish() error {
	if err := p.flushWake(); err != nil {
		return err
	}
	for _, o := range p.open {
		if o.open {
			p.sum.OpenPeriods++
		}
	}
	for _, q := range p.ios {
		p.sum.IOInFlight += uint64(len(q))
	}
	for _, l := range p.loss {
		if err := p.w.AddLoss(l); err != nil {
			return err
		}
	}
	return nil
}

func (p *pass) end() *trace.End {
	e := &trace.End{StopReason: "imported", OpenPeriods: p.sum.OpenPeriods, IOInFlight: p.sum.IOInFlight}
	if p.sum.IOOrphaned > 0 && !p.recorded("block_rq_requeue") {
		// A busy virtio queue requeues requests: without the event, each
		// reads as an issue whose completion was lost.
		e.UndeliveredReason = requeueLacking
	}
	return e
}

// requeueLacking is the loss account's reason where a capture without
// block_rq_requeue shows issues whose completion seems lost.
const requeueLacking = "the capture lacks block:block_rq_requeue, so a request the driver requeued and issued again counts here as well as a lost completion (record -e block:block_rq_requeue)"

// metadata is what the first pass learnt, with every input the capture
// does not carry marked as missing.
func (p *pass) metadata(o Options) *trace.Metadata {
	n := max(p.headerCPUs, p.maxCPU+1, 1)
	n = min(n, trace.MaxCPUs)
	tool := map[string]string{PerfScript: "perf script", Ftrace: "ftrace text"}[p.format]
	if tool == "" {
		tool = "text capture"
	}
	if o.Source != "" {
		tool += " (" + o.Source + ")"
	}
	m := &trace.Metadata{
		ToolVersion: o.ToolVersion,
		NumCPUs:     n,
		// The capture does not say (idletrace's own export does): "" where
		// the field has no unknown.
		CPUIdleDriver:   p.driver,
		CPUIdleGovernor: p.governor,
		HaltPoll:        p.haltPoll,
		PMQoS:           trace.PMQoS{CPUDMALatencyUs: -1},
		Clock:           trace.ImportedClockPrefix + tool + ": the capture's trace clock",
		Command:         nil,
		Probes:          map[string]string{},
	}
	for c := range n {
		m.RecordedCPUs = append(m.RecordedCPUs, c)
	}
	// idletrace's export says what it knew: an export limited by --cpus
	// lists only those, the others' idle periods are not in it (not busy).
	if r := p.recording; len(r.CPUs) > 0 && slices.Max(r.CPUs) < n {
		m.RecordedCPUs = slices.Sorted(slices.Values(r.CPUs))
	}
	m.KernelRelease, m.HZ, m.Hostname = p.recording.KernelRelease, p.recording.HZ, p.recording.Hostname
	m.BlockDevices = slices.Clone(p.recording.BlockDevices)
	m.KernelRelease = cmp.Or(m.KernelRelease, p.perfHost.osRelease)
	m.Hostname = cmp.Or(m.Hostname, p.perfHost.hostname)
	m.CPUModel = cmp.Or(m.CPUModel, p.perfHost.cpuDesc)
	table := func(c int) []trace.StateInfo {
		if o.States != nil {
			return o.States
		}
		if sts, ok := p.fullStates[c]; ok {
			return sts
		}
		if p.driver == trace.CPUIdleDriverNone {
			return nil // idlestat's table names the POLL and HLT the export assumed: the machine had none
		}
		if len(p.states[c]) > 0 {
			m.ExitLatenciesUnknown = true // idlestat's table: residencies only
		}
		return p.states[c]
	}
	for c := range n {
		if sts := table(c); len(sts) > 0 {
			m.States = append(m.States, trace.CPUStates{CPU: c, States: slices.Clone(sts)})
		}
	}
	m.Probes["power:cpu_idle"] = "imported: " + tool
	// Both block events fired, or the header lists both (a capture
	// without IO in its window): recorded, if none happened.
	if p.seen["block_rq_issue"] > 0 || p.seen["block_rq_complete"] > 0 || p.recorded("block_rq_issue") && p.recorded("block_rq_complete") {
		m.Inputs.BlockIO = true
		m.Probes["block:block_rq_issue"] = "imported: " + tool
		m.Probes["block:block_rq_complete"] = "imported: " + tool
	} else {
		m.Probes["block:block_rq_issue"] = "missing: not in the capture"
		m.Probes["block:block_rq_complete"] = "missing: not in the capture"
	}
	missing := "missing: not imported (a capture's events do not carry it)"
	for _, k := range []string{"wake requests", "tick state", "next timer", "poll time limit", "task io", "kernel counters", "haltpoll"} {
		m.Probes[k] = missing
	}
	p.wakeMetadata(m, tool)
	p.pmQoSMetadata(m, tool)
	for _, name := range slices.Sorted(maps.Keys(p.seen)) {
		used := m.Inputs.WakeCauses && (wakeCauseEvents[name] != 0 || name == "local_timer_exit") ||
			m.Inputs.TickWakeups && name == "hrtimer_expire_entry"
		if wakeEvents[name] && !used {
			m.Probes["event "+name] = "in the capture, not imported"
		}
	}
	return m
}

// pollingStates are, per CPU with a state table, its polling states (a
// profile's Polling flag, or the name POLL that idletrace's export header
// and the kernel give poll_idle); nil without any table, where state 0
// counts as polling as the recorder counts it without a cpuidle driver
// (cpu_idle_poll, and the POLL state of x86's drivers).
func pollingStates(m *trace.Metadata) map[int][]int {
	if len(m.States) == 0 {
		return nil
	}
	out := map[int][]int{}
	for _, cs := range m.States {
		out[cs.CPU] = []int{}
		for _, s := range cs.States {
			if s.Polling || s.Name == "POLL" {
				out[cs.CPU] = append(out[cs.CPU], s.Index)
			}
		}
	}
	return out
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}
