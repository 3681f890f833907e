package analysis

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/idletrace/idletrace/pkg/model"
)

// ComparisonReport is a policy's prediction beside what was then measured:
// what `idletrace whatif BEFORE --policy SPEC --measured AFTER` and
// `idletrace experiment` print.
type ComparisonReport struct {
	Policy      string
	BeforeTrace string         // BEFORE, as named on the command line
	AfterTrace  string         // AFTER
	Profile     *model.Profile // the table the policy was predicted on
	// Before is BEFORE's own recorded result, Predicted the policy
	// replayed on BEFORE, Measured AFTER's own recorded result on AFTER's
	// table.
	Before, Predicted, Measured model.Result
	// Figures are the rows of the comparison, from ComparisonFigures.
	Figures     []FigureRow
	Assumptions string
	// Notes; those beginning WorkloadMovedNote say where the two
	// recordings differ in ways no policy explains, and CombineRuns keeps
	// every pair's.
	Notes []string
	// Command is the command line (argv) that made the report, as in
	// WhatifReport.
	Command []string
	// Recorded says where the traces were recorded (host, CPU, kernel,
	// CPUs), for a report pasted away from them; "" leaves it out.
	Recorded string
	// Runs is how many before/after pairs the figures combine
	// (0 or 1: one pair, whose results Before, Predicted and Measured are;
	// more: those are the first pair's, see CombineRuns).
	Runs int
}

// WorkloadFailedNote begins the note on a recording whose COMMAND failed
// on its own.
const WorkloadFailedNote = "the workload failed in "

// unlikeRunFactor: a run whose recording replayed fewer than a quarter,
// or more than four times, the median idle periods of its side (the
// befores, the afters) is not like the others.
const unlikeRunFactor = 4

// unlikeRunsNotes name the runs whose before or after recording was
// unlike the others of its side in idle periods: a new user's third
// before recording had 53 against 52,332 (its CPUs busy throughout), and
// the medians hid it, the before spread of a table's exit latencies 0.
func unlikeRunsNotes(reps []*ComparisonReport) []string {
	var notes []string
	for _, side := range []struct {
		name   string
		result func(*ComparisonReport) model.Result
		trace  func(*ComparisonReport) string
	}{
		{"before", func(r *ComparisonReport) model.Result { return r.Before }, func(r *ComparisonReport) string { return r.BeforeTrace }},
		{"after", func(r *ComparisonReport) model.Result { return r.Measured }, func(r *ComparisonReport) string { return r.AfterTrace }},
	} {
		n := make([]float64, len(reps))
		for i, r := range reps {
			n[i] = float64(side.result(r).IdlePeriods)
		}
		m := median(n)
		for i, r := range reps {
			if m > 0 && (n[i]*unlikeRunFactor < m || n[i] > m*unlikeRunFactor) {
				notes = append(notes, fmt.Sprintf("%s replayed %.0f idle periods against a median of %.0f over the runs' %s recordings: that run's workload was not like the others' (its figures still enter the medians)",
					side.trace(r), n[i], m, side.name))
			}
		}
	}
	return notes
}

