package record

import (
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// The join writes every request once, in completion order, with the task's
// run where the task said so, and lets nothing wait past ioTaskHoldNs.
func TestIOTaskJoin(t *testing.T) {
	var got []trace.BlockIO
	j := newIOTaskJoin(func(b *trace.BlockIO) error { got = append(got, *b); return nil })
	io := func(tid uint32, done uint64) *trace.BlockIO {
		return &trace.BlockIO{Tid: tid, IssueNs: done - 100, CompleteNs: done}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(j.completion(io(7, 1000))) // waits for task 7
	must(j.completion(io(0, 1100))) // no task: ready, but behind 7's
	must(j.completion(io(8, 1200))) // waits for task 8
	if len(got) != 0 {
		t.Fatalf("wrote %d before task 7 ran", len(got))
	}
	must(j.taskRan(7, 1000, 1010, 1050, 3)) // 7 ran: it and the next go out
	if len(got) != 2 || got[0].TaskRunNs != 1050 || got[0].TaskCPU != 3 || got[0].TaskWokenNs != 1010 || got[1].CompleteNs != 1100 {
		t.Fatalf("after task 7 ran: %+v", got)
	}
	must(j.completion(io(8, 1300))) // 8's first request can no longer be told
	if len(got) != 3 || got[2].CompleteNs != 1200 || got[2].TaskRunNs != 0 {
		t.Fatalf("after task 8's second request: %+v", got)
	}
	must(j.taskRan(8, 1300, 1310, 1400, 1))
	must(j.taskRan(9, 5, 6, 7, 0)) // a task with nothing held: ignored
	if len(got) != 4 || got[3].TaskRunNs != 1400 {
		t.Fatalf("after task 8 ran: %+v", got)
	}
	must(j.completion(io(10, 2000)))
	must(j.tick(2000 + ioTaskHoldNs - 1))
	if len(got) != 4 {
		t.Fatal("expired early")
	}
	must(j.tick(2000 + ioTaskHoldNs))
	if len(got) != 5 || got[4].TaskRunNs != 0 {
		t.Fatalf("not expired: %+v", got)
	}
	must(j.completion(io(11, 3000)))
	must(j.flush())
	if len(got) != 6 {
		t.Fatalf("flush left %d", 6-len(got))
	}
	must(j.taskRan(11, 3000, 3001, 3002, 0)) // too late: already written
	if len(got) != 6 || got[5].TaskRunNs != 0 {
		t.Fatalf("after flush: %+v", got)
	}
}
