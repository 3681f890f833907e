// Package export turns a trace into tables for the tools engineers already
// query with: one row per idle period (idle_periods) and one per block IO
// request (io_requests), as CSV or Parquet. Each row carries what stats
// makes of its record (pkg/analysis's Rules: state names, the snapshot
// window, the kernel's residency, above/below; pkg/iowake's rule for an IO
// completion that woke an idle CPU), so that the tables add up to stats'
// figures. One streaming pass over the trace, in bounded memory: rows are
// written as they are made, Parquet in row groups of RowGroupRows.
package export

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Table names, which are also the files' base names.
const (
	IdlePeriods  = "idle_periods"
	IORequests   = "io_requests"
	PMQoSChanges = "pm_qos_changes"
)

// Tables are the table names in the order an export writes them.
var Tables = []string{IdlePeriods, IORequests, PMQoSChanges}

// Options select the rows. The zero value selects every record.
type Options struct {
	// CPUs keeps the idle periods of these CPUs and the IO requests
	// issued or completed on one of them; nil keeps every CPU.
	CPUs []int
	// From and To bound the time, since the trace's start (TraceStart):
	// an idle period is kept when its exit falls in (From, To], an IO
	// request when its completion does, as stats assigns records to its
	// window. Unset sides are open.
	From, To       time.Duration
	HasFrom, HasTo bool
	// IOFilter keeps only the IO requests it selects (stats' --io).
	IOFilter trace.IOFilter
	// StatsWindow keeps only the records stats counts: idle periods
	// whose exit falls in their CPU's window between the start and end
	// snapshots, IO requests completed between them (in_stats_window).
	StatsWindow bool
}

// Sink takes the rows. A nil func skips that table: its records are still
// read where the other table needs them (the IO-wake rule reads the idle
// periods). A row is valid only during the call.
type Sink struct {
	IdlePeriod  func(*IdlePeriodRow) error
	IORequest   func(*IORequestRow) error
	PMQoSChange func(*PMQoSChangeRow) error
}

// Summary is what an export wrote.
type Summary struct {
	IdlePeriods, IORequests uint64
	// PMQoSRows counts the pm_qos_changes rows: the limits in force where
	// the window opens, then the changes in it.
	PMQoSRows uint64
	// TraceStartNs is the instant From and To count from.
	TraceStartNs uint64
	// Invalid counts idle periods with an impossible CPU or state number,
	// skipped as stats skips them (in the ftrace text and the Perfetto
	// trace also those on a CPU beyond the trace's CPU count or one it
	// does not record, or exiting before their entry; in the Perfetto
	// trace IO requests completing before their issue too).
	Invalid uint64
	// Uncertain counts IO completions whose woke_idle the bounded memory
	// of the IO-wake matcher may have got wrong (stats warns of the same).
	Uncertain uint64
	// Events counts the ftrace text's event lines (WriteFtrace), the
	// Perfetto trace's cpu_idle events and TrackEvents (WritePerfetto).
	Events uint64
	// Flows counts the Perfetto trace's flows from a wake request to the
	// idle exit it caused (WritePerfetto only; each IO request has one
	// more, from its issue to its completion).
	Flows uint64
}

// TraceStart is the instant the trace starts: its start snapshot, else
// the earliest time its idle and IO chunks' headers name (an entry, an
// IO request's issue), else 0.
func TraceStart(r *trace.Reader) uint64 {
	if r.Meta != nil && r.Meta.Start != nil && r.Meta.Start.MonotonicNs != 0 {
		return r.Meta.Start.MonotonicNs
	}
	var first uint64
	for _, c := range r.Chunks() {
		if (c.Type == trace.ChunkIdle || c.Type == trace.ChunkBlockIO) && c.Records > 0 && (first == 0 || c.FirstNs < first) {
			first = c.FirstNs
		}
	}
	return first
}

// exporter makes the rows of one trace.
type exporter struct {
	meta  *trace.Metadata
	rules *analysis.Rules
	sink  Sink
	err   error // the first error from the sink: stops the scan

	sel        selection
	recorded   trace.CPUSet // CPUs whose idle periods the trace kept
	devNames   map[uint32]string
	matcher    iowake.Matcher[struct{}, trace.BlockIO]
	sum        Summary
	idle       IdlePeriodRow
	idleVals   idleValues
	io         IORequestRow
	ioVals     ioValues
	qos        PMQoSChangeRow
	qosVals    qosValues
	wakeCauses bool
}

