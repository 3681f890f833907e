// Package iowake holds the one rule that decides which block IO completions
// woke an idle CPU, and a streaming matcher that applies it to a trace in
// bounded memory. `idletrace stats` counts with it and the what-if replay
// applies each policy's exit latency to what it matches, so both answer
// the same question the same way.
//
// The rule: a completion at CompleteNs on CompleteCPU woke that CPU when an
// idle period on the same CPU, ended by a device interrupt or by a
// function-call IPI (how blk-mq hands a completion to the CPU that issued
// the request), has EntryNs ≤ CompleteNs ≤ ExitNs + WindowNs. Both sides of
// the exit occur: with HLT the interrupt handler (and the softirq that
// completes the request) runs before the cpu_idle exit event, so the
// completion lies inside the period; with MWAIT the exit event comes first
// and the handler runs right after it. Each completion matches at most one
// period, the earliest that holds it.
package iowake

import "github.com/idletrace/idletrace/pkg/trace"

// WindowNs is how long after an idle exit a block IO completion on the same
// CPU still counts as the work that woke it.
const WindowNs = 50_000

// MaxPending bounds the records a Matcher holds while one record stream
// runs ahead of the other (a normal file needs about one chunk of each
// type, 64 Ki records).
const MaxPending = 1 << 18

// maxCPUs is the trace format's CPU limit; records beyond it are ignored.
const maxCPUs = trace.MaxCPUs

// skewNs is how far out of time order records of one type may be across
// CPUs (the ring buffer is shared; each record is reserved just after its
// time stamp is taken). Generous: it only delays pruning.
const skewNs = 10_000_000

// WokeKnown says whether the count of completions that woke an idle CPU
// (woke, of completions) is known: some woke one, or the trace carries
// wake causes and block IO and not every completion came on a CPU whose
// idle periods the recording left out (onUnrecorded; record --cpus).
// stats' io.woke_idle_cpu and whatif's io_woke_idle are null otherwise.
func WokeKnown(in trace.Inputs, completions, woke, onUnrecorded uint64) bool {
	return woke > 0 || in.WakeCauses && in.BlockIO && (completions == 0 || onUnrecorded < completions)
}

// Eligible says whether an idle period ended by this cause can have been
// woken by a block IO completion.
func Eligible(c trace.WakeCause) bool { return c == trace.WakeIRQ || c == trace.WakeIPICall }

// Rule is the rule in a sentence, for reports.
const Rule = "a completion woke an idle CPU when that CPU's idle period, ended by a device interrupt or a function-call IPI, holds it or ended at most 50 µs before it"

// TaskWakeWindowNs: a task woken this soon after its request completed was
// woken by the completion (the wake-up runs in the completion path,
// microseconds after block_rq_complete; a later one is other work).
const TaskWakeWindowNs = 1_000_000

// TaskLatencyNs is issue to the issuing task running again, for a request
// the task waited for: woken by its completion (TaskWakeWindowNs), so
// asleep until then. It is what a process doing synchronous IO sees.
func TaskLatencyNs(b *trace.BlockIO) (uint64, bool) {
	if b.TaskWokenNs < b.CompleteNs || b.TaskWokenNs > b.CompleteNs+TaskWakeWindowNs ||
		b.TaskRunNs < b.TaskWokenNs || b.CompleteNs < b.IssueNs {
		return 0, false
	}
	return b.TaskRunNs - b.IssueNs, true
}

// TaskRule is the rule that finds the idle period the waiting task's CPU
// left to run it: a period on that CPU holding the wake-up (the CPU was
// idle when the wake-up came) and ended by the ways a wake-up reaches an
// idle CPU (a reschedule IPI, a function-call IPI for a queued wake-up, or
// none on a polling CPU). Same CPU as the completion: that CPU is awake.
var TaskRule = MatchRule{
	Eligible: func(c trace.WakeCause) bool {
		return c == trace.WakeIPIResched || c == trace.WakeIPICall || c == trace.WakeRemoteNoIPI
	},
}

// CompletionRule is the rule above, for a Matcher.
var CompletionRule = MatchRule{Eligible: Eligible, WindowNs: WindowNs}

