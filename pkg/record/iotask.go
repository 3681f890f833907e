package record

import "github.com/idletrace/idletrace/pkg/trace"

// ioTaskHoldNs is how long a block IO record waits for the task that
// issued it to run again (RECORD_IO_TASK) before it is written without: a
// task that waited for its IO normally runs within microseconds of the
// wake-up; one that did not wait runs whenever.
const ioTaskHoldNs = 100_000_000

// ioTaskJoin joins block IO records with the RECORD_IO_TASK record that
// says when the issuing task ran again, and writes each request once,
// whole, in the order the completions came (readers rely on each CPU's
// completions being in time order). The kernel side keeps only a task's
// latest completion waiting, so a task's earlier request still held when
// a later one completes is written without.
type ioTaskJoin struct {
	queue  []trace.BlockIO // completion order; queue[head:] not yet written
	done   []bool
	head   int
	seq0   uint64            // sequence number of queue[0]
	byTid  map[uint32]uint64 // a task's latest held request, by sequence
	newest uint64            // latest kernel time seen in a record
	write  func(*trace.BlockIO) error
}

func newIOTaskJoin(write func(*trace.BlockIO) error) *ioTaskJoin {
	return &ioTaskJoin{byTid: map[uint32]uint64{}, write: write}
}

// completion takes one block IO record.
func (j *ioTaskJoin) completion(b *trace.BlockIO) error {
	j.newest = max(j.newest, b.CompleteNs)
	waits := b.Tid != 0
	if waits {
		if s, ok := j.byTid[b.Tid]; ok {
			j.done[s-j.seq0] = true // its task can no longer be told
		}
		j.byTid[b.Tid] = j.seq0 + uint64(len(j.queue))
	}
	j.queue = append(j.queue, *b)
	j.done = append(j.done, !waits)
	return j.release(false)
}

// taskRan takes one RECORD_IO_TASK.
func (j *ioTaskJoin) taskRan(tid uint32, completeNs, wokenNs, runNs uint64, cpu uint32) error {
	j.newest = max(j.newest, runNs)
	if s, ok := j.byTid[tid]; ok {
		i := s - j.seq0
		if b := &j.queue[i]; b.CompleteNs == completeNs {
			b.TaskWokenNs, b.TaskRunNs, b.TaskCPU = wokenNs, runNs, cpu
		}
		j.done[i] = true
		delete(j.byTid, tid)
	}
	return j.release(false)
}

// tick lets held records expire with the time, when no record comes.
func (j *ioTaskJoin) tick(nowNs uint64) error {
	j.newest = max(j.newest, nowNs)
	return j.release(false)
}

// flush writes everything held (at stop).
func (j *ioTaskJoin) flush() error { return j.release(true) }

func (j *ioTaskJoin) release(all bool) error {
	for j.head < len(j.queue) {
		b := &j.queue[j.head]
		if !all && !j.done[j.head] && b.CompleteNs+ioTaskHoldNs > j.newest {
			break
		}
		if s, ok := j.byTid[b.Tid]; ok && s == j.seq0+uint64(j.head) {
			delete(j.byTid, b.Tid)
		}
		if err := j.write(b); err != nil {
			return err
		}
		j.head++
	}
	if j.head == len(j.queue) || j.head > 4096 && j.head*2 > len(j.queue) {
		n := copy(j.queue, j.queue[j.head:])
		copy(j.done, j.done[j.head:])
		j.queue, j.done = j.queue[:n], j.done[:n]
		j.seq0 += uint64(j.head)
		j.head = 0
	}
	return nil
}
