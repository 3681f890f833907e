package analysis

import "github.com/idletrace/idletrace/pkg/trace"

// IOWakeWindowNs is how long after an idle exit a block IO completion on the
// same CPU still counts as the work that woke it (see ioWake).
const IOWakeWindowNs = 50_000

// ioWakeMaxPending bounds the records ioWake holds while one record stream
// runs ahead of the other (about 6 MiB at most; a normal file needs about
// one chunk of each type, 64 Ki records).
const ioWakeMaxPending = 1 << 18

// ioWakeSkewNs is how far out of time order records of one type may be
// across CPUs (the ring buffer is shared; each record is reserved just after
// its time stamp is taken). Generous: it only delays pruning.
const ioWakeSkewNs = 10_000_000

// ioWake decides, in one streaming pass with bounded memory, how many block
// IO completions woke an idle CPU.
//
// The rule: a completion at CompleteNs on CompleteCPU woke that CPU when an
// idle period on the same CPU, ended by a device interrupt (or by a
// function-call IPI, which is how blk-mq hands a completion to the CPU that
// issued the request), has EntryNs ≤ CompleteNs ≤ ExitNs + IOWakeWindowNs.
// Both sides of the exit occur: with HLT the interrupt handler (and the
// softirq that completes the request) runs before the cpu_idle exit event, so
// the completion lies inside the period; with MWAIT the exit event comes
// first and the handler runs right after it. Each completion counts at most
// once.
//
// The streams: a trace stores idle periods and IO requests in separate
// chunks, each type in recording order (so, per CPU, idle exits and
// completion times both increase), but the two types interleave in the file
// only as their chunks fill. Whichever stream runs ahead is therefore held
// back, per CPU, until the other catches up — only what can still match:
// interrupt-woken idle spans (entry, exit) and completion times. A span is
// dropped once a completion on its CPU is later than its exit + window; a
// completion once it matched, or once an idle period on its CPU ended after
// it (periods do not overlap, so no later one can hold it). Memory is
// Across CPUs each stream is in time order too, within ioWakeSkewNs, so
// once the IO stream has passed a span's window (or the idle stream a
// completion) on any CPU, it is dropped as well: CPUs without IO hold
// nothing. Memory is therefore proportional to how far the two streams drift
// apart in the file (about one chunk of each), never to the length of the
// trace. Past ioWakeMaxPending held records (a file whose streams drift
// further, or whose IO came only at the very end) the oldest are dropped;
// completions that then arrive in the time those covered are counted as
// uncertain, and the result is a lower bound by at most that many.
type ioWake struct {
	cpus      []*ioWakeCPU
	woke      uint64
	byCause   [2]uint64 // irq, ipi-call
	pending   int
	idleWM    uint64 // latest idle exit seen on any CPU
	ioWM      uint64 // latest completion seen on any CPU
	dropped   uint64 // held records dropped to keep the bound
	uncertain uint64 // completions that may have matched a dropped span
}

type ioSpan struct {
	entry, exit uint64
	cause       trace.WakeCause
}

type ioWakeCPU struct {
	spans        queue[ioSpan]
	comps        queue[uint64]
	lastExit     uint64 // latest idle exit seen on this CPU (any wake cause)
	lastComplete uint64 // latest completion seen on this CPU
	droppedUpTo  uint64 // latest exit of a span dropped for the memory bound
}

func (w *ioWake) cpu(c uint32) *ioWakeCPU {
	if c >= maxCPUs {
		return nil
	}
	for int(c) >= len(w.cpus) {
		w.cpus = append(w.cpus, nil)
	}
	if w.cpus[c] == nil {
		w.cpus[c] = &ioWakeCPU{}
	}
	return w.cpus[c]
}

func (w *ioWake) count(c trace.WakeCause) {
	w.woke++
	if c == trace.WakeIRQ {
		w.byCause[0]++
	} else {
		w.byCause[1]++
	}
}