// idleValues and ioValues hold what a row's pointer fields point at, so
// that making a row allocates nothing.
type idleValues struct {
	kernelRes, wakeRequest, wakeLatency, nextTimer, nextEvent int64
	wakeIRQ, nrIOWait, abortsBefore                           int32
	wakeCause                                                 string
	above, below, beforeEntry, tickStopped, tickStoppedBefore bool
	gotTick, pollTimedOut, loopEntry, stoppable, abortedB     bool
}

// detach makes r's pointer fields point into v, holding the same values:
// a row kept past the call (a batch of Parquet rows) no longer shares the
// exporter's scratch values.
func (r *IdlePeriodRow) detach(v *idleValues) {
	repoint(&r.KernelResidencyNs, &v.kernelRes)
	repoint(&r.Above, &v.above)
	repoint(&r.Below, &v.below)
	repoint(&r.WakeCause, &v.wakeCause)
	repoint(&r.WakeIRQ, &v.wakeIRQ)
	repoint(&r.WakeRequestNs, &v.wakeRequest)
	repoint(&r.WakeLatencyNs, &v.wakeLatency)
	repoint(&r.WakeRequestedBeforeEntry, &v.beforeEntry)
	repoint(&r.TickStopped, &v.tickStopped)
	repoint(&r.TickStoppedBefore, &v.tickStoppedBefore)
	repoint(&r.NextTimerNs, &v.nextTimer)
	repoint(&r.NextEventNs, &v.nextEvent)
	repoint(&r.GotTick, &v.gotTick)
	repoint(&r.PollTimedOut, &v.pollTimedOut)
	repoint(&r.IdleLoopEntry, &v.loopEntry)
	repoint(&r.TickStoppable, &v.stoppable)
	repoint(&r.NrIOWait, &v.nrIOWait)
	repoint(&r.AbortedBefore, &v.abortedB)
	repoint(&r.AbortsBefore, &v.abortsBefore)
}

func (r *IORequestRow) detach(v *ioValues) {
	repoint(&r.WokeIdle, &v.wokeIdle)
	repoint(&r.WokeIdleCause, &v.wokeCause)
	repoint(&r.Tid, &v.tid)
	repoint(&r.Pid, &v.pid)
	repoint(&r.Comm, &v.comm)
	repoint(&r.TaskWokenNs, &v.taskWoken)
	repoint(&r.TaskRunNs, &v.taskRun)
	repoint(&r.TaskCPU, &v.taskCPU)
	repoint(&r.TaskLatencyNs, &v.taskLatency)
}

// repoint copies what *p points at into v and points *p at v (nil stays nil).
func repoint[T any](p **T, v *T) {
	if *p != nil {
		*v = **p
		*p = v
	}
}

type ioValues struct {
	tid, pid, taskCPU               int32
	comm, wokeCause                 string
	taskWoken, taskRun, taskLatency int64
	wokeIdle                        bool
}

// Export reads r once and hands the rows o selects to sink.
func Export(r *trace.Reader, o Options, sink Sink) (Summary, error) {
	rules := analysis.NewRules(r.Meta, r.End)
	e := &exporter{
		meta:       r.Meta,
		rules:      rules,
		sink:       sink,
		sel:        newSelection(r, rules, o),
		devNames:   map[uint32]string{},
		wakeCauses: r.Meta.Inputs.WakeCauses,
	}
	e.sum.TraceStartNs = e.sel.start
	e.recorded = r.Meta.RecordedCPUSet()
	for _, d := range r.Meta.BlockDevices {
		e.devNames[d.Dev()] = d.Name
	}
	e.matcher.Match = func(cause trace.WakeCause, _ struct{}, b trace.BlockIO) { e.ioRow(&b, true, cause) }
	e.matcher.Miss = func(b trace.BlockIO) { e.ioRow(&b, false, trace.WakeUnknown) }

	v := trace.Visitor{Idle: e.addIdle}
	if sink.IORequest != nil {
		v.BlockIO = e.addIO
	}
	var qos []trace.PMQoSChange // few: written after the scan, in time order
	if sink.PMQoSChange != nil {
		v.PMQoS = func(q *trace.PMQoSChange) error { qos = append(qos, *q); return nil }
	}
	err := r.Scan(v)
	if err == nil {
		e.matcher.Flush()
		err = e.err
	}
	if err == nil && sink.PMQoSChange != nil {
		err = e.qosRows(selectQoS(r.Meta, &e.sel, qos))
	}
	e.sum.Uncertain = e.matcher.Uncertain
	return e.sum, err
}

