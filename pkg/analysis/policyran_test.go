package analysis

import (
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// A comparison says when AFTER's recording did not run the policy's
// kernel knobs, naming each, and says nothing when it did.
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
	for _, tc := range []struct {
		spec  string
		after *trace.Metadata
		same  bool
		want  []string // parts of the note; none: no note
	}{
		{"menu", after(nil), false, nil},
		{"menu", after(nil), true, []string{"AFTER is BEFORE"}},
		{"teo", after(nil), false, []string{"governor menu (teo wanted)"}},
		{"menu+qos=20us", after(nil), false, []string{"cpu_dma_latency none (20.0 µs wanted)"}},
		{"menu+qos=20us", after(func(m *trace.Metadata) { m.PMQoS.CPUDMALatencyUs = 10 }), false, nil},
		{"menu+qos=20us", after(func(m *trace.Metadata) { m.PMQoS.CPUDMALatencyUs = -1 }), false, nil}, // unread: not judged
		{"menu+disable=C6", after(nil), false, []string{"cpu0 C6 enabled (disabled wanted)", "cpu1 C6 enabled"}},
		{"menu+disable=c6", after(func(m *trace.Metadata) {
			for i := range m.States {
				m.States[i].States[2].Disabled = true
			}
		}), false, nil},
		{"menu+maxcstate=1", after(nil), false, []string{"cpu0 C6 enabled (disabled wanted)"}},
		{"menu+enable=C1", after(func(m *trace.Metadata) { m.States[1].States[1].Disabled = true }), false, []string{"cpu1 C1 disabled (enabled wanted)"}},
		{"menu+disable=C6", after(func(m *trace.Metadata) {
			m.RecordedCPUs = []int{0}
			m.States[0].States[2].Disabled = true
		}), false, nil}, // CPU 1 was not recorded
		{"haltpoll+guest_halt_poll_ns=200us", after(func(m *trace.Metadata) {
			m.CPUIdleGovernor = "haltpoll"
			m.HaltPoll = &trace.HaltPollParams{GuestHaltPollNs: 0}
		}), false, []string{"guest_halt_poll_ns 0 (200000 wanted)"}},
		{"haltpoll+guest_halt_poll_ns=200us", after(func(m *trace.Metadata) {
			m.CPUIdleGovernor = "haltpoll"
			m.HaltPoll = &trace.HaltPollParams{GuestHaltPollNs: ns}
		}), false, nil},
		{"menu+margin=25+blkqos=10us/3ms", after(nil), false, nil}, // no kernel knob
		{"menu+disable=C6", after(func(m *trace.Metadata) { m.Clock = trace.ImportedClockPrefix + "perf script" }), false, nil},
		{"teo+disable=C6", after(func(m *trace.Metadata) { m.Clock = trace.ImportedClockPrefix + "perf script" }), false, []string{"governor menu (teo wanted)"}},
	} {
		pol, err := model.ParsePolicy(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got := PolicyNotRunNote(pol, tc.after, tc.same)
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
