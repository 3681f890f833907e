package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/bpf"
)

// Attach methods, as stored in trace metadata.
const (
	AttachTPBTF      = "tp_btf"
	AttachTracepoint = "tracepoint"
	// AttachFentry: fentry programs on the kernel functions that do what
	// the tracepoint marks, for kernels older than the tracepoint.
	AttachFentry = "fentry"
)

// probe is one kernel tracepoint and the programs that can serve it.
type probe struct {
	category, event string
	btfProg, tpProg string
	// input names what the trace loses without it (Metadata.Inputs).
	input    string
	required bool
	// btfArgs is the number of arguments the tp_btf program expects; a
	// kernel whose btf_trace_<event> prototype differs (block_rq_issue lost
	// its queue argument in 5.11) gets the classic tracepoint instead.
	btfArgs int
}

const (
	inputIdle           = "idle periods"
	inputIO             = "block IO"
	inputWakeCauses     = "wake causes"
	inputTickWakeups    = "tick wake-ups and tick state"
	inputTickStopBefore = "the tick state the governor saw before its decision"
	inputWakeRequests   = "remote wake requests"
	inputHaltPoll       = "haltpoll poll-window changes"
	inputTaskIO         = "when the task that issued block IO ran again"
	inputPMQoS          = "PM QoS latency limit changes"
)

var probes = []probe{
	{"power", "cpu_idle", bpf.IdletraceProgBtfCpuIdle, bpf.IdletraceProgTpCpuIdle, inputIdle, true, 2},
	{"block", "block_rq_issue", bpf.IdletraceProgBtfBlockRqIssue, bpf.IdletraceProgTpBlockRqIssue, inputIO, false, 1},
	{"block", "block_rq_complete", bpf.IdletraceProgBtfBlockRqComplete, bpf.IdletraceProgTpBlockRqComplete, inputIO, false, 3},
	{"block", "block_rq_requeue", bpf.IdletraceProgBtfBlockRqRequeue, bpf.IdletraceProgTpBlockRqRequeue, inputIO, false, 1},
	{"irq", "irq_handler_entry", bpf.IdletraceProgBtfIrqHandlerEntry, bpf.IdletraceProgTpIrqHandlerEntry, inputWakeCauses, false, 2},
	{"irq_vectors", "local_timer_entry", bpf.IdletraceProgBtfLocalTimerEntry, bpf.IdletraceProgTpLocalTimerEntry, inputWakeCauses, false, 1},
	{"irq_vectors", "local_timer_exit", bpf.IdletraceProgBtfLocalTimerExit, bpf.IdletraceProgTpLocalTimerExit, inputWakeCauses, false, 1},
	{"irq_vectors", "reschedule_entry", bpf.IdletraceProgBtfRescheduleEntry, bpf.IdletraceProgTpRescheduleEntry, inputWakeCauses, false, 1},
	{"irq_vectors", "call_function_entry", bpf.IdletraceProgBtfCallFunctionEntry, bpf.IdletraceProgTpCallFunctionEntry, inputWakeCauses, false, 1},
	{"irq_vectors", "call_function_single_entry", bpf.IdletraceProgBtfCallFunctionSingleEntry, bpf.IdletraceProgTpCallFunctionSingleEntry, inputWakeCauses, false, 1},
	{"timer", "hrtimer_expire_entry", bpf.IdletraceProgBtfHrtimerExpireEntry, bpf.IdletraceProgTpHrtimerExpireEntry, inputTickWakeups, false, 2},
	{"timer", "tick_stop", bpf.IdletraceProgBtfTickStop, bpf.IdletraceProgTpTickStop, inputTickStopBefore, false, 2},
	{"sched", "sched_wake_idle_without_ipi", bpf.IdletraceProgBtfSchedWakeIdleWithoutIpi, bpf.IdletraceProgTpSchedWakeIdleWithoutIpi, inputWakeRequests, false, 1},
	{"sched", "sched_waking", bpf.IdletraceProgBtfSchedWaking, bpf.IdletraceProgTpSchedWaking, inputWakeRequests, false, 1},
	{"sched", "sched_switch", bpf.IdletraceProgBtfSchedSwitch, bpf.IdletraceProgTpSchedSwitch, inputTaskIO, false, 3},
	{"ipi", "ipi_send_cpu", bpf.IdletraceProgBtfIpiSendCpu, bpf.IdletraceProgTpIpiSendCpu, inputWakeRequests, false, 3},
	{"ipi", "ipi_send_cpumask", bpf.IdletraceProgBtfIpiSendCpumask, bpf.IdletraceProgTpIpiSendCpumask, inputWakeRequests, false, 3},
	{"power", "guest_halt_poll_ns", bpf.IdletraceProgBtfGuestHaltPollNs, bpf.IdletraceProgTpGuestHaltPollNs, inputHaltPoll, false, 3},
	// A request's tracepoint names the constraint; pm_qos_update_target,
	// which follows it, gives the new limit (bpf/idletrace.bpf.c).
	{"power", "pm_qos_add_request", bpf.IdletraceProgBtfPmQosAddRequest, bpf.IdletraceProgTpPmQosAddRequest, inputPMQoS, false, 1},
	{"power", "pm_qos_update_request", bpf.IdletraceProgBtfPmQosUpdateRequest, bpf.IdletraceProgTpPmQosUpdateRequest, inputPMQoS, false, 1},
	{"power", "pm_qos_remove_request", bpf.IdletraceProgBtfPmQosRemoveRequest, bpf.IdletraceProgTpPmQosRemoveRequest, inputPMQoS, false, 1},
	{"power", "dev_pm_qos_add_request", bpf.IdletraceProgBtfDevPmQosAddRequest, bpf.IdletraceProgTpDevPmQosAddRequest, inputPMQoS, false, 3},
	{"power", "dev_pm_qos_update_request", bpf.IdletraceProgBtfDevPmQosUpdateRequest, bpf.IdletraceProgTpDevPmQosUpdateRequest, inputPMQoS, false, 3},
	{"power", "dev_pm_qos_remove_request", bpf.IdletraceProgBtfDevPmQosRemoveRequest, bpf.IdletraceProgTpDevPmQosRemoveRequest, inputPMQoS, false, 3},
	{"power", "pm_qos_update_target", bpf.IdletraceProgBtfPmQosUpdateTarget, bpf.IdletraceProgTpPmQosUpdateTarget, inputPMQoS, false, 3},
}

