// Package tracetest builds small traces in memory for tests.
package tracetest

import (
	"bytes"
	"os"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Build writes a trace of meta, the idle periods and the PM QoS changes in
// memory, as the recorder would (stop reason "duration"), and opens it.
func Build(t testing.TB, meta *trace.Metadata, periods []trace.IdlePeriod, changes []trace.PMQoSChange) *trace.Reader {
	t.Helper()
	file := Encode(t, meta, periods, changes)
	r, err := trace.NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// WriteFile writes the trace Build would open to path.
func WriteFile(t testing.TB, path string, meta *trace.Metadata, periods []trace.IdlePeriod, changes []trace.PMQoSChange) {
	t.Helper()
	if err := os.WriteFile(path, Encode(t, meta, periods, changes), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Encode is the trace file Build opens.
func Encode(t testing.TB, meta *trace.Metadata, periods []trace.IdlePeriod, changes []trace.PMQoSChange) []byte {
	t.Helper()
	var file bytes.Buffer
	w, err := trace.NewWriter(&file, meta)
	if err != nil {
		t.Fatal(err)
	}
	for i := range periods {
		if err := w.AddIdle(&periods[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range changes {
		if err := w.AddPMQoS(&changes[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(&trace.End{StopReason: "duration"}); err != nil {
		t.Fatal(err)
	}
	return file.Bytes()
}

// Periods makes n idle periods in state, taking turns over ncpus CPUs:
// the i-th enters at 1 s + i·every and lasts for, with no wake IRQ.
func Periods(n, ncpus int, state uint32, every, length uint64) []trace.IdlePeriod {
	out := make([]trace.IdlePeriod, n)
	for i := range out {
		entry := 1e9 + uint64(i)*every
		out[i] = trace.IdlePeriod{CPU: uint32(i % ncpus), State: state, EntryNs: entry, ExitNs: entry + length, WakeIRQ: -1}
	}
	return out
}
