package export

// The three tables, one Go struct each: the Parquet schema comes from the
// struct tags, the CSV header and the README's schema from Columns, and a
// test holds the three to one order and one set of names. A pointer field
// is a column that may be NULL: an input the trace lacks, or a value that
// does not apply to the row, never a zero standing in for it.

// IdlePeriodRow is one row of idle_periods: one idle period as the trace
// recorded it, with what stats makes of it.
type IdlePeriodRow struct {
	CPU         int32  `parquet:"cpu"`
	State       int32  `parquet:"state"`
	StateName   string `parquet:"state_name,dict"`
	EntryNs     int64  `parquet:"entry_ns"`
	ExitNs      int64  `parquet:"exit_ns"`
	DurationNs  int64  `parquet:"duration_ns"`
	ResidencyNs int64  `parquet:"residency_ns"`

	KernelResidencyNs *int64 `parquet:"kernel_residency_ns,optional"`
	Counted           bool   `parquet:"counted"`
	InStatsWindow     bool   `parquet:"in_stats_window"`
	Above             *bool  `parquet:"above,optional"`
	Below             *bool  `parquet:"below,optional"`

	WakeCause                *string `parquet:"wake_cause,optional,dict"`
	WakeIRQ                  *int32  `parquet:"wake_irq,optional"`
	WakeRequestNs            *int64  `parquet:"wake_request_ns,optional"`
	WakeLatencyNs            *int64  `parquet:"wake_latency_ns,optional"`
	WakeRequestedBeforeEntry *bool   `parquet:"wake_requested_before_entry,optional"`

	TickStopped       *bool  `parquet:"tick_stopped,optional"`
	TickStoppedBefore *bool  `parquet:"tick_stopped_before,optional"`
	NextTimerNs       *int64 `parquet:"next_timer_ns,optional"`
	NextEventNs       *int64 `parquet:"next_event_ns,optional"`
	GotTick           *bool  `parquet:"got_tick,optional"`
	PollTimedOut      *bool  `parquet:"poll_timed_out,optional"`
	IdleLoopEntry     *bool  `parquet:"idle_loop_entry,optional"`
	TickStoppable     *bool  `parquet:"tick_stoppable,optional"`
	NrIOWait          *int32 `parquet:"nr_iowait,optional"`
	AbortedBefore     *bool  `parquet:"aborted_before,optional"`
	AbortsBefore      *int32 `parquet:"aborts_before,optional"`
}

// IORequestRow is one row of io_requests: one block request from issue to
// completion, with whether its completion woke an idle CPU.
type IORequestRow struct {
	Device      string `parquet:"device,dict"`
	DevMajor    int32  `parquet:"dev_major"`
	DevMinor    int32  `parquet:"dev_minor"`
	Sector      int64  `parquet:"sector"`
	Op          string `parquet:"op,dict"`
	CmdFlags    int64  `parquet:"cmd_flags"`
	SizeBytes   int64  `parquet:"size_bytes"`
	IssueNs     int64  `parquet:"issue_ns"`
	CompleteNs  int64  `parquet:"complete_ns"`
	LatencyNs   int64  `parquet:"latency_ns"`
	IssueCPU    int32  `parquet:"issue_cpu"`
	CompleteCPU int32  `parquet:"complete_cpu"`
	Error       int32  `parquet:"error"`

	InStatsWindow bool    `parquet:"in_stats_window"`
	WokeIdle      *bool   `parquet:"woke_idle,optional"`
	WokeIdleCause *string `parquet:"woke_idle_cause,optional,dict"`

	Tid           *int32  `parquet:"tid,optional"`
	Pid           *int32  `parquet:"pid,optional"`
	Comm          *string `parquet:"comm,optional,dict"`
	TaskWokenNs   *int64  `parquet:"task_woken_ns,optional"`
	TaskRunNs     *int64  `parquet:"task_run_ns,optional"`
	TaskCPU       *int32  `parquet:"task_cpu,optional"`
	TaskLatencyNs *int64  `parquet:"task_latency_ns,optional"`
}

// Column documents one column of a table: the README's schema is this
// list (a test checks it).
type Column struct {
	Name string
	// Type is the column's type in both files: int32, int64, bool or
	// string, with "or NULL" where it may be NULL (an empty CSV field,
	// a Parquet optional column).
	Type string
	// Unit is ns, µs, bytes, or "" for none (names carry their unit too:
	// _ns, _us, _bytes).
	Unit    string
	Meaning string
}

