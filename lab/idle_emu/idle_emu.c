// SPDX-License-Identifier: GPL-2.0-only
/*
 * idle_emu: an emulated cpuidle driver for idletrace's lab.
 *
 * Registers a cpuidle driver whose state table comes from module parameters,
 * so that the kernel's own governors choose among a real server's C-states
 * inside a VM that has none:
 *
 *   modprobe/insmod idle_emu.ko poll=1 \
 *       names=C1,C1E,C6 latency_ns=1000,2000,290000 \
 *       residency_ns=1000,4000,800000 flags=,,tlb
 *
 * poll=1 makes state 0 the cpuidle core's POLL (cpuidle_poll_state_init);
 * every other state halts (STI; HLT). latency_us=/residency_us= may be given
 * instead of the _ns arrays. flags per state, '+'-separated: "off" (disabled
 * by default, CPUIDLE_FLAG_OFF), "tlb" (CPUIDLE_FLAG_TLB_FLUSHED: the core
 * calls leave_mm first); anything else is refused.
 *
 * Exit latency is paid the way hardware pays it: the interrupt handler that
 * ends a stay runs after the exit latency, not before. A halted state records
 * the latency it owes in a per-CPU variable before HLT; probes registered on
 * the interrupt, IPI and timer entry tracepoints (irq:irq_handler_entry,
 * irq_vectors:*_entry), which run before the handler's own work, spin the
 * owed time when this CPU is leaving an emulated state, once per stay (the
 * first probe pays; an interrupt pending behind it finds nothing
 * owed). A stay that ends without one of them (an NMI, a vector without a
 * tracepoint) pays in the driver's enter callback before it returns. The
 * spin is on CLOCK_MONOTONIC (ktime_get_mono_fast_ns), the clock the
 * recorder's trace and the workloads measure wake-ups with; the cpuidle
 * core's residency clock, local_clock(), runs at its rate on the tsc
 * clocksource ("calibration"), so the kernel counts the exit latency inside
 * the residency, as it does on hardware (where MWAIT returns only after the
 * core has woken up): menu's "measured - exit latency" and the core's
 * "below" rule expect that.
 *
 * Under single-threaded QEMU TCG one host thread runs every vCPU in turn, so
 * a spin would stop the other CPUs for its whole length: a CPU leaving C6
 * for its tick would hold up the CPU that is waking a task or completing an
 * IO, which hardware never does. A spin of at least yield_min_ns therefore
 * executes PAUSE while another CPU is awake (running, or paying its own exit
 * latency), which hands the host thread over (spin_yield).
 *
 * Read-only parameters show what was done: "calibration" (a 1 ms spin on
 * CLOCK_MONOTONIC and on local_clock, and udelay(1000), measured at load),
 * "stats" (per state: stays paid at an interrupt entry, in enter, the time
 * spun, the spins more than 10 % over, the longest), "overrun" (per state,
 * spins by how far they ran over) and "overran" (spins of any state that ran
 * over by more than overrun_ns: the host, or another vCPU, held the CPU that
 * was paying; lab/pingpong reads it around every sample).
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/cpuidle.h>
#include <linux/cpu.h>
#include <linux/percpu.h>
#include <linux/sched/clock.h>
#include <linux/sched/idle.h>
#include <linux/timekeeping.h>
#include <linux/tracepoint.h>
#include <linux/string.h>
#include <linux/irqflags.h>
#include <linux/interrupt.h>
#include <linux/delay.h>

#define EMU_MAX CPUIDLE_STATE_MAX

static bool poll = true;
module_param(poll, bool, 0444);
MODULE_PARM_DESC(poll, "state 0 is the cpuidle core's POLL");

static char *names[EMU_MAX];
static int n_names;
module_param_array(names, charp, &n_names, 0444);
MODULE_PARM_DESC(names, "halted states' names, shallowest first");

static ulong latency_ns[EMU_MAX];
static int n_latency_ns;
module_param_array(latency_ns, ulong, &n_latency_ns, 0444);
MODULE_PARM_DESC(latency_ns, "exit latency per halted state (ns)");

static ulong residency_ns[EMU_MAX];
static int n_residency_ns;
module_param_array(residency_ns, ulong, &n_residency_ns, 0444);
MODULE_PARM_DESC(residency_ns, "target residency per halted state (ns)");

static uint latency_us[EMU_MAX];
static int n_latency_us;
module_param_array(latency_us, uint, &n_latency_us, 0444);
MODULE_PARM_DESC(latency_us, "exit latency per halted state (us), instead of latency_ns");

static uint residency_us[EMU_MAX];
static int n_residency_us;
module_param_array(residency_us, uint, &n_residency_us, 0444);
MODULE_PARM_DESC(residency_us, "target residency per halted state (us), instead of residency_ns");

static char *flags[EMU_MAX];
static int n_flags;
module_param_array(flags, charp, &n_flags, 0444);
MODULE_PARM_DESC(flags, "per halted state, '+'-separated: off, tlb");

static bool spin_yield = true;
module_param(spin_yield, bool, 0644);
MODULE_PARM_DESC(spin_yield, "cpu_relax() (PAUSE) in exit-latency spins of at least yield_min_ns: under single-threaded QEMU TCG it hands the host thread to the other vCPUs, so that a CPU paying its exit latency does not stop the others (default on)");

static ulong yield_min_ns = 20000;
module_param(yield_min_ns, ulong, 0644);
MODULE_PARM_DESC(yield_min_ns, "with spin_yield, the shortest exit latency whose spin yields (ns, default 20000): a shorter one costs the other vCPUs less than a hand-over");

static ulong overrun_ns = 10000;
module_param(overrun_ns, ulong, 0644);
MODULE_PARM_DESC(overrun_ns, "a spin that runs over its exit latency by more than this (ns, default 10000) counts in \"overran\"");

static uint spin_gap_loops;
module_param(spin_gap_loops, uint, 0644);
MODULE_PARM_DESC(spin_gap_loops, "empty loop iterations between two clock reads of an exit-latency spin (default 0: read the clock back to back); under TCG each read is a helper call, so this tells the spin's own cost from the clock's");

static uint spin_permille = 1000;
module_param(spin_permille, uint, 0644);
MODULE_PARM_DESC(spin_permille, "an exit-latency spin lasts the state's exit latency times this / 1000 (default 1000)");


static bool hold_irq = true;
module_param(hold_irq, bool, 0444);
MODULE_PARM_DESC(hold_irq, "pay exit latency at interrupt entry, before the handler (default); 0: after HLT, handler first");

#define EMU_NOVER 16

struct emu_cpu {
	u64 owed_ns;		/* exit latency still to pay; 0 when not halted */
	int state;		/* index being left */
	int halted;		/* in HLT in an emulated state: no interrupt taken yet */
	u64 paid_irq[EMU_MAX];	/* stays whose latency was paid at an interrupt entry */
	u64 paid_enter[EMU_MAX];	/* ... in enter (no hooked interrupt ran) */
	u64 spun_ns[EMU_MAX];	/* time spent spinning */
	u64 late[EMU_MAX];	/* spins that ran over the owed time by more than 10 % */
	u64 overran;		/* spins, any state, that ran over by more than overrun_ns */
	u64 max_ns[EMU_MAX];	/* longest spin */
	u64 over[EMU_MAX][EMU_NOVER];	/* spins by overrun: < 1 us, < 2 us, < 4 us, ... */
};
static DEFINE_PER_CPU(struct emu_cpu, emu_cpu);

