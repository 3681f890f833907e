package model

import "math"

// teo governor model, the form of Linux 6.19 and later.
//
// Follows drivers/cpuidle/governors/teo.c of Debian's linux-source-7.3
// (7.3.4-1~bpo13+1), which is mainline 7.1's: no teo change came in 7.2 or
// 7.3 (7.3.4's teo.c is 6.19's text with the 7.0 and 7.1 commits below
// applied, and nothing else; Debian's changelog names none). teo.go models
// 6.14–6.18, teo612.go 6.11–6.13; newTEOFor picks. The releases:
//
//   - 6.19: metrics below 8 decay to 0 and total is recomputed as the
//     decayed bins plus PULSE (b54df61c7428); tick wake-ups counted in
//     total_tick, and when they are over 2/3 of total a tick wake-up is a
//     hit in the last state's bin, the artificial-wakeup rule gone
//     (083654ded547); tick_intercepts counted for measured ≤ TICK_NSEC, the
//     reversed test fixed (50db438231dc); teo_state_ok dropped from the
//     intercept walk, which moves on to the next shallower enabled state
//     (d834e68a0e8b); a03b2011808a as in 6.18.3.
//   - 7.0: a tick wake-up is a hit in the timer's bin unless tick-range
//     intercepts are over 2/3 of the bins (60836533b4c7); a hit also needs
//     the sleep length minus the measured idle below half the state's exit
//     latency (f36de72673ad); the intercept walk stops only at or below
//     the bin with the most intercepts (a971f984b845); the tick is kept
//     for a shallow candidate when tick_intercepts reach 2/3 of total
//     (475ca3470b37, was 5/8).
//   - 7.1 (106a2662e655): the sleep length is skipped only while the tick
//     runs; with the tick stopped, a next timer beyond 2 ticks and a
//     candidate shallower than the tick, the deepest state the latency
//     limit allows whose target residency fits the sleep length is taken.
//
// 6.19's and 7.0's bound on the intercept walk with the tick stopped
// (min_idx, the shallowest state whose target residency reaches the tick,
// and 7.0's guard for states of equal residency), which 7.1 removed, follow
// their patches on linux-pm (d834e68a0e8b, 4bd2221f231d, a971f984b845,
// 106a2662e655): 7.1's reversed on 7.3's teo.c applies cleanly and gives
// 7.0's. A driver with one state (7.0 stopped calling the governor then) is
// handled as before: state 0, the tick kept.

type teo619Gov struct {
	t *table
	// v70: the 7.0 changes; v71: 106a2662e655.
	v70, v71 bool

	sleepLength    int64
	hits           [MaxStates]uint32
	intercepts     [MaxStates]uint32
	total          uint32
	totalTick      uint32
	tickIntercepts uint32
	shortIdles     uint32
	tickWakeup     bool
	pollTimedOut   bool
	lastIdx        int
	lastResidency  int64
}

func newTEO619(t *table, v Version) *teo619Gov {
	return &teo619Gov{t: t, lastIdx: -1, v70: v.AtLeast(7, 0), v71: v.AtLeast(7, 1)}
}

// teoDecay is 6.19's teo_decay(): a metric loses an eighth, and one too
// small to lose anything (below 8) goes to 0.
func teoDecay(x uint32) uint32 {
	if d := x >> teoDecayShift; d > 0 {
		return x - d
	}
	return 0
}

