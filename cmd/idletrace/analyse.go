package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idletrace/idletrace/internal/outfile"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/fleet"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

func runStats(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stats", stderr)
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stderr, "\n"+fleetHelp) }
	format := fs.String("format", "text", "output format: text, markdown or json; jsonl or parquet: fleet summary rows keyed by host and trace (several FILEs)")
	ioFilter := fs.String("io", "", "IO figures cover only these requests: "+trace.IOFilterHelp)
	host := fs.String("host", "", "jsonl and parquet: the host the rows are keyed by (default: the hostname the trace recorded)")
	out := fs.StringP("output", "o", "", "write to this file instead of stdout (parquet: required)")
	force := fs.Bool("force", false, "overwrite an existing --output file")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := checkFormat(*format, "text", "markdown", "json", fleet.JSONL, fleet.Parquet); err != nil {
		return err
	}
	if isFleetFormat(*format) {
		o := fleetOptions{format: *format, host: *host, out: *out, force: *force, ioFilter: *ioFilter}
		return fleetStats(pos, o, stdout, stderr)
	}
	if *host != "" {
		return usagef("--host keys the rows of --format jsonl and parquet: %s has none", *format)
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	if *out != "" {
		if err := checkOutput(*out, path, *force); err != nil {
			return err
		}
	}
	r, err := openTrace(path, stderr)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := ioFilterFor(*ioFilter, r.Meta)
	if err != nil {
		return err
	}
	s, err := analysis.FilteredStatsFromReader(r.Reader, f)
	if err != nil {
		return err
	}
	if s.Empty() {
		return noRecords(path, "count")
	}
	return writeReport(stdout, *out, *force, func(w io.Writer) error { return analysis.RenderStatsCommand(w, s, *format, argv("stats", args)) })
}

func runWhatif(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("whatif", stderr)
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stderr, "\n"+model.PolicyHelp()+"\n"+fleetHelp) }
	profileName := fs.String("profile", "recorded", "state table to replay on: recorded, measured, a built-in name (idletrace profiles) or a JSON file")
	policies := fs.StringArray("policy", nil, "GOVERNOR[+MODIFIER]... (repeatable; see Policies below; default: recorded and oracle, or on another machine's profile the governor it would run (the recorded one; haltpoll only on a guest's table, else menu) and oracle)")
	format := fs.String("format", "text", "output format: text, markdown, json or html; jsonl or parquet: fleet summary rows keyed by host and trace (several FILEs)")
	host := fs.String("host", "", "jsonl and parquet: the host the rows are keyed by (default: the hostname the trace recorded)")
	out := fs.StringP("output", "o", "", "write the report to this file instead of stdout")
	force := fs.Bool("force", false, "overwrite an existing --output file")
	hz := fs.Int("hz", 0, "override the trace's HZ")
	measured := fs.String("measured", "", "a trace recorded after applying the one --policy: compare the prediction with it")
	ioFilter := fs.String("io", "", "IO figures cover only these requests: "+trace.IOFilterHelp)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := checkFormat(*format, "text", "markdown", "json", "html", fleet.JSONL, fleet.Parquet); err != nil {
		return err
	}
	if isFleetFormat(*format) {
		if *measured != "" {
			return usagef("--measured compares two recordings in a report: --format %s has no rows for it", *format)
		}
		pols, err := parsePolicies(*policies)
		if err != nil {
			return err
		}
		o := fleetOptions{format: *format, host: *host, out: *out, force: *force, ioFilter: *ioFilter}
		return fleetWhatif(pos, o, replayOptions{*profileName, *hz, *ioFilter}, pols, stdout, stderr)
	}
	if *host != "" {
		return usagef("--host keys the rows of --format jsonl and parquet: %s has none", *format)
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	if *out != "" {
		for _, in := range []string{path, *measured} {
			if err := checkOutput(*out, in, *force); err != nil && in != "" {
				return err
			}
		}
	}
	pols, err := parsePolicies(*policies) // usage errors before the trace is read
	if err != nil {
		return err
	}
	if *measured != "" {
		if len(pols) != 1 {
			return usagef("--measured compares one policy's prediction with a measurement: give exactly one --policy (got %d)", len(pols))
		}
		if err := comparedProfile(*profileName, "--measured"); err != nil {
			return err
		}
		rep, err := compareTraces(path, *measured, pols[0], replayOptions{*profileName, *hz, *ioFilter}, stderr)
		if err != nil {
			return err
		}
		rep.Command = argv("whatif", args)
		return writeReport(stdout, *out, *force, func(w io.Writer) error { return analysis.RenderComparison(w, rep, *format) })
	}
	rep, err := replayTrace(path, replayOptions{*profileName, *hz, *ioFilter}, pols, stderr)
	if err != nil {
		return err
	}
	rep.Command = argv("whatif", args)
	return writeReport(stdout, *out, *force, func(w io.Writer) error { return analysis.RenderWhatif(w, rep, *format) })
}

