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
			if i%2 == 0 {
				b.Op, b.CmdFlags = OpWrite, OpWrite|1<<11 // not what a skip reads as
			}
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

// dropLastVarint removes a column's last value.
func dropLastVarint(b []byte) []byte {
	j := len(b) - 1
	for j > 0 && b[j-1] >= 0x80 {
		j--
	}
	return b[:j]
}

// A lean decode finds a malformed skipped column where a full one does:
// the same records come before the same error, whether the column runs
// out (the records stop there) or has bytes left over.
func TestScanSkipMalformed(t *testing.T) {
	wl := newWorkload(11, 2)
	var ie idleEncoder
	var be blockIOEncoder
	const n = 40
	for i := range n {
		p := wl.next()
		p.NrIOWait, p.AbortsBefore = int32(i%3), int8(i%2)
		p.TickStoppedBefore, p.IdleLoopEntry = Yes, No
		if i%3 == 0 {
			p.NextEventNs, p.NextEventKnown = p.NextTimerNs+int64(1000*i), true
		}
		if i%4 == 1 {
			p.NextTimerNs, p.NextTimerKnown = 0, false // no timer value stored
		}
		ie.add(&p)
		b := wl.blockIO(i)
		b.Tid, b.Tgid, b.Comm, b.TaskCPU = uint32(7+i), 7, "kworker/u8:1", uint32(i%2)
		be.add(&b)
	}
	appendVarint := func(b []byte) []byte { return append(b, 0x85, 0x01) }
	cases := []struct {
		name string
		typ  ChunkType
		col  int
		edit func([]byte) []byte
	}{
		{"idle timer short", ChunkIdle, 8, dropLastVarint},
		{"idle timer extra", ChunkIdle, 8, appendVarint},
		{"idle flags2 short", ChunkIdle, 9, func(b []byte) []byte { return b[:len(b)-3] }},
		{"idle flags2 extra", ChunkIdle, 9, func(b []byte) []byte { return append(b, 0) }},
		{"idle event short", ChunkIdle, 11, dropLastVarint},
		{"idle iowait short", ChunkIdle, 12, func(b []byte) []byte { return b[:5] }},
		{"idle iowait extra", ChunkIdle, 12, appendVarint},
		{"idle iowait partial", ChunkIdle, 12, func(b []byte) []byte { return append(b, 0x80) }},
		{"idle aborts empty", ChunkIdle, 13, func([]byte) []byte { return nil }},
		{"idle loop extra", ChunkIdle, 14, func(b []byte) []byte { return append(b, 1, 2) }},
		{"io sector short", ChunkBlockIO, 1, dropLastVarint},
		{"io op extra", ChunkBlockIO, 3, func(b []byte) []byte { return append(b, 0) }},
		{"io cmdflags partial", ChunkBlockIO, 4, func(b []byte) []byte { return append(dropLastVarint(b), 0x81) }},
		{"io tid short", ChunkBlockIO, 10, func(b []byte) []byte { return b[:20] }},
		{"io comm cut", ChunkBlockIO, 12, func(b []byte) []byte { return b[:len(b)-4] }},
		{"io comm extra", ChunkBlockIO, 12, func(b []byte) []byte { return append(b, 1, 'x') }},
		{"io taskcpu extra", ChunkBlockIO, 15, appendVarint},
	}
	// decode gives the records as strings, with the fields of blank
	// blanked.
	decode := func(typ ChunkType, raw []byte, skip, blank Fields) (got []string, err error) {
		var d decoder
		switch typ {
		case ChunkIdle:
			err = d.decodeIdle(raw, n, skip, func(p *IdlePeriod) error {
				got = append(got, fmt.Sprint(skippedIdle(*p, blank)))
				return nil
			})
		case ChunkBlockIO:
			err = d.decodeBlockIO(raw, n, skip, func(b *BlockIO) error {
				got = append(got, fmt.Sprint(skippedBlockIO(*b, blank)))
				return nil
			})
		}
		return got, err
	}
	for _, c := range cases {
		var cols [][]byte
		skip := IdleGovernorInputs
		if c.typ == ChunkIdle {
			for _, col := range ie.cols {
				cols = append(cols, bytes.Clone(col))
			}
		} else {
			for _, col := range be.cols {
				cols = append(cols, bytes.Clone(col))
			}
			skip = BlockIOShape | BlockIOTask
		}
		cols[c.col] = c.edit(cols[c.col])
		raw := appendColumns(nil, cols)
		full, fullErr := decode(c.typ, raw, 0, skip)
		lean, leanErr := decode(c.typ, raw, skip, skip)
		if fullErr == nil {
			t.Fatalf("%s: the full decode finds nothing wrong: the case tests nothing", c.name)
		}
		if leanErr == nil || leanErr.Error() != fullErr.Error() || len(lean) != len(full) {
			t.Errorf("%s: lean decode gave %d records and %v; full decode %d and %v", c.name, len(lean), leanErr, len(full), fullErr)
			continue
		}
		for i := range full {
			if lean[i] != full[i] {
				t.Errorf("%s: record %d: lean %s, full %s", c.name, i, lean[i], full[i])
				break
			}
		}
	}
}
