// Package record captures idle periods and block IO live: feature probes,
// loading and attaching the BPF programs (tp_btf first, classic tracepoint
// fallback), reading the ring buffer into a trace file, sysfs snapshots at
// start and end, and an orderly shutdown that drains the ring and accounts
// every loss.
package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/bpf"
	"github.com/idletrace/idletrace/internal/outfile"
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Options say what and how to record.
type Options struct {
	Output string // trace file path
	Force  bool   // overwrite an existing file
	// OutputFile, when set, is written instead of a file created at
	// Output, which then only names it in messages (record -o -: standard
	// output, a pipe or whatever the shell opened). It is not locked, cut,
	// removed or closed.
	OutputFile *os.File
	Duration   time.Duration // 0: until the command exits or ctx ends
	CPUs       []int         // nil: all
	NoIO       bool
	KernelBTF  string   // external BTF for kernels without /sys/kernel/btf/vmlinux
	RingBytes  int      // ring buffer size (power of two pages); 0: default
	Command    []string // run this and stop when it exits
	// CommandStdout is where the command's standard output goes; nil: the
	// recorder's own (os.Stdout). experiment sends it to stderr, where its
	// report on stdout stays whole (a JSON report began with the
	// workload's lines).
	CommandStdout io.Writer
	// KillCommand, closed, has a command the recording is stopping
	// killed at once rather than given CommandGrace after SIGTERM (a
	// second Ctrl-C).
	KillCommand <-chan struct{}
	ToolVersion string
	BPFStats    bool // enable kernel BPF run-time statistics (costs ~2 clock reads per event)
	// ClassicTracepoints skips tp_btf and uses the classic tracepoint for
	// every probe: the fallback path, for tests and for comparison.
	ClassicTracepoints bool
	// Progress, when set, is called about twice a second.
	Progress func(Progress)
	// Warn receives each degraded-input warning once.
	Warn func(string)
	// Ready, when set, is called once every program is attached and the
	// start snapshot is taken (tests start their workloads from it).
	Ready func()
	// Started, when set, receives the trace's metadata (the start snapshot
	// included) once it is written, before Ready and before any record
	// reaches Live. It must not change it.
	Started func(*trace.Metadata)
	// Live, when set, sees every record as it is written to the file, on
	// the read loop's goroutine (keep it short: the ring buffer fills
	// meanwhile): idle periods, block IO requests (once joined with their
	// task), haltpoll and PM QoS changes, and each CPU's cumulative loss
	// counters about once a second and at the end. Records are not copied:
	// keep no reference. Its errors are ignored: a live view cannot stop the
	// recording. `idletrace top` is built on it.
	Live *trace.Visitor
}

// Progress is the live state of a recording.
type Progress struct {
	Elapsed           time.Duration
	IdlePeriods       uint64
	BlockIOs          uint64
	IdlePeriodsPerSec float64
	RingBufferFull    uint64 // records dropped so far (the loss account's first kind)
	NotDelivered      uint64 // events the kernel did not deliver, found so far
	Bytes             int64
}

// Summary is what a finished recording reports.
type Summary struct {
	IdlePeriods, BlockIOs, HaltPolls, PMQoSChanges uint64
	Loss                                           trace.LossAccount
	OpenPeriods                                    uint64
	FileBytes                                      int64
	StopReason                                     string
	Elapsed                                        time.Duration
	CommandExitCode                                *int
	// End is the end record as written: how the command ended
	// (End.CommandEnded, End.CommandStatus) and the counters.
	End *trace.End
}

const (
	defaultRingBytes = 8 << 20
	flushInterval    = time.Second
	readTick         = 100 * time.Millisecond
)

// Record runs one recording until the duration passes, the command exits or
// ctx is cancelled, and always finalises the file.
func Record(ctx context.Context, opts Options) (*Summary, error) {
	if err := CheckCanRecord(opts.Command); err != nil {
		return nil, err
	}
	kernelSpec, err := loadKernelBTF(opts.KernelBTF)
	if err != nil {
		return nil, err
	}
	possible, online, recorded, err := recordingCPUs(opts.CPUs)
	if err != nil {
		return nil, err
	}
	meta := newMetadata(opts, recorded, possible)
	warn := opts.warner()
	plan, pcpu, err := planProbes(kernelSpec, opts, meta)
	if err != nil {
		return nil, err
	}
	raiseMemlock(meta.KernelRelease, warn)
	defer enableBPFStats(opts.BPFStats, warn)()
	objs, links, err := attachPrograms(kernelSpec, opts, plan, meta, pcpu, possible, recorded)
	if err != nil {
		return nil, err
	}
	defer objs.Close()
	detach := func() { closeAll(links); links = nil }
	defer detach()
	describeInputs(meta, plan, pcpu, opts.NoIO, warn)

	rec, closeRecording, err := newRecording(opts, objs, plan, online, warn)
	if err != nil {
		return nil, err
	}
	defer closeRecording()
	meta.Start = machine.Snapshot(recorded, tickSpin(meta.HZ), rec.ioCounts)
	if rec.w, err = trace.NewWriter(rec.file, meta); err != nil {
		return nil, fmt.Errorf("writing %s: %w", opts.Output, err)
	}
	cmd, err := rec.launchCommand(ctx, detach)
	if err != nil {
		return nil, err
	}
	if opts.Started != nil {
		opts.Started(meta)
	}
	if opts.Ready != nil {
		opts.Ready()
	}

	end, loopErr := rec.readUntilStop(ctx, cmd)
	// only with the kernel's residencies do closed periods wait (awaits_kernel)
	awaitsKernel := pcpu["pcpu_cpuidle_devices"] != pcpuNone
	loopErr = rec.stop(end, recorded, awaitsKernel, detach, loopErr)
	return rec.closeTrace(meta, end, loopErr)
}

// CheckCanRecord fails before anything is loaded or written: a command
// that cannot be found, missing privileges, a kernel without BPF ring
// buffers. Record runs it first; a caller that must know before Record
// touches its output calls it too (experiment --force removes an earlier
// run's traces only once it passes).
func CheckCanRecord(command []string) error {
	if err := checkCommand(command); err != nil {
		return err
	}
	if err := checkPrivileges(); err != nil {
		return err
	}
	return checkRingBuffer()
}

// newMetadata is the trace's metadata as far as it is known before the
// probes are planned: the machine, the tool, the command.
func newMetadata(opts Options, recorded, possible []int) *trace.Metadata {
	meta := machine.Metadata(recorded, possible)
	meta.ToolVersion = opts.ToolVersion
	meta.BPFObjectSHA256 = bpf.ObjectSHA256()
	meta.Command = opts.Command
	return meta
}

// warner is Options.Warn, or a function that drops the warnings.
func (opts Options) warner() func(string) {
	if opts.Warn == nil {
		return func(string) {}
	}
	return opts.Warn
}

