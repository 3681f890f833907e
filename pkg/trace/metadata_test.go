package trace

import (
	"strings"
	"testing"
)

// A state's name survives the export's states line whatever it holds;
// a name an older export or idlestat wrote is read as it is.
func TestExportStateName(t *testing.T) {
	for _, tc := range []struct{ name, field string }{
		{"C1E", "C1E"},
		{"haltpoll idle", "haltpoll%20idle"},
		{"a:b%c\td", "a%3Ab%25c%09d"},
		{"", ""},
		{"C1\u00a0deep", "C1%C2%A0deep"}, // a Unicode blank, which strings.Fields splits at
	} {
		field := ExportStateName(tc.name)
		if field != tc.field || len(strings.Fields(field)) > 1 || strings.Contains(field, ":") {
			t.Errorf("ExportStateName(%q) = %q, want %q", tc.name, field, tc.field)
		}
		if back := ParseExportStateName(field); back != tc.name {
			t.Errorf("ParseExportStateName(%q) = %q, want %q", field, back, tc.name)
		}
	}
	for _, old := range []string{"haltpoll_idle", "100%", "x%zz"} {
		if got := ParseExportStateName(old); got != old {
			t.Errorf("ParseExportStateName(%q) = %q, want it as it is", old, got)
		}
	}
}

func TestHaltPollLine(t *testing.T) {
	h := &HaltPollParams{GuestHaltPollNs: 0, Grow: 2, Shrink: 2, GrowStart: 50000, AllowShrink: true}
	line := FormatHaltPoll(h)
	if line != "guest_halt_poll_ns=0 grow=2 shrink=2 grow_start=50000 allow_shrink=true" {
		t.Errorf("FormatHaltPoll = %q", line)
	}
	got, err := ParseHaltPoll(line)
	if err != nil || *got != *h {
		t.Errorf("ParseHaltPoll(%q) = %+v, %v; want %+v", line, got, err, h)
	}
	for _, bad := range []string{
		"",
		"guest_halt_poll_ns=0 grow=2 shrink=2 grow_start=50000",                     // a field missing
		"guest_halt_poll_ns=-1 grow=2 shrink=2 grow_start=50000 allow_shrink=true",  // not unsigned
		"guest_halt_poll_ns=1 grow=2 shrink=2 grow_start=50000 allow_shrink=maybe",  // not a bool
		"guest_halt_poll_ns=1 grow=2 shrink=2 grow_start=50000 allow_shrink=1 x=1",  // unknown
		"guest_halt_poll_ns=4294967296 grow=2 shrink=2 grow_start=1 allow_shrink=1", // beyond unsigned int
		"grow=1 grow=2 shrink=2 grow_start=1 allow_shrink=1",                        // a repeat hiding a missing field
	} {
		if h, err := ParseHaltPoll(bad); err == nil {
			t.Errorf("ParseHaltPoll(%q) = %+v, want an error", bad, h)
		}
	}
}

func TestRecordsCPU(t *testing.T) {
	for _, tc := range []struct {
		recorded []int
		cpu      int
		want     bool
	}{
		{nil, 5, true}, // no --cpus: every CPU
		{[]int{0, 2}, 2, true},
		{[]int{0, 2}, 1, false},
	} {
		m := &Metadata{RecordedCPUs: tc.recorded}
		if got := m.RecordsCPU(tc.cpu); got != tc.want {
			t.Errorf("RecordedCPUs %v: RecordsCPU(%d) = %v, want %v", tc.recorded, tc.cpu, got, tc.want)
		}
	}
}

// The kernel's completions between two snapshots: exact where both reads
// held still, else the range their moves leave; never below zero.
func TestBlockCompletedIn(t *testing.T) {
	at := func(completed, unsettled uint64) BlockCounter {
		return BlockCounter{Name: "vda", Stat: []uint64{completed}, Unsettled: unsettled}
	}
	for _, tc := range []struct {
		name       string
		start, end BlockCounter
		lo, hi     uint64
	}{
		{"both held still", at(1000, 0), at(1100, 0), 100, 100},
		// The start's count at its instant is 970 to 1000: up to 30 more in the window.
		{"start moved", at(1000, 30), at(1100, 0), 100, 130},
		// The end's count at its instant is 1080 to 1100: up to 20 fewer.
		{"end moved", at(1000, 0), at(1100, 20), 80, 100},
		{"both moved", at(1000, 30), at(1100, 20), 80, 130},
		{"moves larger than the counts", at(5, 30), at(10, 20), 0, 10},
		{"a counter that went back", at(1000, 0), at(900, 0), 0, 0},
	} {
		if lo, hi := BlockCompletedIn(tc.start, tc.end); lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: [%d, %d], want [%d, %d]", tc.name, lo, hi, tc.lo, tc.hi)
		}
	}
}
