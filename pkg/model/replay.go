package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Replay runs recorded idle periods through a set of policies on one
// profile and accumulates what each would have cost (see cost.go and
// docs/DESIGN.md "Cost model").
//
// Wiring (two passes over the file when the table polls or a policy uses
// blkqos, one otherwise):
//
//	rp, err := model.NewReplay(prof, r.Meta, policies)
//	if v, ok := rp.Prepass(r.End); ok {
//		err = r.Scan(v)
//	}
//	err = r.Scan(trace.Visitor{Idle: rp.Idle, BlockIO: rp.BlockIO})
//	results, err := rp.Finish()
//
// Ordering: Idle must see each CPU's periods in exit order (the file's
// order); CPUs may interleave arbitrarily. Block IO may arrive before or
// after the idle periods around its completion: iowake.Matcher holds
// whichever of the two runs ahead, per CPU and in bounded memory, until
// the other catches up (see replayio.go). blkqos needs each CPU's IO issue
// times before the idle periods they affect: the prepass keeps them as
// merged per-CPU intervals [issue, issue+timeout) (replay_qos.go) — memory
// grows with the number of IO bursts separated by more than the timeout,
// not with the number of requests. Without the prepass, issues are learned
// from BlockIO in the main pass and only affect periods processed after
// them.
//
// Memory is independent of the trace length apart from those intervals.
type Replay struct {
	prof      *Profile
	meta      *trace.Metadata
	tick      int64
	pols      []*polSim
	cpus      []*cpuShared
	agreement bool
	// kernelPollNs is the poll limit the recorded kernel used.
	kernelPollNs int64
	// tableLimitPolls: the recorded polls ran to kernelPollNs, the limit
	// cpuidle_poll_time() takes from the table (not haltpoll's window, not
	// the unlimited cpu_idle_poll without a driver).
	tableLimitPolls bool
	// minPollTimeoutNs is the shortest recorded poll time-out (0: none);
	// see pollFloorNs. From the trace's end record or the prepass: the
	// whole trace's; without either, the shortest so far.
	minPollTimeoutNs int64
	recTab           *table // the recorded table, for IO latency subtraction
	blk              []*blkWindow
	prepassed        bool
	pmQoS            pmQoSChanges
	// gotTickPerStay: the recording's governor cleared got_idle_tick after
	// every stay (GotTickPerStay), so that the recorded GotTick tells of
	// that stay alone; where it did not, a CPU's own periods may show it.
	gotTickPerStay bool
	ioSeen         bool
	ioDevice       latency.Histogram // IO latency less the exit latency the completing CPU paid: the same under every policy
	finished       bool
	stats          Stats
	elScratch      []int64
	ioMatch        iowake.Matcher[ioWakeCost, *ioReq] // the completing CPU's wake-up
	recordedCPUs   trace.CPUSet                       // whose idle periods the trace has
	taskMatch      iowake.Matcher[ioWakeCost, *ioReq] // the waiting task's CPU's
	taskSeen       bool
	// The recording's window, (startNs, endNs] (SetWindow): the IO
	// completions counted, and the idle periods replayed (entered by endNs).
	startNs, endNs uint64
	ioFilter       trace.IOFilter
	costSlab       []int64
	// For Changes: the wake-ups the workload sees, the requests whose task
	// latency was counted, and per CPU the counted IO's issues and the
	// completions that woke an idle CPU.
	wakeUps, taskCounted  uint64
	ioIssueCPU, ioWokeCPU []uint64
	tallyScratch          []idleTally // idleAsHistory's saved figures
	// countedFromNs: each CPU's periods entered before it are history
	// (SetCountedFrom).
	countedFromNs []uint64
}