// btfTrailingArgsOK: events whose later kernels appended arguments, which
// a program reading only the first btfArgs serves as well (sched_switch
// gained prev_state in 5.18).
var btfTrailingArgsOK = map[string]bool{"sched_switch": true}

func (p probe) name() string { return p.category + ":" + p.event }

// Tracepoints lists every tracepoint the recorder may attach to, as
// "category:event" (the spelling of tracefs and the kernel's trace_event=
// boot parameter). The lab enables them at boot so that attaching later
// patches no kernel text (lab/README.md: multi-threaded TCG and int3).
func Tracepoints() []string {
	names := make([]string, len(probes))
	for i, p := range probes {
		names[i] = p.name()
	}
	return names
}

// fentryProg is one fentry program and the kernel function it attaches to.
type fentryProg struct{ prog, fn string }

// fentryFallbacks: the ipi tracepoints came in Linux 6.6; before, x86's IPI
// senders mark the same sends (arch/x86/kernel/smp.c).
var fentryFallbacks = map[string][]fentryProg{
	"ipi:ipi_send_cpu": {
		{bpf.IdletraceProgFentrySmpSendReschedule, "native_smp_send_reschedule"},
		{bpf.IdletraceProgFentrySendCallFuncSingleIpi, "native_send_call_func_single_ipi"},
	},
	"ipi:ipi_send_cpumask": {{bpf.IdletraceProgFentrySendCallFuncIpi, "native_send_call_func_ipi"}},
}

// fentry lists the probe's fentry programs, where its tracepoint is newer
// than kernels worth recording on (all of them are needed).
func (p probe) fentry() []fentryProg { return fentryFallbacks[p.name()] }

// FeatureError is a missing kernel feature or privilege, with what to do about it.
type FeatureError struct {
	Problem, Fix string
}

func (e *FeatureError) Error() string {
	if e.Fix == "" {
		return e.Problem
	}
	return e.Problem + "; " + e.Fix
}

