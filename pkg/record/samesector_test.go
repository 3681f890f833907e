package record_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestRecordSameSector: two readers of one block keep two requests for the
// same device and sector in flight together (as concurrent flushes do on a
// device with a flush queue per hardware queue, all at sector 0). Each
// must be recorded with its own issue: the fio jobs' reads, the trace's
// reads of that block and the kernel's read count agree, and no trace
// read is shorter than the device can serve one.
func TestRecordSameSector(t *testing.T) {
	testenv.OwnMachine(t)
	if inMatrixVM() {
		t.Skip("the kernel-matrix VM has no fio")
	}
	fio := ensureTool(t, "fio", "fio")
	dir := t.TempDir()
	data := filepath.Join(dir, "same.dat")
	if out, err := exec.Command(fio, "--name=layout", "--filename="+data, "--size=1M", "--rw=write", "--bs=1M", "--end_fsync=1").CombinedOutput(); err != nil {
		t.Fatalf("fio layout: %v\n%s", err, out)
	}
	var fioOut []byte
	path, disk, dev, sum := recordWhile(t, dir, data, func() (err error) {
		// Each job reads the file's first block over and over, one
		// request at a time: two jobs, two requests for one sector.
		cmd := exec.Command(fio, "--name=same", "--filename="+data, "--rw=read", "--bs=4k", "--size=4k",
			"--direct=1", "--ioengine=psync", "--numjobs=2", "--group_reporting", "--runtime=2", "--time_based",
			"--output-format=json")
		if fioOut, err = cmd.Output(); err != nil {
			return fmt.Errorf("fio: %v", err)
		}
		return nil
	})
	var fr fioResult
	if err := json.Unmarshal(fioOut[strings.IndexByte(string(fioOut), '{'):], &fr); err != nil || len(fr.Jobs) == 0 {
		t.Fatalf("fio output: %v\n%s", err, fioOut)
	}
	fioReads := fr.Jobs[0].Read.TotalIOs
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	perSector := map[uint64]uint64{}
	var reads []trace.BlockIO
	if err := r.Scan(trace.Visitor{BlockIO: func(b *trace.BlockIO) error {
		if b.Dev == dev && b.Op == trace.OpRead && b.Bytes == 4096 {
			perSector[b.Sector]++
			reads = append(reads, *b)
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	var sector, traced uint64
	for s, n := range perSector {
		if n > traced {
			sector, traced = s, n
		}
	}
	unmatched, undelivered, _ := trace.IOUndelivered(r.Meta.Start, r.End)
	t.Logf("fio: %d reads; traced %d reads of sector %d on %s; unmatched completions %d, undelivered %d; methods %s, %s; %s",
		fioReads, traced, sector, disk, unmatched, undelivered,
		r.Meta.Probes["block:block_rq_issue"], r.Meta.Probes["block:block_rq_complete"], sum.Loss)
	if fioReads < 1000 {
		t.Fatalf("fio did %d reads in 2 s: too few to put two requests in flight together", fioReads)
	}
	// The kernel's own rule (kernel.init_private) may keep a completion
	// from the programs; such a read is in undelivered, not lost to a
	// pairing that took one request for another.
	if traced > fioReads || traced+undelivered < fioReads {
		t.Errorf("traced %d reads of the block (+%d completions the kernel did not deliver), fio did %d", traced, undelivered, fioReads)
	}
	// A completion paired with the other job's later issue would have a
	// latency of a few microseconds: below what this device ever serves.
	var overlapping int
	for i := range reads {
		if i > 0 && reads[i].Sector == sector && reads[i-1].Sector == sector && reads[i].IssueNs < reads[i-1].CompleteNs {
			overlapping++
		}
	}
	t.Logf("%d of the traced reads were issued while another read of the block was in flight", overlapping)
	if overlapping == 0 {
		t.Errorf("no two reads of the block were in flight together: the test did not exercise the pairing")
	}
}
