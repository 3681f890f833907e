package record_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/record"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestHotplugCounters takes CPU 1 offline and back during a recording. The
// kernel registers its cpuidle device afresh, counters from zero: stats
// must say that CPU's counts are not checked, not flag them, and still hold
// every other CPU to the kernel's counters. (The machine is held: nothing
// else records, pins a thread to CPU 1 or counts on it meanwhile.)
func TestHotplugCounters(t *testing.T) {
	testenv.OwnMachine(t)
	online := "/sys/devices/system/cpu/cpu1/online"
	if _, err := os.Stat(online); err != nil {
		t.Skipf("this machine cannot take CPU 1 offline (%v)", err)
	}
	if d, _ := os.ReadFile("/sys/devices/system/cpu/cpuidle/current_driver"); strings.TrimSpace(string(d)) == "" || strings.TrimSpace(string(d)) == "none" {
		t.Skip("this kernel runs no cpuidle driver: there are no per-CPU cpuidle counters to restart")
	}
	t.Cleanup(func() { os.WriteFile(online, []byte("1"), 0o644) })
	path := filepath.Join(t.TempDir(), "hotplug.trace")
	_, err := record.Record(context.Background(), record.Options{Output: path,
		Command: []string{"sh", "-c", "sleep 0.5; echo 0 > " + online + "; sleep 0.5; echo 1 > " + online + "; sleep 0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Meta.Start == nil || r.End == nil || r.End.Snapshot == nil {
		t.Fatal("the trace lacks its start or end snapshot")
	}
	// The premise: CPU 1's cpuidle directory is another at the end.
	var inos [2]uint64
	for i, s := range []*trace.Snapshot{r.Meta.Start, r.End.Snapshot} {
		for _, c := range s.CPUIdle {
			if c.CPU == 1 {
				inos[i] = c.DeviceIno
			}
		}
	}
	if inos[0] == 0 || inos[0] == inos[1] {
		t.Fatalf("CPU 1's cpuidle directory inode at the start %d, at the end %d: want a new one after the CPU came back", inos[0], inos[1])
	}
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
		case kc.CPU == 1 && !strings.Contains(kc.Unchecked, "restarted"):
			t.Errorf("CPU 1: unchecked %q, want its restarted counters named", kc.Unchecked)
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
