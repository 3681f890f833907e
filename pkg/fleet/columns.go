package fleet

import "slices"

// Column documents one column of a file: the README's schema is this list
// (a test checks it, and that it matches the row structs).
type Column struct {
	Name string
	// Type is the column's type: int32, int64, float64, bool, string or
	// map<string,float64> (Parquet MAP, a JSON object), with "or NULL"
	// where it may be NULL.
	Type string
	// Unit is ns, "ns since the Unix epoch", or "" (a count, a name, a
	// fraction). Names carry their unit too: _ns, _unix_ns; _ns_count is
	// a count of values in ns.
	Unit string
	// Rows: the kinds of row that set the column ("" for every row).
	Rows    string
	Meaning string
}

const (
	nsUnit   = "ns"
	unixUnit = "ns since the Unix epoch"
)

// keyColumns open every row of both files.
var keyColumns = []Column{
	{"host", "string", "", "", "the host: `--host NAME`, else the hostname the trace recorded. With trace, the key of a trace's rows"},
	{"trace", "string", "", "", "the trace file's path as given on the command line"},
	{"recorded_start_unix_ns", "int64 or NULL", unixUnit, "", "wall-clock time of the trace's start snapshot (else of its wall-clock anchor, taken when recording began); NULL where the trace has no anchor (an import)"},
	{"kernel_release", "string or NULL", "", "", "uname -r of the recorded machine; NULL unknown"},
	{"cpu_model", "string or NULL", "", "", "its CPU model; NULL unknown"},
	{"driver", "string or NULL", "", "", "its cpuidle driver (none: the kernel had none); NULL unknown"},
	{"governor", "string or NULL", "", "", "its cpuidle governor when recording began; NULL unknown"},
	{"hz", "int32 or NULL", "", "", "its CONFIG_HZ (whatif: as replayed, --hz); NULL unknown"},
}