// Stats counts what the replay had to assume or could not use.
type Stats struct {
	IdlePeriods      uint64 // recorded periods replayed
	AfterEnd         uint64 // recorded periods entered after the recording's end, not replayed (SetWindow)
	Episodes         uint64 // idle episodes after chaining poll timeouts and idle tick wake-ups
	ChainedPollEnds  uint64 // recorded periods ended by a poll time limit and continued by the next
	ChainedTickEnds  uint64 // recorded periods ended by a tick with idle re-entered at once
	DerivedNextTimer uint64 // periods without a recorded next timer (derived, see Assumptions)
	// InferredPollTimeouts: polls whose end the trace does not say (no
	// time-out flag, no wake-up event: an import of the kernel's text
	// trace, which has no event for a time-out) that lasted the kernel's
	// poll limit, taken as time-outs.
	InferredPollTimeouts uint64
	ClampedPeriods       uint64 // periods overlapping the previous one on their CPU, clamped
	BadState             uint64 // periods whose state index is outside the profile (skipped by recorded)
	IOCompletions        uint64 // completed block requests seen
	IOFilteredOut        uint64 // completed block requests in the window that the IO filter left out
	IOOutsideWindow      uint64 // completed block requests outside the window, not counted (SetWindow), as stats
	IOWokeIdle           uint64 // of which woke an idle CPU (package iowake's rule): the policies set their latency
	IOWokeUnknown        uint64 // of the others, completions on CPUs whose idle periods the trace lacks (record --cpus): kept as recorded
	IOUncertain          uint64 // of the others, completions the bounded matcher may have missed (see iowake.Matcher)
	TaskIO               uint64 // of the completions, those whose task waited for them (iowake.TaskLatencyNs)
	TaskWokeIdle         uint64 // of which the waiting task's CPU was idle and woken for it
	TaskWokeUnknown      uint64 // of the others, tasks that ran on a CPU whose idle periods the trace lacks (record --cpus): kept as recorded
	PMQoSChanges         uint64 // recorded PM QoS limit changes up to the end, applied at their times (PreparePMQoS)
}

const (
	pollSnapNs = 20_000  // a policy poll deadline this close before a recorded poll timeout is that timeout
	tickSnapNs = 100_000 // a synthetic tick this close before a recorded tick wake is that tick
	maxCPUs    = trace.MaxCPUs
)

type cpuShared struct {
	id       int
	seen     bool
	prevExit int64
	prevKind endKind
	// The previous period's idle entry time and the sleep length and
	// delta_next recorded from it (periodInfo.idleEntry).
	prevIdleEntry                    int64
	prevNextTimerNs, prevNextEventNs int64
	prevSleepKnown                   bool
	prevTickStopped                  bool // the kernel's tick after the previous period's decision
	tickRef                          int64
	// tickLateNs: how late the CPU's last recorded timer or tick interrupt
	// came after the device's deadline, less the recorded state's exit
	// latency (periodInfo.lateFrom); the replay's own ticks come as late.
	tickLateNs int64
	nbCache    int64 // a tick boundary on the grid of tickRef (nextBoundary)
	nbValid    bool
	// baseLat is the recorded machine's latency limit for this CPU
	// (cpuidle_governor_latency_req), from qos and the changes applied.
	baseLat int64
	qos     qosState
	// gotTickSet: a period of this CPU ended with got_idle_tick set;
	// gotTickCleared: a later one found it clear, so the kernel clears it
	// after every stay (Replay.gotTickPerStay).
	gotTickSet, gotTickCleared bool
	// haltpollSet: SetHaltpollWindow gave the CPU's window.
	haltpollSet bool
}

