package trace

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Metadata is written as the first chunk of every trace file: what was
// recorded, on which machine, with which idle configuration.
type Metadata struct {
	FormatVersion   int    `json:"format_version"`
	ToolVersion     string `json:"tool_version"`
	BPFObjectSHA256 string `json:"bpf_object_sha256"`

	KernelRelease string `json:"kernel_release"` // uname -r
	KernelVersion string `json:"kernel_version"` // uname -v
	HZ            int    `json:"hz"`             // CONFIG_HZ, 0 if unknown
	NoHZ          string `json:"nohz"`           // "idle", "full", "off" or "" if unknown
	CPUModel      string `json:"cpu_model"`
	Hostname      string `json:"hostname"`
	BootID        string `json:"boot_id"`
	NumCPUs       int    `json:"num_cpus"`      // possible CPUs
	RecordedCPUs  []int  `json:"recorded_cpus"` // CPUs whose idle periods were kept, as at the start
	// CameOnline lists the CPUs that came online during a recording of
	// every CPU, which kept their idle periods from then on. The end
	// record names them (End.CameOnline); Reader adds them here, and to
	// States their tables as read at the end where the start had none
	// (intel_idle and acpi_idle keep an offline CPU's, cpuidle-haltpoll
	// does not). RecordedCPUs keeps the start's list: the snapshots'
	// per-CPU instants are in its order.
	CameOnline []int `json:"came_online,omitempty"`

	CPUIdleDriver   string `json:"cpuidle_driver"`   // CPUIdleDriverNone when the kernel has no cpuidle driver; "" when an import does not say
	CPUIdleGovernor string `json:"cpuidle_governor"` // governor at start
	// States holds each CPU's idle-state table as sysfs showed it at start
	// (at the end for a CPU in CameOnline that had none then).
	// Empty when the kernel has no cpuidle driver: it then runs its default
	// idle routine (HLT on x86), which the cpu_idle tracepoint reports as
	// state 1, and keeps no per-state counters.
	States []CPUStates `json:"states"`
	// ExitLatenciesUnknown: the state tables give target residencies but
	// not exit latencies (an imported capture whose header lists only the
	// former): their ExitLatencyNs are not known, not zero.
	ExitLatenciesUnknown bool            `json:"exit_latencies_unknown,omitempty"`
	HaltPoll             *HaltPollParams `json:"haltpoll,omitempty"`
	PMQoS                PMQoS           `json:"pm_qos"`

	BlockDevices []BlockDevice `json:"block_devices"`
	Command      []string      `json:"command,omitempty"`
	WallClock    WallClock     `json:"wall_clock"`
	Clock        string        `json:"clock"`

	// Probes records, per input, how it was attached ("tp_btf",
	// "tracepoint") or why it is missing ("missing: ...").
	Probes map[string]string `json:"probes"`
	// Inputs says which optional inputs the trace carries.
	Inputs Inputs `json:"inputs"`

	Start *Snapshot `json:"start,omitempty"`
}

// Inputs are the optional facts a kernel may or may not let the recorder see.
type Inputs struct {
	WakeCauses   bool `json:"wake_causes"`
	WakeRequests bool `json:"wake_requests"`
	TickState    bool `json:"tick_state"`
	// TickStateBefore: IdlePeriod.TickStoppedBefore is recorded.
	TickStateBefore bool `json:"tick_state_before"`
	NextTimer       bool `json:"next_timer"`
	TickWakeups     bool `json:"tick_wakeups"`
	PollTimeLimit   bool `json:"poll_time_limit"`
	BlockIO         bool `json:"block_io"`
	// TaskIO: block IO records carry the issuing task and, where it
	// waited, when it was woken and ran again (BlockIO.TaskRunNs).
	TaskIO        bool `json:"task_io"`
	HaltPollTrace bool `json:"haltpoll_trace"`
	// PMQoSTrace: changes of the latency constraints during the recording
	// are recorded (PMQoSChange); without it only those in force at the
	// start are known (Metadata.PMQoS).
	PMQoSTrace bool `json:"pm_qos_trace"`
}

