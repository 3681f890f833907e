//go:build lab

package labtest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/labrows"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/record"
)

// This file sorts after the rows' files on purpose: its experiments measure
// timings, so they run alone, after the parallel rows.

// expCase is one predicted-against-measured experiment (issue 10 item 6):
// `idletrace experiment` in a lab VM records the workload, applies policy,
// records it again, and the prediction from the first recording is held to
// the second.
type expCase struct {
	name     string
	profile  string // the emulated table; "" is icx
	governor string // the VM's governor before the policy
	setup    string // shell run before the experiment (after POLL is disabled)
	policy   string
	bars     []expBar
}

// expBar is one figure of the comparison and how it is judged.
type expBar struct {
	figure string
	// change: the error on the change |(pred − before) − (meas − before)| /
	// |meas − before| ≤ 25 % (a change measured as none passes if none was
	// predicted either); points: |pred − meas| ≤ 5 points of a share;
	// relative: |pred − meas| / meas ≤ 25 %.
	kind string
}

// The figures a changed state table is judged on: the wake latency a
// wake-up pays, and what the reader waiting for its IO sees at the median,
// less the null disk's own drift between the two recordings (the
// prediction holds the device fixed; under TCG the 1 ms null disk's median
// moved by up to ±90 µs between recordings whatever the policy, as much as
// half the change a policy makes, lab/README.md). The unadjusted task IO
// figures, and the mean and p99, are measured and reported, not judged:
// under TCG a read's tail is the emulator's (the null disk's 1 ms reads take
// 1.2–1.5 ms at the median and 3–6 ms at p99, by how the vCPU threads were
// scheduled).
var tableBars = []expBar{
	{"wake_latency_ns.mean", "change"},
	{"wake_latency_ns.p50", "change"},
	{"task_io_latency_ns.p50_less_device_drift", "change"},
}

// c6Off disables C6 on every CPU (the reverse experiment starts there).
const c6Off = "for f in /sys/devices/system/cpu/cpu*/cpuidle/state*; do [ \"$(cat $f/name)\" = C6 ] && echo 1 >$f/disable; done; true"

var expCases = []expCase{
	{"menu+disable=C6", "", "menu", "", "menu+disable=C6", tableBars},
	{"menu+enable=C6 (from C6 disabled)", "", "menu", c6Off, "menu+enable=C6", tableBars},
	{"menu+qos=20us", "", "menu", "", "menu+qos=20us", tableBars},
	// hsw's nine states, the four deepest off (as intel_idle.max_cstate=4
	// would leave them): its 1 ms reads' CPUs move from C7s-C10 (166-2600
	// µs) to C6 (133 µs) and shallower.
	{"hsw: the four deepest off", "hsw", "menu", "", "menu+disable=C7s,C8,C9,C10", tableBars},
	{"ladder → menu", "", "ladder", "", "menu", []expBar{
		{"state_share.C1", "points"}, {"state_share.C1E", "points"}, {"state_share.C6", "points"},
		{"wake_latency_ns.p99", "relative"},
	}},
}

// expRuns: before/after pairs per experiment, judged on the median of the
// pairs' changes (experiment --runs): one pair's task IO figures moved by as much as the
// change they were to show (lab/README.md). Five since 2026-12-05: with
// three, enable=C6's task IO change came out 27 % from the prediction in
// one CI rehearsal (bar 25 %; 5–21 % in the runs before).
const expRuns = 5

// expCPUs: the workload on CPUs 0 and 1, the recorder on CPU 2 (as for the
// cross-governor cases: its own wake-ups stay off the workload's CPUs).
const expCPUs = 3

// expEnv: multi-threaded TCG (a vCPU spinning out an emulated exit latency
// does not hold the others back; with single-threaded TCG the reads'
// latencies changed by about twice the exit latency the table gives) and
// lab.sh's null disk with 1 ms reads (lab/workloads/experiment.sh), served
// by a virtio disk on a QEMU iothread of its own: on QEMU's NVMe device the
// null-co timer fires at the main loop's next whole-millisecond wake-up, so
// the device's own latency moved with whatever else woke the main loop and
// the reader's median moved by about twice the exit latency a policy saved
// (lab/README.md).
var expEnv = []string{"IDLETRACE_LAB_TCG=multi", "IDLETRACE_LAB_NULL_LATENCY_NS=1000000", "IDLETRACE_LAB_NULL_DISK=virtio",
	appendEnv(pinTracepoints())}

