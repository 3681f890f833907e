package trace

import (
	"bytes"
	"fmt"
	"testing"
)

// skipped is what a record reads as when Scan leaves the fields of skip
// undecoded: each field named here, and no other, takes its unknown (or
// zero) value.
func skippedIdle(p IdlePeriod, skip Fields) IdlePeriod {
	if skip&IdleGovernorInputs != 0 {
		p.NextTimerNs, p.NextTimerKnown = 0, false
		p.NextEventNs, p.NextEventKnown = 0, false
		p.TickStoppedBefore, p.GotTick, p.AbortedBefore = Unknown, Unknown, false
		p.NrIOWait, p.AbortsBefore = -1, -1
		p.IdleLoopEntry, p.TickStoppable = Unknown, Unknown
	}
	return p
}

func skippedBlockIO(b BlockIO, skip Fields) BlockIO {
	if skip&BlockIOShape != 0 {
		b.Sector, b.Bytes, b.Op, b.CmdFlags, b.IssueCPU = 0, 0, 0, 0, 0
	}
	if skip&BlockIOTask != 0 {
		b.Tid, b.Tgid, b.Comm, b.TaskCPU = 0, 0, "", 0
	}
	return b
}

// A Visitor's Skip leaves exactly the fields it names undecoded: every
// other field of every record reads as written, whatever else is skipped.
func TestScanSkip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta())
	must(t, err)
	w.chunkRecords = 40
	wl := newWorkload(7, 2)
	var want records
	for i := range 300 {
		p := wl.next()
		// Every field a skip may blank, set to a value that is not its
		// unknown one.
		p.NextEventNs, p.NextEventKnown = p.NextTimerNs+int64(i), true
		p.TickStoppedBefore, p.GotTick, p.AbortedBefore = Yes, No, i%2 == 0
		p.NrIOWait, p.AbortsBefore = int32(i%4), int8(i%3)
		p.IdleLoopEntry, p.TickStoppable = Yes, No
		p.KernelKnown, p.KernelCounted, p.KernelResidencyNs = true, true, p.ResidencyNs()
		want.idle = append(want.idle, p)
		must(t, w.AddIdle(&p))
		if i%3 == 0 {
			b := wl.blockIO(i)
			b.Tid, b.Tgid, b.Comm, b.TaskCPU = uint32(100+i), 100, "fio", 1
			b.TaskWokenNs, b.TaskRunNs = b.CompleteNs+1_000, b.CompleteNs+5_000
			want.blockIO = append(want.blockIO, b)
			must(t, w.AddBlockIO(&b))
		}
	}
	must(t, w.Close(nil))
	data := buf.Bytes()

	for _, skip := range []Fields{0, IdleGovernorInputs, BlockIOShape, BlockIOTask, IdleGovernorInputs | BlockIOShape | BlockIOTask} {
		t.Run(fmt.Sprintf("skip=%03b", skip), func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(data), int64(len(data)))
			must(t, err)
			defer r.Close()
			var got records
			must(t, r.Scan(Visitor{
				Idle:    func(p *IdlePeriod) error { got.idle = append(got.idle, *p); return nil },
				BlockIO: func(b *BlockIO) error { got.blockIO = append(got.blockIO, *b); return nil },
				Skip:    skip,
			}))
			if len(got.idle) != len(want.idle) || len(got.blockIO) != len(want.blockIO) {
				t.Fatalf("%d idle periods and %d requests, want %d and %d", len(got.idle), len(got.blockIO), len(want.idle), len(want.blockIO))
			}
			for i, p := range want.idle {
				if exp := skippedIdle(p, skip); got.idle[i] != exp {
					t.Fatalf("idle period %d:\n got %+v\nwant %+v", i, got.idle[i], exp)
				}
				if skip&IdleGovernorInputs != 0 && skippedIdle(p, skip) == p {
					t.Fatalf("idle period %d has no field the skip blanks: the test checks nothing", i)
				}
			}
			for i, b := range want.blockIO {
				if exp := skippedBlockIO(b, skip); got.blockIO[i] != exp {
					t.Fatalf("request %d:\n got %+v\nwant %+v", i, got.blockIO[i], exp)
				}
			}
			if ws := r.Warnings(); len(ws) > 0 {
				t.Errorf("warnings: %q", ws)
			}
		})
	}
}