// End is written as the last data chunk when a recording finishes in order.
// A file without it was cut short (killed, disk full); its data chunks are
// still readable.
type End struct {
	Snapshot *Snapshot `json:"snapshot"`
	// CameOnline: the CPUs online at the end snapshot that were offline at
	// the start, in a recording of every CPU (so their idle periods were
	// kept from when they came online), each with its state table as sysfs
	// showed it then (none without a cpuidle driver). A CPU that came and
	// went again before the end is not known.
	CameOnline []CPUStates `json:"came_online,omitempty"`
	StopReason string      `json:"stop_reason"` // "duration", "command exited", "signal", "error: ..."; top's "quit", "output closed"
	// Counters from the kernel side at the end of the recording.
	Loss []Loss `json:"loss"`
	// BPF run time per program, from the kernel's BPF statistics when enabled.
	ProgStats []ProgStat `json:"prog_stats,omitempty"`
	// Records the Go side wrote.
	IdlePeriods uint64 `json:"idle_periods"`
	BlockIOs    uint64 `json:"block_ios"`
	// Idle periods still open at stop (the CPU was idle when recording ended).
	OpenPeriods uint64 `json:"open_periods"`
	// IO requests issued but not completed at stop.
	IOInFlight uint64 `json:"io_in_flight"`
	// IOOrphanedAtStop: of those, the ones issued before the end snapshot
	// on a device that had no request in flight at the end snapshot: the
	// kernel completed them, their completion never reached the programs.
	IOOrphanedAtStop uint64 `json:"io_orphaned_at_stop"`
	// UndeliveredReason names the kernel rule that kept raised events from
	// the programs, where one is known.
	UndeliveredReason string `json:"undelivered_reason,omitempty"`
	// CommandExitCode is set when a command was recorded: its exit status,
	// or 128+N when signal N killed it (as a shell's $? says; writers
	// before CommandSignal stored -1 for a killed command).
	CommandExitCode *int `json:"command_exit_code,omitempty"`
	// CommandSignal is the signal that killed the command, nil when it
	// exited (or the writer did not know).
	CommandSignal *int `json:"command_signal,omitempty"`
	// CommandStopped is why the recorder stopped the command itself
	// ("duration" or "signal", the recording's StopReason), "" when it
	// ended on its own: the recorder sends SIGTERM to the command's process
	// group, then SIGKILL after a grace period.
	CommandStopped string `json:"command_stopped,omitempty"`
	// ShortestPollTimeoutNs is the shortest idle period that ended at its
	// poll time limit (PollTimedOut), 0 when none did; nil where the
	// writer did not know it (older files). poll_idle() reads the clock
	// only every so many loops, so no poll times out sooner than this
	// however short its limit: the replay's polls use it as their floor.
	ShortestPollTimeoutNs *uint64 `json:"shortest_poll_timeout_ns,omitempty"`
}

// ProgStat is one BPF program's kernel-side run statistics.
type ProgStat struct {
	Name      string `json:"name"`
	RunCount  uint64 `json:"run_count"`
	RunTimeNs uint64 `json:"run_time_ns"`
	Misses    uint64 `json:"recursion_misses"`
}

// CPUStates is one CPU's idle-state table.
type CPUStates struct {
	CPU    int         `json:"cpu"`
	States []StateInfo `json:"states"`
}

// ExportStatesHeader opens the comment line idletrace's ftrace export
// writes with a CPU's whole state table, which its import reads back.
const ExportStatesHeader = "# idletrace states"