// CombineRuns makes one report of an experiment recorded as several
// before/after pairs, alternately: each figure's before is the median of
// the pairs' befores, and its predicted and measured values are that
// median plus the median of the pairs' own changes (predicted − before,
// measured − before), so that what moved a pair's two recordings alike
// (the host's load, an emulated device's latency) cancels within the pair
// rather than mixing into separate medians (where before is missing in a
// pair, the plain medians). A value missing in any pair is missing; the
// errors are recomputed from the combined values, and BeforeSpread says
// how far before moved from run to run. The first pair's report gives the
// rest (results, notes, traces).
func CombineRuns(reps []*ComparisonReport) *ComparisonReport {
	if len(reps) == 0 {
		return nil
	}
	out := *reps[0]
	out.Runs = len(reps)
	if len(reps) == 1 {
		return &out
	}
	out.Notes = slices.Clone(out.Notes)
	for _, r := range reps[1:] {
		for _, n := range r.Notes {
			if strings.HasPrefix(n, WorkloadMovedNote) || strings.HasPrefix(n, WorkloadFailedNote) {
				out.Notes = append(out.Notes, n)
			}
		}
	}
	out.Notes = append(out.Notes, unlikeRunsNotes(reps)...)
	out.Figures = nil
	for i, f := range reps[0].Figures {
		var col [3][]float64
		samples := f.Samples // the fewest of any pair's
		for _, r := range reps {
			if i >= len(r.Figures) || r.Figures[i].Figure != f.Figure {
				col = [3][]float64{} // the pairs' tables differ (another state set): no median
				break
			}
			g := r.Figures[i]
			for k := range samples {
				samples[k] = min(samples[k], g.Samples[k])
			}
			for k, v := range []*float64{g.Before, g.Predicted, g.Measured} {
				if v != nil {
					col[k] = append(col[k], *v)
				}
			}
		}
		var v [3]*float64
		for k := range col {
			if len(col[k]) != len(reps) {
				continue
			}
			var m float64
			if b := col[0]; k > 0 && len(b) == len(reps) {
				changes := make([]float64, len(reps))
				for i := range changes {
					changes[i] = col[k][i] - b[i]
				}
				m = median(b) + median(changes)
			} else {
				m = median(col[k])
			}
			v[k] = &m
		}
		row := figureRow(f.Figure, f.Label, f.Unit, v)
		if f.Unit == "ns" {
			row = withSamples(row, samples)
		}
		if b := col[0]; len(b) == len(reps) {
			spread := slices.Max(b) - slices.Min(b)
			row.BeforeSpread = &spread
			if row.Measured != nil && row.Before != nil {
				row.WithinNoise = math.Abs(*row.Measured-*row.Before) <= spread
			}
		}
		out.Figures = append(out.Figures, row)
	}
	return &out
}

// median of a non-empty set (the mean of the middle two for an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// FigureRow is one figure before, predicted and measured, and the errors.
type FigureRow struct {
	Figure string // its JSON name: wake_latency_ns.p50, state_share.POLL, above_share
	Label  string // for people: "Exit latency per wake-up p50"
	Unit   string // "ns", "share" (a fraction of 1) or "per_s"
	// Before, Predicted and Measured are nil where a result lacks the
	// figure (no wake-ups, no IO).
	Before, Predicted, Measured *float64
	// ChangeError is the error on the change the policy makes:
	// |(predicted − before) − (measured − before)| / |measured − before|;
	// nil where a value is missing or the measured change is ~0
	// (NoChangeMeasured).
	ChangeError      *float64
	NoChangeMeasured bool
	// RelativeError is |predicted − measured| / measured; nil where a value
	// is missing or measured is 0.
	RelativeError *float64
	// BeforeSpread is how far BEFORE's value moved between the runs of an
	// experiment recorded more than once (max − min; nothing changed
	// between those recordings): the run-to-run noise to read a measured
	// change against. Nil for one run.
	BeforeSpread *float64
	// WithinNoise: the measured change is no larger than BeforeSpread.
	WithinNoise bool
	// Samples are how many values a latency figure's before, predicted and
	// measured values come from (0 where not a latency, or missing).
	Samples [3]uint64
	// FewSamples: before and measured are both there and one comes from
	// fewer samples than its statistic needs (minSamples): its errors say
	// nothing.
	FewSamples bool
}

// minSamples is how many values a latency statistic needs before its
// change means anything: a p99 of fewer than 100 is their maximum, and a
// mean or median of fewer than 10 moves with any one of them. A new
// user's experiment showed a task IO p99 off by 100 % from 6, 3, 1 and 4
// waits.
func minSamples(figure string) uint64 {
	if strings.HasSuffix(figure, ".p99") {
		return 100
	}
	return 10
}

// withSamples records row's sample counts and whether they are too few.
func withSamples(row FigureRow, samples [3]uint64) FigureRow {
	row.Samples = samples
	need := minSamples(row.Figure)
	// Where before or measured is missing there are no errors to withhold.
	row.FewSamples = row.Before != nil && row.Measured != nil && (samples[0] < need || samples[2] < need)
	return row
}

