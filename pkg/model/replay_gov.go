package model

// Governor stepping: how a governor model (menu, teo, ladder, haltpoll)
// runs over a recorded period: it selects at the entry, runs its own poll
// deadlines and tick wake-ups up to the interrupt that ended it (or the
// recorded exit of a tick or poll time-out), and closes each stay
// with the residency the kernel would have measured, which it reflects to
// the governor. It is apart from the main loop because it is the bulk of
// one policy's work per period; the tick arithmetic it relies on is in
// replay_tick.go.

func (ps *polSim) periodGov(c *cpuShared, cs *cpuSim, pi *periodInfo) int64 {
	if cs.hold {
		cs.hold = false
		if pi.chain {
			if cs.needSelect {
				// The stay ended at the recorded tick or time-out: the
				// CPU was busy until this entry (the kernel selected
				// here and measures from here), not idle.
				cs.needSelect = false
				ps.awakeNs += max(pi.e-cs.holdAt, 0)
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
	until := pi.x
	wakeEl := ps.r.wakeEl(pi)
	if pi.kind == endGenuine {
		// The interrupt came at x less the recorded state's exit latency:
		// a poll time-out or tick of the policy's own after it never came
		// (a 1 ms period recorded in C6 polled to a time-out after it).
		until -= wakeEl
	}
	if next, _ := cs.nextEvent(ps.tab); next < until {
		ps.advance(c, cs, pi, until, pi.kind)
	}
	t := ps.tab
	switch pi.kind {
	case endGenuine:
		lat := t.paidLatency(cs.state)
		cs.kernelRes = ps.r.kernelStay(cs, pi)
		ps.endEpisode(cs, pi.x, true, ps.gotTick(cs, pi, until), wakeEl)
		return lat
	case endTick:
		// The tick ends a halted stay, not a poll (poll_idle() leaves on
		// need_resched or its time limit only; the tick just sets
		// got_idle_tick, which the poll's end reflects).
		if !cs.tickStopped && cs.segOpen && !t.polling[cs.state] {
			cs.kernelRes = ps.r.kernelStay(cs, pi)
			ps.endSegment(cs, pi.x, true, false, wakeEl)
			cs.needSelect = true
		}
	case endPoll:
		if cs.segOpen && t.polling[cs.state] && cs.pollDeadline <= pi.x+pollSnapNs {
			ps.endSegment(cs, pi.x, ps.gotTick(cs, pi, pi.x), true, noWake)
			cs.needSelect = true
		}
	}
	cs.hold, cs.holdAt, cs.holdWakeEl = true, pi.x, noWake
	if pi.kind == endTick {
		cs.holdWakeEl = wakeEl
	}
	return 0
}

// gotTick is what the policy's reflect gets from tick_nohz_idle_got_tick()
// when its open stay ends at the recorded exit, its interrupt at until: the
// recorded flag where it
// tells of the recorded stay alone (periodGotTick) and the model's tick was
// in the state the recorded kernel's was (only a tick that came sets the
// flag, kernel/time/tick-sched.c: a tick the model stopped never came;
// believing it gave menu's model 45 ms samples on teo's recordings, up to
// 3.3 points of the lab's c6long case), else the model's own: a tick came
// while it polled with its tick running, before the interrupt (a tick ends
// a halted stay, and a stopped tick brings none).
func (ps *polSim) gotTick(cs *cpuSim, pi *periodInfo, until int64) bool {
	if !pi.gotTickOwn && cs.tickStopped == pi.devStopped {
		return pi.gotTick
	}
	return cs.segOpen && cs.tickInPoll(ps.tab, until)
}

// tickInPoll says whether the open stay polls with the tick running and
// its tick came by until: poll_idle() goes on, and reflect is told
// (got_idle_tick).
func (cs *cpuSim) tickInPoll(t *table, until int64) bool {
	return t.rows[cs.state].polling && !cs.tickStopped && cs.nextTick <= until
}

// advance runs the policy's own events (poll time limits, tick wake-ups
// while it keeps the tick) strictly before until. A poll deadline or tick
// just before a recorded poll timeout or tick at until is left to it.
func (ps *polSim) advance(c *cpuShared, cs *cpuSim, pi *periodInfo, until int64, kind endKind) {
	for cs.segOpen {
		next, isTick := cs.nextEvent(ps.tab)
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
		tickSeen := isTick || cs.tickInPoll(ps.tab, next)
		if tickSeen { // tick_nohz_irq_exit() restarts the idle time
			cs.idleEntry = cs.nextTick
		}
		wake := int64(noWake)
		if isTick {
			wake = ownTick
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
	// Signed, as tick_nohz_get_sleep_length() gives it: menu clamps a
	// negative one to 0 itself, teo keeps it (teo619.go's hit test).
	sleep := pi.nextTimer - cs.idleEntry
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
// ownTick: the policy's own tick, at the time the stay ends: nothing of it
// is in the recording, and the next stay starts at that time.
const (
	noWake  = -1
	ownTick = -2
)

// wakeEl is the exit latency of the recorded state that the wake-up ending
// the recorded period paid inside it, as the kernel measures a stay
// (cpuidle_enter_state's clock reads bracket the exit).
func (r *Replay) wakeEl(pi *periodInfo) int64 {
	if pi.rec < 0 || pi.rec >= r.recTab.n {
		return 0
	}
	return r.recTab.el[pi.rec]
}

// endSegment closes the open stay at t. The stay the governor and the
// above/below rules see, and the time in state it adds, is what the
// kernel would measure: an interrupt arriving at t−wakeEl (the recorded
// state's exit latency, in the recording) reaches the policy's state s,
// which takes its own exit latency to leave. wakeEl noWake: no interrupt
// ended it; ownTick: the policy's own tick at t, whose exit latency the
// governor sees but the time does not hold, as the next stay starts at t
// (the first-order timeline). Its energy covers the recorded time, up to
// t, whatever s's exit latency: the work is the same under every policy,
// so a state left sooner than the recorded one leaves the time it saved
// idle later, and one left later takes it from later idle time (charging
// the stay as counted made polling, which pays no exit latency, look
// cheaper than halting where periods are as short as exit latencies).
func (ps *polSim) endSegment(cs *cpuSim, t int64, tickWake, pollTO bool, wakeEl int64) {
	d := max(t-cs.segStart, 0)
	s := cs.state
	row := &ps.tab.rows[s]
	res, stay := d, d
	switch wakeEl {
	case noWake:
	case ownTick:
		res = d + ps.tab.el[s]
	default:
		res = max(d+ps.tab.el[s]-wakeEl, 0)
		stay = res
	}
	ps.timeNs[s] += stay
	ps.windowNs += d
	ps.energy += row.power*float64(d) + row.overhead
	if cs.kernelRes >= 0 {
		res = cs.kernelRes
	}
	cs.kernelRes = -1
	a, b := row.classify(res)
	ps.count(a, b)
	if pollTO {
		ps.pollTimeouts++
	}
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
