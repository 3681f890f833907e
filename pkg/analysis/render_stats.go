package analysis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Formats accepted by RenderStats and RenderWhatif.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
	FormatHTML     = "html"
)

// UnknownFormatError is returned for a format a renderer does not support.
type UnknownFormatError struct {
	Format string
	Valid  []string
}

func (e *UnknownFormatError) Error() string {
	return fmt.Sprintf("unknown format %q (use %s)", e.Format, strings.Join(e.Valid, ", "))
}

// RenderStats writes s as text, markdown or json.
func RenderStats(w io.Writer, s *Stats, format string) error {
	return RenderStatsCommand(w, s, format, nil)
}

// RenderStatsCommand is RenderStats for a report made by the command line
// argv, which Markdown prints at its head (JSON never holds it).
func RenderStatsCommand(w io.Writer, s *Stats, format string, argv []string) error {
	switch format {
	case FormatJSON:
		return writeJSON(w, s)
	case FormatText, "":
		return renderStatsDoc(newDoc(w, false), s, nil)
	case FormatMarkdown, "md":
		return renderStatsDoc(newDoc(w, true), s, argv)
	}
	return &UnknownFormatError{Format: format, Valid: []string{FormatText, FormatMarkdown, FormatJSON}}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func orDash(s string) string {
	if s == "" {
		return dash
	}
	return s
}

func pair(traced, kernel string, haveKernel bool) string {
	if !haveKernel {
		return traced
	}
	return traced + " / " + kernel
}

func signedPct(traced, kernel uint64) string {
	if kernel == 0 {
		if traced == 0 {
			return ""
		}
		return "+∞"
	}
	return fmt.Sprintf("%+.2f %%", (float64(traced)-float64(kernel))/float64(kernel)*100)
}

// renderStatsDoc writes the stats report: each section in its own step.
func renderStatsDoc(d *doc, s *Stats, argv []string) error {
	d.command(argv)
	d.title("idletrace stats")
	ioCount := Count(s.IO.Requests, "block IO request")
	if !s.Inputs.BlockIO {
		ioCount = "block IO not recorded" // not zero requests
	}
	governor := "governor " + orDash(s.CPUIdleGovernor)
	if s.CPUIdleDriver == trace.CPUIdleDriverNone {
		governor = "no governor runs" // sysfs still names one (info shows it)
	}
	if s.HaltPoll != nil { // what decides how long it polls
		governor += " (" + trace.FormatHaltPoll(s.HaltPoll) + ")"
	}
	head := []string{
		fmt.Sprintf("Kernel %s, cpuidle driver %s, %s, HZ %s.",
			orDash(s.KernelRelease), orDash(s.CPUIdleDriver), governor, hzString(s.HZ)),
		fmt.Sprintf("Window %s (%s)%s; %s, %s.",
			FormatDuration(s.DurationNs), s.Window.Source, stopString(s), Count(totalPeriods(s), "idle period"), ioCount),
		fmt.Sprintf("Recording: %s.", s.Loss),
	}
	if s.Damage.Any() {
		head = append(head, fmt.Sprintf("File damage: %s; recorded, but not in the counts below.", s.Damage))
	}
	switch {
	case s.OutsideWindow.IdlePeriods+s.OutsideWindow.IORequests == 0:
	case !s.Inputs.BlockIO:
		head = append(head, fmt.Sprintf("Outside the window (not counted): %s.", Count(s.OutsideWindow.IdlePeriods, "idle period")))
	default:
		head = append(head, fmt.Sprintf("Outside the window (not counted): %s, %s.",
			Count(s.OutsideWindow.IdlePeriods, "idle period"), Count(s.OutsideWindow.IORequests, "IO request")))
	}
	d.lines(head...)
	for _, section := range []func(*doc, *Stats) error{
		renderStatsStates,
		renderStatsIdleTime,
		renderStatsPeriodLength,
		renderStatsWakeCauses,
		renderStatsWakeLatency,
		renderStatsIO,
		renderStatsLosses,
		renderStatsRecorderCost,
		renderStatsInputs,
	} {
		if err := section(d, s); err != nil {
			return err
		}
	}
	return d.flush()
}

// renderStatsStates writes the idle states, traced beside the kernel's counters, and whether they agree.
func renderStatsStates(d *doc, s *Stats) error {
	haveKernel := s.Kernel.Available
	if haveKernel {
		d.heading("Idle states: trace / kernel")
	} else {
		d.heading("Idle states (trace)")
	}
	mm := cpuidleMismatches(s)
	header := []string{"CPU", "State", "Exit µs", "Target µs", "Usage", "Residency ms", "Above", "Below"}
	if haveKernel {
		header = append(header, "Check")
	}
	rows := stateRows(s, mm)
	left := []int{1}
	if haveKernel {
		left = append(left, 8)
	}
	if err := d.table(header, rows, left...); err != nil {
		return err
	}
	if haveKernel {
		n := 0
		for _, m := range s.Mismatches {
			if m.Kind == "cpuidle" {
				n++
			}
		}
		var unchecked []string
		for _, kc := range s.Kernel.CPUs {
			if kc.Unchecked != "" {
				unchecked = append(unchecked, fmt.Sprintf("CPU %d %s", kc.CPU, kc.Unchecked))
			}
		}
		if len(unchecked) > 0 {
			d.para("Not checked against the kernel: " + strings.Join(unchecked, "; ") + ".")
		}
		if n == 0 {
			every := "Every"
			if len(unchecked) > 0 {
				every = "Every other"
			}
			d.para(fmt.Sprintf("%s traced counter agrees with the kernel's (usage exactly where nothing was lost, residency within %.1f %%, above and below exactly).", every, ResidencyTolerance*100))
		} else {
			p := fmt.Sprintf("%d counters disagree with the kernel's (flagged MISMATCH above; usage must match exactly where nothing was lost, residency within %.1f %%, above and below exactly).", n, ResidencyTolerance*100)
			if s.Damage.IdleRecords > 0 || s.Damage.Regions > 0 {
				p += " The file's damaged chunks held idle periods the kernel counted and the trace cannot (File damage, above)."
			}
			d.para(p)
		}
	} else {
		d.para("No kernel counters to check against: " + orDash(s.Kernel.Note) + ".")
	}
	return nil
}

// cpuidleMismatches gives, per CPU and state, the counters that disagree
// with the kernel's, as the state table's Check column names them.
func cpuidleMismatches(s *Stats) map[[2]int][]string {
	mm := map[[2]int][]string{}
	for _, m := range s.Mismatches {
		if m.Kind == "cpuidle" {
			k := [2]int{m.CPU, m.State}
			f := m.Field
			if f == "time_ns" {
				f = "residency " + signedPct(m.Traced, m.Kernel)
			}
			mm[k] = append(mm[k], f)
		}
	}
	return mm
}

// stateRows is the state table: one row per CPU and state, traced beside
// the kernel's counters where the trace has them.
func stateRows(s *Stats, mm map[[2]int][]string) [][]string {
	haveKernel := s.Kernel.Available
	var rows [][]string
	for _, c := range s.CPUs {
		var kc *KernelCPU
		for i := range s.Kernel.CPUs {
			if s.Kernel.CPUs[i].CPU == c.CPU {
				kc = &s.Kernel.CPUs[i]
			}
		}
		var kernelStates []StateStats
		if haveKernel && kc != nil {
			kernelStates = kc.States
		}
		for _, i := range StateIndexes(c.States, kernelStates) {
			var t, k StateStats
			var tp *StateStats
			if tp = findState(c.States, i); tp != nil {
				t = *tp
			}
			name := t.Name
			if kc != nil {
				if kp := findState(kc.States, i); kp != nil {
					k = *kp
					if name == "" {
						name = kp.Name
					}
				}
			}
			el, tr := dash, dash
			if tp != nil && tp.TargetResidencyNs != nil {
				tr = FormatUs(*tp.TargetResidencyNs)
				el = "?" // a table without exit latencies (an import)
			}
			if tp != nil && tp.ExitLatencyNs != nil {
				el = FormatUs(*tp.ExitLatencyNs)
			}
			hk := haveKernel && kc != nil && len(kc.States) > 0
			above, below := fmt.Sprint(t.Above), fmt.Sprint(t.Below)
			if !haveKernel && tp != nil && tp.TargetResidencyNs == nil {
				above, below = dash, dash // no state table: cannot be classified
			}
			row := []string{
				fmt.Sprint(c.CPU), fmt.Sprintf("%d %s", i, name), el, tr,
				pair(fmt.Sprint(t.Usage), fmt.Sprint(k.Usage), hk),
				pair(FormatMs(t.TimeNs), FormatMs(k.TimeNs), hk),
				pair(above, fmt.Sprint(k.Above), hk),
				pair(below, fmt.Sprint(k.Below), hk),
			}
			if haveKernel {
				check := "ok"
				switch {
				case kc != nil && kc.Unchecked != "":
					check = "not checked: " + kc.Unchecked
				case !hk:
					check = "no kernel counters"
				case len(mm[[2]int{c.CPU, i}]) > 0:
					check = "MISMATCH " + strings.Join(mm[[2]int{c.CPU, i}], ", ")
				}
				if c.LostIdle > 0 {
					check += fmt.Sprintf(" (%d records lost: usage not compared)", c.LostIdle)
				}
				row = append(row, check)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// renderStatsIdleTime writes the idle fraction per CPU.
func renderStatsIdleTime(d *doc, s *Stats) error {
	d.heading("Idle time per CPU")
	kernelTick := slices.ContainsFunc(s.CPUs, func(c CPUStats) bool { return c.KernelTickStops != nil })
	var rows [][]string
	for _, c := range s.CPUs {
		row := []string{fmt.Sprint(c.CPU), FormatDuration(c.WindowNs), fmt.Sprint(c.Periods),
			FormatMs(c.IdleNs), FormatPct(c.IdleFraction), tickStoppedCell(c.TickStoppedBefore), tickStoppedCell(c.TickStopped)}
		if kernelTick {
			k := dash
			if c.KernelTickStops != nil {
				k = fmt.Sprint(*c.KernelTickStops)
			}
			row = append(row, fmt.Sprintf("%d / %s", c.TickStopped.Stopped, k))
		}
		rows = append(rows, append(row, fmt.Sprint(c.LostIdle)))
	}
	head := []string{"CPU", "Window", "Idle periods", "Idle ms", "Idle", "Tick off at choice", "Tick off at entry"}
	if kernelTick {
		head = append(head, "Tick-off entries trace / kernel")
	}
	if err := d.table(append(head, "Lost idle records"), rows); err != nil {
		return err
	}
	note := "Tick off at choice: the idle periods whose governor found the scheduler tick stopped when it chose their state " +
		"(tick_nohz_tick_stopped(), which menu and teo read); at entry: stopped once it had chosen " +
		"(it asked to stop it, or it was already); both of the periods whose tick state was recorded."
	if s.Window.Source == "snapshots" {
		note = "Window: each CPU's own, between its instants in the two snapshots (the headline's runs between the block counters' reads, which follow every CPU's). " + note
	}
	var late []string
	for _, c := range s.CPUs {
		if c.CameOnline {
			late = append(late, fmt.Sprint(c.CPU))
		}
	}
	switch len(late) {
	case 0:
	case 1:
		note = "CPU " + late[0] + " came online during the recording: its window begins with its first idle period. " + note
	default:
		note = "CPUs " + strings.Join(late, ", ") + " came online during the recording: the window of each begins with its first idle period. " + note
	}
	// A CPU taken offline during the window: the trace has no event for
	// the time it was down, which its idle share counts as busy.
	var down []string
	for _, k := range s.Kernel.CPUs {
		if k.Unchecked == trace.OfflineAtEnd || k.Unchecked == trace.CountersRestarted {
			down = append(down, fmt.Sprint(k.CPU))
		}
	}
	if len(down) > 0 {
		note = fmt.Sprintf("CPU %s went offline during the window (its counters say so, Idle states above): the time it was offline counts as busy in its idle share, as the trace has no event for it. ", strings.Join(down, ", ")) + note
	}
	if s.HaltPoll != nil && s.HaltPoll.GuestHaltPollNs == 0 {
		note += " The haltpoll governor, with guest_halt_poll_ns=0, asks to stop the tick at every entry unless a PM QoS limit of 0 is in force."
	}
	if kernelTick {
		note += " Tick-off entries: the periods entered with the tick stopped, beside the kernel's idle_sleeps (/proc/timer_list) over the window, " +
			"which counts also the attempts aborted after the tick was stopped (a wake-up came before the state's entry) and so may be the larger."
	}
	d.para(note)
	return nil
}

// tickStoppedCell is the share of periods entered with the tick stopped,
// of those whose tick state is known.
func tickStoppedCell(t TickStopped) string {
	if t.Known == 0 {
		return "unknown"
	}
	return FormatPct(frac(t.Stopped, t.Known))
}

// renderStatsPeriodLength writes how long each state's idle periods lasted.
func renderStatsPeriodLength(d *doc, s *Stats) error {
	if len(s.StatePeriods) == 0 {
		return nil
	}
	d.heading("Idle period length per state (entry → exit, every recorded CPU)")
	var rows [][]string
	for _, n := range byDepth(s, maps.Keys(s.StatePeriods)) {
		p := s.StatePeriods[n]
		l := p.LengthNs
		rows = append(rows, []string{n, fmt.Sprint(l.Count), FormatUs(uint64(l.Mean + 0.5)), FormatUs(l.P50), FormatUs(l.P99), FormatUs(l.Max),
			tickStoppedCell(p.TickStoppedBefore), tickStoppedCell(p.TickStopped)})
	}
	return d.table([]string{"State", "Idle periods", "mean µs", "p50 µs", "p99 µs", "max µs", "Tick off at choice", "Tick off at entry"}, rows, 0)
}

// byDepth sorts state names as the CPUs' tables order them, shallowest
// first (C1, C1E, …, C10, not C1, C10, C1E), a name no table has after
// them by name.
func byDepth(s *Stats, names iter.Seq[string]) []string {
	index := map[string]int{}
	for _, c := range s.CPUs {
		for _, st := range c.States {
			if i, ok := index[st.Name]; !ok || st.Index < i {
				index[st.Name] = st.Index
			}
		}
	}
	return slices.SortedFunc(names, func(a, b string) int {
		ia, oka := index[a]
		ib, okb := index[b]
		switch {
		case oka && okb && ia != ib:
			return cmp.Compare(ia, ib)
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
}

// renderStatsWakeCauses writes what ended the idle periods.
func renderStatsWakeCauses(d *doc, s *Stats) error {
	d.heading("Wake causes")
	var rows [][]string
	names := make([]string, 0, len(s.WakeCauses.Counts))
	for n := range s.WakeCauses.Counts {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := s.WakeCauses.Counts[names[i]], s.WakeCauses.Counts[names[j]]
		if a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		c := s.WakeCauses.Counts[n]
		if c == 0 {
			continue
		}
		rows = append(rows, []string{n, fmt.Sprint(c), FormatPct(frac(c, s.WakeCauses.Total))})
	}
	if len(rows) > 0 {
		if err := d.table([]string{"Cause", "Idle periods", "Share"}, rows, 0); err != nil {
			return err
		}
	}
	wl := []string{fmt.Sprintf("Known cause for %s of %d idle periods.", FormatPct(s.WakeCauses.KnownFraction), s.WakeCauses.Total)}
	if len(s.WakeCauses.TopIRQs) > 0 {
		var parts []string
		for _, q := range s.WakeCauses.TopIRQs {
			parts = append(parts, fmt.Sprintf("IRQ %d: %d", q.IRQ, q.Count))
		}
		wl = append(wl, "Top device interrupts: "+strings.Join(parts, ", ")+".")
	}
	d.lines(wl...)
	return nil
}

// renderStatsWakeLatency writes each state's measured wake-up latency.
func renderStatsWakeLatency(d *doc, s *Stats) error {
	d.heading("Wake-up latency per state (remote wake request → idle exit)")
	var rows [][]string
	for _, n := range byDepth(s, maps.Keys(s.WakeLatencyNs)) {
		l := s.WakeLatencyNs[n]
		rows = append(rows, []string{n, fmt.Sprint(l.Count), FormatUs(l.P50), FormatUs(l.P99), FormatUs(l.Max)})
	}
	if len(rows) == 0 {
		d.para("No remote wake-up with a measured request time in this trace.")
	} else if err := d.table([]string{"State", "Wake-ups", "p50 µs", "p99 µs", "max µs"}, rows, 0); err != nil {
		return err
	}
	if s.WakeRequestedBeforeEntry > 0 {
		d.para(fmt.Sprintf("%d more remote wake-ups were requested before the idle entry (an IPI sent just before it, served after it): not measured, their latency is not the state's.", s.WakeRequestedBeforeEntry))
	}
	return nil
}

// wokeIdleLine says how many completions woke an idle CPU: unknown, not
// 0, where the trace carries no wake causes (an imported capture), since
// the rule needs the idle period's.
func wokeIdleLine(s *Stats) string {
	io := s.IO
	if !s.Inputs.WakeCauses {
		return "How many of them woke an idle CPU is unknown: the trace does not carry wake causes."
	}
	if !io.WokeIdleKnown() {
		return "How many of them woke an idle CPU is unknown: they all completed on CPUs whose idle periods the recording left out (record --cpus)."
	}
	known, of := io.Requests-io.WokeIdleUnknown, ""
	if io.WokeIdleUnknown > 0 {
		of = fmt.Sprintf(" of the %d completed on recorded CPUs; %d completed on CPUs the recording left out, unknown", known, io.WokeIdleUnknown)
	}
	return fmt.Sprintf("%d of them woke an idle CPU (%s%s; of these, completions in an idle period a device IRQ ended: %d, a function-call IPI: %d, which may be more than such periods, as one can hold several; completion inside the idle period or ≤ %d µs after its exit).",
		io.WokeIdleCPU, FormatPct(frac(io.WokeIdleCPU, known)), of, io.WokeIdleCPUByCause["irq"], io.WokeIdleCPUByCause["ipi-call"], io.WokeWindowNs/1000)
}

// devicesRequests is every request the devices completed in the window,
// whatever the IO filter selected.
func devicesRequests(io IOStats) uint64 {
	var n uint64
	for _, d := range io.Devices {
		n += d.Requests
	}
	return n
}

// renderStatsIO writes the block IO figures and the devices beside the kernel's counts.
func renderStatsIO(d *doc, s *Stats) error {
	d.heading("Block IO")
	io := s.IO
	var ioLines []string
	if io.Filter != "" {
		ioLines = append(ioLines, fmt.Sprintf("IO figures cover the requests the filter %q selects; the devices' counts cover all.", io.Filter))
	}
	all := devicesRequests(io)
	switch {
	case !s.Inputs.BlockIO:
		d.lines("Block IO was not recorded (record --no-io, or a capture without the block events).")
		return nil
	case io.Requests == 0 && io.Filter != "" && all > 0:
		ioLines = append(ioLines, fmt.Sprintf("None of the %d block IO requests completed in the window matched the filter.", all))
	case io.Requests == 0:
		ioLines = append(ioLines, "No block IO request completed in the window.")
	default:
		ioLines = append(ioLines,
			fmt.Sprintf("%d requests completed; latency (issue → completion) mean %s µs, p50 %s µs, p99 %s µs, max %s µs.",
				io.Requests, FormatUsF(io.LatencyNs.Mean), FormatUs(io.LatencyNs.P50), FormatUs(io.LatencyNs.P99), FormatUs(io.LatencyNs.Max)),
			wokeIdleLine(s))
		if t := io.TaskLatencyNs; t != nil && t.Count > 0 {
			ioLines = append(ioLines, fmt.Sprintf("%d requests had their task waiting; issue → that task running again: mean %s µs, p50 %s µs, p99 %s µs, p99.9 %s µs, max %s µs.",
				t.Count, FormatUsF(t.Mean), FormatUs(t.P50), FormatUs(t.P99), FormatUs(t.P999), FormatUs(t.Max)))
		}
	}
	if io.WithoutIssueInWindow != nil && io.UndeliveredInWindow != nil && *io.WithoutIssueInWindow+*io.UndeliveredInWindow > 0 {
		n := *io.WithoutIssueInWindow + *io.UndeliveredInWindow
		noun := "requests"
		if n == 1 {
			noun = "request"
		}
		parts := fmt.Sprintf("%d whose issue was not traced (in flight at start, or completed without an issue of their own), %d not delivered by the kernel (their issue or completion tracepoint ran without idletrace's programs)",
			*io.WithoutIssueInWindow, *io.UndeliveredInWindow)
		mismatch := slices.ContainsFunc(s.Mismatches, func(m Mismatch) bool { return m.Kind == "block" })
		room := accountRoom(io.Devices)
		switch {
		case io.KernelDiffExplained:
			// The account is the recording's, every device's: a filter's
			// figures above do not bound it.
			where := "Inside the window"
			if io.Filter != "" {
				where = "Inside the window, on every device (the filter aside),"
			}
			ioLines = append(ioLines, fmt.Sprintf("%s the kernel completed %d %s the trace lacks: %s.", where, n, noun, parts))
		case mismatch:
			// The account must not read as the explanation of the
			// difference the table shows.
			ioLines = append(ioLines, fmt.Sprintf("The recording's account of requests the trace lacks inside the window (%d: %s) does not add up to the difference between the kernel's counters and the trace (the table's MISMATCH).", n, parts))
		case room == 0:
			ioLines = append(ioLines, fmt.Sprintf("The recording's account names %d %s the trace lacks inside the window (%s); the kernel's block counters show no such difference to check it against.", n, noun, parts))
		default:
			ioLines = append(ioLines, fmt.Sprintf("The recording's account names %d %s the trace lacks inside the window (%s); the kernel's block counters leave room for at most %d.", n, noun, parts, room))
		}
	}
	if slices.ContainsFunc(io.Devices, func(d DeviceStats) bool { return d.KernelCompletedRange != nil }) {
		ioLines = append(ioLines, "The block counters kept moving while the snapshots read them (steady IO: no two reads around an instant held still), so the kernel's counts are known to a range, the completions counted between the reads (Kernel completed); the trace's are held to it.")
	}
	if io.Errors > 0 {
		ioLines = append(ioLines, fmt.Sprintf("Errors: %d.", io.Errors))
	}
	d.lines(ioLines...)
	if len(io.Devices) > 0 {
		var rows [][]string
		for _, dv := range io.Devices {
			k, check := dash, "no kernel counters"
			if dv.KernelCompleted != nil {
				k = fmt.Sprint(*dv.KernelCompleted)
				check = "ok"
				lo, hi, _ := dv.kernelBounds()
				if lo != hi {
					k = fmt.Sprintf("%d–%d", lo, hi)
				}
				switch {
				case lo == hi && dv.Requests == lo:
				case io.KernelDiffExplained && dv.Requests < lo && lo == hi:
					check = fmt.Sprintf("ok: %d without a traced issue or not delivered", lo-dv.Requests)
				case io.KernelDiffExplained && dv.Requests < lo:
					check = fmt.Sprintf("ok: %d or more without a traced issue or not delivered", lo-dv.Requests)
				case dv.Requests >= lo && dv.Requests <= hi:
					check = "ok: within the range"
				case lo != hi:
					check = fmt.Sprintf("MISMATCH: outside %d–%d", lo, hi)
				default:
					check = fmt.Sprintf("MISMATCH %+d", int64(dv.Requests)-int64(lo))
				}
			}
			rows = append(rows, []string{dv.Name, fmt.Sprintf("%d:%d", dv.Major, dv.Minor), fmt.Sprint(dv.Requests), k, fmt.Sprint(dv.Errors), check})
		}
		if err := d.table([]string{"Device", "Dev", "Traced completed", "Kernel completed", "Errors", "Check"}, rows, 0, 1, 5); err != nil {
			return err
		}
	}
	return nil
}

// renderStatsLosses writes the losses per CPU: what the account's total cannot say (which CPU).
func renderStatsLosses(d *doc, s *Stats) error {
	if len(s.Losses) > 0 {
		var rows [][]string
		for _, l := range s.Losses {
			if lost := l.IdleLost + l.IOLost + l.OtherLost; lost+l.IdleUnpaired > 0 {
				rows = append(rows, []string{fmt.Sprint(l.CPU), fmt.Sprint(lost), fmt.Sprint(l.IdleUnpaired)})
			}
		}
		if len(rows) > 0 {
			d.heading("Losses per CPU")
			if err := d.table([]string{"CPU", "Ring buffer full", "Unpaired idle events (not delivered)"}, rows); err != nil {
				return err
			}
		}
	}
	return nil
}

// renderStatsRecorderCost writes what the recorder's programs cost, or
// that it was not measured.
func renderStatsRecorderCost(d *doc, s *Stats) error {
	c := s.RecorderCost
	d.heading("Recorder's cost")
	if c == nil {
		if s.StopReason == "imported" {
			d.lines("Not measured: an imported capture carries no BPF statistics.")
		} else {
			d.lines("Not measured: record with --bpf-stats for the kernel's BPF run-time statistics.")
		}
		return nil
	}
	line := fmt.Sprintf("The recorder's BPF programs ran %s of CPU time, %.3f %% of the window's (kernel BPF statistics, which add two clock reads a run).",
		FormatDuration(c.RunTimeNs), 100*c.CPUShare)
	if c.IdleEventMeanNs > 0 {
		line += fmt.Sprintf(" The cpu_idle program's mean run, %.2f µs, is what each idle entry (before the state is entered) and each exit (before the woken CPU goes on) waited for it on average; entries do more of its work.", c.IdleEventMeanNs/1e3)
	}
	d.lines(line)
	var rows [][]string
	for _, p := range c.Programs {
		rows = append(rows, []string{p.Program, fmt.Sprint(p.Runs), fmt.Sprintf("%.0f", p.MeanNs), fmt.Sprintf("%.3f", float64(p.RunTimeNs)/1e6), fmt.Sprint(p.Recursions)})
	}
	return d.table([]string{"Program", "Runs", "Mean ns", "Total ms", "Recursion misses"}, rows, 0)
}

// renderStatsInputs writes the inputs the trace has, how each probe attached, and the warnings.
func renderStatsInputs(d *doc, s *Stats) error {
	d.heading("Inputs")
	in := s.Inputs
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	d.lines(fmt.Sprintf("wake causes %s, wake requests %s, tick state %s, next timer %s, tick wake-ups %s, poll time limit %s, block IO %s, haltpoll trace %s, PM QoS changes %s.",
		yn(in.WakeCauses), yn(in.WakeRequests), yn(in.TickState), yn(in.NextTimer), yn(in.TickWakeups), yn(in.PollTimeLimit), yn(in.BlockIO), yn(in.HaltPollTrace), yn(in.PMQoSTrace)))
	if len(s.Probes) > 0 {
		keys := make([]string, 0, len(s.Probes))
		for k := range s.Probes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var rows [][]string
		for _, k := range keys {
			rows = append(rows, []string{k, s.Probes[k]})
		}
		if err := d.table([]string{"Probe", "Attached as"}, rows, 0, 1); err != nil {
			return err
		}
	}
	if len(s.Warnings) > 0 {
		d.heading("Warnings")
		d.bullets(s.Warnings)
	}
	return nil
}

func frac(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func hzString(hz int) string {
	if hz <= 0 {
		return "unknown"
	}
	return fmt.Sprint(hz)
}

func stopString(s *Stats) string {
	if s.CutShort {
		return ", cut short"
	}
	if s.StopReason != "" {
		return ", stopped on " + s.StopReason
	}
	return ""
}

func totalPeriods(s *Stats) uint64 {
	var n uint64
	for _, c := range s.CPUs {
		n += c.Periods
	}
	return n
}
