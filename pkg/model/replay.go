package model

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Replay runs recorded idle periods through a set of policies on one
// profile and accumulates what each would have cost (see cost.go and
// docs/DESIGN.md "Cost model").
//
// Wiring (two passes over the file when the table polls or a policy uses
// blkqos, one otherwise):
//
//	rp, err := model.NewReplay(prof, r.Meta, policies)
//	if v, ok := rp.Prepass(r.End); ok {
//		err = r.Scan(v)
//	}
//	err = r.Scan(trace.Visitor{Idle: rp.Idle, BlockIO: rp.BlockIO})
//	results, err := rp.Finish()
//
// Ordering: Idle must see each CPU's periods in exit order (the file's
// order); CPUs may interleave arbitrarily. Block IO may arrive before or
// after the idle periods around its completion: a completion waits in a
// bounded per-CPU queue until that CPU's idle periods have passed its
// time, and is matched against a ring of the CPU's recent interrupt
// wake-ups (see ioRing). blkqos needs each CPU's IO issue times before the
// idle periods they affect: the prepass keeps them as merged per-CPU
// intervals [issue, issue+timeout) — memory grows with the number of IO
// bursts separated by more than the timeout, not with the number of
// requests. Without the prepass, issues are learned from BlockIO in the
// main pass and only affect periods processed after them.
//
// Memory is independent of the trace length apart from those intervals.
type Replay struct {
	prof      *Profile
	meta      *trace.Metadata
	tick      int64
	pols      []*polSim
	cpus      []*cpuShared
	agreement bool
	// kernelPollNs is the poll limit the recorded kernel used.
	kernelPollNs int64
	// minPollTimeoutNs is the shortest recorded poll time-out (0: none);
	// see pollFloorNs. From the trace's end record or the prepass: the
	// whole trace's; without either, the shortest so far.
	minPollTimeoutNs int64
	recTab           *table // the recorded table, for IO latency subtraction
	blk              []*blkWindow
	prepassed        bool
	ioSeen           bool
	ioDevice         latency.Histogram // IO latency less the exit latency the completing CPU paid: the same under every policy
	finished         bool
	stats            Stats
	elScratch        []int64
	ioMatch          iowake.Matcher[ioWakeCost, *ioReq] // the completing CPU's wake-up
	taskMatch        iowake.Matcher[ioWakeCost, *ioReq] // the waiting task's CPU's
	taskSeen         bool
	ioLo, ioHi       uint64 // completions counted (SetIOWindow)
	ioFilter         trace.IOFilter
	costSlab         []int64
	// For Changes: the wake-ups the workload sees, the requests whose task
	// latency was counted, and per CPU the counted IO's issues and the
	// completions that woke an idle CPU.
	wakeUps, taskCounted  uint64
	ioIssueCPU, ioWokeCPU []uint64
}

// Stats counts what the replay had to assume or could not use.
type Stats struct {
	IdlePeriods      uint64 // recorded periods replayed
	Episodes         uint64 // idle episodes after chaining poll timeouts and idle tick wake-ups
	ChainedPollEnds  uint64 // recorded periods ended by a poll time limit and continued by the next
	ChainedTickEnds  uint64 // recorded periods ended by a tick with idle re-entered at once
	DerivedNextTimer uint64 // periods without a recorded next timer (derived, see Assumptions)
	ClampedPeriods   uint64 // periods overlapping the previous one on their CPU, clamped
	BadState         uint64 // periods whose state index is outside the profile (skipped by recorded)
	IOCompletions    uint64 // completed block requests seen
	IOWokeIdle       uint64 // of which woke an idle CPU (package iowake's rule): the policies set their latency
	IOUncertain      uint64 // of the others, completions the bounded matcher may have missed (see iowake.Matcher)
	TaskIO           uint64 // of the completions, those whose task waited for them (iowake.TaskLatencyNs)
	TaskWokeIdle     uint64 // of which the waiting task's CPU was idle and woken for it
}

// episode end kinds of a recorded period
type endKind uint8

const (
	endGenuine endKind = iota // a wake-up the workload sees
	endTick                   // the tick woke the CPU
	endPoll                   // a polling state hit its time limit
)

const (
	// Where the trace cannot tell idle loops apart: a poll time-out or a
	// tick wake-up re-entered within these is taken to have found nothing
	// to do (same idle episode). Where it can, re-entry in the same loop
	// within one tick says so, however slow the interrupt was (under
	// emulation 20–100 µs).
	chainGapPollNs = 50_000
	chainGapTickNs = 20_000
	pollSnapNs     = 20_000  // a policy poll deadline this close before a recorded poll timeout is that timeout
	tickSnapNs     = 100_000 // a synthetic tick this close before a recorded tick wake is that tick
	maxCPUs        = trace.MaxCPUs
)

type periodInfo struct {
	e, x      int64
	kind      endKind
	cause     trace.WakeCause
	rec       int // recorded state index, -1 if outside the profile
	nextTimer int64
	// deltaNext is the kernel's delta_next for the recorded selection at e
	// (absolute: the next clock event); unknownTime if not recorded.
	deltaNext int64
	// gotTick: the recorded period saw a tick (tick_nohz_idle_got_tick at
	// reflect) without ending on it.
	gotTick bool
	// pollRanOn: the recorded stay polled past the kernel's limit, to a
	// wake-up or a late time-out (poll_idle() looks at the clock only
	// every 200 loops, which under emulation can be long after the limit).
	pollRanOn bool
	// pollTOKernel: a poll's PollTimedOut is dev->poll_time_limit as the
	// kernel left it (read with the core's counters), not the recorder's
	// guess from the wake-ups it saw.
	pollTOKernel bool
	// tickFree: the recorded stay proves no tick came before x: a halted
	// state with the tick running ends at the first tick (one ended it at
	// x, or none came), and a poll that ends without got_idle_tick saw none.
	tickFree bool
	// lateFrom: the CPU's clock event device was due at lateFrom
	// (deltaNext, read from the device at the entry), before x, yet the
	// halted stay lasted to x: the interrupt, which would have ended it,
	// came late (a host that did not run the vCPU, an SMI), so no tick of
	// the policy's could have come in [lateFrom, x) either. noLimit when
	// the device was on time, unknown, or the stay polled (an interrupt
	// does not end a poll).
	lateFrom int64
	// residency is the stay as the kernel's governor measured it
	// (last_residency_ns): the cpuidle core's own figure when recorded.
	residency int64
	// idleEntry stands for the kernel's idle entry time
	// (tick_sched.idle_entrytime) that the recorded sleep length and
	// delta_next count from. The trace does not carry it: EntryNs, which it
	// precedes by the governor's own run, or the previous period's when a
	// poll time-out was re-entered with both inputs unchanged (no interrupt
	// restarted the idle time); only re-selections after a tick in the
	// model see the difference.
	idleEntry int64
	nrIOWait  int64 // 0 when unknown
	// aborts: attempts aborted just before (the kernel recorded them); they
	// affect the first selection of the period only.
	aborts      int
	tickStopped bool
	// devStopped: the tick's state the recorded deltaNext was read in, the
	// one the recorded governor's decision left (the recorder reads the
	// clock event device at the entry, after tick_nohz_idle_stop_tick).
	devStopped bool
	chain      bool
	// loop: the period opens an idle loop (Yes: the CPU ran a task since
	// the previous one, and leaving the loop restarted a stopped tick) or
	// continues one (No); from the recorder, else from the recorded tick
	// states where they tell.
	loop trace.Tristate
	// stoppable: the kernel would have stopped the tick at e had the
	// governor asked (No: a timer-wheel timer due within the tick, or
	// nothing may stop it); Unknown is taken as stoppable.
	stoppable trace.Tristate
	prevExit  int64
}

