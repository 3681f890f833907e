package export

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Formats are the file formats Write writes.
var Formats = []string{"csv", "parquet"}

// RowGroupRows is how many rows a Parquet row group holds: the writer
// holds one row group in memory, whatever the trace's length.
const RowGroupRows = 64 << 10

// Ext is the file name extension of a format.
func Ext(format string) string { return "." + format }

// Write exports r in format, each table to its writer in out (keyed by
// Tables' names; a table not in out is not written).
func Write(r *trace.Reader, o Options, format string, out map[string]io.Writer) (Summary, error) {
	if format != "csv" && format != "parquet" {
		return Summary{}, fmt.Errorf("unknown export format %q (csv, parquet)", format)
	}
	kv := fileMetadata(r)
	var sink Sink
	var closers []func() error
	if w, ok := out[IdlePeriods]; ok {
		t := newTable(w, format, IdlePeriods, IdlePeriodColumns, appendIdleCSV, (*IdlePeriodRow).detach, kv)
		sink.IdlePeriod = t.write
		closers = append(closers, t.close)
	}
	if w, ok := out[IORequests]; ok {
		t := newTable(w, format, IORequests, IORequestColumns, appendIOCSV, (*IORequestRow).detach, kv)
		sink.IORequest = t.write
		closers = append(closers, t.close)
	}
	if w, ok := out[PMQoSChanges]; ok {
		t := newTable(w, format, PMQoSChanges, PMQoSChangeColumns, appendQoSCSV, (*PMQoSChangeRow).detach, kv)
		sink.PMQoSChange = t.write
		closers = append(closers, t.close)
	}
	sum, err := Export(r, o, sink)
	for _, c := range closers {
		if cerr := c(); err == nil {
			err = cerr
		}
	}
	return sum, err
}

// fileMetadata is what a Parquet file says of the trace it came from.
func fileMetadata(r *trace.Reader) map[string]string {
	m := r.Meta
	kv := map[string]string{
		"idletrace.trace_start_ns":          strconv.FormatUint(TraceStart(r), 10),
		"idletrace.hostname":                m.Hostname,
		"idletrace.boot_id":                 m.BootID,
		"idletrace.kernel_release":          m.KernelRelease,
		"idletrace.cpuidle_driver":          m.CPUIdleDriver,
		"idletrace.cpuidle_governor":        m.CPUIdleGovernor,
		"idletrace.wall_clock_monotonic_ns": strconv.FormatUint(m.WallClock.MonotonicNs, 10),
		"idletrace.wall_clock_unix_ns":      strconv.FormatInt(m.WallClock.UnixNs, 10),
	}
	if r.Meta.Start != nil {
		kv["idletrace.start_snapshot_ns"] = strconv.FormatUint(r.Meta.Start.MonotonicNs, 10)
	}
	if r.End != nil && r.End.Snapshot != nil {
		kv["idletrace.end_snapshot_ns"] = strconv.FormatUint(r.End.Snapshot.MonotonicNs, 10)
	}
	return kv
}

// table writes one table's rows in one format.
type table[R any] struct {
	write func(*R) error
	close func() error
}

// parquetBatch is how many rows go to the Parquet writer at once.
const parquetBatch = 1024

