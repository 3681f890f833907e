package model

// teo governor model.
//
// Follows drivers/cpuidle/governors/teo.c of Linux 6.18 (the 6.14–6.18
// form: hits/intercepts per bin, short_idles, tick_intercepts counted when
// the measured idle is ≥ TICK_NSEC, artificial_wakeup on a poll timeout or
// a tick wake with a sleep length beyond one tick, teo_state_ok for a
// stopped tick, the 5/8 tick_intercepts rule). Constants: PULSE 1024,
// DECAY_SHIFT 3, RESIDENCY_THRESHOLD_NS 15 µs, LATENCY_THRESHOLD_NS 7.5 µs.
//
// 6.18.3 took a03b2011808a from 6.19 ("Drop misguided target residency
// check": the shallower state found when the candidate's target residency
// exceeds the sleep length is used even if teo_state_ok rejects it with
// the tick stopped); the model applies it for 6.18.3+ and 6.19+
// (shallowerAlways).
//
// Releases before 6.14 (kernel=6.12, or a trace recorded on one) run the
// 6.11–6.13 form instead: teo612.go (newTEOFor picks). Left out: the rest
// of the 6.19/7.0 rework (tick wake-up classification, zero-size bins,
// max-intercepts bound) — from 6.14 on, kernel= changes only a03b2011808a;
// the replay runs the 6.18.y logic.

const (
	teoPulse      = 1024
	teoDecayShift = 3
	teoLatThresh  = residencyThresholdNs / 2
)

type teoGov struct {
	t *table
	// shallowerAlways: a03b2011808a (6.19, 6.18.3)
	shallowerAlways bool

	sleepLength    int64
	hits           [MaxStates]uint32
	intercepts     [MaxStates]uint32
	total          uint32
	tickIntercepts uint32
	shortIdles     uint32
	artificial     bool
	lastIdx        int
	lastResidency  int64
}

func newTEO(t *table) *teoGov { return &teoGov{t: t, lastIdx: -1} }

// teoShallowerAlways says whether release v has a03b2011808a.
func teoShallowerAlways(v Version) bool {
	return v.AtLeast(6, 19) || v.Is(6, 18) && v.Patch >= 3
}

