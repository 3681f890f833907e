package model

import "github.com/idletrace/idletrace/pkg/trace"

// Agreement's shadow governor: a second instance of a policy's governor
// kept on the kernel's own history, which chooses at each recorded entry
// with the inputs the kernel's governor had; and the haltpoll window that
// seeds it and the free-running model alike. It is apart from
// replay_gov.go because the shadow's choices feed only the agreement
// figures (and HaltpollWindow), never the free-running replay's stays.

// shadowSelect is agreement's view of one recorded selection: the
// policy's governor, kept on the kernel's history (every recorded stay is
// reflected into it as the kernel's governor saw it), chooses with the
// inputs the kernel's governor had at the recorded entry. Measuring each
// decision on the kernel's own history keeps one early difference from
// sending the free-running replay down another path and being counted
// again at every later period. haltpoll with another window than the
// kernel's is the exception: its history is what it chose (below).
func (ps *polSim) shadowSelect(c *cpuShared, cs *cpuSim, pi *periodInfo) int {
	if cs.shadow == nil {
		cs.shadow = ps.newCPU().gov
	}
	sleep := pi.nextTimer - pi.idleEntry // signed, as in selectAt
	dt, _ := ps.r.deltaTick(c, pi.e, pi.idleEntry, sleep, pi.deltaNext, pi.tickStopped, pi.devStopped, 0)
	in := &cs.in // scratch, as in selectAt: a local would escape
	in.latReq, in.sleepLen, in.deltaTick, in.tickStopped = ps.latReq(c, pi.e), sleep, dt, pi.tickStopped
	in.nrIOWait, in.aborts = pi.nrIOWait, pi.aborts
	idx, _ := cs.shadow.selectState(in)
	if lg, ok := cs.shadow.(*ladderGov); ok && pi.rec >= 0 {
		lg.resync(idx, pi.rec)
	}
	if pi.rec >= 0 {
		rec, pollTO := pi.rec, pi.kind == endPoll
		if hp, ok := cs.shadow.(*haltpollGov); ok {
			switch {
			case ps.hpOwnWindow:
				// haltpoll's history is its window, which moves by the
				// states it entered: only a halt adjusts it, only a poll
				// caches the generic limit into a window of 0, and a poll
				// times out on its own window. The kernel's window is the
				// policy's only where the recording ran haltpoll with what
				// the policy runs (polSim.hpOwnWindow); otherwise the
				// policy is taken to have stayed where it chose, for the
				// recorded stay's length, and its poll to have run out
				// where the stay outlasted its window (or reached it, on a
				// stay the kernel's own time-out cut). Fed the kernel's
				// polls instead, haltpoll+guest_halt_poll_ns=0 "agreed" on
				// 99 % of a 200 µs recording's selections, where it halts
				// on all. An approximation: a stay the kernel's time-out
				// cut short is shorter than the policy's halt would have
				// been, and a recorded period chained to it is a selection
				// the policy, still halted, would not have made.
				kernelTO := pollTO && ps.tab.polling[rec]
				rec, pollTO = idx, ps.tab.polling[idx] && (hp.polledOut(pi.residency) || kernelTO && hp.polledOut(pi.residency+1))
			case pollTO && !pi.pollTOKernel && ps.tab.polling[rec]:
				// haltpoll's next choice hangs on the recorder's guess:
				// check it against the window
				pollTO = hp.polledOut(pi.residency)
			}
		}
		cs.shadow.reflect(rec, pi.residency, pi.kind == endTick || pi.gotTick, pollTO)
	}
	return idx
}

// SetHaltpollWindow sets dev->poll_limit_ns on cpu to ns for every haltpoll
// policy, in the free-running model and in the one agreement keeps on the
// kernel's history. The window a recording starts with is not in its
// metadata: it is the old value of the CPU's first power:guest_halt_poll_ns
// record, which Prepass gives where the caller did not; without either
// the models start from 0, as haltpoll_enable_device leaves a CPU.
func (r *Replay) SetHaltpollWindow(cpu uint32, ns uint64) {
	if cpu >= maxCPUs {
		return
	}
	c := r.cpu(cpu)
	c.haltpollSet = true
	for _, ps := range r.pols {
		if ps.kind != GovHaltpoll {
			continue
		}
		cs := ps.cpus[c.id]
		if cs.shadow == nil {
			cs.shadow = ps.newCPU().gov
		}
		cs.gov.(*haltpollGov).limit = ns
		cs.shadow.(*haltpollGov).limit = ns
	}
}

// HaltpollWindow is policy i's haltpoll window on cpu as the model kept on
// the kernel's history has it now (the one agreement asks), and how many
// power:guest_halt_poll_ns events its adjust_poll_limit would have raised
// so far. ok is false when policy i is not haltpoll or has no such model
// for the CPU yet.
func (r *Replay) HaltpollWindow(i int, cpu uint32) (ns, changes uint64, ok bool) {
	if i < 0 || i >= len(r.pols) || int(cpu) >= len(r.cpus) || r.pols[i].kind != GovHaltpoll {
		return 0, 0, false
	}
	g, ok := r.pols[i].cpus[cpu].shadow.(*haltpollGov)
	if !ok {
		return 0, 0, false
	}
	return g.limit, g.changes, true
}

// HaltpollParams are the haltpoll module parameters policy i replays with
// (the recording's, else the module's defaults, then its guest_halt_poll_*
// modifiers), and whether its agreement follows its own window rather
// than the kernel's (shadowSelect); ok is false when policy i is not
// haltpoll.
func (r *Replay) HaltpollParams(i int) (p trace.HaltPollParams, ownWindow, ok bool) {
	if i < 0 || i >= len(r.pols) || r.pols[i].kind != GovHaltpoll {
		return p, false, false
	}
	ps := r.pols[i]
	return ps.hp.params(), ps.hpOwnWindow, true
}

// HaltpollDefaults are the haltpoll module's compiled-in parameters, which
// a replay assumes where the trace does not give the recording's.
func HaltpollDefaults() trace.HaltPollParams {
	return haltpollParamsFrom(nil, NewestVersion, 0).params()
}
