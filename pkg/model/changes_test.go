package model

import (
	"reflect"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

func TestChangeReason(t *testing.T) {
	icx := map[string]int64{"POLL": 0, "C1": 1000, "C1E": 4000, "C6": 170000}
	share := map[string]float64{"POLL": 0.01, "C1": 0.1, "C1E": 0.5, "C6": 0}
	base := func(spec, ref string) whyInput {
		in := whyInput{pollName: "POLL", haltName: "C1", wakeUps: 1000, ioWoke: 100, io: true,
			refShare: share, exitNs: icx}
		in.pol = mustPolicy(t, spec)
		in.ref = mustPolicy(t, ref)
		return in
	}
	with := func(in whyInput, f func(*whyInput)) whyInput { f(&in); return in }
	tests := []struct {
		name string
		in   whyInput
		want string // "" for nil
	}{
		{"reference", with(base("menu", "menu"), func(in *whyInput) { in.isRef = true }), ""},
		{"reference haltpoll ignoring disable",
			with(base("haltpoll+disable=C1", "haltpoll+disable=C1"), func(in *whyInput) { in.isRef = true }),
			"haltpoll ignores disable= (haltpoll_select picks POLL or C1 and never looks at a state's disable flag)"},
		{"ladder in its first state though disabled, however much it changed",
			with(base("ladder+disable=C1,C1E,C6", "menu"), func(in *whyInput) { in.wakeChanged, in.ladderFirstOff = 900, "C1" }),
			"ladder entered C1 though it is disabled (ladder_select_state never goes below it, whatever its disable flag)"},
		{"many changed: counts say it all", with(base("menu+disable=C1E", "menu"), func(in *whyInput) { in.wakeChanged, in.ioChanged = 500, 40 }), ""},
		{"few wake-ups but many IO changed", with(base("menu+disable=C1E", "menu"), func(in *whyInput) { in.wakeChanged, in.ioChanged = 5, 40 }), ""},
		{"same spec", base("menu", "menu"), "the same policy as the reference"},
		{"no wake-ups", with(base("menu+qos=1us", "menu"), func(in *whyInput) { in.wakeUps, in.ioWoke = 0, 0 }), "no wake-up in the trace to change"},
		{"disable of a state the reference never entered", base("menu+disable=C6", "menu"), "menu never entered C6"},
		{"disable names a state in another case", base("menu+disable=c6", "menu"), "menu never entered C6"},
		{"disable in another case of a state the reference used", base("menu+disable=c1e", "menu"), "paid the same exit latency as menu at every wake-up"},
		{"disable of a state the reference used, nothing changed, same states", with(base("menu+disable=C1", "menu"), func(in *whyInput) { in.sameStates = true }),
			"chose the same state as menu in every period"},
		{"nothing changed, other states", base("menu+disable=C1", "menu"), "paid the same exit latency as menu at every wake-up"},
		{"little but not nothing: no reason", with(base("menu+disable=C1", "menu"), func(in *whyInput) { in.wakeChanged = 3 }), ""},
		{"qos above everything the reference entered", base("menu+qos=20us", "menu"), "menu never entered a state with an exit latency above 20 µs"},
		{"qos above every state of the table", base("menu+qos=1ms", "menu"), "no state of the table has an exit latency above 1000 µs"},
		{"qos below a state the reference entered", base("menu+qos=2us", "menu"), "paid the same exit latency as menu at every wake-up"},
		{"haltpoll qos above 0", with(base("haltpoll+qos=20us", "haltpoll"), func(in *whyInput) { in.sameStates = true }),
			"haltpoll honours only qos=0 (haltpoll_select polls when the latency limit is 0 and otherwise never compares it with an exit latency)"},
		{"haltpoll qos=0 is honoured", with(base("haltpoll+qos=0", "haltpoll"), func(in *whyInput) { in.wakeChanged, in.ioChanged = 900, 90 }), ""},
		{"haltpoll ignores disable even when much changed", with(base("haltpoll+disable=C6", "menu"), func(in *whyInput) { in.wakeChanged, in.ioChanged = 900, 90 }),
			"haltpoll ignores disable= (haltpoll_select picks POLL or C1 and never looks at a state's disable flag)"},
		{"haltpoll enable and disable", with(base("haltpoll+enable=C6+disable=C1E", "haltpoll"), func(in *whyInput) { in.sameStates = true }),
			"haltpoll ignores disable= and enable= (haltpoll_select picks POLL or C1 and never looks at a state's disable flag)"},
		{"haltpoll maxcstate and blkqos", with(base("haltpoll+maxcstate=1+blkqos=10us/3ms", "haltpoll"), func(in *whyInput) { in.sameStates = true }),
			"haltpoll ignores maxcstate= (haltpoll_select picks POLL or C1 and never looks at a state's disable flag); " +
				"haltpoll honours only a blkqos limit of 0 (haltpoll_select polls when the latency limit is 0 and otherwise never compares it with an exit latency)"},
		{"blkqos: IO issued on another CPU", with(base("menu+blkqos=10us/3ms", "menu"), func(in *whyInput) {
			in.issuePerCPU, in.wokePerCPU = []uint64{500}, []uint64{0, 100}
		}), "limited 0 of 100 IO wake-ups: completions woke CPU 1, IO was issued on CPU 0"},
		{"blkqos: IO issued mostly on another CPU", with(base("menu+blkqos=10us/3ms", "menu"), func(in *whyInput) {
			in.ioLimited = 2
			in.issuePerCPU, in.wokePerCPU = []uint64{0, 0, 490, 10}, []uint64{60, 40, 0, 0}
		}), "limited 2 of 100 IO wake-ups: completions woke CPUs 0, 1, IO was issued mostly on CPU 2"},
		{"blkqos: same CPUs, timeout too short", with(base("menu+blkqos=10us/50us", "menu"), func(in *whyInput) {
			in.issuePerCPU, in.wokePerCPU = []uint64{500, 500}, []uint64{50, 50}
		}), "limited 0 of 100 IO wake-ups: most came more than 50 µs after the last IO issued on their CPU"},
		{"blkqos: limited, states already within", with(base("menu+blkqos=10us/3ms", "menu"), func(in *whyInput) {
			in.ioLimited = 80
			in.issuePerCPU, in.wokePerCPU = []uint64{500}, []uint64{100}
		}), "limited 80 of 100 IO wake-ups, where menu's states already met the 10 µs limit"},
		{"blkqos: limited, states within but at a few", with(base("menu+blkqos=10us/3ms", "menu"), func(in *whyInput) {
			in.ioLimited, in.ioChanged = 80, 1
			in.issuePerCPU, in.wokePerCPU = []uint64{500}, []uint64{100}
		}), "limited 80 of 100 IO wake-ups, where menu's states already met the 10 µs limit at all but the 1 it changed"},
		{"margin where menu seldom found the tick stopped", with(base("menu+margin=25", "menu"), func(in *whyInput) {
			in.wakeChanged, in.selections, in.stoppedRuns, in.marginOther = 2, 1200, 114, 51
		}), "the margin acts only where menu found the tick already stopped with a prediction under a tick: 114 of 1,200 selections, 51 of them given a prediction other than the next timer"},
		{"margin against another governor: nothing said of it", with(base("menu+margin=25", "recorded"), func(in *whyInput) {
			in.sameStates, in.selections, in.stoppedRuns = true, 1200, 114
		}), "chose the same state as recorded in every period"},
		{"margin that changed much: counts say it all", with(base("menu+margin=25", "menu"), func(in *whyInput) {
			in.wakeChanged, in.selections, in.stoppedRuns, in.marginOther = 400, 1200, 900, 800
		}), ""},
		{"blkqos without IO", with(base("menu+blkqos=10us/3ms", "menu"), func(in *whyInput) { in.io, in.ioWoke = false, 0 }),
			"no block IO in the trace for blkqos to act on"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := changeReason(tc.in)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("reason %q, want none", *got)
			case tc.want != "" && got == nil:
				t.Errorf("no reason, want %q", tc.want)
			case got != nil && *got != tc.want:
				t.Errorf("reason\n %q\nwant\n %q", *got, tc.want)
			}
		})
	}
}

