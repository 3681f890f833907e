package record_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/record"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestRecordLive: Options.Live sees exactly the records the file holds,
// none before Options.Started hands over the metadata, which is the
// file's; losses come about once a second and at the end (idletrace top is
// built on this).
func TestRecordLive(t *testing.T) {
	testenv.RequireRecorder(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "live.trace")
	var meta *trace.Metadata
	var early, idle, io, losses int
	var firstNs, lastNs uint64
	opts := record.Options{
		Output: path, Duration: 2500 * time.Millisecond,
		Started: func(m *trace.Metadata) { meta = m },
		Live: &trace.Visitor{
			Idle: func(p *trace.IdlePeriod) error {
				if meta == nil {
					early++
				}
				if idle == 0 {
					firstNs = p.EntryNs
				}
				idle++
				lastNs = max(lastNs, p.ExitNs)
				return nil
			},
			BlockIO: func(*trace.BlockIO) error {
				if meta == nil {
					early++
				}
				io++
				return nil
			},
			Loss: func(*trace.Loss) error { losses++; return nil },
		},
	}
	// Some synchronous writes, so that block IO is recorded too.
	stop := testenv.SyncWrites(t, dir, 10*time.Millisecond)
	sum, err := record.Record(context.Background(), opts)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if meta == nil || early > 0 {
		t.Fatalf("Started %v, %d records before it", meta != nil, early)
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var fileIdle, fileIO int
	if err := r.Scan(trace.Visitor{
		Idle:    func(*trace.IdlePeriod) error { fileIdle++; return nil },
		BlockIO: func(*trace.BlockIO) error { fileIO++; return nil },
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("live: %d idle periods (%.1f s), %d IO requests, %d loss records; file: %d, %d", idle, float64(lastNs-firstNs)/1e9, io, losses, fileIdle, fileIO)
	if idle == 0 || idle != fileIdle || uint64(idle) != sum.IdlePeriods || io != fileIO || uint64(io) != sum.BlockIOs {
		t.Errorf("live saw %d idle periods and %d IO requests; the file holds %d and %d, the summary says %d and %d",
			idle, io, fileIdle, fileIO, sum.IdlePeriods, sum.BlockIOs)
	}
	if meta.Start == nil || r.Meta.Start == nil || meta.Start.MonotonicNs != r.Meta.Start.MonotonicNs || meta.CPUIdleDriver != r.Meta.CPUIdleDriver {
		t.Errorf("Started's metadata is not the file's")
	}
	if cpus := len(meta.RecordedCPUs); losses < 2*cpus {
		t.Errorf("%d loss records for %d CPUs in 2.5 s, want at least two rounds (a second in, and the end)", losses, cpus)
	}
}