type cpuShared struct {
	id       int
	seen     bool
	prevExit int64
	prevKind endKind
	// The previous period's idle entry time and the sleep length and
	// delta_next recorded from it (periodInfo.idleEntry).
	prevIdleEntry                    int64
	prevNextTimerNs, prevNextEventNs int64
	prevSleepKnown                   bool
	prevTickStopped                  bool // the kernel's tick after the previous period's decision
	tickRef                          int64
	// tickLateNs: how late the CPU's last recorded timer or tick interrupt
	// came after the device's deadline, less the recorded state's exit
	// latency (periodInfo.lateFrom); the replay's own ticks come as late.
	tickLateNs int64
	nbCache    int64 // a tick boundary on the grid of tickRef (nextBoundary)
	nbValid    bool
	baseLat    int64
}

type blkWindow struct {
	timeout int64
	cpus    [][]ival
}

type ival struct{ start, end int64 }

// NewReplay prepares a replay of policies on prof. meta is the trace's
// metadata (PM QoS, HZ, haltpoll parameters, kernel release, recorded
// state table). `recorded` policies need the recorded (or measured)
// profile; agreement is reported only on those profiles.
func NewReplay(prof *Profile, meta *trace.Metadata, policies []Policy) (*Replay, error) {
	if prof == nil || len(prof.States) == 0 {
		return nil, fmt.Errorf("whatif: profile has no states")
	}
	if len(prof.States) > MaxStates {
		return nil, fmt.Errorf("whatif: profile %s has %d states, the kernel allows at most %d", prof.Name, len(prof.States), MaxStates)
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("whatif: no policies")
	}
	if meta == nil {
		meta = &trace.Metadata{}
	}
	r := &Replay{prof: prof, meta: meta, tick: prof.TickNs()}
	recProf, err := Recorded(meta)
	if err != nil {
		return nil, err
	}
	onRecorded := (prof.Name == "recorded" || prof.Name == "measured") && len(prof.States) == len(recProf.States)
	r.agreement = onRecorded
	if onRecorded {
		r.recTab = newTable(prof, nil, nil, -1)
	} else {
		r.recTab = newTable(recProf, nil, nil, -1)
	}
	kv := NewestVersion
	if v, ok := RecordedVersion(meta); ok {
		kv = v
	}
	// The limit the kernel polled with, on the recorded table.
	r.kernelPollNs = genericPollLimit(r.recTab, kernelPollRule(kv), 0)
	for _, pol := range policies {
		ps, err := newPolSim(r, prof, pol, kv, onRecorded)
		if err != nil {
			return nil, err
		}
		r.pols = append(r.pols, ps)
	}
	r.elScratch = make([]int64, len(r.pols))
	r.ioHi = math.MaxUint64
	r.initIO()
	return r, nil
}

// Prepass gives what the replay must see of the whole trace before its
// first period, and false when it needs nothing: blkqos needs every CPU's
// block IO issue times before its idle periods, and a polling state needs
// the shortest poll time-out (pollFloorNs) where the trace's end record
// (end may be nil) does not give it. Learnt only as the periods pass, the
// replay's polls before the trace's first time-out would end at the bare
// limit (hundreds of extra polls at the start of a lab recording, enough
// to fail its above/below bar).
func (r *Replay) Prepass(end *trace.End) (trace.Visitor, bool) {
	var v trace.Visitor
	if len(r.blk) > 0 {
		v.BlockIO = func(b *trace.BlockIO) error { r.PrepareBlockIO(b); return nil }
	}
	switch {
	case !slices.Contains(r.recTab.polling, true):
	case end != nil && end.ShortestPollTimeoutNs != nil:
		r.minPollTimeoutNs = int64(min(*end.ShortestPollTimeoutNs, math.MaxInt64))
	default:
		v.Idle = func(p *trace.IdlePeriod) error {
			r.notePollTimeout(p, int(p.State))
			return nil
		}
	}
	return v, v.BlockIO != nil || v.Idle != nil
}

// PrepareBlockIO feeds one block request in the prepass (issue times only).
func (r *Replay) PrepareBlockIO(b *trace.BlockIO) {
	r.prepassed = true
	r.addIssue(b)
}

// notePollTimeout keeps the shortest recorded poll time-out: a period in a
// polling state that ended at its time limit (as the trace writer keeps
// End.ShortestPollTimeoutNs). Without a prepass it is all the replay
// learns the floor from.
func (r *Replay) notePollTimeout(p *trace.IdlePeriod, rec int) {
	ns, ok := p.PollTimeoutNs()
	if !ok || rec < 0 || rec >= r.recTab.n || !r.recTab.polling[rec] {
		return
	}
	if d := int64(min(ns, math.MaxInt64)); r.minPollTimeoutNs == 0 || d < r.minPollTimeoutNs {
		r.minPollTimeoutNs = d
	}
}

func (r *Replay) addIssue(b *trace.BlockIO) {
	if b.IssueNs == 0 || b.IssueCPU >= maxCPUs {
		return
	}
	t := int64(b.IssueNs)
	for _, w := range r.blk {
		c := int(b.IssueCPU)
		for len(w.cpus) <= c {
			w.cpus = append(w.cpus, nil)
		}
		w.cpus[c] = addInterval(w.cpus[c], ival{t, t + w.timeout})
	}
}

// addInterval inserts iv into a sorted list of disjoint intervals, merging.
func addInterval(l []ival, iv ival) []ival {
	n := len(l)
	if n == 0 || iv.start > l[n-1].end {
		return append(l, iv)
	}
	if iv.start >= l[n-1].start {
		l[n-1].end = max(l[n-1].end, iv.end)
		return l
	}
	// out of order: find the first interval ending at or after iv.start
	i := sort.Search(n, func(k int) bool { return l[k].end >= iv.start })
	j := i
	for j < n && l[j].start <= iv.end {
		iv.start = min(iv.start, l[j].start)
		iv.end = max(iv.end, l[j].end)
		j++
	}
	out := append(l[:i:i], iv)
	return append(out, l[j:]...)
}

func (w *blkWindow) active(cpu int, t int64) bool {
	if cpu >= len(w.cpus) {
		return false
	}
	l := w.cpus[cpu]
	i := sort.Search(len(l), func(k int) bool { return l[k].end > t })
	return i < len(l) && l[i].start <= t
}

