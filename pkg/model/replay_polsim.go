package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idletrace/idletrace/pkg/latency"
)

// One policy's simulation: polSim holds a policy's table, limits and
// running totals over all CPUs, cpuSim its state on one CPU, and newPolSim
// checks the policy against the profile (a PolicyError when it does not
// fit). The stepping is apart, by kind of policy: replay_gov.go for the
// governor models, replay_oracle.go for recorded and oracle, and
// replay_shadow.go for the governor agreement keeps on the kernel's
// history.

// PolicyError is a policy that does not fit the profile it is replayed on:
// a mistake in how the replay was asked for, not in the trace.
type PolicyError struct{ msg string }

func (e *PolicyError) Error() string { return e.msg }

func policyErrorf(format string, a ...any) error { return &PolicyError{fmt.Sprintf(format, a...)} }

// polSim is one policy's simulation over all CPUs.
type polSim struct {
	r        *Replay
	pol      Policy
	release  Version // the kernel release the governor follows
	kind     Governor
	gk       govKind // kind as a small integer for the hot paths
	tab      *table
	cpus     []*cpuSim
	pollNs   int64 // static poll limit; 0: no polling state; noLimit: unbounded
	dynPoll  bool  // haltpoll owns the limit
	blk      *blkWindow
	blkLimit int64
	qos      int64
	mflags   menuFlags
	teoVer   Version // the release whose teo runs (newTEOFor)
	hp       haltpollParams
	// hpOwnWindow: agreement's haltpoll model moves its window by its own
	// choices, not the kernel's (replay_shadow.go): the recording ran
	// another governor, or haltpoll with other or unknown parameters, or
	// under another release's rules or generic limit than the policy's.
	hpOwnWindow bool

	idleTally
	io     latency.Histogram
	taskIO latency.Histogram
	chg    chgCount // against policy 0

	// obs, when set (tests only), sees every decision: a selection, the end
	// of a stay, an oracle choice (see obsSelect etc.); obsBuf carries it.
	obs    func(*[8]int64)
	obsBuf [8]int64
}

// idleTally is what a policy's idle periods add up to: apart, so that a
// period replayed as history only (SetCountedFrom) can be taken back.
type idleTally struct {
	periods, selections, above, below uint64
	pollTimeouts                      uint64
	timeNs                            []int64
	energy                            float64 // busy-core × ns
	// windowNs is the recorded time the stays' energy covers (timeNs
	// holds them as the kernel counts them).
	windowNs int64
	// awakeNs is the time between the periods of one idle episode (a
	// tick or poll time-out the CPU went straight back to idle from) that
	// the policy spent awake, as the kernel did, rather than idle through
	// it: a busy core's, so that a policy's energy covers the episode.
	// With the stays' energy (endSegment), every policy's covers the same
	// recorded time.
	awakeNs          int64
	wakeCount        []uint64
	agreeN, agreeHit uint64
	// changedWakes: wake-ups whose exit latency differs from policy 0's,
	// and per CPU (Changes; the IO's are chgCount's).
	changedWakes    uint64
	changedCPUWakes []uint64
	// menu: menu's stopped-tick override runs, every CPU's (menuGov.tally).
	menu menuTally
}

// saveInto copies t into dst, reusing dst's slices.
func (t *idleTally) saveInto(dst *idleTally) {
	timeNs, wakeCount, cpuWakes := dst.timeNs, dst.wakeCount, dst.changedCPUWakes
	*dst = *t
	dst.timeNs = append(timeNs[:0], t.timeNs...)
	dst.wakeCount = append(wakeCount[:0], t.wakeCount...)
	dst.changedCPUWakes = append(cpuWakes[:0], t.changedCPUWakes...)
}

// govKind numbers the governor models for dispatch in the hot paths.
type govKind uint8

const (
	gkOther govKind = iota // teo, ladder, haltpoll: through the governor interface
	gkMenu
	gkRecorded
	gkOracle
)

// obs event kinds (obsBuf[0])
const (
	obsSelect = iota + 1 // cpu, t, latReq, sleepLen, deltaTick, tickStopped<<1|stop, idx
	obsEnd               // cpu-less: state, residency, tickWake<<1|pollTO
	obsOracle            // state, residency, latReq
)

type cpuSim struct {
	gov  governor // &menu for menu
	menu menuGov
	// shadow is a second instance of the governor that agreement drives
	// with the kernel's own inputs and history; nil until first used.
	shadow      governor
	open        bool
	segOpen     bool
	hold        bool
	needSelect  bool
	tickStopped bool
	selected    bool // the policy has made a selection on this CPU
	state       int
	epStart     int64
	segStart    int64
	holdAt      int64
	// holdWakeEl: the recorded exit latency in the wake-up that ended the
	// held period (wakeEl), noWake for a poll time-out.
	holdWakeEl int64
	// kernelRes is kernelStay for the stay being closed, -1 if none.
	kernelRes    int64
	pollDeadline int64
	nextTick     int64
	latAtStart   int64
	recCounts    [MaxStates]uint32
	// idleEntry is the kernel's tick_sched.idle_entrytime as this policy's
	// timeline has it: the recorded one at a recorded selection, moved
	// only by an interrupt (a tick) in between.
	idleEntry int64
	in        selInput // scratch, kept here so it does not escape per selection
}

