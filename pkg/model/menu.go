package model

import (
	"math"
)

// menu governor model.
//
// Follows drivers/cpuidle/governors/menu.c of Linux 6.18 and of the 6.18.y
// stable series, which took two later mainline commits: 07d815701274
// (6.19: the polling override only for states with target residency
// < RESIDENCY_THRESHOLD_NS) in 6.18.3, and 80606f4eb8d7 (7.0: "Always
// check timers with tick stopped") in 6.18.14 (the 6.18.3-rc1 and
// 6.18.14-rc1 stable review series, Dec 2025 and Feb 2026); 6.19.y took
// the second in 6.19.4 (6.19.4-rc1, patch 044/781). Constants from
// menu.c and gov.h: 6 buckets, 8 intervals, RESOLUTION 1024, DECAY 8,
// MAX_INTERESTING 50 ms, RESIDENCY_THRESHOLD_NS 15 µs.
//
// kernel= selects the variants of ../shared/research/governors.md §2.4 by
// mainline release; "6.18" is mainline v6.18 and 6.18.N the stable
// release; the 6.12.y and 6.1.y backports are in menuFlagsFor:
//   < 6.6   sleep length always queried
//   ≤ 6.12  iowait era: 12 buckets (the second six while tasks wait for IO
//           on the CPU) and, with the tick running, latency_req capped at
//           prediction / (1 + 10·nr_iowait), from the trace's NrIOWait
//   < 6.15  one-sided outlier trimming in the typical-interval detector
//   6.15–6.17 "Avoid discarding useful information" (return max when ≥ 4
//           samples remain), reverted in 6.18-rc3 (6.12.31–55 and
//           6.1.141–157 had it too)
//   < 6.17  residency check before the latency check in the main loop
//   ≥ 6.18  polling override also needs exit latency ≤ prediction
//   ≥ 6.19 (and 6.18.3+) polling override needs target residency < 15 µs
//   ≥ 7.0 (and 6.18.14+, 6.19.4+) timers always queried with the tick stopped
//   ≥ 7.1   stopped-tick override only when the timer is beyond 2 ticks
//           (SAFE_TIMER_RANGE_NS, queued for 7.1 in linux-pm)
//   ≥ 6.17  UINT_MAX into the intervals per attempt aborted after its
//           selection (from the trace's AbortsBefore, or AbortedBefore)
// margin=PCT replaces the stopped-tick override with
// min(prediction·(1+PCT/100), next timer) (Nechita, Jan 2026, unmerged).
//
// Left out: where the trace cannot count aborted attempts (no menu
// governor running, no kallsyms data symbols) a run of them pushes one
// UINT_MAX here; traces without NrIOWait model no task waiting for IO.

type menuFlags struct {
	skipQuery          bool // 5484e31bbbff, 6.6
	iowaitCap          bool // ≤ 6.12
	twoSided           bool // 6.15
	maxReturn          bool // 85975daeaa4d, 6.15–6.17
	latencyFirst       bool // 779b1a1cb13a, 6.17
	pollElOverride     bool // db86f55bf81a, 6.18
	pollResThresh      bool // 07d815701274, 6.19 (6.18.3)
	alwaysQueryStopped bool // 80606f4eb8d7, 7.0 (6.18.14, 6.19.4)
	safeTimer          bool // e57c2bf2e89d, 7.1
	abortPush          bool // fa3fa55de0d6, 6.17: UINT_MAX after an aborted entry
	margin             bool
	marginPct          float64
}

