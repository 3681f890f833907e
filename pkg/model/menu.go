package model

import "math"

// menu governor model.
//
// Follows drivers/cpuidle/governors/menu.c of Linux 6.18 as shipped in the
// 6.18.y stable series (checked against the 6.18.38 tag), which is 6.18.0
// plus two backports: 80606f4eb8d7 ("Always check timers with tick
// stopped", 7.0) and 07d815701274 (polling override only for states with
// target residency < RESIDENCY_THRESHOLD_NS, 6.19). Constants from menu.c
// and gov.h: 6 buckets, 8 intervals, RESOLUTION 1024, DECAY 8,
// MAX_INTERESTING 50 ms, RESIDENCY_THRESHOLD_NS 15 µs.
//
// kernel= selects the variants of ../shared/research/governors.md §2.4 by
// mainline release (stable backports are not tracked except 6.18.y):
//   < 6.6   sleep length always queried
//   ≤ 6.12  iowait era: with the tick running, latency_req is capped at the
//           prediction (no iowaiters are modelled, so the multiplier is 1)
//   < 6.15  one-sided outlier trimming in the typical-interval detector
//   6.15–6.17 "Avoid discarding useful information" (return max when ≥ 4
//           samples remain), reverted in 6.18-rc3
//   < 6.17  residency check before the latency check in the main loop
//   ≥ 6.18  polling override also needs exit latency ≤ prediction
//   ≥ 6.19 (and 6.18.y) polling override needs target residency < 15 µs
//   ≥ 7.0 (and 6.18.y) timers always queried with the tick stopped
//   ≥ 7.1   stopped-tick override only when the timer is beyond 2 ticks
//           (SAFE_TIMER_RANGE_NS, queued for 7.1 in linux-pm)
// margin=PCT replaces the stopped-tick override with
// min(prediction·(1+PCT/100), next timer) (Nechita, Jan 2026, unmerged).
//
// Left out: nr_iowait (not in the trace), rejected/aborted entries (the
// trace has none), the intervals pushed on a rejected entry.

type menuFlags struct {
	skipQuery          bool // 5484e31bbbff, 6.6
	iowaitCap          bool // ≤ 6.12
	twoSided           bool // 6.15
	maxReturn          bool // 85975daeaa4d, 6.15–6.17
	latencyFirst       bool // 779b1a1cb13a, 6.17
	pollElOverride     bool // db86f55bf81a, 6.18
	pollResThresh      bool // 07d815701274, 6.19 (6.18.y)
	alwaysQueryStopped bool // 80606f4eb8d7, 7.0 (6.18.y)
	safeTimer          bool // e57c2bf2e89d, 7.1
	margin             bool
	marginPct          float64
}

func menuFlagsFor(v Version) menuFlags {
	stable618 := v.Is(6, 18) && v.Patch != 0
	return menuFlags{
		skipQuery:          v.AtLeast(6, 6),
		iowaitCap:          !v.AtLeast(6, 13),
		twoSided:           v.AtLeast(6, 15),
		maxReturn:          v.AtLeast(6, 15) && !v.AtLeast(6, 18),
		latencyFirst:       v.AtLeast(6, 17),
		pollElOverride:     v.AtLeast(6, 18),
		pollResThresh:      v.AtLeast(6, 19) || stable618,
		alwaysQueryStopped: v.AtLeast(7, 0) || stable618,
		safeTimer:          v.AtLeast(7, 1),
	}
}

const (
	menuBuckets        = 6
	menuIntervals      = 8
	menuResolution     = 1024
	menuDecay          = 8
	menuMaxInteresting = 50_000_000 // ns
)

type menuGov struct {
	t *table
	f *menuFlags

	needsUpdate   bool
	tickWakeup    bool
	nextTimer     uint64
	bucket        int
	cf            [menuBuckets]uint32
	intervals     [menuIntervals]uint32
	ptr           int
	lastIdx       int
	lastResidency int64
	pollTimeLimit bool
}

func newMenu(t *table, f *menuFlags) *menuGov {
	m := &menuGov{t: t, f: f}
	for i := range m.cf {
		m.cf[i] = menuResolution * menuDecay
	}
	return m
}

func menuBucket(ns uint64) int {
	switch {
	case ns < 10_000:
		return 0
	case ns < 100_000:
		return 1
	case ns < 1_000_000:
		return 2
	case ns < 10_000_000:
		return 3
	case ns < 100_000_000:
		return 4
	}
	return 5
}

func (m *menuGov) push(us uint32) {
	m.intervals[m.ptr] = us
	m.ptr++
	if m.ptr >= menuIntervals {
		m.ptr = 0
	}
}

// typical is get_typical_interval: the repeating-pattern detector, in µs;
// MaxUint32 when there is no confident prediction.
func (m *menuGov) typical() uint32 {
	if !m.f.twoSided {
		return m.typicalOneSided()
	}
	minT, maxT := int64(-1), int64(math.MaxUint32)
	for {
		var maxV uint32
		minV := uint32(math.MaxUint32)
		var avg, variance, div uint64
		for _, v := range m.intervals {
			vv := int64(v)
			if vv <= minT || vv >= maxT {
				continue
			}
			div++
			avg += uint64(v)
			variance += uint64(v) * uint64(v)
			maxV = max(maxV, v)
			minV = min(minV, v)
		}
		if maxV == 0 {
			return math.MaxUint32
		}
		if div == menuIntervals {
			avg >>= 3
			variance >>= 3
		} else {
			avg /= div
			variance /= div
		}
		avgSq := avg * avg
		variance -= avgSq
		if variance <= math.MaxUint64/36 {
			if (avgSq > variance*36 && div*4 >= menuIntervals*3) || variance <= 400 {
				return uint32(avg)
			}
		}
		if div*4 <= menuIntervals*3 {
			if m.f.maxReturn && div >= menuIntervals/2 {
				return maxV
			}
			return math.MaxUint32
		}
		if avg-uint64(minV) > uint64(maxV)-avg {
			minT = int64(minV)
		} else {
			maxT = int64(maxV)
		}
	}
}

