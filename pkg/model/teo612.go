package model

// teo governor model, the form of Linux 6.11–6.13.
//
// Follows drivers/cpuidle/governors/teo.c as Debian's linux-source-6.12
// (6.12.117-1~deb12u1) has it, the source the lab kernel runs. teo.go
// models the 6.14–6.18 form, teo619.go 6.19's and later. The releases:
//
//   - 6.6 (21d28cd2fa5f, 6da8f9ba5a87, 2662342079f5 and the rest of that
//     series): the sleep length queried only after the metrics picked a
//     candidate, the tick_hits bin, the tick_intercept_sum 5/8 rule; util-
//     awareness (9ce0f7c4bc64, 6.3) and the recent-intercepts metric still
//     in.
//   - 6.11: util-awareness reverted (0a2998fa48f0) and the recent-intercepts
//     metric removed (449914398083): the form below.
//   - 6.14 (merge 59484c3095ff, "Merge branch 'cpuidle-teo'"): total decayed
//     instead of recomputed (ddcfa7964677), tick_hits replaced by
//     tick_intercepts (d619b5cc6780), time_span_ns replaced by an
//     artificial-wakeup flag, prev_intercept_idx dropped, short_idles and
//     the LATENCY_THRESHOLD skip added: teo.go.
//   - 6.12.y: 6.12.64 took a03b2011808a ("Drop misguided target residency
//     check", per Debian's changelog of linux-source-6.12, under
//     ChangeLog-6.12.64); no other teo change but a comment (6.12.11).
//
// Differences from the 6.14–6.18 form (teo.go), each as teo.c of 6.12.117 has it:
//
//   - teo_update: measured_ns is U64_MAX when time_span_ns (local_clock()
//     from teo_select to teo_reflect) is at least sleep_length_ns: a wake-up
//     at or after the timer the selection expected counts in the timer's
//     bin, whatever the exit latency took off last_residency_ns. The model
//     takes the stay's residency for time_span_ns: with the sleep length
//     counted from the state's entry, as the replay counts it, that is "the
//     stay ended at or after the expected timer". The artificial cases
//     (poll time limit, a tick wake-up with a sleep length beyond a tick)
//     set time_span_ns = sleep_length_ns and so also give U64_MAX.
//   - no short_idles.
//   - total is recomputed on every update: Σ decayed (hits + intercepts)
//     over all bins, plus the decayed tick_hits when that bin exists,
//     plus PULSE.
//   - when the deepest state's target residency (disabled or not) is below
//     TICK_NSEC, a hits-only bin beyond the deepest state: a sleep length of
//     at least TICK_NSEC makes the timer bin that one, a hit there when the
//     measured idle reached TICK_NSEC, else an intercept in the bin the
//     measured idle fell into (the deepest state's included).
//   - teo_select: the 5/8 tick rule counts tick_intercept_sum, all
//     intercepts (every bin); there is no short-idle or latency-constraint
//     skip; when the intercept walk takes the candidate from a deeper state
//     to state 0 the sleep length is still queried (prev_intercept_idx)
//     and the tick kept; otherwise it is skipped only for state 0 or, with
//     a polling state 0, a candidate whose target residency is below
//     RESIDENCY_THRESHOLD_NS (C1E 4 µs on icx, say: then the tick is kept
//     and no sleep length is recorded for the update).
//   - the shallower state for a sleep length below the candidate's target
//     residency is taken only if teo_state_ok accepts it, until 6.12.64
//     (a03b2011808a); unconditionally from 6.12.64.
//
// Releases 6.3–6.10 (util-awareness, recent intercepts) are not modelled;
// they get this form, the nearest, and whatif says so (Replay.FormNotes).
// Releases before 6.3 run teo61.go's.

type teo612Gov struct {
	t *table
	// shallowerAlways: a03b2011808a (6.12.64)
	shallowerAlways bool

	timeSpan    int64
	sleepLength int64
	hits        [MaxStates]uint32
	intercepts  [MaxStates]uint32
	total       uint32
	tickHits    uint32
	lastIdx     int
	lastRes     int64
}

func newTEO612(t *table) *teo612Gov { return &teo612Gov{t: t, lastIdx: -1} }

// teoForm612 says whether release v runs the 6.11–6.13 teo (teo612Gov)
// rather than the 6.14–6.18 one (teoGov) or 6.19's and later (teo619Gov).
func teoForm612(v Version) bool { return !v.AtLeast(6, 14) }

// teo612ShallowerAlways says whether a release of the old form has
// a03b2011808a: 6.12.y from 6.12.64.
func teo612ShallowerAlways(v Version) bool { return v.Is(6, 12) && v.Patch >= 64 }

// newTEOFor is teo as release v runs it: the form before 6.3 (teo61.go),
// the 6.11–6.13 form (also given to 6.3–6.10), the 6.14–6.18 one
// (shallowerAlways is teoShallowerAlways(v)), or 6.19's and later
// (teo619.go).
func newTEOFor(t *table, v Version) governor {
	if v.AtLeast(6, 19) {
		return newTEO619(t, v)
	}
	if teoForm61(v) {
		return newTEO61(t)
	}
	if teoForm612(v) {
		g := newTEO612(t)
		g.shallowerAlways = teo612ShallowerAlways(v)
		return g
	}
	g := newTEO(t)
	g.shallowerAlways = teoShallowerAlways(v)
	return g
}

