package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fleetCheck is the script DuckDB runs (scripts/duckdb; make test and
// .ci/run install its package).
const fleetCheck = "../../scripts/duckdb/fleet.mjs"

// fleetSize is how many synthetic hosts TestFleetDuckDB summarises.
const fleetSize = 1000

// TestFleetDuckDB: 1,000 synthetic traces from distinct hosts (varied CPU
// counts, state tables and lengths, some without block IO, kernel counters
// or wake requests, some cut short), each summarised by stats and whatif
// to its own JSON lines and Parquet files, are read back by DuckDB, a
// reader that shares nothing with idletrace, through one glob per
// directory: it must count the rows and add up the sums and per-host
// values pkg/analysis computes of the traces directly. The README's
// DuckDB queries run on the same files. Under make test and in CI it must
// run: it fails (never skips) without Node.js or the package.
func TestFleetDuckDB(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(filepath.Dir(fleetCheck), "node_modules", "@duckdb", "node-api"))
	}
	if err != nil {
		// Not a kernel feature: nothing excuses it (make deps-test installs it).
		t.Fatalf("DuckDB's check cannot run (run `make deps-test`: it installs node and @duckdb/node-api in scripts/duckdb): %v", err)
	}
	start := time.Now()
	dir := t.TempDir()
	traces := filepath.Join(dir, "traces")
	for _, d := range []string{"traces", "fleet/stats", "fleet/whatif", "jsonl/stats", "jsonl/whatif"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// What pkg/analysis says of each trace, and the rows.
	var want struct {
		stateRows, traceRows, usage, timeNs, kernelUsage, kernelRows, wake, io, ioTraces, taskWaited int64
		periods, tickStopped, tickKnown, tickBefore, tickBeforeKnown, kernelTickStops                int64
		whatifRows, idlePeriods, above                                                               int64
		hosts, shares                                                                                []string
	}
	var stateRows, totalRows int
	for i := range fleetSize {
		sp := specOf(i)
		path := sp.write(t, traces)
		s := statsOf(t, path)
		stats, whatif, rep := rowsOf(t, path, "")
		var hostTime, hostWake int64
		hostWakeSet := false
		kernelTicks, kernelTicksAll := int64(0), len(s.CPUs) > 0
		for _, c := range s.CPUs {
			want.periods += int64(c.Periods)
			want.tickStopped += int64(c.TickStopped.Stopped)
			want.tickKnown += int64(c.TickStopped.Known)
			want.tickBefore += int64(c.TickStoppedBefore.Stopped)
			want.tickBeforeKnown += int64(c.TickStoppedBefore.Known)
			if c.KernelTickStops == nil {
				kernelTicksAll = false
			} else {
				kernelTicks += int64(*c.KernelTickStops)
			}
			for _, st := range c.States {
				want.stateRows++
				want.usage += int64(st.Usage)
				want.timeNs += int64(st.TimeNs)
				hostTime += int64(st.TimeNs)
			}
		}
		if s.Kernel.Available {
			for _, c := range s.Kernel.CPUs {
				for _, st := range c.States {
					want.kernelUsage += int64(st.Usage)
					want.kernelRows++
				}
			}
		}
		for _, l := range s.WakeLatencyNs {
			want.wake += int64(l.Count)
			if l.Count > 0 {
				hostWake, hostWakeSet = max(hostWake, int64(l.Max)), true
			}
		}
		if kernelTicksAll {
			want.kernelTickStops += kernelTicks
		}
		want.traceRows++
		hostIO := "null"
		if s.Inputs.BlockIO {
			want.io += int64(s.IO.Requests)
			want.ioTraces++
			hostIO = fmt.Sprint(s.IO.Requests)
			if s.Inputs.TaskIO {
				want.taskWaited += int64(s.IO.TaskWaited)
			}
		}
		wakeMax := "null"
		if hostWakeSet {
			wakeMax = fmt.Sprint(hostWake)
		}
		want.hosts = append(want.hosts, fmt.Sprintf("%s %d %s %s", sp.host, hostTime, wakeMax, hostIO))
		for _, res := range rep.Results {
			want.whatifRows++
			want.idlePeriods += int64(res.IdlePeriods)
			want.above += int64(res.Above)
		}
		share := "null"
		if v, ok := rep.Results[2].StateShare["C1"]; ok && rep.Results[2].Policy == "oracle" {
			share = fmt.Sprint(v)
		}
		want.shares = append(want.shares, sp.host+" "+share)

		for _, format := range Formats {
			base := filepath.Join(dir, "fleet")
			if format == JSONL {
				base = filepath.Join(dir, "jsonl")
			}
			writeRows(t, filepath.Join(base, "stats", sp.host+"."+format), format, stats)
			writeRows(t, filepath.Join(base, "whatif", sp.host+"."+format), format, whatif)
		}
		stateRows += len(stats) - 1
		totalRows += len(stats) + len(whatif)
	}
	written := time.Since(start)

	// The README's DuckDB queries, to run on the same files.
	sqlFile := filepath.Join(dir, "readme.sql")
	queries := readmeQueries(t, "DuckDB")
	if len(queries) < 2 {
		t.Fatalf("README.md's Fleets section has %d DuckDB queries (```sql blocks opening with -- DuckDB), want at least 2", len(queries))
	}
	if err := os.WriteFile(sqlFile, []byte(strings.Join(queries, ";\n")+";\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, fleetCheck, dir, sqlFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	js, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", fleetCheck, err, stderr.String())
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatalf("%s: %v in %s", fleetCheck, err, js)
	}
	for _, format := range Formats {
		var g struct {
			Stats struct {
				StateRows   string `json:"state_rows"`
				TraceRows   string `json:"trace_rows"`
				Hosts       string `json:"hosts"`
				Traces      string `json:"traces"`
				Usage       string `json:"usage"`
				TimeNs      string `json:"time_ns"`
				KernelUsage string `json:"kernel_usage"`
				KernelRows  string `json:"kernel_rows"`
				Wake        string `json:"wake_count"`
				IO          string `json:"io_requests"`
				IOTraces    string `json:"io_traces"`
				TaskWaited  string `json:"task_io_waited"`
				// Every idle period twice: per trace, and per CPU and state.
				IdlePeriods     string `json:"idle_periods"`
				StatePeriods    string `json:"state_periods"`
				TickStopped     string `json:"tick_stopped"`
				TickKnown       string `json:"tick_stopped_known"`
				TickBefore      string `json:"tick_stopped_before"`
				TickBeforeKnown string `json:"tick_stopped_before_known"`
				KernelTickStops string `json:"kernel_tick_stops"`
			} `json:"stats"`
			Hosts []struct {
				Host      string  `json:"host"`
				TimeNs    string  `json:"time_ns"`
				WakeMaxNs *string `json:"wake_max_ns"`
				IO        *string `json:"io_requests"`
			} `json:"hosts"`
			Whatif struct {
				Rows        string `json:"rows"`
				Hosts       string `json:"hosts"`
				IdlePeriods string `json:"idle_periods"`
				Above       string `json:"above"`
			} `json:"whatif"`
			Shares []struct {
				Host string   `json:"host"`
				C1   *float64 `json:"c1"`
			} `json:"shares"`
		}
		if err := json.Unmarshal(got[format], &g); err != nil {
			t.Fatalf("%s: %v in %s", format, err, got[format])
		}
		what := "DuckDB on the " + format + " files"
		gs := g.Stats
		gotStats := joined(gs.StateRows, gs.TraceRows, gs.Hosts, gs.Traces, gs.Usage, gs.TimeNs, gs.KernelUsage, gs.KernelRows, gs.Wake, gs.IO, gs.IOTraces, gs.TaskWaited)
		wantStats := joined(want.stateRows, want.traceRows, fleetSize, fleetSize, want.usage, want.timeNs, want.kernelUsage, want.kernelRows, want.wake, want.io, want.ioTraces, want.taskWaited)
		if gotStats != wantStats {
			t.Errorf("%s: stats (state rows, trace rows, hosts, traces, usage, time_ns, kernel_usage, kernel rows, wake-ups, IO requests, IO traces, task IO waited)\n got %s\nwant %s (pkg/analysis)", what, gotStats, wantStats)
		}
		gotPeriods := joined(gs.IdlePeriods, gs.StatePeriods, gs.TickStopped, gs.TickKnown, gs.TickBefore, gs.TickBeforeKnown, gs.KernelTickStops)
		if wantPeriods := joined(want.periods, want.periods, want.tickStopped, want.tickKnown, want.tickBefore, want.tickBeforeKnown, want.kernelTickStops); gotPeriods != wantPeriods {
			t.Errorf("%s: idle periods per trace and per state row, tick stopped, known, before, known, kernel tick stops\n got %s\nwant %s (pkg/analysis)", what, gotPeriods, wantPeriods)
		}
		var gotHosts []string
		for _, h := range g.Hosts {
			gotHosts = append(gotHosts, fmt.Sprintf("%s %s %s %s", h.Host, h.TimeNs, orNull(h.WakeMaxNs), orNull(h.IO)))
		}
		if d := firstDiff(gotHosts, want.hosts); d != "" {
			t.Errorf("%s: per host (time_ns, max wake latency, IO requests): %s", what, d)
		}
		gw := g.Whatif
		if got, want := joined(gw.Rows, gw.Hosts, gw.IdlePeriods, gw.Above), joined(want.whatifRows, fleetSize, want.idlePeriods, want.above); got != want {
			t.Errorf("%s: whatif (rows, hosts, idle periods, above) %s, the replays %s", what, got, want)
		}
		var gotShares []string
		for _, s := range g.Shares {
			v := "null"
			if s.C1 != nil {
				v = fmt.Sprint(*s.C1)
			}
			gotShares = append(gotShares, s.Host+" "+v)
		}
		if d := firstDiff(gotShares, want.shares); d != "" {
			t.Errorf("%s: per host, oracle's share of C1: %s", what, d)
		}
		if !t.Failed() {
			t.Logf("%s: %s state and %s trace rows of %s hosts, usage %s, time %s ns, %s IO requests, %s whatif rows: as pkg/analysis", what, gs.StateRows, gs.TraceRows, gs.Hosts, gs.Usage, gs.TimeNs, gs.IO, gw.Rows)
		}
	}
	var qs []struct {
		SQL     string `json:"sql"`
		Rows    int    `json:"rows"`
		Creates bool   `json:"creates"`
	}
	if err := json.Unmarshal(got["queries"], &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) != len(queries) {
		t.Errorf("DuckDB ran %d of the README's %d queries", len(qs), len(queries))
	}
	for _, q := range qs {
		if q.Rows == 0 && !q.Creates {
			t.Errorf("the README's query %q gives no row on the fleet", q.SQL)
		}
	}
	if stateRows != int(want.stateRows) {
		t.Errorf("%d state rows written, stats has %d CPU states", stateRows, want.stateRows)
	}
	checkQueryScript(t, node, dir, sqlFile, fmt.Sprint(want.periods))
	t.Logf("%d traces, %d rows in %d files: written in %v, DuckDB's reading and the README's %d queries %v", fleetSize, totalRows, 4*fleetSize, written.Round(time.Millisecond), len(qs), (time.Since(start) - written).Round(time.Millisecond))
}