func (r *Replay) cpu(id uint32) *cpuShared {
	if int(id) < len(r.cpus) {
		return r.cpus[id]
	}
	return r.addCPUs(int(id))
}

func (r *Replay) addCPUs(c int) *cpuShared {
	for len(r.cpus) <= c {
		n := len(r.cpus)
		cs := &cpuShared{id: n, baseLat: r.baseLatency(n)}
		r.cpus = append(r.cpus, cs)
		for _, ps := range r.pols {
			ps.cpus = append(ps.cpus, ps.newCPU())
		}
	}
	return r.cpus[c]
}

func (r *Replay) baseLatency(cpu int) int64 {
	lat := noLimit
	q := r.meta.PMQoS
	// 0 is a real constraint (everything polls) only in metadata a recorder
	// wrote; a zero-valued Metadata (synthetic input) means "not known".
	if q.CPUDMALatencyUs > 0 && q.CPUDMALatencyUs < math.MaxInt64/1000 || q.CPUDMALatencyUs == 0 && r.meta.FormatVersion > 0 {
		lat = min(lat, q.CPUDMALatencyUs*1000)
	}
	if cpu < len(q.ResumeLatencyUs) && q.ResumeLatencyUs[cpu] >= 0 {
		lat = min(lat, q.ResumeLatencyUs[cpu]*1000)
	}
	return lat
}

// SetKernelPollRule says which rule set the recorded kernel's poll limit
// where it was not its release's own (the lab kernel's
// cpuidle.lab_poll_rule switch). Call it before the first period.
func (r *Replay) SetKernelPollRule(rule PollRule) {
	r.kernelPollNs = genericPollLimit(r.recTab, rule, 0)
}

// pollFloorNs is the shortest poll the kernel can time out
// (drivers/cpuidle/poll_state.c v6.12: poll_idle() reads the clock once
// every POLL_IDLE_RELAX_COUNT cpu_relax() loops, which takes microseconds
// on servers and tens of them under emulation): the recording's shortest
// time-out where even that lies clearly above the kernel's limit (the
// limit fell inside one check interval), else 0.
func (r *Replay) pollFloorNs() int64 {
	if r.minPollTimeoutNs > r.kernelPollNs+pollSnapNs {
		return r.minPollTimeoutNs
	}
	return 0
}

// PolicyError is a policy that does not fit the profile it is replayed on:
// a mistake in how the replay was asked for, not in the trace.
type PolicyError struct{ msg string }

func (e *PolicyError) Error() string { return e.msg }

func policyErrorf(format string, a ...any) error { return &PolicyError{fmt.Sprintf(format, a...)} }

// Idle replays one recorded idle period.
func (r *Replay) Idle(p *trace.IdlePeriod) error {
	if r.finished {
		return fmt.Errorf("whatif: Idle after Finish")
	}
	if p.CPU >= maxCPUs {
		return fmt.Errorf("whatif: idle period on CPU %d: CPU number out of range", p.CPU)
	}
	c := r.cpu(p.CPU)
	pi := r.readPeriod(c, p)
	pi.prevExit = c.prevExit
	if !pi.chain {
		r.stats.Episodes++
	}
	r.stats.IdlePeriods++
	if pi.kind == endTick {
		// Ticks are periodic whatever the policy does: the one that ends
		// this period sets the grid for the whole period, not only after.
		c.tickRef = pi.x
		c.nbValid = false
	}
	els := r.elScratch[:len(r.pols)]
	for k, ps := range r.pols {
		ps.periods++
		cs := ps.cpus[c.id]
		var el int64
		switch ps.gk {
		case gkRecorded:
			el = ps.periodRecorded(cs, &pi)
		case gkOracle:
			el = ps.periodOracle(c, cs, &pi)
		default:
			el = ps.periodGov(c, cs, &pi)
		}
		els[k] = el
	}
	if pi.kind == endGenuine {
		r.wakeUps++
		for k := 1; k < len(els); k++ {
			if els[k] != els[0] {
				ch := &r.pols[k].chg
				ch.wake++
				ch.cpuWake = bump(ch.cpuWake, c.id)
			}
		}
	}
	c.seen = true
	c.prevExit = pi.x
	c.prevKind = pi.kind
	if pi.lateFrom != noLimit && pi.rec >= 0 && pi.rec < r.recTab.n && (pi.kind == endTick || pi.cause == trace.WakeTimer) {
		c.tickLateNs = max(pi.x-pi.lateFrom-r.wakeEl(&pi), 0)
	}
	r.ioPeriod(p, &pi, els)
	return nil
}

// readPeriod is a recorded period as the replay sees it: clamped to its
// CPU's timeline, how it ended, the tick's state, what the kernel counted,
// whether it continues the previous one, and the timers the governors read.
func (r *Replay) readPeriod(c *cpuShared, p *trace.IdlePeriod) (pi periodInfo) {
	pi = periodInfo{e: int64(p.EntryNs), x: int64(p.ExitNs), cause: p.WakeCause, rec: int(p.State)}
	if c.seen && pi.e < c.prevExit {
		pi.e = c.prevExit
		r.stats.ClampedPeriods++
	}
	if pi.x < pi.e {
		pi.x = pi.e
	}
	if pi.rec >= len(r.prof.States) {
		pi.rec = -1
		r.stats.BadState++
	}
	switch {
	case p.PollTimedOut == trace.Yes || p.WakeCause == trace.WakePollTimeout:
		pi.kind = endPoll
	case p.WakeCause == trace.WakeTick:
		pi.kind = endTick
	default:
		pi.kind = endGenuine
	}
	r.periodTick(c, p, &pi)
	r.periodKernelFacts(p, &pi)
	r.periodChain(c, p, &pi)
	r.periodTimers(p, &pi)
	return pi
}

// periodTick reads the tick's state before and after the governor's
// decision and whether the entry began an idle loop.
func (r *Replay) periodTick(c *cpuShared, p *trace.IdlePeriod, pi *periodInfo) {
	// The governors' tick_nohz_tick_stopped() input is the tick state before
	// their decision; traces without it carry only the state after it.
	if p.TickStoppedBefore != trace.Unknown {
		pi.tickStopped = p.TickStoppedBefore == trace.Yes
	} else {
		pi.tickStopped = p.TickStopped == trace.Yes
	}
	pi.loop, pi.stoppable = p.IdleLoopEntry, p.TickStoppable
	if pi.loop == trace.Unknown && c.seen {
		// A stopped tick survives only inside a loop; one stopped before
		// and running now was restarted by leaving it.
		switch {
		case p.TickStoppedBefore == trace.Yes:
			pi.loop = trace.No
		case p.TickStoppedBefore == trace.No && c.prevTickStopped:
			pi.loop = trace.Yes
		}
	}
	c.prevTickStopped = p.TickStopped == trace.Yes
	pi.devStopped = pi.tickStopped
	if p.TickStopped != trace.Unknown {
		pi.devStopped = p.TickStopped == trace.Yes
	}
	if r.meta.NoHZ == "off" {
		pi.stoppable = trace.No
	}
}

