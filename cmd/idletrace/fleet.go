package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idletrace/idletrace/internal/outfile"
	"github.com/idletrace/idletrace/pkg/fleet"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// fleetHelp is stats' and whatif's account of the fleet formats (README:
// "Fleets").
const fleetHelp = `jsonl and parquet: flat summary rows keyed by host and trace, for merging
many hosts' files in DuckDB or Spark (README.md, "Fleets", lists the
columns). They take several FILEs, summarised one after the other into one
output; parquet needs -o FILE. stats writes a row per trace, CPU and idle
state (kind "state") and one per trace (kind "trace"); whatif a row per
trace and policy. A file that cannot be read stops the run and leaves no
output behind.
`

func isFleetFormat(format string) bool { return format == fleet.JSONL || format == fleet.Parquet }

// fleetOptions are the flags the fleet formats share.
type fleetOptions struct {
	format, host, out string
	force             bool
	ioFilter          string
}

func fleetStats(paths []string, o fleetOptions, stdout, stderr io.Writer) error {
	return writeFleet(paths, o, "stats", stdout, stderr, func(r *trace.Reader, path string) ([]fleet.StatsRow, error) {
		key, err := fleet.KeyOf(path, o.host, r.Meta)
		if err != nil {
			return nil, err
		}
		f, err := ioFilterFor(o.ioFilter, r.Meta)
		if err != nil {
			return nil, err
		}
		s, periods, err := fleet.StatsFromReader(r, f)
		if err != nil {
			return nil, err
		}
		if s.Empty() {
			return nil, noRecords(path, "count")
		}
		return fleet.StatsRows(key, s, periods), nil
	})
}

func fleetWhatif(paths []string, o fleetOptions, ro replayOptions, pols []model.Policy, stdout, stderr io.Writer) error {
	return writeFleet(paths, o, "whatif", stdout, stderr, func(r *trace.Reader, path string) ([]fleet.WhatifRow, error) {
		key, err := fleet.KeyOf(path, o.host, r.Meta)
		if err != nil {
			return nil, err
		}
		rep, err := replayReader(r, path, ro, pols)
		if err != nil {
			return nil, err
		}
		return fleet.WhatifRows(key, rep, o.ioFilter), nil
	})
}

// writeFleet writes the rows of every trace in paths, in order, to one
// output: -o's file (removed again should a trace fail) or stdout.
func writeFleet[R fleet.Row](paths []string, o fleetOptions, cmd string, stdout, stderr io.Writer, rowsOf func(*trace.Reader, string) ([]R, error)) error {
	if len(paths) == 0 {
		return usagef("missing trace FILE")
	}
	if o.format == fleet.Parquet && o.out == "" {
		return usagef("Parquet is a binary file: give -o FILE")
	}
	// A trace named twice (overlapping globs, a symlink beside its
	// target) would count its recording twice in every sum a fleet query
	// takes.
	seen := map[any]string{}
	for _, p := range paths {
		id := fileIdentity(p)
		if first, ok := seen[id]; ok {
			return usagef("%s and %s are the same trace: its rows would be written twice", first, p)
		}
		seen[id] = p
	}
	if o.out != "" {
		for _, p := range paths {
			if err := checkOutput(o.out, p, o.force); err != nil {
				return err
			}
		}
	}
	w := stdout
	var f *os.File
	if o.out != "" {
		var err error
		if f, err = outfile.Create(o.out, o.force); err != nil {
			return err
		}
		w = f
	}
	fail := func(err error) error {
		if f != nil {
			outfile.Discard(f)
		}
		return err
	}
	fw, err := fleet.NewWriter[R](w, o.format, map[string]string{"idletrace.version": version})
	if err != nil {
		return fail(err)
	}
	for _, path := range paths {
		rows, err := fleetRowsOf(path, stderr, rowsOf)
		if err != nil {
			return fail(err)
		}
		if err := fw.Write(rows); err != nil {
			return fail(err)
		}
	}
	if err := fw.Close(); err != nil {
		return fail(err)
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return fail(err)
		}
		traces := "traces"
		if len(paths) == 1 {
			traces = "trace"
		}
		fmt.Fprintf(stderr, "idletrace %s: %d rows from %d %s to %s\n", cmd, fw.Rows(), len(paths), traces, o.out)
	}
	return nil
}

// fleetRowsOf opens one trace and makes its rows; an error names the
// file, and the reader's warnings (which name it) go to stderr.
func fleetRowsOf[R fleet.Row](path string, stderr io.Writer, rowsOf func(*trace.Reader, string) ([]R, error)) ([]R, error) {
	r, err := openTrace(path, stderr)
	if err != nil {
		return nil, namePath(path, err)
	}
	defer r.Close()
	rows, err := rowsOf(r.Reader, path)
	if err != nil {
		return nil, namePath(path, err)
	}
	return rows, nil
}

// namePath makes err name the trace it is about, keeping a usage error
// one (exit 2).
func namePath(path string, err error) error {
	if strings.Contains(err.Error(), path) {
		return err
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return usagef("%s: %s", path, ue.msg)
	}
	return fmt.Errorf("%s: %w", path, err)
}