// latencyFigures are the latency distributions compared, each by its mean,
// p50 and p99. A latency figure is one line here.
var latencyFigures = []struct {
	key, label string
	get        func(*model.Result) *model.LatencySummary
}{
	{"wake_latency_ns", "Exit latency per wake-up", func(r *model.Result) *model.LatencySummary { return &r.WakeLatencyNs }},
	{"task_io_latency_ns", "Task IO latency", func(r *model.Result) *model.LatencySummary { return r.TaskIOLatencyNs }},
	{"io_latency_ns", "IO latency", func(r *model.Result) *model.LatencySummary { return r.IOLatencyNs }},
	// Predicted unchanged by construction: its measured change is the
	// device's own drift between the recordings, the part of the IO
	// figures' measured change that no policy made.
	{"io_device_latency_ns", "IO device latency", func(r *model.Result) *model.LatencySummary { return r.IODeviceLatencyNs }},
}

// nearLatencyNs: a predicted latency this close to the measured one is
// shown as within it rather than as a ratio (text only: JSON keeps
// relative_error), as two shares within 0.05 points are.
const nearLatencyNs = 10

// Measured changes this small count as none (see noChange).
const (
	noChangeLatencyRel = 1e-3   // of the larger of before and measured
	noChangeSharePts   = 0.0005 // of a share: 0.05 points
)

// ComparisonFigures compares before, predicted and measured figure by
// figure: for each latency in latencyFigures its mean, p50 and p99; the
// share of idle time in each of states; above and below as shares of each
// result's selections. With the two recordings' workloads (nil: none),
// also the traced wake latency after the exit latency the replay charges,
// and at the end the workload's pace and idle share, which say where the
// workload itself moved: before and measured only, as no replay predicts
// them (it keeps the recorded idle periods).
func ComparisonFigures(before, predicted, measured *model.Result, states []string, beforeWork, afterWork *Workload) []FigureRow {
	var rows []FigureRow
	three := func(get func(*model.Result) *float64) [3]*float64 {
		return [3]*float64{get(before), get(predicted), get(measured)}
	}
	add := func(figure, label, unit string, v [3]*float64) {
		rows = append(rows, figureRow(figure, label, unit, v))
	}
	addLatency := func(key, label string, s [3]*model.LatencySummary) {
		for _, stat := range []struct {
			name string
			pick func(*model.LatencySummary) float64
		}{
			{"mean", func(s *model.LatencySummary) float64 { return s.Mean }},
			{"p50", func(s *model.LatencySummary) float64 { return float64(s.P50) }},
			{"p99", func(s *model.LatencySummary) float64 { return float64(s.P99) }},
		} {
			var v [3]*float64
			var n [3]uint64
			for i, si := range s {
				if si != nil && si.Count > 0 {
					x := stat.pick(si)
					v[i], n[i] = &x, si.Count
				}
			}
			rows = append(rows, withSamples(figureRow(key+"."+stat.name, label+" "+stat.name, "ns", v), n))
		}
	}
	work := beforeWork != nil && afterWork != nil
	for i, lf := range latencyFigures {
		addLatency(lf.key, lf.label, [3]*model.LatencySummary{lf.get(before), lf.get(predicted), lf.get(measured)})
		if i == 0 && work {
			b, a := beforeWork.TracedWake.Summary(), afterWork.TracedWake.Summary()
			addLatency("traced_wake_latency_ns", "Traced wake latency", [3]*model.LatencySummary{&b, nil, &a})
		}
	}
	rows = append(rows, lessDeviceDrift(rows)...)
	for _, st := range states {
		add("state_share."+st, "Time in "+st, "share", three(func(r *model.Result) *float64 {
			v := r.StateShare[st]
			return &v
		}))
	}
	ofSelections := func(n func(*model.Result) uint64) func(*model.Result) *float64 {
		return func(r *model.Result) *float64 {
			if r.Selections == 0 {
				return nil
			}
			v := float64(n(r)) / float64(r.Selections)
			return &v
		}
	}
	add("above_share", "Above", "share", three(ofSelections(func(r *model.Result) uint64 { return r.Above })))
	add("below_share", "Below", "share", three(ofSelections(func(r *model.Result) uint64 { return r.Below })))
	// How the polling went: what a poll limit's change is about.
	add("wakeups_polling_share", "Wake-ups found polling", "share", three(func(r *model.Result) *float64 {
		if r.WakeLatencyNs.Count == 0 {
			return nil
		}
		v := float64(r.WakeupsPolling) / float64(r.WakeLatencyNs.Count)
		return &v
	}))
	add("poll_timeouts_share", "Poll time-outs", "share", three(func(r *model.Result) *float64 {
		if r.PollTimeouts == nil { // the oracle: no limit
			return nil
		}
		return ofSelections(func(r *model.Result) uint64 { return *r.PollTimeouts })(r)
	}))
	if work {
		// Not predicted: the replay keeps before's idle periods.
		// Each side's own: a window too short to say leaves its side
		// empty (ShortWindowNotes says so), not the other's too.
		measuredOnly := func(get func(*Workload) float64) [3]*float64 {
			var v [3]*float64
			if b := get(beforeWork); b != 0 {
				v[0] = &b
			}
			if a := get(afterWork); a != 0 {
				v[2] = &a
			}
			return v
		}
		add("idle_periods_per_s", "Idle periods per s, all CPUs", "per_s", measuredOnly((*Workload).PeriodsPerSecond))
		add("idle_share", "Idle share of CPU time", "share", measuredOnly((*Workload).IdleShare))
	}
	return rows
}

