package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/trace"
)

// bundledTrace is a real trace recorded on a machine of this kind (see
// testdata/README.md); tests that need no root read it.
const bundledTrace = "../../testdata/demo.trace"

var binPath string

// TestMain builds the real binary once: exit codes and one-line errors are
// only meaningful from the process itself.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idletrace-cmd")
	if err != nil {
		panic(err)
	}
	// Readable by all: one test runs the binary as nobody.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "idletrace")
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func runBin(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// linkTo makes a symbolic link to target in a directory of its own.
func linkTo(t *testing.T, target string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "link.trace")
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBadInput: every kind of bad input gets one line on stderr naming the
// problem, the contract's exit status, and never a panic.
func TestBadInput(t *testing.T) {
	good, err := os.ReadFile(bundledTrace)
	if err != nil {
		t.Fatalf("bundled trace: %v", err)
	}
	garbage := writeFile(t, "garbage.trace", []byte("this is not a trace file at all, just text\n"))
	empty := writeFile(t, "empty.trace", nil)
	headerOnly := writeFile(t, "header.trace", good[:20])
	cutMagic := writeFile(t, "cut.trace", good[:4])
	newer := append([]byte(nil), good...)
	newer[8] = 99 // format version (u16 after the 8-byte magic)
	newerPath := writeFile(t, "newer.trace", newer)
	badProfile := writeFile(t, "bad.json", []byte(`{"name":"x","states":[{"name":"C1","exit_latency_us":-1,"target_residency_us":2}]}`))
	badNsProfile := writeFile(t, "badns.json", []byte(`{"name":"x","states":[{"name":"C6","exit_latency_ns":170000,"target_residency_ns":600000},{"name":"C1E","exit_latency_ns":4000,"target_residency_ns":700000}]}`))
	typeProfile := writeFile(t, "type.json", []byte(`{"hz":"250","states":[{"name":"C1","exit_latency_us":1,"target_residency_us":1}]}`))
	traceCopy := writeFile(t, "copy.trace", good)
	existing := writeFile(t, "report.txt", []byte("an earlier report\n"))
	exportDir := filepath.Join(t.TempDir(), "tables") // no case may create it
	existingTables := filepath.Dir(writeFile(t, "io_requests.csv", []byte("an earlier table\n")))

	cases := []struct {
		name string
		args []string
		code int
		want string // substring of the one-line error
	}{
		{"missing file", []string{"stats", "/nonexistent/x.trace"}, 1, "no such file"},
		{"garbage file", []string{"stats", garbage}, 1, "not an idletrace file"},
		{"empty file", []string{"info", empty}, 1, "the file is empty, not an idletrace trace"},
		{"header only", []string{"stats", headerOnly}, 1, headerOnly},
		{"cut inside the magic", []string{"info", cutMagic}, 1, "trace " + cutMagic + ": file is truncated inside the file header: 4 bytes, the header needs 16"},
		{"newer version", []string{"stats", newerPath}, 1, "newer"},
		{"unknown flag", []string{"stats", "--definitely-not-a-flag", bundledTrace}, 2, "definitely-not-a-flag"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"no file", []string{"stats"}, 2, "missing trace FILE"},
		{"two files", []string{"info", bundledTrace, bundledTrace}, 2, "expected one"},
		{"bad format", []string{"stats", bundledTrace, "--format", "xml"}, 2, "--format"},
		{"bad policy", []string{"whatif", bundledTrace, "--policy", "menu+margin=x"}, 2, "margin"},
		{"unknown governor", []string{"whatif", bundledTrace, "--policy", "schedutil"}, 2, "schedutil"},
		// Mistakes in how it was invoked, not in the input (issue 11 item 8).
		{"disable a state the profile lacks", []string{"whatif", bundledTrace, "--profile", "icx", "--policy", "menu+disable=C9"}, 2, `no state "C9"`},
		{"recorded on another profile", []string{"whatif", bundledTrace, "--profile", "icx", "--policy", "recorded"}, 2, "recorded needs the recorded profile"},
		{"offline CPU", []string{"record", "--cpus", "4095", "-d", "1s", "-o", filepath.Join(t.TempDir(), "x.trace")}, 2, "CPU 4095 is not online"},
		// A profile file that does not parse is a mistake in --profile, as
		// an unknown name is (trial 11 item 8): exit 2, naming the field as
		// the file spells it.
		{"bad profile file", []string{"whatif", bundledTrace, "--profile", badProfile}, 2, "exit_latency_us"},
		{"profile file of a wrong JSON type", []string{"whatif", bundledTrace, "--profile", typeProfile}, 2, "hz: must be an integer, not a string"},
		{"bad profile file in ns", []string{"whatif", bundledTrace, "--profile", badNsProfile}, 2, "states[1].exit_latency_ns: 4000 ns is below states[0] (C6)'s 170000 ns"},
		{"profiles on a bad file", []string{"profiles", badProfile}, 2, "exit_latency_us"},
		{"whatif on a trace with no records", []string{"whatif", emptyTrace(t)}, 1, "holds no idle period and no block IO request: nothing to replay"},
		{"maxcstate beyond the table", []string{"whatif", bundledTrace, "--policy", "menu+maxcstate=9"}, 2, "maxcstate: 9 is beyond profile"},
		{"--hz given as 0", []string{"whatif", bundledTrace, "--hz", "0"}, 2, "--hz 0: must be between 1 and 10000"},
		{"--hz out of range", []string{"whatif", bundledTrace, "--hz", "20000"}, 2, "--hz 20000: must be between 1 and 10000"},
		{"profiles --hz negative", []string{"profiles", "spr", "--hz", "-3"}, 2, "--hz -3: must be between 1 and 10000"},
		{"maxcstate beyond any table", []string{"whatif", bundledTrace, "--policy", "menu+maxcstate=99"}, 2, "maxcstate: 99 is beyond profile"},
		{"kernel no model knows", []string{"whatif", bundledTrace, "--policy", "menu+kernel=2.6"}, 2, "outside the releases modelled"},
		{"kernel before the governor", []string{"whatif", bundledTrace, "--policy", "teo+kernel=4.17"}, 2, "teo first appeared in Linux 5.1"},
		{"unknown profile", []string{"whatif", bundledTrace, "--profile", "nosuchcpu"}, 2, "nosuchcpu"},
		{"bad duration", []string{"record", "-d", "soon"}, 2, "duration"},
		{"bad cpus", []string{"record", "--cpus", "3-1"}, 2, "--cpus"},
		{"empty cpus", []string{"record", "--cpus", "", "-d", "1s"}, 2, "--cpus: an empty CPU list"},
		{"export empty cpus", []string{"export", bundledTrace, "--format", "csv", "--cpus", " "}, 2, "--cpus: an empty CPU list"},
		{"record stray arg", []string{"record", "foo"}, 2, "foo"},
		{"record for 0 s", []string{"record", "-d", "0s"}, 2, "--duration 0s"},
		{"bad IO filter", []string{"stats", bundledTrace, "--io", "colour=red"}, 2, `unknown key "colour"`},
		{"IO filter key given twice", []string{"stats", bundledTrace, "--io", "op=read,op=write"}, 2, "op given twice"},
		{"stats on a trace with no records", []string{"stats", emptyTrace(t)}, 1, "holds no idle period and no block IO request"},
		{"IO filter on a device the trace lacks", []string{"whatif", bundledTrace, "--io", "dev=sdz"}, 2, `no device "sdz"`},
		{"IO filter by process on a trace without it", []string{"whatif", bundledTrace, "--io", "comm=fio"}, 1, "does not record which process"},
		{"report over its trace", []string{"whatif", traceCopy, "-o", traceCopy}, 2, "is the trace being read"},
		// An existing output is a mistake in the invocation, as the trace
		// itself is (trial 11): exit 2, for every command that writes one.
		{"report over a file", []string{"whatif", bundledTrace, "-o", existing}, 2, "--force"},
		{"record over a file", []string{"record", "-o", existing, "-d", "1s"}, 2, "--force"},
		{"top over a file", []string{"top", "-o", existing, "-d", "1s"}, 2, "--force"},
		// A directory is not a file --force could overwrite: said before.
		{"report to a directory", []string{"stats", bundledTrace, "-o", filepath.Dir(existing), "--force"}, 2, "is a directory"},
		{"record to a directory", []string{"record", "-o", filepath.Dir(existing), "--force", "-d", "1s"}, 2, "is a directory"},
		{"measured with two policies", []string{"whatif", bundledTrace, "--policy", "menu", "--policy", "teo", "--measured", bundledTrace}, 2, "exactly one --policy"},
		{"measured without a policy", []string{"whatif", bundledTrace, "--measured", bundledTrace}, 2, "exactly one --policy"},
		// The measurement runs on the machine's own table: a prediction on spr's set beside it compares states it lacks.
		{"profiles recorded", []string{"profiles", "recorded"}, 2, `"recorded" is a trace's own table, not a built-in`},
		{"profiles in capitals", []string{"profiles", "HSW"}, 2, `no built-in profile "HSW": the names are lower case (hsw)`},
		{"measured on another table", []string{"whatif", bundledTrace, "--policy", "menu", "--measured", bundledTrace, "--profile", "spr"}, 2, "--profile spr: --measured measures on the recorded machine's own state table"},
		{"experiment on another table", []string{"experiment", "--policy", "menu", "--profile", "spr", "--", "true"}, 2, "--profile spr: experiment measures on the recorded machine's own state table"},
		{"experiment unknown policy", []string{"experiment", "--policy", "schedutil", "--", "true"}, 2, "schedutil"},
		{"experiment two policies", []string{"experiment", "--policy", "menu", "--policy", "ladder", "--", "true"}, 2, "exactly one --policy"},
		{"experiment no command", []string{"experiment", "--policy", "menu"}, 2, "missing COMMAND"},
		{"experiment boot parameter", []string{"experiment", "--policy", "menu+maxcstate=1", "--", "true"}, 2, "boot parameter"},
		{"experiment model only", []string{"experiment", "--policy", "menu+blkqos=10us/3ms", "--", "true"}, 2, "blkqos="},
		// export (issue 13 item 1): the input, then how it was invoked.
		{"export missing file", []string{"export", "/nonexistent/x.trace", "--format", "csv", "-o", exportDir}, 1, "no such file"},
		{"export truncated trace", []string{"export", headerOnly, "--format", "parquet", "-o", exportDir}, 1, "truncated"},
		{"export garbage file", []string{"export", garbage, "--format", "csv", "-o", exportDir}, 1, "not an idletrace file"},
		{"export unknown format", []string{"export", bundledTrace, "--format", "xml", "-o", exportDir}, 2, `--format "xml": must be one of csv, parquet`},
		{"export without a format", []string{"export", bundledTrace, "-o", exportDir}, 2, "missing --format"},
		{"export bad CPU list", []string{"export", bundledTrace, "--format", "csv", "-o", exportDir, "--cpus", "3-1"}, 2, "--cpus"},
		{"export CPU the trace lacks", []string{"export", bundledTrace, "--format", "csv", "-o", exportDir, "--cpus", "0,7"}, 2, "CPU 7 is not in the trace"},
		{"export -o unwritable", []string{"export", bundledTrace, "--format", "csv", "-o", filepath.Join(existing, "tables")}, 1, "not a directory"},
		{"export two tables without -o", []string{"export", bundledTrace, "--format", "csv"}, 2, "give -o DIR"},
		{"export Parquet to stdout", []string{"export", bundledTrace, "--format", "parquet", "--table", "io_requests"}, 2, "give -o DIR"},
		{"export unknown table", []string{"export", bundledTrace, "--format", "csv", "--table", "cpus"}, 2, `unknown table "cpus"`},
		{"export window backwards", []string{"export", bundledTrace, "--format", "csv", "-o", exportDir, "--from", "2s", "--to", "1s"}, 2, "--to 1s must come after --from 2s"},
		{"export negative time", []string{"export", bundledTrace, "--format", "csv", "-o", exportDir, "--from", "-1s"}, 2, "cannot be negative"},
		{"export bad duration", []string{"export", bundledTrace, "--format", "csv", "-o", exportDir, "--to", "soon"}, 2, "--to"},
		{"export bad IO filter", []string{"export", bundledTrace, "--format", "csv", "-o", exportDir, "--io", "colour=red"}, 2, `unknown key "colour"`},
		{"export over existing tables", []string{"export", bundledTrace, "--format", "csv", "-o", existingTables}, 2, "--force"},
		{"export two traces", []string{"export", bundledTrace, bundledTrace, "--format", "csv", "-o", exportDir}, 2, "expected one"},
	}
	defer func() {
		// Refused outputs leave their files as they were.
		if got, _ := os.ReadFile(traceCopy); !bytes.Equal(got, good) {
			t.Errorf("whatif -o wrote over the trace it read")
		}
		if got, _ := os.ReadFile(existing); string(got) != "an earlier report\n" {
			t.Errorf("whatif -o wrote over an existing file without --force")
		}
		if got, _ := os.ReadFile(filepath.Join(existingTables, "io_requests.csv")); string(got) != "an earlier table\n" {
			t.Errorf("export -o wrote over an existing table without --force")
		}
		if _, err := os.Stat(exportDir); err == nil {
			t.Errorf("a refused export created its -o directory")
		}
	}()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit status %d, want %d (stderr %q)", r.code, tc.code, r.stderr)
			}
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if len(lines) != 1 || lines[0] == "" {
				t.Errorf("want one line on stderr, got %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not name %q", r.stderr, tc.want)
			}
			if strings.Contains(r.stderr+r.stdout, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("panic: %s", r.stderr)
			}
		})
	}
}

