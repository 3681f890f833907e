// Package host reads what the running machine says about itself: its CPU
// lists, cpuidle tables and counters, block devices' counters, kernel
// config, PM QoS and haltpoll parameters, from sysfs and procfs under a
// Root (the machine's own, Local, or a fixture tree in tests). The recorder
// puts these in a trace's metadata and snapshots.
package host

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Root is the directory a machine's sysfs and procfs are read under.
type Root string

// Local is the running machine.
const Local Root = "/"

// Path is the file at parts under the root.
func (r Root) Path(parts ...string) string {
	return filepath.Join(append([]string{string(r)}, parts...)...)
}

// ReadTrimmed reads a sysfs or procfs attribute: its text without the
// surrounding whitespace (the kernel ends every attribute with a newline).
func ReadTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func readUint(path string) (uint64, error) {
	s, err := ReadTrimmed(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 64)
}

// MonotonicNs reads CLOCK_MONOTONIC, the clock bpf_ktime_get_ns uses.
func MonotonicNs() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// PossibleCPUs parses /sys/devices/system/cpu/possible.
func (r Root) PossibleCPUs() ([]int, error) {
	s, err := ReadTrimmed(r.Path("sys/devices/system/cpu/possible"))
	if err != nil {
		return nil, err
	}
	return ParseCPUList(s)
}

// OnlineCPUs parses /sys/devices/system/cpu/online.
func (r Root) OnlineCPUs() ([]int, error) {
	s, err := ReadTrimmed(r.Path("sys/devices/system/cpu/online"))
	if err != nil {
		return nil, err
	}
	return ParseCPUList(s)
}

// FormatCPUList writes sorted CPUs in the kernel's CPU list syntax
// ("0-3,8,10-11"): what ParseCPUList reads.
func FormatCPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ParseCPUList parses the kernel's CPU list syntax ("0-3,8,10-11").
func ParseCPUList(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			// "-1": the cut leaves lo empty; name what was written.
			return nil, fmt.Errorf("CPU list %q: %q is not a CPU number or range (N or N-M, from 0)", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("CPU list %q is empty", s)
	}
	sort.Ints(out)
	return out, nil
}

func (r Root) cpuidleDir(cpu int) string {
	return r.Path("sys/devices/system/cpu", "cpu"+strconv.Itoa(cpu), "cpuidle")
}

// States reads one CPU's idle-state table; nil when the CPU has none.
func (r Root) States(cpu int) []trace.StateInfo {
	var out []trace.StateInfo
	for i := 0; ; i++ {
		dir := filepath.Join(r.cpuidleDir(cpu), "state"+strconv.Itoa(i))
		name, err := ReadTrimmed(filepath.Join(dir, "name"))
		if err != nil {
			break
		}
		desc, _ := ReadTrimmed(filepath.Join(dir, "desc"))
		lat, _ := readUint(filepath.Join(dir, "latency"))
		res, _ := readUint(filepath.Join(dir, "residency"))
		dis, _ := readUint(filepath.Join(dir, "disable"))
		def, _ := ReadTrimmed(filepath.Join(dir, "default_status"))
		out = append(out, trace.StateInfo{
			Index:             i,
			Name:              name,
			Desc:              desc,
			ExitLatencyNs:     lat * 1000,
			TargetResidencyNs: res * 1000,
			Disabled:          dis != 0,
			DefaultOff:        def == "disabled",
			// sysfs has no flags file; the core's polling state is named POLL
			// (drivers/cpuidle/poll_state.c).
			Polling: name == "POLL",
		})
	}
	return out
}

