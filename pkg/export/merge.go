package export

// The time-ordered merge the event formats share (the ftrace text, the
// Perfetto trace): a trace's records come per chunk, each type in its own
// chunks, and a record's events (an idle entry and exit, an IO issue and
// completion) lie apart in time. A timeline holds the events made from
// the records read so far and writes them, in time order, once no chunk
// still to be read can hold an earlier one: memory holds the events
// between the earliest time a chunk yet to be read may hold and the latest
// read (a chunk spans about a second; more while an IO request stays in
// flight), not the trace.

import (
	"bufio"
	"errors"
	"io"
	"math"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/trace"
)

// eventWriter is what the event formats' writers share: the trace, the
// selection, the CPUs, the output.
type eventWriter struct {
	r          *trace.Reader
	meta       *trace.Metadata
	rules      *analysis.Rules
	sel        selection
	ncpus      int          // the CPU count (ftraceCPUs)
	recorded   trace.CPUSet // the CPUs the trace records idle periods of
	wakeCauses bool
	sum        Summary
	out        *bufio.Writer
	tl         timeline // set by the writer, with its write
}

func newEventWriter(r *trace.Reader, o Options, w io.Writer) eventWriter {
	rules := analysis.NewRules(r.Meta, r.End)
	e := eventWriter{
		r: r, meta: r.Meta, rules: rules, sel: newSelection(r, rules, o),
		ncpus: ftraceCPUs(r.Meta), wakeCauses: r.Meta.Inputs.WakeCauses,
		out: bufio.NewWriterSize(w, 64<<10),
	}
	e.sum.TraceStartNs = e.sel.start
	e.recorded = r.Meta.RecordedCPUSet()
	return e
}

// ftraceCPUs is the CPU count the event formats know: the machine's
// possible CPUs, or more where the trace names a CPU beyond them.
func ftraceCPUs(m *trace.Metadata) int {
	n := m.NumCPUs
	for _, c := range m.RecordedCPUs {
		n = max(n, c+1)
	}
	for _, cs := range m.States {
		n = max(n, cs.CPU+1)
	}
	return min(max(n, 1), trace.MaxCPUs)
}

// impossible says a period is no kernel's: an impossible CPU or state
// number, a CPU beyond the trace's count or one it does not record, an
// exit before its entry. The event formats leave such a period out.
func (e *eventWriter) impossible(p *trace.IdlePeriod) bool {
	return !e.rules.Valid(p) || int64(p.CPU) >= int64(e.ncpus) || p.ExitNs < p.EntryNs ||
		!e.recorded.Has(p.CPU)
}

// The event kinds, in the order one record's events come at one instant.
const (
	evEntry uint8 = iota
	evExit
	evWake
	evIssue
	evComplete
	evWakeRequest // Perfetto only: the remote wake request that ended a period
	evQoSRequest  // ftrace only: a PM QoS request (its change in ftracer.qos)
	evQoSTarget   // ftrace only: the constraint's value before and after it
)

// event is one event waiting for its turn.
type event struct {
	ns, seq uint64
	flow    uint64 // Perfetto: the flow from a wake request to the exit it caused, 0 for none
	cpu     uint32
	state   uint32 // evEntry
	irq     int32  // evWake: the device IRQ, -1 for none
	io      int32  // evIssue, evComplete: its slot in timeline.ios; evQoS*: the change's index
	kind    uint8
	cause   trace.WakeCause // evWake
}