// TestTruncatedTrace: a trace cut anywhere reads up to its last complete
// chunk, with a warning, and never panics.
func TestTruncatedTrace(t *testing.T) {
	good, err := os.ReadFile(bundledTrace)
	if err != nil {
		t.Fatal(err)
	}
	full := runBin(t, "stats", bundledTrace, "--format", "json")
	if full.code != 0 {
		t.Fatalf("stats on the bundled trace: %s", full.stderr)
	}
	for _, frac := range []float64{0.3, 0.6, 0.9, 0.999} {
		cut := writeFile(t, "cut.trace", good[:int(float64(len(good))*frac)])
		r := runBin(t, "stats", cut, "--format", "json")
		if r.code != 0 {
			t.Errorf("cut at %.1f%%: exit %d: %s", 100*frac, r.code, r.stderr)
			continue
		}
		if !strings.Contains(r.stderr, "warning") {
			t.Errorf("cut at %.1f%%: no warning on stderr", 100*frac)
		}
		var s struct {
			CPUs []struct {
				States []struct{ Usage uint64 } `json:"states"`
			} `json:"cpus"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Errorf("cut at %.1f%%: stats JSON: %v", 100*frac, err)
		}
	}
}

// TestDamagedTrace: chunks that fail their checksum are skipped with a
// warning on stderr by every command that reads the trace (info checks
// every chunk), and whatif's report, pasted without its stderr, says so.
func TestDamagedTrace(t *testing.T) {
	data, err := os.ReadFile(bundledTrace)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 8; i++ { // bytes inside several record chunks
		data[len(data)*i/10] ^= 0x55
	}
	damaged := writeFile(t, "damaged.trace", data)
	const want = "is damaged (checksum mismatch); skipped it ("
	for _, args := range [][]string{
		{"info", damaged},
		{"stats", damaged},
		{"whatif", damaged},
		{"export", damaged, "--format", "csv", "-o", t.TempDir(), "-q"},
	} {
		r := runBin(t, args...)
		if r.code != 0 || !strings.Contains(r.stderr, "warning: trace "+damaged+": chunk at offset ") || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d, stderr %q: want 0 and a warning for each damaged chunk", args[0], r.code, r.stderr)
		}
		if args[0] == "whatif" && !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), want) {
			t.Errorf("whatif's report does not say which chunks it lacks:\n%s", r.stdout)
		}
		// The report itself, pasted without its stderr, says what the
		// damage held.
		if line := map[string]string{"stats": "File damage: ", "info": "file damage: "}[args[0]]; line != "" &&
			!strings.Contains(r.stdout, line) {
			t.Errorf("%s's report has no %q line:\n%s", args[0], line, r.stdout)
		}
	}
	// stats and info give the same damage account in JSON, the records of
	// the skipped chunks.
	var damage [2]struct {
		Damage struct {
			Chunks      uint64 `json:"chunks"`
			IdleRecords uint64 `json:"idle_records"`
			IORecords   uint64 `json:"io_records"`
		} `json:"damage"`
	}
	for i, cmd := range []string{"stats", "info"} {
		r := runBin(t, cmd, damaged, "--format", "json")
		if err := json.Unmarshal([]byte(r.stdout), &damage[i]); err != nil {
			t.Fatalf("%s JSON: %v", cmd, err)
		}
	}
	if d := damage[0].Damage; d.Chunks == 0 || d.IdleRecords+d.IORecords == 0 || damage[1] != damage[0] {
		t.Errorf("damage: stats %+v, info %+v: want the damaged chunks' records, the same in both", d, damage[1].Damage)
	}
}

// TestRecordNotRoot: without privileges, record says what is missing and how to fix it.
func TestRecordNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		r := runBin(t, "record", "-o", filepath.Join(t.TempDir(), "x.trace"), "-d", "1s")
		if r.code != 1 || !strings.Contains(r.stderr, "root") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		return
	}
	// As root, drop to nobody for the child.
	cmd := exec.Command(binPath, "record", "-o", "/tmp/idletrace-nobody.trace", "-d", "1s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("want exit 1, got %v (stderr %q)", err, errb.String())
	}
	if !strings.Contains(errb.String(), "root or CAP_BPF") || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("stderr %q", errb.String())
	}
}

// TestRecordCapabilities: with only CAP_BPF and CAP_PERFMON, as the README
// allows, the recorder gets every input root gets. /proc/kallsyms hides its
// addresses from such a reader (kptr_restrict), so nothing may depend on it.
func TestRecordCapabilities(t *testing.T) {
	testenv.RequireRecorder(t)
	const capPerfmon, capBPF = 38, 39 // include/uapi/linux/capability.h
	dir, err := os.MkdirTemp("", "idletrace-caps")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "caps.trace")
	cmd := exec.Command(binPath, "record", "-o", path, "-d", "2s", "-q")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: 65534, Gid: 65534},
		AmbientCaps: []uintptr{capPerfmon, capBPF},
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("record as nobody with CAP_BPF and CAP_PERFMON: %v: %s", err, errb.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if !strings.HasPrefix(line, "idletrace record: "+path+" in ") && !strings.HasPrefix(line, "idletrace record: not recorded ") {
			t.Errorf("a warning root does not get: %s", line)
		}
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Meta.Inputs.TickState || !r.Meta.Inputs.NextTimer {
		t.Errorf("inputs %+v: tick state and next timer missing", r.Meta.Inputs)
	}
	var periods, tickKnown, counted int
	last := map[uint32]bool{} // whether each CPU's latest period carried the kernel's residency
	if err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
		periods++
		if p.TickStopped != trace.Unknown && p.NextEventKnown {
			tickKnown++
		}
		if p.KernelCounted {
			counted++
		}
		last[p.CPU] = p.KernelCounted
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d idle periods: %d with tick state and next event, %d with the kernel's residency", periods, tickKnown, counted)
	// Only the first periods of each CPU, before its first hrtimer
	// expiry, lack them; and the kernel's residency of each CPU's last
	// period, which the next entry would have read, is not there.
	if periods == 0 || tickKnown < periods*9/10 {
		t.Errorf("tick state known for %d of %d periods", tickKnown, periods)
	}
	judged := periods
	for _, c := range last {
		if !c {
			judged--
		}
	}
	if len(r.Meta.States) > 0 && counted < judged*9/10 {
		t.Errorf("the cpuidle core's residency carried by %d of %d periods (driver %s)", counted, periods, r.Meta.CPUIdleDriver)
	}
}

// TestLossAccount: record's summary, info and stats (text and JSON) give
// the same loss account, under the same names, and lost_events is its total.
func TestLossAccount(t *testing.T) {
	testenv.RequireRecorder(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "loss.trace")
	// Synchronous writes keep IO in flight across the start and the stop.
	testenv.SyncWrites(t, dir, 0)
	r := runBin(t, "record", "-o", path, "-d", "2s", "-q")
	if r.code != 0 {
		t.Fatalf("record: exit %d: %s", r.code, r.stderr)
	}
	account := func(what, out string) string {
		i := strings.Index(out, "not recorded ")
		if i < 0 {
			t.Fatalf("%s does not give the loss account:\n%s", what, out)
		}
		line := out[i:]
		if j := strings.IndexAny(line, "\n"); j >= 0 {
			line = line[:j]
		}
		return strings.TrimSuffix(line, ".")
	}
	want := account("record", r.stderr)
	info := runBin(t, "info", path)
	stats := runBin(t, "stats", path)
	for what, out := range map[string]string{"info": info.stdout, "stats": stats.stdout} {
		if got := account(what, out); got != want {
			t.Errorf("%s: %q, record: %q", what, got, want)
		}
	}
	js := runBin(t, "stats", path, "--format", "json")
	var v struct {
		LostEvents uint64            `json:"lost_events"`
		Loss       trace.LossAccount `json:"loss"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if got := "not recorded " + strings.TrimPrefix(v.Loss.String(), "not recorded "); got != want || v.LostEvents != v.Loss.Total() {
		t.Errorf("stats JSON: loss %+v (%q), lost_events %d; record: %q", v.Loss, got, v.LostEvents, want)
	}
	t.Logf("%s", want)
}

// TestRecordKilled: a recording killed with SIGKILL stays readable up to its
// last complete chunk.
func TestRecordKilled(t *testing.T) {
	testenv.RequireRecorder(t)
	path := filepath.Join(t.TempDir(), "killed.trace")
	cmd := exec.Command(binPath, "record", "-o", path, "-d", "60s", "-q")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond) // the writer flushes a chunk every second
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	r, err := trace.Open(path)
	if err != nil {
		t.Fatalf("a killed recording must open: %v", err)
	}
	defer r.Close()
	if r.End != nil {
		t.Error("a killed recording cannot have an end chunk")
	}
	if w := r.Warnings(); len(w) == 0 || !strings.Contains(strings.Join(w, " "), "did not finish") {
		t.Errorf("warnings %q do not say the recording did not finish", w)
	}
	var n int
	if err := r.Scan(trace.Visitor{Idle: func(*trace.IdlePeriod) error { n++; return nil }}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no idle periods survived the kill")
	}
	st := runBin(t, "stats", path)
	if st.code != 0 {
		t.Fatalf("stats on the killed recording: %s", st.stderr)
	}
	t.Logf("%d idle periods readable after SIGKILL", n)
}

// TestRecordRefusesOverwrite: record keeps an existing file unless --force.
func TestRecordRefusesOverwrite(t *testing.T) {
	existing := writeFile(t, "existing.trace", []byte("keep me"))
	r := runBin(t, "record", "-o", existing, "-d", "1s")
	if r.code != 2 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Fatal("record overwrote an existing file")
	}
}