func TestFormatCountAndCPUList(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 138286: "138,286", 1234567: "1,234,567"} {
		if got := FormatCount(n); got != want {
			t.Errorf("FormatCount(%d) = %q, want %q", n, got, want)
		}
	}
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{nil, "no CPU"}, {[]int{1}, "CPU 1"}, {[]int{0, 1}, "CPUs 0, 1"}, {[]int{0, 1, 2, 3, 7}, "CPUs 0-3, 7"}, {[]int{2, 4, 5, 6}, "CPUs 2, 4-6"},
	} {
		if got := CPUList(tc.cpus); got != tc.want {
			t.Errorf("CPUList(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
	}
}

// ioWakeTrace: on cpu, n pairs of an idle period woken by a block IO
// completion inside it: one 2 ms long (the oracle picks C6), one 5 µs short
// (not C6). Each request is issued on issueCPU 10 µs before its period and
// waited for by a task on the completing CPU. otherIdle adds a timer-woken
// period as long on issueCPU (if it differs from cpu) right after each issue.
func ioWakeTrace(cpu, issueCPU uint32, n int, otherIdle bool) *synth {
	s := &synth{}
	now := int64(1_000_000)
	add := func(d int64) {
		p := trace.IdlePeriod{CPU: cpu, EntryNs: uint64(now), ExitNs: uint64(now + d), WakeCause: trace.WakeIRQ,
			NextTimerKnown: true, NextTimerNs: d + 4_000_000, TickStopped: trace.Yes}
		s.periods = append(s.periods, p)
		done := uint64(now + d - 500)
		s.ios = append(s.ios, trace.BlockIO{IssueCPU: issueCPU, CompleteCPU: cpu, IssueNs: uint64(now - 10_000), CompleteNs: done,
			TaskCPU: cpu, TaskWokenNs: done + 1_000, TaskRunNs: done + 3_000})
		if otherIdle && issueCPU != cpu {
			s.periods = append(s.periods, trace.IdlePeriod{CPU: issueCPU, EntryNs: uint64(now - 9_000), ExitNs: uint64(now - 9_000 + d),
				WakeCause: trace.WakeTimer, NextTimerKnown: true, NextTimerNs: d, TickStopped: trace.Yes})
		}
		now += d + 100_000 // beyond the matcher's 50 µs window
	}
	for i := 0; i < n; i++ {
		add(2_000_000)
		add(5_000)
	}
	return s
}

// The replay counts the changes exactly: oracle+disable=C6 changes just
// the wake-ups (and their IO completions and task waits) the oracle took
// in C6.
func TestChangesDisableC6(t *testing.T) {
	prof := mustBuiltin(t, "spr", 250)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	s := ioWakeTrace(1, 1, 50, false)
	res, rp := runReplay(t, prof, meta, []string{"oracle", "oracle+disable=C6"}, s)
	c6 := prof.StateIndex("C6")
	inC6 := rp.pols[0].wakeCount[c6]
	if inC6 != 50 {
		t.Fatalf("oracle woke from C6 %d times, want the 50 long periods", inC6)
	}
	ref, c := res[0].Changes, res[1].Changes
	if ref == nil || c == nil {
		t.Fatal("no changes in the results")
	}
	if !ref.Reference || ref.Against != "oracle" || ref.WakeUpsChanged != 0 || ref.Reason != nil {
		t.Errorf("reference's changes %+v", *ref)
	}
	want := Changes{Against: "oracle", WakeUpsChanged: inC6, WakeUps: 100, IOChanged: inC6, IOWokeIdle: 100, TaskIOChanged: inC6, TaskIO: 100}
	got := *c
	got.CPUs, got.Reason = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes\n %+v\nwant\n %+v", got, want)
	}
	if len(c.CPUs) != 1 || c.CPUs[0] != (CPUChanges{CPU: 1, WakeUpsChanged: inC6, IOChanged: inC6}) {
		t.Errorf("per CPU %+v, want CPU 1 only with %d wake-ups and IO completions", c.CPUs, inC6)
	}
	if c.Reason != nil {
		t.Errorf("reason %q, want none (half the wake-ups changed)", *c.Reason)
	}
}

