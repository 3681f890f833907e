// Package analysis computes statistics over an idletrace trace and renders
// them, and the what-if comparison, as text (tablewriter), Markdown, JSON and
// HTML.
package analysis

import (
	"fmt"
	"math"
	"sort"

	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Stats is what `idletrace stats` reports. JSON names follow the contract in
// docs/DESIGN.md ("stats --format json"); fields beyond it are extras.
type Stats struct {
	KernelRelease   string `json:"kernel_release"`
	CPUIdleDriver   string `json:"cpuidle_driver"`
	CPUIdleGovernor string `json:"cpuidle_governor"`
	HZ              int    `json:"hz"`
	StopReason      string `json:"stop_reason,omitempty"`
	// CutShort: the trace has no end record (the recorder was killed).
	CutShort bool `json:"cut_short"`

	LostEvents uint64 `json:"lost_events"`
	DurationNs uint64 `json:"duration_ns"`
	Window     Window `json:"window"`

	CPUs   []CPUStats  `json:"cpus"`
	Kernel KernelStats `json:"kernel"`
	// Mismatches lists every disagreement between the trace and the kernel's
	// counters (cpuidle and block); empty when they agree or cannot be compared.
	Mismatches []Mismatch `json:"mismatches"`

	WakeCauses    WakeCauseStats             `json:"wake_causes"`
	WakeLatencyNs map[string]latency.Summary `json:"wake_latency_ns"`
	// WakeRequestedBeforeEntry counts remote wake-ups whose request (an IPI)
	// came before the idle entry: not in WakeLatencyNs.
	WakeRequestedBeforeEntry uint64  `json:"wake_requested_before_entry"`
	IO                       IOStats `json:"io"`

	// Loss is the recording's one loss account (the same numbers and names
	// as record's summary and info); LostEvents is its total.
	Loss   trace.LossAccount `json:"loss"`
	Losses []LossStats       `json:"losses"`
	// OutsideWindow counts records that fell outside the recording window
	// (before the start or after the end snapshot); they are not in the
	// statistics so that the trace and the kernel's counters cover the same time.
	OutsideWindow OutsideWindow `json:"outside_window"`
	// Invalid counts records with an impossible CPU or state number.
	Invalid uint64 `json:"invalid_records"`

	Probes   map[string]string `json:"probes"`
	Inputs   trace.Inputs      `json:"inputs"`
	Warnings []string          `json:"warnings"`
}

// Window is the time the statistics cover.
type Window struct {
	StartNs uint64 `json:"start_ns"`
	EndNs   uint64 `json:"end_ns"`
	// Source: "snapshots" (start and end snapshots), "records" (first entry
	// to last exit) or "start snapshot to last record".
	Source string `json:"source"`
}

// CPUStats is one CPU: its idle states as the trace shows them.
type CPUStats struct {
	CPU    int          `json:"cpu"`
	States []StateStats `json:"states"`
	// Extras.
	Periods      uint64  `json:"periods"`
	IdleNs       uint64  `json:"idle_ns"`
	WindowNs     uint64  `json:"window_ns"`
	IdleFraction float64 `json:"idle_fraction"`
	// LostIdle is the number of idle-period records this CPU lost.
	LostIdle uint64 `json:"lost_idle"`
	// WakeCauses is what ended this CPU's idle periods (wake_causes.counts
	// split by CPU), and IOWokeIdle the block IO completions that woke it
	// (io.woke_idle_cpu split by CPU, IO filter applied).
	WakeCauses map[string]uint64 `json:"wake_causes"`
	IOWokeIdle uint64            `json:"io_woke_idle"`
}

// KernelCPU is one CPU's kernel counter deltas.
type KernelCPU struct {
	CPU    int          `json:"cpu"`
	States []StateStats `json:"states"`
}

// StateStats is one CPU's counters for one idle state.
type StateStats struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Usage  uint64 `json:"usage"`
	TimeNs uint64 `json:"time_ns"`
	Above  uint64 `json:"above"`
	Below  uint64 `json:"below"`
	// Extras.
	ExitLatencyNs     *uint64 `json:"exit_latency_ns,omitempty"`
	TargetResidencyNs *uint64 `json:"target_residency_ns,omitempty"`
	Rejected          *uint64 `json:"rejected,omitempty"` // kernel only
}

// KernelStats holds the deltas of the kernel's sysfs cpuidle counters between
// the start and end snapshots, in the same shape as Stats.CPUs.
type KernelStats struct {
	Available bool        `json:"available"`
	Note      string      `json:"note,omitempty"`
	CPUs      []KernelCPU `json:"cpus"`
}

// Mismatch is one counter on which the trace and the kernel disagree.
type Mismatch struct {
	Kind   string `json:"kind"`             // "cpuidle" or "block"
	CPU    int    `json:"cpu"`              // cpuidle counters
	State  int    `json:"state"`            // cpuidle counters
	Device string `json:"device,omitempty"` // block counters
	Name   string `json:"name"`             // state or device name
	Field  string `json:"field"`            // usage, time_ns, above, below, completed
	Traced uint64 `json:"traced"`
	Kernel uint64 `json:"kernel"`
}

