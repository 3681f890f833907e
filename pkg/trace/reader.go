package trace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Reader reads a trace file. Opening reads the metadata chunk and the end
// chunk (through the index when the file has one); Scan streams the records
// chunk by chunk with bounded memory.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	Meta *Metadata
	End  *End // nil when the recording did not finish or its end chunk is damaged

	name    string
	ra      io.ReaderAt
	size    int64
	file    *os.File // set by Open, closed by Close
	chunks  []indexEntry
	indexed bool

	warnings []string
	// damage counts what the damaged chunks held, each chunk once
	// (damagedAt: by offset), however often a scan meets it.
	damage    Damage
	damagedAt map[int64]bool
	// checked marks the chunks a Scan or Verify has read and checked
	// (indexed as chunks), which a later Verify need not read again.
	checked []bool
	// truncWarning is the index in warnings of the file's truncation, -1
	// if none: the recording's missing end is said there, not again.
	truncWarning int
	// joined: the walk met a second trace file after this one's end.
	joined bool
	warned map[string]bool

	zdec *zstd.Decoder
	// stored receives a compressed payload on its way to a raw buffer.
	// raws hold decoded payloads: Scan's prefetcher loads the next chunks
	// into two while the caller decodes the third (with two, the small
	// loss chunk written at each flush would hold up the next big one);
	// other reads use raws[0].
	stored []byte
	raws   [3][]byte
	dec    decoder

	losses     []Loss
	lossesRead bool
}

// Visitor receives records from Scan. A nil func skips that record type
// without reading its chunks. Pointers are valid only during the call; a
// non-nil error stops Scan, which returns it.
type Visitor struct {
	Idle     func(*IdlePeriod) error
	BlockIO  func(*BlockIO) error
	HaltPoll func(*HaltPollChange) error
	PMQoS    func(*PMQoSChange) error
	Loss     func(*Loss) error
	// Chunk, when set, is called before the records of each chunk Scan
	// delivers, with the chunk's position in ChunkInfos' list. A reader
	// that merges the record types by time learns from the chunks still
	// to come which timestamps can no longer appear.
	Chunk func(i int) error
	// Skip names fields the funcs do not read, which Scan then leaves
	// undecoded (a lean pass is faster). Zero decodes every field.
	Skip Fields
}

// Fields names groups of record fields a Visitor may leave undecoded. A
// skipped field reads as unknown where it has an unknown value (-1,
// Unknown, a false Known flag) and as zero elsewhere.
type Fields uint8

const (
	// IdleGovernorInputs is what an idle period tells a governor model
	// beyond its state, times and wake: NextTimerNs and NextTimerKnown,
	// NextEventNs and NextEventKnown, NrIOWait, AbortsBefore,
	// IdleLoopEntry, TickStoppable. (TickStoppedBefore, GotTick and
	// AbortedBefore share a byte with NextEventKnown and are always
	// decoded.)
	IdleGovernorInputs Fields = 1 << iota
	// BlockIOShape is a request's Sector, Bytes, Op, CmdFlags and IssueCPU.
	BlockIOShape
	// BlockIOTask is the issuing task's Tid, Tgid, Comm and TaskCPU
	// (TaskWokenNs and TaskRunNs stay).
	BlockIOTask
)

// ChunkInfo is what a chunk's header says of its records.
type ChunkInfo struct {
	Type    ChunkType
	Records uint32
	// FirstNs and LastNs bound every timestamp of every record in the
	// chunk (an idle period's entry and exit, an IO request's issue and
	// completion); 0 for chunk types without timestamps.
	FirstNs, LastNs uint64
}

// ChunkInfos lists the file's chunks in file order, the order Scan reads
// them in, from the index or the chunk headers (no payload is read).
func (r *Reader) ChunkInfos() []ChunkInfo {
	out := make([]ChunkInfo, len(r.chunks))
	for i, c := range r.chunks {
		out[i] = ChunkInfo{Type: c.typ, Records: c.records}
		if hasTimestamps(c.typ) {
			out[i].FirstNs, out[i].LastNs = c.firstNs, c.lastNs
		}
	}
	return out
}

// ChunkSummary describes all chunks of one type, for `idletrace info`.
type ChunkSummary struct {
	Type    ChunkType `json:"type"`
	Chunks  int       `json:"chunks"`
	Records uint64    `json:"records"`
	Bytes   int64     `json:"bytes"` // on disk, headers included
	// FirstNs and LastNs bound the records' timestamps (0 for chunk types
	// without timestamps).
	FirstNs uint64 `json:"first_ns"`
	LastNs  uint64 `json:"last_ns"`
	// LostRecords sums the chunk headers' lost-records deltas.
	LostRecords uint64 `json:"lost_records"`
}

