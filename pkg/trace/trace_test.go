package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	edgeIdle := []IdlePeriod{
		{}, // all zero: WakeIRQ 0 is a real IRQ number, not "none"
		{CPU: 0, State: 1, EntryNs: 100, ExitNs: 200, WakeIRQ: -1},
		{CPU: math.MaxUint32, State: math.MaxUint32, EntryNs: math.MaxUint64, ExitNs: math.MaxUint64, WakeIRQ: math.MaxInt32,
			WakeCause: 255, WakeRequestNs: math.MaxUint64, NextTimerNs: math.MaxInt64, NextTimerKnown: true,
			TickStopped: Yes, PollTimedOut: Yes, IdleLoopEntry: Yes, TickStoppable: No},
		{CPU: 3, EntryNs: 5000, ExitNs: 10, WakeIRQ: math.MinInt32, WakeRequestNs: 1, // exit before entry
			NextTimerNs: -12345, NextTimerKnown: true, TickStopped: No, PollTimedOut: No, IdleLoopEntry: No, TickStoppable: Yes},
		{CPU: 3, EntryNs: 0, ExitNs: math.MaxUint64, WakeIRQ: -1, NextTimerNs: math.MinInt64},
		{CPU: 70000, EntryNs: 1 << 40, ExitNs: 1<<40 + 7, WakeIRQ: -1, NextTimerNs: 9, NextTimerKnown: false},
		{CPU: 70000, EntryNs: 1<<40 + 9, ExitNs: 1<<40 + 99, WakeIRQ: 11, WakeCause: WakeIRQ, NextTimerNs: -1},
		{CPU: 3, EntryNs: 5, ExitNs: 6, WakeIRQ: -1, NextTimerNs: 1, NextTimerKnown: true,
			TickStopped: Unknown, PollTimedOut: Unknown, WakeCause: WakeRemoteNoIPI, WakeRequestNs: 7},
	}
	edgeIO := []BlockIO{
		{},
		{Dev: math.MaxUint32, Sector: math.MaxUint64, Bytes: math.MaxUint32, Op: 255, CmdFlags: math.MaxUint32,
			IssueNs: math.MaxUint64, CompleteNs: 0, IssueCPU: math.MaxUint32, CompleteCPU: math.MaxUint32, Error: math.MinInt32},
		{Dev: 8<<20 | 1, Sector: 0, Bytes: 512, Op: OpWrite, IssueNs: 10, CompleteNs: 5, Error: math.MaxInt32},
		{Dev: 8<<20 | 1, Sector: 1, Bytes: 4096, Op: OpFlush, IssueNs: 0, CompleteNs: math.MaxUint64, Error: -5},
	}
	edgeHP := []HaltPollChange{
		{},
		{TimeNs: math.MaxUint64, CPU: math.MaxUint32, Grow: true, NewNs: math.MaxUint32, OldNs: math.MaxUint32},
		{TimeNs: 1, CPU: 1, NewNs: 0, OldNs: 200000},
	}
	edgeLoss := []Loss{
		{CPU: 0, IdleLost: 1},
		{CPU: 3, IOUnmatched: 9, IOTableFull: 1, IOCompletions: 40, IOOrphaned: 2, IdleUnpaired: 3, IOUnissued: 5},
		{CPU: math.MaxUint32, IdleLost: math.MaxUint64 / 4, IOLost: math.MaxUint64 / 4, OtherLost: 7, IOUnmatched: math.MaxUint64},
	}

	wl := newWorkload(7, 4)
	var realistic []IdlePeriod
	for range 5000 {
		realistic = append(realistic, wl.next())
	}

	tests := []struct {
		name         string
		chunkRecords uint32
		idle         []IdlePeriod
		io           []BlockIO
		hp           []HaltPollChange
		loss         []Loss
		end          *End
	}{
		{name: "empty"},
		{name: "empty, nil end", end: nil},
		{name: "edge values", idle: edgeIdle, io: edgeIO, hp: edgeHP, loss: edgeLoss,
			end: &End{StopReason: "signal", IdlePeriods: 99, OpenPeriods: 2, Loss: []Loss{{CPU: 0, IdleLost: 1}}}},
		{name: "edge values, one record per chunk", chunkRecords: 1, idle: edgeIdle, io: edgeIO, hp: edgeHP,
			end: &End{StopReason: "duration"}},
		{name: "realistic, many chunks", chunkRecords: 777, idle: realistic, end: &End{StopReason: "duration"}},
		{name: "realistic, one chunk", idle: realistic, end: &End{StopReason: "command exited", CommandExitCode: new(int)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, testMeta())
			must(t, err)
			if tt.chunkRecords > 0 {
				w.chunkRecords = tt.chunkRecords
			}
			for i := range max(len(tt.idle), len(tt.io), len(tt.hp), len(tt.loss)) {
				if i < len(tt.idle) {
					must(t, w.AddIdle(&tt.idle[i]))
				}
				if i < len(tt.io) {
					must(t, w.AddBlockIO(&tt.io[i]))
				}
				if i < len(tt.hp) {
					must(t, w.AddHaltPoll(&tt.hp[i]))
				}
				if i < len(tt.loss) {
					must(t, w.AddLoss(tt.loss[i]))
				}
			}
			st := w.Stats()
			if st.IdlePeriods != uint64(len(tt.idle)) || st.BlockIOs != uint64(len(tt.io)) {
				t.Errorf("Stats = %+v", st)
			}
			must(t, w.Close(tt.end))
			if w.Stats().Bytes != int64(buf.Len()) {
				t.Errorf("Stats().Bytes = %d, file has %d", w.Stats().Bytes, buf.Len())
			}
			if err := w.AddIdle(&IdlePeriod{}); !errors.Is(err, ErrClosed) {
				t.Errorf("AddIdle after Close: %v, want ErrClosed", err)
			}

			r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			must(t, err)
			defer r.Close()
			if ws := r.Warnings(); len(ws) != 0 {
				t.Errorf("warnings on a clean file: %q", ws)
			}
			if !r.Indexed() {
				t.Error("clean file not read through its index")
			}
			wantMeta := testMeta()
			wantMeta.FormatVersion = FormatVersion
			if !reflect.DeepEqual(r.Meta, wantMeta) {
				t.Errorf("Meta = %+v, want %+v", r.Meta, wantMeta)
			}
			if r.End == nil {
				t.Fatal("End is nil")
			}
			wantEnd := End{}
			if tt.end != nil {
				wantEnd = *tt.end
			}
			if wantEnd.IdlePeriods == 0 {
				wantEnd.IdlePeriods = uint64(len(tt.idle))
			}
			if wantEnd.BlockIOs == 0 {
				wantEnd.BlockIOs = uint64(len(tt.io))
			}
			if wantEnd.Loss == nil && len(tt.loss) > 0 {
				wantEnd.Loss = tt.loss
			}
			if wantEnd.ShortestPollTimeoutNs == nil {
				// The writer's own: the shortest period that timed out polling.
				var shortest uint64
				for _, p := range tt.idle {
					if d := p.ExitNs - p.EntryNs; p.PollTimedOut == Yes && p.ExitNs >= p.EntryNs && (shortest == 0 || d < shortest) {
						shortest = d
					}
				}
				wantEnd.ShortestPollTimeoutNs = &shortest
			}
			if !reflect.DeepEqual(*r.End, wantEnd) {
				t.Errorf("End = %+v, want %+v", *r.End, wantEnd)
			}

			got := readAll(t, r)
			if !equalRecords(got.idle, tt.idle) || !equalRecords(got.blockIO, tt.io) ||
				!equalRecords(got.haltPoll, tt.hp) || !equalRecords(got.loss, tt.loss) {
				for i := range min(len(got.idle), len(tt.idle)) {
					if got.idle[i] != tt.idle[i] {
						t.Errorf("idle[%d] = %+v, want %+v", i, got.idle[i], tt.idle[i])
						break
					}
				}
				t.Fatalf("records differ: got %d/%d/%d/%d, want %d/%d/%d/%d", len(got.idle), len(got.blockIO), len(got.haltPoll), len(got.loss),
					len(tt.idle), len(tt.io), len(tt.hp), len(tt.loss))
			}

			// Chunks() agrees with what was written.
			var idleRecords uint64
			var firstNs, lastNs uint64 = math.MaxUint64, 0
			for _, p := range tt.idle {
				firstNs, lastNs = min(firstNs, p.EntryNs, p.ExitNs), max(lastNs, p.EntryNs, p.ExitNs)
			}
			for _, s := range r.Chunks() {
				if s.Type == ChunkIdle {
					idleRecords = s.Records
					if s.FirstNs != firstNs || s.LastNs != lastNs {
						t.Errorf("idle time range %d..%d, want %d..%d", s.FirstNs, s.LastNs, firstNs, lastNs)
					}
				}
			}
			if idleRecords != uint64(len(tt.idle)) {
				t.Errorf("Chunks() idle records = %d, want %d", idleRecords, len(tt.idle))
			}
		})
	}
}

