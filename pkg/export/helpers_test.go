package export

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/trace"
)

const bundledTrace = "../../testdata/demo.trace"

const us = 1000

// row is one exported row as a reader outside idletrace sees it: each
// column's value as text, nil for NULL.
type row map[string]*string

func (r row) str(col string) string {
	if v := r[col]; v != nil {
		return *v
	}
	return ""
}

func (r row) null(col string) bool { return r[col] == nil }

func (r row) is(col string) bool { return r.str(col) == "true" }

func (r row) int(t testing.TB, col string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r.str(col), 10, 64)
	if err != nil {
		t.Fatalf("column %s: %q is not an integer", col, r.str(col))
	}
	return n
}

// readCSV reads a table with encoding/csv, an empty field as NULL (it
// cannot tell a quoted empty string from one; the tests hold none).
func readCSV(t testing.TB, data []byte) (header []string, rows []row) {
	t.Helper()
	cr := csv.NewReader(bytes.NewReader(data))
	recs, err := cr.ReadAll()
	if err != nil {
		t.Fatalf("reading the CSV: %v", err)
	}
	if len(recs) == 0 {
		t.Fatal("CSV without a header")
	}
	header = recs[0]
	for _, rec := range recs[1:] {
		r := row{}
		for i, v := range rec {
			if v == "" {
				r[header[i]] = nil
				continue
			}
			s := v
			r[header[i]] = &s
		}
		rows = append(rows, r)
	}
	return header, rows
}

// readParquet reads a table with parquet-go's untyped reader, by the
// file's own schema: nothing of pkg/export's row types.
func readParquet(t testing.TB, data []byte) (header []string, rows []row, f *parquet.File) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("opening the Parquet file: %v", err)
	}
	for _, path := range f.Schema().Columns() {
		header = append(header, path[0])
	}
	rd := parquet.NewReader(f)
	defer rd.Close()
	buf := make([]parquet.Row, 1024)
	for {
		n, err := rd.ReadRows(buf)
		for _, pr := range buf[:n] {
			r := row{}
			for _, v := range pr {
				name := header[v.Column()]
				if v.IsNull() {
					r[name] = nil
					continue
				}
				var s string
				switch v.Kind() {
				case parquet.Boolean:
					s = strconv.FormatBool(v.Boolean())
				case parquet.Int32:
					s = strconv.FormatInt(int64(v.Int32()), 10)
				case parquet.Int64:
					s = strconv.FormatInt(v.Int64(), 10)
				case parquet.ByteArray:
					s = string(v.ByteArray())
				default:
					t.Fatalf("column %s: unexpected kind %v", name, v.Kind())
				}
				r[name] = &s
			}
			rows = append(rows, r)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the Parquet file: %v", err)
		}
	}
	if int64(len(rows)) != f.NumRows() {
		t.Fatalf("read %d rows, the file says %d", len(rows), f.NumRows())
	}
	return header, rows, f
}

// exported is one export of a trace, read back.
type exported struct {
	idleHeader, ioHeader []string
	idle, io             []row
	idleFile, ioFile     *parquet.File // Parquet only
	sum                  Summary
}

// exportTrace exports path in format and reads both tables back.
func exportTrace(t testing.TB, path, format string, o Options) exported {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var idle, ios bytes.Buffer
	sum, err := Write(r, o, format, map[string]io.Writer{IdlePeriods: &idle, IORequests: &ios})
	if err != nil {
		t.Fatalf("export %s: %v", format, err)
	}
	e := exported{sum: sum}
	if format == "csv" {
		e.idleHeader, e.idle = readCSV(t, idle.Bytes())
		e.ioHeader, e.io = readCSV(t, ios.Bytes())
	} else {
		e.idleHeader, e.idle, e.idleFile = readParquet(t, idle.Bytes())
		e.ioHeader, e.io, e.ioFile = readParquet(t, ios.Bytes())
	}
	if uint64(len(e.idle)) != sum.IdlePeriods || uint64(len(e.io)) != sum.IORequests {
		t.Fatalf("%s: %d idle and %d IO rows read back, the summary says %d and %d", format, len(e.idle), len(e.io), sum.IdlePeriods, sum.IORequests)
	}
	return e
}

