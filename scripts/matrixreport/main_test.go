package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeMatchesMatrix: the README's requirements section is the one the
// last kernel matrix (testdata/kernel-matrix.json) gives.
func TestReadmeMatchesMatrix(t *testing.T) {
	b, err := os.ReadFile("../../testdata/kernel-matrix.json")
	if err != nil {
		t.Fatal(err)
	}
	var m Matrix
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Section(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if want := ReadmeSection(m); got != want {
		t.Errorf("README.md's requirements section differs from what testdata/kernel-matrix.json gives; run make test-kernels (as root) or regenerate it.\nwant:\n%s", want)
	}
	for _, r := range m.Rows {
		if len(r.Probes) == 0 || r.Probes["power:cpu_idle"] == "" {
			t.Errorf("%s: the committed matrix has no probe methods", r.Target)
		}
	}
}

func TestReadRow(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("matrix.txt", strings.Join([]string{
		"target=vm", "kernel=6.1.0-57-cloud-amd64", "cpuidle_driver=acpi_idle", "cpuidle_governor=menu",
		"cpuidle_states=POLL,C1", "btf=yes", "referee_rc=1", "record_rc=0", "stats_rc=0",
		"classic_rc=0", "nobtf_rc=1", "nobtf_lines=1", "nobtf_file=none", "kbtf_rc=0", "steps=done",
		"machine=QEMU TCG, 2 CPUs", "total_s=42"}, "\n"))
	write("referee.log", `=== RUN   TestKernelReferee
=== RUN   TestKernelReferee/cpuidle-counters
    referee_test.go:281: cpu0 state0 residency: traced 2 ns, kernel 1 ns
=== RUN   TestKernelReferee/block-stat
    referee_test.go:323: nvme0n1: traced 5 completed requests
--- FAIL: TestKernelReferee (8.00s)
    --- FAIL: TestKernelReferee/cpuidle-counters (0.00s)
    --- PASS: TestKernelReferee/block-stat (0.00s)
FAIL
`)
	write("record-info.json", `{"metadata": {"probes": {"power:cpu_idle": "tp_btf", "ipi:ipi_send_cpu": "missing: the kernel has no such tracepoint"},
		"inputs": {"wake_causes": true, "haltpoll_trace": false}, "hz": 250, "nohz": "idle"}, "end": {"idle_periods": 10, "block_ios": 3}}`)
	write("classic-info.json", `{"metadata": {"probes": {"power:cpu_idle": "tracepoint"}}}`)
	write("stats.json", `{"duration_ns": 3000000000}`)
	write("nobtf.err", "idletrace record: the kernel has no BTF (it needs CONFIG_DEBUG_INFO_BTF=y); pass --kernel-btf FILE\n")

	r := readRow("6.1", dir)
	if v := upstreamVersion(Row{Package: "linux-image-6.1.0-57-cloud-amd64-unsigned_6.1.192-3_amd64", Kernel: "6.1.0-57-cloud-amd64"}); v != "6.1.192" {
		t.Errorf("version %s", v)
	}
	if r.Pass || r.Checks["referee"] == "pass" {
		t.Errorf("a failed referee passes: %+v", r.Checks)
	}
	for _, c := range []string{"record", "stats", "classic", "no-btf"} {
		if r.Checks[c] != "pass" {
			t.Errorf("%s: %s", c, r.Checks[c])
		}
	}
	if r.Machine != "QEMU TCG, 2 CPUs" || r.HZ != "250" || r.Seconds != 42 {
		t.Errorf("row: %+v", r)
	}
	if got := attach(r); got != "tp_btf 1/2, missing ipi:ipi_send_cpu" {
		t.Errorf("attach: %s", got)
	}
	if got := refereeCell(r); got != "fail / pass / - / -" {
		t.Errorf("referee cell: %s", got)
	}
	if len(r.RefereeNotes) != 1 || !strings.Contains(r.RefereeNotes[0], "residency") {
		t.Errorf("notes: %q", r.RefereeNotes)
	}
	if got := missingInputs(r); got != "haltpoll poll-window changes" {
		t.Errorf("missing inputs: %s", got)
	}

	cur := r
	cur.Probes = map[string]string{"power:cpu_idle": "tracepoint", "ipi:ipi_send_cpu": "missing: the kernel has no such tracepoint"}
	if d := CompareRows([]Row{r}, []Row{cur}); len(d) != 1 || !strings.Contains(d[0], "probes") {
		t.Errorf("compare: %q", d)
	}
	cur = r
	cur.Kernel, cur.Seconds = "6.1.0-58-cloud-amd64", 50
	if d := CompareRows([]Row{r}, []Row{cur}); len(d) != 0 {
		t.Errorf("a new point release or timing counts as a difference: %q", d)
	}

	readme := "# x\n\n## Requirements\n\n" + sectionBegin + "\nold\n" + sectionEnd + "\n\n## Layout\n"
	out, err := ReplaceSection(readme, ReadmeSection(Matrix{Date: "2026-01-01", Rows: []Row{r}}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "tested: 6.1.0)") || !strings.HasSuffix(out, sectionEnd+"\n\n## Layout\n") || strings.Contains(out, "old") {
		t.Errorf("README:\n%s", out)
	}
}

func TestReadRowUnfinished(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "matrix.txt"), []byte("kernel=6.12\nqemu_rc=124\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := readRow("6.12", dir)
	if r.Pass || !strings.Contains(r.Checks["referee"], "timed out") {
		t.Errorf("%+v", r.Checks)
	}
	if r := readRow("6.1", filepath.Join(dir, "absent")); r.Pass {
		t.Error("a missing result passes")
	}
}

// TestCompareRowsMachine: the host row may come from another machine of the
// kind (another build, the haltpoll driver, checks that then run instead of
// skipping); a failure, a probe or an input still counts, and a Debian
// kernel's driver does.
func TestCompareRowsMachine(t *testing.T) {
	base := func(target string) Row {
		return Row{
			Target: target, Kernel: "6.18.44-fc-v657", Machine: "this machine (no VM)", BTF: true, HZ: "250",
			Driver: "none", Governor: "menu", States: "none", Seconds: 14, Pass: true,
			Checks:  map[string]string{"referee": "pass", "record": "pass", "stats": "pass", "classic": "pass", "no-btf": "pass"},
			Referee: map[string]string{"TestKernelReferee": "PASS", "TestKernelReferee/cpuidle-counters": "SKIP", "TestGovernorFidelity": "SKIP"},
			Probes:  map[string]string{"power:cpu_idle": "tp_btf"},
			Inputs:  map[string]bool{"wake_causes": true},
			Config:  map[string]string{"CONFIG_DEBUG_INFO_BTF": "y", "CONFIG_BPF_EVENTS": "y", "CONFIG_CPU_IDLE": "y", "CONFIG_FPROBE": "n"},
		}
	}
	other := base("host")
	other.Kernel, other.Seconds = "6.18.44-fc-v1045", 27
	other.Driver, other.Governor, other.States = "haltpoll", "haltpoll", "POLL,haltpoll idle"
	other.Referee = map[string]string{"TestKernelReferee": "PASS", "TestKernelReferee/cpuidle-counters": "PASS",
		"TestGovernorFidelity": "PASS", "TestGovernorFidelity/haltpoll": "PASS"}
	other.Config = map[string]string{"CONFIG_DEBUG_INFO_BTF": "y", "CONFIG_BPF_EVENTS": "y", "CONFIG_CPU_IDLE": "y", "CONFIG_FPROBE": "y"}
	if d := CompareRows([]Row{base("host")}, []Row{other}); len(d) != 0 {
		t.Errorf("another machine of the kind counts as a difference: %q", d)
	}
	failed := other
	failed.Referee = map[string]string{"TestKernelReferee": "FAIL", "TestKernelReferee/cpuidle-counters": "FAIL"}
	failed.Checks = map[string]string{"referee": "fail: go test exit status 1", "record": "pass", "stats": "pass", "classic": "pass", "no-btf": "pass"}
	failed.Pass = false
	if d := CompareRows([]Row{base("host")}, []Row{failed}); len(d) != 3 {
		t.Errorf("a failing host: %q", d)
	}
	noInput := other
	noInput.Inputs = map[string]bool{"wake_causes": false}
	noInput.Probes = map[string]string{"power:cpu_idle": "tracepoint"}
	if d := CompareRows([]Row{base("host")}, []Row{noInput}); len(d) != 2 {
		t.Errorf("a host without an input, a probe attached otherwise: %q", d)
	}
	vm := base("6.1")
	vm2 := vm
	vm2.Driver, vm2.States = "acpi_idle", "POLL,C1"
	vm2.Config = map[string]string{"CONFIG_DEBUG_INFO_BTF": "y", "CONFIG_BPF_EVENTS": "y", "CONFIG_CPU_IDLE": "y", "CONFIG_FPROBE": "y"}
	if d := CompareRows([]Row{vm}, []Row{vm2}); len(d) != 2 {
		t.Errorf("a Debian kernel's driver and options: %q", d)
	}
}

// TestCompareRowsNewTest: a referee test added since the matrix was committed
// counts only when it fails; one that no longer runs counts.
func TestCompareRowsNewTest(t *testing.T) {
	old := Row{Target: "6.1", Pass: true, Referee: map[string]string{"TestKernelReferee": "PASS", "TestGovernorFidelity/haltpoll": "SKIP"}}
	cur := old
	cur.Referee = map[string]string{"TestKernelReferee": "PASS", "TestGovernorFidelity/haltpoll": "SKIP", "TestGovernorFidelity/haltpoll-ns0": "SKIP"}
	if d := CompareRows([]Row{old}, []Row{cur}); len(d) != 0 {
		t.Errorf("a new skipped test: %q", d)
	}
	cur.Referee = map[string]string{"TestKernelReferee": "PASS", "TestGovernorFidelity/haltpoll": "SKIP", "TestGovernorFidelity/haltpoll-ns0": "FAIL"}
	if d := CompareRows([]Row{old}, []Row{cur}); len(d) != 1 || !strings.Contains(d[0], "failures") {
		t.Errorf("a new failing test: %q", d)
	}
	cur.Referee = map[string]string{"TestKernelReferee": "PASS"}
	if d := CompareRows([]Row{old}, []Row{cur}); len(d) != 1 {
		t.Errorf("a test that no longer runs: %q", d)
	}
}

// TestReadmeMatchesLabRows: the README's lab-rows section is the one the
// committed lab rows (testdata/lab-rows.json) give.
func TestReadmeMatchesLabRows(t *testing.T) {
	b, err := os.ReadFile("../../testdata/lab-rows.json")
	if err != nil {
		t.Fatal(err)
	}
	var l LabRows
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := LabReadmeSection(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if want := LabSection(l); got != want {
		t.Errorf("README.md's lab-rows section differs from what testdata/lab-rows.json gives; run matrixreport -lab-write.\nwant:\n%s", want)
	}
}

func labFixture() LabRows {
	return LabRows{
		Date: "2026-12-02", ProducedBy: "`make test-lab`",
		Fidelity: []LabRow{{
			Case: "6.12/icx/menu", Kernel: "6.12.117+deb12-cloud-amd64", Periods: 10586, Agreement: 0.99933,
			KernelAbove: 598, KernelBelow: 1676, ModelAbove: 578, ModelBelow: 1670,
			KernelShare: map[string]float64{"POLL": 0.03, "C1": 0.10, "C6": 0.87},
			ModelShare:  map[string]float64{"POLL": 0.031, "C1": 0.0984, "C6": 0.8706}, Pass: true,
		}},
		Cross: []CrossRow{{
			Case: "lab/icx", Replayed: "menu", OnTraceOf: "teo", Periods: 3600,
			Above: [2]float64{2.44, 1.71}, Below: [2]float64{10.81, 7.62}, Worst: 3.19, Pass: true,
		}},
	}
}

func TestLabTables(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*LabRows)
		lines []string // expected table rows
	}{
		{"pass", func(*LabRows) {}, []string{
			"| 6.12.117+deb12-cloud-amd64 | icx | menu | 10586 | 0.9993 | 578/1670 vs 598/1676 | 0.16 points (C1) | PASS |",
			"| lab/icx | menu | teo | 2.4 / 1.7 | 10.8 / 7.6 | 3.2 | PASS |",
		}},
		{"fail", func(l *LabRows) { l.Fidelity[0].Pass, l.Cross[0].Pass = false, false }, []string{
			"| 6.12.117+deb12-cloud-amd64 | icx | menu | 10586 | 0.9993 | 578/1670 vs 598/1676 | 0.16 points (C1) | FAIL |",
			"| lab/icx | menu | teo | 2.4 / 1.7 | 10.8 / 7.6 | 3.2 | FAIL |",
		}},
		// A what-if policy keeps its "+...=..." whole; a row without a
		// release or shares says so rather than printing nothing.
		{"what-if, no release, no shares", func(l *LabRows) {
			l.Fidelity[0].Case, l.Fidelity[0].Kernel = "lab/seed000/menu+poll=tick16", ""
			l.Fidelity[0].KernelShare, l.Fidelity[0].ModelShare = nil, nil
		}, []string{"| lab | seed000 | menu+poll=tick16 | 10586 | 0.9993 | 578/1670 vs 598/1676 | 0.00 points (?) | PASS |"}},
		// A state only the model used counts too.
		{"model-only state", func(l *LabRows) { l.Fidelity[0].ModelShare["C1E"] = 0.05 }, []string{
			"| 6.12.117+deb12-cloud-amd64 | icx | menu | 10586 | 0.9993 | 578/1670 vs 598/1676 | 5.00 points (C1E) | PASS |",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := labFixture()
			tc.edit(&l)
			got := LabTables(l)
			for _, want := range tc.lines {
				if !strings.Contains(got, want+"\n") {
					t.Errorf("no line %q in\n%s", want, got)
				}
			}
			sec := LabSection(l)
			if !strings.HasPrefix(sec, labBegin+"\n") || !strings.HasSuffix(sec, "\n"+labEnd) || !strings.Contains(sec, got) ||
				!strings.Contains(sec, "Produced by `make test-lab`, 2026-12-02") {
				t.Errorf("section:\n%s", sec)
			}
			if md := labMarkdown(l); !strings.Contains(md, got) || !strings.HasPrefix(md, "# Lab rows, 2026-12-02\n") {
				t.Errorf("markdown:\n%s", md)
			}
		})
	}
}

func TestReplaceLabSection(t *testing.T) {
	km := sectionBegin + "\nmatrix\n" + sectionEnd
	sec := LabSection(labFixture())
	for _, tc := range []struct {
		name, readme, want string
		err                bool
	}{
		{"replace", "# x\n\n" + km + "\n\n" + labBegin + "\nold\n" + labEnd + "\n\n## Layout\n",
			"# x\n\n" + km + "\n\n" + sec + "\n\n## Layout\n", false},
		// Wherever the section was moved to, it stays there.
		{"replace elsewhere", "# x\n\n" + labBegin + "\nold\n" + labEnd + "\n\n" + km + "\n",
			"# x\n\n" + sec + "\n\n" + km + "\n", false},
		{"insert after the kernel matrix", "# x\n\n" + km + "\n\n## Layout\n",
			"# x\n\n" + km + "\n\n" + sec + "\n\n## Layout\n", false},
		{"nowhere to insert", "# x\n\n## Layout\n", "", true},
		{"begin without end", "# x\n\n" + km + "\n\n" + labBegin + "\nold\n", "", true},
		{"end without begin", "# x\n\n" + km + "\n\n" + labEnd + "\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReplaceLabSection(tc.readme, sec)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want one: %v", err, tc.err)
			}
			if tc.err {
				return
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			// Writing again changes nothing, and the kernel matrix's
			// section is still there for its own check.
			if again, _ := ReplaceLabSection(got, sec); again != got {
				t.Errorf("a second write changed the README:\n%s", again)
			}
			if s, err := Section(got); err != nil || s != km {
				t.Errorf("kernel-matrix section: %q, %v", s, err)
			}
		})
	}
}