func equalRecords[T comparable](a, b []T) bool { return slices.Equal(a, b) }

// Tristates outside Unknown/No/Yes are stored as Unknown.
func TestInvalidTristateReadsUnknown(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil)
	must(t, err)
	must(t, w.AddIdle(&IdlePeriod{TickStopped: 7, PollTimedOut: 3, WakeIRQ: -1}))
	must(t, w.Close(nil))
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	must(t, err)
	got := readAll(t, r)
	if len(got.idle) != 1 || got.idle[0].TickStopped != Unknown || got.idle[0].PollTimedOut != Unknown {
		t.Fatalf("got %+v", got.idle)
	}
}

// Cutting a file at any byte yields a prefix of each record stream, never a
// panic, and an error only when the metadata chunk is incomplete.
func TestTruncateEverywhere(t *testing.T) {
	data, want := smallTrace(t)
	metaEnd := metadataEnd(t, data)
	prev := [5]int{}
	for cut := 0; cut <= len(data); cut++ {
		r, err := NewNamedReader(bytes.NewReader(data[:cut]), int64(cut), "t.trace")
		if cut < metaEnd {
			if err == nil {
				t.Fatalf("cut at %d (metadata ends at %d): no error", cut, metaEnd)
			}
			if cut == 0 && !errors.Is(err, ErrNotTrace) {
				t.Fatalf("cut at %d: %v, want an empty file", cut, err)
			}
			// A cut header is a truncated trace, not some other file.
			if cut > 0 && cut < fileHeaderSize && (errors.Is(err, ErrNotTrace) || !strings.Contains(err.Error(), "truncated inside the file header")) {
				t.Fatalf("cut at %d: %v, want truncated", cut, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		got := readAll(t, r)
		counts := got.counts()
		if !isPrefix(got.idle, want.idle) || !isPrefix(got.blockIO, want.blockIO) ||
			!isPrefix(got.haltPoll, want.haltPoll) || !isPrefix(got.loss, want.loss) || !isPrefix(got.pmQoS, want.pmQoS) {
			t.Fatalf("cut at %d: records are not a prefix", cut)
		}
		for i := range counts {
			if counts[i] < prev[i] {
				t.Fatalf("cut at %d: fewer records (%v) than a shorter cut (%v)", cut, counts, prev)
			}
		}
		prev = counts
		ws := r.Warnings()
		if cut == len(data) {
			if len(ws) != 0 || r.End == nil {
				t.Fatalf("whole file: warnings %q, End %v", ws, r.End)
			}
			continue
		}
		if len(ws) == 0 {
			t.Fatalf("cut at %d: no warning", cut)
		}
		if r.End == nil && !strings.Contains(strings.Join(ws, "\n"), "recording did not finish (no end chunk); data up to the last complete chunk is shown") {
			t.Fatalf("cut at %d: no end chunk but warnings %q", cut, ws)
		}
		if strings.Contains(strings.Join(ws, "\n"), "truncated") && len(ws) != 1 {
			t.Fatalf("cut at %d: a truncated file warns once, not %q", cut, ws)
		}
	}
	if prev != want.counts() {
		t.Fatalf("whole file gave %v records", prev)
	}
}

func isPrefix[T comparable](got, all []T) bool {
	return len(got) <= len(all) && slices.Equal(got, all[:len(got)])
}

// metadataEnd is the offset just past the metadata chunk.
func metadataEnd(t testing.TB, data []byte) int {
	h, err := parseChunkHeader(data[fileHeaderSize:])
	must(t, err)
	return fileHeaderSize + chunkHeaderSize + int(h.payloadLen)
}

// chunkOffsets walks a well-formed file's chunk headers.
func chunkOffsets(t testing.TB, data []byte) []indexEntry {
	var out []indexEntry
	off := int64(fileHeaderSize)
	for off+chunkHeaderSize <= int64(len(data)) {
		h, err := parseChunkHeader(data[off:])
		if err != nil {
			break
		}
		out = append(out, indexEntry{off: off, typ: h.typ, payloadLen: h.payloadLen, records: h.records})
		off += chunkHeaderSize + int64(h.payloadLen)
	}
	return out
}

// A flipped byte in one record chunk loses that chunk only, with a warning
// naming its offset, whether the file is read through the index or walked.
func TestDamagedChunk(t *testing.T) {
	data, want := smallTrace(t)
	chunks := chunkOffsets(t, data)
	total := want.total()
	for _, withIndex := range []bool{true, false} {
		for _, c := range chunks {
			if c.typ == ChunkMetadata || c.typ == ChunkIndex {
				continue
			}
			for _, where := range []struct {
				name string
				at   int64
			}{
				{"header", c.off + 9},
				{"payload", c.off + chunkHeaderSize + int64(c.payloadLen)/2},
			} {
				name := fmt.Sprintf("index=%v/%s@%d/%s", withIndex, c.typ, c.off, where.name)
				t.Run(name, func(t *testing.T) {
					bad := bytes.Clone(data)
					bad[where.at] ^= 0x5a
					if !withIndex {
						bad = bad[:len(bad)-footerSize]
					}
					r, err := NewNamedReader(bytes.NewReader(bad), int64(len(bad)), "t.trace")
					must(t, err)
					got := readAll(t, r)
					n := got.total()
					lost := int(c.records)
					if c.typ == ChunkEnd {
						lost = 0
					}
					if n != total-lost {
						t.Errorf("got %d records, want %d (all but the damaged chunk's %d)", n, total-lost, lost)
					}
					if !isSubsequence(got.idle, want.idle) || !isSubsequence(got.blockIO, want.blockIO) {
						t.Error("surviving records are not those written")
					}
					wantMsg := fmt.Sprintf("chunk at offset %d is damaged", c.off)
					if !slices.ContainsFunc(r.Warnings(), func(s string) bool {
						return strings.HasPrefix(s, "trace t.trace: ") && strings.Contains(s, wantMsg)
					}) {
						t.Errorf("warnings %q do not name offset %d", r.Warnings(), c.off)
					}
					if c.typ == ChunkEnd && r.End != nil {
						t.Error("damaged end chunk still decoded")
					}
					// The damage account: the chunk's records by type, or,
					// where its header was unreadable while walking, the
					// bytes skipped.
					d := r.Damage()
					var want Damage
					switch {
					case !withIndex && where.name == "header":
						// Walked past: the region up to the next chunk,
						// which is this chunk whole.
						want = Damage{Regions: 1, UncountedBytes: uint64(chunkHeaderSize) + uint64(c.payloadLen)}
					case c.typ == ChunkEnd: // in no count: said as the missing end
					case c.typ == ChunkIdle:
						want = Damage{Chunks: 1, IdleRecords: uint64(c.records)}
					case c.typ == ChunkBlockIO:
						want = Damage{Chunks: 1, IORecords: uint64(c.records)}
					default:
						want = Damage{Chunks: 1, OtherRecords: uint64(c.records)}
					}
					if d != want {
						t.Errorf("damage %+v, want %+v", d, want)
					}
					// Verify, which decodes nothing, finds what reading did.
					v, err := NewNamedReader(bytes.NewReader(bad), int64(len(bad)), "t.trace")
					must(t, err)
					must(t, v.Verify())
					if !slices.Equal(v.Warnings(), r.Warnings()) {
						t.Errorf("Verify warned %q, reading every record %q", v.Warnings(), r.Warnings())
					}
					if v.Damage() != d {
						t.Errorf("Verify's damage %+v, reading every record's %+v", v.Damage(), d)
					}
				})
			}
		}
	}
}

// TestMalformedChunkDamage: a chunk whose header claims one record more
// than its columns hold decodes its records, then fails; only the missing
// one is lost to the damage, not the records the scan already counted (a
// review found them counted both in stats and as damage).
func TestMalformedChunkDamage(t *testing.T) {
	data, want := smallTrace(t)
	bad := bytes.Clone(data[:len(data)-footerSize]) // walked: the index would refuse the header
	var victim indexEntry
	for _, c := range chunkOffsets(t, bad) {
		if c.typ == ChunkIdle {
			victim = c
			break
		}
	}
	if victim.records < 2 {
		t.Fatal("no idle chunk of several records")
	}
	h := bad[victim.off : victim.off+chunkHeaderSize]
	binary.LittleEndian.PutUint32(h[16:], victim.records+1)
	binary.LittleEndian.PutUint32(h[44:], crc32.Checksum(h[:44], castagnoli))
	r, err := NewNamedReader(bytes.NewReader(bad), int64(len(bad)), "t.trace")
	must(t, err)
	got := readAll(t, r)
	if len(got.idle) != len(want.idle) {
		t.Errorf("%d idle periods read, want all %d the columns hold", len(got.idle), len(want.idle))
	}
	if d := r.Damage(); d != (Damage{Chunks: 1, IdleRecords: 1}) {
		t.Errorf("damage %+v, want the one record the header claimed beyond the columns", d)
	}
	wantMsg := fmt.Sprintf("skipped the rest of it (%d of its %d idle records came before the damage)", victim.records, victim.records+1)
	if !slices.ContainsFunc(r.Warnings(), func(w string) bool { return strings.Contains(w, wantMsg) }) {
		t.Errorf("warnings %q, want %q", r.Warnings(), wantMsg)
	}

	// A header that claims one record fewer: every record it names comes
	// out, the bytes after them are ignored, and nothing is damage.
	binary.LittleEndian.PutUint32(h[16:], victim.records-1)
	binary.LittleEndian.PutUint32(h[44:], crc32.Checksum(h[:44], castagnoli))
	r, err = NewNamedReader(bytes.NewReader(bad), int64(len(bad)), "t.trace")
	must(t, err)
	got = readAll(t, r)
	if len(got.idle) != len(want.idle)-1 {
		t.Errorf("%d idle periods read, want the %d the header names", len(got.idle), len(want.idle)-1)
	}
	if d := r.Damage(); d.Any() {
		t.Errorf("damage %+v, want none: nothing was skipped", d)
	}
	if !slices.ContainsFunc(r.Warnings(), func(w string) bool { return strings.Contains(w, "its remaining bytes were ignored") }) {
		t.Errorf("warnings %q do not say the bytes after the records were ignored", r.Warnings())
	}
}

func isSubsequence[T comparable](got, all []T) bool {
	i := 0
	for _, g := range got {
		for i < len(all) && all[i] != g {
			i++
		}
		if i == len(all) {
			return false
		}
		i++
	}
	return true
}

// Garbage between chunks (a torn write, a disk block of zeros) is skipped by
// resynchronising on the next valid chunk header.
func TestResyncAfterGarbage(t *testing.T) {
	data, want := smallTrace(t)
	chunks := chunkOffsets(t, data)
	victim := chunks[3] // some record chunk in the middle
	bad := bytes.Clone(data[:len(data)-footerSize])
	for i := victim.off; i < victim.off+chunkHeaderSize+4; i++ {
		bad[i] = 0
	}
	r, err := NewNamedReader(bytes.NewReader(bad), int64(len(bad)), "t.trace")
	must(t, err)
	got := readAll(t, r)
	n := got.total()
	total := want.total()
	if n != total-int(victim.records) {
		t.Errorf("got %d records, want %d", n, total-int(victim.records))
	}
	next := victim.off + chunkHeaderSize + int64(victim.payloadLen)
	found := false
	for _, w := range r.Warnings() {
		if strings.Contains(w, fmt.Sprintf("chunk at offset %d is damaged (bad header", victim.off)) &&
			strings.Contains(w, fmt.Sprintf("next valid chunk at offset %d", next)) {
			found = true
		}
	}
	if !found {
		t.Errorf("warnings %q", r.Warnings())
	}
	if d := r.Damage(); d != (Damage{Regions: 1, UncountedBytes: uint64(next - victim.off)}) {
		t.Errorf("damage %+v, want the %d bytes skipped", d, next-victim.off)
	}
	if r.End == nil {
		t.Error("end chunk after the damage was not found")
	}
}

// Two trace files joined (cat a.trace b.trace): the reader reads the first
// whole and says where the second begins; the second's records are not
// counted as the first's, and its header is no damage. The first may have
// been cut short before its footer (a recording killed) too.
func TestJoinedFiles(t *testing.T) {
	first, want := smallTrace(t)
	second, _ := smallTrace(t)
	for _, tc := range []struct {
		name          string
		first, second []byte
	}{
		{"closed", first, second},
		{"no footer", first[:len(first)-footerSize], second},
		// The second cut short: the joined file has no footer, which is
		// the second's to lack, not the first's.
		{"second cut short", first, second[:len(second)-footerSize]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := append(bytes.Clone(tc.first), tc.second...)
			r, err := NewNamedReader(bytes.NewReader(data), int64(len(data)), "joined.trace")
			must(t, err)
			got := readAll(t, r)
			if got.counts() != want.counts() {
				t.Errorf("records by kind %v, want the first file's %v", got.counts(), want.counts())
			}
			joinedAt := fmt.Sprintf("a second trace file begins at offset %d ", len(tc.first))
			if ws := r.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], joinedAt) {
				t.Errorf("warnings %q, want only one saying %q", ws, joinedAt)
			}
			if d := r.Damage(); d.Any() {
				t.Errorf("damage %+v, want none: the second file is not damage", d)
			}
			if r.End == nil || r.End.StopReason != "duration" {
				t.Errorf("end %+v, want the first file's", r.End)
			}
		})
	}
}