// statsOf is what stats reports for the trace at path.
func statsOf(t testing.TB, path string) *analysis.Stats {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// totals are stats' figures as a query over the two tables finds them.
type totals struct {
	states      map[string][4]uint64 // "cpu/state name": usage, time_ns, above, below
	wakeLatency map[string]uint64    // state name: wake-ups measured
	wakeMaxNs   map[string]uint64
	wakeEarly   uint64
	causes      map[string]uint64
	outsideIdle uint64

	ioRequests, ioWoke, taskWaited, outsideIO uint64
	wokeByCause                               map[string]uint64
}

func key(cpu int64, state string) string { return fmt.Sprintf("%d/%s", cpu, state) }

// sumRows adds the tables up as stats counts: in its window, usage and
// time over counted periods.
func sumRows(t testing.TB, idle, io []row) totals {
	t.Helper()
	s := totals{states: map[string][4]uint64{}, wakeLatency: map[string]uint64{}, wakeMaxNs: map[string]uint64{}, causes: map[string]uint64{}, wokeByCause: map[string]uint64{}}
	for _, r := range idle {
		if !r.is("in_stats_window") {
			s.outsideIdle++
			continue
		}
		name := r.str("state_name")
		if r.is("counted") {
			k := key(r.int(t, "cpu"), name)
			v := s.states[k]
			v[0]++
			v[1] += uint64(r.int(t, "residency_ns"))
			if r.is("above") {
				v[2]++
			}
			if r.is("below") {
				v[3]++
			}
			s.states[k] = v
		}
		if !r.null("wake_latency_ns") {
			s.wakeLatency[name]++
			s.wakeMaxNs[name] = max(s.wakeMaxNs[name], uint64(r.int(t, "wake_latency_ns")))
		}
		if r.is("wake_requested_before_entry") {
			s.wakeEarly++
		}
		if !r.null("wake_cause") {
			s.causes[r.str("wake_cause")]++
		}
	}
	for _, r := range io {
		if !r.is("in_stats_window") {
			s.outsideIO++
			continue
		}
		s.ioRequests++
		if r.is("woke_idle") {
			s.ioWoke++
			s.wokeByCause[r.str("woke_idle_cause")]++
		}
		if !r.null("task_latency_ns") {
			s.taskWaited++
		}
	}
	return s
}

// checkAgainstStats holds the tables' sums to stats' figures.
func checkAgainstStats(t *testing.T, what string, got totals, s *analysis.Stats) {
	t.Helper()
	want := map[string][4]uint64{}
	for _, c := range s.CPUs {
		for _, st := range c.States {
			if st.Usage > 0 || st.TimeNs > 0 {
				want[key(int64(c.CPU), st.Name)] = [4]uint64{st.Usage, st.TimeNs, st.Above, st.Below}
			}
		}
	}
	if fmt.Sprint(got.states) != fmt.Sprint(want) {
		t.Errorf("%s: per CPU and state (usage, time_ns, above, below):\n got %v\nwant %v (stats)", what, got.states, want)
	}
	for name, l := range s.WakeLatencyNs {
		if got.wakeLatency[name] != l.Count || (l.Count > 0 && got.wakeMaxNs[name] != l.Max) {
			t.Errorf("%s: %s wake latency: %d rows, max %d ns; stats: %d, max %d", what, name, got.wakeLatency[name], got.wakeMaxNs[name], l.Count, l.Max)
		}
	}
	if len(got.wakeLatency) > len(s.WakeLatencyNs) {
		t.Errorf("%s: wake latency in states %v, stats has %d", what, got.wakeLatency, len(s.WakeLatencyNs))
	}
	if got.wakeEarly != s.WakeRequestedBeforeEntry {
		t.Errorf("%s: %d wake-ups requested before entry, stats %d", what, got.wakeEarly, s.WakeRequestedBeforeEntry)
	}
	for cause, n := range s.WakeCauses.Counts {
		if s.Inputs.WakeCauses && got.causes[cause] != n {
			t.Errorf("%s: wake cause %s: %d rows, stats %d", what, cause, got.causes[cause], n)
		}
	}
	if got.ioRequests != s.IO.Requests || got.ioWoke != s.IO.WokeIdleCPU {
		t.Errorf("%s: IO requests %d, woke an idle CPU %d; stats %d, %d", what, got.ioRequests, got.ioWoke, s.IO.Requests, s.IO.WokeIdleCPU)
	}
	for cause, n := range s.IO.WokeIdleCPUByCause {
		if got.wokeByCause[cause] != n {
			t.Errorf("%s: IO woke idle by %s: %d rows, stats %d", what, cause, got.wokeByCause[cause], n)
		}
	}
	if got.taskWaited != s.IO.TaskWaited {
		t.Errorf("%s: task waited %d rows, stats %d", what, got.taskWaited, s.IO.TaskWaited)
	}
	if got.outsideIdle != s.OutsideWindow.IdlePeriods || got.outsideIO != s.OutsideWindow.IORequests {
		t.Errorf("%s: outside the window %d idle, %d IO rows; stats %+v", what, got.outsideIdle, got.outsideIO, s.OutsideWindow)
	}
}

// synthMeta is a machine with a driver, POLL, C1 and C6 on two CPUs, every
// input, and the snapshots' per-CPU instants a little apart.
func synthMeta() *trace.Metadata {
	tab := []trace.StateInfo{
		{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "C1", ExitLatencyNs: 2 * us, TargetResidencyNs: 2 * us},
		{Index: 2, Name: "C6", ExitLatencyNs: 133 * us, TargetResidencyNs: 400 * us},
	}
	return &trace.Metadata{
		KernelRelease: "6.18.0-test", HZ: 250, CPUIdleDriver: "intel_idle", CPUIdleGovernor: "menu",
		NumCPUs: 4, RecordedCPUs: []int{0, 1}, Hostname: "synth",
		States:       []trace.CPUStates{{CPU: 0, States: tab}, {CPU: 1, States: tab}},
		BlockDevices: []trace.BlockDevice{{Name: "vda", Major: 253, Minor: 0}},
		Inputs:       trace.Inputs{WakeCauses: true, WakeRequests: true, TickState: true, NextTimer: true, BlockIO: true, TaskIO: true, PMQoSTrace: true},
		PMQoS:        trace.PMQoS{CPUDMALatencyUs: trace.PMQoSNoGlobalLimitUs, ResumeLatencyUs: []int64{-1, -1, -1, -1}},
		Start: &trace.Snapshot{MonotonicNs: 1_000_000, CPUTimeNs: []uint64{1_000_000, 1_000_700},
			CPUIdle: []trace.CPUCounters{{CPU: 0}, {CPU: 1}}},
	}
}

// writeSynth writes a synthetic trace of n idle periods, alternating over
// two CPUs, with IO: a completion that wakes every fourth period, one while
// busy every ninth, one on an unrecorded CPU every 50th; PM QoS changes
// every 5,000th from the 2,500th. Some periods lie
// before the start snapshot and after the end one; the kernel's residency,
// rejected entries, unknown tick state and task IO vary with i. It returns
// the path.
func writeSynth(t testing.TB, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("synth-%d.trace", n))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewWriter(f, synthMeta())
	if err != nil {
		t.Fatal(err)
	}
	const step = 50 * us
	var last uint64
	for i := 0; i < n; i++ {
		cpu := uint32(i % 2)
		entry := uint64(900_000 + i*step) // the first periods lie before the start snapshot
		state := uint32([]int{1, 1, 2, 0, 1, 2, 1}[i%7])
		res := uint64(5*us + (i%11)*us)
		if state == 2 {
			res = uint64(30*us + (i%13)*us) // above, some of them
		}
		p := trace.IdlePeriod{CPU: cpu, State: state, EntryNs: entry, ExitNs: entry + res, WakeCause: trace.WakeTimer, WakeIRQ: -1,
			NrIOWait: int32(i%3) - 1, AbortsBefore: int8(i%4) - 1,
			TickStopped: trace.Tristate(i % 3), TickStoppedBefore: trace.Tristate((i + 1) % 3), GotTick: trace.Tristate(i % 3),
			IdleLoopEntry: trace.Tristate(i % 3), TickStoppable: trace.Tristate(i % 3),
			NextTimerKnown: i%5 != 0, NextTimerNs: int64(i%17)*us - 3*us, NextEventKnown: i%6 != 0, NextEventNs: int64(i % 19 * us)}
		if state == 0 {
			p.PollTimedOut = trace.Tristate(1 + i%2)
		}
		switch i % 10 {
		case 0, 1, 2, 3, 4, 5: // the kernel's own residency, a little shorter
			p.KernelKnown, p.KernelCounted, p.KernelResidencyNs = true, true, res-uint64(i%3)*100
			p.AbortedBefore = i%20 == 1
		case 6: // an entry the kernel rejected
			p.KernelKnown = true
		}
		switch {
		case i%4 == 1:
			p.WakeCause, p.WakeIRQ = trace.WakeIRQ, 24
		case i%4 == 2:
			p.WakeCause, p.WakeRequestNs = trace.WakeIPIResched, p.ExitNs-3*us
		case i%4 == 3 && i%8 == 7:
			p.WakeCause, p.WakeRequestNs = trace.WakeIPICall, p.EntryNs-2*us // requested before the entry
		case i%4 == 3:
			p.WakeCause = trace.WakeIPICall
		}
		if err := w.AddIdle(&p); err != nil {
			t.Fatal(err)
		}
		last = p.ExitNs
		ios := []trace.BlockIO{}
		if i%4 == 1 || i%8 == 3 { // woken by it: irq, and ipi-call for some
			ios = append(ios, trace.BlockIO{CompleteNs: p.ExitNs + 2*us})
		}
		if i%9 == 0 { // while busy, beyond the 50 µs window
			ios = append(ios, trace.BlockIO{CompleteNs: p.ExitNs + 60*us})
		}
		for _, b := range ios {
			b.Dev, b.Sector, b.Bytes, b.Op, b.CmdFlags = 253<<20, uint64(i)*8, 4096*uint32(1+i%3), uint8(i%2), 0x800
			b.IssueNs, b.IssueCPU, b.CompleteCPU = b.CompleteNs-80*us, 1-cpu, cpu
			if i%3 != 0 {
				b.Tid, b.Tgid, b.Comm = uint32(1000+i%5), 1000, []string{"fio", `a,b "c"`}[(i/4)%2]
				if i%6 == 2 { // imported from ftrace text: the thread, not its process
					b.Tgid = 0
				}
				b.TaskWokenNs, b.TaskRunNs, b.TaskCPU = b.CompleteNs+1*us, b.CompleteNs+4*us, cpu
			}
			if err := w.AddBlockIO(&b); err != nil {
				t.Fatal(err)
			}
		}
		if i%5000 == 2500 { // a latency limit taken and changed, then CPU 1's
			q := trace.PMQoSChange{TimeNs: p.ExitNs, CPU: trace.PMQoSGlobal, LimitUs: int64(i / 1000), PrevUs: trace.PMQoSNoGlobalLimitUs, Action: trace.PMQoSAdd, Tid: 900}
			if i > 5000 {
				q.CPU, q.LimitUs, q.PrevUs, q.Action = 1, int64(i%7000), -1, trace.PMQoSUpdate
			}
			if err := w.AddPMQoS(&q); err != nil {
				t.Fatal(err)
			}
		}
		if i%50 == 0 { // on a CPU whose idle periods are not recorded
			b := trace.BlockIO{Dev: 8<<20 | 16, IssueNs: p.ExitNs, CompleteNs: p.ExitNs + 10*us, IssueCPU: 3, CompleteCPU: 3, Op: 3}
			if err := w.AddBlockIO(&b); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := &trace.End{StopReason: "duration", Snapshot: &trace.Snapshot{MonotonicNs: last - 200*us, CPUTimeNs: []uint64{last - 300*us, last - 200*us},
		CPUIdle: []trace.CPUCounters{{CPU: 0}, {CPU: 1}}}}
	if err := w.Close(end); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
