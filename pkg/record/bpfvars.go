package record

import (
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/trace"
)

// machine is the host the recorder reads its metadata, counters and
// snapshots from; the unit tests point it at a fixture tree.
var machine = host.Local

// pollingMask has bit i set when state i polls. Without a cpuidle driver the
// only polling "state" is cpu_idle_poll, traced as state 0.
func pollingMask(m *trace.Metadata) uint32 {
	if len(m.States) == 0 {
		return 1
	}
	var mask uint32
	for _, s := range m.States[0].States {
		if s.Polling && s.Index < 32 {
			mask |= 1 << s.Index
		}
	}
	return mask
}
