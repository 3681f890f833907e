package analysis_test

import (
	"os"
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
	path := benchTrace()
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

// benchTrace is the trace the stats benchmarks read: the bundled demo
// trace, or IDLETRACE_BENCH_TRACE (a longer recording gives the per-record
// costs with less of the start-up in them).
func benchTrace() string {
	if p := os.Getenv("IDLETRACE_BENCH_TRACE"); p != "" {
		return p
	}
	return "../../testdata/demo.trace"
}

// BenchmarkStatsCountOnly is the counting half of BenchmarkStatsDemo: the
// records are decoded once, before the timer, and each op feeds them to a
// fresh StatsBuilder in the order a scan gives them. It is the floor stats
// cannot go under by decoding faster (README, speed against idlestat).
func BenchmarkStatsCountOnly(b *testing.B) {
	r, err := trace.Open(benchTrace())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var idle []trace.IdlePeriod
	var bio []trace.BlockIO
	var isIdle []bool
	err = r.Scan(trace.Visitor{
		Idle:    func(p *trace.IdlePeriod) error { idle = append(idle, *p); isIdle = append(isIdle, true); return nil },
		BlockIO: func(io *trace.BlockIO) error { bio = append(bio, *io); isIdle = append(isIdle, false); return nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		sb := analysis.NewStatsBuilder(r.Meta, r.End)
		i, j := 0, 0
		for _, k := range isIdle {
			if k {
				sb.AddIdle(&idle[i])
				i++
			} else {
				sb.AddBlockIO(&bio[j])
				j++
			}
		}
		if sb.Finish(nil).Empty() {
			b.Fatal("no records")
		}
	}
}

// BenchmarkScanLean is the other half: read, decompress and decode what
// stats reads (its Visitor's skip set), counting nothing.
func BenchmarkScanLean(b *testing.B) {
	skip := analysis.NewStatsBuilder(nil, nil).Visitor().Skip
	for b.Loop() {
		r, err := trace.Open(benchTrace())
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		err = r.Scan(trace.Visitor{
			Idle:    func(*trace.IdlePeriod) error { n++; return nil },
			BlockIO: func(*trace.BlockIO) error { n++; return nil },
			Skip:    skip,
		})
		r.Close()
		if err != nil || n == 0 {
			b.Fatal(err, n)
		}
	}
}
