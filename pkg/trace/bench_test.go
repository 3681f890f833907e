package trace

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// realisticIdle returns n idle periods from the synthetic workload.
func realisticIdle(n, cpus int) []IdlePeriod {
	wl := newWorkload(99, cpus)
	ps := make([]IdlePeriod, n)
	for i := range ps {
		ps[i] = wl.next()
	}
	return ps
}

// countingDiscard counts bytes written.
type countingDiscard struct{ n int64 }

func (c *countingDiscard) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }

// BenchmarkWriteIdle measures AddIdle (one op = one record, including its
// share of chunk compression) and the bytes each record costs on disk.
// flushEvery mimics the recorder's once-a-second Flush at various event
// rates; 0 lets chunks fill to their 64k-record limit.
func BenchmarkWriteIdle(b *testing.B) {
	ps := realisticIdle(1<<18, 2)
	for _, flushEvery := range []int{0, 10000, 1000} {
		b.Run(fmt.Sprintf("flushEvery=%d", flushEvery), func(b *testing.B) {
			var out countingDiscard
			w, err := NewWriter(&out, testMeta())
			must(b, err)
			start := out.n
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := w.AddIdle(&ps[i%len(ps)]); err != nil {
					b.Fatal(err)
				}
				i++
				if flushEvery > 0 && i%flushEvery == 0 {
					must(b, w.Flush())
				}
			}
			must(b, w.Flush())
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i), "ns/record")
			b.ReportMetric(float64(out.n-start)/float64(i), "bytes/record")
		})
	}
}

// BenchmarkReadIdle measures a full Scan of a file of realistic idle periods.
func BenchmarkReadIdle(b *testing.B) {
	const n = 1 << 18
	ps := realisticIdle(n, 2)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta())
	must(b, err)
	for i := range ps {
		must(b, w.AddIdle(&ps[i]))
	}
	must(b, w.Close(nil))
	data := buf.Bytes()
	b.ReportAllocs()
	records := 0
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		var sumNs uint64
		err = r.Scan(Visitor{Idle: func(p *IdlePeriod) error { sumNs += p.ResidencyNs(); records++; return nil }})
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
	b.ReportMetric(float64(len(data))/n, "bytes/record")
}

// BenchmarkWriterMemory writes 100k and 1M records per op. B/op and
// allocs/op stay flat between the two: the writer's memory is bounded by
// its chunk buffers and zstd state, not by the number of records.
func BenchmarkWriterMemory(b *testing.B) {
	ps := realisticIdle(1<<16, 8)
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w, err := NewWriter(io.Discard, nil)
				must(b, err)
				for i := range n {
					if err := w.AddIdle(&ps[i%len(ps)]); err != nil {
						b.Fatal(err)
					}
				}
				must(b, w.Close(nil))
			}
		})
	}
}
