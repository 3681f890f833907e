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
// something else than the prediction's policy. "" when nothing is amiss.
// Of an imported capture only the governor and haltpoll's parameters are
// judged (where its export header gave them).
// Knobs the kernel does not have (poll=, margin=, blkqos=, kernel=) are
// not checked.
func PolicyNotRunNote(pol model.Policy, after *trace.Metadata, sameRecording bool) string {
	if sameRecording {
		return "AFTER is BEFORE (the same recording): nothing was changed, so there is no change to measure"
	}
	var off []string
	switch pol.Governor {
	case model.GovMenu, model.GovTEO, model.GovLadder, model.GovHaltpoll:
		if g := after.CPUIdleGovernor; g != "" && g != string(pol.Governor) {
			off = append(off, fmt.Sprintf("governor %s (%s wanted)", g, pol.Governor))
		}
	}
	if q := after.PMQoS.CPUDMALatencyUs; pol.QoSNs >= 0 && q >= 0 && q*1000 > pol.QoSNs {
		have := fmt.Sprintf("%d µs", q)
		if q >= trace.PMQoSNoGlobalLimitUs {
			have = "none"
		}
		off = append(off, fmt.Sprintf("cpu_dma_latency %s (%s µs wanted)", have, FormatUs(uint64(pol.QoSNs))))
	}
	for _, cs := range after.States {
		// An import's disabled flags may be import --profile's, not the
		// machine's: not judged.
		if !after.RecordsCPU(cs.CPU) || after.Imported() {
			continue
		}
		for _, s := range cs.States {
			wantOff, wantOn := pol.StateWanted(s.Name, s.Index)
			switch {
			case wantOff && !s.Disabled:
				off = append(off, fmt.Sprintf("cpu%d %s enabled (disabled wanted)", cs.CPU, s.Name))
			case wantOn && s.Disabled:
				off = append(off, fmt.Sprintf("cpu%d %s disabled (enabled wanted)", cs.CPU, s.Name))
			}
		}
	}
	if h, want := after.HaltPoll, pol.HaltPoll; h != nil {
		for _, p := range []struct {
			name      string
			have      uint64
			wantValue *uint64
		}{{"guest_halt_poll_ns", h.GuestHaltPollNs, want.GuestHaltPollNs}, {"guest_halt_poll_grow", h.Grow, want.Grow},
			{"guest_halt_poll_shrink", h.Shrink, want.Shrink}, {"guest_halt_poll_grow_start", h.GrowStart, want.GrowStart}} {
			if p.wantValue != nil && *p.wantValue != p.have {
				off = append(off, fmt.Sprintf("%s %d (%d wanted)", p.name, p.have, *p.wantValue))
			}
		}
		if want.AllowShrink != nil && *want.AllowShrink != h.AllowShrink {
			off = append(off, fmt.Sprintf("guest_halt_poll_allow_shrink %t (%t wanted)", h.AllowShrink, *want.AllowShrink))
		}
	}
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

// SameRecording says whether two traces' metadata are of one recording
// (a copy of a file included): the same boot and the same start snapshot.
func SameRecording(a, b *trace.Metadata) bool {
	return a.BootID != "" && a.BootID == b.BootID && a.Start != nil && b.Start != nil &&
		a.Start.MonotonicNs != 0 && a.Start.MonotonicNs == b.Start.MonotonicNs
}
