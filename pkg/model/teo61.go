package model

import "fmt"

// teo governor model, the form of Linux 6.1 and the releases before 6.3.
//
// Follows drivers/cpuidle/governors/teo.c as Debian's linux-source-6.1
// (6.1.192-3) has it, the source of the lab's 6.1 series
// (lab/kernel/6.1). Its selection dates from the 5.13 rework
// (77577558f25d); 6.3 added util-awareness (9ce0f7c4bc64), which needs the
// CPU's utilisation at each selection, which no trace records: 6.3–6.10 are
// replayed with the 6.11 form (teo612.go), the nearest one modelled, and
// whatif says so (Replay.FormNotes). Only 6.1's source was read: releases before
// it are given this form as the nearest, and whatif says that too.
//
// How it differs from the 6.11–6.13 form (teo612.go), each as 6.1.192's
// teo.c has it:
//
//   - the sleep length is queried at every selection, before anything else
//     (the update always has it, and there is no skipped query);
//   - each bin also counts its "recent" intercepts: those among the last
//     NR_RECENT (9) updates, kept in a ring of the bins they fell into (a
//     hit takes a slot with no bin);
//   - no tick_hits bin beyond the deepest state and no 5/8 tick rule:
//     total is the decayed hits and intercepts of the states' bins, plus
//     PULSE;
//   - with state 0 enabled and state 1's target residency beyond the sleep
//     length, state 0 at once; with one enabled state within the sleep
//     length (idx == idx0), that state; both keep the sleep length as the
//     duration for the tick rule;
//   - an alternative is looked for when the intercepts below the candidate
//     outweigh its and the deeper states' hits and intercepts
//     (alt_intercepts), or more than NR_RECENT/2 of the recent intercepts
//     are below it (alt_recent); the walk down stops at the first state
//     where every sum that triggered the search passes half its total, and
//     its duration is then the middle of that state's bin, not the sleep
//     length;
//   - the latency constraint is applied after the walk, as the deepest
//     enabled state within the sleep length that meets it (state 0 if none
//     does, disabled or not, as the kernel leaves it).
type teo61Gov struct {
	t *table

	timeSpan    int64
	sleepLength int64
	hits        [MaxStates]uint32
	intercepts  [MaxStates]uint32
	recent      [MaxStates]uint32
	total       uint32
	// recentIdx is the ring of the last teo61Recent updates' intercept
	// bins (−1: a hit); nextRecent the slot the next update takes.
	recentIdx  [teo61Recent]int
	nextRecent int
	lastIdx    int
	lastRes    int64
}

// teo61Recent is NR_RECENT.
const teo61Recent = 9

func newTEO61(t *table) *teo61Gov {
	g := &teo61Gov{t: t, lastIdx: -1}
	for i := range g.recentIdx {
		g.recentIdx[i] = -1
	}
	return g
}

// teoForm61 says whether release v runs teo61Gov: releases before 6.3.
func teoForm61(v Version) bool { return !v.AtLeast(6, 3) }

// FormNotes says, for each policy whose governor's form in the release it
// models is not modelled as that release runs it, what the replay ran
// instead (teo's: teoFormNote), after the policy's name.
func (r *Replay) FormNotes() []string {
	var out []string
	for _, ps := range r.pols {
		if ps.pol.Governor != GovTEO {
			continue
		}
		if n := teoFormNote(ps.release); n != "" {
			out = append(out, ps.pol.Spec+": "+n)
		}
	}
	return out
}

// teoFormNote is what whatif says where teo's form in release v is not
// modelled as that release runs it (empty where it is).
func teoFormNote(v Version) string {
	switch {
	case v.AtLeast(6, 3) && !v.AtLeast(6, 11):
		return fmt.Sprintf("teo of Linux %s (6.3–6.10) is not modelled: it weighs the CPU's utilisation at each selection (util-awareness, 6.3–6.10), which no trace records, and keeps 6.1's recent-intercepts metric (until 6.11), with 6.6's rework from 6.6; it is replayed as 6.11's, the nearest form modelled, which missed 8-17 %% of 6.1's choices on eight of the lab's ten tables", v)
	case !v.AtLeast(6, 1):
		return fmt.Sprintf("teo of Linux %s was not read against its source: it is replayed as 6.1's, the oldest form modelled (held to 6.1.192's teo in the lab)", v)
	}
	return ""
}