// StatsColumns are a stats file's columns, in order.
var StatsColumns = slices.Concat([]Column{
	{"kind", "string", "", "", "state: one row per trace, CPU and idle state (stats' cpus[].states[]); trace: one row per trace"},
}, keyColumns, []Column{
	{"duration_ns", "int64", nsUnit, "", "the window stats covers (stats' duration_ns); the same on every row of a trace: do not add it up over state rows"},
	{"lost_events", "int64", "", "", "events the recorder lost (stats' lost_events); the same on every row of a trace"},
	{"damaged_chunks", "int64", "", "", "the file's damaged chunks and unreadable regions, whose records the counts lack (stats' damage.chunks + damage.regions; 0 in a sound file); the same on every row of a trace"},
	{"cpu", "int32 or NULL", "", "state", "the CPU"},
	{"state_index", "int32 or NULL", "", "state", "the cpuidle state index"},
	{"state", "string or NULL", "", "state", "the state's name as stats shows it (the trace's state table; HLT and POLL without a driver; stateN if unnamed)"},
	{"exit_latency_ns", "int64 or NULL", nsUnit, "state", "the state's exit latency in the recorded table; NULL without one"},
	{"target_residency_ns", "int64 or NULL", nsUnit, "state", "its target residency in the recorded table; NULL without one"},
	{"window_ns", "int64 or NULL", nsUnit, "state", "the CPU's own window (between its counters' reads at the two snapshots): time_ns / window_ns is the state's residency share"},
	{"usage", "int64 or NULL", "", "state", "entries the kernel counts, from the trace (stats' usage)"},
	{"time_ns", "int64 or NULL", nsUnit, "state", "residency the kernel counts, from the trace (stats' time_ns)"},
	{"above", "int64 or NULL", "", "state", "entries too deep for their residency, by the cpuidle core's rule (stats' above); NULL without a state table to judge by"},
	{"below", "int64 or NULL", "", "state", "entries a deeper state would have paid off (stats' below); NULL likewise"},
	{"kernel_usage", "int64 or NULL", "", "state", "the kernel's own usage counter, end snapshot minus start (stats' kernel); NULL where the trace has no counters for the state (no driver, no snapshots, cut short, or the CPU's not comparable: offline at a snapshot or its counters restarted, stats' kernel.cpus[].unchecked)"},
	{"kernel_time_ns", "int64 or NULL", nsUnit, "state", "the kernel's time counter's delta (µs in sysfs, times 1000); NULL likewise"},
	{"kernel_above", "int64 or NULL", "", "state", "the kernel's above counter's delta; NULL likewise"},
	{"kernel_below", "int64 or NULL", "", "state", "the kernel's below counter's delta; NULL likewise"},
	{"kernel_rejected", "int64 or NULL", "", "state", "the kernel's rejected counter's delta (entries the driver refused); NULL likewise"},
	{"wake_latency_ns_count", "int64 or NULL", "", "state", "remote wake-ups measured on this CPU in this state (a request while idle, then the exit): its share of stats' wake_latency_ns[state].count; NULL where the trace has no wake requests"},
	{"wake_latency_ns_mean", "float64 or NULL", nsUnit, "state", "their mean latency, request to idle exit; NULL without one"},
}, quantileColumns("wake_latency_ns", "state", "NULL without one"), []Column{
	{"idle_period_ns_count", "int64 or NULL", "", "state", "idle periods on this CPU in this state in the window, entered and left (its share of stats' state_periods[state].length_ns.count); usage leaves out what the kernel does not count"},
	{"idle_period_ns_mean", "float64 or NULL", nsUnit, "state", "their mean length, entry to exit; NULL without one"},
}, quantileColumns("idle_period_ns", "state", "NULL without one"), []Column{
	{"tick_stopped", "int64 or NULL", "", "state", "of those, periods entered with the scheduler tick stopped (after the governor's choice; stats' tick_stopped); NULL where the trace does not record the tick's state"},
	{"tick_stopped_known", "int64 or NULL", "", "state", "periods whose tick state at entry is known (the share's denominator: tick_stopped / tick_stopped_known); NULL likewise"},
	{"tick_stopped_before", "int64 or NULL", "", "state", "periods whose tick was already stopped when the governor chose, what menu and teo read (stats' tick_stopped_before); NULL where the trace does not record it"},
	{"tick_stopped_before_known", "int64 or NULL", "", "state", "periods whose tick state at the choice is known; NULL likewise"},
	{"cpus", "int32 or NULL", "", "trace", "the CPUs stats covers"},
	{"idle_periods", "int64 or NULL", "", "trace", "idle periods in the window, on every CPU"},
	{"cut_short", "bool or NULL", "", "trace", "the trace has no end record (the recorder was killed)"},
	{"mismatches", "int64 or NULL", "", "trace", "counters on which the trace and the kernel disagree (stats' mismatches: cpuidle and block); 0 also where nothing could be compared"},
	{"io_filter", "string or NULL", "", "trace", "the --io filter the IO figures cover; NULL for every request"},
	{"io_requests", "int64 or NULL", "", "trace", "block IO requests completed in the window (stats' io.requests); NULL where the trace does not record block IO"},
	{"io_woke_idle_cpu", "int64 or NULL", "", "trace", "of those, completions that woke an idle CPU (stats' io.woke_idle_cpu); NULL without block IO or wake causes, or where every completion came on a CPU the recording left out (record --cpus)"},
	{"io_errors", "int64 or NULL", "", "trace", "of those, completions with an error; NULL without block IO"},
	{"io_latency_ns_count", "int64 or NULL", "", "trace", "requests in the latency figures (io_requests); NULL without block IO"},
	{"io_latency_ns_mean", "float64 or NULL", nsUnit, "trace", "mean issue-to-completion latency (stats' io.latency_ns); NULL without a request"},
}, quantileColumns("io_latency_ns", "trace", "NULL without a request"), []Column{
	{"task_io_waited", "int64 or NULL", "", "trace", "requests whose issuing task waited for them (stats' io.task_waited); NULL where the trace does not record the task"},
	{"task_io_latency_ns_count", "int64 or NULL", "", "trace", "requests in the task latency figures (task_io_waited); NULL likewise"},
	{"task_io_latency_ns_mean", "float64 or NULL", nsUnit, "trace", "mean issue to the task running again (stats' io.task_latency_ns); NULL without one"},
}, quantileColumns("task_io_latency_ns", "trace", "NULL without one"), []Column{
	{"kernel_tick_stops", "int64 or NULL", "", "trace", "the kernel's count of idle entries that stopped the tick or kept it stopped (idle_sleeps in /proc/timer_list, end minus start), over every CPU: compare sum(tick_stopped) over the trace's state rows (the kernel's may be the larger: it also counts entries a wake-up aborted); NULL unless the trace has it for every CPU"},
})

