package analysis_test

import (
	"runtime"
	"testing"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/trace"
)

func BenchmarkZZBig(b *testing.B) {
	for b.Loop() {
		r, _ := trace.Open("/tmp/big/w20.trace")
		if _, err := analysis.StatsFromReader(r); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}

func BenchmarkZZScanOnly(b *testing.B) {
	for b.Loop() {
		r, _ := trace.Open("/tmp/big/w20.trace")
		n := 0
		if err := r.Scan(trace.Visitor{Idle: func(*trace.IdlePeriod) error { n++; return nil }, BlockIO: func(*trace.BlockIO) error { n++; return nil }}); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}

func BenchmarkZZScanOnly1P(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	BenchmarkZZScanOnly(b)
}
func BenchmarkZZBig1P(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	BenchmarkZZBig(b)
}