// MatchRule says which idle periods an event can have woken: ended by a
// cause Eligible accepts, with EntryNs ≤ event ≤ ExitNs + WindowNs.
type MatchRule struct {
	Eligible func(trace.WakeCause) bool
	WindowNs uint64
}

// Matcher pairs idle periods with block IO completions in one streaming
// pass. S is what the caller keeps with an eligible period, C with a
// completion. Every completion fed is reported exactly once, to Match or to
// Miss, by the time Flush returns.
//
// A trace stores idle periods and IO requests in separate chunks, each type
// in recording order (so, per CPU, idle exits and completion times both
// increase), but the two types interleave in the file only as their chunks
// fill. Whichever stream runs ahead is held back, per CPU, until the other
// catches up, and only what can still match is held: eligible periods and
// completion times. Across CPUs each stream is in time order within skewNs,
// so once the other stream has passed a record's window on any CPU it is
// released. Memory is therefore proportional to how far the two streams
// drift apart in the file, never to the length of the trace. Past
// MaxPending held records (streams that drift further, or IO that came only
// at the very end) the oldest are released unmatched, and Uncertain counts
// the completions whose answer that may have changed.
type Matcher[S, C any] struct {
	Rule  MatchRule // CompletionRule where left zero
	Match func(cause trace.WakeCause, period S, completion C)
	Miss  func(completion C)

	// Dropped counts held records released to keep the memory bound;
	// Uncertain the completions reported to Miss that a released record
	// might have changed.
	Dropped, Uncertain uint64

	cpus    []*cpuQueues[S, C]
	pending int
	idleWM  uint64 // latest idle exit seen on any CPU
	ioWM    uint64 // latest completion seen on any CPU
}

type span[S any] struct {
	entry, exit uint64
	cause       trace.WakeCause
	payload     S
}

func (s *span[S]) holds(t, window uint64) bool { return t >= s.entry && t <= s.exit+window }

type completion[C any] struct {
	t       uint64
	payload C
}

type cpuQueues[S, C any] struct {
	spans        queue[span[S]]
	comps        queue[completion[C]]
	lastExit     uint64 // latest idle exit seen on this CPU (any wake cause)
	lastComplete uint64 // latest completion seen on this CPU
	droppedUpTo  uint64 // latest exit of a span released for the memory bound
}

func (m *Matcher[S, C]) cpu(c uint32) *cpuQueues[S, C] {
	if m.Rule.Eligible == nil {
		m.Rule = CompletionRule
	}
	if c >= maxCPUs {
		return nil
	}
	for int(c) >= len(m.cpus) {
		m.cpus = append(m.cpus, nil)
	}
	if m.cpus[c] == nil {
		m.cpus[c] = &cpuQueues[S, C]{}
	}
	return m.cpus[c]
}

// Period feeds one idle period of any wake cause; payload is kept only for
// eligible ones.
func (m *Matcher[S, C]) Period(cpu uint32, entryNs, exitNs uint64, cause trace.WakeCause, payload S) {
	q := m.cpu(cpu)
	if q == nil {
		return
	}
	q.lastExit = max(q.lastExit, exitNs)
	m.idleWM = max(m.idleWM, exitNs)
	// Held periods whose window the IO stream has passed on every CPU.
	for q.spans.len() > 0 && q.spans.front().exit+m.Rule.WindowNs+skewNs < m.ioWM {
		q.spans.pop()
		m.pending--
	}
	eligible := m.Rule.Eligible(cause)
	s := span[S]{entry: entryNs, exit: exitNs, cause: cause, payload: payload}
	// Waiting completions, oldest first. One before this period, or inside
	// it without being matched, can be held by no later period.
	for q.comps.len() > 0 {
		c := q.comps.front()
		if eligible && s.holds(c.t, m.Rule.WindowNs) {
			m.Match(s.cause, s.payload, c.payload)
		} else if c.t > s.exit {
			break // after this period: a later one may hold it, and those behind it too
		} else {
			m.Miss(c.payload)
		}
		q.comps.pop()
		m.pending--
	}
	if !eligible || q.lastComplete > s.exit+m.Rule.WindowNs || s.exit+m.Rule.WindowNs+skewNs < m.ioWM {
		return // no later completion can match it
	}
	q.spans.push(s)
	m.hold()
}

