package main

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestInfoUnknownFields: what a trace does not say (an import's host,
// kernel, driver, state table) is unknown in info, never an empty field,
// the epoch, or "no cpuidle driver".
func TestInfoUnknownFields(t *testing.T) {
	for _, tc := range []struct {
		name        string
		meta        *trace.Metadata
		want, avoid []string
	}{
		{"an import", &trace.Metadata{NumCPUs: 1, RecordedCPUs: []int{0}},
			[]string{"recorded:          unknown time, by idletrace", "host:              unknown, unknown, 1 CPU (recorded", "kernel:            unknown, HZ=unknown, NO_HZ=unknown",
				"cpuidle:           driver unknown, governor unknown", "states:            unknown: the trace does not give the state table"},
			[]string{"1970", "no cpuidle driver", "bpf object"}},
		{"no driver", &trace.Metadata{NumCPUs: 1, RecordedCPUs: []int{0}, CPUIdleDriver: "none", CPUIdleGovernor: "menu", KernelRelease: "6.12.0", HZ: 250},
			[]string{"kernel:            6.12.0, HZ=250", "states:            none: no cpuidle driver",
				"cpuidle:           driver none, no governor runs (sysfs names menu)"}, []string{"unknown: the trace", "governor menu"}},
		// A CPU's resume latency constraint is in force beside the global limit.
		{"resume latency", &trace.Metadata{NumCPUs: 3, RecordedCPUs: []int{0, 1, 2}, CPUIdleDriver: "none",
			PMQoS: trace.PMQoS{CPUDMALatencyUs: 20, ResumeLatencyUs: []int64{-1, 50, 0}}},
			[]string{"pm qos:            cpu_dma_latency=20 µs, cpu1 resume latency 50 µs, cpu2 resume latency 0 µs (n/a: polling only) (no effect: no cpuidle driver)"}, []string{"cpu0 resume"}},
		{"resume latency, a driver", &trace.Metadata{NumCPUs: 2, RecordedCPUs: []int{0, 1}, CPUIdleDriver: "intel_idle",
			PMQoS: trace.PMQoS{CPUDMALatencyUs: 20, ResumeLatencyUs: []int64{-1, 50}}},
			[]string{"pm qos:            cpu_dma_latency=20 µs, cpu1 resume latency 50 µs\n"}, []string{"no effect"}},
	} {
		path := filepath.Join(t.TempDir(), "t.trace")
		tracetest.WriteFile(t, path, tc.meta, tracetest.Periods(4, tc.meta.NumCPUs, 1, 1e6, 5e5), nil)
		r := runBin(t, "info", path)
		if r.code != 0 {
			t.Fatalf("%s: exit %d, %s", tc.name, r.code, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%s: info lacks %q:\n%s", tc.name, w, r.stdout)
			}
		}
		for _, a := range tc.avoid {
			if strings.Contains(r.stdout, a) {
				t.Errorf("%s: info says %q:\n%s", tc.name, a, r.stdout)
			}
		}
	}
}

// TestInfoPMQoSChanges: info lists the changes for people, a CPU's 0 µs
// with the "n/a" its sysfs file shows, and in JSON as the export's
// pm_qos_changes table has them: kind and action by name, NULL for none
// and for the global limit's CPU.
func TestInfoPMQoSChanges(t *testing.T) {
	meta := &trace.Metadata{NumCPUs: 2, RecordedCPUs: []int{0, 1}, CPUIdleDriver: "intel_idle",
		PMQoS: trace.PMQoS{CPUDMALatencyUs: trace.PMQoSNoGlobalLimitUs, ResumeLatencyUs: []int64{-1, -1}}, Inputs: trace.Inputs{PMQoSTrace: true}}
	changes := []trace.PMQoSChange{
		{TimeNs: 1_100_000, CPU: trace.PMQoSGlobal, Action: trace.PMQoSAdd, LimitUs: 20, PrevUs: trace.PMQoSNoGlobalLimitUs, Tid: 7},
		{TimeNs: 1_200_000, CPU: 1, Action: trace.PMQoSUpdate, LimitUs: 0, PrevUs: -1},
		{TimeNs: 1_300_000, CPU: trace.PMQoSGlobal, Action: trace.PMQoSRemove, LimitUs: trace.PMQoSNoGlobalLimitUs, PrevUs: 20, Tid: 7},
	}
	path := filepath.Join(t.TempDir(), "t.trace")
	tracetest.WriteFile(t, path, meta, tracetest.Periods(4, 2, 1, 1e6, 5e5), changes)
	r := runBin(t, "info", path)
	if r.code != 0 || !strings.Contains(r.stdout, "cpu1 resume latency 0 µs (n/a: polling only)") || !strings.Contains(r.stdout, "cpu_dma_latency 20 µs") {
		t.Errorf("info: exit %d, stderr %q, changes not as listed:\n%s", r.code, r.stderr, r.stdout)
	}
	r = runBin(t, "info", path, "--format", "json")
	var doc struct {
		Changes []map[string]any `json:"pm_qos_changes"`
		Count   int              `json:"pm_qos_change_count"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
		t.Fatalf("info --format json: exit %d, %v: %s", r.code, err, r.stderr)
	}
	want := []map[string]any{
		{"time_ns": 1.1e6, "kind": "cpu_dma_latency", "cpu": nil, "action": "add", "limit_us": 20.0, "previous_limit_us": nil, "tid": 7.0},
		{"time_ns": 1.2e6, "kind": "resume_latency", "cpu": 1.0, "action": "update", "limit_us": 0.0, "previous_limit_us": nil, "tid": nil},
		{"time_ns": 1.3e6, "kind": "cpu_dma_latency", "cpu": nil, "action": "remove", "limit_us": nil, "previous_limit_us": 20.0, "tid": 7.0},
	}
	if doc.Count != 3 || !reflect.DeepEqual(doc.Changes, want) {
		t.Errorf("JSON changes (%d):\n got %v\nwant %v", doc.Count, doc.Changes, want)
	}
}

// TestInfoCommandQuoted: the recorded command prints as a shell would
// take it back (a new user read `sh -c exit 3` as another command).
func TestInfoCommandQuoted(t *testing.T) {
	meta := &trace.Metadata{NumCPUs: 1, RecordedCPUs: []int{0}, CPUIdleDriver: "intel_idle", Command: []string{"sh", "-c", "sleep 1; exit 3"}}
	path := filepath.Join(t.TempDir(), "t.trace")
	tracetest.WriteFile(t, path, meta, tracetest.Periods(4, 1, 1, 1e6, 5e5), nil)
	r := runBin(t, "info", path)
	if r.code != 0 || !strings.Contains(r.stdout, "command:           sh -c 'sleep 1; exit 3'\n") {
		t.Errorf("info: exit %d, stderr %q, command not quoted:\n%s", r.code, r.stderr, r.stdout)
	}
}

// TestInfoJSONNames: info's JSON names the end record's loss counters and
// the chunk summaries in snake_case, as every other report does, with the
// values the trace holds (the file keeps the loss counters under Go's
// names), and a chunk's type by name.
func TestInfoJSONNames(t *testing.T) {
	tr, err := trace.Open(bundledTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r := runBin(t, "info", bundledTrace, "--format", "json")
	var doc struct {
		End struct {
			Loss []map[string]uint64 `json:"loss"`
		} `json:"end"`
		Chunks      []map[string]any `json:"chunks"`
		LossAccount map[string]any   `json:"loss_account"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
		t.Fatalf("info --format json: exit %d, %v: %s", r.code, err, r.stderr)
	}
	if !strings.Contains(r.stdout, `"warnings": []`) && !strings.Contains(r.stdout, `"warnings":[]`) {
		t.Errorf("no warnings must read [] as in stats, not null")
	}
	// The account is stats' on the same trace, where the end record's
	// raw counts are not.
	st := runBin(t, "stats", bundledTrace, "--format", "json")
	var stats struct {
		Loss map[string]any `json:"loss"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &stats); err != nil || len(stats.Loss) == 0 {
		t.Fatalf("stats --format json: %v, loss %v", err, stats.Loss)
	}
	if !reflect.DeepEqual(doc.LossAccount, stats.Loss) {
		t.Errorf("info's loss_account %v, stats' loss %v", doc.LossAccount, stats.Loss)
	}
	if len(doc.End.Loss) == 0 || len(doc.End.Loss) != len(tr.End.Loss) {
		t.Fatalf("end.loss has %d entries, the trace %d", len(doc.End.Loss), len(tr.End.Loss))
	}
	for i, l := range tr.End.Loss {
		want := map[string]uint64{"cpu": uint64(l.CPU), "idle_lost": l.IdleLost, "io_lost": l.IOLost, "other_lost": l.OtherLost,
			"io_unmatched": l.IOUnmatched, "io_table_full": l.IOTableFull, "io_completions": l.IOCompletions,
			"io_orphaned": l.IOOrphaned, "idle_unpaired": l.IdleUnpaired, "io_unissued": l.IOUnissued}
		if !reflect.DeepEqual(doc.End.Loss[i], want) {
			t.Errorf("end.loss[%d] = %v, want %v", i, doc.End.Loss[i], want)
		}
	}
	names := map[string]bool{}
	for _, c := range doc.Chunks {
		keys := slices.Sorted(maps.Keys(c))
		if want := []string{"bytes", "chunks", "first_ns", "last_ns", "lost_records", "records", "type"}; !slices.Equal(keys, want) {
			t.Errorf("a chunk summary's keys %v, want %v", keys, want)
		}
		name, _ := c["type"].(string)
		names[name] = true
	}
	if !names["metadata"] || !names["idle"] || !names["end"] {
		t.Errorf("chunk types %v: want them by name, among them metadata, idle and end", names)
	}
}

// TestProbeLines: info groups the probes by method, attached ones first,
// and wraps each group under its method within infoWidth.
func TestProbeLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		probes map[string]string
		want   string
	}{
		{"none", nil, "probes:            none\n"},
		{"one method", map[string]string{"power:cpu_idle": "tp_btf", "block:block_rq_issue": "tp_btf"},
			"probes:            tp_btf: block:block_rq_issue, power:cpu_idle\n"},
		{"attached, then missing", map[string]string{
			"power:cpu_idle": "tp_btf", "ipi:ipi_send_cpu": "missing: not in this kernel",
			"block:block_rq_issue": "tracepoint", "ipi:ipi_send_cpumask": "missing: not in this kernel"},
			"probes:            tp_btf: power:cpu_idle\n" +
				"                   tracepoint: block:block_rq_issue\n" +
				"                   missing: not in this kernel: ipi:ipi_send_cpu, ipi:ipi_send_cpumask\n"},
		{"an import", map[string]string{
			"power:cpu_idle": "imported: perf script", "wake causes": "imported: perf script",
			"event sched:sched_switch": "in the capture, not imported",
			"tick wake-ups":            "missing: the capture lacks hrtimer_expire_entry, local_timer_exit (every local timer wake-up is reported as timer)"},
			"probes:            imported: perf script: power:cpu_idle, wake causes\n" +
				"                   in the capture, not imported: event sched:sched_switch\n" +
				"                   missing: the capture lacks hrtimer_expire_entry, local_timer_exit (every local\n" +
				"                     timer wake-up is reported as timer): tick wake-ups\n"},
		{"wrapped", map[string]string{
			"irq_vectors:call_function_entry": "tp_btf", "irq_vectors:call_function_single_entry": "tp_btf",
			"irq_vectors:local_timer_entry": "tp_btf", "irq_vectors:local_timer_exit": "tp_btf"},
			"probes:            tp_btf: irq_vectors:call_function_entry, irq_vectors:call_function_single_entry,\n" +
				"                     irq_vectors:local_timer_entry, irq_vectors:local_timer_exit\n"},
	} {
		got := probeLines(tc.probes)
		if got != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, tc.want)
		}
		for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
			if len([]rune(l)) > infoWidth {
				t.Errorf("%s: a line of %d columns: %q", tc.name, len([]rune(l)), l)
			}
		}
	}
}