// damageError is a chunk that cannot be used; Reason is shown to the user.
type damageError struct{ reason string }

func (e *damageError) Error() string { return e.reason }

func damaged(format string, args ...any) error {
	return &damageError{reason: fmt.Sprintf(format, args...)}
}

// Open opens a trace file. Problems that leave data readable (truncation,
// damaged chunks, no index, no end chunk) are reported by Warnings; Open
// fails only when the file is not a trace, is too new, or its metadata
// cannot be read.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in our prefix
		}
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	r, err := NewNamedReader(f, fi.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.file = f
	return r, nil
}

// NewReader reads a trace from r, which holds size bytes.
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	return NewNamedReader(r, size, "input")
}

// NewNamedReader is NewReader with the name used in errors and warnings.
func NewNamedReader(ra io.ReaderAt, size int64, name string) (*Reader, error) {
	zdec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(maxRawLen),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, fmt.Errorf("trace %s: zstd: %w", name, err)
	}
	r := &Reader{name: name, ra: ra, size: size, zdec: zdec, warned: map[string]bool{}, damagedAt: map[int64]bool{}}
	if err := r.open(); err != nil {
		zdec.Close()
		return nil, err
	}
	return r, nil
}

// Close releases the Reader and closes the file if Open opened it.
func (r *Reader) Close() error {
	if r.zdec != nil {
		r.zdec.Close()
		r.zdec = nil
	}
	if r.file != nil {
		f := r.file
		r.file = nil
		return f.Close()
	}
	return nil
}

// Warnings lists problems found so far (at open and during Scan), each a
// complete sentence naming the file.
func (r *Reader) Warnings() []string { return slices.Clone(r.warnings) }

// Damage is what the file's damaged chunks held, as far as the reader met
// them: at open, and in the chunks Scan or Verify read so far.
func (r *Reader) Damage() Damage { return r.damage }

// Damage is what a reader could not use of a file: the records lost in
// the damaged chunks it skipped, by type (a chunk found malformed part way
// loses only the records after the damage), and the regions it skipped
// where a chunk header was unreadable, whose records cannot be counted
// (one region may have held several chunks). A file cut short (a killed
// recording) is not damage, nor is a damaged end record (in no count; the
// missing end is said as such).
type Damage struct {
	Chunks         uint64 `json:"chunks"`
	IdleRecords    uint64 `json:"idle_records"`
	IORecords      uint64 `json:"io_records"`
	OtherRecords   uint64 `json:"other_records"`
	Regions        uint64 `json:"regions"`
	UncountedBytes uint64 `json:"uncounted_bytes"`
}

// Any says whether anything was damaged.
func (d Damage) Any() bool { return d.Chunks > 0 || d.Regions > 0 }

// String is the damage in one sentence, for reports: "" without any.
func (d Damage) String() string {
	var parts []string
	if d.Chunks > 0 {
		var lost []string
		for _, c := range []struct {
			n    uint64
			what string
		}{{d.IdleRecords, "idle period"}, {d.IORecords, "block IO request"}, {d.OtherRecords, "other record"}} {
			if c.n > 0 {
				lost = append(lost, countOf(c.n, c.what))
			}
		}
		part := countOf(d.Chunks, "damaged chunk") + " skipped"
		if len(lost) > 0 {
			part += ", losing " + strings.Join(lost, ", ")
		}
		parts = append(parts, part)
	}
	if d.Regions > 0 {
		parts = append(parts, fmt.Sprintf("%s of %d bytes skipped, whose records could not be counted", countOf(d.Regions, "unreadable region"), d.UncountedBytes))
	}
	return strings.Join(parts, "; ")
}

// addDamage counts a damaged chunk, once, and lost of its records.
func (r *Reader) addDamage(c *indexEntry, lost uint32) {
	if r.damagedAt[c.off] {
		return
	}
	r.damagedAt[c.off] = true
	r.damage.Chunks++
	switch c.typ {
	case ChunkIdle:
		r.damage.IdleRecords += uint64(lost)
	case ChunkBlockIO:
		r.damage.IORecords += uint64(lost)
	default:
		r.damage.OtherRecords += uint64(lost)
	}
}

// Indexed says whether the chunk list came from the file's index.
func (r *Reader) Indexed() bool { return r.indexed }

