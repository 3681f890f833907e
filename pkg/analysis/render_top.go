package analysis

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TopView says how a frame of `idletrace top` is laid out.
type TopView struct {
	// Width and Height bound the frame on a terminal (lines are cut to
	// Width, the frame to Height lines); 0: no bound (plain-text snapshots,
	// whose prose wraps at TopPipeWidth).
	Width, Height int
	// Status is a line under the title: where the trace goes, how to stop.
	Status string
	// Warnings are the recorder's, shown under the tables.
	Warnings []string
}

// topCauses is the order of the wake-cause columns: the five common ones
// first, always shown; the others once they occurred.
var topCauses = []trace.WakeCause{
	trace.WakeTimer, trace.WakeTick, trace.WakeIRQ, trace.WakeIPIResched, trace.WakeIPICall,
	trace.WakeRemoteNoIPI, trace.WakePollTimeout, trace.WakeUnknown,
}

// RenderTop writes one frame of the live view as plain text: no escape
// sequences, so that a snapshot can be piped; the caller positions it on
// a terminal. Per CPU: idle share of the interval, each state's share of
// the idle time, above/below, completions that woke it, and its wake
// causes; per state: exit latency and target residency, share of idle
// time, entries, above/below, measured wake latency p50/p99 in the
// interval and since the start; the PM QoS limits in force.
func RenderTop(w io.Writer, f *TopFrame, v TopView) error {
	lines := topLines(f, v)
	if v.Height > 0 && len(lines) > v.Height {
		// The last line says what the terminal leaves out, rather than
		// the frame ending as if it were whole.
		cut := len(lines) - v.Height + 1
		lines = append(lines[:v.Height-1:v.Height-1], fmt.Sprintf("… %d more lines: a taller terminal shows them (piped, top prints every line)", cut))
	}
	var b strings.Builder
	for _, l := range lines {
		if v.Width > 0 {
			l = cutLine(l, v.Width)
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func topLines(f *TopFrame, v TopView) []string {
	last, total := f.Interval, f.Total
	if last == nil || total == nil {
		return nil
	}
	noDriver := total.CPUIdleDriver == trace.CPUIdleDriverNone
	states := topStates(total, last)
	out := topHeader(f, v, noDriver)
	out = append(out, topStateTables(last, total, states, noDriver)...)
	out = append(out, topCPUTable(f, states, noDriver)...)
	out = append(out, topCauseTable(last, total)...)
	out = append(out, topNotes(total, v, noDriver)...)
	return wrapTopLines(out, v.Width)
}

// topHeader: the machine, and the last interval's and the whole run's counts.
func topHeader(f *TopFrame, v TopView, noDriver bool) []string {
	last, total := f.Interval, f.Total
	secs := float64(f.IntervalNs) / 1e9
	var out []string
	governor := "governor " + orDash(total.CPUIdleGovernor)
	if noDriver { // sysfs still names one, but none runs
		governor = "no governor runs"
	}
	if h := total.HaltPoll; h != nil { // its polling window's ceiling
		governor += fmt.Sprintf(" (guest_halt_poll_ns %d)", h.GuestHaltPollNs)
	}
	out = append(out, joinTitle([]string{"idletrace top", clock(f.ElapsedNs), "kernel " + orDash(total.KernelRelease),
		"driver " + orDash(total.CPUIdleDriver) + ", " + governor, "HZ " + hzString(total.HZ)}, cmp.Or(v.Width, TopPipeWidth))...)
	out = append(out, fmt.Sprintf("last %.2f s: %s, %s, %s",
		secs, Count(totalPeriods(last), "idle period"), Count(last.IO.Requests, "IO request"), wokeBrief(&last.IO)))
	out = append(out, fmt.Sprintf("since start: %s, %s, %s; %s",
		Count(totalPeriods(total), "idle period"), Count(total.IO.Requests, "IO request"), wokeBrief(&total.IO), lossBrief(total)))
	out = append(out, topPMQoSLine(f.PMQoS, noDriver))
	if v.Status != "" {
		out = append(out, v.Status)
	}
	return out
}

// topPMQoSShownCPUs: CPUs with a resume-latency constraint named one by
// one; more are counted.
const topPMQoSShownCPUs = 4

// topPMQoSLine: the latency constraints in force, which every governor
// obeys (menu, teo and ladder cap the state by them; haltpoll polls at
// 0) and nothing reads without a cpuidle driver, and how often they
// changed.
func topPMQoSLine(q TopPMQoS, noDriver bool) string {
	line := "PM QoS: "
	if noDriver { // the default idle routine reads neither; said first, where no wrap splits it
		line = "PM QoS (no effect: no cpuidle driver): "
	}
	line += "cpu_dma_latency " + trace.PMQoSLimitString(trace.PMQoSGlobal, q.GlobalUs)
	var cpus []string
	for c, v := range q.ResumeUs {
		if v >= 0 { // −1: no constraint
			cpus = append(cpus, fmt.Sprintf("cpu%d %s", c, trace.PMQoSLimitString(int32(c), v)))
		}
	}
	if n := len(cpus); n > topPMQoSShownCPUs {
		cpus = append(cpus[:topPMQoSShownCPUs], fmt.Sprintf("%d more", n-topPMQoSShownCPUs))
	}
	if len(cpus) > 0 {
		line += "; resume latency " + strings.Join(cpus, ", ")
	}
	if !q.Traced {
		return line + "; changes not traced"
	}
	return line + fmt.Sprintf("; %s since start, %d in the last interval", Count(q.Changes, "change"), q.IntervalChanges)
}

// joinTitle joins the title's parts with " · ", going on to an indented
// line before a part that would pass width (a wrapped line beginning
// with "· HZ 250" read as a list).
func joinTitle(parts []string, width int) []string {
	lines := []string{parts[0]}
	for _, p := range parts[1:] {
		last := &lines[len(lines)-1]
		if displayLen(*last)+len(" · ")+displayLen(p) > width {
			lines = append(lines, "    "+p)
			continue
		}
		*last += " · " + p
	}
	return lines
}

// topStateTables: per state, all CPUs.
func topStateTables(last, total *Stats, states []string, noDriver bool) []string {
	var out []string
	// Per state, all CPUs: two tables, so that each fits 80 columns.
	out = append(out, "")
	rows := [][]string{{"state", "exit µs", "target µs", "idle share %", "entries", "above", "below"}}
	lat := [][]string{{"wake latency", "n", "p50 µs", "p99 µs", "since start n", "p50 µs", "p99 µs"}}
	var idleAll uint64
	for _, c := range last.CPUs {
		for _, st := range c.States {
			idleAll += st.TimeNs
		}
	}
	for _, name := range states {
		var usage, timeNs, above, below uint64
		var exit, target *uint64
		for _, c := range last.CPUs {
			for _, st := range c.States {
				if st.Name == name {
					usage, timeNs, above, below = usage+st.Usage, timeNs+st.TimeNs, above+st.Above, below+st.Below
				}
			}
		}
		for _, c := range total.CPUs {
			for _, st := range c.States {
				if st.Name == name && exit == nil && st.ExitLatencyNs != nil {
					exit, target = st.ExitLatencyNs, st.TargetResidencyNs
				}
			}
		}
		row := []string{name, usOrDash(exit), usOrDash(target), share(timeNs, idleAll), fmt.Sprint(usage)}
		rows = append(rows, append(row, aboveBelow(noDriver, above, below)...))
		row = append([]string{name}, latencyCells(last.WakeLatencyNs[name])...)
		lat = append(lat, append(row, latencyCells(total.WakeLatencyNs[name])...))
	}
	out = append(out, alignRows(rows, 0)...)
	out = append(out, "")
	out = append(out, alignRows(lat, 0)...)
	return out
}

// topCPUTable: per CPU, time and states.
func topCPUTable(f *TopFrame, states []string, noDriver bool) []string {
	last := f.Interval
	var out []string
	var rows [][]string
	// Per CPU: time and states.
	out = append(out, "")
	head := []string{"CPU", "idle %", "periods", "tick off %"}
	for _, name := range states {
		head = append(head, name+" %")
	}
	head = append(head, "above", "below", "IO woke")
	rows = [][]string{head}
	var allIdle, allWindow, allPeriods, allAbove, allBelow uint64
	var allTick TickStopped
	allStates := make([]uint64, len(states))
	for _, c := range last.CPUs {
		var idle, above, below uint64
		perState := make([]uint64, len(states))
		for _, st := range c.States {
			idle += st.TimeNs
			above += st.Above
			below += st.Below
			for i, name := range states {
				if st.Name == name {
					perState[i] += st.TimeNs
					allStates[i] += st.TimeNs
				}
			}
		}
		row := []string{fmt.Sprint(c.CPU), idleShare(c.IdleNs, f.IntervalNs), fmt.Sprint(c.Periods), share(c.TickStopped.Stopped, c.TickStopped.Known)}
		for _, t := range perState {
			row = append(row, share(t, idle))
		}
		row = append(row, aboveBelow(noDriver, above, below)...)
		row = append(row, fmt.Sprint(c.IOWokeIdle))
		rows = append(rows, row)
		allIdle += min(c.IdleNs, f.IntervalNs) // as its row shows it: "all" agrees with the rows
		allWindow += f.IntervalNs
		allPeriods += c.Periods
		allTick.Stopped += c.TickStopped.Stopped
		allTick.Known += c.TickStopped.Known
		allAbove += above
		allBelow += below
	}
	if len(last.CPUs) > 1 {
		row := []string{"all", idleShare(allIdle, allWindow), fmt.Sprint(allPeriods), share(allTick.Stopped, allTick.Known)}
		var idle uint64
		for _, t := range allStates {
			idle += t
		}
		for _, t := range allStates {
			row = append(row, share(t, idle))
		}
		row = append(row, aboveBelow(noDriver, allAbove, allBelow)...)
		row = append(row, fmt.Sprint(last.IO.WokeIdleCPU))
		rows = append(rows, row)
	}
	out = append(out, alignRows(rows)...)
	return out
}

// topCauseTable: per CPU, what woke it.
func topCauseTable(last, total *Stats) []string {
	var out []string
	var head []string
	var rows [][]string
	// Per CPU: what woke it. The rarer causes get a column once seen.
	out = append(out, "")
	head = []string{"CPU"}
	var causes []string
	for i, c := range topCauses {
		if i < 5 || total.WakeCauses.Counts[c.String()] > 0 {
			causes = append(causes, c.String())
		}
	}
	rows = [][]string{append(head, causes...)}
	for _, c := range last.CPUs {
		row := []string{fmt.Sprint(c.CPU)}
		for _, cause := range causes {
			row = append(row, fmt.Sprint(c.WakeCauses[cause]))
		}
		rows = append(rows, row)
	}
	if len(last.CPUs) > 1 {
		row := []string{"all"}
		for _, cause := range causes {
			row = append(row, fmt.Sprint(last.WakeCauses.Counts[cause]))
		}
		rows = append(rows, row)
	}
	out = append(out, alignRows(rows)...)
	if irqs := last.WakeCauses.TopIRQs; len(irqs) > 0 {
		parts := make([]string, 0, min(len(irqs), 5))
		for _, q := range irqs[:min(len(irqs), 5)] {
			parts = append(parts, fmt.Sprintf("%d ×%d", q.IRQ, q.Count))
		}
		out = append(out, "device IRQs that woke a CPU: "+strings.Join(parts, ", "))
	}
	return out
}

// topNotes: what the figures mean, and what they cannot say here.
func topNotes(total *Stats, v TopView, noDriver bool) []string {
	var out []string
	// What the figures mean, and what they cannot say here.
	out = append(out, "")
	out = append(out, "Counts are of the last interval: a period counts when the recorder receives it, after it ended. "+
		"idle % is the CPU's time in those periods (at most 100 %); tick off % the share of them entered with the scheduler tick stopped (after the governor's choice); "+
		"a state's % is its share of that idle time; "+
		"wake latency is remote wake request → idle exit, in the last interval and since the start.")
	if noDriver {
		out = append(out, "No cpuidle driver: the states are those the cpu_idle tracepoint reports (HLT for the default idle routine, POLL for cpu_idle_poll); "+
			"there is no state table, so no exit latency, target residency or above/below.")
	}
	if !total.Inputs.WakeRequests {
		out = append(out, "This kernel's trace carries no remote wake requests: no wake latency can be measured.")
	}
	for _, w := range v.Warnings {
		out = append(out, "warning: "+w)
	}
	return out
}

// wrapTopLines wraps long lines of prose at width (0: TopPipeWidth); table
// lines are cut on a terminal.
func wrapTopLines(out []string, width int) []string {
	// Long lines of prose wrap, at the terminal's width or, piped, at
	// TopPipeWidth; table lines are cut on a terminal.
	if width == 0 {
		width = TopPipeWidth
	}
	var wrapped []string
	for _, l := range out {
		if displayLen(l) > width && !strings.Contains(l, "  ") {
			wrapped = append(wrapped, strings.Split(strings.TrimRight(wrap(l, width, ""), "\n"), "\n")...)
		} else {
			wrapped = append(wrapped, l)
		}
	}
	return wrapped
}

// topStates lists the state names in index order: those of the state
// tables and any the records showed, so that columns stay put between
// frames.
func topStates(stats ...*Stats) []string {
	var names []string
	idx := map[string]int{}
	for _, s := range stats {
		for _, c := range s.CPUs {
			for _, st := range c.States {
				if _, ok := idx[st.Name]; !ok {
					idx[st.Name] = st.Index
					names = append(names, st.Name)
				}
			}
		}
	}
	// Stable by index (insertion order breaks ties).
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && idx[names[j]] < idx[names[j-1]]; j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	return names
}

func clock(ns uint64) string {
	s := ns / 1e9
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// lossBrief names what was lost so far by record's loss account names:
// the ring buffer's drops, the kernel's undelivered events and the
// pairing table's overflow (LossAccount.Lost). IO in flight at the
// recording's start or stop is cut by its bounds, not lost.
func lossBrief(s *Stats) string {
	var parts []string
	for _, k := range []struct {
		name string
		n    uint64
	}{
		{"ring buffer full", s.Loss.RingBufferFull},
		{"not delivered by the kernel", s.Loss.Undelivered},
		{"IO pairing table full", s.Loss.IOTableFull},
	} {
		if k.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k.name, k.n))
		}
	}
	if len(parts) == 0 {
		return "nothing lost"
	}
	return "lost: " + strings.Join(parts, ", ")
}

// TopPipeWidth is the width of top's plain-text output: its snapshots'
// prose and its closing summary wrap there (a table's lines are as wide as
// its columns).
const TopPipeWidth = 80

// TopEnd is what `idletrace top` says on stderr when it ends.
type TopEnd struct {
	ElapsedSec            float64
	StopReason            string // "duration", "quit", "signal", "output closed", ...
	IdlePeriods, BlockIOs uint64
	Loss                  trace.LossAccount
	Kept                  string // "kept in FILE" or "temporary trace removed"
}

// RenderTopEnd writes top's closing summary, wrapped at TopPipeWidth, the
// lines after the first indented.
func RenderTopEnd(w io.Writer, e TopEnd) error {
	// In all, to the stop: the last frame's "since start" ends at its own
	// second, and a new user read the difference as a miscount.
	s := fmt.Sprintf("idletrace top: %.1fs (%s): %s, %s in all, to the stop (the last frame counted to its own second); %s; %s",
		e.ElapsedSec, e.StopReason, Count(e.IdlePeriods, "idle period"), Count(e.BlockIOs, "IO request"), e.Kept, e.Loss)
	_, err := io.WriteString(w, WrapWords(strings.Fields(s), TopPipeWidth, "", "  "))
	return err
}

func usOrDash(ns *uint64) string {
	if ns == nil {
		return dash
	}
	return FormatUs(*ns)
}

func share(part, whole uint64) string {
	if whole == 0 {
		return dash
	}
	return fmt.Sprintf("%.1f", float64(part)/float64(whole)*100)
}

// idleShare is idle time over the interval, at most 100 %: a period that
// began before the interval counts whole when it ends.
func idleShare(idle, window uint64) string {
	if window == 0 {
		return dash
	}
	return fmt.Sprintf("%.1f", min(float64(idle)/float64(window), 1)*100)
}

func aboveBelow(noDriver bool, above, below uint64) []string {
	if noDriver {
		return []string{dash, dash}
	}
	return []string{fmt.Sprint(above), fmt.Sprint(below)}
}

func latencyCells(s latency.Summary) []string {
	if s.Count == 0 {
		return []string{"0", dash, dash}
	}
	return []string{fmt.Sprint(s.Count), FormatUs(s.P50), FormatUs(s.P99)}
}

// alignRows lays rows out in columns two spaces apart, the columns listed
// in left aligned left and the others (numbers) right.
func alignRows(rows [][]string, left ...int) []string {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], displayLen(c))
		}
	}
	isLeft := map[int]bool{}
	for _, i := range left {
		isLeft[i] = true
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-displayLen(c))
			if isLeft[i] {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

// cutLine cuts l to at most width runes.
func cutLine(l string, width int) string {
	if displayLen(l) <= width {
		return l
	}
	return string([]rune(l)[:width])
}

// wokeBrief is top's count of completions that woke an idle CPU, with
// those on CPUs the recording left out (--cpus), whose count is unknown.
func wokeBrief(io *IOStats) string {
	line := fmt.Sprintf("%d woke an idle CPU", io.WokeIdleCPU)
	if io.WokeIdleUnknown > 0 {
		line += fmt.Sprintf(" (%d on CPUs not recorded: unknown)", io.WokeIdleUnknown)
	}
	return line
}