// NewReplay prepares a replay of policies on prof. meta is the trace's
// metadata (PM QoS, HZ, haltpoll parameters, kernel release, recorded
// state table). `recorded` policies need the recorded (or measured)
// profile; agreement is reported only on those profiles, of a trace where
// a governor chose (GovernorChose).
func NewReplay(prof *Profile, meta *trace.Metadata, policies []Policy) (*Replay, error) {
	if prof == nil || len(prof.States) == 0 {
		return nil, fmt.Errorf("whatif: profile has no states")
	}
	if len(prof.States) > MaxStates {
		return nil, fmt.Errorf("whatif: profile %s has %d states, the kernel allows at most %d", prof.Name, len(prof.States), MaxStates)
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("whatif: no policies")
	}
	if meta == nil {
		meta = &trace.Metadata{}
	}
	r := &Replay{prof: prof, meta: meta, tick: prof.TickNs(), gotTickPerStay: GotTickPerStay(meta), recordedCPUs: meta.RecordedCPUSet()}
	recProf, err := recordedTable(meta)
	if err != nil {
		return nil, err
	}
	if meta.ExitLatenciesUnknown && sameStateNames(prof, recProf) {
		// The recorded states cost what the profile given for them says:
		// the IO latency a completion kept is less its state's exit
		// latency (replayio.go), not less nothing.
		recProf = prof
	}
	onRecorded := (prof.Name == "recorded" || prof.Name == "measured") && len(prof.States) == len(recProf.States)
	// Agreement is with a governor's choices: none where the kernel had no
	// cpuidle driver (it idled in HLT, nothing chose) or the trace has no
	// table (POLL and HLT assumed), where every model would agree or not
	// with an assumption.
	r.agreement = onRecorded && GovernorChose(meta)
	if onRecorded {
		r.recTab = newTable(prof, nil, nil, -1)
	} else {
		r.recTab = newTable(recProf, nil, nil, -1)
	}
	kv := NewestVersion
	if v, ok := RecordedVersion(meta); ok {
		kv = v
	}
	// The limit the kernel polled with, on the recorded table.
	r.kernelPollNs = genericPollLimit(r.recTab, kernelPollRule(kv), 0)
	r.tableLimitPolls = !meta.HaltPollRan() && !meta.NoCPUIdleDriver() &&
		!(meta.CPUIdleGovernor == "" && slices.Contains(r.recTab.name, haltpollStateName))
	for _, pol := range policies {
		ps, err := newPolSim(r, prof, pol, kv, onRecorded)
		if err != nil {
			return nil, err
		}
		r.pols = append(r.pols, ps)
	}
	r.elScratch = make([]int64, len(r.pols))
	r.endNs = math.MaxUint64
	r.initIO()
	return r, nil
}

// Prepass gives what the replay must see of the whole trace before its
// first period, and false when it needs nothing: blkqos needs every CPU's
// block IO issue times before its idle periods, haltpoll each CPU's window
// at the start (the first power:guest_halt_poll_ns record's old value,
// SetHaltpollWindow), and a polling state needs
// the shortest poll time-out (pollFloorNs) where the trace's end record
// (end may be nil) does not give it. Learnt only as the periods pass, the
// replay's polls before the trace's first time-out would end at the bare
// limit (hundreds of extra polls at the start of a lab recording, enough
// to fail its above/below bar).
func (r *Replay) Prepass(end *trace.End) (trace.Visitor, bool) {
	var v trace.Visitor
	if len(r.blk) > 0 {
		v.BlockIO = func(b *trace.BlockIO) error { r.PrepareBlockIO(b); return nil }
	}
	if r.meta.Inputs.PMQoSTrace {
		v.PMQoS = func(q *trace.PMQoSChange) error { r.PreparePMQoS(q); return nil }
	}
	if r.meta.Inputs.HaltPollTrace && slices.ContainsFunc(r.pols, func(ps *polSim) bool { return ps.kind == GovHaltpoll }) {
		// Each CPU's window as the recording began: its first
		// power:guest_halt_poll_ns record's old value (the kernel's
		// window is nowhere else); a CPU without one starts at 0.
		// A caller's own SetHaltpollWindow stands.
		first := map[uint32]bool{}
		v.HaltPoll = func(h *trace.HaltPollChange) error {
			if !first[h.CPU] && h.CPU < maxCPUs {
				first[h.CPU] = true
				if !r.cpu(h.CPU).haltpollSet {
					r.SetHaltpollWindow(h.CPU, uint64(h.OldNs))
				}
			}
			return nil
		}
	}
	switch {
	case !slices.Contains(r.recTab.polling, true):
	case end != nil && end.ShortestPollTimeoutNs != nil:
		r.minPollTimeoutNs = int64(min(*end.ShortestPollTimeoutNs, math.MaxInt64))
	default:
		v.Idle = func(p *trace.IdlePeriod) error {
			r.notePollTimeout(p, int(p.State))
			return nil
		}
	}
	return v, v.BlockIO != nil || v.Idle != nil || v.PMQoS != nil || v.HaltPoll != nil
}