func newPolSim(r *Replay, prof *Profile, pol Policy, kv Version, onRecorded bool) (*polSim, error) {
	ps := &polSim{r: r, pol: pol, kind: pol.Governor, qos: noLimit}
	switch pol.Governor {
	case GovMenu:
		ps.gk = gkMenu
	case GovRecorded:
		ps.gk = gkRecorded
	case GovOracle:
		ps.gk = gkOracle
	}
	if pol.Governor == GovRecorded && !onRecorded {
		return nil, policyErrorf("policy %q: recorded needs the recorded profile (--profile recorded), not %s", pol.Spec, prof.Name)
	}
	stateIndices := func(what string, names []string) ([]int, error) {
		var idx []int
		for _, name := range names {
			i := prof.StateIndex(name)
			if i < 0 {
				var all []string
				for _, s := range prof.States {
					all = append(all, s.Name)
				}
				return nil, policyErrorf("policy %q: %s: no state %q in profile %s (states: %s)", pol.Spec, what, name, prof.Name, strings.Join(all, ", "))
			}
			idx = append(idx, i)
		}
		return idx, nil
	}
	dis, err := stateIndices("disable", pol.Disable)
	if err != nil {
		return nil, err
	}
	en, err := stateIndices("enable", pol.Enable)
	if err != nil {
		return nil, err
	}
	for _, i := range en {
		if slices.Contains(dis, i) {
			return nil, policyErrorf("policy %q: %s is both disabled and enabled", pol.Spec, prof.States[i].Name)
		}
	}
	if last := len(prof.States) - 1; pol.MaxCState > last {
		return nil, policyErrorf("policy %q: maxcstate: %d is beyond profile %s's deepest state, index %d (%s): it would disable nothing", pol.Spec, pol.MaxCState, prof.Name, last, prof.States[last].Name)
	}
	ps.tab = newTable(prof, dis, en, pol.MaxCState)
	n := ps.tab.n
	ps.timeNs = make([]int64, n)
	ps.wakeCount = make([]uint64, n)
	if pol.QoSNs >= 0 {
		ps.qos = pol.QoSNs
	}
	if pol.BlkQoSLimitNs >= 0 {
		ps.blkLimit = pol.BlkQoSLimitNs
		for _, w := range r.blk {
			if w.timeout == pol.BlkQoSTimeoutNs {
				ps.blk = w
			}
		}
		if ps.blk == nil {
			ps.blk = &blkWindow{timeout: pol.BlkQoSTimeoutNs}
			r.blk = append(r.blk, ps.blk)
		}
	}
	v := kv
	if pol.Kernel != nil {
		v = *pol.Kernel
	}
	ps.release = v
	rule := pol.Poll
	if rule == PollKernel {
		rule = kernelPollRule(v)
	}
	ps.pollNs = genericPollLimit(ps.tab, rule, pol.PollNs)
	switch pol.Governor {
	case GovMenu:
		ps.mflags = menuFlagsFor(v)
		ps.mflags.margin, ps.mflags.marginPct = pol.HasMargin, pol.MarginPct
	case GovTEO:
		ps.teoVer = v
	case GovHaltpoll:
		if n < 2 {
			return nil, policyErrorf("policy %q: haltpoll needs a polling state and a halt state; profile %s has %d state(s)", pol.Spec, prof.Name, n)
		}
		ps.dynPoll = true
		ps.hp = haltpollParamsFrom(r.meta.HaltPoll, v, genericPollLimit(ps.tab, kernelPollRule(v), 0)).with(pol.HaltPoll)
		// The kernel's window is the policy's only where the recording's
		// haltpoll ran with what the policy runs: its parameters (known),
		// kernel release and generic limit.
		kernel := haltpollParamsFrom(r.meta.HaltPoll, kv, genericPollLimit(r.recTab, kernelPollRule(kv), 0))
		ps.hpOwnWindow = !r.meta.HaltPollRan() || r.meta.HaltPoll == nil || ps.hp != kernel
	}
	return ps, nil
}

func (ps *polSim) newCPU() *cpuSim {
	cs := &cpuSim{kernelRes: -1}
	switch ps.kind {
	case GovMenu:
		cs.menu.init(ps.tab, &ps.mflags, &ps.idleTally.menu)
		cs.gov = &cs.menu
	case GovTEO:
		cs.gov = newTEOFor(ps.tab, ps.teoVer)
	case GovLadder:
		cs.gov = newLadder(ps.tab)
	case GovHaltpoll:
		cs.gov = newHaltpoll(ps.tab, ps.hp)
	}
	return cs
}

func (ps *polSim) count(above, below bool) {
	if above {
		ps.above++
	}
	if below {
		ps.below++
	}
}

// flush closes a CPU's open episode at the end of the trace.
func (ps *polSim) flush(c *cpuShared) {
	if c.id >= len(ps.cpus) {
		return
	}
	cs := ps.cpus[c.id]
	switch ps.kind {
	case GovRecorded:
		cs.open = false
	case GovOracle:
		if cs.open {
			ps.oracleEnd(cs, cs.holdAt, false, cs.holdWakeEl)
		}
	default:
		if cs.open {
			ps.endEpisode(cs, cs.holdAt, false, false, cs.holdWakeEl)
		}
	}
	cs.hold = false
}