// A recording killed inside a chunk, then another file joined after it:
// the cut chunk's header claims bytes that are the second file's. The
// reader finds the second file's header inside that claim, drops the cut
// chunk as a cut-short file's last, and reads none of the second file.
func TestJoinedAfterCutChunk(t *testing.T) {
	first, _ := smallTrace(t)
	second, _ := smallTrace(t)
	victim := chunkOffsets(t, first)[3]
	cut := first[:victim.off+chunkHeaderSize+int64(victim.payloadLen)/2]
	r, err := NewNamedReader(bytes.NewReader(first[:victim.off]), victim.off, "before.trace")
	must(t, err)
	want := readAll(t, r)
	data := append(bytes.Clone(cut), second...)
	r, err = NewNamedReader(bytes.NewReader(data), int64(len(data)), "joined.trace")
	must(t, err)
	got := readAll(t, r)
	if got.counts() != want.counts() {
		t.Errorf("records by kind %v, want those before the cut chunk %v", got.counts(), want.counts())
	}
	ws := strings.Join(r.Warnings(), "\n")
	for _, w := range []string{fmt.Sprintf("a second trace file begins at offset %d ", len(cut)), fmt.Sprintf("chunk at offset %d needs", victim.off)} {
		if !strings.Contains(ws, w) {
			t.Errorf("warnings %q lack %q", r.Warnings(), w)
		}
	}
	if d := r.Damage(); d.Any() {
		t.Errorf("damage %+v, want none: the second file is not damage", d)
	}
}

