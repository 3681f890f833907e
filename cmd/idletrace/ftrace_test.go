package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestExportFtrace: --format ftrace writes to -o FILE, into -o DIR as
// TRACE-NAME.txt, or to stdout, with a one-line summary; refuses an
// existing file without --force and --table; leaves no partial file.
func TestExportFtrace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.txt")
	r := runBin(t, "export", bundledTrace, "--format", "ftrace", "-o", file)
	want := "idletrace export: 78448 idle periods and 58723 IO requests as 352790 ftrace events to " + file + "\n"
	if r.code != 0 || r.stderr != want || r.stdout != "" {
		t.Fatalf("exit %d, stderr %q, stdout %.80q; want exit 0 and stderr %q", r.code, r.stderr, r.stdout, want)
	}
	text, _ := os.ReadFile(file)
	if !bytes.HasPrefix(text, []byte("idlestat version = 0.8\ncpus=2\n# tracer: nop\n")) {
		t.Errorf("%s begins %.80q", file, text)
	}
	if r := runBin(t, "export", bundledTrace, "--format", "ftrace", "-o", file); r.code != 2 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("again without --force: exit %d, %q", r.code, r.stderr)
	}
	if r := runBin(t, "export", bundledTrace, "--format", "ftrace", "-o", file, "--force", "-q", "--cpus", "1", "--from", "1s"); r.code != 0 || r.stderr != "" {
		t.Errorf("--force -q: exit %d, %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(file); bytes.Equal(text, after) || bytes.Contains(after, []byte("cpu_id=0\n")) {
		t.Errorf("--force --cpus 1 --from 1s: %s holds CPU 0's periods or is unchanged", file)
	}
	if r := runBin(t, "export", bundledTrace, "--format", "ftrace", "-o", dir, "-q"); r.code != 0 {
		t.Errorf("-o DIR: exit %d, %q", r.code, r.stderr)
	} else if named, _ := os.ReadFile(filepath.Join(dir, "demo.txt")); !bytes.Equal(named, text) {
		t.Errorf("-o DIR: %s/demo.txt is not the export", dir)
	}
	newDir := filepath.Join(dir, "new") + string(filepath.Separator) // made, as the tables' -o DIR is
	if r := runBin(t, "export", bundledTrace, "--format", "ftrace", "-o", newDir, "-q"); r.code != 0 {
		t.Errorf("-o NEWDIR/: exit %d, %q", r.code, r.stderr)
	} else if named, _ := os.ReadFile(filepath.Join(newDir, "demo.txt")); !bytes.Equal(named, text) {
		t.Errorf("-o NEWDIR/: %sdemo.txt is not the export", newDir)
	}
	typo := filepath.Join(dir, "nosuchdir", "t.txt") // a mistyped -o FILE makes no directory
	if r := runBin(t, "export", bundledTrace, "--format", "ftrace", "-o", typo); r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("-o MISSING/FILE: exit %d, %q", r.code, r.stderr)
	} else if _, err := os.Stat(filepath.Dir(typo)); err == nil {
		t.Errorf("-o MISSING/FILE made %s", filepath.Dir(typo))
	}
	r = runBin(t, "export", bundledTrace, "--format", "ftrace", "--stats-window", "-q")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "# entries-in-buffer/entries-written: 352712/352712   #P:2\n") {
		t.Errorf("to stdout with --stats-window: exit %d, stderr %q, stdout %.600q", r.code, r.stderr, r.stdout)
	}
	if r := runBin(t, "export", bundledTrace, "--format", "ftrace", "--table", "idle_periods"); r.code != 2 || !strings.Contains(r.stderr, "--table") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("--table: exit %d, %q", r.code, r.stderr)
	}
	cut := writeFile(t, "cut.trace", []byte("IDLETRC\x00garbage"))
	gone := filepath.Join(dir, "cut.txt")
	if r := runBin(t, "export", cut, "--format", "ftrace", "-o", gone); r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a broken trace: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(gone); err == nil {
		t.Errorf("a failed export left %s", gone)
	}
}

// idlestatState is one row of idlestat's C-state table for a CPU.
type idlestatState struct {
	name  string
	hits  uint64
	usSum float64 // total (us)
}

