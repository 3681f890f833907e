package analysis

import (
	"maps"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// The note appears where a halted state was measured often enough, far
// above its table's exit latency both as a ratio and in µs.
func TestExitLatencyCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exitNs  uint64
		wakeNs  uint64
		wakeUps int
		want    string // in the note; "" for no note
	}{
		{"haltpoll's nominal 1 µs, 20 µs measured", 1_000, 20_000, 150, "haltpoll idle's exit latency is 1.00 µs, its measured wake-up latency a median of 20.0 µs over 150 wake-ups"},
		{"too few wake-ups to say", 1_000, 20_000, exitCheckMinWakeUps - 1, ""},
		{"within four times the table's", 10_000, 35_000, 150, ""},
		{"four times, but less than 10 µs more", 1_000, 9_000, 150, ""},
		{"the table's figure measured", 100_000, 120_000, 500, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := &trace.Metadata{FormatVersion: 1, CPUIdleDriver: "haltpoll", CPUIdleGovernor: "haltpoll", HZ: 250,
				States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{
					{Index: 0, Name: "POLL", Polling: true},
					{Index: 1, Name: "haltpoll idle", ExitLatencyNs: tc.exitNs, TargetResidencyNs: tc.exitNs},
				}}}}
			prof, err := model.Recorded(meta)
			if err != nil {
				t.Fatal(err)
			}
			c := NewExitLatencyCheck(meta, nil)
			t0 := uint64(1_000_000)
			for range tc.wakeUps {
				p := trace.IdlePeriod{CPU: 0, State: 1, EntryNs: t0, ExitNs: t0 + 500_000, WakeCause: trace.WakeIPICall, WakeIRQ: -1}
				p.WakeRequestNs = p.ExitNs - tc.wakeNs
				c.Add(&p)
				// A POLL wake-up and a device interrupt: not the halted state's.
				c.Add(&trace.IdlePeriod{CPU: 0, State: 0, EntryNs: t0 + 600_000, ExitNs: t0 + 700_000, WakeCause: trace.WakeIPICall, WakeRequestNs: t0 + 600_001, WakeIRQ: -1})
				c.Add(&trace.IdlePeriod{CPU: 0, State: 1, EntryNs: t0 + 800_000, ExitNs: t0 + 900_000, WakeCause: trace.WakeIRQ, WakeIRQ: 11})
				t0 += 1_000_000
			}
			note := c.Note(prof)
			switch {
			case tc.want == "" && note != "":
				t.Errorf("note %q, want none", note)
			case tc.want != "" && !strings.Contains(note, tc.want):
				t.Errorf("note %q, want it to say %q", note, tc.want)
			case tc.want != "" && !strings.Contains(note, "--profile measured"):
				t.Errorf("note %q does not name the profile that replays on the measured figures", note)
			}
			// Replayed on another machine's table: the recorded periods
			// keep the cost, which that machine need not pay.
			other := c.NoteOtherTable(prof, "spr")
			switch {
			case tc.want == "" && other != "":
				t.Errorf("note on spr %q, want none", other)
			case tc.want != "" && (!strings.Contains(other, tc.want) || !strings.Contains(other, "the figures on spr carry a wake-up cost")):
				t.Errorf("note on spr %q, want it to say %q and what it means for spr", other, tc.want)
			}
		})
	}
}

// The check counts the wake-ups stats counts: on the bundled trace its
// medians are stats' wake_latency_ns p50s, state by state.
func TestExitLatencyCheckAgreesWithStats(t *testing.T) {
	r, err := trace.Open("../../testdata/demo.trace")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	c := NewExitLatencyCheck(r.Meta, r.End)
	if err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error { c.Add(p); return nil }}); err != nil {
		t.Fatal(err)
	}
	got, want := c.P50(), s.WakeLatencyP50()
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Errorf("medians %v, stats' %v", got, want)
	}
}

func TestDeepStatesNote(t *testing.T) {
	hsw, err := model.Builtin("hsw", 250)
	if err != nil {
		t.Fatal(err)
	}
	icx, err := model.Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	res := func(pol string, share map[string]float64) model.Result {
		return model.Result{Policy: pol, StateShare: share}
	}
	for _, tc := range []struct {
		name    string
		prof    *model.Profile
		results []model.Result
		want    string // a prefix; "" for no note
	}{
		{"deep time in two policies", hsw, []model.Result{res("menu", map[string]float64{"C9": 0.2, "C10": 0.6, "C1E": 0.2}), res("teo", map[string]float64{"C10": 0.3, "C6": 0.7}),
			res("menu+disable=C7s,C8,C9,C10", map[string]float64{"C6": 1})},
			"menu spent 80 %, teo 30 % of the idle time in C9 or C10, states whose exit latency (up to 2600 µs)"},
		{"only a later policy", hsw, []model.Result{res("menu", map[string]float64{"C6": 1}), res("ladder", map[string]float64{"C10": 0.5, "C6": 0.5})},
			"ladder spent 50 % of the idle time in C9 or C10"},
		{"under the share", hsw, []model.Result{res("menu", map[string]float64{"C10": 0.04, "C6": 0.96})}, ""},
		{"no state that slow", icx, []model.Result{res("menu", map[string]float64{"C6": 1})}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DeepStatesNote(tc.prof, tc.results)
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("note %q, want it to begin %q", got, tc.want)
			}
		})
	}
}

// TestCountedTimeNote: whatif says which policies' shares divide a time
// more than 10 % from the recorded time their stays cover, and by how much.
func TestCountedTimeNote(t *testing.T) {
	for _, tc := range []struct {
		name    string
		results []model.Result
		want    string // "" : no note
	}{
		{"all close", []model.Result{{Policy: "menu", StateTimeNs: 105, RecordedTimeNs: 100}, {Policy: "teo", StateTimeNs: 92, RecordedTimeNs: 100}}, ""},
		{"deeper", []model.Result{{Policy: "menu", StateTimeNs: 486, RecordedTimeNs: 100}, {Policy: "teo", StateTimeNs: 100, RecordedTimeNs: 100}}, "(menu 4.86×)"},
		{"both ways", []model.Result{{Policy: "ladder", StateTimeNs: 207, RecordedTimeNs: 100}, {Policy: "haltpoll", StateTimeNs: 30, RecordedTimeNs: 100}}, "(ladder 2.07×, haltpoll 0.30×)"},
		{"nothing recorded", []model.Result{{Policy: "menu", StateTimeNs: 5}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CountedTimeNote(tc.results)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("note %q, want one with %q", got, tc.want)
			}
		})
	}
}
