// Command matrixreport turns the results of scripts/kernel-matrix.sh (one
// directory per kernel, written by scripts/kernel-matrix-steps.sh) into the
// matrix table, testdata/kernel-matrix.{json,md} and the README's
// requirements section; with -check it compares instead of writing. With
// -lab-write or -lab-check it does the same for the lab's rows (lab.go).
//
//	go run ./scripts/matrixreport [-write|-check] -out testdata/kernel-matrix -readme README.md NAME=DIR...
//	go run ./scripts/matrixreport [-lab-write|-lab-check] -lab-out testdata/lab-rows -readme README.md RESULTS.json...
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Row is one kernel's result.
type Row struct {
	Target   string `json:"target"` // host, or the Debian series booted
	Kernel   string `json:"kernel"` // uname -r
	Package  string `json:"package,omitempty"`
	Machine  string `json:"machine"`
	BTF      bool   `json:"btf"`
	HZ       string `json:"hz"`
	NoHZ     string `json:"nohz"`
	Driver   string `json:"cpuidle_driver"`
	Governor string `json:"cpuidle_governor"`
	States   string `json:"cpuidle_states"`
	// Checks: name -> "pass", "skip: why" or "fail: why".
	Checks  map[string]string `json:"checks"`
	Referee map[string]string `json:"referee"` // subtest -> PASS/FAIL/SKIP
	// RefereeNotes: skip reasons and failure lines, for the Markdown report.
	RefereeNotes []string          `json:"referee_notes,omitempty"`
	Probes       map[string]string `json:"probes"`
	Inputs       map[string]bool   `json:"inputs"`
	Config       map[string]string `json:"config"`
	Seconds      int               `json:"seconds"`
	Pass         bool              `json:"pass"`
}

// Matrix is testdata/kernel-matrix.json.
type Matrix struct {
	Date string `json:"date"`
	Rows []Row  `json:"rows"`
}

// checkNames are the checks every row runs, in table order.
var checkNames = []string{"referee", "record", "stats", "classic", "no-btf"}

// configKeys are the kernel options the report shows.
var configKeys = []string{"CONFIG_DEBUG_INFO_BTF", "CONFIG_BPF_EVENTS", "CONFIG_CPU_IDLE", "CONFIG_HALTPOLL_CPUIDLE",
	"CONFIG_CPU_IDLE_GOV_HALTPOLL", "CONFIG_INTEL_IDLE", "CONFIG_ACPI_PROCESSOR_IDLE", "CONFIG_FPROBE"}