// TestReportsOnBundledTrace: every report format renders the bundled real trace.
func TestReportsOnBundledTrace(t *testing.T) {
	cases := [][]string{
		{"info", bundledTrace},
		{"info", bundledTrace, "--format", "json"},
		{"stats", bundledTrace},
		{"stats", bundledTrace, "--format", "markdown"},
		{"whatif", bundledTrace},
		{"whatif", bundledTrace, "--profile", "spr", "--policy", "menu", "--policy", "menu+margin=25", "--policy", "menu+blkqos=10us/3ms", "--policy", "oracle"},
		{"whatif", bundledTrace, "--profile", "measured", "--policy", "haltpoll", "--format", "markdown"},
		{"whatif", bundledTrace, "--profile", "icx", "--policy", "teo", "--policy", "ladder", "--format", "html"},
		{"profiles"},
		{"profiles", "spr"},
		{"profiles", "--format", "json"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args[:1], " "), func(t *testing.T) {
			r := runBin(t, args...)
			if r.code != 0 {
				t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
			}
			if len(r.stdout) < 100 {
				t.Fatalf("%v: output too short: %q", args, r.stdout)
			}
		})
	}
}

// TestWhatifHaltpollNotes: a haltpoll policy's report names the module
// parameters it polled by, and where its agreement is reported but is its
// own window's estimate (a lab recording under teo), says so; on another
// machine's profile, or on the bundled trace (no cpuidle driver: nothing
// chose, no agreement), it does not.
func TestWhatifHaltpollNotes(t *testing.T) {
	const params, own = "haltpoll's module parameters, which decide its polling window: haltpoll: guest_halt_poll_ns=200000", "the agreement of haltpoll follows its own polling window"
	const teoTrace = "../../internal/fidelity/testdata/teo-6.1-lab-icx.trace"
	for _, tc := range []struct {
		trace, profile string
		own            bool
	}{{teoTrace, "recorded", true}, {teoTrace, "icx", false}, {bundledTrace, "recorded", false}, {bundledTrace, "measured", false}, {bundledTrace, "icx", false}} {
		r := runBin(t, "whatif", tc.trace, "--profile", tc.profile, "--policy", "haltpoll", "--format", "json")
		if r.code != 0 {
			t.Fatalf("--profile %s: exit %d: %s", tc.profile, r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, params) || strings.Contains(r.stdout, own) != tc.own {
			t.Errorf("%s --profile %s: parameters named %v, own-window agreement said %v (want %v)", tc.trace, tc.profile,
				strings.Contains(r.stdout, params), strings.Contains(r.stdout, own), tc.own)
		}
	}
}

// TestRecordDiskFull: a recording that runs out of disk stops with a one-line
// error and leaves a file readable up to its last complete chunk.
func TestRecordDiskFull(t *testing.T) {
	testenv.RequireRecorder(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	path := filepath.Join(dir, "full.trace")
	// --no-io: only idle periods, whose chunks the recording flushes every
	// second. Once its first chunk is on disk, a filler takes every byte
	// left: the next flush meets a full disk, however many periods this
	// machine's load makes.
	cmd := exec.Command(binPath, "record", "-o", path, "-d", "60s", "-q", "--no-io")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 4096 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the recording wrote no chunk in 30 s")
		}
	}
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 64<<10); ; {
		if _, err := filler.Write(buf); err != nil {
			break // the disk is full
		}
	}
	filler.Close()
	err = cmd.Wait()
	r := result{stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	}
	if r.code != 1 || !strings.Contains(r.stderr, "no space left") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatalf("a recording stopped by a full disk must open: %v", err)
	}
	defer tr.Close()
	var n int
	if err := tr.Scan(trace.Visitor{Idle: func(*trace.IdlePeriod) error { n++; return nil }}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no idle periods readable after the disk filled")
	}
	t.Logf("%d idle periods readable; stderr: %s", n, strings.TrimSpace(r.stderr))
}

