package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Turning a StatsBuilder's accumulators into a Stats report: the head
// from the metadata, the window, the losses, each CPU's idle time and
// per-state counters, the wake causes and latencies, and the warnings. It
// is apart from the accumulation because it runs once per report, not per
// record; the IO figures and the kernel's counters that finish also sets
// are in stats_io.go and stats_kernel.go.

func (b *StatsBuilder) finish(losses []trace.Loss, flush bool) *Stats {
	for _, l := range losses {
		b.addLoss(l)
	}
	if b.end != nil {
		for _, l := range b.end.Loss {
			b.addLoss(l)
		}
	}
	s := b.newStats()
	b.window(s)
	b.lossStats(s)
	cpuList := b.cpuList()
	s.CPUs = make([]CPUStats, 0, len(cpuList))
	tickStops := b.kernelTickStops()
	for _, c := range cpuList {
		s.CPUs = append(s.CPUs, b.cpuStats(c, s.DurationNs, tickStops))
	}
	s.Kernel = b.kernelStats(cpuList)
	if s.Kernel.Available {
		s.Mismatches = append(s.Mismatches, compareCPUIdle(s.CPUs, s.Kernel.CPUs)...)
	}
	b.wakeStats(s)
	b.ioStats(s, flush)
	s.RecorderCost = recorderCost(b.end, s.DurationNs, len(s.CPUs))
	b.warn(s)
	return s
}

// newStats is the report's head: what the trace's metadata says.
func (b *StatsBuilder) newStats() *Stats {
	m := b.meta
	s := &Stats{
		KernelRelease:   m.KernelRelease,
		CPUIdleDriver:   m.CPUIdleDriver,
		CPUIdleGovernor: m.CPUIdleGovernor,
		HaltPoll:        haltPollRun(m),
		HZ:              m.HZ,
		CutShort:        b.end == nil,
		Probes:          m.Probes,
		Inputs:          m.Inputs,
		Invalid:         b.invalid,
		OutsideWindow:   b.outside,
		WakeLatencyNs:   map[string]latency.Summary{},
		StatePeriods:    map[string]StatePeriods{},
		Mismatches:      []Mismatch{},
		Warnings:        []string{},
	}
	if s.Probes == nil {
		s.Probes = map[string]string{}
	}
	if b.end != nil {
		s.StopReason = b.end.StopReason
	}
	return s
}

// window sets the measured window and its length: the snapshots' where the
// trace has both, else what the records span.
func (b *StatsBuilder) window(s *Stats) {
	m := b.meta
	switch {
	case m.Start != nil && b.end != nil && b.end.Snapshot != nil:
		s.Window = Window{StartNs: m.Start.MonotonicNs, EndNs: b.end.Snapshot.MonotonicNs, Source: "snapshots"}
	case m.Start != nil:
		s.Window = Window{StartNs: m.Start.MonotonicNs, EndNs: max(b.last, b.lastIONs, m.Start.MonotonicNs), Source: "start snapshot to last record"}
	case b.haveRecord:
		s.Window = Window{StartNs: b.first, EndNs: b.last, Source: "records"}
	default:
		s.Window = Window{Source: "records"}
	}
	if s.Window.EndNs > s.Window.StartNs {
		s.DurationNs = s.Window.EndNs - s.Window.StartNs
	}
}

// lossStats sets the losses, per CPU and in total.
func (b *StatsBuilder) lossStats(s *Stats) {
	lossCPUs := make([]uint32, 0, len(b.losses))
	for c := range b.losses {
		lossCPUs = append(lossCPUs, c)
	}
	sort.Slice(lossCPUs, func(i, j int) bool { return lossCPUs[i] < lossCPUs[j] })
	s.Losses = []LossStats{}
	perCPU := make([]trace.Loss, 0, len(lossCPUs))
	for _, c := range lossCPUs {
		l := b.losses[c]
		perCPU = append(perCPU, l)
		s.IO.Lost += l.IOLost
		s.IO.Unmatched += l.IOUnmatched
		if l.Total()+l.IOUnmatched > 0 {
			s.Losses = append(s.Losses, LossStats{CPU: c, IdleLost: l.IdleLost, IOLost: l.IOLost, OtherLost: l.OtherLost, IOUnmatched: l.IOUnmatched,
				IOOrphaned: l.IOOrphaned, IdleUnpaired: l.IdleUnpaired, IOTableFull: l.IOTableFull, IOUnissued: l.IOUnissued})
		}
	}
	s.Loss = trace.NewLossAccount(perCPU, b.meta.Start, b.end)
	s.LostEvents = s.Loss.Total()
}