static struct cpuidle_driver emu_driver = {
	.name = "idle_emu",
	.owner = THIS_MODULE,
};

/*
 * The spin's clock: CLOCK_MONOTONIC, what the recorder (bpf_ktime_get_ns)
 * and the workloads (clock_gettime) measure wake-ups with. NMI-safe, so
 * usable in any probe. With the tsc clocksource local_clock(), the cpuidle
 * core's residency clock, runs at the same rate ("calibration").
 */
static inline u64 emu_clock(void)
{
	return ktime_get_mono_fast_ns();
}

/* Is any other online CPU doing something: not halted in an emulated state? */
static bool emu_others_awake(void)
{
	int cpu, self = smp_processor_id();

	for_each_online_cpu(cpu)
		if (cpu != self && !READ_ONCE(per_cpu_ptr(&emu_cpu, cpu)->halted))
			return true;
	return false;
}

/*
 * Spin ns; returns the time actually spun. With yield, cpu_relax() whenever
 * another CPU is awake: under single-threaded QEMU TCG (one host thread runs
 * every vCPU in turn) PAUSE ends this vCPU's turn (helper_pause), so that a
 * CPU that is running, or paying its own exit latency, goes on while this
 * one waits, as on hardware, instead of stopping for the whole spin. While
 * the others are halted there is no one to hand over to (an interrupt for
 * them from a device or timer takes the host thread anyway), and PAUSE would
 * only cost a pass through QEMU's scheduler under its big lock.
 */
