package model

import "github.com/idletrace/idletrace/pkg/trace"

// The tick in the replay: its grid (the phase of the CPU's last recorded
// tick wake-up, delivered as late as its recorded interrupts came), the
// delta_next a governor reads, whether it runs when an episode opens and
// whether a governor's stop_tick stops it. It is apart from the governor
// stepping because it models the kernel's tick-sched code, not a governor,
// and serves the free-running and the shadow selections alike.

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

// GotTickPerStay says whether the recording's governor cleared the tick's
// got_idle_tick after every stay: menu and teo do, in their reflect
// (tick_nohz_idle_got_tick(); drivers/cpuidle/governors/menu.c and teo.c,
// v6.12), so that a trace's GotTick tells of each stay alone. Under ladder
// or haltpoll, or without a cpuidle driver, only the idle loop may clear
// it (Replay.periodGotTick).
func GotTickPerStay(meta *trace.Metadata) bool {
	if meta == nil || meta.CPUIdleDriver == "" || meta.NoCPUIdleDriver() {
		return false
	}
	return meta.CPUIdleGovernor == "menu" || meta.CPUIdleGovernor == "teo"
}
