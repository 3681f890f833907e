// Package fleet turns `idletrace stats` and `idletrace whatif` results
// into flat summary rows keyed by host and trace, written as JSON lines or
// Parquet, so that the files of thousands of hosts can be merged and
// queried together (DuckDB over a directory, Spark where a fleet outgrows
// one machine). It computes nothing of its own beyond what pkg/analysis
// and pkg/model report, except each CPU's share of the idle period
// lengths, tick states and wake latency that stats reports per state (see
// StatsFromReader).
package fleet

import (
	"bytes"
	"strconv"
)

// Two files, one schema each, one Go struct each: the Parquet schema comes
// from the struct tags, the JSON names from the same tags, the README's
// tables from the Columns lists, and a test holds the three to one order
// and one set of names. A pointer field is a column that may be NULL: an
// input the trace lacks, a figure without samples, or a column that does
// not apply to the row's kind; never a zero standing in for it.
//
// Choice: stats' per-CPU-and-state rows and its per-trace rows (duration,
// losses, block IO) share one file and one schema, told apart by kind
// ("state" or "trace"), rather than two files per host. One host makes one
// stats file and one whatif file, a directory of them is one glob, and
// because every kind-specific column is NULL on the other kind, sum() over
// the whole file is right without a filter (sum(usage) adds only state
// rows, sum(io_requests) only trace rows); count(*) needs `WHERE kind = ...`.

// Kinds of row.
const (
	KindState  = "state"  // stats: one per trace, CPU and idle state
	KindTrace  = "trace"  // stats: one per trace
	KindPolicy = "policy" // whatif: one per trace and policy
)

// StatsRow is one row of a stats file: a CPU's idle state in one trace
// (kind "state"), or the trace as a whole (kind "trace").
type StatsRow struct {
	Kind string `parquet:"kind,dict" json:"kind"`
	// The key, and what the trace says of its machine.
	Key
	DurationNs int64 `parquet:"duration_ns" json:"duration_ns"`
	LostEvents int64 `parquet:"lost_events" json:"lost_events"`
	// DamagedChunks: the file's damaged chunks and unreadable regions,
	// whose records the counts lack (stats' damage.chunks + regions).
	DamagedChunks int64 `parquet:"damaged_chunks" json:"damaged_chunks"`

	// Kind "state".
	CPU               *int32  `parquet:"cpu,optional" json:"cpu"`
	StateIndex        *int32  `parquet:"state_index,optional" json:"state_index"`
	State             *string `parquet:"state,optional,dict" json:"state"`
	ExitLatencyNs     *int64  `parquet:"exit_latency_ns,optional" json:"exit_latency_ns"`
	TargetResidencyNs *int64  `parquet:"target_residency_ns,optional" json:"target_residency_ns"`
	WindowNs          *int64  `parquet:"window_ns,optional" json:"window_ns"`
	Usage             *int64  `parquet:"usage,optional" json:"usage"`
	TimeNs            *int64  `parquet:"time_ns,optional" json:"time_ns"`
	Above             *int64  `parquet:"above,optional" json:"above"`
	Below             *int64  `parquet:"below,optional" json:"below"`
	KernelUsage       *int64  `parquet:"kernel_usage,optional" json:"kernel_usage"`
	KernelTimeNs      *int64  `parquet:"kernel_time_ns,optional" json:"kernel_time_ns"`
	KernelAbove       *int64  `parquet:"kernel_above,optional" json:"kernel_above"`
	KernelBelow       *int64  `parquet:"kernel_below,optional" json:"kernel_below"`
	KernelRejected    *int64  `parquet:"kernel_rejected,optional" json:"kernel_rejected"`
	WakeLatency
	IdlePeriodLength
	TickStopped            *int64 `parquet:"tick_stopped,optional" json:"tick_stopped"`
	TickStoppedKnown       *int64 `parquet:"tick_stopped_known,optional" json:"tick_stopped_known"`
	TickStoppedBefore      *int64 `parquet:"tick_stopped_before,optional" json:"tick_stopped_before"`
	TickStoppedBeforeKnown *int64 `parquet:"tick_stopped_before_known,optional" json:"tick_stopped_before_known"`
	// Kind "trace".
	CPUs        *int32  `parquet:"cpus,optional" json:"cpus"`
	IdlePeriods *int64  `parquet:"idle_periods,optional" json:"idle_periods"`
	CutShort    *bool   `parquet:"cut_short,optional" json:"cut_short"`
	Mismatches  *int64  `parquet:"mismatches,optional" json:"mismatches"`
	IOFilter    *string `parquet:"io_filter,optional,dict" json:"io_filter"`
	IORequests  *int64  `parquet:"io_requests,optional" json:"io_requests"`
	IOWokeIdle  *int64  `parquet:"io_woke_idle_cpu,optional" json:"io_woke_idle_cpu"`
	IOErrors    *int64  `parquet:"io_errors,optional" json:"io_errors"`
	IOLatency
	TaskIOWaited *int64 `parquet:"task_io_waited,optional" json:"task_io_waited"`
	TaskIOLatency
	KernelTickStops *int64 `parquet:"kernel_tick_stops,optional" json:"kernel_tick_stops"`
}

