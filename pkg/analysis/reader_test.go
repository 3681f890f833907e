package analysis

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestThroughTraceFile writes a synthetic recording with the real trace
// Writer — many chunks, the idle and IO streams interleaved the way the
// writer cuts them, periodic flushes — reads it back with the Reader and
// checks the statistics against the known truth. This is how cmd/ wires it.
func TestThroughTraceFile(t *testing.T) {
	for _, flushEvery := range []int{0, 5000} { // 0: chunks cut only when full
		path := filepath.Join(t.TempDir(), "t.trace")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		meta := driverMeta()
		meta.Start.CPUIdle = []trace.CPUCounters{counters(0, trace.StateCounters{Index: 1}), counters(1, trace.StateCounters{Index: 1})}
		w, err := trace.NewWriter(f, meta)
		if err != nil {
			t.Fatal(err)
		}
		const n = 300_000
		var wantWoke, wantIO, wantUsage [2]uint64
		var wantTime [2]uint64
		for i := 0; i < n; i++ {
			cpu := uint32(i % 2)
			entry := uint64(2_000_000 + i*50_000)
			res := uint64(10_000 + (i%7)*1000) // 10–16 µs, all C1 (no above/below: C6 needs 400 µs)
			var p trace.IdlePeriod
			if i%4 == 1 {
				p = irqPeriod(cpu, entry, res)
			} else {
				p = period(cpu, 1, entry, res)
			}
			wantUsage[cpu]++
			wantTime[cpu] += res
			if err := w.AddIdle(&p); err != nil {
				t.Fatal(err)
			}
			if i%4 == 1 { // the completion that woke it, 2 µs after the exit
				b := completion(cpu, p.ExitNs+2000)
				if err := w.AddBlockIO(&b); err != nil {
					t.Fatal(err)
				}
				wantWoke[cpu]++
				wantIO[cpu]++
			}
			if i%9 == 0 { // a completion while busy
				b := completion(cpu, p.ExitNs+60_000) // beyond the 50 µs window
				w.AddBlockIO(&b)
				wantIO[cpu]++
			}
			if flushEvery > 0 && i%flushEvery == 0 {
				w.Flush()
			}
		}
		endNs := uint64(2_000_000 + n*50_000 + 1_000_000)
		end := &trace.End{StopReason: "duration", Snapshot: &trace.Snapshot{MonotonicNs: endNs, CPUIdle: []trace.CPUCounters{
			counters(0, trace.StateCounters{Index: 1, Usage: wantUsage[0], TimeUs: wantTime[0] / 1000}),
			counters(1, trace.StateCounters{Index: 1, Usage: wantUsage[1], TimeUs: wantTime[1] / 1000}),
		}}}
		if err := w.Close(end); err != nil {
			t.Fatal(err)
		}
		f.Close()

		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := StatsFromReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()

		if s.IO.WokeIdleCPU != wantWoke[0]+wantWoke[1] {
			t.Errorf("flush %d: woke_idle_cpu %d, want %d", flushEvery, s.IO.WokeIdleCPU, wantWoke[0]+wantWoke[1])
		}
		if s.IO.Requests != wantIO[0]+wantIO[1] {
			t.Errorf("flush %d: io requests %d, want %d", flushEvery, s.IO.Requests, wantIO[0]+wantIO[1])
		}
		for c := 0; c < 2; c++ {
			st := findState(s.CPUs[c].States, 1)
			if st == nil || st.Usage != wantUsage[c] || st.TimeNs != wantTime[c] {
				t.Errorf("flush %d: cpu %d state %+v, want usage %d time %d", flushEvery, c, st, wantUsage[c], wantTime[c])
			}
		}
		if len(s.Mismatches) != 0 || !s.Kernel.Available {
			t.Errorf("flush %d: mismatches %+v (kernel available %v)", flushEvery, s.Mismatches, s.Kernel.Available)
		}
		if err := RenderStats(&bytes.Buffer{}, s, "text"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRealTrace renders a real trace in every format: the bundled one, or
// the one $IDLETRACE_TRACE names (go test ./pkg/analysis -run RealTrace -v).
func TestRealTrace(t *testing.T) {
	path := os.Getenv("IDLETRACE_TRACE")
	if path == "" {
		path = "../../testdata/demo.trace"
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if s.IO.Requests == 0 || len(s.CPUs) == 0 {
		t.Fatalf("a real trace with idle periods and IO gave %d IO requests and %d CPUs", s.IO.Requests, len(s.CPUs))
	}
	for _, f := range []string{"text", "markdown", "json"} {
		var buf bytes.Buffer
		if err := RenderStats(&buf, s, f); err != nil {
			t.Fatal(err)
		}
		if buf.Len() < 500 {
			t.Fatalf("%s stats of a real trace: only %d bytes", f, buf.Len())
		}
		if f == os.Getenv("IDLETRACE_FORMAT") || (f == "text" && os.Getenv("IDLETRACE_FORMAT") == "") {
			t.Log("\n" + buf.String())
		}
	}
}
