// Package trace owns the idletrace trace file: the record types every other
// package reads, the metadata that makes a file self-describing, and the
// chunked writer and reader (format v1, see format.go).
package trace

import "fmt"

// Times are nanoseconds of CLOCK_MONOTONIC (bpf_ktime_get_ns), one clock for
// the whole trace; Metadata.WallClock anchors it to wall-clock time.

// Tristate is a fact the recorder may or may not have been able to observe.
// Unknown is never folded into false: a kernel that does not expose an input
// must not look like one that says "no".
type Tristate uint8

const (
	Unknown Tristate = iota
	No
	Yes
)

func (t Tristate) String() string {
	switch t {
	case No:
		return "no"
	case Yes:
		return "yes"
	}
	return "unknown"
}

// TristateOf turns a known boolean into a Tristate.
func TristateOf(b bool) Tristate {
	if b {
		return Yes
	}
	return No
}

// WakeCause says what ended an idle period. Values are shared with the BPF
// header (bpf/idletrace.h, enum wake_cause) and stored in trace files: append,
// never renumber.
type WakeCause uint8

const (
	WakeUnknown     WakeCause = 0 // nothing observed (e.g. a spurious HLT exit)
	WakeTimer       WakeCause = 1 // local timer interrupt that did not run the tick
	WakeTick        WakeCause = 2 // local timer interrupt that ran the scheduler tick
	WakeIRQ         WakeCause = 3 // device interrupt; IdlePeriod.WakeIRQ holds its number
	WakeIPIResched  WakeCause = 4 // reschedule IPI
	WakeIPICall     WakeCause = 5 // function-call IPI (single or many)
	WakeRemoteNoIPI WakeCause = 6 // a remote CPU set need_resched on a polling CPU, no IPI
	WakePollTimeout WakeCause = 7 // a polling state ran out of its time limit
	wakeCauseCount            = 8
)

var wakeCauseNames = [wakeCauseCount]string{"unknown", "timer", "tick", "irq", "ipi-resched", "ipi-call", "remote-no-ipi", "poll-timeout"}

func (c WakeCause) String() string {
	if int(c) < len(wakeCauseNames) {
		return wakeCauseNames[c]
	}
	return "invalid"
}

// WakeCauses lists every cause in a stable order, for reports.
func WakeCauses() []WakeCause {
	out := make([]WakeCause, wakeCauseCount)
	for i := range out {
		out[i] = WakeCause(i)
	}
	return out
}

// IdlePeriod is one entry into an idle state and the matching exit, paired in
// the kernel.
type IdlePeriod struct {
	// Fields are grouped by size (8-, 4-, then 1-byte) to keep the struct,
	// which readers copy per period, small.
	EntryNs uint64
	ExitNs  uint64

	// WakeRequestNs is when a remote CPU asked this CPU to wake (sched_waking
	// with this CPU as target, an IPI send, or a no-IPI wake of a polling CPU)
	// while it was idle; 0 when no remote request was seen.
	WakeRequestNs uint64

	// NextTimerNs is the sleep length the governor got from
	// tick_nohz_get_sleep_length(): the time to the next timer event were
	// the tick stopped, measured from the kernel's idle entry time
	// (tick_sched.idle_entrytime, at or a little before EntryNs); negative
	// when already due. Valid only when NextTimerKnown. Traces from before
	// NextEventNs existed hold the next timer-wheel or tick expiry from
	// EntryNs instead.
	NextTimerNs int64
	// NextEventNs is the governor's other input from the same call,
	// delta_next: the time to the next clock event, the tick included, from
	// the same idle entry time. Valid only when NextEventKnown.
	NextEventNs int64

	// KernelResidencyNs: see KernelKnown.
	KernelResidencyNs uint64

	CPU     uint32
	State   uint32 // cpuidle driver state index (0 is POLL on x86 with a driver)
	WakeIRQ int32  // device IRQ number when WakeCause == WakeIRQ, else -1

	// NrIOWait is the number of tasks in iowait on this CPU's runqueue at
	// entry (nr_iowait_cpu(), which menu before 6.13 weighs); -1 unknown.
	NrIOWait int32

	WakeCause      WakeCause
	NextTimerKnown bool
	NextEventKnown bool

	// TickStopped: the scheduler tick was stopped when this period was
	// entered, after the governor's decision for it.
	TickStopped Tristate
	// TickStoppedBefore: the tick was already stopped when the governor
	// made that decision (the governors' tick_nohz_tick_stopped() input):
	// an earlier iteration of the same idle episode had stopped it.
	TickStoppedBefore Tristate
	// KernelKnown: the cpuidle core's own per-state counters were read
	// around the period. KernelCounted: they counted it (one use of State)
	// with KernelResidencyNs, the core's measure from its clock reads just
	// inside the two tracepoints. Known but not counted: a period outside
	// cpuidle_enter_state (cpu_idle_poll) or an entry the driver rejected.
	KernelKnown   bool
	KernelCounted bool

	// AbortedBefore: the idle loop's attempt just before this period was
	// aborted after the governor had chosen (need_resched, or the driver
	// refused the state): the cpuidle core's last_residency_ns was 0 at
	// entry. Meaningful only with KernelKnown.
	AbortedBefore bool
	// AbortsBefore counts those aborted attempts since the previous period
	// on the CPU, where the menu governor's interval pointer shows them;
	// -1 unknown.
	AbortsBefore int8

	// GotTick: the kernel's got_idle_tick at the exit: the tick ran on this
	// CPU in the idle loop since the governor's previous reflect, even if
	// it did not end the period (tick_nohz_idle_got_tick()).
	GotTick Tristate

	// PollTimedOut: a polling state ended on its time limit (dev->poll_time_limit).
	// Unknown for non-polling states and where the kernel's field is not readable.
	PollTimedOut Tristate

	// IdleLoopEntry: the first period since the CPU entered the idle loop
	// (the idle task ran something else since the previous period's
	// entry). Leaving the loop restarts a stopped tick, so a governor's
	// stop_tick carries from one period to the next only when this is No.
	IdleLoopEntry Tristate
	// TickStoppable: the kernel would have stopped the tick at this entry
	// had the governor asked (tick_nohz_next_event() found no timer-wheel
	// timer within a tick and nothing else needing it), or it was stopped.
	TickStoppable Tristate
}

