package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/idletrace/idletrace/pkg/fleet"
	"github.com/idletrace/idletrace/pkg/trace"
)

// hostlessTrace is a short trace whose metadata names no host, as an
// import's does.
func hostlessTrace(t *testing.T) string {
	meta := &trace.Metadata{FormatVersion: trace.FormatVersion, KernelRelease: "6.18.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0}, CPUIdleDriver: "none"}
	return writeTrace(t, "hostless.trace", meta, &trace.End{StopReason: "duration"}, func(w *trace.Writer) error {
		for i := range uint64(20) {
			if err := w.AddIdle(&trace.IdlePeriod{CPU: 0, State: 1, EntryNs: 1000 + i*100_000, ExitNs: 50_000 + i*100_000, WakeIRQ: -1}); err != nil {
				return err
			}
		}
		return nil
	})
}

// jsonRows are the JSON lines of a fleet file, each decoded.
func jsonRows(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		rows = append(rows, m)
	}
	return rows
}

// TestFleetFormats: stats and whatif write fleet rows for several traces
// in one run, keyed by host (--host overriding the trace's) and trace.
func TestFleetFormats(t *testing.T) {
	dir := t.TempDir()
	second := filepath.Join(dir, "second.trace")
	data, err := os.ReadFile(bundledTrace)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, data, 0o644); err != nil {
		t.Fatal(err)
	}
	hostless := hostlessTrace(t)
	for _, tc := range []struct {
		name      string
		args      []string
		rows      int               // JSON lines on stdout (0: none)
		kinds     map[string]int    // rows per kind
		traces    []string          // the trace column, in order of appearance
		host      string            // every row's host
		wantCols  []fleet.Column    // every row's keys
		wantValue map[string]string // a column of the trace rows
	}{
		{"stats of two traces", []string{"stats", "--format", "jsonl", bundledTrace, second}, 6, map[string]int{"state": 4, "trace": 2},
			[]string{bundledTrace, second}, "vm", fleet.StatsColumns, map[string]string{"io_requests": "58723", "idle_periods": "78422"}},
		{"stats --host", []string{"stats", "--format", "jsonl", "--host", "db-17", bundledTrace}, 3, map[string]int{"state": 2, "trace": 1},
			[]string{bundledTrace}, "db-17", fleet.StatsColumns, nil},
		{"stats of a trace naming no host, with --host", []string{"stats", "--format", "jsonl", "--host", "imported-1", hostless}, 2, map[string]int{"state": 1, "trace": 1},
			[]string{hostless}, "imported-1", fleet.StatsColumns, map[string]string{"io_requests": "<nil>", "recorded_start_unix_ns": "<nil>"}},
		{"stats --io", []string{"stats", "--format", "jsonl", "--io", "op=write", bundledTrace}, 3, map[string]int{"state": 2, "trace": 1},
			[]string{bundledTrace}, "vm", fleet.StatsColumns, map[string]string{"io_filter": "op=write"}},
		{"whatif of two traces, three policies", []string{"whatif", "--format", "jsonl", "--policy", "recorded", "--policy", "menu+poll=min10us", "--policy", "oracle", bundledTrace, second}, 6, map[string]int{"policy": 6},
			[]string{bundledTrace, second}, "vm", fleet.WhatifColumns, nil},
		{"whatif default policies, --host", []string{"whatif", "--format", "jsonl", "--host", "web-3", bundledTrace}, 2, map[string]int{"policy": 2},
			[]string{bundledTrace}, "web-3", fleet.WhatifColumns, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, tc.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			rows := jsonRows(t, r.stdout)
			if len(rows) != tc.rows {
				t.Fatalf("%d rows, want %d", len(rows), tc.rows)
			}
			kinds := map[string]int{}
			var traces []string
			for _, row := range rows {
				kinds[row["kind"].(string)]++
				if tr := row["trace"].(string); len(traces) == 0 || traces[len(traces)-1] != tr {
					traces = append(traces, tr)
				}
				if row["host"] != tc.host {
					t.Errorf("host %v, want %s", row["host"], tc.host)
				}
				if len(row) != len(tc.wantCols) {
					t.Errorf("%d keys, the schema has %d columns", len(row), len(tc.wantCols))
				}
				for _, c := range tc.wantCols {
					if _, ok := row[c.Name]; !ok {
						t.Errorf("no %s", c.Name)
					}
				}
				if row["kind"] == "trace" {
					for col, want := range tc.wantValue {
						if got := strings.TrimSuffix(jsonValue(row[col]), ".0"); got != want {
							t.Errorf("%s %s, want %s", col, got, want)
						}
					}
				}
			}
			if len(kinds) != len(tc.kinds) || strings.Join(traces, " ") != strings.Join(tc.traces, " ") {
				t.Errorf("rows per kind %v, traces %v; want %v, %v", kinds, traces, tc.kinds, tc.traces)
			}
			for k, n := range tc.kinds {
				if kinds[k] != n {
					t.Errorf("%d %s rows, want %d", kinds[k], k, n)
				}
			}
		})
	}
}