func main() {
	write := flag.Bool("write", false, "write the JSON, Markdown and README section")
	check := flag.Bool("check", false, "compare with the committed JSON and README instead of writing")
	out := flag.String("out", "testdata/kernel-matrix", "path prefix of the .json and .md results")
	readme := flag.String("readme", "README.md", "README whose requirements section is generated")
	labWrite := flag.Bool("lab-write", false, "write the lab rows' JSON, Markdown and README section from the lab tests' results")
	labCheck := flag.Bool("lab-check", false, "hold the lab tests' results to the committed lab rows instead of writing")
	labOut := flag.String("lab-out", "testdata/lab-rows", "path prefix of the lab rows' .json and .md")
	labBy := flag.String("lab-by", "`make test-lab`", "what ran the rows, in Markdown, for the README's line (-lab-write)")
	flag.Parse()
	if *labWrite || *labCheck {
		// The lab's results are not a kernel matrix: one mode per run.
		if *labWrite == *labCheck || *write || *check {
			fail("give one of -lab-write and -lab-check, without -write or -check")
		}
		os.Exit(labMain(*labWrite, *labOut, *readme, *labBy, flag.Args()))
	}
	if *write == *check {
		fail("give one of -write and -check")
	}
	var rows []Row
	for _, a := range flag.Args() {
		name, dir, ok := strings.Cut(a, "=")
		if !ok {
			fail("argument %q is not NAME=DIR", a)
		}
		rows = append(rows, readRow(name, dir))
	}
	m := Matrix{Date: time.Now().UTC().Format("2006-01-02"), Rows: rows}
	fmt.Print(consoleTable(rows))

	bad := 0
	for _, r := range rows {
		if !r.Pass {
			bad++
		}
	}
	if *write {
		b, _ := json.MarshalIndent(m, "", "  ")
		must(os.WriteFile(*out+".json", append(b, '\n'), 0o644))
		must(os.WriteFile(*out+".md", []byte(markdownReport(m)), 0o644))
		text, err := os.ReadFile(*readme)
		must(err)
		updated, err := ReplaceSection(string(text), ReadmeSection(m))
		must(err)
		must(os.WriteFile(*readme, []byte(updated), 0o644))
		fmt.Printf("wrote %s.json, %s.md and the requirements section of %s\n", *out, *out, *readme)
	} else {
		var old Matrix
		b, err := os.ReadFile(*out + ".json")
		must(err)
		must(json.Unmarshal(b, &old))
		if diffs := CompareRows(old.Rows, rows); len(diffs) > 0 {
			fmt.Printf("the matrix differs from %s.json (what the README states):\n  %s\n"+
				"run make test-kernels as root and commit %s.{json,md} and %s\n", *out, strings.Join(diffs, "\n  "), *out, *readme)
			bad++
		}
		text, err := os.ReadFile(*readme)
		must(err)
		if got, err := Section(string(text)); err != nil || got != ReadmeSection(old) {
			fmt.Printf("%s: the requirements section is not the one %s.json gives (run make test-kernels)\n", *readme, *out)
			bad++
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "matrixreport: "+f+"\n", a...)
	os.Exit(2)
}

func must(err error) {
	if err != nil {
		fail("%v", err)
	}
}

// readKV reads matrix.txt: one "key=value" per line (values may hold spaces).
func readKV(path string) map[string]string {
	kv := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return kv
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			kv[k] = v
		}
	}
	return kv
}

type info struct {
	Metadata struct {
		Probes map[string]string `json:"probes"`
		Inputs map[string]bool   `json:"inputs"`
		HZ     int               `json:"hz"`
		NoHZ   string            `json:"nohz"`
	} `json:"metadata"`
	End *struct {
		IdlePeriods uint64 `json:"idle_periods"`
		BlockIOs    uint64 `json:"block_ios"`
	} `json:"end"`
}

func readInfo(path string) (*info, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var in info
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return &in, nil
}

var (
	runLine    = regexp.MustCompile(`^=== RUN\s+(\S+)`)
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	logLine    = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)
)

// readReferee reads go test -v output: each test's verdict, and the log
// lines of those that failed or skipped.
func readReferee(path string) (map[string]string, []string) {
	verdicts := map[string]string{}
	var notes []string
	b, err := os.ReadFile(path)
	if err != nil {
		return verdicts, nil
	}
	logs := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		if m := runLine.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if m := resultLine.FindStringSubmatch(line); m != nil {
			verdicts[m[2]] = m[1]
			if m[1] != "PASS" {
				for _, l := range logs[m[2]] {
					notes = append(notes, m[2]+": "+l)
				}
			}
			continue
		}
		if m := logLine.FindStringSubmatch(line); m != nil && cur != "" {
			logs[cur] = append(logs[cur], m[1])
		}
	}
	return verdicts, notes
}

func readConfig(path string) map[string]string {
	cfg := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil || path == "" {
		return cfg
	}
	have := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			have[k] = v
		} else if strings.HasPrefix(line, "# CONFIG_") && strings.HasSuffix(line, " is not set") {
			have[strings.Fields(line)[1]] = "n"
		}
	}
	for _, k := range configKeys {
		if v, ok := have[k]; ok {
			cfg[k] = v
		} else {
			cfg[k] = "n"
		}
	}
	return cfg
}

