package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/record"
)

// recordCommandHelp is record --help's rule for COMMAND (README: "record").
var recordCommandHelp = fmt.Sprintf(`COMMAND runs in its own process group, with idletrace's stdin, stdout and
stderr (its stdout goes to stderr where the trace goes to stdout, -o -): it gets no terminal signals (Ctrl-C reaches idletrace, which stops
it) and must not read the terminal (a background group). The recording
stops when COMMAND exits, at the end of --duration, or on SIGINT/SIGTERM to
idletrace; in the last two cases idletrace stops COMMAND: SIGTERM to its
process group, SIGKILL %v later (at once on a second SIGINT/SIGTERM). The
summary says how COMMAND ended, and the trace stores it (idletrace info).

Exit status: 0 when the recording succeeded and COMMAND, if any, exited with
status 0 or was stopped by idletrace; COMMAND's own status when it exited
non-zero on its own (128+N when signal N killed it), as time and perf record
do; 127 when COMMAND is not found, 126 when it cannot be executed (no trace
file is left); 1 on a runtime error, 2 on a usage error (an existing -o file
without --force included).
`, record.CommandGrace)

func runRecord(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("record", stderr)
	out := fs.StringP("output", "o", "idletrace.trace", "trace file to write (-: standard output, not a terminal)")
	dur := fs.DurationP("duration", "d", 0, "stop after this long (default: until COMMAND exits or SIGINT)")
	cpus := fs.String("cpus", "", "record idle periods of these CPUs only (e.g. 0-3,8)")
	noIO := fs.Bool("no-io", false, "do not record block IO")
	force := fs.Bool("force", false, "overwrite an existing trace file")
	kernelBTF := fs.String("kernel-btf", "", "BTF of the running kernel, for kernels without /sys/kernel/btf/vmlinux")
	ringMiB := fs.Int("ring-mib", 8, "BPF ring buffer size in MiB (a power of two)")
	bpfStats := fs.Bool("bpf-stats", false, "enable the kernel's BPF run-time statistics and store them in the trace")
	quiet := fs.BoolP("quiet", "q", false, "no progress line")
	classic := fs.Bool("classic-tracepoints", false, "attach classic tracepoints instead of tp_btf (the fallback path)")
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stderr, "\n"+recordCommandHelp) }
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
		return usagef("unexpected argument %q (a command to record goes after --)", pos[0])
	}
	if *dur < 0 || (*dur == 0 && fs.Changed("duration")) {
		return usagef("--duration %v: must be positive (leave it out to record until COMMAND exits or SIGINT)", *dur)
	}
	if *ringMiB <= 0 || *ringMiB&(*ringMiB-1) != 0 || *ringMiB > 1024 {
		return usagef("--ring-mib %d: must be a power of two between 1 and 1024", *ringMiB)
	}
	opts := record.Options{
		Output: *out, Force: *force, Duration: *dur, NoIO: *noIO, KernelBTF: *kernelBTF,
		RingBytes: *ringMiB << 20, Command: command, ToolVersion: version, BPFStats: *bpfStats,
		ClassicTracepoints: *classic,
		Warn:               func(msg string) { fmt.Fprintln(stderr, "idletrace record: warning:", msg) },
	}
	if opts.CPUs, err = cpuList(*cpus); err != nil {
		return err
	}
	if *out == "-" {
		f, ok := stdout.(*os.File)
		if !ok {
			return usagef("-o -: standard output is not a file descriptor; give a file")
		}
		if isTerminal(stdout) {
			return usagef("-o -: standard output is a terminal; redirect it (-o - > t.trace, or | ssh host 'cat > t.trace') or give a file")
		}
		opts.Output, opts.OutputFile = "stdout", f // fd 1 as it is (a pipe, a socket, a file), not reopened
	} else if err := checkOutput(*out, "", *force); err != nil {
		return err
	}
	if *out == "-" || toStdout(*out, stdout) {
		opts.CommandStdout = stderr // COMMAND's output would land inside the trace
	}
	ctx, kill, stop := stopSignals()
	defer stop()
	opts.KillCommand = kill
	if len(command) == 0 && *dur == 0 && !*quiet {
		fmt.Fprintln(stderr, "idletrace record: recording; stop with Ctrl-C")
	}
	sum, err := recordTrace(ctx, opts, *quiet, stderr)
	if err != nil {
		return err
	}
	if code := sum.End.CommandStatus(); code != 0 {
		return exitStatus(code) // the summary has said how COMMAND ended
	}
	return nil
}

// stopSignals turns SIGINT and SIGTERM into a recording's stops: the
// first cancels ctx (the recording stops, its command gets SIGTERM and
// CommandGrace), the second closes kill (the command is killed at once).
// stop ends the watch.
func stopSignals() (ctx context.Context, kill <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	killc := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case <-sigs:
			case <-done:
				return
			}
			if n == 0 {
				cancel()
				continue
			}
			close(killc)
			// A third signal takes its default action: idletrace ends at
			// once (the file keeps what its complete chunks hold).
			signal.Stop(sigs)
			return
		}
	}()
	return ctx, killc, func() { signal.Stop(sigs); close(done); cancel() }
}

// recordTrace records one trace as opts say, with a progress line on a
// terminal unless quiet, and prints record's summary: record and
// experiment record through it.
func recordTrace(ctx context.Context, opts record.Options, quiet bool, stderr io.Writer) (*record.Summary, error) {
	tty := isTerminal(stderr)
	if tty && !quiet {
		opts.Progress = func(p record.Progress) {
			fmt.Fprintf(stderr, "\r\033[K%6.1fs  %9d idle periods (%6.0f/s)  %9d IO  ring buffer full %d  not delivered %d  %s",
				p.Elapsed.Seconds(), p.IdlePeriods, p.IdlePeriodsPerSec, p.BlockIOs, p.RingBufferFull, p.NotDelivered, humanBytes(p.Bytes))
		}
	}
	sum, err := record.Record(ctx, opts)
	if opts.Progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if sum != nil {
		fmt.Fprintf(stderr, "idletrace record: %s in %.1fs (%s): %s, %s, %s\n", opts.Output, sum.Elapsed.Seconds(), sum.StopReason,
			analysis.Count(sum.IdlePeriods, "idle period"), analysis.Count(sum.BlockIOs, "IO request"), humanBytes(sum.FileBytes))
		fmt.Fprintf(stderr, "idletrace record: %s\n", sum.Loss)
		if len(opts.Command) > 0 {
			if how := sum.End.CommandEnded(opts.Command[0]); how != "" {
				fmt.Fprintf(stderr, "idletrace record: %s\n", how)
			}
		}
	}
	return sum, err
}

// toStdout says the output path is the file stdout writes to.
func toStdout(path string, stdout io.Writer) bool {
	f, ok := stdout.(*os.File)
	if !ok {
		return false
	}
	so, err1 := f.Stat()
	po, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(so, po)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// cpuList parses --cpus ("" for all), naming an offline CPU as a usage
// error before anything is loaded.
func cpuList(spec string) ([]int, error) {
	if spec == "" {
		return nil, nil
	}
	cpus, err := host.ParseCPUList(spec)
	if err != nil {
		return nil, usagef("--cpus: %v", err)
	}
	if online, err := host.Local.OnlineCPUs(); err == nil {
		for _, c := range cpus {
			if !slices.Contains(online, c) {
				return nil, usagef("--cpus: CPU %d is not online (online: %s)", c, host.FormatCPUList(online))
			}
		}
	}
	return cpus, nil
}