func (g *teoGov) update() {
	t := g.t
	g.shortIdles -= g.shortIdles >> teoDecayShift
	var measured uint64
	if g.artificial {
		measured = ^uint64(0)
	} else {
		lat := uint64(t.el[g.lastIdx])
		measured = uint64(max(g.lastResidency, 0))
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
	idxTimer, idxDuration := 0, 0
	for i := 0; i < t.n; i++ {
		g.hits[i] -= g.hits[i] >> teoDecayShift
		g.intercepts[i] -= g.intercepts[i] >> teoDecayShift
		if t.tr[i] <= g.sleepLength {
			idxTimer = i
			if uint64(t.tr[i]) <= measured {
				idxDuration = i
			}
		}
	}
	g.tickIntercepts -= g.tickIntercepts >> teoDecayShift
	if idxTimer == idxDuration {
		g.hits[idxTimer] += teoPulse
	} else {
		g.intercepts[idxDuration] += teoPulse
		if uint64(t.tick) <= measured {
			g.tickIntercepts += teoPulse
		}
	}
	g.total -= g.total >> teoDecayShift
	g.total += teoPulse
}

// teoStateOK is teo_state_ok() (unchanged from 6.12 to 6.18): with the tick
// stopped, only states whose residency reaches the tick.
func (t *table) teoStateOK(i int, tickStopped bool) bool {
	return !tickStopped || t.tr[i] >= t.tick
}

// teoShallower is teo_find_shallower_state() (unchanged from 6.12 to 6.18).
func (t *table) teoShallower(idx int, duration int64) int {
	for i := idx - 1; i >= 0; i-- {
		if t.disabled[i] {
			continue
		}
		idx = i
		if t.tr[i] <= duration {
			break
		}
	}
	return idx
}

// teoEnd is the end of teo_select() (unchanged from 6.12 to 6.18): the tick
// is stopped unless a non-polling state shorter than it was chosen with the
// tick running, and then a state deeper than the next tick is replaced by a
// shallower one.
func (t *table) teoEnd(idx, idx0 int, duration, deltaTick int64, in *selInput) (int, bool) {
	if (!t.polling[idx] && duration >= t.tick) || in.tickStopped {
		return idx, true
	}
	if idx > idx0 && t.tr[idx] > deltaTick {
		idx = t.teoShallower(idx, deltaTick)
	}
	return idx, false
}

func (g *teoGov) selectState(in *selInput) (int, bool) {
	t := g.t
	if g.lastIdx >= 0 {
		g.update()
		g.lastIdx = -1
	}
	deltaTick := t.tick / 2
	g.sleepLength = int64(ktimeMax)
	if t.n < 2 {
		return 0, false
	}
	idx, idx0, constraint := -1, 0, 0
	var interceptSum, hitSum, idxInterceptSum, idxHitSum uint32
	if !t.disabled[0] {
		idx = 0
	}
	for i := 1; i < t.n; i++ {
		interceptSum += g.intercepts[i-1]
		hitSum += g.hits[i-1]
		if t.disabled[i] {
			continue
		}
		if idx < 0 {
			idx0 = i
		}
		idx = i
		if t.el[i] <= in.latReq {
			constraint = i
		}
		idxInterceptSum, idxHitSum = interceptSum, hitSum
	}
	if idx < 0 {
		return 0, false
	}
	var duration int64
	if idx == idx0 {
		duration = t.tr[idx]
		return t.teoEnd(idx, idx0, duration, deltaTick, in)
	}
	if 2*idxInterceptSum > g.total-idxHitSum {
		firstSuitable := idx
		interceptSum = 0
		for i := idx - 1; i >= 0; i-- {
			interceptSum += g.intercepts[i]
			if 2*interceptSum > idxInterceptSum {
				if t.teoStateOK(i, in.tickStopped) && !t.disabled[i] {
					idx = i
					break
				}
				idx = firstSuitable
				break
			}
			if t.disabled[i] {
				continue
			}
			if t.teoStateOK(i, in.tickStopped) {
				firstSuitable = i
				continue
			}
			if firstSuitable == idx {
				break
			}
		}
	}
	if idx > constraint {
		idx = constraint
	}
	if (idx == 0 || t.tr[idx] < residencyThresholdNs) &&
		(2*g.shortIdles >= g.total || in.latReq < teoLatThresh) {
		return idx, false
	}
	duration = in.sleepLen
	deltaTick = in.deltaTick
	g.sleepLength = duration
	if idx == 0 {
		return idx, false
	}
	if t.tr[idx] > duration {
		if i := t.teoShallower(idx, duration); g.shallowerAlways || t.teoStateOK(i, in.tickStopped) {
			idx = i
		}
	}
	if t.tr[idx] < t.tick && g.tickIntercepts > g.total/2+g.total/8 {
		duration = t.tick / 2
	}
	return t.teoEnd(idx, idx0, duration, deltaTick, in)
}

func (g *teoGov) reflect(idx int, residencyNs int64, tickWakeup, pollTimedOut bool) {
	g.lastIdx = idx
	g.lastResidency = residencyNs
	g.artificial = pollTimedOut || (tickWakeup && g.sleepLength > g.t.tick)
}

// ladder governor model.
//
// Follows drivers/cpuidle/governors/ladder.c as of Linux 6.12 (read in
// Debian's linux-source-6.12, 6.12.117; ladder.c there is v6.12's, and the
// decision logic below has not changed since the nanosecond conversion of
// 5.8): promotion after PROMOTION_COUNT (4) stays longer than the state's
// exit latency, demotion after DEMOTION_COUNT (1) stay shorter than it,
// forced demotion when the state is disabled or too slow for latency_req;
// the first state is 1 when state 0 is POLL. Ladder leaves stop_tick alone,
// so the tick is always allowed to stop. Three details of the C code that a
// straight reading misses, each measured against 6.12.117 in the lab:
//
//   - last_residency is s64 but the thresholds it is compared with are u64
//     (struct ladder_device_state), so the comparisons are unsigned: a stay
//     shorter than its state's exit latency (last_residency < 0) counts as
//     long, a promotion step and never a demotion (ladderLonger/Shorter).
//   - An aborted attempt (kernel/sched/idle.c call_cpuidle: need_resched
//     after the selection) has run ladder_select_state, which may move
//     last_state_idx and the counters, and leaves dev->last_residency_ns 0
//     with no reflect; the next selection sees 0 − exit latency, again a
//     "long" stay by the rule above (selInput.aborts, see selectState).
//   - ladder_enable_device sets thresholds from first_idx only: with POLL
//     as state 0, states[0] keeps the zeroed per-CPU thresholds
//     (promotion_count 0, times 0), so after a latency_req == 0 selection
//     the next one promotes after a single stay of non-zero length.

const (
	ladderPromotionCount = 4
	ladderDemotionCount  = 1
)

type ladderGov struct {
	t     *table
	first int
	last  int
	// per-state thresholds as ladder_enable_device leaves them
	promoCount, demoCount [MaxStates]int
	promoTime, demoTime   [MaxStates]int64
	promo, demo           [MaxStates]int
	lastResidency         int64
	// selectedFrom is last_state_idx before the latest selection's final
	// step (after any aborted attempts' selections), for resync.
	selectedFrom int
}

func newLadder(t *table) *ladderGov {
	g := &ladderGov{t: t}
	if t.n > 0 && t.polling[0] {
		g.first = 1
	}
	g.last = g.first
	if g.last >= t.n {
		g.last = max(t.n-1, 0)
	}
	for i := g.first; i < min(t.n, MaxStates); i++ {
		g.promoCount[i], g.demoCount[i] = ladderPromotionCount, ladderDemotionCount
		if i < t.n-1 {
			g.promoTime[i] = t.el[i]
		}
		if i > g.first {
			g.demoTime[i] = t.el[i]
		}
	}
	return g
}

// ladderLonger and ladderShorter are ladder_select_state's comparisons of
// the s64 last_residency with the u64 thresholds: C converts the signed
// side to u64, so a negative residency is larger than every threshold.
func ladderLonger(lr, threshold int64) bool  { return uint64(lr) > uint64(threshold) }
func ladderShorter(lr, threshold int64) bool { return uint64(lr) < uint64(threshold) }

func (g *ladderGov) move(oldIdx, newIdx int) int {
	g.promo[oldIdx], g.demo[oldIdx] = 0, 0
	g.last = newIdx
	return newIdx
}

func (g *ladderGov) selectState(in *selInput) (int, bool) {
	// Each aborted attempt ran a selection on the residency then in
	// dev->last_residency_ns and left it 0 (call_cpuidle), without reflect.
	for range min(in.aborts, ladderMaxAborts) {
		g.selectOnce(in.latReq)
		g.lastResidency = 0
	}
	g.selectedFrom = g.last
	return g.selectOnce(in.latReq), true
}

// resync brings the counters kept on the kernel's history (agreement's
// model) in line with a recorded choice rec that differs from the model's
// own: a kernel choice other than the state it was at is a
// ladder_do_selection from that state, which zeroes its counters. Without
// this, one missed move leaves promotion counts out of phase with the
// kernel's for as long as the CPU keeps visiting the state (reflect
// corrects last_state_idx, not the counters), and every later promotion
// is counted as a disagreement again.
func (g *ladderGov) resync(chosen, rec int) {
	from := g.selectedFrom
	if chosen == rec || rec == from || from < 0 || from >= MaxStates {
		return
	}
	g.promo[from], g.demo[from] = 0, 0
}

// ladderMaxAborts bounds the selections replayed for aborted attempts:
// after a few the ladder is at a fixed point (each one a promotion step
// from a zero residency).
const ladderMaxAborts = 2 * ladderPromotionCount * MaxStates

func (g *ladderGov) selectOnce(latReq int64) int {
	t := g.t
	last := g.last
	if latReq == 0 {
		return g.move(last, 0)
	}
	lr := g.lastResidency - t.el[last]
	if last < t.n-1 && !t.disabled[last+1] && ladderLonger(lr, g.promoTime[last]) && t.el[last+1] <= latReq {
		g.promo[last]++
		g.demo[last] = 0
		if g.promo[last] >= g.promoCount[last] {
			return g.move(last, last+1)
		}
	}
	if last > g.first && (t.disabled[last] || t.el[last] > latReq) {
		i := last - 1
		for ; i > g.first; i-- {
			if t.el[i] <= latReq {
				break
			}
		}
		return g.move(last, i)
	}
	if last > g.first && ladderShorter(lr, g.demoTime[last]) {
		g.demo[last]++
		g.promo[last] = 0
		if g.demo[last] >= g.demoCount[last] {
			return g.move(last, last-1)
		}
	}
	return last
}

func (g *ladderGov) reflect(idx int, residencyNs int64, tickWakeup, pollTimedOut bool) {
	g.lastResidency = residencyNs
	if idx > 0 {
		g.last = idx
	}
}
