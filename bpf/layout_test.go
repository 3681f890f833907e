package bpf

import (
	"reflect"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/idletrace/idletrace/pkg/trace"
)

// TestRecordLayout checks that every record shared through the ring buffer
// and the maps has, in Go, exactly the size and field offsets the compiled
// object's BTF gives it. No root needed.
func TestRecordLayout(t *testing.T) {
	spec, err := LoadIdletrace()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cName string
		goVal any
	}{
		{"idle_record", IdletraceIdleRecord{}},
		{"block_io_record", IdletraceBlockIoRecord{}},
		{"haltpoll_record", IdletraceHaltpollRecord{}},
		{"io_task_record", IdletraceIoTaskRecord{}},
		{"pm_qos_record", IdletracePmQosRecord{}},
		{"loss_counters", IdletraceLossCounters{}},
		{"cpu_state", IdletraceCpuState{}},
		{"io_key", IdletraceIoKey{}},
		{"io_start", IdletraceIoStart{}},
	}
	for _, tc := range cases {
		t.Run(tc.cName, func(t *testing.T) {
			var st *btf.Struct
			if err := spec.Types.TypeByName(tc.cName, &st); err != nil {
				t.Fatalf("BTF has no struct %s: %v", tc.cName, err)
			}
			gt := reflect.TypeOf(tc.goVal)
			if int(st.Size) != int(gt.Size()) {
				t.Fatalf("size: C %d, Go %d", st.Size, gt.Size())
			}
			var goFields []reflect.StructField
			for i := 0; i < gt.NumField(); i++ {
				if f := gt.Field(i); f.Name != "_" {
					goFields = append(goFields, f)
				}
			}
			if len(goFields) != len(st.Members) {
				t.Fatalf("members: C %d, Go %d", len(st.Members), len(goFields))
			}
			for i, m := range st.Members {
				if got, want := goFields[i].Offset, uintptr(m.Offset.Bytes()); got != want {
					t.Errorf("%s.%s: C offset %d, Go %s offset %d", tc.cName, m.Name, want, goFields[i].Name, got)
				}
			}
		})
	}
}

// TestWakeCauseValues checks that the C enum and the trace file's WakeCause
// agree: the BPF side writes the number, the file stores it.
func TestWakeCauseValues(t *testing.T) {
	pairs := []struct {
		c   IdletraceWakeCause
		go_ trace.WakeCause
	}{
		{IdletraceWakeCauseWAKE_UNKNOWN, trace.WakeUnknown},
		{IdletraceWakeCauseWAKE_TIMER, trace.WakeTimer},
		{IdletraceWakeCauseWAKE_TICK, trace.WakeTick},
		{IdletraceWakeCauseWAKE_IRQ, trace.WakeIRQ},
		{IdletraceWakeCauseWAKE_IPI_RESCHED, trace.WakeIPIResched},
		{IdletraceWakeCauseWAKE_IPI_CALL, trace.WakeIPICall},
		{IdletraceWakeCauseWAKE_REMOTE_NO_IPI, trace.WakeRemoteNoIPI},
		{IdletraceWakeCauseWAKE_POLL_TIMEOUT, trace.WakePollTimeout},
	}
	if len(pairs) != len(trace.WakeCauses()) {
		t.Fatalf("trace has %d wake causes, this test knows %d", len(trace.WakeCauses()), len(pairs))
	}
	for _, p := range pairs {
		if uint32(p.c) != uint32(p.go_) {
			t.Errorf("%v: C %d, Go %d", p.go_, p.c, p.go_)
		}
	}
}