// ExportStateName is a state's name as the export's states line holds it
// (one field of colon-separated parts): blanks, controls, colons,
// percent signs and non-ASCII bytes as %XX, so that "haltpoll idle" comes back as it was
// (idlestat's own table turns blanks into underscores).
func ExportStateName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c == ':' || c == '%' || c >= 0x7f { // (non-ASCII: Unicode blanks split a line's fields too)
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ParseExportStateName reverses ExportStateName; a name without a valid
// escape (an older export's, idlestat's) is taken as it is.
func ParseExportStateName(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		if s[i] == '%' {
			return s
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ExportDriverHeader opens the comment line idletrace's ftrace export
// writes with the recording kernel's cpuidle driver ("none" without one),
// which its import reads back: a table-less trace of a machine without a
// driver then replays as the recording does, not as a capture whose
// table is unknown.
//
//	# idletrace cpuidle driver: none
const ExportDriverHeader = "# idletrace cpuidle driver:"

// ExportGovernorHeader opens the comment line idletrace's ftrace export
// writes with the recording's cpuidle governor, which its import reads
// back.
//
//	# idletrace cpuidle governor: haltpoll
const ExportGovernorHeader = "# idletrace cpuidle governor:"

// ExportHaltPollHeader opens the comment line idletrace's ftrace export
// writes with the haltpoll module's parameters the recording read
// (HaltPollParams, in FormatHaltPoll's words), which its import reads back
// with ParseHaltPoll: a haltpoll what-if on the import then replays the
// recording's window, not the module's defaults.
//
//	# idletrace haltpoll: guest_halt_poll_ns=0 grow=2 shrink=2 grow_start=50000 allow_shrink=true
const ExportHaltPollHeader = "# idletrace haltpoll:"

// ExportRecordingHeader opens the comment lines idletrace's ftrace export
// writes with what its import cannot learn from the events: the kernel
// release, HZ, the host and the CPUs the file lists (an export limited by
// --cpus, so that the import does not take the others for busy
// throughout). ExportRecording gives the fields, which the export spreads
// over lines of this prefix as it does its other comments (idlestat reads
// lines in 256-byte pieces); ExportedRecording.Add reads them back.
//
//	# idletrace recording: kernel=6.18.44 hz=250 host=vm cpus=1,3 dev=254:0:vda
//
// (dev=MAJOR:MINOR:NAME per block device: the text's block events name
// only the numbers.)
const ExportRecordingHeader = "# idletrace recording:"

// exportCPUsPerField bounds the CPUs in one cpus= field, which keeps each
// short enough to share a line.
const exportCPUsPerField = 16

// maxExportedDevices bounds the devices an import takes from a header, as
// the stats builder bounds them (a corrupt header must not grow without
// bound).
const maxExportedDevices = 4096

// ExportRecording is the fields for m with these CPUs listed; a field
// whose value is unknown or not one word is left out, and the CPUs go in
// as many cpus= fields as they need.
func ExportRecording(m *Metadata, cpus []int) []string {
	var f []string
	word := func(s string) bool { return s != "" && len(s) < 100 && ExportWord(s) && !strings.Contains(s, "=") }
	if word(m.KernelRelease) {
		f = append(f, "kernel="+m.KernelRelease)
	}
	if m.HZ > 0 {
		f = append(f, fmt.Sprintf("hz=%d", m.HZ))
	}
	if word(m.Hostname) {
		f = append(f, "host="+m.Hostname)
	}
	for len(cpus) > 0 {
		n := min(len(cpus), exportCPUsPerField)
		s := make([]string, n)
		for i, c := range cpus[:n] {
			s[i] = strconv.Itoa(c)
		}
		f = append(f, "cpus="+strings.Join(s, ","))
		cpus = cpus[n:]
	}
	for _, d := range m.BlockDevices {
		if word(d.Name) {
			f = append(f, fmt.Sprintf("dev=%d:%d:%s", d.Major, d.Minor, d.Name))
		}
	}
	return f
}

// ExportWord says s is one word, as the export's header comment lines
// carry a value: no blank or control character.
func ExportWord(s string) bool {
	for _, c := range s {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// ExportedRecording is what the ExportRecordingHeader lines say.
type ExportedRecording struct {
	KernelRelease string
	HZ            int
	Hostname      string
	CPUs          []int
	BlockDevices  []BlockDevice
}

// Add reads one line's fields (after the header): its CPUs join those of
// the lines before. Fields it does not know, or cannot read, are left
// out, as in any capture.
func (r *ExportedRecording) Add(line string) {
	for _, kv := range strings.Fields(line) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "kernel":
			r.KernelRelease = v
		case "hz":
			if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 10000 {
				r.HZ = n
			}
		case "host":
			r.Hostname = v
		case "cpus":
			for _, c := range strings.Split(v, ",") {
				if n, err := strconv.Atoi(c); err == nil && n >= 0 && n < MaxCPUs && !slices.Contains(r.CPUs, n) {
					r.CPUs = append(r.CPUs, n)
				}
			}
		case "dev":
			parts := strings.SplitN(v, ":", 3)
			if len(parts) != 3 || parts[2] == "" || len(r.BlockDevices) >= maxExportedDevices {
				continue
			}
			major, err1 := strconv.ParseUint(parts[0], 10, 12)
			minor, err2 := strconv.ParseUint(parts[1], 10, 20)
			d := BlockDevice{Name: parts[2], Major: uint32(major), Minor: uint32(minor)}
			if err1 == nil && err2 == nil && !slices.Contains(r.BlockDevices, d) {
				r.BlockDevices = append(r.BlockDevices, d)
			}
		}
	}
}

// FormatHaltPoll gives h as `info` shows it and the export writes it.
func FormatHaltPoll(h *HaltPollParams) string {
	return fmt.Sprintf("guest_halt_poll_ns=%d grow=%d shrink=%d grow_start=%d allow_shrink=%t",
		h.GuestHaltPollNs, h.Grow, h.Shrink, h.GrowStart, h.AllowShrink)
}

// ParseHaltPoll reads what FormatHaltPoll wrote; every field must be there.
func ParseHaltPoll(s string) (*HaltPollParams, error) {
	h := &HaltPollParams{}
	fields := map[string]*uint64{"guest_halt_poll_ns": &h.GuestHaltPollNs, "grow": &h.Grow, "shrink": &h.Shrink, "grow_start": &h.GrowStart}
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		if seen[k] {
			return nil, fmt.Errorf("haltpoll parameters: %s given twice", k)
		}
		seen[k] = true
		if k == "allow_shrink" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("haltpoll parameters: allow_shrink %q", v)
			}
			h.AllowShrink = b
			continue
		}
		dst, ok := fields[k]
		if !ok {
			return nil, fmt.Errorf("haltpoll parameters: unknown %q", f)
		}
		n, err := strconv.ParseUint(v, 10, 32) // the module's are unsigned int
		if err != nil {
			return nil, fmt.Errorf("haltpoll parameters: %s %q", k, v)
		}
		*dst = n
	}
	if len(seen) != len(fields)+1 {
		return nil, fmt.Errorf("haltpoll parameters: %q lacks some of guest_halt_poll_ns, grow, shrink, grow_start, allow_shrink", s)
	}
	return h, nil
}