// Every single-byte corruption anywhere: no panic, errors only for the file
// header and metadata chunk, and the other chunks' records still come out.
func TestFlipEveryByte(t *testing.T) {
	data, want := smallTrace(t)
	metaEnd := metadataEnd(t, data)
	total := want.total()
	for at := range data {
		bad := bytes.Clone(data)
		bad[at] ^= 0xff
		r, err := NewReader(bytes.NewReader(bad), int64(len(bad)))
		if err != nil {
			if at >= metaEnd {
				t.Fatalf("flip at %d: %v", at, err)
			}
			continue
		}
		got := readAll(t, r)
		n := got.total()
		if at >= metaEnd && n < total-4 { // one chunk holds at most 4 records here
			t.Fatalf("flip at %d: only %d of %d records survive", at, n, total)
		}
		if n > total {
			t.Fatalf("flip at %d: %d records, more than written", at, n)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	good, _ := smallTrace(t)
	newer := bytes.Clone(good)
	binary.LittleEndian.PutUint16(newer[8:], 7)
	zeroVersion := bytes.Clone(good)
	binary.LittleEndian.PutUint16(zeroVersion[8:], 0)
	badMeta := bytes.Clone(good)
	badMeta[fileHeaderSize+chunkHeaderSize+2] ^= 1
	badMetaHeader := bytes.Clone(good)
	badMetaHeader[fileHeaderSize+1] ^= 1
	tests := []struct {
		name    string
		data    []byte
		wantErr string
		is      error
	}{
		{"empty", nil, "trace t.trace: the file is empty, not an idletrace trace", ErrNotTrace},
		{"garbage", []byte("hello, this is not a trace at all"), "trace t.trace: not an idletrace file (bad magic): a text capture (perf script, trace-cmd report, ftrace)? idletrace import converts one", ErrNotTrace},
		{"ftrace text", []byte("# tracer: nop\n#\n#           TASK-PID     CPU#  TIMESTAMP  FUNCTION\n"), "(bad magic): a text capture", ErrNotTrace},
		{"binary", []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02"), "trace t.trace: not an idletrace file (bad magic)", ErrNotTrace},
		{"perf data", append([]byte("PERFILE2"), make([]byte, 100)...), "trace t.trace: not an idletrace file (bad magic): a perf.data file? perf script's text of it is what idletrace import reads", ErrNotTrace},
		{"newer version", newer, "trace t.trace: format version 7 is newer than this idletrace supports (1); upgrade idletrace", nil},
		{"version 0", zeroVersion, "trace t.trace: invalid format version 0", nil},
		{"header only", good[:fileHeaderSize], "metadata chunk is damaged (truncated)", nil},
		{"short header", good[:12], "trace t.trace: file is truncated inside the file header: 12 bytes, the header needs 16", nil},
		// Bytes that begin the magic are a trace cut short; others are not a trace.
		{"cut in the magic", good[:4], "trace t.trace: file is truncated inside the file header: 4 bytes, the header needs 16", nil},
		{"one byte of magic", good[:1], "trace t.trace: file is truncated inside the file header: 1 byte, the header needs 16", nil},
		{"short, not magic", []byte("IDLX"), "trace t.trace: not an idletrace file (bad magic)", ErrNotTrace},
		{"short, magic then not", []byte("IDLETRC\x01\x01\x00"), "trace t.trace: not an idletrace file (bad magic)", ErrNotTrace},
		{"bad metadata payload", badMeta, "trace t.trace: metadata chunk is damaged (checksum mismatch)", nil},
		{"bad metadata header", badMetaHeader, "trace t.trace: metadata chunk is damaged (bad header", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewNamedReader(bytes.NewReader(tt.data), int64(len(tt.data)), "t.trace")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) is false", err, tt.is)
			}
		})
	}
	var ve *VersionError
	_, err := NewReader(bytes.NewReader(newer), int64(len(newer)))
	if !errors.As(err, &ve) || ve.Version != 7 {
		t.Errorf("newer version error %v is not a *VersionError", err)
	}
}