func (r Root) Counters(cpu int) trace.CPUCounters {
	c := trace.CPUCounters{CPU: cpu}
	var st unix.Stat_t
	if unix.Stat(r.cpuidleDir(cpu), &st) == nil {
		c.DeviceIno = st.Ino
	}
	for i := 0; ; i++ {
		dir := filepath.Join(r.cpuidleDir(cpu), "state"+strconv.Itoa(i))
		usage, err := readUint(filepath.Join(dir, "usage"))
		if err != nil {
			break
		}
		t, _ := readUint(filepath.Join(dir, "time"))
		above, _ := readUint(filepath.Join(dir, "above"))
		below, _ := readUint(filepath.Join(dir, "below"))
		rejected, _ := readUint(filepath.Join(dir, "rejected"))
		c.States = append(c.States, trace.StateCounters{Index: i, Usage: usage, TimeUs: t, Above: above, Below: below, Rejected: rejected})
	}
	return c
}

func (r Root) BlockCounters() []trace.BlockCounter {
	entries, _ := os.ReadDir(r.Path("sys/block"))
	var out []trace.BlockCounter
	for _, e := range entries {
		name := e.Name()
		stat, err := ReadTrimmed(r.Path("sys/block", name, "stat"))
		if err != nil {
			continue
		}
		bc := trace.BlockCounter{Name: name}
		for _, f := range strings.Fields(stat) {
			v, _ := strconv.ParseUint(f, 10, 64)
			bc.Stat = append(bc.Stat, v)
		}
		if dev, err := ReadTrimmed(r.Path("sys/block", name, "dev")); err == nil {
			ma, mi, _ := strings.Cut(dev, ":")
			a, _ := strconv.ParseUint(ma, 10, 32)
			b, _ := strconv.ParseUint(mi, 10, 32)
			bc.Major, bc.Minor = uint32(a), uint32(b)
		}
		out = append(out, bc)
	}
	return out
}

// holdLimit bounds a snapshot's hold of a CPU: a read of /proc/timer_list
// took 21 ms under TCG; a hold that long has slipped anyway.
const holdLimit = time.Second

// raiseGOMAXPROCS gives the process at least n Ps until restore is
// called, which puts back what it had: the runtime's default (which
// follows the process's CPU limits) where it had that, else its number.
func raiseGOMAXPROCS(n int) (restore func()) {
	procs := runtime.GOMAXPROCS(0)
	if procs >= n {
		return func() {}
	}
	runtime.SetDefaultGOMAXPROCS()
	// Raise first: with GOMAXPROCS in the environment the process has no
	// default to go back to, but it still needs the Ps.
	atDefault := runtime.GOMAXPROCS(n) == procs
	byDefault := atDefault && os.Getenv("GOMAXPROCS") == ""
	return func() {
		if byDefault {
			runtime.SetDefaultGOMAXPROCS()
		} else {
			runtime.GOMAXPROCS(procs)
		}
	}
}

