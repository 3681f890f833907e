package export

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestColumns: the Parquet schema (the row structs' tags), the CSV header
// and Columns (the README's schema) name the same columns in one order,
// and a column may be NULL exactly where Columns says so.
func TestColumns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cols    []Column
		schema  *parquet.Schema
		rowType reflect.Type
	}{
		{IdlePeriods, IdlePeriodColumns, parquet.SchemaOf(IdlePeriodRow{}), reflect.TypeOf(IdlePeriodRow{})},
		{IORequests, IORequestColumns, parquet.SchemaOf(IORequestRow{}), reflect.TypeOf(IORequestRow{})},
		{PMQoSChanges, PMQoSChangeColumns, parquet.SchemaOf(PMQoSChangeRow{}), reflect.TypeOf(PMQoSChangeRow{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields := tc.schema.Fields()
			if len(fields) != len(tc.cols) || tc.rowType.NumField() != len(tc.cols) {
				t.Fatalf("%d columns documented, %d in the Parquet schema, %d fields", len(tc.cols), len(fields), tc.rowType.NumField())
			}
			for i, c := range tc.cols {
				f := fields[i]
				if f.Name() != c.Name {
					t.Errorf("column %d: documented %s, Parquet %s", i, c.Name, f.Name())
				}
				if null := strings.HasSuffix(c.Type, " or NULL"); null != f.Optional() {
					t.Errorf("%s: documented %q, Parquet optional %v", c.Name, c.Type, f.Optional())
				}
				if strings.HasSuffix(c.Name, "_ns") != (c.Unit == "ns") || strings.HasSuffix(c.Name, "_us") != (c.Unit == "µs") ||
					strings.HasSuffix(c.Name, "_bytes") != (c.Unit == "bytes") {
					t.Errorf("%s: unit %q does not match the name", c.Name, c.Unit)
				}
				goType := strings.TrimSuffix(c.Type, " or NULL")
				ft := tc.rowType.Field(i).Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind().String() != goType {
					t.Errorf("%s: documented %s, Go %s", c.Name, goType, ft.Kind())
				}
			}
		})
	}
}

// fill sets every field of the struct v points at: integers to distinct
// values, booleans true, strings to text CSV must quote; pointers to such
// values unless null.
func fill(v reflect.Value, null bool) []string {
	var want []string
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer {
			if null {
				want = append(want, "")
				continue
			}
			f.Set(reflect.New(f.Type().Elem()))
			f = f.Elem()
		}
		switch f.Kind() {
		case reflect.Int32, reflect.Int64:
			f.SetInt(int64(-1000 - i))
			want = append(want, strconv.Itoa(-1000-i))
		case reflect.Bool:
			f.SetBool(true)
			want = append(want, "true")
		case reflect.String:
			s := fmt.Sprintf("x,\"%d\"\n", i)
			f.SetString(s)
			want = append(want, s)
		}
	}
	return want
}

// TestCSVRows: a row's CSV line holds its fields in the columns' order,
// quoted where needed, NULL as an empty field.
func TestCSVRows(t *testing.T) {
	for _, null := range []bool{false, true} {
		var idle IdlePeriodRow
		var ior IORequestRow
		var qos PMQoSChangeRow
		for _, tc := range []struct {
			name string
			want []string
			line []byte
		}{
			{IdlePeriods, fill(reflect.ValueOf(&idle).Elem(), null), appendIdleCSV(nil, &idle)},
			{IORequests, fill(reflect.ValueOf(&ior).Elem(), null), appendIOCSV(nil, &ior)},
			{PMQoSChanges, fill(reflect.ValueOf(&qos).Elem(), null), appendQoSCSV(nil, &qos)},
		} {
			got, err := csv.NewReader(bytes.NewReader(tc.line)).Read()
			if err != nil {
				t.Fatalf("%s: %v in %q", tc.name, err, tc.line)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s (NULLs %v): CSV fields\n%q\nwant\n%q", tc.name, null, got, tc.want)
			}
		}
	}
	if got := string(appendStr(nil, new(string))); got != `""` {
		t.Errorf("an empty string is written %s, not as NULL's empty field", got)
	}
}