// cpuList is the CPUs the report covers: the recorded ones, those with a
// state table and those seen.
func (b *StatsBuilder) cpuList() []int {
	m := b.meta
	cpuSet := map[int]bool{}
	for _, c := range m.RecordedCPUList() {
		if c >= 0 && c < maxCPUs {
			cpuSet[c] = true
		}
	}
	for c, tab := range b.tables {
		if tab != nil && (len(m.RecordedCPUs) == 0 || cpuSet[c]) {
			cpuSet[c] = true
		}
	}
	for c, a := range b.cpus {
		if a != nil && a.periods > 0 {
			cpuSet[c] = true
		}
	}
	cpuList := make([]int, 0, len(cpuSet))
	for c := range cpuSet {
		cpuList = append(cpuList, c)
	}
	sort.Ints(cpuList)

	return cpuList
}

// tickStopsExceed says whether traced periods entered with the tick
// stopped are more than the kernel's idle_sleeps allow. The kernel counts
// each call that left the tick stopped or tried to, before the state's
// entry: attempts aborted after it leave no period, so it may count more.
// It counts fewer only by an entry whose tick stayed stopped while the
// kernel would not touch it (softirqs pending: can_stop_idle_tick()
// returns before the count; in 6.1 and 6.12 ten a boot, each logged as
// "NOHZ tick-stop error"; before 5.18 and in some trees since, every one,
// ten logged: the 1 %), and by the
// periods slipped past the start snapshot's hold, entered with the tick
// stopped (cpuAcc.tickSlipped: their stops may fall before the window).
func tickStopsExceed(traced, kernel, slipped uint64) bool {
	return traced > kernel+slipped+softirqRefusalsPerBoot+kernel/100
}

// softirqRefusalsPerBoot is how many tick stops 6.1 and 6.12 refuse for
// pending softirqs in a boot (report_idle_softirq(), kernel/time/tick-sched.c).
// The limit is the boot's, so it bounds each CPU's too.
const softirqRefusalsPerBoot = 10

// kernelTickStops is the rise of each CPU's idle_sleeps between the
// snapshots, for the CPUs with both readings and no fall.
func (b *StatsBuilder) kernelTickStops() map[int]uint64 {
	if b.meta.Start == nil || b.end == nil || b.end.Snapshot == nil {
		return nil
	}
	start := map[int]uint64{}
	for _, t := range b.meta.Start.Tick {
		start[t.CPU] = t.IdleSleeps
	}
	rise := map[int]uint64{}
	for _, t := range b.end.Snapshot.Tick {
		if s, ok := start[t.CPU]; ok && t.IdleSleeps >= s {
			rise[t.CPU] = t.IdleSleeps - s
		}
	}
	return rise
}