// TestHelp: every command's -h and --help, and help COMMAND, print its
// usage once, on stdout (so that | less shows it), nothing on stderr, and
// exit 0; help with an unknown command is a usage error.
func TestHelp(t *testing.T) {
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			r := runBin(t, args...)
			usage := "Usage: idletrace " + c.name + " "
			if r.code != 0 || strings.Count(r.stdout, usage) != 1 || r.stderr != "" {
				t.Errorf("idletrace %s: exit %d, usage on stdout %d times, stderr %q:\n%s", strings.Join(args, " "), r.code, strings.Count(r.stdout, usage), r.stderr, r.stdout)
			}
		}
	}
	if r := runBin(t, "help", "nosuch"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "nosuch"`) {
		t.Errorf("idletrace help nosuch: exit %d, stderr %q; want 2 and the unknown command named", r.code, r.stderr)
	}
}

// TestNoArguments: idletrace alone is a usage error: the usage on stderr,
// nothing on stdout (a script's pipe gets no stray text), exit 2; "help"
// prints it on stdout and exits 0.
func TestNoArguments(t *testing.T) {
	r := runBin(t)
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "idletrace record ") {
		t.Errorf("idletrace: exit %d, stdout %q, stderr %q; want 2, nothing, the usage", r.code, r.stdout, r.stderr)
	}
	r = runBin(t, "help")
	if r.code != 0 || !strings.Contains(r.stdout, "idletrace record ") || r.stderr != "" {
		t.Errorf("idletrace help: exit %d, stdout %q, stderr %q; want 0, the usage, nothing", r.code, r.stdout, r.stderr)
	}
}

// TestWhatifSharesAtMost100: above/below are shares of each policy's
// selections, which is what the cpuidle core counts them against: with
// idle periods as the base, haltpoll+qos=0us (a poll re-selected on every
// time-out) printed "Below 205287 (101.2 %)" (issue 11 item 10).
func TestWhatifSharesAtMost100(t *testing.T) {
	r := runBin(t, "whatif", bundledTrace, "--policy", "haltpoll+qos=0us", "--policy", "menu")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	pct := regexp.MustCompile(`\(([0-9.]+) %\)`)
	n := 0
	for _, m := range pct.FindAllStringSubmatch(r.stdout, -1) {
		n++
		if v, _ := strconv.ParseFloat(m[1], 64); v > 100 {
			t.Errorf("a share of %s %% in:\n%s", m[1], r.stdout)
		}
	}
	if n < 4 {
		t.Fatalf("%d shares in the report, want above and below for both policies:\n%s", n, r.stdout)
	}
}

// TestWhatifDefaultPoliciesFitTheProfile: with no --policy, whatif on
// another machine's profile replays the recorded governor and the oracle
// ("recorded" only means something on the recorded table; it failed with
// "recorded needs the recorded profile", issue 11 item 6).
func TestWhatifDefaultPoliciesFitTheProfile(t *testing.T) {
	for _, tc := range []struct {
		profile string
		want    []string
	}{
		{"recorded", []string{"recorded", "oracle"}},
		{"icx", []string{"menu", "oracle"}}, // the bundled trace's governor
	} {
		r := runBin(t, "whatif", bundledTrace, "--profile", tc.profile, "--format", "json")
		if r.code != 0 {
			t.Fatalf("--profile %s: exit %d: %s", tc.profile, r.code, r.stderr)
		}
		var rep struct {
			Results []struct{ Policy string } `json:"results"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, res := range rep.Results {
			got = append(got, res.Policy)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("--profile %s: policies %v, want %v", tc.profile, got, tc.want)
		}
	}
}