// Snapshot reads the kernel's counters. Each CPU's cpuidle counters are
// read from a thread pinned to that CPU: while the thread runs there, the CPU
// is not idle, so its counters hold still and the instant recorded for it
// splits that CPU's idle periods exactly into before and after. With spin,
// each pinned thread first stays busy long enough for the scheduler tick to
// fire on its CPU, which lets the BPF side learn where that CPU's tick state
// lives.
func (r Root) Snapshot(cpus []int, spin time.Duration, ioCounts func(*trace.Snapshot)) *trace.Snapshot {
	s := &trace.Snapshot{
		CPUIdle:   make([]trace.CPUCounters, len(cpus)),
		CPUTimeNs: make([]uint64, len(cpus)),
	}
	// Each thread holds its CPU from its instant until the tick counters
	// are read (one file for every CPU), by the last thread to take its
	// instant: a held CPU does not idle, so its idle_sleeps are those of
	// its instant. A held thread idles its CPU only if the Go runtime
	// parks it (its M is locked to it): when it is preempted (after 10 ms
	// on a P, or for a collection's stop) or finds no P after a syscall.
	// So, for the snapshot: a P for every held thread and one for the
	// rest, no collection, every thread at a barrier before any takes its
	// instant (a CPU busy with other work for 440 ms kept the others held
	// that long, parked every 16 ms, under TCG), the 10 ms restarted after
	// it, and a hold whose yields bypass the Go scheduler (RawSyscall: the
	// P stays, and the kernel still shares the CPU with what else is
	// runnable there, whatever the scheduling class). A hold gives up
	// after holdLimit rather than wait on a stop of the world that cannot
	// come (GODEBUG=asyncpreemptoff=1). What still slips shows in the
	// trace (trace.Snapshot.TickHold).
	defer raiseGOMAXPROCS(len(cpus) + 1)()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var wg sync.WaitGroup
	remaining := int64(len(cpus))
	var arrived atomic.Int64
	var released atomic.Bool
	hold := func(pinned bool) {
		if atomic.AddInt64(&remaining, -1) == 0 {
			s.TickReadStartNs = MonotonicNs()
			s.Tick = r.TickCounters(cpus)
			s.TickReadEndNs = MonotonicNs()
			released.Store(true)
			return
		}
		// time.Now reads the vDSO's clock: no syscall (MonotonicNs makes one).
		for deadline := time.Now().Add(holdLimit); pinned && !released.Load() && time.Now().Before(deadline); {
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
	for i, cpu := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			// The thread goes back to the runtime's pool with the CPUs it
			// had, not pinned to one.
			var own, set unix.CPUSet
			if unix.SchedGetaffinity(0, &own) == nil {
				defer unix.SchedSetaffinity(0, &own)
			}
			set.Set(cpu)
			pinned := unix.SchedSetaffinity(0, &set) == nil
			if pinned && spin > 0 {
				for deadline := time.Now().Add(spin); time.Now().Before(deadline); {
				}
			}
			arrived.Add(1)
			for arrived.Load() < int64(len(cpus)) { // parked here, no harm
				unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			}
			runtime.Gosched() // the 10 ms start again
			// This thread can still sleep between the instant and the
			// counters (a blocked sysfs open, the Go runtime parking it),
			// and an idle period completed in between would be counted by
			// the kernel on the wrong side of the instant. Read, take the
			// instant, read again, and keep the pair only when no period
			// completed meanwhile (every completed period moves a usage
			// and a time).
			before := r.Counters(cpu)
			for try := 0; ; try++ {
				t := MonotonicNs()
				after := r.Counters(cpu)
				// No idle period completed between the two reads. Usage alone
				// is not enough: a state's usage and time are separate
				// files, and a period completing between reading one and the
				// other leaves the usage unchanged but the time moved.
				if slices.Equal(before.States, after.States) || try == SnapshotTries {
					s.CPUTimeNs[i], s.CPUIdle[i] = t, after
					break
				}
				before = after
			}
			if !pinned {
				s.CPUTimeNs[i] = 0 // no exact window for this CPU
			}
			hold(pinned)
		}()
	}
	wg.Wait()
	// The block counters are read on either side of the instant and of the
	// recorder's own IO counters, and kept when no request completed in
	// between, so that a completion falls on the same side of the instant
	// for the kernel's counts, the recorder's and the trace's timestamps.
	// Under steady IO (thousands of requests a second) no pair may hold
	// still: the try whose counts moved least is kept, each device's
	// Unsettled saying by how much, which bounds the kernel's count at the
	// instant.
	before := r.BlockCounters()
	best, bestMoved := *s, uint64(math.MaxUint64)
	for try := 0; ; try++ {
		t := *s // each try whole: whatever ioCounts sets stays with its instant
		t.MonotonicNs = MonotonicNs()
		if ioCounts != nil {
			ioCounts(&t)
		}
		after := r.BlockCounters()
		moved := markUnsettled(before, after)
		if moved < bestMoved {
			t.Block = after
			best, bestMoved = t, moved
		}
		if moved == 0 || try == SnapshotTries {
			break
		}
		before = after
	}
	*s = best
	return s
}