// IdlePeriodColumns are idle_periods' columns, in order.
var IdlePeriodColumns = []Column{
	{"cpu", "int32", "", "the CPU"},
	{"state", "int32", "", "the cpuidle state index entered (with no cpuidle driver: 1, the default idle routine; 0 cpu_idle_poll)"},
	{"state_name", "string", "", "the state's name as stats shows it (the trace's state table; HLT and POLL without a driver; stateN if unnamed)"},
	{"entry_ns", "int64", "ns", "idle entry, CLOCK_MONOTONIC"},
	{"exit_ns", "int64", "ns", "idle exit, CLOCK_MONOTONIC"},
	{"duration_ns", "int64", "ns", "exit_ns - entry_ns, the traced time in the state"},
	{"residency_ns", "int64", "ns", "the residency the kernel counts: the cpuidle core's own measure where the trace has it (kernel_residency_ns), else duration_ns; stats' time_ns sums it over counted rows"},
	{"kernel_residency_ns", "int64 or NULL", "ns", "the cpuidle core's own residency, read from its counters around the period; NULL where they were not read or did not count it"},
	{"counted", "bool", "", "the kernel's usage counter counts the period (false: an entry the driver rejected, or idle outside cpuidle_enter_state); true where the trace cannot tell. stats' usage counts these rows"},
	{"in_stats_window", "bool", "", "the exit falls inside the CPU's window between the start and end snapshots, the window stats and the kernel's counters cover"},
	{"above", "bool or NULL", "", "the cpuidle core would count it in above (too deep for its residency); NULL without a state table or where not counted"},
	{"below", "bool or NULL", "", "likewise below (a deeper state would have paid off)"},
	{"wake_cause", "string or NULL", "", "what ended it: timer, tick, irq, ipi-resched, ipi-call, remote-no-ipi, poll-timeout, or unknown (nothing observed); NULL where the trace has no wake causes"},
	{"wake_irq", "int32 or NULL", "", "the device IRQ number when wake_cause is irq"},
	{"wake_request_ns", "int64 or NULL", "ns", "when a remote CPU asked this one to wake (IPI send, no-IPI wake of a polling CPU), CLOCK_MONOTONIC; NULL where none was seen or the trace has no wake requests"},
	{"wake_latency_ns", "int64 or NULL", "ns", "wake request to idle exit, where stats measures one (a remote wake ended the period, asked while it was idle): stats' wake_latency_ns"},
	{"wake_requested_before_entry", "bool or NULL", "", "a remote wake ended it whose request (an IPI) came before the entry: stats' wake_requested_before_entry; NULL where the trace has no wake requests"},
	{"tick_stopped", "bool or NULL", "", "the scheduler tick was stopped at entry, after the governor's decision; NULL unknown"},
	{"tick_stopped_before", "bool or NULL", "", "the tick was already stopped when the governor decided; NULL unknown"},
	{"next_timer_ns", "int64 or NULL", "ns", "the sleep length the governor was given (tick_nohz_get_sleep_length), from the kernel's idle entry time; negative when already due; NULL unknown"},
	{"next_event_ns", "int64 or NULL", "ns", "the time to the next clock event, the tick included (delta_next), from the same instant; NULL unknown"},
	{"got_tick", "bool or NULL", "", "the tick ran on this CPU in the idle loop since the governor's previous reflect (got_idle_tick at the exit); NULL unknown"},
	{"poll_timed_out", "bool or NULL", "", "a polling state ended on its time limit; NULL for other states and where the kernel's flag is not readable"},
	{"idle_loop_entry", "bool or NULL", "", "the first period since the CPU entered the idle loop; NULL unknown"},
	{"tick_stoppable", "bool or NULL", "", "the kernel would have stopped the tick had the governor asked; NULL unknown"},
	{"nr_iowait", "int32 or NULL", "", "tasks in iowait on this CPU's runqueue at entry; NULL unknown"},
	{"aborted_before", "bool or NULL", "", "the idle loop's attempt just before was aborted after the governor chose; NULL where the kernel's counters were not read"},
	{"aborts_before", "int32 or NULL", "", "aborted attempts since the previous period on the CPU (menu's interval pointer); NULL unknown"},
}