// pinTracepoints: under multi-threaded TCG a vCPU now and then died of an
// int3 Oops while the recorder attached (at __sysvec_apic_timer_interrupt,
// the local_timer_entry site): attaching the first or second probe to a
// tracepoint patches kernel text with x86's int3 protocol (the static key
// 0→1, the static call 0→1 and 1→2; kernel/tracepoint.c,
// tracepoint_add_func, Linux 6.12), and QEMU's cross-vCPU code
// invalidation loses that race now and then. From the third probe on,
// only the probe array changes. So the kernel command line enables every
// tracepoint the recorder may attach to in two trace instances at boot,
// before the other CPUs are up (start_kernel's trace_init, ahead of
// smp_init), both with tracing off (^traceoff: their probes find the
// buffer off and return), and the recordings' attach and detach then
// patch nothing.
func pinTracepoints() string {
	list := strings.Join(record.Tracepoints(), ",")
	return "trace_buf_size=16K trace_instance=idletrace_pin1^traceoff," + list + " trace_instance=idletrace_pin2^traceoff," + list
}

type expFigure = analysis.ComparisonFigureJSON

// TestLabExperiment runs each experiment (but those IDLETRACE_LAB_EXPERIMENT_SKIP
// names, comma-separated) on the lab kernel's icx table (or the case's) with
// POLL disabled (as the cross-governor cases, for the same reason: under
// TCG a polling vCPU delays timer interrupts) and judges its bars. Results
// go to IDLETRACE_LAB_EXPERIMENT_RESULTS (a JSON file) when set.
func TestLabExperiment(t *testing.T) {
	root, in := labKernelInput(t, "lab/workloads/experiment.sh")
	buildTimerload(t, root, in)
	var rows []labrows.Experiment
	t.Cleanup(func() {
		if path := os.Getenv("IDLETRACE_LAB_EXPERIMENT_RESULTS"); path != "" {
			if err := labrows.Write(path, rows); err != nil {
				t.Error(err)
			}
		}
	})
	skip := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("IDLETRACE_LAB_EXPERIMENT_SKIP"), ",") {
		skip[strings.TrimSpace(n)] = true
	}
	for _, c := range expCases {
		if skip[c.name] {
			continue // left out by the caller (scripts/lab-rows.sh says why)
		}
		t.Run(c.name, func(t *testing.T) {
			script := pinReport + housekeeping + pollOff + "; " + c.setup + " && " + experimentCmd(c.policy, expRuns, "experiment.sh")
			if c.setup == "" {
				script = strings.Replace(script, " && ", " ", 1)
			}
			profile := c.profile
			if profile == "" {
				profile = "icx"
			}
			for attempt := 1; ; attempt++ {
				out := runLabCPUs(t, root, in, "lab", profile, c.governor, expCPUs, script, expEnv...)
				keepLabOut(out, c.name)
				checkPinned(t, out)
				checkHousekeeping(t, out)
				cmp := filepath.Join(out, "cmp.json")
				figs := readComparison(t, cmp)
				judged, passes, failures := judgeCase(c, figs)
				if drift, ok := deviceDrift(figs); len(failures) > 0 && attempt == 1 && ok && drift > maxDeviceDrift {
					t.Logf("run 1 failed (%s) while the null disk's own median latency moved %.1f %% between the recordings (more than %.0f %%): disturbed, so the case runs again and the second run's verdict stands",
						strings.Join(failures, "; "), 100*drift, 100*maxDeviceDrift)
					continue
				}
				rows = append(rows, judged...)
				for _, p := range passes {
					t.Log(p)
				}
				for _, f := range failures {
					t.Error(f)
				}
				if len(failures) > 0 { // what the report says moved between the recordings
					for _, n := range workloadNotes(t, cmp) {
						t.Log(n)
					}
				}
				for _, name := range []string{"task_io_latency_ns.p50", "task_io_latency_ns.mean", "task_io_latency_ns.mean_less_device_drift",
					"task_io_latency_ns.p99", "io_latency_ns.p50", "io_latency_ns.p50_less_device_drift",
					"io_device_latency_ns.p50", "io_device_latency_ns.mean"} {
					if f, ok := figs[name]; ok {
						rows = append(rows, labrows.Experiment{Case: c.name, Figure: name, Before: f.Before, Predicted: f.Predicted,
							Measured: f.Measured, ChangeError: f.ChangeError, RelativeError: f.RelativeError})
						t.Logf("%s (reported): %s", name, describe(f))
					}
				}
				return
			}
		})
	}
}