func readRow(name, dir string) Row {
	kv := readKV(filepath.Join(dir, "matrix.txt"))
	r := Row{
		Target: name, Kernel: kv["kernel"], Package: kv["package"], Machine: kv["machine"],
		BTF: kv["btf"] == "yes", Driver: kv["cpuidle_driver"], Governor: kv["cpuidle_governor"], States: kv["cpuidle_states"],
		Checks: map[string]string{}, Config: readConfig(kv["config_file"]),
	}
	r.Seconds, _ = strconv.Atoi(kv["total_s"])
	if kv["steps"] != "done" {
		why := "the run did not finish"
		if kv["qemu_rc"] == "124" {
			why = "the VM timed out"
		}
		for _, c := range checkNames {
			r.Checks[c] = "fail: " + why
		}
		return r
	}
	r.Referee, r.RefereeNotes = readReferee(filepath.Join(dir, "referee.log"))
	r.Checks["referee"] = verdict(kv["referee_rc"] == "0" && len(r.Referee) > 0, "go test exit status "+kv["referee_rc"])

	rec, err := readInfo(filepath.Join(dir, "record-info.json"))
	switch {
	case kv["record_rc"] != "0":
		r.Checks["record"] = "fail: exit status " + kv["record_rc"] + ": " + firstLine(filepath.Join(dir, "record.err"))
	case err != nil:
		r.Checks["record"] = "fail: idletrace info: " + err.Error()
	case rec.End == nil || rec.End.IdlePeriods == 0:
		r.Checks["record"] = "fail: no idle periods recorded"
	case rec.End.BlockIOs == 0:
		r.Checks["record"] = "fail: no block IO recorded"
	default:
		r.Checks["record"] = "pass"
	}
	if rec != nil {
		r.Probes, r.Inputs = rec.Metadata.Probes, rec.Metadata.Inputs
		r.NoHZ = rec.Metadata.NoHZ
		if rec.Metadata.HZ > 0 {
			r.HZ = strconv.Itoa(rec.Metadata.HZ)
		}
	}
	r.Checks["stats"] = verdict(kv["stats_rc"] == "0" && statsOK(filepath.Join(dir, "stats.json")), "exit status "+kv["stats_rc"])

	if cl, err := readInfo(filepath.Join(dir, "classic-info.json")); kv["classic_rc"] != "0" || err != nil {
		r.Checks["classic"] = "fail: exit status " + kv["classic_rc"] + ": " + firstLine(filepath.Join(dir, "classic.err"))
	} else {
		r.Checks["classic"] = "pass"
		for p, m := range cl.Metadata.Probes {
			if m != "tracepoint" && !strings.HasPrefix(m, "missing") {
				r.Checks["classic"] = fmt.Sprintf("fail: %s attached as %s", p, m)
			}
		}
	}

	if _, ok := kv["nobtf_rc"]; !ok {
		r.Checks["no-btf"] = "skip: the kernel has no BTF to hide"
	} else {
		msg := firstLine(filepath.Join(dir, "nobtf.err"))
		switch {
		case kv["nobtf_rc"] != "1":
			r.Checks["no-btf"] = "fail: without BTF, record exited with " + kv["nobtf_rc"] + ", not 1"
		case kv["nobtf_lines"] != "1" || !strings.Contains(msg, "CONFIG_DEBUG_INFO_BTF") || !strings.Contains(msg, "--kernel-btf"):
			r.Checks["no-btf"] = "fail: the error is not one line naming CONFIG_DEBUG_INFO_BTF and --kernel-btf: " + msg
		case kv["nobtf_file"] != "none":
			r.Checks["no-btf"] = "fail: a trace file was left behind"
		case kv["kbtf_rc"] != "0":
			r.Checks["no-btf"] = "fail: --kernel-btf with a copy of the BTF: exit status " + kv["kbtf_rc"] + ": " + firstLine(filepath.Join(dir, "kbtf.err"))
		default:
			r.Checks["no-btf"] = "pass"
		}
	}
	r.Pass = true
	for _, c := range checkNames {
		r.Pass = r.Pass && !strings.HasPrefix(r.Checks[c], "fail")
	}
	return r
}

