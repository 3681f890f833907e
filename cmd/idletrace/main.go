// Command idletrace records CPU idle periods and block IO with eBPF and
// replays them through models of the cpuidle governors. This package only
// parses flags, wires the packages together and prints.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	flag "github.com/spf13/pflag"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

// usageError is a mistake in how idletrace was invoked: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitStatus ends idletrace with this status and nothing more on stderr:
// record's summary has already said why (the recorded command failed).
type exitStatus int

func (e exitStatus) Error() string   { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitStatus) ExitStatus() int { return int(e) }

type command struct {
	name, args, summary string
	run                 func(args []string, stdout, stderr io.Writer) error
}

var commands []command

func init() {
	commands = []command{
		{"record", "[-o FILE] [-d DURATION] [--cpus LIST] [--no-io] [--force] [-- COMMAND [ARG...]]", "record idle periods and block IO into a trace file (needs root)", runRecord},
		{"info", "FILE [--format text|json]", "show what a trace file holds and where it was recorded", runInfo},
		{"stats", "FILE [--io FILTER] [--format text|markdown|json] [-o OUT] | FILE... --format jsonl|parquet [--host NAME] [-o OUT]", "per-CPU, per-state statistics checked against the kernel's counters; jsonl and parquet: fleet summary rows keyed by host and trace", runStats},
		{"whatif", "FILE [--profile NAME|PATH] [--policy SPEC]... [--measured AFTER] [--format text|markdown|json|html|jsonl|parquet] [--host NAME] [-o OUT]", "replay the idle periods through other governors and policies; with --measured, one policy's prediction beside what AFTER measured; jsonl and parquet take several FILEs", runWhatif},
		{"experiment", "--policy SPEC [--runs N] [-d DURATION] [--cpus LIST] [--profile NAME|PATH] [--io FILTER] [-o DIR] [--format text|markdown|json|html] [--force] [-q] -- COMMAND [ARG...]", "record COMMAND, apply the policy's knobs to the running kernel, record it again, restore, compare (needs root)", runExperiment},
		{"export", "FILE --format csv|parquet|ftrace|perfetto [-o DIR|FILE] [--table NAME] [--cpus LIST] [--from DURATION] [--to DURATION] [--io FILTER] [--stats-window] [--force]", "write the idle periods and block IO requests as tables (CSV or Parquet) for SQL tools, or as ftrace text for idlestat and Perfetto", runExport},
		{"import", "FILE [-o OUT.trace] [--format auto|perf-script|ftrace] [--profile NAME|FILE] [--events LIST] [--force]", "turn a perf script, trace-cmd report or ftrace text capture of cpu_idle and block events into a trace file", runImport},
		{"profiles", "[NAME] [--hz N] [--format text|json]", "list or show the built-in machine profiles", runProfiles},
		{"top", "[-d DURATION] [--cpus LIST] [-o FILE] [--no-io] [--force]", "live per-CPU view, refreshed every second: idle states, wake causes, wake latency, IO wake-ups, PM QoS limits (needs root; records to a temporary file unless -o)", runTop},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 { // a usage error: the usage goes where errors go, as for a flag
		printUsage(stderr)
		return 2
	}
	if args[0] == "help" && len(args) > 1 { // help COMMAND: that command's --help
		args = []string{args[1], "--help"}
	} else if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stdout)
		return 0
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(stdout, "idletrace", version)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		diag := stderr
		if helpAsked(args[1:]) { // help asked for is the output, as git and perf print it: | less works
			diag = stdout
		}
		err := c.run(args[1:], stdout, diag)
		if err == nil {
			return 0
		}
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var st exitStatus
		if errors.As(err, &st) {
			return int(st)
		}
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "idletrace %s: %s (see idletrace %s --help)\n", c.name, msg, c.name)
			return 2
		}
		fmt.Fprintf(stderr, "idletrace %s: %s\n", c.name, msg)
		// A command record could not start: 127 not found, 126 not executable.
		var hs interface{ ExitStatus() int }
		if errors.As(err, &hs) {
			return hs.ExitStatus()
		}
		return 1
	}
	fmt.Fprintf(stderr, "idletrace: unknown command %q (commands: record, info, stats, whatif, experiment, export, import, profiles, top)\n", args[0])
	return 2
}

// helpAsked: -h or --help among a command's flags (before --, where a
// COMMAND's own arguments begin).
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--help":
			return true
		}
	}
	return false
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "idletrace: what CPU idle states cost in latency, from a trace")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:")
	for _, c := range commands {
		fmt.Fprintf(w, "  idletrace %s %s\n      %s\n", c.name, c.args, c.summary)
	}
}

// newFlags makes a flag set whose errors come back as usage errors.
func newFlags(c string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, cmd := range commands {
		if cmd.name == c {
			fs.Usage = func() {
				fmt.Fprintf(stderr, "Usage: idletrace %s %s\n  %s\n\n", cmd.name, cmd.args, cmd.summary)
				fs.SetOutput(stderr)
				fs.PrintDefaults()
				fs.SetOutput(io.Discard)
			}
		}
	}
	return fs
}

// parse parses flags and returns the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) { // pflag has printed fs.Usage
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	// An empty list reads as "every CPU" below; given on purpose it is
	// more likely a shell variable left unset than that.
	if f := fs.Lookup("cpus"); f != nil && f.Changed && strings.TrimSpace(f.Value.String()) == "" {
		return nil, usagef("--cpus: an empty CPU list (leave --cpus out for every CPU)")
	}
	// 0 is the flag's "not given" (the trace's or the profile's HZ): given,
	// it would be dropped without a word.
	if f := fs.Lookup("hz"); f != nil && f.Changed {
		if hz, _ := fs.GetInt("hz"); hz < 1 || hz > 10000 {
			return nil, usagef("--hz %d: must be between 1 and 10000", hz)
		}
	}
	return fs.Args(), nil
}

// oneFile takes the single FILE argument of info, stats and whatif.
func oneFile(pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", usagef("missing trace FILE")
	case 1:
		return pos[0], nil
	}
	return "", usagef("expected one trace FILE, got %d arguments: %s", len(pos), strings.Join(pos, " "))
}

func checkFormat(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return usagef("--format %q: must be one of %s", format, strings.Join(allowed, ", "))
}
