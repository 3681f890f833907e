package analysis

import (
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

func TestRecorderCost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		end       *trace.End
		windowNs  uint64
		ncpus     int
		want      bool // a cost is given
		runTimeNs uint64
		share     float64
		idleMean  float64
		idleProg  string
		programs  int
	}{
		{name: "no end record", end: nil, windowNs: 1e9, ncpus: 2},
		{name: "no statistics", end: &trace.End{}, windowNs: 1e9, ncpus: 2},
		// Without --bpf-stats the kernel counts only recursion misses.
		{name: "misses only", end: &trace.End{ProgStats: []trace.ProgStat{{Name: "btf_cpu_idle", Misses: 3}}}, windowNs: 1e9, ncpus: 2},
		{name: "tp_btf programs", end: &trace.End{ProgStats: []trace.ProgStat{
			{Name: "btf_cpu_idle", RunCount: 1000, RunTimeNs: 1_500_000},
			{Name: "btf_sched_switch", RunCount: 500, RunTimeNs: 500_000, Misses: 1},
		}}, windowNs: 1e9, ncpus: 2, want: true, runTimeNs: 2_000_000, share: 0.001, idleMean: 1500, idleProg: "btf_cpu_idle", programs: 2},
		{name: "classic tracepoints, no window", end: &trace.End{ProgStats: []trace.ProgStat{
			{Name: "tp_cpu_idle", RunCount: 4, RunTimeNs: 4000},
			{Name: "tp_block_rq_issue", RunCount: 0, RunTimeNs: 0},
		}}, ncpus: 2, want: true, runTimeNs: 4000, idleMean: 1000, idleProg: "tp_cpu_idle", programs: 1},
		{name: "no cpu_idle program ran", end: &trace.End{ProgStats: []trace.ProgStat{
			{Name: "btf_block_rq_issue", RunCount: 2, RunTimeNs: 3000},
		}}, windowNs: 1e9, ncpus: 1, want: true, runTimeNs: 3000, share: 3e-6, programs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := recorderCost(tc.end, tc.windowNs, tc.ncpus)
			if (c != nil) != tc.want {
				t.Fatalf("cost %+v, want one: %v", c, tc.want)
			}
			if c == nil {
				return
			}
			if c.RunTimeNs != tc.runTimeNs || c.CPUShare != tc.share || c.IdleEventMeanNs != tc.idleMean || c.IdleProgram != tc.idleProg || len(c.Programs) != tc.programs {
				t.Errorf("cost %+v, want run time %d, share %g, idle program %q with mean %g, %d programs", c, tc.runTimeNs, tc.share, tc.idleProg, tc.idleMean, tc.programs)
			}
		})
	}
}
