package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestWokeIdleUnrecordedCPUs: a completion on a CPU whose idle periods the
// recording left out (record --cpus) may have woken it or not: stats and
// whatif count it as unknown, not as a completion that woke none (a new
// user's --cpus 0 recording read "0 % woke an idle CPU", and whatif then
// said no policy could change the IO latency), and the two agree on the
// count, as on a filter that selects no request.
func TestWokeIdleUnrecordedCPUs(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		name        string
		onCPU1      int // completions on the unrecorded CPU
		io          string
		woke        *uint64 // stats' woke_idle_cpu and whatif's io_woke_idle
		unknown     uint64
		textPart    string
		noteContent string
	}{
		{"some on an unrecorded CPU", 5, "", u64(10), 5, "of the 10 completed on recorded CPUs; 5 completed on CPUs the recording left out, unknown", "5 of the 15 block IO completions came on CPUs whose idle periods the recording left out"},
		{"all on an unrecorded CPU", 5, "dev=253:1", nil, 5, "they all completed on CPUs whose idle periods the recording left out", "all came on CPUs whose idle periods the recording left out"},
		{"none selected", 5, "op=write", u64(0), 0, "None of the 15 block IO requests completed in the window matched the filter", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := wokeTrace(t, tc.onCPU1)
			var filter []string
			if tc.io != "" {
				filter = []string{"--io", tc.io}
			}
			args := func(cmd string, more ...string) []string {
				return append(append([]string{cmd, path}, filter...), more...)
			}
			st := runBin(t, args("stats", "--format", "json")...)
			wi := runBin(t, args("whatif", "--policy", "recorded", "--policy", "menu", "--format", "json")...)
			if st.code != 0 || wi.code != 0 {
				t.Fatalf("stats exit %d, whatif exit %d: %s%s", st.code, wi.code, st.stderr, wi.stderr)
			}
			var s struct {
				IO struct {
					Woke    *uint64           `json:"woke_idle_cpu"`
					ByCause map[string]uint64 `json:"woke_idle_cpu_by_cause"`
					Unknown uint64            `json:"woke_idle_cpu_unknown"`
				} `json:"io"`
			}
			var w struct {
				Results []struct {
					Policy string  `json:"policy"`
					Woke   *uint64 `json:"io_woke_idle"`
				} `json:"results"`
				Notes []string `json:"notes"`
			}
			if err := json.Unmarshal([]byte(st.stdout), &s); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(wi.stdout), &w); err != nil {
				t.Fatal(err)
			}
			if !eqPtr(s.IO.Woke, tc.woke) || s.IO.Unknown != tc.unknown || (s.IO.ByCause == nil) != (tc.woke == nil) {
				t.Errorf("stats: woke_idle_cpu %v, by cause %v, unknown %d; want %v, %d", ptrU(s.IO.Woke), s.IO.ByCause, s.IO.Unknown, ptrU(tc.woke), tc.unknown)
			}
			for _, r := range w.Results {
				if !eqPtr(r.Woke, tc.woke) {
					t.Errorf("whatif %s: io_woke_idle %v, want %v", r.Policy, ptrU(r.Woke), ptrU(tc.woke))
				}
			}
			if notes := strings.Join(w.Notes, "\n"); tc.noteContent != "" && !strings.Contains(notes, tc.noteContent) {
				t.Errorf("whatif notes lack %q:\n%s", tc.noteContent, notes)
			}
			text := runBin(t, args("stats")...)
			if !strings.Contains(strings.Join(strings.Fields(text.stdout), " "), tc.textPart) {
				t.Errorf("stats text lacks %q:\n%s", tc.textPart, text.stdout)
			}
		})
	}
}

func eqPtr(a, b *uint64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func ptrU(p *uint64) any {
	if p == nil {
		return "null"
	}
	return *p
}

// wokeTrace writes a recording of CPU 0 of two: 20 idle periods on CPU 0
// ended by a device interrupt, 10 completions inside them on device
// 253:0 (each woke it), and onCPU1 completions on CPU 1 on device 253:1.
func wokeTrace(t *testing.T, onCPU1 int) string {
	tab := []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: "C1", ExitLatencyNs: 2000, TargetResidencyNs: 2000}}
	meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 2, RecordedCPUs: []int{0},
		CPUIdleDriver: "intel_idle", CPUIdleGovernor: "menu", States: []trace.CPUStates{{CPU: 0, States: tab}},
		Inputs: trace.Inputs{WakeCauses: true, BlockIO: true}}
	return writeTrace(t, "cpus0.trace", meta, &trace.End{StopReason: "duration"}, func(w *trace.Writer) error {
		const ms = 1_000_000
		for i := range 20 {
			entry := uint64(1000*ms + i*ms)
			p := trace.IdlePeriod{CPU: 0, State: 1, EntryNs: entry, ExitNs: entry + 400_000, WakeCause: trace.WakeIRQ, WakeIRQ: 11}
			if err := w.AddIdle(&p); err != nil {
				return err
			}
			var io []trace.BlockIO
			if i < 10 {
				io = append(io, trace.BlockIO{Dev: 253 << 20, IssueNs: entry - 50_000, CompleteNs: entry + 390_000, IssueCPU: 0, CompleteCPU: 0, Bytes: 4096})
			}
			if i < onCPU1 {
				io = append(io, trace.BlockIO{Dev: 253<<20 | 1, IssueNs: entry - 50_000, CompleteNs: entry + 390_000, IssueCPU: 1, CompleteCPU: 1, Bytes: 4096})
			}
			for k := range io {
				if err := w.AddBlockIO(&io[k]); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