// driftAdjusted are the IO figures that get a row less the device's drift.
var driftAdjusted = []struct{ key, label string }{
	{"task_io_latency_ns", "Task IO latency"},
	{"io_latency_ns", "IO latency"},
}

// lessDeviceDrift makes, for each IO latency figure's mean and p50, a row
// whose measured value is less the device's own drift between the two
// recordings (the shift of io_device_latency_ns's median, measured minus
// before): the prediction holds the device fixed, so where the device
// itself answered slower or faster in the second recording, that part of
// the measured change is no policy's. The median's shift for the mean's
// row too: the device's mean is over every completion, and one 2 ms
// outlier among requests no task waited for moved it by 77 µs in a new
// user's experiment, which the task IO mean, less it, turned into a
// +47 µs the policy had not made. Named FIGURE_less_device_drift, and
// empty where a value is missing (no IO), as the other IO figures are.
// The IO latency's rows are empty too where AFTER's completions paid no
// exit latency, or next to none (it polled; a new user's every such row
// read 0 % error):
// AFTER's device latency is then all of its IO latency, and the row gave
// back BEFORE's device latency, a polling policy's prediction, whatever
// AFTER measured. The task IO rows keep what the task's own wake-up
// added, measured.
func lessDeviceDrift(rows []FigureRow) []FigureRow {
	byName := map[string]FigureRow{}
	for _, r := range rows {
		byName[r.Figure] = r
	}
	// AFTER's IO latency is its device latency, all but the exit
	// latencies it paid: where those come to nothing (within 1 %, or
	// 0.5 µs) the row is circular. A new user's after-run polled 99.4 % of
	// its wake-ups: its p50s were equal, its means not quite, and the p50
	// row read 0 % error.
	noExitPaid := func(stat string) bool {
		x, y := byName["io_latency_ns."+stat].Measured, byName["io_device_latency_ns."+stat].Measured
		return x != nil && y != nil && math.Abs(*x-*y) <= max(500, 0.01*math.Abs(*x))
	}
	var out []FigureRow
	for _, a := range driftAdjusted {
		// Not p99: the tail of a sum is not the sum of the tails, and a
		// device's p99 drift can come from requests the task never waited
		// for (a workload's own set-up writes).
		for _, stat := range []string{"mean", "p50"} {
			f, dev := byName[a.key+"."+stat], byName["io_device_latency_ns.p50"]
			var m *float64
			// Below zero the device's change was not its own drift (the
			// recordings' IO differed, e.g. other workloads): left empty;
			// so is a drift from too few requests to have one (a new
			// user's after-recording held 1 IO: its 1,240 µs "less the
			// drift" stood beside a measured 138).
			enough := min(dev.Samples[0], dev.Samples[2]) >= minSamples(dev.Figure)
			circular := a.key == "io_latency_ns" && noExitPaid(stat)
			if f.Measured != nil && dev.Measured != nil && dev.Before != nil && enough && !circular {
				if v := *f.Measured - (*dev.Measured - *dev.Before); v >= 0 {
					m = &v
				}
			}
			out = append(out, withSamples(figureRow(a.key+"."+stat+"_less_device_drift", a.label+" "+stat+", less the device's drift", "ns",
				[3]*float64{f.Before, f.Predicted, m}), f.Samples))
		}
	}
	return out
}