// ResidencyNs is the traced time in the state: from the cpu_idle entry
// record to the exit record (the exit latency included). The cpuidle
// core's own measure, which its counters add up, is Residency.
func (p *IdlePeriod) ResidencyNs() uint64 {
	if p.ExitNs < p.EntryNs {
		return 0
	}
	return p.ExitNs - p.EntryNs
}

// PollTimeoutNs is how long a poll that ended at its time limit lasted,
// and whether this period was one (End.ShortestPollTimeoutNs is the
// shortest of them).
func (p *IdlePeriod) PollTimeoutNs() (uint64, bool) {
	if p.PollTimedOut != Yes || p.ExitNs < p.EntryNs {
		return 0, false
	}
	return p.ExitNs - p.EntryNs, true
}

// Residency is the time in the state as the kernel's counters count it:
// the cpuidle core's own measure where the trace has it, else ResidencyNs.
// counted is false for an entry the kernel rejected (not in its usage).
func (p *IdlePeriod) Residency() (ns uint64, counted bool) {
	switch {
	case p.KernelCounted:
		return p.KernelResidencyNs, true
	case p.KernelKnown:
		return p.ResidencyNs(), false
	}
	return p.ResidencyNs(), true
}

// IsRemoteWake says the period ended because another CPU woke this one.
func (c WakeCause) IsRemoteWake() bool {
	return c == WakeIPIResched || c == WakeIPICall || c == WakeRemoteNoIPI
}

// RequestedBeforeEntry says a remote wake ended the period whose request
// came before the idle entry: an IPI sent just before it and served only
// after (a guest's IPIs go through the host), with nothing asked while
// idle. Its wake-up took the state's exit latency and the rest of the IPI's
// delivery, so no wake latency of the state is measured from it.
func (p *IdlePeriod) RequestedBeforeEntry() bool {
	return p.WakeCause.IsRemoteWake() && p.WakeRequestNs != 0 && p.WakeRequestNs < p.EntryNs
}

// WakeLatencyNs is the measured time from a remote wake request to the idle
// exit, and whether there was one. Only periods that a remote wake ended
// count: a sched_waking aimed at this CPU may have placed the task elsewhere.
func (p *IdlePeriod) WakeLatencyNs() (uint64, bool) {
	if !p.WakeCause.IsRemoteWake() || p.WakeRequestNs == 0 || p.WakeRequestNs > p.ExitNs || p.WakeRequestNs < p.EntryNs {
		return 0, false
	}
	return p.ExitNs - p.WakeRequestNs, true
}

// Block request operations (the low byte of the kernel's cmd_flags, REQ_OP_*).
const (
	OpRead        = 0
	OpWrite       = 1
	OpFlush       = 2
	OpDiscard     = 3
	OpSecureErase = 5
	OpMask        = 0xff // the operation's part of cmd_flags
)

