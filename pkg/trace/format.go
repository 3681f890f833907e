package trace

// Trace file format, version 1.
//
// All fixed-size integers are little-endian. "uvarint" is encoding/binary's
// unsigned LEB128. "varint" is a zigzag-coded signed value stored as a
// uvarint: u = (v << 1) ^ (v >> 63). Differences of two u64 timestamps are
// computed modulo 2^64 and coded as varint of the int64 result, so every pair
// of values round-trips, however odd.
//
// File header, 16 bytes:
//
//	 0  [8]byte magic "IDLETRC\x00"
//	 8  u16     format version (1). A reader rejects versions newer than its own.
//	10  u16     flags (none defined; readers ignore them)
//	12  u32     reserved (0)
//
// Then chunks, back to back from offset 16. Chunk header, 48 bytes:
//
//	 0  [4]byte chunk magic "ICHK"
//	 4  u8      type: 1 metadata, 2 idle periods, 3 block IO, 4 haltpoll changes,
//	            5 loss counters, 6 end, 7 index, 8 PM QoS changes. Readers skip
//	            unknown types.
//	 5  u8      codec: 0 none (payload is the raw bytes), 1 zstd (one zstd frame
//	            per chunk, no dictionary, no state shared with other chunks)
//	 6  u16     reserved (0)
//	 8  u32     payload length on disk (follows the header)
//	12  u32     raw (decoded) length; at most 64 MiB
//	16  u32     record count; never more than the raw length
//	20  u32     CRC-32C (Castagnoli) of the payload bytes as stored
//	24  u64     first timestamp: smallest ns of any record in the chunk (0 if none)
//	32  u64     last timestamp: largest ns of any record in the chunk
//	40  u32     records the kernel side lost since the previous chunk (sum of the
//	            increases of the loss counters reported in between; saturating)
//	44  u32     CRC-32C of header bytes 0..43
//
// Chunk order: the metadata chunk comes first (offset 16); data chunks of the
// five record types follow in any interleaving (each type's records are in
// recording order across its chunks); then the end chunk, the index chunk and
// the footer. A file cut short simply stops after some chunk.
//
// Footer, the last 16 bytes of a complete file: u64 offset of the index chunk,
// then [8]byte "IDLEIDX\x00". The index is optional for readers; without it
// they walk the chunk headers from offset 16.
//
// Metadata (type 1) and end (type 6) payloads are the JSON of Metadata and End.
//
// Index (type 7) raw payload: uvarint entry count, then per chunk before the
// index, in file order: uvarint gap (chunk offset minus the end of the previous
// entry's chunk, or minus 16 for the first; 0 from this writer), u8 type,
// uvarint payload length, uvarint record count, uvarint first timestamp,
// uvarint (last - first) mod 2^64, uvarint lost-records delta.
//
// Record chunks (types 2-5 and 8) are columnar. Raw payload: uvarint column count C,
// C uvarints giving each column's byte length, then the C columns back to
// back (their lengths sum to the rest of the payload). Field i of every
// record goes to column i, in record order. A reader must consume each
// column it knows exactly and ignore extra columns (later versions may append
// columns). Every chunk restarts its delta state: all "previous" values start
// at 0 and no CPU has per-CPU state.
//
// Idle periods (type 2). Chunk state: prevExit (ExitNs of the previous record
// in the chunk), and for CPUs below 65536 only: lastExit[cpu], lastTimer[cpu]
// (unset at chunk start; CPUs from 65536 up never have per-CPU state).
//
//	0 cpu      uvarint
//	1 state    uvarint
//	2 entry    varint(EntryNs - base), base = lastExit[cpu] if set, else prevExit
//	3 length   varint(ExitNs - EntryNs)
//	4 cause    u8 WakeCause (numbering in types.go)
//	5 flags    u8: bits 0-1 TickStopped, bits 2-3 PollTimedOut (0 unknown,
//	           1 no, 2 yes; 3 reads as unknown), bit 4 NextTimerKnown, bit 5 next-timer
//	           value stored (NextTimerNs != 0), bit 6 wake request stored
//	           (WakeRequestNs != 0), bit 7 wake IRQ stored (WakeIRQ != -1)
//	6 irq      only if bit 7: varint(WakeIRQ); absent means -1
//	7 request  only if bit 6: varint(ExitNs - WakeRequestNs); absent means 0
//	8 timer    only if bit 5: the timer's absolute expiry t = EntryNs + NextTimerNs
//	           stored as varint(t - tbase), tbase = lastTimer[cpu] if set, else
//	           EntryNs; then lastTimer[cpu] = t. Absent means NextTimerNs = 0.
//	9 flags2   u8: bits 0-1 TickStoppedBefore (as TickStopped), bit 2
//	           NextEventKnown, bits 3-4 GotTick (as TickStopped), bit 5
//	           AbortedBefore. Chunks written before it existed have 9
//	           columns: it reads as unknown.
//	10 kernel  uvarint: 0 KernelKnown false; 1 known, not counted; else
//	           counted, KernelResidencyNs + 2. Absent in older chunks (0).
//	11 event   only if flags2 bit 2: varint(NextEventNs - NextTimerNs).
//	           Absent in older chunks (NextEventKnown false).
//	12 iowait  varint(NrIOWait), -1 unknown. Absent in older chunks
//	           (unknown).
//	13 aborts  varint(AbortsBefore), -1 unknown. Absent in older chunks
//	           (unknown).
//	14 loop    u8: bits 0-1 IdleLoopEntry, bits 2-3 TickStoppable (as
//	           TickStopped). Absent in older chunks (unknown).
//
// After each record: lastExit[cpu] = ExitNs, prevExit = ExitNs. (Per-CPU deltas
// turn timestamps into busy gaps, and timer expiries repeat or move by whole
// ticks, which zstd then squeezes.)
//
// Block IO (type 3). Chunk state: nextSector, prevIssue (both 0 at start).
//
//	0 dev       uvarint
//	1 sector    varint(Sector - nextSector); then nextSector = Sector + Bytes/512
//	2 bytes     uvarint
//	3 op        u8
//	4 cmdflags  uvarint
//	5 issue     varint(IssueNs - prevIssue); then prevIssue = IssueNs
//	6 complete  varint(CompleteNs - IssueNs)
//	7 issuecpu  uvarint
//	8 donecpu   uvarint (CompleteCPU)
//	9 error     varint
//	10 tid      uvarint (Tid of the task that issued it; 0 not recorded)
//	11 tgid     uvarint
//	12 comm     uvarint length, then that many bytes (Comm)
//	13 woken    uvarint: 0 if TaskWokenNs is 0, else
//	            zigzag(TaskWokenNs - CompleteNs) + 1
//	14 run      the same for TaskRunNs
//	15 taskcpu  uvarint (TaskCPU)
//
// Block chunks from before the issuing task was recorded have columns 0-9
// only; the task's fields read as 0.
//
// Haltpoll changes (type 4). Chunk state: prevTime (0 at start).
//
//	0 time  varint(TimeNs - prevTime); then prevTime = TimeNs
//	1 cpu   uvarint
//	2 grow  u8 (0 or 1)
//	3 new   uvarint (NewNs)
//	4 old   uvarint (OldNs)
//
// Loss counters (type 5), cumulative per CPU; the last value seen for a CPU
// in the file is its total. All uvarint:
//
//	0 cpu, 1 IdleLost, 2 IOLost, 3 OtherLost, 4 IOUnmatched, 5 IOTableFull,
//	6 IOCompletions, 7 IOOrphaned, 8 IdleUnpaired, 9 IOUnissued
//
// Loss chunks from early writers have only columns 0-4 (or 0-8); the others
// read as 0.
//
// PM QoS changes (type 8; files from before it have none, and readers that
// predate it skip it). Chunk state: prevTime (0 at start).
//
//	0 time    varint(TimeNs - prevTime); then prevTime = TimeNs
//	1 target  uvarint: 0 the global limit, else the CPU plus one
//	2 limit   varint(LimitUs)
//	3 prev    varint(PrevUs)
//	4 action  u8 (0 add, 1 update, 2 remove a request)
//	5 tid     uvarint
//
// Damage handling: a reader that finds a bad chunk header (wrong magic or
// header CRC) searches forward for the next "ICHK" whose header CRC checks out
// and resumes there; a chunk whose payload CRC fails is skipped on its own.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
)

