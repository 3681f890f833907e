package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// compareTraces predicts pol from the trace before (on profileName) and
// sets the prediction beside after's own recorded result: what
// `whatif --measured` and `experiment` print.
func compareTraces(before, after string, pol model.Policy, o replayOptions, stderr io.Writer) (*analysis.ComparisonReport, error) {
	profileName := o.profile
	bmeta, bend, err := traceHead(before, stderr)
	if err != nil {
		return nil, err
	}
	ameta, aend, err := traceHead(after, stderr)
	if err != nil {
		return nil, err
	}
	if err := sameStates(before, bmeta, after, ameta); err != nil {
		return nil, err
	}
	recorded, _ := model.ParsePolicy(string(model.GovRecorded))
	// BEFORE and AFTER as recorded, each on its own table: the recorded
	// one, or with --profile measured each trace's own measured exit
	// latencies, so that all three figures are in the same terms.
	own := o
	own.profile = "recorded"
	if profileName == "measured" {
		own.profile = "measured"
	}

	// BEFORE's own result and the prediction, in one replay where both
	// are on the same profile.
	var brep, prep *analysis.WhatifReport
	if profileName == own.profile && pol.Governor != model.GovRecorded {
		if brep, err = replayTrace(before, o, []model.Policy{recorded, pol}, stderr); err != nil {
			return nil, err
		}
		prep = brep
	} else {
		if brep, err = replayTrace(before, own, []model.Policy{recorded}, stderr); err != nil {
			return nil, err
		}
		if prep, err = replayTrace(before, o, append(predictionReference(pol, bmeta), pol), stderr); err != nil {
			return nil, err
		}
	}
	arep, err := replayTrace(after, own, []model.Policy{recorded}, stderr)
	if err != nil {
		return nil, err
	}
	work, err := countWorkloads(before, after, stderr)
	if err != nil {
		return nil, err
	}
	b, p, m := brep.Results[0], prep.Results[len(prep.Results)-1], arep.Results[0]
	states := analysis.ComparisonStates(prep.Profile, b, p, m)
	rep := &analysis.ComparisonReport{
		Policy: pol.Spec, BeforeTrace: before, AfterTrace: after, Profile: prep.Profile,
		Before: b, Predicted: p, Measured: m,
		Figures:     analysis.ComparisonFigures(&b, &p, &m, states, work[0], work[1]),
		Assumptions: prep.Assumptions,
		Recorded:    recordedOn(bmeta, ameta),
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("knobs as recorded: before %s; after %s", knobs(bmeta), knobs(ameta)))
	rep.Notes = append(rep.Notes, commandFailedNotes(before, bmeta, bend, after, ameta, aend)...)
	if n := analysis.PolicyNotRunNote(pol, bmeta, ameta, sameFile(before, after) || analysis.SameRecording(bmeta, ameta)); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	if own.profile == "measured" {
		rep.Notes = append(rep.Notes, "before and measured are each trace's recorded choices on its own measured profile (each state's exit latency replaced by the median wake-up latency measured in that trace), as the prediction is on BEFORE's")
	}
	rep.Notes = append(rep.Notes, analysis.WorkloadMovedNotes(work[0].CPUs, work[1].CPUs, analysis.TickComparable(bmeta, ameta), before, after)...)
	rep.Notes = append(rep.Notes, analysis.ShortWindowNotes(work[0], work[1], before, after)...)
	for _, n := range prep.Notes {
		rep.Notes = append(rep.Notes, "before ("+before+"): "+n)
	}
	for _, n := range arep.Notes {
		rep.Notes = append(rep.Notes, "after ("+after+"): "+n)
	}
	return rep, nil
}

// comparedProfile refuses a --profile other than the table the
// measurement runs on (recorded, or measured: the same states with their
// measured exit latencies). A prediction on another machine's table set
// beside this machine's measurement compares states one of them does not
// have: a new user's `--profile spr` read as a 7,600 % error on below.
func comparedProfile(profile, what string) error {
	switch profile {
	case "", "recorded", "measured":
		return nil
	}
	return usagef("--profile %s: %s measures on the recorded machine's own state table, so the prediction must be on it too (--profile recorded or measured); to predict for %s, run whatif without --measured", profile, what, profile)
}

// recordedOn says where BEFORE and AFTER were recorded, once where they
// agree.
func recordedOn(b, a *trace.Metadata) string {
	where := func(m *trace.Metadata) string {
		return fmt.Sprintf("%s (%s, kernel %s, %d CPUs)", m.Hostname, m.CPUModel, m.KernelRelease, m.NumCPUs)
	}
	wb, wa := where(b), where(a)
	if wb != wa {
		return "Recorded on " + wb + " (before) and " + wa + " (after)."
	}
	return "Recorded on " + wb + "."
}