// WakeCauseStats counts what ended the idle periods.
type WakeCauseStats struct {
	Total         uint64            `json:"total"`
	KnownFraction float64           `json:"known_fraction"`
	Counts        map[string]uint64 `json:"counts"`
	TopIRQs       []IRQCount        `json:"top_irqs"`
}

// IRQCount is how many idle periods one device interrupt ended.
type IRQCount struct {
	IRQ   int32  `json:"irq"`
	Count uint64 `json:"count"`
}

// IOStats summarises block IO completions.
type IOStats struct {
	Requests  uint64          `json:"requests"`
	LatencyNs latency.Summary `json:"latency_ns"`
	// TaskLatencyNs is issue → the issuing task running again, over the
	// requests a task waited for (iowake.TaskLatencyNs); TaskWaited counts
	// them. Null where the trace does not record the task.
	TaskLatencyNs *latency.Summary `json:"task_latency_ns"`
	TaskWaited    uint64           `json:"task_waited"`
	// Filter is the IO filter the figures above cover ("" for every
	// request); Devices count every request.
	Filter string `json:"filter"`
	Errors uint64 `json:"errors"`
	// Lost is IO records the kernel side could not deliver; Unmatched is
	// completions whose issue was not seen (counted by the recorder, not in
	// Requests).
	Lost      uint64 `json:"lost"`
	Unmatched uint64 `json:"unmatched"`
	// WokeIdleCPU is the number of completions that woke an idle CPU (the
	// rule in package iowake), split by the wake cause of the idle period.
	WokeIdleCPU        uint64            `json:"woke_idle_cpu"`
	WokeIdleCPUByCause map[string]uint64 `json:"woke_idle_cpu_by_cause"`
	WokeWindowNs       uint64            `json:"woke_idle_cpu_window_ns"`
	Devices            []DeviceStats     `json:"devices"`
	// WithoutIssueInWindow is the number of completions in the window whose
	// issue the recorder did not see (in flight at start, or completed
	// without an issue of their own), and UndeliveredInWindow of those
	// whose completion the kernel never
	// delivered to the programs (trace.IOUndelivered; null without the
	// snapshots). KernelDiffExplained: the kernel's completed counts exceed
	// the traced ones by exactly their sum, so they agree.
	WithoutIssueInWindow *uint64 `json:"without_traced_issue_in_window"`
	UndeliveredInWindow  *uint64 `json:"undelivered_in_window"`
	KernelDiffExplained  bool    `json:"kernel_diff_explained"`
}

// DeviceStats is one block device.
type DeviceStats struct {
	Name     string `json:"name"`
	Major    uint32 `json:"major"`
	Minor    uint32 `json:"minor"`
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
	// KernelCompleted is the delta of completed requests in
	// /sys/block/DEV/stat (reads, writes, discards, flushes); null when the
	// snapshots lack the device.
	KernelCompleted *uint64 `json:"kernel_completed"`
}

// LossStats is one CPU's loss counters.
type LossStats struct {
	CPU         uint32 `json:"cpu"`
	IdleLost    uint64 `json:"idle_lost"`
	IOLost      uint64 `json:"io_lost"`
	OtherLost   uint64 `json:"other_lost"`
	IOUnmatched uint64 `json:"io_unmatched"`
	// IOOrphaned and IdleUnpaired: events the kernel did not deliver.
	IOOrphaned   uint64 `json:"io_issues_left_waiting"`
	IdleUnpaired uint64 `json:"idle_unpaired"`
	IOTableFull  uint64 `json:"io_table_full"`
	IOUnissued   uint64 `json:"io_unissued"`
}

// OutsideWindow counts records outside the recording window.
type OutsideWindow struct {
	IdlePeriods uint64 `json:"idle_periods"`
	IORequests  uint64 `json:"io_requests"`
}

const (
	maxCPUs   = trace.MaxCPUs // beyond this a CPU number is treated as corrupt
	maxStates = trace.MaxStates

	// NoDriverHLT and NoDriverPOLL name the states the cpu_idle tracepoint
	// reports when the kernel has no cpuidle driver.
	// They match the names model.Recorded gives the synthesised profile.
	NoDriverHLT  = "HLT"
	NoDriverPOLL = "POLL"

	// ResidencyTolerance is the relative difference between traced and
	// kernel residency tolerated before it is flagged; ResidencySlackNs
	// absorbs the truncation of sysfs time (µs) at both snapshots.
	ResidencyTolerance = 0.005
	ResidencySlackNs   = 2000
)

// NoDriverNote explains why a kernel without a cpuidle driver has no
// counters to check the trace against.
const NoDriverNote = "the kernel has no cpuidle driver (cpuidle_driver=none): it runs its default idle routine " +
	"(HLT on x86), which the cpu_idle tracepoint reports as state 1 (0 for cpu_idle_poll), keeps no " +
	"usage/time/above/below counters and has no state table, so above/below cannot be classified (0 in JSON) " +
	"and there is nothing to check the trace against"