// planProbes chooses each probe's attach method (planAttach) and reads the
// per-CPU variables' offsets from the kernel's BTF.
func planProbes(kernelSpec *btf.Spec, opts Options, meta *trace.Metadata) (*attachPlan, map[string]uint64, error) {
	plan, err := planAttach(kernelSpec, func(p probe) bool { return !(opts.NoIO && p.input == inputIO) }, opts.ClassicTracepoints)
	if err != nil {
		return nil, nil, err
	}
	pcpu := perCPUOffsets(kernelSpec)
	if len(meta.States) == 0 {
		// Without a cpuidle driver there are no per-state counters to read.
		pcpu["pcpu_cpuidle_devices"] = pcpuNone
	}
	return plan, pcpu, nil
}

// raiseMemlock lifts RLIMIT_MEMLOCK on kernels before 5.11, which charge
// the ring buffer and maps to it (later ones to the memory cgroup, and a
// container may not raise it). Not cilium/ebpf's rlimit package: its init
// creates a BPF map to detect memcg accounting, which every idletrace
// command (stats, whatif) then paid at start (2 ms here), recording or not.
func raiseMemlock(release string, warn func(string)) {
	if v, err := model.ParseVersion(release); err == nil && v.AtLeast(5, 11) {
		return
	}
	unlimited := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unlimited); err != nil {
		warn(fmt.Sprintf("raising RLIMIT_MEMLOCK: %v (loading may fail on kernels before 5.11)", err))
	}
}

// attachPrograms loads and attaches the programs (loadAndAttach), then
// sets attach_ns: requests allocated from then on have their issue traced.
func attachPrograms(kernelSpec *btf.Spec, opts Options, plan *attachPlan, meta *trace.Metadata, pcpu map[string]uint64, possible, recorded []int) (*bpfObjects, []link.Link, error) {
	objs, links, err := loadAndAttach(kernelSpec, opts, plan, meta, pcpu, possible, recorded)
	if err != nil {
		return nil, nil, err
	}
	if err := objs.AttachNs.Set(host.MonotonicNs()); err != nil {
		closeAll(links)
		objs.Close()
		return nil, nil, fmt.Errorf("setting attach_ns: %w", err)
	}
	return objs, links, nil
}

// describeInputs warns about each input the recording lacks, and records
// in the metadata how each probe is attached and which inputs the trace
// carries.
func describeInputs(meta *trace.Metadata, plan *attachPlan, pcpu map[string]uint64, noIO bool, warn func(string)) {
	for _, w := range plan.describeMissing() {
		warn(w)
	}
	if !perCPUBaseKnown(pcpu) {
		warn(noPerCPUBase)
	} else if len(meta.States) > 0 && pcpu["pcpu_cpuidle_devices"] == pcpuNone {
		warn("the kernel's BTF lists no cpuidle_devices in its per-CPU section: residencies are the traced ones, which include the tracepoints' own time")
	}
	meta.Probes = plan.metadata()
	meta.Inputs = inputsOf(plan, perCPUBaseKnown(pcpu), noIO)
}

// enableBPFStats turns on the kernel's BPF run-time statistics when asked,
// before the programs attach, so that every run they make is counted
// (stats holds the cpu_idle program's runs to twice the periods); the
// returned func turns them off.
func enableBPFStats(asked bool, warn func(string)) (disable func()) {
	if !asked {
		return func() {}
	}
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		warn(fmt.Sprintf("BPF run-time statistics unavailable: %v", err))
		return func() {}
	}
	return func() { c.Close() }
}

// newRecording creates the trace file, opens the ring buffer and, where they can be counted, the
// kernel's counts of the block tracepoints. release closes them, in the
// reverse order.
func newRecording(opts Options, objs *bpfObjects, plan *attachPlan, online []int, warn func(string)) (rec *recording, release func(), err error) {
	var closers []func()
	release = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	f := opts.OutputFile
	if f == nil {
		if f, err = outfile.Create(opts.Output, opts.Force); err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { f.Close() })
	}
	rd, err := ringbuf.NewReader(objs.Events)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	closers = append(closers, func() { rd.Close() })

	rec = &recording{opts: opts, objs: objs, rd: rd, file: f, start: time.Now()}
	rec.ioJoin = newIOTaskJoin(rec.writeBlockIO)
	if rec.countRaisedBlockEvents(plan, online) {
		closers = append(closers, rec.raisedIssue.close, rec.raisedComplete.close)
	}
	return rec, release, nil
}

// countRaisedBlockEvents opens the kernel's own count of the block
// tracepoints, to find the events it raised without running the programs,
// and reports whether it did. Only with tp_btf, where the programs run
// apart from perf's event: a classic program runs in perf's own path for
// the tracepoint, where one returning 0 would drop the event for the
// counter too (ours return 1, but the counts were never checked there).
// Without the counts (tracefs unreadable, as without root) the loss
// account estimates undelivered IO from issues left waiting, and says so.
func (rec *recording) countRaisedBlockEvents(plan *attachPlan, online []int) bool {
	if rec.opts.NoIO || plan.method["block:block_rq_issue"] != AttachTPBTF || plan.method["block:block_rq_complete"] != AttachTPBTF {
		return false
	}
	rec.raisedIssue, rec.raisedComplete = openBlockCounters(online)
	return rec.raisedIssue != nil
}

// tickSpin is how long the start snapshot spins on each CPU: two ticks, so
// that every CPU's tick fires once and the BPF side learns where its tick
// state lives.
func tickSpin(hz int) time.Duration {
	if hz > 0 {
		return 2*time.Second/time.Duration(hz) + 2*time.Millisecond
	}
	return 10 * time.Millisecond
}

// launchCommand starts the command to record, if there is one. One found
// by checkCommand but not startable leaves no trace of it: the programs
// are detached, and the file is closed and removed.
func (rec *recording) launchCommand(ctx context.Context, detach func()) (*command, error) {
	// Stopped while the programs loaded (a Ctrl-C, an experiment's
	// signal): the command is not started only to be stopped at once.
	if len(rec.opts.Command) == 0 || ctx.Err() != nil {
		return nil, nil
	}
	cmd, err := startCommand(rec.opts.Command, rec.opts.CommandStdout)
	if err != nil {
		detach()
		_ = rec.w.Close(&trace.End{StopReason: "error: " + err.Error()})
		if rec.opts.OutputFile == nil {
			outfile.Discard(rec.file)
		}
		return nil, err
	}
	return cmd, nil
}