// predictionReference is the policy a prediction on another profile than
// the recorded one is replayed beside, so that its changes (and why it
// changed little) are against something: the bare governor for a policy
// with modifiers, else the trace's own governor where the replay models it
// and it differs; none otherwise.
func predictionReference(pol model.Policy, meta *trace.Metadata) []model.Policy {
	spec := string(pol.Governor)
	if pol.Spec == spec {
		spec = meta.CPUIdleGovernor
		if spec == string(pol.Governor) {
			return nil
		}
	}
	ref, err := model.ParsePolicy(spec)
	if err != nil || ref.Governor == model.GovRecorded {
		return nil
	}
	return []model.Policy{ref}
}

// countWorkloads counts the two traces' workloads (analysis.CountWorkloads).
func countWorkloads(before, after string, stderr io.Writer) ([2]*analysis.Workload, error) {
	var work [2]*analysis.Workload
	for i, path := range []string{before, after} {
		r, err := openTrace(path, stderr)
		if err != nil {
			return work, err
		}
		work[i], err = analysis.CountWorkloads(r.Reader)
		r.Close()
		if err != nil {
			return work, fmt.Errorf("%s: %w", path, err)
		}
	}
	return work, nil
}

func traceHead(path string, stderr io.Writer) (*trace.Metadata, *trace.End, error) {
	r, err := openTrace(path, stderr)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	return r.Meta, r.End, nil
}

// commandFailedNotes says which recording's COMMAND failed on its own
// (exited non-zero, or a signal not idletrace's killed it): that
// recording measured a failure, not the workload.
func commandFailedNotes(before string, bmeta *trace.Metadata, bend *trace.End, after string, ameta *trace.Metadata, aend *trace.End) []string {
	var notes []string
	for _, t := range []struct {
		path string
		meta *trace.Metadata
		end  *trace.End
	}{{before, bmeta, bend}, {after, ameta, aend}} {
		if t.end.CommandStatus() == 0 || len(t.meta.Command) == 0 {
			continue
		}
		notes = append(notes, fmt.Sprintf(analysis.WorkloadFailedNote+"%s's recording (%s): its figures are of the failure, not of the workload", t.path, t.end.CommandEnded(t.meta.Command[0])))
	}
	return notes
}

// sameStates: a measurement answers a prediction only on the same machine,
// whose idle states (their names, shallow to deep) both traces record.
func sameStates(before string, bmeta *trace.Metadata, after string, ameta *trace.Metadata) error {
	names := func(meta *trace.Metadata) ([]string, error) {
		p, err := model.Recorded(meta)
		if err != nil {
			return nil, err
		}
		var n []string
		for _, s := range p.States {
			n = append(n, s.Name)
		}
		return n, nil
	}
	bn, err := names(bmeta)
	if err != nil {
		return fmt.Errorf("%s: %v", before, err)
	}
	an, err := names(ameta)
	if err != nil {
		return fmt.Errorf("%s: %v", after, err)
	}
	if strings.Join(bn, "\x00") != strings.Join(an, "\x00") {
		return fmt.Errorf("%s and %s describe different machines' idle states (%s against %s): a measurement answers a prediction only on the same machine",
			before, after, strings.Join(bn, ", "), strings.Join(an, ", "))
	}
	return nil
}

// knobs says how a trace's machine was set: governor, disabled states,
// haltpoll's window limit, the global latency limit.
func knobs(meta *trace.Metadata) string {
	parts := []string{"driver " + meta.CPUIdleDriver}
	if meta.CPUIdleGovernor != "" {
		parts = append(parts, "governor "+meta.CPUIdleGovernor)
	}
	var off []string
	for _, cs := range meta.States {
		for _, s := range cs.States {
			if s.Disabled {
				off = append(off, fmt.Sprintf("cpu%d %s", cs.CPU, s.Name))
			}
		}
	}
	if len(off) > 0 {
		parts = append(parts, "disabled "+strings.Join(off, ", "))
	}
	if h := meta.HaltPoll; h != nil {
		parts = append(parts, fmt.Sprintf("guest_halt_poll_ns %d", h.GuestHaltPollNs))
	}
	if q := meta.PMQoS.CPUDMALatencyUs; q >= 0 && q < 2000000000 {
		parts = append(parts, fmt.Sprintf("cpu_dma_latency %d µs", q))
	}
	return strings.Join(parts, ", ")
}

// sameFile says whether two paths name one file.
func sameFile(a, b string) bool {
	return fileIdentity(a) == fileIdentity(b)
}

// fileIdentity is what names one file however it is reached (a link, a
// relative path): its device and inode, as os.SameFile compares them;
// for a path that cannot be stat'ed (opening it will say why), the
// cleaned absolute path.
func fileIdentity(path string) any {
	type inode struct{ dev, ino uint64 }
	if fi, err := os.Stat(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return inode{uint64(st.Dev), st.Ino}
		}
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return filepath.Clean(path)
}