// typicalOneSided is the detector before 6.15: drop the largest samples only.
func (m *menuGov) typicalOneSided() uint32 {
	thresh := uint32(math.MaxInt32)
	for {
		var maxV uint32
		var sum, div uint64
		for _, v := range m.intervals {
			if v <= thresh {
				sum += uint64(v)
				div++
				maxV = max(maxV, v)
			}
		}
		if maxV == 0 {
			return math.MaxUint32
		}
		var avg uint64
		if div == menuIntervals {
			avg = sum >> 3
		} else {
			avg = sum / div
		}
		var variance uint64
		for _, v := range m.intervals {
			if v <= thresh {
				d := int64(v) - int64(avg)
				variance += uint64(d * d)
			}
		}
		if div == menuIntervals {
			variance >>= 3
		} else {
			variance /= div
		}
		if variance <= math.MaxUint64/36 {
			if (avg*avg > variance*36 && div*4 >= menuIntervals*3) || variance <= 400 {
				return uint32(avg)
			}
		}
		if div*4 <= menuIntervals*3 {
			return math.MaxUint32
		}
		thresh = maxV - 1
	}
}

func (m *menuGov) stoppedOverride(predicted *uint64, in *selInput) {
	if !in.tickStopped || *predicted >= uint64(m.t.tick) {
		return
	}
	switch {
	case m.f.margin:
		p := *predicted + uint64(float64(*predicted)*m.f.marginPct/100)
		*predicted = min(p, m.nextTimer)
	case m.f.safeTimer && m.nextTimer <= uint64(2*m.t.tick):
	default:
		*predicted = m.nextTimer
	}
}

func (m *menuGov) selectState(in *selInput) (int, bool) {
	t := m.t
	if m.needsUpdate {
		m.update()
		m.needsUpdate = false
	} else if m.lastResidency == 0 {
		m.push(math.MaxUint32)
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
		m.bucket = menuBucket(m.nextTimer)
		timerUs := (menuResolution*menuDecay*1000/2 + m.nextTimer*uint64(m.cf[m.bucket])) / (menuResolution * menuDecay * 1000)
		predicted = min(timerUs*1000, predicted)
		if m.f.alwaysQueryStopped {
			m.stoppedOverride(&predicted, in)
		}
	} else {
		m.nextTimer = ktimeMax
		deltaTick = t.tick / 2
		m.bucket = menuBucket(ktimeMax)
	}
	latReq := in.latReq
	if t.n <= 1 || latReq == 0 ||
		((m.nextTimer < uint64(t.tr[1]) || latReq < t.el[1]) && !t.disabled[0]) {
		return 0, !t.polling[0]
	}
	if !m.f.alwaysQueryStopped {
		m.stoppedOverride(&predicted, in)
		if m.f.iowaitCap && !in.tickStopped && predicted < uint64(latReq) {
			latReq = int64(predicted)
		}
	}
	nextTimer := m.nextTimer
	idx := -1
	for i := 0; i < t.n; i++ {
		if t.disabled[i] {
			continue
		}
		if idx == -1 {
			idx = i
		}
		if m.f.latencyFirst && t.el[i] > latReq {
			break
		}
		if uint64(t.tr[i]) <= predicted {
			if !m.f.latencyFirst && t.el[i] > latReq {
				break
			}
			idx = i
			continue
		}
		if t.polling[idx] && uint64(t.tr[i]) <= nextTimer &&
			(m.f.latencyFirst || t.el[i] <= latReq) &&
			(!m.f.pollElOverride || uint64(t.el[i]) <= predicted) &&
			(!m.f.pollResThresh || t.tr[i] < residencyThresholdNs) {
			predicted = uint64(t.tr[i])
			idx = i
			break
		}
		if predicted < uint64(t.tick) {
			break
		}
		if !in.tickStopped {
			predicted = uint64(t.tr[idx])
			break
		}
		if t.tr[idx] < t.tick && t.tr[i] <= deltaTick {
			idx = i
		}
		return idx, true
	}
	if idx == -1 {
		idx = 0
	}
	stop := true
	if (t.polling[idx] || predicted < uint64(t.tick)) && !in.tickStopped {
		stop = false
		if idx > 0 && t.tr[idx] > deltaTick {
			for i := idx - 1; i >= 0; i-- {
				if t.disabled[i] {
					continue
				}
				idx = i
				if t.tr[i] <= deltaTick {
					break
				}
			}
		}
	}
	return idx, stop
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
	last := m.lastIdx
	var measured uint64
	switch {
	case m.tickWakeup && m.nextTimer > uint64(t.tick):
		measured = 9 * menuMaxInteresting / 10
	case t.polling[last] && m.pollTimeLimit:
		measured = m.nextTimer
	default:
		measured = uint64(max(m.lastResidency, 0))
		el := uint64(t.el[last])
		if measured > 2*el {
			measured -= el
		} else {
			measured /= 2
		}
	}
	if measured > m.nextTimer {
		measured = m.nextTimer
	}
	nf := m.cf[m.bucket] - m.cf[m.bucket]/menuDecay
	if m.nextTimer > 0 && measured < menuMaxInteresting {
		nf += uint32(menuResolution * measured / m.nextTimer)
	} else {
		nf += menuResolution
	}
	m.cf[m.bucket] = nf
	m.push(uint32(measured / 1000))
}
