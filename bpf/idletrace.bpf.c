//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * idletrace's kernel side. Every tracepoint has two thin entry points, a
 * tp_btf one (typed arguments, raw-tracepoint cost) and a classic tracepoint
 * one; Go keeps one of the two per tracepoint at load time. The logic lives
 * in the __always_inline handlers below, shared by both.
 *
 * Per CPU, an idle period is opened at cpu_idle(state) and closed at
 * cpu_idle(PWR_EVENT_EXIT). What woke the CPU is the first wake event seen on
 * it while idle: with HLT the interrupt handler runs before the exit
 * tracepoint; with MWAIT entered with interrupts off it runs just after, so a
 * period closed without a cause waits (pending) for the next interrupt on its
 * CPU, at most PENDING_WINDOW_NS.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "include/kernel.h"
#include "idletrace.h"

char LICENSE[] SEC("license") = "GPL";

#define PWR_EVENT_EXIT ((__u32)-1)
#define PENDING_WINDOW_NS 50000ULL
#define REQ_OP_MASK 0xff
#define TS_FLAG_STOPPED (1UL << 1)
#define TS_FLAG_NOHZ (1UL << 4)
#define KTIME_MAX ((__s64)~((__u64)1 << 63))
#define HRTIMER_MAX_CLOCK_BASES 8
#define HRTIMER_ACTIVE_HARD 0x0fU
#define MAX_CPUMASK_WORDS 16 /* 1024 CPUs */

/* Set by Go before load. */
volatile const __u32 polling_mask = 0;     /* bit i: state i is a polling state */
volatile const __u64 wakeup_bytes = 65536; /* wake the reader past this much data */
volatile const __u8 cpu_filter_on = 0;     /* record idle periods only of CPUs in cpu_filter */
volatile const __u8 record_io = 1;
volatile const __u32 nr_cpus = 1024;       /* possible CPUs */
volatile const __u8 have_tick_stop = 0;    /* timer:tick_stop is attached */
/* sched_waking counts as a wake request only where the IPI sends are not
 * traced: it names the task's previous CPU, before select_task_rq picks
 * where it wakes, so with the IPI sends (and sched_wake_idle_without_ipi)
 * at hand it only adds requests aimed at the wrong CPU. */
volatile const __u8 waking_requests = 1;
/* io_key.rq is the struct request: issue and completion are traced by
 * tp_btf, and requeue too or not at all (a classic program, which cannot
 * name the request, would miss every key the others made). */
volatile const __u8 io_key_by_request = 0;
/* When the programs were all attached (bpf_ktime_get_ns), written by Go
 * after attaching; 0 before. */
volatile __u64 attach_ns = 0;

/* Offsets of per-CPU variables in the kernel's per-CPU section, from the
 * vmlinux BTF (DATASEC .data..percpu), or PCPU_NONE. A CPU's copy of one
 * lies at that CPU's per-CPU base plus its offset; the base is learned from
 * the CPU's own hrtimer_bases, which every expiring hrtimer points to. No
 * kallsyms address is needed: data symbols are missing without
 * CONFIG_KALLSYMS_ALL, and every address is hidden by kptr_restrict from a
 * reader without CAP_SYSLOG. */
#define PCPU_NONE (~0ULL)
volatile const __u64 pcpu_hrtimer_bases = PCPU_NONE;
volatile const __u64 pcpu_tick_cpu_sched = PCPU_NONE;
volatile const __u64 pcpu_cpuidle_devices = PCPU_NONE; /* PCPU_NONE also without a cpuidle driver */
volatile const __u64 pcpu_runqueues = PCPU_NONE;
volatile const __u64 pcpu_tick_cpu_device = PCPU_NONE;
volatile const __u64 pcpu_menu_devices = PCPU_NONE;

/* The record types no map or program signature carries: each is named with
 * bpf2go's -type (gen.go), which needs it in the object's BTF, and clang
 * leaves out of BTF a type only local variables use. */
const struct idle_record *unused_idle_record __attribute__((unused));
const struct block_io_record *unused_block_io_record __attribute__((unused));
const struct haltpoll_record *unused_haltpoll_record __attribute__((unused));
const struct io_task_record *unused_io_task_record __attribute__((unused));
const struct pm_qos_record *unused_pm_qos_record __attribute__((unused));
const enum record_type *unused_record_type __attribute__((unused));
const enum wake_cause *unused_wake_cause __attribute__((unused));
const enum idle_flags *unused_idle_flags __attribute__((unused));
const enum kernel_flags *unused_kernel_flags __attribute__((unused));
const enum loop_flags *unused_loop_flags __attribute__((unused));


struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by Go */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loss_counters);
} loss SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024); /* set to the possible CPU count by Go */
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUMASK_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} cpu_filter SEC(".maps");

/* Requests in flight, keyed by struct io_key: device, current start sector
 * and, with tp_btf, the request itself. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct io_key);
	__type(value, struct io_start);
} io_inflight SEC(".maps");

/* A task whose request completed, until it runs again (RECORD_IO_TASK).
 * LRU: a task that exits before it runs must not hold its slot. */
struct io_wait {
	__u64 complete_ns;
	__u64 woken_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct io_wait);
} io_waiting SEC(".maps");

/* A latency-QoS request on its way to pm_qos_update_target, per task. The
 * request tracepoints say which constraint it is for; pm_qos_update_target,
 * which the same task reaches microseconds later, gives the new aggregate
 * but not which constraint (frequency QoS takes the same path, with no
 * request tracepoint of its own before it). A request that changes nothing
 * never reaches it, so an entry counts only for the action it names and
 * for QOS_MATCH_NS: a frequency update the same task makes later is not
 * taken for it. 20 ms, not the microseconds the path takes: a vCPU held
 * by its host between the two (for milliseconds on this project's
 * guests) must not lose the change, as the lab's emulated VM once lost a
 * removal at 200 µs. A device request of another kind, or for a device that is
 * no CPU, leaves a QOS_IGNORE entry, so that its own update is consumed
 * unrecorded. LRU so that none is held for ever. */
struct qos_pending {
	__u64 time_ns;
	__s32 target; /* as pm_qos_record.target, or QOS_IGNORE */
	__u32 action;
};

#define QOS_MATCH_NS 20000000ULL
#define QOS_GLOBAL (-1)
#define QOS_IGNORE (-2)
/* enum dev_pm_qos_req_type's first value since it exists (4.16). */
#define DEV_PM_QOS_RESUME_LATENCY 1

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct qos_pending);
} qos_pending SEC(".maps");

static __always_inline struct loss_counters *loss_counters(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&loss, &zero);
}

static __always_inline __u64 submit_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
}

static __always_inline struct cpu_state *cpu_state(__u32 cpu)
{
	return bpf_map_lookup_elem(&cpu_states, &cpu);
}

