package fleet

import (
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/trace"
)

// StatsFromReader is analysis.FilteredStatsFromReader (the same Stats,
// from the same single pass) plus the wake latency split by CPU and state.
//
// Choice: stats reports wake latency per state name, over every CPU; a
// state row is one CPU's state, so it carries that CPU's share (counts
// add up to stats' per state, maxima to its maximum). The split is kept
// here rather than in pkg/analysis so that `stats` and `top` do not pay a
// histogram per CPU and state (58 KiB each, allocated at its first value).
func StatsFromReader(r *trace.Reader, f trace.IOFilter) (*analysis.Stats, WakeByCPU, error) {
	b := analysis.NewStatsBuilder(r.Meta, r.End)
	b.SetIOFilter(f)
	v := b.Visitor()
	wake := WakeByCPU{}
	idle := v.Idle
	v.Idle = func(p *trace.IdlePeriod) error {
		if err := idle(p); err != nil {
			return err
		}
		// What the builder counts in wake_latency_ns: valid periods in
		// their CPU's window with a measured wake latency.
		if b.Valid(p) && b.IdleInWindow(p) {
			if ns, ok := p.WakeLatencyNs(); ok {
				wake.record(int(p.CPU), int(p.State), ns)
			}
		}
		return nil
	}
	if err := r.Scan(v); err != nil { // loss records come with the scan
		return nil, nil, err
	}
	s := b.Finish(nil)
	s.Warnings = append(append([]string{}, r.Warnings()...), s.Warnings...)
	return s, wake, nil
}
