package record_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestRecordPMQoSChanges: the latency limits the governors obey change
// while the recorder runs, through the kernel's two interfaces
// (/dev/cpu_dma_latency, a CPU's power/pm_qos_resume_latency_us); the
// trace holds each change with the value the kernel itself reports after
// it, and none where a request changed nothing (a request added at the
// default, one updated to its own value).
func TestRecordPMQoSChanges(t *testing.T) {
	testenv.OwnMachine(t)
	const cpu = 0
	sysfs := testenv.CPUResumeLatency(t, cpu)

	// probe reads the kernel's global value: opened before the recording,
	// its own (default) request is not recorded.
	dmaPath := testenv.CPULatencyQoS(t)
	probe, err := os.Open(dmaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	globalNow := func() int64 {
		var b [4]byte
		if _, err := probe.ReadAt(b[:], 0); err != nil {
			t.Fatal(err)
		}
		return int64(int32(binary.LittleEndian.Uint32(b[:])))
	}
	cpuNow := func() int64 {
		b, err := os.ReadFile(sysfs)
		if err != nil {
			t.Fatal(err)
		}
		switch s := strings.TrimSpace(string(b)); s {
		case "n/a":
			return 0
		case "0":
			return -1 // sysfs shows no constraint as 0
		default:
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}

	type change struct {
		target int32
		us     int64 // in PMQoSChange's terms
	}
	var want []change
	path := filepath.Join(t.TempDir(), "qos.trace")
	finish := startRecording(t, path)
	dma, err := os.OpenFile(dmaPath, os.O_RDWR, 0)
	if err != nil {
		finish()
		t.Fatal(err)
	}
	// A record is due where the kernel's value moved: not for the second
	// 7 (a request updated to its own value goes no further), nor for any
	// write another process's stricter request hides.
	wantIfMoved := func(before int64) {
		if now := globalNow(); now != before {
			want = append(want, change{trace.PMQoSGlobal, now})
		}
	}
	for _, us := range []int32{20, 7, 7} {
		before := globalNow()
		if err := binary.Write(dma, binary.LittleEndian, us); err != nil {
			t.Fatal(err)
		}
		wantIfMoved(before)
		time.Sleep(20 * time.Millisecond)
	}
	first := "15" // a change from whatever the CPU's value is
	if cpuNow() == 15 {
		first = "16"
	}
	for _, v := range []string{first, "n/a", "0"} {
		if err := os.WriteFile(sysfs, []byte(v), 0); err != nil {
			t.Fatal(err)
		}
		want = append(want, change{cpu, cpuNow()})
		time.Sleep(20 * time.Millisecond)
	}
	before := globalNow()
	dma.Close() // removes the request
	wantIfMoved(before)
	time.Sleep(20 * time.Millisecond)
	if _, err := finish(); err != nil {
		t.Fatal(err)
	}

	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Meta.Inputs.PMQoSTrace {
		t.Fatalf("the recording says it did not trace PM QoS changes (probes %v)", r.Meta.Probes)
	}
	all, _, err := r.PMQoSChanges(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	// This process's requests only: another on the machine may make its own.
	var got []change
	for _, q := range all {
		if testenv.OwnThread(q.Tid) {
			got = append(got, change{q.CPU, q.LimitUs})
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("recorded %v, want the kernel's %v (all: %+v)", got, want, all)
	}
	t.Logf("recorded the kernel's values: %v", got)
}
