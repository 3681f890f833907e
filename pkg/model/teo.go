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
// the tick stopped); the model applies it from 6.18.3 (shallowerAlways;
// teo619.go, which 6.19 and later run, takes it always).
//
// Releases before 6.14 (kernel=6.12, or a trace recorded on one) run the
// 6.11–6.13 form instead: teo612.go; 6.19 and later the reworked form:
// teo619.go (newTEOFor picks). 50db438231dc (6.19's reversed
// tick_intercepts test, measured ≤ TICK_NSEC) was Cc stable, but no
// 6.18.y review series up to 6.18.44 carried it, and 6.18.3's teo.c still
// counts measured ≥ TICK_NSEC, as this model does.

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

// teoShallowerAlways says whether release v has a03b2011808a (of the
// releases this form runs, 6.18.3 and later 6.18.y).
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

// teoScan is what teo_select()'s first pass over the states finds, the
// same from 6.11 to 7.3 but for 7.0's bin with the most intercepts.
type teoScan struct {
	// idx: the deepest enabled state (−1: none), idx0 the shallowest,
	// constraint the deepest enabled one the latency limit allows (0 if
	// none).
	idx, idx0, constraint int
	// idxIntercepts, idxHits: the sums over the bins below idx;
	// intercepts over every bin but the deepest.
	idxIntercepts, idxHits, intercepts uint32
	// maxInterceptsIdx: the bin below the deepest with the most
	// intercepts, the deeper on a tie, disabled states' bins included
	// (a971f984b845, 7.0).
	maxInterceptsIdx int
}

func (t *table) teoFirstScan(hits, intercepts *[MaxStates]uint32, latReq int64) teoScan {
	s := teoScan{idx: -1, maxInterceptsIdx: -1}
	if !t.disabled[0] {
		s.idx = 0
	}
	var hitSum, maxIntercepts uint32
	for i := 1; i < t.n; i++ {
		s.intercepts += intercepts[i-1]
		hitSum += hits[i-1]
		if intercepts[i-1] >= maxIntercepts {
			maxIntercepts, s.maxInterceptsIdx = intercepts[i-1], i-1
		}
		if t.disabled[i] {
			continue
		}
		if s.idx < 0 {
			s.idx0 = i
		}
		s.idx = i
		if t.el[i] <= latReq {
			s.constraint = i
		}
		s.idxIntercepts, s.idxHits = s.intercepts, hitSum
	}
	return s
}

// teoStart is what teo_select() does in every form after the update, up to
// the metrics: no choice with fewer than two states or none enabled (state
// 0, the tick kept), and with one enabled state no metrics to read (its
// target residency for the duration, the next tick half a tick away).
// done says the choice is made: idx and stop.
func (t *table) teoStart(hits, intercepts *[MaxStates]uint32, in *selInput) (s teoScan, idx int, stop, done bool) {
	if t.n < 2 {
		return s, 0, false, true
	}
	s = t.teoFirstScan(hits, intercepts, in.latReq)
	switch {
	case s.idx < 0:
		return s, 0, false, true
	case s.idx == s.idx0:
		idx, stop = t.teoEnd(s.idx, s.idx0, t.tr[s.idx], t.tick/2, in)
		return s, idx, stop, true
	}
	return s, 0, false, false
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
	g.sleepLength = int64(ktimeMax)
	s, first, stop, done := t.teoStart(&g.hits, &g.intercepts, in)
	if done {
		return first, stop
	}
	idx, idx0, constraint := s.idx, s.idx0, s.constraint
	idxInterceptSum, idxHitSum := s.idxIntercepts, s.idxHits
	var duration int64
	if 2*idxInterceptSum > g.total-idxHitSum {
		firstSuitable := idx
		var interceptSum uint32
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
	deltaTick := in.deltaTick
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
	// Not modelled: where do_idle does not consume got_idle_tick after
	// each stay (before f4c31b07b136: 6.14-6.17, and 6.12.y and 6.18.y
	// before its backport), the || below skips tick_nohz_idle_got_tick()
	// after a poll time-out, and a tick that came during that poll makes
	// the next stay artificial too when its sleep length exceeds a tick.
	// The replay passes the recorded flag (which holds that stale bit)
	// where its stay is the recorded one, a fresh one for its own; no lab
	// kernel runs those releases (teo review, 2026-12-07).
	g.artificial = pollTimedOut || (tickWakeup && g.sleepLength > g.t.tick)
}
