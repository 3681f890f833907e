package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idletrace/idletrace/internal/outfile"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/record"
	"github.com/idletrace/idletrace/pkg/trace"
	"github.com/idletrace/idletrace/pkg/tune"
	"golang.org/x/sys/unix"
)

// experimentPolicyNote says which of the policies below experiment can
// apply: whatif models them all, the running kernel changes only some.
const experimentPolicyNote = "experiment applies exactly one policy, and only what the running kernel can change: a governor, disable=, qos= " +
	"and haltpoll's guest_halt_poll_*, on a kernel with a cpuidle driver; margin=, poll=, kernel=, maxcstate=, blkqos= and oracle " +
	"are whatif's models alone. COMMAND's standard output goes to standard error, with experiment's logs: the report is stdout's."

func runExperiment(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("experiment", stderr)
	usage := fs.Usage
	// One policy here: the shared help's "(repeatable)" is whatif's.
	policyHelp := strings.Replace(model.PolicyHelp(), " (repeatable)", " (exactly one)", 1)
	fs.Usage = func() { usage(); fmt.Fprint(stderr, "\n"+experimentPolicyNote+"\n\n"+policyHelp) }
	policies := fs.StringArray("policy", nil, "exactly one policy to apply (GOVERNOR[+MODIFIER]...; what the running kernel can change: governor, disable=, qos=, haltpoll's guest_halt_poll_*; needs a cpuidle driver)")
	profileName := fs.String("profile", "recorded", "state table to predict on: recorded or measured (the machine's own table, which the after recording measures)")
	ioFilter := fs.String("io", "", "IO figures cover only these requests: "+trace.IOFilterHelp)
	dur := fs.DurationP("duration", "d", 0, "stop each recording after this long (default: when COMMAND exits)")
	dir := fs.StringP("output", "o", "idletrace-experiment", "directory for the traces: before.trace and after.trace (with --runs N, before-1.trace, after-1.trace, …)")
	format := fs.String("format", "text", "report format: text, markdown, json or html")
	force := fs.Bool("force", false, "overwrite the traces already in the directory")
	quiet := fs.BoolP("quiet", "q", false, "no progress line")
	cpus := fs.String("cpus", "", "record idle periods of these CPUs only (e.g. 0-3,8), in both recordings")
	runs := fs.Int("runs", 1, "record this many before/after pairs (1 to 100), alternately, and report each figure's median before, and as predicted and measured that plus the median of the pairs' own changes, with how far before moved between runs (the noise); more than one writes before-N.trace and after-N.trace")
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
	if err := comparedProfile(*profileName, "experiment"); err != nil {
		return err
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
	pairs, err := experimentPaths(*dir, *runs, *force)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	say := func(s string) { fmt.Fprintln(stderr, "idletrace experiment:", s) }
	if plan.Empty() {
		say("the machine is already as " + pol.Spec + " asks: nothing to change between the two recordings")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	guard := newKnobGuard(cancel, say)
	defer guard.close()

	opts := func(out string) record.Options {
		// The workload's output goes where the logs do: stdout is the report's.
		return record.Options{Output: out, Force: *force, Duration: *dur, Command: command, CommandStdout: stderr, ToolVersion: version, CPUs: cpuSet, KillCommand: guard.kill,
			Warn: func(msg string) { fmt.Fprintln(stderr, "idletrace record: warning:", msg) }}
	}
	if *force {
		// An earlier run's traces go before the first recording, once the
		// recorder's own checks pass (a mistyped command or no root leaves
		// them be): a run stopped part way must not leave its new
		// before.trace beside an older after.trace.
		if err := record.CheckCanRecord(command); err != nil {
			return err
		}
		if err := removeTraces(pairs); err != nil {
			return err
		}
	}
	// The pairs alternate (before, after, before, after, ...) so that a
	// drift of the machine over the runs falls on both sides alike.
	var reps []*analysis.ComparisonReport
	// failed is the first status COMMAND failed with on its own, which
	// the experiment exits with after its report (as record and time do;
	// the report's notes say which recording).
	failed := 0
	noteFailure := func(sum *record.Summary) {
		if code := sum.End.CommandStatus(); code != 0 && failed == 0 {
			failed = code
		}
	}
	for _, pair := range pairs {
		before, after := pair[0], pair[1]
		if err := guard.stopped(); err != nil { // a signal during the last pair's comparison
			return err
		}
		say("recording " + before + " as the machine is")
		sum, err := recordTrace(ctx, opts(before), *quiet, stderr)
		if err != nil {
			return err
		}
		noteFailure(sum)
		if err := guard.stopped(); err != nil {
			return err
		}
		a, err := plan.Apply(say)
		if err != nil {
			return err
		}
		guard.set(a)
		if err := guard.stopped(); err != nil { // a signal during Apply
			return err
		}
		say("recording " + after + " under " + pol.Spec)
		guard.setRecording(true)
		sum, rerr := recordTrace(ctx, opts(after), *quiet, stderr)
		guard.setRecording(false)
		if rerr == nil {
			noteFailure(sum)
		}
		if guard.restoredEarly() {
			// Its last records and end snapshot are of the machine as it
			// was, not of the policy: no measurement of it.
			os.Remove(after)
			say(fmt.Sprintf("%s removed: its recording did not end within %v of the signal, so the knobs were restored under it", after, restoreGrace))
		}
		if err := guard.restore(); err != nil {
			return errors.Join(rerr, err)
		}
		if rerr != nil {
			return rerr
		}
		if err := guard.stopped(); err != nil {
			return err
		}
		rep, err := compareTraces(before, after, pol, replayOptions{profile: *profileName, ioFilter: *ioFilter}, stderr)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	if err := guard.stopped(); err != nil {
		return err
	}
	rep := analysis.CombineRuns(reps)
	rep.Command = argv("experiment", args)
	if err := analysis.RenderComparison(stdout, rep, *format); err != nil {
		return err
	}
	if failed != 0 {
		return exitStatus(failed)
	}
	return nil
}

// removeTraces removes the pairs' traces that exist.
func removeTraces(pairs [][2]string) error {
	var errs []error
	for _, pair := range pairs {
		for _, p := range pair {
			if err := outfile.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// experimentPaths names each run's pair of traces in dir: one pair is
// before.trace and after.trace, more are before-1.trace, after-1.trace, ...;
// without force, a name already taken is a usage error.
func experimentPaths(dir string, runs int, force bool) ([][2]string, error) {
	pairs := make([][2]string, runs)
	for i := range pairs {
		b, a := "before.trace", "after.trace"
		if runs > 1 {
			b, a = fmt.Sprintf("before-%d.trace", i+1), fmt.Sprintf("after-%d.trace", i+1)
		}
		pairs[i] = [2]string{filepath.Join(dir, b), filepath.Join(dir, a)}
		for _, p := range pairs[i] {
			if err := checkOutput(p, "", force); err != nil {
				return nil, err
			}
		}
	}
	return pairs, nil
}

// knobGuard puts the idle knobs an experiment changed back on every way
// out. SIGINT and SIGTERM cancel the recording under way, which the
// experiment then restores after, as it does after every recording: the
// recording's last records and its end snapshot are still of the policy.
// A second signal has the recording's command killed at once (kill), so
// that it ends sooner, still before the restore. Should the experiment
// not have restored within grace (stuck), the guard restores itself and
// says the recording under way was cut across (early). close restores
// on any other way out.
type knobGuard struct {
	mu          sync.Mutex
	applied     *tune.Applied
	restored    chan struct{} // closed once applied is put back; nil when nothing is applied
	interrupted os.Signal
	recording   bool // a recording under the applied knobs is under way
	early       bool // restored by the guard while it was
	sigs        chan os.Signal
	kill        chan struct{} // closed at the second signal (record.Options.KillCommand)
	killOnce    sync.Once
	done        chan struct{} // closed by close: onSignals returns
	grace       time.Duration
	say         func(string)
}

// restoreGrace bounds the wait of a signal's restore for the experiment's
// own: a recording stops within a second of its cancel, but first stops
// its command, SIGTERM then SIGKILL, each given record.CommandGrace.
const restoreGrace = 2*record.CommandGrace + time.Second

func newKnobGuard(cancel context.CancelFunc, say func(string)) *knobGuard {
	g := &knobGuard{sigs: make(chan os.Signal, 2), kill: make(chan struct{}), done: make(chan struct{}), grace: restoreGrace, say: say}
	signal.Notify(g.sigs, os.Interrupt, syscall.SIGTERM)
	go g.onSignals(cancel)
	return g
}

func (g *knobGuard) onSignals(cancel context.CancelFunc) {
	for {
		var s os.Signal
		select {
		case s = <-g.sigs:
		case <-g.done:
			return
		}
		again := g.signalled(s)
		cancel()
		if again {
			g.killCommand()
		}
		g.mu.Lock()
		wait := g.restored
		g.mu.Unlock()
		if wait == nil {
			continue
		}
		// The experiment restores once the recording under way has
		// ended; a second signal hurries that on, and only a recording
		// stuck past grace has the guard restore under it.
		deadline := time.After(g.grace)
	waiting:
		for {
			select {
			case <-wait:
				break waiting
			case s := <-g.sigs:
				g.signalled(s)
				g.killCommand()
			case <-deadline:
				g.mu.Lock()
				g.early = g.recording
				g.mu.Unlock()
				if g.restoredEarly() {
					g.say(fmt.Sprintf("the recording under way did not end within %v of the signal: restoring the knobs under it (its trace will be removed)", g.grace))
				}
				if err := g.restore(); err != nil {
					g.say(err.Error())
				}
				break waiting
			}
		}
	}
}

// signalled records s as the signal that stopped the experiment, and says
// whether one had already.
func (g *knobGuard) signalled(s os.Signal) (again bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	again = g.interrupted != nil
	g.interrupted = s
	return again
}

func (g *knobGuard) setRecording(on bool) {
	g.mu.Lock()
	g.recording = on
	g.mu.Unlock()
}

func (g *knobGuard) killCommand() { g.killOnce.Do(func() { close(g.kill) }) }

// restoredEarly says whether the guard restored the knobs while a
// recording was still under way (it did not end within grace).
func (g *knobGuard) restoredEarly() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.early
}

// set records what was applied, for restore to put back.
func (g *knobGuard) set(a *tune.Applied) {
	g.mu.Lock()
	g.applied = a
	g.restored = make(chan struct{})
	g.mu.Unlock()
}

// restore puts back what was applied (nothing when nothing is).
func (g *knobGuard) restore() error {
	g.mu.Lock()
	a, done := g.applied, g.restored
	g.restored = nil // one caller closes it
	g.mu.Unlock()
	err := a.Restore()
	if done != nil {
		close(done)
	}
	return err
}

// stopped is the signal that stopped the experiment, if one did.
func (g *knobGuard) stopped() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.interrupted != nil {
		return interruptedError{g.interrupted}
	}
	return nil
}

// interruptedError is an experiment stopped by a signal: it exits 128+N,
// as a shell reports a command the signal killed.
type interruptedError struct{ sig os.Signal }

func (e interruptedError) Error() string {
	name := e.sig.String()
	if s, ok := e.sig.(syscall.Signal); ok && unix.SignalName(s) != "" {
		name = unix.SignalName(s) // SIGINT, not Go's "interrupt"
	}
	return fmt.Sprintf("stopped by %s; the machine's idle knobs are as they were", name)
}

func (e interruptedError) ExitStatus() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// close restores, then stops taking signals.
func (g *knobGuard) close() {
	if err := g.restore(); err != nil {
		g.say(err.Error())
	}
	signal.Stop(g.sigs)
	close(g.done)
}