// IORequestColumns are io_requests' columns, in order.
var IORequestColumns = []Column{
	{"device", "string", "", "the block device's name at the recording's start (MAJ:MIN when the trace does not name it)"},
	{"dev_major", "int32", "", "the device's major number"},
	{"dev_minor", "int32", "", "the device's minor number"},
	{"sector", "int64", "", "the start sector (512-byte units)"},
	{"op", "string", "", "the operation: read, write, flush, discard, write_zeroes, else opN (REQ_OP_* N)"},
	{"cmd_flags", "int64", "", "the request's cmd_flags at issue, as the kernel had them"},
	{"size_bytes", "int64", "bytes", "the request's size"},
	{"issue_ns", "int64", "ns", "issue (block_rq_issue), CLOCK_MONOTONIC"},
	{"complete_ns", "int64", "ns", "final completion (block_rq_complete), CLOCK_MONOTONIC"},
	{"latency_ns", "int64", "ns", "complete_ns - issue_ns: stats' io.latency_ns"},
	{"issue_cpu", "int32", "", "the CPU that issued it"},
	{"complete_cpu", "int32", "", "the CPU that completed it"},
	{"error", "int32", "", "blk_status_t at completion, 0 for success"},
	{"in_stats_window", "bool", "", "the completion falls between the start and end snapshots, the window stats and /sys/block/*/stat cover"},
	{"woke_idle", "bool or NULL", "", "the completion woke an idle CPU (pkg/iowake's rule, the one stats and whatif use: that CPU's idle period, ended by a device interrupt or a function-call IPI, holds it or ended at most 50 µs before it); NULL where the trace has no wake causes or did not record the completing CPU's idle periods"},
	{"woke_idle_cause", "string or NULL", "", "that idle period's wake cause (irq or ipi-call) where woke_idle"},
	{"tid", "int32 or NULL", "", "the thread current at issue; NULL where the trace does not record the task"},
	{"pid", "int32 or NULL", "", "its process (tgid); NULL likewise, and for an import (perf script, trace-cmd and tracefs text name the thread, not its process)"},
	{"comm", "string or NULL", "", "its name; NULL likewise"},
	{"task_woken_ns", "int64 or NULL", "ns", "when the issuing task was woken after the completion, CLOCK_MONOTONIC; NULL where it was not (it had not waited) or the trace does not record it"},
	{"task_run_ns", "int64 or NULL", "ns", "when it ran again after that wake-up; NULL where not seen"},
	{"task_cpu", "int32 or NULL", "", "where it ran again; NULL where not seen"},
	{"task_latency_ns", "int64 or NULL", "ns", "issue to the task running again, for a request the task waited for (stats' io.task_latency_ns); NULL otherwise"},
}

// PMQoSChangeRow is one row of pm_qos_changes: a CPU latency limit in
// force where the export's window opens (action "in_force"), or a change
// of one during it.
type PMQoSChangeRow struct {
	TimeNs          int64  `parquet:"time_ns" json:"time_ns"`
	Kind            string `parquet:"kind,dict" json:"kind"`
	CPU             *int32 `parquet:"cpu,optional" json:"cpu"`
	Action          string `parquet:"action,dict" json:"action"`
	LimitUs         *int64 `parquet:"limit_us,optional" json:"limit_us"`
	PreviousLimitUs *int64 `parquet:"previous_limit_us,optional" json:"previous_limit_us"`
	Tid             *int32 `parquet:"tid,optional" json:"tid"`
}

// PMQoSChangeColumns are pm_qos_changes' columns, in order.
var PMQoSChangeColumns = []Column{
	{"time_ns", "int64", "ns", "the change (pm_qos_update_target), CLOCK_MONOTONIC; for in_force rows the instant the window opens"},
	{"kind", "string", "", "cpu_dma_latency: the global CPU latency limit (/dev/cpu_dma_latency, cpu_latency_qos); resume_latency: one CPU's resume latency constraint (its power/pm_qos_resume_latency_us)"},
	{"cpu", "int32 or NULL", "", "the CPU of a resume_latency row; NULL for cpu_dma_latency, which binds every CPU"},
	{"action", "string", "", "in_force (the limit where the window opens: known from the recording's start and the changes before the window), add, update or remove (the request that changed it)"},
	{"limit_us", "int64 or NULL", "µs", "the limit after the change (in force, for in_force rows): the governors keep to states whose exit latency is within it; NULL for none; a resume_latency of 0 is the kernel's n/a (only polling)"},
	{"previous_limit_us", "int64 or NULL", "µs", "the limit before the change, as limit_us; NULL for in_force rows and where there was none"},
	{"tid", "int32 or NULL", "", "the task that made the request; NULL unknown"},
}