func TestOpenFile(t *testing.T) {
	data, want := smallTrace(t)
	path := filepath.Join(t.TempDir(), "t.trace")
	must(t, os.WriteFile(path, data, 0o644))
	r, err := Open(path)
	must(t, err)
	got := readAll(t, r)
	if !slices.Equal(got.idle, want.idle) {
		t.Error("idle records differ")
	}
	must(t, r.Close())

	_, err = Open(filepath.Join(t.TempDir(), "missing.trace"))
	if err == nil || !strings.HasPrefix(err.Error(), "trace ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// Loss counters: per-chunk lost deltas sum to the totals, Losses gives the
// final counters, unchanged reports write nothing.
func TestLossAccounting(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil)
	must(t, err)
	p := IdlePeriod{WakeIRQ: -1}
	reports := [][]Loss{
		{{CPU: 0, IdleLost: 2}, {CPU: 1, IOLost: 1}},
		{{CPU: 0, IdleLost: 2}, {CPU: 1, IOLost: 1}}, // unchanged
		{{CPU: 0, IdleLost: 10, OtherLost: 1}},
		{{CPU: 1, IOLost: 4, IOUnmatched: 9}},
	}
	for _, rep := range reports {
		must(t, w.AddIdle(&p))
		for _, l := range rep {
			must(t, w.AddLoss(l))
		}
		must(t, w.Flush())
	}
	must(t, w.Close(nil))
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	must(t, err)
	var lost, lossRecords uint64
	for _, s := range r.Chunks() {
		lost += s.LostRecords
		if s.Type == ChunkLoss {
			lossRecords = s.Records
		}
	}
	if lost != 11+4 {
		t.Errorf("lost deltas sum to %d, want 15", lost)
	}
	if lossRecords != 4 {
		t.Errorf("%d loss records written, want 4 (unchanged reports skipped)", lossRecords)
	}
	wantFinal := []Loss{{CPU: 0, IdleLost: 10, OtherLost: 1}, {CPU: 1, IOLost: 4, IOUnmatched: 9}}
	if got := r.Losses(); !slices.Equal(got, wantFinal) {
		t.Errorf("Losses() = %+v, want %+v", got, wantFinal)
	}
	if !slices.Equal(r.End.Loss, wantFinal) {
		t.Errorf("End.Loss = %+v, want %+v", r.End.Loss, wantFinal)
	}
}

// failWriter accepts limit bytes, then fails like a full disk.
type failWriter struct {
	buf   bytes.Buffer
	limit int
}

var errDiskFull = errors.New("no space left on device")

func (f *failWriter) Write(b []byte) (int, error) {
	room := f.limit - f.buf.Len()
	if len(b) > room {
		f.buf.Write(b[:max(room, 0)])
		return max(room, 0), errDiskFull
	}
	return f.buf.Write(b)
}

func TestStickyWriteError(t *testing.T) {
	fw := &failWriter{limit: 4000}
	w, err := NewWriter(fw, testMeta())
	must(t, err)
	w.chunkRecords = 50
	wl := newWorkload(3, 2)
	var firstErr error
	added := 0
	for range 10000 {
		p := wl.next()
		if err := w.AddIdle(&p); err != nil {
			firstErr = err
			break
		}
		added++
	}
	if !errors.Is(firstErr, errDiskFull) {
		t.Fatalf("AddIdle error %v, want disk full", firstErr)
	}
	for _, err := range []error{w.AddBlockIO(&BlockIO{}), w.AddLoss(Loss{}), w.Flush(), w.Close(nil)} {
		if !errors.Is(err, errDiskFull) {
			t.Errorf("later call returned %v, want the first error", err)
		}
	}
	data := fw.buf.Bytes()
	r, err := NewNamedReader(bytes.NewReader(data), int64(len(data)), "full.trace")
	must(t, err)
	got := readAll(t, r)
	if len(got.idle) == 0 || len(got.idle) > added || len(got.idle)%50 != 0 {
		t.Errorf("read %d idle periods back (added %d); want whole chunks written before the error", len(got.idle), added)
	}
	if r.End != nil {
		t.Error("End present in a file cut by a write error")
	}
}

func TestNewWriterError(t *testing.T) {
	if _, err := NewWriter(&failWriter{limit: 10}, nil); !errors.Is(err, errDiskFull) {
		t.Fatalf("NewWriter on a full disk: %v", err)
	}
}

// Scan stops at a Visitor error and returns it; nil funcs skip chunks.
func TestScanVisitor(t *testing.T) {
	data, want := smallTrace(t)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)))
	must(t, err)
	stop := errors.New("enough")
	n := 0
	err = r.Scan(Visitor{Idle: func(*IdlePeriod) error {
		n++
		if n == 5 {
			return stop
		}
		return nil
	}})
	if err != stop || n != 5 {
		t.Fatalf("Scan returned %v after %d records", err, n)
	}
	ios := 0
	must(t, r.Scan(Visitor{BlockIO: func(*BlockIO) error { ios++; return nil }}))
	if ios != len(want.blockIO) {
		t.Errorf("%d block IOs, want %d", ios, len(want.blockIO))
	}
	must(t, r.Scan(Visitor{})) // nothing wanted, nothing read
}