// eventHeap is a min-heap of events by time, then by the order they were
// made in (a CPU's exit before its next entry at the same instant).
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].ns != h[j].ns {
		return h[i].ns < h[j].ns
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s.less(l, m) {
			m = l
		}
		if l+1 < n && s.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// errOutOfOrder is a record earlier than events already written: its
// chunk lies about its time range.
var errOutOfOrder = errors.New("the trace's records lie outside their chunks' time ranges (damaged file?): cannot write them in time order")

// timeline merges events in time order for a writer.
type timeline struct {
	// later[i] is the smallest timestamp chunk i and the chunks after it
	// can hold: every event before it may be written.
	later  []uint64
	held   eventHeap
	seq    uint64
	ios    []trace.BlockIO // IO requests with an event still held
	ioRefs []uint8         // events of each still held
	freeIO []int32
	last   uint64 // the latest timestamp written
	// written: an event was written (last means something).
	written bool
	maxHeld int
	write   func(*event) error
}

func newTimeline(r *trace.Reader, write func(*event) error) timeline {
	infos := r.ChunkInfos()
	t := timeline{later: make([]uint64, len(infos)+1), write: write}
	t.later[len(infos)] = math.MaxUint64
	for i := len(infos) - 1; i >= 0; i-- {
		t.later[i] = t.later[i+1]
		if c := infos[i]; (c.Type == trace.ChunkIdle || c.Type == trace.ChunkBlockIO) && c.Records > 0 {
			t.later[i] = min(t.later[i], c.FirstNs)
		}
	}
	return t
}

// scan reads r with v's record callbacks, writing the events they hold as
// the chunks allow, and the rest at the end.
func (t *timeline) scan(r *trace.Reader, v trace.Visitor) error {
	v.Chunk = func(i int) error { return t.release(t.later[i]) }
	err := r.Scan(v)
	if err == nil {
		err = t.release(math.MaxUint64)
	}
	return err
}

// before says whether an instant comes before an event already written:
// its record cannot be written in time order.
func (t *timeline) before(ns uint64) bool { return t.written && ns < t.last }

func (t *timeline) hold(e event) {
	e.seq = t.seq
	t.seq++
	t.held.push(e)
	t.maxHeld = max(t.maxHeld, len(t.held))
}

// holdIO holds an IO request's issue and completion, which share a copy
// of it until both are written.
func (t *timeline) holdIO(b *trace.BlockIO) {
	var slot int32
	if n := len(t.freeIO); n > 0 {
		slot, t.freeIO = t.freeIO[n-1], t.freeIO[:n-1]
		t.ios[slot] = *b
		t.ioRefs[slot] = 2
	} else {
		slot = int32(len(t.ios))
		t.ios = append(t.ios, *b)
		t.ioRefs = append(t.ioRefs, 2)
	}
	t.hold(event{ns: b.IssueNs, cpu: b.IssueCPU, kind: evIssue, io: slot})
	t.hold(event{ns: b.CompleteNs, cpu: b.CompleteCPU, kind: evComplete, io: slot})
}

// release writes every held event before the instant upTo (all of them
// for math.MaxUint64).
func (t *timeline) release(upTo uint64) error {
	for len(t.held) > 0 && (t.held[0].ns < upTo || upTo == math.MaxUint64) {
		e := t.held.pop()
		err := t.write(&e)
		if e.kind == evIssue || e.kind == evComplete {
			if t.ioRefs[e.io]--; t.ioRefs[e.io] == 0 {
				t.ios[e.io] = trace.BlockIO{}
				t.freeIO = append(t.freeIO, e.io)
			}
		}
		if err != nil {
			return err
		}
		t.last, t.written = max(t.last, e.ns), true
	}
	return nil
}

// holdPeriod holds a period's entry and exit where the period is possible
// and selected, and says whether it was.
func (e *eventWriter) holdPeriod(p *trace.IdlePeriod) (bool, error) {
	if e.impossible(p) {
		e.sum.Invalid++
		return false, nil
	}
	if !e.sel.idle(p) {
		return false, nil
	}
	if e.tl.before(p.EntryNs) {
		return false, errOutOfOrder
	}
	e.tl.hold(event{ns: p.EntryNs, cpu: p.CPU, kind: evEntry, state: p.State})
	e.tl.hold(event{ns: p.ExitNs, cpu: p.CPU, kind: evExit})
	e.sum.IdlePeriods++
	return true, nil
}

// holdIO holds a selected IO request's issue and completion.
func (e *eventWriter) holdIO(b *trace.BlockIO) error {
	if !e.sel.io(b) {
		return nil
	}
	if e.tl.before(min(b.IssueNs, b.CompleteNs)) {
		return errOutOfOrder
	}
	e.tl.holdIO(b)
	e.sum.IORequests++
	return nil
}
