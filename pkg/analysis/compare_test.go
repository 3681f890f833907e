package analysis

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
)

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
	rows := ComparisonFigures(&before, &predicted, &measured, []string{"POLL", "C1", "C6"})
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
	for _, format := range []string{"text", "markdown", "html"} {
		buf.Reset()
		if err := RenderComparison(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "no change measured") || !strings.Contains(buf.String(), "20.0 %") {
			t.Errorf("%s:\n%s", format, buf.String())
		}
	}
}
