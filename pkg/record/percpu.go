package record

import "github.com/cilium/ebpf/btf"

// pcpuNone marks a per-CPU variable the kernel's BTF does not list (the BPF
// side's PCPU_NONE).
const pcpuNone = ^uint64(0)

// perCPUVars are the per-CPU variables the BPF programs read, by the name of
// the BPF constant that holds each one's offset:
//   - hrtimer_bases: every expiring hrtimer points back to its CPU's copy,
//     which gives that CPU's per-CPU base;
//   - tick_cpu_sched: tick state and the governor's sleep length;
//   - cpuidle_devices: each CPU's struct cpuidle_device (its per-state usage
//     and time counters, poll_time_limit);
//   - runqueues: rq->nr_iowait, which menu weighed before 6.13;
//   - tick_cpu_device: the clock event device's next event (delta_next);
//   - menu_devices: menu's interval pointer, to count aborted attempts.
var perCPUVars = []struct{ constant, symbol string }{
	{"pcpu_hrtimer_bases", "hrtimer_bases"},
	{"pcpu_tick_cpu_sched", "tick_cpu_sched"},
	{"pcpu_cpuidle_devices", "cpuidle_devices"},
	{"pcpu_runqueues", "runqueues"},
	{"pcpu_tick_cpu_device", "tick_cpu_device"},
	{"pcpu_menu_devices", "menu_devices"},
}

// perCPUOffsets gives each per-CPU variable's offset in the kernel's per-CPU
// section, as the vmlinux BTF lists them (DATASEC .data..percpu, which pahole
// writes for every per-CPU variable, static ones included), keyed by BPF
// constant; pcpuNone for a variable the BTF lacks. This replaces the
// kallsyms addresses the recorder used before: /proc/kallsyms has no data
// symbols without CONFIG_KALLSYMS_ALL and shows every address as 0 to a
// reader without CAP_SYSLOG (kptr_restrict).
func perCPUOffsets(spec *btf.Spec) map[string]uint64 {
	offsets := make(map[string]uint64, len(perCPUVars))
	for _, v := range perCPUVars {
		offsets[v.constant] = pcpuNone
	}
	var sec *btf.Datasec
	if spec == nil || spec.TypeByName(".data..percpu", &sec) != nil {
		return offsets
	}
	byName := make(map[string]uint64, len(sec.Vars))
	for _, vsi := range sec.Vars {
		if v, ok := vsi.Type.(*btf.Var); ok {
			byName[v.Name] = uint64(vsi.Offset)
		}
	}
	for _, v := range perCPUVars {
		if off, ok := byName[v.symbol]; ok {
			offsets[v.constant] = off
		}
	}
	if !perCPUBaseKnown(offsets) {
		// Nothing per-CPU can be read: closed periods must not wait for
		// the cpuidle core's counters (awaits_kernel).
		for k := range offsets {
			offsets[k] = pcpuNone
		}
	}
	return offsets
}

// noPerCPUBase says why tick state is unknown when the BTF lacks the two
// variables every other per-CPU read starts from.
const noPerCPUBase = "the kernel's BTF lists no hrtimer_bases or tick_cpu_sched in its per-CPU section (DATASEC .data..percpu, written by pahole 1.16 and later): tick state, next timer and the cpuidle core's own counters are unknown"

// perCPUBaseKnown reports whether the BPF side can learn each CPU's per-CPU
// base and tick_sched.
func perCPUBaseKnown(offsets map[string]uint64) bool {
	return offsets["pcpu_hrtimer_bases"] != pcpuNone && offsets["pcpu_tick_cpu_sched"] != pcpuNone
}
