package analysis

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/idletrace/idletrace/pkg/model"
)

// WhatifReport is everything `idletrace whatif` prints.
type WhatifReport struct {
	Trace   string         // the trace file, as named on the command line
	Profile *model.Profile // the state table the policies were replayed on
	// Results, one per --policy, in command-line order.
	Results []model.Result
	// Assumptions is the cost model's one-paragraph statement.
	Assumptions string
	// Notes are remarks on this run (estimated power, inferred inputs, ...).
	Notes []string
	// Command is the command line (argv) that made the report, printed
	// at the head of Markdown and HTML; not in JSON.
	Command []string
}

// RenderWhatif writes rep as text, markdown, json or html.
func RenderWhatif(w io.Writer, rep *WhatifReport, format string) error {
	if rep == nil {
		rep = &WhatifReport{}
	}
	switch format {
	case FormatJSON:
		return writeJSON(w, whatifJSON(rep))
	case FormatText, "":
		return renderWhatifDoc(newDoc(w, false), rep)
	case FormatMarkdown, "md":
		return renderWhatifDoc(newDoc(w, true), rep)
	case FormatHTML:
		return renderWhatifHTML(w, rep)
	}
	return &UnknownFormatError{Format: format, Valid: []string{FormatText, FormatMarkdown, FormatJSON, FormatHTML}}
}

// JSON shapes. Profile and results follow the contract in docs/DESIGN.md;
// non-finite numbers (which encoding/json refuses) become null or 0.

type whatifJSONDoc struct {
	Trace       string       `json:"trace"`
	Profile     profileJSON  `json:"profile"`
	Results     []resultJSON `json:"results"`
	Assumptions string       `json:"assumptions"`
	Notes       []string     `json:"notes"`
}

type profileJSON struct {
	Name   string      `json:"name"`
	Source string      `json:"source"`
	HZ     int         `json:"hz"`
	States []stateJSON `json:"states"`
}

type stateJSON struct {
	Name              string  `json:"name"`
	Desc              string  `json:"desc,omitempty"`
	ExitLatencyNs     uint64  `json:"exit_latency_ns"`
	TargetResidencyNs uint64  `json:"target_residency_ns"`
	Power             float64 `json:"power"`
	PowerEstimated    bool    `json:"power_estimated"`
	Polling           bool    `json:"polling"`
	Disabled          bool    `json:"disabled"`
}

