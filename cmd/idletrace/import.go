package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idletrace/idletrace/internal/outfile"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/importer"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// importHelp is import --help's account of what a capture lacks (README:
// "Importing perf and trace-cmd captures").
const importHelp = `Reads perf script output of a perf record capture (-e power:cpu_idle
-e block:block_rq_issue -e block:block_rq_complete -e block:block_rq_requeue,
without which a requeued request counts as not delivered; perf record -k mono
puts its times on the clock idletrace records with), trace-cmd report
output, or tracefs/ftrace text (idletrace export --format ftrace
included), by event name and key=value fields. The trace marks what a
capture cannot carry as not recorded (wake requests, tick state, the
kernel's counters, the IO's task): stats and whatif show it as unknown.
Wake causes are imported, by the recorder's rule, from a capture recorded
with -e irq:irq_handler_entry -e irq_vectors:local_timer_entry
-e irq_vectors:local_timer_exit -e irq_vectors:reschedule_entry
-e irq_vectors:call_function_entry -e irq_vectors:call_function_single_entry
-e timer:hrtimer_expire_entry (perf script --header lists them; for
trace-cmd report and tracefs text, name them with --events); lacking one of
the first five, they are unknown. Without --profile, the states are named by index (state0, ...)
unless the capture's header lists them; a --profile whose states the header names otherwise (or,
where it has only idlestat's table, counts otherwise) is refused. PM QoS changes (the CPU latency
limits whatif applies) are imported from -e power:pm_qos_update_target
with the power:pm_qos_*_request and power:dev_pm_qos_*_request events.
`

func runImport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", stderr)
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stderr, "\n"+importHelp) }
	out := fs.StringP("output", "o", "", "trace file to write (default: FILE with .trace for its extension)")
	format := fs.String("format", importer.Auto, "capture format: "+strings.Join(importer.Formats, ", "))
	profile := fs.String("profile", "", "idle-state table to give the CPUs: a built-in name (idletrace profiles) or a JSON profile file")
	events := fs.StringSlice("events", nil, "events the capture was recorded with, comma-separated (e.g. trace-cmd record's -e list): trace-cmd report and tracefs text list none, and an event that never fired looks like one not recorded")
	force := fs.Bool("force", false, "overwrite an existing trace file")
	quiet := fs.BoolP("quiet", "q", false, "no summary line on stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := checkFormat(*format, importer.Formats...); err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	if err := importer.CheckEvents(*events); err != nil {
		return usagef("--events: %v", err)
	}
	var states []trace.StateInfo
	if *profile != "" {
		if *profile == "recorded" || *profile == "measured" {
			return usagef("--profile %s: a capture records no state table; give a built-in name or a profile file", *profile)
		}
		p, err := model.LoadProfile(*profile, nil)
		if err != nil {
			return usagef("--profile: %v", err)
		}
		states = p.StateInfos()
	}
	if *out == "" {
		*out = strings.TrimSuffix(path, filepath.Ext(path)) + ".trace"
	}
	if err := checkOutput(*out, path, *force); err != nil {
		return err
	}
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := outfile.Create(*out, *force)
	if err != nil {
		return err
	}
	sum, err := importer.Import(in, importer.Options{Format: *format, States: states, Source: filepath.Base(path), ToolVersion: version, Events: *events}, f)
	if err != nil {
		outfile.Discard(f)
	} else if err = f.Close(); err != nil {
		outfile.RemovePartial(*out)
	}
	if err != nil {
		if n := importer.LineOf(err); n > 0 {
			return fmt.Errorf("%s:%s", path, strings.TrimPrefix(err.Error(), "line "))
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	if !*quiet {
		fmt.Fprintf(stderr, "idletrace import: %s (%s): %s, %s, %s on %s to %s\n",
			path, sum.Format, analysis.Count(sum.Events, "event"), analysis.Count(sum.IdlePeriods, "idle period"),
			analysis.Count(sum.BlockIOs, "IO request"), analysis.Count(sum.CPUs, "CPU"), *out)
		if n := sumCounts(sum.Skipped); n > 0 {
			fmt.Fprintf(stderr, "idletrace import: skipped %d events of other kinds: %s\n", n, countList(sum.Skipped))
		}
		if n := sumCounts(sum.Unused); n > 0 {
			fmt.Fprintf(stderr, "idletrace import: %d wake and scheduler events not imported: %s\n", n, countList(sum.Unused))
		}
		fmt.Fprintf(stderr, "idletrace import: wake causes %s\n", sum.WakeCauses)
		if sum.PMQoSChanges > 0 {
			fmt.Fprintf(stderr, "idletrace import: %s of a CPU latency limit (PM QoS)\n", analysis.Count(sum.PMQoSChanges, "change"))
		}
		if sum.IdleOtherCPU > 0 {
			fmt.Fprintf(stderr, "warning: %d cpu_idle events name another CPU (cpu_id=) than the one that raised them ([CPU]), which the kernel never does: damaged lines, imported by cpu_id\n", sum.IdleOtherCPU)
		}
		if sum.CutLastLine != "" {
			fmt.Fprintf(stderr, "warning: the last line has no newline (the capture was cut short): left out: %q\n", sum.CutLastLine)
		}
		if sum.IdleUnpaired > 0 || sum.Lost > 0 {
			fmt.Fprintf(stderr, "warning: %d cpu_idle events without their pair, %d events the tracer reported lost\n", sum.IdleUnpaired, sum.Lost)
		}
	}
	return nil
}

func sumCounts(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

func countList(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