func (s ioSpan) covers(t uint64) bool { return t >= s.entry && t <= s.exit+IOWakeWindowNs }

// period feeds one idle period (any wake cause; only interrupt-woken ones
// can match).
func (w *ioWake) period(p *trace.IdlePeriod) {
	c := w.cpu(p.CPU)
	if c == nil {
		return
	}
	if p.ExitNs > c.lastExit {
		c.lastExit = p.ExitNs
	}
	w.idleWM = max(w.idleWM, p.ExitNs)
	// Held spans whose window the IO stream has passed on every CPU.
	for c.spans.len() > 0 && c.spans.front().exit+IOWakeWindowNs+ioWakeSkewNs < w.ioWM {
		c.spans.pop()
		w.pending--
	}
	eligible := p.WakeCause == trace.WakeIRQ || p.WakeCause == trace.WakeIPICall
	s := ioSpan{entry: p.EntryNs, exit: p.ExitNs, cause: p.WakeCause}
	// Waiting completions, oldest first. One before this period, or inside
	// it without being matched, can be held by no later period.
	for c.comps.len() > 0 {
		t := c.comps.front()
		if eligible && s.covers(t) {
			w.count(s.cause)
		} else if t > s.exit {
			break // after this period: a later one may hold it, and those behind it too
		}
		c.comps.pop()
		w.pending--
	}
	if !eligible || c.lastComplete > s.exit+IOWakeWindowNs || s.exit+IOWakeWindowNs+ioWakeSkewNs < w.ioWM {
		return // no later completion can match it
	}
	c.spans.push(s)
	w.hold()
}

// completion feeds one block IO completion.
func (w *ioWake) completion(cpu uint32, t uint64) {
	c := w.cpu(cpu)
	if c == nil {
		return
	}
	if t > c.lastComplete {
		c.lastComplete = t
	}
	w.ioWM = max(w.ioWM, t)
	for c.comps.len() > 0 && c.comps.front()+ioWakeSkewNs < w.idleWM {
		c.comps.pop() // the idle stream is past it on every CPU
		w.pending--
	}
	for c.spans.len() > 0 {
		s := c.spans.front()
		if s.covers(t) {
			w.count(s.cause)
			return
		}
		if t < s.entry {
			break // before the oldest held span: the check below decides
		}
		c.spans.pop() // t is past this span's window, and later ones are later
		w.pending--
	}
	if t <= c.droppedUpTo+IOWakeWindowNs {
		w.uncertain++ // a span that might have held it was dropped
	}
	if c.lastExit >= t || t+ioWakeSkewNs < w.idleWM {
		return // the idle stream is past t: no period still to come holds it
	}
	c.comps.push(t)
	w.hold()
}

// hold accounts for one more held record and enforces the memory bound by
// dropping the oldest record of the CPU holding the most.
func (w *ioWake) hold() {
	w.pending++
	if w.pending <= ioWakeMaxPending {
		return
	}
	var big *ioWakeCPU
	for _, c := range w.cpus {
		if c != nil && (big == nil || c.spans.len()+c.comps.len() > big.spans.len()+big.comps.len()) {
			big = c
		}
	}
	if big.spans.len() >= big.comps.len() {
		big.droppedUpTo = max(big.droppedUpTo, big.spans.front().exit)
		big.spans.pop()
	} else {
		big.comps.pop()
	}
	w.pending--
	w.dropped++
}

// queue is a FIFO on a ring buffer that grows as needed and shrinks back.
type queue[T any] struct {
	buf        []T
	head, size int
}

func (q *queue[T]) len() int { return q.size }

func (q *queue[T]) front() T { return q.buf[q.head] }

func (q *queue[T]) push(v T) {
	if q.size == len(q.buf) {
		nb := make([]T, max(16, 2*len(q.buf)))
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = v
	q.size++
}

func (q *queue[T]) pop() {
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	if q.size == 0 {
		q.head = 0
		if len(q.buf) > 1024 {
			q.buf = nil // give back what a burst took
		}
	}
}
