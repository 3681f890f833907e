package importer

import (
	"slices"
	"strings"

	"github.com/idletrace/idletrace/pkg/trace"
)

// The wake-cause rule, as the recorder's BPF side applies it
// (bpf/idletrace.bpf.c: on_idle_exit, on_local_wake, on_local_timer_exit,
// on_hrtimer_expire), replayed over the capture's lines per CPU:
//
//   - the cause of an idle period is the first wake event on its CPU
//     between the cpu_idle entry and its exit; in a polling state the last
//     one (a polling CPU serves interrupts without leaving the state);
//   - a period closed without a cause waits (pending) for the next wake
//     event on its CPU, at most pendingWindowNs after its exit (MWAIT
//     entered with interrupts off runs the handler after the exit
//     tracepoint); a later one leaves it unknown, and so does the CPU's
//     next idle entry;
//   - a local timer entry found that way may be the tick: the period stays
//     pending until local_timer_exit;
//   - an hrtimer_expire_entry of the tick's function (tick_nohz_handler
//     since Linux 6.9, tick_sched_timer before) turns a timer cause, of
//     the open period or of the pending one, into the tick.
//
// At most one pending period per CPU is held: memory does not grow with
// the capture. A period resolved late is written late, out of exit order
// across CPUs, as the recorder writes them too (the trace's reader does
// not need the order).

// pendingWindowNs is PENDING_WINDOW_NS of the BPF side.
const pendingWindowNs = 50_000

// wakeCauseList are the events the rule needs, with the cause each gives,
// in the order messages name them.
var wakeCauseList = []struct {
	name  string
	cause trace.WakeCause
}{
	{"irq_handler_entry", trace.WakeIRQ},
	{"local_timer_entry", trace.WakeTimer},
	{"reschedule_entry", trace.WakeIPIResched},
	{"call_function_entry", trace.WakeIPICall},
	{"call_function_single_entry", trace.WakeIPICall},
}

// wakeCauseEvents is wakeCauseList by name.
var wakeCauseEvents = func() map[string]trace.WakeCause {
	m := map[string]trace.WakeCause{}
	for _, e := range wakeCauseList {
		m[e.name] = e.cause
	}
	return m
}()

// tickEvents are the ones that tell the tick from other timers.
var tickEvents = []string{"hrtimer_expire_entry", "local_timer_exit"}

// tickFunctions are the tick's hrtimer function, by kernel version.
var tickFunctions = map[string]bool{"tick_nohz_handler": true, "tick_sched_timer": true}

// idletraceEventsHeader opens the line idletrace's ftrace export writes to
// list the events it may write (a capture's text shows only the events
// that fired: one that never did looks like one not recorded).
const idletraceEventsHeader = "# idletrace export: events"

// wakeState is one CPU's part of the rule.
type wakeState struct {
	cause     trace.WakeCause // of the open period
	irq       int32
	pending   bool
	pendTimer bool // the pending period's timer may be the tick
	pend      trace.IdlePeriod
}

// recordedEvents are the events the capture was recorded with: those seen,
// those perf script --header lists ("# event : name = irq:irq_handler_entry, ...")
// and those idletrace's export says it writes.
func (p *pass) recorded(name string) bool {
	return p.seen[name] > 0 || p.listed[name]
}

// headerEvents reads the comment lines that list the recorded events.
func (p *pass) headerEvents(t string) {
	if rest, ok := strings.CutPrefix(t, "# event : name = "); ok {
		name, _, _ := strings.Cut(rest, ",")
		p.listed[bareEvent(strings.TrimSpace(name))] = true
		return
	}
	if rest, ok := strings.CutPrefix(t, idletraceEventsHeader); ok {
		for _, name := range strings.Fields(rest) {
			p.listed[bareEvent(name)] = true
		}
	}
}

// bareEvent is "irq_handler_entry" of "irq:irq_handler_entry".
func bareEvent(s string) string {
	if k := strings.LastIndexByte(s, ':'); k >= 0 {
		return s[k+1:]
	}
	return s
}

// lacking lists the events of names the capture was not recorded with.
func (p *pass) lacking(names []string) []string {
	var out []string
	for _, n := range names {
		if !p.recorded(n) {
			out = append(out, n)
		}
	}
	return out
}

func wakeCauseNames() []string {
	names := make([]string, len(wakeCauseList))
	for i, e := range wakeCauseList {
		names[i] = e.name
	}
	return names
}

// decideWake sets, from the first pass, whether wake causes and the tick
// can be imported.
func (p *pass) decideWake(first *pass) {
	p.wakeOn = len(first.lacking(wakeCauseNames())) == 0
	p.tickOn = p.wakeOn && len(first.lacking(tickEvents)) == 0 && first.tickSymbols
}

// isPolling says whether state polls on cpu.
func (p *pass) isPolling(cpu uint32, state uint32) bool {
	sts, ok := p.polling[int(cpu)]
	if !ok {
		return state == 0
	}
	return slices.Contains(sts, int(state))
}

