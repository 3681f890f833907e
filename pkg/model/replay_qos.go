package model

import (
	"math"
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

func (r *Replay) baseLatency(cpu int) int64 {
	lat := noLimit
	q := r.meta.PMQoS
	// 0 is a real constraint (everything polls) only in metadata a recorder
	// wrote; a zero-valued Metadata (synthetic input) means "not known".
	if q.CPUDMALatencyUs > 0 && q.CPUDMALatencyUs < math.MaxInt64/1000 || q.CPUDMALatencyUs == 0 && r.meta.FormatVersion > 0 {
		lat = min(lat, q.CPUDMALatencyUs*1000)
	}
	if cpu < len(q.ResumeLatencyUs) && q.ResumeLatencyUs[cpu] >= 0 {
		lat = min(lat, q.ResumeLatencyUs[cpu]*1000)
	}
	return lat
}

func (ps *polSim) latReq(c *cpuShared, t int64) int64 {
	l := min(c.baseLat, ps.qos)
	if ps.blk != nil && ps.blkLimit < l && ps.blk.active(c.id, t) {
		l = ps.blkLimit
	}
	return l
}