func cpuSet(cpus []int) []bool {
	n := 0
	for _, c := range cpus {
		if c >= 0 && c < trace.MaxCPUs {
			n = max(n, c+1)
		}
	}
	set := make([]bool, n)
	for _, c := range cpus {
		if c >= 0 && c < n {
			set[c] = true
		}
	}
	return set
}

func inSet(set []bool, cpu uint32) bool { return int64(cpu) < int64(len(set)) && set[cpu] }

// selection is Options' choice of records, one rule for every format.
type selection struct {
	rules        *analysis.Rules
	opt          Options
	cpus         []bool // nil: every CPU
	start        uint64
	fromNs, toNs int64
}

func newSelection(r *trace.Reader, rules *analysis.Rules, o Options) selection {
	s := selection{rules: rules, opt: o, start: TraceStart(r), fromNs: math.MinInt64, toNs: math.MaxInt64}
	if o.HasFrom {
		s.fromNs = o.From.Nanoseconds()
	}
	if o.HasTo {
		s.toNs = o.To.Nanoseconds()
	}
	if o.CPUs != nil {
		s.cpus = cpuSet(o.CPUs)
	}
	return s
}

// inTime says whether t falls in (From, To] since the trace's start.
func (s *selection) inTime(t uint64) bool {
	since := int64(t) - int64(s.start)
	return since > s.fromNs && since <= s.toNs
}

// idle says whether a (valid) idle period is selected: its CPU, its exit.
func (s *selection) idle(p *trace.IdlePeriod) bool {
	return (s.cpus == nil || inSet(s.cpus, p.CPU)) && s.inTime(p.ExitNs) && (!s.opt.StatsWindow || s.rules.IdleInWindow(p))
}

// io says whether an IO request is selected: issued or completed on a
// selected CPU, its completion, the IO filter.
func (s *selection) io(b *trace.BlockIO) bool {
	if s.cpus != nil && !inSet(s.cpus, b.IssueCPU) && !inSet(s.cpus, b.CompleteCPU) {
		return false
	}
	return s.inTime(b.CompleteNs) && (!s.opt.StatsWindow || s.rules.IOInWindow(b)) && s.opt.IOFilter.Match(b)
}

func (e *exporter) addIdle(p *trace.IdlePeriod) error {
	if e.err != nil {
		return e.err
	}
	if !e.rules.Valid(p) {
		e.sum.Invalid++
		return nil
	}
	if e.sink.IORequest != nil {
		e.matcher.Period(p.CPU, p.EntryNs, p.ExitNs, p.WakeCause, struct{}{})
	}
	if e.sink.IdlePeriod == nil || !e.sel.idle(p) {
		return nil
	}
	e.idleRow(p)
	if err := e.sink.IdlePeriod(&e.idle); err != nil {
		e.err = err
		return err
	}
	e.sum.IdlePeriods++
	return nil
}

func (e *exporter) idleRow(p *trace.IdlePeriod) {
	row, v := &e.idle, &e.idleVals
	res, counted := p.Residency()
	*row = IdlePeriodRow{
		CPU: int32(p.CPU), State: int32(p.State), StateName: e.rules.StateName(int(p.CPU), int(p.State)),
		EntryNs: int64(p.EntryNs), ExitNs: int64(p.ExitNs), DurationNs: int64(p.ResidencyNs()), ResidencyNs: int64(res),
		Counted: counted, InStatsWindow: e.rules.IdleInWindow(p),
	}
	if p.KernelCounted {
		v.kernelRes = int64(p.KernelResidencyNs)
		row.KernelResidencyNs = &v.kernelRes
	}
	if above, below, ok := e.rules.Classify(p); ok {
		v.above, v.below = above, below
		row.Above, row.Below = &v.above, &v.below
	}
	if e.wakeCauses {
		v.wakeCause = p.WakeCause.String()
		row.WakeCause = &v.wakeCause
		if p.WakeCause == trace.WakeIRQ && p.WakeIRQ >= 0 {
			v.wakeIRQ = p.WakeIRQ
			row.WakeIRQ = &v.wakeIRQ
		}
	}
	if e.meta.Inputs.WakeRequests {
		if p.WakeRequestNs != 0 {
			v.wakeRequest = int64(p.WakeRequestNs)
			row.WakeRequestNs = &v.wakeRequest
		}
		v.beforeEntry = p.RequestedBeforeEntry()
		row.WakeRequestedBeforeEntry = &v.beforeEntry
	}
	if lat, ok := p.WakeLatencyNs(); ok {
		v.wakeLatency = int64(lat)
		row.WakeLatencyNs = &v.wakeLatency
	}
	row.TickStopped = tristate(p.TickStopped, &v.tickStopped)
	row.TickStoppedBefore = tristate(p.TickStoppedBefore, &v.tickStoppedBefore)
	if p.NextTimerKnown {
		v.nextTimer = p.NextTimerNs
		row.NextTimerNs = &v.nextTimer
	}
	if p.NextEventKnown {
		v.nextEvent = p.NextEventNs
		row.NextEventNs = &v.nextEvent
	}
	row.GotTick = tristate(p.GotTick, &v.gotTick)
	row.PollTimedOut = tristate(p.PollTimedOut, &v.pollTimedOut)
	row.IdleLoopEntry = tristate(p.IdleLoopEntry, &v.loopEntry)
	row.TickStoppable = tristate(p.TickStoppable, &v.stoppable)
	if p.NrIOWait >= 0 {
		v.nrIOWait = p.NrIOWait
		row.NrIOWait = &v.nrIOWait
	}
	if p.KernelKnown {
		v.abortedB = p.AbortedBefore
		row.AbortedBefore = &v.abortedB
	}
	if p.AbortsBefore >= 0 {
		v.abortsBefore = int32(p.AbortsBefore)
		row.AbortsBefore = &v.abortsBefore
	}
}