// Completion feeds one block IO completion.
func (m *Matcher[S, C]) Completion(cpu uint32, completeNs uint64, payload C) {
	q := m.cpu(cpu)
	if q == nil {
		m.Miss(payload)
		return
	}
	t := completeNs
	q.lastComplete = max(q.lastComplete, t)
	m.ioWM = max(m.ioWM, t)
	for q.comps.len() > 0 && q.comps.front().t+skewNs < m.idleWM {
		m.Miss(q.comps.front().payload) // the idle stream is past it on every CPU
		q.comps.pop()
		m.pending--
	}
	for q.spans.len() > 0 {
		s := q.spans.front()
		if s.holds(t, m.Rule.WindowNs) {
			m.Match(s.cause, s.payload, payload)
			return
		}
		if t < s.entry {
			break // before the oldest held period: the checks below decide
		}
		q.spans.pop() // t is past this period's window, and later ones are later
		m.pending--
	}
	if t <= q.droppedUpTo+m.Rule.WindowNs {
		m.Uncertain++ // a period that might have held it was released
	}
	if q.lastExit >= t || t+skewNs < m.idleWM {
		m.Miss(payload) // the idle stream is past t: no period still to come holds it
		return
	}
	q.comps.push(completion[C]{t: t, payload: payload})
	m.hold()
}

// Flush reports every completion still held to Miss. Call it once, after
// the last record.
func (m *Matcher[S, C]) Flush() {
	for _, q := range m.cpus {
		if q == nil {
			continue
		}
		for q.comps.len() > 0 {
			m.Miss(q.comps.front().payload)
			q.comps.pop()
		}
		q.spans = queue[span[S]]{}
	}
	m.pending = 0
}

// Pending is how many records the matcher holds.
func (m *Matcher[S, C]) Pending() int { return m.pending }

// hold accounts for one more held record and enforces the memory bound by
// releasing the oldest record of the CPU holding the most.
func (m *Matcher[S, C]) hold() {
	m.pending++
	if m.pending <= MaxPending {
		return
	}
	var big *cpuQueues[S, C]
	for _, q := range m.cpus {
		if q != nil && (big == nil || q.spans.len()+q.comps.len() > big.spans.len()+big.comps.len()) {
			big = q
		}
	}
	if big.spans.len() >= big.comps.len() {
		big.droppedUpTo = max(big.droppedUpTo, big.spans.front().exit)
		big.spans.pop()
	} else {
		m.Uncertain++ // a period still to come might have held it
		m.Miss(big.comps.front().payload)
		big.comps.pop()
	}
	m.pending--
	m.Dropped++
}

// queue is a FIFO on a ring buffer whose length is a power of two (an
// index is masked, not divided: a division per push and pop was a tenth of
// the matcher's time). It grows as needed and gives back what a burst took
// once empty, but keeps up to keepCap slots: a CPU's queue fills with up to
// a chunk's periods while the other stream's chunk is read, and regrowing
// it from nothing after each chunk was half of stats' allocations (2.3 MB
// of 4.6 on the bundled trace).
type queue[T any] struct {
	buf        []T
	head, size int
}

// keepCap is the most slots an empty queue keeps: a chunk's records (the
// writer's chunks hold at most 64 Ki).
const keepCap = 1 << 16

func (q *queue[T]) len() int { return q.size }

func (q *queue[T]) front() T { return q.buf[q.head] }

func (q *queue[T]) push(v T) {
	if q.size == len(q.buf) {
		nb := make([]T, max(16, 2*len(q.buf)))
		mask := len(q.buf) - 1
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)&mask]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)&(len(q.buf)-1)] = v
	q.size++
}

func (q *queue[T]) pop() {
	var zero T
	q.buf[q.head] = zero // release what the payload references
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.size--
	if q.size == 0 {
		q.head = 0
		if len(q.buf) > keepCap {
			q.buf = nil
		}
	}
}