// cpuStats is one CPU's idle time and states; durationNs is the window's
// length, the CPU's own where the trace does not bound it; tickStops the
// kernel's by CPU (kernelTickStops).
func (b *StatsBuilder) cpuStats(c int, durationNs uint64, tickStops map[int]uint64) CPUStats {
	a := b.cpu(uint32(c))
	cs := CPUStats{CPU: c, Periods: a.periods, IdleNs: a.idleNs, LostIdle: b.losses[uint32(c)].IdleLost, States: []StateStats{},
		WakeCauses: map[string]uint64{}, IOWokeIdle: a.ioWoke, // the matcher's Flush (ioStats, after this) reports only misses
		TickStopped: a.tick, TickStoppedBefore: a.tickBefore}
	for _, cause := range trace.WakeCauses() {
		cs.WakeCauses[cause.String()] = a.causes[cause]
	}
	start := a.winStart
	if slices.Contains(b.meta.CameOnline, c) {
		// Offline until some instant after the start snapshot: its window
		// begins with its first idle period, not at the snapshot, or the
		// time it was offline would count as busy; without a period in
		// the window it has none to give (0).
		cs.CameOnline = true
		start = max(start, a.firstEntryNs)
	}
	switch {
	case cs.CameOnline && a.periods == 0:
	case start > 0 && a.winEnd != math.MaxUint64 && a.winEnd > start:
		cs.WindowNs = a.winEnd - start
	default:
		cs.WindowNs = durationNs
	}
	if cs.WindowNs > 0 {
		cs.IdleFraction = float64(a.idleNs) / float64(cs.WindowNs)
	}
	if d, ok := tickStops[c]; ok {
		cs.KernelTickStops = &d
	}
	tab := b.table(c)
	n := max(len(a.states), len(tab))
	if b.noDriver && tab == nil && n < 2 {
		n = 2 // show the default idle routine (state 1) even if unused
	}
	for i := 0; i < n; i++ {
		var acc stateAcc
		if i < len(a.states) {
			acc = a.states[i]
		}
		// A state with periods is listed even where the kernel counted
		// none of them (rejected entries, idle outside cpuidle): its
		// periods are in the CPU's, and a fleet's state rows split them.
		if i < len(tab) && tab[i].Disabled && tab[i].Name == "" && acc.periods == 0 {
			continue // a gap in the table
		}
		if b.noDriver && tab == nil && i == 0 && acc.periods == 0 {
			continue // cpu_idle_poll unused
		}
		if tab == nil && !b.noDriver && acc.periods == 0 {
			continue
		}
		st := StateStats{Index: i, Name: b.StateName(c, i), Usage: acc.usage, TimeNs: acc.timeNs, Above: acc.above, Below: acc.below}
		if i < len(tab) {
			el, tr := tab[i].ExitLatencyNs, tab[i].TargetResidencyNs
			st.TargetResidencyNs = &tr
			if !b.meta.ExitLatenciesUnknown { // an import's zeros are not exit latencies
				st.ExitLatencyNs = &el
			}
		}
		cs.States = append(cs.States, st)
	}
	return cs
}

// wakeStats sets the wake causes and each state's wake-up latency.
func (b *StatsBuilder) wakeStats(s *Stats) {
	s.WakeCauses.Counts = map[string]uint64{}
	for _, c := range trace.WakeCauses() {
		s.WakeCauses.Counts[c.String()] = 0
	}
	for c, n := range b.causes {
		if n > 0 {
			s.WakeCauses.Counts[trace.WakeCause(c).String()] += n
			s.WakeCauses.Total += n
		}
	}
	if s.WakeCauses.Total > 0 {
		unknown := b.causes[trace.WakeUnknown]
		s.WakeCauses.KnownFraction = float64(s.WakeCauses.Total-unknown) / float64(s.WakeCauses.Total)
	}
	s.WakeCauses.TopIRQs = []IRQCount{}
	b.irqs.each(func(irq int32, n uint64) {
		s.WakeCauses.TopIRQs = append(s.WakeCauses.TopIRQs, IRQCount{IRQ: irq, Count: n})
	})
	sort.Slice(s.WakeCauses.TopIRQs, func(i, j int) bool {
		x, y := s.WakeCauses.TopIRQs[i], s.WakeCauses.TopIRQs[j]
		if x.Count != y.Count {
			return x.Count > y.Count
		}
		return x.IRQ < y.IRQ
	})
	if len(s.WakeCauses.TopIRQs) > 10 {
		s.WakeCauses.TopIRQs = s.WakeCauses.TopIRQs[:10]
	}

	for name, h := range b.wake {
		s.WakeLatencyNs[name] = h.Summary()
	}
	for name, l := range b.lengths {
		s.StatePeriods[name] = StatePeriods{LengthNs: l.lengthNs.Summary(), TickStopped: l.tick, TickStoppedBefore: l.tickBefore}
	}
	s.WakeRequestedBeforeEntry = b.wakeEarly
}