// The 6.12.y and 6.1.y stable releases that took later mainline menu
// commits, from Debian's changelogs (linux 6.12.118-1~deb12u1 and
// 6.1.192-3), which list each upstream stable release's commits under its
// ChangeLog-X.Y.Z:
//
//	85975daeaa4d "Avoid discarding useful information"   6.12.31, 6.1.141
//	  (in the one-sided detector: return max when 4–6 samples remain),
//	  reverted in                                         6.12.56, 6.1.158
//	fa3fa55de0d6 "Avoid using invalid recent intervals data"
//	  (UINT_MAX after an aborted attempt)                 6.12.43, 6.1.157
//	38f83090f515 "Remove iowait influence" and
//	779b1a1cb13a "Avoid selecting states with too much latency"  6.12.44
//	db86f55bf81a "Select polling state in some more cases"       6.12.58
//	07d815701274 "Use residency threshold in polling state override
//	  decisions"                                          6.12.64
//	80606f4eb8d7 "Always check timers with tick stopped"  6.12.75
//
// Debian's 6.12.117 source still has the one-sided detector of before
// 6.15; the fidelity tests check 6.12.118 and 6.1.192. 6.6.y and 5.15.y,
// which Debian does not ship, get the mainline form of their release (the
// stable review mails show 85975daeaa4d and its revert went there too).
func menuFlagsFor(v Version) menuFlags {
	stable612 := func(patch int) bool { return v.Is(6, 12) && v.Patch >= patch }
	stable61 := func(patch int) bool { return v.Is(6, 1) && v.Patch >= patch }
	return menuFlags{
		skipQuery:          v.AtLeast(6, 6),
		iowaitCap:          !v.AtLeast(6, 13) && !stable612(44),
		twoSided:           v.AtLeast(6, 15),
		maxReturn:          v.AtLeast(6, 15) && !v.AtLeast(6, 18) || stable612(31) && !stable612(56) || stable61(141) && !stable61(158),
		latencyFirst:       v.AtLeast(6, 17) || stable612(44),
		pollElOverride:     v.AtLeast(6, 18) || stable612(58),
		pollResThresh:      v.AtLeast(6, 19) || v.Is(6, 18) && v.Patch >= 3 || stable612(64),
		alwaysQueryStopped: v.AtLeast(7, 0) || v.Is(6, 18) && v.Patch >= 14 || v.Is(6, 19) && v.Patch >= 4 || stable612(75),
		safeTimer:          v.AtLeast(7, 1),
		abortPush:          v.AtLeast(6, 17) || stable612(43) || stable61(157),
	}
}

const (
	menuBuckets = 6
	// menuIOWaitBuckets: before 6.13 a CPU with tasks in iowait used a
	// second set of six buckets.
	menuIOWaitBuckets  = 12
	menuIntervals      = 8
	menuResolution     = 1024
	menuDecay          = 8
	menuMaxInteresting = 50_000_000 // ns
)

type menuGov struct {
	t *table
	f menuFlags

	needsUpdate   bool
	tickWakeup    bool
	pollTimeLimit bool
	bucket        int
	nextTimer     uint64
	lastIdx       int
	lastResidency int64
	cf            [menuIOWaitBuckets]uint32

	// The recent-intervals ring and, kept up to date by push, the count,
	// sum and (wrapping, as the kernel's u64) sum of squares of the
	// samples that are not UINT_MAX markers.
	intervals [menuIntervals]uint32
	ptr       int
	nvalid    int
	sum       uint64
	sumsq     uint64

	// tally is where the override's runs are counted: the policy's, so
	// that they are taken back with its other figures where periods
	// replay as history (Replay.SetCountedFrom).
	tally *menuTally
}

// menuTally counts menu's stopped-tick override runs: stoppedRuns the
// selections that reached it (the tick already stopped, a prediction
// under a tick), marginOther those where margin= predicted other than the
// next timer, which menu's override would have taken. whatif's reason
// for a margin that changed little.
type menuTally struct{ stoppedRuns, marginOther uint64 }

func newMenu(t *table, f *menuFlags) *menuGov {
	m := &menuGov{}
	m.init(t, f, &menuTally{})
	return m
}

func (m *menuGov) init(t *table, f *menuFlags, tally *menuTally) {
	*m = menuGov{t: t, f: *f, tally: tally}
	for i := range m.cf {
		m.cf[i] = menuResolution * menuDecay
	}
	m.nvalid = menuIntervals // eight 0 µs samples
}

// setIntervals replaces the ring (tests).
func (m *menuGov) setIntervals(iv [menuIntervals]uint32) {
	m.intervals = iv
	m.nvalid, m.sum, m.sumsq = 0, 0, 0
	for _, v := range iv {
		if v != math.MaxUint32 {
			m.nvalid++
			m.sum += uint64(v)
			m.sumsq += uint64(v) * uint64(v)
		}
	}
}