// ExportQoSHeader opens the comment line idletrace's ftrace export writes
// with the PM QoS limits in force where it begins, in PMQoS's terms, which
// its import reads back:
//
//	# idletrace pm qos: cpu_dma_latency=2000000000 cpu0=-1 cpu1=15
const ExportQoSHeader = "# idletrace pm qos:"

// StateInfo is one idle state as /sys/devices/system/cpu/cpuN/cpuidle/stateM shows it.
type StateInfo struct {
	Index             int    `json:"index"`
	Name              string `json:"name"`
	Desc              string `json:"desc"`
	ExitLatencyNs     uint64 `json:"exit_latency_ns"`
	TargetResidencyNs uint64 `json:"target_residency_ns"`
	Disabled          bool   `json:"disabled"`
	DefaultOff        bool   `json:"default_off"`
	Polling           bool   `json:"polling"` // CPUIDLE_FLAG_POLLING (name POLL on x86)
}

// HaltPollParams are the haltpoll governor's module parameters.
type HaltPollParams struct {
	GuestHaltPollNs uint64 `json:"guest_halt_poll_ns"`
	Grow            uint64 `json:"guest_halt_poll_grow"`
	Shrink          uint64 `json:"guest_halt_poll_shrink"`
	GrowStart       uint64 `json:"guest_halt_poll_grow_start"`
	AllowShrink     bool   `json:"guest_halt_poll_allow_shrink"`
}

// PMQoS holds the latency constraints in force at start.
type PMQoS struct {
	// CPUDMALatencyUs is the global CPU latency QoS (/dev/cpu_dma_latency);
	// -1 when it could not be read.
	CPUDMALatencyUs int64 `json:"cpu_dma_latency_us"`
	// ResumeLatencyUs per CPU from power/pm_qos_resume_latency_us: "n/a" is
	// stored as 0 (the kernel's meaning), no constraint as -1.
	ResumeLatencyUs []int64 `json:"resume_latency_us"`
}

