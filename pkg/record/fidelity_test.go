package record_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

const (
	governorPath     = "/sys/devices/system/cpu/cpuidle/current_governor"
	guestHaltPollNs  = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"
	fidelityHaltPoll = "200000"
)

// TestGovernorFidelity switches the kernel to each governor, records a
// wake-up-heavy workload under it, replays the same governor's model on the
// recorded state table and checks that the model picks the state the kernel
// entered (issue 3, item 6).
func TestGovernorFidelity(t *testing.T) {
	testenv.RequireRecorder(t)
	driver, _ := os.ReadFile("/sys/devices/system/cpu/cpuidle/current_driver")
	if d := strings.TrimSpace(string(driver)); d == "" || d == "none" {
		t.Skip("this kernel has no cpuidle driver (current_driver=none): no governor runs, so there are no choices to compare with; make test-kernels runs this test in VMs with acpi_idle")
	}
	orig, err := os.ReadFile(governorPath)
	if err != nil {
		t.Fatalf("%s: %v", governorPath, err)
	}
	t.Cleanup(func() { os.WriteFile(governorPath, orig, 0o644) })
	avail, _ := os.ReadFile("/sys/devices/system/cpu/cpuidle/available_governors")

	for _, tc := range []struct {
		governor string
		min      float64
	}{
		{"ladder", 0.99},
		{"menu", 0.98},
		{"haltpoll", 0.99},
	} {
		t.Run(tc.governor, func(t *testing.T) {
			if !strings.Contains(" "+string(avail)+" ", " "+tc.governor+" ") {
				why := ""
				if tc.governor == "haltpoll" {
					why = "; it registers only in a KVM guest (kvm_para_available: the KVM CPUID signature)"
				}
				t.Skipf("this kernel does not offer the %s governor (available: %s)%s", tc.governor, strings.TrimSpace(string(avail)), why)
			}
			if tc.governor == "haltpoll" {
				old, err := os.ReadFile(guestHaltPollNs)
				if err != nil {
					t.Fatalf("%s: %v", guestHaltPollNs, err)
				}
				t.Cleanup(func() { os.WriteFile(guestHaltPollNs, old, 0o644) })
				if err := os.WriteFile(guestHaltPollNs, []byte(fidelityHaltPoll), 0o644); err != nil {
					t.Fatalf("setting %s: %v", guestHaltPollNs, err)
				}
			}
			if err := os.WriteFile(governorPath, []byte(tc.governor), 0o644); err != nil {
				t.Fatalf("switching to %s: %v", tc.governor, err)
			}
			path, _, _, _ := recordWorkload(t)
			if dir := os.Getenv("IDLETRACE_FIDELITY_KEEP"); dir != "" {
				keepCopy(t, path, filepath.Join(dir, "fidelity-"+tc.governor+".trace"))
			}
			r, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Meta.CPUIdleGovernor != tc.governor {
				t.Fatalf("the trace says governor %q, want %q", r.Meta.CPUIdleGovernor, tc.governor)
			}
			if r.End == nil || r.End.Snapshot == nil || r.Meta.Start == nil {
				t.Fatal("the trace lacks its start or end snapshot")
			}
			prof, err := model.Recorded(r.Meta)
			if err != nil {
				t.Fatal(err)
			}
			var pols []model.Policy
			for _, spec := range []string{tc.governor, "recorded"} {
				pol, err := model.ParsePolicy(spec)
				if err != nil {
					t.Fatal(err)
				}
				pols = append(pols, pol)
			}
			rp, err := model.NewReplay(prof, r.Meta, pols)
			if err != nil {
				t.Fatal(err)
			}
			// Only the periods the kernel's counter deltas cover.
			window := snapshotWindows(r)
			err = r.Scan(trace.Visitor{
				Idle: func(p *trace.IdlePeriod) error {
					if w, ok := window[p.CPU]; !ok || p.EntryNs < w[0] || p.ExitNs > w[1] {
						return nil
					}
					return rp.Idle(p)
				},
				BlockIO: rp.BlockIO,
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := rp.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Agreement == nil {
				t.Fatal("no agreement on the recorded profile")
			}
			t.Logf("%s: agreement %.4f over %d idle periods", tc.governor, *res[0].Agreement, res[0].IdlePeriods)
			if *res[0].Agreement < tc.min {
				t.Errorf("%s model agrees with the kernel on %.4f of its choices, want ≥ %.2f", tc.governor, *res[0].Agreement, tc.min)
			}

			// The recorded policy, judged by the kernel's rules on the
			// kernel's own residencies, must count what the kernel counted.
			var above, below uint64
			for i, kc := range r.End.Snapshot.CPUIdle {
				sc := r.Meta.Start.CPUIdle[i]
				for j, ks := range kc.States {
					above += ks.Above - sc.States[j].Above
					below += ks.Below - sc.States[j].Below
				}
			}
			t.Logf("recorded policy above/below %d/%d, kernel %d/%d", res[1].Above, res[1].Below, above, below)
			if res[1].Above != above || res[1].Below != below {
				t.Errorf("the recorded policy counts above/below %d/%d, the kernel %d/%d", res[1].Above, res[1].Below, above, below)
			}
			// The what-if figures come from the free-running replay, whose
			// own choices shape what it meets next: on its own governor it
			// must land near the kernel's counts too.
			miss := absDiff(res[0].Above, above) + absDiff(res[0].Below, below)
			t.Logf("free-running %s above/below %d/%d, kernel %d/%d", tc.governor, res[0].Above, res[0].Below, above, below)
			if float64(miss) > 0.05*float64(res[0].IdlePeriods) {
				t.Errorf("free-running %s counts above/below %d/%d, the kernel %d/%d: off by more than 5%% of %d idle periods",
					tc.governor, res[0].Above, res[0].Below, above, below, res[0].IdlePeriods)
			}
		})
	}
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}
