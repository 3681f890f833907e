package record

import (
	"testing"

	"github.com/cilium/ebpf/btf"
)

// The attach plan's bookkeeping: which programs each method loads, how a
// refused method is demoted, and what the metadata and warnings say.
func TestAttachPlanBookkeeping(t *testing.T) {
	byName := map[string]probe{}
	for _, p := range probes {
		byName[p.name()] = p
	}
	idle, ipi, halt := byName["power:cpu_idle"], byName["ipi:ipi_send_cpu"], byName["power:guest_halt_poll_ns"]
	plan := &attachPlan{
		method: map[string]string{idle.name(): AttachTPBTF, ipi.name(): AttachFentry},
		reason: map[string]string{halt.name(): "the kernel has no such tracepoint"},
	}
	if got := plan.programs(idle); len(got) != 1 || got[0] != "btf_cpu_idle" {
		t.Errorf("tp_btf programs %v", got)
	}
	if got := plan.programs(ipi); len(got) != 2 || got[0] != "fentry_smp_send_reschedule" {
		t.Errorf("fentry programs %v", got)
	}
	if !plan.demote(idle, "refused") || plan.method[idle.name()] != AttachTracepoint {
		t.Errorf("tp_btf demoted to %q", plan.method[idle.name()])
	}
	if got := plan.programs(idle); len(got) != 1 || got[0] != "tp_cpu_idle" {
		t.Errorf("tracepoint programs %v", got)
	}
	if plan.demote(idle, "refused") {
		t.Error("a classic tracepoint has nothing to fall back to")
	}
	// An optional probe whose classic tracepoint the kernel refuses goes
	// missing; the recording goes on without it.
	plan.method[halt.name()] = AttachTracepoint
	if !plan.demote(halt, "EINVAL") {
		t.Error("an optional probe's refused tracepoint not demoted")
	}
	if _, ok := plan.method[halt.name()]; ok || plan.programs(halt) != nil {
		t.Errorf("refused optional tracepoint still planned: %v", plan.method)
	}
	plan.reason[halt.name()] = "the kernel has no such tracepoint" // as before, for the checks below
	if !plan.demote(ipi, "EPERM") {
		t.Error("fentry not demoted")
	}
	if _, ok := plan.method[ipi.name()]; ok || plan.programs(ipi) != nil {
		t.Errorf("demoted fentry still planned: %v", plan.method)
	}
	meta := plan.metadata()
	if meta[idle.name()] != AttachTracepoint || meta[halt.name()] != "missing: the kernel has no such tracepoint" || len(meta) != len(probes) {
		t.Errorf("metadata %v", meta)
	}
	missing := plan.describeMissing()
	if len(missing) != 2 {
		t.Fatalf("missing %q", missing)
	}
	for _, m := range missing {
		if m != "tracepoint ipi:ipi_send_cpu unavailable (the kernel has no such tracepoint and refused its fentry programs: EPERM): the trace has no remote wake requests from it" &&
			m != "tracepoint power:guest_halt_poll_ns unavailable (the kernel has no such tracepoint): the trace has no haltpoll poll-window changes from it" {
			t.Errorf("missing: %q", m)
		}
	}
}

// perCPUOffsets reads the per-CPU variables' offsets from the kernel BTF's
// .data..percpu section (what kallsyms gave before, without its
// privileges); btfPrototypeArgs and haveFuncs read the tracepoint and
// function prototypes that choose tp_btf and fentry. A small BTF built here
// stands for the kernel's.
func TestKernelBTFReads(t *testing.T) {
	u64 := &btf.Int{Name: "unsigned long long", Size: 8}
	vr := func(name string) *btf.Var { return &btf.Var{Name: name, Type: u64, Linkage: btf.GlobalVar} }
	sec := &btf.Datasec{Name: ".data..percpu", Size: 0x3000, Vars: []btf.VarSecinfo{
		{Type: vr("hrtimer_bases"), Offset: 0x1000, Size: 8},
		{Type: vr("tick_cpu_sched"), Offset: 0x2000, Size: 8},
		{Type: vr("runqueues"), Offset: 0x2800, Size: 8},
	}}
	voidp := &btf.Pointer{Target: &btf.Void{}}
	proto := func(n int) *btf.FuncProto {
		fp := &btf.FuncProto{Return: &btf.Void{}}
		for i := 0; i <= n; i++ { // __data first
			fp.Params = append(fp.Params, btf.FuncParam{Name: "a", Type: voidp})
		}
		return fp
	}
	types := []btf.Type{
		sec,
		&btf.Typedef{Name: "btf_trace_cpu_idle", Type: &btf.Pointer{Target: proto(2)}},
		&btf.Typedef{Name: "btf_trace_not_a_pointer", Type: u64},
		&btf.Func{Name: "native_smp_send_reschedule", Type: proto(1), Linkage: btf.GlobalFunc},
	}
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := b.Spec()
	if err != nil {
		t.Fatal(err)
	}

	off := perCPUOffsets(spec)
	if off["pcpu_hrtimer_bases"] != 0x1000 || off["pcpu_tick_cpu_sched"] != 0x2000 || off["pcpu_runqueues"] != 0x2800 {
		t.Errorf("offsets %x", off)
	}
	if off["pcpu_cpuidle_devices"] != pcpuNone || off["pcpu_menu_devices"] != pcpuNone || len(off) != len(perCPUVars) {
		t.Errorf("variables the BTF lacks: %x", off)
	}
	if !perCPUBaseKnown(off) {
		t.Error("base not known with hrtimer_bases and tick_cpu_sched")
	}
	// Without the BTF, or without the two base variables, nothing per-CPU
	// can be read.
	for _, o := range []map[string]uint64{perCPUOffsets(nil), perCPUOffsetsWithout(t, "tick_cpu_sched")} {
		for k, v := range o {
			if v != pcpuNone {
				t.Errorf("%s = %x, want none", k, v)
			}
		}
	}

	if n := btfPrototypeArgs(spec, "btf_trace_cpu_idle"); n != 2 {
		t.Errorf("cpu_idle args %d, want 2", n)
	}
	if n := btfPrototypeArgs(spec, "btf_trace_not_a_pointer"); n != -1 {
		t.Errorf("not a pointer: %d", n)
	}
	if n := btfPrototypeArgs(spec, "btf_trace_missing"); n != -1 {
		t.Errorf("missing: %d", n)
	}
	if n := btfPrototypeArgs(nil, "btf_trace_cpu_idle"); n != -1 {
		t.Errorf("no BTF: %d", n)
	}
	if !haveFuncs(spec, []fentryProg{{"fentry_smp_send_reschedule", "native_smp_send_reschedule"}}) {
		t.Error("function in BTF not found")
	}
	if haveFuncs(spec, fentryFallbacks["ipi:ipi_send_cpu"]) || haveFuncs(nil, nil) {
		t.Error("fentry planned without every function")
	}
}

// perCPUOffsetsWithout builds a .data..percpu with every variable but skip.
func perCPUOffsetsWithout(t *testing.T, skip string) map[string]uint64 {
	t.Helper()
	u64 := &btf.Int{Name: "unsigned long long", Size: 8}
	sec := &btf.Datasec{Name: ".data..percpu", Size: 0x10000}
	for i, v := range perCPUVars {
		if v.symbol != skip {
			sec.Vars = append(sec.Vars, btf.VarSecinfo{Type: &btf.Var{Name: v.symbol, Type: u64, Linkage: btf.GlobalVar}, Offset: uint32(i * 0x100), Size: 8})
		}
	}
	b, err := btf.NewBuilder([]btf.Type{sec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := b.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return perCPUOffsets(spec)
}
