package record_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/record"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestHotplugCounters takes CPU 1 offline and back during a recording.
// Where the driver registers its cpuidle device afresh (cpuidle-haltpoll
// unregisters it on offline), counters from zero and a new sysfs directory:
// stats must say that CPU's counts are not checked and not flag them. Where
// it keeps the device (intel_idle, acpi_idle), the counters carry on and the
// CPU is checked like any other. Every other CPU is held to the kernel's
// counters either way. make test-kernels runs it in its VMs as well, where
// the kernel referees the other two paths: acpi_idle, which keeps the
// device, and (IDLETRACE_MATRIX_CPUIDLE=none) no cpuidle driver. (The machine is held: nothing else records, pins a
// thread to CPU 1 or counts on it meanwhile.)
func TestHotplugCounters(t *testing.T) {
	online := cpu1Online(t)
	d, _ := os.ReadFile("/sys/devices/system/cpu/cpuidle/current_driver")
	noDriver := strings.TrimSpace(string(d)) == "" || strings.TrimSpace(string(d)) == "none"
	path := filepath.Join(t.TempDir(), "hotplug.trace")
	sum, err := record.Record(context.Background(), record.Options{Output: path,
		Command: []string{"sh", "-c", "set -e; sleep 0.5; echo 0 > " + online + "; sleep 0.5; echo 1 > " + online + "; sleep 0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.CommandExitCode == nil || *sum.CommandExitCode != 0 {
		t.Fatalf("taking CPU 1 offline and back failed (the command's exit: %v)", sum.CommandExitCode)
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Meta.Start == nil || r.End == nil || r.End.Snapshot == nil {
		t.Fatal("the trace lacks its start or end snapshot")
	}
	if noDriver {
		// No cpuidle driver, no per-CPU counters to restart: stats says
		// there are none to check and flags nothing, and CPU 1's idle
		// periods after it came back are recorded.
		st, err := analysis.StatsFromReader(r)
		if err != nil {
			t.Fatal(err)
		}
		if st.Kernel.Available || len(st.Mismatches) > 0 {
			t.Errorf("no cpuidle driver: kernel counters available %v, mismatches %+v", st.Kernel.Available, st.Mismatches)
		}
		if !slices.ContainsFunc(st.CPUs, func(c analysis.CPUStats) bool { return c.CPU == 1 && len(c.States) > 0 }) {
			t.Errorf("no idle period of CPU 1 in the recording: %+v", st.CPUs)
		}
		t.Logf("no cpuidle driver: no counters claimed, nothing flagged, CPU 1's idle periods recorded")
		return
	}
	// Which kind of driver: CPU 1's cpuidle directory is another at the
	// end, or the same.
	var inos [2]uint64
	for i, s := range []*trace.Snapshot{r.Meta.Start, r.End.Snapshot} {
		for _, c := range s.CPUIdle {
			if c.CPU == 1 {
				inos[i] = c.DeviceIno
			}
		}
	}
	if inos[0] == 0 || inos[1] == 0 {
		t.Fatalf("CPU 1's cpuidle directory inode at the start %d, at the end %d: want both read", inos[0], inos[1])
	}
	restarted := inos[0] != inos[1]
	t.Logf("driver %s: CPU 1's cpuidle device registered afresh: %v", r.Meta.CPUIdleDriver, restarted)
	st, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Mismatches) > 0 {
		t.Errorf("mismatches: %+v", st.Mismatches)
	}
	checked := false
	for _, kc := range st.Kernel.CPUs {
		switch {
		case kc.CPU == 1 && restarted && !strings.Contains(kc.Unchecked, "restarted"):
			t.Errorf("CPU 1: unchecked %q, want its restarted counters named", kc.Unchecked)
		case kc.CPU == 1 && !restarted && kc.Unchecked != "":
			t.Errorf("CPU 1: unchecked %q, but its device (and counters) carried on", kc.Unchecked)
		case kc.CPU == 0 && kc.Unchecked != "":
			t.Errorf("CPU 0: unchecked %q, want it checked", kc.Unchecked)
		case kc.CPU == 0:
			for _, s := range kc.States {
				checked = checked || s.Usage > 0
			}
		}
	}
	if !checked {
		t.Errorf("CPU 0's kernel counters show no idle period: %+v", st.Kernel.CPUs)
	}
}

// TestHotplugCameOnline records every CPU while CPU 1 is offline at the
// start and brought online part way. The recording keeps CPU 1's idle
// periods from then on, so the trace must count it as recorded, with the
// state table the kernel shows for it (none without a cpuidle driver);
// stats must begin its window with its first idle period, leave its
// counters unchecked (there were none at the start) and flag nothing.
func TestHotplugCameOnline(t *testing.T) {
	online := cpu1Online(t)
	if err := os.WriteFile(online, []byte("0"), 0o644); err != nil {
		t.Fatalf("taking CPU 1 offline: %v", err)
	}
	path := filepath.Join(t.TempDir(), "came-online.trace")
	sum, err := record.Record(context.Background(), record.Options{Output: path,
		Command: []string{"sh", "-c", "set -e; sleep 0.5; echo 1 > " + online + "; sleep 1"}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.CommandExitCode == nil || *sum.CommandExitCode != 0 {
		t.Fatalf("bringing CPU 1 online failed (the command's exit: %v)", sum.CommandExitCode)
	}
	// The table the kernel shows for CPU 1 now that it is online.
	var names []string
	for i := 0; ; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu1/cpuidle/state%d/name", i))
		if err != nil {
			break
		}
		names = append(names, strings.TrimSpace(string(b)))
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := r.Meta
	if slices.Contains(m.RecordedCPUs, 1) || !slices.Equal(m.CameOnline, []int{1}) || !m.RecordedCPUSet().Has(1) {
		t.Fatalf("recorded at the start %v, came online %v: want CPU 1 among the latter only, and recorded", m.RecordedCPUs, m.CameOnline)
	}
	var table []string
	for _, cs := range m.States {
		if cs.CPU == 1 {
			for _, s := range cs.States {
				table = append(table, s.Name)
			}
		}
	}
	if !slices.Equal(table, names) {
		t.Errorf("CPU 1's table in the trace %q, the kernel's %q", table, names)
	}
	st, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Mismatches) > 0 {
		t.Errorf("mismatches: %+v", st.Mismatches)
	}
	var cpu0, cpu1 *analysis.CPUStats
	for i := range st.CPUs {
		switch st.CPUs[i].CPU {
		case 0:
			cpu0 = &st.CPUs[i]
		case 1:
			cpu1 = &st.CPUs[i]
		}
	}
	if cpu0 == nil || cpu1 == nil || cpu1.Periods == 0 {
		t.Fatalf("CPU 0 %+v, CPU 1 %+v: want both, CPU 1 with idle periods", cpu0, cpu1)
	}
	// CPU 1 was offline for the first 0.5 s of the command at least.
	if !cpu1.CameOnline || cpu0.CameOnline || cpu1.WindowNs+400_000_000 > cpu0.WindowNs {
		t.Errorf("CPU 1 came online %v, window %d ns; CPU 0 came online %v, window %d ns: want CPU 1's at least 0.4 s shorter",
			cpu1.CameOnline, cpu1.WindowNs, cpu0.CameOnline, cpu0.WindowNs)
	}
	for _, s := range cpu1.States {
		if len(names) > 0 && s.Index < len(names) && s.Name != names[s.Index] {
			t.Errorf("CPU 1's state %d named %q in stats, %q by the kernel", s.Index, s.Name, names[s.Index])
		}
	}
	for _, kc := range st.Kernel.CPUs {
		// Without a cpuidle driver there are no counters to leave unchecked.
		if st.Kernel.Available && kc.CPU == 1 && !strings.Contains(kc.Unchecked, "offline at the start") {
			t.Errorf("CPU 1: unchecked %q, want it offline at the start", kc.Unchecked)
		}
	}
	t.Logf("driver %q: CPU 1 came online with table %q, window %.3f s against CPU 0's %.3f s", m.CPUIdleDriver, table, float64(cpu1.WindowNs)/1e9, float64(cpu0.WindowNs)/1e9)
}

// cpu1Online holds the machine for a hotplug test and returns CPU 1's
// online file, restored to online when the test ends; it skips where the
// kernel cannot take CPU 1 offline.
func cpu1Online(t *testing.T) string {
	t.Helper()
	testenv.OwnMachine(t)
	online := "/sys/devices/system/cpu/cpu1/online"
	if _, err := os.Stat(online); err != nil {
		t.Skipf("this kernel cannot take CPU 1 offline: no %s (CONFIG_HOTPLUG_CPU unset, or one CPU): %v", online, err)
	}
	t.Cleanup(func() { os.WriteFile(online, []byte("1"), 0o644) })
	return online
}