// idleEntry: a new period on cpu; its pending predecessor is written as it is.
func (p *pass) wakeEntry(cpu uint32) error {
	ws := &p.wake[cpu]
	var err error
	if ws.pending {
		err = p.writePending(ws)
	}
	ws.cause, ws.irq = trace.WakeUnknown, -1
	return err
}

// wakeExit closes rec's cause: written now with one, pending without.
func (p *pass) wakeExit(rec *trace.IdlePeriod) error {
	if !p.wakeOn {
		return p.w.AddIdle(rec)
	}
	ws := &p.wake[rec.CPU]
	rec.WakeCause, rec.WakeIRQ = ws.cause, ws.irq
	if rec.WakeCause != trace.WakeUnknown {
		return p.w.AddIdle(rec)
	}
	ws.pending, ws.pendTimer, ws.pend = true, false, *rec
	return nil
}

func (p *pass) writePending(ws *wakeState) error {
	ws.pending, ws.pendTimer = false, false
	return p.w.AddIdle(&ws.pend)
}

// wakeEvent is a wake event on ev's CPU.
func (p *pass) wakeEvent(ev *event, cause trace.WakeCause) error {
	if !p.wakeOn || p.w == nil {
		return nil
	}
	irq := int32(-1) // a device IRQ whose number the line does not give stays -1
	if cause == trace.WakeIRQ {
		if n, err := uintField(ev.fields, "irq"); err == nil && n < 1<<31 {
			irq = int32(n)
		}
	}
	p.grow(ev.cpu)
	ws, o := &p.wake[ev.cpu], &p.open[ev.cpu]
	if o.open {
		if ws.cause == trace.WakeUnknown || p.isPolling(ev.cpu, o.state) {
			ws.cause, ws.irq = cause, irq
		}
		return nil
	}
	if !ws.pending || ws.pend.WakeCause != trace.WakeUnknown {
		return nil
	}
	if ev.ns > ws.pend.ExitNs && ev.ns-ws.pend.ExitNs > pendingWindowNs {
		return p.writePending(ws)
	}
	ws.pend.WakeCause, ws.pend.WakeIRQ = cause, irq
	if cause == trace.WakeTimer && p.tickOn {
		ws.pendTimer = true // may turn out to be the tick
		return nil
	}
	return p.writePending(ws)
}

// localTimerExit ends the wait of a pending timer cause.
func (p *pass) localTimerExit(ev *event) error {
	if !p.wakeOn || p.w == nil {
		return nil
	}
	p.grow(ev.cpu)
	ws := &p.wake[ev.cpu]
	if !ws.pending || !ws.pendTimer {
		return nil
	}
	return p.writePending(ws)
}

// hrtimerExpire turns a timer cause into the tick when the tick's function runs.
func (p *pass) hrtimerExpire(ev *event) {
	fn, ok := field(ev.fields, "function")
	if !ok {
		return
	}
	// perf prints a symbol, trace-cmd "sym" or "0xaddr"; an address
	// without symbols says nothing.
	if tickFunctions[fn] {
		p.tickSymbols = true
	} else if !strings.HasPrefix(fn, "0x") && !strings.HasPrefix(fn, "0000") {
		p.tickSymbols = true // symbols are resolved: another timer
	}
	if !p.tickOn || p.w == nil || !tickFunctions[fn] {
		return
	}
	p.grow(ev.cpu)
	ws, o := &p.wake[ev.cpu], &p.open[ev.cpu]
	if o.open {
		if ws.cause == trace.WakeTimer {
			ws.cause = trace.WakeTick
		}
	} else if ws.pending && ws.pendTimer {
		ws.pend.WakeCause = trace.WakeTick
	}
}

// flushWake writes the periods still pending at the capture's end.
func (p *pass) flushWake() error {
	for i := range p.wake {
		if p.wake[i].pending {
			if err := p.writePending(&p.wake[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// wakeMetadata marks the wake inputs: imported where the capture holds
// every event the rule needs, else missing with the events it lacks.
func (p *pass) wakeMetadata(m *trace.Metadata, tool string) {
	lack := p.lacking(wakeCauseNames())
	if len(lack) > 0 {
		m.Probes["wake causes"] = "missing: the capture lacks " + strings.Join(lack, ", ")
		m.Probes["tick wake-ups"] = "missing: the capture carries no wake causes"
		return
	}
	m.Inputs.WakeCauses = true
	m.Probes["wake causes"] = "imported: " + tool
	switch tl := p.lacking(tickEvents); {
	case len(tl) > 0:
		m.Probes["tick wake-ups"] = "missing: the capture lacks " + strings.Join(tl, ", ") + " (every local timer wake-up is reported as timer)"
	case !p.tickSymbols:
		m.Probes["tick wake-ups"] = "missing: hrtimer_expire_entry shows no function names (every local timer wake-up is reported as timer)"
	default:
		m.Inputs.TickWakeups = true
		m.Probes["tick wake-ups"] = "imported: " + tool + " (hrtimer_expire_entry of tick_nohz_handler or tick_sched_timer)"
	}
}