// tristate points at a known fact, nil for an unknown one.
func tristate(t trace.Tristate, b *bool) *bool {
	if t == trace.Unknown {
		return nil
	}
	*b = t == trace.Yes
	return b
}

func (e *exporter) addIO(b *trace.BlockIO) error {
	if e.err != nil {
		return e.err
	}
	// Only the requests kept wait for the matcher's answer: each
	// completion's answer depends on the idle periods alone.
	if !e.sel.io(b) {
		return nil
	}
	e.matcher.Completion(b.CompleteCPU, b.CompleteNs, *b)
	return e.err
}

// ioRow makes and hands over the row of b once the matcher has decided.
func (e *exporter) ioRow(b *trace.BlockIO, woke bool, cause trace.WakeCause) {
	if e.err != nil {
		return
	}
	row, v := &e.io, &e.ioVals
	name, ok := e.devNames[b.Dev]
	if !ok {
		name = fmt.Sprintf("%d:%d", b.DevMajor(), b.DevMinor())
	}
	*row = IORequestRow{
		Device: name, DevMajor: int32(b.DevMajor()), DevMinor: int32(b.DevMinor()),
		Sector: int64(b.Sector), Op: trace.OpName(b.Op), CmdFlags: int64(b.CmdFlags), SizeBytes: int64(b.Bytes),
		IssueNs: int64(b.IssueNs), CompleteNs: int64(b.CompleteNs), LatencyNs: int64(b.LatencyNs()),
		IssueCPU: int32(b.IssueCPU), CompleteCPU: int32(b.CompleteCPU), Error: b.Error,
		InStatsWindow: e.rules.IOInWindow(b),
	}
	if e.wakeCauses && e.recorded.Has(b.CompleteCPU) {
		v.wokeIdle = woke
		row.WokeIdle = &v.wokeIdle
		if woke {
			v.wokeCause = cause.String()
			row.WokeIdleCause = &v.wokeCause
		}
	}
	if b.Tid != 0 { // 0: the trace does not record the task
		v.tid, v.pid, v.comm = int32(b.Tid), int32(b.Tgid), b.Comm
		row.Tid, row.Comm = &v.tid, &v.comm
		// Only the idle task has tgid 0, and its tid is 0 too: a thread
		// without one comes from an import (perf script and ftrace text
		// name the thread only), so its pid is unknown.
		if b.Tgid != 0 {
			row.Pid = &v.pid
		}
		if b.TaskWokenNs != 0 {
			v.taskWoken = int64(b.TaskWokenNs)
			row.TaskWokenNs = &v.taskWoken
		}
		if b.TaskRunNs != 0 {
			v.taskRun, v.taskCPU = int64(b.TaskRunNs), int32(b.TaskCPU)
			row.TaskRunNs, row.TaskCPU = &v.taskRun, &v.taskCPU
		}
		if lat, ok := iowake.TaskLatencyNs(b); ok {
			v.taskLatency = int64(lat)
			row.TaskLatencyNs = &v.taskLatency
		}
	}
	if err := e.sink.IORequest(row); err != nil {
		e.err = err
		return
	}
	e.sum.IORequests++
}

// TablesOf lists table names in the order given, each once, and refuses
// an unknown one.
func TablesOf(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if !slices.Contains(Tables, n) {
			return nil, fmt.Errorf("unknown table %q (tables: %s)", n, strings.Join(Tables, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