type stateAcc struct{ usage, timeNs, above, below uint64 }

type cpuAcc struct {
	cpu              int
	states           []stateAcc
	winStart, winEnd uint64 // per-CPU window (exit times in (winStart, winEnd])
	periods, idleNs  uint64
	causes           map[trace.WakeCause]uint64
	ioWoke           uint64
	wake             [maxStates]*latency.Histogram
}

type devAcc struct{ requests, errors uint64 }

// StatsBuilder accumulates Stats in one streaming pass with memory
// independent of the trace length. Feed it with AddIdle and AddBlockIO (both
// fit trace.Visitor), and AddLoss where the reader reports loss records; then
// call Finish.
type StatsBuilder struct {
	*Rules // state names and tables, the windows
	meta   *trace.Metadata
	end    *trace.End

	cpus []*cpuAcc

	haveRecord  bool
	first, last uint64

	causes map[trace.WakeCause]uint64
	irqs   map[int32]uint64
	wake   map[string]*latency.Histogram
	// wakeEarly counts remote wake-ups requested before the idle entry.
	wakeEarly uint64
	io        latency.Histogram
	taskIO    latency.Histogram
	ioFilter  trace.IOFilter
	ioErr     uint64
	devs      map[uint32]*devAcc
	iowake    iowake.Matcher[uint32, struct{}] // a period's payload is its CPU
	ioWoke    map[trace.WakeCause]uint64       // completions that woke an idle CPU, by the period's wake cause
	losses    map[uint32]trace.Loss
	outside   OutsideWindow
	invalid   uint64
}

// NewStatsBuilder prepares a builder. end may be nil (a trace cut short);
// when present it must be known before the records are fed, because it
// bounds the recording window.
func NewStatsBuilder(meta *trace.Metadata, end *trace.End) *StatsBuilder {
	if meta == nil {
		meta = &trace.Metadata{}
	}
	b := &StatsBuilder{
		Rules:  NewRules(meta, end),
		meta:   meta,
		end:    end,
		causes: map[trace.WakeCause]uint64{},
		irqs:   map[int32]uint64{},
		wake:   map[string]*latency.Histogram{},
		devs:   map[uint32]*devAcc{},
		losses: map[uint32]trace.Loss{},
		ioWoke: map[trace.WakeCause]uint64{trace.WakeIRQ: 0, trace.WakeIPICall: 0},
	}
	b.iowake.Match = func(cause trace.WakeCause, cpu uint32, _ struct{}) {
		b.ioWoke[cause]++
		if a := b.cpu(cpu); a != nil {
			a.ioWoke++
		}
	}
	b.iowake.Miss = func(struct{}) {}
	return b
}

// snapTime is the instant a snapshot took cpu's counters: its own entry in
// CPUTimeNs (parallel to CPUIdle, as the recorder writes it; or to the
// recorded CPU list), else the snapshot's global time.
func snapTime(s *trace.Snapshot, recorded []int, cpu int) (uint64, bool) {
	if s == nil {
		return 0, false
	}
	pos := -1
	for i := range s.CPUIdle {
		if s.CPUIdle[i].CPU == cpu {
			pos = i
			break
		}
	}
	if pos < 0 && len(s.CPUIdle) == 0 && len(s.CPUTimeNs) == len(recorded) {
		for i, c := range recorded {
			if c == cpu {
				pos = i
				break
			}
		}
	}
	if pos >= 0 && pos < len(s.CPUTimeNs) && s.CPUTimeNs[pos] != 0 {
		return s.CPUTimeNs[pos], true
	}
	return s.MonotonicNs, true
}

func (b *StatsBuilder) cpu(c uint32) *cpuAcc {
	if c >= maxCPUs {
		return nil
	}
	for int(c) >= len(b.cpus) {
		b.cpus = append(b.cpus, nil)
	}
	a := b.cpus[c]
	if a == nil {
		a = &cpuAcc{cpu: int(c), causes: map[trace.WakeCause]uint64{}}
		a.winStart, a.winEnd = b.cpuWindow(c)
		b.cpus[c] = a
	}
	return a
}