// maxDeviceDrift: a case whose judged figures fail while the null disk's
// own median latency (io_device_latency_ns.p50, which no policy changes)
// moved by more than this between the recordings was disturbed, and runs
// once more. In the rehearsals its drift was 0.6-2.5 % in passing runs;
// enable=C6's task IO change failed at 27 % from the prediction (bar 25 %)
// in a run whose disk moved 6.0 % (+82 µs), its mean 15 %.
const maxDeviceDrift = 0.05

// deviceDrift is the null disk's own median latency change between the
// recordings, as a share of the first's.
func deviceDrift(figs map[string]expFigure) (float64, bool) {
	f, ok := figs["io_device_latency_ns.p50"]
	if !ok || f.Before == nil || f.Measured == nil || *f.Before <= 0 {
		return 0, false
	}
	return math.Abs(*f.Measured-*f.Before) / *f.Before, true
}

// judgeCase applies c's bars to the comparison: the rows of the judged
// figures, the verdicts of those that passed, and why each that failed did.
func judgeCase(c expCase, figs map[string]expFigure) (rows []labrows.Experiment, passes, failures []string) {
	for _, b := range c.bars {
		f, ok := figs[b.figure]
		if !ok {
			failures = append(failures, b.figure+": not in the comparison")
			continue
		}
		pass, verdict := judge(b, f)
		rows = append(rows, labrows.Experiment{Case: c.name, Figure: b.figure, Bar: b.kind, Before: f.Before, Predicted: f.Predicted,
			Measured: f.Measured, ChangeError: f.ChangeError, RelativeError: f.RelativeError, Judged: true, Pass: pass})
		if !pass {
			failures = append(failures, b.figure+": "+verdict)
		} else {
			passes = append(passes, fmt.Sprintf("%s (judged, %s bar): %s", b.figure, b.kind, verdict))
		}
	}
	return rows, passes, failures
}

// housekeeping keeps the kernel's RCU work off the workload's CPUs 0 and
// 1, on CPU 2 (the recorder's): RCU's grace-period kthread (rcu_sched, or
// rcu_preempt on a preemptible kernel) moved there, and timer migration
// off, so that the timers it arms there stay there. Together with fio's
// parent process on CPU 2 (lab/workloads/experiment.sh): a CPU with RCU
// callbacks queued (rcu_needs_cpu) or a timer due within the tick cannot
// stop the tick (tick_nohz_next_event), and in the VM fio's parent queued
// about 90 callbacks a second (a stat of a file that is not there: a
// dentry freed through call_rcu), the grace periods they start have the
// kthread sleep a jiffy at a time (schedule_timeout(1)), and with timer
// migration those timers expire on whichever CPU handles the idle CPUs'
// global timers (kprobe on call_rcu, tracefs timer events). Left alone,
// one workload CPU kept its tick in 97–99.6 % of its periods, whichever
// CPU fio's parent or the kthread was on in that run: they swapped CPUs
// between an experiment's recordings, and the prediction, which takes
// the tick's refusals from the first, could not follow (ladder → menu
// failed 1 run in 3). The VM writes what it set to /out/housekeeping, for
// checkHousekeeping. (No "&&": see pinReport.)
const housekeeping = "for d in /proc/[0-9]*; do case $(cat $d/comm 2>/dev/null) in rcu_sched|rcu_preempt) " +
	"taskset -pc 2 ${d#/proc/} >>/out/housekeeping || exit 1;; esac; done; " +
	"echo 0 >/proc/sys/kernel/timer_migration || exit 1; echo timer_migration=$(cat /proc/sys/kernel/timer_migration) >>/out/housekeeping; "

// checkHousekeeping fails the case unless the VM did what housekeeping asks.
func checkHousekeeping(t *testing.T, out string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "housekeeping"))
	if err != nil || !strings.Contains(string(b), "new affinity list: 2") || !strings.Contains(string(b), "timer_migration=0") {
		t.Fatalf("RCU's grace-period kthread not moved to CPU 2 or timer migration not off (%v): %q", err, b)
	}
}

// pollOff disables every CPU's POLL state (state 0 of the lab's tables).
const pollOff = "for f in /sys/devices/system/cpu/cpu*/cpuidle/state0/disable; do echo 1 >$f; done"