static __always_inline int cpu_wanted(__u32 cpu)
{
	if (!cpu_filter_on)
		return 1;
	__u32 word = cpu / 64;
	__u64 *bits = bpf_map_lookup_elem(&cpu_filter, &word);
	return bits && (*bits & (1ULL << (cpu % 64)));
}

static __always_inline int is_polling(__u32 state)
{
	return state < 32 && (polling_mask & (1U << state));
}

static __always_inline void submit_idle(struct idle_record *r)
{
	struct idle_record *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		struct loss_counters *l = loss_counters();
		if (l)
			l->idle_lost++;
		return;
	}
	__builtin_memcpy(e, r, sizeof(*e));
	bpf_ringbuf_submit(e, submit_flags());
}

static __always_inline void submit_pending(struct cpu_state *st)
{
	st->pending = 0;
	st->pend_timer = 0;
	submit_idle(&st->pend);
}

/* With a cpuidle device, a closed period waits for the next entry, when the
 * kernel's own residency of it can be read. */
static __always_inline int awaits_kernel(void)
{
	return pcpu_cpuidle_devices != PCPU_NONE;
}

/* The address of this CPU's copy of the per-CPU variable at offset off,
 * or 0 while the CPU's per-CPU base is not known or without the variable. */
static __always_inline __u64 per_cpu_addr(struct cpu_state *st, __u64 off)
{
	if (off == PCPU_NONE || !st->pcpu_base)
		return 0;
	return st->pcpu_base + off;
}

/* This CPU's cpuidle device: per_cpu(cpuidle_devices, cpu). */
static __always_inline struct cpuidle_device *cpuidle_dev(struct cpu_state *st, __u32 cpu)
{
	if (!st->cpuidle_dev) {
		__u64 p = per_cpu_addr(st, pcpu_cpuidle_devices), dev = 0;
		if (p && !bpf_probe_read_kernel(&dev, sizeof(dev), (void *)p))
			st->cpuidle_dev = dev;
	}
	return (struct cpuidle_device *)st->cpuidle_dev;
}

/* Aborted attempts before this entry, from how far menu's interval pointer
 * moved since the last entry (one push per selection: the update of the
 * last stay, then one UINT_MAX per aborted attempt). No move: menu is not
 * the governor, and the count is unknown. */
static __always_inline void count_aborts(struct cpu_state *st, __u32 cpu)
{
	struct menu_device *md = (void *)per_cpu_addr(st, pcpu_menu_devices);
	int ptr = 0;
	if (!md || bpf_probe_read_kernel(&ptr, sizeof(ptr), (void *)((__u64)md + bpf_core_field_offset(struct menu_device, interval_ptr))))
		return;
	__u8 moved = ((__u8)ptr - st->menu_ptr) & 7;
	if (st->menu_ptr_known && moved) {
		st->aborts = moved - 1;
		st->kflags |= KERNEL_ABORTS_COUNTED;
	}
	st->menu_ptr = (__u8)ptr;
	st->menu_ptr_known = 1;
}

/* rq->nr_iowait of this CPU, as menu_select() read it just before. */
static __always_inline void read_nr_iowait(struct cpu_state *st, __u32 cpu)
{
	struct rq *rq = (void *)per_cpu_addr(st, pcpu_runqueues);
	if (!rq)
		return;
	int n = 0;
	if (bpf_probe_read_kernel(&n, sizeof(n), (void *)((__u64)rq + bpf_core_field_offset(struct rq, nr_iowait))))
		return;
	st->nr_iowait = n < 0 ? 0 : n;
	st->kflags |= KERNEL_IOWAIT_KNOWN;
}

/* dev->states_usage[state].usage and .time_ns: the cpuidle core's own
 * counters, which it bumps right after the exit tracepoint from its clock
 * reads just inside the two tracepoints. */
static __always_inline int read_state_usage(struct cpuidle_device *dev, __u32 state, __u64 *usage, __u64 *time_ns)
{
	if (state >= 10)
		return -1;
	__u64 base = (__u64)dev + bpf_core_field_offset(struct cpuidle_device, states_usage) +
		     (__u64)state * bpf_core_type_size(struct cpuidle_state_usage);
	if (bpf_probe_read_kernel(usage, sizeof(*usage), (void *)(base + bpf_core_field_offset(struct cpuidle_state_usage, usage))) ||
	    bpf_probe_read_kernel(time_ns, sizeof(*time_ns), (void *)(base + bpf_core_field_offset(struct cpuidle_state_usage, time_ns))))
		return -1;
	return 0;
}

/* At the next entry, the counters of the closed period's state say what the
 * kernel made of it: one more use and its residency, or nothing (a period
 * outside cpuidle_enter_state, such as cpu_idle_poll, or a rejected entry). */
static __always_inline void fill_kernel_residency(struct cpu_state *st, __u32 cpu)
{
	struct cpuidle_device *dev = cpuidle_dev(st, cpu);
	__u64 usage, time_ns;
	if (!dev || !st->usage_known || read_state_usage(dev, st->pend.state, &usage, &time_ns))
		return;
	__u64 uses = usage - st->usage_at_entry;
	if (uses == 0) {
		st->pend.kernel_flags |= KERNEL_KNOWN;
	} else if (uses == 1) {
		st->pend.kernel_flags |= KERNEL_KNOWN | KERNEL_COUNTED;
		st->pend.kernel_residency_ns = time_ns - st->time_at_entry;
	}
}

/* Remember the entered state's counters, to tell at the next entry what the
 * kernel counted for this period. */
static __always_inline void note_state_usage(struct cpu_state *st, __u32 cpu, __u32 state)
{
	st->usage_known = 0;
	struct cpuidle_device *dev = cpuidle_dev(st, cpu);
	if (dev && !read_state_usage(dev, state, &st->usage_at_entry, &st->time_at_entry))
		st->usage_known = 1;
	/* The last stay's residency until this one ends; 0 after an abort. */
	if (dev && bpf_core_field_exists(dev->last_residency_ns) && BPF_CORE_READ(dev, last_residency_ns) == 0)
		st->kflags |= KERNEL_ABORTED_BEFORE;
}

/* Tick state from this CPU's tick_sched, once known. Returns whether NOHZ
 * idle is active on this CPU: otherwise the tick can never stop and the
 * sleep length is delta_next (can_stop_idle_tick()). Since 6.9 one flags
 * word holds both. */
static __always_inline int read_tick_state(struct cpu_state *st, struct tick_sched *ts)
{
	if (bpf_core_field_exists(ts->flags)) {
		unsigned long f = BPF_CORE_READ(ts, flags);
		st->flags |= IDLE_TICK_STOPPED_KNOWN;
		if (f & TS_FLAG_STOPPED)
			st->flags |= IDLE_TICK_STOPPED;
		return (f & TS_FLAG_NOHZ) != 0;
	}
	struct tick_sched___old *old = (void *)ts;
	if (bpf_core_field_exists(old->tick_stopped)) {
		st->flags |= IDLE_TICK_STOPPED_KNOWN;
		if (BPF_CORE_READ_BITFIELD_PROBED(old, tick_stopped))
			st->flags |= IDLE_TICK_STOPPED;
	}
	if (bpf_core_field_exists(old->nohz_mode))
		return BPF_CORE_READ(old, nohz_mode) != 0;
	return 1;
}