// markUnsettled sets each of after's devices' Unsettled to the completions
// counted since before, and returns how far the reads moved: their sum,
// plus one where the devices differ (one came or went: try again; a
// device absent from before has no count to compare, and is left settled).
func markUnsettled(before, after []trace.BlockCounter) uint64 {
	var moved uint64
	if len(before) != len(after) {
		moved++
	}
	for i := range after {
		a := &after[i]
		a.Unsettled = 0
		found := false
		for _, b := range before {
			if b.Name == a.Name && b.Major == a.Major && b.Minor == a.Minor {
				a.Unsettled = a.Completed() - min(a.Completed(), b.Completed())
				found = true
				break
			}
		}
		if !found {
			moved++
		}
		moved += a.Unsettled
	}
	return moved
}

// TickCounters reads each of cpus' idle_calls and idle_sleeps from
// /proc/timer_list (kernel/time/timer_list.c prints them per CPU where the
// kernel has CONFIG_TICK_ONESHOT); nil where the file cannot be read (it is
// root's only) or has neither. The file also lists every pending hrtimer,
// so it is scanned for those lines, not held.
func (r Root) TickCounters(cpus []int) []trace.TickCounters {
	f, err := os.Open(r.Path("proc/timer_list"))
	if err != nil {
		return nil
	}
	defer f.Close()
	want := map[int]bool{}
	for _, c := range cpus {
		want[c] = true
	}
	var out []trace.TickCounters
	named := map[int]bool{} // CPUs whose idle_calls the file gave
	var cur *trace.TickCounters
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "cpu:"); ok {
			cur = nil
			if c, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && want[c] {
				out = append(out, trace.TickCounters{CPU: c})
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur == nil || !strings.HasPrefix(line, ".idle_") {
			continue
		}
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch strings.TrimSpace(name) {
		case ".idle_calls":
			cur.IdleCalls, named[cur.CPU] = n, true
		case ".idle_sleeps":
			cur.IdleSleeps = n
		}
	}
	out = slices.DeleteFunc(out, func(t trace.TickCounters) bool { return !named[t.CPU] })
	if sc.Err() != nil || len(out) == 0 {
		return nil
	}
	return out
}

// SnapshotTries bounds the re-reads of counters that keep moving while
// they are read (a CPU's idle counters, the block counters).
const SnapshotTries = 20

// KernelConfig reads CONFIG_* values from /proc/config.gz or /boot/config-RELEASE.
func (r Root) KernelConfig(release string) map[string]string {
	cfg := map[string]string{}
	var sc *bufio.Scanner
	if f, err := os.Open(r.Path("proc/config.gz")); err == nil {
		defer f.Close()
		if zr, err := gzip.NewReader(f); err == nil {
			sc = bufio.NewScanner(zr)
		}
	}
	if sc == nil {
		f, err := os.Open(r.Path("boot", "config-"+release))
		if err != nil {
			return cfg
		}
		defer f.Close()
		sc = bufio.NewScanner(f)
	}
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = v
		}
	}
	return cfg
}

func utsString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// CPUIdleDriver is the cpuidle driver sysfs names, trace.CPUIdleDriverNone
// where there is none (current_driver reads "none", or is missing).
func (r Root) CPUIdleDriver() string {
	d, _ := ReadTrimmed(r.Path("sys/devices/system/cpu/cpuidle/current_driver"))
	return cmp.Or(d, trace.CPUIdleDriverNone)
}

func (r Root) cpuModel() string { return r.cpuinfoField("model name") }

// CPUFlags are the first CPU's flags in /proc/cpuinfo ("hypervisor" on a
// virtual machine).
func (r Root) CPUFlags() []string { return strings.Fields(r.cpuinfoField("flags")) }