// experimentCmd runs `idletrace experiment` of workload (a script in the
// VM's /work) under policy, recorded from CPU 2 on the workload's CPUs 0
// and 1, its JSON report in /out/cmp.json.
func experimentCmd(policy string, runs int, workload string) string {
	return "taskset -c 2 idletrace experiment --cpus 0,1 --runs " + fmt.Sprint(runs) + " -q -o /out/exp --format json --io comm=fio --policy '" + policy +
		"' -- sh ./" + workload + " >/out/cmp.json 2>/out/err.txt || { cat /out/err.txt >&2; exit 1; }"
}

// keepLabOut copies a run's --out directory to IDLETRACE_LAB_TEST_KEEP/name
// (blanks and slashes made underscores) when that is set.
func keepLabOut(out, name string) {
	if keep := os.Getenv("IDLETRACE_LAB_TEST_KEEP"); keep != "" {
		_ = exec.Command("cp", "-r", out, filepath.Join(keep, strings.NewReplacer(" ", "_", "/", "_").Replace(name))).Run()
	}
}

// pinReport has the VM write the kernel's events and each pin instance's
// enabled ones to /out, for checkPinned.
// (No "&&": the case's script drops its first one when it has no setup.)
const pinReport = "cat /sys/kernel/tracing/available_events >/out/available_events; " +
	"for i in 1 2; do cat /sys/kernel/tracing/instances/idletrace_pin$i/set_event >/out/pinned$i || exit 1; done; "

// checkPinned fails the case unless both pin instances hold every recorder
// tracepoint the kernel has: one left out would patch text at attach, and
// the Oops pinTracepoints avoids would be back by chance.
func checkPinned(t *testing.T, out string) {
	t.Helper()
	read := func(name string) map[string]bool {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatalf("the pinned tracepoints: %v", err)
		}
		set := map[string]bool{}
		for _, l := range strings.Fields(string(b)) {
			set[l] = true
		}
		return set
	}
	avail := read("available_events")
	for _, pin := range []string{"pinned1", "pinned2"} {
		got := read(pin)
		for _, tp := range record.Tracepoints() {
			if avail[tp] && !got[tp] {
				t.Errorf("%s: %s is not enabled at boot (pinTracepoints): attaching it would patch kernel text", pin, tp)
			}
		}
	}
}

func readComparison(t *testing.T, path string) map[string]expFigure {
	t.Helper()
	var doc struct {
		Comparison struct {
			Figures []expFigure `json:"figures"`
		} `json:"comparison"`
	}
	readJSON(t, path, &doc)
	figs := map[string]expFigure{}
	for _, f := range doc.Comparison.Figures {
		figs[f.Figure] = f
	}
	if len(figs) == 0 {
		t.Fatalf("%s: no figures", path)
	}
	return figs
}

// workloadNotes are the report's notes on the recordings differing in a
// way no policy explains (analysis.WorkloadMovedNotes).
func workloadNotes(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return nil
	}
	var doc struct {
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Errorf("%s: %v", path, err)
	}
	var out []string
	for _, n := range doc.Notes {
		if strings.HasPrefix(n, analysis.WorkloadMovedNote) {
			out = append(out, n)
		}
	}
	return out
}

// judge applies a bar to one figure; verdict says why in either case.
func judge(b expBar, f expFigure) (bool, string) {
	v := describe(f)
	if f.Predicted == nil || f.Measured == nil || f.Before == nil {
		return false, "missing in a result: " + v
	}
	switch b.kind {
	case "change":
		if f.NoChangeMeasured {
			// None measured: the prediction must not have one either (1 %
			// of the value, ten times the no-change rule's latency limit).
			return math.Abs(*f.PredictedChange) <= 0.01*math.Abs(*f.Before), v
		}
		return f.ChangeError != nil && *f.ChangeError <= 0.25, v
	case "points":
		return math.Abs(*f.Predicted-*f.Measured) <= 0.05, v
	case "relative":
		return f.RelativeError != nil && *f.RelativeError <= 0.25, v
	}
	return false, "unknown bar " + b.kind
}

func describe(f expFigure) string {
	num := func(p *float64) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprintf("%.4g", *p)
	}
	return fmt.Sprintf("before %s, predicted %s, measured %s; change predicted %s, measured %s; error on change %s, relative %s",
		num(f.Before), num(f.Predicted), num(f.Measured), num(f.PredictedChange), num(f.MeasuredChange), num(f.ChangeError), num(f.RelativeError))
}