func statsOK(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var s struct {
		DurationNs int64 `json:"duration_ns"`
	}
	return json.Unmarshal(b, &s) == nil && s.DurationNs > 0
}

func verdict(ok bool, why string) string {
	if ok {
		return "pass"
	}
	return "fail: " + why
}

func firstLine(path string) string {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// CompareRows lists the differences between two results in what the project
// promises: the kernels run, whether each passed, every check's and committed
// referee test's verdict (a test added since counts if it fails), BTF, the kernel options the report shows, how each probe
// attached and which optional inputs were there. Not the identity of the
// machine it ran on: kernel point releases and builds, timings, the machine,
// the date, and for the host row its cpuidle driver, governor and states
// (machines of this project's kind differ: no driver, or haltpoll) and the
// referee tests that skip or run by that driver (for the host only a
// failure counts), nor the host's kernel options other than the required
// ones (its build may differ).
func CompareRows(old, cur []Row) []string {
	var d []string
	byTarget := map[string]Row{}
	for _, r := range old {
		byTarget[r.Target] = r
	}
	for _, r := range cur {
		o, ok := byTarget[r.Target]
		if !ok {
			d = append(d, r.Target+": not in the committed matrix")
			continue
		}
		delete(byTarget, r.Target)
		cmp := func(what string, a, b any) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if !bytes.Equal(ja, jb) {
				d = append(d, fmt.Sprintf("%s %s: committed %s, now %s", r.Target, what, ja, jb))
			}
		}
		host := r.Target == "host"
		cmp("pass", o.Pass, r.Pass)
		for _, c := range checkNames {
			cmp(c, short(o.Checks[c]), short(r.Checks[c]))
		}
		cmp("referee failures", refereeFailures(o.Referee), refereeFailures(r.Referee))
		if !host {
			cmp("referee", o.Referee, committedTests(o.Referee, r.Referee))
			cmp("cpuidle driver", o.Driver+" "+o.States, r.Driver+" "+r.States)
		}
		cmp("btf", o.BTF, r.BTF)
		cmp("kernel options", promisedConfig(o, host), promisedConfig(r, host))
		cmp("probes", o.Probes, r.Probes)
		cmp("inputs", o.Inputs, r.Inputs)
	}
	for t := range byTarget {
		d = append(d, t+": in the committed matrix, not run now")
	}
	slices.Sort(d)
	return d
}

// requiredConfig are the kernel options the README lists as requirements.
var requiredConfig = []string{"CONFIG_DEBUG_INFO_BTF", "CONFIG_BPF_EVENTS", "CONFIG_CPU_IDLE"}

// promisedConfig is the part of a row's kernel options CompareRows holds it
// to: every option shown for a Debian kernel, the required ones for the host.
func promisedConfig(r Row, host bool) map[string]string {
	keys := configKeys
	if host {
		keys = requiredConfig
	}
	m := map[string]string{}
	for _, k := range keys {
		if v, ok := r.Config[k]; ok {
			m[k] = v
		}
	}
	return m
}

// committedTests are the verdicts now of the referee tests the committed row
// has ("" for one that did not run): a test added since counts only if it
// fails (refereeFailures).
func committedTests(committed, now map[string]string) map[string]string {
	m := map[string]string{}
	for t := range committed {
		m[t] = now[t]
	}
	return m
}

// refereeFailures are the referee tests that failed, sorted.
func refereeFailures(verdicts map[string]string) []string {
	f := []string{}
	for t, v := range verdicts {
		if v == "FAIL" {
			f = append(f, t)
		}
	}
	slices.Sort(f)
	return f
}

// short is a check's verdict without its explanation.
func short(s string) string {
	v, _, _ := strings.Cut(s, ":")
	return v
}

func label(r Row) string {
	if r.Kernel == "" {
		return r.Target + " (no result)"
	}
	if r.Target == "host" {
		return "host " + r.Kernel
	}
	return r.Kernel
}

