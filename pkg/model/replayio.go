package model

import (
	"fmt"

	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Block IO in the replay: a request's latency changes under a policy by
// the exit latencies of the wake-ups it caused. The completion may have
// woken its CPU (iowake.CompletionRule): that changes its IO latency and
// its task's. The task that waited for it may have had to be woken on
// another, idle CPU (iowake.TaskRule): that changes its task latency too.
// Each matcher reports every request once; a request with a waiting task
// is counted when both have answered.

// ioWakeCost is what a wake-up of an idle CPU pays: the recorded state's
// exit latency, taken out, and each policy's, put in.
type ioWakeCost struct {
	recEl int64
	els   []int64
	cpu   uint32
	// limited: bit k set when policy k's blkqos limit was in force on the
	// CPU at the period's entry (policies 0-63).
	limited uint64
}

// ioReq is one block request waiting for its matchers' answers.
type ioReq struct {
	ioLatNs, taskLatNs int64
	hasTask            bool
	pending            int8    // matcher answers still to come for the task latency
	deltas             []int64 // per policy, the exit-latency change so far
}

func (r *Replay) initIO() {
	r.ioMatch.Rule, r.taskMatch.Rule = iowake.CompletionRule, iowake.TaskRule
	r.ioMatch.Match, r.ioMatch.Miss = r.ioWoke, r.ioMissed
	r.taskMatch.Match, r.taskMatch.Miss = r.taskWoke, r.taskDone
}

// ioPeriod feeds one recorded period, with what each policy paid at its
// wake-up, to the matchers.
func (r *Replay) ioPeriod(p *trace.IdlePeriod, pi *periodInfo, els []int64) {
	var cost ioWakeCost
	if iowake.CompletionRule.Eligible(p.WakeCause) || iowake.TaskRule.Eligible(p.WakeCause) {
		if pi.rec >= 0 && pi.rec < r.recTab.n {
			cost.recEl = r.recTab.paidLatency(pi.rec)
		}
		cost.els = r.takeCosts()
		copy(cost.els, els)
		cost.cpu = p.CPU
		if len(r.blk) > 0 {
			c := r.cpus[p.CPU]
			for k, ps := range r.pols[:min(len(r.pols), 64)] {
				if ps.blk != nil && ps.blkLimit < min(c.baseLat, ps.qos) && ps.blk.active(c.id, pi.e) {
					cost.limited |= 1 << k
				}
			}
		}
	}
	r.ioMatch.Period(p.CPU, p.EntryNs, p.ExitNs, p.WakeCause, cost)
	r.taskMatch.Period(p.CPU, p.EntryNs, p.ExitNs, p.WakeCause, cost)
}

// takeCosts carves one period's per-policy exit latencies from a slab, so
// that the periods the matchers hold cost no allocation each.
func (r *Replay) takeCosts() []int64 {
	np := len(r.pols)
	if len(r.costSlab) < np {
		r.costSlab = make([]int64, 4096*max(np, 1))
	}
	els := r.costSlab[:np:np]
	r.costSlab = r.costSlab[np:]
	return els
}

// BlockIO takes one block request in the main pass: its completion and
// task latency under each policy, and (without a prepass) its issue for
// blkqos.
func (r *Replay) BlockIO(b *trace.BlockIO) error {
	if r.finished {
		return fmt.Errorf("whatif: BlockIO after Finish")
	}
	if len(r.blk) > 0 && !r.prepassed {
		r.addIssue(b)
	}
	if b.CompleteNs == 0 || b.CompleteCPU >= maxCPUs {
		return nil
	}
	if b.CompleteNs <= r.startNs || b.CompleteNs > r.endNs {
		r.stats.IOOutsideWindow++
		return nil // outside the window the report counts IO in (SetWindow)
	}
	if !r.ioFilter.Match(b) {
		r.stats.IOFilteredOut++
		return nil
	}
	r.ioSeen = true
	r.stats.IOCompletions++
	if b.IssueNs != 0 && b.IssueCPU < maxCPUs {
		r.ioIssueCPU = bump(r.ioIssueCPU, int(b.IssueCPU))
	}
	req := &ioReq{ioLatNs: int64(b.LatencyNs())}
	otherCPU := false
	if lat, ok := iowake.TaskLatencyNs(b); ok {
		r.stats.TaskIO++
		r.taskSeen = true
		otherCPU = b.TaskCPU != b.CompleteCPU && b.TaskCPU < maxCPUs
		if otherCPU && !r.recordedCPUs.Has(b.TaskCPU) {
			// Whether the task's CPU was idle is unknown: that wake-up
			// keeps its recorded latency, as a completion's would.
			r.stats.TaskWokeUnknown++
			otherCPU = false
		}
		req.taskLatNs, req.hasTask, req.pending = int64(lat), true, 1
		req.deltas = make([]int64, len(r.pols))
		if otherCPU {
			req.pending = 2
		}
	}
	if r.recordedCPUs.Has(b.CompleteCPU) {
		r.ioMatch.Completion(b.CompleteCPU, b.CompleteNs, req)
	} else { // whether it woke that CPU is unknown, as in stats
		r.stats.IOWokeUnknown++
		r.ioMissed(req)
	}
	if otherCPU {
		r.taskMatch.Completion(b.TaskCPU, b.TaskWokenNs, req)
	}
	return nil
}

// SetIOFilter counts only the requests f selects in the IO figures, as
// stats does with the same filter. Call it before the first record.
func (r *Replay) SetIOFilter(f trace.IOFilter) { r.ioFilter = f }

// SetWindow makes the replay cover the recording, (startNs, endNs] (the
// snapshots, the kernel counters' window), as stats does: the IO figures
// count only block IO completed in it (blkqos still sees every issue), and
// idle periods entered after endNs are not replayed (Stats.AfterEnd).
// Those before startNs are, as the governors' history, and counted.
//
// Choice: after the end snapshot a trace holds the time of the
// recorder's own shutdown, while it detaches its programs (on a 2-vCPU
// guest about 200 ms and 300 periods a CPU: 585 of an idle 2 s
// recording's 770, 564 of a 0.3 s command's 735); before the start, the
// few milliseconds from attaching to the snapshot, kept as the governors'
// history. A replay does not look ahead, so dropping the periods after
// the end changes what comes before it only at the edge: an episode the
// next period would have continued ends there, and a task woken from one
// of them for IO completed before the end keeps its recorded latency.
// Call it before the first record.
func (r *Replay) SetWindow(startNs, endNs uint64) { r.startNs, r.endNs = startNs, endNs }

// Replays says whether Idle replays p: it entered by the window's end
// (SetWindow); else Idle only counts it in Stats.AfterEnd.
func (r *Replay) Replays(p *trace.IdlePeriod) bool { return p.EntryNs <= r.endNs }

// ioWoke applies each policy's exit latency to a completion that woke an
// idle CPU.
func (r *Replay) ioWoke(_ trace.WakeCause, cost ioWakeCost, req *ioReq) {
	r.stats.IOWokeIdle++
	r.ioWokeCPU = bump(r.ioWokeCPU, int(cost.cpu))
	r.ioDevice.Record(uint64(max(req.ioLatNs-cost.recEl, 0)))
	for k, ps := range r.pols {
		d := int64(0)
		if cost.els != nil {
			d = cost.els[k] - cost.recEl
			if k > 0 && cost.els[k] != cost.els[0] {
				ps.chg.io++
				ps.chg.cpuIO = bump(ps.chg.cpuIO, int(cost.cpu))
			}
		}
		if k < 64 && cost.limited&(1<<k) != 0 {
			ps.chg.ioLimited++
		}
		ps.io.Record(uint64(max(req.ioLatNs+d, 0)))
		if req.hasTask {
			req.deltas[k] += d
		}
	}
	r.taskDone(req)
}

// ioMissed counts a completion that did not wake an idle CPU: it keeps
// its recorded latency under every policy.
func (r *Replay) ioMissed(req *ioReq) {
	r.ioDevice.Record(uint64(req.ioLatNs))
	for _, ps := range r.pols {
		ps.io.Record(uint64(req.ioLatNs))
	}
	r.taskDone(req)
}

// taskWoke applies each policy's exit latency to the waiting task's CPU,
// idle when the completion woke the task.
func (r *Replay) taskWoke(_ trace.WakeCause, cost ioWakeCost, req *ioReq) {
	r.stats.TaskWokeIdle++
	if cost.els != nil {
		for k := range r.pols {
			req.deltas[k] += cost.els[k] - cost.recEl
		}
	}
	r.taskDone(req)
}

// taskDone takes one matcher's answer for a request; after the last, its
// task latency is counted under each policy.
func (r *Replay) taskDone(req *ioReq) {
	if !req.hasTask {
		return
	}
	if req.pending--; req.pending > 0 {
		return
	}
	r.taskCounted++
	for k, ps := range r.pols {
		ps.taskIO.Record(uint64(max(req.taskLatNs+req.deltas[k], 0)))
		if k > 0 && req.deltas[k] != req.deltas[0] {
			ps.chg.task++
		}
	}
}