func (g *teo619Gov) update() {
	t := g.t
	lat := t.el[g.lastIdx]
	g.shortIdles = teoDecay(g.shortIdles)
	var measured int64
	if g.pollTimedOut {
		measured = math.MaxInt64
		g.pollTimedOut = false
	} else {
		measured = max(g.lastResidency, 0)
		if measured >= lat {
			measured -= lat / 2
			if measured < residencyThresholdNs {
				g.shortIdles += teoPulse
			}
		} else {
			measured /= 2
			g.shortIdles += teoPulse
		}
	}
	var sum uint32
	idxTimer, idxDuration := 0, 0
	for i := 0; i < t.n; i++ {
		g.hits[i] = teoDecay(g.hits[i])
		sum += g.hits[i]
		g.intercepts[i] = teoDecay(g.intercepts[i])
		sum += g.intercepts[i]
		// Both s64: a negative sleep length (the next event already
		// behind the idle entry time) is below every state.
		if t.tr[i] <= g.sleepLength {
			idxTimer = i
			if t.tr[i] <= measured {
				idxDuration = i
			}
		}
	}
	g.total = sum + teoPulse
	g.tickIntercepts = teoDecay(g.tickIntercepts)
	g.totalTick = teoDecay(g.totalTick)
	if g.tickWakeup {
		g.totalTick += teoPulse
		// Mostly tick wake-ups: the deepest state's bin (disabled or not).
		if 3*g.totalTick > 2*g.total {
			g.hits[t.n-1] += teoPulse
			return
		}
		// 7.0: a tick wake-up is the timer's unless the intercepts in the
		// tick range are most of the bins.
		if g.v70 && 3*g.tickIntercepts < 2*sum {
			g.hits[idxTimer] += teoPulse
			return
		}
	}
	// 7.0: a hit only when the wake-up came no earlier than half the exit
	// latency before the timer. s64 arithmetic that wraps, as the kernel's
	// (built with -fno-strict-overflow): a poll time-out (measured
	// S64_MAX) after a negative sleep length wraps to a large positive and
	// is an intercept in bin 0. Re-entries after a poll time-out see such
	// sleep lengths (the idle entry time stays the loop's first), so under
	// a polling workload these intercepts draw the walk down to POLL: on
	// the 7.3 lab kernel's icx recording, agreement 0.917 without them.
	if idxTimer == idxDuration && (!g.v70 || g.sleepLength-measured < lat/2) {
		g.hits[idxTimer] += teoPulse
		return
	}
	g.intercepts[idxDuration] += teoPulse
	if measured <= t.tick {
		g.tickIntercepts += teoPulse
	}
}

func (g *teo619Gov) selectState(in *selInput) (int, bool) {
	t := g.t
	if g.lastIdx >= 0 {
		g.update()
		g.lastIdx = -1
	}
	g.sleepLength = int64(ktimeMax)
	s, first, stop, done := t.teoStart(&g.hits, &g.intercepts, in)
	if done {
		return first, stop
	}
	idx, idx0, constraint := s.idx, s.idx0, s.constraint
	idxInterceptSum, idxHitSum := s.idxIntercepts, s.idxHits
	if 2*idxInterceptSum > g.total-idxHitSum {
		// 6.19 and 7.0: with the tick stopped, the walk stops short of the
		// states shorter than the tick (min_idx; 7.1 dropped it for the
		// far-timer rule below).
		minIdx, walk := idx0, true
		if !g.v71 && in.tickStopped {
			for minIdx < idx && t.tr[minIdx] < t.tick {
				minIdx++
			}
			// 7.0 (4bd2221f231d): not for a state that only shares the
			// candidate's target residency.
			walk = !g.v70 || t.tr[minIdx] != t.tr[idx]
		}
		// (7.0 took min_idx at once when it was at or deeper than the bin
		// with the most intercepts and enabled: what the walk gives.)
		var interceptSum uint32
		for i := idx - 1; walk && i >= minIdx; i-- {
			interceptSum += g.intercepts[i]
			if t.disabled[i] {
				continue
			}
			idx = i
			if 2*interceptSum > idxInterceptSum && (!g.v70 || i <= s.maxInterceptsIdx) {
				break
			}
		}
	}
	if idx > constraint {
		idx = constraint
	}
	if (!g.v71 || !in.tickStopped) && (idx == 0 || t.tr[idx] < residencyThresholdNs) &&
		(2*g.shortIdles >= g.total || in.latReq < teoLatThresh) {
		return idx, false
	}
	duration := in.sleepLen
	deltaTick := in.deltaTick
	g.sleepLength = duration
	// 7.1: with the tick stopped and no timer within 2 ticks, a shallow
	// candidate could leave the CPU there for long: the deepest state the
	// constraint allows whose target residency fits the sleep length.
	if g.v71 && in.tickStopped && duration > 2*t.tick && t.tr[idx] < t.tick {
		for i := constraint; i > idx; i-- {
			if !t.disabled[i] && t.tr[i] <= duration {
				idx = i
				break
			}
		}
		return idx, true
	}
	if idx == 0 {
		return idx, false
	}
	if t.tr[idx] > duration {
		idx = t.teoShallower(idx, duration)
	}
	if t.tr[idx] < t.tick {
		if g.v70 && 3*g.tickIntercepts >= 2*g.total || !g.v70 && g.tickIntercepts > g.total/2+g.total/8 {
			duration = t.tick / 2
		}
	}
	return t.teoEnd(idx, idx0, duration, deltaTick, in)
}

func (g *teo619Gov) reflect(idx int, residencyNs int64, tickWakeup, pollTimedOut bool) {
	g.lastIdx = idx
	g.lastResidency = residencyNs
	g.tickWakeup = tickWakeup
	g.pollTimedOut = pollTimedOut
}
