package importer

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/export"
	"github.com/idletrace/idletrace/pkg/trace"
)

// A capture's PM QoS events become the changes the recorder would have
// written: a request and the pm_qos_update_target its task reaches next
// (same action, within 20 ms) are one change; an update_target without
// one (a frequency limit), a request of another device or kind, one that
// changes nothing and a pair too far apart are none. perf script prints
// the enums as numbers (action=0x1, type=0x1), tracefs by name.
func TestImportPMQoSEvents(t *testing.T) {
	const capture = `# tracer: nop
          <idle>-0       [000] d..1.  100.000000000: cpu_idle: state=1 cpu_id=0
          <idle>-0       [000] d..1.  100.000500000: cpu_idle: state=4294967295 cpu_id=0
         cyclic-700     [001] .....  100.001000000: pm_qos_add_request: CPU_DMA_LATENCY value=20
         cyclic-700     [001] .....  100.001000300: pm_qos_update_target: action=ADD_REQ prev_value=2000000000 curr_value=20
           tuned-701     [000] .....  100.002000000: pm_qos_update_target: action=UPDATE_REQ prev_value=3000000 curr_value=2000000
           tuned-701     [000] .....  100.003000000: dev_pm_qos_update_request: device=cpu2 type=0x1 new_value=15
           tuned-701     [000] .....  100.003000400: pm_qos_update_target: action=0x1 prev_value=2147483647 curr_value=15
           udevd-702     [001] .....  100.004000000: dev_pm_qos_add_request: device=0000:00:1f.0 type=DEV_PM_QOS_RESUME_LATENCY new_value=100
           udevd-702     [001] .....  100.004000100: pm_qos_update_target: action=ADD_REQ prev_value=2147483647 curr_value=100
         cyclic-700     [001] .....  100.005000000: pm_qos_update_request: CPU_DMA_LATENCY value=20
         cyclic-700     [001] .....  100.005000100: pm_qos_update_target: action=UPDATE_REQ prev_value=20 curr_value=20
           tuned-701     [000] .....  100.008000000: dev_pm_qos_remove_request: device=cpu2 type=DEV_PM_QOS_RESUME_LATENCY new_value=-1
           tuned-701     [000] .....  100.008000100: pm_qos_update_target: action=REMOVE_REQ prev_value=15 curr_value=2147483647
         cyclic-700     [001] .....  100.009000000: pm_qos_remove_request: CPU_DMA_LATENCY value=-1
         cyclic-700     [001] .....  100.009000200: pm_qos_update_target: action=REMOVE_REQ prev_value=20 curr_value=2000000000
          <idle>-0       [000] d..1.  100.010000000: cpu_idle: state=1 cpu_id=0
          <idle>-0       [000] d..1.  100.010500000: cpu_idle: state=4294967295 cpu_id=0
         cyclic-700     [001] .....  100.011000000: pm_qos_update_request: CPU_DMA_LATENCY value=7
         cyclic-700     [001] .....  100.032000000: pm_qos_update_target: action=UPDATE_REQ prev_value=2000000000 curr_value=7
`
	r, sum, err := importString(t, capture, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := r.PMQoSChanges(100)
	if err != nil {
		t.Fatal(err)
	}
	want := []trace.PMQoSChange{
		{TimeNs: 100_001_000_300, CPU: trace.PMQoSGlobal, LimitUs: 20, PrevUs: trace.PMQoSNoGlobalLimitUs, Action: trace.PMQoSAdd, Tid: 700},
		{TimeNs: 100_003_000_400, CPU: 2, LimitUs: 15, PrevUs: -1, Action: trace.PMQoSUpdate, Tid: 701},
		{TimeNs: 100_008_000_100, CPU: 2, LimitUs: -1, PrevUs: 15, Action: trace.PMQoSRemove, Tid: 701},
		{TimeNs: 100_009_000_200, CPU: trace.PMQoSGlobal, LimitUs: trace.PMQoSNoGlobalLimitUs, PrevUs: 20, Action: trace.PMQoSRemove, Tid: 700},
	}
	if !slices.Equal(got, want) || n != uint64(len(want)) || sum.PMQoSChanges != uint64(len(want)) {
		t.Fatalf("imported %d changes %+v (summary %d), want %+v", n, got, sum.PMQoSChanges, want)
	}
	if !r.Meta.Inputs.PMQoSTrace {
		t.Errorf("the capture has every global PM QoS event, but the import says it did not trace PM QoS (probes %v)", r.Meta.Probes)
	}

	idle := "          <idle>-0       [000] d..1.  100.000000000: cpu_idle: state=1 cpu_id=0\n" +
		"          <idle>-0       [000] d..1.  100.000500000: cpu_idle: state=4294967295 cpu_id=0\n"
	for _, tc := range []struct {
		name, capture string
		traced        bool
		want          []trace.PMQoSChange
	}{
		{"no PM QoS events", idle, false, nil},
		// Frequency limits alone: update_target without a request.
		{"update_target only", idle + "   kworker-80  [001] .....  100.001000000: pm_qos_update_target: action=UPDATE_REQ prev_value=3000000 curr_value=2000000\n", false, nil},
		// As in BPF, a request is consumed by its task's next
		// update_target: a no-op request, then two frequency updates.
		{"request consumed", idle +
			"    cyclic-700 [001] .....  100.001000000: pm_qos_update_request: CPU_DMA_LATENCY value=20\n" +
			"    cyclic-700 [001] .....  100.001000100: pm_qos_update_target: action=ADD_REQ prev_value=3000000 curr_value=2500000\n" +
			"    cyclic-700 [001] .....  100.001000200: pm_qos_update_target: action=UPDATE_REQ prev_value=2000000 curr_value=1500000\n", true, nil},
		// Before 5.7 the request events named their class.
		{"another class", idle +
			"     netd-703 [000] .....  100.001000000: pm_qos_update_request: pm_qos_class=NETWORK_LATENCY value=20\n" +
			"     netd-703 [000] .....  100.001000100: pm_qos_update_target: action=UPDATE_REQ prev_value=2000000000 curr_value=20\n" +
			"     netd-703 [000] .....  100.002000000: pm_qos_update_request: pm_qos_class=CPU_DMA_LATENCY value=30\n" +
			"     netd-703 [000] .....  100.002000100: pm_qos_update_target: action=UPDATE_REQ prev_value=2000000000 curr_value=30\n", true,
			[]trace.PMQoSChange{{TimeNs: 100_002_000_100, CPU: trace.PMQoSGlobal, LimitUs: 30, PrevUs: trace.PMQoSNoGlobalLimitUs, Action: trace.PMQoSUpdate, Tid: 703}}},
		// A kernel's action this reader does not know is skipped, not an error.
		{"unknown action", idle + "   kworker-80  [001] .....  100.001000000: pm_qos_update_target: action=0x5 prev_value=1 curr_value=2\n", false, nil},
		// Device events alone give the CPUs' resume latencies.
		{"device events only", idle +
			"    tuned-701 [000] .....  100.003000000: dev_pm_qos_add_request: device=cpu1 type=DEV_PM_QOS_RESUME_LATENCY new_value=0\n" +
			"    tuned-701 [000] .....  100.003000100: pm_qos_update_target: action=ADD_REQ prev_value=2147483647 curr_value=0\n", true,
			[]trace.PMQoSChange{{TimeNs: 100_003_000_100, CPU: 1, LimitUs: 0, PrevUs: -1, Action: trace.PMQoSAdd, Tid: 701}}},
	} {
		r, _, err := importString(t, tc.capture, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, _, err := r.PMQoSChanges(100)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) || r.Meta.Inputs.PMQoSTrace != tc.traced || r.Meta.Probes["power:pm_qos_update_target"] == "" {
			t.Errorf("%s: changes %+v, traced %v (probe %q); want %+v, traced %v", tc.name, got, r.Meta.Inputs.PMQoSTrace,
				r.Meta.Probes["power:pm_qos_update_target"], tc.want, tc.traced)
		}
	}
}

// A recording's PM QoS changes survive its ftrace export and the import
// back: the export writes each as the kernel's request event and
// pm_qos_update_target, and lists the events in its header so that an
// export without a change still says they were traced.
func TestImportPMQoSRoundTrip(t *testing.T) {
	changes := []trace.PMQoSChange{
		{TimeNs: 1_100_000_000, CPU: trace.PMQoSGlobal, LimitUs: 2, PrevUs: trace.PMQoSNoGlobalLimitUs, Action: trace.PMQoSAdd, Tid: 42},
		{TimeNs: 1_200_000_000, CPU: 1, LimitUs: 0, PrevUs: -1, Action: trace.PMQoSUpdate, Tid: 43},
		{TimeNs: 1_300_000_000, CPU: 1, LimitUs: -1, PrevUs: 0, Action: trace.PMQoSRemove, Tid: 43},
		{TimeNs: 1_400_000_000, CPU: trace.PMQoSGlobal, LimitUs: trace.PMQoSNoGlobalLimitUs, PrevUs: 2, Action: trace.PMQoSRemove, Tid: 42},
	}
	for _, tc := range []struct {
		name       string
		changes    []trace.PMQoSChange
		from       time.Duration // the export's window opens here, since the trace's start
		want       []trace.PMQoSChange
		wantGlobal int64 // the limit the import's metadata starts with
	}{
		{"changes", changes, 0, changes, trace.PMQoSNoGlobalLimitUs},
		{"none", nil, 0, nil, 40}, // the metadata's
		// The window opens after the first change: the header carries the
		// limits then in force, 2 µs and CPU 1 unchanged.
		{"window", changes, 150 * time.Millisecond, changes[1:], 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 2, RecordedCPUs: []int{0, 1},
				PMQoS: trace.PMQoS{CPUDMALatencyUs: 40, ResumeLatencyUs: []int64{-1, -1}}}
			meta.Inputs.PMQoSTrace = true
			r := tracetest.Build(t, meta, tracetest.Periods(20, 2, 1, 25e6, 5e6), tc.changes)
			var text bytes.Buffer
			if _, err := export.WriteFtrace(r, export.Options{From: tc.from, HasFrom: tc.from > 0}, &text); err != nil {
				t.Fatal(err)
			}
			back, _, err := importString(t, text.String(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := back.PMQoSChanges(100)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) || !back.Meta.Inputs.PMQoSTrace || back.Meta.PMQoS.CPUDMALatencyUs != tc.wantGlobal {
				t.Fatalf("back from the ftrace export: %+v (traced %v, starting global limit %d), want %+v from %d\n%s",
					got, back.Meta.Inputs.PMQoSTrace, back.Meta.PMQoS.CPUDMALatencyUs, tc.want, tc.wantGlobal, text.String())
			}
		})
	}
}