// FormatVersion is the trace format this package writes and the newest it reads.
const FormatVersion = 1

// FileMagic opens every trace file (so that other tools can tell one).
const FileMagic = fileMagic

const (
	fileMagic       = "IDLETRC\x00"
	footerMagic     = "IDLEIDX\x00"
	chunkMagic      = "ICHK"
	fileHeaderSize  = 16
	chunkHeaderSize = 48
	footerSize      = 16

	// maxRawLen bounds a chunk's payload (raw or stored) so a corrupted length
	// cannot make a reader allocate gigabytes.
	maxRawLen = 64 << 20
	// defaultChunkRecords is where the writer cuts a record chunk. At the
	// largest possible encoding (about 61 bytes per record) that keeps a raw
	// chunk under 4 MiB, far below maxRawLen.
	defaultChunkRecords = 1 << 16
	// cpuStateLimit: only CPUs below this carry per-CPU delta state, which
	// bounds the state table a reader builds from hostile input.
	cpuStateLimit = MaxCPUs
)

// ChunkType is the kind of a chunk (header byte 4).
type ChunkType uint8

const (
	ChunkMetadata ChunkType = 1
	ChunkIdle     ChunkType = 2
	ChunkBlockIO  ChunkType = 3
	ChunkHaltPoll ChunkType = 4
	ChunkLoss     ChunkType = 5
	ChunkEnd      ChunkType = 6
	ChunkIndex    ChunkType = 7
	ChunkPMQoS    ChunkType = 8
)