// Visitor.Chunk is called once before each delivered chunk's records,
// with its place in ChunkInfos, and every record lies within the times
// that chunk's header gives; its error stops Scan.
func TestScanChunkHook(t *testing.T) {
	data, want := smallTrace(t)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)))
	must(t, err)
	infos := r.ChunkInfos()
	cur, calls, records := -1, 0, 0
	inChunk := func(what string, ts ...uint64) {
		if cur < 0 {
			t.Fatalf("%s before any Chunk call", what)
		}
		for _, v := range ts {
			if v < infos[cur].FirstNs || v > infos[cur].LastNs {
				t.Fatalf("%s at %d outside chunk %d's [%d, %d]", what, v, cur, infos[cur].FirstNs, infos[cur].LastNs)
			}
		}
		records++
	}
	must(t, r.Scan(Visitor{
		Chunk: func(i int) error {
			if i <= cur || i >= len(infos) {
				t.Fatalf("Chunk(%d) after Chunk(%d), %d chunks", i, cur, len(infos))
			}
			if ty := infos[i].Type; ty != ChunkIdle && ty != ChunkBlockIO {
				t.Errorf("Chunk(%d) for a %v chunk, which the visitor does not read", i, ty)
			}
			cur = i
			calls++
			return nil
		},
		Idle:    func(p *IdlePeriod) error { inChunk("idle period", p.EntryNs, p.ExitNs); return nil },
		BlockIO: func(b *BlockIO) error { inChunk("IO request", b.IssueNs, b.CompleteNs); return nil },
	}))
	if records != len(want.idle)+len(want.blockIO) || calls == 0 {
		t.Errorf("%d records in %d chunks, want %d", records, calls, len(want.idle)+len(want.blockIO))
	}
	stop := errors.New("enough")
	if err := r.Scan(Visitor{Idle: func(*IdlePeriod) error { return nil }, Chunk: func(int) error { return stop }}); err != stop {
		t.Errorf("Scan returned %v, want the Chunk func's error", err)
	}
}