func figureRow(figure, label, unit string, v [3]*float64) FigureRow {
	row := FigureRow{Figure: figure, Label: label, Unit: unit}
	for i, p := range v {
		if p != nil && !finite(*p) {
			v[i] = nil
		}
	}
	row.Before, row.Predicted, row.Measured = v[0], v[1], v[2]
	b, p, m := v[0], v[1], v[2]
	if p != nil && m != nil && *m != 0 {
		e := math.Abs(*p-*m) / math.Abs(*m)
		row.RelativeError = &e
	}
	if b != nil && m != nil && noChange(unit, *b, *m) {
		row.NoChangeMeasured = true // a fact of the measurement, predicted or not (traced figures)
	} else if b != nil && p != nil && m != nil {
		e := math.Abs((*p-*b)-(*m-*b)) / math.Abs(*m-*b)
		row.ChangeError = &e
	}
	return row
}

// noChange: a measured change within 0.1 % of the larger latency, or 0.05
// points of a share, is taken as none: the error on it would divide by
// noise.
func noChange(unit string, before, measured float64) bool {
	d := math.Abs(measured - before)
	if unit == "share" {
		return d <= noChangeSharePts
	}
	return d <= noChangeLatencyRel*math.Max(math.Abs(before), math.Abs(measured))
}

// ComparisonStates lists the state names to compare: the profile's, then
// any other a result spent time in.
func ComparisonStates(prof *model.Profile, results ...model.Result) []string {
	return stateOrder(&WhatifReport{Profile: prof, Results: results})
}

// RenderComparison writes rep as text, markdown, json or html.
func RenderComparison(w io.Writer, rep *ComparisonReport, format string) error {
	switch format {
	case FormatJSON:
		return writeJSON(w, comparisonJSONDoc(rep))
	case FormatText, "":
		return renderComparisonDoc(newDoc(w, false), rep)
	case FormatMarkdown, "md":
		return renderComparisonDoc(newDoc(w, true), rep)
	case FormatHTML:
		return renderComparisonHTML(w, rep)
	}
	return &UnknownFormatError{Format: format, Valid: []string{FormatText, FormatMarkdown, FormatJSON, FormatHTML}}
}

// JSON: the whatif document of BEFORE (its results: before, then
// predicted) with a comparison object; README.md documents its fields.

type comparisonDocJSON struct {
	*whatifJSONDoc
	Comparison comparisonJSON `json:"comparison"`
}

type comparisonJSON struct {
	Policy        string                 `json:"policy"`
	BeforeTrace   string                 `json:"before_trace"`
	AfterTrace    string                 `json:"after_trace"`
	Profile       string                 `json:"profile"`
	Before        resultJSON             `json:"before"`
	Predicted     resultJSON             `json:"predicted"`
	Measured      resultJSON             `json:"measured"`
	Figures       []ComparisonFigureJSON `json:"figures"`
	NoChangeRules string                 `json:"no_change_rule"`
	// Runs: before/after pairs the figures combine (1: one pair; see CombineRuns).
	Runs int `json:"runs"`
}