// checkPrivileges fails early, with the fix, where BPF cannot be loaded at all.
func checkPrivileges() error {
	if os.Geteuid() == 0 {
		return nil
	}
	var hdr unix.CapUserHeader
	var data [2]unix.CapUserData
	hdr.Version = unix.LINUX_CAPABILITY_VERSION_3
	if err := unix.Capget(&hdr, &data[0]); err == nil {
		has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
		if has(unix.CAP_SYS_ADMIN) || (has(unix.CAP_BPF) && has(unix.CAP_PERFMON)) {
			return nil
		}
	}
	return &FeatureError{
		Problem: "recording needs root or CAP_BPF and CAP_PERFMON",
		Fix:     "run it with sudo (or: sudo setcap cap_bpf,cap_perfmon+ep $(command -v idletrace))",
	}
}

// loadKernelBTF returns the kernel's type information, from --kernel-btf or
// /sys/kernel/btf/vmlinux.
func loadKernelBTF(path string) (*btf.Spec, error) {
	if path != "" {
		spec, err := btf.LoadSpec(path)
		if err != nil {
			return nil, fmt.Errorf("--kernel-btf %s: %w", path, err)
		}
		return spec, nil
	}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		if _, statErr := os.Stat("/sys/kernel/btf/vmlinux"); errors.Is(statErr, os.ErrNotExist) {
			return nil, &FeatureError{
				Problem: "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF=y)",
				Fix:     "pass --kernel-btf FILE with this kernel's BTF (e.g. from btfhub or the distribution's debug package)",
			}
		}
		return nil, fmt.Errorf("reading kernel BTF: %w", err)
	}
	return spec, nil
}

// checkRingBuffer turns a kernel without BPF ring buffers (before 5.8) into an actionable error.
func checkRingBuffer() error {
	err := features.HaveMapType(ebpf.RingBuf)
	if errors.Is(err, ebpf.ErrNotSupported) {
		return &FeatureError{
			Problem: "the kernel has no BPF ring buffer (needs Linux 5.8 or later)",
			Fix:     "record on a newer kernel",
		}
	}
	if err != nil {
		return fmt.Errorf("probing BPF ring buffer support: %w", err)
	}
	return nil
}

// tracefsDir finds (or, as root, mounts) tracefs; classic tracepoints need it.
func tracefsDir() (string, error) {
	for _, d := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(filepath.Join(d, "events")); err == nil {
			return d, nil
		}
	}
	if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err == nil {
		return "/sys/kernel/tracing", nil
	}
	return "", &FeatureError{
		Problem: "tracefs is not mounted",
		Fix:     "mount it: mount -t tracefs tracefs /sys/kernel/tracing",
	}
}

// attachPlan is the method chosen for each probe, or why it is missing.
type attachPlan struct {
	method map[string]string // probe name -> AttachTPBTF | AttachTracepoint | AttachFentry
	reason map[string]string // probe name -> why it is missing
}

// planAttach prefers tp_btf (typed arguments, raw-tracepoint cost) and falls
// back to the classic tracepoint where the kernel's BTF lacks the event or
// has a different prototype, and to fentry on the functions that do what an
// event marks where the kernel is older than the event (the IPI sends).
// classicOnly rules out both BTF methods.
func planAttach(kernel *btf.Spec, wanted func(probe) bool, classicOnly bool) (*attachPlan, error) {
	plan := &attachPlan{method: map[string]string{}, reason: map[string]string{}}
	// Only a definite "not supported" rules tp_btf out: the generic probe
	// loads an fentry program, which some kernels refuse (EPERM) while
	// tp_btf works. A tp_btf program that fails to load or attach falls back
	// to its classic tracepoint later (loadAndAttach).
	tracingOK := !classicOnly && !errors.Is(features.HaveProgramType(ebpf.Tracing), ebpf.ErrNotSupported)
	var tfs string
	var tfsErr error
	for _, p := range probes {
		if !wanted(p) {
			plan.reason[p.name()] = "not requested"
			continue
		}
		if n := btfPrototypeArgs(kernel, "btf_trace_"+p.event); tracingOK && (n == p.btfArgs || n > p.btfArgs && btfTrailingArgsOK[p.event]) {
			plan.method[p.name()] = AttachTPBTF
			continue
		}
		if tfs == "" && tfsErr == nil {
			tfs, tfsErr = tracefsDir()
		}
		if tfsErr == nil {
			if _, err := os.Stat(filepath.Join(tfs, "events", p.category, p.event)); err == nil {
				plan.method[p.name()] = AttachTracepoint
				continue
			}
		}
		if tracingOK && len(p.fentry()) > 0 && haveFuncs(kernel, p.fentry()) {
			plan.method[p.name()] = AttachFentry
			continue
		}
		why := "the kernel has no such tracepoint"
		if tfsErr != nil {
			why = tfsErr.Error()
		}
		if p.required {
			return nil, &FeatureError{
				Problem: fmt.Sprintf("tracepoint %s is not available (%s)", p.name(), why),
				Fix:     "idletrace needs CONFIG_CPU_IDLE and tracepoints (CONFIG_TRACEPOINTS, CONFIG_BPF_EVENTS)",
			}
		}
		plan.reason[p.name()] = why
	}
	return plan, nil
}

