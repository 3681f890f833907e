//go:build lab

package labtest

import (
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Seed 003 (../shared/seeds/003: on an Icelake server fio's 4 KiB random
// reads' max latency was ~250 µs with C6 enabled and ~105 µs with it
// disabled, and the block layer's PM QoS patch, 10 µs for 3 ms, cut it to
// 123–133 µs) in the lab: icx's table, menu, POLL off, fio psync random
// reads on CPU 1 from a null NVMe disk with a queue per CPU, recorded from
// CPU 2 with C6 on, then with C6 off (idletrace experiment). From the C6-on
// recording whatif predicts menu+disable=C6 and menu+blkqos=10us/3ms;
// five pairs, alternating.
//
// Under TCG a read takes over a millisecond whatever the disk's latency
// (QEMU's NVMe completes at its main loop's next wake-up), so the lab
// cannot show the seed's tens of microseconds; it shows its question:
// completions that wake the reader's CPU from C6. What is judged:
//   - the seed's premise: most of fio's completions woke an idle CPU;
//   - the figure a user reads against the one the process saw: idletrace's
//     task IO latency p50 within 10 % of fio's own completion latency p50,
//     on the first pair's two recordings;
//   - the answer: the change of fio's own p50 from C6 on to C6 off, within
//     25 % of the change the experiment predicted for disable=C6 (task IO
//     p50, the comparison's median of the pairs' changes); measured as the median
//     over the pairs of each pair's change less the disk's drift between
//     its two recordings (the recorded io_device_latency_ns p50, which no
//     policy sets);
//   - blkqos=10us/3ms predicts what disable=C6 does here (within 5 % on the
//     task IO p50), since every read is issued and completed on CPU 1 and
//     follows the last within 3 ms.
//
// The table the test logs (the first pair's) is the README's "Seed 003 in
// the lab".
func TestLabSeed003(t *testing.T) {
	root, in := labKernelInput(t, "lab/workloads/seed003.sh")
	const policies = "--policy menu --policy menu+disable=C6 --policy menu+blkqos=10us/3ms"
	script := pinReport + housekeeping + pollOff + "; " + experimentCmd("menu+disable=C6", seed003Runs, "seed003.sh") + "; " +
		"taskset -c 2 idletrace whatif /out/exp/before-1.trace --io comm=fio " + policies + " --format json >/out/whatif.json && " +
		"taskset -c 2 idletrace stats /out/exp/before-1.trace --io comm=fio --format json >/out/stats-on.json && " +
		"taskset -c 2 idletrace stats /out/exp/after-1.trace --io comm=fio --format json >/out/stats-off.json"
	out := runLabCPUs(t, root, in, "lab", "icx", "menu", expCPUs, script, seed003Env...)
	keepLabOut(out, "seed003")
	checkPinned(t, out)
	checkHousekeeping(t, out)

	// The runs alternate, C6 on then off: fio-1.json, fio-3.json, ... are on.
	var fioRuns [2][]fioClat
	for i := range 2 * seed003Runs {
		fioRuns[i%2] = append(fioRuns[i%2], readFio(t, out, i+1))
	}
	fioOn, fioOff := fioRuns[0][0], fioRuns[1][0]
	on, off := readStatsIO(t, filepath.Join(out, "stats-on.json")), readStatsIO(t, filepath.Join(out, "stats-off.json"))
	pred := readWhatifIO(t, filepath.Join(out, "whatif.json"))
	disabled, blkqos := pred["menu+disable=C6"], pred["menu+blkqos=10us/3ms"]
	if disabled == nil || blkqos == nil {
		t.Fatalf("whatif.json: no result for menu+disable=C6 or menu+blkqos=10us/3ms (have %v)", slices.Sorted(maps.Keys(pred)))
	}

	t.Logf("Seed 003 in the lab, fio's and idletrace's figures (µs):\n%s", seed003Table(fioOn, fioOff, on, off, disabled, blkqos))

	if on.Requests == 0 {
		t.Fatal("the C6-on recording has no IO of fio's")
	}
	woke := float64(on.WokeIdleCPU) / float64(on.Requests)
	t.Logf("C6 on: %d of fio's %d completions woke an idle CPU (%.1f %%)", on.WokeIdleCPU, on.Requests, 100*woke)
	if woke < 0.5 {
		t.Errorf("only %.1f %% of fio's completions woke an idle CPU: not the seed's case", 100*woke)
	}
	for _, r := range []struct {
		name string
		fio  fioClat
		io   statsIO
	}{{"C6 on", fioOn, on}, {"C6 off", fioOff, off}} {
		if r.io.Task == nil {
			t.Errorf("%s: stats gives no task IO latency", r.name)
			continue
		}
		d := math.Abs(r.io.Task.P50-r.fio.P50) / r.fio.P50
		t.Logf("%s: task IO p50 %.1f µs, fio's clat p50 %.1f µs (%.1f %% apart)", r.name, r.io.Task.P50/1e3, r.fio.P50/1e3, 100*d)
		if d > 0.10 {
			t.Errorf("%s: idletrace's task IO p50 %.1f µs is %.1f %% from fio's own clat p50 %.1f µs (bar 10 %%)", r.name, r.io.Task.P50/1e3, 100*d, r.fio.P50/1e3)
		}
	}
	if disabled.Task == nil || blkqos.Task == nil {
		t.Fatal("whatif gives no task IO latency")
	}
	figs := readComparison(t, filepath.Join(out, "cmp.json"))
	task := figs["task_io_latency_ns.p50"]
	if task.Predicted == nil || task.Before == nil {
		t.Fatalf("cmp.json: task IO p50 (%s) missing", describe(task))
	}
	// The prediction is the comparison's (the median of the pairs'
	// predicted changes). The measurement is the median of each pair's
	// own change less that pair's drift: the runs alternate, so the
	// emulator's slow drift cancels within a pair, where it would not
	// between two medians.
	predicted := *task.Predicted - *task.Before
	moved := make([]float64, seed003Runs)
	pairs := make([]string, seed003Runs)
	for i := range seed003Runs {
		before := recordedIO(t, filepath.Join(out, "exp", fmt.Sprintf("before-%d.trace", i+1)))
		after := recordedIO(t, filepath.Join(out, "exp", fmt.Sprintf("after-%d.trace", i+1)))
		drift := after.Device.P50 - before.Device.P50
		fioMoved := fioRuns[1][i].P50 - fioRuns[0][i].P50
		moved[i] = fioMoved - drift
		pairs[i] = fmt.Sprintf("%.0f → %.0f, drift %+.0f: %+.0f", fioRuns[0][i].P50/1e3, fioRuns[1][i].P50/1e3, drift/1e3, moved[i]/1e3)
	}
	slices.Sort(moved)
	measured := moved[len(moved)/2]
	changeErr := math.Abs(predicted-measured) / math.Abs(measured)
	t.Logf("disable=C6 over %d pairs: predicted task IO p50 change %+.1f µs (the comparison's); fio's clat p50 per pair, C6 on → off less the disk's drift (µs): %s; median %+.1f µs (error on the change %.0f %%)",
		seed003Runs, predicted/1e3, strings.Join(pairs, "; "), measured/1e3, 100*changeErr)
	if changeErr > 0.25 {
		t.Errorf("disable=C6: fio's p50 moved %+.1f µs (less the disk's drift), whatif predicted %+.1f µs: %.0f %% off (bar 25 %%)", measured/1e3, predicted/1e3, 100*changeErr)
	}
	if d := math.Abs(blkqos.Task.P50-disabled.Task.P50) / disabled.Task.P50; d > 0.05 {
		t.Errorf("blkqos=10us/3ms predicts task IO p50 %.1f µs, disable=C6 %.1f µs (%.1f %% apart, bar 5 %%): every read is issued and completed on CPU 1 within 3 ms of the last",
			blkqos.Task.P50/1e3, disabled.Task.P50/1e3, 100*d)
	}
}

// seed003Runs: before/after pairs (more than one: the script reads
// before-1.trace): in one pair fio's p50 moved 43 % less than predicted,
// the disk's drift taken out, where the task IO p50 of the same pair moved
// 15 % less: fio's own clock adds the system call's way in and out, which
// drifts too. Three pairs' medians came out 27 % off once in CI (a bar of
// 25 %), as the experiments' did before they went to five.
const seed003Runs = 5

// seed003Env: as the experiments (multi-threaded TCG, the pinned
// tracepoints), with QEMU's NVMe serving the null disk (a queue per vCPU)
// at the latency of the by-hand run the README first gave.
var seed003Env = []string{"IDLETRACE_LAB_TCG=multi", "IDLETRACE_LAB_NULL_LATENCY_NS=20000", "IDLETRACE_LAB_NULL_DISK=nvme",
	appendEnv(pinTracepoints())}

// latencyNs is a latency object of idletrace's JSON (ns).
type latencyNs struct {
	Mean, P50, P99, Max float64
}

type statsIO struct {
	Requests    uint64     `json:"requests"`
	WokeIdleCPU uint64     `json:"woke_idle_cpu"`
	Latency     *latencyNs `json:"latency_ns"`
	Task        *latencyNs `json:"task_latency_ns"`
}

// whatifIO is one whatif result's IO figures.
type whatifIO struct {
	Latency *latencyNs `json:"io_latency_ns"`
	Device  *latencyNs `json:"io_device_latency_ns"`
	Task    *latencyNs `json:"task_io_latency_ns"`
}

// recordedIO is whatif's recorded result for fio's IO in a trace, from the
// idletrace the VM ran, run on the host.
func recordedIO(t *testing.T, trace string) whatifIO {
	t.Helper()
	js := strings.TrimSuffix(trace, ".trace") + "-recorded.json"
	cmd := exec.Command(filepath.Join(os.Getenv("IDLETRACE_LAB_TOOLS"), "idletrace"), "whatif", trace, "--io", "comm=fio", "--policy", "recorded", "--format", "json", "-o", js)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	r := readWhatifIO(t, js)["recorded"]
	if r == nil || r.Device == nil {
		t.Fatalf("%s: no recorded result with a device latency", js)
	}
	return *r
}

// fioClat is fio's own completion latency of the reads (ns). P50 is the
// exact median of the per-read log; P99 and Max are fio's report's.
type fioClat struct {
	P50, P99, Max float64
}

// readFio reads run n's fio report, fio-N.json, and its per-read
// completion latency log, fio-N_clat.1.log (seed003.sh's
// --write_lat_log). The report's percentiles are the bucket edges of fio's
// histogram, 1/64 of a power of two apart (16 µs at 1.3 ms): on a change of
// 150 µs each end of the comparison would carry up to 11 % of rounding.
func readFio(t *testing.T, out string, n int) fioClat {
	t.Helper()
	path := filepath.Join(out, fmt.Sprintf("fio-%d.json", n))
	var doc struct {
		Jobs []struct {
			Read struct {
				TotalIOs int `json:"total_ios"`
				ClatNs   struct {
					Max        float64            `json:"max"`
					Percentile map[string]float64 `json:"percentile"`
				} `json:"clat_ns"`
			} `json:"read"`
		} `json:"jobs"`
	}
	readJSON(t, path, &doc)
	if len(doc.Jobs) != 1 {
		t.Fatalf("%s: %d fio jobs, want 1", path, len(doc.Jobs))
	}
	r := doc.Jobs[0].Read
	bucketP50 := r.ClatNs.Percentile["50.000000"]
	f := fioClat{P99: r.ClatNs.Percentile["99.000000"], Max: r.ClatNs.Max}
	if bucketP50 == 0 || f.P99 == 0 {
		t.Fatalf("%s: no clat percentiles", path)
	}
	logPath := filepath.Join(out, fmt.Sprintf("fio-%d_clat.1.log", n))
	clat := readFioLatLog(t, logPath)
	if len(clat) != r.TotalIOs {
		t.Fatalf("%s: %d reads, fio's report counts %d", logPath, len(clat), r.TotalIOs)
	}
	slices.Sort(clat)
	f.P50 = clat[(len(clat)-1)/2]
	// The log is in ns (fio ≥ 3.0); its median must fall in the report's bucket.
	if d := math.Abs(f.P50-bucketP50) / bucketP50; d > 2.0/64 {
		t.Fatalf("%s: the log's median %.0f ns is %.1f %% from the report's p50 %.0f ns: not one run's reads in ns", logPath, f.P50, 100*d, bucketP50)
	}
	return f
}

// readFioLatLog reads a fio latency log written with --log_avg_msec=0:
// one line per I/O, "time_ms, value, ddir, bs, offset[, prio]".
func readFioLatLog(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v []float64
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.Split(line, ",")
		if len(fields) < 2 {
			t.Fatalf("%s:%d: %q is not a latency log line", path, i+1, line)
		}
		ns, err := strconv.ParseFloat(strings.TrimSpace(fields[1]), 64)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		v = append(v, ns)
	}
	return v
}

func readStatsIO(t *testing.T, path string) statsIO {
	t.Helper()
	var doc struct {
		IO *statsIO `json:"io"`
	}
	readJSON(t, path, &doc)
	if doc.IO == nil {
		t.Fatalf("%s: no io", path)
	}
	return *doc.IO
}

func readWhatifIO(t *testing.T, path string) map[string]*whatifIO {
	t.Helper()
	var doc struct {
		Results []struct {
			Policy string `json:"policy"`
			whatifIO
		} `json:"results"`
	}
	readJSON(t, path, &doc)
	out := map[string]*whatifIO{}
	for i := range doc.Results {
		out[doc.Results[i].Policy] = &doc.Results[i].whatifIO
	}
	return out
}

// seed003Table is the README's table: the seed's figures beside fio's and
// idletrace's in the lab (µs).
func seed003Table(fioOn, fioOff fioClat, on, off statsIO, disabled, blkqos *whatifIO) string {
	us := func(v float64) string { return fmt.Sprintf("%.0f", v/1e3) }
	lat := func(l *latencyNs) string {
		if l == nil {
			return "—"
		}
		return "p50 " + us(l.P50) + ", p99 " + us(l.P99)
	}
	fio := func(f fioClat) string { return "p50 " + us(f.P50) + ", p99 " + us(f.P99) + ", max " + us(f.Max) }
	var b strings.Builder
	b.WriteString("| µs | seed 003 (Icelake, NVMe): fio | lab: fio's own clat | lab: idletrace task IO latency | lab: idletrace IO latency |\n")
	b.WriteString("|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| C6 on, measured | max 250 | %s | %s | %s |\n", fio(fioOn), lat(on.Task), lat(on.Latency))
	fmt.Fprintf(&b, "| `menu+disable=C6`, predicted | — | — | %s | %s |\n", lat(disabled.Task), lat(disabled.Latency))
	fmt.Fprintf(&b, "| `menu+blkqos=10us/3ms`, predicted | max 123–133 (measured, the seed's patch) | — | %s | %s |\n", lat(blkqos.Task), lat(blkqos.Latency))
	fmt.Fprintf(&b, "| C6 off, measured | max 105 | %s | %s | %s |\n", fio(fioOff), lat(off.Task), lat(off.Latency))
	return b.String()
}