// runIdlestat runs Debian's idlestat 0.8 in --import mode on an ftrace
// export and returns its C-state table's CPU rows (its cluster and core
// rows, which combine CPUs, left out).
func runIdlestat(t *testing.T, bin, text string) map[int][]idlestatState {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.csv")
	cmd := exec.Command(bin, "--import", "-f", text, "-c", "-C", "-o", report)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("idlestat --import -f %s: %v: %s", text, err, stderr.String())
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idlestat: %s", strings.TrimSpace(stderr.String()))
	rd := csv.NewReader(bytes.NewReader(data))
	rd.FieldsPerRecord = -1
	recs, err := rd.ReadAll()
	if err != nil {
		t.Fatalf("idlestat's CSV: %v\n%s", err, data)
	}
	got := map[int][]idlestatState{}
	cpu := -1
	for _, rec := range recs {
		switch {
		case len(rec) == 3 && strings.HasPrefix(rec[2], "cpu"):
			if cpu, err = strconv.Atoi(rec[2][3:]); err != nil {
				t.Fatalf("idlestat's CSV: %q", rec)
			}
		case len(rec) == 1 || len(rec) == 2 && rec[0] == "": // a cluster, a core
			cpu = -1
		case len(rec) == 11 && rec[0] == "" && rec[3] != "C-state" && cpu >= 0:
			hits, err1 := strconv.ParseUint(rec[8], 10, 64)
			total, err2 := strconv.ParseFloat(rec[7], 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("idlestat's CSV: %q", rec)
			}
			got[cpu] = append(got[cpu], idlestatState{rec[3], hits, total})
		}
	}
	return got
}

