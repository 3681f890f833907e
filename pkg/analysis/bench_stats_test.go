package analysis_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/trace"
)

// BenchmarkStatsDemo is `idletrace stats` without the rendering: open the
// bundled demo trace and compute its Stats, once per op. Besides wall time
// it reports the process's CPU time per op (every goroutine's, the GC's
// included), which other load on the machine disturbs less.
func BenchmarkStatsDemo(b *testing.B) {
	const path = "../../testdata/demo.trace"
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	n := 0
	for b.Loop() {
		r, err := trace.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		s, err := analysis.StatsFromReader(r)
		if err != nil {
			b.Fatal(err)
		}
		if s.Empty() {
			b.Fatal("demo trace has no records")
		}
		r.Close()
		n++
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(n), "cpu-ns/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
