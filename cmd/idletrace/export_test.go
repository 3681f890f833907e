package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// readTable reads an exported CSV table: its header and rows.
func readTable(t *testing.T, data []byte) ([]string, [][]string) {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("exported CSV: %v (%d records)", err, len(recs))
	}
	return recs[0], recs[1:]
}

// col finds a column by name.
func col(t *testing.T, header []string, name string) int {
	t.Helper()
	for i, h := range header {
		if h == name {
			return i
		}
	}
	t.Fatalf("no column %s in %v", name, header)
	return -1
}

// statsUsage is stats' usage per CPU and the IO requests it counts, from
// its JSON.
func statsUsage(t *testing.T, path string) (map[string]uint64, uint64) {
	t.Helper()
	r := runBin(t, "stats", path, "--format", "json")
	if r.code != 0 {
		t.Fatalf("stats %s: %s", path, r.stderr)
	}
	var s struct {
		CPUs []struct {
			CPU    int `json:"cpu"`
			States []struct {
				Usage uint64 `json:"usage"`
			} `json:"states"`
		} `json:"cpus"`
		IO struct {
			Requests uint64 `json:"requests"`
		} `json:"io"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	usage := map[string]uint64{}
	for _, c := range s.CPUs {
		for _, st := range c.States {
			usage[fmt.Sprint(c.CPU)] += st.Usage
		}
	}
	return usage, s.IO.Requests
}

// TestExport: export writes the three tables in each format to -o DIR with a
// one-line summary, refuses to overwrite them without --force, writes one
// CSV table to stdout, exports a trace cut short with a warning (what
// stats counts of it, the tables count too), and leaves no partial table
// behind when it fails.
func TestExport(t *testing.T) {
	usage, ioRequests := statsUsage(t, bundledTrace)
	for _, format := range []string{"csv", "parquet"} {
		t.Run(format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tables")
			r := runBin(t, "export", bundledTrace, "--format", format, "-o", dir)
			idle, io, qos := filepath.Join(dir, "idle_periods."+format), filepath.Join(dir, "io_requests."+format), filepath.Join(dir, "pm_qos_changes."+format)
			// The bundled trace's PM QoS: no limits at its start, no change.
			want := fmt.Sprintf("idletrace export: 78448 idle periods to %s, 58723 IO requests to %s, 3 PM QoS limits and changes to %s\n", idle, io, qos)
			if r.code != 0 || r.stderr != want || r.stdout != "" {
				t.Fatalf("exit %d, stderr %q, stdout %.80q; want exit 0 and stderr %q", r.code, r.stderr, r.stdout, want)
			}
			before, _ := os.ReadFile(io)
			if r := runBin(t, "export", bundledTrace, "--format", format, "-o", dir); r.code != 2 || !strings.Contains(r.stderr, "--force") {
				t.Errorf("again without --force: exit %d, %q", r.code, r.stderr)
			}
			if after, _ := os.ReadFile(io); !bytes.Equal(before, after) {
				t.Errorf("a refused export changed %s", io)
			}
			if r := runBin(t, "export", bundledTrace, "--format", format, "-o", dir, "--force", "-q", "--table", "io_requests", "--from", "1s"); r.code != 0 || r.stderr != "" {
				t.Errorf("--force -q: exit %d, %q", r.code, r.stderr)
			}
			if after, _ := os.ReadFile(io); bytes.Equal(before, after) {
				t.Errorf("--force --from 1s left %s as it was", io)
			}
			if format == "parquet" {
				for _, p := range []string{idle, io, qos} {
					data, _ := os.ReadFile(p)
					f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
					if err != nil {
						t.Fatalf("%s: %v", p, err)
					}
					t.Logf("%s: %d rows, %d columns, %d bytes", filepath.Base(p), f.NumRows(), len(f.Schema().Columns()), len(data))
				}
			}
		})
	}

	t.Run("one CSV table to stdout", func(t *testing.T) {
		r := runBin(t, "export", bundledTrace, "--format", "csv", "--table", "idle_periods", "-q")
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		header, rows := readTable(t, []byte(r.stdout))
		cpu, counted, in := col(t, header, "cpu"), col(t, header, "counted"), col(t, header, "in_stats_window")
		got := map[string]uint64{}
		for _, row := range rows {
			if row[counted] == "true" && row[in] == "true" {
				got[row[cpu]]++
			}
		}
		if len(rows) != 78448 || fmt.Sprint(got) != fmt.Sprint(usage) {
			t.Errorf("%d rows, usage per CPU %v; want 78448 rows and stats' %v", len(rows), got, usage)
		}
		r = runBin(t, "export", bundledTrace, "--format", "csv", "--table", "io_requests")
		header, rows = readTable(t, []byte(r.stdout))
		in = col(t, header, "in_stats_window")
		var n uint64
		for _, row := range rows {
			if row[in] == "true" {
				n++
			}
		}
		if r.code != 0 || n != ioRequests {
			t.Errorf("io_requests to stdout: exit %d, %d requests in the window; stats %d", r.code, n, ioRequests)
		}
	})

	t.Run("trace cut short", func(t *testing.T) {
		good, err := os.ReadFile(bundledTrace)
		if err != nil {
			t.Fatal(err)
		}
		cut := writeFile(t, "cut.trace", good[:len(good)*6/10])
		cutUsage, cutIO := statsUsage(t, cut)
		dir := t.TempDir()
		r := runBin(t, "export", cut, "--format", "csv", "-o", dir, "-q")
		if r.code != 0 || !strings.Contains(r.stderr, "warning: trace") || !strings.Contains(r.stderr, "truncated") {
			t.Fatalf("exit %d, stderr %q: want 0 and the reader's warning", r.code, r.stderr)
		}
		data, _ := os.ReadFile(filepath.Join(dir, "idle_periods.csv"))
		header, rows := readTable(t, data)
		cpu, counted, in := col(t, header, "cpu"), col(t, header, "counted"), col(t, header, "in_stats_window")
		got := map[string]uint64{}
		for _, row := range rows {
			if row[counted] == "true" && row[in] == "true" {
				got[row[cpu]]++
			}
		}
		data, _ = os.ReadFile(filepath.Join(dir, "io_requests.csv"))
		header, ios := readTable(t, data)
		in = col(t, header, "in_stats_window")
		var gotIO uint64
		for _, row := range ios {
			if row[in] == "true" {
				gotIO++
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(cutUsage) || gotIO != cutIO || len(rows) == 0 || len(rows) >= 78448 {
			t.Errorf("%d rows, usage %v and %d IO requests; stats on the cut trace: %v and %d", len(rows), got, gotIO, cutUsage, cutIO)
		}
	})

	t.Run("no partial table", func(t *testing.T) {
		dir := t.TempDir()
		// io_requests.csv is a link into a directory that does not exist:
		// its table cannot be created after idle_periods.csv was.
		if err := os.Symlink(filepath.Join(dir, "gone", "io.csv"), filepath.Join(dir, "io_requests.csv")); err != nil {
			t.Fatal(err)
		}
		r := runBin(t, "export", bundledTrace, "--format", "csv", "-o", dir, "--force")
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "io_requests.csv") {
			t.Errorf("exit %d, stderr %q: want exit 1 and one line naming io_requests.csv", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "idle_periods.csv")); err == nil {
			t.Errorf("the failed export left idle_periods.csv behind")
		}
	})

	t.Run("a window past the records", func(t *testing.T) {
		r := runBin(t, "export", bundledTrace, "--format", "csv", "-o", t.TempDir(), "--from", "100s", "-q")
		if r.code != 0 || r.stderr != "warning: no record in the window: the trace's records end 2.71s after its start\n" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		// A window over the records that writes no row of the table asked
		// for is no empty window.
		if r := runBin(t, "export", bundledTrace, "--format", "csv", "--table", "pm_qos_changes", "--from", "1s", "--to", "2s", "-q"); r.code != 0 || r.stderr != "" {
			t.Errorf("pm_qos_changes over 1s-2s: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("a trace with no records", func(t *testing.T) {
		dir := t.TempDir()
		r := runBin(t, "export", emptyTrace(t), "--format", "parquet", "-o", dir)
		if r.code != 0 || !strings.Contains(r.stderr, "0 idle periods") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		data, _ := os.ReadFile(filepath.Join(dir, "io_requests.parquet"))
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("empty io_requests.parquet: %v", err)
		}
		if f.NumRows() != 0 || len(f.Schema().Columns()) != 23 {
			t.Errorf("empty io_requests.parquet: %d rows, %d columns", f.NumRows(), len(f.Schema().Columns()))
		}
	})
}

// TestExportSummaryToStdout: the one-line summary goes to stderr also
// when the export itself goes to stdout, and -q drops it (a new user
// found none without -o, against the README).
func TestExportSummaryToStdout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "csv", "--table", "io_requests"}, "idletrace export: 58723 IO requests to stdout\n"},
		{[]string{"--format", "ftrace"}, "idletrace export: 78448 idle periods and 58723 IO requests as 352790 ftrace events to stdout\n"},
		{[]string{"--format", "ftrace", "-q"}, ""},
	} {
		res := runBin(t, append([]string{"export", bundledTrace}, tc.args...)...)
		if res.code != 0 || res.stderr != tc.want || res.stdout == "" {
			t.Errorf("%v: exit %d, stderr %q (want %q), %d bytes on stdout", tc.args, res.code, res.stderr, tc.want, len(res.stdout))
		}
	}
}
