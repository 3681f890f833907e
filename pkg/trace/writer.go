package trace

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// ErrClosed is returned by every Writer call after Close.
var ErrClosed = errors.New("trace: writer is closed")

// Writer streams a trace file. Records are buffered per type in columnar
// form and written as one compressed chunk when a chunk fills up or on Flush,
// so memory stays bounded however long the recording runs (the index, about
// 15 bytes per chunk written, is the only part that grows).
//
// Each chunk reaches the underlying writer in one Write call when it is cut,
// so after Flush returns everything added so far is in the file (given an
// unbuffered writer such as *os.File; wrapping it in a bufio.Writer would
// defeat that).
//
// A Writer is not safe for concurrent use. The first write error is sticky:
// every later call returns it, and what was written before stays readable.
type Writer struct {
	w      io.Writer
	err    error
	closed bool
	enc    *zstd.Encoder

	chunkRecords uint32 // cut a record chunk at this many records

	idle idleEncoder
	bio  blockIOEncoder
	hp   haltPollEncoder
	qos  pmQoSEncoder
	loss lossEncoder

	// Loss counters: latest cumulative value per CPU, and the CPUs whose
	// value changed since the last loss chunk.
	lossByCPU   map[uint32]*lossSlot
	lossDirty   []uint32
	lostPending uint64 // records lost since the last chunk header, for its lost-delta field

	raw []byte // scratch: raw payload being written
	out []byte // scratch: chunk header + stored payload

	index        []byte // encoded index rows so far
	indexEntries uint64
	prevEnd      int64 // end offset of the last chunk written
	offset       int64 // bytes written to w

	stats WriterStats
	// shortestPollTimeoutNs: see End.ShortestPollTimeoutNs (0: none yet).
	shortestPollTimeoutNs uint64
}

type lossSlot struct {
	cur, written Loss
	dirty        bool
}

// WriterStats is what a Writer has taken in and written so far.
type WriterStats struct {
	// Records accepted by Add*, including those still buffered until the
	// next chunk is cut or Flush.
	IdlePeriods     uint64
	BlockIOs        uint64
	HaltPollChanges uint64
	PMQoSChanges    uint64
	LossReports     uint64
	// Chunks and Bytes written to the underlying writer.
	Chunks uint64
	Bytes  int64
}

// NewWriter writes the file header and the metadata chunk to w and returns a
// Writer for the records. meta may be nil (an empty Metadata is written);
// FormatVersion is filled in. The Writer never closes w.
func NewWriter(w io.Writer, meta *Metadata) (*Writer, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		// Entropy-coding all literals costs ~15 ns per idle period and
		// saves ~9% of the file: varint columns are mostly literals.
		zstd.WithAllLitEntropyCompression(true),
		// A chunk's raw payload is ~1 MiB at most in practice; a larger
		// window only costs the recorder memory.
		zstd.WithWindowSize(1<<20),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false)) // chunks carry their own CRC
	if err != nil {
		return nil, fmt.Errorf("trace: zstd: %w", err)
	}
	tw := &Writer{
		w:            w,
		enc:          enc,
		chunkRecords: defaultChunkRecords,
		lossByCPU:    make(map[uint32]*lossSlot),
		prevEnd:      fileHeaderSize,
	}
	var hdr [fileHeaderSize]byte
	copy(hdr[:], fileMagic)
	binary.LittleEndian.PutUint16(hdr[8:], FormatVersion)
	tw.write(hdr[:])

	m := Metadata{}
	if meta != nil {
		m = *meta
	}
	m.FormatVersion = FormatVersion
	js, err := json.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("trace: encoding metadata: %w", err)
	}
	tw.writeChunk(ChunkMetadata, js, 1, 0, 0)
	if tw.err != nil {
		return nil, tw.err
	}
	return tw, nil
}

// AddIdle buffers one idle period; it returns the sticky write error, if any.
func (w *Writer) AddIdle(p *IdlePeriod) error {
	if w.err != nil {
		return w.err
	}
	w.idle.add(p)
	w.stats.IdlePeriods++
	if d, ok := p.PollTimeoutNs(); ok && (w.shortestPollTimeoutNs == 0 || d < w.shortestPollTimeoutNs) {
		w.shortestPollTimeoutNs = d
	}
	if w.idle.n >= w.chunkRecords {
		w.flushIdle()
	}
	return w.err
}