static u64 emu_spin(u64 ns, bool yield)
{
	u64 t0 = emu_clock(), t;
	uint gap = READ_ONCE(spin_gap_loops), i;

	do {
		if (yield && emu_others_awake())
			cpu_relax();
		for (i = 0; i < gap; i++)
			barrier();
		t = emu_clock();
	} while (t - t0 < ns);
	return t - t0;
}

static void emu_pay(bool at_irq)
{
	struct emu_cpu *c = this_cpu_ptr(&emu_cpu);
	u64 owed = c->owed_ns;
	u64 spun;
	int s = c->state;

	WRITE_ONCE(c->halted, 0);
	if (!owed)
		return;
	c->owed_ns = 0;
	spun = emu_spin(owed, READ_ONCE(spin_yield) && owed >= READ_ONCE(yield_min_ns));
	c->spun_ns[s] += spun;
	if (spun > owed + owed / 10)
		c->late[s]++;
	if (spun - owed > READ_ONCE(overrun_ns))
		WRITE_ONCE(c->overran, c->overran + 1);
	if (spun > c->max_ns[s])
		c->max_ns[s] = spun;
	c->over[s][min_t(int, EMU_NOVER - 1, fls64((spun - owed) / NSEC_PER_USEC))]++;
	if (at_irq)
		c->paid_irq[s]++;
	else
		c->paid_enter[s]++;
}

static u64 emu_owed(struct cpuidle_driver *drv, int index)
{
	return drv->states[index].exit_latency_ns * READ_ONCE(spin_permille) / 1000;
}

static int emu_enter(struct cpuidle_device *dev, struct cpuidle_driver *drv,
		     int index)
{
	struct emu_cpu *c = this_cpu_ptr(&emu_cpu);

	if (current_clr_polling_and_test())
		return index;
	c->state = index;
	c->owed_ns = hold_irq ? emu_owed(drv, index) : 0;
	/* Interrupts are off here; STI's shadow covers HLT, so a wake-up
	 * that is already pending ends the halt rather than being lost. */
	WRITE_ONCE(c->halted, 1);
	asm volatile("sti; hlt" ::: "memory");
	raw_local_irq_disable();
	WRITE_ONCE(c->halted, 0);
	if (hold_irq) {
		emu_pay(false);
	} else {
		c->owed_ns = emu_owed(drv, index);
		emu_pay(false);
	}
	return index;
}

/* --- probes on interrupt entry ------------------------------------------ */

static void emu_probe_irq(void *data, int irq, struct irqaction *action)
{
	emu_pay(true);
}

static void emu_probe_vector(void *data, int vector)
{
	emu_pay(true);
}