// readUntilStop reads the ring buffer until the duration passes, the
// command exits or ctx ends, and then stops the command. It returns the end
// record, with the stop reason, and the first error.
func (rec *recording) readUntilStop(ctx context.Context, cmd *command) (*trace.End, error) {
	var deadline <-chan time.Time
	if rec.opts.Duration > 0 {
		t := time.NewTimer(rec.opts.Duration)
		defer t.Stop()
		deadline = t.C
	}
	var cmdDone <-chan struct{}
	if cmd != nil {
		cmdDone = cmd.done
	}
	reason, loopErr := rec.loop(ctx, deadline, cmdDone)
	end := &trace.End{StopReason: reason}
	if cmd != nil {
		if err := rec.stopCommand(cmd, reason, loopErr, end); loopErr == nil && err != nil {
			end.StopReason, loopErr = "error: "+err.Error(), err
		}
	}
	return end, loopErr
}

// stop ends a recording: the end snapshot while still attached (every
// period before each CPU's snapshot instant is then in the trace), then
// detach, drain the ring buffer and flush what still waits, and fill in the
// end record's account. It returns the first error of the loop or after.
func (rec *recording) stop(end *trace.End, recorded []int, awaitsKernel bool, detach func(), loopErr error) error {
	end.Snapshot = machine.Snapshot(recorded, 0, rec.ioCounts)
	if rec.opts.CPUs == nil { // every CPU was kept, those brought online too
		end.CameOnline = cameOnline(recorded)
	}
	end.IOInFlight, end.IOOrphanedAtStop = rec.ioInFlight(end.Snapshot)
	if awaitsKernel {
		rec.settleAwaiting(200 * time.Millisecond)
	}
	detach()
	if loopErr == nil {
		loopErr = rec.drain()
	}
	if loopErr == nil {
		end.OpenPeriods = rec.flushPending()
		loopErr = rec.ioJoin.flush()
	}
	end.Loss = rec.losses()
	for _, l := range end.Loss {
		rec.w.AddLoss(l)
		rec.liveLoss(l)
	}
	end.ProgStats = progStats(rec.objs.coll)
	end.UndeliveredReason = undeliveredReason(end.ProgStats)
	end.IdlePeriods, end.BlockIOs = rec.idle, rec.io
	return loopErr
}

// cameOnline lists the CPUs online now that were not at the start
// (recorded: those online then), each with its state table.
func cameOnline(recorded []int) []trace.CPUStates {
	online, err := machine.OnlineCPUs()
	if err != nil {
		return nil
	}
	var out []trace.CPUStates
	for _, c := range online {
		if !slices.Contains(recorded, c) {
			out = append(out, trace.CPUStates{CPU: c, States: machine.States(c)})
		}
	}
	return out
}

// recordingCPUs reads the possible and online CPUs and checks the ones
// asked for (--cpus; nil: every online CPU).
func recordingCPUs(asked []int) (possible, online, recorded []int, err error) {
	if possible, err = machine.PossibleCPUs(); err != nil {
		return nil, nil, nil, fmt.Errorf("reading possible CPUs: %w", err)
	}
	if online, err = machine.OnlineCPUs(); err != nil {
		online = possible
	}
	recorded = online
	if asked != nil {
		for _, c := range asked {
			if !slices.Contains(online, c) {
				return nil, nil, nil, fmt.Errorf("--cpus: CPU %d is not online (online: %s)", c, host.FormatCPUList(online))
			}
		}
		recorded = asked
	}
	return possible, online, recorded, nil
}

// closeTrace writes the end record and syncs the file; an error keeps the
// cause (ENOSPC, EIO) and says that the file is readable up to its last
// complete chunk.
func (rec *recording) closeTrace(meta *trace.Metadata, end *trace.End, loopErr error) (*Summary, error) {
	sum := &Summary{
		IdlePeriods: rec.idle, BlockIOs: rec.io, HaltPolls: rec.haltpoll, PMQoSChanges: rec.pmQoS,
		OpenPeriods: end.OpenPeriods, StopReason: end.StopReason, Elapsed: time.Since(rec.start),
		CommandExitCode: end.CommandExitCode, End: end,
	}
	sum.Loss = trace.NewLossAccount(end.Loss, meta.Start, end)
	closeErr := rec.w.Close(end)
	// What was written: a pipe's size (-o -) is 0, and a file stdout
	// appends to holds more than the trace.
	sum.FileBytes = rec.w.Stats().Bytes
	if fi, err := rec.file.Stat(); err == nil && fi.Mode().IsRegular() && rec.opts.OutputFile == nil {
		sum.FileBytes = fi.Size()
	}
	if loopErr == nil {
		loopErr = closeErr
	}
	if loopErr != nil {
		// The path is already in the message; keep the cause (ENOSPC, EIO).
		var pe *fs.PathError
		if errors.As(loopErr, &pe) {
			loopErr = pe.Err
		}
		return sum, fmt.Errorf("writing %s: %w (the file keeps everything up to its last complete chunk)", rec.opts.Output, loopErr)
	}
	// A device given as -o (/dev/null) has nothing to sync: fsync gives
	// EINVAL there.
	if outfile.Regular(rec.file) {
		if err := rec.file.Sync(); err != nil {
			return sum, fmt.Errorf("writing %s: %w", rec.opts.Output, err)
		}
	}
	return sum, nil
}

func inputsOf(plan *attachPlan, perCPUBase, noIO bool) trace.Inputs {
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := plan.method[n]; !ok {
				return false
			}
		}
		return true
	}
	tick := perCPUBase && has("timer:hrtimer_expire_entry")
	tickBefore := tick && has("timer:tick_stop")
	return trace.Inputs{
		WakeCauses:      has("irq:irq_handler_entry", "irq_vectors:local_timer_entry", "irq_vectors:reschedule_entry", "irq_vectors:call_function_entry", "irq_vectors:call_function_single_entry"),
		WakeRequests:    has("sched:sched_waking") || has("ipi:ipi_send_cpu"),
		TickState:       tick,
		TickStateBefore: tickBefore,
		NextTimer:       tick,
		TickWakeups:     tick && has("irq_vectors:local_timer_entry"),
		PollTimeLimit:   has("irq:irq_handler_entry", "irq_vectors:local_timer_entry", "irq_vectors:reschedule_entry", "sched:sched_wake_idle_without_ipi"),
		BlockIO:         !noIO && has("block:block_rq_issue", "block:block_rq_complete"),
		TaskIO:          !noIO && has("block:block_rq_issue", "block:block_rq_complete", "sched:sched_waking", "sched:sched_switch"),
		HaltPollTrace:   has("power:guest_halt_poll_ns"),
		PMQoSTrace: has("power:pm_qos_add_request", "power:pm_qos_update_request", "power:pm_qos_remove_request",
			"power:dev_pm_qos_add_request", "power:dev_pm_qos_update_request", "power:dev_pm_qos_remove_request",
			"power:pm_qos_update_target"),
	}
}

