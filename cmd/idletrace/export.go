package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/idletrace/idletrace/internal/outfile"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/export"
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/trace"
)

// exportHelp is export --help's account of where the tables go (README:
// "Exporting a trace").
const exportHelp = `csv and parquet: three tables, one file each in DIR: idle_periods.FORMAT (one
row per idle period), io_requests.FORMAT (one row per block IO request) and
pm_qos_changes.FORMAT (the CPU latency limits in force where the window
opens, then each change); README.md lists their columns. --table NAME
writes one of them; without -o, one CSV table goes to stdout.
ftrace: the kernel's text trace format (cpu_idle, the wake-up events,
block_rq_issue and block_rq_complete, the PM QoS requests and
pm_qos_update_target, in time order) under the header idlestat --import
reads, to -o FILE, to DIR/TRACE-NAME.txt when -o names a directory (DIR/:
made if missing), else to stdout. --stats-window keeps what stats counts,
so that idlestat's figures can be set beside stats'.
perfetto: Perfetto's protobuf trace format (open it in ui.perfetto.dev):
the cpu_idle events as the kernel's ftrace events (the UI's CPU idle
tracks), block IO as slices on the issuing CPU's "block IO cpu N" track
with a flow to an instant on the completing CPU's, and the wake-ups, with
a flow from each remote wake request to the idle exit it caused, and the
PM QoS limits as counter tracks; to -o FILE, to DIR/TRACE-NAME.pftrace
when -o names a directory, else to stdout.
Existing files are refused without --force.
`

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stderr, "\n"+exportHelp) }
	format := fs.String("format", "", "file format: csv, parquet, ftrace or perfetto (required)")
	dir := fs.StringP("output", "o", "", "directory for the tables (created if missing); for ftrace and perfetto a file or a directory")
	table := fs.String("table", "", "write only this table: "+strings.Join(export.Tables, ", ")+" (default all)")
	cpus := fs.String("cpus", "", "only these CPUs (e.g. 0-3,8): their idle periods, and the IO requests issued or completed on them")
	from := fs.Duration("from", 0, "only records from this long after the trace's start (an idle period by its exit, an IO request by its completion)")
	to := fs.Duration("to", 0, "only records up to this long after the trace's start")
	ioFilter := fs.String("io", "", "IO requests only these: "+trace.IOFilterHelp)
	statsWindow := fs.Bool("stats-window", false, "only the records stats counts: idle periods whose exit falls in their CPU's window between the start and end snapshots, IO requests completed between them")
	force := fs.Bool("force", false, "overwrite existing output files")
	quiet := fs.BoolP("quiet", "q", false, "no summary line on stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *format == "" {
		return usagef("missing --format: csv, parquet, ftrace or perfetto")
	}
	if err := checkFormat(*format, append(slices.Clone(export.Formats), export.Ftrace, export.Perfetto)...); err != nil {
		return err
	}
	events := *format == export.Ftrace || *format == export.Perfetto // one file of events, not tables
	tables := export.Tables
	switch {
	case events && *table != "":
		return usagef("--table is for the csv and parquet tables: the %s trace holds every event", *format)
	case *table != "":
		if tables, err = export.TablesOf([]string{*table}); err != nil {
			return usagef("--table: %v", err)
		}
	}
	if *format == export.Perfetto && *dir == "" {
		if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return usagef("the Perfetto trace is binary: give -o FILE or send stdout to a file or a pipe")
		}
	}
	if !events && *dir == "" && (len(tables) != 1 || *format != "csv") {
		return usagef("give -o DIR for the table files (without -o, --table NAME writes one CSV table to stdout)")
	}
	opts := export.Options{From: *from, To: *to, HasFrom: fs.Changed("from"), HasTo: fs.Changed("to"), StatsWindow: *statsWindow}
	if *from < 0 || *to < 0 {
		return usagef("--from and --to count from the trace's start: they cannot be negative")
	}
	if opts.HasFrom && opts.HasTo && *to <= *from {
		return usagef("--to %v must come after --from %v", *to, *from)
	}
	if *cpus != "" {
		if opts.CPUs, err = host.ParseCPUList(*cpus); err != nil {
			return usagef("--cpus: %v", err)
		}
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	var files []string // the table files, in tables' order
	if events && *dir != "" {
		out := *dir
		// -o DIR/ is a directory, as for the tables: made if missing, when
		// the file is written.
		if fi, err := os.Stat(out); err == nil && fi.IsDir() || strings.HasSuffix(out, string(filepath.Separator)) {
			ext := ".txt"
			if *format == export.Perfetto {
				ext = export.PerfettoExt
			}
			out = filepath.Join(out, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))+ext)
		}
		if err := checkOutput(out, path, *force); err != nil {
			return err
		}
		files = []string{out}
	} else if *dir != "" {
		for _, t := range tables {
			f := filepath.Join(*dir, t+export.Ext(*format))
			if err := checkOutput(f, path, *force); err != nil {
				return err
			}
			files = append(files, f)
		}
	}

	r, err := openTrace(path, stderr)
	if err != nil {
		return err
	}
	defer r.Close()
	if n := r.Meta.NumCPUs; n > 0 {
		for _, c := range opts.CPUs {
			if c >= n {
				return usagef("--cpus: CPU %d is not in the trace (its machine has %d CPUs: 0-%d)", c, n, n-1)
			}
		}
	}
	if opts.IOFilter, err = ioFilterFor(*ioFilter, r.Meta); err != nil {
		return err
	}

	if events {
		return writeEvents(r.Reader, *format, opts, *dir, files, *force, *quiet, stdout, stderr)
	}
	out := map[string]io.Writer{}
	if files == nil {
		out[tables[0]] = stdout
		sum, err := export.Write(r.Reader, opts, *format, out)
		if err == nil {
			exportWarnings(stderr, sum)
			emptyWindowWarning(stderr, r.Reader, opts, sum)
			if !*quiet {
				tableSummary(stderr, sum, tables, []string{"stdout"})
			}
		}
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	var created []*os.File
	fail := func(err error) error { // leave no partial table behind
		for _, f := range created {
			outfile.Discard(f)
		}
		return err
	}
	for i, t := range tables {
		f, err := outfile.Create(files[i], *force)
		if err != nil {
			return fail(err)
		}
		created = append(created, f)
		out[t] = f
	}
	sum, err := export.Write(r.Reader, opts, *format, out)
	if err != nil {
		return fail(err)
	}
	for _, f := range created {
		if err := f.Close(); err != nil {
			return fail(err)
		}
	}
	exportWarnings(stderr, sum)
	emptyWindowWarning(stderr, r.Reader, opts, sum)
	if !*quiet {
		tableSummary(stderr, sum, tables, files)
	}
	return nil
}