// TestWhatifIOAgreesWithStats: on the bundled real trace, whatif's
// io_woke_idle is stats' io.woke_idle_cpu, and the recorded policy's IO
// latency is stats' (issue 10 item 1: the replay had applied exit latencies
// to 9 % of the completions stats said woke an idle CPU).
func TestWhatifIOAgreesWithStats(t *testing.T) {
	st := runBin(t, "stats", bundledTrace, "--format", "json")
	wi := runBin(t, "whatif", bundledTrace, "--policy", "recorded", "--policy", "menu+disable=POLL", "--format", "json")
	if st.code != 0 || wi.code != 0 {
		t.Fatalf("stats exit %d, whatif exit %d: %s%s", st.code, wi.code, st.stderr, wi.stderr)
	}
	type latency struct {
		Count uint64  `json:"count"`
		Mean  float64 `json:"mean"`
		Max   uint64  `json:"max"`
	}
	var s struct {
		IO struct {
			Requests  uint64  `json:"requests"`
			Woke      uint64  `json:"woke_idle_cpu"`
			LatencyNs latency `json:"latency_ns"`
		} `json:"io"`
	}
	var w struct {
		Results []struct {
			Policy    string   `json:"policy"`
			Woke      *uint64  `json:"io_woke_idle"`
			IOLatency *latency `json:"io_latency_ns"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &s); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(wi.stdout), &w); err != nil {
		t.Fatal(err)
	}
	if s.IO.Woke == 0 || s.IO.Woke >= s.IO.Requests {
		t.Fatalf("stats: %d of %d completions woke an idle CPU: the bundled trace has both kinds", s.IO.Woke, s.IO.Requests)
	}
	for _, r := range w.Results {
		if r.Woke == nil || *r.Woke != s.IO.Woke {
			t.Errorf("%s: io_woke_idle %v, stats' woke_idle_cpu %d", r.Policy, r.Woke, s.IO.Woke)
		}
	}
	if rec := w.Results[0].IOLatency; rec == nil || *rec != s.IO.LatencyNs {
		t.Errorf("recorded's IO latency %+v, stats' %+v", rec, s.IO.LatencyNs)
	}
}

// TestWhatifChanges: on the bundled trace, every result says what it
// changed against the first policy (issue 10 item 4), in JSON and in the
// text report, and blkqos says why it changed little.
func TestWhatifChanges(t *testing.T) {
	specs := []string{"menu", "menu+disable=C6", "menu+blkqos=10us/3ms", "haltpoll", "haltpoll+disable=C6"}
	args := []string{"whatif", bundledTrace, "--profile", "icx"}
	for _, s := range specs {
		args = append(args, "--policy", s)
	}
	wi := runBin(t, append(args, "--format", "json")...)
	if wi.code != 0 {
		t.Fatalf("whatif exit %d: %s", wi.code, wi.stderr)
	}
	var w struct {
		Results []struct {
			Policy     string  `json:"policy"`
			IOWokeIdle *uint64 `json:"io_woke_idle"`
			Changes    *struct {
				Against        string  `json:"against"`
				Reference      bool    `json:"reference"`
				WakeUpsChanged uint64  `json:"wake_ups_changed"`
				WakeUps        uint64  `json:"wake_ups"`
				IOChanged      uint64  `json:"io_changed"`
				IOWokeIdle     uint64  `json:"io_woke_idle"`
				TaskIOChanged  *uint64 `json:"task_io_changed"`
				CPUs           []struct {
					CPU            *int    `json:"cpu"`
					WakeUpsChanged *uint64 `json:"wake_ups_changed"`
				} `json:"cpus"`
				Reason *string `json:"reason"`
			} `json:"changes"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(wi.stdout), &w); err != nil {
		t.Fatal(err)
	}
	if len(w.Results) != len(specs) {
		t.Fatalf("%d results for %d policies", len(w.Results), len(specs))
	}
	for i, r := range w.Results {
		c := r.Changes
		if c == nil {
			t.Errorf("%s: no changes", r.Policy)
			continue
		}
		if c.Against != "menu" || c.Reference != (i == 0) || c.TaskIOChanged == nil || c.CPUs == nil {
			t.Errorf("%s: changes %+v", r.Policy, *c)
		}
		if c.WakeUps == 0 || c.WakeUpsChanged > c.WakeUps || r.IOWokeIdle == nil || c.IOWokeIdle != *r.IOWokeIdle || c.IOChanged > c.IOWokeIdle {
			t.Errorf("%s: changed %d of %d wake-ups, %d of %d IO completions (result's io_woke_idle %v)",
				r.Policy, c.WakeUpsChanged, c.WakeUps, c.IOChanged, c.IOWokeIdle, r.IOWokeIdle)
		}
		var sum uint64
		for _, cc := range c.CPUs {
			if cc.CPU == nil || cc.WakeUpsChanged == nil {
				t.Fatalf("%s: cpus entry without cpu or wake_ups_changed", r.Policy)
			}
			sum += *cc.WakeUpsChanged
		}
		if sum != c.WakeUpsChanged {
			t.Errorf("%s: per-CPU wake-ups changed sum to %d, total %d", r.Policy, sum, c.WakeUpsChanged)
		}
	}
	if c := w.Results[1].Changes; c.WakeUpsChanged == 0 || c.Reason != nil {
		t.Errorf("menu+disable=C6 changed %d wake-ups, reason %v: C6 is where menu woke from 170 µs", c.WakeUpsChanged, c.Reason)
	}
	if r := w.Results[2].Changes.Reason; r == nil || !strings.Contains(*r, "completions woke CPU 1, IO was issued mostly on CPU 0") {
		t.Errorf("blkqos reason %v", r)
	}
	if r := w.Results[4].Changes.Reason; r == nil || !strings.HasPrefix(*r, "haltpoll ignores disable=") {
		t.Errorf("haltpoll+disable=C6 reason %v", r)
	}

	txt := runBin(t, args...)
	if txt.code != 0 {
		t.Fatalf("whatif exit %d: %s", txt.code, txt.stderr)
	}
	for _, want := range []string{"  - menu: the reference.", "  - menu+disable=C6: changed ", "limited "} {
		if !strings.Contains(txt.stdout, want) {
			t.Errorf("text report lacks %q", want)
		}
	}
	for _, l := range strings.Split(txt.stdout, "\n") {
		if strings.HasPrefix(l, "  ") && !strings.ContainsAny(l, "│┌└├") && len([]rune(l)) > 100 {
			t.Errorf("line of %d columns: %q", len([]rune(l)), l)
		}
	}
}

// emptyTrace writes a finished trace that holds no record: what a recording
// stopped before anything happened leaves.
func emptyTrace(t *testing.T) string {
	meta := &trace.Metadata{FormatVersion: trace.FormatVersion, KernelRelease: "6.18.0", HZ: 250, NumCPUs: 2, RecordedCPUs: []int{0, 1}}
	return writeTrace(t, "empty.trace", meta, &trace.End{StopReason: "signal"}, func(*trace.Writer) error { return nil })
}

// writeTrace writes a trace of meta in a test's directory, its records
// added by add, closed with end, and returns its path.
func writeTrace(t *testing.T, name string, meta *trace.Metadata, end *trace.End, add func(w *trace.Writer) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewWriter(f, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := add(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(end); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWhatifOutsideWindowIsStats: the periods whatif's notes say lie
// outside the kernel's counters' window, those replayed (before the start
// snapshot, or straddling the end) and those not replayed (entered after
// the end snapshot: the recorder's shutdown), are together stats'
// outside_window: on a recording of this machine (no note on the replayed
// ones where it has no cpuidle driver, so no state table), and on
// synthetic traces, without an end snapshot and with one, whose first
// periods end before the start snapshot and one straddles it. (The note
// had its own rule, entry and exit inside both snapshots, and counted none
// without an end snapshot; on a recording the two rules agree, as the
// snapshot thread runs on each CPU at its instant.)
func TestWhatifOutsideWindowIsStats(t *testing.T) {
	const start = 1_005_200_000 // periods enter each ms from 1 s and last 0.5 ms: 5 end before, 1 straddles
	meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0}, CPUIdleDriver: "intel_idle",
		States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true},
			{Index: 1, Name: "C1", ExitLatencyNs: 2000, TargetResidencyNs: 2000}}}},
		Start: &trace.Snapshot{MonotonicNs: start, CPUTimeNs: []uint64{start}}}
	for _, tc := range []struct {
		name               string
		endNs              uint64 // the end snapshot; 0: none
		replayed, afterEnd uint64 // outside the window: replayed, not replayed
		statsOutside       uint64
	}{
		{"no end snapshot", 0, 5, 0, 5},
		// The period entered at 1.014 s straddles the end: replayed; the
		// five entered from 1.015 s are not.
		{"end snapshot", 1_014_200_000, 6, 5, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cut.trace")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := trace.NewWriter(f, meta)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tracetest.Periods(20, 1, 1, 1e6, 5e5) {
				if err := w.AddIdle(&p); err != nil {
					t.Fatal(err)
				}
			}
			end := &trace.End{StopReason: "duration"}
			if tc.endNs > 0 {
				end.Snapshot = &trace.Snapshot{MonotonicNs: tc.endNs, CPUTimeNs: []uint64{tc.endNs}}
			}
			if err := w.Close(end); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			replayed, afterEnd, stats := outsideCounts(t, path)
			if replayed != tc.replayed || afterEnd != tc.afterEnd || stats != tc.statsOutside {
				t.Errorf("whatif's notes count %d periods outside the window replayed and %d after the end, stats %d; want %d, %d and %d",
					replayed, afterEnd, stats, tc.replayed, tc.afterEnd, tc.statsOutside)
			}
		})
	}
	t.Run("recording", func(t *testing.T) {
		testenv.RequireRecorder(t)
		path := filepath.Join(t.TempDir(), "w.trace")
		if r := runBin(t, "record", "-o", path, "-d", "2s", "-q"); r.code != 0 {
			t.Fatalf("record: exit %d: %s", r.code, r.stderr)
		}
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		table := len(r.Meta.States) > 0
		r.Close()
		replayed, afterEnd, stats := outsideCounts(t, path)
		switch {
		case table && replayed+afterEnd != stats:
			t.Errorf("whatif's notes count %d + %d periods outside the window, stats' outside_window %d", replayed, afterEnd, stats)
		case !table && replayed != 0:
			// No cpuidle driver: no state table, no above/below for the
			// note to be about.
			t.Errorf("a trace without a state table: whatif notes %d periods outside the window, want no note", replayed)
		}
	})
}