// ComparisonFigureJSON is one figure of the comparison as JSON holds it
// (README.md: the comparison's fields).
type ComparisonFigureJSON struct {
	Figure           string   `json:"figure"`
	Unit             string   `json:"unit"`
	Before           *float64 `json:"before"`
	Predicted        *float64 `json:"predicted"`
	Measured         *float64 `json:"measured"`
	PredictedChange  *float64 `json:"predicted_change"`
	MeasuredChange   *float64 `json:"measured_change"`
	ChangeError      *float64 `json:"change_error"`
	NoChangeMeasured bool     `json:"no_change_measured"`
	RelativeError    *float64 `json:"relative_error"`
	// Only for an experiment of more than one run (see FigureRow), and
	// then true or false, never absent.
	BeforeSpread *float64 `json:"before_spread,omitempty"`
	WithinNoise  *bool    `json:"within_noise,omitempty"`
	// Samples: a latency figure's value counts, [before, predicted,
	// measured]; FewSamples: too few for its errors (FigureRow); both
	// there for latency figures only.
	Samples    *[3]uint64 `json:"samples,omitempty"`
	FewSamples *bool      `json:"few_samples,omitempty"`
}

const noChangeRule = "a measured change within 0.1 % of the larger of before and measured (latencies, rates) or 0.05 points (shares) is no change: change_error is then null and no_change_measured true"

func diff(a, b *float64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	d := *a - *b
	return &d
}

func comparisonJSONDoc(rep *ComparisonReport) *comparisonDocJSON {
	name := ""
	if rep.Profile != nil {
		name = rep.Profile.Name
	}
	d := &comparisonDocJSON{
		whatifJSONDoc: whatifJSON(&WhatifReport{Trace: rep.BeforeTrace, Profile: rep.Profile,
			Results: []model.Result{rep.Before, rep.Predicted}, Assumptions: rep.Assumptions, Notes: rep.Notes}),
		Comparison: comparisonJSON{Policy: rep.Policy, BeforeTrace: rep.BeforeTrace, AfterTrace: rep.AfterTrace, Profile: name,
			Before: resultToJSON(rep.Before), Predicted: resultToJSON(rep.Predicted), Measured: resultToJSON(rep.Measured),
			Figures: []ComparisonFigureJSON{}, NoChangeRules: noChangeRule, Runs: max(rep.Runs, 1)},
	}
	for _, f := range rep.Figures {
		d.Comparison.Figures = append(d.Comparison.Figures, ComparisonFigureJSON{Figure: f.Figure, Unit: f.Unit,
			Before: f.Before, Predicted: f.Predicted, Measured: f.Measured,
			PredictedChange: diff(f.Predicted, f.Before), MeasuredChange: diff(f.Measured, f.Before),
			ChangeError: f.ChangeError, NoChangeMeasured: f.NoChangeMeasured, RelativeError: f.RelativeError,
			BeforeSpread: f.BeforeSpread})
		fig := &d.Comparison.Figures[len(d.Comparison.Figures)-1]
		if f.BeforeSpread != nil && f.Before != nil && f.Measured != nil {
			fig.WithinNoise = &f.WithinNoise
		}
		if f.Unit == "ns" {
			fig.Samples, fig.FewSamples = &f.Samples, &f.FewSamples
		}
	}
	return d
}

// Text, Markdown and HTML share one table.

