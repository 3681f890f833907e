package analysis

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
)

// TestLessDeviceDrift: the IO figures less the device's drift take the
// device's measured change out of the measured value, and keep before and
// predicted as they are.
func TestLessDeviceDrift(t *testing.T) {
	io := func(task, io, dev uint64) model.Result {
		return model.Result{Policy: "recorded", Selections: 1,
			TaskIOLatencyNs:   &model.LatencySummary{Count: 100, Mean: float64(task), P50: task, P99: 2 * task},
			IOLatencyNs:       &model.LatencySummary{Count: 100, Mean: float64(io), P50: io, P99: 2 * io},
			IODeviceLatencyNs: &model.LatencySummary{Count: 100, Mean: float64(dev), P50: dev, P99: 2 * dev}}
	}
	// C6 enabled: predicted +150 µs for the task; measured +240, of which
	// the device drifted +60.
	before, predicted, measured := io(1_260_000, 1_200_000, 1_200_000), io(1_410_000, 1_350_000, 1_200_000), io(1_500_000, 1_420_000, 1_260_000)
	by := map[string]FigureRow{}
	for _, r := range ComparisonFigures(&before, &predicted, &measured, []string{"C1"}, nil, nil) {
		by[r.Figure] = r
	}
	for _, c := range []struct {
		figure                      string
		before, predicted, measured float64
		changeError                 float64
	}{
		{"task_io_latency_ns.p50_less_device_drift", 1_260_000, 1_410_000, 1_440_000, 30.0 / 180},
		{"task_io_latency_ns.mean_less_device_drift", 1_260_000, 1_410_000, 1_440_000, 30.0 / 180},
		{"io_latency_ns.p50_less_device_drift", 1_200_000, 1_350_000, 1_360_000, 10.0 / 160},
	} {
		r, ok := by[c.figure]
		if !ok {
			t.Errorf("%s: missing", c.figure)
			continue
		}
		if r.Before == nil || r.Predicted == nil || r.Measured == nil || r.ChangeError == nil ||
			*r.Before != c.before || *r.Predicted != c.predicted || *r.Measured != c.measured || math.Abs(*r.ChangeError-c.changeError) > 1e-12 {
			t.Errorf("%s: %+v; want before %g, predicted %g, measured %g, error on the change %g", c.figure, r, c.before, c.predicted, c.measured, c.changeError)
		}
	}
	if _, ok := by["task_io_latency_ns.p99_less_device_drift"]; ok {
		t.Error("a p99 less the device's drift: the tail of a sum is not the sum of the tails")
	}
	// AFTER paid no exit latency (it polled): its device latency is all
	// of its IO latency, and the IO rows less the drift would give back
	// BEFORE's device latency, a polling policy's prediction, whatever was
	// measured: empty; the task rows keep the task's wake-up, measured.
	polled := io(1_300_000, 1_250_000, 1_250_000)
	for _, r := range ComparisonFigures(&before, &predicted, &polled, []string{"C1"}, nil, nil) {
		ioRow := strings.HasPrefix(r.Figure, "io_latency_ns.")
		if strings.HasSuffix(r.Figure, "_less_device_drift") && (r.Measured != nil) == ioRow {
			t.Errorf("AFTER polled: %s measured %v", r.Figure, r.Measured)
		}
	}
	// AFTER paid next to none (it polled 99.4 % of its wake-ups, as a new
	// user's did): its p50s equal, its means within 1 %: as circular.
	// Where the mean paid 3 %, its row stays.
	for _, tc := range []struct {
		ioMean   float64
		meanKept bool
	}{{1_255_000, false}, {1_290_000, true}} {
		almost := io(1_300_000, 1_250_000, 1_250_000)
		almost.IOLatencyNs.Mean = tc.ioMean
		for _, r := range ComparisonFigures(&before, &predicted, &almost, []string{"C1"}, nil, nil) {
			switch r.Figure {
			case "io_latency_ns.p50_less_device_drift":
				if r.Measured != nil {
					t.Errorf("AFTER's IO mean %g: %s measured %v, want none", tc.ioMean, r.Figure, *r.Measured)
				}
			case "io_latency_ns.mean_less_device_drift":
				if (r.Measured != nil) != tc.meanKept {
					t.Errorf("AFTER's IO mean %g: %s measured %v, want kept %v", tc.ioMean, r.Figure, r.Measured, tc.meanKept)
				}
			}
		}
	}
	// The unadjusted figure is still there, with the whole measured change.
	if r := by["task_io_latency_ns.p50"]; r.Measured == nil || *r.Measured != 1_500_000 {
		t.Errorf("task IO p50: %+v", r)
	}
	// A device mean moved by one outlier, its median not: the mean's row
	// keeps the whole measured change (no drift to take out).
	outlier := measured
	outlier.IODeviceLatencyNs = &model.LatencySummary{Count: 100, Mean: 1_200_000 - 77_000, P50: 1_200_000, P99: 2_400_000}
	beforeOutlier := before
	beforeOutlier.IODeviceLatencyNs = &model.LatencySummary{Count: 100, Mean: 1_200_000, P50: 1_200_000, P99: 2_400_000}
	found := false
	for _, r := range ComparisonFigures(&beforeOutlier, &predicted, &outlier, []string{"C1"}, nil, nil) {
		if r.Figure == "task_io_latency_ns.mean_less_device_drift" {
			found = true
			if r.Measured == nil || *r.Measured != 1_500_000 {
				t.Errorf("%s: %+v, want the measured 1,500,000: the device's median did not move", r.Figure, r)
			}
		}
	}
	if !found {
		t.Error("no task_io_latency_ns.mean_less_device_drift row")
	}
	// A device "drift" larger than the latency it is taken from (another
	// workload's IO): no negative latency, an empty value.
	other := io(1_500_000, 1_420_000, 3_000_000)
	for _, r := range ComparisonFigures(&before, &predicted, &other, []string{"C1"}, nil, nil) {
		if strings.HasSuffix(r.Figure, "_less_device_drift") && r.Measured != nil {
			t.Errorf("%s: measured %g with the device 1.8 ms slower", r.Figure, *r.Measured)
		}
	}
	// A device measured on one request after has no drift to take out: an
	// empty value, not the task's less that one request's difference.
	one := measured
	one.IODeviceLatencyNs = &model.LatencySummary{Count: 1, Mean: 140_000, P50: 140_000, P99: 140_000}
	for _, r := range ComparisonFigures(&before, &predicted, &one, []string{"C1"}, nil, nil) {
		if strings.HasSuffix(r.Figure, "_less_device_drift") && r.Measured != nil {
			t.Errorf("%s: measured %g from a device drift of one request", r.Figure, *r.Measured)
		}
	}
}