// MarshalText names the type in JSON (info's chunk summaries).
func (t ChunkType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

func (t ChunkType) String() string {
	switch t {
	case ChunkMetadata:
		return "metadata"
	case ChunkIdle:
		return "idle"
	case ChunkBlockIO:
		return "blockio"
	case ChunkHaltPoll:
		return "haltpoll"
	case ChunkLoss:
		return "loss"
	case ChunkEnd:
		return "end"
	case ChunkIndex:
		return "index"
	case ChunkPMQoS:
		return "pmqos"
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

const (
	codecNone = 0
	codecZstd = 1
)

// Column counts per record chunk type (format v1).
const (
	idleColumns = 15
	// idleMinColumns: idle chunks from before TickStoppedBefore,
	// KernelResidencyNs, NextEventNs, NrIOWait, AbortsBefore and the loop
	// byte existed have 9 to 14 columns; what they lack reads as unknown.
	idleMinColumns = 9
	blockIOColumns = 16
	maxColumns     = max(idleColumns, blockIOColumns)
	// blockIOMinColumns: block chunks from before the issuing task and its
	// wake-up were recorded have 10 columns; the rest read as unknown.
	blockIOMinColumns = 10
	haltPollColumns   = 5
	pmQoSColumns      = 6
	lossColumns       = 10
	// lossMinColumns: loss chunks from before IOTableFull..IdleUnpaired
	// existed have 5 columns; the rest read as 0.
	lossMinColumns = 5
)

// Idle flags byte.
const (
	idleFlagTimerKnown = 1 << 4
	idleFlagTimerValue = 1 << 5
	idleFlagWakeReq    = 1 << 6
	idleFlagIRQ        = 1 << 7

	idleFlag2EventKnown    = 1 << 2 // in the flags2 column
	idleFlag2AbortedBefore = 1 << 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrNotTrace is returned (wrapped with the file name) for input that does not
// start with the trace magic, including empty files.
var ErrNotTrace = errors.New("not an idletrace file (bad magic)")

// errEmptyFile is ErrNotTrace for a file of no bytes, said plainly.
type errEmptyFile struct{}

func (errEmptyFile) Error() string        { return "the file is empty, not an idletrace trace" }
func (errEmptyFile) Is(target error) bool { return target == ErrNotTrace }

// VersionError reports a file written by a newer format version.
type VersionError struct{ Version int }

func (e *VersionError) Error() string {
	return fmt.Sprintf("format version %d is newer than this idletrace supports (%d); upgrade idletrace", e.Version, FormatVersion)
}

// errMalformed marks a chunk whose checksum is fine but whose contents do not
// decode: a writer bug or a crafted file. The reader warns and skips it.
var errMalformed = errors.New("malformed records")

// chunkHeader is the decoded 48-byte chunk header.
type chunkHeader struct {
	typ        ChunkType
	codec      uint8
	payloadLen uint32
	rawLen     uint32
	records    uint32
	payloadCRC uint32
	firstNs    uint64
	lastNs     uint64
	lostDelta  uint32
}

func (h *chunkHeader) put(b []byte) {
	_ = b[chunkHeaderSize-1]
	copy(b[0:4], chunkMagic)
	b[4] = byte(h.typ)
	b[5] = h.codec
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint32(b[8:], h.payloadLen)
	binary.LittleEndian.PutUint32(b[12:], h.rawLen)
	binary.LittleEndian.PutUint32(b[16:], h.records)
	binary.LittleEndian.PutUint32(b[20:], h.payloadCRC)
	binary.LittleEndian.PutUint64(b[24:], h.firstNs)
	binary.LittleEndian.PutUint64(b[32:], h.lastNs)
	binary.LittleEndian.PutUint32(b[40:], h.lostDelta)
	binary.LittleEndian.PutUint32(b[44:], crc32.Checksum(b[:44], castagnoli))
}

// parseChunkHeader validates and decodes a header. The error text is the
// reason shown to users ("bad header" family).
func parseChunkHeader(b []byte) (chunkHeader, error) {
	var h chunkHeader
	if len(b) < chunkHeaderSize {
		return h, errors.New("short header")
	}
	if string(b[0:4]) != chunkMagic {
		return h, errors.New("bad header magic")
	}
	if crc32.Checksum(b[:44], castagnoli) != binary.LittleEndian.Uint32(b[44:]) {
		return h, errors.New("bad header checksum")
	}
	h.typ = ChunkType(b[4])
	h.codec = b[5]
	h.payloadLen = binary.LittleEndian.Uint32(b[8:])
	h.rawLen = binary.LittleEndian.Uint32(b[12:])
	h.records = binary.LittleEndian.Uint32(b[16:])
	h.payloadCRC = binary.LittleEndian.Uint32(b[20:])
	h.firstNs = binary.LittleEndian.Uint64(b[24:])
	h.lastNs = binary.LittleEndian.Uint64(b[32:])
	h.lostDelta = binary.LittleEndian.Uint32(b[40:])
	switch {
	case h.payloadLen > maxRawLen || h.rawLen > maxRawLen:
		return h, fmt.Errorf("chunk length %d/%d exceeds the %d MiB limit", h.payloadLen, h.rawLen, maxRawLen>>20)
	case h.records > h.rawLen:
		return h, fmt.Errorf("record count %d exceeds raw length %d", h.records, h.rawLen)
	case h.codec == codecNone && h.payloadLen != h.rawLen:
		return h, errors.New("uncompressed chunk with differing lengths")
	}
	return h, nil
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// appendDelta appends varint(a - b) with the difference taken modulo 2^64.
func appendDelta(col []byte, a, b uint64) []byte {
	return binary.AppendUvarint(col, zigzag(int64(a-b)))
}

// appendOptionalDelta stores a time that may be absent (0) as 0, else as
// its zigzag delta from b plus one.
func appendOptionalDelta(col []byte, a, b uint64) []byte {
	if a == 0 {
		return append(col, 0)
	}
	return binary.AppendUvarint(col, zigzag(int64(a-b))+1)
}

// triBits maps a Tristate to its 2-bit code; out-of-range values are stored as Unknown.
func triBits(t Tristate) byte {
	if t > Yes {
		return byte(Unknown)
	}
	return byte(t)
}

func triFromBits(b byte) Tristate {
	if b > byte(Yes) {
		return Unknown
	}
	return Tristate(b)
}

// cpuTable holds per-CPU delta state for one chunk. A generation counter
// resets it between chunks without clearing memory.
type cpuTable struct {
	gen   uint32
	slots []cpuSlot
}

type cpuSlot struct {
	gen       uint32
	hasExit   bool
	hasTimer  bool
	lastExit  uint64
	lastTimer uint64
}

func (t *cpuTable) reset() {
	t.gen++
	if t.gen == 0 { // wrapped: stale slots could look current
		clear(t.slots)
		t.gen = 1
	}
}

// get returns the CPU's slot for this chunk, or nil for CPUs without per-CPU
// state (cpu >= cpuStateLimit).
func (t *cpuTable) get(cpu uint32) *cpuSlot {
	if cpu >= cpuStateLimit {
		return nil
	}
	if int(cpu) >= len(t.slots) {
		n := max(int(cpu)+1, 2*len(t.slots), 8)
		n = min(n, cpuStateLimit)
		t.slots = append(t.slots, make([]cpuSlot, n-len(t.slots))...)
	}
	s := &t.slots[cpu]
	if s.gen != t.gen {
		*s = cpuSlot{gen: t.gen}
	}
	return s
}

// colReader reads one column; any overrun sets the shared bad flag and
// yields zeros, so decoders check the flag once per record. It moves an
// offset along b rather than reslicing b: the decoder lives on the heap,
// and storing a slice there costs a GC write barrier per field while a
// collection runs (up to a seventh of `idletrace stats`' time).
type colReader struct {
	b   []byte
	off int // the next byte to read; at most len(b)
	bad *bool
}

// left is the number of bytes not read yet.
func (c *colReader) left() int { return len(c.b) - c.off }

func (c *colReader) uvarint() uint64 {
	b := c.b[c.off:]
	// Fast paths for the common 1-3 byte values; the general case below.
	// Measured against this (2026-12-06, `idletrace stats` of a 750,000
	// record trace, one CPU): decoding a column at a time, 256 records at
	// once, took as long (the decoders' reads of a record's columns are
	// independent, so they overlap as it is); a branch-free read of up to
	// 8 bytes with one load was 14 % slower here and 40 % slower column at
	// a time (each value's length then sits on the next one's critical
	// path, which predicted branches skip).
	if len(b) >= 3 {
		if b[0] < 0x80 {
			c.off++
			return uint64(b[0])
		}
		if b[1] < 0x80 {
			c.off += 2
			return uint64(b[0]&0x7f) | uint64(b[1])<<7
		}
		if b[2] < 0x80 {
			c.off += 3
			return uint64(b[0]&0x7f) | uint64(b[1]&0x7f)<<7 | uint64(b[2])<<14
		}
	}
	v, n := binary.Uvarint(b)
	if n <= 0 {
		*c.bad = true
		c.off = len(c.b)
		return 0
	}
	c.off += n
	return v
}

func (c *colReader) u32() uint32 {
	v := c.uvarint()
	if v > 1<<32-1 {
		*c.bad = true
		return 0
	}
	return uint32(v)
}

func (c *colReader) varint() int64 { return unzigzag(c.uvarint()) }

func (c *colReader) i32() int32 {
	v := c.varint()
	if v != int64(int32(v)) {
		*c.bad = true
		return 0
	}
	return int32(v)
}

// optionalDelta reads what appendOptionalDelta wrote.
func (c *colReader) optionalDelta(base uint64) uint64 {
	v := c.uvarint()
	if v == 0 {
		return 0
	}
	return base + uint64(unzigzag(v-1))
}

// bytes returns the next n bytes (valid until the chunk is released).
func (c *colReader) bytes(n int) []byte {
	if n > c.left() {
		*c.bad = true
		c.off = len(c.b)
		return nil
	}
	v := c.b[c.off : c.off+n]
	c.off += n
	return v
}

func (c *colReader) byte() byte {
	if c.off >= len(c.b) {
		*c.bad = true
		return 0
	}
	v := c.b[c.off]
	c.off++
	return v
}

// splitColumns parses a record chunk's column table into cols (len(cols) is
// the number of columns this reader knows) and returns how many of them the
// chunk has: at least minCols, and columns it lacks are left empty. Extra
// columns are ignored.
func splitColumns(raw []byte, cols []colReader, minCols int, bad *bool) (int, error) {
	ncol, n := binary.Uvarint(raw)
	if n <= 0 || ncol < uint64(minCols) || ncol > 255 {
		return 0, fmt.Errorf("%w: bad column table", errMalformed)
	}
	raw = raw[n:]
	var lens [256]uint64
	var total uint64
	for i := range ncol {
		l, n := binary.Uvarint(raw)
		if n <= 0 || l > maxRawLen {
			return 0, fmt.Errorf("%w: bad column table", errMalformed)
		}
		lens[i] = l
		total += l
		raw = raw[n:]
	}
	if total != uint64(len(raw)) {
		return 0, fmt.Errorf("%w: column lengths do not add up", errMalformed)
	}
	present := min(len(cols), int(ncol))
	for i := range cols {
		cols[i] = colReader{bad: bad}
		if i < present {
			cols[i].b = raw[:lens[i]:lens[i]]
			raw = raw[lens[i]:]
		}
	}
	return present, nil
}

// columnsDone checks that every known column was consumed exactly.
func columnsDone(cols []colReader, bad bool) error {
	if bad {
		return fmt.Errorf("%w: column overrun", errMalformed)
	}
	for i := range cols {
		if n := cols[i].left(); n != 0 {
			return fmt.Errorf("%w: %d bytes left in column %d", errMalformed, n, i)
		}
	}
	return nil
}

// Skipped columns (a Visitor's Skip) are not decoded, but checked as a
// decode would check them: each is walked past the values its records
// consume (varints counted by their last bytes, eight at a time), so that
// bytes left over reach columnsDone, and a column that runs out stops the
// records where the decode would stop them. Only a value out of its
// field's range (wider than 32 bits, or a varint over 10 bytes) goes
// unseen.

// skipVarints moves past the column's next need varints without decoding
// them and returns how many it held, up to need (fewer: it ran out).
func (c *colReader) skipVarints(need int) int {
	b := c.b[c.off:]
	got, i := 0, 0
	for ; i+8 <= len(b); i += 8 {
		ends := bits.OnesCount64(^binary.LittleEndian.Uint64(b[i:]) & 0x8080808080808080)
		if got+ends >= need {
			break
		}
		got += ends
	}
	for ; i < len(b) && got < need; i++ {
		if b[i] < 0x80 {
			got++
		}
	}
	if got < need {
		i = len(b) // a trailing partial varint is an overrun, not left over
	}
	c.off += i
	return got
}

// skipBytes is skipVarints for a column of one byte per value.
func (c *colReader) skipBytes(need int) int {
	got := min(need, c.left())
	c.off += got
	return got
}

// skipStrings is skipVarints for a column of length-prefixed strings.
func (c *colReader) skipStrings(need int) int {
	got := 0
	for got < need {
		l, k := binary.Uvarint(c.b[c.off:])
		if k <= 0 || l > uint64(c.left()-k) {
			c.off = len(c.b)
			break
		}
		c.off += k + int(l)
		got++
	}
	return got
}

// flaggedRecords is how many of the first n records have bit set in a
// column of one flag byte per record, and the index of the record that
// holds the (k+1)-th (n if none does): the values of a column that only
// flagged records have, and where it would run out holding k.
func flaggedRecords(flags []byte, n int, bit byte, k int) (count, kth int) {
	kth = n
	for i, f := range flags[:min(n, len(flags))] {
		if f&bit != 0 {
			if count == k {
				kth = i
			}
			count++
		}
	}
	return count, kth
}

// appendColumns builds a record chunk's raw payload from its columns.
func appendColumns(dst []byte, cols [][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(cols)))
	for _, c := range cols {
		dst = binary.AppendUvarint(dst, uint64(len(c)))
	}
	for _, c := range cols {
		dst = append(dst, c...)
	}
	return dst
}
