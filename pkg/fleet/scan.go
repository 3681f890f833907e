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
	wake := WakeByCPU{}
	s, err := analysis.FilteredStatsEachWake(r, f, func(cpu uint32, state int, ns uint64) { wake.record(int(cpu), state, ns) })
	if err != nil {
		return nil, nil, err
	}
	return s, wake, nil
}