// Add* must not allocate per record once buffers have grown.
func TestAddDoesNotAllocate(t *testing.T) {
	w, err := NewWriter(io.Discard, nil)
	must(t, err)
	w.chunkRecords = 1000
	wl := newWorkload(5, 8)
	ps := make([]IdlePeriod, 4096)
	for i := range ps {
		ps[i] = wl.next()
	}
	b := wl.blockIO(1)
	h := HaltPollChange{TimeNs: 5, CPU: 1}
	for i := range ps { // warm up: grow column buffers, compress a few chunks
		must(t, w.AddIdle(&ps[i]))
		must(t, w.AddBlockIO(&b))
		must(t, w.AddHaltPoll(&h))
	}
	i := 0
	allocs := testing.AllocsPerRun(20000, func() {
		_ = w.AddIdle(&ps[i%len(ps)])
		_ = w.AddBlockIO(&b)
		_ = w.AddHaltPoll(&h)
		_ = w.AddLoss(Loss{CPU: uint32(i % 8), IdleLost: uint64(i)})
		i++
	})
	if allocs != 0 {
		t.Errorf("%.3f allocations per record", allocs)
	}
}

// Writing a million records keeps the heap small: memory is bounded by the
// chunk size, not the trace length.
func TestWriterBoundedMemory(t *testing.T) {
	w, err := NewWriter(io.Discard, nil)
	must(t, err)
	wl := newWorkload(9, 16)
	var maxHeap uint64
	var ms runtime.MemStats
	for i := range 1_000_000 {
		p := wl.next()
		must(t, w.AddIdle(&p))
		if i%200_000 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			maxHeap = max(maxHeap, ms.HeapAlloc)
		}
	}
	must(t, w.Close(nil))
	if maxHeap > 64<<20 {
		t.Errorf("heap reached %d MiB while writing", maxHeap>>20)
	}
}

func TestChunkTypeString(t *testing.T) {
	for typ, want := range map[ChunkType]string{ChunkIdle: "idle", ChunkIndex: "index", 99: "unknown(99)"} {
		if typ.String() != want {
			t.Errorf("%d.String() = %q", typ, typ.String())
		}
	}
}

// Real traces recorded on the project's machines (when present) open and
// scan without error.
func TestRealTraces(t *testing.T) {
	paths, _ := filepath.Glob("../../testdata/*.trace")
	if len(paths) == 0 {
		t.Fatal("no traces in testdata/: the bundled testdata/demo.trace is missing")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			r, err := Open(path)
			must(t, err)
			defer r.Close()
			n := 0
			must(t, r.Scan(Visitor{Idle: func(*IdlePeriod) error { n++; return nil }}))
			for _, w := range r.Warnings() {
				t.Log(w)
			}
			t.Logf("%d idle periods, %d bytes (%.1f bytes/period)", n, r.Size(), float64(r.Size())/float64(max(n, 1)))
		})
	}
}

// fillFields sets every field of the struct *p to a distinct non-zero value.
func fillFields(t *testing.T, p any) {
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8: // Tristate and WakeCause: 2 is valid for both
			f.SetUint(2)
		case reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(1000 + 7919*i))
		case reflect.Int8:
			f.SetInt(int64(3 + i))
		case reflect.Int32, reflect.Int64:
			f.SetInt(int64(-1000 - 7919*i))
		case reflect.String:
			f.SetString(fmt.Sprintf("name%d", i))
		default:
			t.Fatalf("%s.%s: kind %s has no test value", v.Type().Name(), v.Type().Field(i).Name, f.Kind())
		}
	}
}

// Guards against record fields added in types.go but not in codec.go: every
// field set must come back from the file.
func TestEveryFieldIsStored(t *testing.T) {
	var (
		p IdlePeriod
		b BlockIO
		h HaltPollChange
		l Loss
	)
	fillFields(t, &p)
	fillFields(t, &b)
	fillFields(t, &h)
	fillFields(t, &l)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil)
	must(t, err)
	must(t, w.AddIdle(&p))
	must(t, w.AddBlockIO(&b))
	must(t, w.AddHaltPoll(&h))
	must(t, w.AddLoss(l))
	must(t, w.Close(&End{Loss: []Loss{}}))
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	must(t, err)
	got := readAll(t, r)
	check := func(name string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s does not survive the trace file (a field missing from codec.go and format.go?):\n got %+v\nwant %+v", name, got, want)
		}
	}
	check("IdlePeriod", got.idle, []IdlePeriod{p})
	check("BlockIO", got.blockIO, []BlockIO{b})
	check("HaltPollChange", got.haltPoll, []HaltPollChange{h})
	check("Loss", got.loss, []Loss{l})
}

