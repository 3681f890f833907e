package fleet

import (
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// StatsFromReader is analysis.FilteredStatsFromReader (the same Stats,
// from the same single pass) plus the idle periods' figures split by CPU
// and state.
//
// Choice: stats reports idle period lengths, the tick's state and wake
// latency per state name, over every CPU; a state row is one CPU's state,
// so it carries that CPU's share (counts add up to stats' per state, maxima
// to its maximum). The split is kept here rather than in pkg/analysis so
// that `stats` and `top` do not pay two histograms per CPU and state.
func StatsFromReader(r *trace.Reader, f trace.IOFilter) (*analysis.Stats, PeriodsByCPUState, error) {
	periods := PeriodsByCPUState{}
	s, err := analysis.FilteredStatsEachPeriod(r, f, periods.add)
	if err != nil {
		return nil, nil, err
	}
	return s, periods, nil
}

// PeriodsByCPUState is what stats counts of idle periods per state name, split
// by CPU and state index: what a state row's idle_period_ns_*, tick_* and
// wake_latency_ns_* columns say.
type PeriodsByCPUState map[[2]int]*CPUStatePeriods

// CPUStatePeriods is one CPU's idle periods in one state (the window's).
type CPUStatePeriods struct {
	LengthNs          latency.Histogram // entry to exit
	WakeLatencyNs     latency.Histogram // remote request to exit, where measured
	TickStopped       analysis.TickStopped
	TickStoppedBefore analysis.TickStopped
}

func (m PeriodsByCPUState) add(p *trace.IdlePeriod) {
	k := [2]int{int(p.CPU), int(p.State)}
	c := m[k]
	if c == nil {
		c = &CPUStatePeriods{}
		m[k] = c
	}
	c.LengthNs.Record(p.ResidencyNs())
	c.TickStopped.Add(p.TickStopped)
	c.TickStoppedBefore.Add(p.TickStoppedBefore)
	if ns, ok := p.WakeLatencyNs(); ok {
		c.WakeLatencyNs.Record(ns)
	}
}
