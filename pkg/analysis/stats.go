// Package analysis computes statistics over an idletrace trace and renders
// them, and the what-if comparison, as text (tablewriter), Markdown, JSON and
// HTML.
package analysis

import (
	"encoding/json"
	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Stats is what `idletrace stats` reports. JSON names follow the contract in
// docs/DESIGN.md ("stats --format json"); fields beyond it are extras.
type Stats struct {
	KernelRelease   string `json:"kernel_release"`
	CPUIdleDriver   string `json:"cpuidle_driver"`
	CPUIdleGovernor string `json:"cpuidle_governor"`
	// HaltPoll: the haltpoll module's parameters where the governor ran
	// (guest_halt_poll_ns decides how long it polls); null elsewhere.
	HaltPoll   *trace.HaltPollParams `json:"haltpoll"`
	HZ         int                   `json:"hz"`
	StopReason string                `json:"stop_reason,omitempty"`
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

	// StatePeriods is each state's idle periods on every CPU, by name as
	// WakeLatencyNs: how long they lasted and the tick's state at the
	// governor's choice and at entry.
	StatePeriods map[string]StatePeriods `json:"state_periods"`

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
	// Damage is what the file's damaged chunks held: recorded, but not
	// in these counts (the reader skipped them).
	Damage trace.Damage `json:"damage"`

	// RecorderCost: the recorder's BPF programs' run time (record
	// --bpf-stats); null without it.
	RecorderCost *RecorderCost `json:"recorder_cost"`

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
	// CameOnline: the CPU came online during the recording; its window
	// (and idle fraction) begins with its first idle period.
	CameOnline bool `json:"came_online,omitempty"`
	// LostIdle is the number of idle-period records this CPU lost.
	LostIdle uint64 `json:"lost_idle"`
	// WakeCauses is what ended this CPU's idle periods (wake_causes.counts
	// split by CPU), and IOWokeIdle the block IO completions that woke it
	// (io.woke_idle_cpu split by CPU, IO filter applied).
	WakeCauses map[string]uint64 `json:"wake_causes"`
	IOWokeIdle uint64            `json:"io_woke_idle"`
	// TickStopped: this CPU's idle periods entered with the tick stopped
	// (after the governor's choice); TickStoppedBefore: those whose
	// governor found it stopped when it chose (tick_nohz_tick_stopped(),
	// which menu and teo read).
	TickStopped       TickStopped `json:"tick_stopped"`
	TickStoppedBefore TickStopped `json:"tick_stopped_before"`
	// KernelTickStops is the kernel's count of the same over the window:
	// the rise of the CPU's idle_sleeps (/proc/timer_list); null where
	// the trace has no such counters.
	KernelTickStops *uint64 `json:"kernel_tick_stops"`
}

// StatePeriods is one idle state's periods, every CPU.
type StatePeriods struct {
	// LengthNs: entry to exit, whatever the kernel counted (its count is
	// the state's periods).
	LengthNs          latency.Summary `json:"length_ns"`
	TickStopped       TickStopped     `json:"tick_stopped"`
	TickStoppedBefore TickStopped     `json:"tick_stopped_before"`
}

// TickStopped counts idle periods with the scheduler tick stopped (at
// entry, or when the governor chose: CPUStats says which), of the Known
// ones whose tick state the trace records (an imported capture has none).
type TickStopped struct {
	Stopped uint64 `json:"stopped"`
	Known   uint64 `json:"known"`
}

// KernelCPU is one CPU's kernel counter deltas.
type KernelCPU struct {
	CPU    int          `json:"cpu"`
	States []StateStats `json:"states"`
	// Unchecked says why this CPU's traced counts are not held to the
	// kernel's (States then empty): it was offline at a snapshot, or went
	// offline and back in between (CPU hotplug) under a driver that then
	// registers its device afresh, counters from zero
	// (trace.CPUCounters.DeviceIno). Empty: checked.
	Unchecked string `json:"unchecked,omitempty"`
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
	// KernelRange: the range the kernel's count is known to, where the
	// snapshots' reads moved (DeviceStats.KernelCompletedRange).
	KernelRange *[2]uint64 `json:"kernel_range,omitempty"`
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
	// WokeIdleUnknown is the completions on CPUs whose idle periods the
	// recording left out (record --cpus): whether they woke one is
	// unknown, and WokeIdleCPU covers the others.
	WokeIdleCPU        uint64            `json:"woke_idle_cpu"`
	WokeIdleCPUByCause map[string]uint64 `json:"woke_idle_cpu_by_cause"`
	WokeIdleUnknown    uint64            `json:"woke_idle_cpu_unknown"`
	WokeWindowNs       uint64            `json:"woke_idle_cpu_window_ns"`
	Devices            []DeviceStats     `json:"devices"`
	// WithoutIssueInWindow is the number of completions in the window whose
	// issue the recorder did not see (in flight at start, or completed
	// without an issue of their own), and UndeliveredInWindow of those
	// whose issue or completion the kernel never delivered to the programs
	// (trace.IOUndelivered; null without the snapshots). KernelDiffExplained: the kernel's completed counts exceed
	// the traced ones by exactly their sum, so they agree (or, where a
	// snapshot's counts moved while read, by as much as the ranges allow).
	WithoutIssueInWindow *uint64 `json:"without_traced_issue_in_window"`
	UndeliveredInWindow  *uint64 `json:"undelivered_in_window"`
	KernelDiffExplained  bool    `json:"kernel_diff_explained"`
	// wokeKnown: WokeIdleCPU is known (iowake.WokeKnown), else null in
	// JSON, not 0; recorded: the trace records block IO (record --no-io
	// does not), else the counts are null too, as in the fleet rows.
	wokeKnown, recorded bool
}

// WokeIdleKnown says whether WokeIdleCPU is known (iowake.WokeKnown).
func (s *IOStats) WokeIdleKnown() bool { return s.wokeKnown }

// MarshalJSON writes woke_idle_cpu and its split by cause as null where
// it is unknown.
func (s IOStats) MarshalJSON() ([]byte, error) {
	type plain IOStats // without this method
	out := struct {
		plain
		// These shadow plain's.
		WokeIdleCPU        *uint64           `json:"woke_idle_cpu"`
		WokeIdleCPUByCause map[string]uint64 `json:"woke_idle_cpu_by_cause"`
		Requests           *uint64           `json:"requests"`
		TaskWaited         *uint64           `json:"task_waited"`
		Errors             *uint64           `json:"errors"`
		WokeIdleUnknown    *uint64           `json:"woke_idle_cpu_unknown"`
	}{plain: plain(s)}
	if s.WokeIdleKnown() {
		out.WokeIdleCPU, out.WokeIdleCPUByCause = &s.WokeIdleCPU, s.WokeIdleCPUByCause
	}
	if s.recorded {
		out.Requests, out.Errors, out.WokeIdleUnknown = &s.Requests, &s.Errors, &s.WokeIdleUnknown
		if s.TaskLatencyNs != nil {
			out.TaskWaited = &s.TaskWaited
		}
	}
	return json.Marshal(out)
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
	// KernelCompletedRange bounds the kernel's count where a snapshot's
	// reads of the device did not hold still (steady IO:
	// trace.BlockCounter.Unsettled); null where both did and
	// KernelCompleted is exact.
	KernelCompletedRange *[2]uint64 `json:"kernel_completed_range,omitempty"`
}

// kernelBounds is the range the kernel's count lies in (ok false: none).
func (d *DeviceStats) kernelBounds() (lo, hi uint64, ok bool) {
	switch {
	case d.KernelCompletedRange != nil:
		return d.KernelCompletedRange[0], d.KernelCompletedRange[1], true
	case d.KernelCompleted != nil:
		return *d.KernelCompleted, *d.KernelCompleted, true
	}
	return 0, 0, false
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
	return FilteredStatsEachPeriod(r, f, nil)
}

// FilteredStatsEachPeriod is FilteredStatsFromReader with each idle period
// counted also passed to eachPeriod (StatsBuilder.OnPeriod; nil: none).
func FilteredStatsEachPeriod(r *trace.Reader, f trace.IOFilter, eachPeriod func(p *trace.IdlePeriod)) (*Stats, error) {
	b := NewStatsBuilder(r.Meta, r.End)
	b.SetIOFilter(f)
	b.OnPeriod(eachPeriod)
	if err := r.Scan(b.Visitor()); err != nil { // loss records come with the scan
		return nil, err
	}
	// The chunks stats does not read (haltpoll, PM QoS) are checked all
	// the same: their damage is the file's, as info says it.
	if err := r.Verify(); err != nil {
		return nil, err
	}
	s := b.Finish(nil)
	s.Damage = r.Damage()
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