// WakeLatency is a state row's measured wake latency (request to idle
// exit) on that CPU.
type WakeLatency struct {
	Count *int64 `parquet:"wake_latency_ns_count,optional" json:"wake_latency_ns_count"`
	Mean  *Float `parquet:"wake_latency_ns_mean,optional" json:"wake_latency_ns_mean"`
	P50   *int64 `parquet:"wake_latency_ns_p50,optional" json:"wake_latency_ns_p50"`
	P99   *int64 `parquet:"wake_latency_ns_p99,optional" json:"wake_latency_ns_p99"`
	P999  *int64 `parquet:"wake_latency_ns_p999,optional" json:"wake_latency_ns_p999"`
	Max   *int64 `parquet:"wake_latency_ns_max,optional" json:"wake_latency_ns_max"`
}

// IdlePeriodLength is a state row's idle periods, entry to exit, on that
// CPU.
type IdlePeriodLength struct {
	Count *int64 `parquet:"idle_period_ns_count,optional" json:"idle_period_ns_count"`
	Mean  *Float `parquet:"idle_period_ns_mean,optional" json:"idle_period_ns_mean"`
	P50   *int64 `parquet:"idle_period_ns_p50,optional" json:"idle_period_ns_p50"`
	P99   *int64 `parquet:"idle_period_ns_p99,optional" json:"idle_period_ns_p99"`
	P999  *int64 `parquet:"idle_period_ns_p999,optional" json:"idle_period_ns_p999"`
	Max   *int64 `parquet:"idle_period_ns_max,optional" json:"idle_period_ns_max"`
}

// IOLatency is block IO issue to completion.
type IOLatency struct {
	Count *int64 `parquet:"io_latency_ns_count,optional" json:"io_latency_ns_count"`
	Mean  *Float `parquet:"io_latency_ns_mean,optional" json:"io_latency_ns_mean"`
	P50   *int64 `parquet:"io_latency_ns_p50,optional" json:"io_latency_ns_p50"`
	P99   *int64 `parquet:"io_latency_ns_p99,optional" json:"io_latency_ns_p99"`
	P999  *int64 `parquet:"io_latency_ns_p999,optional" json:"io_latency_ns_p999"`
	Max   *int64 `parquet:"io_latency_ns_max,optional" json:"io_latency_ns_max"`
}