/* hrtimer_next_event_without(exclude): the earliest hrtimer expiry on this
 * CPU other than exclude, over the hard clock bases and, unless their
 * softirq is running, the soft ones. A timerqueue's first timer is its
 * red-black tree's leftmost node, which has no left child, so the timer
 * after it is its right child (a single red leaf, if any) or else its
 * parent: no tree walk is needed. */
static __always_inline __s64 next_hrtimer_without(struct hrtimer_cpu_base *cb, __u64 exclude)
{
	__s64 next = KTIME_MAX;
	__u32 active = BPF_CORE_READ(cb, active_bases);
	if (BPF_CORE_READ_BITFIELD_PROBED(cb, softirq_activated))
		active &= HRTIMER_ACTIVE_HARD;
	__u64 base0 = (__u64)cb + bpf_core_field_offset(struct hrtimer_cpu_base, clock_base);
	__u64 stride = bpf_core_type_size(struct hrtimer_clock_base);
#pragma unroll
	for (int i = 0; i < HRTIMER_MAX_CLOCK_BASES; i++) {
		if (!(active & (1U << i)))
			continue;
		struct hrtimer_clock_base *b = (void *)(base0 + i * stride);
		struct rb_node *n = BPF_CORE_READ(b, active.rb_root.rb_leftmost);
		if (n && (__u64)n == exclude) {
			struct rb_node *right = BPF_CORE_READ(n, rb_right);
			if (right)
				n = right;
			else
				n = (void *)(BPF_CORE_READ(n, __rb_parent_color) & ~3UL);
		}
		if (!n)
			continue;
		/* The rb_node opens the hrtimer. Its expiry is read through the
		 * hrtimer, not the timerqueue_node it used to open: 7.2's and
		 * 7.3's hrtimer opens a timerqueue_linked_node (an rb_node_linked,
		 * the rb_node and two list pointers, then the expiry), and
		 * timerqueue_node's offset read the list's prev pointer there. */
		__s64 e = BPF_CORE_READ((struct hrtimer *)n, node.expires) - BPF_CORE_READ(b, offset);
		if (e < next)
			next = e;
	}
	return next;
}

/* This CPU's clock event device's next_event, which is what delta_next is
 * measured to; 0 without the tick_cpu_device symbol. */
static __always_inline __s64 clockevent_next(struct cpu_state *st, __u32 cpu)
{
	struct tick_device *td = (void *)per_cpu_addr(st, pcpu_tick_cpu_device);
	if (!td)
		return 0;
	struct clock_event_device *dev = BPF_CORE_READ(td, evtdev);
	return dev ? BPF_CORE_READ(dev, next_event) : 0;
}

/* What tick_nohz_get_sleep_length() gave the governor for this entry,
 * measured from the kernel's idle entry time as it does: delta_next, the
 * next clock event (in high-resolution mode the earliest hrtimer, the tick
 * included); and the sleep length, the next event were the tick stopped:
 * the earlier of the next timer-wheel event that tick_nohz_next_event()
 * stored in timer_expires and the next hrtimer other than the tick, or
 * delta_next when timer_expires is 0 (a timer due within the tick, which
 * stays) or the tick cannot stop. A timer_expires before the entry time is
 * left from an earlier entry whose governor did not query it (menu skips
 * the query on short predictions) and counts as 0. */
static __always_inline void read_sleep_length(struct cpu_state *st, struct tick_sched *ts, __u32 cpu, int nohz)
{
	__s64 now = BPF_CORE_READ(ts, idle_entrytime);
	if (now <= 0)
		return;
	/* Whether the tick could stop here (enum loop_flags): a timer_expires
	 * from before the entry time is stale and says nothing. */
	__s64 expires = BPF_CORE_READ(ts, timer_expires);
	if (!nohz || expires == 0)
		st->loop_flags |= LOOP_TICK_STOPPABLE_KNOWN;
	else if (expires >= now)
		st->loop_flags |= LOOP_TICK_STOPPABLE_KNOWN | LOOP_TICK_STOPPABLE;
	struct hrtimer_cpu_base *cb = BPF_CORE_READ(ts, sched_timer.base, cpu_base);
	int hres = cb && BPF_CORE_READ_BITFIELD_PROBED(cb, hres_active);
	/* The device's own next event where its per-CPU pointer is known;
	 * else what hrtimers programmed it to (high resolution) or the tick. */
	__s64 next_event = clockevent_next(st, cpu);
	if (next_event <= 0)
		next_event = hres ? BPF_CORE_READ(cb, expires_next) : BPF_CORE_READ(ts, sched_timer.node.expires);
	if (next_event <= 0 || next_event == KTIME_MAX)
		return;
	st->next_event_ns = next_event - now;
	st->flags |= IDLE_NEXT_EVENT_KNOWN;

	__s64 sleep = next_event;
	if (expires >= now && nohz) {
		__s64 other = hres ? next_hrtimer_without(cb, (__u64)&ts->sched_timer) : KTIME_MAX;
		sleep = expires < other ? expires : other;
	}
	if (sleep < KTIME_MAX) {
		st->next_timer_ns = sleep - now;
		st->flags |= IDLE_NEXT_TIMER_KNOWN;
	}
}

/* LOOP_ENTRY: the idle task (current at the cpu_idle entry) counts its
 * switches away in nivcsw (its state is always TASK_RUNNING). */
static __always_inline void read_loop_entry(struct cpu_state *st)
{
	struct task_struct *idle = (struct task_struct *)bpf_get_current_task();
	__u64 n = BPF_CORE_READ(idle, nivcsw) + BPF_CORE_READ(idle, nvcsw);
	if (st->switches_known) {
		st->loop_flags |= LOOP_ENTRY_KNOWN;
		if (n != st->idle_switches)
			st->loop_flags |= LOOP_ENTRY;
	}
	st->idle_switches = n;
	st->switches_known = 1;
}