// loadAndAttach loads the programs the plan chose and attaches them. A tp_btf
// program that the kernel refuses at load or attach time is replaced by its
// classic tracepoint twin: at load time in place (loadCollection), at attach
// time by loading everything again with the new plan.
func loadAndAttach(kernelSpec *btf.Spec, opts Options, plan *attachPlan, meta *trace.Metadata, pcpu map[string]uint64, possible, recorded []int) (*bpfObjects, []link.Link, error) {
	for attempt := 0; ; attempt++ {
		objs, err := loadCollection(kernelSpec, opts, plan, meta, pcpu, possible, recorded)
		if err != nil {
			return nil, nil, err
		}
		links, failed, err := attach(objs.coll, plan)
		if err == nil {
			return objs, links, nil
		}
		objs.Close()
		if failed == nil || attempt > len(probes) || !plan.demote(*failed, err.Error()) {
			return nil, nil, err
		}
	}
}

// bpfObjects is what a load made: the chosen programs (in coll, under
// bpf2go's generated names), and the maps and global variables under
// bpf2go's generated names, taken out of coll.
type bpfObjects struct {
	// coll holds the programs loaded, and the maps not assigned below (the
	// data sections behind the variables).
	coll *ebpf.Collection
	// maps is every map by its name in the object, assigned or not, to
	// load programs against (not owned: coll and IdletraceMaps close them).
	maps map[string]*ebpf.Map
	bpf.IdletraceMaps
	bpf.IdletraceVariables
}

// Close closes the programs and the maps.
func (o *bpfObjects) Close() {
	o.coll.Close()
	o.IdletraceMaps.Close()
}

// planFlags are the facts of a plan that the BPF side is built with
// (read-only variables, set before the maps are made).
type planFlags struct {
	// haveTickStop: timer:tick_stop is traced.
	haveTickStop bool
	// wakingRequests: sched_waking stands in for an IPI tracepoint missing.
	wakingRequests bool
	// ioKeyByRequest: the block issue and completion programs are tp_btf,
	// and the requeue program too or none, so requests in flight are keyed
	// by their struct request too (io_key.rq), not only by device and
	// sector. A classic program cannot name the request.
	ioKeyByRequest bool
}

func (plan *attachPlan) flags() planFlags {
	return planFlags{
		haveTickStop:   plan.method["timer:tick_stop"] != "",
		wakingRequests: plan.method["ipi:ipi_send_cpu"] == "" || plan.method["ipi:ipi_send_cpumask"] == "",
		ioKeyByRequest: plan.method["block:block_rq_issue"] == AttachTPBTF && plan.method["block:block_rq_complete"] == AttachTPBTF &&
			(plan.method["block:block_rq_requeue"] == AttachTPBTF || plan.method["block:block_rq_requeue"] == ""),
	}
}

// loadCollection makes the maps and variables, then loads the chosen
// programs against them, one probe at a time (loadPlanned): a program the
// kernel refuses is known by which load failed, and its probe falls back in
// place. A fallback that changes the plan's flags (an fentry probe gone
// missing) makes the maps again with the new flags.
func loadCollection(kernelSpec *btf.Spec, opts Options, plan *attachPlan, meta *trace.Metadata, pcpu map[string]uint64, possible, recorded []int) (*bpfObjects, error) {
	var copts ebpf.CollectionOptions
	if opts.KernelBTF != "" {
		copts.Programs.KernelTypes = kernelSpec
	}
	// One cache for every load: the kernel's BTF is decoded once.
	copts.Cache = btf.NewCache()
	for {
		spec, err := bpf.LoadIdletrace()
		if err != nil {
			return nil, fmt.Errorf("loading the embedded BPF object: %w", err)
		}
		if err := configure(spec, opts, plan.flags(), meta, pcpu, possible); err != nil {
			return nil, err
		}
		objs, err := makeMaps(spec, copts)
		if err != nil {
			return nil, loadError(err)
		}
		remake, err := loadPlanned(plan, func(names []string) error { return objs.loadPrograms(spec, names, copts) })
		if err != nil {
			objs.Close()
			return nil, loadError(err)
		}
		if remake {
			// Demotions only take methods away, so this ends.
			objs.Close()
			continue
		}
		if opts.CPUs != nil {
			if err := fillCPUFilter(objs.CpuFilter, recorded); err != nil {
				objs.Close()
				return nil, err
			}
		}
		return objs, nil
	}
}

// configure sizes the maps and sets the read-only variables of spec.
func configure(spec *ebpf.CollectionSpec, opts Options, flags planFlags, meta *trace.Metadata, pcpu map[string]uint64, possible []int) error {
	var specs struct {
		bpf.IdletraceMapSpecs
		bpf.IdletraceVariableSpecs
	}
	if err := spec.Assign(&specs); err != nil {
		return fmt.Errorf("the embedded BPF object: %w", err)
	}
	ring := opts.RingBytes
	if ring == 0 {
		ring = defaultRingBytes
	}
	specs.Events.MaxEntries = uint32(ring)
	maxCPU := possible[len(possible)-1] + 1
	specs.CpuStates.MaxEntries = uint32(maxCPU)
	type setting struct {
		v     *ebpf.VariableSpec
		value any
	}
	vars := []setting{
		{specs.PollingMask, pollingMask(meta)},
		{specs.WakeupBytes, uint64(ring / 16)},
		{specs.CpuFilterOn, boolByte(opts.CPUs != nil)},
		{specs.RecordIo, boolByte(!opts.NoIO)},
		{specs.NrCpus, uint32(maxCPU)},
		{specs.HaveTickStop, boolByte(flags.haveTickStop)},
		{specs.WakingRequests, boolByte(flags.wakingRequests)},
		{specs.IoKeyByRequest, boolByte(flags.ioKeyByRequest)},
	}
	// The per-CPU offsets come by the variables' names (perCPUOffsets).
	for name, off := range pcpu {
		v, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("the embedded BPF object has no variable %s", name)
		}
		vars = append(vars, setting{v, off})
	}
	for _, v := range vars {
		if err := v.v.Set(v.value); err != nil {
			return fmt.Errorf("setting %s: %w", v.v.Name, err)
		}
	}
	return nil
}

// makeMaps makes spec's maps and variables, and no program.
func makeMaps(spec *ebpf.CollectionSpec, copts ebpf.CollectionOptions) (*bpfObjects, error) {
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types}, copts)
	if err != nil {
		return nil, err
	}
	objs := &bpfObjects{coll: coll, maps: maps.Clone(coll.Maps)}
	if err := coll.Assign(objs); err != nil {
		coll.Close()
		return nil, fmt.Errorf("the loaded BPF maps: %w", err)
	}
	return objs, nil
}

