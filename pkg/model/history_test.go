package model

import (
	"maps"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// countedFrom is each CPU's entry time of its periods[i] (in s's order).
func countedFrom(s *synth, i int) map[uint32]uint64 {
	seen := map[uint32]int{}
	at := map[uint32]uint64{}
	for _, p := range s.periods {
		if seen[p.CPU] == i {
			at[p.CPU] = p.EntryNs
		}
		seen[p.CPU]++
	}
	return at
}

// replayCountedFrom replays s with each CPU's periods before at[CPU]
// as history (SetCountedFrom).
func replayCountedFrom(t *testing.T, prof *Profile, meta *trace.Metadata, specs []string, s *synth, at map[uint32]uint64) ([]Result, *Replay) {
	t.Helper()
	return runReplayWith(t, prof, meta, specs, s, func(rp *Replay) {
		for cpu, ns := range at {
			rp.SetCountedFrom(cpu, ns)
		}
	})
}

// only is s less the periods entered before at[CPU].
func only(s *synth, at map[uint32]uint64) *synth {
	out := &synth{ios: s.ios}
	for _, p := range s.periods {
		if p.EntryNs >= at[p.CPU] {
			out.periods = append(out.periods, p)
		}
	}
	return out
}

// History periods (SetCountedFrom) move the models' state but none of the
// figures: the recorded policy, which has no state, counts exactly what a
// replay of the counted periods alone counts; a governor meets the first
// counted period as the history left it.
func TestSetCountedFrom(t *testing.T) {
	t.Run("recorded counts the counted periods only", func(t *testing.T) {
		_, _, s := noDriverTrace(t, 5, 600)
		// With a driver and its table, so that agreement is counted too.
		meta := &trace.Metadata{CPUIdleDriver: "haltpoll", HZ: 250, KernelRelease: "6.18.44",
			States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true},
				{Index: 1, Name: "haltpoll idle", ExitLatencyNs: 1000, TargetResidencyNs: 1000}}}}}
		prof, err := Recorded(meta)
		if err != nil {
			t.Fatal(err)
		}
		at := countedFrom(s, 250)
		specs := []string{"recorded", "menu"}
		withHistory, _ := replayCountedFrom(t, prof, meta, specs, s, at)
		alone, _ := runReplay(t, prof, meta, specs, only(s, at))
		h, a := withHistory[0], alone[0]
		if h.IdlePeriods != 2*350 || h.IdlePeriods != a.IdlePeriods || h.Selections != a.Selections ||
			h.Above != a.Above || h.Below != a.Below || h.StateTimeNs != a.StateTimeNs || !maps.Equal(h.StateShare, a.StateShare) {
			t.Errorf("recorded with history: periods %d selections %d above/below %d/%d time %d;\nalone: %d %d %d/%d %d",
				h.IdlePeriods, h.Selections, h.Above, h.Below, h.StateTimeNs, a.IdlePeriods, a.Selections, a.Above, a.Below, a.StateTimeNs)
		}
		if h.Agreement == nil || a.Agreement == nil || *h.Agreement != *a.Agreement {
			t.Errorf("recorded agreement with history %v, alone %v", h.Agreement, a.Agreement)
		}
		if m := withHistory[1]; m.IdlePeriods != 2*350 || m.Agreement == nil {
			t.Errorf("menu counted %d periods (want %d), agreement %v", m.IdlePeriods, 2*350, m.Agreement)
		}
	})
	t.Run("ladder starts where its history left it", func(t *testing.T) {
		// Long timer sleeps: ladder promotes from C1 to C6 in its
		// first dozen stays (four each) and stays there.
		s := &synth{}
		for c := range 2 {
			now := int64(1_000_000 + c*333)
			for range 60 {
				p := trace.IdlePeriod{CPU: uint32(c), EntryNs: uint64(now), ExitNs: uint64(now + 5_000_000), WakeCause: trace.WakeTimer,
					NextTimerKnown: true, NextTimerNs: 5_000_000, TickStopped: trace.Yes, PollTimedOut: trace.Unknown, WakeIRQ: -1, NrIOWait: -1, AbortsBefore: -1}
				s.periods = append(s.periods, p)
				now += 5_000_000 + 20_000
			}
		}
		meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
		at := countedFrom(s, 30)
		withHistory, _ := replayCountedFrom(t, seedIntel(250), meta, []string{"ladder"}, s, at)
		cold, _ := runReplay(t, seedIntel(250), meta, []string{"ladder"}, only(s, at))
		if h := withHistory[0]; h.IdlePeriods != 60 || h.StateShare["C6"] != 1 {
			t.Errorf("with history: %d periods, C6's share %.3f, want 60 and 1 (%v)", h.IdlePeriods, h.StateShare["C6"], h.StateShare)
		}
		// Cold, the same periods begin in C1 (12 stays to climb per CPU).
		if c := cold[0]; c.IdlePeriods != 60 || c.StateShare["C6"] > 0.7 {
			t.Errorf("cold: %d periods, C6's share %.3f, want 60 and under 0.7 (%v)", c.IdlePeriods, c.StateShare["C6"], c.StateShare)
		}
	})
	t.Run("menu's stopped-tick runs count the counted selections", func(t *testing.T) {
		// Short wake-ups with the tick stopped: every selection of menu's
		// meets its stopped-tick override (a prediction under a tick), and
		// those of the history periods must not be counted (Changes'
		// reasons quote them beside the selections).
		s := &synth{}
		now := int64(1_000_000)
		for range 80 {
			p := trace.IdlePeriod{EntryNs: uint64(now), ExitNs: uint64(now + 100_000), WakeCause: trace.WakeIPIResched,
				NextTimerKnown: true, NextTimerNs: 50_000_000, TickStopped: trace.Yes, TickStoppedBefore: trace.Yes,
				PollTimedOut: trace.No, WakeIRQ: -1, NrIOWait: -1, AbortsBefore: -1}
			s.periods = append(s.periods, p)
			now += 100_000 + 30_000
		}
		meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
		at := countedFrom(s, 50)
		res, rp := replayCountedFrom(t, seedIntel(250), meta, []string{"menu"}, s, at)
		if got := rp.pols[0].idleTally.menu.stoppedRuns; res[0].Selections != 30 || got != res[0].Selections {
			t.Errorf("menu: %d stopped-tick runs over %d counted selections, want 30 each", got, res[0].Selections)
		}
	})
}