// TestTablesAddUpToStats: on the bundled real trace and on a synthetic one
// with every input, the rows read back from the CSV and, independently,
// from the Parquet files add up to what stats reports: per CPU and state
// usage, residency, above and below; wake latency counts; IO requests and
// those that woke an idle CPU; what lies outside the window. The two files
// hold the same rows.
func TestTablesAddUpToStats(t *testing.T) {
	synth := writeSynth(t, t.TempDir(), 30_000)
	for _, path := range []string{bundledTrace, synth} {
		s := statsOf(t, path)
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		idleRecords, ioRecords := recordCounts(r)
		r.Close()
		byFormat := map[string]exported{}
		for _, format := range Formats {
			e := exportTrace(t, path, format, Options{})
			byFormat[format] = e
			what := fmt.Sprintf("%s, %s", path, format)
			if uint64(len(e.idle)) != idleRecords-s.Invalid || uint64(len(e.io)) != ioRecords {
				t.Errorf("%s: %d idle and %d IO rows, the trace holds %d and %d records", what, len(e.idle), len(e.io), idleRecords, ioRecords)
			}
			checkAgainstStats(t, what, sumRows(t, e.idle, e.io), s)
			if !slices.Equal(e.idleHeader, columnNames(IdlePeriodColumns)) || !slices.Equal(e.ioHeader, columnNames(IORequestColumns)) {
				t.Errorf("%s: headers %v, %v", what, e.idleHeader, e.ioHeader)
			}
		}
		c, p := byFormat["csv"], byFormat["parquet"]
		for i := range c.idle {
			if !sameRow(c.idle[i], p.idle[i]) {
				t.Fatalf("%s: idle row %d: CSV %v, Parquet %v", path, i, show(c.idle[i]), show(p.idle[i]))
			}
		}
		for i := range c.io {
			if !sameRow(c.io[i], p.io[i]) {
				t.Fatalf("%s: IO row %d: CSV %v, Parquet %v", path, i, show(c.io[i]), show(p.io[i]))
			}
		}
		if n := len(p.idleFile.RowGroups()); n != (len(p.idle)+RowGroupRows-1)/RowGroupRows {
			t.Errorf("%s: %d idle rows in %d row groups of at most %d", path, len(p.idle), n, RowGroupRows)
		}
		if v, ok := p.ioFile.Lookup("idletrace.table"); !ok || v != IORequests {
			t.Errorf("%s: io_requests.parquet names its table %q", path, v)
		}
	}
}

func columnNames(cols []Column) []string {
	var out []string
	for _, c := range cols {
		out = append(out, c.Name)
	}
	return out
}

func sameRow(a, b row) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || (v == nil) != (w == nil) || (v != nil && *v != *w) {
			return false
		}
	}
	return true
}

func show(r row) map[string]string {
	out := map[string]string{}
	for k, v := range r {
		if v == nil {
			out[k] = "NULL"
		} else {
			out[k] = *v
		}
	}
	return out
}

