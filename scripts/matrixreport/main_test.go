package main

import (
	"encoding/json"
	"os"
	"path/filepath"
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