// haveFuncs reports whether the kernel's BTF has every function the fentry
// programs attach to.
func haveFuncs(spec *btf.Spec, progs []fentryProg) bool {
	if spec == nil {
		return false
	}
	for _, p := range progs {
		var fn *btf.Func
		if spec.TypeByName(p.fn, &fn) != nil {
			return false
		}
	}
	return true
}

// demote moves a probe off a method the kernel refused at load or attach
// time: tp_btf to its classic tracepoint, fentry to missing (only optional
// probes have fentry programs), and an optional probe's refused classic
// tracepoint to missing too, with every other probe of its input: the
// recording goes on without that input, as it does where the kernel lacks
// the tracepoint, and says so. It reports
// whether anything changed; a required probe's classic tracepoint has
// nothing to fall back to.
func (plan *attachPlan) demote(p probe, why string) bool {
	switch plan.method[p.name()] {
	case AttachTPBTF:
		plan.method[p.name()] = AttachTracepoint
	case AttachFentry:
		delete(plan.method, p.name())
		plan.reason[p.name()] = "the kernel has no such tracepoint and refused its fentry programs: " + why
	case AttachTracepoint:
		if p.required {
			return false
		}
		// The input goes as a whole: block IO with issues and no
		// completions would be worse than none.
		for _, q := range probes {
			if q.input != p.input || plan.method[q.name()] == "" {
				continue
			}
			delete(plan.method, q.name())
			plan.reason[q.name()] = "the kernel refused the tracepoint program of " + p.name() + ": " + why
		}
	default:
		return false
	}
	return true
}

// programs lists the programs the plan's method for p loads.
func (plan *attachPlan) programs(p probe) []string {
	switch plan.method[p.name()] {
	case AttachTPBTF:
		return []string{p.btfProg}
	case AttachTracepoint:
		return []string{p.tpProg}
	case AttachFentry:
		var out []string
		for _, f := range p.fentry() {
			out = append(out, f.prog)
		}
		return out
	}
	return nil
}

// btfPrototypeArgs counts the arguments of a btf_trace_* typedef (the first,
// void *__data, excluded); -1 when the kernel has no such type.
func btfPrototypeArgs(spec *btf.Spec, name string) int {
	if spec == nil {
		return -1
	}
	var td *btf.Typedef
	if err := spec.TypeByName(name, &td); err != nil {
		return -1
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return -1
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok {
		return -1
	}
	return len(proto.Params) - 1
}

// describeMissing lists inputs a plan lacks, once each.
func (p *attachPlan) describeMissing() []string {
	var out []string
	for _, pr := range probes {
		if why, ok := p.reason[pr.name()]; ok && why != "not requested" {
			out = append(out, fmt.Sprintf("tracepoint %s unavailable (%s): the trace has no %s from it", pr.name(), why, pr.input))
		}
	}
	return out
}

func (p *attachPlan) metadata() map[string]string {
	out := map[string]string{}
	for _, pr := range probes {
		if m, ok := p.method[pr.name()]; ok {
			out[pr.name()] = m
		} else {
			out[pr.name()] = "missing: " + strings.TrimSpace(p.reason[pr.name()])
		}
	}
	return out
}