static __always_inline void on_idle_entry(__u32 cpu, __u32 state)
{
	struct cpu_state *st = cpu_state(cpu);
	if (!st)
		return;
	if (st->pending) {
		if (awaits_kernel())
			fill_kernel_residency(st, cpu);
		submit_pending(st);
	}

	if (st->in_idle) {
		struct loss_counters *l = loss_counters();
		if (l)
			l->idle_unpaired++;
	}
	st->in_idle = 0;
	/* A new period first, then its request and cause cleared: a waker of
	 * the last period whose stamp lands after this sees the new number
	 * and takes it back (take_request). */
	st->period_seq++;
	st->state = state;
	st->cause = WAKE_UNKNOWN;
	st->wake_irq = -1;
	st->wake_request_ns = 0;
	st->accepting = 1;
	st->next_timer_ns = 0;
	st->next_event_ns = 0;
	st->flags = 0;
	st->kflags = 0;
	st->loop_flags = 0;
	read_loop_entry(st);
	struct tick_sched *ts = (struct tick_sched *)st->tick_sched;
	if (ts) {
		read_sleep_length(st, ts, cpu, read_tick_state(st, ts));
	}
	if (st->flags & IDLE_TICK_STOPPED) /* it did stop */
		st->loop_flags |= LOOP_TICK_STOPPABLE_KNOWN | LOOP_TICK_STOPPABLE;
	/* The governor saw the tick state before this entry's decision: the
	 * same as after it, unless the decision itself stopped the tick. */
	if (have_tick_stop && (st->flags & IDLE_TICK_STOPPED_KNOWN)) {
		st->flags |= IDLE_TICK_WAS_STOPPED_KNOWN;
		if ((st->flags & IDLE_TICK_STOPPED) && !st->tick_stopped_now)
			st->flags |= IDLE_TICK_WAS_STOPPED;
	}
	st->tick_stopped_now = 0;
	if (awaits_kernel())
		note_state_usage(st, cpu, state);
	read_nr_iowait(st, cpu);
	count_aborts(st, cpu);
	/* The entry time is taken last here and the exit time first (in
	 * on_cpu_idle): the kernel reads its own clock for the cpuidle
	 * counters right after the entry tracepoint and right before the exit
	 * one, so the period's bounds sit as close to the kernel's as this
	 * program's run allows. */
	st->entry_ns = bpf_ktime_get_ns();
	/* A request taken during this program came while the kernel was
	 * already entering idle. */
	__u64 req = st->wake_request_ns;
	if (req && req < st->entry_ns)
		__sync_val_compare_and_swap(&st->wake_request_ns, req, st->entry_ns);
	st->in_idle = 1;
}

static __always_inline void on_idle_exit(__u32 cpu, __u64 now)
{
	struct cpu_state *st = cpu_state(cpu);
	if (!st)
		return;
	if (!st->in_idle) {
		/* Only after the first entry: the CPU may have been idle at attach. */
		if (st->entry_ns) {
			struct loss_counters *l = loss_counters();
			if (l)
				l->idle_unpaired++;
		}
		return;
	}

	st->in_idle = 0;
	st->accepting = 0;

	struct idle_record *r = &st->pend;
	r->type = RECORD_IDLE;
	r->cpu = cpu;
	r->state = st->state;
	r->entry_ns = st->entry_ns;
	r->exit_ns = now;
	r->wake_request_ns = st->wake_request_ns;
	r->next_timer_ns = st->next_timer_ns;
	r->next_event_ns = st->next_event_ns;
	r->wake_irq = st->wake_irq;
	r->flags = st->flags;
	r->wake_cause = st->cause;
	r->kernel_residency_ns = 0;
	r->kernel_flags = st->kflags;
	r->aborts_before = (st->kflags & KERNEL_ABORTS_COUNTED) ? st->aborts : 0;
	r->nr_iowait = st->nr_iowait;
	r->loop_flags = st->loop_flags;
	/* What the governor's reflect, right after this exit, gets from
	 * tick_nohz_idle_got_tick(): the tick ran in the idle loop since the
	 * last reflect. A tick that wakes a state entered with interrupts off
	 * runs after this tracepoint but before reflect: the wake cause says
	 * so and the replay counts it too. */
	struct tick_sched *ts = (struct tick_sched *)st->tick_sched;
	if (ts && bpf_core_field_exists(ts->got_idle_tick)) {
		r->kernel_flags |= KERNEL_GOT_TICK_KNOWN;
		if (BPF_CORE_READ_BITFIELD_PROBED(ts, got_idle_tick))
			r->kernel_flags |= KERNEL_GOT_TICK;
	}

	if (is_polling(st->state)) {
		/* poll_idle() leaves dev->poll_time_limit set when it stopped on
		 * its time limit; interrupts it served on the way (which did not
		 * set need_resched) did not end it. Without the device, a poll
		 * that ends with nothing having woken it ran out of its time
		 * limit; anything else ended it through need_resched. */
		struct cpuidle_device *dev = awaits_kernel() ? cpuidle_dev(st, cpu) : 0;
		r->flags |= IDLE_POLL_TIMEOUT_KNOWN;
		if (dev && bpf_core_field_exists(dev->poll_time_limit)) {
			if (BPF_CORE_READ_BITFIELD_PROBED(dev, poll_time_limit)) {
				r->wake_cause = WAKE_POLL_TIMEOUT;
				r->wake_irq = -1;
				r->flags |= IDLE_POLL_TIMEOUT;
			}
		} else if (r->wake_cause == WAKE_UNKNOWN) {
			r->wake_cause = WAKE_POLL_TIMEOUT;
			r->flags |= IDLE_POLL_TIMEOUT;
		}
	}

	if (!cpu_wanted(cpu))
		return;
	if (r->wake_cause != WAKE_UNKNOWN && !awaits_kernel()) {
		submit_idle(r);
		return;
	}
	st->pending = 1;
	st->pend_timer = 0;
}

/* A wake event on this CPU: an interrupt or IPI handler starting. */
static __always_inline void on_local_wake(__u32 cause, __s32 irq)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st = cpu_state(cpu);
	if (!st)
		return;

	if (cause == WAKE_IPI_CALL || cause == WAKE_IPI_RESCHED) {
		/* This handler serves every IPI sent so far. One sent before the
		 * entry, with none asked while idle, is the period's request
		 * (wake_request_ns before entry_ns: no wake latency of the
		 * state is measured from it). */
		__u64 sent = __sync_lock_test_and_set(&st->ipi_sent_ns, 0);
		if (st->in_idle && sent && sent < st->entry_ns)
			__sync_val_compare_and_swap(&st->wake_request_ns, 0, sent);
	}
	if (st->in_idle) {
		/* A polling CPU services interrupts without leaving the state;
		 * the last one before the exit is what set need_resched. */
		if (st->cause == WAKE_UNKNOWN || is_polling(st->state)) {
			st->cause = cause;
			st->wake_irq = irq;
		}
		return;
	}
	if (!st->pending || st->pend.wake_cause != WAKE_UNKNOWN)
		return;
	if (bpf_ktime_get_ns() - st->pend.exit_ns > PENDING_WINDOW_NS) {
		if (!awaits_kernel())
			submit_pending(st);
		return;
	}
	st->pend.wake_cause = cause;
	st->pend.wake_irq = irq;
	if (cause == WAKE_TIMER) {
		st->pend_timer = 1; /* may turn out to be the tick */
		return;
	}
	if (!awaits_kernel())
		submit_pending(st);
}

static __always_inline void on_tick_stop(int success)
{
	if (!success)
		return;
	struct cpu_state *st = cpu_state(bpf_get_smp_processor_id());
	if (st)
		st->tick_stopped_now = 1;
}