// AddIdle feeds one idle period. It keeps no reference to p.
func (b *StatsBuilder) AddIdle(p *trace.IdlePeriod) error {
	a := b.cpu(p.CPU)
	if a == nil || !b.Valid(p) {
		b.invalid++
		return nil
	}
	b.iowake.Period(p.CPU, p.EntryNs, p.ExitNs, p.WakeCause, p.CPU)
	// The kernel updates its counters at the exit, so a period belongs to
	// the window its exit falls in.
	if !b.IdleInWindow(p) {
		b.outside.IdlePeriods++
		return nil
	}
	if !b.haveRecord || p.EntryNs < b.first {
		b.first = p.EntryNs
	}
	if !b.haveRecord || p.ExitNs > b.last {
		b.last = p.ExitNs
	}
	b.haveRecord = true

	idx := int(p.State)
	for idx >= len(a.states) {
		a.states = append(a.states, stateAcc{})
	}
	res, counted := p.Residency()
	s := &a.states[idx]
	if counted {
		// The kernel counts neither the use nor the time of an entry it
		// rejected or of idle outside cpuidle_enter_state (default_idle_call
		// while the governor is switched, cpu_idle_poll).
		s.usage++
		s.timeNs += res
	}
	if above, below, ok := b.Classify(p); ok {
		if above {
			s.above++
		}
		if below {
			s.below++
		}
	}
	a.periods++
	a.idleNs += res

	b.causes[p.WakeCause]++
	a.causes[p.WakeCause]++
	if p.WakeCause == trace.WakeIRQ && p.WakeIRQ >= 0 {
		b.irqs[p.WakeIRQ]++
	}
	if lat, ok := p.WakeLatencyNs(); ok {
		h := a.wake[idx]
		if h == nil {
			name := b.StateName(a.cpu, idx)
			h = b.wake[name]
			if h == nil {
				h = &latency.Histogram{}
				b.wake[name] = h
			}
			a.wake[idx] = h
		}
		h.Record(lat)
	} else if p.RequestedBeforeEntry() {
		b.wakeEarly++
	}
	return nil
}

// SetIOFilter makes the IO figures (latency, task latency, errors, woke
// an idle CPU) cover the requests f selects; the per-device counts, which
// are checked against the kernel's, still count every request. Call it
// before the first record.
func (b *StatsBuilder) SetIOFilter(f trace.IOFilter) { b.ioFilter = f }

// AddBlockIO feeds one block IO request. It keeps no reference to io.
func (b *StatsBuilder) AddBlockIO(io *trace.BlockIO) error {
	if !b.IOInWindow(io) {
		b.outside.IORequests++
		return nil
	}
	d := b.devs[io.Dev]
	if d == nil {
		if len(b.devs) >= 4096 { // corrupt input: do not grow without bound
			b.invalid++
			return nil
		}
		d = &devAcc{}
		b.devs[io.Dev] = d
	}
	d.requests++
	if io.Error != 0 {
		d.errors++
	}
	if !b.ioFilter.Match(io) {
		return nil
	}
	b.io.Record(io.LatencyNs())
	if lat, ok := iowake.TaskLatencyNs(io); ok {
		b.taskIO.Record(lat)
	}
	if io.Error != 0 {
		b.ioErr++
	}
	b.iowake.Completion(io.CompleteCPU, io.CompleteNs, struct{}{})
	return nil
}

// AddLoss feeds one loss record (cumulative per CPU; the largest is kept).
func (b *StatsBuilder) AddLoss(l *trace.Loss) error {
	b.addLoss(*l)
	return nil
}

func (b *StatsBuilder) addLoss(l trace.Loss) {
	if len(b.losses) >= maxCPUs {
		return
	}
	o := b.losses[l.CPU]
	o.CPU = l.CPU
	o = o.Max(l)
	b.losses[l.CPU] = o
}

// ComputeStats computes Stats in one streaming pass: scan is called once
// with a Visitor (trace.Reader.Scan fits). losses are loss counters known
// beforehand (r.Losses(), optional: loss records met during the scan and
// end.Loss are merged in as well).
func ComputeStats(meta *trace.Metadata, end *trace.End, losses []trace.Loss, scan func(trace.Visitor) error) (*Stats, error) {
	b := NewStatsBuilder(meta, end)
	if scan != nil {
		if err := scan(b.Visitor()); err != nil {
			return nil, err
		}
	}
	return b.Finish(losses), nil
}

// StatsFromReader computes Stats over an open trace, with the reader's own
// warnings (damaged chunks, a recording cut short) first.
func StatsFromReader(r *trace.Reader) (*Stats, error) {
	return FilteredStatsFromReader(r, trace.IOFilter{})
}

// FilteredStatsFromReader is StatsFromReader with the IO figures limited to
// the requests f selects (StatsBuilder.SetIOFilter).
func FilteredStatsFromReader(r *trace.Reader, f trace.IOFilter) (*Stats, error) {
	b := NewStatsBuilder(r.Meta, r.End)
	b.SetIOFilter(f)
	if err := r.Scan(b.Visitor()); err != nil { // loss records come with the scan
		return nil, err
	}
	s := b.Finish(nil)
	s.Warnings = append(append([]string{}, r.Warnings()...), s.Warnings...)
	return s, nil
}

// Empty says whether the trace held nothing to count: no idle period and
// no block IO request, inside the window or outside it.
func (s *Stats) Empty() bool {
	for _, c := range s.CPUs {
		if c.Periods > 0 {
			return false
		}
	}
	return s.IO.Requests == 0 && s.OutsideWindow.IdlePeriods == 0 && s.OutsideWindow.IORequests == 0
}

// WakeLatencyP50 returns the median measured wake latency per state name,
// as model.Measured takes it.
func (s *Stats) WakeLatencyP50() map[string]uint64 {
	out := make(map[string]uint64, len(s.WakeLatencyNs))
	for name, l := range s.WakeLatencyNs {
		if l.Count > 0 {
			out[name] = l.P50
		}
	}
	return out
}