// WhatifColumns are a whatif file's columns, in order.
var WhatifColumns = slices.Concat([]Column{
	{"kind", "string", "", "", "policy: one row per trace and policy (whatif's results[])"},
}, keyColumns, []Column{
	{"profile", "string", "", "", "the profile replayed on (whatif's profile.name): recorded, measured, a built-in's name or a file's"},
	{"policy_index", "int32", "", "", "the policy's place on the command line, from 0: energy_rel is relative to policy 0"},
	{"policy", "string", "", "", "the policy as given (GOVERNOR[+MODIFIER]...)"},
	{"io_filter", "string or NULL", "", "", "the --io filter the IO figures cover; NULL for every request"},
	{"idle_periods", "int64", "", "", "idle periods replayed and counted: those entered up to the end snapshot, the few before the start snapshot too, so a few more than the stats trace row's idle_periods"},
	{"selections", "int64", "", "", "the policy's decisions: more than idle_periods where its polls time out or ticks wake it and it selects again, fewer where it sleeps through a recorded chain of periods (a poll time-out or tick wake-up the CPU went straight back to idle from) in one stay, as the oracle always does; above and below count among them"},
	{"poll_limit_ns", "int64 or NULL", nsUnit, "", "how long POLL may spin; NULL without a polling state, where the policy disables it, or where it varies (haltpoll)"},
	{"wakeups_polling", "int64", "", "", "wake-ups that found the CPU in a polling state (paying no exit latency; among wake_latency_ns_count)"},
	{"poll_timeouts", "int64 or NULL", "", "", "polls that ran out of their limit and had the governor choose again (the recorded policy: the kernel's own); NULL for the oracle, which has no limit"},
	{"wake_latency_ns_count", "int64", "", "", "wake-ups under the policy, each paying the profile's exit latency of the state it found the CPU in (0 while polling; modelled, not the stats rows' measured request-to-exit latency)"},
	{"wake_latency_ns_mean", "float64 or NULL", nsUnit, "", "their mean exit latency (whatif's wake_latency_ns); NULL without one"},
}, quantileColumnsOf("wake_latency_ns", "", "NULL without one", "exact: each state's exit latency, counted"), []Column{
	{"io_latency_ns_count", "int64 or NULL", "", "", "block IO completions replayed; NULL where the trace does not record block IO"},
	{"io_latency_ns_mean", "float64 or NULL", nsUnit, "", "their mean latency under the policy (whatif's io_latency_ns); NULL without one"},
}, quantileColumns("io_latency_ns", "", "NULL without one"), []Column{
	{"io_woke_idle", "int64 or NULL", "", "", "completions that woke an idle CPU, whose latency the policy set (whatif's io_woke_idle); NULL without block IO or wake causes, or where every completion came on a CPU the recording left out"},
	{"task_io_latency_ns_count", "int64 or NULL", "", "", "requests a task waited for; NULL where the trace does not record the task"},
	{"task_io_latency_ns_mean", "float64 or NULL", nsUnit, "", "their mean issue to the task running again, under the policy (whatif's task_io_latency_ns); NULL without one"},
}, quantileColumns("task_io_latency_ns", "", "NULL without one"), []Column{
	{"above", "int64", "", "", "selections too deep, by the cpuidle core's rule"},
	{"below", "int64", "", "", "selections too shallow"},
	{"energy_rel", "float64 or NULL", "", "", "energy over the idle episodes (the states' estimated power, a busy core while the policy woke within one) relative to policy 0 of the same trace; NULL where not finite"},
	{"agreement", "float64 or NULL", "", "", "share of the recorded selections the policy makes the same way; NULL unless the profile is the recorded or the measured one and a governor chose (not without a cpuidle driver or state table)"},
	{"state_share", "map<string,float64>", "", "", "fraction of idle time per state name of the profile, a stay counted as the kernel would (to the interrupt that ended it, plus the state's own exit latency): state_share['C6'] (NULL for a name the profile lacks)"},
})

// quantileColumns are a latency summary's p50, p99, p999 and max columns
// (after its _count and _mean, which say what is counted), on rows of
// kind rows; null says when they are NULL.
func quantileColumns(prefix, rows, null string) []Column {
	return quantileColumnsOf(prefix, rows, null, "within 0.4 %, pkg/latency's histogram")
}

// quantileColumnsOf is quantileColumns with the quantiles' accuracy.
func quantileColumnsOf(prefix, rows, null, accuracy string) []Column {
	return []Column{
		{prefix + "_p50", "int64 or NULL", nsUnit, rows, "their median (" + accuracy + "); " + null},
		{prefix + "_p99", "int64 or NULL", nsUnit, rows, "their 99th percentile; " + null},
		{prefix + "_p999", "int64 or NULL", nsUnit, rows, "their 99.9th percentile; " + null},
		{prefix + "_max", "int64 or NULL", nsUnit, rows, "the largest, exact; " + null},
	}
}