// TestImportPerfPMQoS holds the PM QoS changes imported from a perf
// capture to those idletrace's recorder (itself held to the kernel's
// values by record's TestRecordPMQoSChanges) wrote over the same window:
// this process's requests on /dev/cpu_dma_latency and on CPU 0's resume
// latency, recorded by both. perf stamps each event from its own clock
// read (-k mono: the recorder's CLOCK_MONOTONIC), a few µs apart.
func TestImportPerfPMQoS(t *testing.T) {
	testenv.OwnMachine(t) // it changes the latency limits: no other test records or changes them meanwhile
	perf, err := exec.LookPath("perf")
	if err != nil { // a missing tool, not a missing kernel feature: fail, never skip
		t.Fatal("perf is not installed: apt-get install linux-perf (.ci/run does)")
	}
	sysfs := testenv.CPUResumeLatency(t, 0)
	dmaPath := testenv.CPULatencyQoS(t)
	dir := t.TempDir()
	native := filepath.Join(dir, "native.trace")
	stopRecording := startRecording(t, native)
	events := []string{"power:cpu_idle"}
	for _, n := range slices.Concat(qosGlobalEvents, qosDeviceEvents) {
		events = append(events, "power:"+n)
	}
	script := perfCapture(t, perf, dir, events, func() {
		time.Sleep(time.Second) // perf opens its events
		dma, err := os.OpenFile(dmaPath, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, us := range []int32{20, 7} {
			if err := binary.Write(dma, binary.LittleEndian, us); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, v := range []string{"15", "n/a", "0"} {
			if err := os.WriteFile(sysfs, []byte(v), 0); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		dma.Close()
		time.Sleep(100 * time.Millisecond)
	})
	if err := stopRecording(); err != nil {
		t.Fatal(err)
	}
	capture, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine (make test runs packages side by side) may leave
	// no CPU idle in the window, and an import needs a cpu_idle event:
	// one idle period of CPU 0 before the window stands in; the changes
	// compared are perf's lines alone.
	if !bytes.Contains(capture, []byte("power:cpu_idle: state=")) {
		capture = append(capture, "         swapper       0 [000]     1.000000000: power:cpu_idle: state=1 cpu_id=0\n"+
			"         swapper       0 [000]     1.000001000: power:cpu_idle: state=4294967295 cpu_id=0\n"...)
	}
	var out bytes.Buffer
	if _, err := Import(bytes.NewReader(capture), Options{}, &out); err != nil {
		t.Fatal(err)
	}
	ir, err := trace.NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	nr, err := trace.Open(native)
	if err != nil {
		t.Fatal(err)
	}
	defer nr.Close()
	// This process's requests only: another on the machine may make its own.
	ours := func(r *trace.Reader) []trace.PMQoSChange {
		all, _, err := r.PMQoSChanges(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		var mine []trace.PMQoSChange
		for _, q := range all {
			if testenv.OwnThread(q.Tid) {
				mine = append(mine, q)
			}
		}
		return mine
	}
	imported, want := ours(ir), ours(nr)
	if !ir.Meta.Inputs.PMQoSTrace {
		t.Errorf("the import says the capture did not trace PM QoS changes (probes %v)", ir.Meta.Probes)
	}
	if len(want) < 4 {
		t.Fatalf("the recording has %d of this process's changes, want at least 4 (CPU 0's three, the global limit's last): %+v", len(want), want)
	}
	same := len(imported) == len(want)
	for i := 0; same && i < len(want); i++ {
		a, b := imported[i], want[i]
		d := int64(a.TimeNs) - int64(b.TimeNs)
		a.TimeNs = b.TimeNs
		same = a == b && d > -50_000 && d < 50_000
	}
	if !same {
		t.Fatalf("imported from perf: %+v\nrecorded:           %+v", imported, want)
	}
	t.Logf("%d changes, the same in perf's capture and the recording: %+v", len(want), want)
}