func TestCheckLab(t *testing.T) {
	committed := labFixture()
	for _, tc := range []struct {
		name    string
		edit    func(*LabRows)
		want    []string // the error lines' beginnings, in order
		summary string   // part of the summary line
	}{
		// The numbers differ from the committed ones: only the verdicts count.
		{"pass with other numbers", func(l *LabRows) {
			l.Fidelity[0].Agreement, l.Fidelity[0].ModelAbove, l.Cross[0].Worst = 0.9871, 700, 4.9
			l.Date = "2027-01-01"
		}, nil, "2 of 2 in the README ran and passed; 0 failing, 0 missing, 0 not in the README"},
		{"fidelity fails", func(l *LabRows) { l.Fidelity[0].Pass = false },
			[]string{"fidelity 6.12/icx/menu: fails: agreement 0.9993"}, "1 of 2 in the README ran and passed; 1 failing, 0 missing, 0 not"},
		{"cross fails", func(l *LabRows) { l.Cross[0].Pass = false },
			[]string{"cross-governor lab/icx: menu on the teo recording: fails: worst 3.2 points"}, "1 of 2 in the README ran and passed; 1 failing, 0 missing"},
		{"missing", func(l *LabRows) { l.Cross = nil },
			[]string{"cross-governor lab/icx: menu on the teo recording: in the README, missing from this run"}, "1 of 2 in the README ran and passed; 0 failing, 1 missing, 0 not"},
		{"extra", func(l *LabRows) {
			l.Fidelity = append(l.Fidelity, LabRow{Case: "6.12/spr/menu", Pass: true})
		}, []string{"fidelity 6.12/spr/menu: not in the README"}, "2 of 2 in the README ran and passed; 0 failing, 0 missing, 1 not in the README"},
		{"extra and failing", func(l *LabRows) {
			l.Cross = append(l.Cross, CrossRow{Case: "lab/icx", Replayed: "teo", OnTraceOf: "menu", Worst: 6})
		}, []string{"cross-governor lab/icx: teo on the menu recording: not in the README (and fails: worst 6.0 points"}, "0 failing, 0 missing, 1 not in the README"},
		// Another replayed policy on the same recording is another row.
		{"same case, other pair", func(l *LabRows) { l.Cross[0].Replayed = "ladder" }, []string{
			"cross-governor lab/icx: menu on the teo recording: in the README, missing",
			"cross-governor lab/icx: ladder on the teo recording: not in the README",
		}, "1 of 2 in the README ran and passed; 0 failing, 1 missing, 1 not in the README"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := labFixture()
			tc.edit(&run)
			errs, summary := CheckLab(committed, run)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %q, want %d", errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(errs[i], w) || strings.Contains(errs[i], "\n") {
					t.Errorf("error %d: %q, want one line beginning %q", i, errs[i], w)
				}
			}
			if !strings.HasPrefix(summary, "lab rows: ") || !strings.Contains(summary, tc.summary) {
				t.Errorf("summary: %s", summary)
			}
		})
	}
}

