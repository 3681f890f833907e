package model

import (
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestTickStoppedBeforeIsTheGovernorInput: menu sees the tick state from
// before its decision (TickStoppedBefore). With the tick already stopped
// and a short prediction, menu 6.18 falls back to the next timer and goes
// deep; with the tick still running it trusts the short prediction.
func TestTickStoppedBeforeIsTheGovernorInput(t *testing.T) {
	prof, err := Builtin("spr", 250)
	if err != nil {
		t.Fatal(err)
	}
	meta := &trace.Metadata{HZ: 250, KernelRelease: "6.18.44"}
	build := func(before trace.Tristate) *synth {
		s := &synth{}
		now := int64(1_000_000)
		for i := 0; i < 400; i++ {
			d := int64(20_000) // 20 µs idles: a short typical interval
			s.periods = append(s.periods, trace.IdlePeriod{
				CPU: 0, State: 2, EntryNs: uint64(now), ExitNs: uint64(now + d),
				WakeCause: trace.WakeIPIResched, WakeIRQ: -1, WakeRequestNs: uint64(now + d - 1_000),
				NextTimerNs: 3_000_000, NextTimerKnown: true, // a timer 3 ms away, under one tick
				TickStopped: trace.Yes, TickStoppedBefore: before, PollTimedOut: trace.Unknown,
			})
			now += d + 5_000
		}
		return s
	}
	stoppedBefore, _ := runReplay(t, prof, meta, []string{"menu"}, build(trace.Yes))
	runningBefore, _ := runReplay(t, prof, meta, []string{"menu"}, build(trace.No))
	// By time: a C6 stay counts its 290 µs exit latency beside the 20 µs
	// idle, so menu's few C6 choices before its history fills (the next
	// timer its only guide) are about a fifth of the running case's time.
	deep, shallow := stoppedBefore[0].StateShare["C6"], runningBefore[0].StateShare["C6"]
	if !(deep > 0.95 && shallow < 0.3) {
		t.Fatalf("C6 share with the tick stopped before the decision %.3f, running %.3f: the input is not TickStoppedBefore", deep, shallow)
	}
}