// TestComparisonFigures: the error on the change and the plain error, a
// measured change of ~0 said so instead of divided by, missing figures
// left empty.
func TestComparisonFigures(t *testing.T) {
	before := model.Result{Policy: "recorded", Selections: 1000, Above: 100, Below: 0,
		WakeLatencyNs: model.LatencySummary{Count: 10, Mean: 100_000, P50: 80_000, P99: 200_000},
		StateShare:    map[string]float64{"POLL": 0, "C1": 0.2, "C6": 0.8}}
	predicted := model.Result{Policy: "menu+disable=C6", Selections: 1000, Above: 0, Below: 50,
		WakeLatencyNs: model.LatencySummary{Count: 10, Mean: 60_000, P50: 80_000, P99: 20_000},
		StateShare:    map[string]float64{"POLL": 0.1, "C1": 0.9}}
	measured := model.Result{Policy: "recorded", Selections: 2000, Above: 0, Below: 200,
		WakeLatencyNs: model.LatencySummary{Count: 10, Mean: 50_000, P50: 80_040, P99: 10_000},
		StateShare:    map[string]float64{"POLL": 0.1, "C1": 0.9}}
	rows := ComparisonFigures(&before, &predicted, &measured, []string{"POLL", "C1", "C6"}, nil, nil)
	by := map[string]FigureRow{}
	for _, r := range rows {
		by[r.Figure] = r
	}
	near := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 1e-9 {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	// Wake mean: predicted change −40 µs, measured −50 µs: 10/50.
	near("wake mean change error", by["wake_latency_ns.mean"].ChangeError, 0.2)
	near("wake mean relative error", by["wake_latency_ns.mean"].RelativeError, 0.2)
	// p50 moved 40 ns in 80 µs: no change measured, no division.
	if r := by["wake_latency_ns.p50"]; !r.NoChangeMeasured || r.ChangeError != nil {
		t.Errorf("wake p50: %+v", r)
	}
	near("wake p99 change error", by["wake_latency_ns.p99"].ChangeError, 10_000.0/190_000)
	near("C6 change error", by["state_share.C6"].ChangeError, 0)
	if by["state_share.C6"].RelativeError != nil {
		t.Error("C6: a relative error against a measured 0")
	}
	// Above/below as shares of each result's selections.
	near("below measured", by["below_share"].Measured, 0.1)
	near("below change error", by["below_share"].ChangeError, 0.5)
	// No IO: the IO figures are there, empty.
	if r := by["io_latency_ns.p99"]; r.Before != nil || r.ChangeError != nil || r.RelativeError != nil {
		t.Errorf("io p99 without IO: %+v", r)
	}

	if r, ok := by["task_io_latency_ns.p50_less_device_drift"]; !ok || r.Before != nil || r.Measured != nil {
		t.Errorf("task IO p50 less the device's drift without IO: %+v (present: %v)", r, ok)
	}

	rep := &ComparisonReport{Policy: predicted.Policy, BeforeTrace: "a.trace", AfterTrace: "b.trace",
		Profile: &model.Profile{Name: "icx"}, Before: before, Predicted: predicted, Measured: measured, Figures: rows}
	var buf bytes.Buffer
	if err := RenderComparison(&buf, rep, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results    []map[string]any `json:"results"`
		Comparison map[string]any   `json:"comparison"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"policy", "before_trace", "after_trace", "profile", "before", "predicted", "measured", "figures", "no_change_rule"} {
		if _, ok := doc.Comparison[k]; !ok {
			t.Errorf("comparison lacks %q", k)
		}
	}
	f0 := doc.Comparison["figures"].([]any)[0].(map[string]any)
	for _, k := range []string{"figure", "unit", "before", "predicted", "measured", "predicted_change", "measured_change", "change_error", "no_change_measured", "relative_error"} {
		if _, ok := f0[k]; !ok {
			t.Errorf("figure lacks %q", k)
		}
	}
	// Shares near zero: 0.012 % predicted against 0.006 % measured is not
	// "100 %" off but within 0.05 points; 30 % against 20 % is 50 %.
	share := func(v float64) *float64 { return &v }
	rep.Figures = append(slices.Clone(rows),
		figureRow("state_share.POLL", "Time in POLL", "share", [3]*float64{share(0), share(0.00012), share(0.00006)}),
		figureRow("state_share.C1", "Time in C1", "share", [3]*float64{share(0.2), share(0.3), share(0.2)}))
	for _, format := range []string{"text", "markdown", "html"} {
		buf.Reset()
		if err := RenderComparison(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"no change measured", "20.0 %"} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("%s: no %q in\n%s", format, want, buf.String())
			}
		}
		// In the rows: the caption quotes "≤ 0.05 pts" too.
		for _, row := range []string{`Time in POLL[^\n]*≤ 0\.05 pts`, `Time in C1[^\n]*50\.0 %`} {
			if !regexp.MustCompile(row).MatchString(buf.String()) {
				t.Errorf("%s: no row matching %q in\n%s", format, row, buf.String())
			}
		}
	}
	rep.Figures = rows
	// Outside its tables a Markdown report keeps within reportWidth
	// columns, with traces named by long paths too (README: for a GitHub
	// comment or a mailing list).
	rep.BeforeTrace, rep.AfterTrace = "/srv/traces/2026-12-04/host-a/before-c6-on.trace", "/srv/traces/2026-12-04/host-a/after-c6-off.trace"
	for _, format := range []string{"markdown"} {
		buf.Reset()
		if err := RenderComparison(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(buf.String(), "\n") {
			if n := displayLen(l); n > reportWidth && strings.TrimLeft(l, "|│┌├└") == l {
				t.Errorf("%s line %d: %d columns, more than %d: %s", format, i+1, n, reportWidth, l)
			}
		}
	}
}

// TestComparisonSamplesAndWorkload: a latency figure from too few values
// shows "few samples" instead of its errors (a new user's task IO p99 read
// as 100 % off, from 6 waits before and 4 after), the traced wake latency
// sits beside the charged one, before and measured only, and the
// workload's pace and idle share are measured, not predicted.
func TestComparisonSamplesAndWorkload(t *testing.T) {
	lat := func(n uint64, us float64) *model.LatencySummary {
		return &model.LatencySummary{Count: n, Mean: us * 1000, P50: uint64(us * 1000), P99: uint64(us * 2000)}
	}
	before := model.Result{Policy: "recorded", Selections: 1000, WakeLatencyNs: *lat(1000, 1), TaskIOLatencyNs: lat(6, 861), StateShare: map[string]float64{"C1": 1}}
	predicted := model.Result{Policy: "menu", Selections: 1000, WakeLatencyNs: *lat(1000, 1), TaskIOLatencyNs: lat(6, 861), StateShare: map[string]float64{"C1": 1}}
	measured := model.Result{Policy: "recorded", Selections: 1500, WakeLatencyNs: *lat(1500, 1), TaskIOLatencyNs: lat(4, 170), StateShare: map[string]float64{"C1": 1}}
	work := func(periods, idleNs uint64, wakeUs ...uint64) *Workload {
		w := &Workload{CPUs: Workloads{0: {Periods: periods, IdleNs: idleNs, FirstNs: 1e9, LastNs: 3e9}, 1: {}}}
		for _, us := range wakeUs {
			w.TracedWake.Record(us * 1000)
		}
		return w
	}
	n := func(v uint64) *uint64 { return &v }
	before.WakeupsPolling, before.PollTimeouts = 100, n(10)        // of 1,000 wake-ups and selections
	predicted.WakeupsPolling, predicted.PollTimeouts = 900, n(100) // a longer poll: most wake-ups caught
	measured.WakeupsPolling, measured.PollTimeouts = 1200, n(150)  // of 1,500
	bw, aw := work(130_000, 1e9, 18, 18, 18), work(169_000, 0.4e9, 16, 16, 16)
	rows := ComparisonFigures(&before, &predicted, &measured, []string{"C1"}, bw, aw)
	by := map[string]FigureRow{}
	var order []string
	for _, r := range rows {
		by[r.Figure] = r
		order = append(order, r.Figure)
	}
	for _, tc := range []struct {
		figure string
		few    bool
	}{
		{"wake_latency_ns.p99", false},
		{"task_io_latency_ns.p50", true}, // 4 after: under 10
		{"task_io_latency_ns.p99", true},
		{"task_io_latency_ns.p50_less_device_drift", false}, // no device figure: no measured value, no errors to withhold
		{"traced_wake_latency_ns.p50", true},                // 3 wake-ups each
	} {
		if r, ok := by[tc.figure]; !ok || r.FewSamples != tc.few {
			t.Errorf("%s: few samples %v (samples %v), want %v", tc.figure, r.FewSamples, r.Samples, tc.few)
		}
	}
	if r := by["task_io_latency_ns.p99"]; r.Samples != [3]uint64{6, 6, 4} {
		t.Errorf("task IO p99 samples %v, want [6 6 4]", r.Samples)
	}
	if r := by["traced_wake_latency_ns.mean"]; r.Before == nil || *r.Before != 18_000 || r.Predicted != nil || r.Measured == nil || *r.Measured != 16_000 {
		t.Errorf("traced wake mean: %+v, want 18 µs before, none predicted, 16 µs measured", r)
	}
	if i := slices.Index(order, "traced_wake_latency_ns.mean"); i < 1 || order[i-1] != "wake_latency_ns.p99" {
		t.Errorf("traced wake latency not right after the charged exit latency: %v", order)
	}
	pace := by["idle_periods_per_s"]
	if pace.Before == nil || *pace.Before != 65_000 || pace.Predicted != nil || pace.Measured == nil || *pace.Measured != 84_500 || pace.ChangeError != nil || pace.RelativeError != nil {
		t.Errorf("idle periods per s: %+v, want 65,000 before, 84,500 measured, nothing predicted and no errors", pace)
	}
	for _, tc := range []struct {
		figure    string
		b, p, m   float64
		changeErr float64
	}{
		{"wakeups_polling_share", 0.1, 0.9, 0.8, 0.1 / 0.7}, // predicted +0.8, measured +0.7
		{"poll_timeouts_share", 0.01, 0.1, 0.1, 0},
	} {
		r := by[tc.figure]
		if r.Before == nil || math.Abs(*r.Before-tc.b) > 1e-12 || r.Predicted == nil || math.Abs(*r.Predicted-tc.p) > 1e-12 ||
			r.Measured == nil || math.Abs(*r.Measured-tc.m) > 1e-12 || r.ChangeError == nil || math.Abs(*r.ChangeError-tc.changeErr) > 1e-9 {
			t.Errorf("%s: %+v, want %v → %v predicted, %v measured, error on change %v", tc.figure, r, tc.b, tc.p, tc.m, tc.changeErr)
		}
	}
	// Two CPUs over 2 s, CPU 0 idle 1 s then 0.4 s: 25 % and 10 %.
	if r := by["idle_share"]; r.Before == nil || math.Abs(*r.Before-0.25) > 1e-12 || r.Measured == nil || math.Abs(*r.Measured-0.1) > 1e-12 {
		t.Errorf("idle share: %+v, want 25 %% before, 10 %% measured", r)
	}

	rep := &ComparisonReport{Policy: "menu", BeforeTrace: "a.trace", AfterTrace: "b.trace", Profile: &model.Profile{Name: "recorded"},
		Before: before, Predicted: predicted, Measured: measured, Figures: rows}
	var buf bytes.Buffer
	if err := RenderComparison(&buf, rep, "text"); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		`Task IO latency p99 µs[^\n]*few samples \(4\)[^\n]*│ +— │`,
		`Traced wake latency p50 µs +│ +18\.0 │ +— │ +16\.0 │`,
		`Idle periods per s, all CPUs +│ +65,000 │ +— │ +84,500 │ +— │ +\+19,500 │ +— │ +— │`,
		`Exit latency per wake-up p50 µs[^\n]*≤ 0\.01 µs`, // 1 µs predicted and measured: not "0 %"
		`Wake-ups found polling +│ +10\.0 % │ +90\.0 % │ +80\.0 % │`,
	} {
		if !regexp.MustCompile(row).MatchString(buf.String()) {
			t.Errorf("no row matching %q in\n%s", row, buf.String())
		}
	}
	// The oracle has no poll limit: its time-outs are no figure.
	oracle := predicted
	oracle.PollTimeouts = nil
	found := false
	for _, r := range ComparisonFigures(&before, &oracle, &measured, []string{"C1"}, nil, nil) {
		if r.Figure == "poll_timeouts_share" {
			found = true
			if r.Predicted != nil || r.ChangeError != nil || r.Before == nil || r.Measured == nil {
				t.Errorf("poll time-outs for a policy without a limit: %+v, want before and measured only", r)
			}
		}
	}
	if !found {
		t.Error("no poll_timeouts_share row")
	}
	buf.Reset()
	if err := RenderComparison(&buf, rep, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Comparison struct {
			Figures []ComparisonFigureJSON `json:"figures"`
		} `json:"comparison"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, f := range doc.Comparison.Figures {
		switch {
		case f.Figure == "task_io_latency_ns.p99" && (f.FewSamples == nil || !*f.FewSamples || f.Samples == nil || *f.Samples != [3]uint64{6, 6, 4}):
			t.Errorf("JSON %s: few_samples %v, samples %v", f.Figure, f.FewSamples, f.Samples)
		case f.Unit == "ns" && f.FewSamples == nil: // false is said, not left out
			t.Errorf("JSON %s: no few_samples", f.Figure)
		case f.Unit != "ns" && (f.Samples != nil || f.FewSamples != nil):
			t.Errorf("JSON %s: samples on a %s figure", f.Figure, f.Unit)
		}
	}
}

// TestCombineRuns: an experiment of several before/after pairs reports each
// figure's median before, before plus the median of the pairs' own
// changes as predicted and measured, the errors from those, and how far
// before moved between the runs (the noise a measured change is read
// against).
func TestCombineRuns(t *testing.T) {
	run := func(before, predicted, measured float64) *ComparisonReport {
		res := func(mean float64) model.Result {
			return model.Result{Selections: 100, WakeLatencyNs: model.LatencySummary{Count: 10, Mean: mean, P50: 1, P99: 1},
				StateShare: map[string]float64{"C1": 1}}
		}
		b, p, m := res(before), res(predicted), res(measured)
		return &ComparisonReport{Policy: "menu+disable=C6", BeforeTrace: "before-1.trace", AfterTrace: "after-1.trace",
			Before: b, Predicted: p, Measured: m, Figures: ComparisonFigures(&b, &p, &m, []string{"C1"}, nil, nil)}
	}
	for _, tc := range []struct {
		name                        string
		reps                        []*ComparisonReport
		before, predicted, measured float64
		spread                      *float64
		changeError                 float64
		withinNoise                 bool
	}{
		{"one run: unchanged, no spread", []*ComparisonReport{run(100, 60, 50)}, 100, 60, 50, nil, 0.2, false},
		// Before's median 100; the pairs' predicted changes −35, −50, −30
		// (median −35), measured −40, −70, −40 (median −40). The plain
		// medians (60, 50) would mix pairs: the second pair's low measured
		// value went with its high before. Before moved 20 between runs.
		{"three runs: median changes", []*ComparisonReport{run(90, 55, 50), run(110, 60, 40), run(100, 70, 60)},
			100, 65, 60, ptr(20.0), 0.125, false},
		// Before 100; changes predicted −20, −40, −50 (−40), measured +10,
		// −5, −25 (−5): the measured change is within the before spread
		// (30).
		{"a change within the noise", []*ComparisonReport{run(80, 60, 90), run(100, 60, 95), run(110, 60, 85)},
			100, 60, 95, ptr(30.0), 7, true},
		{"two runs: the mean of the middle two", []*ComparisonReport{run(100, 60, 50), run(120, 80, 70)},
			110, 70, 60, ptr(20.0), 0.2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := CombineRuns(tc.reps)
			if rep.Runs != len(tc.reps) {
				t.Errorf("Runs %d, want %d", rep.Runs, len(tc.reps))
			}
			f := figureOf(t, rep, "wake_latency_ns.mean")
			for _, c := range []struct {
				name string
				got  *float64
				want float64
			}{{"before", f.Before, tc.before}, {"predicted", f.Predicted, tc.predicted}, {"measured", f.Measured, tc.measured}, {"change error", f.ChangeError, tc.changeError}} {
				if c.got == nil || math.Abs(*c.got-c.want) > 1e-9 {
					t.Errorf("%s %v, want %v", c.name, c.got, c.want)
				}
			}
			if (f.BeforeSpread == nil) != (tc.spread == nil) || f.BeforeSpread != nil && *f.BeforeSpread != *tc.spread {
				t.Errorf("before spread %v, want %v", f.BeforeSpread, tc.spread)
			}
			if f.WithinNoise != tc.withinNoise {
				t.Errorf("within noise %v, want %v", f.WithinNoise, tc.withinNoise)
			}
			var buf bytes.Buffer
			if err := RenderComparison(&buf, rep, "json"); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Comparison struct {
					Runs    int                    `json:"runs"`
					Figures []ComparisonFigureJSON `json:"figures"`
				} `json:"comparison"`
			}
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Comparison.Runs != len(tc.reps) {
				t.Errorf("JSON runs %d, want %d", doc.Comparison.Runs, len(tc.reps))
			}
			for _, jf := range doc.Comparison.Figures {
				// Said with more than one run, false included; else absent.
				if jf.Figure == "wake_latency_ns.mean" && ((jf.WithinNoise != nil) != (len(tc.reps) > 1) || jf.WithinNoise != nil && *jf.WithinNoise != tc.withinNoise) {
					t.Errorf("JSON within_noise %v, want %v with %d runs", jf.WithinNoise, tc.withinNoise, len(tc.reps))
				}
			}
			buf.Reset()
			if err := RenderComparison(&buf, rep, "text"); err != nil {
				t.Fatal(err)
			}
			multi := len(tc.reps) > 1
			if strings.Contains(buf.String(), "Before spread") != multi || strings.Contains(buf.String(), "(within noise)") != tc.withinNoise {
				t.Errorf("text report (runs %d, within noise %v):\n%s", len(tc.reps), tc.withinNoise, buf.String())
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestCombineRunsMissing: a value missing in one pair is missing from the
// combined figure; where before is missing in a pair, predicted and
// measured are their plain medians (no pair's change to take).
func TestCombineRunsMissing(t *testing.T) {
	run := func(before, predicted, measured float64) *ComparisonReport {
		res := func(mean float64) model.Result {
			r := model.Result{Selections: 100, StateShare: map[string]float64{"C1": 1}}
			if !math.IsNaN(mean) { // NaN: no wake-ups, no figure
				r.WakeLatencyNs = model.LatencySummary{Count: 10, Mean: mean, P50: 1, P99: 1}
			}
			return r
		}
		b, p, m := res(before), res(predicted), res(measured)
		return &ComparisonReport{Before: b, Predicted: p, Measured: m, Figures: ComparisonFigures(&b, &p, &m, []string{"C1"}, nil, nil)}
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name                        string
		reps                        []*ComparisonReport
		before, predicted, measured *float64
	}{
		{"measured missing in one pair", []*ComparisonReport{run(100, 60, 50), run(110, 70, nan), run(90, 55, 45)},
			ptr(100.0), ptr(100.0 - 40), nil},
		{"before missing in one pair: plain medians", []*ComparisonReport{run(100, 60, 50), run(nan, 70, 65), run(90, 55, 45)},
			nil, ptr(60.0), ptr(50.0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := CombineRuns(tc.reps)
			f := figureOf(t, rep, "wake_latency_ns.mean")
			for _, c := range []struct {
				name      string
				got, want *float64
			}{{"before", f.Before, tc.before}, {"predicted", f.Predicted, tc.predicted}, {"measured", f.Measured, tc.measured}} {
				if (c.got == nil) != (c.want == nil) || c.got != nil && math.Abs(*c.got-*c.want) > 1e-9 {
					t.Errorf("%s %v, want %v", c.name, deref(c.got), deref(c.want))
				}
			}
			if f.ChangeError != nil && (f.Before == nil || f.Measured == nil) {
				t.Errorf("a change error %v without before and measured", *f.ChangeError)
			}
		})
	}
}

// figureOf is rep's figure named name; the test fails without one.
func figureOf(t *testing.T, rep *ComparisonReport, name string) *FigureRow {
	t.Helper()
	for i := range rep.Figures {
		if rep.Figures[i].Figure == name {
			return &rep.Figures[i]
		}
	}
	t.Fatalf("no %s", name)
	return nil
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// A comparison on another machine's table says where the table came from
// and what of it was set aside; on the trace's own, nothing more.
func TestComparisonHeadNamesTheProfile(t *testing.T) {
	for _, tc := range []struct {
		prof *model.Profile
		want string // "" none
	}{
		{&model.Profile{Name: "f", HZ: 250, Source: "file f.json; the file's hz 1000 not used"}, "Profile f (HZ 250): file f.json; the file's hz 1000 not used."},
		{&model.Profile{Name: "recorded", HZ: 250, Source: "trace (6.18)"}, ""},
	} {
		head := strings.Join(comparisonHead(&ComparisonReport{Policy: "menu", Profile: tc.prof}), "\n")
		if has := strings.Contains(head, "Profile "); tc.want == "" && has || tc.want != "" && !strings.Contains(head, tc.want) {
			t.Errorf("profile %s: head %q, want %q", tc.prof.Name, head, tc.want)
		}
	}
}

// TestFormatUsSmall: a comparison's small latencies keep two significant
// digits, so that an error on them can be checked from the table.
func TestFormatUsSmall(t *testing.T) {
	for _, tc := range []struct {
		ns   float64
		want string
	}{
		{0, "0"}, {1.3, "0.0013"}, {-1.3, "-0.0013"}, {4.9, "0.0049"}, {4.999, "0.0050"}, {5, "0.0050"}, {0.05, "0.000050"},
		{9.99, "0.0100"}, {10, "0.01"}, {30, "0.03"}, {1000, "1.00"}, {250_000, "250"},
	} {
		if got := formatUsSmall(tc.ns); got != tc.want {
			t.Errorf("formatUsSmall(%v) = %q, want %q", tc.ns, got, tc.want)
		}
	}
}

// TestFormatShareChange: a change of a share is shown as finely as the
// shares: never "0 pts" between two shares that differ.
func TestFormatShareChange(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0 pts"},
		{0.3 - 0.1 - 0.2, "0 pts"}, // float noise
		{0.00017, "+0.017 pts"},
		{-0.00017, "-0.017 pts"},
		{0.000004, "+<0.001 pts"},
		{-0.000004, "-<0.001 pts"},
		{0.0012, "+0.1 pts"},
		{-0.25, "-25.0 pts"},
	} {
		if got := formatShareChange(tc.v); got != tc.want {
			t.Errorf("formatShareChange(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// A recording too short for an idle rate leaves its own side of those
// rows empty, not the other's, and a note says which and why.
func TestComparisonShortWindow(t *testing.T) {
	r := model.Result{Policy: "recorded", Selections: 10, StateShare: map[string]float64{"C1": 1}}
	short := &Workload{CPUs: Workloads{0: {Periods: 9, IdleNs: 40e6, FirstNs: 1e9, LastNs: 1.09e9}}, WindowNs: 90e6}
	long := &Workload{CPUs: Workloads{0: {Periods: 168, IdleNs: 1.9e9, FirstNs: 1e9, LastNs: 3e9}}, WindowNs: 2e9}
	for _, r := range ComparisonFigures(&r, &r, &r, []string{"C1"}, short, long) {
		if r.Figure == "idle_share" || r.Figure == "idle_periods_per_s" {
			if r.Before != nil || r.Measured == nil {
				t.Errorf("%s: before %v, measured %v; want none before (90 ms), after's own", r.Figure, r.Before, r.Measured)
			}
		}
	}
	notes := ShortWindowNotes(short, long, "b.trace", "a.trace")
	if len(notes) != 1 || !strings.Contains(notes[0], "b.trace's window is 90.000 ms") {
		t.Errorf("notes %q, want one on b.trace's 90 ms window", notes)
	}
}