// TestReadLabResults: the files are told apart by their rows, in any order;
// a later row of a name replaces an earlier one; a test that wrote no rows
// wrote "null"; a file that is not there is an error.
func TestReadLabResults(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fid := write("fid.json", `[{"case": "lab/icx/teo", "agreement": 0.99, "pass": true}, {"case": "6.1/icx/menu", "pass": true}]`)
	fid2 := write("fid2.json", `[{"case": "6.1/icx/menu", "pass": false}]`)
	cross := write("cross.json", `[{"case": "lab/icx", "replayed": "teo", "on_trace_of": "menu", "above_pct": [1, 2], "pass": true},
		{"case": "lab/icx", "replayed": "menu", "on_trace_of": "teo", "pass": true}]`)
	empty := write("empty.json", "null\n")
	bad := write("bad.json", `[{"periods": 3}]`)
	for _, tc := range []struct {
		name  string
		paths []string
		fid   []string // case:pass
		cross []string // case replayed/on_trace_of
		errs  int
	}{
		{"either order", []string{cross, fid}, []string{"6.1/icx/menu:true", "lab/icx/teo:true"}, []string{"lab/icx menu/teo", "lab/icx teo/menu"}, 0},
		{"later replaces", []string{fid, fid2}, []string{"6.1/icx/menu:false", "lab/icx/teo:true"}, nil, 0},
		{"no rows", []string{empty}, nil, nil, 0},
		{"missing file", []string{fid, filepath.Join(dir, "absent.json")}, []string{"6.1/icx/menu:true", "lab/icx/teo:true"}, nil, 1},
		{"not a row", []string{bad}, nil, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, errs := ReadLabResults(tc.paths)
			var f, c []string
			for _, r := range l.Fidelity {
				f = append(f, r.Case+":"+strconv.FormatBool(r.Pass))
			}
			for _, r := range l.Cross {
				c = append(c, r.Case+" "+r.Replayed+"/"+r.OnTraceOf)
			}
			if !slices.Equal(f, tc.fid) || !slices.Equal(c, tc.cross) || len(errs) != tc.errs {
				t.Errorf("fidelity %q, cross %q, errors %v", f, c, errs)
			}
		})
	}
}