// loadPrograms loads the named programs of spec against the maps already
// made, all or none, each in a collection of its own (the maps passed as
// replacements), so that an error is the program's it names.
func (o *bpfObjects) loadPrograms(spec *ebpf.CollectionSpec, names []string, copts ebpf.CollectionOptions) error {
	copts.MapReplacements = o.maps
	loaded := map[string]*ebpf.Program{}
	for _, name := range names {
		p, err := loadProgram(spec, name, copts)
		if err != nil {
			for _, l := range loaded {
				l.Close()
			}
			return err
		}
		loaded[name] = p
	}
	maps.Copy(o.coll.Programs, loaded)
	return nil
}

// loadProgram loads one program of spec with the options' map replacements.
func loadProgram(spec *ebpf.CollectionSpec, name string, copts ebpf.CollectionOptions) (*ebpf.Program, error) {
	ps, ok := spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("the embedded BPF object has no program %s", name)
	}
	one := &ebpf.CollectionSpec{Maps: spec.Maps, Programs: map[string]*ebpf.ProgramSpec{name: ps}, Types: spec.Types}
	coll, err := ebpf.NewCollectionWithOptions(one, copts)
	if err != nil {
		return nil, err // "program NAME: ..." (cilium/ebpf names it)
	}
	defer coll.Close() // the maps' clones
	return coll.DetachProgram(name), nil
}

// loadPlanned loads, through load, the programs of each probe the plan
// chose. Where load fails for a tp_btf or fentry probe, the probe is
// demoted (tp_btf to its classic tracepoint, fentry to missing) and the
// programs of its new method, if any, are loaded in place. A classic
// tracepoint program that fails ends the load with a *probeLoadError.
// remake reports that the demotions changed the plan's flags, with which
// the maps were made.
func loadPlanned(plan *attachPlan, load func(names []string) error) (remake bool, err error) {
	before := plan.flags()
	for _, p := range probes {
		var refused []string
		for names := plan.programs(p); names != nil; names = plan.programs(p) {
			method := plan.method[p.name()]
			err := load(names)
			if err == nil {
				break
			}
			if !plan.demote(p, err.Error()) {
				return false, &probeLoadError{probe: p, refused: refused, method: method, err: err}
			}
			refused = append(refused, fmt.Sprintf("%s refused (%v)", method, err))
		}
	}
	return plan.flags() != before, nil
}

// probeLoadError: the kernel refused the last method left for a probe.
type probeLoadError struct {
	probe   probe
	refused []string // the methods refused before, with why
	method  string
	err     error
}

func (e *probeLoadError) Error() string {
	tried := ""
	if len(e.refused) > 0 {
		tried = strings.Join(e.refused, ", ") + ", then "
	}
	return fmt.Sprintf("tracepoint %s: %s%s: %v", e.probe.name(), tried, e.method, e.err)
}

func (e *probeLoadError) Unwrap() error { return e.err }

// loadError says what refused a load, and what to do where something can be
// done (privileges). Only a required probe's refusal gets here: an optional
// one's input goes missing instead (attachPlan.demote).
func loadError(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return &FeatureError{Problem: fmt.Sprintf("the kernel's verifier rejected idletrace's BPF programs: %v", err),
			Fix: "record on another kernel, and report this message with the kernel release (uname -r)"}
	}
	if errors.Is(err, unix.EPERM) {
		return &FeatureError{Problem: "loading BPF programs was refused (EPERM)", Fix: "run as root; check kernel.unprivileged_bpf_disabled and lockdown mode"}
	}
	return fmt.Errorf("loading BPF programs: %w", err)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func fillCPUFilter(m *ebpf.Map, cpus []int) error {
	words := map[uint32]uint64{}
	for _, c := range cpus {
		words[uint32(c/64)] |= 1 << (c % 64)
	}
	for k, v := range words {
		if err := m.Put(k, v); err != nil {
			return fmt.Errorf("setting the CPU filter: %w", err)
		}
	}
	return nil
}

// attach attaches every loaded program; on failure it returns the tp_btf
// probe that failed (nil if the failure has no fallback). cpu_idle goes last,
// so that no idle period is recorded before the wake-cause programs run.
func attach(coll *ebpf.Collection, plan *attachPlan) ([]link.Link, *probe, error) {
	var links []link.Link
	ordered := slices.Clone(probes)
	slices.SortStableFunc(ordered, func(a, b probe) int { return boolInt(a.required) - boolInt(b.required) })
	for _, p := range ordered {
		var l link.Link
		var err error
		switch plan.method[p.name()] {
		case AttachTPBTF:
			l, err = link.AttachTracing(link.TracingOptions{Program: coll.Programs[p.btfProg]})
		case AttachTracepoint:
			l, err = link.Tracepoint(p.category, p.event, coll.Programs[p.tpProg], nil)
		case AttachFentry:
			for _, f := range p.fentry() {
				if l, err = link.AttachTracing(link.TracingOptions{Program: coll.Programs[f.prog]}); err != nil {
					break
				}
				links = append(links, l)
			}
			l = nil
		default:
			continue
		}
		if err != nil {
			closeAll(links)
			err = fmt.Errorf("attaching to %s (%s): %w", p.name(), plan.method[p.name()], err)
			if plan.method[p.name()] != AttachTracepoint {
				return nil, &p, err
			}
			return nil, nil, err
		}
		if l != nil {
			links = append(links, l)
		}
	}
	return links, nil, nil
}

// closeAll detaches in reverse order of attach: cpu_idle first, so no idle
// period is recorded after the wake-cause programs are gone.
func closeAll(links []link.Link) {
	for i := len(links) - 1; i >= 0; i-- {
		links[i].Close()
	}
}

func progStats(coll *ebpf.Collection) []trace.ProgStat {
	var out []trace.ProgStat
	names := make([]string, 0, len(coll.Programs))
	for n := range coll.Programs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		st, err := coll.Programs[n].Stats()
		if err != nil || (st.RunCount == 0 && st.RecursionMisses == 0) {
			continue
		}
		out = append(out, trace.ProgStat{Name: n, RunCount: st.RunCount, RunTimeNs: uint64(st.Runtime), Misses: st.RecursionMisses})
	}
	return out
}

// recording is the state of the read loop.
type recording struct {
	opts  Options
	objs  *bpfObjects
	rd    *ringbuf.Reader
	w     *trace.Writer
	file  *os.File
	start time.Time

	idle, io, haltpoll, pmQoS uint64
	// The kernel's counts of block_rq_issue and block_rq_complete; nil
	// where they cannot be counted.
	raisedIssue, raisedComplete *raisedCounter
	sample                      ringbuf.Record
	period                      trace.IdlePeriod
	blockIO                     trace.BlockIO
	halt                        trace.HaltPollChange
	qos                         trace.PMQoSChange
	ioJoin                      *ioTaskJoin
	comms                       trace.TaskNames
}