// BlockDevice is one disk present at start.
type BlockDevice struct {
	Name  string `json:"name"`
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
}

// Dev is the kernel dev_t (major<<20 | minor), as BlockIO.Dev holds it.
func (d BlockDevice) Dev() uint32 { return d.Major<<20 | d.Minor }

// ImportedClockPrefix opens an imported capture's Clock.
const ImportedClockPrefix = "imported from "

// Imported says whether the trace is an imported capture (idletrace
// import), whose knobs (disabled states, a table's figures) may come from
// import --profile rather than from the machine.
func (m *Metadata) Imported() bool { return strings.HasPrefix(m.Clock, ImportedClockPrefix) }

// RecordsCPU says whether the recording kept cpu's idle periods: every
// CPU where RecordedCPUs lists none; else those it lists and those that
// came online during it.
func (m *Metadata) RecordsCPU(cpu int) bool {
	return len(m.RecordedCPUs) == 0 || slices.Contains(m.RecordedCPUs, cpu) || slices.Contains(m.CameOnline, cpu)
}

// RecordedCPUList is the CPUs the recording kept, sorted: RecordedCPUs and
// CameOnline (nil where RecordedCPUs lists none: every CPU).
func (m *Metadata) RecordedCPUList() []int {
	if len(m.RecordedCPUs) == 0 {
		return nil
	}
	out := append(slices.Clone(m.RecordedCPUs), m.CameOnline...)
	slices.Sort(out)
	return slices.Compact(out)
}

// AddCameOnline takes in the CPUs an end record says came online during the
// recording (End.CameOnline): each joins CameOnline, and its state table
// joins States where the start gave it none. Taking the same list twice
// changes nothing.
func (m *Metadata) AddCameOnline(cpus []CPUStates) {
	for _, c := range cpus {
		if c.CPU < 0 || c.CPU >= MaxCPUs || slices.Contains(m.RecordedCPUs, c.CPU) {
			continue // not a CPU the start left out
		}
		if !slices.Contains(m.CameOnline, c.CPU) {
			m.CameOnline = append(m.CameOnline, c.CPU)
		}
		if len(c.States) > 0 && !slices.ContainsFunc(m.States, func(s CPUStates) bool { return s.CPU == c.CPU }) {
			m.States = append(m.States, c)
		}
	}
	slices.Sort(m.CameOnline)
}

// CPUSet is a set of CPU numbers, read per record: RecordedCPUSet's.
type CPUSet struct {
	all bool
	in  []bool
}

// Has says whether cpu is in the set.
func (s CPUSet) Has(cpu uint32) bool { return s.all || int64(cpu) < int64(len(s.in)) && s.in[cpu] }

// RecordedCPUSet is RecordsCPU as a set.
func (m *Metadata) RecordedCPUSet() CPUSet {
	if len(m.RecordedCPUs) == 0 {
		return CPUSet{all: true}
	}
	var s CPUSet
	for _, c := range m.RecordedCPUList() {
		if c < 0 || c >= MaxCPUs {
			continue
		}
		for c >= len(s.in) {
			s.in = append(s.in, false)
		}
		s.in[c] = true
	}
	return s
}

// WallClock pairs one monotonic instant with the wall-clock time at that instant.
type WallClock struct {
	MonotonicNs uint64 `json:"monotonic_ns"`
	UnixNs      int64  `json:"unix_ns"`
}

