package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idletrace/idletrace/internal/outfile"
	"github.com/idletrace/idletrace/pkg/export"
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/trace"
)

// exportHelp is export --help's account of where the tables go (README:
// "Exporting a trace").
const exportHelp = `Two tables, one file each in DIR: idle_periods.FORMAT (one row per idle
period) and io_requests.FORMAT (one row per block IO request); README.md
lists their columns. --table NAME writes one of them; without -o, one CSV
table goes to stdout. Existing files are refused without --force.
`

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stderr, "\n"+exportHelp) }
	format := fs.String("format", "", "file format: csv or parquet (required)")
	dir := fs.StringP("output", "o", "", "directory for the tables (created if missing)")
	table := fs.String("table", "", "write only this table: "+export.IdlePeriods+" or "+export.IORequests+" (default both)")
	cpus := fs.String("cpus", "", "only these CPUs (e.g. 0-3,8): their idle periods, and the IO requests issued or completed on them")
	from := fs.Duration("from", 0, "only records from this long after the trace's start (an idle period by its exit, an IO request by its completion)")
	to := fs.Duration("to", 0, "only records up to this long after the trace's start")
	ioFilter := fs.String("io", "", "IO requests only these: "+trace.IOFilterHelp)
	force := fs.Bool("force", false, "overwrite existing table files")
	quiet := fs.BoolP("quiet", "q", false, "no summary line on stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *format == "" {
		return usagef("missing --format: csv or parquet")
	}
	if err := checkFormat(*format, export.Formats...); err != nil {
		return err
	}
	tables := []string{export.IdlePeriods, export.IORequests}
	if *table != "" {
		if tables, err = export.TablesOf([]string{*table}); err != nil {
			return usagef("--table: %v", err)
		}
	}
	if *dir == "" && (len(tables) != 1 || *format != "csv") {
		return usagef("give -o DIR for the table files (without -o, --table NAME writes one CSV table to stdout)")
	}
	opts := export.Options{From: *from, To: *to, HasFrom: fs.Changed("from"), HasTo: fs.Changed("to")}
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
	if *dir != "" {
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

	out := map[string]io.Writer{}
	if files == nil {
		out[tables[0]] = stdout
		sum, err := export.Write(r, opts, *format, out)
		if err == nil {
			exportWarnings(stderr, sum)
		}
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	var created []*os.File
	fail := func(err error) error { // leave no partial table behind
		for _, f := range created {
			f.Close()
			os.Remove(f.Name())
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
	sum, err := export.Write(r, opts, *format, out)
	if err != nil {
		return fail(err)
	}
	for _, f := range created {
		if err := f.Close(); err != nil {
			return fail(err)
		}
	}
	exportWarnings(stderr, sum)
	if !*quiet {
		var parts []string
		for i, t := range tables {
			n := sum.IdlePeriods
			what := "idle periods"
			if t == export.IORequests {
				n, what = sum.IORequests, "IO requests"
			}
			parts = append(parts, fmt.Sprintf("%d %s to %s", n, what, files[i]))
		}
		fmt.Fprintf(stderr, "idletrace export: %s\n", strings.Join(parts, ", "))
	}
	return nil
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