func (r *recording) records() uint64 { return r.idle + r.io + r.haltpoll + r.pmQoS }

// StopReason, as the cause of the cancelled context (context.WithCancelCause),
// is the stop reason Record writes for it instead of "signal": top's "quit".
type StopReason string

func (r StopReason) Error() string { return string(r) }

// loop reads records until a stop condition; it returns why it stopped.
func (r *recording) loop(ctx context.Context, deadline <-chan time.Time, cmdDone <-chan struct{}) (string, error) {
	lastFlush, lastProgress := time.Now(), time.Now()
	var lastIdle uint64
	stop := r.watchStop(ctx, deadline, cmdDone)
	defer stop.close()
	for {
		select {
		case why := <-stop.reason:
			return why, nil
		default:
		}
		r.rd.SetDeadline(time.Now().Add(readTick))
		for {
			err := r.rd.ReadInto(&r.sample)
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, ringbuf.ErrFlushed) {
					return "error: " + err.Error(), err
				}
				break
			}
			if err := r.decode(r.sample.RawSample); err != nil {
				return "error: " + err.Error(), err
			}
			if r.records()&0x3ff == 0 {
				break // let the stop conditions be checked under a steady stream
			}
		}
		now := time.Now()
		if now.Sub(lastFlush) >= flushInterval {
			if err := r.ioJoin.tick(host.MonotonicNs()); err != nil {
				return "write error", err
			}
			for _, l := range r.losses() {
				r.w.AddLoss(l)
				r.liveLoss(l)
			}
			if err := r.w.Flush(); err != nil {
				return "write error", err
			}
			lastFlush = now
		}
		if r.opts.Progress != nil && now.Sub(lastProgress) >= 500*time.Millisecond {
			p := Progress{Elapsed: now.Sub(r.start), IdlePeriods: r.idle, BlockIOs: r.io, Bytes: r.w.Stats().Bytes,
				IdlePeriodsPerSec: float64(r.idle-lastIdle) / now.Sub(lastProgress).Seconds()}
			for _, l := range r.losses() {
				p.RingBufferFull += l.RingLost()
				p.NotDelivered += l.Undelivered()
			}
			r.opts.Progress(p)
			lastIdle, lastProgress = r.idle, now
		}
	}
}

// stopCommand stops the command when the recording stopped before it
// did (the duration, a signal to the recorder, an error): SIGTERM to its
// process group, then SIGKILL after CommandGrace, reading records
// meanwhile unless the loop already failed (loopErr). It stores how the
// command ended in end, and returns an error the loop met while waiting.
func (r *recording) stopCommand(c *command, reason string, loopErr error, end *trace.End) error {
	if c.exited() {
		c.record(end, "")
		return nil
	}
	var err error
	// A kill request ends the SIGTERM's grace: the loop's context, and
	// the wait after it.
	killed, stopKilled := context.WithCancel(context.Background())
	defer stopKilled()
	if r.opts.KillCommand != nil {
		go func() {
			select {
			case <-r.opts.KillCommand:
				stopKilled()
			case <-killed.Done():
			}
		}()
	}
	wait := func(ctx context.Context, sig syscall.Signal) {
		c.signal(sig)
		until := time.Now().Add(CommandGrace)
		if loopErr == nil && err == nil {
			limit := time.NewTimer(CommandGrace)
			_, err = r.loop(ctx, limit.C, c.done)
			limit.Stop()
			if err == nil && ctx.Err() == nil {
				return // the command ended, or the grace period did
			}
		}
		// A timer of its own: the loop's stop watch may have taken the
		// one above's only tick.
		select {
		case <-c.done:
		case <-ctx.Done():
		case <-time.After(time.Until(until)):
		}
	}
	wait(killed, syscall.SIGTERM)
	if !c.exited() {
		wait(context.Background(), syscall.SIGKILL)
	}
	c.record(end, reason)
	return err
}

// stopWatch turns the loop's stop conditions into one reason, and wakes
// the ring buffer's reader as one arrives: the reader waits up to readTick
// for records, and a quiet ring held a stop that long (`-d 1s` recorded a
// window of 1.09 s).
type stopWatch struct {
	reason chan string
	quit   chan struct{}
}

func (r *recording) watchStop(ctx context.Context, deadline <-chan time.Time, cmdDone <-chan struct{}) *stopWatch {
	w := &stopWatch{reason: make(chan string, 1), quit: make(chan struct{})}
	go func() {
		var why string
		select {
		case <-ctx.Done():
			why = "signal"
			var sr StopReason
			if errors.As(context.Cause(ctx), &sr) {
				why = string(sr)
			}
		case <-deadline:
			why = "duration"
		case <-cmdDone:
			why = "command exited"
		case <-w.quit:
			return
		}
		w.reason <- why
		_ = r.rd.Flush() // fails only on a closed reader, which the loop sees itself
	}()
	return w
}

func (w *stopWatch) close() { close(w.quit) }

// drain reads what the ring still holds after the programs are detached.
func (r *recording) drain() error {
	r.rd.SetDeadline(time.Now())
	for {
		err := r.rd.ReadInto(&r.sample)
		if errors.Is(err, ringbuf.ErrFlushed) {
			continue // a stop's wake-up the loop did not wait for; the records after it remain
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := r.decode(r.sample.RawSample); err != nil {
			return err
		}
	}
}

// settleAwaiting waits, up to limit, until no CPU holds a closed period
// that waits for its next idle entry to learn the kernel's residency. The
// snapshot threads themselves end such periods on every CPU; a CPU goes
// idle again within microseconds unless it is busy, and then the wait ends
// at limit and flushPending writes the period without the kernel's figure.
func (r *recording) settleAwaiting(limit time.Duration) {
	m := r.objs.CpuStates
	var st bpf.IdletraceCpuState
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		waiting := false
		for cpu := uint32(0); cpu < m.MaxEntries() && !waiting; cpu++ {
			waiting = m.Lookup(cpu, &st) == nil && st.Pending != 0
		}
		if !waiting {
			return
		}
	}
}

// flushPending writes periods that ended but were still waiting for a wake
// cause, and counts those still open (the CPU was idle at stop).
func (r *recording) flushPending() uint64 {
	var open uint64
	var st bpf.IdletraceCpuState
	m := r.objs.CpuStates
	for cpu := uint32(0); cpu < m.MaxEntries(); cpu++ {
		if err := m.Lookup(cpu, &st); err != nil {
			continue
		}
		if st.Pending != 0 {
			p := (*bpf.IdletraceIdleRecord)(unsafe.Pointer(&st.Pend))
			r.addIdle(p)
		}
		if st.InIdle != 0 {
			open++
		}
	}
	return open
}