static const char *const emu_vector_tps[] = {
	"local_timer_entry", "reschedule_entry", "call_function_entry",
	"call_function_single_entry", "irq_work_entry", "x86_platform_ipi_entry",
	"spurious_apic_entry", "error_apic_entry", "thermal_apic_entry",
	"threshold_apic_entry", "deferred_error_apic_entry",
};
#define EMU_NTP (ARRAY_SIZE(emu_vector_tps) + 1)

struct emu_tp {
	const char *name;
	void *probe;
	struct tracepoint *tp;
	bool registered;
};
static struct emu_tp emu_tps[EMU_NTP];

static void emu_find_tp(struct tracepoint *tp, void *priv)
{
	int i;

	for (i = 0; i < EMU_NTP; i++)
		if (emu_tps[i].name && !strcmp(tp->name, emu_tps[i].name))
			emu_tps[i].tp = tp;
}

/* Before every other probe (BPF programs included): what the handler and
 * whoever traces it see happens after the exit latency. */
#define EMU_TP_PRIO 1000

static void emu_unregister_tps(void)
{
	int i;

	for (i = 0; i < EMU_NTP; i++) {
		if (emu_tps[i].registered)
			tracepoint_probe_unregister(emu_tps[i].tp, emu_tps[i].probe, NULL);
		emu_tps[i].registered = false;
	}
	tracepoint_synchronize_unregister();
}

static int emu_register_tps(void)
{
	int i, err;

	emu_tps[0].name = "irq_handler_entry";
	emu_tps[0].probe = emu_probe_irq;
	for (i = 1; i < EMU_NTP; i++) {
		emu_tps[i].name = emu_vector_tps[i - 1];
		emu_tps[i].probe = emu_probe_vector;
	}
	for_each_kernel_tracepoint(emu_find_tp, NULL);
	for (i = 0; i < EMU_NTP; i++) {
		if (!emu_tps[i].tp) {
			/* irq_handler_entry and the three IPIs and the timer
			 * are required; the rest are x86 options. */
			if (i <= 4) {
				pr_err("idle_emu: no tracepoint %s\n", emu_tps[i].name);
				emu_unregister_tps();
				return -ENOENT;
			}
			continue;
		}
		err = tracepoint_probe_register_prio(emu_tps[i].tp, emu_tps[i].probe,
						     NULL, EMU_TP_PRIO);
		if (err) {
			pr_err("idle_emu: registering on %s: %d\n", emu_tps[i].name, err);
			emu_unregister_tps();
			return err;
		}
		emu_tps[i].registered = true;
	}
	return 0;
}

/* --- read-only reports ------------------------------------------------- */

static u64 calib_spin_ns, calib_local_ns, calib_udelay_ns;

static int emu_get_calibration(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "spin_1000us_ns=%llu local_clock_ns=%llu udelay_1000us_ns=%llu\n",
			  calib_spin_ns, calib_local_ns, calib_udelay_ns);
}
static const struct kernel_param_ops calib_ops = { .get = emu_get_calibration };
module_param_cb(calibration, &calib_ops, NULL, 0444);
MODULE_PARM_DESC(calibration, "a 1 ms exit-latency spin as CLOCK_MONOTONIC and local_clock measured it (read side by side before and after: their rates), and udelay(1000) on CLOCK_MONOTONIC (read-only)");

static int emu_get_stats(char *buf, const struct kernel_param *kp)
{
	int s, cpu, n = 0;

	n += sysfs_emit_at(buf, n, "state latency_ns paid_at_irq paid_in_enter spun_ns late max_ns name\n");
	for (s = 0; s < emu_driver.state_count; s++) {
		u64 pi = 0, pe = 0, sp = 0, la = 0, mx = 0;

		for_each_possible_cpu(cpu) {
			struct emu_cpu *c = per_cpu_ptr(&emu_cpu, cpu);

			pi += READ_ONCE(c->paid_irq[s]);
			pe += READ_ONCE(c->paid_enter[s]);
			sp += READ_ONCE(c->spun_ns[s]);
			la += READ_ONCE(c->late[s]);
			mx = max(mx, READ_ONCE(c->max_ns[s]));
		}
		n += sysfs_emit_at(buf, n, "%d %llu %llu %llu %llu %llu %llu %s\n", s,
				   (u64)emu_driver.states[s].exit_latency_ns, pi, pe, sp, la, mx,
				   emu_driver.states[s].name);
	}
	return n;
}
static const struct kernel_param_ops stats_ops = { .get = emu_get_stats };
module_param_cb(stats, &stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, "per state: stays paid at interrupt entry, in enter, time spun (read-only)");