// Size is the file size in bytes.
func (r *Reader) Size() int64 { return r.size }

func (r *Reader) warn(format string, args ...any) {
	msg := fmt.Sprintf("trace %s: ", r.name) + fmt.Sprintf(format, args...)
	if !r.warned[msg] {
		r.warned[msg] = true
		r.warnings = append(r.warnings, msg)
	}
}

func (r *Reader) errorf(format string, args ...any) error {
	return fmt.Errorf("trace %s: "+format, append([]any{r.name}, args...)...)
}

// readAt reads exactly len(b) bytes at off; io.ErrUnexpectedEOF if the file is shorter.
func (r *Reader) readAt(b []byte, off int64) error {
	if off < 0 || off > r.size || int64(len(b)) > r.size-off {
		return io.ErrUnexpectedEOF
	}
	n, err := r.ra.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (r *Reader) open() error {
	var hdr [fileHeaderSize]byte
	n, err := r.ra.ReadAt(hdr[:min(int64(len(hdr)), max(r.size, 0))], 0)
	if n < fileHeaderSize && err != nil && err != io.EOF {
		return r.errorf("%w", err)
	}
	switch {
	case r.size == 0:
		return r.errorf("%w", errEmptyFile{})
	case n < fileHeaderSize && strings.HasPrefix(fileMagic, string(hdr[:min(n, len(fileMagic))])):
		// The start of a trace, cut short: not some other file.
		return r.errorf("file is truncated inside the file header: %s, the header needs %d", countOf(uint64(n), "byte"), fileHeaderSize)
	case n < len(fileMagic) || string(hdr[:len(fileMagic)]) != fileMagic:
		return r.errorf("%w%s", ErrNotTrace, notTraceHint(hdr[:n]))
	}
	version := int(binary.LittleEndian.Uint16(hdr[8:]))
	if version > FormatVersion {
		return r.errorf("%w", &VersionError{Version: version})
	}
	if version == 0 {
		return r.errorf("invalid format version 0")
	}

	meta := indexEntry{off: fileHeaderSize, typ: ChunkMetadata}
	h, raw, err := r.loadChunk(&meta, false)
	if err != nil {
		var de *damageError
		if errors.As(err, &de) {
			return r.errorf("metadata chunk is damaged (%s); the file cannot be read", de.reason)
		}
		return r.errorf("%w", err)
	}
	if h.typ != ChunkMetadata {
		return r.errorf("first chunk is %s, not metadata; the file cannot be read", h.typ)
	}
	var m Metadata
	if err := json.Unmarshal(raw, &m); err != nil {
		return r.errorf("metadata chunk is damaged (bad JSON: %v); the file cannot be read", err)
	}
	r.Meta = &m

	r.truncWarning = -1
	noFooter := false
	if err := r.readIndex(); err != nil {
		indexErr, at := err, len(r.warnings)
		noFooter = errors.Is(err, errNoFooter)
		if err := r.walkChunks(); err != nil {
			return r.errorf("%w", err)
		}
		// Ahead of what the walk found; not where a second file joined
		// this one, whose footer and index it is.
		if n := len(r.warnings); !noFooter && !r.joined {
			r.warn("index is unusable (%v); read the file chunk by chunk", indexErr)
			if len(r.warnings) > n {
				w := r.warnings[n]
				copy(r.warnings[at+1:], r.warnings[at:n])
				r.warnings[at] = w
				if r.truncWarning >= at {
					r.truncWarning++
				}
			}
		}
	}
	r.readEnd()
	// A recording cut short has no index either: one warning says so.
	if noFooter && r.End != nil && r.truncWarning < 0 && !r.joined {
		r.warn("no index at the end of the file (recording not closed cleanly); read it chunk by chunk")
	}
	return nil
}

var errNoFooter = errors.New("no footer")

// readIndex builds the chunk list from the footer and index chunk.
func (r *Reader) readIndex() error {
	if r.size < fileHeaderSize+chunkHeaderSize+footerSize {
		return errNoFooter
	}
	var foot [footerSize]byte
	if err := r.readAt(foot[:], r.size-footerSize); err != nil {
		return errNoFooter
	}
	if string(foot[8:]) != footerMagic {
		return errNoFooter
	}
	indexOff := int64(binary.LittleEndian.Uint64(foot[:]))
	if indexOff < fileHeaderSize || indexOff > r.size-footerSize-chunkHeaderSize {
		return fmt.Errorf("index offset %d is out of range", indexOff)
	}
	ref := indexEntry{off: indexOff, typ: ChunkIndex}
	h, raw, err := r.loadChunk(&ref, false)
	if err != nil {
		return fmt.Errorf("index chunk at offset %d: %v", indexOff, err)
	}
	ref.payloadLen, ref.records = h.payloadLen, h.records
	if h.typ != ChunkIndex || ref.end() != r.size-footerSize {
		return fmt.Errorf("footer does not point at an index chunk")
	}
	entries, err := decodeIndex(raw, indexOff)
	if err != nil {
		return err
	}
	r.chunks = append(entries, ref)
	r.indexed = true
	return nil
}

// damageEvent is a bad chunk header met while walking the file.
type damageEvent struct {
	off, resumeOff int64 // resumeOff < 0: nothing valid after it
	reason         string
	chunksBefore   int
}

// walkChunks builds the chunk list by following chunk headers from the file
// header, resynchronising after damage.
func (r *Reader) walkChunks() error {
	r.chunks = r.chunks[:0]
	var events []damageEvent
	var hb [chunkHeaderSize]byte
	// A damaged index chunk is already reported; do not report it twice.
	footerIndexOff := int64(-1)
	var foot [footerSize]byte
	if r.size >= footerSize && r.readAt(foot[:], r.size-footerSize) == nil && string(foot[8:]) == footerMagic {
		footerIndexOff = int64(binary.LittleEndian.Uint64(foot[:]))
	}
	off := int64(fileHeaderSize)
	for off < r.size {
		left := r.size - off
		if left < chunkHeaderSize {
			if left == footerSize && r.isFooter(off) {
				break
			}
			r.truncWarning = len(r.warnings)
			r.warn("file is truncated: the last %d bytes at offset %d are not a complete chunk", left, off)
			break
		}
		if err := r.readAt(hb[:], off); err != nil {
			return err
		}
		h, err := parseChunkHeader(hb[:])
		if err != nil && off == footerIndexOff {
			break
		}
		// A second file after this one (trace files joined, as cat does):
		// its header, after this one's footer or where a chunk should
		// begin, or its metadata chunk. Its records are another
		// recording's, not this one's to count, nor damage.
		second := int64(-1)
		switch {
		case err != nil && r.isFooter(off) && r.isFileHeader(off+footerSize):
			second = off + footerSize
		case err != nil && r.isFileHeader(off):
			second = off
		case err == nil && h.typ == ChunkMetadata && off != fileHeaderSize:
			second = off
		case err != nil:
			second = r.joinedInsideLast(off)
		}
		if second >= 0 {
			r.joined = true
			r.warn("a second trace file begins at offset %d (files joined, as cat would): only the first, up to there, is read; split the file there to read the other (tail -c +%d)", second, second+1)
			break
		}
		if err != nil {
			next, rerr := r.resync(off + 1)
			if rerr != nil {
				return rerr
			}
			events = append(events, damageEvent{off: off, resumeOff: next, reason: "bad header: " + err.Error(), chunksBefore: len(r.chunks)})
			if next < 0 {
				break
			}
			off = next
			continue
		}
		e := indexEntry{off: off, typ: h.typ, payloadLen: h.payloadLen, records: h.records,
			firstNs: h.firstNs, lastNs: h.lastNs, lostDelta: h.lostDelta}
		if e.end() > r.size {
			r.truncWarning = len(r.warnings)
			r.warn("file is truncated: chunk at offset %d needs %d bytes, %d are present; it and anything after it are lost",
				off, e.end()-off, r.size-off)
			break
		}
		r.chunks = append(r.chunks, e)
		off = e.end()
	}
	for _, ev := range events {
		end := ev.resumeOff
		if end < 0 {
			end = r.size
		}
		if !r.damagedAt[ev.off] {
			r.damagedAt[ev.off] = true
			r.damage.Regions++
			r.damage.UncountedBytes += uint64(end - ev.off)
		}
		if ev.resumeOff < 0 {
			r.warn("chunk at offset %d is damaged (%s); no valid chunk follows it, %d bytes skipped",
				ev.off, ev.reason, r.size-ev.off)
			continue
		}
		r.warn("chunk at offset %d is damaged (%s); skipped %d bytes to the next valid chunk at offset %d, %d chunks after it recovered",
			ev.off, ev.reason, ev.resumeOff-ev.off, ev.resumeOff, len(r.chunks)-ev.chunksBefore)
	}
	return nil
}

// joinedInsideLast looks for a second file's header inside the last chunk
// the walk took, where a bad header at off follows that chunk: the first
// file was cut short inside the chunk (its header claimed more than was
// written, a recording killed part way) and another file was joined after
// it, so the claimed length ran into that one. The chunk is partial: it is
// dropped, as a cut-short file's last chunk is, and said so.
func (r *Reader) joinedInsideLast(off int64) int64 {
	if len(r.chunks) == 0 {
		return -1
	}
	last := r.chunks[len(r.chunks)-1]
	from := last.off + chunkHeaderSize
	if off <= from || off-from > maxRawLen {
		return -1
	}
	buf := make([]byte, off-from)
	if r.readAt(buf, from) != nil {
		return -1
	}
	for i := 0; ; {
		j := bytes.Index(buf[i:], []byte(fileMagic))
		if j < 0 {
			return -1
		}
		at := from + int64(i+j)
		if r.isFileHeader(at) && r.isChunk(at+fileHeaderSize, ChunkMetadata) {
			r.chunks = r.chunks[:len(r.chunks)-1]
			r.truncWarning = len(r.warnings)
			r.warn("file is truncated: chunk at offset %d needs %d bytes, %d are present before the second file; it is lost",
				last.off, last.end()-last.off, at-last.off)
			return at
		}
		i += j + 1
	}
}

// isChunk says whether a chunk header of type typ begins at off.
func (r *Reader) isChunk(off int64, typ ChunkType) bool {
	var hb [chunkHeaderSize]byte
	if off < 0 || r.size-off < chunkHeaderSize || r.readAt(hb[:], off) != nil {
		return false
	}
	h, err := parseChunkHeader(hb[:])
	return err == nil && h.typ == typ
}

// isFileHeader says whether a trace file's header begins at off.
func (r *Reader) isFileHeader(off int64) bool {
	var magic [len(fileMagic)]byte
	return off >= 0 && r.size-off >= fileHeaderSize && r.readAt(magic[:], off) == nil && string(magic[:]) == fileMagic
}

func (r *Reader) isFooter(off int64) bool {
	var foot [footerSize]byte
	return r.readAt(foot[:], off) == nil && string(foot[8:]) == footerMagic
}

// resync finds the next offset at or after from holding a chunk header with
// a valid header CRC, or -1.
func (r *Reader) resync(from int64) (int64, error) {
	const step = 64 << 10
	buf := make([]byte, step+chunkHeaderSize-1)
	for pos := from; r.size-pos >= chunkHeaderSize; pos += step {
		n := min(int64(len(buf)), r.size-pos)
		if err := r.readAt(buf[:n], pos); err != nil {
			return -1, err
		}
		win := buf[:n]
		for i := 0; i < step; {
			j := bytes.Index(win[i:], []byte(chunkMagic))
			if j < 0 {
				break
			}
			cand := i + j
			if cand >= step || cand+chunkHeaderSize > len(win) {
				break // the next window covers it
			}
			if _, err := parseChunkHeader(win[cand : cand+chunkHeaderSize]); err == nil {
				return pos + int64(cand), nil
			}
			i = cand + 1
		}
	}
	return -1, nil
}

// loadChunk is loadChunkInto the reader's first raw buffer.
func (r *Reader) loadChunk(ref *indexEntry, checkRef bool) (chunkHeader, []byte, error) {
	return r.loadChunkInto(&r.raws[0], ref, checkRef)
}

// readPayload reads and checks the header and the stored payload of the
// chunk at ref.off into the buffer into(header) names (grown as needed):
// loadChunkInto's checks, without decompressing.
func (r *Reader) readPayload(into func(chunkHeader) *[]byte, ref *indexEntry, checkRef bool) (chunkHeader, []byte, error) {
	var hb [chunkHeaderSize]byte
	if err := r.readAt(hb[:], ref.off); err != nil {
		if err == io.ErrUnexpectedEOF {
			return chunkHeader{}, nil, damaged("truncated")
		}
		return chunkHeader{}, nil, err
	}
	h, err := parseChunkHeader(hb[:])
	if err != nil {
		return h, nil, damaged("bad header: %v", err)
	}
	if checkRef && (h.typ != ref.typ || h.payloadLen != ref.payloadLen || h.records != ref.records) {
		return h, nil, damaged("header does not match the index")
	}
	end := ref.off + chunkHeaderSize + int64(h.payloadLen)
	if end > r.size {
		return h, nil, damaged("truncated: needs %d bytes, %d present", end-ref.off, r.size-ref.off)
	}
	dst := into(h)
	if cap(*dst) < int(h.payloadLen) {
		*dst = make([]byte, 0, h.payloadLen)
	}
	payload := (*dst)[:h.payloadLen]
	if err := r.readAt(payload, ref.off+chunkHeaderSize); err != nil {
		if err == io.ErrUnexpectedEOF {
			return h, nil, damaged("truncated")
		}
		return h, nil, err
	}
	if crc32.Checksum(payload, castagnoli) != h.payloadCRC {
		return h, nil, damaged("checksum mismatch")
	}
	return h, payload, nil
}

// loadChunkInto reads and checks the chunk at ref.off and returns its
// header and decoded payload (in *raw, valid until its next load). If
// checkRef, the header must agree with ref (which came from the index or
// an earlier walk). Unusable chunks give a *damageError. It changes
// nothing in r but *raw and r.stored, so Scan's prefetcher may run it
// while the caller decodes another raw buffer.
func (r *Reader) loadChunkInto(raw *[]byte, ref *indexEntry, checkRef bool) (chunkHeader, []byte, error) {
	// An uncompressed payload is read straight into the raw buffer.
	h, payload, err := r.readPayload(func(h chunkHeader) *[]byte {
		if h.codec == codecNone {
			return raw
		}
		return &r.stored
	}, ref, checkRef)
	if err != nil {
		return h, nil, err
	}
	switch h.codec {
	case codecNone:
		return h, payload, nil
	case codecZstd:
		if cap(*raw) < int(h.rawLen) {
			*raw = make([]byte, 0, h.rawLen)
		}
		out, err := r.zdec.DecodeAll(payload, (*raw)[:0:h.rawLen])
		if err != nil {
			return h, nil, damaged("cannot decompress: %v", err)
		}
		if len(out) != int(h.rawLen) {
			return h, nil, damaged("decompressed to %d bytes, header says %d", len(out), h.rawLen)
		}
		return h, out, nil
	}
	return h, nil, damaged("unknown codec %d", h.codec)
}

// chunkWarning reports a damaged chunk met during Scan or at open.
func (r *Reader) chunkWarning(i int, reason string) {
	r.partialChunkWarning(i, reason, 0)
}

// partialChunkWarning reports a damaged chunk whose first delivered
// records were handed over before the damage showed (a malformed one).
func (r *Reader) partialChunkWarning(i int, reason string, delivered uint32) {
	after := 0
	for _, c := range r.chunks[i+1:] {
		if c.typ != ChunkIndex {
			after++
		}
	}
	c := &r.chunks[i]
	delivered = min(delivered, c.records)
	if delivered == c.records && c.records > 0 {
		// Every record the header names came out; the fault is in bytes
		// after them (a header that undercounts its columns): nothing
		// skipped, nothing counted as damage.
		r.warn("chunk at offset %d is malformed (%s) after its %s, which were read; its remaining bytes were ignored",
			c.off, reason, countOf(uint64(c.records), c.typ.String()+" record"))
		return
	}
	r.addDamage(c, c.records-delivered)
	what := "skipped it (" + countOf(uint64(c.records), c.typ.String()+" record") + ")"
	if delivered > 0 {
		what = fmt.Sprintf("skipped the rest of it (%d of its %s came before the damage)", delivered, countOf(uint64(c.records), c.typ.String()+" record"))
	}
	r.warn("chunk at offset %d is damaged (%s); %s and continued with the %d chunks after it",
		c.off, reason, what, after)
}

func countOf(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// notTraceHint says what a file that is not a trace may be, from its
// first bytes, where idletrace can read it another way.
func notTraceHint(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("PERFILE")):
		return ": a perf.data file? perf script's text of it is what idletrace import reads"
	case len(head) > 0 && !slices.ContainsFunc(head, func(c byte) bool { return (c < ' ' && c != '\n' && c != '\t' && c != '\r') || c > '~' }):
		return ": a text capture (perf script, trace-cmd report, ftrace)? idletrace import converts one"
	}
	return ""
}

