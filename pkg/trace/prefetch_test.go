package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// failingReaderAt fails every read that touches byte failAt.
type failingReaderAt struct {
	data   []byte
	failAt int64
}

var errDisk = errors.New("disk on fire")

func (f *failingReaderAt) ReadAt(b []byte, off int64) (int, error) {
	if off <= f.failAt && off+int64(len(b)) > f.failAt {
		return 0, errDisk
	}
	return bytes.NewReader(f.data).ReadAt(b, off)
}

// scanOutcome is everything a Scan shows its caller, in order.
type scanOutcome struct {
	events   []string // records and Chunk calls
	err      string
	warnings []string
}

func scanWith(t *testing.T, ra io.ReaderAt, size int64, stopAfter int) scanOutcome {
	t.Helper()
	r, err := NewNamedReader(ra, size, "t.trace")
	must(t, err)
	defer r.Close()
	var o scanOutcome
	stop := errors.New("visitor stops")
	add := func(s string) error {
		o.events = append(o.events, s)
		if len(o.events) == stopAfter {
			return stop
		}
		return nil
	}
	err = r.Scan(Visitor{
		Idle:     func(p *IdlePeriod) error { return add(fmt.Sprint("idle ", *p)) },
		BlockIO:  func(b *BlockIO) error { return add(fmt.Sprint("io ", *b)) },
		HaltPoll: func(h *HaltPollChange) error { return add(fmt.Sprint("haltpoll ", *h)) },
		Loss:     func(l *Loss) error { return add(fmt.Sprint("loss ", *l)) },
		Chunk:    func(i int) error { return add(fmt.Sprint("chunk ", i)) },
	})
	if err != nil {
		o.err = err.Error()
	}
	o.warnings = r.Warnings()
	return o
}

// manyChunkTrace has some 60 record chunks of every kind.
func manyChunkTrace(t *testing.T) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta())
	must(t, err)
	w.chunkRecords = 50
	wl := newWorkload(21, 2)
	for i := range 1500 {
		p := wl.next()
		must(t, w.AddIdle(&p))
		if i%3 == 0 {
			b := wl.blockIO(i)
			must(t, w.AddBlockIO(&b))
		}
		if i%200 == 0 {
			h := HaltPollChange{TimeNs: p.ExitNs, CPU: p.CPU, NewNs: uint32(i)}
			must(t, w.AddHaltPoll(&h))
			must(t, w.AddLoss(Loss{CPU: p.CPU, IdleLost: uint64(i)}))
			must(t, w.Flush())
		}
	}
	must(t, w.Close(nil))
	return buf.Bytes()
}

// waitGoroutines waits for the goroutine count to fall back to n: a
// prefetcher left running would keep it above.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for range 100 {
		if runtime.NumGoroutine() <= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d goroutines after Scan returned, %d before", runtime.NumGoroutine(), n)
}

// Scan shows the same records, Chunk calls, errors and warnings, in the
// same order, whether it prefetches (two CPUs) or not (one): on intact
// files, on damaged chunks, on read errors, and when a visitor stops it.
// And no prefetcher outlives a Scan.
func TestScanPrefetchChangesNothing(t *testing.T) {
	data := manyChunkTrace(t)
	chunks := chunkOffsets(t, data)
	damaged := bytes.Clone(data)
	for i, c := range chunks { // every fifth record chunk, payload or header
		if i%5 == 2 && c.typ != ChunkIndex {
			at := c.off + chunkHeaderSize + int64(c.payloadLen)/2
			if i%10 == 7 {
				at = c.off + 9
			}
			damaged[at] ^= 0x5a
		}
	}
	type input struct {
		name string
		ra   io.ReaderAt
		size int64
	}
	inputs := []input{
		{"intact", bytes.NewReader(data), int64(len(data))},
		{"damaged", bytes.NewReader(damaged), int64(len(damaged))},
		{"no index", bytes.NewReader(damaged[:len(damaged)-footerSize]), int64(len(damaged) - footerSize)},
	}
	// Reads that fail from the middle of a chunk on: Scan stops there.
	for _, k := range []int{len(chunks) / 3, len(chunks) / 2} {
		c := chunks[k]
		inputs = append(inputs, input{fmt.Sprintf("read error in chunk %d", k),
			&failingReaderAt{data: data, failAt: c.off + chunkHeaderSize + int64(c.payloadLen)/2}, int64(len(data))})
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, in := range inputs {
		for _, stopAfter := range []int{-1, 1, 60, 400, 1200} {
			var want scanOutcome
			for _, procs := range []int{1, 2, 4} {
				runtime.GOMAXPROCS(procs)
				before := runtime.NumGoroutine()
				got := scanWith(t, in.ra, in.size, stopAfter)
				waitGoroutines(t, before)
				if procs == 1 {
					want = got
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, visitor stops after %d: with %d CPUs: %d events, error %q, warnings %q;\n"+
						"with one: %d events, error %q, warnings %q",
						in.name, stopAfter, procs, len(got.events), got.err, got.warnings, len(want.events), want.err, want.warnings)
				}
			}
			if strings.HasPrefix(in.name, "read error") && stopAfter < 0 && !strings.Contains(want.err, errDisk.Error()) {
				t.Errorf("%s: Scan returned %q", in.name, want.err)
			}
			if in.name == "damaged" && stopAfter < 0 && len(want.warnings) < 3 {
				t.Errorf("damaged: warnings %q", want.warnings)
			}
		}
	}
}

// A visitor that panics leaves no prefetcher behind, and the reader
// still reads.
func TestScanPrefetchPanic(t *testing.T) {
	data := manyChunkTrace(t)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)))
	must(t, err)
	defer r.Close()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	before := runtime.NumGoroutine()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		n := 0
		_ = r.Scan(Visitor{Idle: func(*IdlePeriod) error {
			if n++; n == 120 {
				panic("visitor")
			}
			return nil
		}})
	}()
	waitGoroutines(t, before)
	n := 0
	must(t, r.Scan(Visitor{Idle: func(*IdlePeriod) error { n++; return nil }}))
	if n != 1500 {
		t.Errorf("%d idle periods after the panic, want 1500", n)
	}
}