// teoDecayBins is the first half of teo_update() from 6.1 to 6.13: the
// measured idle duration (U64_MAX where the stay's span reached the sleep
// length, else its residency less half the exit latency, or half the
// residency where that is shorter), every state's bin decayed into total
// (recomputed), and the bins the sleep length and the measured duration
// fall into.
func (t *table) teoDecayBins(hits, intercepts *[MaxStates]uint32, total *uint32, timeSpan, sleepLength int64, lastIdx int, lastRes int64) (measured uint64, idxTimer, idxDuration int) {
	if timeSpan >= sleepLength {
		measured = ^uint64(0)
	} else {
		lat := uint64(t.el[lastIdx])
		measured = uint64(max(lastRes, 0))
		if measured >= lat {
			measured -= lat / 2
		} else {
			measured /= 2
		}
	}
	*total = 0
	for i := 0; i < t.n; i++ {
		hits[i] -= hits[i] >> teoDecayShift
		intercepts[i] -= intercepts[i] >> teoDecayShift
		*total += hits[i] + intercepts[i]
		if t.tr[i] <= sleepLength {
			idxTimer = i
			if uint64(t.tr[i]) <= measured {
				idxDuration = i
			}
		}
	}
	return measured, idxTimer, idxDuration
}

func (g *teo612Gov) update() {
	t := g.t
	measured, idxTimer, idxDuration := t.teoDecayBins(&g.hits, &g.intercepts, &g.total, g.timeSpan, g.sleepLength, g.lastIdx, g.lastRes)
	if t.n > 0 && t.tr[t.n-1] < t.tick {
		g.tickHits -= g.tickHits >> teoDecayShift
		g.total += g.tickHits
		if t.tick <= g.sleepLength {
			idxTimer = t.n
			if uint64(t.tick) <= measured {
				g.tickHits += teoPulse
				g.total += teoPulse
				return
			}
		}
	}
	if idxTimer == idxDuration {
		g.hits[idxTimer] += teoPulse
	} else {
		g.intercepts[idxDuration] += teoPulse
	}
	g.total += teoPulse
}

func (g *teo612Gov) selectState(in *selInput) (int, bool) {
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
	tickInterceptSum := s.intercepts + g.intercepts[t.n-1]
	prevInterceptIdx := idx
	if 2*idxInterceptSum > g.total-idxHitSum {
		firstSuitable := idx
		var interceptSum uint32
		for i := idx - 1; i >= 0; i-- {
			interceptSum += g.intercepts[i]
			if 2*interceptSum > idxInterceptSum {
				if t.teoStateOK(i, in.tickStopped) && !t.disabled[i] {
					idx = i
				} else {
					idx = firstSuitable
				}
				break
			}
			if t.disabled[i] {
				continue
			}
			if !t.teoStateOK(i, in.tickStopped) {
				if firstSuitable != idx {
					continue
				}
				break
			}
			firstSuitable = i
		}
	}
	if idx == 0 && prevInterceptIdx != 0 {
		// queried only so that the update can tell a timer wake-up
		g.sleepLength = in.sleepLen
		return 0, false
	}
	if idx > constraint {
		idx = constraint
	}
	if idx == 0 {
		return 0, false
	}
	if t.polling[0] && t.tr[idx] < residencyThresholdNs {
		return idx, false
	}
	duration := in.sleepLen
	deltaTick := in.deltaTick
	g.sleepLength = duration
	if t.tr[idx] > duration {
		if i := t.teoShallower(idx, duration); g.shallowerAlways || t.teoStateOK(i, in.tickStopped) {
			idx = i
		}
	}
	if t.tr[idx] < t.tick && tickInterceptSum > g.total/2+g.total/8 {
		duration = t.tick / 2
	}
	return t.teoEnd(idx, idx0, duration, deltaTick, in)
}

func (g *teo612Gov) reflect(idx int, residencyNs int64, tickWakeup, pollTimedOut bool) {
	g.lastIdx = idx
	g.lastRes = residencyNs
	// As in teoGov.reflect, the stale got_idle_tick after a poll time-out
	// of kernels before f4c31b07b136 is not modelled.
	g.timeSpan = g.t.teoTimeSpan(g.sleepLength, residencyNs, tickWakeup, pollTimedOut)
}

// teoTimeSpan is teo_reflect()'s time_span_ns from 6.1 to 6.13: the sleep
// length where a safety net ended the stay (a poll time-out, or the tick
// with a sleep length beyond it), else the stay's residency (the header
// comment says why that stands for the kernel's clock-read span).
func (t *table) teoTimeSpan(sleepLength, residencyNs int64, tickWakeup, pollTimedOut bool) int64 {
	if pollTimedOut || (tickWakeup && sleepLength > t.tick) {
		return sleepLength
	}
	return max(residencyNs, 0)
}