// Verify reads every chunk no Scan has read and checks its header and
// checksum, without decoding it, so that a command which reads only some
// of them (info; stats, which skips the haltpoll and PM QoS chunks) finds
// the damage a full Scan would; damaged chunks become warnings.
func (r *Reader) Verify() error {
	if r.zdec == nil {
		return r.errorf("reader is closed")
	}
	for i := range r.chunks {
		switch r.chunks[i].typ {
		case ChunkMetadata, ChunkEnd, ChunkIndex:
			continue // read, and their damage said, at open
		}
		if r.isChecked(i) {
			continue
		}
		stored := func(chunkHeader) *[]byte { return &r.stored }
		if _, _, err := r.readPayload(stored, &r.chunks[i], true); err != nil {
			var de *damageError
			if !errors.As(err, &de) {
				return r.errorf("%w", err)
			}
			r.chunkWarning(i, de.reason)
		}
		r.markChecked(i) // read whole, or its damage said
	}
	return nil
}

func (r *Reader) readEnd() {
	last := -1
	for i, c := range r.chunks {
		if c.typ == ChunkEnd {
			last = i
		}
	}
	if last < 0 {
		const unfinished = "recording did not finish (no end chunk); data up to the last complete chunk is shown"
		if r.truncWarning >= 0 {
			r.warnings[r.truncWarning] += "; the " + unfinished
		} else {
			r.warn(unfinished)
		}
		return
	}
	_, raw, err := r.loadChunk(&r.chunks[last], true)
	var e End
	if err == nil {
		if jerr := json.Unmarshal(raw, &e); jerr != nil {
			err = damaged("bad JSON: %v", jerr)
		}
	}
	if err != nil {
		// Not damage: the end record is in no count (its loss is said
		// as the recording's missing end).
		r.warn("end chunk at offset %d is damaged (%v); the end-of-recording counters are unavailable", r.chunks[last].off, err)
		return
	}
	r.End = &e
	// The CPUs that came online during the recording are recorded ones
	// from then on: every reader of Meta sees them so (their tables too).
	r.Meta.AddCameOnline(e.CameOnline)
}