// TestNulls: what the trace lacks is NULL, never zero.
func TestNulls(t *testing.T) {
	synth := exportTrace(t, writeSynth(t, t.TempDir(), 3_000), "parquet", Options{})
	count := func(rows []row, f func(row) bool) int {
		n := 0
		for _, r := range rows {
			if f(r) {
				n++
			}
		}
		return n
	}
	demo := exportTrace(t, bundledTrace, "csv", Options{})
	for _, tc := range []struct {
		name      string
		rows      []row
		got, want func(row) bool
	}{
		// The demo trace: no cpuidle driver, so no table and no kernel counters; no task IO.
		{"no state table: above", demo.idle, func(r row) bool { return r.null("above") && r.null("below") }, func(row) bool { return true }},
		{"no kernel counters", demo.idle, func(r row) bool { return r.null("kernel_residency_ns") && r.null("aborted_before") }, func(row) bool { return true }},
		{"no task IO", demo.io, func(r row) bool { return r.null("tid") && r.null("comm") && r.null("task_latency_ns") }, func(row) bool { return true }},
		{"wake causes recorded", demo.idle, func(r row) bool { return !r.null("wake_cause") }, func(row) bool { return true }},
		// The synthetic trace: unknown where its records say so.
		{"tick state unknown", synth.idle, func(r row) bool { return r.null("tick_stopped") },
			func(r row) bool { return (r.int(t, "entry_ns")-900_000)/(50*us)%3 == 0 }},
		{"next timer unknown", synth.idle, func(r row) bool { return r.null("next_timer_ns") },
			func(r row) bool { return (r.int(t, "entry_ns")-900_000)/(50*us)%5 == 0 }},
		{"kernel residency only where counted", synth.idle, func(r row) bool { return !r.null("kernel_residency_ns") },
			func(r row) bool { return (r.int(t, "entry_ns")-900_000)/(50*us)%10 < 6 }},
		{"rejected entries not counted", synth.idle, func(r row) bool { return !r.is("counted") },
			func(r row) bool { return (r.int(t, "entry_ns")-900_000)/(50*us)%10 == 6 }},
		{"wake IRQ only for irq", synth.idle, func(r row) bool { return !r.null("wake_irq") }, func(r row) bool { return r.str("wake_cause") == "irq" }},
		{"poll time-out only for POLL", synth.idle, func(r row) bool { return !r.null("poll_timed_out") }, func(r row) bool { return r.str("state_name") == "POLL" }},
		{"task only where recorded", synth.io, func(r row) bool { return !r.null("tid") && !r.null("comm") }, func(r row) bool { return !r.null("task_run_ns") }},
		{"pid only where the process is known", synth.io, func(r row) bool { return !r.null("pid") },
			func(r row) bool { return !r.null("tid") && r.int(t, "sector")/8%6 != 2 }},
		{"woke_idle unknown on an unrecorded CPU", synth.io, func(r row) bool { return r.null("woke_idle") }, func(r row) bool { return r.str("complete_cpu") == "3" }},
		{"woke_idle_cause where woke", synth.io, func(r row) bool { return !r.null("woke_idle_cause") }, func(r row) bool { return r.is("woke_idle") }},
		{"device named by the trace, else MAJ:MIN", synth.io, func(r row) bool { return r.str("device") == "8:16" }, func(r row) bool { return r.str("dev_major") == "8" }},
	} {
		got, want := count(tc.rows, tc.got), count(tc.rows, tc.want)
		both := count(tc.rows, func(r row) bool { return tc.got(r) && tc.want(r) })
		if got != want || both != got || got == 0 {
			t.Errorf("%s: %d rows, want %d (%d of them the same rows)", tc.name, got, want, both)
		}
	}
	var comms []string
	for _, r := range synth.io {
		if !r.null("comm") && !slices.Contains(comms, r.str("comm")) {
			comms = append(comms, r.str("comm"))
		}
	}
	slices.Sort(comms)
	if !slices.Equal(comms, []string{`a,b "c"`, "fio"}) {
		t.Errorf("task names %q", comms)
	}
}

