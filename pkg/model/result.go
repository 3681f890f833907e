package model

import "github.com/idletrace/idletrace/pkg/latency"

// Result is what one policy would have cost over a trace. Field meanings and
// JSON names are the contract in docs/DESIGN.md ("whatif --format json").
type Result struct {
	Policy string `json:"policy"`
	// ModelledRelease is the kernel release whose governor the policy
	// follows ("6.12" is mainline 6.12.0, "6.12.117" that stable release):
	// kernel=, else the recorded kernel's, else NewestVersion. Empty for
	// recorded and oracle, which are no kernel's.
	ModelledRelease string `json:"modelled_release,omitempty"`
	IdlePeriods     uint64 `json:"idle_periods"`
	// PollLimitNs is the poll time limit the policy applies (null without a
	// polling state or where it varies per CPU and time, as with haltpoll).
	PollLimitNs   *uint64         `json:"poll_limit_ns"`
	WakeLatencyNs LatencySummary  `json:"wake_latency_ns"`
	IOLatencyNs   *LatencySummary `json:"io_latency_ns"`
	// IOWokeIdle is how many of the completions in IOLatencyNs woke an
	// idle CPU (package iowake's rule, as stats' io.woke_idle_cpu): those
	// whose latency the policy's exit latency set. Null without IO.
	IOWokeIdle *uint64 `json:"io_woke_idle"`
	// IODeviceLatencyNs is IOLatencyNs with the recorded exit latency of
	// the CPU each completion woke taken out: the device's own time, which
	// the first-order model holds fixed (the same under every policy).
	// Between two recordings it tells how much of a measured IO change was
	// the device's rather than the CPUs'. Null without IO.
	IODeviceLatencyNs *LatencySummary `json:"io_device_latency_ns"`
	// TaskIOLatencyNs is issue → the issuing task running again, over the
	// requests a task waited for, with the exit latencies of the CPU the
	// completion woke and of the CPU the task was woken on both set by the
	// policy. Null where the trace does not record the task.
	TaskIOLatencyNs *LatencySummary    `json:"task_io_latency_ns"`
	StateShare      map[string]float64 `json:"state_share"`
	// StateTimeNs is the time StateShare divides: the stays as the kernel
	// counts them, one an interrupt ended to the interrupt plus its own
	// state's exit latency, others (a poll time-out, the policy's own
	// tick) to their end. RecordedTimeNs is the recorded time those stays cover,
	// which the energy is over. Far apart where a policy's exit latencies
	// are as long as the idle periods (first-order: the recording's
	// timeline is kept).
	StateTimeNs    uint64   `json:"state_time_ns"`
	RecordedTimeNs uint64   `json:"recorded_time_ns"`
	Above          uint64   `json:"above"`
	Below          uint64   `json:"below"`
	EnergyRel      float64  `json:"energy_rel"`
	Agreement      *float64 `json:"agreement"`
	// Changes is what the policy changed against the first policy of the
	// replay, and why it changed little (see Changes).
	Changes *Changes `json:"changes"`

	// Beyond the contract: what a reader needs to judge the numbers.
	// Selections: the policy's decisions, more than the idle periods
	// where its polls time out or ticks wake it, fewer where one stay
	// covers a recorded chain of periods (the oracle's episodes).
	Selections            uint64  `json:"selections"`
	EnergyBusyCoreSeconds float64 `json:"energy_units"` // energy over the idle episodes in busy-core-seconds (the profile's relative state powers × the recorded time of the stays, a busy core for the time the policy woke within an episode), not joules
	// WakeupsPolling: the wake-ups that found the CPU in a polling state
	// (they pay no exit latency; WakeLatencyNs counts them at 0);
	// PollTimeouts: the polls that ran out of their limit
	// (cpuidle_poll_time, or haltpoll's window) and had the governor
	// choose again, the recorded ones for the recorded policy; null for
	// the oracle, which has no limit. What a poll limit's question turns
	// on (seed 000: polls too short to catch a ping-pong's wake-up).
	WakeupsPolling uint64  `json:"wakeups_polling"`
	PollTimeouts   *uint64 `json:"poll_timeouts"`
	// WakeLatencyCDF and IOLatencyCDF are sorted (value, cumulative fraction)
	// points for plots; not part of the JSON contract.
	WakeLatencyCDF []CDFPoint `json:"-"`
	IOLatencyCDF   []CDFPoint `json:"-"`
}

// LatencySummary summarises a latency distribution in ns, as stats does.
type LatencySummary = latency.Summary

// CDFPoint is one point of an empirical CDF.
type CDFPoint = latency.CDFPoint