// Scan delivers the records of every intact chunk, in file order, to v.
// Damaged chunks are skipped with a warning. Scan returns the first error
// from a Visitor func or from reading the file. Visitor funcs must not call
// back into the Reader: records live in its reused buffers.
//
// Where there is a second CPU, another goroutine reads, checks and
// decompresses the next chunks, up to two ahead (about a fifth of the
// work), while the records of one are decoded and visited on the caller's;
// it has stopped by the time Scan returns.
func (r *Reader) Scan(v Visitor) error {
	if r.zdec == nil {
		return r.errorf("reader is closed")
	}
	var todo []int // the chunks v wants, in file order
	var maxStored uint32
	for i := range r.chunks {
		switch c := &r.chunks[i]; {
		case c.typ == ChunkIdle && v.Idle != nil:
		case c.typ == ChunkBlockIO && v.BlockIO != nil:
		case c.typ == ChunkHaltPoll && v.HaltPoll != nil:
		case c.typ == ChunkPMQoS && v.PMQoS != nil:
		case c.typ == ChunkLoss && v.Loss != nil:
		default:
			continue
		}
		todo = append(todo, i)
		maxStored = max(maxStored, r.chunks[i].payloadLen)
	}
	// One allocation for the largest payload to come (loadChunkInto checks
	// it against the header), not one more each time a chunk is larger:
	// fresh memory costs page faults (15 µs each on a loaded VM).
	if cap(r.stored) < int(maxStored) {
		r.stored = make([]byte, 0, maxStored)
	}
	if len(todo) < 2 || runtime.GOMAXPROCS(0) < 2 { // nothing to overlap
		for _, i := range todo {
			h, raw, err := r.loadChunk(&r.chunks[i], true)
			if err := r.deliver(i, h, raw, err, v); err != nil {
				return err
			}
		}
		return nil
	}

	// The prefetcher loads into a free raw buffer; the caller gives one
	// back once its records are visited.
	type loaded struct {
		i   int
		h   chunkHeader
		raw []byte
		err error
		buf *[]byte
	}
	free := make(chan *[]byte, len(r.raws))
	for i := range r.raws {
		free <- &r.raws[i]
	}
	ready := make(chan loaded, len(r.raws))
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for _, i := range todo {
			var buf *[]byte
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			h, raw, err := r.loadChunkInto(buf, &r.chunks[i], true)
			ready <- loaded{i, h, raw, err, buf} // never blocks: a slot per buffer
		}
	}()
	// However Scan ends (a Visitor error, a panic), the prefetcher is gone
	// before the buffers can be used again.
	defer func() {
		close(stop)
		<-stopped
	}()
	for range todo {
		l := <-ready
		if err := r.deliver(l.i, l.h, l.raw, l.err, v); err != nil {
			return err
		}
		free <- l.buf
	}
	return nil
}

