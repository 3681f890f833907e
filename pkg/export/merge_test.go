package export

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// eventFormats are the writers of the event formats, each with its
// reader's check of a file.
var eventFormats = []struct {
	name  string
	run   func(*trace.Reader, io.Writer) (*eventWriter, error)
	check func(testing.TB, []byte)
}{
	{Ftrace, func(r *trace.Reader, w io.Writer) (*eventWriter, error) {
		f := newFtracer(r, Options{}, w)
		return &f.eventWriter, f.run()
	}, func(t testing.TB, b []byte) { parseFtrace(t, b) }},
	{Perfetto, func(r *trace.Reader, w io.Writer) (*eventWriter, error) {
		f := newPerfettoWriter(r, Options{}, w)
		return &f.eventWriter, f.run()
	}, func(t testing.TB, b []byte) { readPerfetto(t, b) }},
}

// TestEventsBoundedMemory: the events held back to be written in time
// order do not grow with the trace's length: they span the chunks being
// read, not the trace.
func TestEventsBoundedMemory(t *testing.T) {
	dir := t.TempDir()
	held := map[string]map[int]int{}
	for _, n := range []int{300_000, 1_200_000} {
		path := writeSynth(t, dir, n)
		for _, f := range eventFormats {
			r, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := f.run(r, io.Discard)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if held[f.name] == nil {
				held[f.name] = map[int]int{}
			}
			held[f.name][n] = w.tl.maxHeld
			t.Logf("%s: %d idle periods, %d IO requests, %d events: at most %d held, %d IO slots", f.name, w.sum.IdlePeriods, w.sum.IORequests, w.sum.Events, w.tl.maxHeld, len(w.tl.ios))
		}
		os.Remove(path)
	}
	for name, h := range held {
		if h[1_200_000] > h[300_000]*5/4 {
			t.Errorf("%s: %d events held for 1.2 M periods against %d for 0.3 M: it grows with the trace", name, h[1_200_000], h[300_000])
		}
	}
}

// TestEventsDamaged: a trace cut anywhere exports what it holds, as a
// file its reader reads, or fails with one line; never a panic.
func TestEventsDamaged(t *testing.T) {
	data, err := os.ReadFile(writeSynth(t, t.TempDir(), 2_000))
	if err != nil {
		t.Fatal(err)
	}
	for cut := 16; cut < len(data); cut += len(data)/97 + 1 {
		for _, f := range eventFormats {
			r, err := trace.NewReader(bytes.NewReader(data[:cut]), int64(cut))
			if err != nil {
				continue // not even the metadata
			}
			var buf bytes.Buffer
			if _, err := f.run(r, &buf); err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("%s: cut at %d: a multi-line error %q", f.name, cut, err)
				}
				continue
			}
			f.check(t, buf.Bytes())
		}
	}
}