// notePollTimeout keeps the shortest recorded poll time-out: a period in a
// polling state that ended at its time limit (as the trace writer keeps
// End.ShortestPollTimeoutNs). Without a prepass it is all the replay
// learns the floor from.
func (r *Replay) notePollTimeout(p *trace.IdlePeriod, rec int) {
	ns, ok := p.PollTimeoutNs()
	if !ok || rec < 0 || rec >= r.recTab.n || !r.recTab.polling[rec] {
		return
	}
	if d := int64(min(ns, math.MaxInt64)); r.minPollTimeoutNs == 0 || d < r.minPollTimeoutNs {
		r.minPollTimeoutNs = d
	}
}

func (r *Replay) cpu(id uint32) *cpuShared {
	if int(id) < len(r.cpus) {
		return r.cpus[id]
	}
	return r.addCPUs(int(id))
}

func (r *Replay) addCPUs(c int) *cpuShared {
	for len(r.cpus) <= c {
		n := len(r.cpus)
		cs := &cpuShared{id: n, qos: r.initialQoS(n)}
		cs.baseLat = cs.qos.latencyReqNs()
		r.cpus = append(r.cpus, cs)
		for _, ps := range r.pols {
			ps.cpus = append(ps.cpus, ps.newCPU())
		}
	}
	return r.cpus[c]
}

// SetKernelPollRule says which rule set the recorded kernel's poll limit
// where it was not its release's own (the lab kernel's
// cpuidle.lab_poll_rule switch). Call it before the first period.
func (r *Replay) SetKernelPollRule(rule PollRule) {
	r.kernelPollNs = genericPollLimit(r.recTab, rule, 0)
}

// pollFloorNs is the shortest poll the kernel can time out
// (drivers/cpuidle/poll_state.c v6.12: poll_idle() reads the clock once
// every POLL_IDLE_RELAX_COUNT cpu_relax() loops, which takes microseconds
// on servers and tens of them under emulation): the recording's shortest
// time-out where even that lies clearly above the kernel's limit (the
// limit fell inside one check interval), else 0.
func (r *Replay) pollFloorNs() int64 {
	if r.minPollTimeoutNs > r.kernelPollNs+pollSnapNs {
		return r.minPollTimeoutNs
	}
	return 0
}

// Idle replays one recorded idle period.
func (r *Replay) Idle(p *trace.IdlePeriod) error {
	if r.finished {
		return fmt.Errorf("whatif: Idle after Finish")
	}
	if p.CPU >= maxCPUs {
		return fmt.Errorf("whatif: idle period on CPU %d: CPU number out of range", p.CPU)
	}
	if !r.Replays(p) {
		r.stats.AfterEnd++
		return nil
	}
	c := r.cpu(p.CPU)
	if int(p.CPU) < len(r.countedFromNs) && p.EntryNs < r.countedFromNs[p.CPU] {
		r.idleAsHistory(c, p)
		return nil
	}
	r.idle(c, p)
	return nil
}

// SetCountedFrom makes the periods on cpu entered before ns the governors'
// history only: replayed, so that each model meets the first counted
// period with the state the periods before left it in, but left out of
// every policy's idle figures (periods, selections, above and below, time
// in state, energy, agreement, wake-ups). The IO figures and Stats still
// count them (IO has SetWindow). The fidelity checks start each CPU's
// count where its kernel counters were read: a model started there cold
// met the first counted periods in its initial state (ladder in its
// shallowest, 1-5 points of C6's share on seed 000's table in the lab,
// where the kernel's had been promoted since boot). At most one stay (or
// oracle episode) a CPU straddles the boundary: one that the last history
// period leaves open (it ended on a tick or poll time-out) is counted
// whole when the first counted period closes it. Call it before the first
// record; it creates no CPU, so the prepass still sets each CPU's
// starting limits.
func (r *Replay) SetCountedFrom(cpu uint32, ns uint64) {
	if cpu >= maxCPUs {
		return
	}
	for len(r.countedFromNs) <= int(cpu) {
		r.countedFromNs = append(r.countedFromNs, 0)
	}
	r.countedFromNs[cpu] = ns
}

