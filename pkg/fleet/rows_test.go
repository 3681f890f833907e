package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestColumns: the Parquet schema (the row structs' tags), the JSON names
// and Columns (the README's schema) name the same columns in one order;
// a column may be NULL exactly where Columns says so, its Go type is the
// documented one, and its unit matches its name.
func TestColumns(t *testing.T) {
	for _, tc := range []struct {
		name string
		cols []Column
		row  any
	}{
		{StatsTable, StatsColumns, StatsRow{}},
		{WhatifTable, WhatifColumns, WhatifRow{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields := parquet.SchemaOf(tc.row).Fields()
			leaves := goLeaves(reflect.TypeOf(tc.row))
			if len(fields) != len(tc.cols) || len(leaves) != len(tc.cols) {
				t.Fatalf("%d columns documented, %d in the Parquet schema, %d Go fields", len(tc.cols), len(fields), len(leaves))
			}
			js, err := json.Marshal(tc.row)
			if err != nil {
				t.Fatal(err)
			}
			if keys := jsonKeys(t, js); !slices.Equal(keys, colNames(tc.cols)) {
				t.Errorf("JSON keys %v\n  documented %v", keys, colNames(tc.cols))
			}
			for i, c := range tc.cols {
				f, leaf := fields[i], leaves[i]
				if f.Name() != c.Name {
					t.Errorf("column %d: documented %s, Parquet %s", i, c.Name, f.Name())
				}
				if null := strings.HasSuffix(c.Type, " or NULL"); null != f.Optional() || null != (leaf.Kind() == reflect.Pointer) {
					t.Errorf("%s: documented %q, Parquet optional %v, Go %v", c.Name, c.Type, f.Optional(), leaf)
				}
				goType := leaf
				if goType.Kind() == reflect.Pointer {
					goType = goType.Elem()
				}
				kind := goType.Kind().String()
				if goType.Kind() == reflect.Map {
					kind = fmt.Sprintf("map<%s,%s>", goType.Key().Kind(), goType.Elem().Kind())
				}
				if want := strings.TrimSuffix(c.Type, " or NULL"); kind != want {
					t.Errorf("%s: documented %s, Go %s", c.Name, want, kind)
				}
				wantUnit := ""
				switch {
				case strings.HasSuffix(c.Name, "_unix_ns"):
					wantUnit = unixUnit
				case strings.HasSuffix(c.Name, "_ns") || strings.Contains(c.Name, "_ns_") && !strings.HasSuffix(c.Name, "_count"):
					wantUnit = nsUnit
				}
				if c.Unit != wantUnit {
					t.Errorf("%s: unit %q, its name says %q", c.Name, c.Unit, wantUnit)
				}
				// A column of one kind of row only is NULL on the others.
				if c.Rows != "" && !strings.HasSuffix(c.Type, " or NULL") {
					t.Errorf("%s: set on %s rows only, but not NULL on the others", c.Name, c.Rows)
				}
			}
		})
	}
}

// goLeaves are a struct's fields as columns: embedded structs inlined.
func goLeaves(t reflect.Type) []reflect.Type {
	var out []reflect.Type
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, goLeaves(f.Type)...)
			continue
		}
		out = append(out, f.Type)
	}
	return out
}

func colNames(cols []Column) []string {
	var out []string
	for _, c := range cols {
		out = append(out, c.Name)
	}
	return out
}