static int emu_get_overrun(char *buf, const struct kernel_param *kp)
{
	int s, cpu, b, n = 0;

	n += sysfs_emit_at(buf, n, "state");
	for (b = 0; b < EMU_NOVER; b++)
		n += sysfs_emit_at(buf, n, b < EMU_NOVER - 1 ? " <%dus" : " >=%dus",
				   b < EMU_NOVER - 1 ? 1 << b : 1 << (b - 1));
	n += sysfs_emit_at(buf, n, "\n");
	for (s = 0; s < emu_driver.state_count; s++) {
		n += sysfs_emit_at(buf, n, "%d", s);
		for (b = 0; b < EMU_NOVER; b++) {
			u64 t = 0;

			for_each_possible_cpu(cpu)
				t += READ_ONCE(per_cpu_ptr(&emu_cpu, cpu)->over[s][b]);
			n += sysfs_emit_at(buf, n, " %llu", t);
		}
		n += sysfs_emit_at(buf, n, "\n");
	}
	return n;
}
static const struct kernel_param_ops overrun_ops = { .get = emu_get_overrun };
module_param_cb(overrun, &overrun_ops, NULL, 0444);
MODULE_PARM_DESC(overrun, "per state, spins by how far they ran over the exit latency: < 1 us, < 2 us, < 4 us, ... (read-only)");

/* One number, cheap to read around every sample of a measurement. */
static int emu_get_overran(char *buf, const struct kernel_param *kp)
{
	u64 t = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		t += READ_ONCE(per_cpu_ptr(&emu_cpu, cpu)->overran);
	return sysfs_emit(buf, "%llu\n", t);
}
static const struct kernel_param_ops overran_ops = { .get = emu_get_overran };
module_param_cb(overran, &overran_ops, NULL, 0444);
MODULE_PARM_DESC(overran, "exit-latency spins, every CPU and state, that ran over by more than overrun_ns: the host (or under single-threaded TCG another vCPU) held this one (read-only)");

static void emu_calibrate(void)
{
	unsigned long irqf;
	u64 l0, l1, k0, k1;

	local_irq_save(irqf);
	emu_spin(10 * NSEC_PER_USEC, false);	/* TCG translates on first use */
	local_clock();
	k0 = emu_clock();
	l0 = local_clock();
	emu_spin(1000 * NSEC_PER_USEC, false);
	k1 = emu_clock();
	l1 = local_clock();
	calib_spin_ns = k1 - k0;
	calib_local_ns = l1 - l0;
	k0 = emu_clock();
	udelay(1000);
	calib_udelay_ns = emu_clock() - k0;
	local_irq_restore(irqf);
}

/* --- table ------------------------------------------------------------- */

static int emu_parse_flags(const char *f, unsigned int *out)
{
	char buf[64], *p, *tok;

	*out = 0;
	if (!f || !*f)
		return 0;
	strscpy(buf, f, sizeof(buf));
	p = buf;
	while ((tok = strsep(&p, "+|")) != NULL) {
		if (!*tok)
			continue;
		if (!strcmp(tok, "off"))
			*out |= CPUIDLE_FLAG_OFF;
		else if (!strcmp(tok, "tlb"))
			*out |= CPUIDLE_FLAG_TLB_FLUSHED;
		else
			return -EINVAL;
	}
	return 0;
}

