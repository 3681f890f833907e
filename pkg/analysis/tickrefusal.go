package analysis

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TickRefusal is one CPU's count of idle periods whose record says whether
// the kernel could have stopped the tick (IdlePeriod.TickStoppable known),
// and of those the ones where it could not.
type TickRefusal struct{ Known, Refused uint64 }

// TickRefusals are a trace's TickRefusal per CPU. The kernel refuses to
// stop the tick where a timer-wheel timer is due within it, or RCU or
// irq_work need it (tick_nohz_next_event, kernel/time/tick-sched.c); no
// governor or policy decides that, and the replay takes it from the
// recording. So a share that moves between two recordings of one workload
// says the workload or the kernel's own work moved, which a prediction
// from the first recording cannot follow.
type TickRefusals map[uint32]TickRefusal

// CountTickRefusals scans r's idle periods.
func CountTickRefusals(r *trace.Reader) (TickRefusals, error) {
	out := TickRefusals{}
	err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
		if p.TickStoppable == trace.Unknown {
			return nil
		}
		c := out[p.CPU]
		c.Known++
		if p.TickStoppable == trace.No {
			c.Refused++
		}
		out[p.CPU] = c
		return nil
	}})
	return out, err
}

// tickRefusalMovedPoints is how far a CPU's refused share must move
// between the recordings for the note: in the lab, where one CPU's tick
// was kept in 97–99.6 % of its periods and the other's in 0.4–7 %, which
// CPU it was changed between recordings of one workload.
const tickRefusalMovedPoints = 20

// tickRefusalMinPeriods: fewer known periods on a CPU say nothing.
const tickRefusalMinPeriods = 100

// WorkloadMovedNote begins every note TickRefusalNote writes.
const WorkloadMovedNote = "the workload moved between the recordings"

// TickRefusalNote says, for a prediction held to a measurement, on which
// CPUs the kernel refused to stop the tick in a share of the periods
// that moved by tickRefusalMovedPoints or more between BEFORE and AFTER;
// "" where none did.
func TickRefusalNote(before, after TickRefusals, beforeName, afterName string) string {
	var moved []string
	for _, c := range slices.Sorted(maps.Keys(before)) {
		b, a := before[c], after[c]
		if b.Known < tickRefusalMinPeriods || a.Known < tickRefusalMinPeriods {
			continue
		}
		bs, as := float64(b.Refused)/float64(b.Known), float64(a.Refused)/float64(a.Known)
		if math.Abs(as-bs)*100 >= tickRefusalMovedPoints-1e-9 { // (float: 30 % − 10 % is 19.999…)
			moved = append(moved, fmt.Sprintf("CPU %d's %.0f %% before, %.0f %% after", c, 100*bs, 100*as))
		}
	}
	if len(moved) == 0 {
		return ""
	}
	return fmt.Sprintf(WorkloadMovedNote+" (%s, %s), which no policy does: "+
		"the kernel could not stop the tick (a timer due within it, RCU or irq_work) in %s of the idle periods; "+
		"the prediction keeps before's and cannot follow what that changed (in the lab the cause was housekeeping that moved between "+
		"CPUs: an unpinned process queuing RCU callbacks, RCU's grace-period kthread and timer migration; pin them off the measured CPUs)",
		beforeName, afterName, strings.Join(moved, "; "))
}
