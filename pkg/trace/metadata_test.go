package trace

import (
	"bytes"
	"slices"
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
		recorded, cameOnline []int
		cpu                  int
		want                 bool
	}{
		{nil, nil, 5, true}, // no --cpus: every CPU
		{[]int{0, 2}, nil, 2, true},
		{[]int{0, 2}, nil, 1, false},
		{[]int{0, 2}, []int{1}, 1, true}, // came online during the recording
	} {
		m := &Metadata{RecordedCPUs: tc.recorded, CameOnline: tc.cameOnline}
		if got := m.RecordsCPU(tc.cpu); got != tc.want {
			t.Errorf("RecordedCPUs %v, CameOnline %v: RecordsCPU(%d) = %v, want %v", tc.recorded, tc.cameOnline, tc.cpu, got, tc.want)
		}
		if got := m.RecordedCPUSet().Has(uint32(tc.cpu)); got != tc.want {
			t.Errorf("RecordedCPUs %v, CameOnline %v: RecordedCPUSet().Has(%d) = %v, want %v", tc.recorded, tc.cameOnline, tc.cpu, got, tc.want)
		}
	}
}

// A CPU the end record says came online during the recording is a
// recorded one to every reader of the metadata, with the table read at the
// end; the start's list and tables stay as written.
func TestCameOnline(t *testing.T) {
	table := func(name string) []StateInfo {
		return []StateInfo{{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: name, ExitLatencyNs: 2000, TargetResidencyNs: 4000}}
	}
	var buf bytes.Buffer
	meta := testMeta()
	meta.RecordedCPUs = []int{0, 2}
	w, err := NewWriter(&buf, meta)
	must(t, err)
	for _, p := range []IdlePeriod{{CPU: 0, State: 1, EntryNs: 10, ExitNs: 20}, {CPU: 1, State: 1, EntryNs: 30, ExitNs: 40}} {
		must(t, w.AddIdle(&p))
	}
	must(t, w.Close(&End{StopReason: "duration", CameOnline: []CPUStates{
		{CPU: 1, States: table("C1")},
		{CPU: 3},                         // no cpuidle driver: no table
		{CPU: 0, States: table("start")}, // recorded from the start: not taken
	}}))
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	must(t, err)
	m := r.Meta
	if !slices.Equal(m.CameOnline, []int{1, 3}) || !slices.Equal(m.RecordedCPUs, []int{0, 2}) || !slices.Equal(m.RecordedCPUList(), []int{0, 1, 2, 3}) {
		t.Errorf("CameOnline %v, RecordedCPUs %v, RecordedCPUList %v: want [1 3], [0 2], [0 1 2 3]", m.CameOnline, m.RecordedCPUs, m.RecordedCPUList())
	}
	var cpus []int
	for _, cs := range m.States {
		cpus = append(cpus, cs.CPU)
		if cs.CPU == 1 && cs.States[1].Name != "C1" || cs.CPU == 0 && cs.States[1].Name != "haltpoll idle" {
			t.Errorf("CPU %d's table %+v", cs.CPU, cs.States)
		}
	}
	if !slices.Equal(cpus, []int{0, 1}) {
		t.Errorf("tables of CPUs %v, want [0 1]", cpus)
	}
	// Taken twice (a trace written again from this metadata and end): the same.
	m.AddCameOnline(r.End.CameOnline)
	if !slices.Equal(m.CameOnline, []int{1, 3}) || len(m.States) != 2 {
		t.Errorf("taken twice: CameOnline %v, %d tables", m.CameOnline, len(m.States))
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