// Snapshot is the kernel's own counters at one instant.
type Snapshot struct {
	MonotonicNs uint64         `json:"monotonic_ns"`
	CPUIdle     []CPUCounters  `json:"cpuidle"`
	Block       []BlockCounter `json:"block"`
	// Per-CPU window bounds: each CPU's counters were read at its own instant
	// (from a thread pinned to that CPU) so the window is exact per CPU.
	CPUTimeNs []uint64 `json:"cpu_time_ns,omitempty"`
	// IOUnmatched is the recorder's count, read between the instant and
	// Block's read (the second of the pair around the instant), of IO
	// completions whose issue it did not see (requests issued before it
	// attached): they are in the kernel's counts but not in the trace.
	IOUnmatched uint64 `json:"io_unmatched"`
	// IOCompletions is the recorder's count of completions seen, read with IOUnmatched.
	IOCompletions uint64 `json:"io_completions"`
	// IOOrphaned is the recorder's count of requests whose completion never
	// reached its programs, read with IOUnmatched.
	IOOrphaned uint64 `json:"io_orphaned"`
	// Tick: each CPU's tick_sched counters from /proc/timer_list, read
	// once while every CPU is held at its instant; nil where they could
	// not be read (not root, a kernel without CONFIG_TICK_ONESHOT, traces
	// from before them).
	Tick []TickCounters `json:"tick,omitempty"`
	// TickReadStartNs and TickReadEndNs bound the read of Tick
	// (CLOCK_MONOTONIC). The hold can fail: the Go runtime may park a
	// held thread, and its CPU then idles after its instant; the kernel
	// counts such a period's tick stop at this snapshot, the trace after
	// it. TickHold gives each CPU's span. Zero in traces from before them.
	TickReadStartNs uint64 `json:"tick_read_start_ns,omitempty"`
	TickReadEndNs   uint64 `json:"tick_read_end_ns,omitempty"`
	// IORaised: the block tracepoints as the kernel raised them beside the
	// runs of the recorder's programs on them, read at the same instant;
	// nil where they could not be counted (no tracefs, classic
	// tracepoints, --no-io).
	IORaised *IORaised `json:"io_raised,omitempty"`
}

// IORaised counts block_rq_issue and block_rq_complete as the kernel raised
// them (perf counting events on every CPU) and the runs of the recorder's
// programs on them. The differences are events the kernel raised without
// running the programs.
type IORaised struct {
	Issues         uint64 `json:"issues"`
	IssueRuns      uint64 `json:"issue_runs"`
	Completions    uint64 `json:"completions"`
	CompletionRuns uint64 `json:"completion_runs"`
}

// undeliveredSince is how many issues and completions the kernel raised
// without running the programs between the snapshots of r0 and r. ok is
// false when the programs ran more often than perf counted: something else
// hid events from perf (another tracer's classic BPF program that returns 0
// drops them for every perf user), and the difference means nothing.
func (r *IORaised) undeliveredSince(r0 *IORaised) (issues, completions uint64, ok bool) {
	raisedI, runsI := subFloor(r.Issues, r0.Issues), subFloor(r.IssueRuns, r0.IssueRuns)
	raisedC, runsC := subFloor(r.Completions, r0.Completions), subFloor(r.CompletionRuns, r0.CompletionRuns)
	if runsI > raisedI || runsC > raisedC {
		return 0, 0, false
	}
	return raisedI - runsI, raisedC - runsC, true
}

// CPUCounters are one CPU's cpuidle counters.
type CPUCounters struct {
	CPU    int             `json:"cpu"`
	States []StateCounters `json:"states"`
	// DeviceIno is the inode of the CPU's cpuidle sysfs directory when the
	// counters were read. A driver that unregisters a CPU's cpuidle device
	// when it goes offline (cpuidle-haltpoll; intel_idle and acpi_idle keep
	// it) registers it afresh when it comes back, with counters from zero
	// and a directory sysfs (kernfs) numbers anew: two snapshots with
	// different inodes have counters of two registrations, which no delta
	// compares. 0: not read (traces from before it, or the CPU offline).
	DeviceIno uint64 `json:"device_ino,omitempty"`
}

// SameDevice says whether the counters in c and d come from one
// registration of the CPU's cpuidle device (DeviceIno), true where either
// does not say.
func (c *CPUCounters) SameDevice(d *CPUCounters) bool {
	return c.DeviceIno == 0 || d.DeviceIno == 0 || c.DeviceIno == d.DeviceIno
}

// Counters is cpu's cpuidle counters in s; nil where s (or s itself) has
// none.
func (s *Snapshot) Counters(cpu int) *CPUCounters {
	if s == nil {
		return nil
	}
	for i := range s.CPUIdle {
		if s.CPUIdle[i].CPU == cpu {
			return &s.CPUIdle[i]
		}
	}
	return nil
}

