/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The few kernel types the programs read, declared with only the fields used.
 * preserve_access_index makes every access a CO-RE relocation, so offsets come
 * from the running kernel's BTF, not from this file. Names must match the
 * kernel's; the ___suffix variants are shims for older layouts
 * (bpf_core_field_exists or bpf_core_type_exists picks the one the kernel
 * has).
 */
#ifndef IDLETRACE_KERNEL_H
#define IDLETRACE_KERNEL_H

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

typedef __s64 ktime_t;
typedef __u32 dev_t;
typedef __u64 sector_t;

struct rb_node {
	unsigned long __rb_parent_color;
	struct rb_node *rb_right;
};

struct rb_root_cached {
	struct rb_node *rb_leftmost;
};

struct timerqueue_head {
	struct rb_root_cached rb_root;
};

struct timerqueue_node {
	struct rb_node node;
	ktime_t expires;
};

struct hrtimer_cpu_base;

/* include/linux/clockchips.h, kernel/time/tick-sched.h */
struct clock_event_device {
	ktime_t next_event;
};

struct tick_device {
	struct clock_event_device *evtdev;
};

/* include/linux/hrtimer_defs.h: one timerqueue per clock; offset converts
 * its expiry times to CLOCK_MONOTONIC. Indexed with the kernel's size
 * (bpf_core_type_size), not this declaration's. */
struct hrtimer_clock_base {
	struct hrtimer_cpu_base *cpu_base;
	struct timerqueue_head active;
	ktime_t offset;
};

struct hrtimer_cpu_base {
	unsigned int cpu;
	unsigned int active_bases;
	unsigned int hres_active : 1;
	unsigned int softirq_activated : 1;
	ktime_t expires_next;
	struct hrtimer_clock_base clock_base[8];
};

struct hrtimer {
	struct timerqueue_node node;
	void *function;
	struct hrtimer_clock_base *base;
};

/* kernel/time/tick-sched.h; flags word since 6.9 (TS_FLAG_STOPPED = bit 1,
 * TS_FLAG_NOHZ = bit 4). idle_entrytime is the "now" the governors'
 * tick_nohz_get_sleep_length() measures from. */
struct tick_sched {
	unsigned long flags;
	struct hrtimer sched_timer;
	__u64 timer_expires;
	ktime_t idle_entrytime;
	unsigned int got_idle_tick;
};

/* Before 6.9 the stopped state was a bitfield and the NOHZ mode an enum
 * (NOHZ_MODE_INACTIVE = 0). */
struct tick_sched___old {
	unsigned int tick_stopped : 1;
	int nohz_mode;
};

typedef struct {
	int counter;
} atomic_t;

/* kernel/sched/sched.h */
struct rq {
	atomic_t nr_iowait;
};

struct cpuidle_state_usage {
	__u64 usage;
	__u64 time_ns;
};

/* drivers/cpuidle/governors/menu.c: the slot its next interval goes to. */
struct menu_device {
	int interval_ptr;
};

/* include/linux/cpuidle.h; poll_time_limit is a bitfield (since 5.1). */
struct cpuidle_device {
	unsigned int poll_time_limit;
	__s64 last_residency_ns;
	struct cpuidle_state_usage states_usage[10];
};

struct gendisk {
	int major;
	int first_minor;
};

struct request_queue {
	struct gendisk *disk;
};

struct request {
	struct request_queue *q;
	unsigned int cmd_flags;
	unsigned int __data_len;
	sector_t __sector;
	__u64 start_time_ns; /* allocation time; 0 without the queue's iostats */
};

/* Before 5.16 the disk hung off the request. */
struct request___old {
	struct gendisk *rq_disk;
};

struct thread_info {
	__u32 cpu;
};

struct task_struct {
	struct thread_info thread_info;
	int pid;
	unsigned long nvcsw;  /* context switches away, voluntary */
	unsigned long nivcsw; /* and involuntary */
};

/* Kernels without THREAD_INFO_IN_TASK kept the CPU in task_struct. */
struct task_struct___old {
	unsigned int cpu;
};

struct cpumask {
	unsigned long bits[1];
};

/* Classic tracepoint records (include/trace/events/). */
struct trace_entry {
	unsigned short type;
	unsigned char flags;
	unsigned char preempt_count;
	int pid;
};

struct trace_event_raw_cpu {
	struct trace_entry ent;
	__u32 state;
	__u32 cpu_id;
};

struct trace_event_raw_block_rq {
	struct trace_entry ent;
	dev_t dev;
	sector_t sector;
	unsigned int nr_sector;
	unsigned int bytes;
	char rwbs[8];
};

/* block_rq_complete's record, named after its event class since 5.18 (the
 * class is shared with block_rq_error: d5869fdc189f "block: introduce
 * block_rq_error tracepoint"). */
struct trace_event_raw_block_rq_completion {
	struct trace_entry ent;
	dev_t dev;
	sector_t sector;
	unsigned int nr_sector;
	int error;
	char rwbs[8];
};

/* Before 5.18 the event was a class of its own, and its record was named
 * after it (the same fields). bpf_core_type_exists picks the one the kernel
 * has. */
struct trace_event_raw_block_rq_complete___old {
	dev_t dev;
	sector_t sector;
	unsigned int nr_sector;
	int error;
};

struct trace_event_raw_block_rq_requeue {
	struct trace_entry ent;
	dev_t dev;
	sector_t sector;
};

struct trace_event_raw_irq_handler_entry {
	struct trace_entry ent;
	int irq;
};

struct trace_event_raw_x86_irq_vector {
	struct trace_entry ent;
	int vector;
};

struct trace_event_raw_sched_wake_idle_without_ipi {
	struct trace_entry ent;
	int cpu;
};

struct trace_event_raw_sched_wakeup_template {
	struct trace_entry ent;
	int pid;
	int target_cpu;
};

struct trace_event_raw_sched_switch {
	struct trace_entry ent;
	int next_pid;
};

struct trace_event_raw_ipi_send_cpu {
	struct trace_entry ent;
	unsigned int cpu;
};

struct trace_event_raw_ipi_send_cpumask {
	struct trace_entry ent;
	__u32 __data_loc_cpumask;
};

struct trace_event_raw_hrtimer_expire_entry {
	struct trace_entry ent;
	void *hrtimer;
	void *function;
};

struct trace_event_raw_tick_stop {
	struct trace_entry ent;
	int success;
	int dependency;
};

struct trace_event_raw_guest_halt_poll_ns {
	struct trace_entry ent;
	_Bool grow;
	unsigned int new;
	unsigned int old;
};

struct trace_event_raw_pm_qos_update {
	struct trace_entry ent;
	unsigned int action; /* enum pm_qos_req_action */
	int prev_value;
	int curr_value;
};

struct trace_event_raw_dev_pm_qos_request {
	struct trace_entry ent;
	__u32 __data_loc_name;
	unsigned int type; /* enum dev_pm_qos_req_type */
	__s32 new_value;
};

#pragma clang attribute pop

#endif /* IDLETRACE_KERNEL_H */