// TestFilters: --cpus and the time window keep exactly the rows a query
// over the whole export selects; the IO-wake answer does not change.
func TestFilters(t *testing.T) {
	path := writeSynth(t, t.TempDir(), 20_000)
	all := exportTrace(t, path, "csv", Options{})
	start := int64(synthMeta().Start.MonotonicNs)
	if all.sum.TraceStartNs != uint64(start) {
		t.Fatalf("trace start %d, want the start snapshot's %d", all.sum.TraceStartNs, start)
	}
	inCPUs := func(cpus []int, cols ...string) func(row) bool {
		return func(r row) bool {
			for _, c := range cols {
				n, _ := strconv.Atoi(r.str(c))
				if slices.Contains(cpus, n) {
					return true
				}
			}
			return false
		}
	}
	inTime := func(from, to time.Duration, col string) func(row) bool {
		return func(r row) bool {
			since := r.int(t, col) - start
			return since > from.Nanoseconds() && since <= to.Nanoseconds()
		}
	}
	and := func(fs ...func(row) bool) func(row) bool {
		return func(r row) bool {
			for _, f := range fs {
				if !f(r) {
					return false
				}
			}
			return true
		}
	}
	readOp := func(r row) bool { return r.str("op") == "read" }
	filter, err := trace.ParseIOFilter("op=read", synthMeta())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		opt      Options
		idle, io func(row) bool
	}{
		{"cpu 1", Options{CPUs: []int{1}}, inCPUs([]int{1}, "cpu"), inCPUs([]int{1}, "issue_cpu", "complete_cpu")},
		{"cpu 3 (IO only)", Options{CPUs: []int{3}}, inCPUs([]int{3}, "cpu"), inCPUs([]int{3}, "issue_cpu", "complete_cpu")},
		{"from 100ms to 300ms", Options{From: 100 * time.Millisecond, To: 300 * time.Millisecond, HasFrom: true, HasTo: true},
			inTime(100*time.Millisecond, 300*time.Millisecond, "exit_ns"), inTime(100*time.Millisecond, 300*time.Millisecond, "complete_ns")},
		{"from 0 (the start snapshot)", Options{HasFrom: true}, inTime(0, time.Hour, "exit_ns"), inTime(0, time.Hour, "complete_ns")},
		{"to 50ms", Options{To: 50 * time.Millisecond, HasTo: true}, inTime(-time.Hour, 50*time.Millisecond, "exit_ns"), inTime(-time.Hour, 50*time.Millisecond, "complete_ns")},
		{"cpu 0 from 200ms, reads", Options{CPUs: []int{0}, From: 200 * time.Millisecond, HasFrom: true, IOFilter: filter},
			and(inCPUs([]int{0}, "cpu"), inTime(200*time.Millisecond, time.Hour, "exit_ns")),
			and(inCPUs([]int{0}, "issue_cpu", "complete_cpu"), inTime(200*time.Millisecond, time.Hour, "complete_ns"), readOp)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := exportTrace(t, path, "csv", tc.opt)
			for _, side := range []struct {
				name      string
				got, rows []row
				keep      func(row) bool
			}{{IdlePeriods, got.idle, all.idle, tc.idle}, {IORequests, got.io, all.io, tc.io}} {
				var want []string
				for _, r := range side.rows {
					if side.keep(r) {
						want = append(want, fmt.Sprint(show(r)))
					}
				}
				var have []string
				for _, r := range side.got {
					have = append(have, fmt.Sprint(show(r)))
				}
				slices.Sort(want)
				slices.Sort(have)
				if (len(want) == 0 && !(tc.name == "cpu 3 (IO only)" && side.name == IdlePeriods)) || len(want) == len(side.rows) && tc.name != "from 0 (the start snapshot)" {
					t.Errorf("%s: the case keeps %d of %d rows: it tests nothing", side.name, len(want), len(side.rows))
				}
				if !slices.Equal(have, want) {
					t.Errorf("%s: %d rows, want the %d of the whole export the filter selects", side.name, len(have), len(want))
				}
			}
		})
	}
}

// sampler is an output that measures the live heap every MiB written.
type sampler struct {
	written, next int
	peak          uint64
}

func (s *sampler) Write(b []byte) (int, error) {
	s.written += len(b)
	if s.written >= s.next {
		s.next = s.written + 1<<20
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		s.peak = max(s.peak, m.HeapAlloc)
	}
	return len(b), nil
}

// TestBoundedMemory: the export's memory does not grow with the trace's
// length: four times the periods, and so four times the row groups, take
// about the same live heap.
func TestBoundedMemory(t *testing.T) {
	dir := t.TempDir()
	peaks := map[int]uint64{}
	for _, n := range []int{300_000, 1_200_000} {
		path := writeSynth(t, dir, n)
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		idle, ios := &sampler{}, &sampler{}
		sum, err := Write(r, Options{}, "parquet", map[string]io.Writer{IdlePeriods: idle, IORequests: ios})
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		peaks[n] = max(idle.peak, ios.peak)
		t.Logf("%d idle periods, %d IO requests: %.1f MiB of Parquet, live heap at most %.1f MiB",
			sum.IdlePeriods, sum.IORequests, float64(idle.written+ios.written)/(1<<20), float64(peaks[n])/(1<<20))
	}
	if peaks[1_200_000] > peaks[300_000]*5/4+(4<<20) {
		t.Errorf("live heap %d B for 1.2 M periods against %d B for 0.3 M: it grows with the trace", peaks[1_200_000], peaks[300_000])
	}
}