// checkQueryScript: scripts/duckdb/query.mjs, which the README gives for
// running its queries without a duckdb CLI, prints their results as
// tables: a query of its own (the fleet's idle periods) with its comment
// as the title, then the README's, one table each; a bad statement is
// DuckDB's message and the statement's first line on stderr, and exit 1.
func checkQueryScript(t *testing.T, node, dir, readmeSQL, periods string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(filepath.Dir(fleetCheck), "query.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	own := "-- the fleet's idle periods\nSELECT sum(idle_periods) AS periods FROM read_parquet('fleet/stats/*.parquet');\n"
	readme, err := os.ReadFile(readmeSQL)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, "-C", dir, "-")
	cmd.Stdin = strings.NewReader(own + string(readme))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("query.mjs: %v: %s", err, out)
	}
	if want := "-- the fleet's idle periods\nperiods\n-------\n" + periods + "\n(1 row)\n"; !strings.HasPrefix(string(out), want) {
		t.Errorf("query.mjs printed\n%s\nwant it to begin\n%s", firstLines(string(out), 6), want)
	}
	if n, want := strings.Count(string(out), "\n(")-1, strings.Count(string(readme), "SELECT")-strings.Count(string(readme), "CREATE VIEW"); n != want {
		t.Errorf("query.mjs printed %d tables of the README's queries, want %d", n, want)
	}
	cmd = exec.Command(node, script, "-C", dir, "-")
	cmd.Stdin = strings.NewReader("SELECT nosuchcolumn FROM read_parquet('fleet/stats/*.parquet');\n")
	out, err = cmd.CombinedOutput()
	if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") > 1 || !strings.Contains(string(out), "nosuchcolumn") {
		t.Errorf("query.mjs on a bad statement: %v, %q; want exit 1 and a line naming it", err, out)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

func writeRows[R Row](t *testing.T, path, format string, rows []R) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter[R](f, format, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// joined is the values, space-separated.
func joined(vals ...any) string { return strings.TrimSuffix(fmt.Sprintln(vals...), "\n") }

func orNull(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// firstDiff describes the first difference between two lists, "" if none.
func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("row %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d rows, want %d", len(got), len(want))
	}
	return ""
}