static __always_inline void on_local_timer_exit(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st = cpu_state(cpu);
	if (!st || !st->pending || !st->pend_timer)
		return;
	st->pend_timer = 0;
	if (!awaits_kernel())
		submit_pending(st);
}

/* Learns this CPU's per-CPU base from an expiring hrtimer (it runs on its
 * own CPU's clock base, which points back to per_cpu(hrtimer_bases, cpu)),
 * and with it where the CPU's tick_sched lives. */
static __always_inline void learn_pcpu_base(struct cpu_state *st, struct hrtimer *timer, __u32 cpu)
{
	if (pcpu_hrtimer_bases == PCPU_NONE)
		return;
	struct hrtimer_cpu_base *cb = BPF_CORE_READ(timer, base, cpu_base);
	if (!cb || BPF_CORE_READ(cb, cpu) != cpu)
		return;
	st->pcpu_base = (__u64)cb - pcpu_hrtimer_bases;
	st->tick_sched = per_cpu_addr(st, pcpu_tick_cpu_sched);
}

static __always_inline void on_hrtimer_expire(__u64 timer)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st = cpu_state(cpu);
	if (!st)
		return;
	if (!st->pcpu_base)
		learn_pcpu_base(st, (struct hrtimer *)timer, cpu);
	/* The tick is the hrtimer embedded in this CPU's tick_sched. */
	if (!st->tick_sched || timer != st->tick_sched + bpf_core_field_offset(struct tick_sched, sched_timer))
		return;
	if (st->in_idle) {
		if (st->cause == WAKE_TIMER)
			st->cause = WAKE_TICK;
	} else if (st->pending && st->pend_timer) {
		st->pend.wake_cause = WAKE_TICK;
	}
}

/* Stamps target's open period with the first remote request; returns
 * whether it has one now. A waker on another CPU that found the period open
 * may stamp only after the target left it and began the next one (its
 * stamp would then precede that entry and block the real request): it
 * takes its stamp back. */
static __always_inline int take_request(struct cpu_state *st)
{
	__u32 seq = *(volatile __u32 *)&st->period_seq;
	if (!*(volatile __u8 *)&st->accepting)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (__sync_val_compare_and_swap(&st->wake_request_ns, 0, now) != 0)
		return 1;
	if (*(volatile __u32 *)&st->period_seq != seq) {
		__sync_val_compare_and_swap(&st->wake_request_ns, now, 0);
		return 0;
	}
	return 1;
}

/* A remote CPU asks target to wake: sched_waking, or an IPI send (ipi).
 * A CPU's requests to itself (irq_work's self-IPI, which ring-buffer
 * wakeups raise; a task woken on its own CPU) wake nothing idle. */
static __always_inline void on_wake_request(__u32 target, int ipi)
{
	if (target == bpf_get_smp_processor_id())
		return;
	struct cpu_state *st = cpu_state(target);
	if (!st)
		return;
	if (ipi)
		__sync_val_compare_and_swap(&st->ipi_sent_ns, 0, bpf_ktime_get_ns());
	take_request(st);
}

static __always_inline void on_wake_without_ipi(__u32 target)
{
	struct cpu_state *st = cpu_state(target);
	if (!st || !take_request(st))
		return;
	if (is_polling(st->state))
		st->cause = WAKE_REMOTE_NO_IPI;
	else
		__sync_val_compare_and_swap(&st->cause, WAKE_UNKNOWN, WAKE_REMOTE_NO_IPI);
}

static __always_inline void on_wake_request_mask(const unsigned long *bits, __u32 words)
{
	for (__u32 w = 0; w < MAX_CPUMASK_WORDS; w++) {
		if (w >= words || w * 64 >= nr_cpus)
			break;
		__u64 word = 0;
		bpf_probe_read_kernel(&word, sizeof(word), &bits[w]);
		if (!word)
			continue;
		for (__u32 b = 0; b < 64; b++) {
			if (word & (1ULL << b))
				on_wake_request(w * 64 + b, 1);
		}
	}
}

static __always_inline __u8 op_from_rwbs(const char *rwbs)
{
	/* blk_fill_rwbs: optional 'F' (preflush), then the op letter. */
	__u8 op = 0xff;
	for (int i = 0; i < 4; i++) {
		char c = rwbs[i];
		if (c == 'R')
			return 0;
		if (c == 'W')
			return 1;
		if (c == 'D')
			return 3;
		if (c == 'E')
			return 5;
		if (c == 'F')
			op = 2;
		if (c == 0)
			break;
	}
	return op;
}

/* The key of a request: rq is its struct request, 0 from a classic program. */
static __always_inline struct io_key io_key_of(__u32 dev, __u64 sector, __u64 rq)
{
	struct io_key key = {.dev = dev, .sector = sector, .rq = io_key_by_request ? rq : 0};
	return key;
}

static __always_inline void on_rq_issue(__u32 dev, __u64 sector, __u64 rq, __u32 bytes, __u32 cmd_flags, __u8 op)
{
	if (!record_io)
		return;
	struct loss_counters *l = loss_counters();
	if (l)
		l->io_issues++;
	struct io_key key = io_key_of(dev, sector, rq);
	struct io_start v = {
		.issue_ns = bpf_ktime_get_ns(),
		.first_sector = sector,
		.issue_cpu = bpf_get_smp_processor_id(),
		.bytes = bytes,
		.remaining = bytes,
		.cmd_flags = cmd_flags,
		.op = op,
	};
	__u64 id = bpf_get_current_pid_tgid();
	v.tid = (__u32)id;
	v.tgid = id >> 32;
	bpf_get_current_comm(v.comm, sizeof(v.comm));
	/* One hash operation in the common case: an entry already there is an
	 * earlier issue whose completion never reached us. */
	long err = bpf_map_update_elem(&io_inflight, &key, &v, BPF_NOEXIST);
	if (!err)
		return;
	if (err == -17 /* EEXIST */) {
		if (l)
			l->io_orphaned++;
		err = bpf_map_update_elem(&io_inflight, &key, &v, BPF_EXIST);
	}
	if (err && l)
		l->io_table_full++;
}

/* A requeued request is issued again: forget the first issue. */
static __always_inline void on_rq_requeue(__u32 dev, __u64 sector, __u64 rq)
{
	if (!record_io)
		return;
	struct io_key key = io_key_of(dev, sector, rq);
	bpf_map_delete_elem(&io_inflight, &key);
}

/* alloc_ns: the request's rq->start_time_ns, 0 where unknown (the classic
 * tracepoint does not carry it). */