// Visitor returns the trace.Visitor that feeds this builder.
func (b *StatsBuilder) Visitor() trace.Visitor {
	return trace.Visitor{Idle: b.AddIdle, BlockIO: b.AddBlockIO, Loss: b.AddLoss}
}

// Finish computes the statistics; losses are merged with those fed so far
// and with the end record's.
func (b *StatsBuilder) Finish(losses []trace.Loss) *Stats { return b.finish(losses, true) }

// Current computes the statistics of what was fed so far and leaves the
// builder ready for more (a live view's running totals): unlike Finish,
// completions still waiting for their idle period (or periods for their
// completion) stay held, to be counted when the other side comes.
func (b *StatsBuilder) Current() *Stats { return b.finish(nil, false) }

// Next returns a builder for the records that come after those fed to b,
// on the same metadata and IO filter, and hands it b's IO-wake matcher with
// what it holds: a completion whose idle period comes after the cut (or the
// reverse) is counted by the builder that receives the second of the two.
// A live view calls it at the end of each interval, then Finish on b; b
// must not be fed after it.
func (b *StatsBuilder) Next() *StatsBuilder {
	n := NewStatsBuilder(b.meta, b.end)
	n.ioFilter = b.ioFilter
	n.iowake, b.iowake = b.iowake, n.iowake
	// Each keeps its own callbacks, which count into it.
	n.iowake.Match, b.iowake.Match = b.iowake.Match, n.iowake.Match
	n.iowake.Miss, b.iowake.Miss = b.iowake.Miss, n.iowake.Miss
	return n
}

func (b *StatsBuilder) finish(losses []trace.Loss, flush bool) *Stats {
	for _, l := range losses {
		b.addLoss(l)
	}
	if b.end != nil {
		for _, l := range b.end.Loss {
			b.addLoss(l)
		}
	}
	s := b.newStats()
	b.window(s)
	b.lossStats(s)
	cpuList := b.cpuList()
	s.CPUs = make([]CPUStats, 0, len(cpuList))
	for _, c := range cpuList {
		s.CPUs = append(s.CPUs, b.cpuStats(c, s.DurationNs))
	}
	s.Kernel = b.kernelStats(cpuList)
	if s.Kernel.Available {
		s.Mismatches = append(s.Mismatches, compareCPUIdle(s.CPUs, s.Kernel.CPUs)...)
	}
	b.wakeStats(s)
	b.ioStats(s, flush)
	b.warn(s)
	return s
}

// newStats is the report's head: what the trace's metadata says.
func (b *StatsBuilder) newStats() *Stats {
	m := b.meta
	s := &Stats{
		KernelRelease:   m.KernelRelease,
		CPUIdleDriver:   m.CPUIdleDriver,
		CPUIdleGovernor: m.CPUIdleGovernor,
		HZ:              m.HZ,
		CutShort:        b.end == nil,
		Probes:          m.Probes,
		Inputs:          m.Inputs,
		Invalid:         b.invalid,
		OutsideWindow:   b.outside,
		WakeLatencyNs:   map[string]latency.Summary{},
		Mismatches:      []Mismatch{},
		Warnings:        []string{},
	}
	if s.Probes == nil {
		s.Probes = map[string]string{}
	}
	if b.end != nil {
		s.StopReason = b.end.StopReason
	}
	return s
}

// window sets the measured window and its length: the snapshots' where the
// trace has both, else what the records span.
func (b *StatsBuilder) window(s *Stats) {
	m := b.meta
	switch {
	case m.Start != nil && b.end != nil && b.end.Snapshot != nil:
		s.Window = Window{StartNs: m.Start.MonotonicNs, EndNs: b.end.Snapshot.MonotonicNs, Source: "snapshots"}
	case m.Start != nil:
		s.Window = Window{StartNs: m.Start.MonotonicNs, EndNs: max(b.last, m.Start.MonotonicNs), Source: "start snapshot to last record"}
	case b.haveRecord:
		s.Window = Window{StartNs: b.first, EndNs: b.last, Source: "records"}
	default:
		s.Window = Window{Source: "records"}
	}
	if s.Window.EndNs > s.Window.StartNs {
		s.DurationNs = s.Window.EndNs - s.Window.StartNs
	}
}

