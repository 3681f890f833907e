package analysis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestCountTickRefusals writes periods with each TickStoppable value
// through the trace file and counts them back per CPU; unknown ones are
// not counted at all.
func TestCountTickRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.trace")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewWriter(f, driverMeta())
	if err != nil {
		t.Fatal(err)
	}
	stoppable := []trace.Tristate{trace.Yes, trace.No, trace.No, trace.Unknown}
	for i := range 400 {
		p := period(uint32(i%2), 1, uint64(2_000_000+i*50_000), 10_000)
		p.TickStoppable = stoppable[(i/2)%4]
		if i%2 == 1 {
			p.TickStoppable = trace.Yes // CPU 1: always stoppable
		}
		if err := w.AddIdle(&p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(&trace.End{StopReason: "duration"}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := CountTickRefusals(r)
	if err != nil {
		t.Fatal(err)
	}
	want := TickRefusals{0: {Known: 150, Refused: 100}, 1: {Known: 200, Refused: 0}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestTickRefusalNote(t *testing.T) {
	share := func(refused, known uint64) TickRefusal { return TickRefusal{Known: known, Refused: refused} }
	for _, tc := range []struct {
		name          string
		before, after TickRefusals
		want          []string // in the note; none: no note
	}{
		{"unchanged", TickRefusals{0: share(970, 1000), 1: share(50, 1000)}, TickRefusals{0: share(960, 1000), 1: share(60, 1000)}, nil},
		// The lab's ladder → menu pair that failed: which CPU kept its
		// tick swapped between the recordings.
		{"swapped", TickRefusals{0: share(970, 1000), 1: share(50, 1000)}, TickRefusals{0: share(40, 1000), 1: share(980, 1000)},
			[]string{"CPU 0's 97 % before, 4 % after", "CPU 1's 5 % before, 98 % after", "b.trace, a.trace"}},
		{"moved by just under 20 points", TickRefusals{0: share(100, 1000)}, TickRefusals{0: share(299, 1000)}, nil},
		{"moved by 20 points", TickRefusals{0: share(100, 1000)}, TickRefusals{0: share(300, 1000)}, []string{"CPU 0's 10 % before, 30 % after"}},
		{"too few periods to tell", TickRefusals{0: share(0, 99)}, TickRefusals{0: share(99, 99)}, nil},
		{"a CPU only in one recording", TickRefusals{0: share(0, 500)}, TickRefusals{1: share(500, 500)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			note := TickRefusalNote(tc.before, tc.after, "b.trace", "a.trace")
			if len(tc.want) == 0 {
				if note != "" {
					t.Errorf("note %q, want none", note)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(note, w) {
					t.Errorf("note %q lacks %q", note, w)
				}
			}
		})
	}
}

// TestCombineRunsKeepsWorkloadNotes: an experiment's report is its first
// pair's, but a later pair whose recordings moved says so too.
func TestCombineRunsKeepsWorkloadNotes(t *testing.T) {
	moved3 := WorkloadMovedNote + " (before-3.trace, after-3.trace), …"
	first := &ComparisonReport{Policy: "menu", Notes: []string{"knobs as recorded: …"}}
	third := &ComparisonReport{Policy: "menu", Notes: []string{"knobs", moved3}}
	rep := CombineRuns([]*ComparisonReport{first, {Policy: "menu"}, third})
	if got := strings.Join(rep.Notes, "|"); got != "knobs as recorded: …|"+moved3 {
		t.Errorf("notes %q", got)
	}
	if len(first.Notes) != 1 {
		t.Errorf("the first pair's own notes were changed: %q", first.Notes)
	}
}