// periodKernelFacts reads what the kernel itself saw of the period: its
// tick, its poll time limit, iowaiters, aborted attempts and the residency
// it counted.
func (r *Replay) periodKernelFacts(p *trace.IdlePeriod, pi *periodInfo) {
	d := pi.x - pi.e
	r.notePollTimeout(p, pi.rec)
	pi.gotTick = p.GotTick == trace.Yes
	pi.pollRanOn = p.PollTimedOut != trace.Unknown && r.kernelPollNs > 0 && d > r.kernelPollNs
	pi.pollTOKernel = p.KernelKnown && p.PollTimedOut != trace.Unknown
	if p.TickStopped == trace.No && pi.rec >= 0 && pi.rec < r.recTab.n {
		// A halted stay ends at the first tick; a poll that saw none says so.
		pi.tickFree = !r.recTab.polling[pi.rec] || p.GotTick == trace.No
	}
	pi.nrIOWait = int64(max(p.NrIOWait, 0))
	switch {
	case p.AbortsBefore >= 0:
		pi.aborts = int(p.AbortsBefore)
	case p.KernelKnown && p.AbortedBefore:
		pi.aborts = 1 // at least one
	}
	pi.residency = d
	if res, counted := p.Residency(); !counted { // outside cpuidle_enter_state, or rejected
		pi.residency = -1
	} else if p.KernelCounted {
		pi.residency = int64(min(res, uint64(maxSleepNs)))
	}
}

// periodChain says whether the period continues the previous one without a
// task in between (a poll time-out or a tick re-entered at once), and so
// where the idle entry the governors count from lies.
func (r *Replay) periodChain(c *cpuShared, p *trace.IdlePeriod, pi *periodInfo) {
	// A task ran in between: the wake-up was a genuine one.
	if c.seen && pi.loop != trace.Yes {
		gap := pi.e - c.prevExit
		pollGap, tickGap := int64(chainGapPollNs), int64(chainGapTickNs)
		if pi.loop == trace.No {
			pollGap, tickGap = r.tick, r.tick
		}
		switch c.prevKind {
		case endPoll:
			pi.chain = gap <= pollGap
			if pi.chain {
				r.stats.ChainedPollEnds++
			}
		case endTick:
			pi.chain = gap <= tickGap
			if pi.chain {
				r.stats.ChainedTickEnds++
			}
		}
	}
	pi.idleEntry = pi.e
	if pi.chain && c.prevKind == endPoll && p.NextTimerKnown && p.NextEventKnown && c.prevSleepKnown &&
		p.NextTimerNs == c.prevNextTimerNs && p.NextEventNs == c.prevNextEventNs {
		// Re-entered after a poll time-out with both inputs unchanged:
		// no interrupt moved the idle entry time they count from.
		pi.idleEntry = c.prevIdleEntry
	}
	c.prevIdleEntry, c.prevNextTimerNs, c.prevNextEventNs = pi.idleEntry, p.NextTimerNs, p.NextEventNs
	c.prevSleepKnown = p.NextTimerKnown && p.NextEventKnown
}

// periodTimers places the next timer and the next event the governors ask
// for, derived from the period where the trace lacks them.
func (r *Replay) periodTimers(p *trace.IdlePeriod, pi *periodInfo) {
	d := pi.x - pi.e
	pi.deltaNext = unknownTime
	if p.NextEventKnown {
		pi.deltaNext = pi.idleEntry + min(p.NextEventNs, maxSleepNs)
	}
	if p.NextTimerKnown { // negative: already due when the governor asked
		pi.nextTimer = pi.idleEntry + min(p.NextTimerNs, maxSleepNs)
	} else {
		r.stats.DerivedNextTimer++
		if p.WakeCause == trace.WakeTimer {
			pi.nextTimer = pi.x
		} else {
			k := d/r.tick + 1
			pi.nextTimer = pi.e + k*r.tick
		}
	}
	pi.lateFrom = noLimit
	polled := pi.kind == endPoll || pi.rec >= 0 && pi.rec < r.recTab.n && r.recTab.polling[pi.rec]
	if pi.deltaNext != unknownTime && pi.deltaNext < pi.x && !polled {
		pi.lateFrom = pi.deltaNext
	}
}

// Stats returns the replay's counters so far.
func (r *Replay) Stats() Stats { return r.stats }

// Finish closes every open idle episode and returns one Result per policy
// in the order given.
func (r *Replay) Finish() ([]Result, error) {
	if !r.finished {
		r.finished = true
		for _, c := range r.cpus {
			for _, ps := range r.pols {
				ps.flush(c)
			}
		}
		r.ioMatch.Flush()
		r.taskMatch.Flush()
	}
	out := make([]Result, len(r.pols))
	var base float64
	var device LatencySummary
	if r.ioSeen { // one distribution for every policy: summarised once
		device = r.ioDevice.Summary()
	}
	for k, ps := range r.pols {
		out[k] = ps.result(r)
		if k == 0 {
			base = out[k].EnergyBusyCoreSeconds
		}
		if r.ioSeen {
			d := device
			out[k].IODeviceLatencyNs = &d
		}
	}
	for k := range out {
		switch {
		case base > 0:
			out[k].EnergyRel = out[k].EnergyBusyCoreSeconds / base
		case out[k].EnergyBusyCoreSeconds == 0:
			out[k].EnergyRel = 1
		}
	}
	for k := range out {
		out[k].Changes = r.changes(k, out)
	}
	return out, nil
}

// polSim is one policy's simulation over all CPUs.
type polSim struct {
	r        *Replay
	pol      Policy
	kind     Governor
	gk       govKind // kind as a small integer for the hot paths
	tab      *table
	cpus     []*cpuSim
	pollNs   int64 // static poll limit; 0: no polling state; noLimit: unbounded
	dynPoll  bool  // haltpoll owns the limit
	blk      *blkWindow
	blkLimit int64
	qos      int64
	mflags   menuFlags
	teoVer   Version // the release whose teo runs (newTEOFor)
	hp       haltpollParams

	periods, selections, above, below uint64
	timeNs                            []int64
	energy                            float64 // busy-core × ns
	wakeCount                         []uint64
	io                                latency.Histogram
	taskIO                            latency.Histogram
	agreeN, agreeHit                  uint64
	chg                               chgCount // against policy 0

	// obs, when set (tests only), sees every decision: a selection, the end
	// of a stay, an oracle choice (see obsSelect etc.); obsBuf carries it.
	obs    func(*[8]int64)
	obsBuf [8]int64
}

// govKind numbers the governor models for dispatch in the hot paths.
type govKind uint8

const (
	gkOther govKind = iota // teo, ladder, haltpoll: through the governor interface
	gkMenu
	gkRecorded
	gkOracle
)