// lossStats sets the losses, per CPU and in total.
func (b *StatsBuilder) lossStats(s *Stats) {
	lossCPUs := make([]uint32, 0, len(b.losses))
	for c := range b.losses {
		lossCPUs = append(lossCPUs, c)
	}
	sort.Slice(lossCPUs, func(i, j int) bool { return lossCPUs[i] < lossCPUs[j] })
	s.Losses = []LossStats{}
	perCPU := make([]trace.Loss, 0, len(lossCPUs))
	for _, c := range lossCPUs {
		l := b.losses[c]
		perCPU = append(perCPU, l)
		s.IO.Lost += l.IOLost
		s.IO.Unmatched += l.IOUnmatched
		if l.Total()+l.IOUnmatched > 0 {
			s.Losses = append(s.Losses, LossStats{CPU: c, IdleLost: l.IdleLost, IOLost: l.IOLost, OtherLost: l.OtherLost, IOUnmatched: l.IOUnmatched,
				IOOrphaned: l.IOOrphaned, IdleUnpaired: l.IdleUnpaired, IOTableFull: l.IOTableFull, IOUnissued: l.IOUnissued})
		}
	}
	s.Loss = trace.NewLossAccount(perCPU, b.meta.Start, b.end)
	s.LostEvents = s.Loss.Total()
}

// cpuList is the CPUs the report covers: the recorded ones, those with a
// state table and those seen.
func (b *StatsBuilder) cpuList() []int {
	m := b.meta
	cpuSet := map[int]bool{}
	for _, c := range m.RecordedCPUs {
		if c >= 0 && c < maxCPUs {
			cpuSet[c] = true
		}
	}
	for c := range b.tables {
		if c >= 0 && c < maxCPUs && (len(m.RecordedCPUs) == 0 || cpuSet[c]) {
			cpuSet[c] = true
		}
	}
	for c, a := range b.cpus {
		if a != nil && a.periods > 0 {
			cpuSet[c] = true
		}
	}
	cpuList := make([]int, 0, len(cpuSet))
	for c := range cpuSet {
		cpuList = append(cpuList, c)
	}
	sort.Ints(cpuList)

	return cpuList
}

// cpuStats is one CPU's idle time and states; durationNs is the window's
// length, the CPU's own where the trace does not bound it.
func (b *StatsBuilder) cpuStats(c int, durationNs uint64) CPUStats {
	a := b.cpu(uint32(c))
	cs := CPUStats{CPU: c, Periods: a.periods, IdleNs: a.idleNs, LostIdle: b.losses[uint32(c)].IdleLost, States: []StateStats{},
		WakeCauses: map[string]uint64{}, IOWokeIdle: a.ioWoke} // the matcher's Flush (ioStats, after this) reports only misses
	for _, cause := range trace.WakeCauses() {
		cs.WakeCauses[cause.String()] = a.causes[cause]
	}
	switch {
	case a.winStart > 0 && a.winEnd != math.MaxUint64 && a.winEnd > a.winStart:
		cs.WindowNs = a.winEnd - a.winStart
	default:
		cs.WindowNs = durationNs
	}
	if cs.WindowNs > 0 {
		cs.IdleFraction = float64(a.idleNs) / float64(cs.WindowNs)
	}
	tab := b.tables[c]
	n := max(len(a.states), len(tab))
	if b.noDriver && tab == nil && n < 2 {
		n = 2 // show the default idle routine (state 1) even if unused
	}
	for i := 0; i < n; i++ {
		var acc stateAcc
		if i < len(a.states) {
			acc = a.states[i]
		}
		if i < len(tab) && tab[i].Disabled && tab[i].Name == "" && acc.usage == 0 {
			continue // a gap in the table
		}
		if b.noDriver && tab == nil && i == 0 && acc.usage == 0 {
			continue // cpu_idle_poll unused
		}
		if tab == nil && !b.noDriver && acc.usage == 0 {
			continue
		}
		st := StateStats{Index: i, Name: b.StateName(c, i), Usage: acc.usage, TimeNs: acc.timeNs, Above: acc.above, Below: acc.below}
		if i < len(tab) {
			el, tr := tab[i].ExitLatencyNs, tab[i].TargetResidencyNs
			st.ExitLatencyNs, st.TargetResidencyNs = &el, &tr
		}
		cs.States = append(cs.States, st)
	}
	return cs
}

// wakeStats sets the wake causes and each state's wake-up latency.
func (b *StatsBuilder) wakeStats(s *Stats) {
	s.WakeCauses.Counts = map[string]uint64{}
	for _, c := range trace.WakeCauses() {
		s.WakeCauses.Counts[c.String()] = 0
	}
	for c, n := range b.causes {
		s.WakeCauses.Counts[c.String()] += n
		s.WakeCauses.Total += n
	}
	if s.WakeCauses.Total > 0 {
		unknown := b.causes[trace.WakeUnknown]
		s.WakeCauses.KnownFraction = float64(s.WakeCauses.Total-unknown) / float64(s.WakeCauses.Total)
	}
	s.WakeCauses.TopIRQs = []IRQCount{}
	for irq, n := range b.irqs {
		s.WakeCauses.TopIRQs = append(s.WakeCauses.TopIRQs, IRQCount{IRQ: irq, Count: n})
	}
	sort.Slice(s.WakeCauses.TopIRQs, func(i, j int) bool {
		x, y := s.WakeCauses.TopIRQs[i], s.WakeCauses.TopIRQs[j]
		if x.Count != y.Count {
			return x.Count > y.Count
		}
		return x.IRQ < y.IRQ
	})
	if len(s.WakeCauses.TopIRQs) > 10 {
		s.WakeCauses.TopIRQs = s.WakeCauses.TopIRQs[:10]
	}

	for name, h := range b.wake {
		s.WakeLatencyNs[name] = h.Summary()
	}
	s.WakeRequestedBeforeEntry = b.wakeEarly
}