func jsonValue(v any) string {
	if v == nil {
		return "<nil>"
	}
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

// TestFleetParquet: -o writes one Parquet file for several traces, with
// a summary line; the rows are the JSON lines' rows.
func TestFleetParquet(t *testing.T) {
	data, err := os.ReadFile(bundledTrace)
	if err != nil {
		t.Fatal(err)
	}
	second := writeFile(t, "second.trace", data) // the same trace twice is refused
	for _, tc := range []struct {
		cmd   string
		args  []string
		rows  int64
		table string
	}{
		{"stats", nil, 6, fleet.StatsTable},
		{"whatif", []string{"--policy", "recorded", "--policy", "oracle"}, 4, fleet.WhatifTable},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "fleet.parquet")
			args := append([]string{tc.cmd, "--format", "parquet", "-o", out, bundledTrace, second}, tc.args...)
			r := runBin(t, args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if want := "idletrace " + tc.cmd + ": " + jsonValue(tc.rows) + " rows from 2 traces to " + out + "\n"; r.stderr != want || r.stdout != "" {
				t.Errorf("stderr %q, want %q; stdout %q", r.stderr, want, r.stdout)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := f.Lookup("idletrace.table"); f.NumRows() != tc.rows || v != tc.table {
				t.Errorf("%d rows, table %q; want %d, %s", f.NumRows(), v, tc.rows, tc.table)
			}
			jl := runBin(t, append([]string{tc.cmd, "--format", "jsonl", bundledTrace, second}, tc.args...)...)
			if n := int64(len(jsonRows(t, jl.stdout))); n != f.NumRows() {
				t.Errorf("Parquet %d rows, JSON lines %d", f.NumRows(), n)
			}
			// Again without --force: refused, the file as it was.
			if r := runBin(t, args...); r.code != 2 || !strings.Contains(r.stderr, "--force") {
				t.Errorf("over an existing file: exit %d, %q", r.code, r.stderr)
			}
			if again, _ := os.ReadFile(out); !bytes.Equal(again, data) {
				t.Error("a refused run changed the file")
			}
			if r := runBin(t, append(args, "--force")...); r.code != 0 {
				t.Errorf("--force: exit %d, %q", r.code, r.stderr)
			}
		})
	}
}

// TestFleetFlagErrors: mistakes in the invocation are one line and exit 2,
// a bad trace among several one line naming it and exit 1, with no output
// left behind.
func TestFleetFlagErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := writeFile(t, "garbage.trace", []byte("not a trace\n"))
	out := filepath.Join(dir, "out.parquet")
	data, err := os.ReadFile(bundledTrace)
	if err != nil {
		t.Fatal(err)
	}
	traceCopy := writeFile(t, "copy.trace", data)
	otherCopy := writeFile(t, "other.trace", data)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"Parquet to stdout", []string{"stats", "--format", "parquet", bundledTrace}, 2, "give -o FILE"},
		{"whatif Parquet to stdout", []string{"whatif", "--format", "parquet", bundledTrace}, 2, "give -o FILE"},
		{"bad format", []string{"stats", "--format", "csv", bundledTrace}, 2, `--format "csv": must be one of text, markdown, json, jsonl, parquet`},
		{"whatif bad format", []string{"whatif", "--format", "ndjson", bundledTrace}, 2, "jsonl, parquet"},
		{"no file", []string{"stats", "--format", "jsonl"}, 2, "missing trace FILE"},
		{"text of two files", []string{"stats", bundledTrace, bundledTrace}, 2, "expected one trace FILE, got 2"},
		{"json of two files", []string{"stats", "--format", "json", bundledTrace, bundledTrace}, 2, "expected one trace FILE"},
		{"whatif html of two files", []string{"whatif", "--format", "html", "-o", filepath.Join(dir, "r.html"), bundledTrace, bundledTrace}, 2, "expected one trace FILE"},
		{"--host with text", []string{"stats", "--host", "x", bundledTrace}, 2, "--host keys the rows of --format jsonl and parquet"},
		{"--host with whatif json", []string{"whatif", "--format", "json", "--host", "x", bundledTrace}, 2, "--host"},
		{"--measured with jsonl", []string{"whatif", "--format", "jsonl", "--policy", "menu", "--measured", bundledTrace, bundledTrace}, 2, "--measured"},
		{"bad policy", []string{"whatif", "--format", "jsonl", "--policy", "schedutil", bundledTrace}, 2, "schedutil"},
		{"bad IO filter", []string{"stats", "--format", "jsonl", "--io", "colour=red", bundledTrace}, 2, `unknown key "colour"`},
		{"output is an input", []string{"stats", "--format", "parquet", "-o", traceCopy, "--force", bundledTrace, traceCopy}, 2, "is the trace being read"},
		{"a bad trace among several", []string{"stats", "--format", "parquet", "-o", out, bundledTrace, garbage, otherCopy}, 1, garbage + ": "},
		{"a trace named twice", []string{"stats", "--format", "jsonl", bundledTrace, otherCopy, "./" + filepath.Clean(bundledTrace)}, 2,
			"are the same trace: its rows would be written twice"},
		{"a trace and a link to it", []string{"whatif", "--format", "jsonl", otherCopy, linkTo(t, otherCopy)}, 2,
			"are the same trace: its rows would be written twice"},
		{"whatif: a bad trace among several", []string{"whatif", "--format", "parquet", "-o", out, bundledTrace, garbage}, 1, garbage},
		{"a missing trace", []string{"stats", "--format", "jsonl", "/nonexistent/x.trace"}, 1, "/nonexistent/x.trace"},
		{"a trace naming no host", []string{"stats", "--format", "parquet", "-o", out, bundledTrace, hostlessTrace(t)}, 1, "names no host (an imported capture?): give --host NAME"},
		{"a trace without records", []string{"whatif", "--format", "parquet", "--host", "x", "-o", out, emptyTrace(t)}, 1, "holds no idle period and no block IO request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, tc.args...)
			if got, _ := os.ReadFile(traceCopy); !bytes.Equal(got, data) {
				t.Fatal("a refused run wrote over the trace it read")
			}
			if r.code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, tc.code, r.stderr)
			}
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want one line naming %q", r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
				t.Errorf("panic: %s", r.stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed run left %s behind", out)
				os.Remove(out)
			}
		})
	}
}