// menuBucket is which_bucket: the decade of the sleep length from 10 µs
// to 100 ms (a sum of comparisons, so no data-dependent branch).
func menuBucket(ns uint64) int {
	return b2int(ns >= 10_000) + b2int(ns >= 100_000) + b2int(ns >= 1_000_000) +
		b2int(ns >= 10_000_000) + b2int(ns >= 100_000_000)
}

func b2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// whichBucket is which_bucket() of the release modelled: before 6.13 a CPU
// with tasks in iowait uses the second six buckets.
func (m *menuGov) whichBucket(ns uint64, in *selInput) int {
	if m.f.iowaitCap && in.nrIOWait > 0 {
		return menuBucket(ns) + menuBuckets
	}
	return menuBucket(ns)
}

// push is menu_update_intervals.
func (m *menuGov) push(us uint32) {
	p := m.ptr & (menuIntervals - 1)
	old := m.intervals[p]
	m.intervals[p] = us
	m.ptr = (p + 1) & (menuIntervals - 1)
	if old != math.MaxUint32 {
		m.nvalid--
		m.sum -= uint64(old)
		m.sumsq -= uint64(old) * uint64(old)
	}
	if us != math.MaxUint32 {
		m.nvalid++
		m.sum += uint64(us)
		m.sumsq += uint64(us) * uint64(us)
	}
}

// sort8 returns the ring sorted, by an optimal 19-comparator network
// (min/max without data-dependent jumps), into out. Samples are read and
// written one by one: a wide copy of the ring just after push's narrow
// store would stall on store forwarding.
func sort8(v, out *[menuIntervals]uint32) {
	a0, a1, a2, a3, a4, a5, a6, a7 := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	a0, a2 = min(a0, a2), max(a0, a2)
	a1, a3 = min(a1, a3), max(a1, a3)
	a4, a6 = min(a4, a6), max(a4, a6)
	a5, a7 = min(a5, a7), max(a5, a7)
	a0, a4 = min(a0, a4), max(a0, a4)
	a1, a5 = min(a1, a5), max(a1, a5)
	a2, a6 = min(a2, a6), max(a2, a6)
	a3, a7 = min(a3, a7), max(a3, a7)
	a0, a1 = min(a0, a1), max(a0, a1)
	a2, a3 = min(a2, a3), max(a2, a3)
	a4, a5 = min(a4, a5), max(a4, a5)
	a6, a7 = min(a6, a7), max(a6, a7)
	a2, a4 = min(a2, a4), max(a2, a4)
	a3, a5 = min(a3, a5), max(a3, a5)
	a1, a4 = min(a1, a4), max(a1, a4)
	a3, a6 = min(a3, a6), max(a3, a6)
	a1, a2 = min(a1, a2), max(a1, a2)
	a3, a4 = min(a3, a4), max(a3, a4)
	a5, a6 = min(a5, a6), max(a5, a6)
	out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7] = a0, a1, a2, a3, a4, a5, a6, a7
}

// walk returns the position in t.en of the first enabled state whose exit
// latency exceeds latReq or whose target residency exceeds predicted;
// t.nen if every enabled state fits. When both columns are non-decreasing
// (every real table) the states that fit are a prefix, so their count is
// that position: no data-dependent branch.
func (t *table) walk(predicted uint64, latReq int64) int {
	n := min(t.nen, MaxStates)
	if t.enMonotone {
		k := 0
		for j := range n {
			k += b2int(t.enTr[j] <= predicted) & b2int(t.enEl[j] <= latReq)
		}
		return k
	}
	for j := range n {
		if t.enEl[j] > latReq || t.enTr[j] > predicted {
			return j
		}
	}
	return n
}

// divSmall is x/d for the detector's sample counts 1..8, as constant
// divisions the compiler turns into multiplications.
func divSmall(x uint64, d int) uint64 {
	switch d {
	case 1:
		return x
	case 2:
		return x / 2
	case 3:
		return x / 3
	case 4:
		return x / 4
	case 5:
		return x / 5
	case 6:
		return x / 6
	case 7:
		return x / 7
	}
	return x / 8
}