// obs event kinds (obsBuf[0])
const (
	obsSelect = iota + 1 // cpu, t, latReq, sleepLen, deltaTick, tickStopped<<1|stop, idx
	obsEnd               // cpu-less: state, residency, tickWake<<1|pollTO
	obsOracle            // state, residency, latReq
)

type cpuSim struct {
	gov  governor // &menu for menu
	menu menuGov
	// shadow is a second instance of the governor that agreement drives
	// with the kernel's own inputs and history; nil until first used.
	shadow      governor
	open        bool
	segOpen     bool
	hold        bool
	needSelect  bool
	tickStopped bool
	selected    bool // the policy has made a selection on this CPU
	state       int
	epStart     int64
	segStart    int64
	holdAt      int64
	// holdWakeEl: the recorded exit latency in the wake-up that ended the
	// held period (wakeEl), noWake for a poll time-out.
	holdWakeEl int64
	// kernelRes is kernelStay for the stay being closed, -1 if none.
	kernelRes    int64
	pollDeadline int64
	nextTick     int64
	latAtStart   int64
	recCounts    [MaxStates]uint32
	// idleEntry is the kernel's tick_sched.idle_entrytime as this policy's
	// timeline has it: the recorded one at a recorded selection, moved
	// only by an interrupt (a tick) in between.
	idleEntry int64
	in        selInput // scratch, kept here so it does not escape per selection
}

func newPolSim(r *Replay, prof *Profile, pol Policy, kv Version, onRecorded bool) (*polSim, error) {
	ps := &polSim{r: r, pol: pol, kind: pol.Governor, qos: noLimit}
	switch pol.Governor {
	case GovMenu:
		ps.gk = gkMenu
	case GovRecorded:
		ps.gk = gkRecorded
	case GovOracle:
		ps.gk = gkOracle
	}
	if pol.Governor == GovRecorded && !onRecorded {
		return nil, policyErrorf("policy %q: recorded needs the recorded profile (--profile recorded), not %s", pol.Spec, prof.Name)
	}
	stateIndices := func(what string, names []string) ([]int, error) {
		var idx []int
		for _, name := range names {
			i := prof.StateIndex(name)
			if i < 0 {
				var all []string
				for _, s := range prof.States {
					all = append(all, s.Name)
				}
				return nil, policyErrorf("policy %q: %s: no state %q in profile %s (states: %s)", pol.Spec, what, name, prof.Name, strings.Join(all, ", "))
			}
			idx = append(idx, i)
		}
		return idx, nil
	}
	dis, err := stateIndices("disable", pol.Disable)
	if err != nil {
		return nil, err
	}
	en, err := stateIndices("enable", pol.Enable)
	if err != nil {
		return nil, err
	}
	for _, i := range en {
		if slices.Contains(dis, i) {
			return nil, policyErrorf("policy %q: %s is both disabled and enabled", pol.Spec, prof.States[i].Name)
		}
	}
	if last := len(prof.States) - 1; pol.MaxCState > last {
		return nil, policyErrorf("policy %q: maxcstate: %d is beyond profile %s's deepest state, index %d (%s): it would disable nothing", pol.Spec, pol.MaxCState, prof.Name, last, prof.States[last].Name)
	}
	ps.tab = newTable(prof, dis, en, pol.MaxCState)
	n := ps.tab.n
	ps.timeNs = make([]int64, n)
	ps.wakeCount = make([]uint64, n)
	if pol.QoSNs >= 0 {
		ps.qos = pol.QoSNs
	}
	if pol.BlkQoSLimitNs >= 0 {
		ps.blkLimit = pol.BlkQoSLimitNs
		for _, w := range r.blk {
			if w.timeout == pol.BlkQoSTimeoutNs {
				ps.blk = w
			}
		}
		if ps.blk == nil {
			ps.blk = &blkWindow{timeout: pol.BlkQoSTimeoutNs}
			r.blk = append(r.blk, ps.blk)
		}
	}
	v := kv
	if pol.Kernel != nil {
		v = *pol.Kernel
	}
	rule := pol.Poll
	if rule == PollKernel {
		rule = kernelPollRule(v)
	}
	ps.pollNs = genericPollLimit(ps.tab, rule, pol.PollNs)
	switch pol.Governor {
	case GovMenu:
		ps.mflags = menuFlagsFor(v)
		ps.mflags.margin, ps.mflags.marginPct = pol.HasMargin, pol.MarginPct
	case GovTEO:
		ps.teoVer = v
	case GovHaltpoll:
		if n < 2 {
			return nil, policyErrorf("policy %q: haltpoll needs a polling state and a halt state; profile %s has %d state(s)", pol.Spec, prof.Name, n)
		}
		ps.dynPoll = true
		ps.hp = haltpollParamsFrom(r.meta.HaltPoll, v, genericPollLimit(ps.tab, kernelPollRule(v), 0)).with(pol.HaltPoll)
	}
	return ps, nil
}

func (ps *polSim) newCPU() *cpuSim {
	cs := &cpuSim{kernelRes: -1}
	switch ps.kind {
	case GovMenu:
		cs.menu.init(ps.tab, &ps.mflags)
		cs.gov = &cs.menu
	case GovTEO:
		cs.gov = newTEOFor(ps.tab, ps.teoVer)
	case GovLadder:
		cs.gov = newLadder(ps.tab)
	case GovHaltpoll:
		cs.gov = newHaltpoll(ps.tab, ps.hp)
	}
	return cs
}

// shadowSelect is agreement's view of one recorded selection: the
// policy's governor, kept on the kernel's history (every recorded stay is
// reflected into it as the kernel's governor saw it), chooses with the
// inputs the kernel's governor had at the recorded entry. Measuring each
// decision on the kernel's own history keeps one early difference from
// sending the free-running replay down another path and being counted
// again at every later period.
func (ps *polSim) shadowSelect(c *cpuShared, cs *cpuSim, pi *periodInfo) int {
	if cs.shadow == nil {
		cs.shadow = ps.newCPU().gov
	}
	sleep := max(pi.nextTimer-pi.idleEntry, 0)
	dt, _ := ps.r.deltaTick(c, pi.e, pi.idleEntry, sleep, pi.deltaNext, pi.tickStopped, pi.devStopped, 0)
	in := &cs.in // scratch, as in selectAt: a local would escape
	in.latReq, in.sleepLen, in.deltaTick, in.tickStopped = ps.latReq(c, pi.e), sleep, dt, pi.tickStopped
	in.nrIOWait, in.aborts = pi.nrIOWait, pi.aborts
	idx, _ := cs.shadow.selectState(in)
	if lg, ok := cs.shadow.(*ladderGov); ok && pi.rec >= 0 {
		lg.resync(idx, pi.rec)
	}
	if pi.rec >= 0 {
		pollTO := pi.kind == endPoll
		if hp, ok := cs.shadow.(*haltpollGov); ok && pollTO && !pi.pollTOKernel && ps.tab.polling[pi.rec] {
			// haltpoll's next choice hangs on the recorder's guess:
			// check it against the window
			pollTO = hp.polledOut(pi.residency)
		}
		cs.shadow.reflect(pi.rec, pi.residency, pi.kind == endTick || pi.gotTick, pollTO)
	}
	return idx
}

