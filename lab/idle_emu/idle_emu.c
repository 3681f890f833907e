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
 * owed time when this CPU is leaving an emulated state. A stay that ends
 * without one of them (an NMI, a vector without a tracepoint) pays the rest
 * in the driver's enter callback before it returns. The spin is on
 * local_clock(), the clock the cpuidle core measures residency with, so the
 * kernel counts the exit latency inside the residency, as it does on
 * hardware (where MWAIT returns only after the core has woken up): menu's
 * "measured - exit latency" and the core's "below" rule expect that.
 *
 * Read-only parameters show what was done: "calibration" (a spin of 1 ms on
 * local_clock against ktime_get, measured at load) and "stats" (per state:
 * stays paid at an interrupt entry, in enter, and the total time spun).
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

static bool spin_yield;
module_param(spin_yield, bool, 0644);
MODULE_PARM_DESC(spin_yield, "cpu_relax() (PAUSE) in the exit-latency spin: under single-threaded QEMU TCG it hands the host thread to the other vCPUs, so that two CPUs leaving a state at once spin together rather than one after the other, but a busy vCPU then stretches the spin");

static bool hold_irq = true;
module_param(hold_irq, bool, 0444);
MODULE_PARM_DESC(hold_irq, "pay exit latency at interrupt entry, before the handler (default); 0: after HLT, handler first");

struct emu_cpu {
	u64 owed_ns;		/* exit latency still to pay; 0 when not halted */
	int state;		/* index being left */
	u64 paid_irq[EMU_MAX];	/* stays whose latency was paid at an interrupt entry */
	u64 paid_enter[EMU_MAX];	/* ... in enter (no hooked interrupt ran) */
	u64 spun_ns[EMU_MAX];	/* local_clock time spent spinning */
	u64 late[EMU_MAX];	/* spins that ran over the owed time by more than 10 % */
	u64 max_ns[EMU_MAX];	/* longest spin */
};
static DEFINE_PER_CPU(struct emu_cpu, emu_cpu);

static struct cpuidle_driver emu_driver = {
	.name = "idle_emu",
	.owner = THIS_MODULE,
};

/*
 * Spin ns on local_clock(); returns the time actually spun. cpu_relax() only
 * with spin_yield: under single-threaded QEMU TCG, PAUSE ends the vCPU's turn
 * (helper_pause), and the spin then lasts as long as the other vCPUs run (a
 * 1 ms spin measured 1.78 ms while the other CPU was busy booting).
 */
static u64 emu_spin(u64 ns)
{
	u64 t0 = local_clock(), t;

	do {
		if (READ_ONCE(spin_yield))
			cpu_relax();
		t = local_clock();
	} while (t - t0 < ns);
	return t - t0;
}

static void emu_pay(bool at_irq)
{
	struct emu_cpu *c = this_cpu_ptr(&emu_cpu);
	u64 owed = c->owed_ns;
	u64 spun;
	int s = c->state;

	if (!owed)
		return;
	c->owed_ns = 0;
	spun = emu_spin(owed);
	c->spun_ns[s] += spun;
	if (spun > owed + owed / 10)
		c->late[s]++;
	if (spun > c->max_ns[s])
		c->max_ns[s] = spun;
	if (at_irq)
		c->paid_irq[s]++;
	else
		c->paid_enter[s]++;
}

static int emu_enter(struct cpuidle_device *dev, struct cpuidle_driver *drv,
		     int index)
{
	struct emu_cpu *c = this_cpu_ptr(&emu_cpu);

	if (current_clr_polling_and_test())
		return index;
	c->state = index;
	c->owed_ns = hold_irq ? drv->states[index].exit_latency_ns : 0;
	/* Interrupts are off here; STI's shadow covers HLT, so a wake-up
	 * that is already pending ends the halt rather than being lost. */
	asm volatile("sti; hlt" ::: "memory");
	raw_local_irq_disable();
	if (hold_irq) {
		emu_pay(false);
	} else {
		c->owed_ns = drv->states[index].exit_latency_ns;
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

static u64 calib_local_ns, calib_ktime_ns, calib_udelay_ns;

static int emu_get_calibration(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "spin_local_clock_ns=%llu ktime_get_ns=%llu udelay_1000us_ktime_ns=%llu\n",
			  calib_local_ns, calib_ktime_ns, calib_udelay_ns);
}
static const struct kernel_param_ops calib_ops = { .get = emu_get_calibration };
module_param_cb(calibration, &calib_ops, NULL, 0444);
MODULE_PARM_DESC(calibration, "a 1 ms spin on local_clock measured with ktime_get, and udelay(1000) (read-only)");

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

static void emu_calibrate(void)
{
	unsigned long irqf;
	u64 k0, k1, sp;

	local_irq_save(irqf);
	k0 = ktime_get_ns();
	sp = emu_spin(1000 * NSEC_PER_USEC);
	k1 = ktime_get_ns();
	calib_local_ns = sp;
	calib_ktime_ns = k1 - k0;
	k0 = ktime_get_ns();
	udelay(1000);
	calib_udelay_ns = ktime_get_ns() - k0;
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
	pr_info("idle_emu: calibration: 1000 us spin on local_clock = %llu ns local_clock, %llu ns ktime_get; udelay(1000) = %llu ns ktime_get\n",
		calib_local_ns, calib_ktime_ns, calib_udelay_ns);
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
