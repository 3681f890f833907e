package analysis

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// CPUWorkload is what one CPU's idle periods in a trace say of the
// workload rather than of the governor: how many of them record whether
// the kernel could have stopped the tick (IdlePeriod.TickStoppable known)
// and in how many it could not (TickRefused), and the CPU's idle time
// over the span of its periods.
type CPUWorkload struct {
	TickKnown, TickRefused uint64
	Periods                uint64
	IdleNs                 uint64
	FirstNs, LastNs        uint64 // the first period's entry, the last's exit
}

// Workloads are a trace's CPUWorkload per CPU. The kernel refuses to
// stop the tick where a timer-wheel timer is due within it, or RCU or
// irq_work need it (tick_nohz_next_event, kernel/time/tick-sched.c); no
// governor or policy decides that, and the replay takes it from the
// recording. Nor does a policy move work from one CPU to another: it
// changes the µs a wake-up costs, which can change the workload's pace
// (every CPU busier or idler alike: polling made a guest's ping-pong 4×
// faster), not where the work runs. So a refused share that moved, or one
// CPU busier while another got idler, says the workload or the kernel's
// own work moved, which a prediction from the first recording cannot
// follow.
type Workloads map[uint32]CPUWorkload

// Workload is what a trace's idle periods say of the workload rather
// than of the governor: per CPU (Workloads), and each wake-up's latency
// as traced, from the remote wake request to the idle exit
// (IdlePeriod.WakeLatencyNs, what stats reports per state), pooled over
// every CPU and state. A comparison sets the traced latency beside the
// exit latencies the replay charges: the replay predicts the second, and a
// guest's wake-ups pay far more than its table's 1 µs. Only the periods
// stats counts are counted (those whose exit falls in their CPU's window
// between the snapshots), so the figures are stats' on the same trace.
type Workload struct {
	CPUs       Workloads
	TracedWake latency.Histogram
	// WindowNs is the window between the snapshots (stats' duration_ns);
	// 0 where a snapshot is missing and the periods' own span stands in.
	WindowNs uint64
}

// CountWorkloads scans r's idle periods. Every CPU the trace recorded
// has an entry, one without a period too (busy throughout).
func CountWorkloads(r *trace.Reader) (*Workload, error) {
	w := &Workload{CPUs: Workloads{}}
	out := w.CPUs
	recorded := r.Meta.RecordedCPUList()
	if len(recorded) == 0 { // every CPU
		for c := range min(r.Meta.NumCPUs, maxCPUs) {
			recorded = append(recorded, c)
		}
	}
	for _, c := range recorded {
		if c >= 0 {
			out[uint32(c)] = CPUWorkload{}
		}
	}
	rules := NewRules(r.Meta, r.End)
	if start, end := trace.SnapshotWindow(r.Meta, r.End); start > 0 && end != math.MaxUint64 && end > start {
		w.WindowNs = end - start
	}
	err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
		if !rules.Valid(p) || !rules.IdleInWindow(p) {
			return nil
		}
		c := out[p.CPU]
		if c.Periods == 0 || p.EntryNs < c.FirstNs {
			c.FirstNs = p.EntryNs
		}
		c.LastNs = max(c.LastNs, p.ExitNs)
		c.Periods++
		res, _ := p.Residency() // the kernel's own, as stats' idle time
		c.IdleNs += res
		if p.TickStoppable != trace.Unknown {
			c.TickKnown++
			if p.TickStoppable == trace.No {
				c.TickRefused++
			}
		}
		out[p.CPU] = c
		if lat, ok := p.WakeLatencyNs(); ok {
			w.TracedWake.Record(lat)
		}
		return nil
	}})
	return w, err
}

// window is the time the counts cover: the snapshots' window, else the
// span of the periods.
func (w *Workload) window() uint64 {
	if w.WindowNs > 0 {
		return w.WindowNs
	}
	return w.CPUs.span()
}

// PeriodsPerSecond is the idle periods of every CPU per second of the
// window; 0 for one too short to say.
func (w *Workload) PeriodsPerSecond() float64 {
	span := w.window()
	if span < workloadMinSpanNs {
		return 0
	}
	var n uint64
	for _, c := range w.CPUs {
		n += c.Periods
	}
	return float64(n) / (float64(span) / 1e9)
}