static __always_inline void on_rq_complete(__u32 dev, __u64 sector, __u64 rq, __u32 nr_bytes, __s32 error, __u64 alloc_ns)
{
	if (!record_io)
		return;
	struct io_key key = io_key_of(dev, sector, rq);
	struct io_start *v = bpf_map_lookup_elem(&io_inflight, &key);
	if (!v || error || nr_bytes >= v->remaining) {
		struct loss_counters *l = loss_counters();
		if (l)
			l->io_completions++;
	}
	if (!v) {
		struct loss_counters *l = loss_counters();
		if (l) {
			l->io_unmatched++;
			__u64 attached = attach_ns;
			if (attached && alloc_ns > attached)
				l->io_unissued++;
		}
		return;
	}
	if (!error && nr_bytes < v->remaining) {
		/* Partial completion: blk_update_request advances the request. */
		struct loss_counters *l = loss_counters();
		if (l)
			l->io_partial++;
		struct io_start next = *v;
		next.remaining -= nr_bytes;
		struct io_key nk = io_key_of(dev, sector + (nr_bytes >> 9), rq);
		bpf_map_delete_elem(&io_inflight, &key);
		bpf_map_update_elem(&io_inflight, &nk, &next, BPF_ANY);
		return;
	}

	struct block_io_record *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		bpf_map_delete_elem(&io_inflight, &key);
		struct loss_counters *l = loss_counters();
		if (l)
			l->io_lost++;
		return;
	}
	e->type = RECORD_BLOCK_IO;
	e->op = v->op;
	e->pad0 = 0;
	e->dev = dev;
	e->sector = v->first_sector;
	e->bytes = v->bytes;
	e->cmd_flags = v->cmd_flags;
	e->issue_ns = v->issue_ns;
	e->complete_ns = bpf_ktime_get_ns();
	e->issue_cpu = v->issue_cpu;
	e->complete_cpu = bpf_get_smp_processor_id();
	e->error = error;
	e->tid = v->tid;
	e->tgid = v->tgid;
	__builtin_memcpy(e->comm, v->comm, sizeof(e->comm));
	__u32 tid = v->tid;
	struct io_wait w = {.complete_ns = e->complete_ns};
	bpf_map_delete_elem(&io_inflight, &key);
	bpf_ringbuf_submit(e, submit_flags());
	if (tid)
		bpf_map_update_elem(&io_waiting, &tid, &w, BPF_ANY);
}

/* sched_waking of a task whose request completed: the first wake-up
 * after the completion is the one it waited for. */
static __always_inline void on_task_waking(__u32 tid)
{
	if (!record_io)
		return;
	struct io_wait *w = bpf_map_lookup_elem(&io_waiting, &tid);
	if (w && !w->woken_ns)
		w->woken_ns = bpf_ktime_get_ns();
}

/* sched_switch to a task whose request completed: it runs again. */
static __always_inline void on_task_run(__u32 tid)
{
	if (!record_io || !tid)
		return;
	struct io_wait *w = bpf_map_lookup_elem(&io_waiting, &tid);
	if (!w)
		return;
	struct io_task_record *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		e->type = RECORD_IO_TASK;
		e->pad0 = 0;
		e->pad1 = 0;
		e->tid = tid;
		e->complete_ns = w->complete_ns;
		e->woken_ns = w->woken_ns;
		e->run_ns = bpf_ktime_get_ns();
		e->run_cpu = bpf_get_smp_processor_id();
		e->pad2 = 0;
		bpf_ringbuf_submit(e, submit_flags());
	} else {
		struct loss_counters *l = loss_counters();
		if (l)
			l->other_lost++;
	}
	bpf_map_delete_elem(&io_waiting, &tid);
}

static __always_inline void on_haltpoll(_Bool grow, __u32 new_ns, __u32 old_ns)
{
	struct haltpoll_record *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		struct loss_counters *l = loss_counters();
		if (l)
			l->other_lost++;
		return;
	}
	e->type = RECORD_HALTPOLL;
	e->grow = grow;
	e->pad0 = 0;
	e->cpu = bpf_get_smp_processor_id();
	e->time_ns = bpf_ktime_get_ns();
	e->new_ns = new_ns;
	e->old_ns = old_ns;
	bpf_ringbuf_submit(e, submit_flags());
}

static __always_inline void on_qos_request(__s32 target, __u32 action)
{
	__u64 key = bpf_get_current_pid_tgid();
	struct qos_pending p = {.time_ns = bpf_ktime_get_ns(), .target = target, .action = action};
	bpf_map_update_elem(&qos_pending, &key, &p, BPF_ANY);
}

/* A device's resume-latency request: kept only for CPU devices ("cpuN"). */
static __always_inline void on_dev_qos_request(const char *name, __u32 type, __u32 action)
{
	char buf[12] = {};
	__s32 cpu = 0;

	if (type != DEV_PM_QOS_RESUME_LATENCY || bpf_probe_read_kernel_str(buf, sizeof(buf), name) < 5 ||
	    buf[0] != 'c' || buf[1] != 'p' || buf[2] != 'u') {
		on_qos_request(QOS_IGNORE, action);
		return;
	}
	for (int i = 3; i < (int)sizeof(buf); i++) {
		char c = buf[i];
		if (c == 0)
			break;
		if (c < '0' || c > '9' || i > 8) {
			on_qos_request(QOS_IGNORE, action);
			return;
		}
		cpu = cpu * 10 + (c - '0');
	}
	on_qos_request(cpu, action);
}

static __always_inline void on_qos_update_target(__u32 action, __s32 prev_value, __s32 curr_value)
{
	__u64 key = bpf_get_current_pid_tgid();
	struct qos_pending *p = bpf_map_lookup_elem(&qos_pending, &key);
	if (!p)
		return;
	__u64 now = bpf_ktime_get_ns();
	__s32 target = p->target;
	_Bool match = p->action == action && now - p->time_ns <= QOS_MATCH_NS;
	bpf_map_delete_elem(&qos_pending, &key);
	/* Not a change of the limit (a request added at the default, or one
	 * that another, stricter request hides): nothing the governors see. */
	if (!match || target == QOS_IGNORE || prev_value == curr_value)
		return;
	struct pm_qos_record *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		struct loss_counters *l = loss_counters();
		if (l)
			l->other_lost++;
		return;
	}
	e->type = RECORD_PM_QOS;
	e->action = action;
	e->pad0 = 0;
	e->target = target;
	e->time_ns = now;
	e->value = curr_value;
	e->prev_value = prev_value;
	e->cpu = bpf_get_smp_processor_id();
	e->tid = (__u32)key;
	bpf_ringbuf_submit(e, submit_flags());
}

static __always_inline void on_cpu_idle(__u32 state, __u32 cpu)
{
	if (state == PWR_EVENT_EXIT)
		on_idle_exit(cpu, bpf_ktime_get_ns());
	else
		on_idle_entry(cpu, state);
}

/* tp_btf arguments are typed kernel pointers: the fields are read with
 * direct (CO-RE relocated, fault-safe) loads, no helper calls. */