// CountersApart says why one CPU's counters at the start and at the end
// give no delta, "" where they do: the CPU was offline at one (the
// recorder reads every CPU it records at both; an offline one has no
// cpuidle directory, so no states), or its device was registered afresh
// in between (SameDevice).
func CountersApart(start, end *CPUCounters) string {
	switch {
	case start == nil || len(start.States) == 0 && end != nil && len(end.States) > 0:
		return OfflineAtStart
	case end == nil || len(end.States) == 0 && len(start.States) > 0:
		return OfflineAtEnd
	case !start.SameDevice(end):
		return CountersRestarted
	}
	return ""
}

// CountersApart's reasons.
const (
	OfflineAtStart    = "offline at the start snapshot"
	OfflineAtEnd      = "offline at the end snapshot"
	CountersRestarted = "counters restarted: went offline and back (CPU hotplug)"
)

// TickCounters are one CPU's idle_calls and idle_sleeps as
// /proc/timer_list shows them (struct tick_sched,
// kernel/time/tick-sched.c): the idle loop's attempts to stop the tick,
// and those that left it stopped or tried to (since 6.9 a timer base that
// will not go idle keeps the tick running after the count).
type TickCounters struct {
	CPU        int    `json:"cpu"`
	IdleCalls  uint64 `json:"idle_calls"`
	IdleSleeps uint64 `json:"idle_sleeps"`
}

// StateCounters are /sys/devices/system/cpu/cpuN/cpuidle/stateM/{usage,time,above,below,rejected}.
type StateCounters struct {
	Index    int    `json:"index"`
	Usage    uint64 `json:"usage"`
	TimeUs   uint64 `json:"time_us"`
	Above    uint64 `json:"above"`
	Below    uint64 `json:"below"`
	Rejected uint64 `json:"rejected"`
}

// BlockCounter is one /sys/block/DEV/stat line.
type BlockCounter struct {
	Name  string   `json:"name"`
	Stat  []uint64 `json:"stat"` // the fields in kernel order (Documentation/block/stat.rst)
	Major uint32   `json:"major"`
	Minor uint32   `json:"minor"`
	// Unsettled is how many completions the kernel counted between the
	// read before the snapshot's instant and this one, where no pair of
	// reads held still (steady IO of thousands of requests a second):
	// the count at the instant lies in [Completed()-Unsettled,
	// Completed()]. 0: exact.
	Unsettled uint64 `json:"unsettled,omitempty"`
}

// BlockCompletedIn bounds the requests the kernel completed between two
// snapshots' reads of one device: exact (lo == hi) where both held still.
func BlockCompletedIn(start, end BlockCounter) (lo, hi uint64) {
	s, e := start.Completed(), end.Completed()
	return subFloor(e, s+end.Unsettled), subFloor(e, subFloor(s, start.Unsettled))
}

// BlockInFlight is the number of requests the kernel had in flight at the
// snapshot, over every device (field 9 of /sys/block/DEV/stat).
func (s *Snapshot) BlockInFlight() uint64 {
	var n uint64
	for _, b := range s.Block {
		if len(b.Stat) > 8 {
			n += b.Stat[8]
		}
	}
	return n
}

// Completed is the number of requests the kernel counted as completed: reads,
// writes, discards and flushes (fields 1, 5, 12 and 16 of /sys/block/DEV/stat).
// Merged bios are not requests and are not counted.
func (b BlockCounter) Completed() uint64 {
	var n uint64
	for _, i := range []int{0, 4, 11, 15} {
		if i < len(b.Stat) {
			n += b.Stat[i]
		}
	}
	return n
}

