package record_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/internal/fidelity"
	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/record"
	"github.com/idletrace/idletrace/pkg/trace"
)

// ensureTool installs a Debian package when its command is missing.
func ensureTool(t *testing.T, command, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(command); err == nil {
		return p
	}
	t.Logf("installing %s from Debian's packages", pkg)
	install := exec.Command("sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "+pkg)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("installing %s: %v\n%s", pkg, err, out)
	}
	p, err := exec.LookPath(command)
	if err != nil {
		t.Fatalf("%s still missing after installing %s", command, pkg)
	}
	return p
}

// diskOf finds the whole disk (sysfs name and dev_t) a file lives on.
func diskOf(t *testing.T, path string) (string, uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	dir, err := filepath.EvalSymlinks(link)
	if err != nil {
		t.Fatalf("%s is not on a block device (%s: %v)", path, link, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		dir = filepath.Dir(dir)
	}
	dev, err := os.ReadFile(filepath.Join(dir, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	ma, mi, _ := strings.Cut(strings.TrimSpace(string(dev)), ":")
	a, _ := strconv.Atoi(ma)
	b, _ := strconv.Atoi(mi)
	return filepath.Base(dir), uint32(a)<<20 | uint32(b)
}

type fioResult struct {
	Jobs []struct {
		Read struct {
			TotalIOs uint64 `json:"total_ios"`
			ClatNs   struct {
				Percentile map[string]uint64 `json:"percentile"`
			} `json:"clat_ns"`
		} `json:"read"`
	} `json:"jobs"`
}

// readerView is what the reading workload saw itself: its reads, their
// latency as the process measured it (around each pread, or fio's clat)
// and the task name its requests were issued under.
type readerView struct {
	reads    uint64
	p50, p99 uint64
	comm     string
	// sleeps is the kernel's count of the reader's voluntary context
	// switches (wait4's rusage of the whole fio process tree; the VM
	// reader's thread's own), 0 where not known: no more reads than that
	// can have waited for their completion.
	sleeps uint64
	// otherSleeps bounds the sleeps that were not reads waiting: fio's
	// main process and helper thread (about 330 in a 3 s run), the VM
	// reader thread's Go runtime (about 100).
	otherSleeps uint64
	// quantile is the latency at quantile q of all its reads, rounded up
	// to the next one the reader reports.
	quantile func(q float64) uint64
}

// fioQuantile reads quantiles from fio's clat percentiles: the smallest
// reported percentile at or above q.
func fioQuantile(pct map[string]uint64) func(float64) uint64 {
	return func(q float64) uint64 {
		best, bestP := uint64(0), math.Inf(1)
		for k, v := range pct {
			p, err := strconv.ParseFloat(k, 64)
			if err == nil && p >= 100*q-1e-9 && p < bestP {
				best, bestP = v, p
			}
		}
		if math.IsInf(bestP, 1) { // beyond the last reported: the largest
			for _, v := range pct {
				best = max(best, v)
			}
		}
		return best
	}
}

// recordWorkload records while fio does 4 KiB O_DIRECT random reads on a file
// and perf bench sched pipe ping-pongs between CPUs 0 and 1. Both workloads
// start after the start snapshot and end before the end snapshot.
func recordWorkload(t *testing.T) (path string, view readerView, disk string, dev uint32) {
	t.Helper()
	if inMatrixVM() { // the kernel-matrix VM has neither fio nor perf
		return recordVMWorkload(t)
	}
	fio := ensureTool(t, "fio", "fio")
	perf := ensureTool(t, "perf", "linux-perf")

	dir := t.TempDir()
	data := filepath.Join(dir, "fio.dat")
	layout := exec.Command(fio, "--name=layout", "--filename="+data, "--size=64M", "--rw=write", "--bs=1M", "--end_fsync=1")
	if out, err := layout.CombinedOutput(); err != nil {
		t.Fatalf("fio layout: %v\n%s", err, out)
	}
	var fioOut []byte
	var sleeps uint64
	path, disk, dev, sum := recordWhile(t, dir, data, func() (err error) {
		cmd := exec.Command(fio, "--name=referee", "--filename="+data, "--size=64M", "--rw=randread",
			"--bs=4k", "--direct=1", "--ioengine=psync", "--runtime=3", "--time_based", "--output-format=json")
		if fioOut, err = cmd.Output(); err != nil {
			return fmt.Errorf("fio: %v", err)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			sleeps = uint64(ru.Nvcsw)
		}
		return nil
	}, func() error {
		if out, err := exec.Command("taskset", "-c", "0,1", perf, "bench", "sched", "pipe", "-l", "30000").CombinedOutput(); err != nil {
			return fmt.Errorf("perf bench sched pipe: %v\n%s", err, out)
		}
		return nil
	})
	var fr fioResult
	if err := json.Unmarshal(fioOut[strings.IndexByte(string(fioOut), '{'):], &fr); err != nil || len(fr.Jobs) == 0 {
		t.Fatalf("fio output: %v\n%s", err, fioOut)
	}
	for _, ps := range progStatsOf(t, path) {
		if ps.Misses > 0 {
			t.Logf("%s: %d recursion misses", ps.Name, ps.Misses)
		}
	}
	t.Logf("recorded %d idle periods, %d IO requests; %s; fio did %d reads", sum.IdlePeriods, sum.BlockIOs, sum.Loss, fr.Jobs[0].Read.TotalIOs)
	pct := fr.Jobs[0].Read.ClatNs.Percentile
	return path, readerView{reads: fr.Jobs[0].Read.TotalIOs, p50: pct["50.000000"], p99: pct["99.000000"], comm: "fio", sleeps: sleeps, otherSleeps: 1000, quantile: fioQuantile(pct)}, disk, dev
}

// recordWhile records into dir/referee.trace while the workloads run side
// by side: they start after the start snapshot (every program attached)
// and end before the end snapshot. disk and dev are the block device that
// holds data (synced first, so the recording sees only the workloads' IO).
func recordWhile(t *testing.T, dir, data string, workloads ...func() error) (path, disk string, dev uint32, sum *record.Summary) {
	t.Helper()
	unix.Sync()
	disk, dev = diskOf(t, data)
	path = filepath.Join(dir, "referee.trace")
	finish := startRecording(t, path)
	errs := make([]error, len(workloads))
	var wl sync.WaitGroup
	for i, w := range workloads {
		wl.Add(1)
		go func() {
			defer wl.Done()
			errs[i] = w()
		}()
	}
	wl.Wait()
	sum, recErr := finish()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if recErr != nil {
		t.Fatalf("record: %v", recErr)
	}
	return path, disk, dev, sum
}

// startRecording records into path until the returned finish is called;
// it returns once every program is attached and the start snapshot taken.
func startRecording(t *testing.T, path string) (finish func() (*record.Summary, error)) {
	t.Helper()
	ready, done := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	var sum *record.Summary
	var err error
	go func() {
		defer close(done)
		sum, err = record.Record(ctx, record.Options{
			Output: path, ToolVersion: "test", BPFStats: true,
			Ready: func() { close(ready) },
			Warn:  func(s string) { t.Log("warning:", s) },
		})
	}()
	select {
	case <-ready:
	case <-done:
		cancel()
		t.Fatalf("recording failed to start: %v", err)
	}
	return func() (*record.Summary, error) {
		cancel()
		<-done
		return sum, err
	}
}

// knownCauseMinNs: on a guest, the halted stays this long or longer are
// held to 95 % known wake causes, the shorter ones only to 85 % with the
// rest. A KVM guest's HLT sometimes returns after about 3 µs with no
// interrupt taken (the one that woke the vCPU is taken in the next
// period: perf's capture of every irq and irq_vectors event on this
// project's machines shows nothing between such a period's entry and
// exit). The recorder rightly gives those no cause; they were 2.0-6.8 % of
// the periods in five runs here (93.2 % known in all, failing the 95 %
// this check held every period to), while 99.98-100 % of the periods of
// 10 µs or more had a cause. Polling stays and hosts that are not guests
// keep the 95 % on every period.
const knownCauseMinNs = 10_000

// TestKernelReferee checks the recorder against the kernel's own counters.
func TestKernelReferee(t *testing.T) {
	testenv.OwnMachine(t)
	softirqStops := softirqPendingStops(t)
	initIPIs := initIPISends(t)
	path, reader, disk, dev := recordWorkload(t)
	softirqStopsDuring, softirqStopsKnown := softirqStops()
	initIPIsDuring := initIPIs()
	fioIOs := reader.reads
	if keep := os.Getenv("IDLETRACE_REFEREE_TRACE"); keep != "" {
		keepCopy(t, path, keep) // the matrix keeps it with its results
	}

	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if w := r.Warnings(); len(w) > 0 {
		t.Errorf("a finished recording reads with warnings: %v", w)
	}
	checkRecorderCost(t, path)
	if r.End == nil || r.End.Snapshot == nil || r.Meta.Start == nil {
		t.Fatal("the trace lacks its start or end snapshot")
	}
	var ringLost, undelivered uint64
	for _, l := range r.End.Loss {
		ringLost += l.RingLost()
		undelivered += l.Undelivered()
		t.Logf("loss cpu%d: %+v", l.CPU, l)
	}
	if ringLost != 0 {
		t.Errorf("%d records lost to a full ring buffer on this workload", ringLost)
	}
	t.Logf("%d events raised by the kernel without running the programs (accounted below)", undelivered)

	start, end := r.Meta.Start, r.End.Snapshot
	window := fidelity.SnapshotWindows(r)

	type key struct{ cpu, state uint32 }
	type counts struct {
		usage, timeNs, above, below uint64
	}
	traced := map[key]*counts{}
	var periods, known, remote, remoteMeasured, remoteEarly, kernelRes uint64
	// held: the periods held to 95 % known causes (knownCauseMinNs)
	var held, heldKnown uint64
	guest := slices.Contains(host.Local.CPUFlags(), "hypervisor")
	var ioDone uint64
	ioByOp := map[uint8]uint64{}
	var readerTaskLat []uint64 // the reader's requests it waited for
	var loop loopFacts
	// Periods entered with the tick stopped, and the aborted attempts
	// before the periods (a least count where abortsLeast: the period says
	// only whether the attempt before it aborted, or nothing), per CPU.
	tickStops, aborts, abortsLeast := map[uint32]uint64{}, map[uint32]uint64{}, map[uint32]bool{}
	statesOf := map[uint32][]model.State{}
	for _, cs := range r.Meta.States {
		for _, s := range cs.States {
			statesOf[uint32(cs.CPU)] = append(statesOf[uint32(cs.CPU)], model.State{
				Name: s.Name, ExitLatencyNs: s.ExitLatencyNs, TargetResidencyNs: s.TargetResidencyNs, Disabled: s.Disabled, Polling: s.Polling})
		}
	}
	// Tick stops the kernel may have counted on a snapshot's side of the
	// trace's window, per CPU: periods entered with the tick stopped in
	// the start snapshot's hold (Snapshot.TickHold; the trace counts them
	// in the window), and in the end snapshot's, with their aborted
	// attempts (the kernel counts them in the window, the trace does not).
	slipStart, slipEnd := map[uint32]uint64{}, map[uint32]uint64{}
	var next analysis.SleepLengthCheck
	slipped := func(s *trace.Snapshot, p *trace.IdlePeriod) bool {
		from, to, ok := s.TickHold(int(p.CPU), r.Meta.RecordedCPUs)
		return ok && p.EntryNs >= from && p.EntryNs <= to
	}
	err = r.Scan(trace.Visitor{
		Idle: func(p *trace.IdlePeriod) error {
			if p.TickStopped == trace.Yes && slipped(start, p) {
				slipStart[p.CPU]++
			}
			if slipped(end, p) {
				if p.TickStopped == trace.Yes {
					slipEnd[p.CPU]++
				}
				slipEnd[p.CPU] += uint64(max(p.AbortsBefore, 0))
			}
			w, ok := window[p.CPU]
			if !ok || p.EntryNs < w[0] || p.ExitNs > w[1] {
				return nil
			}
			periods++
			if p.WakeCause != trace.WakeUnknown {
				known++
			}
			if !guest || p.ResidencyNs() >= knownCauseMinNs || pollingState(statesOf[p.CPU], p.State) {
				held++
				if p.WakeCause != trace.WakeUnknown {
					heldKnown++
				}
			}
			if p.WakeCause.IsRemoteWake() {
				remote++
				if _, ok := p.WakeLatencyNs(); ok {
					remoteMeasured++
				} else if p.RequestedBeforeEntry() {
					remoteEarly++
				}
			}
			loop.add(p, statesOf[p.CPU])
			next.Add(p)
			if p.TickStopped == trace.Yes {
				tickStops[p.CPU]++
			}
			switch {
			case p.AbortsBefore >= 0: // menu's count
				aborts[p.CPU] += uint64(p.AbortsBefore)
			case !p.KernelKnown: // no driver's device to show them
				abortsLeast[p.CPU] = true
			case p.AbortedBefore: // at least one
				aborts[p.CPU]++
				abortsLeast[p.CPU] = true
			}
			k := key{p.CPU, p.State}
			c := traced[k]
			if c == nil {
				c = &counts{}
				traced[k] = c
			}
			res, counted := p.Residency()
			if !counted {
				return nil // a rejected entry: the kernel counts it as rejected, not used
			}
			c.usage++
			c.timeNs += res
			if p.KernelCounted {
				kernelRes++
			}
			above, below := model.ClassifyMiss(statesOf[p.CPU], int(p.State), res)
			if above {
				c.above++
			}
			if below {
				c.below++
			}
			return nil
		},
		BlockIO: func(b *trace.BlockIO) error {
			if b.Dev == dev && b.CompleteNs > start.MonotonicNs && b.CompleteNs <= end.MonotonicNs {
				ioDone++
				ioByOp[b.Op]++
				if lat, ok := iowake.TaskLatencyNs(b); ok && b.Comm == reader.comm {
					readerTaskLat = append(readerTaskLat, lat)
				}
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("idle-loop", func(t *testing.T) { loop.check(t, r.Meta) })

	// Task IO latency, issue → the reader running again, is a part of
	// what the reader measured around each read (the syscall's way in and
	// out adds to it); the device's time and the wake-ups are most of it.
	t.Run("task-io-latency", func(t *testing.T) {
		if !r.Meta.Inputs.TaskIO {
			t.Skipf("this kernel lacks the sched_waking or sched_switch tracepoint (%v)", r.Meta.Probes)
		}
		// A read whose completion came before the reader had gone to
		// sleep has no wake-up to measure (try_to_wake_up found it still
		// running, and sched_waking does not fire). How many do depends on
		// the disk: 0.1–4 % of fio's reads on this project's machines once,
		// 85–95 % on their newer disks, whose reads complete in tens of µs.
		// The kernel's count of the reader's voluntary context switches
		// says how many can have waited: every read with a task latency
		// slept once, and every sleep but the reader's own (otherSleeps)
		// was such a read. (In the matrix VM, before the reader thread
		// counted its sleeps, 3,942 of 4,793 reads carried a task latency
		// once, where 4,499 of 4,503 and 3,668 of 3,671 do otherwise: the
		// thread's count tells a recorder that missed wake-ups from reads
		// that did not wait. The thread sleeps for the Go runtime too: 80–
		// 100 times beyond its reads on 6.1, 300–400 on 6.12.)
		n := uint64(len(readerTaskLat))
		// No more reads can have waited than it slept, nor than it made.
		waited := min(reader.sleeps, reader.reads)
		switch {
		case n > reader.reads:
			t.Fatalf("%d of the %q reader's %d reads carry its task latency", n, reader.comm, reader.reads)
		case reader.sleeps == 0 && n < reader.reads*90/100: // no rusage: its reads wait
			t.Fatalf("%d of the %q reader's %d reads carry its task latency", n, reader.comm, reader.reads)
		case reader.sleeps > 0 && (n > reader.sleeps || n+reader.otherSleeps+waited/20 < waited):
			t.Fatalf("%d of the %q reader's %d reads carry its task latency, but the kernel counted %d voluntary context switches of it: every read that waited slept once", n, reader.comm, reader.reads, reader.sleeps)
		case n < 500:
			t.Fatalf("only %d of the %q reader's %d reads waited (the kernel counted %d sleeps): too few to hold their latency to the reader's own view", n, reader.comm, reader.reads, reader.sleeps)
		}
		slices.Sort(readerTaskLat)
		p50, p99 := readerTaskLat[n/2], readerTaskLat[n*99/100]
		t.Logf("%q: %d of its %d reads waited (the kernel counted %d sleeps); issue → task running: p50 %.1f µs, p99 %.1f µs; the reader's own view: p50 %.1f µs, p99 %.1f µs",
			reader.comm, n, reader.reads, reader.sleeps, float64(p50)/1e3, float64(p99)/1e3, float64(reader.p50)/1e3, float64(reader.p99)/1e3)
		// Never more than the reader's own view (fio's percentiles are
		// bins ≤ 1 % wide; 2 µs of clock reads); at the median most of it
		// (the device and the wake-ups). Not so at p99: a reader
		// preempted between its clock read and the issue waits in its
		// own view only. The reads that waited are a share f of all: their
		// quantile q is at most all reads' quantile 1 − (1 − q)·f.
		f := float64(n) / float64(reader.reads)
		for _, c := range []struct {
			name  string
			q     float64
			ours  uint64
			least float64
		}{{"p50", 0.5, p50, 0.5}, {"p99", 0.99, p99, 0}} {
			most := reader.quantile(1 - (1-c.q)*f)
			if float64(c.ours) > float64(most)*1.02+2000 || float64(c.ours) < float64(reader.quantile(c.q))*c.least {
				t.Errorf("%s: task latency %d ns against the reader's own %d ns at its quantile %.4f (%d ns at %.2f): it must be part of it (at least %.0f %%), and no more",
					c.name, c.ours, most, 1-(1-c.q)*f, reader.quantile(c.q), c.q, 100*c.least)
			}
		}
	})

	t.Run("cpuidle-counters", func(t *testing.T) {
		if len(r.Meta.States) == 0 {
			t.Skipf("this kernel has no cpuidle driver (current_driver=%s): it keeps no per-state usage/time/above/below counters to compare with; make test-kernels runs this check in VMs with acpi_idle", r.Meta.CPUIdleDriver)
		}
		t.Logf("%d of %d periods carry the cpuidle core's own residency", kernelRes, periods)
		for i, kc := range end.CPUIdle {
			sc := start.CPUIdle[i]
			for j, ks := range kc.States {
				k := key{uint32(kc.CPU), uint32(ks.Index)}
				c := traced[k]
				if c == nil {
					c = &counts{}
				}
				dUsage := ks.Usage - sc.States[j].Usage
				dTimeNs := (ks.TimeUs - sc.States[j].TimeUs) * 1000
				if c.usage != dUsage {
					t.Errorf("cpu%d state%d usage: traced %d, kernel %d", kc.CPU, ks.Index, c.usage, dUsage)
				}
				if dTimeNs > 0 && math.Abs(float64(c.timeNs)-float64(dTimeNs))/float64(dTimeNs) > 0.005 {
					t.Errorf("cpu%d state%d residency: traced %d ns, kernel %d ns", kc.CPU, ks.Index, c.timeNs, dTimeNs)
				}
				if dA, dB := ks.Above-sc.States[j].Above, ks.Below-sc.States[j].Below; c.above != dA || c.below != dB {
					t.Errorf("cpu%d state%d above/below: traced %d/%d, kernel %d/%d", kc.CPU, ks.Index, c.above, c.below, dA, dB)
				}
			}
		}
	})

	// The tick's state at entry (after the governor's choice, which it
	// follows) against the kernel's idle_sleeps: every
	// tick_nohz_idle_stop_tick() that left the tick stopped or tried to
	// (kernel/time/tick-sched.c, 6.12; since 6.9 a timer base that will
	// not go idle keeps the tick after the count). So the kernel counts
	// also the attempts aborted after that call (a wake-up before the
	// state's entry), which make no idle period, and may count more. It
	// counts fewer by two things only, both measured here: an entry whose
	// tick stayed stopped while softirqs were pending (can_stop_idle_tick()
	// returns before the count and logs it, ten a boot:
	// report_idle_softirq(); softirqPendingStops), and a period the
	// snapshots' hold let slip onto the kernel's side of the window
	// (Snapshot.TickHold).
	t.Run("tick-stops", func(t *testing.T) {
		if start.Tick == nil || end.Tick == nil {
			if b, err := os.ReadFile("/proc/timer_list"); err == nil && strings.Contains(string(b), ".idle_sleeps") {
				t.Fatal("/proc/timer_list has idle_sleeps, but the snapshots lack them")
			}
			t.Skip("this kernel's /proc/timer_list has no idle_sleeps (CONFIG_TICK_ONESHOT)")
		}
		if !r.Meta.Inputs.TickState {
			t.Fatalf("the recording has no tick state (%v)", r.Meta.Probes)
		}
		t.Logf("the kernel logged %d tick stops refused for pending softirqs during the recording; the snapshots' tick counters were read in %d and %d µs",
			softirqStopsDuring, (start.TickReadEndNs-start.TickReadStartNs)/1000, (end.TickReadEndNs-end.TickReadStartNs)/1000)
		if !softirqStopsKnown {
			t.Log("the kernel's refusals for pending softirqs are not known (its ten logged a boot are spent, or /dev/kmsg cannot be read): the trace's count is not held to the kernel's")
		}
		for _, e := range end.Tick {
			i := slices.IndexFunc(start.Tick, func(s trace.TickCounters) bool { return s.CPU == e.CPU })
			if i < 0 {
				t.Fatalf("cpu%d: idle_sleeps at the end, not at the start", e.CPU)
			}
			c := uint32(e.CPU)
			kernel, traced := e.IdleSleeps-start.Tick[i].IdleSleeps, tickStops[c]
			least := ""
			if abortsLeast[c] {
				least = "at least "
			}
			t.Logf("cpu%d: entered with the tick stopped: traced %d, kernel %d (idle_calls %d); %s%d aborted attempts; slipped past the snapshots' holds: %d stops at the start, %d stops and attempts at the end",
				c, traced, kernel, e.IdleCalls-start.Tick[i].IdleCalls, least, aborts[c], slipStart[c], slipEnd[c])
			// The 2: an edge the holds do not cover that this check has not
			// named yet; none seen (the host's haltpoll CPUs agree exactly).
			if softirqStopsKnown && traced > kernel+slipStart[c]+softirqStopsDuring+2 {
				t.Errorf("cpu%d: %d periods entered with the tick stopped, but the kernel stopped it %d times (%d slipped past the start's hold, %d refused for softirqs)",
					c, traced, kernel, slipStart[c], softirqStopsDuring)
			}
			if kernel > 20 && traced == 0 {
				t.Errorf("cpu%d: the kernel stopped the tick %d times, no period was entered with it stopped", c, kernel)
			}
			// Every stop the kernel counted beyond the trace's is an
			// aborted attempt, where menu counts them all (6.1 and 6.12
			// under TCG: 508 of 566; where only a least count is known,
			// 582 of at least 741, and on this guest under fio 3 of at
			// least 5): held to it there only.
			if !abortsLeast[c] && kernel > traced+aborts[c]+slipEnd[c]+2+kernel/100 {
				t.Errorf("cpu%d: %d periods entered with the tick stopped and %d aborted attempts, but the kernel stopped it %d times", c, traced, aborts[c], kernel)
			}
		}
	})

	t.Run("block-stat", func(t *testing.T) {
		startDisk, _ := diskCounter(start, disk)
		endDisk, found := diskCounter(end, disk)
		before, after := startDisk.Completed(), endDisk.Completed()
		if !found {
			t.Fatalf("no /sys/block/%s/stat in the end snapshot", disk)
		}
		// Every request the kernel counted is accounted for: recorded, or
		// counted by the recorder as completed without a seen issue (issued
		// before it attached) or as issued without a delivered completion
		// (the kernel ran the tracepoint without the programs).
		unmatched, orphaned, _ := trace.IOUndelivered(start, r.End)
		t.Logf("completions the recorder saw in the window: %d; in flight at stop: %d; unmatched %d; orphaned %d",
			end.IOCompletions-start.IOCompletions, r.End.IOInFlight, unmatched, orphaned)
		// Where a snapshot's reads of the device did not hold still, the
		// kernel's count is known to the range they leave.
		lo, hi := trace.BlockCompletedIn(startDisk, endDisk)
		if got := ioDone + unmatched + orphaned; got < lo || got > hi {
			t.Errorf("%s: traced %d completed requests (+%d issued before the recording, +%d whose issue or completion the kernel did not deliver), /sys/block/%s/stat counted %d (%d–%d: the snapshots' reads moved by %d and %d)",
				disk, ioDone, unmatched, orphaned, disk, after-before, lo, hi, startDisk.Unsettled, endDisk.Unsettled)
		}
		if ioDone+orphaned < fioIOs {
			t.Errorf("%s: traced %d completed requests (+%d undelivered), fio alone did %d", disk, ioDone, orphaned, fioIOs)
		}
		// The kernel's own count of the tracepoints (perf counting
		// events) against the programs' runs: every completion it raised
		// reached the programs, or the kernel rule that kept it away is
		// known and shown.
		if start.IORaised == nil || end.IORaised == nil {
			t.Fatal("the snapshots do not count the block tracepoints (perf counting events beside the tp_btf programs)")
		}
		raised := end.IORaised.Completions - start.IORaised.Completions
		t.Logf("block_rq_complete raised by the kernel in the window: %d; the completion program ran %d times; not delivered %d (%.1e)%s",
			raised, end.IORaised.CompletionRuns-start.IORaised.CompletionRuns, orphaned, float64(orphaned)/float64(max(raised, 1)), reasonSuffix(r.End.UndeliveredReason))
		if orphaned > 0 && r.End.UndeliveredReason == "" {
			t.Errorf("%d of %d completions the kernel raised did not reach the programs, and no reason is known", orphaned, raised)
		}
		// Even with a reason: the sandbox kernel's rule costs 2e-5 to
		// 6e-3 of the completions (by how busy PID 1 is: the sandbox
		// agent runs every command of the session); more means
		// something else.
		if float64(orphaned) > 2e-2*float64(raised) {
			t.Errorf("%d of %d completions the kernel raised did not reach the programs (more than 2 %%)", orphaned, raised)
		}
		t.Logf("%s: traced %d completed requests, kernel %d, fio %d", disk, ioDone, after-before, fioIOs)
		if _, inStart := diskCounter(start, disk); inStart {
			b, e := startDisk.Stat, endDisk.Stat
			t.Logf("kernel deltas: read %d write %d discard %d flush %d; traced by op: %v", e[0]-b[0], e[4]-b[4], e[11]-b[11], e[15]-b[15], ioByOp)
		}
	})

	// The sleep length the recorder read for each entry against the clock
	// event device's next event, which the kernel itself programmed (7.3's
	// hrtimer layout once made every sleep length a kernel pointer's
	// value, which only the menu model's disagreement showed).
	t.Run("next-timer", func(t *testing.T) {
		if !r.Meta.Inputs.NextTimer {
			t.Skip("this kernel's BTF lists no hrtimer_bases or tick_cpu_sched in its per-CPU section, or it lacks the timer:hrtimer_expire_entry tracepoint: the recorder reads no next timer")
		}
		if next.Known == 0 {
			t.Fatal("the recording says it reads the next timer, yet no idle period in the window has both it and the next event")
		}
		t.Logf("%d idle periods with a sleep length and a next event: %d with the sleep length over %d µs before the event (worst %d ns)",
			next.Known, next.BeforeEvent, analysis.SleepLengthSlackNs/1000, next.WorstNs)
		if next.Misread() {
			t.Error(next.Note())
		}
	})

	t.Run("wake-causes", func(t *testing.T) {
		if periods == 0 {
			t.Fatal("no idle periods inside the snapshot window")
		}
		frac, heldFrac := float64(known)/float64(periods), float64(heldKnown)/float64(max(held, 1))
		t.Logf("%d idle periods, %.2f%% with a known wake cause; %d held to 95%% (%s), %.2f%%; %d remote wake-ups, %d with a measured wake latency",
			periods, 100*frac, held, heldRule(guest), 100*heldFrac, remote, remoteMeasured)
		switch {
		case held == 0:
			t.Errorf("no idle period held to 95%% known wake causes (%s)", heldRule(guest))
		case heldFrac < 0.95:
			t.Errorf("only %.2f%% of the %d idle periods held to it (%s) have a known wake cause (want ≥ 95%%)", 100*heldFrac, held, heldRule(guest))
		}
		if frac < 0.85 {
			t.Errorf("only %.2f%% of all idle periods have a known wake cause (want ≥ 85%%)", 100*frac)
		}
		if remote == 0 {
			t.Fatal("perf bench sched pipe ran, yet no remote wake-up was recorded")
		}
	})

	t.Run("wake-latency", func(t *testing.T) {
		if remote == 0 {
			t.Fatal("no remote wake-up was recorded")
		}
		// A call-function IPI that is not a task wake-up has no traced
		// request without the ipi tracepoints (Linux 6.6+); the task
		// wake-ups the workload makes still keep the share above the bar.
		ipiSends := true
		for _, p := range []string{"ipi:ipi_send_cpu", "ipi:ipi_send_cpumask"} {
			if m := r.Meta.Probes[p]; m == "" || strings.HasPrefix(m, "missing") {
				t.Logf("this kernel lacks %s (Linux 6.6+): other IPIs have no traced request", p)
				ipiSends = false
			}
		}
		t.Logf("%d of %d remote wake-ups have a measured wake latency; %d were requested before the idle entry", remoteMeasured, remote, remoteEarly)
		if ipiSends {
			// With the IPI sends traced, every remote wake-up is accounted
			// for: asked while idle (measured), or an IPI sent just before
			// the entry that arrived after it (not a latency of the
			// state). On kernels with kernel.init_private=1 the IPIs PID
			// 1's threads send are not delivered to the programs: the
			// kernel counts them (initIPISends), and they may leave as
			// many wake-ups without a request (a burst of 13 in 1.3 ms
			// here, the sandbox's agent waking its own threads).
			// Five of slack for a small sample (a loaded machine idles
			// little: 28 remote wake-ups in a run beside a kernel build).
			unexplained := remote - remoteMeasured - remoteEarly
			t.Logf("%d remote wake-ups without a traced request; PID 1's threads may have woken %d idle CPUs the programs could not see (kernel.init_private)", unexplained, initIPIsDuring)
			if float64(unexplained) > max(0.02*float64(remote), 5)+float64(initIPIsDuring) {
				t.Errorf("%d of %d remote wake-ups have no traced request (want ≤ 2%%, or 5, beside the %d wake-ups PID 1's threads may have sent)", unexplained, remote, initIPIsDuring)
			}
			// Requests before the entry are the exception: most wake-ups
			// are asked while idle and measured (84-100 % here, the low
			// end with the machine loaded by a kernel build and a VM).
			if f := float64(remoteMeasured) / float64(remote); f < 0.6 {
				t.Errorf("only %.1f%% of remote wake-ups have a measured wake latency (want ≥ 60%%)", 100*f)
			}
		} else if f := float64(remoteMeasured) / float64(remote); f < 0.9 {
			t.Errorf("only %.1f%% of remote wake-ups have a measured wake latency (want ≥ 90%%)", 100*f)
		}
	})
}

func progStatsOf(t *testing.T, path string) []trace.ProgStat {
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.End == nil {
		return nil
	}
	return r.End.ProgStats
}

func reasonSuffix(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}

// loopFacts gathers what the kernel's own tick states say about the
// recorder's idle-loop facts (IdleLoopEntry, TickStoppable).
type loopFacts struct {
	periods, loopKnown, stoppableKnown uint64
	// stoppedBeforeNewLoop: the tick was already stopped at the governor's
	// decision (so the loop went on) but the period claims a new loop.
	stoppedBeforeNewLoop uint64
	// Halted periods whose tick state after the decision is held to one of
	// two rules of the kernel's for when an entry asks to stop the tick
	// (no cpuidle driver: default_idle_call; haltpoll when it halts):
	//   - everyAsks: every entry asks (kernel/sched/idle.c before the
	//     change below: cpuidle_idle_call calls tick_nohz_idle_stop_tick
	//     unconditionally when cpuidle is not available);
	//   - gotTick: an entry asks only when the previous period of the same
	//     idle loop got the tick, or the tick is already stopped (the change
	//     that keeps the tick on a loaded guest: do_idle passes
	//     tick_nohz_idle_got_tick() to the next entry: Rafael Wysocki's
	//     rework of Thomas Gleixner's "sched/idle: Make default_idle_call()
	//     NOHZ aware", linux-pm, March 2026; it also sends one-state
	//     drivers this way. Seen on this project's 6.18.44 hosts without a
	//     cpuidle driver, so it reached 6.18 stable; the mainline release
	//     it first shipped in is not checked here).
	// Each rule is judged on the periods it can be judged on (gotTick
	// needs the previous period's tick), and counts those whose tick state
	// differs from what the rule and TickStoppable say.
	everyAsks, gotTick ruleFacts
	prevGotTick        map[int]trace.Tristate
}

func (f *loopFacts) add(p *trace.IdlePeriod, states []model.State) {
	f.periods++
	if f.prevGotTick == nil {
		f.prevGotTick = map[int]trace.Tristate{}
	}
	prevGotTick, seen := f.prevGotTick[int(p.CPU)]
	f.prevGotTick[int(p.CPU)] = p.GotTick
	if p.IdleLoopEntry != trace.Unknown {
		f.loopKnown++
	}
	if p.TickStoppedBefore == trace.Yes && p.IdleLoopEntry == trace.Yes {
		f.stoppedBeforeNewLoop++
	}
	if p.TickStoppable == trace.Unknown || p.TickStopped == trace.Unknown {
		return
	}
	f.stoppableKnown++
	halted := len(states) == 0 || int(p.State) < len(states) && !states[p.State].Polling
	if !halted {
		return
	}
	f.everyAsks.add(p.TickStopped == p.TickStoppable)
	if !seen || p.IdleLoopEntry == trace.Unknown || p.TickStoppedBefore == trace.Unknown ||
		(p.IdleLoopEntry == trace.No && prevGotTick == trace.Unknown) {
		return
	}
	asked := p.TickStoppedBefore == trace.Yes || p.IdleLoopEntry == trace.No && prevGotTick == trace.Yes
	want := p.TickStoppable
	if !asked {
		want = trace.No // tick_nohz_idle_retain_tick
	}
	f.gotTick.add(p.TickStopped == want)
}

// ruleFacts counts the periods one tick-stop rule was judged on and those it
// got wrong.
type ruleFacts struct{ judged, mismatch uint64 }

func (r *ruleFacts) add(agrees bool) {
	r.judged++
	if !agrees {
		r.mismatch++
	}
}

// holds: the rule was judged and is wrong on at most 0.1 % of the periods.
func (r ruleFacts) holds() bool { return r.judged > 0 && r.mismatch*1000 <= r.judged }

func (f *loopFacts) check(t *testing.T, meta *trace.Metadata) {
	t.Logf("%d periods: idle-loop entry known on %d, tick stoppable known on %d; halted periods whose tick state is otherwise than the rule says: %d of %d if every entry asks to stop the tick, %d of %d if only entries after a tick do",
		f.periods, f.loopKnown, f.stoppableKnown, f.everyAsks.mismatch, f.everyAsks.judged, f.gotTick.mismatch, f.gotTick.judged)
	// The first period of each CPU has no previous entry to compare with.
	if f.periods == 0 || f.loopKnown+uint64(meta.NumCPUs) < f.periods {
		t.Errorf("idle-loop entry known on %d of %d periods", f.loopKnown, f.periods)
	}
	if f.stoppedBeforeNewLoop != 0 {
		t.Errorf("%d periods found the tick stopped at the governor's decision yet claim to open an idle loop (leaving the loop restarts the tick)", f.stoppedBeforeNewLoop)
	}
	gov := meta.CPUIdleGovernor
	if !(meta.CPUIdleDriver == "" || meta.NoCPUIdleDriver() || gov == "haltpoll") {
		t.Logf("governor %s: asks to stop the tick only when it wants to, so TickStoppable cannot be held to the tick's state here", gov)
		return
	}
	// Without a driver, or under haltpoll halting, the kernel asks to stop
	// the tick by one of the two rules: the tick stopped exactly where that
	// rule and the kernel's ability to stop it (TickStoppable) say.
	if f.everyAsks.judged == 0 {
		t.Fatalf("no halted period with the tick's state and TickStoppable both known")
	}
	switch {
	case f.everyAsks.holds():
		t.Logf("this kernel asks to stop the tick on every entry (%d of %d entries otherwise)", f.everyAsks.mismatch, f.everyAsks.judged)
	case f.gotTick.holds():
		t.Logf("this kernel asks to stop the tick only after the idle loop got a tick (%d of %d entries otherwise)", f.gotTick.mismatch, f.gotTick.judged)
	default:
		t.Errorf("neither of the kernel's rules holds: %d of %d entries stopped the tick otherwise than TickStoppable says if every entry asks to stop it, %d of %d if only entries after a tick ask",
			f.everyAsks.mismatch, f.everyAsks.judged, f.gotTick.mismatch, f.gotTick.judged)
	}
}

// checkRecorderCost holds stats' account of the recorder's own cost (the
// recording ran with BPFStats) to what the recording did: the cpu_idle
// program runs at every cpu_idle event, an entry and an exit a period, on
// every CPU from attach to detach, so its runs are twice the periods
// written, but for a period open at either end and those whose CPU the
// recorder does not keep (none here). The statistics are on before the
// programs attach: each run is counted.
func checkRecorderCost(t *testing.T, path string) {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	c := st.RecorderCost
	if c == nil {
		t.Fatal("stats gives no recorder cost for a recording made with BPF statistics")
	}
	// The program the recorder attached to power:cpu_idle, by its method.
	want := map[string]string{record.AttachTPBTF: "btf_cpu_idle", record.AttachTracepoint: "tp_cpu_idle"}[r.Meta.Probes["power:cpu_idle"]]
	var idle *analysis.ProgramCost
	for i := range c.Programs {
		if c.Programs[i].Program == want {
			idle = &c.Programs[i]
		}
	}
	if idle == nil || c.IdleProgram != want || c.IdleEventMeanNs != idle.MeanNs {
		t.Fatalf("the recorder's cost names %q (mean %.0f ns) the cpu_idle program, want %q (attached as %q), among %+v",
			c.IdleProgram, c.IdleEventMeanNs, want, r.Meta.Probes["power:cpu_idle"], c.Programs)
	}
	periods := r.End.IdlePeriods
	slack := uint64(4 * len(r.Meta.RecordedCPUs))
	t.Logf("recorder's cost: %d programs, %.3f ms, %.4f %% of the window's CPU time; cpu_idle %d runs for %d periods written, %.0f ns a run",
		len(c.Programs), float64(c.RunTimeNs)/1e6, 100*c.CPUShare, idle.Runs, periods, idle.MeanNs)
	if idle.Runs+slack < 2*periods || idle.Runs > 2*periods+slack {
		t.Errorf("the cpu_idle program ran %d times for %d periods: want twice as many, within %d", idle.Runs, periods, slack)
	}
	if c.CPUShare <= 0 || c.CPUShare >= 0.5 {
		t.Errorf("the recorder's CPU share %.4f is not a share", c.CPUShare)
	}
}

// heldRule says which periods the wake-cause check holds to 95 %.
func heldRule(guest bool) string {
	if !guest {
		return "all: not a guest"
	}
	return fmt.Sprintf("a guest: polling stays and halted ones of %s or more", time.Duration(knownCauseMinNs))
}

// pollingState says whether state is a polling one in the CPU's table.
func pollingState(table []model.State, state uint32) bool {
	return int(state) < len(table) && table[state].Polling
}

// softirqPendingStops starts counting the tick stops the kernel refuses
// for pending softirqs, which it logs ("NOHZ tick-stop error"; report_idle_
// softirq() in kernel/time/tick-sched.c since 5.18), and returns how many
// it logged since, known false where that does not bound the refusals:
// the kernel logs ten a boot (6.1 and 6.12 then stop refusing; some trees
// go on refusing without a word), so once the boot's ten are spent, or
// where /dev/kmsg cannot be read, the refusals are not known.
func softirqPendingStops(t *testing.T) func() (n uint64, known bool) {
	t.Helper()
	// Raw reads: an os.File would wait in the poller where a read finds
	// nothing new, instead of returning EAGAIN.
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Logf("/dev/kmsg, for the tick stops the kernel refuses: %v", err)
		return func() (uint64, bool) { return 0, false }
	}
	t.Cleanup(func() { unix.Close(fd) })
	count := func() (n uint64) {
		buf := make([]byte, 8192)
		for {
			k, err := unix.Read(fd, buf) // one record a read
			switch {
			case err == unix.EPIPE || err == unix.EINTR: // overwritten before read: go on
				continue
			case err != nil || k <= 0: // EAGAIN: nothing more
				return n
			}
			if strings.Contains(string(buf[:k]), "NOHZ tick-stop error") {
				n++
			}
		}
	}
	before := count() // from the oldest record the kernel still holds
	return func() (uint64, bool) {
		n := count()
		return n, before+n < 10
	}
}

// initIPISends starts counting the IPIs that PID 1's threads send (and the
// wake-ups of polling CPUs, which need none), with perf counting events on
// the tracepoints bound to each thread (and those it starts), where
// kernel.init_private=1 keeps every BPF program from running while a
// thread of PID 1 is current (this project's sandbox kernels): those sends
// have no traced request. It returns how many idle CPUs they may have
// woken since, a send to a mask counted as one to every other CPU; 0
// where the kernel has no such rule or no ipi tracepoints (before 6.6).
func initIPISends(t *testing.T) func() uint64 {
	t.Helper()
	if b, err := os.ReadFile("/proc/sys/kernel/init_private"); err != nil || strings.TrimSpace(string(b)) != "1" {
		return func() uint64 { return 0 }
	}
	tids, err := os.ReadDir("/proc/1/task")
	if err != nil {
		t.Fatalf("PID 1's threads: %v", err)
	}
	type counter struct {
		fd            int
		start, weight uint64
	}
	var counters []counter
	t.Cleanup(func() {
		for _, c := range counters {
			unix.Close(c.fd)
		}
	})
	// A polling CPU is woken by a flag, without an IPI: that request
	// counts too.
	others := uint64(max(runtime.NumCPU()-1, 1))
	for _, tp := range []struct {
		group, name string
		weight      uint64
	}{{"ipi", "ipi_send_cpu", 1}, {"ipi", "ipi_send_cpumask", others}, {"sched", "sched_wake_idle_without_ipi", 1}} {
		id, err := record.TracepointID(tp.group, tp.name)
		if err != nil {
			continue // the ipi ones before 6.6: the check this serves does not run
		}
		for _, tid := range tids {
			n, err := strconv.Atoi(tid.Name())
			if err != nil {
				continue
			}
			attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id, Size: uint32(unix.PERF_ATTR_SIZE_VER0), Bits: unix.PerfBitInherit}
			fd, err := unix.PerfEventOpen(&attr, n, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
			if err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // the thread ended meanwhile
				}
				t.Fatalf("perf counting event on %s:%s for PID 1's thread %d: %v", tp.group, tp.name, n, err)
			}
			c := counter{fd: fd, weight: tp.weight}
			c.start, _ = record.ReadPerfCount(fd)
			counters = append(counters, c)
		}
	}
	return func() (woken uint64) {
		for _, c := range counters {
			if v, err := record.ReadPerfCount(c.fd); err == nil && v > c.start {
				woken += (v - c.start) * c.weight
			}
		}
		return woken
	}
}