// IdleShare is the CPUs' idle time over the window, of every recorded
// CPU (a busy one too); 0 for a window too short to say.
func (w *Workload) IdleShare() float64 {
	span := w.window()
	if span < workloadMinSpanNs || len(w.CPUs) == 0 {
		return 0
	}
	var idle uint64
	for _, c := range w.CPUs {
		idle += c.IdleNs
	}
	return float64(idle) / (float64(span) * float64(len(w.CPUs)))
}

// span is the time from the first period's entry to the last's exit
// over all CPUs: what each CPU's idle share is of (a CPU busy at the start
// or the end is not idle then).
func (w Workloads) span() uint64 {
	var first, last uint64
	seen := false
	for _, c := range w {
		if c.Periods == 0 {
			continue
		}
		if !seen || c.FirstNs < first {
			first = c.FirstNs
		}
		seen = true
		last = max(last, c.LastNs)
	}
	return last - min(first, last)
}

// workloadMinSpanNs: a shorter recording says nothing of idle shares.
const workloadMinSpanNs = 100_000_000

// ShortWindowNotes says which recording's window is too short for its
// idle rate and share (under workloadMinSpanNs), which the comparison
// then leaves empty.
func ShortWindowNotes(before, after *Workload, beforeName, afterName string) []string {
	var notes []string
	for _, w := range []struct {
		work *Workload
		name string
	}{{before, beforeName}, {after, afterName}} {
		if w.work == nil {
			continue
		}
		if span := w.work.window(); span < workloadMinSpanNs {
			notes = append(notes, fmt.Sprintf("%s's window is %s, under the %s its idle periods per second and idle share need: not given",
				w.name, FormatDuration(span), FormatDuration(workloadMinSpanNs)))
		}
	}
	return notes
}

// workloadMovedPoints is how far a CPU's refused share, or its idle share,
// must move between the recordings for a note: in the lab, where one
// CPU's tick was kept in 97–99.6 % of its periods and the other's in
// 0.4–7 %, which CPU it was changed between recordings of one workload;
// a new user's fio moved from CPU 1 to CPU 0 between an experiment's
// recordings (CPU 0 53 % idle before, 97 % after; CPU 1 95 %, then 50 %).
const workloadMovedPoints = 20

// workloadMinPeriods: fewer periods whose tick state is known say nothing
// of a CPU's refused share.
const workloadMinPeriods = 100

// TickComparable says whether two recordings' shares of periods in which
// the kernel could not stop the tick can be held to each other as the
// workload's. The recorder reads the next event the kernel last computed
// (tick_sched's timer_expires), computed only where the governor asks for
// the sleep length, or the idle loop stops the tick (asked to, or already
// stopped) and can_stop_idle_tick lets it: with ladder at every such
// entry, haltpoll only with no poll window and no zero latency limit
// (haltpoll_select, drivers/cpuidle/governors/haltpoll.c v6.18, then
// returns the halt state with stop_tick left set), menu and teo as their
// candidate states go. Between recordings under different governors, PM QoS
// limits or haltpoll windows, the policy itself changes how often it is
// fresh: a new user's haltpoll experiments (qos=0, guest_halt_poll_ns=,
// a move to menu) were told the workload moved "which no policy does" by a
// share their policy had moved. So: the same governor, the same known
// global latency limit; for menu and teo, whose query follows the states
// they may choose, the same disabled states; haltpoll only with both
// windows 0 and a limit known not to be 0.
func TickComparable(before, after *trace.Metadata) bool {
	if before == nil || after == nil || before.CPUIdleGovernor != after.CPUIdleGovernor ||
		before.PMQoS.CPUDMALatencyUs != after.PMQoS.CPUDMALatencyUs || before.PMQoS.CPUDMALatencyUs < 0 {
		return false
	}
	switch before.CPUIdleGovernor {
	case "ladder":
		return true
	case "menu", "teo":
		return slices.Equal(disabledStates(before), disabledStates(after))
	case "haltpoll":
		return before.HaltPoll != nil && after.HaltPoll != nil && before.HaltPoll.GuestHaltPollNs == 0 && after.HaltPoll.GuestHaltPollNs == 0 &&
			before.PMQoS.CPUDMALatencyUs != 0
	}
	return false
}