// attach summarises how the probes attached: "tp_btf 16/17, missing: ipi:*".
func attach(r Row) string {
	count := map[string]int{}
	var missing, fentry []string
	for p, m := range r.Probes {
		switch {
		case strings.HasPrefix(m, "missing"):
			missing = append(missing, p)
		case m == "fentry":
			fentry = append(fentry, p)
		default:
			count[m]++
		}
	}
	slices.Sort(missing)
	slices.Sort(fentry)
	var parts []string
	for _, m := range []string{"tp_btf", "tracepoint"} {
		if count[m] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", m, count[m], len(r.Probes)))
		}
	}
	if len(fentry) > 0 {
		parts = append(parts, "fentry for "+strings.Join(fentry, " "))
	}
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, " "))
	}
	if len(parts) == 0 {
		return "?"
	}
	return strings.Join(parts, ", ")
}

// inputNames orders Metadata.Inputs for display.
var inputNames = []struct{ key, name, needs string }{
	{"wake_causes", "wake causes", "`irq:irq_handler_entry`, `irq_vectors:*_entry` (x86)"},
	{"wake_requests", "remote wake requests", "`sched:sched_waking`, and the IPI sends: `ipi:ipi_send_cpu*` (Linux 6.6+), before 6.6 fentry on x86's `native_smp_send_reschedule`, `native_send_call_func_*ipi`"},
	{"tick_state", "tick state at entry", "`timer:hrtimer_expire_entry`, `hrtimer_bases` and `tick_cpu_sched` in BTF's per-CPU section, `struct tick_sched` in BTF"},
	{"tick_state_before", "tick state before the governor's choice", "the above and `timer:tick_stop`"},
	{"next_timer", "next timer event", "as tick state"},
	{"tick_wakeups", "tick wake-ups", "as tick state, and `irq_vectors:local_timer_entry`"},
	{"poll_time_limit", "poll time limit reached", "`irq`, `irq_vectors`, `sched:sched_wake_idle_without_ipi` tracepoints"},
	{"block_io", "block IO", "`block:block_rq_issue`, `block:block_rq_complete`"},
	{"haltpoll_trace", "haltpoll poll-window changes", "`power:guest_halt_poll_ns`"},
	{"pm_qos_trace", "PM QoS limit changes", "`power:pm_qos_*_request`, `power:dev_pm_qos_*_request`, `power:pm_qos_update_target`"},
}

func missingInputs(r Row) string {
	var miss []string
	for _, in := range inputNames {
		if have, ok := r.Inputs[in.key]; ok && !have {
			miss = append(miss, in.name)
		}
	}
	if len(miss) == 0 {
		return "none"
	}
	return strings.Join(miss, ", ")
}

func driver(r Row) string {
	if r.Driver == "" {
		return "?"
	}
	if r.Driver == "none" {
		return "none"
	}
	return fmt.Sprintf("%s (%s)", r.Driver, strings.ReplaceAll(r.States, ",", ", "))
}

// refereeSubtests are the referee's checks, as the table shows them.
var refereeSubtests = []string{"cpuidle-counters", "block-stat", "wake-causes", "wake-latency"}

func refereeCell(r Row) string {
	var parts []string
	for _, s := range refereeSubtests {
		v := r.Referee["TestKernelReferee/"+s]
		if v == "" {
			v = "-"
		}
		parts = append(parts, strings.ToLower(v))
	}
	return strings.Join(parts, " / ")
}

func result(r Row) string {
	if r.Pass {
		return "PASS"
	}
	var failed []string
	for _, c := range checkNames {
		if strings.HasPrefix(r.Checks[c], "fail") {
			failed = append(failed, c)
		}
	}
	return "FAIL (" + strings.Join(failed, ", ") + ")"
}

// rowCells are the cells the console table and the Markdown report share,
// from "result" to "inputs missing".
func rowCells(r Row) []string {
	return []string{result(r), driver(r), refereeCell(r), short(r.Checks["record"]), short(r.Checks["stats"]),
		short(r.Checks["classic"]), short(r.Checks["no-btf"]), attach(r), missingInputs(r)}
}