// typical is get_typical_interval: the repeating-pattern detector, in µs;
// MaxUint32 when there is no confident prediction.
//
// Each round of the kernel's loop admits the samples strictly between its
// two thresholds, and raising the low threshold to the minimum (or
// lowering the high one to the maximum) drops every sample equal to it.
// On the sorted samples a round is therefore a range s[lo:hi] (UINT_MAX
// markers sort last and are never admitted), and its sums are the running
// sums minus the samples dropped so far: the same integers the kernel
// computes, wrapping included, without re-reading the ring.
func (m *menuGov) typical() uint32 {
	if !m.f.twoSided {
		return m.typicalOneSided()
	}
	if m.nvalid <= 0 {
		return math.MaxUint32
	}
	var s [menuIntervals]uint32
	sort8(&m.intervals, &s)
	if m.nvalid == menuIntervals && s[0] < s[1] && s[1] < s[2] && s[5] < s[6] && s[6] < s[7] {
		return m.typical8(&s)
	}
	return m.typicalRounds(&s)
}

// typicalAccept is the kernel's acceptance test for a round of at least
// six samples: small spread in absolute terms or relative to the average.
func typicalAccept(avg, variance uint64) bool {
	return variance <= 400 || (variance <= math.MaxUint64/36 && avg*avg > variance*36)
}

// typical8 is typical for eight samples whose three smallest and three
// largest are distinct: each round then drops exactly one sample, the
// rounds have 8, 7 and 6 samples, and the third is the last.
func (m *menuGov) typical8(s *[menuIntervals]uint32) uint32 {
	v0, v1, v5, v6, v7 := uint64(s[0]), uint64(s[1]), uint64(s[5]), uint64(s[6]), uint64(s[7])
	sum, sq := m.sum, m.sumsq
	avg := sum >> 3
	if typicalAccept(avg, (sq>>3)-avg*avg) {
		return uint32(avg)
	}
	// round 2: [1,8) or [0,7)
	low := avg-v0 > v7-avg
	drop, mn, mx, below := v7, v0, v6, v5
	if low {
		drop, mn, mx, below = v0, v1, v7, v6
	}
	sum -= drop
	sq -= drop * drop
	avg = sum / 7
	if typicalAccept(avg, sq/7-avg*avg) {
		return uint32(avg)
	}
	// round 3: six samples
	low = avg-mn > mx-avg
	drop = mx
	if low {
		drop, below = mn, mx
	}
	sum -= drop
	sq -= drop * drop
	avg = sum / 6
	if typicalAccept(avg, sq/6-avg*avg) {
		return uint32(avg)
	}
	if m.f.maxReturn {
		return uint32(below) // the largest of the six
	}
	return math.MaxUint32
}

// typicalRounds is typical's general loop (UINT_MAX markers, repeated
// samples at the ends).
func (m *menuGov) typicalRounds(s *[menuIntervals]uint32) uint32 {
	const mask = menuIntervals - 1
	lo, hi := 0, m.nvalid
	sum, sq := m.sum, m.sumsq
	minV, maxV := uint64(s[0]), uint64(s[(hi-1)&mask])
	for maxV != 0 {
		div := hi - lo
		var avg, variance uint64
		switch div {
		case 8:
			avg, variance = sum>>3, sq>>3
		case 7:
			avg, variance = sum/7, sq/7
		case 6:
			avg, variance = sum/6, sq/6
		default:
			avg, variance = divSmall(sum, div), divSmall(sq, div)
		}
		avgSq := avg * avg
		variance -= avgSq
		if variance <= 400 || (variance <= math.MaxUint64/36 && avgSq > variance*36 && div*4 >= menuIntervals*3) {
			return uint32(avg)
		}
		if div*4 <= menuIntervals*3 {
			if m.f.maxReturn && div >= menuIntervals/2 {
				return uint32(maxV)
			}
			return math.MaxUint32
		}
		// Drop the end farther from the average: the sample there and any
		// equal to it.
		low := b2int(avg-minV > maxV-avg)
		v := maxV
		if low == 1 {
			v = minV
		}
		step := 2*low - 1 // +1 from the low end, −1 from the high end
		end := (hi - 1) + low*(lo-hi+1)
		for {
			lo += low
			hi -= 1 - low
			sum -= v
			sq -= v * v
			end += step
			if lo >= hi || uint64(s[end&mask]) != v {
				break
			}
		}
		if lo >= hi {
			break
		}
		minV, maxV = uint64(s[lo&mask]), uint64(s[(hi-1)&mask])
	}
	return math.MaxUint32
}