// deliver hands the records of chunk i, loaded as h and raw with error
// loadErr, to v; a damaged or malformed chunk is warned about and skipped.
func (r *Reader) deliver(i int, h chunkHeader, raw []byte, loadErr error, v Visitor) error {
	if loadErr != nil {
		var de *damageError
		if errors.As(loadErr, &de) {
			r.chunkWarning(i, de.reason)
			r.markChecked(i)
			return nil
		}
		return r.errorf("%w", loadErr)
	}
	r.markChecked(i) // its checksum held
	if v.Chunk != nil {
		if err := v.Chunk(i); err != nil {
			return err
		}
	}
	var err error
	r.dec.delivered = 0
	switch r.chunks[i].typ {
	case ChunkIdle:
		err = r.dec.decodeIdle(raw, h.records, v.Skip, v.Idle)
	case ChunkBlockIO:
		err = r.dec.decodeBlockIO(raw, h.records, v.Skip, v.BlockIO)
	case ChunkHaltPoll:
		err = r.dec.decodeHaltPoll(raw, h.records, v.HaltPoll)
	case ChunkPMQoS:
		err = r.dec.decodePMQoS(raw, h.records, v.PMQoS)
	case ChunkLoss:
		err = r.dec.decodeLoss(raw, h.records, v.Loss)
	}
	if errors.Is(err, errMalformed) {
		r.partialChunkWarning(i, err.Error(), r.dec.delivered)
		return nil
	}
	return err
}

