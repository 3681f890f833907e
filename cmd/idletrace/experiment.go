package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/record"
	"github.com/idletrace/idletrace/pkg/trace"
	"github.com/idletrace/idletrace/pkg/tune"
)

func runExperiment(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("experiment", stderr)
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stderr, "\n"+model.PolicyHelp()) }
	policies := fs.StringArray("policy", nil, "the one policy to apply (GOVERNOR[+MODIFIER]...; what the running kernel can change: governor, disable=, qos=, haltpoll's guest_halt_poll_*)")
	profileName := fs.String("profile", "recorded", "state table to predict on: recorded, measured, a built-in name or a JSON file")
	ioFilter := fs.String("io", "", "IO figures cover only these requests: "+trace.IOFilterHelp)
	dur := fs.DurationP("duration", "d", 0, "stop each recording after this long (default: when COMMAND exits)")
	dir := fs.StringP("output", "o", "idletrace-experiment", "directory for before.trace and after.trace")
	format := fs.String("format", "text", "report format: text, markdown, json or html")
	force := fs.Bool("force", false, "overwrite before.trace and after.trace in the directory")
	quiet := fs.BoolP("quiet", "q", false, "no progress line")
	cpus := fs.String("cpus", "", "record idle periods of these CPUs only (e.g. 0-3,8), in both recordings")
	runs := fs.Int("runs", 1, "record this many before/after pairs, alternately, and report each figure's median over them with how far before moved between runs (the noise); more than one writes before-N.trace and after-N.trace")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	var command []string
	if dash := fs.ArgsLenAtDash(); dash >= 0 {
		command = pos[dash:]
		pos = pos[:dash]
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (the command to run goes after --)", pos[0])
	}
	if len(command) == 0 {
		return usagef("missing COMMAND: give the workload to record before and after, after --")
	}
	if len(*policies) != 1 {
		return usagef("give exactly one --policy to apply (got %d)", len(*policies))
	}
	if err := checkFormat(*format, "text", "markdown", "json", "html"); err != nil {
		return err
	}
	if *runs < 1 || *runs > 100 {
		return usagef("--runs %d: must be 1 to 100", *runs)
	}
	if *dur < 0 || (*dur == 0 && fs.Changed("duration")) {
		return usagef("--duration %v: must be positive (leave it out to record until COMMAND exits)", *dur)
	}
	cpuSet, err := cpuList(*cpus)
	if err != nil {
		return err
	}
	pols, err := parsePolicies(*policies)
	if err != nil {
		return err
	}
	pol := pols[0]
	plan, err := tune.PlanFor(pol, "/")
	if tune.IsRefusal(err) {
		return &usageError{err.Error()}
	}
	if err != nil {
		return err
	}
	// One pair: before.trace and after.trace; more: before-1.trace, ...
	pairs := make([][2]string, *runs)
	for i := range pairs {
		b, a := "before.trace", "after.trace"
		if *runs > 1 {
			b, a = fmt.Sprintf("before-%d.trace", i+1), fmt.Sprintf("after-%d.trace", i+1)
		}
		pairs[i] = [2]string{filepath.Join(*dir, b), filepath.Join(*dir, a)}
		if !*force {
			for _, p := range pairs[i] {
				if _, err := os.Stat(p); err == nil {
					return usagef("%s already exists; use --force to overwrite it", p)
				}
			}
		}
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	say := func(s string) { fmt.Fprintln(stderr, "idletrace experiment:", s) }
	if plan.Empty() {
		say("the machine is already as " + pol.Spec + " asks: nothing to change between the two recordings")
	}

	// SIGINT and SIGTERM stop the recording under way and put the knobs
	// back at once; the deferred Restore covers every other way out.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		applied *tune.Applied
	)
	restore := func() error {
		mu.Lock()
		a := applied
		mu.Unlock()
		return a.Restore()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var interrupted error
	go func() {
		for s := range sigs {
			mu.Lock()
			interrupted = fmt.Errorf("stopped by %v", s)
			mu.Unlock()
			cancel()
			if err := restore(); err != nil {
				say(err.Error())
			}
		}
	}()
	defer func() {
		if err := restore(); err != nil {
			say(err.Error())
		}
	}()
	stopped := func() error {
		mu.Lock()
		defer mu.Unlock()
		if interrupted != nil {
			return fmt.Errorf("%v; the machine's idle knobs are as they were", interrupted)
		}
		return nil
	}

	opts := func(out string) record.Options {
		return record.Options{Output: out, Force: *force, Duration: *dur, Command: command, ToolVersion: version, CPUs: cpuSet,
			Warn: func(msg string) { fmt.Fprintln(stderr, "idletrace record: warning:", msg) }}
	}
	// The pairs alternate (before, after, before, after, ...) so that a
	// drift of the machine over the runs falls on both sides alike.
	var reps []*analysis.ComparisonReport
	for _, pair := range pairs {
		before, after := pair[0], pair[1]
		say("recording " + before + " as the machine is")
		if _, err := recordTrace(ctx, opts(before), *quiet, stderr); err != nil {
			return err
		}
		if err := stopped(); err != nil {
			return err
		}
		a, err := plan.Apply(say)
		if err != nil {
			return err
		}
		mu.Lock()
		applied = a
		mu.Unlock()
		if err := stopped(); err != nil { // a signal during Apply
			return err
		}
		say("recording " + after + " under " + pol.Spec)
		_, rerr := recordTrace(ctx, opts(after), *quiet, stderr)
		if err := restore(); err != nil {
			return errors.Join(rerr, err)
		}
		if rerr != nil {
			return rerr
		}
		if err := stopped(); err != nil {
			return err
		}
		rep, err := compareTraces(before, after, pol, replayOptions{profile: *profileName, ioFilter: *ioFilter}, stderr)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	rep := analysis.CombineRuns(reps)
	rep.Command = argv("experiment", args)
	return analysis.RenderComparison(stdout, rep, *format)
}