// SetHaltpollWindow sets dev->poll_limit_ns on cpu to ns for every haltpoll
// policy, in the free-running model and in the one agreement keeps on the
// kernel's history. The window a recording starts with is not in its
// metadata: it is the old value of the CPU's first power:guest_halt_poll_ns
// record; without this call the models start from 0, as
// haltpoll_enable_device leaves a CPU.
func (r *Replay) SetHaltpollWindow(cpu uint32, ns uint64) {
	if cpu >= maxCPUs {
		return
	}
	c := r.cpu(cpu)
	for _, ps := range r.pols {
		if ps.kind != GovHaltpoll {
			continue
		}
		cs := ps.cpus[c.id]
		if cs.shadow == nil {
			cs.shadow = ps.newCPU().gov
		}
		cs.gov.(*haltpollGov).limit = ns
		cs.shadow.(*haltpollGov).limit = ns
	}
}

// HaltpollWindow is policy i's haltpoll window on cpu as the model kept on
// the kernel's history has it now (the one agreement asks), and how many
// power:guest_halt_poll_ns events its adjust_poll_limit would have raised
// so far. ok is false when policy i is not haltpoll or has no such model
// for the CPU yet.
func (r *Replay) HaltpollWindow(i int, cpu uint32) (ns, changes uint64, ok bool) {
	if i < 0 || i >= len(r.pols) || int(cpu) >= len(r.cpus) || r.pols[i].kind != GovHaltpoll {
		return 0, 0, false
	}
	g, ok := r.pols[i].cpus[cpu].shadow.(*haltpollGov)
	if !ok {
		return 0, 0, false
	}
	return g.limit, g.changes, true
}

func (ps *polSim) latReq(c *cpuShared, t int64) int64 {
	l := min(c.baseLat, ps.qos)
	if ps.blk != nil && ps.blkLimit < l && ps.blk.active(c.id, t) {
		l = ps.blkLimit
	}
	return l
}

// periodRecorded, periodOracle and periodGov replay one recorded period
// for a policy and return the exit latency a wake-up ending it pays under
// the policy (Idle dispatches on the policy's kind).

func (ps *polSim) periodRecorded(cs *cpuSim, pi *periodInfo) int64 {
	t := ps.tab
	if pi.rec < 0 {
		cs.open = false
		return 0
	}
	s := pi.rec
	ps.wholeStay(s, pi.x-pi.e, pi.residency)
	if ps.r.agreement {
		ps.agreeN++
		ps.agreeHit++
	}
	cs.state, cs.open = s, true
	if pi.kind == endGenuine {
		ps.wakeCount[s]++
	}
	return t.paidLatency(s)
}

func (ps *polSim) count(above, below bool) {
	if above {
		ps.above++
	}
	if below {
		ps.below++
	}
}

func (ps *polSim) periodOracle(c *cpuShared, cs *cpuSim, pi *periodInfo) int64 {
	if cs.hold {
		cs.hold = false
		if !pi.chain {
			ps.oracleEnd(cs, cs.holdAt, false)
		}
	}
	if !cs.open {
		cs.open = true
		cs.epStart = pi.e
		cs.latAtStart = ps.latReq(c, pi.e)
		cs.recCounts = [MaxStates]uint32{}
	}
	if pi.rec >= 0 && pi.rec < MaxStates {
		cs.recCounts[pi.rec]++
	}
	if pi.kind == endGenuine {
		s := ps.oracleEnd(cs, pi.x, true)
		return ps.tab.paidLatency(s)
	}
	cs.hold, cs.holdAt = true, pi.x
	return 0
}

// oracleChoice is the least-energy state for an idle stay of d ns among
// the enabled states that meet latReq (the shallowest enabled one if none
// does).
func (ps *polSim) oracleChoice(d int64, latReq int64) int {
	t := ps.tab
	best, bestCost := -1, math.Inf(1)
	first := -1
	for i := 0; i < t.n; i++ {
		if t.disabled[i] {
			continue
		}
		if first < 0 {
			first = i
		}
		if t.el[i] > latReq {
			continue
		}
		cost := t.power[i]*float64(d) + t.overhead[i]
		if cost < bestCost {
			best, bestCost = i, cost
		}
	}
	if best < 0 {
		best = max(first, 0)
	}
	return best
}

// wholeStay accounts one selection that stays in state s for d ns, as the
// recorded and oracle policies make them: time, energy with the entry and
// exit overhead, and the kernel's too-deep/too-shallow rule judged on a
// residency of res ns (the kernel's own measure where the trace has it;
// res < 0: a stay the kernel does not count).
func (ps *polSim) wholeStay(s int, d, res int64) {
	t := ps.tab
	ps.timeNs[s] += d
	ps.energy += t.power[s]*float64(d) + t.overhead[s]
	if res >= 0 {
		ps.count(t.rows[s].classify(res))
	}
	ps.selections++
}

func (ps *polSim) oracleEnd(cs *cpuSim, end int64, counted bool) int {
	d := max(end-cs.epStart, 0)
	s := ps.oracleChoice(d, cs.latAtStart)
	if ps.obs != nil {
		ps.obsBuf = [8]int64{obsOracle, int64(s), d, cs.latAtStart}
		ps.obs(&ps.obsBuf)
	}
	ps.wholeStay(s, d, d)
	if ps.r.agreement {
		for i, n := range cs.recCounts {
			ps.agreeN += uint64(n)
			if i == s {
				ps.agreeHit += uint64(n)
			}
		}
	}
	if counted {
		ps.wakeCount[s]++
	}
	cs.open = false
	return s
}