// outsideCounts gives the periods outside the window by whatif's notes
// (0 without one): replayed, and after the end (not replayed); and by
// stats' outside_window.
func outsideCounts(t *testing.T, path string) (replayed, afterEnd, stats uint64) {
	t.Helper()
	st := runBin(t, "stats", path, "--format", "json")
	wi := runBin(t, "whatif", path, "--policy", "recorded", "--format", "json")
	if st.code != 0 || wi.code != 0 {
		t.Fatalf("stats exit %d, whatif exit %d: %s%s", st.code, wi.code, st.stderr, wi.stderr)
	}
	var s struct {
		Outside struct {
			IdlePeriods uint64 `json:"idle_periods"`
		} `json:"outside_window"`
	}
	var w struct {
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &s); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(wi.stdout), &w); err != nil {
		t.Fatal(err)
	}
	for _, n := range w.Notes {
		if m := regexp.MustCompile(`^(\d+) of the idle periods replayed lie outside the window`).FindStringSubmatch(n); m != nil {
			replayed, _ = strconv.ParseUint(m[1], 10, 64)
		}
		if m := regexp.MustCompile(`^(\d+) idle periods entered after the recording's end .* were not replayed`).FindStringSubmatch(n); m != nil {
			afterEnd, _ = strconv.ParseUint(m[1], 10, 64)
		}
	}
	t.Logf("stats: %d idle periods outside the window; whatif's notes: %d replayed, %d after the end", s.Outside.IdlePeriods, replayed, afterEnd)
	return replayed, afterEnd, s.Outside.IdlePeriods
}

