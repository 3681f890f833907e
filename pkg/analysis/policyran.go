package analysis

import (
	"fmt"
	"strings"

	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// PolicyNotRunNote is the note a comparison carries when AFTER's
// recording did not run pol's kernel knobs as its metadata recorded them
// at its start (the governor, /dev/cpu_dma_latency, disabled states,
// haltpoll's parameters), or is BEFORE itself: its figures then measure
// something else than the prediction's policy. A knob pol leaves unset is
// BEFORE's (the replay runs BEFORE's recorded limit, disabled states and
// haltpoll parameters; recorded, BEFORE's governor too), so AFTER must
// have run that. "" when nothing is amiss. Of an imported capture only
// the governor and haltpoll's parameters are judged (where its export
// header gave them). Knobs the kernel does not have (poll=, margin=,
// blkqos=, kernel=) are not checked; the oracle is no governor at all.
func PolicyNotRunNote(pol model.Policy, before, after *trace.Metadata, sameRecording bool) string {
	if sameRecording {
		return "AFTER is BEFORE (the same recording): nothing was changed, so there is no change to measure"
	}
	if pol.Governor == model.GovOracle {
		return fmt.Sprintf("%s is no governor a kernel runs (it chooses each stay with hindsight): AFTER's figures measure what it ran, not this policy", pol.Spec)
	}
	var off []string
	switch pol.Governor {
	case model.GovMenu, model.GovTEO, model.GovLadder, model.GovHaltpoll:
		if g := after.CPUIdleGovernor; g != "" && g != string(pol.Governor) {
			off = append(off, fmt.Sprintf("governor %s (%s wanted)", g, pol.Governor))
		}
	case model.GovRecorded:
		if g, b := after.CPUIdleGovernor, before.CPUIdleGovernor; g != "" && b != "" && g != b {
			off = append(off, fmt.Sprintf("governor %s (BEFORE's %s wanted)", g, b))
		}
	}
	off = append(off, qosNotRun(pol, before, after)...)
	off = append(off, statesNotRun(pol, before, after)...)
	off = append(off, haltPollNotRun(pol, before, after)...)
	if len(off) == 0 {
		return ""
	}
	// A long list is one story: the first few say it.
	const shown = 6
	if len(off) > shown {
		off = append(off[:shown], fmt.Sprintf("and %d more", len(off)-shown))
	}
	return fmt.Sprintf("AFTER did not run %s, as its recording's start shows: %s; its figures measure what it ran, not this policy",
		pol.Spec, strings.Join(off, ", "))
}

// qosNotRun: AFTER's global latency limit against qos=, or BEFORE's where
// pol sets none (a negative limit is one the recording could not read).
func qosNotRun(pol model.Policy, before, after *trace.Metadata) []string {
	limit := func(us int64) string {
		if us >= trace.PMQoSNoGlobalLimitUs {
			return "none"
		}
		return fmt.Sprintf("%d µs", us)
	}
	q := after.PMQoS.CPUDMALatencyUs
	switch b := before.PMQoS.CPUDMALatencyUs; {
	case q < 0:
	case pol.QoSNs >= 0:
		if q*1000 > pol.QoSNs {
			return []string{fmt.Sprintf("cpu_dma_latency %s (%s µs wanted)", limit(q), FormatUs(uint64(pol.QoSNs)))}
		}
	case b >= 0 && limit(b) != limit(q):
		return []string{fmt.Sprintf("cpu_dma_latency %s (BEFORE's %s wanted)", limit(q), limit(b))}
	}
	return nil
}

// statesNotRun: AFTER's disabled states against disable=, enable= and
// maxcstate=, or BEFORE's flag of the same CPU and state where pol sets
// none.
func statesNotRun(pol model.Policy, before, after *trace.Metadata) []string {
	var off []string
	type cpuState struct {
		cpu  int
		name string
	}
	beforeDisabled := map[cpuState]bool{}
	for _, cs := range before.States {
		for _, s := range cs.States {
			beforeDisabled[cpuState{cs.CPU, s.Name}] = s.Disabled
		}
	}
	for _, cs := range after.States {
		// An import's disabled flags may be import --profile's, not the
		// machine's: not judged.
		if !after.RecordsCPU(cs.CPU) || after.Imported() {
			continue
		}
		for _, s := range cs.States {
			wantOff, wantOn := pol.StateWanted(s.Name, s.Index)
			was, known := beforeDisabled[cpuState{cs.CPU, s.Name}]
			switch {
			case wantOff && !s.Disabled:
				off = append(off, fmt.Sprintf("cpu%d %s enabled (disabled wanted)", cs.CPU, s.Name))
			case wantOn && s.Disabled:
				off = append(off, fmt.Sprintf("cpu%d %s disabled (enabled wanted)", cs.CPU, s.Name))
			case wantOff || wantOn || !known || before.Imported() || was == s.Disabled:
			case s.Disabled:
				off = append(off, fmt.Sprintf("cpu%d %s disabled (enabled in BEFORE)", cs.CPU, s.Name))
			default:
				off = append(off, fmt.Sprintf("cpu%d %s enabled (disabled in BEFORE)", cs.CPU, s.Name))
			}
		}
	}
	return off
}

// haltPollNotRun: AFTER's haltpoll parameters against those pol sets, or
// BEFORE's where it sets none (a policy that runs haltpoll's: haltpoll, or
// recorded under it).
func haltPollNotRun(pol model.Policy, before, after *trace.Metadata) []string {
	h, want := after.HaltPoll, pol.HaltPoll
	if h == nil {
		return nil
	}
	inherit := before.HaltPoll != nil && (pol.Governor == model.GovHaltpoll ||
		pol.Governor == model.GovRecorded && before.CPUIdleGovernor == string(model.GovHaltpoll))
	var b trace.HaltPollParams
	if inherit {
		b = *before.HaltPoll
	}
	var off []string
	for _, p := range []struct {
		name       string
		have, base uint64
		want       *uint64
	}{{"guest_halt_poll_ns", h.GuestHaltPollNs, b.GuestHaltPollNs, want.GuestHaltPollNs}, {"guest_halt_poll_grow", h.Grow, b.Grow, want.Grow},
		{"guest_halt_poll_shrink", h.Shrink, b.Shrink, want.Shrink}, {"guest_halt_poll_grow_start", h.GrowStart, b.GrowStart, want.GrowStart}} {
		switch {
		case p.want != nil && *p.want != p.have:
			off = append(off, fmt.Sprintf("%s %d (%d wanted)", p.name, p.have, *p.want))
		case p.want == nil && inherit && p.base != p.have:
			off = append(off, fmt.Sprintf("%s %d (BEFORE's %d wanted)", p.name, p.have, p.base))
		}
	}
	switch {
	case want.AllowShrink != nil && *want.AllowShrink != h.AllowShrink:
		off = append(off, fmt.Sprintf("guest_halt_poll_allow_shrink %t (%t wanted)", h.AllowShrink, *want.AllowShrink))
	case want.AllowShrink == nil && inherit && b.AllowShrink != h.AllowShrink:
		off = append(off, fmt.Sprintf("guest_halt_poll_allow_shrink %t (BEFORE's %t wanted)", h.AllowShrink, b.AllowShrink))
	}
	return off
}

// SameRecording says whether two traces' metadata are of one recording
// (a copy of a file included): the same boot and the same start snapshot.
func SameRecording(a, b *trace.Metadata) bool {
	return a.BootID != "" && a.BootID == b.BootID && a.Start != nil && b.Start != nil &&
		a.Start.MonotonicNs != 0 && a.Start.MonotonicNs == b.Start.MonotonicNs
}