func newTable[R, V any](w io.Writer, format, name string, cols []Column, appendCSV func([]byte, *R) []byte, detach func(*R, *V), kv map[string]string) *table[R] {
	if format == "parquet" {
		opts := []parquet.WriterOption{
			parquet.Compression(&parquet.Zstd),
			parquet.MaxRowsPerRowGroup(RowGroupRows),
			parquet.PageBufferSize(64 << 10),
			parquet.KeyValueMetadata("idletrace.table", name),
		}
		for k, v := range kv {
			opts = append(opts, parquet.KeyValueMetadata(k, v))
		}
		pw := parquet.NewGenericWriter[R](w, opts...)
		// Rows are handed over in batches: a row's pointer fields point
		// at the exporter's scratch values, so each kept row gets its own.
		batch, vals := make([]R, 0, parquetBatch), make([]V, parquetBatch)
		flush := func() error {
			_, err := pw.Write(batch)
			batch = batch[:0]
			return err
		}
		return &table[R]{
			write: func(r *R) error {
				batch = append(batch, *r)
				detach(&batch[len(batch)-1], &vals[len(batch)-1])
				if len(batch) == cap(batch) {
					return flush()
				}
				return nil
			},
			close: func() error {
				if err := flush(); err != nil {
					return err
				}
				return pw.Close()
			},
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	for i, c := range cols {
		if i > 0 {
			line = append(line, ',')
		}
		line = append(line, c.Name...)
	}
	line = append(line, '\n')
	_, err := bw.Write(line)
	return &table[R]{
		write: func(r *R) error {
			if err != nil {
				return err
			}
			line = appendCSV(line[:0], r)
			_, err = bw.Write(line)
			return err
		},
		close: func() error {
			if err != nil {
				return err
			}
			return bw.Flush()
		},
	}
}

// CSV fields: NULL is an empty field; a string that is not NULL is
// quoted where it is empty or holds a comma, quote or line break (RFC 4180).

func appendIdleCSV(b []byte, r *IdlePeriodRow) []byte {
	b = strconv.AppendInt(b, int64(r.CPU), 10)
	b = appendInt(b, int64(r.State))
	b = appendString(b, &r.StateName)
	b = appendInt(b, r.EntryNs)
	b = appendInt(b, r.ExitNs)
	b = appendInt(b, r.DurationNs)
	b = appendInt(b, r.ResidencyNs)
	b = appendInt64P(b, r.KernelResidencyNs)
	b = appendBool(b, r.Counted)
	b = appendBool(b, r.InStatsWindow)
	b = appendBoolP(b, r.Above)
	b = appendBoolP(b, r.Below)
	b = appendString(b, r.WakeCause)
	b = appendInt32P(b, r.WakeIRQ)
	b = appendInt64P(b, r.WakeRequestNs)
	b = appendInt64P(b, r.WakeLatencyNs)
	b = appendBoolP(b, r.WakeRequestedBeforeEntry)
	b = appendBoolP(b, r.TickStopped)
	b = appendBoolP(b, r.TickStoppedBefore)
	b = appendInt64P(b, r.NextTimerNs)
	b = appendInt64P(b, r.NextEventNs)
	b = appendBoolP(b, r.GotTick)
	b = appendBoolP(b, r.PollTimedOut)
	b = appendBoolP(b, r.IdleLoopEntry)
	b = appendBoolP(b, r.TickStoppable)
	b = appendInt32P(b, r.NrIOWait)
	b = appendBoolP(b, r.AbortedBefore)
	b = appendInt32P(b, r.AbortsBefore)
	return append(b, '\n')
}

func appendIOCSV(b []byte, r *IORequestRow) []byte {
	b = appendStr(b, &r.Device) // the first field: no comma before it
	b = appendInt(b, int64(r.DevMajor))
	b = appendInt(b, int64(r.DevMinor))
	b = appendInt(b, r.Sector)
	b = appendString(b, &r.Op)
	b = appendInt(b, r.CmdFlags)
	b = appendInt(b, r.SizeBytes)
	b = appendInt(b, r.IssueNs)
	b = appendInt(b, r.CompleteNs)
	b = appendInt(b, r.LatencyNs)
	b = appendInt(b, int64(r.IssueCPU))
	b = appendInt(b, int64(r.CompleteCPU))
	b = appendInt(b, int64(r.Error))
	b = appendBool(b, r.InStatsWindow)
	b = appendBoolP(b, r.WokeIdle)
	b = appendString(b, r.WokeIdleCause)
	b = appendInt32P(b, r.Tid)
	b = appendInt32P(b, r.Pid)
	b = appendString(b, r.Comm)
	b = appendInt64P(b, r.TaskWokenNs)
	b = appendInt64P(b, r.TaskRunNs)
	b = appendInt32P(b, r.TaskCPU)
	b = appendInt64P(b, r.TaskLatencyNs)
	return append(b, '\n')
}

func appendQoSCSV(b []byte, r *PMQoSChangeRow) []byte {
	b = strconv.AppendInt(b, r.TimeNs, 10)
	b = appendString(b, &r.Kind)
	b = appendInt32P(b, r.CPU)
	b = appendString(b, &r.Action)
	b = appendInt64P(b, r.LimitUs)
	b = appendInt64P(b, r.PreviousLimitUs)
	b = appendInt32P(b, r.Tid)
	return append(b, '\n')
}

// Each appender writes a comma, then the field.

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(append(b, ','), v, 10) }

func appendInt64P(b []byte, v *int64) []byte {
	if v == nil {
		return append(b, ',')
	}
	return appendInt(b, *v)
}

func appendInt32P(b []byte, v *int32) []byte {
	if v == nil {
		return append(b, ',')
	}
	return appendInt(b, int64(*v))
}

func appendBool(b []byte, v bool) []byte { return strconv.AppendBool(append(b, ','), v) }

func appendBoolP(b []byte, v *bool) []byte {
	if v == nil {
		return append(b, ',')
	}
	return appendBool(b, *v)
}

func appendString(b []byte, s *string) []byte { return appendStr(append(b, ','), s) }

// appendStr writes the field alone.
func appendStr(b []byte, s *string) []byte {
	if s == nil {
		return b
	}
	if !needsQuotes(*s) {
		return append(b, *s...)
	}
	b = append(b, '"')
	for i := 0; i < len(*s); i++ {
		if (*s)[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, (*s)[i])
	}
	return append(b, '"')
}

func needsQuotes(s string) bool {
	if s == "" {
		return true // "" is an empty string, an empty field NULL
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',', '"', '\n', '\r':
			return true
		}
	}
	return s[0] == ' ' || s[len(s)-1] == ' '
}