static int emu_build_table(void)
{
	struct cpuidle_driver *drv = &emu_driver;
	int i, base = 0, n = n_names;

	if (n == 0) {
		pr_err("idle_emu: no states (names=)\n");
		return -EINVAL;
	}
	if ((n_latency_ns && n_latency_us) || (n_residency_ns && n_residency_us)) {
		pr_err("idle_emu: give latency and residency in ns or in us, not both\n");
		return -EINVAL;
	}
	if ((n_latency_ns ? n_latency_ns : n_latency_us) != n ||
	    (n_residency_ns ? n_residency_ns : n_residency_us) != n ||
	    (n_flags && n_flags != n)) {
		pr_err("idle_emu: names, latency, residency (and flags) must have one value per state\n");
		return -EINVAL;
	}
	if (poll) {
		cpuidle_poll_state_init(drv);
		base = 1;
	}
	if (base + n > CPUIDLE_STATE_MAX) {
		pr_err("idle_emu: %d states, the kernel takes at most %d\n", base + n,
		       CPUIDLE_STATE_MAX);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		struct cpuidle_state *s = &drv->states[base + i];
		u64 el = n_latency_ns ? latency_ns[i] : (u64)latency_us[i] * NSEC_PER_USEC;
		u64 tr = n_residency_ns ? residency_ns[i] : (u64)residency_us[i] * NSEC_PER_USEC;
		unsigned int f;

		if (emu_parse_flags(n_flags ? flags[i] : NULL, &f)) {
			pr_err("idle_emu: state %s: unknown flag in \"%s\" (off, tlb)\n",
			       names[i], flags[i]);
			return -EINVAL;
		}
		if (!names[i][0] || strlen(names[i]) >= CPUIDLE_NAME_LEN) {
			pr_err("idle_emu: state name \"%s\" is empty or longer than %d\n",
			       names[i], CPUIDLE_NAME_LEN - 1);
			return -EINVAL;
		}
		if (i > 0 && el < drv->states[base + i - 1].exit_latency_ns) {
			pr_err("idle_emu: state %s: exit latency below the previous state's\n",
			       names[i]);
			return -EINVAL;
		}
		strscpy(s->name, names[i], CPUIDLE_NAME_LEN);
		snprintf(s->desc, CPUIDLE_DESC_LEN, "idle_emu HLT, exit latency paid before the handler");
		/* The core fills exit_latency/target_residency (us) from the
		 * _ns fields when those are left 0. */
		s->exit_latency_ns = el;
		s->target_residency_ns = tr;
		s->flags = f;
		s->enter = emu_enter;
	}
	drv->state_count = base + n;
	return 0;
}

static int __init emu_init(void)
{
	int err, i;

	err = emu_build_table();
	if (err)
		return err;
	emu_calibrate();
	pr_info("idle_emu: calibration: 1000 us spin = %llu ns CLOCK_MONOTONIC, %llu ns local_clock; udelay(1000) = %llu ns\n",
		calib_spin_ns, calib_local_ns, calib_udelay_ns);
	if (hold_irq) {
		err = emu_register_tps();
		if (err)
			return err;
	}
	err = cpuidle_register(&emu_driver, NULL);
	if (err) {
		pr_err("idle_emu: cpuidle_register: %d (another cpuidle driver registered?)\n", err);
		if (hold_irq)
			emu_unregister_tps();
		return err;
	}
	for (i = 0; i < emu_driver.state_count; i++)
		pr_info("idle_emu: state %d %s exit %llu ns residency %llu ns flags 0x%x\n", i,
			emu_driver.states[i].name,
			(u64)emu_driver.states[i].exit_latency_ns,
			(u64)emu_driver.states[i].target_residency_ns,
			emu_driver.states[i].flags);
	return 0;
}

static void __exit emu_exit(void)
{
	cpuidle_unregister(&emu_driver);
	if (hold_irq)
		emu_unregister_tps();
}

module_init(emu_init);
module_exit(emu_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("idletrace lab: emulated cpuidle driver, table from parameters, exit latency paid before the waking handler");