// IOUndelivered is how many completed requests, inside the snapshot window,
// the kernel counted in /sys/block/DEV/stat without the trace holding them:
// completions of requests issued before the recording (unmatched) and
// requests whose issue or completion the kernel never delivered to the BPF
// programs (orphaned: counted exactly where the snapshots carry IORaised,
// else found as issues left waiting). An issue skipped (the kernel's
// recursion guard: a block_rq_issue nested in another on the same CPU,
// seen on 7.3) loses its request as surely as a completion skipped. ok is false when the
// snapshots needed are missing.
func IOUndelivered(start *Snapshot, end *End) (unmatched, orphaned uint64, ok bool) {
	if start == nil || end == nil || end.Snapshot == nil {
		return 0, 0, false
	}
	unmatched = subFloor(end.Snapshot.IOUnmatched, start.IOUnmatched)
	if r0, r1 := start.IORaised, end.Snapshot.IORaised; r0 != nil && r1 != nil {
		if issues, completions, measured := r1.undeliveredSince(r0); measured {
			// A skipped issue's completion found no issue: the snapshots
			// counted it unmatched, which here means issued before the
			// recording. It moves to the undelivered.
			return unmatched - min(issues, unmatched), issues + completions, true
		}
	}
	return unmatched, subFloor(end.Snapshot.IOOrphaned, start.IOOrphaned) + end.IOOrphanedAtStop, true
}

// subFloor is a - b, or 0 where b is larger (counters read at two instants).
func subFloor(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// CPUIndex is where cpu's entries are in CPUTimeNs: CPUIdle's order (the
// recorder writes them in parallel), or the recorded CPU list's where
// CPUIdle is empty; -1 where the snapshot does not list it.
func (s *Snapshot) CPUIndex(cpu int, recorded []int) int {
	if s == nil {
		return -1
	}
	for i := range s.CPUIdle {
		if s.CPUIdle[i].CPU == cpu {
			return i
		}
	}
	if len(s.CPUIdle) == 0 && len(s.CPUTimeNs) == len(recorded) {
		return slices.Index(recorded, cpu)
	}
	return -1
}

// TickHold is the span in which cpu's tick counters were to hold still:
// from its instant to the end of the counters' read. An idle period the
// trace shows entered on it in this span slipped past the hold: the kernel
// may count its tick stop on this snapshot's side. ok is false where the
// snapshot does not say (traces from before the read's instants, a CPU its
// thread could not be pinned to).
func (s *Snapshot) TickHold(cpu int, recorded []int) (fromNs, toNs uint64, ok bool) {
	i := s.CPUIndex(cpu, recorded)
	if i < 0 || i >= len(s.CPUTimeNs) || s.CPUTimeNs[i] == 0 || s.TickReadEndNs == 0 {
		return 0, 0, false
	}
	return s.CPUTimeNs[i], s.TickReadEndNs, true
}

// SnapshotWindow is the span (startNs, endNs] of CLOCK_MONOTONIC between
// the start and end snapshots: the kernel's block counters cover what
// completed in it, so IO figures that are compared with them (stats, and
// whatif's, which must agree with stats) count it only. A missing snapshot
// leaves its side open.
func SnapshotWindow(meta *Metadata, end *End) (startNs, endNs uint64) {
	endNs = math.MaxUint64
	if meta != nil && meta.Start != nil {
		startNs = meta.Start.MonotonicNs
	}
	if end != nil && end.Snapshot != nil {
		endNs = end.Snapshot.MonotonicNs
	}
	return startNs, endNs
}

// CPUIdleDriverNone is what sysfs's current_driver reads, and the trace
// keeps, when the kernel has no cpuidle driver.
const CPUIdleDriverNone = "none"

// NoCPUIdleDriver says the recording kernel had no cpuidle driver: no
// governor ran, no state table, no per-state counters; it idled in its
// default routine. False for an import that does not say which driver ran.
func (m *Metadata) NoCPUIdleDriver() bool { return m.CPUIdleDriver == CPUIdleDriverNone }

// HaltPollRan says the haltpoll governor chose the recording's idle states
// (sysfs names a governor without a driver too, where none runs).
func (m *Metadata) HaltPollRan() bool { return m.CPUIdleGovernor == "haltpoll" && !m.NoCPUIdleDriver() }

// TableCPU is the state table a report shows for the machine: the first
// recorded CPU's (a --cpus 1 recording's is CPU 1's, not CPU 0's, which
// it did not record), else CPU 0's, else the first listed. The zero
// CPUStates where the trace has no table.
func (m *Metadata) TableCPU() CPUStates {
	if len(m.States) == 0 {
		return CPUStates{}
	}
	for _, want := range append(slices.Clone(m.RecordedCPUs), 0) {
		for _, c := range m.States {
			if c.CPU == want {
				return c
			}
		}
	}
	return m.States[0]
}