func comparisonTable(rep *ComparisonReport) (header []string, rows [][]string) {
	header = []string{"Figure", "Before", "Predicted", "Measured", "Predicted change", "Measured change", "Error on change", "Error"}
	runs := rep.Runs > 1
	if runs {
		header = slices.Insert(header, 2, "Before spread")
	}
	val := func(unit string, v *float64) string {
		switch {
		case v == nil:
			return dash
		case unit == "share":
			return FormatPct(*v)
		case unit == "per_s":
			return model.FormatCount(uint64(math.Round(*v)))
		}
		return formatUsSmall(*v)
	}
	change := func(unit string, v *float64) string {
		switch {
		case v == nil:
			return dash
		case unit == "share":
			return formatShareChange(*v)
		case unit == "per_s" && math.Round(*v) == 0:
			return "0"
		case unit == "per_s" && *v > 0:
			return "+" + model.FormatCount(uint64(math.Round(*v)))
		case unit == "per_s":
			return "-" + model.FormatCount(uint64(math.Round(-*v)))
		}
		if s := formatUsSmall(*v); *v > 0 && s != "0" {
			return "+" + s
		}
		return formatUsSmall(*v)
	}
	for _, f := range rep.Figures {
		label := f.Label
		if f.Unit == "ns" {
			label += " µs"
		}
		ce := dash
		switch {
		case f.NoChangeMeasured:
			ce = "no change measured"
		case f.ChangeError != nil:
			ce = FormatPct(*f.ChangeError)
		}
		if f.WithinNoise && !f.NoChangeMeasured {
			ce += " (within noise)"
		}
		few := f.FewSamples
		re := dash
		switch {
		case f.Unit == "share" && f.Predicted != nil && f.Measured != nil && noChange(f.Unit, *f.Predicted, *f.Measured):
			// 0.012 % against 0.006 % is "85 %" off: noise, not an error.
			re = "≤ 0.05 pts"
		case f.Unit == "ns" && f.Predicted != nil && f.Measured != nil && math.Abs(*f.Predicted-*f.Measured) < nearLatencyNs:
			// 2.4 ns against 0.87 ns is "177 %" off, but both are none.
			re = "≤ 0.01 µs"
		case f.RelativeError != nil:
			re = FormatPct(*f.RelativeError)
		}
		if few {
			n := min(f.Samples[0], f.Samples[2])
			ce, re = fmt.Sprintf("few samples (%s)", model.FormatCount(n)), dash
		}
		row := []string{label, val(f.Unit, f.Before), val(f.Unit, f.Predicted), val(f.Unit, f.Measured),
			change(f.Unit, diff(f.Predicted, f.Before)), change(f.Unit, diff(f.Measured, f.Before)), ce, re}
		if runs {
			sp := dash
			if f.BeforeSpread != nil {
				sp = strings.TrimPrefix(change(f.Unit, f.BeforeSpread), "+")
			}
			row = slices.Insert(row, 2, sp)
		}
		rows = append(rows, row)
	}
	return header, rows
}

// formatShareChange gives a change of a share (a fraction) in points, as
// finely as FormatPct gives the shares: 0 % to 0.017 % is +0.017 pts, not
// "0 pts", and 0 % to 0.0004 % is +<0.001 pts.
func formatShareChange(v float64) string {
	pts := v * 100
	switch {
	case math.Abs(pts) < 1e-9: // two sums of the same shares
		return "0 pts"
	case pts > 0 && pts < 0.0005:
		return "+<0.001 pts"
	case pts < 0 && pts > -0.0005:
		return "-<0.001 pts"
	case math.Abs(pts) < 0.1:
		return fmt.Sprintf("%+.3f pts", pts)
	}
	return fmt.Sprintf("%+.1f pts", pts)
}

// formatUsSmall is FormatUsF with two significant digits, in plain
// decimals, below 0.01 µs rather than 0 or 0.00: a comparison's error is
// of the figures, and a measured 0.0013 µs shown as 0 beside an error of
// 2,302 % read as a division by zero.
func formatUsSmall(ns float64) string {
	us := ns / 1000
	a := math.Abs(us)
	if a == 0 || a >= 0.01 {
		return FormatUsF(ns)
	}
	digits := 1 - int(math.Floor(math.Log10(a))) // two significant
	return strconv.FormatFloat(us, 'f', digits, 64)
}

