package analysis

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
)

func u64(v uint64) *uint64   { return &v }
func f64(v float64) *float64 { return &v }

func cdf(n int, scale float64) []model.CDFPoint {
	var pts []model.CDFPoint
	for i := 1; i <= n; i++ {
		f := float64(i) / float64(n)
		pts = append(pts, model.CDFPoint{ValueNs: uint64(scale * math.Exp(4*f)), Fraction: f})
	}
	return pts
}

func sampleReport() *WhatifReport {
	prof := &model.Profile{Name: "spr", HZ: 250, Source: "intel_idle.c spr_cstates, Linux 6.18",
		States: []model.State{
			{Name: "POLL", Polling: true, Power: 1},
			{Name: "C1", ExitLatencyNs: 1000, TargetResidencyNs: 1000, Power: 0.3},
			{Name: "C1E", ExitLatencyNs: 2000, TargetResidencyNs: 4000, Power: 0.2, PowerEstimated: true},
			{Name: "C6", ExitLatencyNs: 290_000, TargetResidencyNs: 800_000, Power: 0.05},
		}}
	io := model.LatencySummary{Count: 100, Mean: 85000, P50: 80000, P99: 150000, Max: 400000}
	woke := u64(58723) // the trace has wake causes
	return &WhatifReport{
		Trace:   "fio-<pipe>.trace",
		Profile: prof,
		Results: []model.Result{
			{Policy: "menu", IdlePeriods: 10000, Selections: 10000, PollLimitNs: u64(20000),
				WakeLatencyNs: model.LatencySummary{Count: 5000, Mean: 40000, P50: 1000, P99: 290000, Max: 290000},
				IOLatencyNs:   &io, IOWokeIdle: woke, StateShare: map[string]float64{"POLL": 0.01, "C1": 0.2, "C1E": 0.09, "C6": 0.7},
				Above: 1234, Below: 56, EnergyRel: 1, WakeLatencyCDF: cdf(5000, 900), IOLatencyCDF: cdf(100, 60000)},
			{Policy: "menu+margin=25", IdlePeriods: 10000, Selections: 10000, PollLimitNs: u64(20000),
				WakeLatencyNs: model.LatencySummary{Count: 5000, Mean: 20000, P50: 1000, P99: 2000, Max: 290000},
				IOLatencyNs:   &io, IOWokeIdle: woke, StateShare: map[string]float64{"POLL": 0.01, "C1": 0.5, "C1E": 0.09, "C6": 0.4},
				Above: 400, Below: 300, EnergyRel: 1.12, WakeLatencyCDF: cdf(3000, 800), IOLatencyCDF: cdf(100, 50000)},
			{Policy: "menu+blkqos=10us/3ms", IdlePeriods: 10000, Selections: 10000, PollLimitNs: u64(20000),
				WakeLatencyNs: model.LatencySummary{Count: 5000, Mean: 1500, P50: 1000, P99: 2000, Max: 2000},
				IOLatencyNs:   &io, IOWokeIdle: woke, StateShare: map[string]float64{"POLL": 0.02, "C1": 0.6, "C1E": 0.38},
				Above: 10, Below: 900, EnergyRel: 1.3, WakeLatencyCDF: []model.CDFPoint{{ValueNs: 0, Fraction: 0.2}, {ValueNs: 1000, Fraction: 0.6}, {ValueNs: 2000, Fraction: 1}}},
			{Policy: "oracle", IdlePeriods: 10000, Selections: 10000,
				WakeLatencyNs: model.LatencySummary{Count: 5000, Mean: 30000, P50: 0, P99: 290000, Max: 290000},
				IOLatencyNs:   nil, StateShare: map[string]float64{"POLL": 0.05, "C6": 0.95},
				EnergyRel: 0.8, Agreement: f64(0.71), WakeLatencyCDF: cdf(10, 1000)},
		},
		Assumptions: "A wake-up pays the exit latency of the state the CPU is in; idle durations are taken as recorded.",
		Notes:       []string{"power estimated for C1E", "<script>alert(1)</script> & friends"},
	}
}