// idleAsHistory replays p and then takes back what it added to the
// policies' idle figures (SetCountedFrom).
func (r *Replay) idleAsHistory(c *cpuShared, p *trace.IdlePeriod) {
	for len(r.tallyScratch) < len(r.pols) {
		r.tallyScratch = append(r.tallyScratch, idleTally{})
	}
	for k, ps := range r.pols {
		ps.idleTally.saveInto(&r.tallyScratch[k])
	}
	wakeUps := r.wakeUps
	r.idle(c, p)
	for k, ps := range r.pols {
		r.tallyScratch[k].saveInto(&ps.idleTally)
	}
	r.wakeUps = wakeUps
}

// idle replays p on CPU c.
func (r *Replay) idle(c *cpuShared, p *trace.IdlePeriod) {
	r.applyPMQoS(c, int64(p.EntryNs))
	pi := r.readPeriod(c, p)
	pi.prevExit = c.prevExit
	if !pi.chain {
		r.stats.Episodes++
	}
	r.stats.IdlePeriods++
	if pi.kind == endTick {
		// Ticks are periodic whatever the policy does: the one that ends
		// this period sets the grid for the whole period, not only after.
		c.tickRef = pi.x
		c.nbValid = false
	}
	els := r.elScratch[:len(r.pols)]
	for k, ps := range r.pols {
		ps.periods++
		cs := ps.cpus[c.id]
		var el int64
		switch ps.gk {
		case gkRecorded:
			el = ps.periodRecorded(cs, &pi)
		case gkOracle:
			el = ps.periodOracle(c, cs, &pi)
		default:
			el = ps.periodGov(c, cs, &pi)
		}
		els[k] = el
	}
	if pi.kind == endGenuine {
		r.wakeUps++
		for k := 1; k < len(els); k++ {
			if els[k] != els[0] {
				ps := r.pols[k]
				ps.changedWakes++
				ps.changedCPUWakes = bump(ps.changedCPUWakes, c.id)
			}
		}
	}
	c.seen = true
	c.prevExit = pi.x
	c.prevKind = pi.kind
	if pi.lateFrom != noLimit && pi.rec >= 0 && pi.rec < r.recTab.n && (pi.kind == endTick || pi.cause == trace.WakeTimer) {
		c.tickLateNs = max(pi.x-pi.lateFrom-r.wakeEl(&pi), 0)
	}
	r.ioPeriod(p, &pi, els)
}

// Stats returns the replay's counters so far.
func (r *Replay) Stats() Stats { return r.stats }

// Finish closes every open idle episode and returns one Result per policy
// in the order given.
func (r *Replay) Finish() ([]Result, error) {
	if !r.finished {
		r.finished = true
		for _, c := range r.cpus {
			for _, ps := range r.pols {
				ps.flush(c)
			}
		}
		r.ioMatch.Flush()
		r.taskMatch.Flush()
	}
	out := make([]Result, len(r.pols))
	var base float64
	var device LatencySummary
	if r.ioSeen { // one distribution for every policy: summarised once
		device = r.ioDevice.Summary()
	}
	for k, ps := range r.pols {
		out[k] = ps.result(r)
		if k == 0 {
			base = out[k].EnergyBusyCoreSeconds
		}
		if r.ioSeen {
			d := device
			out[k].IODeviceLatencyNs = &d
		}
	}
	for k := range out {
		switch {
		case base > 0:
			out[k].EnergyRel = out[k].EnergyBusyCoreSeconds / base
		case out[k].EnergyBusyCoreSeconds == 0:
			out[k].EnergyRel = 1
		}
	}
	for k := range out {
		out[k].Changes = r.changes(k, out)
	}
	return out, nil
}

// sameStateNames says whether two profiles list the same states, by name,
// in the same order.
func sameStateNames(a, b *Profile) bool {
	if len(a.States) != len(b.States) {
		return false
	}
	for i := range a.States {
		if a.States[i].Name != b.States[i].Name {
			return false
		}
	}
	return true
}