func comparisonHead(rep *ComparisonReport) []string {
	prof := "no profile"
	if rep.Profile != nil {
		prof = "profile " + rep.Profile.Name
	}
	head := []string{
		fmt.Sprintf("Policy %s, predicted from %s (%d idle periods) on %s.", rep.Policy, rep.BeforeTrace, rep.Predicted.IdlePeriods, prof),
		fmt.Sprintf("Before: %s as recorded. Measured: %s as recorded, on its own table (%d idle periods). "+
			"Exit latency per wake-up, in all three, is the table's exit latency of the state each wake-up left, as the replay charges it; "+
			"traced wake latency is what each recording measured from the wake request to the idle exit (stats' per-state figures, pooled over every state), which no replay predicts.",
			rep.BeforeTrace, rep.AfterTrace, rep.Measured.IdlePeriods),
	}
	if p := rep.Profile; p != nil && p.Source != "" && p.Name != "recorded" && p.Name != "measured" {
		// Another machine's table: where it came from, and what of it the
		// prediction set aside (a file's hz).
		head = append(head, fmt.Sprintf("Profile %s (HZ %d): %s.", p.Name, p.HZ, p.Source))
	}
	if rep.Recorded != "" {
		head = append(head, rep.Recorded)
	}
	if rep.Runs > 1 {
		head = append(head, fmt.Sprintf("%d before/after pairs recorded alternately: before is the median of the befores; predicted and measured, before plus the median of the pairs' own changes (the traces named are the first pair's). "+
			"Before spread: how far before moved between the runs with nothing changed, the noise a measured change is to be read against; "+
			"\"within noise\" marks a measured change no larger than it.", rep.Runs))
	} else {
		head = append(head, "One before/after pair: how far the figures move between runs with nothing changed was not measured "+
			"(idletrace experiment --runs 3 or more on a shared or virtual machine).")
	}
	return head
}

const comparisonCaption = "Error on change: |(predicted − before) − (measured − before)| / |measured − before|, how far the predicted change is from the measured one (\"no change measured\" where the measured change is within 0.1 % of a latency or 0.05 points of a share). " +
	"Error: |predicted − measured| / measured (\"≤ 0.05 pts\" for shares that close, whose ratio near zero divides by noise). Error \"≤ 0.01 µs\": latencies within 10 ns of each other. Few samples: a p99 from fewer than 100 values, or a mean or p50 from fewer than 10, whose errors are not given. Idle periods per s and idle share of CPU time: the workload's own pace and load over stats' window, which no replay predicts (it keeps before's idle periods); task IO latency: block issue to the issuing task running again; IO latency: block issue to completion; above/below: shares of each result's selections (by the cpuidle core's rule, the kernel's own count: a poll the wake-up came late to counts as below); wake-ups found polling: of the wake-ups; poll time-outs: of the selections."

func renderComparisonDoc(d *doc, rep *ComparisonReport) error {
	d.command(rep.Command)
	d.title("idletrace whatif: predicted against measured")
	d.lines(comparisonHead(rep)...)
	header, rows := comparisonTable(rep)
	if err := d.table(header, rows, 0); err != nil {
		return err
	}
	if l := comparisonChangeLine(rep); l != "" {
		d.para(l)
	}
	d.para(comparisonCaption)
	d.bullets(rep.Notes)
	if rep.Assumptions != "" {
		d.folded("Model assumptions", rep.Assumptions)
	}
	return d.flush()
}

func renderComparisonHTML(out io.Writer, rep *ComparisonReport) error {
	w := bufio.NewWriter(out)
	title := "idletrace whatif: " + rep.Policy + " predicted against measured"
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", esc(title), htmlStyle)
	fmt.Fprintf(w, "<h1>idletrace whatif: predicted against measured</h1>\n")
	for _, l := range comparisonHead(rep) {
		fmt.Fprintf(w, "<p class=\"meta\">%s</p>\n", esc(l))
	}
	htmlCommand(w, rep.Command)
	header, rows := comparisonTable(rep)
	htmlTable(w, header, rows, false)
	if l := comparisonChangeLine(rep); l != "" {
		fmt.Fprintf(w, "<p>%s</p>\n", esc(l))
	}
	fmt.Fprintf(w, "<p class=\"caption\">%s</p>\n", esc(comparisonCaption))
	return htmlEnd(w, rep.Notes, rep.Assumptions)
}

// comparisonChangeLine says what the prediction changed against the
// reference it was replayed beside (the recorded choices, or the bare
// governor on another profile), and why it changed little: "" when it was
// replayed alone.
func comparisonChangeLine(rep *ComparisonReport) string {
	c := rep.Predicted.Changes
	if c == nil || c.Reference && c.Reason == nil {
		return ""
	}
	head := "Prediction: "
	if rep.Runs > 1 { // Predicted is the first pair's result (CombineRuns)
		head = "Prediction, first pair: "
	}
	return head + changeLine(&rep.Predicted, !c.Reference)
}