func TestWhatifJSONContract(t *testing.T) {
	rep := sampleReport()
	rep.Results[1].EnergyRel = math.NaN() // must not break the encoder
	rep.Results[2].WakeLatencyNs.Mean = math.Inf(1)
	var buf bytes.Buffer
	if err := RenderWhatif(&buf, rep, "json"); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	need(t, "whatif", v, "profile", "results")
	p := v["profile"].(map[string]any)
	need(t, "profile", p, "name", "hz", "states")
	for _, s := range p["states"].([]any) {
		need(t, "profile state", s.(map[string]any), "name", "exit_latency_ns", "target_residency_ns", "power", "polling")
	}
	res := v["results"].([]any)
	var order []string
	for _, r := range res {
		rm := r.(map[string]any)
		need(t, "result", rm, "policy", "idle_periods", "poll_limit_ns", "wake_latency_ns", "io_latency_ns", "state_share",
			"above", "below", "energy_rel", "agreement")
		need(t, "wake_latency_ns", rm["wake_latency_ns"].(map[string]any), "mean", "p50", "p99", "max")
		order = append(order, rm["policy"].(string))
	}
	if strings.Join(order, ",") != "menu,menu+margin=25,menu+blkqos=10us/3ms,oracle" {
		t.Errorf("results out of command-line order: %v", order)
	}
	last := res[3].(map[string]any)
	if last["poll_limit_ns"] != nil || last["io_latency_ns"] != nil {
		t.Errorf("poll_limit_ns/io_latency_ns must be null: %v %v", last["poll_limit_ns"], last["io_latency_ns"])
	}
	if res[0].(map[string]any)["agreement"] != nil || last["agreement"].(float64) != 0.71 {
		t.Errorf("agreement wrong")
	}
	if res[1].(map[string]any)["energy_rel"] != nil {
		t.Errorf("NaN energy_rel must be null")
	}
	if res[0].(map[string]any)["poll_limit_ns"].(float64) != 20000 {
		t.Errorf("poll_limit_ns in ns expected")
	}
	if strings.Contains(buf.String(), "ValueNs") {
		t.Errorf("CDF points leaked into JSON")
	}
	// An empty report still has every key.
	buf.Reset()
	if err := RenderWhatif(&buf, &WhatifReport{}, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"states": []`) || !strings.Contains(buf.String(), `"results": []`) {
		t.Errorf("empty report: %s", buf.String())
	}
}

func TestWhatifText(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderWhatif(&buf, sampleReport(), "text"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"menu+blkqos=10us/3ms", "Poll limit µs", "20.0", // poll limit in µs
		"290", // p99 290 µs
		"70.0 %", "1234 (12.3 %)", "1.120", "71.0 %", "Model assumptions. A wake-up pays",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if os.Getenv("SHOW") != "" {
		t.Log("\n" + out)
	}
}

func TestWhatifMarkdown(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderWhatif(&buf, sampleReport(), "markdown"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "| Policy") || !regexp.MustCompile(`\|[-:]+\|`).MatchString(out) {
		t.Errorf("no markdown table:\n%s", out)
	}
	if strings.Contains(out, "<script>") {
		t.Errorf("markdown must escape raw HTML from notes:\n%s", out)
	}
	if !strings.Contains(out, "<details>\n<summary>Model assumptions</summary>") {
		t.Errorf("no assumptions:\n%s", out)
	}
	if os.Getenv("SHOW") != "" {
		t.Log("\n" + out)
	}
}

func TestWhatifHTML(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderWhatif(&buf, sampleReport(), "html"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "<svg"); n != 3 {
		t.Errorf("%d <svg> elements, want 3 (wake tail, IO tail, shares)", n)
	}
	for _, bad := range []string{"http", "<script", "src=", "href=", "@import", "url("} {
		if strings.Contains(strings.ToLower(out), bad) {
			t.Errorf("HTML contains %q: it must fetch nothing", bad)
		}
	}
	for _, want := range []string{"<!DOCTYPE html>", `id="cdf-wake"`, `id="cdf-io"`, `id="shares"`, "&lt;script&gt;", "menu+margin=25", "</html>"} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// Four wake series, three IO series (oracle has none), a legend entry each.
	wake := section(out, `id="cdf-wake"`, "</svg>")
	if n := strings.Count(wake, "<path "); n != 4 {
		t.Errorf("wake CDF has %d series, want 4", n)
	}
	if n := strings.Count(section(out, `id="cdf-io"`, "</svg>"), "<path "); n != 2 {
		t.Errorf("IO CDF has %d series, want 2", n)
	}
	// Stacked bars: one rect per non-zero share plus one frame per policy.
	if n := strings.Count(section(out, `id="shares"`, "</svg>"), "<rect "); n != 4+4+3+2+4+4 { // bars, frames, legend
		t.Errorf("shares has %d rects", n)
	}
	// A percentile table under each plot: p90 read from the CDF
	// (900·e^(4·0.9) ns), the rest from the summary.
	if n := strings.Count(out, `<table class="percentiles">`); n != 2 {
		t.Errorf("%d percentile tables, want 2", n)
	}
	if !strings.Contains(section(out, `id="cdf-wake"`, "</table>"), "<td>1.00</td><td>32.9</td><td>290</td>") {
		t.Errorf("wake percentile table lacks menu's p50, p90, p99")
	}
	// Coinciding lines stay apart: each its own width and dash pattern.
	styles := regexp.MustCompile(`class="series"[^>]*stroke-width="([^"]+)"( stroke-dasharray="[^"]+")?`).FindAllStringSubmatch(wake, -1)
	seen := map[string]bool{}
	for _, m := range styles {
		if seen[m[1]+m[2]] {
			t.Errorf("two wake lines drawn alike: %s", m[0])
		}
		seen[m[1]+m[2]] = true
	}
	if len(styles) != 4 {
		t.Errorf("%d styled wake lines, want 4", len(styles))
	}
	// Log x axis: decade labels.
	if !strings.Contains(wake, ">1 µs<") || !strings.Contains(wake, ">100 µs<") {
		t.Errorf("wake CDF lacks decade labels")
	}
	if os.Getenv("SHOW") != "" {
		os.WriteFile("/tmp/whatif.html", buf.Bytes(), 0o644)
	}
}

func section(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i:], to)
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j]
}

func TestWhatifDeterministic(t *testing.T) {
	for _, f := range []string{"text", "markdown", "json", "html"} {
		var a, b bytes.Buffer
		if err := RenderWhatif(&a, sampleReport(), f); err != nil {
			t.Fatal(err)
		}
		if err := RenderWhatif(&b, sampleReport(), f); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: two renders differ", f)
		}
	}
	if err := RenderWhatif(&bytes.Buffer{}, sampleReport(), "pdf"); err == nil {
		t.Error("unknown format accepted")
	}
}

// Degenerate inputs render without panicking.
func TestWhatifDegenerate(t *testing.T) {
	reps := []*WhatifReport{
		nil, {},
		{Results: []model.Result{{Policy: "x"}}},
		{Profile: &model.Profile{}, Results: []model.Result{{Policy: "zero", WakeLatencyCDF: []model.CDFPoint{{ValueNs: 0, Fraction: 1}}, IOLatencyCDF: []model.CDFPoint{{ValueNs: 5, Fraction: 0.5}, {ValueNs: 5, Fraction: 1}}}}},
		{Results: []model.Result{{Policy: "nan", EnergyRel: math.Inf(-1), StateShare: map[string]float64{"A": math.NaN(), "B": 3}}}},
	}
	for i, r := range reps {
		for _, f := range []string{"text", "markdown", "json", "html"} {
			if err := RenderWhatif(&bytes.Buffer{}, r, f); err != nil {
				t.Errorf("report %d, %s: %v", i, f, err)
			}
		}
	}
}

// TestWhatifIOColumns: the cost table gives IO's median beside its tail,
// each under its own header, and the task's where the trace has it.
func TestWhatifIOColumns(t *testing.T) {
	task := model.LatencySummary{Count: 50, Mean: 130000, P50: 120000, P99: 310000, Max: 500000}
	withTask := sampleReport()
	withTask.Results[0].TaskIOLatencyNs = &task
	for _, c := range []struct {
		name string
		rep  *WhatifReport
		// want: header → the first row's cell; absent: headers not shown.
		want   map[string]string
		absent []string
	}{
		{"device IO only", sampleReport(),
			map[string]string{"IO p50 µs": FormatUs(80000), "IO p99 µs": FormatUs(150000)},
			[]string{"Task IO p50 µs", "Task IO p99 µs"}},
		{"task IO too", withTask,
			map[string]string{"IO p50 µs": FormatUs(80000), "IO p99 µs": FormatUs(150000), "Task IO p50 µs": FormatUs(120000), "Task IO p99 µs": FormatUs(310000)},
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			header, rows, _, _ := whatifTables(c.rep)
			for _, r := range rows {
				if len(r) != len(header) {
					t.Fatalf("row %q has %d cells for %d headers", r[0], len(r), len(header))
				}
			}
			for h, want := range c.want {
				i := slices.Index(header, h)
				if i < 0 {
					t.Errorf("no %q column in %q", h, header)
					continue
				}
				if got := rows[0][i]; got != want {
					t.Errorf("%s: %q, want %q", h, got, want)
				}
				// The oracle's row has no IO: a dash, not a zero.
				if got := rows[len(rows)-1][i]; got != dash {
					t.Errorf("%s without IO: %q, want %q", h, got, dash)
				}
			}
			// Device IO before the task's, each median before its tail,
			// all between the wake-ups and Above.
			order := []string{"Exit max µs", "IO p50 µs", "IO p99 µs", "Task IO p50 µs", "Task IO p99 µs", "Above"}
			last := -1
			for _, h := range order {
				i := slices.Index(header, h)
				if i < 0 {
					continue // absent (checked below)
				}
				if i <= last {
					t.Errorf("%q out of order in %q", h, header)
				}
				last = i
			}
			for _, h := range c.absent {
				if slices.Contains(header, h) {
					t.Errorf("%q shown without task IO: %q", h, header)
				}
			}
		})
	}
}