// tableSummary is the line that says what went where (to stderr: stdout
// may be the table itself).
func tableSummary(stderr io.Writer, sum export.Summary, tables, dests []string) {
	var parts []string
	for i, t := range tables {
		what := analysis.Count(sum.IdlePeriods, "idle period")
		switch t {
		case export.IORequests:
			what = analysis.Count(sum.IORequests, "IO request")
		case export.PMQoSChanges:
			what = fmt.Sprintf("%d PM QoS limits and changes", sum.PMQoSRows)
		}
		parts = append(parts, fmt.Sprintf("%s to %s", what, dests[i]))
	}
	fmt.Fprintf(stderr, "idletrace export: %s\n", strings.Join(parts, ", "))
}

// writeEvents writes the ftrace text or the Perfetto trace to the one
// file in files (removed again should the export fail), or to stdout.
func writeEvents(r *trace.Reader, format string, opts export.Options, dir string, files []string, force, quiet bool, stdout, stderr io.Writer) error {
	write := export.WriteFtrace
	if format == export.Perfetto {
		write = export.WritePerfetto
	}
	warn := func(sum export.Summary) {
		emptyWindowWarning(stderr, r, opts, sum)
		if sum.Invalid > 0 {
			what := "idle periods"
			if format == export.Perfetto {
				what = "idle periods or IO requests"
			}
			fmt.Fprintf(stderr, "warning: %d %s had an impossible CPU or state number, a CPU the trace does not record or an end before their start, and were left out\n", sum.Invalid, what)
		}
	}
	summary := func(sum export.Summary, dest string) {
		switch {
		case quiet:
		case format == export.Perfetto:
			fmt.Fprintf(stderr, "idletrace export: %s, %s and %d wake-request flows as %d Perfetto events to %s\n", analysis.Count(sum.IdlePeriods, "idle period"), analysis.Count(sum.IORequests, "IO request"), sum.Flows, sum.Events, dest)
		default:
			fmt.Fprintf(stderr, "idletrace export: %s and %s as %d ftrace events to %s\n", analysis.Count(sum.IdlePeriods, "idle period"), analysis.Count(sum.IORequests, "IO request"), sum.Events, dest)
		}
	}
	if files == nil {
		sum, err := write(r, opts, stdout)
		if err == nil {
			warn(sum)
			summary(sum, "stdout")
		}
		return err
	}
	if strings.HasSuffix(dir, string(filepath.Separator)) { // -o DIR/: made if missing; a mistyped -o FILE is not
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := outfile.Create(files[0], force)
	if err != nil {
		return err
	}
	sum, err := write(r, opts, f)
	if err != nil {
		outfile.Discard(f)
		return err
	}
	if err := f.Close(); err != nil {
		outfile.RemovePartial(files[0])
		return err
	}
	warn(sum)
	summary(sum, files[0])
	return nil
}

// emptyWindowWarning says where the trace's records lie when --from and
// --to fall outside them (an export of nothing is not an error).
func emptyWindowWarning(stderr io.Writer, r *trace.Reader, o export.Options, sum export.Summary) {
	first, last := uint64(math.MaxUint64), uint64(0)
	for _, c := range r.Chunks() {
		if (c.Type == trace.ChunkIdle || c.Type == trace.ChunkBlockIO) && c.Records > 0 {
			first, last = min(first, c.FirstNs), max(last, c.LastNs)
		}
	}
	start := int64(sum.TraceStartNs)
	since := func(t uint64) time.Duration { return time.Duration(int64(t) - start).Round(time.Millisecond) }
	switch {
	case last == 0:
	case o.HasFrom && start+o.From.Nanoseconds() >= int64(last):
		fmt.Fprintf(stderr, "warning: no record in the window: the trace's records end %s after its start\n", since(last))
	case o.HasTo && start+o.To.Nanoseconds() < int64(first):
		fmt.Fprintf(stderr, "warning: no record in the window: the trace's records begin %s after its start\n", since(first))
	}
}

// exportWarnings says what the rows may lack.
func exportWarnings(stderr io.Writer, sum export.Summary) {
	if sum.Invalid > 0 {
		fmt.Fprintf(stderr, "warning: %d idle periods had an impossible CPU or state number and were skipped\n", sum.Invalid)
	}
	if sum.Uncertain > 0 {
		fmt.Fprintf(stderr, "warning: the idle and IO records lie too far apart in the file to pair them all in bounded memory: woke_idle may be wrong for up to %d IO requests\n", sum.Uncertain)
	}
}
