package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// Formats are the file formats a Writer writes.
const (
	JSONL   = "jsonl"
	Parquet = "parquet"
)

// Formats lists them.
var Formats = []string{JSONL, Parquet}

// Table names, in each Parquet file's key-value metadata (idletrace.table).
const (
	StatsTable  = "fleet_stats"
	WhatifTable = "fleet_whatif"
)

// SchemaVersion is in each Parquet file's key-value metadata
// (idletrace.fleet_schema): columns are only ever added, so a reader
// merging files of several versions reads them by name (DuckDB
// union_by_name, Spark mergeSchema).
const SchemaVersion = "1"

// RowGroupRows is how many rows a Parquet row group holds at most.
const RowGroupRows = 64 << 10

// Row is a row type of a fleet file.
type Row interface{ StatsRow | WhatifRow }

// Writer writes rows of one kind to one file: a JSON object per line
// (the columns in order, NULL as null), or Parquet (zstd, row groups of
// RowGroupRows, written as they fill).
type Writer[R Row] struct {
	bw  *bufio.Writer
	enc *json.Encoder
	pw  *parquet.GenericWriter[R]
	n   uint64
}

// NewWriter writes format to w; kv is added to a Parquet file's key-value
// metadata (a JSON lines file has none).
func NewWriter[R Row](w io.Writer, format string, kv map[string]string) (*Writer[R], error) {
	switch format {
	case JSONL:
		bw := bufio.NewWriterSize(w, 64<<10)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		return &Writer[R]{bw: bw, enc: enc}, nil
	case Parquet:
		var zero R
		table := StatsTable
		if _, ok := any(zero).(WhatifRow); ok {
			table = WhatifTable
		}
		opts := []parquet.WriterOption{
			parquet.Compression(&parquet.Zstd),
			parquet.MaxRowsPerRowGroup(RowGroupRows),
			parquet.KeyValueMetadata("idletrace.table", table),
			parquet.KeyValueMetadata("idletrace.fleet_schema", SchemaVersion),
		}
		for k, v := range kv {
			opts = append(opts, parquet.KeyValueMetadata(k, v))
		}
		return &Writer[R]{pw: parquet.NewGenericWriter[R](w, opts...)}, nil
	}
	return nil, fmt.Errorf("unknown fleet format %q (jsonl, parquet)", format)
}

// Write writes rows.
func (w *Writer[R]) Write(rows []R) error {
	w.n += uint64(len(rows))
	if w.pw != nil {
		_, err := w.pw.Write(rows)
		return err
	}
	for i := range rows {
		if err := w.enc.Encode(&rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// Rows is how many rows were written.
func (w *Writer[R]) Rows() uint64 { return w.n }

// Close flushes what is buffered and ends the file (a Parquet file's
// footer); it does not close the underlying writer.
func (w *Writer[R]) Close() error {
	if w.pw != nil {
		return w.pw.Close()
	}
	return w.bw.Flush()
}
