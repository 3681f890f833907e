package analysis

import (
	"cmp"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// A comparison says when AFTER's recording did not run the policy's
// kernel knobs, naming each, and says nothing when it did; a knob the
// policy leaves unset is BEFORE's (a new user's haltpoll prediction from
// a guest_halt_poll_ns=0 recording set beside one at 200000 had no note).
func TestPolicyNotRunNote(t *testing.T) {
	after := func(edit func(*trace.Metadata)) *trace.Metadata {
		m := driverMeta() // menu, POLL/C1/C6 on CPUs 0-1, no disabled state
		m.PMQoS.CPUDMALatencyUs = trace.PMQoSNoGlobalLimitUs
		m.States = []trace.CPUStates{{CPU: 0, States: append([]trace.StateInfo{}, m.States[0].States...)}, {CPU: 1, States: append([]trace.StateInfo{}, m.States[1].States...)}}
		if edit != nil {
			edit(m)
		}
		return m
	}
	ns := uint64(200_000)
	before := after(nil)
	haltpoll := func(pollNs uint64) func(*trace.Metadata) {
		return func(m *trace.Metadata) {
			m.CPUIdleGovernor = "haltpoll"
			m.HaltPoll = &trace.HaltPollParams{GuestHaltPollNs: pollNs, Grow: 2, Shrink: 2, GrowStart: 50_000, AllowShrink: true}
		}
	}
	for _, tc := range []struct {
		spec   string
		before *trace.Metadata // nil: before
		after  *trace.Metadata
		same   bool
		want   []string // parts of the note; none: no note
	}{
		{"menu", nil, after(nil), false, nil},
		{"menu", nil, after(nil), true, []string{"AFTER is BEFORE"}},
		{"teo", nil, after(nil), false, []string{"governor menu (teo wanted)"}},
		{"menu+qos=20us", nil, after(nil), false, []string{"cpu_dma_latency none (20.0 µs wanted)"}},
		{"menu+qos=20us", nil, after(func(m *trace.Metadata) { m.PMQoS.CPUDMALatencyUs = 10 }), false, nil},
		{"menu+qos=20us", nil, after(func(m *trace.Metadata) { m.PMQoS.CPUDMALatencyUs = -1 }), false, nil}, // unread: not judged
		{"menu+disable=C6", nil, after(nil), false, []string{"cpu0 C6 enabled (disabled wanted)", "cpu1 C6 enabled"}},
		{"menu+disable=c6", nil, after(func(m *trace.Metadata) {
			for i := range m.States {
				m.States[i].States[2].Disabled = true
			}
		}), false, nil},
		{"menu+maxcstate=1", nil, after(nil), false, []string{"cpu0 C6 enabled (disabled wanted)"}},
		{"menu+enable=C1", nil, after(func(m *trace.Metadata) { m.States[1].States[1].Disabled = true }), false, []string{"cpu1 C1 disabled (enabled wanted)"}},
		{"menu+disable=C6", nil, after(func(m *trace.Metadata) {
			m.RecordedCPUs = []int{0}
			m.States[0].States[2].Disabled = true
		}), false, nil}, // CPU 1 was not recorded
		{"haltpoll+guest_halt_poll_ns=200us", nil, after(func(m *trace.Metadata) {
			m.CPUIdleGovernor = "haltpoll"
			m.HaltPoll = &trace.HaltPollParams{GuestHaltPollNs: 0}
		}), false, []string{"guest_halt_poll_ns 0 (200000 wanted)"}},
		{"haltpoll+guest_halt_poll_ns=200us", nil, after(func(m *trace.Metadata) {
			m.CPUIdleGovernor = "haltpoll"
			m.HaltPoll = &trace.HaltPollParams{GuestHaltPollNs: ns}
		}), false, nil},
		{"menu+margin=25+blkqos=10us/3ms", nil, after(nil), false, nil}, // no kernel knob
		{"menu+disable=C6", nil, after(func(m *trace.Metadata) { m.Clock = trace.ImportedClockPrefix + "perf script" }), false, nil},
		{"teo+disable=C6", nil, after(func(m *trace.Metadata) { m.Clock = trace.ImportedClockPrefix + "perf script" }), false, []string{"governor menu (teo wanted)"}},
		// Unset knobs are BEFORE's.
		{"haltpoll", after(haltpoll(0)), after(haltpoll(ns)), false, []string{"guest_halt_poll_ns 200000 (BEFORE's 0 wanted)"}},
		{"haltpoll", after(haltpoll(ns)), after(haltpoll(ns)), false, nil},
		{"recorded", after(haltpoll(0)), after(haltpoll(ns)), false, []string{"guest_halt_poll_ns 200000 (BEFORE's 0 wanted)"}},
		{"recorded", after(haltpoll(0)), after(nil), false, []string{"governor menu (BEFORE's haltpoll wanted)"}},
		{"menu", nil, after(func(m *trace.Metadata) { m.PMQoS.CPUDMALatencyUs = 0 }), false, []string{"cpu_dma_latency 0 µs (BEFORE's none wanted)"}},
		{"menu", nil, after(func(m *trace.Metadata) { m.States[0].States[2].Disabled = true }), false, []string{"cpu0 C6 disabled (enabled in BEFORE)"}},
		{"oracle", nil, after(nil), false, []string{"oracle is no governor a kernel runs"}},
	} {
		pol, err := model.ParsePolicy(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		b := cmp.Or(tc.before, before)
		got := PolicyNotRunNote(pol, b, tc.after, tc.same)
		if len(tc.want) == 0 {
			if got != "" {
				t.Errorf("%s: note %q, want none", tc.spec, got)
			}
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: note %q, want it to say %q", tc.spec, got, w)
			}
		}
	}
}
