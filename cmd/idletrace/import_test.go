package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// statsStates is stats --format json's usage and time per CPU and state.
func statsStates(t *testing.T, path string) map[[2]int][2]uint64 {
	t.Helper()
	res := runBin(t, "stats", path, "--format", "json")
	if res.code != 0 {
		t.Fatalf("stats %s: exit %d: %s", path, res.code, res.stderr)
	}
	var doc struct {
		CPUs []struct {
			CPU    int `json:"cpu"`
			States []struct {
				Index  int    `json:"index"`
				Usage  uint64 `json:"usage"`
				TimeNs uint64 `json:"time_ns"`
			} `json:"states"`
		} `json:"cpus"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[[2]int][2]uint64{}
	for _, c := range doc.CPUs {
		for _, s := range c.States {
			if s.Usage > 0 {
				out[[2]int{c.CPU, s.Index}] = [2]uint64{s.Usage, s.TimeNs}
			}
		}
	}
	return out
}

// export --format ftrace --stats-window, then import: stats agrees per CPU
// and state, says which inputs the import carries, and whatif accepts it.
func TestImportCommandRoundTrip(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "demo.txt")
	if res := runBin(t, "export", bundledTrace, "--format", "ftrace", "--stats-window", "-o", text); res.code != 0 {
		t.Fatalf("export: %s", res.stderr)
	}
	res := runBin(t, "import", text)
	if res.code != 0 {
		t.Fatalf("import: exit %d: %s", res.code, res.stderr)
	}
	imported := filepath.Join(dir, "demo.trace")
	if !strings.Contains(res.stderr, "78422 idle periods, 58723 IO requests on 2 CPUs to "+imported) {
		t.Errorf("import's summary: %s", res.stderr)
	}
	want, got := statsStates(t, bundledTrace), statsStates(t, imported)
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("states: import %v, original %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("CPU %d state %d: import %v, original %v (usage, ns)", k[0], k[1], got[k], w)
		}
	}
	st := runBin(t, "stats", imported)
	// The export writes the wake events (and lists them in its header):
	// the import carries wake causes, not the tick (no hrtimer events)
	// nor wake requests.
	if !strings.Contains(st.stdout, "wake causes yes, wake requests no") || !strings.Contains(st.stdout, "tick wake-ups no") || !strings.Contains(st.stdout, "of them woke an idle CPU (") {
		t.Errorf("stats on the import does not say what is unknown:\n%s", st.stdout)
	}
	// The text trace has no next timer: menu's and teo's rows are
	// estimates, and the report says so.
	if res := runBin(t, "whatif", imported, "--profile", "icx", "--format", "json"); res.code != 0 || !strings.Contains(res.stdout, "estimates, not replays") {
		t.Errorf("whatif on the import: exit %d, no note that menu's and teo's rows are estimates: %s", res.code, res.stderr)
	}
	// The export carries haltpoll's parameters and the governor; a capture
	// without them (the export's line taken out) says its haltpoll policies
	// assumed the module's defaults.
	if want := runBin(t, "info", bundledTrace); !strings.Contains(want.stdout, "haltpoll:") ||
		!strings.Contains(runBin(t, "info", imported).stdout, lineOf(want.stdout, "haltpoll:")) {
		t.Errorf("the import does not carry the recording's haltpoll parameters (%q)", lineOf(want.stdout, "haltpoll:"))
	}
	data, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.HasPrefix(l, "# idletrace haltpoll:") {
			kept = append(kept, l)
		}
	}
	bare := filepath.Join(dir, "bare.trace")
	if res := runBin(t, "import", writeFile(t, "bare.txt", []byte(strings.Join(kept, ""))), "-o", bare, "-q"); res.code != 0 {
		t.Fatalf("import without the haltpoll line: %s", res.stderr)
	}
	const assumed = "haltpoll policies assumed the module's defaults"
	for _, tc := range []struct {
		path string
		want bool
	}{{bare, true}, {imported, false}, {bundledTrace, false}} {
		res := runBin(t, "whatif", tc.path, "--profile", "icx", "--policy", "haltpoll", "--format", "json")
		if res.code != 0 || strings.Contains(res.stdout, assumed) != tc.want {
			t.Errorf("whatif --policy haltpoll on %s: exit %d, the note on assumed parameters present %v, want %v: %s", tc.path, res.code, !tc.want, tc.want, res.stderr)
		}
	}
	if res := runBin(t, "import", text); res.code != 2 || !strings.Contains(res.stderr, "--force") {
		t.Errorf("import over an existing trace: exit %d: %s", res.code, res.stderr)
	}
	res = runBin(t, "import", text, "-o", filepath.Join(dir, "icx.trace"), "--profile", "icx", "-q")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("import --profile icx -q: exit %d: %q", res.code, res.stderr)
	}
	if info := runBin(t, "info", filepath.Join(dir, "icx.trace")); !strings.Contains(info.stdout, "C6") {
		t.Errorf("the profile's states are not in the trace:\n%s", info.stdout)
	}
}

// TestImportCutLastLineWarns: a capture cut short in its last line
// imports, and stderr names the line left out.
func TestImportCutLastLineWarns(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "cut.txt")
	capture := "  swapper 0 [000] 1.000000: power:cpu_idle: state=1 cpu_id=0\n" +
		"  swapper 0 [000] 1.000100: power:cpu_idle: state=4294967295 cpu_id=0\n" +
		"  swapper 0 [000] 1.000"
	if err := os.WriteFile(in, []byte(capture), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runBin(t, "import", in, "-o", filepath.Join(dir, "cut.trace"))
	if r.code != 0 || !strings.Contains(r.stderr, `warning: the last line has no newline (the capture was cut short): left out: "  swapper 0 [000] 1.000"`) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// Bad input: one line naming the file and line, exit 1, no trace left.
func TestImportCommandErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := "  swapper 0 [000] 1.000000: power:cpu_idle: state=1 cpu_id=0\n"
	garbage := write("garbage.txt", good+"\x00\x01 binary junk\n")
	truncated := write("trunc.txt", good+"  swapper 0 [000] 1.000\n"+good) // a line cut inside the capture
	empty := write("empty.txt", "")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"garbage", []string{"import", garbage}, 1, garbage + ":2: not an event line"},
		{"truncated", []string{"import", truncated}, 1, truncated + ":2: not an event line"},
		{"empty", []string{"import", empty}, 1, "no event lines"},
		{"missing", []string{"import", filepath.Join(dir, "none.txt")}, 1, "no such file"},
		{"bad format", []string{"import", garbage, "--format", "csv"}, 2, "--format"},
		{"recorded profile", []string{"import", garbage, "--profile", "recorded"}, 2, "records no state table"},
		{"unknown profile", []string{"import", garbage, "--profile", "nosuchcpu"}, 2, "nosuchcpu"},
		{"no file", []string{"import"}, 2, "missing trace FILE"},
		{"unknown event", []string{"import", garbage, "--events", "irq:irq_handler_entry,timer:tick_stop"}, 2, `--events: event "timer:tick_stop": not one whose presence the import uses`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := runBin(t, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) || strings.Count(res.stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line with %q", res.code, res.stderr, tc.code, tc.want)
			}
		})
	}
	for _, n := range []string{"garbage.trace", "trunc.trace", "empty.trace"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Errorf("%s left behind after a failed import", n)
		}
	}
}

// lineOf is the line of s that starts, after blanks, with prefix; "" if none.
func lineOf(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