func (g *teo61Gov) update() {
	_, idxTimer, idxDuration := g.t.teoDecayBins(&g.hits, &g.intercepts, &g.total, g.timeSpan, g.sleepLength, g.lastIdx, g.lastRes)
	slot := g.nextRecent
	g.nextRecent = (g.nextRecent + 1) % teo61Recent
	if old := g.recentIdx[slot]; old >= 0 {
		g.recent[old]--
	}
	if idxTimer == idxDuration {
		g.hits[idxTimer] += teoPulse
		g.recentIdx[slot] = -1
	} else {
		g.intercepts[idxDuration] += teoPulse
		g.recent[idxDuration]++
		g.recentIdx[slot] = idxDuration
	}
	g.total += teoPulse
}

// middleOfBin is teo_middle_of_bin(): halfway between state i's target
// residency and the next state's.
func (t *table) middleOfBin(i int) int64 { return (t.tr[i] + t.tr[i+1]) / 2 }

func (g *teo61Gov) selectState(in *selInput) (int, bool) {
	t := g.t
	if g.lastIdx >= 0 {
		g.update()
		g.lastIdx = -1
	}
	duration := in.sleepLen
	g.sleepLength = duration
	if t.n < 2 {
		return t.teoEnd(0, 0, duration, in.deltaTick, in)
	}
	idx, idx0 := -1, 0
	if !t.disabled[0] {
		idx = 0
		if t.tr[1] > duration {
			return t.teoEnd(0, idx0, duration, in.deltaTick, in)
		}
	}
	constraint := 0
	var interceptSum, hitSum, recentSum uint32
	var idxInterceptSum, idxHitSum, idxRecentSum uint32
	for i := 1; i < t.n; i++ {
		interceptSum += g.intercepts[i-1]
		hitSum += g.hits[i-1]
		recentSum += g.recent[i-1]
		if t.disabled[i] {
			continue
		}
		if idx < 0 {
			idx, idx0 = i, i // the first enabled state
		}
		if t.tr[i] > duration {
			break
		}
		idx = i
		if t.el[i] <= in.latReq {
			constraint = i
		}
		idxInterceptSum, idxHitSum, idxRecentSum = interceptSum, hitSum, recentSum
	}
	switch {
	case idx < 0:
		return t.teoEnd(0, idx0, duration, in.deltaTick, in) // none enabled
	case idx == idx0:
		return t.teoEnd(idx, idx0, duration, in.deltaTick, in)
	}
	altIntercepts := 2*idxInterceptSum > g.total-idxHitSum
	altRecent := idxRecentSum > teo61Recent/2
	if altIntercepts || altRecent {
		firstSuitableSpan, firstSuitable := duration, idx
		interceptSum, recentSum = 0, 0
		for i := idx - 1; i >= 0; i-- {
			interceptSum += g.intercepts[i]
			recentSum += g.recent[i]
			span := t.middleOfBin(i)
			if (!altRecent || 2*recentSum > idxRecentSum) && (!altIntercepts || 2*interceptSum > idxInterceptSum) {
				if teo61TimeOK(t, span, in.tickStopped) && !t.disabled[i] {
					idx, duration = i, span
				} else {
					idx, duration = firstSuitable, firstSuitableSpan
				}
				break
			}
			if t.disabled[i] {
				continue
			}
			if !teo61TimeOK(t, span, in.tickStopped) {
				if firstSuitable != idx {
					continue
				}
				break
			}
			firstSuitableSpan, firstSuitable = span, i
		}
	}
	if idx > constraint {
		idx = constraint
	}
	return t.teoEnd(idx, idx0, duration, in.deltaTick, in)
}

// teo61TimeOK is teo_time_ok(): with the tick stopped, only a duration of
// at least a tick.
func teo61TimeOK(t *table, intervalNs int64, tickStopped bool) bool {
	return !tickStopped || intervalNs >= t.tick
}

// reflect takes the stay's residency for time_span_ns, as teo612Gov does
// (its comment says why): the kernel's span, from teo_select's clock read
// to teo_reflect's, also holds the entry and the interrupt's handling, so
// a wake-up a few µs short of the timer can be a hit there and an
// intercept here. The lab's rows put what that costs within their
// agreement (lab/README.md, "Linux 6.1's teo").
func (g *teo61Gov) reflect(idx int, residencyNs int64, tickWakeup, pollTimedOut bool) {
	g.lastIdx = idx
	g.lastRes = residencyNs
	// As in teo612Gov.reflect. 6.1.192's do_idle reads got_idle_tick
	// after every stay (f4c31b07b136's backport), so the || leaves no
	// stale flag after a poll time-out; earlier 6.1.y would (teo.go).
	g.timeSpan = g.t.teoTimeSpan(g.sleepLength, residencyNs, tickWakeup, pollTimedOut)
}