// blkqos limits the CPU that issued the IO: with completions waking
// another CPU it changes nothing and says why; with completions on the
// issuing CPU it changes the long periods' wake-ups.
func TestChangesBlkQoS(t *testing.T) {
	prof := mustBuiltin(t, "spr", 250)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	specs := []string{"oracle", "oracle+blkqos=10us/3ms"}

	res, _ := runReplay(t, prof, meta, specs, ioWakeTrace(1, 0, 50, false))
	c := res[1].Changes
	if c.WakeUpsChanged != 0 || c.IOChanged != 0 || c.TaskIOChanged != 0 || c.IOWokeIdle != 100 || len(c.CPUs) != 0 {
		t.Errorf("IO issued on CPU 0, completions on CPU 1: changes %+v, want none of 100", *c)
	}
	want := "limited 0 of 100 IO wake-ups: completions woke CPU 1, IO was issued on CPU 0"
	if c.Reason == nil || *c.Reason != want {
		t.Errorf("reason %v, want %q", c.Reason, want)
	}

	// CPU 0 idles right after each issue: the limit changes its wake-ups,
	// not the IO completions' (they wake CPU 1).
	res, _ = runReplay(t, prof, meta, specs, ioWakeTrace(1, 0, 50, true))
	c = res[1].Changes
	if c.WakeUpsChanged != 50 || c.WakeUps != 200 || c.IOChanged != 0 || len(c.CPUs) != 1 || c.CPUs[0].CPU != 0 {
		t.Errorf("CPU 0 idle under the limit: changes %+v, want its 50 long wake-ups of 200, on CPU 0, and no IO", *c)
	}

	// Completions on the issuing CPU: the long periods are limited.
	res, _ = runReplay(t, prof, meta, specs, ioWakeTrace(1, 1, 50, false))
	c = res[1].Changes
	if c.WakeUpsChanged != 50 || c.IOChanged != 50 || c.TaskIOChanged != 50 || c.Reason != nil {
		t.Errorf("completions on the issuing CPU: changes %+v, want the 50 long periods", *c)
	}
}