func (ps *polSim) periodGov(c *cpuShared, cs *cpuSim, pi *periodInfo) int64 {
	if cs.hold {
		cs.hold = false
		if pi.chain {
			if cs.needSelect {
				// The stay ended at the recorded tick or time-out: the
				// CPU was busy until this entry (the kernel selected
				// here and measures from here), not idle.
				cs.needSelect = false
				ps.selectAt(c, cs, pi, pi.e, pi.e)
			}
		} else {
			ps.endEpisode(cs, cs.holdAt, false, false, cs.holdWakeEl)
		}
	}
	if !cs.open {
		cs.open = true
		cs.needSelect = false
		cs.epStart = pi.e
		cs.tickStopped = ps.r.tickAtEpisode(cs, pi)
		ps.selectAt(c, cs, pi, pi.e, pi.e)
	} else if next, _ := cs.nextEvent(ps.tab); next < pi.e {
		ps.advance(c, cs, pi, pi.e, endGenuine)
	}
	// Periods the cpuidle core did not count (residency < 0) were no
	// governor's selection.
	if ps.r.agreement && pi.residency >= 0 {
		ps.agreeN++
		if ps.shadowSelect(c, cs, pi) == pi.rec {
			ps.agreeHit++
		}
	}
	if pi.tickFree && !cs.tickStopped && cs.segOpen && cs.nextTick < pi.x {
		// The tick grid (phase of the last tick wake-up) can be off,
		// most of all under emulation: the kernel's own stay shows that
		// its next tick came after x.
		cs.nextTick = c.tickDelivered(ps.r.nextBoundary(c, pi.x))
	}
	if next, _ := cs.nextEvent(ps.tab); next < pi.x {
		ps.advance(c, cs, pi, pi.x, pi.kind)
	}
	t := ps.tab
	switch pi.kind {
	case endGenuine:
		lat := t.paidLatency(cs.state)
		cs.kernelRes = ps.r.kernelStay(cs, pi)
		ps.endEpisode(cs, pi.x, true, pi.gotTick, ps.r.wakeEl(pi))
		return lat
	case endTick:
		// The tick ends a halted stay, not a poll (poll_idle() leaves on
		// need_resched or its time limit only; the tick just sets
		// got_idle_tick, which the poll's end reflects).
		if !cs.tickStopped && cs.segOpen && !t.polling[cs.state] {
			cs.kernelRes = ps.r.kernelStay(cs, pi)
			ps.endSegment(cs, pi.x, true, false, ps.r.wakeEl(pi))
			cs.needSelect = true
		}
	case endPoll:
		if cs.segOpen && t.polling[cs.state] && cs.pollDeadline <= pi.x+pollSnapNs {
			ps.endSegment(cs, pi.x, pi.gotTick, true, noWake)
			cs.needSelect = true
		}
	}
	cs.hold, cs.holdAt, cs.holdWakeEl = true, pi.x, noWake
	if pi.kind == endTick {
		cs.holdWakeEl = ps.r.wakeEl(pi)
	}
	return 0
}

// advance runs the policy's own events (poll time limits, tick wake-ups
// while it keeps the tick) strictly before until. A poll deadline or tick
// just before a recorded poll timeout or tick at until is left to it.
func (ps *polSim) advance(c *cpuShared, cs *cpuSim, pi *periodInfo, until int64, kind endKind) {
	for cs.segOpen {
		next, isTick := cs.nextEvent(ps.tab)
		polling := !isTick && ps.tab.rows[cs.state].polling
		if next >= until {
			return
		}
		if isTick && kind == endTick && next >= until-tickSnapNs {
			return
		}
		if isTick && next >= pi.lateFrom {
			return // the clock event device was late: no tick before x
		}
		if !isTick && kind == endPoll && next >= until-pollSnapNs {
			return
		}
		// A poll that saw a tick tells reflect so (got_idle_tick).
		tickSeen := isTick || polling && !cs.tickStopped && cs.nextTick <= next
		if tickSeen { // tick_nohz_irq_exit() restarts the idle time
			cs.idleEntry = cs.nextTick
		}
		wake := int64(noWake)
		if isTick {
			wake = 0 // the policy's own tick: nothing of it is in the recording
		}
		ps.endSegment(cs, next, tickSeen, !isTick, wake)
		ps.selectAt(c, cs, pi, next, next)
	}
}

// nextEvent is the first of the open stay's own events advance handles:
// a poll's deadline, or the tick while it runs (a tick interrupts a poll
// without ending it: poll_idle() stops only on need_resched or its time
// limit; it ends a halted stay); noLimit when none or no stay is open.
func (cs *cpuSim) nextEvent(t *table) (next int64, isTick bool) {
	switch {
	case !cs.segOpen:
		return noLimit, false
	case t.rows[cs.state].polling:
		return cs.pollDeadline, false
	case !cs.tickStopped:
		return cs.nextTick, true
	}
	return noLimit, false
}

// deltaTick is the delta_next a governor selecting at t gets, measured
// like its sleep length from the idle entry time now, with nb the next
// tick boundary (0 with the tick stopped; none before tickFreeTo).
// tick_nohz_get_sleep_length (kernel/time/tick-sched.c, v6.12) reads it
// from the clock event device: the next tick or an earlier timer while
// the tick runs, the next timer once it is stopped. The recorder reads
// the device at the entry, after the recorded governor's decision on the
// tick (devStopped), so the recorded value (deltaNext, absolute) holds for
// a selection made with the tick in that state; with the tick running
// where the recording's decision stopped it (ladder, haltpoll halting,
// menu's long predictions), the device was due at the tick if that came
// first; with it stopped where the recording ran it, at the next timer
// (the sleep length). Selections after the entry get the next tick or the
// sleep length, whichever comes first.
func (r *Replay) deltaTick(c *cpuShared, t, now, sleep, deltaNext int64, stopped, devStopped bool, tickFreeTo int64) (dt, nb int64) {
	if !stopped {
		nb = r.nextBoundary(c, max(t, tickFreeTo))
	}
	switch {
	case deltaNext != unknownTime && stopped == devStopped:
		return max(deltaNext-now, 0), nb
	case deltaNext != unknownTime && !stopped:
		return max(min(deltaNext, nb)-now, 0), nb
	case !stopped:
		return max(min(sleep, nb-now), 0), nb
	}
	return sleep, nb
}

// tickDelivered is when a tick due at boundary reaches the CPU: as late as
// its last recorded timer interrupt did (tickLateNs; under emulation or
// steal time, hundreds of µs).
func (c *cpuShared) tickDelivered(boundary int64) int64 { return boundary + c.tickLateNs }

// nextBoundary is the first tick after t, with the tick's phase taken from
// the CPU's last recorded tick wake-up (trace time 0 if none yet).
func (r *Replay) nextBoundary(c *cpuShared, t int64) int64 {
	// The boundary g with g−tick ≤ t < g; times mostly move forward by
	// less than a tick between calls, so try the cached boundary and the
	// one after it before dividing.
	if g := c.nbCache; c.nbValid && t < g && t >= g-r.tick {
		return g
	}
	g := c.nbCache
	if c.nbValid && t >= g && t < g+r.tick {
		c.nbCache = g + r.tick
		return g + r.tick
	}
	g = r.nextBoundarySlow(c, t)
	c.nbCache, c.nbValid = g, true
	return g
}

func (r *Replay) nextBoundarySlow(c *cpuShared, t int64) int64 {
	off := t - c.tickRef
	k := off / r.tick
	if off < 0 && off%r.tick != 0 {
		k--
	}
	return c.tickRef + (k+1)*r.tick
}