// Loss chunks with only the first five columns (early writers) still read.
func TestLossChunkWithFewerColumns(t *testing.T) {
	var e lossEncoder
	e.add(&Loss{CPU: 3, IdleLost: 1, IOLost: 2, OtherLost: 3, IOUnmatched: 4, IOOrphaned: 99})
	raw := appendColumns(nil, e.cols[:lossMinColumns])
	var d decoder
	var got []Loss
	must(t, d.decodeLoss(raw, 1, func(l *Loss) error { got = append(got, *l); return nil }))
	want := []Loss{{CPU: 3, IdleLost: 1, IOLost: 2, OtherLost: 3, IOUnmatched: 4}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if err := d.decodeLoss(appendColumns(nil, e.cols[:4]), 1, func(*Loss) error { return nil }); !errors.Is(err, errMalformed) {
		t.Fatalf("4 columns: %v, want malformed", err)
	}
}

// Block IO chunks from before the issuing task was recorded (10 columns)
// still read, with the task unknown.
func TestBlockIOChunkWithFewerColumns(t *testing.T) {
	var e blockIOEncoder
	in := BlockIO{Dev: 8 << 20, Sector: 2048, Bytes: 4096, Op: OpRead, IssueNs: 1000, CompleteNs: 1500, CompleteCPU: 1,
		Tid: 42, Tgid: 42, Comm: "fio", TaskWokenNs: 1510, TaskRunNs: 1600, TaskCPU: 0}
	e.add(&in)
	var d decoder
	var got []BlockIO
	must(t, d.decodeBlockIO(appendColumns(nil, e.cols[:blockIOMinColumns]), 1, 0, func(b *BlockIO) error { got = append(got, *b); return nil }))
	want := in
	want.Tid, want.Tgid, want.Comm, want.TaskWokenNs, want.TaskRunNs = 0, 0, "", 0, 0
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got = got[:0]
	must(t, d.decodeBlockIO(appendColumns(nil, e.cols[:]), 1, 0, func(b *BlockIO) error { got = append(got, *b); return nil }))
	if len(got) != 1 || got[0] != in {
		t.Fatalf("got %+v, want %+v", got, in)
	}
}

// PM QoS changes survive the file exactly, at the edges of their fields,
// and a chunk naming a CPU beyond the format's limit or an unknown action
// is refused as damaged.
func TestPMQoSRoundTrip(t *testing.T) {
	changes := []PMQoSChange{
		{TimeNs: 1_000, CPU: PMQoSGlobal, LimitUs: 20, PrevUs: PMQoSNoGlobalLimitUs, Action: PMQoSAdd, Tid: 7},
		{TimeNs: 900, CPU: 3, LimitUs: 0, PrevUs: -1, Action: PMQoSUpdate}, // out of time order: kept as written
		{TimeNs: math.MaxUint64, CPU: MaxCPUs - 1, LimitUs: -1, PrevUs: 0, Action: PMQoSRemove, Tid: math.MaxUint32},
		{TimeNs: 0, CPU: 0, LimitUs: math.MaxInt32, PrevUs: math.MinInt64, Action: PMQoSUpdate},
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta())
	must(t, err)
	for i := range changes {
		must(t, w.AddPMQoS(&changes[i]))
	}
	must(t, w.Close(&End{StopReason: "duration"}))
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	must(t, err)
	if got := readAll(t, r).pmQoS; !slices.Equal(got, changes) {
		t.Fatalf("read %+v, want %+v", got, changes)
	}

	bad := []struct {
		name string
		q    PMQoSChange
	}{
		{"CPU beyond the limit", PMQoSChange{CPU: MaxCPUs}},
		{"unknown action", PMQoSChange{CPU: 1, Action: 3}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var e pmQoSEncoder
			e.add(&tt.q)
			var d decoder
			err := d.decodePMQoS(appendColumns(nil, e.cols[:]), 1, func(*PMQoSChange) error { return nil })
			if !errors.Is(err, errMalformed) {
				t.Fatalf("decoded with %v, want malformed", err)
			}
		})
	}
}

// TestTableCPU: the table a report shows is a recorded CPU's.
func TestTableCPU(t *testing.T) {
	tables := []CPUStates{{CPU: 0, States: []StateInfo{{Name: "C1"}}}, {CPU: 1, States: []StateInfo{{Name: "C1"}, {Name: "C6"}}}}
	for _, tc := range []struct {
		name     string
		recorded []int
		states   []CPUStates
		want     int
	}{
		{"all CPUs", []int{0, 1}, tables, 0},
		{"--cpus 1", []int{1}, tables, 1},
		{"a recorded CPU without a table", []int{3}, tables, 0},
		{"no CPU 0 table", []int{3}, tables[1:], 1},
		{"none", []int{0}, nil, -1},
	} {
		m := &Metadata{RecordedCPUs: tc.recorded, States: tc.states}
		got := m.TableCPU()
		if (tc.want < 0 && len(got.States) != 0) || (tc.want >= 0 && got.CPU != tc.want) {
			t.Errorf("%s: CPU %d's table (%d states), want CPU %d's", tc.name, got.CPU, len(got.States), tc.want)
		}
	}
}

// TestExportRecording: the recording's fields read back, the CPUs of a
// big machine in fields short enough for the export to spread over lines
// idlestat can read, joined again from however many lines.
func TestExportRecording(t *testing.T) {
	m := &Metadata{KernelRelease: "6.18.44-fc-v1300", HZ: 250, Hostname: "db-17",
		BlockDevices: []BlockDevice{{Name: "vda", Major: 254}, {Name: "nvme0n1p2", Major: 259, Minor: 2}}}
	cpus := make([]int, 256)
	for i := range cpus {
		cpus[i] = i
	}
	items := ExportRecording(m, cpus)
	var r ExportedRecording
	for i, item := range items {
		if len(item) > 100 {
			t.Errorf("field %d is %d bytes: %q", i, len(item), item)
		}
		r.Add(item) // one field a line: the most the export splits them
	}
	if r.KernelRelease != m.KernelRelease || r.HZ != m.HZ || r.Hostname != m.Hostname || !slices.Equal(r.CPUs, cpus) || !slices.Equal(r.BlockDevices, m.BlockDevices) {
		t.Errorf("read back %+v", r)
	}
	// Not one word, or unknown: left out, not mangled.
	if got := ExportRecording(&Metadata{Hostname: "a b"}, nil); len(got) != 0 {
		t.Errorf("fields %q for a host with a blank and nothing else known", got)
	}
}
