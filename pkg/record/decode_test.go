package record

import (
	"testing"

	"github.com/idletrace/idletrace/bpf"
	"github.com/idletrace/idletrace/pkg/trace"
)

// IdlePeriodFrom decodes the kernel record's flag bits: a fact whose
// "known" bit is clear is Unknown (never No), counts the kernel did not
// take are -1.
func TestIdlePeriodFromFlags(t *testing.T) {
	rec := bpf.IdletraceIdleRecord{
		Cpu: 3, State: 2, WakeIrq: -1, EntryNs: 1_000, ExitNs: 51_000,
		WakeCause:   uint8(bpf.IdletraceWakeCauseWAKE_IPI_RESCHED),
		NextTimerNs: 90_000, NextEventNs: 80_000, KernelResidencyNs: 49_000,
		NrIowait: 5, AbortsBefore: 200,
	}
	p := IdlePeriodFrom(&rec)
	if p.CPU != 3 || p.State != 2 || p.EntryNs != 1_000 || p.ExitNs != 51_000 || p.WakeCause != trace.WakeIPIResched || p.KernelResidencyNs != 49_000 {
		t.Errorf("fields: %+v", p)
	}
	// No flag set: nothing known.
	for name, v := range map[string]trace.Tristate{
		"TickStopped": p.TickStopped, "TickStoppedBefore": p.TickStoppedBefore, "GotTick": p.GotTick,
		"PollTimedOut": p.PollTimedOut, "IdleLoopEntry": p.IdleLoopEntry, "TickStoppable": p.TickStoppable,
	} {
		if v != trace.Unknown {
			t.Errorf("no flags: %s = %v, want unknown", name, v)
		}
	}
	if p.NextTimerKnown || p.NextEventKnown || p.KernelKnown || p.KernelCounted || p.AbortedBefore {
		t.Errorf("no flags, yet known: %+v", p)
	}
	if p.NrIOWait != -1 || p.AbortsBefore != -1 {
		t.Errorf("no flags: NrIOWait %d, AbortsBefore %d, want -1 and -1", p.NrIOWait, p.AbortsBefore)
	}

	// Every "known" bit, with the "yes" bits of some.
	rec.Flags = uint8(bpf.IdletraceIdleFlagsIDLE_TICK_STOPPED_KNOWN | bpf.IdletraceIdleFlagsIDLE_TICK_STOPPED |
		bpf.IdletraceIdleFlagsIDLE_TICK_WAS_STOPPED_KNOWN |
		bpf.IdletraceIdleFlagsIDLE_POLL_TIMEOUT_KNOWN | bpf.IdletraceIdleFlagsIDLE_POLL_TIMEOUT |
		bpf.IdletraceIdleFlagsIDLE_NEXT_TIMER_KNOWN | bpf.IdletraceIdleFlagsIDLE_NEXT_EVENT_KNOWN)
	rec.KernelFlags = uint8(bpf.IdletraceKernelFlagsKERNEL_KNOWN | bpf.IdletraceKernelFlagsKERNEL_COUNTED |
		bpf.IdletraceKernelFlagsKERNEL_GOT_TICK_KNOWN | bpf.IdletraceKernelFlagsKERNEL_IOWAIT_KNOWN |
		bpf.IdletraceKernelFlagsKERNEL_ABORTED_BEFORE | bpf.IdletraceKernelFlagsKERNEL_ABORTS_COUNTED)
	rec.LoopFlags = uint8(bpf.IdletraceLoopFlagsLOOP_ENTRY_KNOWN | bpf.IdletraceLoopFlagsLOOP_ENTRY |
		bpf.IdletraceLoopFlagsLOOP_TICK_STOPPABLE_KNOWN)
	p = IdlePeriodFrom(&rec)
	for name, c := range map[string]struct{ got, want trace.Tristate }{
		"TickStopped":       {p.TickStopped, trace.Yes},
		"TickStoppedBefore": {p.TickStoppedBefore, trace.No},
		"GotTick":           {p.GotTick, trace.No},
		"PollTimedOut":      {p.PollTimedOut, trace.Yes},
		"IdleLoopEntry":     {p.IdleLoopEntry, trace.Yes},
		"TickStoppable":     {p.TickStoppable, trace.No},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if !p.NextTimerKnown || p.NextTimerNs != 90_000 || !p.NextEventKnown || p.NextEventNs != 80_000 {
		t.Errorf("next timer %d (%v), next event %d (%v)", p.NextTimerNs, p.NextTimerKnown, p.NextEventNs, p.NextEventKnown)
	}
	if !p.KernelKnown || !p.KernelCounted || !p.AbortedBefore {
		t.Errorf("kernel flags: %+v", p)
	}
	// Counts: nr_iowait as read, aborted attempts capped at 127 (int8).
	if p.NrIOWait != 5 || p.AbortsBefore != 127 {
		t.Errorf("NrIOWait %d, AbortsBefore %d, want 5 and 127", p.NrIOWait, p.AbortsBefore)
	}
	rec.NrIowait = 1 << 31 // beyond int32: capped
	rec.AbortsBefore = 3
	if p = IdlePeriodFrom(&rec); p.NrIOWait != 1<<31-1 || p.AbortsBefore != 3 {
		t.Errorf("NrIOWait %d, AbortsBefore %d", p.NrIOWait, p.AbortsBefore)
	}
}