// TestTraceStart: without a start snapshot the window counts from the
// earliest record the chunks' headers name.
func TestTraceStart(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, &trace.Metadata{RecordedCPUs: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []trace.IdlePeriod{{EntryNs: 5000, ExitNs: 6000}, {EntryNs: 9000, ExitNs: 12000}} {
		w.AddIdle(&p)
	}
	b := trace.BlockIO{IssueNs: 3000, CompleteNs: 4000}
	w.AddBlockIO(&b)
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	r, err := trace.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := TraceStart(r); got != 3000 {
		t.Errorf("trace start %d, want 3000 (the earliest time a chunk header names: the IO request's issue)", got)
	}
}

// BenchmarkExport: rows a second, each format, on a synthetic trace.
func BenchmarkExport(b *testing.B) {
	path := writeSynth(b, b.TempDir(), 200_000)
	for _, format := range Formats {
		b.Run(format, func(b *testing.B) {
			var rows uint64
			for i := 0; i < b.N; i++ {
				r, err := trace.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				sum, err := Write(r, Options{}, format, map[string]io.Writer{IdlePeriods: io.Discard, IORequests: io.Discard})
				r.Close()
				if err != nil {
					b.Fatal(err)
				}
				rows += sum.IdlePeriods + sum.IORequests
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// duckdbCheck is the script DuckDB runs (scripts/duckdb; make test and
// .ci/run install its package).
const duckdbCheck = "../../scripts/duckdb/check.mjs"

// TestDuckDB: DuckDB, a reader that shares nothing with idletrace, reads
// both formats' tables of the bundled trace and of the synthetic one and
// counts the rows and sums stats reports (issue 13 item 1). Under make
// test, make test-short and in CI it must run, and it fails (never skips)
// without Node.js or the package.
func TestDuckDB(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(filepath.Dir(duckdbCheck), "node_modules", "@duckdb", "node-api"))
	}
	if err != nil {
		// Not a kernel feature: nothing excuses it (make deps-test installs it).
		t.Fatalf("DuckDB's check cannot run (run `make deps-test`: it installs node and @duckdb/node-api in scripts/duckdb): %v", err)
	}
	synth := writeSynth(t, t.TempDir(), 30_000)
	for _, path := range []string{bundledTrace, synth} {
		s := statsOf(t, path)
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		idleRecords, ioRecords := recordCounts(r)
		for _, format := range Formats {
			dir := t.TempDir()
			out := map[string]io.Writer{}
			var files []*os.File
			for _, name := range Tables {
				f, err := os.Create(filepath.Join(dir, name+Ext(format)))
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
				out[name] = f
			}
			if _, err := Write(r, Options{}, format, out); err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(node, duckdbCheck, dir, format)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			js, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v: %s", duckdbCheck, err, stderr.String())
			}
			var got struct {
				IdleRows string `json:"idle_rows"`
				IORows   string `json:"io_rows"`
				States   []struct {
					CPU, Name, Usage, Above, Below string
					TimeNs                         string `json:"time_ns"`
				} `json:"states"`
				WakeLatency []struct{ Name, Count, Max string } `json:"wake_latency"`
				IO          struct {
					Requests    string `json:"requests"`
					WokeIdleCPU string `json:"woke_idle_cpu"`
				} `json:"io"`
				PMQoS struct {
					Changes string
					Last    []struct {
						Kind, CPU string
						LimitUs   string `json:"limit_us"`
					}
				} `json:"pm_qos"`
			}
			if err := json.Unmarshal(js, &got); err != nil {
				t.Fatalf("%s: %v in %s", duckdbCheck, err, js)
			}
			what := fmt.Sprintf("DuckDB on %s's %s", path, format)
			want := fmt.Sprint(idleRecords-s.Invalid, ioRecords)
			if fmt.Sprint(got.IdleRows, " ", got.IORows) != want {
				t.Errorf("%s: %s idle and %s IO rows, the trace holds %s", what, got.IdleRows, got.IORows, want)
			}
			var gotStates, wantStates []string
			for _, st := range got.States {
				gotStates = append(gotStates, fmt.Sprintf("%s/%s %s %s %s %s", st.CPU, st.Name, st.Usage, st.TimeNs, st.Above, st.Below))
			}
			for _, c := range s.CPUs {
				for _, st := range c.States {
					if st.Usage > 0 {
						wantStates = append(wantStates, fmt.Sprintf("%d/%s %d %d %d %d", c.CPU, st.Name, st.Usage, st.TimeNs, st.Above, st.Below))
					}
				}
			}
			slices.Sort(wantStates)
			if !slices.Equal(gotStates, wantStates) {
				t.Errorf("%s: per CPU and state (usage, time_ns, above, below)\n got %v\nwant %v (stats)", what, gotStates, wantStates)
			}
			var gotWake, wantWake []string
			for _, w := range got.WakeLatency {
				gotWake = append(gotWake, fmt.Sprintf("%s %s %s", w.Name, w.Count, w.Max))
			}
			for name, l := range s.WakeLatencyNs {
				if l.Count > 0 {
					wantWake = append(wantWake, fmt.Sprintf("%s %d %d", name, l.Count, l.Max))
				}
			}
			slices.Sort(wantWake)
			if !slices.Equal(gotWake, wantWake) {
				t.Errorf("%s: wake latency (count, max) %v, stats %v", what, gotWake, wantWake)
			}
			if got.IO.Requests != fmt.Sprint(s.IO.Requests) || got.IO.WokeIdleCPU != fmt.Sprint(s.IO.WokeIdleCPU) {
				t.Errorf("%s: IO requests %s, woke an idle CPU %s; stats %d, %d", what, got.IO.Requests, got.IO.WokeIdleCPU, s.IO.Requests, s.IO.WokeIdleCPU)
			}
			var gotQoS []string
			for _, l := range got.PMQoS.Last {
				gotQoS = append(gotQoS, fmt.Sprintf("%s %s %s", l.Kind, l.CPU, l.LimitUs))
			}
			if wantChanges, wantQoS := lastLimits(t, r); got.PMQoS.Changes != fmt.Sprint(wantChanges) || !slices.Equal(gotQoS, wantQoS) {
				t.Errorf("%s: %s PM QoS changes, limits at the end %q; the trace %d, %q", what, got.PMQoS.Changes, gotQoS, wantChanges, wantQoS)
			}
			t.Logf("%s: %s idle and %s IO rows; %d states, IO %s of which %s woke an idle CPU: as stats; %s PM QoS changes", what, got.IdleRows, got.IORows, len(got.States), got.IO.Requests, got.IO.WokeIdleCPU, got.PMQoS.Changes)
		}
		r.Close()
	}
}

// lastLimits reads r's PM QoS changes as info does and gives their count
// and each limit where the trace ends ("KIND CPU US", CPU -1 for the
// global limit, US -1 for none), in DuckDB's order: the metadata's limits
// at the start, then the changes applied.
func lastLimits(t testing.TB, r *trace.Reader) (int, []string) {
	t.Helper()
	changes, n, err := r.PMQoSChanges(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	last := map[int32]int64{trace.PMQoSGlobal: r.Meta.PMQoS.CPUDMALatencyUs}
	for c, v := range r.Meta.PMQoS.ResumeLatencyUs {
		last[int32(c)] = v
	}
	for _, c := range changes {
		last[c.CPU] = c.LimitUs
	}
	var out []string
	for cpu, v := range last {
		if cpu >= int32(r.Meta.NumCPUs) {
			continue
		}
		kind := "resume_latency"
		if cpu < 0 {
			kind = "cpu_dma_latency"
		}
		if cpu < 0 && v >= trace.PMQoSNoGlobalLimitUs || cpu >= 0 && v < 0 {
			v = -1
		}
		out = append(out, fmt.Sprintf("%s %d %d", kind, cpu, v))
	}
	slices.Sort(out)
	return int(n), out
}

// schemaMarkdown is the README's table of cols.
func schemaMarkdown(cols []Column) string {
	var b strings.Builder
	b.WriteString("| column | type | unit | meaning |\n|---|---|---|---|\n")
	for _, c := range cols {
		unit := c.Unit
		if unit == "" {
			unit = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", c.Name, c.Type, unit, c.Meaning)
	}
	return b.String()
}

// TestREADMESchema: the README gives every table's schema as Columns has
// it (go test ./pkg/export -run READMESchema -v prints the tables).
func TestREADMESchema(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, cols := range map[string][]Column{IdlePeriods: IdlePeriodColumns, IORequests: IORequestColumns, PMQoSChanges: PMQoSChangeColumns} {
		md := schemaMarkdown(cols)
		if !strings.Contains(string(readme), md) {
			t.Errorf("README.md lacks %s's schema as pkg/export has it:\n%s", name, md)
		}
	}
}

// recordCounts: the idle and block IO records the trace's chunks hold.
func recordCounts(r *trace.Reader) (idle, blockIO uint64) {
	for _, c := range r.Chunks() {
		switch c.Type {
		case trace.ChunkIdle:
			idle += c.Records
		case trace.ChunkBlockIO:
			blockIO += c.Records
		}
	}
	return idle, blockIO
}