static __always_inline __u32 rq_dev(struct request *rq)
{
	struct gendisk *disk = NULL;
	if (bpf_core_field_exists(rq->q->disk)) {
		disk = rq->q->disk;
	} else {
		struct request___old *old = (void *)rq;
		if (bpf_core_field_exists(old->rq_disk))
			disk = old->rq_disk;
	}
	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

static __always_inline __u32 task_cpu(struct task_struct *p)
{
	if (bpf_core_field_exists(p->thread_info.cpu))
		return p->thread_info.cpu;
	struct task_struct___old *old = (void *)p;
	return old->cpu;
}

/* ---- tp_btf entry points ---- */

SEC("tp_btf/cpu_idle")
int BPF_PROG(btf_cpu_idle, unsigned int state, unsigned int cpu_id)
{
	on_cpu_idle(state, cpu_id);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(btf_block_rq_issue, struct request *rq)
{
	__u32 flags = rq->cmd_flags;
	on_rq_issue(rq_dev(rq), rq->__sector, (__u64)rq, rq->__data_len, flags, flags & REQ_OP_MASK);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(btf_block_rq_complete, struct request *rq, __u8 error, unsigned int nr_bytes)
{
	__u64 alloc_ns = bpf_core_field_exists(rq->start_time_ns) ? BPF_CORE_READ(rq, start_time_ns) : 0;
	on_rq_complete(rq_dev(rq), rq->__sector, (__u64)rq, nr_bytes, error, alloc_ns);
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(btf_block_rq_requeue, struct request *rq)
{
	on_rq_requeue(rq_dev(rq), rq->__sector, (__u64)rq);
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(btf_irq_handler_entry, int irq)
{
	on_local_wake(WAKE_IRQ, irq);
	return 0;
}

SEC("tp_btf/local_timer_entry")
int BPF_PROG(btf_local_timer_entry, int vector)
{
	on_local_wake(WAKE_TIMER, -1);
	return 0;
}

SEC("tp_btf/local_timer_exit")
int BPF_PROG(btf_local_timer_exit, int vector)
{
	on_local_timer_exit();
	return 0;
}

SEC("tp_btf/reschedule_entry")
int BPF_PROG(btf_reschedule_entry, int vector)
{
	on_local_wake(WAKE_IPI_RESCHED, -1);
	return 0;
}

SEC("tp_btf/call_function_entry")
int BPF_PROG(btf_call_function_entry, int vector)
{
	on_local_wake(WAKE_IPI_CALL, -1);
	return 0;
}

SEC("tp_btf/call_function_single_entry")
int BPF_PROG(btf_call_function_single_entry, int vector)
{
	on_local_wake(WAKE_IPI_CALL, -1);
	return 0;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(btf_hrtimer_expire_entry, struct hrtimer *timer)
{
	on_hrtimer_expire((__u64)timer);
	return 0;
}

SEC("tp_btf/tick_stop")
int BPF_PROG(btf_tick_stop, int success, int dependency)
{
	on_tick_stop(success);
	return 0;
}

SEC("tp_btf/sched_wake_idle_without_ipi")
int BPF_PROG(btf_sched_wake_idle_without_ipi, int cpu)
{
	on_wake_without_ipi(cpu);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(btf_sched_waking, struct task_struct *p)
{
	on_task_waking(p->pid);
	if (waking_requests)
		on_wake_request(task_cpu(p), 0);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(btf_sched_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next)
{
	on_task_run(next->pid);
	return 0;
}

SEC("tp_btf/ipi_send_cpu")
int BPF_PROG(btf_ipi_send_cpu, unsigned int cpu)
{
	on_wake_request(cpu, 1);
	return 0;
}

SEC("tp_btf/ipi_send_cpumask")
int BPF_PROG(btf_ipi_send_cpumask, struct cpumask *mask)
{
	on_wake_request_mask(mask->bits, MAX_CPUMASK_WORDS);
	return 0;
}

SEC("tp_btf/guest_halt_poll_ns")
int BPF_PROG(btf_guest_halt_poll_ns, _Bool grow, unsigned int new_ns, unsigned int old_ns)
{
	on_haltpoll(grow, new_ns, old_ns);
	return 0;
}

SEC("tp_btf/pm_qos_add_request")
int BPF_PROG(btf_pm_qos_add_request, __s32 value)
{
	on_qos_request(QOS_GLOBAL, 0);
	return 0;
}

SEC("tp_btf/pm_qos_update_request")
int BPF_PROG(btf_pm_qos_update_request, __s32 value)
{
	on_qos_request(QOS_GLOBAL, 1);
	return 0;
}

SEC("tp_btf/pm_qos_remove_request")
int BPF_PROG(btf_pm_qos_remove_request, __s32 value)
{
	on_qos_request(QOS_GLOBAL, 2);
	return 0;
}

SEC("tp_btf/dev_pm_qos_add_request")
int BPF_PROG(btf_dev_pm_qos_add_request, const char *name, __u32 type, __s32 value)
{
	on_dev_qos_request(name, type, 0);
	return 0;
}

SEC("tp_btf/dev_pm_qos_update_request")
int BPF_PROG(btf_dev_pm_qos_update_request, const char *name, __u32 type, __s32 value)
{
	on_dev_qos_request(name, type, 1);
	return 0;
}

SEC("tp_btf/dev_pm_qos_remove_request")
int BPF_PROG(btf_dev_pm_qos_remove_request, const char *name, __u32 type, __s32 value)
{
	on_dev_qos_request(name, type, 2);
	return 0;
}

SEC("tp_btf/pm_qos_update_target")
int BPF_PROG(btf_pm_qos_update_target, __u32 action, int prev_value, int curr_value)
{
	on_qos_update_target(action, prev_value, curr_value);
	return 0;
}

/* ---- classic tracepoint entry points ---- */

/* Classic tracepoint programs return 1: a BPF program attached through perf
 * that returns 0 drops the event for every perf user of the tracepoint
 * (perf_trace_run_bpf_submit), which would blind perf stat, perf record and
 * the recorder's own counts of the raised events while idletrace runs. */
SEC("tracepoint/power/cpu_idle")
int tp_cpu_idle(struct trace_event_raw_cpu *ctx)
{
	on_cpu_idle(ctx->state, ctx->cpu_id);
	return 1;
}

SEC("tracepoint/block/block_rq_issue")
int tp_block_rq_issue(struct trace_event_raw_block_rq *ctx)
{
	char rwbs[8];
	bpf_probe_read_kernel(rwbs, sizeof(rwbs), ctx->rwbs);
	/* The classic record carries no cmd_flags; the op comes from rwbs. */
	__u8 op = op_from_rwbs(rwbs);
	/* dev_t in trace records is the kernel's MKDEV: major << 20 | minor. */
	on_rq_issue(ctx->dev, ctx->sector, 0, ctx->bytes, op, op);
	return 1;
}

/* The record's type changed its name in 5.18 (kernel.h); the type the
 * kernel lacks is never read, and its relocations are left unresolved. */
SEC("tracepoint/block/block_rq_complete")
int tp_block_rq_complete(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_block_rq_completion)) {
		struct trace_event_raw_block_rq_completion *rec = ctx;
		on_rq_complete(rec->dev, rec->sector, 0, rec->nr_sector << 9, rec->error, 0);
	} else {
		struct trace_event_raw_block_rq_complete___old *rec = ctx;
		on_rq_complete(rec->dev, rec->sector, 0, rec->nr_sector << 9, rec->error, 0);
	}
	return 1;
}

SEC("tracepoint/block/block_rq_requeue")
int tp_block_rq_requeue(struct trace_event_raw_block_rq_requeue *ctx)
{
	on_rq_requeue(ctx->dev, ctx->sector, 0);
	return 1;
}

SEC("tracepoint/irq/irq_handler_entry")
int tp_irq_handler_entry(struct trace_event_raw_irq_handler_entry *ctx)
{
	on_local_wake(WAKE_IRQ, ctx->irq);
	return 1;
}

SEC("tracepoint/irq_vectors/local_timer_entry")
int tp_local_timer_entry(void *ctx)
{
	on_local_wake(WAKE_TIMER, -1);
	return 1;
}

SEC("tracepoint/irq_vectors/local_timer_exit")
int tp_local_timer_exit(void *ctx)
{
	on_local_timer_exit();
	return 1;
}

SEC("tracepoint/irq_vectors/reschedule_entry")
int tp_reschedule_entry(void *ctx)
{
	on_local_wake(WAKE_IPI_RESCHED, -1);
	return 1;
}

SEC("tracepoint/irq_vectors/call_function_entry")
int tp_call_function_entry(void *ctx)
{
	on_local_wake(WAKE_IPI_CALL, -1);
	return 1;
}

SEC("tracepoint/irq_vectors/call_function_single_entry")
int tp_call_function_single_entry(void *ctx)
{
	on_local_wake(WAKE_IPI_CALL, -1);
	return 1;
}

SEC("tracepoint/timer/hrtimer_expire_entry")
int tp_hrtimer_expire_entry(struct trace_event_raw_hrtimer_expire_entry *ctx)
{
	on_hrtimer_expire((__u64)ctx->hrtimer);
	return 1;
}

SEC("tracepoint/timer/tick_stop")
int tp_tick_stop(struct trace_event_raw_tick_stop *ctx)
{
	on_tick_stop(ctx->success);
	return 1;
}

SEC("tracepoint/sched/sched_wake_idle_without_ipi")
int tp_sched_wake_idle_without_ipi(struct trace_event_raw_sched_wake_idle_without_ipi *ctx)
{
	on_wake_without_ipi(ctx->cpu);
	return 1;
}

SEC("tracepoint/sched/sched_waking")
int tp_sched_waking(struct trace_event_raw_sched_wakeup_template *ctx)
{
	on_task_waking(ctx->pid);
	if (waking_requests)
		on_wake_request(ctx->target_cpu, 0);
	return 1;
}

SEC("tracepoint/sched/sched_switch")
int tp_sched_switch(struct trace_event_raw_sched_switch *ctx)
{
	on_task_run(ctx->next_pid);
	return 1;
}

SEC("tracepoint/ipi/ipi_send_cpu")
int tp_ipi_send_cpu(struct trace_event_raw_ipi_send_cpu *ctx)
{
	on_wake_request(ctx->cpu, 1);
	return 1;
}

SEC("tracepoint/ipi/ipi_send_cpumask")
int tp_ipi_send_cpumask(struct trace_event_raw_ipi_send_cpumask *ctx)
{
	/* __data_loc: low 16 bits offset from the record start, high 16 length. */
	__u32 loc = ctx->__data_loc_cpumask;
	on_wake_request_mask((const unsigned long *)((char *)ctx + (loc & 0xffff)), (loc >> 16) / 8);
	return 1;
}

/* Before Linux 6.6 no tracepoint marks an IPI send: fentry on x86's
 * senders stands in for ipi:ipi_send_cpu and ipi:ipi_send_cpumask (Go
 * attaches them only where those tracepoints are missing). */
SEC("fentry/native_smp_send_reschedule")
int BPF_PROG(fentry_smp_send_reschedule, int cpu)
{
	on_wake_request(cpu, 1);
	return 0;
}

SEC("fentry/native_send_call_func_single_ipi")
int BPF_PROG(fentry_send_call_func_single_ipi, int cpu)
{
	on_wake_request(cpu, 1);
	return 0;
}

SEC("fentry/native_send_call_func_ipi")
int BPF_PROG(fentry_send_call_func_ipi, const struct cpumask *mask)
{
	on_wake_request_mask(mask->bits, MAX_CPUMASK_WORDS);
	return 0;
}

SEC("tracepoint/power/guest_halt_poll_ns")
int tp_guest_halt_poll_ns(struct trace_event_raw_guest_halt_poll_ns *ctx)
{
	on_haltpoll(ctx->grow, ctx->new, ctx->old);
	return 1;
}

SEC("tracepoint/power/pm_qos_add_request")
int tp_pm_qos_add_request(void *ctx)
{
	on_qos_request(QOS_GLOBAL, 0);
	return 1;
}

SEC("tracepoint/power/pm_qos_update_request")
int tp_pm_qos_update_request(void *ctx)
{
	on_qos_request(QOS_GLOBAL, 1);
	return 1;
}

SEC("tracepoint/power/pm_qos_remove_request")
int tp_pm_qos_remove_request(void *ctx)
{
	on_qos_request(QOS_GLOBAL, 2);
	return 1;
}

/* The name is a __data_loc string: its offset from the record's start in
 * the low 16 bits. */
static __always_inline const char *dev_qos_name(struct trace_event_raw_dev_pm_qos_request *ctx)
{
	return (const char *)ctx + (ctx->__data_loc_name & 0xffff);
}

SEC("tracepoint/power/dev_pm_qos_add_request")
int tp_dev_pm_qos_add_request(struct trace_event_raw_dev_pm_qos_request *ctx)
{
	on_dev_qos_request(dev_qos_name(ctx), ctx->type, 0);
	return 1;
}

SEC("tracepoint/power/dev_pm_qos_update_request")
int tp_dev_pm_qos_update_request(struct trace_event_raw_dev_pm_qos_request *ctx)
{
	on_dev_qos_request(dev_qos_name(ctx), ctx->type, 1);
	return 1;
}

SEC("tracepoint/power/dev_pm_qos_remove_request")
int tp_dev_pm_qos_remove_request(struct trace_event_raw_dev_pm_qos_request *ctx)
{
	on_dev_qos_request(dev_qos_name(ctx), ctx->type, 2);
	return 1;
}

SEC("tracepoint/power/pm_qos_update_target")
int tp_pm_qos_update_target(struct trace_event_raw_pm_qos_update *ctx)
{
	on_qos_update_target(ctx->action, ctx->prev_value, ctx->curr_value);
	return 1;
}