// The cmd_flags bits the kernel's rwbs string shows (blk_fill_rwbs;
// include/linux/blk_types.h, enum req_flag_bits: the same bits from 4.10
// on), for the exporter that writes rwbs and the importer that reads it.
const (
	ReqSync     = 1 << 11
	ReqMeta     = 1 << 12
	ReqFUA      = 1 << 17
	ReqPreflush = 1 << 18
	ReqRahead   = 1 << 19
)

// BlockIO is one block request from issue to its final completion, paired in
// the kernel.
type BlockIO struct {
	Dev         uint32 // kernel dev_t: major<<20 | minor
	Sector      uint64
	Bytes       uint32
	Op          uint8  // REQ_OP_* (OpRead, OpWrite, ...)
	CmdFlags    uint32 // full cmd_flags as the kernel had them at issue
	IssueNs     uint64
	CompleteNs  uint64
	IssueCPU    uint32
	CompleteCPU uint32
	Error       int32 // blk_status_t at completion, 0 = ok
	// The task current at issue (the process for synchronous IO, a
	// kworker where the block layer issued later); Tid 0: not recorded.
	Tid, Tgid uint32
	Comm      string
	// Where the issuing task waited for this completion: when it was
	// woken (0: not woken after it, so it had not waited) and when and
	// where it ran again (TaskRunNs 0: not seen).
	TaskWokenNs uint64
	TaskRunNs   uint64
	TaskCPU     uint32
}

// LatencyNs is issue to completion.
func (b *BlockIO) LatencyNs() uint64 {
	if b.CompleteNs < b.IssueNs {
		return 0
	}
	return b.CompleteNs - b.IssueNs
}

// DevMajor and DevMinor split the kernel dev_t.
func (b *BlockIO) DevMajor() uint32 { return b.Dev >> 20 }
func (b *BlockIO) DevMinor() uint32 { return b.Dev & (1<<20 - 1) }

// HaltPollChange is one power:guest_halt_poll_ns event: haltpoll's poll window
// on CPU grew or shrank.
type HaltPollChange struct {
	TimeNs uint64
	CPU    uint32
	Grow   bool
	NewNs  uint32
	OldNs  uint32
}

// PMQoSChange is a change of a latency constraint the cpuidle governors
// obey (cpuidle_governor_latency_req takes the smaller of the two): the
// global CPU latency QoS (/dev/cpu_dma_latency), or one CPU's resume
// latency (power/pm_qos_resume_latency_us, and requests drivers make).
type PMQoSChange struct {
	TimeNs uint64 `json:"time_ns"`
	// CPU is the CPU whose resume latency changed; PMQoSGlobal for the
	// global limit.
	CPU int32 `json:"cpu"`
	// LimitUs and PrevUs are the constraint's value after and before, in
	// µs and in PMQoS's terms: the global limit as the kernel holds it
	// (PMQoSNoGlobalLimitUs: none); a CPU's -1 for none and 0 for "n/a"
	// (no state's exit latency fits; only polling).
	LimitUs int64 `json:"limit_us"`
	PrevUs  int64 `json:"previous_limit_us"`
	// Action is what the request did: PMQoSAdd, PMQoSUpdate or PMQoSRemove.
	Action uint8 `json:"action"`
	// Tid is the task that made the request (0: unknown).
	Tid uint32 `json:"tid"`
}

// PMQoSChange targets and actions.
const (
	PMQoSGlobal = -1

	PMQoSAdd    = 0
	PMQoSUpdate = 1
	PMQoSRemove = 2

	// PMQoSNoGlobalLimitUs is the global limit without requests
	// (PM_QOS_CPU_LATENCY_DEFAULT_VALUE).
	PMQoSNoGlobalLimitUs = 2000000000
	// PMQoSNoCPULimit is a CPU's resume latency without a constraint as
	// the kernel holds it (PM_QOS_RESUME_LATENCY_NO_CONSTRAINT, S32_MAX).
	PMQoSNoCPULimit = 1<<31 - 1
)

// PMQoSFromKernel is a constraint's value as pm_qos_update_target gives
// it, in PMQoSChange's terms: a CPU's "no constraint" becomes -1; a
// negative global limit (a request written as one: the core maps only -1
// to the default) acts as 0 and is stored so.
func PMQoSFromKernel(cpu int32, v int64) int64 {
	switch {
	case cpu >= 0 && v == PMQoSNoCPULimit:
		return -1
	case cpu < 0:
		return max(v, 0)
	}
	return v
}