// ioInFlight counts requests whose issue was recorded and whose completion
// had not come at the end snapshot, and which of them are orphans: issued
// before the snapshot on a device the kernel showed idle (no request in
// flight), so the kernel completed them without the programs seeing it.
func (r *recording) ioInFlight(end *trace.Snapshot) (inFlight, orphaned uint64) {
	idle := map[uint32]bool{}
	for _, b := range end.Block {
		if len(b.Stat) > 8 && b.Stat[8] == 0 {
			idle[b.Major<<20|b.Minor] = true
		}
	}
	var k bpf.IdletraceIoKey
	var v bpf.IdletraceIoStart
	for it := r.objs.IoInflight.Iterate(); it.Next(&k, &v); {
		inFlight++
		if v.IssueNs < end.MonotonicNs && idle[k.Dev] {
			orphaned++
		}
	}
	return inFlight, orphaned
}

// counters reads each CPU's loss counters.
func (r *recording) counters() []bpf.IdletraceLossCounters {
	var per []bpf.IdletraceLossCounters
	if err := r.objs.Loss.Lookup(uint32(0), &per); err != nil {
		return nil
	}
	return per
}

func (r *recording) losses() []trace.Loss {
	per := r.counters()
	out := make([]trace.Loss, 0, len(per))
	for cpu, c := range per {
		out = append(out, trace.Loss{CPU: uint32(cpu), IdleLost: c.IdleLost, IOLost: c.IoLost, OtherLost: c.OtherLost, IOUnmatched: c.IoUnmatched, IOTableFull: c.IoTableFull,
			IOCompletions: c.IoCompletions, IOOrphaned: c.IoOrphaned, IdleUnpaired: c.IdleUnpaired, IOUnissued: c.IoUnissued})
	}
	return out
}

// ioCounts fills a snapshot with the recorder's IO counters and, where the
// tracepoints are counted, the kernel's counts beside the programs' runs.
// They are read kernel, runs, kernel, runs, and kept when both pairs agree:
// neither moved across the middle of the reads, so they describe the same
// events (an event whose program ran before that stretch and whose perf
// count came after it would have to straddle the whole of it).
func (r *recording) ioCounts(s *trace.Snapshot) {
	type runs struct {
		l                   trace.Loss
		issues, completions uint64
	}
	readRuns := func() (x runs) {
		for _, c := range r.counters() {
			x.l.IOUnmatched += c.IoUnmatched
			x.l.IOCompletions += c.IoCompletions
			x.l.IOOrphaned += c.IoOrphaned
			x.issues += c.IoIssues
			x.completions += c.IoCompletions + c.IoPartial // each run counts one of the two
		}
		return x
	}
	readRaised := func() (issues, completions uint64, err error) {
		issues, err = r.raisedIssue.read()
		if err == nil {
			completions, err = r.raisedComplete.read()
		}
		return issues, completions, err
	}
	s.IORaised = nil
	if r.raisedIssue == nil {
		x := readRuns()
		s.IOUnmatched, s.IOCompletions, s.IOOrphaned = x.l.IOUnmatched, x.l.IOCompletions, x.l.IOOrphaned
		return
	}
	for try := 0; ; try++ {
		i1, c1, err1 := readRaised()
		x1 := readRuns()
		i2, c2, err2 := readRaised()
		x2 := readRuns()
		s.IOUnmatched, s.IOCompletions, s.IOOrphaned = x2.l.IOUnmatched, x2.l.IOCompletions, x2.l.IOOrphaned
		if err1 != nil || err2 != nil {
			return
		}
		if i1 == i2 && c1 == c2 && x1 == x2 || try == host.SnapshotTries {
			s.IORaised = &trace.IORaised{Issues: i2, IssueRuns: x2.issues, Completions: c2, CompletionRuns: x2.completions}
			return
		}
	}
}

var (
	idleRecordSize     = int(unsafe.Sizeof(bpf.IdletraceIdleRecord{}))
	blockIORecordSize  = int(unsafe.Sizeof(bpf.IdletraceBlockIoRecord{}))
	haltpollRecordSize = int(unsafe.Sizeof(bpf.IdletraceHaltpollRecord{}))
	ioTaskRecordSize   = int(unsafe.Sizeof(bpf.IdletraceIoTaskRecord{}))
	pmQoSRecordSize    = int(unsafe.Sizeof(bpf.IdletracePmQosRecord{}))
)

// comm returns a kernel task name (NUL-padded) as a string.
func (r *recording) comm(c []int8) string {
	n := 0
	for n < len(c) && c[n] != 0 {
		n++
	}
	return r.comms.Name(unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), n))
}

// writeBlockIO writes one joined block IO record.
func (r *recording) writeBlockIO(b *trace.BlockIO) error {
	r.io++
	if err := r.w.AddBlockIO(b); err != nil {
		return err
	}
	if v := r.opts.Live; v != nil && v.BlockIO != nil {
		_ = v.BlockIO(b) // Options.Live: errors are ignored
	}
	return nil
}

// liveLoss hands one CPU's loss counters to Options.Live.
func (r *recording) liveLoss(l trace.Loss) {
	if v := r.opts.Live; v != nil && v.Loss != nil {
		_ = v.Loss(&l)
	}
}