// ioStats sets the block IO figures and checks the devices' completions
// against the kernel's; flush first closes the IO-wake matcher.
func (b *StatsBuilder) ioStats(s *Stats, flush bool) {
	m := b.meta
	s.IO.Requests = b.io.Count()
	s.IO.LatencyNs = b.io.Summary()
	s.IO.Filter = b.ioFilter.Spec
	if m.Inputs.TaskIO || b.taskIO.Count() > 0 {
		t := b.taskIO.Summary()
		s.IO.TaskLatencyNs, s.IO.TaskWaited = &t, t.Count
	}
	s.IO.Errors = b.ioErr
	if flush {
		b.iowake.Flush()
	}
	s.IO.WokeIdleCPUByCause = map[string]uint64{}
	for cause, n := range b.ioWoke {
		s.IO.WokeIdleCPU += n
		s.IO.WokeIdleCPUByCause[cause.String()] = n
	}
	s.IO.WokeWindowNs = iowake.WindowNs
	s.IO.Devices = b.deviceStats()
	// The kernel also counts completions whose issue the recorder did not
	// see (issued before it attached): the snapshots carry that count.
	var undelivered *uint64
	if unmatched, orphaned, ok := trace.IOUndelivered(m.Start, b.end); ok {
		s.IO.WithoutIssueInWindow, s.IO.UndeliveredInWindow = &unmatched, &orphaned
		d := unmatched + orphaned
		undelivered = &d
	}
	var short uint64
	over := false
	for _, d := range s.IO.Devices {
		if k := d.KernelCompleted; k != nil {
			if d.Requests > *k {
				over = true
			} else {
				short += *k - d.Requests
			}
		}
	}
	s.IO.KernelDiffExplained = !over && short > 0 && undelivered != nil && short == *undelivered
	if !s.IO.KernelDiffExplained {
		for _, d := range s.IO.Devices {
			if d.KernelCompleted != nil && *d.KernelCompleted != d.Requests {
				s.Mismatches = append(s.Mismatches, Mismatch{Kind: "block", CPU: -1, State: -1, Device: d.Name, Name: d.Name, Field: "completed", Traced: d.Requests, Kernel: *d.KernelCompleted})
			}
		}
	}
}

// warn adds the warnings a reader of the report must see.
func (b *StatsBuilder) warn(s *Stats) {
	m := b.meta
	if b.end == nil {
		s.Warnings = append(s.Warnings, "no end record: without the end snapshot the kernel's counters cannot be checked")
	}
	if s.Loss.Lost() > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("counts are lower bounds: %s", s.Loss))
	}
	if b.iowake.Uncertain > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("the idle and IO records lie too far apart in the file to pair them all in bounded memory: woke_idle_cpu may miss up to %d completions", b.iowake.Uncertain))
	}
	if b.invalid > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d records had an impossible CPU or state number and were skipped", b.invalid))
	}
	if !m.Inputs.WakeCauses {
		s.Warnings = append(s.Warnings, "this trace does not carry wake causes")
	}
	if !m.Inputs.WakeRequests {
		s.Warnings = append(s.Warnings, "this trace does not carry remote wake requests: no wake latency can be measured")
	}
}