// TestWhatifMisreadSleepLengths: a recording whose sleep lengths lie
// before the clock event device's next event (idletrace before 2026-12-07
// on Linux 7.2+ read them as kernel pointers, 35 hours in the past) gets
// a note when menu or teo is replayed on it, and none when they are sound.
func TestWhatifMisreadSleepLengths(t *testing.T) {
	meta := &trace.Metadata{KernelRelease: "7.3.4", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0}, CPUIdleDriver: "acpi_idle",
		States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true},
			{Index: 1, Name: "C1", ExitLatencyNs: 10_000, TargetResidencyNs: 20_000}}}}}
	for _, tc := range []struct {
		name     string
		timerNs  int64 // every period's sleep length; its next event is 2 ms
		policy   string
		wantNote bool
	}{
		{"misread", -128_618_965_245_034, "menu", true},
		{"misread, teo", -128_618_965_245_034, "teo", true},
		{"misread, ladder only", -128_618_965_245_034, "ladder", false},
		{"sound", 3_000_000, "menu", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			periods := tracetest.Periods(50, 1, 1, 1e6, 5e5)
			for i := range periods {
				periods[i].NextTimerNs, periods[i].NextTimerKnown = tc.timerNs, true
				periods[i].NextEventNs, periods[i].NextEventKnown = 2_000_000, true
			}
			path := filepath.Join(t.TempDir(), "sleep.trace")
			tracetest.WriteFile(t, path, meta, periods, nil)
			r := runBin(t, "whatif", path, "--policy", tc.policy)
			if r.code != 0 {
				t.Fatalf("whatif: exit %d: %s", r.code, r.stderr)
			}
			got := strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "50 of 50 idle periods have a sleep length (next timer) over 10 µs before the clock event device's next event")
			if got != tc.wantNote {
				t.Errorf("the misread-sleep-length note: %v, want %v:\n%s", got, tc.wantNote, r.stdout)
			}
		})
	}
}