// TestIdlestat: Debian's idlestat 0.8, a reader that shares nothing with
// idletrace, reads the ftrace export of the bundled trace in --import mode
// and finds, per CPU and state, stats' usage and residency within 0.5 %
// (issue 13 item 1). It fails, never skips, without idlestat (make
// deps-test and .ci/run install it).
//
// The comparison applies stats' rule on both sides: stats counts the idle
// periods whose exit falls in their CPU's window between the start and
// end snapshots, idlestat every period in its file, so the export is
// made with --stats-window. Two more of idlestat's rules differ from
// stats' but change nothing on this trace (either would show as a
// difference): it drops a period of zero length (the timestamps keep
// nanoseconds, and no period of the trace is that short), and a state's
// residency is the traced time, exit minus entry, where stats' time_ns is
// the cpuidle core's own measure when the trace has it (the bundled trace,
// recorded without a cpuidle driver, has not). idlestat's loader drops the state names it reads from the
// header (tracefile_idlestat.c assigns '\0' to the name where it means to
// test it), so its rows are matched to stats' states in state order.
func TestIdlestat(t *testing.T) {
	bin, err := exec.LookPath("idlestat")
	if err != nil {
		// Not a kernel feature: nothing excuses it.
		t.Fatalf("idlestat is not installed (apt-get install idlestat; make deps-test and .ci/run install it): %v", err)
	}
	text := filepath.Join(t.TempDir(), "demo.txt")
	if r := runBin(t, "export", bundledTrace, "--format", "ftrace", "--stats-window", "-o", text); r.code != 0 {
		t.Fatalf("export: exit %d, %s", r.code, r.stderr)
	}
	got := runIdlestat(t, bin, text)

	r := runBin(t, "stats", bundledTrace, "--format", "json")
	if r.code != 0 {
		t.Fatalf("stats: %s", r.stderr)
	}
	var s struct {
		CPUs []struct {
			CPU    int `json:"cpu"`
			States []struct {
				Name   string `json:"name"`
				Usage  uint64 `json:"usage"`
				TimeNs uint64 `json:"time_ns"`
			} `json:"states"`
		} `json:"cpus"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	worst, compared := 0.0, 0
	rel := func(a, b float64) float64 {
		if b == 0 {
			return math.Abs(a)
		}
		return math.Abs(a-b) / b
	}
	for _, c := range s.CPUs {
		var used []int // stats' states with periods, in index order: idlestat lists those
		for i, st := range c.States {
			if st.Usage > 0 {
				used = append(used, i)
			}
		}
		rows := got[c.CPU]
		if len(rows) != len(used) {
			t.Errorf("cpu %d: idlestat has %d states with periods, stats %d (%+v)", c.CPU, len(rows), len(used), rows)
			continue
		}
		for k, i := range used {
			st, row := c.States[i], rows[k]
			if row.name != "" && row.name != st.Name {
				t.Errorf("cpu %d: idlestat's state %d is %q, stats' %q", c.CPU, k, row.name, st.Name)
			}
			du, dt := rel(float64(row.hits), float64(st.Usage)), rel(row.usSum*1000, float64(st.TimeNs))
			worst = max(worst, du, dt)
			compared++
			t.Logf("cpu %d %s: usage idletrace %d, idlestat %d (%.2g %%); residency idletrace %d ns, idlestat %.6f µs (%.2g %%)",
				c.CPU, st.Name, st.Usage, row.hits, 100*du, st.TimeNs, row.usSum, 100*dt)
			if du > 0.005 || dt > 0.005 {
				t.Errorf("cpu %d %s: idlestat's usage %d and residency %.3f µs against stats' %d and %d ns: more than 0.5 %% apart",
					c.CPU, st.Name, row.hits, row.usSum, st.Usage, st.TimeNs)
			}
		}
	}
	var statsCPUs []int
	for _, c := range s.CPUs {
		statsCPUs = append(statsCPUs, c.CPU)
	}
	for cpu, rows := range got {
		if !slices.Contains(statsCPUs, cpu) {
			t.Errorf("idlestat reports cpu %d (%+v), which stats does not", cpu, rows)
		}
	}
	if compared == 0 {
		t.Fatal("nothing compared")
	}
	t.Logf("%d CPU states compared: worst relative difference %.2g %%", compared, 100*worst)
}

// TestIdlestatWideHeader: on a trace as wide as a server's (64 CPUs, ten
// states a CPU, the PM QoS events and a resume latency per CPU), the
// export's header comment lines stay short enough for idlestat, which
// crashed on a line of 255 characters; idlestat reads every period, and
// an import of the export gets every CPU's whole state table and starting
// limits back from lines that go on over several.
func TestIdlestatWideHeader(t *testing.T) {
	bin, err := exec.LookPath("idlestat")
	if err != nil {
		t.Fatalf("idlestat is not installed (apt-get install idlestat; make deps-test and .ci/run install it): %v", err)
	}
	const ncpus, perCPU = 64, 5
	var table []trace.StateInfo
	for i, name := range []string{"POLL", "C1", "C1E", "C3_ACPI_SERVER", "C6_ACPI_SERVER", "C6S", "C7S", "C8", "C9", "C10"} {
		si := trace.StateInfo{Index: i, Name: name, ExitLatencyNs: uint64(i) * 123_456, TargetResidencyNs: uint64(i) * 987_654, Disabled: i%3 == 2}
		si.Polling = i == 0
		table = append(table, si)
	}
	meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, CPUIdleDriver: "intel_idle", CPUIdleGovernor: "menu", NumCPUs: ncpus}
	meta.Inputs.WakeCauses, meta.Inputs.PMQoSTrace = true, true
	meta.PMQoS.CPUDMALatencyUs = trace.PMQoSNoGlobalLimitUs
	for c := range ncpus {
		meta.RecordedCPUs = append(meta.RecordedCPUs, c)
		meta.States = append(meta.States, trace.CPUStates{CPU: c, States: table})
		meta.PMQoS.ResumeLatencyUs = append(meta.PMQoS.ResumeLatencyUs, int64(1_000_000+c))
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "wide.trace")
	tracetest.WriteFile(t, path, meta, tracetest.Periods(ncpus*perCPU, ncpus, 4, 1e6, 300e3), nil)

	text := filepath.Join(dir, "wide.txt")
	if r := runBin(t, "export", path, "--format", "ftrace", "-o", text); r.code != 0 {
		t.Fatalf("export: exit %d, %s", r.code, r.stderr)
	}
	data, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	longest, comments := 0, 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "# idletrace") {
			comments++
			longest = max(longest, len(line))
		}
	}
	if longest >= 250 || comments <= 2*ncpus {
		t.Errorf("%d idletrace comment lines, the longest %d characters: want several a CPU, each under 250", comments, longest)
	}
	got := runIdlestat(t, bin, text)
	for c := range ncpus {
		if rows := got[c]; len(rows) != 1 || rows[0].hits != perCPU {
			t.Errorf("idlestat, cpu %d: %+v, want %d periods in one state", c, rows, perCPU)
		}
	}

	imported := filepath.Join(dir, "wide-imported.trace")
	if r := runBin(t, "import", text, "-o", imported); r.code != 0 {
		t.Fatalf("import: exit %d, %s", r.code, r.stderr)
	}
	r, err := trace.Open(imported)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Meta.States) != ncpus {
		t.Fatalf("the import has %d CPUs' state tables, want %d", len(r.Meta.States), ncpus)
	}
	for _, cs := range r.Meta.States {
		if !slices.Equal(cs.States, table) {
			t.Errorf("cpu %d's states imported as %+v\nwant %+v", cs.CPU, cs.States, table)
			break
		}
	}
	if r.Meta.PMQoS.CPUDMALatencyUs != trace.PMQoSNoGlobalLimitUs || !slices.Equal(r.Meta.PMQoS.ResumeLatencyUs, meta.PMQoS.ResumeLatencyUs) {
		t.Errorf("starting limits imported as %d and %v, want %d and %v", r.Meta.PMQoS.CPUDMALatencyUs, r.Meta.PMQoS.ResumeLatencyUs,
			meta.PMQoS.CPUDMALatencyUs, meta.PMQoS.ResumeLatencyUs)
	}
	if !r.Meta.Inputs.PMQoSTrace {
		t.Error("the import lost the PM QoS events the export's header lists")
	}
}

// TestWhatifStatesBeyondProfile: periods in a state the profile lacks
// are said, with what the recorded policy does with them.
func TestWhatifStatesBeyondProfile(t *testing.T) {
	meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 2, RecordedCPUs: []int{0, 1}, CPUIdleDriver: "none", CPUIdleGovernor: "menu"}
	periods := tracetest.Periods(40, 2, 1, 1e6, 3e5)
	for i := range periods[:10] {
		periods[i].State = 3 // beyond POLL and HLT
	}
	path := filepath.Join(t.TempDir(), "beyond.trace")
	tracetest.WriteFile(t, path, meta, periods, nil)
	r := runBin(t, "whatif", path)
	if r.code != 0 || !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "10 of the idle periods were in a state beyond the profile's 2") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", r.code, r.stderr, r.stdout)
	}
}

// TestFtraceRoundTripRecording: an ftrace export limited to one CPU
// imports back as a recording of that CPU, with the kernel release, HZ and
// host of the original (a new user's --cpus 1 export came back as two
// CPUs, CPU 0 "0 % idle", with kernel and HZ unknown).
func TestFtraceRoundTripRecording(t *testing.T) {
	dir := t.TempDir()
	text, imported := filepath.Join(dir, "t.txt"), filepath.Join(dir, "t.trace")
	if r := runBin(t, "export", bundledTrace, "--format", "ftrace", "--cpus", "1", "-q", "-o", text); r.code != 0 {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	if r := runBin(t, "import", text, "-q", "-o", imported); r.code != 0 {
		t.Fatalf("import: exit %d: %s", r.code, r.stderr)
	}
	type meta struct {
		KernelRelease string `json:"kernel_release"`
		HZ            int    `json:"hz"`
		Hostname      string `json:"hostname"`
		RecordedCPUs  []int  `json:"recorded_cpus"`
	}
	var orig, back struct {
		Metadata meta `json:"metadata"`
	}
	for _, c := range []struct {
		path string
		v    any
	}{{bundledTrace, &orig}, {imported, &back}} {
		r := runBin(t, "info", c.path, "--format", "json")
		if err := json.Unmarshal([]byte(r.stdout), c.v); err != nil {
			t.Fatalf("info %s: %v", c.path, err)
		}
	}
	o, b := orig.Metadata, back.Metadata
	if b.KernelRelease != o.KernelRelease || b.HZ != o.HZ || b.Hostname != o.Hostname || o.KernelRelease == "" {
		t.Errorf("imported kernel %q, HZ %d, host %q; recorded %q, %d, %q", b.KernelRelease, b.HZ, b.Hostname, o.KernelRelease, o.HZ, o.Hostname)
	}
	if !slices.Equal(b.RecordedCPUs, []int{1}) {
		t.Errorf("imported recorded CPUs %v, want [1], the CPU the export listed", b.RecordedCPUs)
	}
}
