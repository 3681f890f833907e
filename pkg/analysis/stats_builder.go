package analysis

import (
	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// The streaming accumulation behind Stats: StatsBuilder and its per-CPU,
// per-state and per-device accumulators, fed one record at a time in
// memory independent of the trace length, and the ways to end a pass
// (Finish, Current, Next). It is apart from stats.go, which holds the
// report's shape and its entry points, because this is the part that runs
// per record; turning the accumulators into a report is stats_finish.go.

// stateAcc is one CPU's state: the kernel's counters as the trace gives
// them, and every period in it (counted by the kernel or not).
type stateAcc struct{ periods, usage, timeNs, above, below uint64 }

type cpuAcc struct {
	cpu              int
	states           []stateAcc
	winStart, winEnd uint64 // per-CPU window (exit times in (winStart, winEnd])
	periods, idleNs  uint64
	firstEntryNs     uint64 // of the first period counted (a CPU that came online: when it began)
	causes           causeCounts
	ioWoke           uint64
	wake             [maxStates]*latency.Histogram
	lengths          [maxStates]*lengthAcc
	tick, tickBefore TickStopped
	// Periods entered with the tick stopped up to tickHoldEnd, the end of
	// the start snapshot's hold on this CPU (trace.Snapshot.TickHold; 0
	// where unknown): the kernel may have counted their stops before the
	// window.
	tickHoldEnd, tickSlipped uint64
}

// lengthAcc is one state's idle periods, all CPUs: their lengths and the
// tick's state at their entry.
type lengthAcc struct {
	lengthNs         latency.Histogram
	tick, tickBefore TickStopped
}

// Add counts one period's tick state (Unknown: not known, not counted).
func (t *TickStopped) Add(s trace.Tristate) {
	if s != trace.Unknown {
		t.Known++
		if s == trace.Yes {
			t.Stopped++
		}
	}
}

type devAcc struct{ requests, errors uint64 }

// irqCounts counts periods by the interrupt that woke them: a slice for the
// usual numbers, a map beyond (a map per period was 2 % of stats' time).
type irqCounts struct {
	low  []uint64 // index: IRQ number below maxLowIRQ
	high map[int32]uint64
}

const maxLowIRQ = 4096

func (c *irqCounts) add(irq int32) {
	if irq < maxLowIRQ {
		if int(irq) >= len(c.low) {
			c.low = append(c.low, make([]uint64, int(irq)+1-len(c.low))...)
		}
		c.low[irq]++
		return
	}
	if c.high == nil {
		c.high = map[int32]uint64{}
	}
	c.high[irq]++
}

// each calls f for every IRQ counted, with its count.
func (c *irqCounts) each(f func(irq int32, n uint64)) {
	for irq, n := range c.low {
		if n > 0 {
			f(int32(irq), n)
		}
	}
	for irq, n := range c.high {
		f(irq, n)
	}
}

// causeCounts counts periods by wake cause: an array, not a map, as it is
// bumped for every period (a map's hashing was a sixth of stats' time).
type causeCounts [1 << 8]uint64

// StatsBuilder accumulates Stats in one streaming pass with memory
// independent of the trace length. Feed it with AddIdle and AddBlockIO (both
// fit trace.Visitor), and AddLoss where the reader reports loss records; then
// call Finish.
type StatsBuilder struct {
	*Rules // state names and tables, the windows
	meta   *trace.Metadata
	end    *trace.End

	cpus []*cpuAcc

	haveRecord  bool
	first, last uint64
	lastIONs    uint64 // latest completion of a request in the window

	causes causeCounts
	irqs   irqCounts
	wake   map[string]*latency.Histogram
	// lengths is per state name, as wake; cpuAcc.lengths points into it.
	lengths map[string]*lengthAcc
	// wakeEarly counts remote wake-ups requested before the idle entry.
	wakeEarly uint64
	// eachPeriod, when set, sees every idle period the builder counts
	// (OnPeriod).
	eachPeriod func(p *trace.IdlePeriod)
	io         latency.Histogram
	taskIO     latency.Histogram
	ioFilter   trace.IOFilter
	ioErr      uint64
	devs       map[uint32]*devAcc
	// lastDev is devs[lastDevID]: requests come in runs from one device.
	lastDev   *devAcc
	lastDevID uint32
	iowake    iowake.Matcher[uint32, struct{}] // a period's payload is its CPU
	ioWoke    causeCounts                      // completions that woke an idle CPU, by the period's wake cause
	// recordedSet: the CPUs whose idle periods the trace keeps; a
	// completion on another one is counted in ioWokeUnknown, not matched.
	recordedSet   trace.CPUSet
	ioWokeUnknown uint64
	losses        map[uint32]trace.Loss
	outside       OutsideWindow
	invalid       uint64
}

// NewStatsBuilder prepares a builder. end may be nil (a trace cut short);
// when present it must be known before the records are fed, because it
// bounds the recording window.
func NewStatsBuilder(meta *trace.Metadata, end *trace.End) *StatsBuilder {
	if meta == nil {
		meta = &trace.Metadata{}
	}
	b := &StatsBuilder{
		Rules:   NewRules(meta, end),
		meta:    meta,
		end:     end,
		wake:    map[string]*latency.Histogram{},
		lengths: map[string]*lengthAcc{},
		devs:    map[uint32]*devAcc{},
		losses:  map[uint32]trace.Loss{},
	}
	b.recordedSet = meta.RecordedCPUSet()
	b.iowake.Match = func(cause trace.WakeCause, cpu uint32, _ struct{}) {
		b.ioWoke[cause]++
		if a := b.cpu(cpu); a != nil {
			a.ioWoke++
		}
	}
	b.iowake.Miss = func(struct{}) {}
	return b
}

func (b *StatsBuilder) cpu(c uint32) *cpuAcc {
	if c >= maxCPUs {
		return nil
	}
	for int(c) >= len(b.cpus) {
		b.cpus = append(b.cpus, nil)
	}
	a := b.cpus[c]
	if a == nil {
		a = &cpuAcc{cpu: int(c)}
		a.winStart, a.winEnd = b.cpuWindow(c)
		if _, end, ok := b.start.TickHold(int(c), b.recorded); ok {
			a.tickHoldEnd = end
		}
		b.cpus[c] = a
	}
	return a
}

// AddIdle feeds one idle period. It keeps no reference to p.
func (b *StatsBuilder) AddIdle(p *trace.IdlePeriod) error {
	a := b.cpu(p.CPU)
	if a == nil || !b.Valid(p) {
		b.invalid++
		return nil
	}
	b.iowake.Period(p.CPU, p.EntryNs, p.ExitNs, p.WakeCause, p.CPU)
	// The kernel updates its counters at the exit, so a period belongs to
	// the window its exit falls in.
	if !b.IdleInWindow(p) {
		b.outside.IdlePeriods++
		return nil
	}
	if !b.haveRecord || p.EntryNs < b.first {
		b.first = p.EntryNs
	}
	if !b.haveRecord || p.ExitNs > b.last {
		b.last = p.ExitNs
	}
	b.haveRecord = true
	if b.eachPeriod != nil {
		b.eachPeriod(p)
	}

	idx := int(p.State)
	for idx >= len(a.states) {
		a.states = append(a.states, stateAcc{})
	}
	res, counted := p.Residency()
	s := &a.states[idx]
	s.periods++
	if counted {
		// The kernel counts neither the use nor the time of an entry it
		// rejected or of idle outside cpuidle_enter_state (default_idle_call
		// while the governor is switched, cpu_idle_poll).
		s.usage++
		s.timeNs += res
	}
	if above, below, ok := b.Classify(p); ok {
		if above {
			s.above++
		}
		if below {
			s.below++
		}
	}
	if a.periods == 0 {
		a.firstEntryNs = p.EntryNs
	}
	a.periods++
	a.idleNs += res
	l := a.lengths[idx]
	if l == nil {
		name := b.StateName(a.cpu, idx)
		if l = b.lengths[name]; l == nil {
			l = &lengthAcc{}
			b.lengths[name] = l
		}
		a.lengths[idx] = l
	}
	l.lengthNs.Record(p.ResidencyNs())
	l.tick.Add(p.TickStopped)
	l.tickBefore.Add(p.TickStoppedBefore)
	a.tick.Add(p.TickStopped)
	a.tickBefore.Add(p.TickStoppedBefore)
	if p.TickStopped == trace.Yes && p.EntryNs <= a.tickHoldEnd {
		a.tickSlipped++
	}

	b.causes[p.WakeCause]++
	a.causes[p.WakeCause]++
	if p.WakeCause == trace.WakeIRQ && p.WakeIRQ >= 0 {
		b.irqs.add(p.WakeIRQ)
	}
	if lat, ok := p.WakeLatencyNs(); ok {
		h := a.wake[idx]
		if h == nil {
			name := b.StateName(a.cpu, idx)
			h = b.wake[name]
			if h == nil {
				h = &latency.Histogram{}
				b.wake[name] = h
			}
			a.wake[idx] = h
		}
		h.Record(lat)
	} else if p.RequestedBeforeEntry() {
		b.wakeEarly++
	}
	return nil
}

// OnPeriod has f called with each idle period the builder counts (those
// in the window), for a caller that splits stats' figures finer than it
// does (pkg/fleet: per CPU and state). f must not keep p. Call it before
// the first record.
func (b *StatsBuilder) OnPeriod(f func(p *trace.IdlePeriod)) { b.eachPeriod = f }

// SetIOFilter makes the IO figures (latency, task latency, errors, woke
// an idle CPU) cover the requests f selects; the per-device counts, which
// are checked against the kernel's, still count every request. Call it
// before Visitor (which decides the fields a scan decodes by the filter)
// and before the first record.
func (b *StatsBuilder) SetIOFilter(f trace.IOFilter) { b.ioFilter = f }

// AddBlockIO feeds one block IO request. It keeps no reference to io.
func (b *StatsBuilder) AddBlockIO(io *trace.BlockIO) error {
	if !b.IOInWindow(io) {
		b.outside.IORequests++
		return nil
	}
	b.lastIONs = max(b.lastIONs, io.CompleteNs)
	d := b.lastDev
	if d == nil || io.Dev != b.lastDevID {
		d = b.devs[io.Dev]
	}
	if d == nil {
		if len(b.devs) >= 4096 { // corrupt input: do not grow without bound
			b.invalid++
			return nil
		}
		d = &devAcc{}
		b.devs[io.Dev] = d
	}
	b.lastDev, b.lastDevID = d, io.Dev
	d.requests++
	if io.Error != 0 {
		d.errors++
	}
	if !b.ioFilter.Match(io) {
		return nil
	}
	b.io.Record(io.LatencyNs())
	if lat, ok := iowake.TaskLatencyNs(io); ok {
		b.taskIO.Record(lat)
	}
	if io.Error != 0 {
		b.ioErr++
	}
	if !b.recordedSet.Has(io.CompleteCPU) {
		b.ioWokeUnknown++ // that CPU's idle periods are not in the trace
		return nil
	}
	b.iowake.Completion(io.CompleteCPU, io.CompleteNs, struct{}{})
	return nil
}

// AddLoss feeds one loss record (cumulative per CPU; the largest is kept).
func (b *StatsBuilder) AddLoss(l *trace.Loss) error {
	b.addLoss(*l)
	return nil
}

func (b *StatsBuilder) addLoss(l trace.Loss) {
	if len(b.losses) >= maxCPUs {
		return
	}
	o := b.losses[l.CPU]
	o.CPU = l.CPU
	o = o.Max(l)
	b.losses[l.CPU] = o
}

// Visitor returns the trace.Visitor that feeds this builder.
// It skips the fields the builder never reads, and those of the requests
// as well where no IO filter needs them.
func (b *StatsBuilder) Visitor() trace.Visitor {
	skip := trace.IdleGovernorInputs
	if b.ioFilter.Spec == "" {
		skip |= trace.BlockIOShape | trace.BlockIOTask
	}
	return trace.Visitor{Idle: b.AddIdle, BlockIO: b.AddBlockIO, Loss: b.AddLoss, Skip: skip}
}

// Finish computes the statistics; losses are merged with those fed so far
// and with the end record's.
func (b *StatsBuilder) Finish(losses []trace.Loss) *Stats { return b.finish(losses, true) }

// Current computes the statistics of what was fed so far and leaves the
// builder ready for more (a live view's running totals): unlike Finish,
// completions still waiting for their idle period (or periods for their
// completion) stay held, to be counted when the other side comes.
func (b *StatsBuilder) Current() *Stats { return b.finish(nil, false) }

// Next returns a builder for the records that come after those fed to b,
// on the same metadata and IO filter, and hands it b's IO-wake matcher with
// what it holds: a completion whose idle period comes after the cut (or the
// reverse) is counted by the builder that receives the second of the two.
// A live view calls it at the end of each interval, then Finish on b; b
// must not be fed after it.
func (b *StatsBuilder) Next() *StatsBuilder {
	n := NewStatsBuilder(b.meta, b.end)
	n.ioFilter = b.ioFilter
	n.iowake, b.iowake = b.iowake, n.iowake
	// Each keeps its own callbacks, which count into it.
	n.iowake.Match, b.iowake.Match = b.iowake.Match, n.iowake.Match
	n.iowake.Miss, b.iowake.Miss = b.iowake.Miss, n.iowake.Miss
	return n
}
