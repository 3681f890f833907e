package analysis

import (
	"strings"

	"github.com/idletrace/idletrace/pkg/trace"
)

// RecorderCost is what the recorder's own BPF programs cost while they
// recorded, from the kernel's BPF run-time statistics (record
// --bpf-stats, which itself adds two clock reads a run): the time its
// programs took from the CPUs they ran on is time the traced workload and
// the idle entries waited. nil in a report where the trace has none.
type RecorderCost struct {
	Programs []ProgramCost `json:"programs"`
	// RunTimeNs is every program's run time together; CPUShare is that
	// over the window's CPU time (the window times the report's CPUs; with
	// record --cpus the programs ran, and cost, on the others too).
	RunTimeNs uint64  `json:"run_time_ns"`
	CPUShare  float64 `json:"cpu_share"`
	// IdleProgram is the program on power:cpu_idle ("" when none ran), and
	// IdleEventMeanNs its mean run: the time each idle entry is delayed by
	// before the state is entered, and each exit before the woken CPU goes
	// on (the program runs at both).
	IdleProgram     string  `json:"idle_program"`
	IdleEventMeanNs float64 `json:"idle_event_mean_ns"`
}

// ProgramCost is one program's runs.
type ProgramCost struct {
	Program    string  `json:"program"`
	Runs       uint64  `json:"runs"`
	RunTimeNs  uint64  `json:"run_time_ns"`
	MeanNs     float64 `json:"mean_ns"`
	Recursions uint64  `json:"recursion_misses"`
}

// recorderCost is the trace's RecorderCost over a window of windowNs on
// ncpus CPUs; nil without run-time statistics (no program has a run time).
func recorderCost(end *trace.End, windowNs uint64, ncpus int) *RecorderCost {
	if end == nil {
		return nil
	}
	c := &RecorderCost{Programs: []ProgramCost{}}
	for _, p := range end.ProgStats {
		if p.RunCount == 0 {
			continue
		}
		pc := ProgramCost{Program: p.Name, Runs: p.RunCount, RunTimeNs: p.RunTimeNs, MeanNs: float64(p.RunTimeNs) / float64(p.RunCount), Recursions: p.Misses}
		c.Programs = append(c.Programs, pc)
		c.RunTimeNs += p.RunTimeNs
		if strings.HasSuffix(p.Name, "_cpu_idle") { // btf_cpu_idle, tp_cpu_idle
			c.IdleProgram, c.IdleEventMeanNs = p.Name, pc.MeanNs
		}
	}
	if c.RunTimeNs == 0 {
		return nil
	}
	if windowNs > 0 && ncpus > 0 {
		c.CPUShare = float64(c.RunTimeNs) / (float64(windowNs) * float64(ncpus))
	}
	return c
}