func consoleTable(rows []Row) string {
	head := []string{"kernel", "result", "cpuidle driver", "referee counters/block/wakes/latency", "record", "stats", "classic", "no BTF", "attach", "inputs missing", "s"}
	cells := [][]string{head}
	for _, r := range rows {
		cells = append(cells, append(append([]string{label(r)}, rowCells(r)...), strconv.Itoa(r.Seconds)))
	}
	width := make([]int, len(head))
	for _, row := range cells {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	b.WriteString("\nkernel matrix\n")
	for n, row := range cells {
		for i, c := range row {
			fmt.Fprintf(&b, "%-*s", width[i]+2, c)
		}
		b.WriteString("\n")
		if n == 0 {
			for i := range row {
				b.WriteString(strings.Repeat("-", width[i]) + "  ")
			}
			b.WriteString("\n")
		}
	}
	for _, r := range rows {
		for _, c := range checkNames {
			if strings.HasPrefix(r.Checks[c], "fail") {
				fmt.Fprintf(&b, "%s %s: %s\n", label(r), c, r.Checks[c])
			}
		}
		for _, n := range r.RefereeNotes {
			fmt.Fprintf(&b, "%s referee: %s\n", label(r), n)
		}
	}
	return b.String()
}

func markdownReport(m Matrix) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Kernel matrix, %s\n\nWritten by `scripts/kernel-matrix.sh` (`make test-kernels`); the README's requirements section is generated from `kernel-matrix.json`.\n\n", m.Date)
	b.WriteString("| kernel | machine | result | cpuidle driver | referee: counters / block / wakes / wake latency | record | stats | classic fallback | no BTF | attach | inputs missing |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range m.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", label(r), r.Machine, strings.Join(rowCells(r), " | "))
	}
	for _, r := range m.Rows {
		fmt.Fprintf(&b, "\n## %s\n\n", label(r))
		if r.Package != "" {
			fmt.Fprintf(&b, "Debian package `%s`. ", r.Package)
		}
		fmt.Fprintf(&b, "%s; HZ=%s, NO_HZ=%s; BTF: %v; cpuidle driver %s, governor %s; %d s.\n\n", r.Machine, orQ(r.HZ), orQ(r.NoHZ), r.BTF, driver(r), orQ(r.Governor), r.Seconds)
		for _, c := range checkNames {
			fmt.Fprintf(&b, "- %s: %s\n", c, r.Checks[c])
		}
		for _, n := range r.RefereeNotes {
			fmt.Fprintf(&b, "- referee: %s\n", n)
		}
		var keys []string
		for k := range r.Probes {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("\n| probe | attached as |\n|---|---|\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "| `%s` | %s |\n", k, r.Probes[k])
		}
		var cfg []string
		for _, k := range configKeys {
			if v, ok := r.Config[k]; ok {
				cfg = append(cfg, fmt.Sprintf("`%s=%s`", strings.TrimPrefix(k, "CONFIG_"), v))
			}
		}
		if len(cfg) > 0 {
			fmt.Fprintf(&b, "\nConfig: %s.\n", strings.Join(cfg, ", "))
		}
	}
	return b.String()
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

const (
	sectionBegin = "<!-- kernel-matrix: begin (generated by scripts/kernel-matrix.sh from testdata/kernel-matrix.json) -->"
	sectionEnd   = "<!-- kernel-matrix: end -->"
)

// ReadmeSection renders the README's requirements section from a matrix.
func ReadmeSection(m Matrix) string {
	var b strings.Builder
	var tested []string
	for _, r := range m.Rows {
		if v := upstreamVersion(r); v != "" {
			tested = append(tested, v)
		}
	}
	b.WriteString(sectionBegin + "\n\n")
	b.WriteString("| need | why |\n|---|---|\n")
	fmt.Fprintf(&b, "| Linux ≥ 5.12 (tested: %s) | BPF ring buffer (5.8), atomic exchange and compare-and-exchange in BPF programs (5.12) |\n", strings.Join(tested, ", "))
	b.WriteString("| root, or CAP_BPF + CAP_PERFMON | loading and attaching BPF programs |\n")
	b.WriteString("| `CONFIG_BPF_SYSCALL`, `CONFIG_BPF_EVENTS` | BPF programs on tracepoints |\n")
	b.WriteString("| `CONFIG_DEBUG_INFO_BTF=y`, or `--kernel-btf FILE` | CO-RE relocations and tp_btf; without either, `record` exits with one line naming both (checked on every kernel below with /sys/kernel/btf hidden) |\n")
	b.WriteString("| tracefs | only for the classic-tracepoint fallback (`--classic-tracepoints`, or a tracepoint whose BTF prototype differs) |\n")
	b.WriteString("| `CONFIG_CPU_IDLE` with a cpuidle driver | per-state counters to check against; without one the kernel idles in its default routine, traced as state 1, and stats say there is nothing to compare |\n")
	b.WriteString("\nOptional inputs: a kernel without one records without it, says so once, and marks it unavailable in the trace.\n\n")
	b.WriteString("| input | needs |")
	for _, r := range m.Rows {
		b.WriteString(" " + label(r) + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(m.Rows)) + "\n")
	for _, in := range inputNames {
		fmt.Fprintf(&b, "| %s | %s |", in.name, in.needs)
		for _, r := range m.Rows {
			v, ok := r.Inputs[in.key]
			switch {
			case !ok:
				b.WriteString(" ? |")
			case v:
				b.WriteString(" yes |")
			default:
				b.WriteString(" no |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nTested on (`make test-kernels`, %s; details in `testdata/kernel-matrix.md`):\n\n", m.Date)
	b.WriteString("| kernel | machine | BTF | HZ | cpuidle driver | attach | referee: counters / block / wakes / wake latency | record, stats, classic, no BTF | result |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range m.Rows {
		var checks []string
		for _, c := range checkNames[1:] {
			checks = append(checks, short(r.Checks[c]))
		}
		btf := "no"
		if r.BTF {
			btf = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(r), r.Machine, btf, orQ(r.HZ), driver(r), attach(r), refereeCell(r), strings.Join(checks, ", "), result(r))
	}
	b.WriteString("\nThe host row is the machine this section was last written on (`make test-kernels`). " +
		"Machines of this project's kind differ in kernel build and cpuidle driver (none, or haltpoll), " +
		"so the CI check (`CI=true make test-kernels`) compares each kernel with what is promised here " +
		"(the kernels run, their kernel options, how each probe attaches, which inputs are there, every check's pass or fail) " +
		"and not with the identity of the machine it runs on: the host's kernel build, cpuidle driver " +
		"and the referee checks that run or skip by it (only a failure counts), timings and the date.\n")
	b.WriteString("\n" + sectionEnd)
	return b.String()
}

// upstreamVersion is the kernel's upstream version: from the Debian package
// version (linux-image-6.1.0-57-cloud-amd64-unsigned_6.1.192-3_amd64 is
// 6.1.192), else from the release (6.18.44-fc-v657 is 6.18.44).
func upstreamVersion(r Row) string {
	if _, ver, ok := strings.Cut(r.Package, "_"); ok {
		v, _, _ := strings.Cut(ver, "-")
		return v
	}
	v, _, _ := strings.Cut(r.Kernel, "-")
	v, _, _ = strings.Cut(v, "+")
	return v
}

// Section returns the generated section of a README.
func Section(readme string) (string, error) {
	i := strings.Index(readme, sectionBegin)
	j := strings.Index(readme, sectionEnd)
	if i < 0 || j < i {
		return "", errors.New("no kernel-matrix section markers")
	}
	return readme[i : j+len(sectionEnd)], nil
}

// ReplaceSection puts section in place of the README's generated one.
func ReplaceSection(readme, section string) (string, error) {
	old, err := Section(readme)
	if err != nil {
		return "", err
	}
	return strings.Replace(readme, old, section, 1), nil
}