// disabledStates lists "cpu/state" for every state a recording's tables
// mark disabled.
func disabledStates(m *trace.Metadata) []string {
	var out []string
	for _, c := range m.States {
		for _, s := range c.States {
			if s.Disabled {
				out = append(out, fmt.Sprintf("%d/%d", c.CPU, s.Index))
			}
		}
	}
	slices.Sort(out)
	return out
}

// WorkloadMovedNote begins every note WorkloadMovedNotes writes.
const WorkloadMovedNote = "the workload moved between the recordings"

// WorkloadMovedNotes say, for a prediction held to a measurement, on
// which CPUs the kernel refused to stop the tick in a share of the periods
// that moved by workloadMovedPoints or more between BEFORE and AFTER
// (where TickComparable says the two recordings' shares can be held to
// each other), and on which the idle share of the CPU's time (over each
// recording's span) moved by as much, one CPU's up and another's down;
// none where nothing did. Each begins WorkloadMovedNote.
func WorkloadMovedNotes(before, after Workloads, tickComparable bool, beforeName, afterName string) []string {
	var tick, idle []string
	var idler, busier bool
	moved := func(b, a float64) bool { return math.Abs(a-b)*100 >= workloadMovedPoints-1e-9 } // (float: 30 % − 10 % is 19.999…)
	bSpan, aSpan := before.span(), after.span()
	for _, c := range slices.Sorted(maps.Keys(before)) {
		b := before[c]
		a, ok := after[c]
		if !ok { // not recorded in AFTER
			continue
		}
		if tickComparable && b.TickKnown >= workloadMinPeriods && a.TickKnown >= workloadMinPeriods {
			bs, as := float64(b.TickRefused)/float64(b.TickKnown), float64(a.TickRefused)/float64(a.TickKnown)
			if moved(bs, as) {
				tick = append(tick, fmt.Sprintf("CPU %d's %.0f %% before, %.0f %% after", c, 100*bs, 100*as))
			}
		}
		if bSpan >= workloadMinSpanNs && aSpan >= workloadMinSpanNs {
			if bs, as := float64(b.IdleNs)/float64(bSpan), float64(a.IdleNs)/float64(aSpan); moved(bs, as) {
				idle = append(idle, fmt.Sprintf("CPU %d %.0f %% idle before, %.0f %% after", c, 100*bs, 100*as))
				if as > bs {
					idler = true
				} else {
					busier = true
				}
			}
		}
	}
	// Idle shares that all fell (or all rose) are a workload that ran
	// faster (or slower): a policy does that on a guest, where polling cut
	// a ping-pong's wake-ups from 13 µs to 0.3 µs and both CPUs went from
	// 47 % idle to 20 % (a new user's qos=0). Only a CPU that got busier
	// while another got idler says the work moved between them.
	if !idler || !busier {
		idle = nil
	}
	var notes []string
	if len(tick) > 0 {
		notes = append(notes, fmt.Sprintf(WorkloadMovedNote+" (%s, %s), which no policy does: "+
			"the kernel could not stop the tick (a timer due within it, RCU or irq_work) in %s of the idle periods; "+
			"the prediction keeps before's and cannot follow what that changed (in the lab the cause was housekeeping that moved between "+
			"CPUs: an unpinned process queuing RCU callbacks, RCU's grace-period kthread and timer migration; pin them off the measured CPUs)",
			beforeName, afterName, strings.Join(tick, "; ")))
	}
	if len(idle) > 0 {
		notes = append(notes, fmt.Sprintf(WorkloadMovedNote+" (%s, %s), by more than a policy's wake-up costs move it: %s; "+
			"the prediction replays before's idle periods, so the figures that follow where the work ran (each state's share, wake-ups per CPU) "+
			"cannot agree: pin the workload to its CPUs (taskset) for both recordings",
			beforeName, afterName, strings.Join(idle, "; ")))
	}
	return notes
}