// cutStreamsGapNs: in a trace cut short, idle and IO records that end
// further apart than this are worth a warning. The recorder writes every
// stream's records together each second, so a cut that falls between two
// streams' chunks of one write keeps a second more of one than of the
// other; an active stream's last records otherwise lie milliseconds apart.
const cutStreamsGapNs = 500_000_000

// streamsEndApart says, for a trace cut short, where one record stream
// ends well before the other: what the earlier one would have held after
// its end was lost with the cut, or never happened, and the trace cannot
// tell which. "" where they end together.
func (b *StatsBuilder) streamsEndApart(s *Stats) string {
	if !b.meta.Inputs.BlockIO || !b.haveRecord || s.Window.StartNs == 0 {
		return ""
	}
	at := func(ns uint64) float64 { return float64(ns-min(ns, s.Window.StartNs)) / 1e9 }
	switch {
	case b.lastIONs == 0 && b.last > s.Window.StartNs+cutStreamsGapNs:
		// A full disk lost the IO chunk of the write whose idle chunk
		// survived: 18,683 requests recorded, none in the file.
		return fmt.Sprintf("cut short: no block IO record is left, the idle periods end at +%.3f s; block IO before that was lost with the cut or did not happen, so the IO counts may cover less than the window",
			at(b.last))
	case b.lastIONs == 0:
		return ""
	case b.last > b.lastIONs+cutStreamsGapNs:
		return fmt.Sprintf("cut short: the block IO records end at +%.3f s, the idle periods at +%.3f s; block IO after +%.3f s was lost with the cut or did not happen, so the IO counts may cover less than the window",
			at(b.lastIONs), at(b.last), at(b.lastIONs))
	case b.lastIONs > b.last+cutStreamsGapNs:
		return fmt.Sprintf("cut short: the idle periods end at +%.3f s, the block IO records at +%.3f s; idle periods after +%.3f s were lost with the cut or did not happen, so the idle counts may cover less than the window",
			at(b.last), at(b.lastIONs), at(b.last))
	}
	return ""
}

// warn adds the warnings a reader of the report must see.
func (b *StatsBuilder) warn(s *Stats) {
	m := b.meta
	if b.end == nil {
		s.Warnings = append(s.Warnings, "no end record: without the end snapshot the kernel's counters cannot be checked")
		if w := b.streamsEndApart(s); w != "" {
			s.Warnings = append(s.Warnings, w)
		}
	}
	if s.Loss.Lost() > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("counts are lower bounds: %s", s.Loss))
	}
	if b.iowake.Uncertain > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("the idle and IO records lie too far apart in the file to pair them all in bounded memory: woke_idle_cpu may miss up to %d completions", b.iowake.Uncertain))
	}
	if b.invalid > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d records had an impossible CPU or state number and were skipped", b.invalid))
	}
	for _, c := range s.CPUs {
		if k := c.KernelTickStops; k != nil && tickStopsExceed(c.TickStopped.Stopped, *k, b.cpu(uint32(c.CPU)).tickSlipped) {
			s.Warnings = append(s.Warnings, fmt.Sprintf("CPU %d: %d idle periods were entered with the tick stopped, but the kernel counted %d stops (idle_sleeps): the recorded tick state is not what the kernel did", c.CPU, c.TickStopped.Stopped, *k))
		}
	}
	if !m.Inputs.WakeCauses {
		s.Warnings = append(s.Warnings, "this trace does not carry wake causes")
	}
	if !m.Inputs.WakeRequests {
		s.Warnings = append(s.Warnings, "this trace does not carry remote wake requests: no wake latency can be measured")
	}
}

// haltPollRun is m's haltpoll parameters where the haltpoll governor ran.
func haltPollRun(m *trace.Metadata) *trace.HaltPollParams {
	if !m.HaltPollRan() {
		return nil
	}
	return m.HaltPoll
}