func (ps *polSim) selectAt(c *cpuShared, cs *cpuSim, pi *periodInfo, segStart, t int64) {
	tab := ps.tab
	in := &cs.in
	lat := ps.latReq(c, t)
	stopped := cs.tickStopped
	// The recorded selection at the period's entry gets the kernel's own
	// inputs; later ones only what follows from them.
	atEntry := t == pi.e
	deltaNext, aborts := unknownTime, 0
	if atEntry {
		deltaNext, aborts = pi.deltaNext, pi.aborts
		cs.idleEntry = pi.idleEntry
	}
	var tickFreeTo int64
	if pi.tickFree {
		tickFreeTo = pi.x
	}
	sleep := max(pi.nextTimer-cs.idleEntry, 0)
	dt, nb := ps.r.deltaTick(c, t, cs.idleEntry, sleep, deltaNext, stopped, pi.devStopped, tickFreeTo)
	// Field by field: a composite literal is built on the stack and copied
	// with wide loads that stall on the narrow stores just before them.
	in.latReq, in.sleepLen, in.deltaTick, in.tickStopped = lat, sleep, dt, stopped
	in.nrIOWait, in.aborts = pi.nrIOWait, aborts
	var idx int
	var stop bool
	if ps.gk == gkMenu {
		idx, stop = cs.menu.selectState(in)
	} else {
		idx, stop = cs.gov.selectState(in)
	}
	if idx < 0 || idx >= tab.n {
		idx = max(min(idx, tab.n-1), 0)
	}
	if ps.obs != nil {
		ps.obsBuf = [8]int64{obsSelect, int64(c.id), t, in.latReq, in.sleepLen, in.deltaTick, int64(b2int(in.tickStopped)<<1 | b2int(stop)), int64(idx)}
		ps.obs(&ps.obsBuf)
	}
	if stop && !cs.tickStopped && canStopTick(pi, t, nb) {
		cs.tickStopped = true
	}
	cs.selected = true
	cs.nextTick = nb
	if nb != 0 {
		cs.nextTick = c.tickDelivered(nb)
	}
	cs.state = idx
	cs.segStart = segStart
	cs.segOpen = true
	ps.selections++
	if tab.rows[idx].polling {
		lim := ps.pollNs
		if ps.dynPoll {
			lim = cs.gov.(pollLimiter).pollLimit()
		}
		if lim <= 0 || lim == noLimit {
			cs.pollDeadline = noLimit
		} else {
			cs.pollDeadline = t + max(lim, ps.r.pollFloorNs())
			// A poll the kernel itself let run past its limit ends where
			// the recorded one ended, under a limit no shorter.
			if atEntry && pi.pollRanOn && lim >= ps.r.kernelPollNs && pi.rec >= 0 && pi.rec < tab.n && tab.polling[pi.rec] {
				cs.pollDeadline = max(cs.pollDeadline, pi.x)
			}
		}
	}
}

// tickAtEpisode is the tick's state when a policy's episode opens at a
// recorded period (kernel/sched/idle.c do_idle, kernel/time/tick-sched.c,
// v6.12): inside one idle loop the tick stays as the policy's own last
// decision left it, and leaving the loop (tick_nohz_idle_exit) restarts it.
// Where the trace cannot tell loops apart, and under nohz_full (where the
// exit may keep it stopped), the kernel's recorded state is taken.
func (r *Replay) tickAtEpisode(cs *cpuSim, pi *periodInfo) bool {
	switch {
	case !cs.selected || r.meta.NoHZ == "full":
		return pi.tickStopped
	case pi.loop == trace.Yes:
		return false
	case pi.loop == trace.No:
		return cs.tickStopped
	}
	return pi.tickStopped
}

// canStopTick says whether a governor's stop_tick at t stops a running tick
// (tick_nohz_idle_stop_tick, kernel/time/tick-sched.c v6.12): not when
// tick_nohz_next_event() finds a timer-wheel timer within the tick, RCU or
// irq_work needing it, or no NOHZ. The recorder read that for the
// recorded entry; a later selection in the period stops it too where the
// next timer lies beyond the next tick nb.
func canStopTick(pi *periodInfo, t, nb int64) bool {
	if pi.stoppable != trace.No {
		return true
	}
	return t > pi.e && pi.nextTimer > nb
}

// kernelStay is the kernel's own measure of the stay (the cpuidle core's
// residency) when the policy's open stay is the recorded one: same state,
// from the recorded entry; else -1. The kernel's clock reads sit a little
// inside the recorded bounds, which a governor near a boundary (menu's
// iowait-scaled latency limit) notices.
func (r *Replay) kernelStay(cs *cpuSim, pi *periodInfo) int64 {
	if cs.segOpen && cs.segStart == pi.e && cs.state == pi.rec && pi.residency >= 0 {
		return pi.residency
	}
	return -1
}

// noWake: a stay that ends without an interrupt (a poll's time limit).
const noWake = -1

// wakeEl is the exit latency of the recorded state that the wake-up ending
// the recorded period paid inside it, as the kernel measures a stay
// (cpuidle_enter_state's clock reads bracket the exit).
func (r *Replay) wakeEl(pi *periodInfo) int64 {
	if pi.rec < 0 || pi.rec >= r.recTab.n {
		return 0
	}
	return r.recTab.el[pi.rec]
}

// endSegment closes the open stay at t. The time it adds is t minus its
// start, on the recorded timeline; the stay the governor and the
// above/below rules see is what the kernel would measure: an interrupt
// arriving at t−wakeEl (the recorded state's exit latency, in the
// recording) reaches the policy's state s, which takes its own exit
// latency to leave. wakeEl noWake: no interrupt ended it.
func (ps *polSim) endSegment(cs *cpuSim, t int64, tickWake, pollTO bool, wakeEl int64) {
	d := max(t-cs.segStart, 0)
	s := cs.state
	row := &ps.tab.rows[s]
	ps.timeNs[s] += d
	ps.energy += row.power*float64(d) + row.overhead
	res := d
	switch {
	case cs.kernelRes >= 0:
		res = cs.kernelRes
	case wakeEl != noWake:
		res = max(d+ps.tab.el[s]-wakeEl, 0)
	}
	cs.kernelRes = -1
	a, b := row.classify(res)
	ps.count(a, b)
	if ps.obs != nil {
		ps.obsBuf = [8]int64{obsEnd, int64(s), res, int64(b2int(tickWake)<<1 | b2int(pollTO))}
		ps.obs(&ps.obsBuf)
	}
	if ps.gk == gkMenu {
		cs.menu.reflect(s, res, tickWake, pollTO)
	} else {
		cs.gov.reflect(s, res, tickWake, pollTO)
	}
	cs.segOpen = false
}

func (ps *polSim) endEpisode(cs *cpuSim, t int64, counted, gotTick bool, wakeEl int64) {
	if cs.segOpen {
		if counted {
			ps.wakeCount[cs.state]++
		}
		ps.endSegment(cs, t, gotTick, false, wakeEl)
	}
	cs.open = false
	cs.hold = false
	cs.needSelect = false
}

// flush closes a CPU's open episode at the end of the trace.
func (ps *polSim) flush(c *cpuShared) {
	if c.id >= len(ps.cpus) {
		return
	}
	cs := ps.cpus[c.id]
	switch ps.kind {
	case GovRecorded:
		cs.open = false
	case GovOracle:
		if cs.open {
			ps.oracleEnd(cs, cs.holdAt, false)
		}
	default:
		if cs.open {
			ps.endEpisode(cs, cs.holdAt, false, false, cs.holdWakeEl)
		}
	}
	cs.hold = false
}
