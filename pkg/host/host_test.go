package host

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/pkg/trace"
)

// These tests read sysfs and procfs from the fixture tree testdata/sysroot
// and need no root.

const fixture Root = "testdata/sysroot"

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"0-3", []int{0, 1, 2, 3}},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}},
		{"0-1,3\n", []int{0, 1, 3}},    // as read from sysfs
		{" 5 ", []int{5}},              // surrounding space
		{"8,0-2,1", []int{0, 1, 2, 8}}, // out of order and repeated: sorted, once each
		{"0-1,1-2", []int{0, 1, 2}},    // overlapping ranges
		{"4-4,,2", []int{2, 4}},        // one-CPU range, empty item
		{"1023", []int{1023}},
	} {
		got, err := ParseCPUList(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		// FormatCPUList writes what ParseCPUList reads back.
		if back, err := ParseCPUList(FormatCPUList(got)); err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("ParseCPUList(FormatCPUList(%v) = %q) = %v, %v", got, FormatCPUList(got), back, err)
		}
	}
	for _, tc := range []struct {
		cpus []int
		want string
	}{{[]int{0, 1}, "0-1"}, {[]int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"}, {[]int{5}, "5"}, {nil, ""}} {
		if got := FormatCPUList(tc.cpus); got != tc.want {
			t.Errorf("FormatCPUList(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
	}
	for _, bad := range []string{"", " ", ",", "a", "-1", "1-", "-", "3-1", "0-x", "1,b", "0x1", "1.5", "1 2"} {
		if got, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", bad, got)
		} else if !strings.Contains(err.Error(), "CPU list") {
			t.Errorf("ParseCPUList(%q): error %q does not name the CPU list", bad, err)
		} else if strings.Contains(err.Error(), `""`) && strings.TrimSpace(bad) != "" {
			t.Errorf("ParseCPUList(%q): error %q names an empty item that was not written", bad, err)
		}
	}
}

func TestSysfsCPUs(t *testing.T) {
	r := fixture
	if got, err := r.PossibleCPUs(); err != nil || !reflect.DeepEqual(got, []int{0, 1, 2, 3}) {
		t.Errorf("possible: %v, %v", got, err)
	}
	if got, err := r.OnlineCPUs(); err != nil || !reflect.DeepEqual(got, []int{0, 1, 3}) {
		t.Errorf("online: %v, %v", got, err)
	}
	r = Root(t.TempDir())
	if _, err := r.OnlineCPUs(); err == nil {
		t.Error("online CPUs read from an empty root")
	}
}

func TestSysfsStates(t *testing.T) {
	r := fixture
	want := []trace.StateInfo{
		{Index: 0, Name: "POLL", Desc: "CPUIDLE CORE POLL IDLE", Polling: true},
		{Index: 1, Name: "C1", Desc: "MWAIT 0x00", ExitLatencyNs: 2_000, TargetResidencyNs: 2_000},
		{Index: 2, Name: "C6", Desc: "MWAIT 0x20", ExitLatencyNs: 170_000, TargetResidencyNs: 600_000, Disabled: true, DefaultOff: true},
	}
	if got := r.States(0); !reflect.DeepEqual(got, want) {
		t.Errorf("CPU 0 states:\n got %+v\nwant %+v", got, want)
	}
	if got := r.States(1); len(got) != 2 {
		t.Errorf("CPU 1: %d states, want 2", len(got))
	}
	if got := r.States(2); got != nil {
		t.Errorf("CPU 2 has no cpuidle directory, got states %+v", got)
	}
	wantC := trace.CPUCounters{CPU: 0, States: []trace.StateCounters{
		{Index: 0, Usage: 1200, TimeUs: 3400, Below: 17},
		{Index: 1, Usage: 5000, TimeUs: 800000, Above: 12, Below: 300, Rejected: 1},
		{Index: 2, Usage: 70, TimeUs: 90000, Above: 5},
	}}
	got := r.Counters(0)
	// The directory's inode tells one registration of the device from
	// the next (trace.CPUCounters.DeviceIno).
	var st unix.Stat_t
	if err := unix.Stat(r.Path("sys/devices/system/cpu/cpu0/cpuidle"), &st); err != nil || got.DeviceIno != st.Ino || st.Ino == 0 {
		t.Errorf("CPU 0 device inode %d, the directory's %d (%v)", got.DeviceIno, st.Ino, err)
	}
	wantC.DeviceIno = got.DeviceIno
	if !reflect.DeepEqual(got, wantC) {
		t.Errorf("CPU 0 counters:\n got %+v\nwant %+v", got, wantC)
	}
}

func TestSysfsBlockCounters(t *testing.T) {
	r := fixture
	got := r.BlockCounters()
	// sys/block/nostat has no stat file: left out.
	if len(got) != 2 || got[0].Name != "loop0" || got[1].Name != "nvme0n1" {
		t.Fatalf("block devices %+v, want loop0 and nvme0n1", got)
	}
	nvme := got[1]
	if nvme.Major != 259 || nvme.Minor != 0 || len(nvme.Stat) != 17 || nvme.Stat[0] != 41335 || nvme.Stat[4] != 21240 {
		t.Errorf("nvme0n1: %+v", nvme)
	}
	if got[0].Major != 7 || got[0].Stat[0] != 7 {
		t.Errorf("loop0: %+v", got[0])
	}
	if moved := markUnsettled(got, r.BlockCounters()); moved != 0 {
		t.Errorf("the same counters read twice moved by %d", moved)
	}
}

func TestMarkUnsettled(t *testing.T) {
	dev := func(name string, minor uint32, reads, writes uint64) trace.BlockCounter {
		return trace.BlockCounter{Name: name, Major: 254, Minor: minor, Stat: []uint64{reads, 0, 0, 0, writes}}
	}
	for _, tc := range []struct {
		name          string
		before, after []trace.BlockCounter
		wantMoved     uint64
		wantUnsettled []uint64
	}{
		{"held still", []trace.BlockCounter{dev("vda", 0, 10, 5)}, []trace.BlockCounter{dev("vda", 0, 10, 5)}, 0, []uint64{0}},
		{"reads and writes moved", []trace.BlockCounter{dev("vda", 0, 10, 5), dev("vdb", 16, 1, 1)}, []trace.BlockCounter{dev("vda", 0, 13, 6), dev("vdb", 16, 1, 1)}, 4, []uint64{4, 0}},
		// A device that came between the reads: no count to compare (left
		// settled), but the pair is not one to keep over a still one.
		{"a device came", []trace.BlockCounter{dev("vda", 0, 10, 5)}, []trace.BlockCounter{dev("vda", 0, 10, 5), dev("sda", 32, 7, 0)}, 2, []uint64{0, 0}},
		{"a device went", []trace.BlockCounter{dev("vda", 0, 10, 5), dev("sda", 32, 7, 0)}, []trace.BlockCounter{dev("vda", 0, 10, 5)}, 1, []uint64{0}},
		// A counter that went back (a device replaced under its name) moves nothing.
		{"a counter went back", []trace.BlockCounter{dev("vda", 0, 10, 5)}, []trace.BlockCounter{dev("vda", 0, 2, 0)}, 0, []uint64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moved := markUnsettled(tc.before, tc.after)
			var got []uint64
			for _, a := range tc.after {
				got = append(got, a.Unsettled)
			}
			if moved != tc.wantMoved || !reflect.DeepEqual(got, tc.wantUnsettled) {
				t.Errorf("moved %d, unsettled %v; want %d, %v", moved, got, tc.wantMoved, tc.wantUnsettled)
			}
		})
	}
}