// PMQoSToKernel is PMQoSFromKernel's inverse: the value the kernel's
// events print.
func PMQoSToKernel(cpu int32, v int64) int64 {
	if cpu >= 0 && v < 0 {
		return PMQoSNoCPULimit
	}
	return v
}

// Loss holds cumulative per-CPU counters of records the kernel side could not
// deliver. The last Loss seen for a CPU in a file is the total for that CPU.
type Loss struct {
	CPU uint32
	// Ring-buffer reservations that failed, by record kind.
	IdleLost, IOLost, OtherLost uint64
	// IO completions whose issue was not seen (started before the recording
	// or evicted from the in-kernel pairing table): counted, never invented.
	IOUnmatched uint64
	// IO issues that did not fit the in-kernel pairing table: their
	// completions are counted in IOUnmatched too.
	IOTableFull uint64
	// IOCompletions counts every final completion the recorder saw, paired
	// with its issue or not.
	IOCompletions uint64
	// IOOrphaned counts issues whose completion never reached the BPF
	// programs (the kernel completed the request, its tracepoint did not
	// run them): found when a request with the same key (device, sector
	// and, with tp_btf, the request itself) is issued again; one never
	// reissued is counted at stop (End.IOOrphanedAtStop).
	IOOrphaned uint64
	// IdleUnpaired counts cpu_idle events that never reached the programs
	// (an entry while a period was open, an exit with none open).
	IdleUnpaired uint64
	// IOUnissued: of IOUnmatched, completions of requests allocated after
	// the programs were attached, so not in flight at start: the block
	// layer completed them without issuing them itself (the original
	// request of a flush sequence; its flush_rq is issued and completed,
	// and recorded, in its place). Zero where unknown (classic tracepoint).
	IOUnissued uint64
}

// Max is each counter's larger value of l and o (the counters only grow,
// so this merges two reports of the same CPU into the later one).
func (l Loss) Max(o Loss) Loss {
	return Loss{CPU: l.CPU, IdleLost: max(l.IdleLost, o.IdleLost), IOLost: max(l.IOLost, o.IOLost), OtherLost: max(l.OtherLost, o.OtherLost),
		IOUnmatched: max(l.IOUnmatched, o.IOUnmatched), IOTableFull: max(l.IOTableFull, o.IOTableFull), IOCompletions: max(l.IOCompletions, o.IOCompletions),
		IOOrphaned: max(l.IOOrphaned, o.IOOrphaned), IdleUnpaired: max(l.IdleUnpaired, o.IdleUnpaired), IOUnissued: max(l.IOUnissued, o.IOUnissued)}
}

// Total is every record lost on this CPU: ring-buffer reservations that
// failed and events the kernel never delivered to the programs.
func (l *Loss) Total() uint64 { return l.RingLost() + l.Undelivered() }

// RingLost counts records dropped because the ring buffer was full: the
// recorder's own loss, which a larger ring or a faster reader removes.
func (l *Loss) RingLost() uint64 { return l.IdleLost + l.IOLost + l.OtherLost }

// Undelivered counts events the kernel raised without running the
// programs attached to them.
func (l *Loss) Undelivered() uint64 { return l.IOOrphaned + l.IdleUnpaired }

// String is the value for people: "none", microseconds, or a CPU's 0 µs
// with the "n/a" its sysfs file shows (PMQoSCPUPollOnly).
func (q *PMQoSChange) String() string { return PMQoSLimitString(q.CPU, q.LimitUs) }

// PMQoSCPUPollOnly spells a CPU's resume latency of 0, which sysfs shows
// as "n/a": no state's exit latency fits, so the CPU only polls.
const PMQoSCPUPollOnly = "0 µs (n/a: polling only)"

// PMQoSLimitString spells a limit of target cpu (PMQoSGlobal or a CPU) in
// PMQoSChange's terms; a negative global limit is Metadata.PMQoS's
// "could not be read" (the kernel's never is).
func PMQoSLimitString(cpu int32, us int64) string {
	switch {
	case cpu == PMQoSGlobal && us < 0:
		return "unknown"
	case cpu == PMQoSGlobal && us >= PMQoSNoGlobalLimitUs, cpu != PMQoSGlobal && us < 0:
		return "none"
	case cpu != PMQoSGlobal && us == 0: // sysfs's "n/a", which reads like "none" but is the strictest
		return PMQoSCPUPollOnly
	}
	return fmt.Sprintf("%d µs", us)
}
