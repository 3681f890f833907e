package analysis

import (
	"os"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

func benchFile(b *testing.B) string {
	p := os.Getenv("PHASE_TRACE")
	if p == "" {
		b.Skip("PHASE_TRACE")
	}
	return p
}

func BenchmarkPhaseLoad(b *testing.B) {
	p := benchFile(b)
	for i := 0; i < b.N; i++ {
		r, _ := trace.Open(p)
		r.Scan(trace.Visitor{})
		r.Close()
	}
}

func BenchmarkPhaseDecode(b *testing.B) {
	p := benchFile(b)
	for i := 0; i < b.N; i++ {
		r, _ := trace.Open(p)
		n := 0
		r.Scan(trace.Visitor{Idle: func(*trace.IdlePeriod) error { n++; return nil }, BlockIO: func(*trace.BlockIO) error { n++; return nil }})
		r.Close()
	}
}

func BenchmarkPhaseStats(b *testing.B) {
	p := benchFile(b)
	for i := 0; i < b.N; i++ {
		r, _ := trace.Open(p)
		FilteredStatsEachWake(r, trace.IOFilter{}, nil)
		r.Close()
	}
}