// typicalOneSided is the detector before 6.15: admit samples up to a
// threshold (INT_MAX at first), drop the largest ones each round.
func (m *menuGov) typicalOneSided() uint32 {
	var s [menuIntervals]uint32
	sort8(&m.intervals, &s)
	hi := min(m.nvalid, menuIntervals)
	for hi > 0 && s[hi-1] > math.MaxInt32 {
		hi--
	}
	for hi > 0 {
		maxV := s[hi-1]
		if maxV == 0 {
			// Since 5484e31bbbff (6.6) no data is no prediction; before
			// it (Debian's 6.1.192 source) zeros average to 0, and the
			// min >= predicted_us shortcut it had changes no result.
			if m.f.skipQuery {
				break
			}
			return 0
		}
		var sum uint64
		for _, v := range s[:hi] {
			sum += uint64(v)
		}
		var avg uint64
		if hi == menuIntervals {
			avg = sum >> 3
		} else {
			avg = divSmall(sum, hi)
		}
		var variance uint64
		for _, v := range s[:hi] {
			d := int64(v) - int64(avg)
			variance += uint64(d * d)
		}
		if hi == menuIntervals {
			variance >>= 3
		} else {
			variance = divSmall(variance, hi)
		}
		if variance <= math.MaxUint64/36 {
			if (avg*avg > variance*36 && hi*4 >= menuIntervals*3) || variance <= 400 {
				return uint32(avg)
			}
		}
		if hi*4 <= menuIntervals*3 {
			if m.f.maxReturn && hi >= menuIntervals/2 {
				return maxV // the 6.12.y and 6.1.y backport of 85975daeaa4d
			}
			return math.MaxUint32
		}
		for hi > 0 && s[hi-1] == maxV {
			hi--
		}
	}
	return math.MaxUint32
}

func (m *menuGov) stoppedOverride(predicted *uint64, in *selInput) {
	if !in.tickStopped || *predicted >= uint64(m.t.tick) {
		return
	}
	m.tally.stoppedRuns++
	switch {
	case m.f.margin:
		p := *predicted + uint64(float64(*predicted)*m.f.marginPct/100)
		*predicted = min(p, m.nextTimer)
		if *predicted != m.nextTimer {
			m.tally.marginOther++
		}
	case m.f.safeTimer && m.nextTimer <= uint64(2*m.t.tick):
	default:
		*predicted = m.nextTimer
	}
}