// AddBlockIO buffers one block request.
func (w *Writer) AddBlockIO(b *BlockIO) error {
	if w.err != nil {
		return w.err
	}
	w.bio.add(b)
	w.stats.BlockIOs++
	if w.bio.n >= w.chunkRecords {
		w.flushBlockIO()
	}
	return w.err
}

// AddHaltPoll buffers one haltpoll window change.
func (w *Writer) AddHaltPoll(h *HaltPollChange) error {
	if w.err != nil {
		return w.err
	}
	w.hp.add(h)
	w.stats.HaltPollChanges++
	if w.hp.n >= w.chunkRecords {
		w.flushHaltPoll()
	}
	return w.err
}

// AddPMQoS buffers one PM QoS change.
func (w *Writer) AddPMQoS(q *PMQoSChange) error {
	if w.err != nil {
		return w.err
	}
	w.qos.add(q)
	w.stats.PMQoSChanges++
	if w.qos.n >= w.chunkRecords {
		w.flushPMQoS()
	}
	return w.err
}

// AddLoss records a CPU's cumulative loss counters. Only the latest value per
// CPU is kept; changed values go into a loss chunk at the next Flush, and the
// increase since the previous report is added to the next chunk header's
// lost-records field.
func (w *Writer) AddLoss(l Loss) error {
	if w.err != nil {
		return w.err
	}
	w.stats.LossReports++
	s := w.lossByCPU[l.CPU]
	if s == nil {
		s = &lossSlot{written: Loss{CPU: l.CPU}}
		s.cur.CPU = l.CPU
		w.lossByCPU[l.CPU] = s
	}
	if now, before := l.Total(), s.cur.Total(); now > before {
		w.lostPending += now - before
	}
	s.cur = l
	if !s.dirty && s.cur != s.written {
		s.dirty = true
		w.lossDirty = append(w.lossDirty, l.CPU)
	}
	return nil
}

// Flush writes every partly filled chunk (idle, block IO, haltpoll, changed
// loss counters). Call it periodically so a killed recorder loses little.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.flushIdle()
	w.flushBlockIO()
	w.flushHaltPoll()
	w.flushPMQoS()
	w.flushLoss()
	return w.err
}

func (w *Writer) flushIdle() {
	if w.idle.n > 0 {
		w.writeRecords(ChunkIdle, w.idle.cols[:], &w.idle.span)
		w.idle.reset()
	}
}

func (w *Writer) flushBlockIO() {
	if w.bio.n > 0 {
		w.writeRecords(ChunkBlockIO, w.bio.cols[:], &w.bio.span)
		w.bio.reset()
	}
}

func (w *Writer) flushHaltPoll() {
	if w.hp.n > 0 {
		w.writeRecords(ChunkHaltPoll, w.hp.cols[:], &w.hp.span)
		w.hp.reset()
	}
}

func (w *Writer) flushPMQoS() {
	if w.qos.n > 0 {
		w.writeRecords(ChunkPMQoS, w.qos.cols[:], &w.qos.span)
		w.qos.reset()
	}
}

func (w *Writer) flushLoss() {
	if len(w.lossDirty) == 0 {
		return
	}
	slices.Sort(w.lossDirty)
	w.loss.reset()
	for _, cpu := range w.lossDirty {
		s := w.lossByCPU[cpu]
		s.dirty = false
		if s.cur != s.written {
			w.loss.add(&s.cur)
			s.written = s.cur
		}
	}
	w.lossDirty = w.lossDirty[:0]
	if w.loss.n > 0 {
		w.raw = appendColumns(w.raw[:0], w.loss.cols[:])
		w.writeChunk(ChunkLoss, w.raw, w.loss.n, 0, 0)
	}
}

func (w *Writer) writeRecords(typ ChunkType, cols [][]byte, s *span) {
	w.raw = appendColumns(w.raw[:0], cols)
	w.writeChunk(typ, w.raw, s.n, s.firstNs, s.lastNs)
}