// resultJSON is model.Result with its floats made safe for JSON: the outer
// fields shadow the embedded ones of the same JSON name.
type resultJSON struct {
	model.Result
	EnergyRel             *float64 `json:"energy_rel"`
	Agreement             *float64 `json:"agreement"`
	EnergyBusyCoreSeconds *float64 `json:"energy_units"`
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func finitePtr(f float64) *float64 {
	if !finite(f) {
		return nil
	}
	return &f
}

func safeSummary(s model.LatencySummary) model.LatencySummary {
	if !finite(s.Mean) {
		s.Mean = 0
	}
	return s
}

func whatifJSON(rep *WhatifReport) *whatifJSONDoc {
	d := &whatifJSONDoc{Trace: rep.Trace, Assumptions: rep.Assumptions, Notes: rep.Notes, Results: []resultJSON{}}
	if d.Notes == nil {
		d.Notes = []string{}
	}
	d.Profile.States = []stateJSON{}
	if p := rep.Profile; p != nil {
		d.Profile.Name, d.Profile.Source, d.Profile.HZ = p.Name, p.Source, p.HZ
		for _, s := range p.States {
			pw := s.Power
			if !finite(pw) {
				pw = 0
			}
			d.Profile.States = append(d.Profile.States, stateJSON{Name: s.Name, Desc: s.Desc, ExitLatencyNs: s.ExitLatencyNs,
				TargetResidencyNs: s.TargetResidencyNs, Power: pw, PowerEstimated: s.PowerEstimated, Polling: s.Polling, Disabled: s.Disabled})
		}
	}
	for _, r := range rep.Results {
		d.Results = append(d.Results, resultToJSON(r))
	}
	return d
}

func resultToJSON(r model.Result) resultJSON {
	j := resultJSON{Result: r, EnergyRel: finitePtr(r.EnergyRel), EnergyBusyCoreSeconds: finitePtr(r.EnergyBusyCoreSeconds)}
	if r.Agreement != nil {
		j.Agreement = finitePtr(*r.Agreement)
	}
	j.WakeLatencyNs = safeSummary(r.WakeLatencyNs)
	if r.IOLatencyNs != nil {
		s := safeSummary(*r.IOLatencyNs)
		j.IOLatencyNs = &s
	}
	share := make(map[string]float64, len(r.StateShare))
	for k, v := range r.StateShare {
		if !finite(v) {
			v = 0
		}
		share[k] = v
	}
	j.StateShare = share
	return j
}

// stateOrder lists the state names to show: the profile's, shallow to deep,
// then any other name a result carries, sorted.
func stateOrder(rep *WhatifReport) []string {
	var names []string
	seen := map[string]bool{}
	if rep.Profile != nil {
		for _, s := range rep.Profile.States {
			if !seen[s.Name] {
				seen[s.Name] = true
				names = append(names, s.Name)
			}
		}
	}
	var extra []string
	for _, r := range rep.Results {
		for k := range r.StateShare {
			if !seen[k] {
				seen[k] = true
				extra = append(extra, k)
			}
		}
	}
	sort.Strings(extra)
	return append(names, extra...)
}

// shownStates drops profile states no policy spent time in, to keep the
// table narrow (all are kept when none has a share at all).
func shownStates(rep *WhatifReport) []string {
	all := stateOrder(rep)
	var out []string
	for _, n := range all {
		for _, r := range rep.Results {
			if r.StateShare[n] > 0 {
				out = append(out, n)
				break
			}
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

func pollLimit(r *model.Result) string {
	if r.PollLimitNs == nil {
		return dash
	}
	return FormatUs(*r.PollLimitNs)
}

func countPct(n, of uint64) string {
	if of == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%s)", n, FormatPct(float64(n)/float64(of)))
}

func energy(f float64) string {
	if !finite(f) {
		return dash
	}
	return fmt.Sprintf("%.3f", f)
}

func agreement(a *float64) string {
	if a == nil {
		return dash
	}
	return FormatPct(*a)
}

// whatifTables are what a kernel engineer reads at a glance: what each
// policy costs, then where its idle time goes.
func whatifTables(rep *WhatifReport) (costHeader []string, costRows [][]string, shareHeader []string, shareRows [][]string) {
	// The mean beside the quantiles: on a table of few states these snap to
	// its exit latencies, and only the mean shows a share of wake-ups move.
	// IO's median beside its tail: what a typical request waits, and
	// what experiment judges (the task's p50).
	costHeader = []string{"Policy", "Poll limit µs", "Exit mean µs", "Exit p50 µs", "Exit p99 µs", "Exit max µs", "IO p50 µs", "IO p99 µs", "Above", "Below", "Energy", "Agreement"}
	// Task IO (what a process waiting for its IO sees) where the trace
	// has it, beside the device's.
	taskIO := false
	for _, r := range rep.Results {
		taskIO = taskIO || r.TaskIOLatencyNs != nil && r.TaskIOLatencyNs.Count > 0
	}
	if taskIO {
		costHeader = slices.Insert(costHeader, slices.Index(costHeader, "IO p99 µs")+1, "Task IO p50 µs", "Task IO p99 µs")
	}
	states := shownStates(rep)
	shareHeader = append([]string{"Policy"}, states...)
	// How the polling went, beside the time in POLL, where the table polls.
	polls := false
	if rep.Profile != nil {
		for _, s := range rep.Profile.States {
			polls = polls || s.Polling
		}
	}
	if polls {
		shareHeader = append(shareHeader, "Woke polling", "Poll time-outs")
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		wake := []string{dash, dash, dash, dash}
		if r.WakeLatencyNs.Count > 0 {
			wake = []string{FormatUsF(r.WakeLatencyNs.Mean), FormatUs(r.WakeLatencyNs.P50), FormatUs(r.WakeLatencyNs.P99), FormatUs(r.WakeLatencyNs.Max)}
		}
		row := append([]string{r.Policy, pollLimit(r)}, wake...)
		row = append(row, medianAndTail(r.IOLatencyNs)...)
		if taskIO {
			row = append(row, medianAndTail(r.TaskIOLatencyNs)...)
		}
		row = append(row, countPct(r.Above, r.Selections), countPct(r.Below, r.Selections), energy(r.EnergyRel), agreement(r.Agreement))
		costRows = append(costRows, row)
		share := []string{r.Policy}
		for _, st := range states {
			share = append(share, FormatPct(r.StateShare[st]))
		}
		if polls {
			timeouts := dash
			if r.PollTimeouts != nil {
				timeouts = model.FormatCount(*r.PollTimeouts)
			}
			woke := model.FormatCount(r.WakeupsPolling)
			if n := r.WakeLatencyNs.Count; n > 0 {
				woke += " (" + FormatPct(float64(r.WakeupsPolling)/float64(n)) + ")"
			}
			share = append(share, woke, timeouts)
		}
		shareRows = append(shareRows, share)
	}
	return costHeader, costRows, shareHeader, shareRows
}

// medianAndTail is a latency's p50 and p99 cells: dashes where the
// trace has none to show.
func medianAndTail(s *model.LatencySummary) []string {
	if s == nil || s.Count == 0 {
		return []string{dash, dash}
	}
	return []string{FormatUs(s.P50), FormatUs(s.P99)}
}

// costCaption reads the cost table, in the text report and the HTML one.
const costCaption = "Poll limit: how long POLL may spin before the governor chooses again (cpuidle_poll_time); — where there is no polling state, recorded without a cpuidle driver (no poll loop ran) " +
	"or the limit moves per CPU and in time (haltpoll's window: the notes give the module parameters each haltpoll policy polled by). " +
	"Exit mean/p50/p99/max: the exit latency each wake-up pays under the policy (the table's, of the state it left), not the wake-up latency stats traces from each wake request. " +
	"IO p50/p99: block IO, issue to completion, with the policy's exit latency where the completion woke an idle CPU; " +
	"Task IO: issue to the waiting task running again, with the exit latencies of both CPUs set by the policy. Above/below: too deep/too shallow choices by the cpuidle core's rules, " +
	"with their share of the policy's selections (the core counts them per stay; a policy may select more than once a period). Energy: over the idle episodes (a busy core while a policy woke within one), relative to the first policy. " +
	"Agreement: share of the recorded selections this policy makes the same way, the states chosen, not how long POLL spins (the poll limit column) " +
	"(defined on the recorded and measured profiles only, where a governor chose among the recorded machine's states: not on a trace without a cpuidle driver or state table)."

// shareCaption reads the share table, in the text report and the HTML one.
const shareCaption = "Shares of the time in states as the kernel's cpuidle time counters count it: a stay an interrupt ended to the interrupt plus its own state's exit latency (the energy covers the recorded time instead)."

const pollCaption = "Woke polling: the wake-ups that found the CPU in a polling state, which pay no exit latency, and their share of the policy's wake-ups. " +
	"Poll time-outs: the polls that ran out of their limit, after which the governor chose again (recorded: the kernel's; — for the oracle, which has none)."

func profileLine(p *model.Profile) string {
	if p == nil {
		return "Profile: none."
	}
	var parts []string
	estimated := false
	for _, s := range p.States {
		x := fmt.Sprintf("%s %s/%s", s.Name, FormatUs(s.ExitLatencyNs), FormatUs(s.TargetResidencyNs))
		if flags := stateFlags(s, false); len(flags) > 0 {
			x += " (" + strings.Join(flags, ", ") + ")"
		}
		parts = append(parts, x)
		estimated = estimated || s.PowerEstimated
	}
	l := fmt.Sprintf("Profile %s, HZ %s: %s (exit latency/target residency, µs)", p.Name, hzString(p.HZ), strings.Join(parts, ", "))
	if estimated {
		l += "; idle power estimated"
	}
	return l + "."
}

func periodsOf(rep *WhatifReport) uint64 {
	var n uint64
	for _, r := range rep.Results {
		n = max(n, r.IdlePeriods)
	}
	return n
}

func renderWhatifDoc(d *doc, rep *WhatifReport) error {
	d.command(rep.Command)
	d.title("idletrace whatif")
	head := []string{}
	if rep.Trace != "" {
		head = append(head, fmt.Sprintf("Trace %s: %d idle periods replayed.", rep.Trace, periodsOf(rep)))
	}
	head = append(head, profileLine(rep.Profile))
	if rep.Profile != nil && rep.Profile.Source != "" {
		head = append(head, "Source: "+rep.Profile.Source+".")
	}
	d.lines(head...)
	if len(rep.Results) == 0 {
		d.para("No policy was replayed.")
	} else {
		costHeader, costRows, shareHeader, shareRows := whatifTables(rep)
		if err := d.table(costHeader, costRows, 0); err != nil {
			return err
		}
		if cl := changeLines(rep.Results); len(cl) > 0 {
			d.bullets(cl)
			d.para(changesCaption)
		}
		d.para(costCaption)
		d.heading("Share of idle time per state")
		if err := d.table(shareHeader, shareRows, 0); err != nil {
			return err
		}
		caption := shareCaption
		if slices.Contains(shareHeader, "Woke polling") {
			caption += " " + pollCaption
		}
		d.para(caption)
	}
	d.bullets(rep.Notes)
	if rep.Assumptions != "" {
		d.folded("Model assumptions", rep.Assumptions)
	}
	return d.flush()
}
