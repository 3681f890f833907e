package model

import (
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// An import of the kernel's text trace has no event for a poll that timed
// out: its polls end with neither a time-out flag nor a wake cause. Those
// that lasted the kernel's poll limit are time-outs (poll_idle() ends a
// poll there unless a wake-up came first), and the recorded policy must
// count them as the recorder's own flags would have it, not as wake-ups
// that found the CPU polling; a shorter poll of unknown end stays a
// wake-up, and a flagged trace never takes the inference.
func TestPollTimeoutInferred(t *testing.T) {
	meta, prof := pollTestMachine(t)
	probe, err := NewReplay(prof, meta, []Policy{mustPolicy(t, "recorded")})
	if err != nil {
		t.Fatal(err)
	}
	limit := probe.kernelPollNs
	if limit <= 0 {
		t.Fatalf("no kernel poll limit for this table: %d", limit)
	}
	// Flagged as the recorder writes them: per round, a poll that timed
	// out and the C1 stay the governor chose next, a poll a wake-up ended
	// after 20 µs, a C6 timer sleep.
	var flagged synth
	now := int64(1_000_000)
	add := func(s *synth, p trace.IdlePeriod, d, gap int64) {
		p.EntryNs, p.ExitNs, p.WakeIRQ = uint64(now), uint64(now+d), -1
		s.periods = append(s.periods, p)
		now += d + gap
	}
	const rounds = 50
	for range rounds {
		add(&flagged, trace.IdlePeriod{State: 0, WakeCause: trace.WakePollTimeout, PollTimedOut: trace.Yes}, limit+3_000, 500)
		add(&flagged, trace.IdlePeriod{State: 1, WakeCause: trace.WakeIRQ, PollTimedOut: trace.No}, 40_000, 30_000)
		add(&flagged, trace.IdlePeriod{State: 0, WakeCause: trace.WakeRemoteNoIPI, PollTimedOut: trace.No}, 20_000, 30_000)
		add(&flagged, trace.IdlePeriod{State: 2, WakeCause: trace.WakeTimer, PollTimedOut: trace.No}, 3_000_000, 30_000)
	}
	// The same as an import sees it: no flag, and no cause where the
	// kernel's text trace has no event (a time-out, a wake-up without IPI).
	imported := synth{periods: append([]trace.IdlePeriod(nil), flagged.periods...)}
	for i := range imported.periods {
		p := &imported.periods[i]
		p.PollTimedOut = trace.Unknown
		if p.WakeCause == trace.WakePollTimeout || p.WakeCause == trace.WakeRemoteNoIPI {
			p.WakeCause = trace.WakeUnknown
		}
	}
	want, wantRp := runReplay(t, prof, meta, []string{"recorded"}, &flagged)
	got, gotRp := runReplay(t, prof, meta, []string{"recorded"}, &imported)
	if n := wantRp.Stats().InferredPollTimeouts; n != 0 {
		t.Errorf("flagged trace: %d poll time-outs inferred, want none", n)
	}
	if n := gotRp.Stats().InferredPollTimeouts; n != rounds {
		t.Errorf("imported trace: %d poll time-outs inferred, want %d", n, rounds)
	}
	if want[0].PollTimeouts == nil || got[0].PollTimeouts == nil || *got[0].PollTimeouts != *want[0].PollTimeouts || *want[0].PollTimeouts != rounds {
		t.Errorf("poll time-outs: imported %v, flagged %v, want %d each", got[0].PollTimeouts, want[0].PollTimeouts, rounds)
	}
	if got[0].WakeupsPolling != want[0].WakeupsPolling || got[0].WakeLatencyNs.Count != want[0].WakeLatencyNs.Count {
		t.Errorf("wake-ups: imported %d (%d polling), flagged %d (%d polling): want the same",
			got[0].WakeLatencyNs.Count, got[0].WakeupsPolling, want[0].WakeLatencyNs.Count, want[0].WakeupsPolling)
	}
	// Where the polls did not run to the table's limit, nothing is
	// inferred: haltpoll's window (its governor named, or a guest's table
	// with the governor unknown), and cpu_idle_poll without a driver.
	guest := []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: "haltpoll idle", ExitLatencyNs: 1000, TargetResidencyNs: 1000}}
	for _, tc := range []struct {
		name     string
		governor string
		driver   string
		table    []trace.StateInfo
	}{
		{"haltpoll governor", "haltpoll", "haltpoll", nil},
		{"guest table, governor unknown", "", "", guest},
		{"no cpuidle driver", "menu", trace.CPUIdleDriverNone, nil},
	} {
		m := *meta
		m.CPUIdleGovernor, m.CPUIdleDriver = tc.governor, tc.driver
		if tc.table != nil {
			m.States = []trace.CPUStates{{CPU: 0, States: tc.table}}
		}
		p, err := Recorded(&m)
		if err != nil {
			t.Fatal(err)
		}
		if _, rp := runReplay(t, p, &m, []string{"recorded"}, &imported); rp.Stats().InferredPollTimeouts != 0 {
			t.Errorf("%s: %d poll time-outs inferred, want none", tc.name, rp.Stats().InferredPollTimeouts)
		}
	}
}

// With every state disabled the governors fall back to state 0
// (menu_select: "No states enabled, must use 0"), which polls, with the
// limit cpuidle_poll_time gives when no state is enabled: the result
// shows that limit, not none. With only POLL disabled there is no poll.
func TestPollLimitEveryStateDisabled(t *testing.T) {
	meta, prof := pollTestMachine(t)
	s := genTrace(3, 1, 400, 250_000)
	res, _ := runReplay(t, prof, meta, []string{"menu+disable=POLL,C1,C6", "menu+disable=POLL"}, s)
	const tick16 = 4_000_000 / 16 // CPUIDLE_POLL_MAX at HZ=250
	if l := res[0].PollLimitNs; l == nil || *l != tick16 {
		t.Errorf("every state disabled: poll limit %v, want %d ns", l, tick16)
	}
	if res[0].PollTimeouts == nil || *res[0].PollTimeouts == 0 {
		t.Errorf("every state disabled: poll time-outs %v, want the fallback to POLL to time out", res[0].PollTimeouts)
	}
	if l := res[1].PollLimitNs; l != nil {
		t.Errorf("POLL disabled, C1 and C6 not: poll limit %d, want none", *l)
	}
}

// pollTestMachine is a 6.12 machine with POLL, C1 and C6 on CPU 0, and
// its recorded profile.
func pollTestMachine(t *testing.T) (*trace.Metadata, *Profile) {
	t.Helper()
	tab := []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "C1", ExitLatencyNs: 2_000, TargetResidencyNs: 2_000},
		{Index: 2, Name: "C6", ExitLatencyNs: 170_000, TargetResidencyNs: 600_000}}
	meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NoHZ: "idle", CPUIdleDriver: "intel_idle", CPUIdleGovernor: "menu",
		States: []trace.CPUStates{{CPU: 0, States: tab}}}
	prof, err := Recorded(meta)
	if err != nil {
		t.Fatal(err)
	}
	return meta, prof
}
