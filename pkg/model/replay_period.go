package model

import "github.com/idletrace/idletrace/pkg/trace"

// Reading a recorded period: what the replay takes from one
// trace.IdlePeriod before any policy sees it (how it ended, the tick's
// state, what the kernel itself counted, whether it continues the previous
// period, the timers the governors ask for). It is apart from replay.go's
// main loop because it depends only on the recording and the CPU's
// previous period, never on a policy: every policy of a replay sees the
// same periodInfo.

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
	// reflect) without ending on it. gotTickOwn: the flag does not tell of
	// this stay alone (unknown, or set where nothing cleared it since an
	// earlier stay), and the policies work out their own (polSim.gotTick).
	gotTick, gotTickOwn bool
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
		r.stats.BadState++
	}
	// rec indexes the recorded table (the exit latency the IO wake-ups
	// paid, the tick state) as much as the profile's (the recorded
	// policy): a state the profile lacks is still the recorded one.
	if pi.rec >= max(len(r.prof.States), r.recTab.n) {
		pi.rec = -1
	}
	switch {
	case p.PollTimedOut == trace.Yes || p.WakeCause == trace.WakePollTimeout:
		pi.kind = endPoll
	case r.pollTimeoutInferred(p, pi):
		pi.kind = endPoll
		r.stats.InferredPollTimeouts++
	case p.WakeCause == trace.WakeTick:
		pi.kind = endTick
	default:
		pi.kind = endGenuine
	}
	r.periodTick(c, p, &pi)
	r.periodKernelFacts(p, &pi)
	r.periodGotTick(c, p, &pi)
	r.periodChain(c, p, &pi)
	r.periodTimers(p, &pi)
	return pi
}

// pollTimeoutInferred says whether a poll whose end the trace does not
// say (neither a time-out flag nor a wake cause) timed out: it lasted the
// kernel's poll limit, which poll_idle() ends it at unless a wake-up came
// first (drivers/cpuidle/poll_state.c v6.12). A wake-up in the last check
// interval past the limit would be taken for a time-out too; the
// recorder's own traces carry the flag and never take this path. Only
// where that limit is cpuidle_poll_time()'s from the table
// (kernelPollNs): not under the haltpoll governor, which sets
// dev->poll_limit_ns to its own moving window (a guest's table with the
// governor unknown is taken as its), nor without a cpuidle driver, whose
// cpu_idle_poll() has no limit.
func (r *Replay) pollTimeoutInferred(p *trace.IdlePeriod, pi periodInfo) bool {
	return p.PollTimedOut == trace.Unknown && p.WakeCause == trace.WakeUnknown &&
		pi.rec >= 0 && pi.rec < r.recTab.n && r.recTab.polling[pi.rec] &&
		r.kernelPollNs > 0 && pi.x-pi.e >= r.kernelPollNs && r.tableLimitPolls
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

// periodGotTick says whether the recorded got_idle_tick tells of the
// period's stay alone. tick_sched_do_timer() sets it on every tick in the
// idle loop; menu's and teo's reflect clear it (tick_nohz_idle_got_tick()),
// and so does the idle loop after each stay in the kernels this project
// runs (kernel/sched/idle.c do_idle, Debian's 6.1.192 and 6.12.118, Linux
// 7.0), but not in older ones: there, under ladder or haltpoll or without a
// cpuidle driver, it stays set from the first idle tick on (model review
// B2, lab/README.md). A CPU whose flag was found clear after being set
// shows that it is cleared after each stay; until then a set flag may be
// an old tick's.
func (r *Replay) periodGotTick(c *cpuShared, p *trace.IdlePeriod, pi *periodInfo) {
	switch p.GotTick {
	case trace.Yes:
		c.gotTickSet = true
	case trace.No:
		c.gotTickCleared = c.gotTickCleared || c.gotTickSet
	}
	pi.gotTickOwn = p.GotTick == trace.Unknown || p.GotTick == trace.Yes && !r.gotTickPerStay && !c.gotTickCleared
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