// Losses returns the final loss counters per CPU, sorted by CPU: the last
// value in the loss chunks, replaced by the end chunk's where it has one.
func (r *Reader) Losses() []Loss {
	if r.lossesRead {
		return slices.Clone(r.losses)
	}
	byCPU := map[uint32]Loss{}
	scanErr := r.Scan(Visitor{Loss: func(l *Loss) error { byCPU[l.CPU] = *l; return nil }})
	if r.End != nil {
		for _, l := range r.End.Loss {
			byCPU[l.CPU] = l
		}
	}
	r.losses = make([]Loss, 0, len(byCPU))
	for _, l := range byCPU {
		r.losses = append(r.losses, l)
	}
	slices.SortFunc(r.losses, func(a, b Loss) int { return int(int64(a.CPU) - int64(b.CPU)) })
	r.lossesRead = scanErr == nil
	return slices.Clone(r.losses)
}

// Chunks summarises the file's chunks per type, ordered by type. It reads
// only chunk headers (or the index), not payloads.
func (r *Reader) Chunks() []ChunkSummary {
	var byType [256]*ChunkSummary
	var timed [256]bool
	var out []ChunkSummary
	for _, c := range r.chunks {
		s := byType[c.typ]
		if s == nil {
			s = &ChunkSummary{Type: c.typ}
			byType[c.typ] = s
		}
		if c.records > 0 && hasTimestamps(c.typ) {
			if !timed[c.typ] {
				s.FirstNs, s.LastNs = c.firstNs, c.lastNs
				timed[c.typ] = true
			} else {
				s.FirstNs, s.LastNs = min(s.FirstNs, c.firstNs), max(s.LastNs, c.lastNs)
			}
		}
		s.Chunks++
		s.Records += uint64(c.records)
		s.Bytes += chunkHeaderSize + int64(c.payloadLen)
		s.LostRecords += uint64(c.lostDelta)
	}
	for _, s := range byType {
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

func hasTimestamps(t ChunkType) bool {
	return t == ChunkIdle || t == ChunkBlockIO || t == ChunkHaltPoll || t == ChunkPMQoS
}

// PMQoSChanges returns the trace's first limit PM QoS changes, in the
// order recorded, and how many it holds in all (their chunks only are
// read).
func (r *Reader) PMQoSChanges(limit int) ([]PMQoSChange, uint64, error) {
	var first []PMQoSChange
	var n uint64
	err := r.Scan(Visitor{PMQoS: func(q *PMQoSChange) error {
		if len(first) < limit {
			first = append(first, *q)
		}
		n++
		return nil
	}})
	return first, n, err
}

func (r *Reader) isChecked(i int) bool { return i < len(r.checked) && r.checked[i] }

// markChecked marks chunk i (an index into r.chunks, fixed once open).
func (r *Reader) markChecked(i int) {
	if r.checked == nil {
		r.checked = make([]bool, len(r.chunks))
	}
	r.checked[i] = true
}