// writeChunk compresses raw and writes header and payload with one Write.
// Chunks whose zstd form is not smaller are stored raw.
func (w *Writer) writeChunk(typ ChunkType, raw []byte, records uint32, firstNs, lastNs uint64) {
	if w.err != nil {
		return
	}
	if len(raw) > maxRawLen {
		w.err = fmt.Errorf("trace: %s chunk of %d bytes exceeds the %d MiB limit", typ, len(raw), maxRawLen>>20)
		return
	}
	if cap(w.out) < chunkHeaderSize {
		w.out = make([]byte, 0, 64<<10)
	}
	codec := uint8(codecZstd)
	w.out = w.enc.EncodeAll(raw, w.out[:chunkHeaderSize])
	if len(w.out)-chunkHeaderSize >= len(raw) {
		codec = codecNone
		w.out = append(w.out[:chunkHeaderSize], raw...)
	}
	payload := w.out[chunkHeaderSize:]
	lost := min(w.lostPending, math.MaxUint32)
	h := chunkHeader{
		typ:        typ,
		codec:      codec,
		payloadLen: uint32(len(payload)),
		rawLen:     uint32(len(raw)),
		records:    records,
		payloadCRC: crc32.Checksum(payload, castagnoli),
		firstNs:    firstNs,
		lastNs:     lastNs,
		lostDelta:  uint32(lost),
	}
	h.put(w.out[:chunkHeaderSize])
	off := w.offset
	if !w.write(w.out) {
		return
	}
	w.lostPending -= lost
	w.stats.Chunks++
	if typ != ChunkIndex {
		e := indexEntry{off: off, typ: typ, payloadLen: h.payloadLen, records: records,
			firstNs: firstNs, lastNs: lastNs, lostDelta: h.lostDelta}
		w.index = appendIndexEntry(w.index, &e, w.prevEnd)
		w.indexEntries++
	}
	w.prevEnd = w.offset
}

// write sends b to the underlying writer, recording the first error.
func (w *Writer) write(b []byte) bool {
	if w.err != nil {
		return false
	}
	n, err := w.w.Write(b)
	w.offset += int64(n)
	w.stats.Bytes = w.offset
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("trace: write: %w", err)
		return false
	}
	return true
}

// Close flushes, writes the end chunk, the index and the footer. end may be
// nil. IdlePeriods and BlockIOs left zero in end are filled with the
// Writer's counts, and a nil Loss with the last counters given to AddLoss.
// Close does not close the underlying writer. It returns the first error the
// Writer met; later calls return ErrClosed.
func (w *Writer) Close(end *End) error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	defer func() {
		if w.err == nil {
			w.err = ErrClosed
		}
	}()
	w.Flush()

	e := End{}
	if end != nil {
		e = *end
	}
	if e.IdlePeriods == 0 {
		e.IdlePeriods = w.stats.IdlePeriods
	}
	if e.BlockIOs == 0 {
		e.BlockIOs = w.stats.BlockIOs
	}
	if e.Loss == nil && len(w.lossByCPU) > 0 {
		e.Loss = w.Losses()
	}
	if e.ShortestPollTimeoutNs == nil {
		d := w.shortestPollTimeoutNs
		e.ShortestPollTimeoutNs = &d
	}
	js, err := json.Marshal(&e)
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("trace: encoding end: %w", err)
	}
	w.writeChunk(ChunkEnd, js, 1, 0, 0)

	w.raw = binary.AppendUvarint(w.raw[:0], w.indexEntries)
	w.raw = append(w.raw, w.index...)
	if len(w.raw) <= maxRawLen { // else readers walk the chunk headers instead
		indexOff := w.offset
		w.writeChunk(ChunkIndex, w.raw, uint32(w.indexEntries), 0, 0)
		var foot [footerSize]byte
		binary.LittleEndian.PutUint64(foot[:], uint64(indexOff))
		copy(foot[8:], footerMagic)
		w.write(foot[:])
	}
	w.index = nil
	return w.err
}

// Losses returns the latest cumulative loss counters given to AddLoss, by CPU.
func (w *Writer) Losses() []Loss {
	out := make([]Loss, 0, len(w.lossByCPU))
	for _, s := range w.lossByCPU {
		out = append(out, s.cur)
	}
	slices.SortFunc(out, func(a, b Loss) int { return int(int64(a.CPU) - int64(b.CPU)) })
	return out
}

// Stats returns the records taken in and bytes written so far.
func (w *Writer) Stats() WriterStats { return w.stats }
