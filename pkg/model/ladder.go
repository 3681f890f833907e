package model

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

// ladderFirst is ladder_select_state's first_idx: 1 where state 0 polls.
func ladderFirst(t *table) int {
	if t.n > 0 && t.polling[0] {
		return 1
	}
	return 0
}

func newLadder(t *table) *ladderGov {
	g := &ladderGov{t: t, first: ladderFirst(t)}
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