// cpuinfoField is the first value of key in /proc/cpuinfo ("" if none).
func (r Root) cpuinfoField(key string) string {
	f, err := os.Open(r.Path("proc/cpuinfo"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// cpuDMALatencyUs reads the global CPU latency QoS target. Opening the device
// adds a request at the default value, which changes nothing while it lasts.
func (r Root) cpuDMALatencyUs() int64 {
	f, err := os.Open(r.Path("dev/cpu_dma_latency"))
	if err != nil {
		return -1
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.Read(b[:]); err != nil {
		return -1
	}
	return int64(int32(binary.LittleEndian.Uint32(b[:])))
}

func (r Root) resumeLatencyUs(cpu int) int64 {
	s, err := ReadTrimmed(r.Path("sys/devices/system/cpu", "cpu"+strconv.Itoa(cpu), "power/pm_qos_resume_latency_us"))
	if err != nil {
		return -1
	}
	if s == "n/a" {
		return 0 // the kernel's spelling of a 0 µs constraint
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v == 0 {
		return -1 // 0 reads as "no constraint"
	}
	return v
}

func (r Root) haltPollParams() *trace.HaltPollParams {
	dir := r.Path("sys/module/haltpoll/parameters")
	ns, err := readUint(filepath.Join(dir, "guest_halt_poll_ns"))
	if err != nil {
		return nil
	}
	grow, _ := readUint(filepath.Join(dir, "guest_halt_poll_grow"))
	shrink, _ := readUint(filepath.Join(dir, "guest_halt_poll_shrink"))
	start, _ := readUint(filepath.Join(dir, "guest_halt_poll_grow_start"))
	allow, _ := ReadTrimmed(filepath.Join(dir, "guest_halt_poll_allow_shrink"))
	return &trace.HaltPollParams{GuestHaltPollNs: ns, Grow: grow, Shrink: shrink, GrowStart: start, AllowShrink: allow == "Y"}
}

// Metadata gathers everything about the machine a trace must carry.
func (r Root) Metadata(recordedCPUs, possible []int) *trace.Metadata {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	release := utsString(uts.Release[:])
	m := &trace.Metadata{
		FormatVersion: 1,
		KernelRelease: release,
		KernelVersion: utsString(uts.Version[:]),
		Hostname:      utsString(uts.Nodename[:]),
		CPUModel:      r.cpuModel(),
		NumCPUs:       len(possible),
		RecordedCPUs:  recordedCPUs,
		Clock:         "CLOCK_MONOTONIC (bpf_ktime_get_ns)",
		HaltPoll:      r.haltPollParams(),
	}
	m.BootID, _ = ReadTrimmed(r.Path("proc/sys/kernel/random/boot_id"))
	cfg := r.KernelConfig(release)
	m.HZ, _ = strconv.Atoi(cfg["CONFIG_HZ"])
	switch {
	case cfg["CONFIG_NO_HZ_FULL"] == "y":
		m.NoHZ = "full"
	case cfg["CONFIG_NO_HZ_IDLE"] == "y":
		m.NoHZ = "idle"
	case cfg["CONFIG_HZ_PERIODIC"] == "y":
		m.NoHZ = "off"
	}
	m.CPUIdleDriver = r.CPUIdleDriver()
	m.CPUIdleGovernor, _ = ReadTrimmed(r.Path("sys/devices/system/cpu/cpuidle/current_governor"))
	if m.CPUIdleGovernor == "" {
		m.CPUIdleGovernor, _ = ReadTrimmed(r.Path("sys/devices/system/cpu/cpuidle/current_governor_ro"))
	}
	m.PMQoS.CPUDMALatencyUs = r.cpuDMALatencyUs()
	for _, cpu := range possible {
		if st := r.States(cpu); len(st) > 0 {
			m.States = append(m.States, trace.CPUStates{CPU: cpu, States: st})
		}
		m.PMQoS.ResumeLatencyUs = append(m.PMQoS.ResumeLatencyUs, r.resumeLatencyUs(cpu))
	}
	for _, b := range r.BlockCounters() {
		m.BlockDevices = append(m.BlockDevices, trace.BlockDevice{Name: b.Name, Major: b.Major, Minor: b.Minor})
	}
	m.WallClock = trace.WallClock{MonotonicNs: MonotonicNs(), UnixNs: time.Now().UnixNano()}
	return m
}