// TestWhatifModelledRelease: each result names the kernel release its
// governor follows, and kernel=6.12 (mainline 6.12.0) gets a note that the
// 6.12.y stable releases model otherwise (a new user's 6.12 answer flipped
// between kernel=6.12 and kernel=6.12.117 with nothing to say why).
func TestWhatifModelledRelease(t *testing.T) {
	r := runBin(t, "whatif", "../../testdata/demo.trace", "--format", "json",
		"--policy", "recorded", "--policy", "menu+kernel=6.12", "--policy", "menu+kernel=6.12.117", "--policy", "teo", "--policy", "oracle")
	if r.code != 0 {
		t.Fatalf("whatif: exit %d: %s", r.code, r.stderr)
	}
	var rep struct {
		Results []struct {
			Policy          string `json:"policy"`
			ModelledRelease string `json:"modelled_release"`
		} `json:"results"`
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"recorded": "", "menu+kernel=6.12": "6.12", "menu+kernel=6.12.117": "6.12.117", "teo": "6.18.44", "oracle": ""}
	for _, res := range rep.Results {
		if w, ok := want[res.Policy]; !ok || res.ModelledRelease != w {
			t.Errorf("%s: modelled_release %q, want %q", res.Policy, res.ModelledRelease, w)
		}
	}
	var notes []string
	for _, n := range rep.Notes {
		if strings.Contains(n, "as released") {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "menu+kernel=6.12 models Linux 6.12 as released (6.12.0)") {
		t.Errorf("release notes %q, want one for menu+kernel=6.12", notes)
	}
}

// TestWhatifTEOFormNote: a teo policy whose release runs util-awareness
// (6.3–6.10), replayed as 6.11's, says so; one modelled as its release
// runs it (6.1's form, the recorded 6.18's) does not.
func TestWhatifTEOFormNote(t *testing.T) {
	r := runBin(t, "whatif", "../../testdata/demo.trace", "--format", "json",
		"--policy", "teo", "--policy", "teo+kernel=6.1", "--policy", "teo+kernel=6.6", "--policy", "menu+kernel=6.6")
	if r.code != 0 {
		t.Fatalf("whatif: exit %d: %s", r.code, r.stderr)
	}
	var rep struct {
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range rep.Notes {
		if strings.Contains(n, "util-awareness") {
			got = append(got, n)
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "teo+kernel=6.6: teo of Linux 6.6 (6.3–6.10) is not modelled") {
		t.Errorf("util-awareness notes %q, want one, for teo+kernel=6.6", got)
	}
}
