package analysis

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestRenderStatsIORecorded: a trace recorded without block IO says so
// where a trace with IO counts its requests, never "0 block IO requests".
func TestRenderStatsIORecorded(t *testing.T) {
	for _, tc := range []struct {
		blockIO     bool
		want, avoid []string
	}{
		{false, []string{"10 idle periods, block IO not recorded.", "Block IO was not recorded"}, []string{"0 block IO requests", "No block IO request"}},
		{true, []string{"10 idle periods, 0 block IO requests.", "No block IO request completed in the window."}, []string{"not recorded ("}},
	} {
		meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0}}
		meta.Inputs.BlockIO = tc.blockIO
		r := tracetest.Build(t, meta, tracetest.Periods(10, 1, 1, 1e6, 5e5), nil)
		s, err := FilteredStatsEachPeriod(r, trace.IOFilter{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := RenderStats(&out, s, "text"); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("block IO recorded %v: the report lacks %q:\n%s", tc.blockIO, w, out.String())
			}
		}
		for _, a := range tc.avoid {
			if strings.Contains(out.String(), a) {
				t.Errorf("block IO recorded %v: the report says %q", tc.blockIO, a)
			}
		}
		r.Close()
	}
}

// TestStatsExitLatencyUnknown: an import's state table, whose exit
// latencies no capture gives, shows them as unknown ("?", no JSON field),
// not as the zeros it holds; a recorded table shows its own.
func TestStatsExitLatencyUnknown(t *testing.T) {
	for _, unknown := range []bool{false, true} {
		tab := []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: "C1", ExitLatencyNs: 2000, TargetResidencyNs: 2000}}
		if unknown {
			tab[1].ExitLatencyNs = 0
		}
		meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0}, CPUIdleDriver: "intel_idle",
			States: []trace.CPUStates{{CPU: 0, States: tab}}, ExitLatenciesUnknown: unknown}
		r := tracetest.Build(t, meta, tracetest.Periods(10, 1, 1, 1e6, 5e5), nil)
		s, err := FilteredStatsEachPeriod(r, trace.IOFilter{}, nil)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		c1 := s.CPUs[0].States[1]
		if (c1.ExitLatencyNs == nil) != unknown || c1.TargetResidencyNs == nil || *c1.TargetResidencyNs != 2000 {
			t.Errorf("exit latencies unknown %v: C1's exit latency %v, target residency %v", unknown, c1.ExitLatencyNs, c1.TargetResidencyNs)
		}
		var out bytes.Buffer
		if err := RenderStats(&out, s, "text"); err != nil {
			t.Fatal(err)
		}
		want := "│ 1 C1   │    2.00 │      2.00 │"
		if unknown {
			want = "│ 1 C1   │       ? │      2.00 │"
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("exit latencies unknown %v: the report lacks %q:\n%s", unknown, want, out.String())
		}
	}
}

// TestWokeIdleCPUJSON: io.woke_idle_cpu is null where the trace carries no
// wake causes or no block IO (unknown), a count where it carries both.
func TestWokeIdleCPUJSON(t *testing.T) {
	for _, tc := range []struct {
		wakeCauses, blockIO bool
		want                string
	}{{false, true, `"woke_idle_cpu":null`}, {true, false, `"woke_idle_cpu":null`}, {true, true, `"woke_idle_cpu":0`}} {
		meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0}}
		meta.Inputs.BlockIO, meta.Inputs.WakeCauses = tc.blockIO, tc.wakeCauses
		r := tracetest.Build(t, meta, tracetest.Periods(10, 1, 1, 1e6, 5e5), nil)
		s, err := FilteredStatsEachPeriod(r, trace.IOFilter{}, nil)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(js), tc.want) || strings.Count(string(js), `"woke_idle_cpu":`) != 1 {
			t.Errorf("wake causes %v, block IO %v: the JSON lacks %s (or has the key twice)", tc.wakeCauses, tc.blockIO, tc.want)
		}
	}
}

// TestRenderStatsIOAccount: the recording's account of requests the trace
// lacks reads as the explanation of the kernel's difference only where it
// is one; where the table shows a MISMATCH, the prose says the account
// does not add up to it (it had said "the kernel completed 12019 requests
// the trace lacks" above a table whose difference was 12002).
func TestRenderStatsIOAccount(t *testing.T) {
	r, err := trace.Open("../../testdata/demo.trace")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	base, err := StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		kernel           uint64
		without, undeliv uint64
		explained        bool
		filter           string
		want, avoid      string
	}{
		{"explained", 110, 9, 1, true, "", "Inside the window the kernel completed 10 requests the trace lacks: 9 whose issue", "MISMATCH"},
		{"not explained", 127, 15, 4, false, "", "does not add up to the difference", "the kernel completed 19"},
		// No difference in the counters for the account to explain.
		{"no difference", 100, 2, 0, false, "", "the kernel's block counters show no such difference", "MISMATCH"},
		// Under an IO filter the account still covers every device: it
		// must not read as the filtered requests'.
		{"explained, filtered", 110, 9, 1, true, "dev=vdb", "Inside the window, on every device (the filter aside), the kernel completed 10 requests", "MISMATCH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := *base
			s.IO.Devices = []DeviceStats{{Name: "vda", Major: 254, Requests: 100, KernelCompleted: &tc.kernel}}
			s.Mismatches = slices.Clone(base.Mismatches)
			if tc.kernel != 100 && !tc.explained { // as stats_io.go lists it
				s.Mismatches = append(s.Mismatches, Mismatch{Kind: "block", CPU: -1, State: -1, Device: "vda", Name: "vda", Field: "completed", Traced: 100, Kernel: tc.kernel})
			}
			s.IO.WithoutIssueInWindow, s.IO.UndeliveredInWindow = &tc.without, &tc.undeliv
			s.IO.KernelDiffExplained = tc.explained
			s.IO.Filter = tc.filter
			var out bytes.Buffer
			if err := RenderStats(&out, &s, "text"); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.want) || strings.Contains(out.String(), tc.avoid) {
				t.Errorf("want %q and not %q in:\n%s", tc.want, tc.avoid, out.String())
			}
			if tc.kernel == 127 && !strings.Contains(out.String(), "MISMATCH -27") {
				t.Errorf("the table lacks the MISMATCH:\n%s", out.String())
			}
		})
	}
}
