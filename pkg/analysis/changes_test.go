package analysis

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
)

func strp(s string) *string { return &s }

// withChanges gives sampleReport's results the changes a replay would.
func withChanges() *WhatifReport {
	rep := sampleReport()
	why := "limited 0 of 138,286 IO wake-ups: completions woke CPU 1, IO was issued on CPU 0"
	ch := []*model.Changes{
		{Against: "menu", Reference: true, WakeUps: 41000, IOWokeIdle: 58723, CPUs: []model.CPUChanges{}},
		{Against: "menu", WakeUpsChanged: 5278, WakeUps: 41000, IOChanged: 7822, IOWokeIdle: 58723, TaskIOChanged: 12, TaskIO: 300,
			CPUs: []model.CPUChanges{{CPU: 0, WakeUpsChanged: 278}, {CPU: 1, WakeUpsChanged: 5000, IOChanged: 7822}}},
		{Against: "menu", WakeUps: 41000, IOWokeIdle: 58723, TaskIO: 300, CPUs: []model.CPUChanges{}, Reason: strp(why)},
		{Against: "menu", WakeUpsChanged: 41000, WakeUps: 41000, CPUs: []model.CPUChanges{{CPU: 0, WakeUpsChanged: 41000}}},
	}
	for i := range rep.Results {
		rep.Results[i].Changes = ch[i]
	}
	return rep
}

func TestChangeLines(t *testing.T) {
	rep := withChanges()
	want := []string{
		"menu: the reference.",
		"menu+margin=25: changed 5,278 of 41,000 wake-ups (CPUs 0, 1), 7,822 of 58,723 IO completions and 12 of 300 task IO waits.",
		"menu+blkqos=10us/3ms: changed none of 41,000 wake-ups, 58,723 IO completions and 300 task IO waits; " +
			"limited 0 of 138,286 IO wake-ups: completions woke CPU 1, IO was issued on CPU 0.",
		"oracle: changed 41,000 of 41,000 wake-ups (CPU 0).", // no IO in the result: no IO figure
	}
	got := changeLines(rep.Results)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l := changeLines(sampleReport().Results); l != nil {
		t.Errorf("lines without changes: %q", l)
	}

	for _, format := range []string{"text", "markdown", "html"} {
		var buf bytes.Buffer
		if err := RenderWhatif(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		for _, s := range []string{"the reference", "5,278 of 41,000 wake-ups", "limited 0 of 138,286 IO wake-ups", "Changes are against the first policy"} {
			if !strings.Contains(out, s) {
				t.Errorf("%s lacks %q", format, s)
			}
		}
		if format == "text" {
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "  ") && len([]rune(l)) > 100 { // the change lines
					t.Errorf("text line of %d columns: %q", len([]rune(l)), l)
				}
			}
		}
	}

	var buf bytes.Buffer
	if err := RenderWhatif(&buf, rep, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []struct {
			Changes map[string]any `json:"changes"`
		} `json:"results"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for i, r := range doc.Results {
		for _, k := range []string{"against", "reference", "wake_ups_changed", "wake_ups", "io_changed", "io_woke_idle", "task_io_changed", "task_io", "cpus", "reason"} {
			if _, ok := r.Changes[k]; !ok {
				t.Errorf("result %d: changes lack %q", i, k)
			}
		}
	}
	if doc.Results[2].Changes["reason"] == nil || doc.Results[1].Changes["reason"] != nil {
		t.Errorf("reasons: %v, %v", doc.Results[1].Changes["reason"], doc.Results[2].Changes["reason"])
	}
}

// The comparison report says what the prediction changed against its
// reference, in every format.
func TestComparisonChangeLine(t *testing.T) {
	w := withChanges()
	before, predicted := w.Results[0], w.Results[2]
	predicted.Changes.Against = "recorded"
	rep := &ComparisonReport{Policy: predicted.Policy, BeforeTrace: "a.trace", AfterTrace: "b.trace", Profile: w.Profile,
		Before: before, Predicted: predicted, Measured: before,
		Figures: ComparisonFigures(&before, &predicted, &before, ComparisonStates(w.Profile, before), nil, nil)}
	want := "Prediction: menu+blkqos=10us/3ms: against recorded, changed none of 41,000 wake-ups"
	for _, format := range []string{"text", "markdown", "html"} {
		var buf bytes.Buffer
		if err := RenderComparison(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		out := strings.Join(strings.Fields(buf.String()), " ")
		if !strings.Contains(out, want) || !strings.Contains(out, "IO was issued on CPU 0") {
			t.Errorf("%s lacks the change line:\n%s", format, buf.String())
		}
	}
	var buf bytes.Buffer
	if err := RenderComparison(&buf, rep, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"task_io_changed"`) {
		t.Error("comparison JSON lacks the prediction's changes")
	}
	// Of several pairs, the line is the first pair's, and says so.
	combined := CombineRuns([]*ComparisonReport{rep, rep, rep})
	if l := comparisonChangeLine(combined); !strings.HasPrefix(l, "Prediction, first pair: menu+blkqos=10us/3ms: against recorded") {
		t.Errorf("line of a combined report: %q", l)
	}
	// Replayed alone, the prediction is its own reference: no line.
	rep.Predicted.Changes = &model.Changes{Against: predicted.Policy, Reference: true}
	if l := comparisonChangeLine(rep); l != "" {
		t.Errorf("line for a prediction replayed alone: %q", l)
	}
}