// decode turns one ring-buffer sample into a trace record. The layouts are
// the generated ones (bpf/layout_test.go checks them against the object's
// BTF), so a sample is read in place, without allocation.
func (r *recording) decode(raw []byte) error {
	if len(raw) == 0 {
		return errors.New("empty ring-buffer record")
	}
	switch raw[0] {
	case uint8(bpf.IdletraceRecordTypeRECORD_IDLE):
		if len(raw) < idleRecordSize {
			return fmt.Errorf("short idle record (%d bytes)", len(raw))
		}
		r.addIdle((*bpf.IdletraceIdleRecord)(unsafe.Pointer(&raw[0])))
	case uint8(bpf.IdletraceRecordTypeRECORD_BLOCK_IO):
		if len(raw) < blockIORecordSize {
			return fmt.Errorf("short block IO record (%d bytes)", len(raw))
		}
		b := (*bpf.IdletraceBlockIoRecord)(unsafe.Pointer(&raw[0]))
		r.blockIO = trace.BlockIO{
			Dev: b.Dev, Sector: b.Sector, Bytes: b.Bytes, Op: b.Op, CmdFlags: b.CmdFlags,
			IssueNs: b.IssueNs, CompleteNs: b.CompleteNs, IssueCPU: b.IssueCpu, CompleteCPU: b.CompleteCpu, Error: b.Error,
			Tid: b.Tid, Tgid: b.Tgid, Comm: r.comm(b.Comm[:]),
		}
		return r.ioJoin.completion(&r.blockIO)
	case uint8(bpf.IdletraceRecordTypeRECORD_IO_TASK):
		if len(raw) < ioTaskRecordSize {
			return fmt.Errorf("short IO task record (%d bytes)", len(raw))
		}
		t := (*bpf.IdletraceIoTaskRecord)(unsafe.Pointer(&raw[0]))
		return r.ioJoin.taskRan(t.Tid, t.CompleteNs, t.WokenNs, t.RunNs, t.RunCpu)
	case uint8(bpf.IdletraceRecordTypeRECORD_HALTPOLL):
		if len(raw) < haltpollRecordSize {
			return fmt.Errorf("short haltpoll record (%d bytes)", len(raw))
		}
		h := (*bpf.IdletraceHaltpollRecord)(unsafe.Pointer(&raw[0]))
		r.halt = trace.HaltPollChange{TimeNs: h.TimeNs, CPU: h.Cpu, Grow: h.Grow != 0, NewNs: h.NewNs, OldNs: h.OldNs}
		r.w.AddHaltPoll(&r.halt)
		r.haltpoll++
		if v := r.opts.Live; v != nil && v.HaltPoll != nil {
			_ = v.HaltPoll(&r.halt)
		}
	case uint8(bpf.IdletraceRecordTypeRECORD_PM_QOS):
		if len(raw) < pmQoSRecordSize {
			return fmt.Errorf("short PM QoS record (%d bytes)", len(raw))
		}
		q := (*bpf.IdletracePmQosRecord)(unsafe.Pointer(&raw[0]))
		if q.Target >= trace.MaxCPUs { // beyond the format's CPUs: none of ours
			return nil
		}
		r.qos = PMQoSChangeFrom(q)
		r.pmQoS++
		if err := r.w.AddPMQoS(&r.qos); err != nil {
			return err
		}
		if v := r.opts.Live; v != nil && v.PMQoS != nil {
			_ = v.PMQoS(&r.qos)
		}
	default:
		return fmt.Errorf("unknown ring-buffer record type %d", raw[0])
	}
	return nil
}

// PMQoSChangeFrom is the trace record of one pm_qos_record, its values in
// the metadata's terms (trace.PMQoSFromKernel).
func PMQoSChangeFrom(q *bpf.IdletracePmQosRecord) trace.PMQoSChange {
	return trace.PMQoSChange{TimeNs: q.TimeNs, CPU: q.Target, Action: q.Action, Tid: q.Tid,
		LimitUs: trace.PMQoSFromKernel(q.Target, int64(q.Value)), PrevUs: trace.PMQoSFromKernel(q.Target, int64(q.PrevValue))}
}

func (r *recording) addIdle(p *bpf.IdletraceIdleRecord) {
	r.period = IdlePeriodFrom(p)
	r.w.AddIdle(&r.period)
	r.idle++
	if v := r.opts.Live; v != nil && v.Idle != nil {
		_ = v.Idle(&r.period)
	}
}

// IdlePeriodFrom converts the kernel's record into the trace's.
func IdlePeriodFrom(p *bpf.IdletraceIdleRecord) trace.IdlePeriod {
	flags := bpf.IdletraceIdleFlags(p.Flags)
	kflags := bpf.IdletraceKernelFlags(p.KernelFlags)
	lflags := bpf.IdletraceLoopFlags(p.LoopFlags)
	tri := func(known, yes bpf.IdletraceIdleFlags) trace.Tristate { return tristate(flags, known, yes) }
	ktri := func(known, yes bpf.IdletraceKernelFlags) trace.Tristate { return tristate(kflags, known, yes) }
	nrIOWait := int32(-1)
	if kflags&bpf.IdletraceKernelFlagsKERNEL_IOWAIT_KNOWN != 0 {
		nrIOWait = int32(min(p.NrIowait, math.MaxInt32))
	}
	return trace.IdlePeriod{
		CPU: p.Cpu, State: p.State, EntryNs: p.EntryNs, ExitNs: p.ExitNs,
		WakeCause: trace.WakeCause(p.WakeCause), WakeIRQ: p.WakeIrq, WakeRequestNs: p.WakeRequestNs,
		NextTimerNs: p.NextTimerNs, NextTimerKnown: flags&bpf.IdletraceIdleFlagsIDLE_NEXT_TIMER_KNOWN != 0,
		NextEventNs: p.NextEventNs, NextEventKnown: flags&bpf.IdletraceIdleFlagsIDLE_NEXT_EVENT_KNOWN != 0,
		TickStopped:       tri(bpf.IdletraceIdleFlagsIDLE_TICK_STOPPED_KNOWN, bpf.IdletraceIdleFlagsIDLE_TICK_STOPPED),
		TickStoppedBefore: tri(bpf.IdletraceIdleFlagsIDLE_TICK_WAS_STOPPED_KNOWN, bpf.IdletraceIdleFlagsIDLE_TICK_WAS_STOPPED),
		KernelKnown:       kflags&bpf.IdletraceKernelFlagsKERNEL_KNOWN != 0,
		KernelCounted:     kflags&bpf.IdletraceKernelFlagsKERNEL_COUNTED != 0,
		KernelResidencyNs: p.KernelResidencyNs,
		NrIOWait:          nrIOWait,
		AbortedBefore:     kflags&bpf.IdletraceKernelFlagsKERNEL_ABORTED_BEFORE != 0,
		AbortsBefore:      abortsOf(p, kflags),
		GotTick:           ktri(bpf.IdletraceKernelFlagsKERNEL_GOT_TICK_KNOWN, bpf.IdletraceKernelFlagsKERNEL_GOT_TICK),
		PollTimedOut:      tri(bpf.IdletraceIdleFlagsIDLE_POLL_TIMEOUT_KNOWN, bpf.IdletraceIdleFlagsIDLE_POLL_TIMEOUT),
		IdleLoopEntry:     tristate(lflags, bpf.IdletraceLoopFlagsLOOP_ENTRY_KNOWN, bpf.IdletraceLoopFlagsLOOP_ENTRY),
		TickStoppable:     tristate(lflags, bpf.IdletraceLoopFlagsLOOP_TICK_STOPPABLE_KNOWN, bpf.IdletraceLoopFlagsLOOP_TICK_STOPPABLE),
	}
}

// tristate reads a known/yes pair of record flag bits.
func tristate[F ~uint32](flags, known, yes F) trace.Tristate {
	if flags&known == 0 {
		return trace.Unknown
	}
	return trace.TristateOf(flags&yes != 0)
}

// abortsOf is the record's count of aborted attempts, -1 when not counted.
func abortsOf(p *bpf.IdletraceIdleRecord, kflags bpf.IdletraceKernelFlags) int8 {
	if kflags&bpf.IdletraceKernelFlagsKERNEL_ABORTS_COUNTED == 0 {
		return -1
	}
	return int8(min(p.AbortsBefore, 127))
}