// A snapshot under steady IO: the device's count moves between every pair
// of reads (the callback between them completes requests), so none holds
// still and the pair that moved least is kept, with how far it moved.
func TestSnapshotBlockUnsettled(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "sys/block/vda")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dev, "dev"), []byte("254:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reads := uint64(1000)
	writeStat := func() {
		// Reads completed is field 1; 17 fields as since 5.5.
		stat := fmt.Sprintf("%d 0 0 0 0 0 0 0 3 0 0 0 0 0 0 0 0\n", reads)
		if err := os.WriteFile(filepath.Join(dev, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeStat()
	// Completions during each try; the fourth moves least.
	during := []uint64{9, 7, 8, 2, 5, 6}
	var calls int
	var instants []uint64
	s := Root(root).Snapshot(nil, 0, func(snap *trace.Snapshot) {
		snap.IOCompletions = uint64(calls) // which try's recorder counts are kept
		instants = append(instants, snap.MonotonicNs)
		reads += during[calls%len(during)]
		calls++
		writeStat()
	})
	if calls != SnapshotTries+1 {
		t.Fatalf("%d tries, want %d: the counts never held still", calls, SnapshotTries+1)
	}
	if len(s.Block) != 1 {
		t.Fatalf("block %+v", s.Block)
	}
	b := s.Block[0]
	if b.Unsettled != 2 || s.IOCompletions != 3 || s.MonotonicNs != instants[3] {
		t.Errorf("kept a try whose count moved %d (recorder's counts from try %d, instant %d), want 2 (try 3, instant %d)", b.Unsettled, s.IOCompletions, s.MonotonicNs, instants[3])
	}
	// The kept read is the one after try 3's instant: 1000 + 9+7+8+2.
	if got := b.Completed(); got != 1026 {
		t.Errorf("completed %d at the kept read, want 1026", got)
	}
}

// Snapshot reads every CPU's counters from a thread of its own and the
// block counters around the instant; on a fixture nothing moves, so the
// first read stands.
func TestTakeSnapshotFixture(t *testing.T) {
	r := fixture
	var ioCalls int
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // fewer Ps than the CPUs to hold
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	s := r.Snapshot([]int{0, 1}, 0, func(*trace.Snapshot) { ioCalls++ })
	if ioCalls != 1 {
		t.Errorf("ioCounts called %d times, want 1 (nothing moved)", ioCalls)
	}
	if len(s.CPUIdle) != 2 || !reflect.DeepEqual(s.CPUIdle[0], r.Counters(0)) || !reflect.DeepEqual(s.CPUIdle[1], r.Counters(1)) {
		t.Errorf("cpuidle counters %+v", s.CPUIdle)
	}
	if len(s.Block) != 2 || s.MonotonicNs == 0 {
		t.Errorf("block %+v, instant %d", s.Block, s.MonotonicNs)
	}
	// The tick counters are read once every CPU has its instant, and the
	// read's bounds make each CPU's hold.
	if len(s.Tick) != 2 || s.TickReadStartNs == 0 || s.TickReadEndNs < s.TickReadStartNs {
		t.Errorf("tick counters %+v read in [%d, %d]", s.Tick, s.TickReadStartNs, s.TickReadEndNs)
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	for i, cpu := range []int{0, 1} {
		from, to, ok := s.TickHold(cpu, []int{0, 1})
		if !allowed.IsSet(cpu) { // its thread could not be pinned there: no hold
			if ok {
				t.Errorf("cpu%d, where this process may not run, held over [%d, %d]", cpu, from, to)
			}
			continue
		}
		if !ok || from != s.CPUTimeNs[i] || from > s.TickReadStartNs || to != s.TickReadEndNs {
			t.Errorf("cpu%d held over [%d, %d] (%v), instant %d, read [%d, %d]", cpu, from, to, ok, s.CPUTimeNs[i], s.TickReadStartNs, s.TickReadEndNs)
		}
	}
	// What the snapshot changed for its hold is put back.
	if procs := runtime.GOMAXPROCS(0); procs != 1 {
		t.Errorf("GOMAXPROCS %d after the snapshot, 1 before", procs)
	}
	if gc := debug.SetGCPercent(100); gc != 100 {
		t.Errorf("GOGC %d after the snapshot, 100 before", gc)
	}
}

func TestMachineMetadataFixture(t *testing.T) {
	r := fixture
	m := r.Metadata([]int{0, 1}, []int{0, 1, 2, 3})
	if m.CPUModel != "Intel(R) Xeon(R) Platinum 8480+" {
		t.Errorf("CPU model %q", m.CPUModel)
	}
	if m.BootID != "3c0e2b3a-1f2d-4c5e-9a8b-7d6e5f4a3b2c" {
		t.Errorf("boot id %q", m.BootID)
	}
	if m.CPUIdleDriver != "intel_idle" || m.CPUIdleGovernor != "menu" {
		t.Errorf("driver %q, governor %q", m.CPUIdleDriver, m.CPUIdleGovernor)
	}
	if len(m.States) != 2 || m.States[0].CPU != 0 || len(m.States[0].States) != 3 || m.States[1].CPU != 1 {
		t.Errorf("states %+v", m.States)
	}
	// cpu0 "0" is no constraint, cpu1 "n/a" the kernel's 0 µs, cpu2 100 µs,
	// cpu3 has no file.
	if want := []int64{-1, 0, 100, -1}; !reflect.DeepEqual(m.PMQoS.ResumeLatencyUs, want) {
		t.Errorf("resume latency %v, want %v", m.PMQoS.ResumeLatencyUs, want)
	}
	if m.PMQoS.CPUDMALatencyUs != 2_000_000_000 {
		t.Errorf("cpu_dma_latency %d, want the default 2000000000", m.PMQoS.CPUDMALatencyUs)
	}
	if want := (&trace.HaltPollParams{GuestHaltPollNs: 200_000, Grow: 2, Shrink: 2, GrowStart: 50_000, AllowShrink: true}); !reflect.DeepEqual(m.HaltPoll, want) {
		t.Errorf("haltpoll %+v, want %+v", m.HaltPoll, want)
	}
	if len(m.BlockDevices) != 2 || m.BlockDevices[1] != (trace.BlockDevice{Name: "nvme0n1", Major: 259, Minor: 0}) {
		t.Errorf("block devices %+v", m.BlockDevices)
	}
	if m.NumCPUs != 4 || !reflect.DeepEqual(m.RecordedCPUs, []int{0, 1}) {
		t.Errorf("CPUs %d, recorded %v", m.NumCPUs, m.RecordedCPUs)
	}
}

// Without a cpuidle driver, haltpoll or the QoS device the metadata says
// so rather than inventing values.
func TestMachineMetadataEmptyRoot(t *testing.T) {
	r := Root(t.TempDir())
	m := r.Metadata([]int{0}, []int{0})
	if m.CPUIdleDriver != "none" || m.HaltPoll != nil || m.PMQoS.CPUDMALatencyUs != -1 || len(m.States) != 0 {
		t.Errorf("driver %q, haltpoll %+v, QoS %+v, states %+v", m.CPUIdleDriver, m.HaltPoll, m.PMQoS, m.States)
	}
}

func TestKernelConfig(t *testing.T) {
	r := fixture
	cfg := r.KernelConfig("6.1.0-fixture") // boot/config-RELEASE
	if cfg["CONFIG_HZ"] != "250" || cfg["CONFIG_NO_HZ_IDLE"] != "y" || cfg["CONFIG_CPU_IDLE"] != "y" {
		t.Errorf("config %v", cfg)
	}
	if _, ok := cfg["CONFIG_NO_HZ_FULL"]; ok {
		t.Error("a '# CONFIG_X is not set' line read as set")
	}
	if got := r.KernelConfig("no-such-release"); len(got) != 0 {
		t.Errorf("config of a release without a file: %v", got)
	}

	// /proc/config.gz, where it exists, wins over /boot.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "proc", "config.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write([]byte("CONFIG_HZ=1000\nCONFIG_NO_HZ_FULL=y\n")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r = Root(dir)
	if cfg := r.KernelConfig("6.1.0-fixture"); cfg["CONFIG_HZ"] != "1000" || cfg["CONFIG_NO_HZ_FULL"] != "y" {
		t.Errorf("config.gz: %v", cfg)
	}
}

func TestUTSString(t *testing.T) {
	if got := utsString([]byte("6.1.0\x00\x00junk")); got != "6.1.0" {
		t.Errorf("%q", got)
	}
	if got := utsString([]byte("full")); got != "full" {
		t.Errorf("%q", got)
	}
}

// CPUFlags are the first CPU's; CPUIdleDriver names sysfs's driver, or
// none where current_driver is missing.
func TestCPUFlagsAndDriver(t *testing.T) {
	if got := fixture.CPUFlags(); !reflect.DeepEqual(got, []string{"fpu", "vme"}) {
		t.Errorf("flags %q, want fpu vme", got)
	}
	if got := Root(t.TempDir()).CPUFlags(); len(got) != 0 {
		t.Errorf("flags without /proc/cpuinfo: %q", got)
	}
	if got := fixture.CPUIdleDriver(); got != "intel_idle" {
		t.Errorf("driver %q, want intel_idle", got)
	}
	if got := Root(t.TempDir()).CPUIdleDriver(); got != trace.CPUIdleDriverNone {
		t.Errorf("driver without current_driver %q, want %q", got, trace.CPUIdleDriverNone)
	}
}

// TickCounters finds each CPU's idle_calls and idle_sleeps among the
// hrtimer lists of a real /proc/timer_list (this project's 6.18 guest's).
func TestTickCounters(t *testing.T) {
	noCounters := Root(t.TempDir())
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(noCounters.Path("proc"), 0o755))
	must(os.WriteFile(noCounters.Path("proc", "timer_list"), []byte("Timer List Version: v0.10\ncpu: 0\n clock 0:\n  .tick_stopped   : 0\n"), 0o644))
	for _, tc := range []struct {
		name string
		root Root
		cpus []int
		want []trace.TickCounters
	}{
		{"both CPUs", fixture, []int{0, 1}, []trace.TickCounters{
			{CPU: 0, IdleCalls: 24391225, IdleSleeps: 21329119},
			{CPU: 1, IdleCalls: 32475760, IdleSleeps: 28239045}}},
		{"the recorded CPU only", fixture, []int{1}, []trace.TickCounters{{CPU: 1, IdleCalls: 32475760, IdleSleeps: 28239045}}},
		{"a CPU the file does not list", fixture, []int{7}, nil},
		{"no file (not root)", Root(t.TempDir()), []int{0}, nil},
		{"no tick_sched counters", noCounters, []int{0}, nil},
	} {
		if got := tc.root.TickCounters(tc.cpus); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// raiseGOMAXPROCS puts back what the process had: its own number, or the
// runtime's default (SetDefaultGOMAXPROCS ignores the environment's
// GOMAXPROCS, so the cases hold with it set too: the number is then put
// back as a number).
func TestRaiseGOMAXPROCS(t *testing.T) {
	defer runtime.SetDefaultGOMAXPROCS()
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name       string
		set, raise int // set 0: the default
		want       int
	}{
		{"the default", 0, def + 2, def},
		{"a number of its own", 1, def + 2, 1},
		{"already enough", 0, 1, def},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", "") // the process's own setting, below
			if tc.set > 0 {
				runtime.GOMAXPROCS(tc.set)
			} else {
				runtime.SetDefaultGOMAXPROCS()
			}
			restore := raiseGOMAXPROCS(tc.raise)
			if got := runtime.GOMAXPROCS(0); got < tc.raise {
				t.Errorf("raised to %d, want at least %d", got, tc.raise)
			}
			restore()
			if got := runtime.GOMAXPROCS(0); got != tc.want {
				t.Errorf("restored to %d, want %d", got, tc.want)
			}
		})
	} // GOMAXPROCS in the environment: the Ps are raised all the same, and
	// the number is put back as a number.
	t.Run("set in the environment", func(t *testing.T) {
		t.Setenv("GOMAXPROCS", "1")
		runtime.GOMAXPROCS(1)
		restore := raiseGOMAXPROCS(def + 2)
		if got := runtime.GOMAXPROCS(0); got < def+2 {
			t.Errorf("raised to %d, want at least %d", got, def+2)
		}
		restore()
		if got := runtime.GOMAXPROCS(0); got != 1 {
			t.Errorf("restored to %d, want 1", got)
		}
	})
}