func (m *menuGov) selectState(in *selInput) (int, bool) {
	t := m.t
	// The select after an aborted attempt finds needs_update clear (the
	// aborted attempt's own select consumed it) and last_residency_ns 0.
	if m.needsUpdate {
		m.update()
		m.needsUpdate = false
	}
	if m.f.abortPush {
		for range min(in.aborts, menuIntervals) {
			m.push(math.MaxUint32)
		}
	}
	predicted := uint64(m.typical()) * 1000
	var deltaTick int64
	if !m.f.skipQuery || predicted > residencyThresholdNs || (m.f.alwaysQueryStopped && in.tickStopped) {
		delta, dt := in.sleepLen, in.deltaTick
		if delta < 0 {
			delta, dt = 0, 0
		}
		deltaTick = dt
		m.nextTimer = uint64(delta)
		m.bucket = m.whichBucket(m.nextTimer, in)
		timerUs := (menuResolution*menuDecay*1000/2 + m.nextTimer*uint64(m.cf[m.bucket])) / (menuResolution * menuDecay * 1000)
		predicted = min(timerUs*1000, predicted)
		if m.f.alwaysQueryStopped {
			m.stoppedOverride(&predicted, in)
		}
	} else {
		m.nextTimer = ktimeMax
		deltaTick = t.tick / 2
		m.bucket = m.whichBucket(ktimeMax, in)
	}
	latReq := in.latReq
	n := t.n
	if n <= 1 || latReq == 0 {
		return 0, !t.rows[0].polling
	}
	rs := t.rows[:n:n]
	if (m.nextTimer < uint64(rs[1].tr) || latReq < rs[1].el) && !rs[0].disabled {
		return 0, !rs[0].polling
	}
	if !m.f.alwaysQueryStopped {
		m.stoppedOverride(&predicted, in)
		// performance_multiplier(): 1 + 10 per task in iowait.
		if m.f.iowaitCap && !in.tickStopped {
			if req := predicted / uint64(1+10*max(in.nrIOWait, 0)); req < uint64(latReq) {
				latReq = int64(req)
			}
		}
	}
	nextTimer := m.nextTimer
	latencyFirst := m.f.latencyFirst
	tick := t.tick
	// The kernel's loop over all states, skipping disabled ones: the
	// first enabled state is the fallback; walk deeper while the states'
	// target residency fits the prediction and their exit latency the
	// limit; the first state that does not fit decides.
	en := t.en[:min(t.nen, MaxStates)]
	idx := -1
	if len(en) > 0 {
		idx = int(en[0])
	}
	k := t.walk(predicted, latReq)
	if k > 0 {
		idx = int(en[k-1])
	}
	if k < len(en) {
		i := int(en[k])
		r := &rs[i]
		switch {
		case latencyFirst && r.el > latReq:
		case uint64(r.tr) <= predicted: // and r.el > latReq
		case rs[idx].polling && uint64(r.tr) <= nextTimer &&
			(latencyFirst || r.el <= latReq) &&
			(!m.f.pollElOverride || uint64(r.el) <= predicted) &&
			(!m.f.pollResThresh || r.tr < residencyThresholdNs):
			predicted = uint64(r.tr)
			idx = i
		case predicted < uint64(tick):
		case !in.tickStopped:
			predicted = uint64(rs[idx].tr)
		default:
			if rs[idx].tr < tick && r.tr <= deltaTick {
				idx = i
			}
			return idx, true
		}
	}
	if idx == -1 {
		idx = 0
	}
	if in.tickStopped || (!rs[idx].polling && predicted >= uint64(tick)) {
		return idx, true
	}
	if idx > 0 && rs[idx].tr > deltaTick {
		for i := idx - 1; i >= 0; i-- {
			if rs[i].disabled {
				continue
			}
			idx = i
			if rs[i].tr <= deltaTick {
				break
			}
		}
	}
	return idx, false
}

func (m *menuGov) reflect(idx int, residencyNs int64, tickWakeup, pollTimedOut bool) {
	m.lastIdx = idx
	m.lastResidency = residencyNs
	m.pollTimeLimit = pollTimedOut
	m.needsUpdate = true
	m.tickWakeup = tickWakeup
}

// update is menu_update: fold the last stay into the correction factor of
// its bucket and the recent-intervals ring.
func (m *menuGov) update() {
	t := m.t
	r := &t.rows[m.lastIdx]
	var measured uint64
	switch {
	case m.tickWakeup && m.nextTimer > uint64(t.tick):
		measured = 9 * menuMaxInteresting / 10
	case r.polling && m.pollTimeLimit:
		measured = m.nextTimer
	default:
		measured = uint64(max(m.lastResidency, 0))
		el := uint64(r.el)
		if measured > 2*el {
			measured -= el
		} else {
			measured /= 2
		}
	}
	if measured > m.nextTimer {
		measured = m.nextTimer
	}
	b := m.bucket
	if uint(b) >= menuIOWaitBuckets {
		b = menuIOWaitBuckets - 1
	}
	nf := m.cf[b] - m.cf[b]/menuDecay
	if m.nextTimer > 0 && measured < menuMaxInteresting {
		nf += uint32(menuResolution * measured / m.nextTimer)
	} else {
		nf += menuResolution
	}
	m.cf[b] = nf
	m.push(uint32(measured / 1000))
}
