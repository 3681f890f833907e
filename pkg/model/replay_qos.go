package model

import (
	"math"
	"slices"
	"sort"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Latency constraints in the replay: the PM QoS limits the recording's
// metadata carries (cpu_dma_latency, per-CPU resume latency), a policy's
// own qos, and blkqos, which tightens a CPU's limit for a time-out after
// each block IO issue. The blkqos windows are kept as merged per-CPU
// intervals, learnt in the prepass or as BlockIO arrives; they are apart
// from the main loop because they are the one state of the replay that
// grows with the trace.

type blkWindow struct {
	timeout int64
	cpus    [][]ival
}

type ival struct{ start, end int64 }

// PrepareBlockIO feeds one block request in the prepass (issue times only).
func (r *Replay) PrepareBlockIO(b *trace.BlockIO) {
	r.prepassed = true
	r.addIssue(b)
}

func (r *Replay) addIssue(b *trace.BlockIO) {
	if b.IssueNs == 0 || b.IssueCPU >= maxCPUs {
		return
	}
	t := int64(b.IssueNs)
	for _, w := range r.blk {
		c := int(b.IssueCPU)
		for len(w.cpus) <= c {
			w.cpus = append(w.cpus, nil)
		}
		w.cpus[c] = addInterval(w.cpus[c], ival{t, t + w.timeout})
	}
}

// addInterval inserts iv into a sorted list of disjoint intervals, merging.
func addInterval(l []ival, iv ival) []ival {
	n := len(l)
	if n == 0 || iv.start > l[n-1].end {
		return append(l, iv)
	}
	if iv.start >= l[n-1].start {
		l[n-1].end = max(l[n-1].end, iv.end)
		return l
	}
	// out of order: find the first interval ending at or after iv.start
	i := sort.Search(n, func(k int) bool { return l[k].end >= iv.start })
	j := i
	for j < n && l[j].start <= iv.end {
		iv.start = min(iv.start, l[j].start)
		iv.end = max(iv.end, l[j].end)
		j++
	}
	out := append(l[:i:i], iv)
	return append(out, l[j:]...)
}

func (w *blkWindow) active(cpu int, t int64) bool {
	if cpu >= len(w.cpus) {
		return false
	}
	l := w.cpus[cpu]
	i := sort.Search(len(l), func(k int) bool { return l[k].end > t })
	return i < len(l) && l[i].start <= t
}

// qosState is a CPU's two PM QoS limits as the recorded kernel held them
// at a point of the replay, in trace.PMQoS's terms (µs; -1: none or
// unknown), and how far into the recorded changes it is.
type qosState struct {
	globalUs, resumeUs  int64
	nextGlobal, nextCPU int // the first change of each list not applied yet
}

// pmQoSChanges are the recorded changes of the limits (PreparePMQoS), in
// time order: the global limit's, and each CPU's resume latency's.
type pmQoSChanges struct {
	global []qosStep
	cpus   [][]qosStep
}

type qosStep struct{ t, us, prevUs int64 }

func (r *Replay) initialQoS(cpu int) qosState {
	q := r.meta.PMQoS
	s := qosState{globalUs: -1, resumeUs: -1}
	// 0 is a real constraint (everything polls) only in metadata a recorder
	// wrote; a zero-valued Metadata (synthetic input) means "not known".
	if q.CPUDMALatencyUs > 0 || q.CPUDMALatencyUs == 0 && r.meta.FormatVersion > 0 {
		s.globalUs = q.CPUDMALatencyUs
	}
	if cpu < len(q.ResumeLatencyUs) {
		s.resumeUs = q.ResumeLatencyUs[cpu]
	}
	// The metadata read the limits before the programs attached; the
	// first change recorded says what they were when it came.
	if g := r.pmQoS.global; len(g) > 0 {
		s.globalUs = g[0].prevUs
	}
	if cpu < len(r.pmQoS.cpus) && len(r.pmQoS.cpus[cpu]) > 0 {
		s.resumeUs = r.pmQoS.cpus[cpu][0].prevUs
	}
	return s
}

// latencyReqNs is cpuidle_governor_latency_req in ns: the smaller of the
// two limits (drivers/cpuidle/governor.c).
func (s qosState) latencyReqNs() int64 {
	lat := noLimit
	if s.globalUs >= 0 && s.globalUs < math.MaxInt64/1000 {
		lat = min(lat, s.globalUs*1000)
	}
	if s.resumeUs >= 0 && s.resumeUs < math.MaxInt64/1000 {
		lat = min(lat, s.resumeUs*1000)
	}
	return lat
}

// PreparePMQoS feeds one recorded PM QoS change in the prepass.
func (r *Replay) PreparePMQoS(q *trace.PMQoSChange) {
	if q.TimeNs <= r.endNs { // one after the end reaches no period replayed (SetWindow)
		r.stats.PMQoSChanges++
	}
	step := qosStep{int64(min(q.TimeNs, math.MaxInt64)), q.LimitUs, q.PrevUs}
	switch {
	case q.CPU == trace.PMQoSGlobal:
		r.pmQoS.global = appendStep(r.pmQoS.global, step)
	case q.CPU >= 0 && q.CPU < maxCPUs:
		for int(q.CPU) >= len(r.pmQoS.cpus) {
			r.pmQoS.cpus = append(r.pmQoS.cpus, nil)
		}
		r.pmQoS.cpus[q.CPU] = appendStep(r.pmQoS.cpus[q.CPU], step)
	}
}

// appendStep keeps a list in time order (the recorder writes changes as
// the ring buffer hands them over, which across CPUs may be out of order
// by a little).
func appendStep(l []qosStep, s qosStep) []qosStep {
	i := sort.Search(len(l), func(k int) bool { return l[k].t > s.t })
	return slices.Insert(l, i, s)
}

// applyPMQoS brings c's limits to those in force at t: a CPU's periods come
// in time order, so each change is applied once. The kernel wakes every
// idle CPU when the global limit changes (cpu_latency_qos_apply), so a
// period's selection sees the limit of its entry.
func (r *Replay) applyPMQoS(c *cpuShared, t int64) {
	s := &c.qos
	changed := false
	for g := r.pmQoS.global; s.nextGlobal < len(g) && g[s.nextGlobal].t <= t; s.nextGlobal++ {
		s.globalUs, changed = g[s.nextGlobal].us, true
	}
	if c.id < len(r.pmQoS.cpus) {
		for l := r.pmQoS.cpus[c.id]; s.nextCPU < len(l) && l[s.nextCPU].t <= t; s.nextCPU++ {
			s.resumeUs, changed = l[s.nextCPU].us, true
		}
	}
	if changed {
		c.baseLat = s.latencyReqNs()
	}
}

func (ps *polSim) latReq(c *cpuShared, t int64) int64 {
	l := min(c.baseLat, ps.qos)
	if ps.blk != nil && ps.blkLimit < l && ps.blk.active(c.id, t) {
		l = ps.blkLimit
	}
	return l
}