func parsePolicies(specs []string) ([]model.Policy, error) {
	pols := make([]model.Policy, 0, len(specs))
	for _, spec := range specs {
		p, err := model.ParsePolicy(spec)
		if err != nil {
			return nil, &usageError{err.Error()}
		}
		pols = append(pols, p)
	}
	return pols, nil
}

// replayTrace replays the trace at path through pols (none: the default
// policies) on the named profile: what whatif reports.
// replayOptions are how whatif replays a trace: on which profile, at which
// HZ (0: the trace's), with which IO filter.
type replayOptions struct {
	profile  string
	hz       int
	ioFilter string
}

// ioFilterFor parses an --io filter against a trace's devices. A bad
// filter is a usage error; one that needs what the trace lacks is not.
func ioFilterFor(spec string, meta *trace.Metadata) (trace.IOFilter, error) {
	f, err := trace.ParseIOFilter(spec, meta)
	if err != nil {
		return f, &usageError{"--io: " + err.Error()}
	}
	if f.NeedsTask() && !meta.Inputs.TaskIO {
		return f, fmt.Errorf("--io %s: the trace does not record which process issued its block IO (recorded by an idletrace before task IO, or without the sched tracepoints)", spec)
	}
	return f, nil
}

func replayTrace(path string, o replayOptions, pols []model.Policy, stderr io.Writer) (*analysis.WhatifReport, error) {
	r, err := openTrace(path, stderr)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return replayReader(r.Reader, path, o, pols)
}

