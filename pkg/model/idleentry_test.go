package model

import (
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestReselectionSleepLength: the sleep length a governor gets after a poll
// time-out within one idle period is measured from the kernel's idle entry
// time (tick_nohz_get_sleep_length() uses tick_sched.idle_entrytime), which
// only an interrupt moves (tick_nohz_irq_exit()). So re-selections keep the
// first selection's sleep length until a tick, and measure from the tick
// after it. Whether a tick comes inside the recorded period is the recorded
// timeline's to say: a period a tick ends sets the grid for itself, and a
// poll that ran without got_idle_tick saw none.
func TestReselectionSleepLength(t *testing.T) {
	prof, err := Builtin("spr", 250) // tick 4 ms, grid from trace time 0
	if err != nil {
		t.Fatal(err)
	}
	meta := &trace.Metadata{HZ: 250, KernelRelease: "6.18.44"}
	const (
		entry   = 10_000_000
		timerIn = 2_500_000 // the next timer at 12.5 ms
		gridAt  = 12_000_000
	)
	tests := []struct {
		name     string
		exit     int64
		cause    trace.WakeCause
		state    uint32 // 0 POLL, 1 C1 on spr
		gotTick  trace.Tristate
		tickSeen bool // a tick at 12 ms moves the idle entry time
	}{
		{"a tick inside the period restarts the idle time", 13_000_000, trace.WakeIPIResched, 0, trace.Yes, true},
		{"the tick that ends the period sets the grid", 13_100_000, trace.WakeTick, 0, trace.Yes, false},
		{"a poll without got_idle_tick saw no tick", 13_000_000, trace.WakeIPIResched, 0, trace.No, false},
		{"a halted stay with the tick running saw none", 13_000_000, trace.WakeIPIResched, 1, trace.No, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rp, err := NewReplay(prof, meta, []Policy{mustPolicy(t, "menu+qos=0+poll=100us")})
			if err != nil {
				t.Fatal(err)
			}
			type sel struct{ at, sleep int64 }
			var sels []sel
			rp.pols[0].obs = func(ev *[8]int64) {
				if ev[0] == obsSelect {
					sels = append(sels, sel{ev[2], ev[4]})
				}
			}
			p := trace.IdlePeriod{
				CPU: 0, State: tc.state, EntryNs: entry, ExitNs: uint64(tc.exit),
				WakeCause: tc.cause, WakeIRQ: -1, NrIOWait: -1, AbortsBefore: -1,
				NextTimerNs: timerIn, NextTimerKnown: true,
				TickStopped: trace.No, TickStoppedBefore: trace.No, GotTick: tc.gotTick,
			}
			if err := rp.Idle(&p); err != nil {
				t.Fatal(err)
			}
			if _, err := rp.Finish(); err != nil {
				t.Fatal(err)
			}
			// qos=0 keeps menu in POLL: a selection every 100 µs.
			if len(sels) < 25 {
				t.Fatalf("%d selections over 3 ms with a 100 µs poll limit", len(sels))
			}
			for _, s := range sels {
				want := int64(timerIn)
				if tc.tickSeen && s.at >= gridAt {
					want = entry + timerIn - gridAt
				}
				if s.sleep != want {
					t.Fatalf("selection at %d µs after entry got a sleep length of %d ns, want %d", (s.at-entry)/1000, s.sleep, want)
				}
			}
		})
	}
}

// TestChainedPollKeepsIdleEntry: a poll time-out re-entered with the same
// recorded sleep length and delta_next had no interrupt in between, so both
// count from the first entry's idle entry time: after a tick in the second
// period the timer is where the first period put it, not 100 µs later.
func TestChainedPollKeepsIdleEntry(t *testing.T) {
	prof, err := Builtin("spr", 250)
	if err != nil {
		t.Fatal(err)
	}
	meta := &trace.Metadata{HZ: 250, KernelRelease: "6.18.44"}
	rp, err := NewReplay(prof, meta, []Policy{mustPolicy(t, "menu+qos=0+poll=100us")})
	if err != nil {
		t.Fatal(err)
	}
	var afterTick []int64
	rp.pols[0].obs = func(ev *[8]int64) {
		if ev[0] == obsSelect && ev[2] >= 12_000_000 {
			afterTick = append(afterTick, ev[4])
		}
	}
	period := func(entry, exit uint64, cause trace.WakeCause) trace.IdlePeriod {
		return trace.IdlePeriod{
			CPU: 0, State: 0, EntryNs: entry, ExitNs: exit, WakeCause: cause, WakeIRQ: -1, NrIOWait: -1, AbortsBefore: -1,
			NextTimerNs: 2_500_000, NextTimerKnown: true, NextEventNs: 2_500_000, NextEventKnown: true,
			TickStopped: trace.No, TickStoppedBefore: trace.No, GotTick: trace.Yes,
			PollTimedOut: trace.TristateOf(cause == trace.WakePollTimeout),
		}
	}
	for _, p := range []trace.IdlePeriod{
		period(10_000_000, 10_100_000, trace.WakePollTimeout),
		period(10_100_000, 13_000_000, trace.WakeIPIResched),
	} {
		if err := rp.Idle(&p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rp.Finish(); err != nil {
		t.Fatal(err)
	}
	if len(afterTick) == 0 {
		t.Fatal("no selection after the tick at 12 ms")
	}
	for _, sleep := range afterTick {
		if sleep != 500_000 { // the timer at 10 ms + 2.5 ms, from the tick at 12 ms
			t.Fatalf("sleep length after the tick %d ns, want 500000", sleep)
		}
	}
}

// TestNoPollAfterInterrupt: a governor's own poll time-outs stop at the
// interrupt that ended the recorded period (its exit less the recorded
// state's exit latency), not at the exit: a period recorded in spr's C6
// (290 µs exit latency) woke at 11.91 ms, so a policy polling in 100 µs
// slices selects for the last time at 11.9 ms, and its stay counts to the
// interrupt.
func TestNoPollAfterInterrupt(t *testing.T) {
	prof, err := Builtin("spr", 250)
	if err != nil {
		t.Fatal(err)
	}
	meta := &trace.Metadata{HZ: 250, KernelRelease: "6.18.44", States: []trace.CPUStates{{CPU: 0, States: prof.StateInfos()}}}
	const entry, exit = 10_000_000, 12_200_000
	interrupt := int64(exit - prof.States[3].ExitLatencyNs)
	rp, err := NewReplay(prof, meta, []Policy{mustPolicy(t, "menu+qos=0+poll=100us")})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	rp.pols[0].obs = func(ev *[8]int64) {
		if ev[0] == obsSelect {
			last = ev[2]
		}
	}
	p := trace.IdlePeriod{CPU: 0, State: 3, EntryNs: entry, ExitNs: exit, WakeCause: trace.WakeIPIResched, WakeIRQ: -1,
		NrIOWait: -1, AbortsBefore: -1, NextTimerNs: 5_000_000, NextTimerKnown: true, TickStopped: trace.Yes, TickStoppedBefore: trace.Yes}
	if err := rp.Idle(&p); err != nil {
		t.Fatal(err)
	}
	res, err := rp.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if last >= interrupt || last < interrupt-100_000 {
		t.Errorf("last selection at %d ns, want the last poll slice before the interrupt at %d", last, interrupt)
	}
	if res[0].StateTimeNs != uint64(interrupt-entry) || res[0].RecordedTimeNs != exit-entry {
		t.Errorf("polled %d ns over %d recorded, want %d over %d", res[0].StateTimeNs, res[0].RecordedTimeNs, interrupt-entry, exit-entry)
	}
}