// jsonKeys are a JSON object's keys in the order it gives them.
func jsonKeys(t testing.TB, js []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", js)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestKeyOf(t *testing.T) {
	m := &trace.Metadata{Hostname: "db-17", KernelRelease: "6.12.9", CPUIdleDriver: "intel_idle", HZ: 1000,
		WallClock: trace.WallClock{MonotonicNs: 2_000, UnixNs: 1_700_000_000_000_000_000}, Start: &trace.Snapshot{MonotonicNs: 5_000}}
	for _, tc := range []struct {
		name, host string
		meta       *trace.Metadata
		wantHost   string
		wantStart  *int64
		wantErr    bool
	}{
		{"the trace's hostname", "", m, "db-17", i64(1_700_000_000_000_003_000), false},
		{"--host overrides it", "web-3", m, "web-3", i64(1_700_000_000_000_003_000), false},
		{"no start snapshot: the anchor", "", &trace.Metadata{Hostname: "a", WallClock: m.WallClock}, "a", i64(1_700_000_000_000_000_000), false},
		{"no anchor: NULL", "", &trace.Metadata{Hostname: "a", Start: m.Start}, "a", nil, false},
		{"no hostname and no --host", "", &trace.Metadata{}, "", nil, true},
		{"no hostname, --host", "imported", &trace.Metadata{}, "imported", nil, false},
		// The kernel's default nodename names no one machine.
		{"the default nodename and no --host", "", &trace.Metadata{Hostname: "(none)"}, "", nil, true},
		{"the default nodename, --host", "vm-9", &trace.Metadata{Hostname: "(none)"}, "vm-9", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := KeyOf("x.trace", tc.host, tc.meta)
			var nh *NoHostError
			if tc.wantErr {
				if !errors.As(err, &nh) || !strings.Contains(err.Error(), "x.trace") || !strings.Contains(err.Error(), "--host") {
					t.Fatalf("error %v, want one naming the file and --host", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.Host != tc.wantHost || k.Trace != "x.trace" || !reflect.DeepEqual(k.RecordedStartUnixNs, tc.wantStart) {
				t.Errorf("key %+v, want host %s, start %v", k, tc.wantHost, ptr(tc.wantStart))
			}
			if tc.meta.KernelRelease == "" && k.KernelRelease != nil || tc.meta.HZ == 0 && k.HZ != nil {
				t.Errorf("unknown kernel release or HZ not NULL: %+v", k)
			}
		})
	}
}

func ptr[T any](p *T) string {
	if p == nil {
		return "NULL"
	}
	return fmt.Sprint(*p)
}

// TestStatsRows: the rows say what stats says of the same trace, NULL
// where the trace lacks the input, for machines with and without each.
func TestStatsRows(t *testing.T) {
	full := spec{host: "full", cpus: 3, table: 0, periods: 200, io: true, taskIO: true, kernel: true, wakeReqs: true, seed: 1}
	variant := func(name string, f func(*spec)) spec {
		sp := full
		sp.host = name
		f(&sp)
		return sp
	}
	for _, sp := range []spec{
		full,
		variant("no-kernel-counters", func(s *spec) { s.kernel = false }),
		variant("no-io", func(s *spec) { s.io = false }),
		variant("no-task-io", func(s *spec) { s.taskIO = false }),
		variant("no-wake-requests", func(s *spec) { s.wakeReqs = false }),
		variant("no-driver", func(s *spec) { s.table, s.kernel = -1, false }),
		variant("haltpoll", func(s *spec) { s.table, s.cpus = 2, 1 }),
		variant("cut-short", func(s *spec) { s.cutShort = true }),
		variant("imported-table", func(s *spec) { s.imported, s.kernel = true, false }),
		variant("no-tick-state", func(s *spec) { s.noTick = true }),
		variant("kernel-tick-count-of-one-cpu-missing", func(s *spec) { s.tickCountsMissing = true }),
		variant("uncounted-periods-no-table", func(s *spec) { s.uncounted, s.kernel = true, false }),
		variant("damaged", func(s *spec) { s.damaged = true }),
	} {
		t.Run(sp.host, func(t *testing.T) {
			path := sp.write(t, t.TempDir())
			s := statsOf(t, path)
			rows, _, _ := rowsOf(t, path, "")
			if sp.damaged { // the IO records lost to it: every row says so
				if s.Damage.Chunks == 0 || s.Damage.IORecords == 0 {
					t.Fatalf("damage %+v: the flipped byte damaged no block IO chunk", s.Damage)
				}
				for i, r := range rows {
					if r.DamagedChunks != int64(s.Damage.Chunks+s.Damage.Regions) {
						t.Errorf("row %d: damaged_chunks %d, stats %d", i, r.DamagedChunks, s.Damage.Chunks)
					}
				}
				return
			}
			checkStatsRows(t, sp, path, s, rows)
		})
	}
}

func checkStatsRows(t *testing.T, sp spec, path string, s *analysis.Stats, rows []StatsRow) {
	t.Helper()
	m := sp.meta()
	wantStart := m.WallClock.UnixNs + int64(m.Start.MonotonicNs-m.WallClock.MonotonicNs)
	var states []StatsRow
	var traceRow *StatsRow
	for i, r := range rows {
		if r.Host != sp.host || r.Trace != path || ptr(r.RecordedStartUnixNs) != fmt.Sprint(wantStart) ||
			ptr(r.KernelRelease) != m.KernelRelease || ptr(r.HZ) != fmt.Sprint(m.HZ) || ptr(r.Driver) != m.CPUIdleDriver {
			t.Errorf("row %d: key %s %s %s %s %s %s, want %s %s %d %s %d %s", i, r.Host, r.Trace, ptr(r.RecordedStartUnixNs), ptr(r.KernelRelease), ptr(r.HZ), ptr(r.Driver),
				sp.host, path, wantStart, m.KernelRelease, m.HZ, m.CPUIdleDriver)
		}
		if r.DurationNs != int64(s.DurationNs) || r.LostEvents != int64(s.LostEvents) || r.DamagedChunks != int64(s.Damage.Chunks+s.Damage.Regions) {
			t.Errorf("row %d: duration %d, lost %d, damaged chunks %d; stats %d, %d, %+v", i, r.DurationNs, r.LostEvents, r.DamagedChunks, s.DurationNs, s.LostEvents, s.Damage)
		}
		switch r.Kind {
		case KindState:
			if r.CPUs != nil || r.IORequests != nil || r.IOLatency.Count != nil || r.CutShort != nil {
				t.Errorf("row %d: a state row with trace columns set: %+v", i, r)
			}
			states = append(states, r)
		case KindTrace:
			if traceRow != nil || i != len(rows)-1 {
				t.Errorf("row %d: a second trace row, or not the last", i)
			}
			if r.CPU != nil || r.Usage != nil || r.State != nil || r.WakeLatency.Count != nil || r.KernelUsage != nil {
				t.Errorf("row %d: a trace row with state columns set: %+v", i, r)
			}
			traceRow = &rows[i]
		default:
			t.Errorf("row %d: kind %q", i, r.Kind)
		}
	}
	if traceRow == nil {
		t.Fatal("no trace row")
	}

	// State rows: stats' cpus[].states[] and kernel, one row each.
	kernel := map[string]analysis.StateStats{}
	for _, c := range s.Kernel.CPUs {
		for _, st := range c.States {
			kernel[fmt.Sprint(c.CPU, "/", st.Index)] = st
		}
	}
	n := 0
	for _, c := range s.CPUs {
		for _, st := range c.States {
			n++
			var r *StatsRow
			for i := range states {
				if *states[i].CPU == int32(c.CPU) && *states[i].StateIndex == int32(st.Index) {
					r = &states[i]
				}
			}
			if r == nil {
				t.Errorf("no row for CPU %d state %d", c.CPU, st.Index)
				continue
			}
			what := fmt.Sprintf("CPU %d %s", c.CPU, st.Name)
			if *r.State != st.Name || *r.Usage != int64(st.Usage) || *r.TimeNs != int64(st.TimeNs) || *r.WindowNs != int64(c.WindowNs) {
				t.Errorf("%s: %s usage %d time %d window %d; stats %s %d %d %d", what, *r.State, *r.Usage, *r.TimeNs, *r.WindowNs, st.Name, st.Usage, st.TimeNs, c.WindowNs)
			}
			if sp.table < 0 || sp.uncounted { // no state table to judge by
				if r.Above != nil || r.Below != nil || r.ExitLatencyNs != nil {
					t.Errorf("%s: no state table, yet above %s below %s exit latency %s", what, ptr(r.Above), ptr(r.Below), ptr(r.ExitLatencyNs))
				}
			} else if sp.imported && r.ExitLatencyNs != nil {
				t.Errorf("%s: an import's table, yet exit latency %s", what, ptr(r.ExitLatencyNs))
			} else if ptr(r.Above) != fmt.Sprint(st.Above) || ptr(r.Below) != fmt.Sprint(st.Below) || ptr(r.ExitLatencyNs) != ptr(st.ExitLatencyNs) || ptr(r.TargetResidencyNs) != ptr(st.TargetResidencyNs) {
				t.Errorf("%s: above %s below %s exit %s target %s; stats %d %d %s %s", what, ptr(r.Above), ptr(r.Below), ptr(r.ExitLatencyNs), ptr(r.TargetResidencyNs), st.Above, st.Below, ptr(st.ExitLatencyNs), ptr(st.TargetResidencyNs))
			}
			k, ok := kernel[fmt.Sprint(c.CPU, "/", st.Index)]
			if sp.kernel && !sp.cutShort {
				if !s.Kernel.Available || !ok {
					t.Fatalf("%s: stats has no kernel counters for a trace with them: %s", what, s.Kernel.Note)
				}
				if ptr(r.KernelUsage) != fmt.Sprint(k.Usage) || ptr(r.KernelTimeNs) != fmt.Sprint(k.TimeNs) || ptr(r.KernelAbove) != fmt.Sprint(k.Above) ||
					ptr(r.KernelBelow) != fmt.Sprint(k.Below) || ptr(r.KernelRejected) != ptr(k.Rejected) {
					t.Errorf("%s: kernel %s %s %s %s %s; stats %+v", what, ptr(r.KernelUsage), ptr(r.KernelTimeNs), ptr(r.KernelAbove), ptr(r.KernelBelow), ptr(r.KernelRejected), k)
				}
				// The synthetic counters grow by a known amount.
				if want := int64(sp.periods * (3 + st.Index + c.CPU)); *r.KernelUsage != want {
					t.Errorf("%s: kernel usage %d, the snapshots differ by %d", what, *r.KernelUsage, want)
				}
			} else if r.KernelUsage != nil || r.KernelTimeNs != nil || r.KernelAbove != nil || r.KernelBelow != nil || r.KernelRejected != nil {
				t.Errorf("%s: kernel columns set on a trace without the counters: %s %s", what, ptr(r.KernelUsage), ptr(r.KernelTimeNs))
			}
		}
	}
	if len(states) != n {
		t.Errorf("%d state rows, stats has %d CPU states", len(states), n)
	}

	// Wake latency: each CPU's share, computed here from the records,
	// adds up to stats' per state.
	want := periodsFromRecords(t, path)
	checkPeriodRows(t, sp, s, states, want)
	byName := map[string][2]int64{}
	for _, r := range states {
		key := fmt.Sprint(*r.CPU, "/", *r.StateIndex)
		w := r.WakeLatency
		if !sp.wakeReqs {
			if w.Count != nil {
				t.Errorf("CPU %s: wake latency count %d on a trace without wake requests", key, *w.Count)
			}
			continue
		}
		if w.Count == nil {
			t.Errorf("CPU %s: no wake latency count", key)
			continue
		}
		if *w.Count != want[key].wakeCount || (*w.Count > 0) != (w.Max != nil) || w.Max != nil && *w.Max != want[key].wakeMax {
			t.Errorf("CPU %s: wake latency count %d max %s, the records say %d %d", key, *w.Count, ptr(w.Max), want[key].wakeCount, want[key].wakeMax)
		}
		if *w.Count == 0 && (w.Mean != nil || w.P50 != nil || w.P99 != nil || w.P999 != nil) {
			t.Errorf("CPU %s: quantiles of no wake-up", key)
		}
		if *w.Count > 0 && !(*w.P50 <= *w.P99 && *w.P99 <= *w.P999 && *w.P999 <= *w.Max) {
			t.Errorf("CPU %s: quantiles out of order: %+v", key, w)
		}
		b := byName[*r.State]
		b[0] += *w.Count
		if w.Max != nil {
			b[1] = max(b[1], *w.Max)
		}
		byName[*r.State] = b
	}
	for name, l := range s.WakeLatencyNs {
		if byName[name] != [2]int64{int64(l.Count), int64(l.Max)} {
			t.Errorf("%s: wake latency over the CPUs' rows (count, max) %v, stats %d %d", name, byName[name], l.Count, l.Max)
		}
	}
	if sp.wakeReqs && len(s.WakeLatencyNs) == 0 {
		t.Error("the synthetic trace measures no wake latency: the test checks nothing")
	}

	// The trace row: stats' io and head.
	r := traceRow
	var periods uint64
	for _, c := range s.CPUs {
		periods += c.Periods
	}
	if *r.CPUs != int32(len(s.CPUs)) || *r.IdlePeriods != int64(periods) || *r.CutShort != sp.cutShort || *r.Mismatches != int64(len(s.Mismatches)) {
		t.Errorf("trace row: cpus %d periods %d cut short %v mismatches %d; stats %d %d %v %d", *r.CPUs, *r.IdlePeriods, *r.CutShort, *r.Mismatches, len(s.CPUs), periods, s.CutShort, len(s.Mismatches))
	}
	// The kernel's tick stops: the sum of stats' per CPU; the synthetic
	// counters grow by periods × (CPU+1).
	if sp.kernel && !sp.cutShort && !sp.tickCountsMissing {
		var want int64
		for _, c := range s.CPUs {
			want += int64(sp.periods * (c.CPU + 1))
		}
		if ptr(r.KernelTickStops) != fmt.Sprint(want) {
			t.Errorf("trace row: kernel tick stops %s, the snapshots differ by %d", ptr(r.KernelTickStops), want)
		}
	} else if r.KernelTickStops != nil {
		t.Errorf("trace row: kernel tick stops %s on a trace without the kernel's counts", ptr(r.KernelTickStops))
	}
	if !sp.io {
		if r.IORequests != nil || r.IOLatency.Count != nil || r.IOWokeIdle != nil || r.TaskIOWaited != nil {
			t.Errorf("trace row: IO columns set on a trace without block IO: %s %s", ptr(r.IORequests), ptr(r.IOLatency.Count))
		}
		return
	}
	io := s.IO
	if *r.IORequests != int64(io.Requests) || *r.IOWokeIdle != int64(io.WokeIdleCPU) || *r.IOErrors != int64(io.Errors) || io.Requests == 0 {
		t.Errorf("trace row: IO %d woke %d errors %d; stats %d %d %d", *r.IORequests, *r.IOWokeIdle, *r.IOErrors, io.Requests, io.WokeIdleCPU, io.Errors)
	}
	if got, want := latencyOf(r.IOLatency), fmt.Sprintf("%d %.3f %d %d %d %d", io.LatencyNs.Count, io.LatencyNs.Mean, io.LatencyNs.P50, io.LatencyNs.P99, io.LatencyNs.P999, io.LatencyNs.Max); got != want {
		t.Errorf("trace row: IO latency %s, stats %s", got, want)
	}
	if !sp.taskIO {
		if r.TaskIOWaited != nil || r.TaskIOLatency.Count != nil {
			t.Errorf("trace row: task IO set on a trace without it")
		}
		return
	}
	tl := io.TaskLatencyNs
	if *r.TaskIOWaited != int64(io.TaskWaited) || tl == nil || io.TaskWaited == 0 {
		t.Fatalf("trace row: task IO waited %d; stats %d %v", *r.TaskIOWaited, io.TaskWaited, tl)
	}
	if got, want := latencyOf(r.TaskIOLatency), fmt.Sprintf("%d %.3f %d %d %d %d", tl.Count, tl.Mean, tl.P50, tl.P99, tl.P999, tl.Max); got != want {
		t.Errorf("trace row: task IO latency %s, stats %s", got, want)
	}
}

// checkPeriodRows: each state row's idle period lengths and tick counts
// are its CPU's from the records, and they add up, over the CPUs, to
// stats' per state and, over the states, to stats' per CPU.
func checkPeriodRows(t *testing.T, sp spec, s *analysis.Stats, states []StatsRow, want map[string]fromRecords) {
	t.Helper()
	noTick := sp.imported || sp.noTick
	type sums struct{ periods, max, tick, tickKnown, before, beforeKnown int64 }
	byName, byCPU := map[string]sums{}, map[int32]sums{}
	for _, r := range states {
		key := fmt.Sprint(*r.CPU, "/", *r.StateIndex)
		w, l := want[key], r.IdlePeriodLength
		if l.Count == nil || *l.Count != w.periods || (w.periods > 0) != (l.Max != nil) || l.Max != nil && *l.Max != w.periodMax {
			t.Errorf("CPU %s: idle periods %s longest %s, the records say %d %d", key, ptr(l.Count), ptr(l.Max), w.periods, w.periodMax)
			continue
		}
		if w.periods > 0 && !(*l.P50 <= *l.P99 && *l.P99 <= *l.P999 && *l.P999 <= *l.Max && float64(*l.Mean) <= float64(*l.Max)) {
			t.Errorf("CPU %s: idle period quantiles out of order: %s %s %s %s", key, ptr(l.P50), ptr(l.P99), ptr(l.P999), ptr(l.Max))
		}
		v, c := byName[*r.State], byCPU[*r.CPU]
		v.periods += *l.Count
		c.periods += *l.Count
		if l.Max != nil {
			v.max = max(v.max, *l.Max)
		}
		if noTick {
			if r.TickStopped != nil || r.TickStoppedKnown != nil || r.TickStoppedBefore != nil || r.TickStoppedBeforeKnown != nil {
				t.Errorf("CPU %s: tick columns set on a trace without the tick's state", key)
			}
		} else {
			got := fmt.Sprintln(ptr(r.TickStopped), ptr(r.TickStoppedKnown), ptr(r.TickStoppedBefore), ptr(r.TickStoppedBeforeKnown))
			if exp := fmt.Sprintln(w.tick, w.tickKnown, w.tickBefore, w.tickBKnown); got != exp {
				t.Errorf("CPU %s: tick stopped, known, before, known %q; the records say %q", key, got, exp)
			} else {
				for _, x := range []*sums{&v, &c} {
					x.tick, x.tickKnown = x.tick+*r.TickStopped, x.tickKnown+*r.TickStoppedKnown
					x.before, x.beforeKnown = x.before+*r.TickStoppedBefore, x.beforeKnown+*r.TickStoppedBeforeKnown
				}
			}
		}
		byName[*r.State], byCPU[*r.CPU] = v, c
	}
	// Every period the stats count is in one state row: over a CPU's rows
	// they are its periods, over a state's its state_periods.
	for name, p := range s.StatePeriods {
		exp := sums{periods: int64(p.LengthNs.Count), max: int64(p.LengthNs.Max)}
		if !noTick {
			exp.tick, exp.tickKnown = int64(p.TickStopped.Stopped), int64(p.TickStopped.Known)
			exp.before, exp.beforeKnown = int64(p.TickStoppedBefore.Stopped), int64(p.TickStoppedBefore.Known)
			if exp.tick == 0 || exp.tick == exp.tickKnown || exp.before == 0 {
				t.Errorf("%s: the synthetic trace's tick states do not vary: the test checks little", name)
			}
		}
		if byName[name] != exp {
			t.Errorf("%s: over the CPUs' rows (periods, longest, tick stopped, known, before, known) %v, stats %v", name, byName[name], exp)
		}
	}
	for _, c := range s.CPUs {
		exp := sums{periods: int64(c.Periods)}
		if !noTick {
			exp.tick, exp.tickKnown = int64(c.TickStopped.Stopped), int64(c.TickStopped.Known)
			exp.before, exp.beforeKnown = int64(c.TickStoppedBefore.Stopped), int64(c.TickStoppedBefore.Known)
		}
		if byCPU[int32(c.CPU)] != exp {
			t.Errorf("CPU %d: over its states' rows (periods, -, tick stopped, known, before, known) %v, stats %v", c.CPU, byCPU[int32(c.CPU)], exp)
		}
	}
}

func latencyOf[L IOLatency | TaskIOLatency](l L) string {
	s := summary(l)
	if s.Mean == nil {
		return fmt.Sprintf("%s NULL", ptr(s.Count))
	}
	return fmt.Sprintf("%s %.3f %s %s %s %s", ptr(s.Count), float64(*s.Mean), ptr(s.P50), ptr(s.P99), ptr(s.P999), ptr(s.Max))
}

// fromRecords is what a state row says of its CPU's idle periods in one
// state, counted here straight from the records in each CPU's window.
type fromRecords struct {
	wakeCount, wakeMax     int64
	periods, periodMax     int64
	tick, tickKnown        int64
	tickBefore, tickBKnown int64
}

// periodsFromRecords is fromRecords per "CPU/state".
func periodsFromRecords(t *testing.T, path string) map[string]fromRecords {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rules := analysis.NewRules(r.Meta, r.End)
	out := map[string]fromRecords{}
	err = r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
		if !rules.IdleInWindow(p) {
			return nil
		}
		k := fmt.Sprint(p.CPU, "/", p.State)
		v := out[k]
		v.periods++
		v.periodMax = max(v.periodMax, int64(p.ExitNs-p.EntryNs))
		if p.TickStopped != trace.Unknown {
			v.tickKnown++
			if p.TickStopped == trace.Yes {
				v.tick++
			}
		}
		if p.TickStoppedBefore != trace.Unknown {
			v.tickBKnown++
			if p.TickStoppedBefore == trace.Yes {
				v.tickBefore++
			}
		}
		if ns, ok := p.WakeLatencyNs(); ok {
			v.wakeCount++
			v.wakeMax = max(v.wakeMax, int64(ns))
		}
		out[k] = v
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWhatifRows: a row per policy in order, with the result's figures;
// NULL for what a result lacks or cannot say (a NaN energy, no IO).
func TestWhatifRows(t *testing.T) {
	sp := spec{host: "w", cpus: 2, table: 0, periods: 300, io: true, taskIO: true, kernel: true, wakeReqs: true, seed: 4}
	path := sp.write(t, t.TempDir())
	_, rows, rep := rowsOf(t, path, "override")
	if len(rows) != len(rep.Results) || len(rows) != len(fleetPolicies) {
		t.Fatalf("%d rows for %d results of %d policies", len(rows), len(rep.Results), len(fleetPolicies))
	}
	polled := false
	defer func() {
		if !polled {
			t.Error("no policy's wake-ups found the CPU polling: the fixture does not exercise wakeups_polling")
		}
	}()
	for i, r := range rows {
		res := rep.Results[i]
		if r.Kind != KindPolicy || r.Host != "override" || r.Trace != path || r.Profile != "recorded" || r.PolicyIndex != int32(i) || r.Policy != res.Policy {
			t.Errorf("row %d: %s %s %s %s %d %s", i, r.Kind, r.Host, r.Trace, r.Profile, r.PolicyIndex, r.Policy)
		}
		if r.IdlePeriods != int64(res.IdlePeriods) || r.Selections != int64(res.Selections) || r.Above != int64(res.Above) || r.Below != int64(res.Below) ||
			ptr(r.PollLimitNs) != ptr(res.PollLimitNs) || ptr(r.IOWokeIdle) != ptr(res.IOWokeIdle) || res.IdlePeriods == 0 ||
			r.WakeupsPolling != int64(res.WakeupsPolling) || ptr(r.PollTimeouts) != ptr(res.PollTimeouts) {
			t.Errorf("row %d: %+v\nresult %+v", i, r, res)
		}
		polled = polled || r.WakeupsPolling > 0
		if (res.Policy == "oracle") != (r.PollTimeouts == nil) {
			t.Errorf("row %d (%s): poll_timeouts %s: NULL for the oracle alone", i, res.Policy, ptr(r.PollTimeouts))
		}
		w := res.WakeLatencyNs
		if r.PolicyWakeLatency.Count != int64(w.Count) || ptr(r.PolicyWakeLatency.P99) != fmt.Sprint(w.P99) || ptr(r.PolicyWakeLatency.Max) != fmt.Sprint(w.Max) {
			t.Errorf("row %d: wake latency %+v, result %+v", i, r.PolicyWakeLatency, w)
		}
		if io := res.IOLatencyNs; io == nil || ptr(r.IOLatency.Count) != fmt.Sprint(io.Count) || ptr(r.IOLatency.P99) != fmt.Sprint(io.P99) {
			t.Errorf("row %d: IO latency %s, result %+v", i, latencyOf(r.IOLatency), io)
		}
		if tl := res.TaskIOLatencyNs; tl == nil || ptr(r.TaskIOLatency.Count) != fmt.Sprint(tl.Count) || ptr(r.TaskIOLatency.Max) != fmt.Sprint(tl.Max) {
			t.Errorf("row %d: task IO latency %s, result %+v", i, latencyOf(r.TaskIOLatency), tl)
		}
		if ptr(r.EnergyRel) != fmt.Sprint(res.EnergyRel) || ptr(r.Agreement) != ptr(res.Agreement) {
			t.Errorf("row %d: energy %s agreement %s, result %v %s", i, ptr(r.EnergyRel), ptr(r.Agreement), res.EnergyRel, ptr(res.Agreement))
		}
		var sum float64
		for name, v := range res.StateShare {
			if float64(r.StateShare[name]) != v {
				t.Errorf("row %d: share of %s %v, result %v", i, name, r.StateShare[name], v)
			}
			sum += v
		}
		if len(r.StateShare) != len(res.StateShare) || math.Abs(sum-1) > 1e-9 {
			t.Errorf("row %d: shares %v (sum %v), result %v", i, r.StateShare, sum, res.StateShare)
		}
	}

	// What a result cannot say is NULL, never 0.
	k, _ := KeyOf("t", "h", &trace.Metadata{})
	got := WhatifRows(k, &analysis.WhatifReport{Results: []model.Result{{Policy: "menu", EnergyRel: math.NaN(),
		StateShare: map[string]float64{"C1": math.Inf(1), "C6": 0.5}}}}, "comm=fio")
	r := got[0]
	if r.EnergyRel != nil || r.Agreement != nil || r.PollLimitNs != nil || r.IOLatency.Count != nil || r.TaskIOLatency.Count != nil || r.IOWokeIdle != nil ||
		r.PolicyWakeLatency.Count != 0 || r.PolicyWakeLatency.P50 != nil || r.PolicyWakeLatency.Mean != nil || r.KernelRelease != nil || r.HZ != nil {
		t.Errorf("unknowns not NULL: %+v", r)
	}
	if _, ok := r.StateShare["C1"]; ok || r.StateShare["C6"] != 0.5 || ptr(r.IOFilter) != "comm=fio" {
		t.Errorf("shares %v (a non-finite share is left out), io filter %s", r.StateShare, ptr(r.IOFilter))
	}
}

// TestWriteReadBack: both formats give back the rows written, NULLs as
// NULL; JSON lines hold one object per row in the columns' order.
func TestWriteReadBack(t *testing.T) {
	var stats []StatsRow
	var whatif []WhatifRow
	for i := range 6 {
		sp := specOf(i)
		s, w, _ := rowsOf(t, sp.write(t, t.TempDir()), "")
		stats, whatif = append(stats, s...), append(whatif, w...)
	}
	roundTrip(t, stats, StatsColumns)
	roundTrip(t, whatif, WhatifColumns)
}

func roundTrip[R Row](t *testing.T, rows []R, cols []Column) {
	for _, format := range Formats {
		var buf bytes.Buffer
		w, err := NewWriter[R](&buf, format, map[string]string{"idletrace.version": "test"})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rows[:3]); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rows[3:]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if w.Rows() != uint64(len(rows)) {
			t.Errorf("%s: Rows() %d, wrote %d", format, w.Rows(), len(rows))
		}
		var got []R
		if format == JSONL {
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			for _, l := range lines {
				if keys := jsonKeys(t, []byte(l)); !slices.Equal(keys, colNames(cols)) {
					t.Fatalf("a line's keys %v", keys)
				}
				var r R
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatal(err)
				}
				got = append(got, r)
			}
		} else {
			f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := f.Lookup("idletrace.fleet_schema"); v != SchemaVersion {
				t.Errorf("Parquet metadata idletrace.fleet_schema %q", v)
			}
			if v, _ := f.Lookup("idletrace.version"); v != "test" {
				t.Errorf("Parquet metadata idletrace.version %q", v)
			}
			rd := parquet.NewGenericReader[R](f)
			got = make([]R, f.NumRows())
			if n, err := rd.Read(got); n != len(got) || err != nil && err != io.EOF {
				t.Fatalf("read %d of %d rows: %v", n, len(got), err)
			}
			rd.Close()
		}
		if len(got) != len(rows) {
			t.Fatalf("%s: %d rows back, %d written", format, len(got), len(rows))
		}
		for i := range rows {
			if !reflect.DeepEqual(normal(got[i]), normal(rows[i])) {
				t.Errorf("%s: row %d back as\n%+v\nwritten\n%+v", format, i, got[i], rows[i])
				break
			}
		}
	}
}

// normal makes an empty map nil (a reader may give either).
func normal[R Row](r R) R {
	if w, ok := any(&r).(*WhatifRow); ok && len(w.StateShare) == 0 {
		w.StateShare = nil
	}
	return r
}

func TestFloatJSON(t *testing.T) {
	for _, tc := range []struct {
		f    Float
		want string
	}{{1, "1.0"}, {0, "0.0"}, {0.25, "0.25"}, {1e21, "1e+21"}, {-3, "-3.0"}, {4270.121847151809, "4270.121847151809"}} {
		b, err := json.Marshal(tc.f)
		if err != nil || string(b) != tc.want {
			t.Errorf("%v: %s (%v), want %s", float64(tc.f), b, err, tc.want)
		}
	}
}
