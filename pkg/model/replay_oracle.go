package model

import "math"

// The policies that make one whole stay per recorded period or episode
// instead of stepping a governor: recorded, which replays the kernel's own
// choice, and the oracle, which picks the least-energy state for an
// episode once its length is known. They are apart from the governor
// stepping (replay_gov.go) because they need none of its tick, poll-limit
// or reflect machinery; wholeStay is the accounting both share.

// periodRecorded, periodOracle and periodGov replay one recorded period
// for a policy and return the exit latency a wake-up ending it pays under
// the policy (Idle dispatches on the policy's kind).

func (ps *polSim) periodRecorded(cs *cpuSim, pi *periodInfo) int64 {
	t := ps.tab
	if pi.chain { // the kernel woke and went back: awake in between
		ps.awakeNs += max(pi.e-pi.prevExit, 0)
	}
	if pi.rec < 0 || pi.rec >= t.n { // a state beyond the profile's (Stats.BadState)
		cs.open = false
		return 0
	}
	s := pi.rec
	ps.wholeStay(s, pi.x-pi.e, pi.x-pi.e, pi.residency)
	if ps.r.agreement {
		ps.agreeN++
		ps.agreeHit++
	}
	cs.state, cs.open = s, true
	switch {
	case pi.kind == endGenuine:
		ps.wakeCount[s]++
	case pi.kind == endPoll && t.polling[s]:
		ps.pollTimeouts++ // the kernel's own
	}
	return t.paidLatency(s)
}

func (ps *polSim) periodOracle(c *cpuShared, cs *cpuSim, pi *periodInfo) int64 {
	if cs.hold {
		cs.hold = false
		if !pi.chain {
			ps.oracleEnd(cs, cs.holdAt, false, cs.holdWakeEl)
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
		s := ps.oracleEnd(cs, pi.x, true, ps.r.wakeEl(pi))
		return ps.tab.paidLatency(s)
	}
	cs.hold, cs.holdAt, cs.holdWakeEl = true, pi.x, noWake
	if pi.kind == endTick {
		cs.holdWakeEl = ps.r.wakeEl(pi)
	}
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

// wholeStay accounts one selection that stays in state s for stayNs, as
// the recorded and oracle policies make them: time in state, energy over
// the recorded time it covers (windowNs, as endSegment charges it) with
// the entry and exit overhead, and the kernel's too-deep/too-shallow rule
// judged on a residency of res ns (the kernel's own measure where the
// trace has it; res < 0: a stay the kernel does not count).
func (ps *polSim) wholeStay(s int, stayNs, windowNs, res int64) {
	t := ps.tab
	ps.timeNs[s] += stayNs
	ps.windowNs += windowNs
	ps.energy += t.power[s]*float64(windowNs) + t.overhead[s]
	if res >= 0 {
		ps.count(t.rows[s].classify(res))
	}
	ps.selections++
}

// oracleEnd chooses and accounts the episode that ends at end. Its
// energy covers the recorded episode whatever the state (endSegment says
// why), so the oracle chooses for that length. An interrupt ended it at
// end−wakeEl (the recorded state's exit latency; noWake: none did), and
// the chosen state's own exit latency follows it in the time in state, as
// endSegment counts a governor's stay.
func (ps *polSim) oracleEnd(cs *cpuSim, end int64, counted bool, wakeEl int64) int {
	window := max(end-cs.epStart, 0)
	s := ps.oracleChoice(window, cs.latAtStart)
	stay := window
	if wakeEl != noWake { // as endSegment counts it
		stay = max(window+ps.tab.el[s]-wakeEl, 0)
	}
	if ps.obs != nil {
		ps.obsBuf = [8]int64{obsOracle, int64(s), stay, cs.latAtStart}
		ps.obs(&ps.obsBuf)
	}
	ps.wholeStay(s, stay, window, stay)
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
