package record_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/record"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestRecordClassicBlockRecordNames: the classic block_rq_complete program
// reads its record under the name the kernel gives it. Since 5.18 that is
// trace_event_raw_block_rq_completion (the class it shares with
// block_rq_error), before, trace_event_raw_block_rq_complete. The running
// kernel's BTF, with the type renamed as a kernel before 5.18 names it,
// stands for such a kernel (--kernel-btf, classic tracepoints): block IO is
// recorded, with its devices. With neither name the verifier rejects the
// program, and the recording goes on without block IO, saying why.
func TestRecordClassicBlockRecordNames(t *testing.T) {
	testenv.RequireRecorder(t)
	const current = "trace_event_raw_block_rq_completion"
	dir := t.TempDir()

	old := kernelBTFRenamed(t, dir, current, "trace_event_raw_block_rq_complete")
	path := filepath.Join(dir, "old.trace")
	stop := testenv.SyncWrites(t, dir, 5*time.Millisecond)
	sum, err := record.Record(context.Background(), record.Options{
		Output: path, Duration: 1500 * time.Millisecond, KernelBTF: old, ClassicTracepoints: true,
		Warn: func(s string) { t.Log("warning:", s) },
	})
	stop()
	if err != nil {
		t.Fatalf("recording against a kernel before 5.18: %v", err)
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if m := r.Meta.Probes["block:block_rq_complete"]; m != record.AttachTracepoint {
		t.Fatalf("block_rq_complete attached as %q", m)
	}
	devs := map[uint32]bool{}
	for _, d := range r.Meta.BlockDevices {
		devs[d.Dev()] = true
	}
	var ios, known int
	if err := r.Scan(trace.Visitor{BlockIO: func(b *trace.BlockIO) error {
		ios++
		if devs[b.Dev] && b.Bytes > 0 {
			known++
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d IO requests (%d on a known device with a size), summary %d", ios, known, sum.BlockIOs)
	if ios == 0 || known < ios/2 {
		t.Errorf("%d IO requests recorded, %d of them on a known device with a size", ios, known)
	}

	// With neither name the verifier refuses the program; the recording
	// goes on without block IO and says why, every block probe missing.
	neither := kernelBTFRenamed(t, dir, current, "trace_event_raw_block_rq_gone")
	var warnings []string
	npath := filepath.Join(dir, "neither.trace")
	_, err = record.Record(context.Background(), record.Options{
		Output: npath, Duration: time.Second, KernelBTF: neither, ClassicTracepoints: true,
		Warn: func(s string) { warnings = append(warnings, s) },
	})
	if err != nil {
		t.Fatalf("without either record type: %v, want a recording without block IO", err)
	}
	nr, err := trace.Open(npath)
	if err != nil {
		t.Fatal(err)
	}
	defer nr.Close()
	for _, name := range []string{"block:block_rq_issue", "block:block_rq_complete", "block:block_rq_requeue"} {
		if m := nr.Meta.Probes[name]; !strings.HasPrefix(m, "missing: the kernel refused the tracepoint program of block:block_rq_complete") {
			t.Errorf("without either record type: %s is %q, want missing with the kernel's refusal", name, m)
		}
	}
	if nr.Meta.Inputs.BlockIO {
		t.Error("without either record type: the trace claims block IO")
	}
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "block:block_rq_complete") {
		t.Errorf("without either record type: no warning names block_rq_complete: %q", w)
	}
}

// kernelBTFRenamed writes the running kernel's BTF to a file in dir, with
// the struct from renamed to.
func kernelBTFRenamed(t *testing.T, dir, from, to string) string {
	t.Helper()
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	var types []btf.Type
	renamed := false
	for typ, err := range spec.All() {
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := typ.(*btf.Struct); ok && s.Name == from {
			s.Name, renamed = to, true
		}
		types = append(types, typ)
	}
	if !renamed {
		t.Fatalf("the kernel's BTF has no struct %s", from)
	}
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, to+".btf")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