// replayReader is replayTrace on a trace already open.
func replayReader(r *trace.Reader, path string, o replayOptions, pols []model.Policy) (*analysis.WhatifReport, error) {
	profileName, hz := o.profile, o.hz
	ioFilter, err := ioFilterFor(o.ioFilter, r.Meta)
	if err != nil {
		return nil, err
	}
	meta := r.Meta
	if hz > 0 {
		m := *meta
		m.HZ = hz
		meta = &m
	}
	var prof *model.Profile
	var notes []string
	if profileName == "measured" {
		s, err := analysis.StatsFromReader(r)
		if err != nil {
			return nil, err
		}
		if prof, err = model.Measured(meta, s.WakeLatencyP50()); err != nil {
			return nil, err
		}
	} else if prof, err = model.LoadProfile(profileName, profileMeta(r.Meta, meta)); err != nil {
		if profileName != "" && profileName != "recorded" {
			// Neither a profile's name nor a valid profile file: a mistake in
			// --profile, whichever it is.
			return nil, &usageError{err.Error()}
		}
		return nil, err
	}
	if hz > 0 {
		prof.HZ = hz
	}
	if len(pols) == 0 {
		if pols, err = parsePolicies(model.DefaultPolicySpecs(profileName, prof, r.Meta.CPUIdleGovernor)); err != nil {
			return nil, err
		}
	}

	replay, err := model.NewReplay(prof, meta, pols)
	var pe *model.PolicyError
	if errors.As(err, &pe) {
		return nil, &usageError{err.Error()}
	}
	if err != nil {
		return nil, err
	}
	// The replay covers the snapshot window, as stats does: IO figures
	// that agree with stats', no idle periods of the recorder's shutdown.
	replay.SetWindow(trace.SnapshotWindow(meta, r.End))
	replay.SetIOFilter(ioFilter)
	if v, ok := replay.Prepass(r.End); ok {
		if err := r.Scan(v); err != nil {
			return nil, err
		}
	}
	// Periods outside the window the kernel's counters cover (stats
	// compares that window only) are replayed too; the report says how many.
	window := analysis.NewRules(r.Meta, r.End)
	var outside uint64
	// Is the recorded table what the machine took to wake? On it, the
	// policies are charged less than that; on another machine's table, the
	// recorded periods and IO latencies keep the difference.
	var exits *analysis.ExitLatencyCheck
	if prof.Name != "measured" {
		exits = analysis.NewExitLatencyCheck(r.Meta, r.End)
	}
	var sleepLengths analysis.SleepLengthCheck
	idle := func(p *trace.IdlePeriod) error {
		if window.Valid(p) && !window.IdleInWindow(p) && replay.Replays(p) { // as stats' outside_window counts, of those replayed
			outside++
		}
		sleepLengths.Add(p)
		if exits != nil {
			exits.Add(p)
		}
		return replay.Idle(p)
	}
	if err := r.Scan(trace.Visitor{Idle: idle, BlockIO: replay.BlockIO}); err != nil {
		return nil, err
	}
	if n := sleepLengths.Note(); n != "" && slices.ContainsFunc(pols, func(p model.Policy) bool { return p.Governor == model.GovMenu || p.Governor == model.GovTEO }) {
		notes = append(notes, n)
	}
	for _, p := range pols {
		if p.Kernel != nil && model.StableDiffers(p.Governor, *p.Kernel) {
			series := fmt.Sprintf("%d.%d", p.Kernel.Major, p.Kernel.Minor)
			notes = append(notes, fmt.Sprintf("%s models Linux %s as released (%s.0); the %s.y stable releases took later %s changes, which the model has: name one (kernel=%s.N, as uname -r gives it; Debian's uname -r says %s.0-ABI for every one, and uname -v names the stable release) to model a stable kernel",
				p.Spec, series, series, series, p.Governor, series, series))
		}
	}
	recorded := slices.ContainsFunc(pols, func(p model.Policy) bool { return p.Governor == model.GovRecorded })
	if outside > 0 && recorded && len(meta.States) > 0 { // only the recorded policy's counts have the kernel's to meet
		notes = append(notes, fmt.Sprintf("%d of the idle periods replayed lie outside the window the kernel's counters cover (stats compares that window only), so recorded's above/below can exceed what stats shows for the kernel", outside))
	}
	results, err := replay.Finish()
	if err != nil {
		return nil, err
	}
	notes = append(notes, replay.FormNotes()...)
	if st := replay.Stats(); st.IdlePeriods == 0 && st.IOCompletions == 0 {
		return nil, noRecords(path, "replay")
	}
	if st := replay.Stats(); st.AfterEnd > 0 {
		notes = append(notes, fmt.Sprintf("%d idle periods entered after the recording's end (the end snapshot), during the recorder's own shutdown, were not replayed", st.AfterEnd))
	}
	if st := replay.Stats(); st.IOOutsideWindow > 0 {
		notes = append(notes, fmt.Sprintf("%d block IO completions outside the window the kernel's counters cover were not counted in the IO figures, as stats does not count them", st.IOOutsideWindow))
	}
	// Only the recorded policy replays the recorded state on the profile;
	// the governors choose among the profile's own (recorded is refused on
	// another machine's profile, so this is a damaged or odd trace).
	if st := replay.Stats(); st.BadState > 0 && recorded {
		notes = append(notes, fmt.Sprintf("%d of the idle periods were in a state beyond the profile's %d (the trace's states and the profile's differ): the recorded policy leaves them out (its energy, shares and exit latencies cover the rest only, so they compare with no other policy's), the others replay them; give the profile of the recording's machine", st.BadState, len(prof.States)))
	}
	if st := replay.Stats(); !ioFilter.Empty() && st.IOCompletions+st.IOFilteredOut > 0 {
		if st.IOCompletions == 0 {
			notes = append(notes, fmt.Sprintf("none of the %d block IO completions in the window matched the IO filter %q: no IO figures", st.IOFilteredOut, ioFilter.Spec))
		} else {
			notes = append(notes, fmt.Sprintf("IO figures cover the block IO completions the IO filter %q selects: %d of %d in the window", ioFilter.Spec, st.IOCompletions, st.IOCompletions+st.IOFilteredOut))
		}
	}
	switch st := replay.Stats(); {
	case st.IOCompletions > 0 && !meta.Inputs.WakeCauses:
		notes = append(notes, fmt.Sprintf("the trace does not carry wake causes, so which of the %d block IO completions woke an idle CPU is unknown: every policy keeps the recorded IO latency, which is no prediction that it would not change", st.IOCompletions))
	case st.IOCompletions > 0 && st.IOWokeUnknown == st.IOCompletions:
		notes = append(notes, fmt.Sprintf("the %d block IO completions all came on CPUs whose idle periods the recording left out (record --cpus), so which woke an idle CPU is unknown: every policy keeps the recorded IO latency, which is no prediction that it would not change", st.IOCompletions))
	case st.IOCompletions > 0:
		notes = append(notes, fmt.Sprintf("%d of %d block IO completions woke an idle CPU (the rule is in the assumptions): the policies' exit latencies apply to those, the others keep their recorded latency", st.IOWokeIdle, st.IOCompletions))
		if st.IOWokeUnknown > 0 {
			notes = append(notes, fmt.Sprintf("%d of the %d block IO completions came on CPUs whose idle periods the recording left out (record --cpus): whether they woke one is unknown, and they keep their recorded latency under every policy", st.IOWokeUnknown, st.IOCompletions))
		}
		if st.TaskWokeUnknown > 0 {
			notes = append(notes, fmt.Sprintf("%d of the %d task IO waits ended on a CPU whose idle periods the recording left out (record --cpus): whether it was woken from idle is unknown, and that part of their latency is kept as recorded under every policy", st.TaskWokeUnknown, st.TaskIO))
		}
	}
	if st := replay.Stats(); st.IOUncertain > 0 {
		notes = append(notes, fmt.Sprintf("the idle and IO records lie too far apart in the file to pair them all in bounded memory: up to %d IO completions kept their recorded latency that may have woken an idle CPU", st.IOUncertain))
	}
	switch st := replay.Stats(); {
	case st.PMQoSChanges > 0:
		notes = append(notes, fmt.Sprintf("the PM QoS latency limits changed %d times during the recording (idletrace info lists them): every policy saw each limit from its time on, under its own qos= where it has one", st.PMQoSChanges))
	case meta.PMQoS.CPUDMALatencyUs < 0:
		notes = append(notes, "the trace gives no PM QoS latency limit at its start and no change of one (an imported capture): none was applied")
	case !meta.Inputs.PMQoSTrace:
		notes = append(notes, "the recording did not trace PM QoS changes: the latency limits in force at its start are taken to have held throughout")
	}
	if st := replay.Stats(); st.InferredPollTimeouts > 0 {
		notes = append(notes, fmt.Sprintf("%d polls whose end the trace does not say (no time-out flag, no wake-up event: the kernel's text trace has no event for a time-out) lasted the kernel's poll limit and are taken as time-outs, as the recorded policy's poll time-outs", st.InferredPollTimeouts))
	}
	if st := replay.Stats(); st.DerivedNextTimer > 0 {
		n := fmt.Sprintf("the next timer event was not recorded for %d of %d idle periods; it was derived from the wake-up", st.DerivedNextTimer, st.IdlePeriods)
		if 2*st.DerivedNextTimer >= st.IdlePeriods && slices.ContainsFunc(pols, func(p model.Policy) bool { return p.Governor == model.GovMenu || p.Governor == model.GovTEO }) {
			// The sleep length is what menu and teo choose by: derived
			// from the wake-up, it is one they never had.
			n += ", which menu and teo never know ahead: their rows on this trace are estimates, not replays of the kernel's choices (their agreement, where shown, says how far)"
		}
		notes = append(notes, n)
	}
	if exits != nil {
		note := ""
		if prof.Name == "recorded" {
			note = exits.Note(prof)
		} else if own, err := model.Recorded(meta); err == nil {
			note = exits.NoteOtherTable(own, prof.Name)
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	if n := analysis.DeepStatesNote(prof, results); n != "" {
		notes = append(notes, n)
	}
	if n := analysis.CountedTimeNote(results); n != "" {
		notes = append(notes, n)
	}
	agreement := slices.ContainsFunc(results, func(r model.Result) bool { return r.Agreement != nil })
	notes = append(notes, haltpollNotes(replay, pols, meta, agreement)...)
	// What the reader skipped or could not read (truncation, damaged
	// chunks) belongs in a report pasted without its stderr.
	notes = append(notes, r.Warnings()...)
	return &analysis.WhatifReport{Trace: path, Profile: prof, Results: results, Assumptions: model.Assumptions(prof, pols), Notes: notes}, nil
}

// haltpollNotes say which module parameters each haltpoll policy (and
// recorded, where haltpoll ran) polled by, whose agreement (where the
// report has one) follows its own window, and that the module's defaults
// were assumed where the trace does not give the recording's.
func haltpollNotes(replay *model.Replay, pols []model.Policy, meta *trace.Metadata, agreement bool) []string {
	var runs, own []string
	for i, p := range pols {
		if h, ownWindow, ok := replay.HaltpollParams(i); ok {
			runs = append(runs, p.Spec+": "+trace.FormatHaltPoll(&h))
			if ownWindow {
				own = append(own, p.Spec)
			}
		} else if p.Governor == model.GovRecorded && meta.HaltPollRan() && meta.HaltPoll != nil {
			runs = append(runs, p.Spec+" (the recording's): "+trace.FormatHaltPoll(meta.HaltPoll))
		}
	}
	var notes []string
	if len(runs) > 0 {
		notes = append(notes, "haltpoll's module parameters, which decide its polling window: "+strings.Join(runs, "; "))
	}
	if len(own) > 0 && agreement {
		notes = append(notes, "the agreement of "+strings.Join(own, ", ")+" follows its own polling window over the recorded stays, "+
			"not the kernel's (the recording ran another governor or other haltpoll values): an estimate, not refereed by the kernel's choices")
	}
	if meta.HaltPoll == nil && slices.ContainsFunc(pols, func(p model.Policy) bool { return p.Governor == model.GovHaltpoll }) {
		// An imported capture, or a recording of a kernel without the
		// haltpoll module: what haltpoll would use is not known.
		d := model.HaltpollDefaults()
		notes = append(notes, "the trace does not give haltpoll's module parameters (guest_halt_poll_*): haltpoll policies assumed the module's defaults ("+
			trace.FormatHaltPoll(&d)+") where their guest_halt_poll_* modifiers set none")
	}
	return notes
}

// noRecords refuses a trace without records: stats and whatif say the same.
func noRecords(path, what string) error {
	return fmt.Errorf("%s holds no idle period and no block IO request: nothing to %s (how did its recording end? idletrace info %s)", path, what, path)
}

// argv is the command line of the subcommand c run with args, for a
// report to say how it was made: the program as "idletrace" whatever path
// ran it, then the arguments as given.
func argv(c string, args []string) []string {
	return append([]string{"idletrace", c}, args...)
}

// writeReport writes a report to stdout, or to out when given.
func writeReport(stdout io.Writer, out string, force bool, render func(io.Writer) error) error {
	if out == "" {
		return render(stdout)
	}
	f, err := outfile.Create(out, force) // a file may have appeared since checkOutput
	if err != nil {
		return err
	}
	defer f.Close()
	if err := render(f); err != nil {
		return err
	}
	return f.Close()
}

func runProfiles(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("profiles", stderr)
	format := fs.String("format", "text", "output format: text or json")
	hz := fs.Int("hz", 0, "HZ to show the profile at (default 250)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := checkFormat(*format, "text", "json"); err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("expected at most one profile NAME, got %d", len(pos))
	}
	var profs []*model.Profile
	names := model.BuiltinNames()
	if len(pos) == 1 {
		names = pos[:1]
	}
	for _, n := range names {
		var p *model.Profile
		var err error
		if strings.HasSuffix(n, ".json") || strings.ContainsRune(n, '/') {
			// No trace: the file's hz stands unless --hz says otherwise.
			if p, err = model.LoadProfile(n, &trace.Metadata{}); err == nil && *hz > 0 {
				p.HZ = *hz
			}
		} else {
			p, err = model.Builtin(n, *hz)
		}
		if err != nil {
			return &usageError{err.Error()} // not a built-in name or a valid file
		}
		profs = append(profs, p)
	}
	if len(pos) == 1 {
		return analysis.RenderProfile(stdout, profs[0], *format)
	}
	return analysis.RenderProfileList(stdout, profs, model.BuiltinDescription, *format)
}

// checkOutput refuses, before any work, an output that is the input trace
// itself (whatif would destroy it), and an existing one without --force.
func checkOutput(out, input string, force bool) error {
	if strings.HasSuffix(out, string(filepath.Separator)) {
		return usagef("%s names a directory: give the output a file name", out)
	}
	fo, err := os.Stat(out)
	if err != nil {
		return nil // does not exist yet (or cannot be stat'ed: creating it will say why)
	}
	if fo.IsDir() {
		return usagef("%s is a directory: give the output a file name", out)
	}
	if fi, err := os.Stat(input); err == nil && os.SameFile(fi, fo) {
		return usagef("--output %s is the trace being read", out)
	}
	if !force {
		return usagef("%s already exists; use --force to overwrite it", out)
	}
	return nil
}

// profileMeta is the metadata a profile is loaded against: the trace's
// own, so that a file's hz set aside is said against the HZ the trace was
// recorded at (--hz then overrides the profile's), or where the trace does
// not know its HZ, the one --hz gives it.
func profileMeta(recorded, withHZ *trace.Metadata) *trace.Metadata {
	if recorded.HZ > 0 {
		return recorded
	}
	return withHZ
}