// TaskIOLatency is block IO issue to the issuing task running again.
type TaskIOLatency struct {
	Count *int64 `parquet:"task_io_latency_ns_count,optional" json:"task_io_latency_ns_count"`
	Mean  *Float `parquet:"task_io_latency_ns_mean,optional" json:"task_io_latency_ns_mean"`
	P50   *int64 `parquet:"task_io_latency_ns_p50,optional" json:"task_io_latency_ns_p50"`
	P99   *int64 `parquet:"task_io_latency_ns_p99,optional" json:"task_io_latency_ns_p99"`
	P999  *int64 `parquet:"task_io_latency_ns_p999,optional" json:"task_io_latency_ns_p999"`
	Max   *int64 `parquet:"task_io_latency_ns_max,optional" json:"task_io_latency_ns_max"`
}

// WhatifRow is one row of a whatif file: one policy replayed over one
// trace.
//
// Choice: the state shares are one MAP(string, double) column (a JSON
// object) rather than a row per state: a row stays one (trace, policy),
// as the other columns are, and both DuckDB and Spark SQL read one
// state's share as state_share['C6'] (NULL where the profile has no such
// state), so comparing two policies is a self-join on host and trace.
type WhatifRow struct {
	Kind string `parquet:"kind,dict" json:"kind"`
	Key

	Profile     string  `parquet:"profile,dict" json:"profile"`
	PolicyIndex int32   `parquet:"policy_index" json:"policy_index"`
	Policy      string  `parquet:"policy,dict" json:"policy"`
	IOFilter    *string `parquet:"io_filter,optional,dict" json:"io_filter"`
	IdlePeriods int64   `parquet:"idle_periods" json:"idle_periods"`
	Selections  int64   `parquet:"selections" json:"selections"`
	PollLimitNs *int64  `parquet:"poll_limit_ns,optional" json:"poll_limit_ns"`
	// WakeupsPolling and PollTimeouts: whatif's wakeups_polling and
	// poll_timeouts (null for the oracle).
	WakeupsPolling int64  `parquet:"wakeups_polling" json:"wakeups_polling"`
	PollTimeouts   *int64 `parquet:"poll_timeouts,optional" json:"poll_timeouts"`
	PolicyWakeLatency
	IOLatency
	IOWokeIdle *int64 `parquet:"io_woke_idle,optional" json:"io_woke_idle"`
	TaskIOLatency
	Above      int64            `parquet:"above" json:"above"`
	Below      int64            `parquet:"below" json:"below"`
	EnergyRel  *Float           `parquet:"energy_rel,optional" json:"energy_rel"`
	Agreement  *Float           `parquet:"agreement,optional" json:"agreement"`
	StateShare map[string]Float `parquet:"state_share" json:"state_share"`
}

// PolicyWakeLatency is the exit latency a policy's wake-ups pay.
type PolicyWakeLatency struct {
	Count int64  `parquet:"wake_latency_ns_count" json:"wake_latency_ns_count"`
	Mean  *Float `parquet:"wake_latency_ns_mean,optional" json:"wake_latency_ns_mean"`
	P50   *int64 `parquet:"wake_latency_ns_p50,optional" json:"wake_latency_ns_p50"`
	P99   *int64 `parquet:"wake_latency_ns_p99,optional" json:"wake_latency_ns_p99"`
	P999  *int64 `parquet:"wake_latency_ns_p999,optional" json:"wake_latency_ns_p999"`
	Max   *int64 `parquet:"wake_latency_ns_max,optional" json:"wake_latency_ns_max"`
}

// Float is a float64 column that JSON always writes with a fraction or an
// exponent (1.0, not 1), so that a reader inferring types from the JSON
// lines (DuckDB's read_json) makes it a double, not an integer.
type Float float64

// MarshalJSON writes f as a JSON number with a fraction or an exponent.
func (f Float) MarshalJSON() ([]byte, error) {
	b := strconv.AppendFloat(nil, float64(f), 'g', -1, 64)
	if !bytes.ContainsAny(b, ".eE") {
		b = append(b, ".0"...)
	}
	return b, nil
}
