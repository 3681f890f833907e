/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The records the BPF programs send to Go through the ring buffer, and the
 * counters and map values Go reads. This header is the only contract
 * between the two sides: bpf2go emits the same types for Go (each named
 * with -type in gen.go; the globals at the top of idletrace.bpf.c keep the
 * ones no map or program names in the object's BTF), and a layout test
 * (bpf/layout_test.go) checks them against that BTF.
 */
#ifndef IDLETRACE_H
#define IDLETRACE_H

/* First byte of every ring-buffer record. */
enum record_type {
	RECORD_IDLE = 1,
	RECORD_BLOCK_IO = 2,
	RECORD_HALTPOLL = 3,
	RECORD_IO_TASK = 4,
	RECORD_PM_QOS = 5,
};

/* What ended an idle period. Stored in trace files (pkg/trace WakeCause):
 * append, never renumber. */
enum wake_cause {
	WAKE_UNKNOWN = 0,
	WAKE_TIMER = 1,         /* local timer interrupt, not the tick */
	WAKE_TICK = 2,          /* local timer interrupt that ran the tick */
	WAKE_IRQ = 3,           /* device interrupt, number in wake_irq */
	WAKE_IPI_RESCHED = 4,
	WAKE_IPI_CALL = 5,
	WAKE_REMOTE_NO_IPI = 6, /* need_resched set on a polling CPU, no IPI */
	WAKE_POLL_TIMEOUT = 7,  /* polling state left on its time limit */
};

enum idle_flags {
	IDLE_TICK_STOPPED_KNOWN = 1 << 0,
	IDLE_TICK_STOPPED = 1 << 1,
	IDLE_NEXT_TIMER_KNOWN = 1 << 2,
	IDLE_POLL_TIMEOUT_KNOWN = 1 << 3,
	IDLE_POLL_TIMEOUT = 1 << 4,
	/* The tick was already stopped when the governor chose: an earlier
	 * iteration of the same idle episode stopped it (timer:tick_stop did
	 * not fire for this entry). */
	IDLE_TICK_WAS_STOPPED_KNOWN = 1 << 5,
	IDLE_TICK_WAS_STOPPED = 1 << 6,
	/* next_event_ns holds the governor's delta_next. */
	IDLE_NEXT_EVENT_KNOWN = 1 << 7,
};

/* What the cpuidle core counted for a period (idle_record.kernel_flags),
 * from its own per-state counters read before and after the period. */
enum kernel_flags {
	KERNEL_KNOWN = 1 << 0,   /* the counters were read around the period */
	KERNEL_COUNTED = 1 << 1, /* it counted the period: usage + 1, time + kernel_residency_ns */
	/* tick_sched.got_idle_tick at the exit: the tick ran in the idle loop
	 * since the governor's last reflect (tick_nohz_idle_got_tick()). */
	KERNEL_GOT_TICK_KNOWN = 1 << 2,
	KERNEL_GOT_TICK = 1 << 3,
	KERNEL_IOWAIT_KNOWN = 1 << 4, /* nr_iowait holds the CPU's rq->nr_iowait */
	/* dev->last_residency_ns was 0 at entry: the idle loop's previous
	 * attempt was aborted (need_resched after the governor chose, or the
	 * driver refused), which menu since 6.17 records as an invalid
	 * interval. Only meaningful with KERNEL_KNOWN. */
	KERNEL_ABORTED_BEFORE = 1 << 5,
	KERNEL_ABORTS_COUNTED = 1 << 6, /* aborts_before holds the count */
};

/* Where the period sits in the idle loop (idle_record.loop_flags): what the
 * tick's state at the governor's next decision depends on. */
enum loop_flags {
	/* The first period since the CPU entered the idle loop (do_idle): the
	 * idle task was switched out since the previous period's entry, and
	 * leaving the loop (tick_nohz_idle_exit) restarted a stopped tick.
	 * Otherwise an earlier period of the same loop came just before. */
	LOOP_ENTRY_KNOWN = 1 << 0,
	LOOP_ENTRY = 1 << 1,
	/* The kernel would have stopped the tick at this entry had the
	 * governor asked: tick_nohz_next_event() found no timer-wheel timer
	 * within a tick and nothing needing it (timer_expires != 0), or the
	 * tick was stopped. Not stoppable: timer_expires 0, or no NOHZ. */
	LOOP_TICK_STOPPABLE_KNOWN = 1 << 2,
	LOOP_TICK_STOPPABLE = 1 << 3,
};

/* One idle period: cpu_idle entry and exit paired in the kernel. */
struct idle_record {
	__u8 type; /* RECORD_IDLE */
	__u8 wake_cause;
	__u8 flags; /* enum idle_flags */
	__u8 kernel_flags; /* enum kernel_flags */
	__u32 cpu;
	__u32 state;     /* driver state index */
	__s32 wake_irq;  /* device IRQ number, -1 if none */
	__u64 entry_ns;  /* bpf_ktime_get_ns */
	__u64 exit_ns;
	__u64 wake_request_ns; /* first remote wake request while idle, 0 if none */
	/* The two times tick_nohz_get_sleep_length() gives the governor, from
	 * the kernel's idle entry time (tick_sched.idle_entrytime, which can
	 * lie before entry_ns) and negative when already due: the sleep
	 * length (the next timer if the tick were stopped; if
	 * IDLE_NEXT_TIMER_KNOWN) and delta_next (the next clock event, tick
	 * included; if IDLE_NEXT_EVENT_KNOWN). */
	__s64 next_timer_ns;
	__u64 kernel_residency_ns; /* if KERNEL_COUNTED */
	__s64 next_event_ns;
	/* Tasks in iowait on this CPU's runqueue at entry (nr_iowait_cpu(),
	 * which menu before 6.13 weighs), if KERNEL_IOWAIT_KNOWN. */
	__u32 nr_iowait;
	/* Attempts aborted after the governor chose, since the previous period
	 * on this CPU, if KERNEL_ABORTS_COUNTED: counted from the menu
	 * governor's interval pointer (each of its selections pushes one
	 * interval, so pushes - 1 selections came to nothing). */
	__u8 aborts_before;
	__u8 loop_flags; /* enum loop_flags */
	__u8 pad1[2];
};

/* One block request, issue and final completion paired in the kernel. */
struct block_io_record {
	__u8 type; /* RECORD_BLOCK_IO */
	__u8 op;   /* REQ_OP_* */
	__u16 pad0;
	__u32 dev; /* major << 20 | minor */
	__u64 sector;
	__u32 bytes;
	__u32 cmd_flags;
	__u64 issue_ns;
	__u64 complete_ns;
	__u32 issue_cpu;
	__u32 complete_cpu;
	__s32 error;
	/* The task that issued the request (current at block_rq_issue: the
	 * process for synchronous IO, a kworker where the block layer issued
	 * it later). tid 0: unknown. */
	__u32 tid;
	__u32 tgid;
	char comm[16];
};

/* The task that issued a request ran again after its completion
 * (sched_switch to it): which completion (tid and complete_ns name it),
 * when it was woken and where and when it ran. woken_ns 0: it was not
 * woken after the completion (it had not waited for it). */
struct io_task_record {
	__u8 type; /* RECORD_IO_TASK */
	__u8 pad0;
	__u16 pad1;
	__u32 tid;
	__u64 complete_ns;
	__u64 woken_ns;
	__u64 run_ns;
	__u32 run_cpu;
	__u32 pad2;
};

/* power:guest_halt_poll_ns: haltpoll's poll window changed on cpu. */
struct haltpoll_record {
	__u8 type; /* RECORD_HALTPOLL */
	__u8 grow;
	__u16 pad0;
	__u32 cpu;
	__u64 time_ns;
	__u32 new_ns;
	__u32 old_ns;
};

/* A latency constraint the cpuidle governors read changed
 * (cpuidle_governor_latency_req): the global CPU latency QoS
 * (/dev/cpu_dma_latency), or one CPU's resume latency (its device's
 * DEV_PM_QOS_RESUME_LATENCY). value is the constraint's new aggregate over
 * all requests, in µs, as the kernel holds it: 2000000000 is the global
 * limit's "none", 0x7fffffff a CPU's, and 0 a CPU's "n/a" (no state's exit
 * latency fits: only polling). */
struct pm_qos_record {
	__u8 type;   /* RECORD_PM_QOS */
	__u8 action; /* enum pm_qos_req_action: 0 add, 1 update, 2 remove a request */
	__u16 pad0;
	__s32 target; /* -1: the global limit; else the CPU whose resume latency changed */
	__u64 time_ns;
	__s32 value;
	__s32 prev_value;
	__u32 cpu; /* where the request was made */
	__u32 tid; /* by whom */
};

/* Per-CPU counters of what could not be delivered (map "loss", PERCPU_ARRAY). */
struct loss_counters {
	__u64 idle_lost;    /* ring-buffer reservations that failed */
	__u64 io_lost;
	__u64 other_lost;
	__u64 io_unmatched; /* completions whose issue was not seen */
	__u64 io_table_full; /* issues that did not fit the pairing table */
	__u64 io_completions; /* every final completion seen, paired or not */
	__u64 io_partial;     /* partial completions (the request goes on) */
	/* Issues whose completion never reached the programs: a later issue
	 * with the same key (struct io_key) found the earlier still waiting
	 * (a requeue removes its entry first, so it is not counted). Keyed by
	 * the request, that needs the request reused; an entry left waiting
	 * otherwise is counted at stop (IOOrphanedAtStop). */
	__u64 io_orphaned;
	/* cpu_idle entries while a period was open, or exits with none open:
	 * a cpu_idle event that never reached the programs. */
	__u64 idle_unpaired;
	/* Of io_unmatched, completions of requests allocated after the
	 * programs were attached (rq->start_time_ns > attach_ns), so not in
	 * flight at start: the block layer completes them without issuing
	 * them itself (the original request of a flush sequence, whose
	 * flush_rq is issued and completed in its place). */
	__u64 io_unissued;
	/* Runs of the issue program (every block_rq_issue delivered), to
	 * count against the kernel's own count of the tracepoint. The
	 * completion program's runs are io_completions + io_partial. */
	__u64 io_issues;
};

/* The maps' values Go reads: each CPU's state (cpu_states: the periods
 * still waiting at the stop, flushPending) and the requests in flight
 * (io_inflight, at the end snapshot). */

/* Per-CPU idle state (cpu_states). An ARRAY rather than PERCPU_ARRAY because wakers on
 * other CPUs write the target's wake request. */
struct cpu_state {
	__u64 entry_ns;
	__u64 wake_request_ns;
	__u64 tick_sched; /* this CPU's struct tick_sched, learned from its tick timer; 0 = not yet */
	__s64 next_timer_ns;
	__s64 next_event_ns;
	__u32 state;
	__s32 wake_irq;
	__u32 cause;
	__u8 in_idle;
	__u8 flags;
	__u8 pending;     /* pend holds a closed period waiting for its cause */
	__u8 pend_timer;  /* pend's cause is a timer; submit at local_timer_exit */
	__u8 tick_stopped_now; /* timer:tick_stop fired since the last entry */
	__u8 usage_known; /* usage_at_entry and time_at_entry hold the open period's state's counters */
	/* The open period's kernel_flags gathered at its entry (iowait known,
	 * aborted before, aborts counted); the exit adds the rest. */
	__u8 kflags;
	__u8 menu_ptr_known; /* menu_ptr holds menu's interval_ptr at the last entry */
	__u8 menu_ptr;
	__u8 aborts;      /* the open period's count of aborted attempts, if KERNEL_ABORTS_COUNTED */
	/* Remote requests are taken for the open period: from the start of
	 * the entry program (the kernel is already entering idle) to the
	 * exit. period_seq counts the periods begun, so that a waker that
	 * looked before the target began another one does not stamp it. */
	__u8 accepting;
	__u8 loop_flags;    /* the open period's enum loop_flags */
	__u8 switches_known; /* idle_switches holds the count at the last entry */
	__u8 pad3[7];
	/* The idle task's context switches at the last entry: a change means
	 * it was switched out in between, so the idle loop was left. */
	__u64 idle_switches;
	__u32 nr_iowait;
	__u32 period_seq;
	__u64 usage_at_entry;
	__u64 time_at_entry;
	__u64 cpuidle_dev; /* this CPU's struct cpuidle_device, 0 = not yet read */
	__u64 pcpu_base; /* this CPU's per-CPU base (0 = not yet learned) */
	/* The first IPI sent to this CPU that its handler has not yet served,
	 * idle or not: an IPI sent just before the idle entry can arrive
	 * after it (a guest's IPIs go through the host), and its send, not
	 * any later request, is what the period's wake answers. */
	__u64 ipi_sent_ns;
	struct idle_record pend;
};

/* A request in flight: its device and current start sector, and where the
 * issue and completion programs are tp_btf (and the requeue program too,
 * or none), its struct request (0 otherwise: the classic records carry no
 * request pointer). Two requests for one sector can be in flight together
 * (concurrent flushes, all at one sector, on a device with a flush queue
 * per hardware queue; two readers of one block): only the request tells
 * them apart. */
struct io_key {
	__u32 dev;
	__u32 pad;
	__u64 sector;
	__u64 rq;
};

struct io_start {
	__u64 issue_ns;
	__u64 first_sector;
	__u32 issue_cpu;
	__u32 bytes;
	__u32 remaining;
	__u32 cmd_flags;
	__u8 op;
	__u32 tid;
	__u32 tgid;
	char comm[16];
};

#endif /* IDLETRACE_H */