func findCounters(snap *trace.Snapshot, cpu int) *trace.CPUCounters {
	if snap == nil {
		return nil
	}
	for i := range snap.CPUIdle {
		if snap.CPUIdle[i].CPU == cpu {
			return &snap.CPUIdle[i]
		}
	}
	return nil
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func (b *StatsBuilder) kernelStats(cpuList []int) KernelStats {
	k := KernelStats{CPUs: make([]KernelCPU, 0, len(cpuList))}
	empty := func(note string) KernelStats {
		k.Note = note
		for _, c := range cpuList {
			k.CPUs = append(k.CPUs, KernelCPU{CPU: c, States: []StateStats{}})
		}
		return k
	}
	var endSnap *trace.Snapshot
	if b.end != nil {
		endSnap = b.end.Snapshot
	}
	switch {
	case b.meta.CPUIdleDriver == "none":
		return empty(NoDriverNote)
	case b.meta.Start == nil || len(b.meta.Start.CPUIdle) == 0:
		return empty("the trace has no start snapshot of the kernel's cpuidle counters")
	case endSnap == nil:
		return empty("the trace has no end snapshot (the recording was cut short), so the kernel's counters cannot be compared")
	}
	k.Available = true
	for _, c := range cpuList {
		cs := KernelCPU{CPU: c, States: []StateStats{}}
		s0, s1 := findCounters(b.meta.Start, c), findCounters(endSnap, c)
		if s0 != nil && s1 != nil {
			for _, e := range s1.States {
				var st0 trace.StateCounters
				for _, x := range s0.States {
					if x.Index == e.Index {
						st0 = x
					}
				}
				rej := sub(e.Rejected, st0.Rejected)
				cs.States = append(cs.States, StateStats{
					Index: e.Index, Name: b.StateName(c, e.Index),
					Usage: sub(e.Usage, st0.Usage), TimeNs: sub(e.TimeUs, st0.TimeUs) * 1000,
					Above: sub(e.Above, st0.Above), Below: sub(e.Below, st0.Below),
					Rejected: &rej,
				})
			}
			sort.Slice(cs.States, func(i, j int) bool { return cs.States[i].Index < cs.States[j].Index })
		}
		k.CPUs = append(k.CPUs, cs)
	}
	return k
}

// ResidencyAgrees says whether a traced residency agrees with the kernel's
// within ResidencyTolerance (plus ResidencySlackNs for sysfs rounding).
func ResidencyAgrees(traced, kernel uint64) bool {
	d := float64(traced) - float64(kernel)
	if d < 0 {
		d = -d
	}
	return d <= max(ResidencyTolerance*float64(kernel), ResidencySlackNs)
}

func findState(states []StateStats, idx int) *StateStats {
	for i := range states {
		if states[i].Index == idx {
			return &states[i]
		}
	}
	return nil
}

// compareCPUIdle lists every disagreement between traced and kernel counters.
// Usage is compared only for CPUs that lost no idle records.
func compareCPUIdle(traced []CPUStats, kernel []KernelCPU) []Mismatch {
	var out []Mismatch
	for _, kc := range kernel {
		var tc *CPUStats
		for i := range traced {
			if traced[i].CPU == kc.CPU {
				tc = &traced[i]
			}
		}
		if tc == nil {
			continue
		}
		for _, i := range stateIndexes(kc.States, tc.States) {
			var t, k StateStats
			name := ""
			if p := findState(tc.States, i); p != nil {
				t, name = *p, p.Name
			}
			if p := findState(kc.States, i); p != nil {
				k, name = *p, p.Name
			}
			mm := func(field string, a, b uint64) {
				out = append(out, Mismatch{Kind: "cpuidle", CPU: kc.CPU, State: i, Name: name, Field: field, Traced: a, Kernel: b})
			}
			if tc.LostIdle == 0 && t.Usage != k.Usage {
				mm("usage", t.Usage, k.Usage)
			}
			if !ResidencyAgrees(t.TimeNs, k.TimeNs) {
				mm("time_ns", t.TimeNs, k.TimeNs)
			}
			if t.Above != k.Above {
				mm("above", t.Above, k.Above)
			}
			if t.Below != k.Below {
				mm("below", t.Below, k.Below)
			}
		}
	}
	return out
}

func (b *StatsBuilder) deviceStats() []DeviceStats {
	type key struct{ major, minor uint32 }
	names := map[key]string{}
	for _, d := range b.meta.BlockDevices {
		names[key{d.Major, d.Minor}] = d.Name
	}
	var endSnap *trace.Snapshot
	if b.end != nil {
		endSnap = b.end.Snapshot
	}
	kernel := map[key]uint64{}
	if b.meta.Start != nil && endSnap != nil {
		start := map[key]uint64{}
		for _, c := range b.meta.Start.Block {
			start[key{c.Major, c.Minor}] = c.Completed()
			if _, ok := names[key{c.Major, c.Minor}]; !ok && c.Name != "" {
				names[key{c.Major, c.Minor}] = c.Name
			}
		}
		for _, c := range endSnap.Block {
			k := key{c.Major, c.Minor}
			if s0, ok := start[k]; ok {
				kernel[k] = sub(c.Completed(), s0)
				if _, ok := names[k]; !ok && c.Name != "" {
					names[k] = c.Name
				}
			}
		}
	}
	seen := map[key]bool{}
	var out []DeviceStats
	add := func(k key, d *devAcc) {
		if seen[k] {
			return
		}
		seen[k] = true
		ds := DeviceStats{Name: names[k], Major: k.major, Minor: k.minor}
		if ds.Name == "" {
			ds.Name = fmt.Sprintf("%d:%d", k.major, k.minor)
		}
		if d != nil {
			ds.Requests, ds.Errors = d.requests, d.errors
		}
		if n, ok := kernel[k]; ok {
			ds.KernelCompleted = &n
		}
		out = append(out, ds)
	}
	for dev, d := range b.devs {
		add(key{dev >> 20, dev & (1<<20 - 1)}, d)
	}
	for k, n := range kernel {
		if n > 0 {
			add(k, nil)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Major<<20|out[i].Minor < out[j].Major<<20|out[j].Minor
	})
	if out == nil {
		out = []DeviceStats{}
	}
	return out
}

// stateIndexes is the sorted union of the state indexes in the given lists.
func stateIndexes(lists ...[]StateStats) []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range lists {
		for _, st := range l {
			if !seen[st.Index] {
				seen[st.Index] = true
				out = append(out, st.Index)
			}
		}
	}
	sort.Ints(out)
	return out
}
