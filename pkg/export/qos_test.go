package export

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestPMQoSTable: pm_qos_changes gives the limits in force where the
// window opens, then the changes in it, read back from the CSV and,
// independently, from the Parquet file; without traced changes the
// limits the recording read at its start are given only there.
func TestPMQoSTable(t *testing.T) {
	changes := []trace.PMQoSChange{
		{TimeNs: 1_100_000_000, CPU: trace.PMQoSGlobal, LimitUs: 2, PrevUs: trace.PMQoSNoGlobalLimitUs, Action: trace.PMQoSAdd, Tid: 77},
		{TimeNs: 1_200_000_000, CPU: 1, LimitUs: 0, PrevUs: 15, Action: trace.PMQoSUpdate, Tid: 78},
		{TimeNs: 1_300_000_000, CPU: 1, LimitUs: -1, PrevUs: 0, Action: trace.PMQoSRemove},
		{TimeNs: 1_400_000_000, CPU: trace.PMQoSGlobal, LimitUs: trace.PMQoSNoGlobalLimitUs, PrevUs: 2, Action: trace.PMQoSRemove, Tid: 77},
	}
	meta := func(traced bool) *trace.Metadata {
		m := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 2, RecordedCPUs: []int{0, 1}}
		m.Inputs.PMQoSTrace = traced
		m.PMQoS = trace.PMQoS{CPUDMALatencyUs: trace.PMQoSNoGlobalLimitUs, ResumeLatencyUs: []int64{-1, 30}}
		return m
	}
	const start = 1_000_000_000 // the first period's entry
	for _, tc := range []struct {
		name    string
		traced  bool
		changes []trace.PMQoSChange
		o       Options
		want    []string // time_ns,kind,cpu,action,limit_us,previous_limit_us,tid
	}{
		{"all", true, changes, Options{}, []string{
			"1000000000,cpu_dma_latency,,in_force,,,",
			"1000000000,resume_latency,0,in_force,,,",
			"1000000000,resume_latency,1,in_force,15,,", // the first change's previous value, not the metadata's 30
			"1100000000,cpu_dma_latency,,add,2,,77",
			"1200000000,resume_latency,1,update,0,15,78",
			"1300000000,resume_latency,1,remove,,0,",
			"1400000000,cpu_dma_latency,,remove,,2,77",
		}},
		// From 150 ms on, CPU 0 only: the global limit as it stood then.
		{"window", true, changes, Options{From: 150 * time.Millisecond, HasFrom: true, CPUs: []int{0}}, []string{
			"1150000000,cpu_dma_latency,,in_force,2,,",
			"1150000000,resume_latency,0,in_force,,,",
			"1400000000,cpu_dma_latency,,remove,,2,77",
		}},
		{"not traced", false, nil, Options{}, []string{
			"1000000000,cpu_dma_latency,,in_force,,,",
			"1000000000,resume_latency,0,in_force,,,",
			"1000000000,resume_latency,1,in_force,30,,",
		}},
		// Changes were not traced: what held 150 ms in is unknown.
		{"not traced, window", false, nil, Options{From: 150 * time.Millisecond, HasFrom: true}, nil},
		// A change before the first record (the recorder attaches before
		// its start snapshot): in force where the trace starts.
		{"before the start", true, []trace.PMQoSChange{
			{TimeNs: 900_000_000, CPU: trace.PMQoSGlobal, LimitUs: 2, PrevUs: trace.PMQoSNoGlobalLimitUs, Action: trace.PMQoSAdd, Tid: 77},
			{TimeNs: 1_200_000_000, CPU: trace.PMQoSGlobal, LimitUs: 5, PrevUs: 2, Action: trace.PMQoSUpdate, Tid: 77},
		}, Options{}, []string{
			"1000000000,cpu_dma_latency,,in_force,2,,",
			"1000000000,resume_latency,0,in_force,,,",
			"1000000000,resume_latency,1,in_force,30,,",
			"1200000000,cpu_dma_latency,,update,5,2,77",
		}},
	} {
		r := tracetest.Build(t, meta(tc.traced), tracetest.Periods(20, 2, 1, 25e6, 5e6), tc.changes)
		if got := TraceStart(r); got != start {
			t.Fatalf("trace start %d", got)
		}
		for _, format := range Formats {
			var out bytes.Buffer
			sum, err := Write(r, tc.o, format, map[string]io.Writer{PMQoSChanges: &out})
			if err != nil {
				t.Fatal(err)
			}
			var header []string
			var rows []row
			if format == "csv" {
				header, rows = readCSV(t, out.Bytes())
			} else {
				header, rows, _ = readParquet(t, out.Bytes())
			}
			if !slices.Equal(header, columnNames(PMQoSChangeColumns)) {
				t.Fatalf("%s %s: header %v", tc.name, format, header)
			}
			var got []string
			for _, rw := range rows {
				var f []string
				for _, c := range header {
					f = append(f, rw.str(c))
				}
				got = append(got, strings.Join(f, ","))
			}
			if !slices.Equal(got, tc.want) || sum.PMQoSRows != uint64(len(tc.want)) {
				t.Errorf("%s, %s: %d rows (summary %d)\n%s\nwant\n%s", tc.name, format, len(got), sum.PMQoSRows, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		}
		r.Close()
	}
}
