package trace

// Record chunk encoders and decoders, side by side so the two stay in step.
// The layout they implement is documented in format.go.

import (
	"encoding/binary"
	"fmt"
	"math"
)

// span tracks the time range and record count of the chunk being built.
type span struct {
	n       uint32
	firstNs uint64
	lastNs  uint64
}

func (s *span) add(a, b uint64) {
	lo, hi := min(a, b), max(a, b)
	if s.n == 0 {
		s.firstNs, s.lastNs = lo, hi
	} else {
		s.firstNs, s.lastNs = min(s.firstNs, lo), max(s.lastNs, hi)
	}
	s.n++
}

type idleEncoder struct {
	span
	cols     [idleColumns][]byte
	prevExit uint64
	cpus     cpuTable
}

func (e *idleEncoder) reset() {
	for i := range e.cols {
		e.cols[i] = e.cols[i][:0]
	}
	e.span = span{}
	e.prevExit = 0
	e.cpus.reset()
}

func (e *idleEncoder) add(p *IdlePeriod) {
	c := &e.cols
	c[0] = binary.AppendUvarint(c[0], uint64(p.CPU))
	c[1] = binary.AppendUvarint(c[1], uint64(p.State))
	slot := e.cpus.get(p.CPU)
	base := e.prevExit
	if slot != nil && slot.hasExit {
		base = slot.lastExit
	}
	c[2] = appendDelta(c[2], p.EntryNs, base)
	c[3] = appendDelta(c[3], p.ExitNs, p.EntryNs)
	c[4] = append(c[4], byte(p.WakeCause))
	flags := triBits(p.TickStopped) | triBits(p.PollTimedOut)<<2
	if p.NextTimerKnown {
		flags |= idleFlagTimerKnown
	}
	if p.NextTimerNs != 0 {
		flags |= idleFlagTimerValue
		expiry := p.EntryNs + uint64(p.NextTimerNs)
		tbase := p.EntryNs
		if slot != nil && slot.hasTimer {
			tbase = slot.lastTimer
		}
		c[8] = appendDelta(c[8], expiry, tbase)
		if slot != nil {
			slot.lastTimer, slot.hasTimer = expiry, true
		}
	}
	if p.WakeRequestNs != 0 {
		flags |= idleFlagWakeReq
		c[7] = appendDelta(c[7], p.ExitNs, p.WakeRequestNs)
	}
	if p.WakeIRQ != -1 {
		flags |= idleFlagIRQ
		c[6] = binary.AppendUvarint(c[6], zigzag(int64(p.WakeIRQ)))
	}
	c[5] = append(c[5], flags)
	flags2 := triBits(p.TickStoppedBefore) | triBits(p.GotTick)<<3
	if p.AbortedBefore {
		flags2 |= idleFlag2AbortedBefore
	}
	if p.NextEventKnown {
		flags2 |= idleFlag2EventKnown
		c[11] = appendDelta(c[11], uint64(p.NextEventNs), uint64(p.NextTimerNs))
	}
	c[9] = append(c[9], flags2)
	c[12] = binary.AppendUvarint(c[12], zigzag(int64(p.NrIOWait)))
	c[13] = binary.AppendUvarint(c[13], zigzag(int64(p.AbortsBefore)))
	c[14] = append(c[14], triBits(p.IdleLoopEntry)|triBits(p.TickStoppable)<<2)
	var kernel uint64
	switch {
	case p.KernelCounted:
		kernel = p.KernelResidencyNs + 2
	case p.KernelKnown:
		kernel = 1
	}
	c[10] = binary.AppendUvarint(c[10], kernel)
	if slot != nil {
		slot.lastExit, slot.hasExit = p.ExitNs, true
	}
	e.prevExit = p.ExitNs
	e.span.add(p.EntryNs, p.ExitNs)
}

type blockIOEncoder struct {
	span
	cols       [blockIOColumns][]byte
	nextSector uint64
	prevIssue  uint64
}

func (e *blockIOEncoder) reset() {
	for i := range e.cols {
		e.cols[i] = e.cols[i][:0]
	}
	e.span = span{}
	e.nextSector, e.prevIssue = 0, 0
}

func (e *blockIOEncoder) add(b *BlockIO) {
	c := &e.cols
	c[0] = binary.AppendUvarint(c[0], uint64(b.Dev))
	c[1] = appendDelta(c[1], b.Sector, e.nextSector)
	c[2] = binary.AppendUvarint(c[2], uint64(b.Bytes))
	c[3] = append(c[3], b.Op)
	c[4] = binary.AppendUvarint(c[4], uint64(b.CmdFlags))
	c[5] = appendDelta(c[5], b.IssueNs, e.prevIssue)
	c[6] = appendDelta(c[6], b.CompleteNs, b.IssueNs)
	c[7] = binary.AppendUvarint(c[7], uint64(b.IssueCPU))
	c[8] = binary.AppendUvarint(c[8], uint64(b.CompleteCPU))
	c[9] = binary.AppendUvarint(c[9], zigzag(int64(b.Error)))
	c[10] = binary.AppendUvarint(c[10], uint64(b.Tid))
	c[11] = binary.AppendUvarint(c[11], uint64(b.Tgid))
	c[12] = binary.AppendUvarint(c[12], uint64(len(b.Comm)))
	c[12] = append(c[12], b.Comm...)
	c[13] = appendOptionalDelta(c[13], b.TaskWokenNs, b.CompleteNs)
	c[14] = appendOptionalDelta(c[14], b.TaskRunNs, b.CompleteNs)
	c[15] = binary.AppendUvarint(c[15], uint64(b.TaskCPU))
	e.nextSector = b.Sector + uint64(b.Bytes>>9) // sequential IO codes as 0
	e.prevIssue = b.IssueNs
	e.span.add(b.IssueNs, b.CompleteNs)
}

type haltPollEncoder struct {
	span
	cols     [haltPollColumns][]byte
	prevTime uint64
}

func (e *haltPollEncoder) reset() {
	for i := range e.cols {
		e.cols[i] = e.cols[i][:0]
	}
	e.span = span{}
	e.prevTime = 0
}

func (e *haltPollEncoder) add(h *HaltPollChange) {
	c := &e.cols
	c[0] = appendDelta(c[0], h.TimeNs, e.prevTime)
	c[1] = binary.AppendUvarint(c[1], uint64(h.CPU))
	grow := byte(0)
	if h.Grow {
		grow = 1
	}
	c[2] = append(c[2], grow)
	c[3] = binary.AppendUvarint(c[3], uint64(h.NewNs))
	c[4] = binary.AppendUvarint(c[4], uint64(h.OldNs))
	e.prevTime = h.TimeNs
	e.span.add(h.TimeNs, h.TimeNs)
}

type pmQoSEncoder struct {
	span
	cols     [pmQoSColumns][]byte
	prevTime uint64
}

func (e *pmQoSEncoder) reset() {
	for i := range e.cols {
		e.cols[i] = e.cols[i][:0]
	}
	e.span = span{}
	e.prevTime = 0
}

func (e *pmQoSEncoder) add(q *PMQoSChange) {
	c := &e.cols
	c[0] = appendDelta(c[0], q.TimeNs, e.prevTime)
	c[1] = binary.AppendUvarint(c[1], uint64(int64(q.CPU)+1))
	c[2] = binary.AppendUvarint(c[2], zigzag(q.LimitUs))
	c[3] = binary.AppendUvarint(c[3], zigzag(q.PrevUs))
	c[4] = append(c[4], q.Action)
	c[5] = binary.AppendUvarint(c[5], uint64(q.Tid))
	e.prevTime = q.TimeNs
	e.span.add(q.TimeNs, q.TimeNs)
}

type lossEncoder struct {
	cols [lossColumns][]byte
	n    uint32
}

func (e *lossEncoder) reset() {
	for i := range e.cols {
		e.cols[i] = e.cols[i][:0]
	}
	e.n = 0
}

func (e *lossEncoder) add(l *Loss) {
	c := &e.cols
	c[0] = binary.AppendUvarint(c[0], uint64(l.CPU))
	c[1] = binary.AppendUvarint(c[1], l.IdleLost)
	c[2] = binary.AppendUvarint(c[2], l.IOLost)
	c[3] = binary.AppendUvarint(c[3], l.OtherLost)
	c[4] = binary.AppendUvarint(c[4], l.IOUnmatched)
	c[5] = binary.AppendUvarint(c[5], l.IOTableFull)
	c[6] = binary.AppendUvarint(c[6], l.IOCompletions)
	c[7] = binary.AppendUvarint(c[7], l.IOOrphaned)
	c[8] = binary.AppendUvarint(c[8], l.IdleUnpaired)
	c[9] = binary.AppendUvarint(c[9], l.IOUnissued)
	e.n++
}

// decoder holds the reader's per-chunk scratch state; records handed to
// callbacks live here and are overwritten by the next record.
type decoder struct {
	cols  [maxColumns]colReader
	comms TaskNames
	cpus  cpuTable
	idle  IdlePeriod
	bio   BlockIO
	hp    HaltPollChange
	qos   PMQoSChange
	loss  Loss
	// delivered counts the records of the chunk being decoded that were
	// handed to the visitor (Reader.deliver zeroes it per chunk): a chunk
	// found malformed part way has given that many, and only the rest are
	// lost to the damage.
	delivered uint32
}

func (d *decoder) decodeIdle(raw []byte, n uint32, skip Fields, fn func(*IdlePeriod) error) error {
	var bad bool
	cols := d.cols[:idleColumns]
	present, err := splitColumns(raw, cols, idleMinColumns, &bad)
	if err != nil {
		return err
	}
	// Skipped columns are walked, not decoded: a lean pass (stats) decodes
	// 10 of 15. limit is where one of them runs out.
	govInputs := skip&IdleGovernorInputs == 0
	limit := int(n)
	if !govInputs {
		limit = skipIdleGovernorInputs(cols, present, limit)
	}
	d.cpus.reset()
	var prevExit uint64
	p := &d.idle
	for range limit {
		cpu := cols[0].u32()
		state := cols[1].u32()
		slot := d.cpus.get(cpu)
		base := prevExit
		if slot != nil && slot.hasExit {
			base = slot.lastExit
		}
		entry := base + uint64(cols[2].varint())
		exit := entry + uint64(cols[3].varint())
		cause := cols[4].byte()
		flags := cols[5].byte()
		var flags2 byte
		if present > 9 {
			flags2 = cols[9].byte()
			if !govInputs { // its next event is in a skipped column
				flags2 &^= idleFlag2EventKnown
			}
		}
		var kernel uint64
		if present > 10 {
			kernel = cols[10].uvarint()
		}
		irq := int32(-1)
		if flags&idleFlagIRQ != 0 {
			irq = cols[6].i32()
		}
		var request uint64
		if flags&idleFlagWakeReq != 0 {
			request = exit - uint64(cols[7].varint())
		}
		var nextTimer int64
		if !govInputs {
			flags &^= idleFlagTimerKnown | idleFlagTimerValue
		}
		if flags&idleFlagTimerValue != 0 {
			tbase := entry
			if slot != nil && slot.hasTimer {
				tbase = slot.lastTimer
			}
			expiry := tbase + uint64(cols[8].varint())
			nextTimer = int64(expiry - entry)
			if slot != nil {
				slot.lastTimer, slot.hasTimer = expiry, true
			}
		}
		abortsBefore := int8(-1)
		if present > 13 && govInputs {
			abortsBefore = int8(max(min(cols[13].varint(), math.MaxInt8), math.MinInt8))
		}
		nrIOWait := int32(-1)
		if present > 12 && govInputs {
			nrIOWait = cols[12].i32()
		}
		var loop byte
		if present > 14 && govInputs {
			loop = cols[14].byte()
		}
		var nextEvent int64
		eventKnown := flags2&idleFlag2EventKnown != 0 && present > 11
		if eventKnown {
			nextEvent = nextTimer + cols[11].varint()
		}
		if bad {
			return fmt.Errorf("%w: column overrun", errMalformed)
		}
		if slot != nil {
			slot.lastExit, slot.hasExit = exit, true
		}
		prevExit = exit
		// Cleared, then filled field by field: a composite literal is
		// built in a temporary and copied, and the copy's wide loads of
		// bytes just stored stall (a tenth of the decoding).
		*p = IdlePeriod{}
		p.CPU = cpu
		p.State = state
		p.EntryNs = entry
		p.ExitNs = exit
		p.WakeCause = WakeCause(cause)
		p.WakeIRQ = irq
		p.WakeRequestNs = request
		p.NextTimerNs = nextTimer
		p.NextTimerKnown = flags&idleFlagTimerKnown != 0
		p.NextEventNs = nextEvent
		p.NextEventKnown = eventKnown
		p.TickStopped = triFromBits(flags & 3)
		p.TickStoppedBefore = triFromBits(flags2 & 3)
		p.GotTick = triFromBits(flags2 >> 3 & 3)
		p.AbortedBefore = flags2&idleFlag2AbortedBefore != 0
		p.NrIOWait = nrIOWait
		p.AbortsBefore = abortsBefore
		p.KernelKnown = kernel != 0
		p.KernelCounted = kernel >= 2
		p.KernelResidencyNs = kernel - min(kernel, 2)
		p.PollTimedOut = triFromBits(flags >> 2 & 3)
		p.IdleLoopEntry = triFromBits(loop & 3)
		p.TickStoppable = triFromBits(loop >> 2 & 3)
		d.delivered++
		if err := fn(p); err != nil {
			return err
		}
	}
	if limit < int(n) {
		return fmt.Errorf("%w: column overrun", errMalformed)
	}
	return columnsDone(cols, bad)
}

func (d *decoder) decodeBlockIO(raw []byte, n uint32, skip Fields, fn func(*BlockIO) error) error {
	var bad bool
	cols := d.cols[:blockIOColumns]
	present, err := splitColumns(raw, cols, blockIOMinColumns, &bad)
	if err != nil {
		return err
	}
	shape, task := skip&BlockIOShape == 0, skip&BlockIOTask == 0
	limit := skipBlockIOColumns(cols, present, int(n), skip)
	var nextSector, prevIssue uint64
	b := &d.bio
	for range limit {
		dev := cols[0].u32()
		var sector uint64
		var size, cmdFlags, issueCPU uint32
		var op byte
		if shape {
			sector = nextSector + uint64(cols[1].varint())
			size = cols[2].u32()
			op = cols[3].byte()
			cmdFlags = cols[4].u32()
			issueCPU = cols[7].u32()
		}
		issue := prevIssue + uint64(cols[5].varint())
		complete := issue + uint64(cols[6].varint())
		completeCPU := cols[8].u32()
		errno := cols[9].i32()
		var tid, tgid, taskCPU uint32
		var comm string
		var woken, run uint64
		if present > 10 {
			if task {
				tid, tgid = cols[10].u32(), cols[11].u32()
				comm = d.comms.Name(cols[12].bytes(int(cols[12].u32())))
				taskCPU = cols[15].u32()
			}
			woken = cols[13].optionalDelta(complete)
			run = cols[14].optionalDelta(complete)
		}
		if bad {
			return fmt.Errorf("%w: column overrun", errMalformed)
		}
		nextSector = sector + uint64(size>>9)
		prevIssue = issue
		*b = BlockIO{} // then field by field, as in decodeIdle
		b.Dev, b.Sector, b.Bytes, b.Op, b.CmdFlags = dev, sector, size, op, cmdFlags
		b.IssueNs, b.CompleteNs, b.IssueCPU, b.CompleteCPU = issue, complete, issueCPU, completeCPU
		b.Error, b.Tid, b.Tgid, b.Comm = errno, tid, tgid, comm
		b.TaskWokenNs, b.TaskRunNs, b.TaskCPU = woken, run, taskCPU
		d.delivered++
		if err := fn(b); err != nil {
			return err
		}
	}
	if limit < int(n) {
		return fmt.Errorf("%w: column overrun", errMalformed)
	}
	return columnsDone(cols, bad)
}

// skipIdleGovernorInputs skips an idle chunk's governor-input columns
// (8, 11-14; column 9, flags2, is decoded: stats reads its tick state) as
// decodeIdle would read them for n records, and returns how many records
// come before one of them runs out.
func skipIdleGovernorInputs(cols []colReader, present, n int) int {
	limit := n
	if present > 12 {
		limit = min(limit, cols[12].skipVarints(n))
	}
	if present > 13 {
		limit = min(limit, cols[13].skipVarints(n))
	}
	if present > 14 {
		limit = min(limit, cols[14].skipBytes(n))
	}
	// The timer and event columns hold a value only for records whose
	// flags (column 5) and flags2 (column 9) say so.
	limit = min(limit, skipFlagged(&cols[8], cols[5].b, n, idleFlagTimerValue))
	if present > 11 {
		limit = min(limit, skipFlagged(&cols[11], cols[9].b, n, idleFlag2EventKnown))
	}
	return limit
}

// skipBlockIOColumns skips the columns of a block IO chunk's skipped
// fields as decodeBlockIO would read them for n records, and returns how
// many records come before one of them runs out.
func skipBlockIOColumns(cols []colReader, present, n int, skip Fields) int {
	limit := n
	if skip&BlockIOShape != 0 {
		for _, i := range [...]int{1, 2, 4, 7} {
			limit = min(limit, cols[i].skipVarints(n))
		}
		limit = min(limit, cols[3].skipBytes(n))
	}
	if skip&BlockIOTask != 0 && present > 10 {
		for _, i := range [...]int{10, 11, 15} {
			limit = min(limit, cols[i].skipVarints(n))
		}
		limit = min(limit, cols[12].skipStrings(n))
	}
	return limit
}

// skipFlagged skips a column holding a varint for each of the first n
// records whose flag byte has bit set, and returns the index of the record
// at which it runs out (n if it does not).
func skipFlagged(c *colReader, flags []byte, n int, bit byte) int {
	need, _ := flaggedRecords(flags, n, bit, -1)
	if got := c.skipVarints(need); got < need {
		_, at := flaggedRecords(flags, n, bit, got)
		return at
	}
	return n
}

func (d *decoder) decodeHaltPoll(raw []byte, n uint32, fn func(*HaltPollChange) error) error {
	var bad bool
	cols := d.cols[:haltPollColumns]
	if _, err := splitColumns(raw, cols, len(cols), &bad); err != nil {
		return err
	}
	var prevTime uint64
	h := &d.hp
	for range n {
		t := prevTime + uint64(cols[0].varint())
		cpu := cols[1].u32()
		grow := cols[2].byte()
		newNs := cols[3].u32()
		oldNs := cols[4].u32()
		if bad {
			return fmt.Errorf("%w: column overrun", errMalformed)
		}
		if grow > 1 {
			return fmt.Errorf("%w: grow flag %d", errMalformed, grow)
		}
		prevTime = t
		*h = HaltPollChange{TimeNs: t, CPU: cpu, Grow: grow == 1, NewNs: newNs, OldNs: oldNs}
		d.delivered++
		if err := fn(h); err != nil {
			return err
		}
	}
	return columnsDone(cols, bad)
}

func (d *decoder) decodePMQoS(raw []byte, n uint32, fn func(*PMQoSChange) error) error {
	var bad bool
	cols := d.cols[:pmQoSColumns]
	if _, err := splitColumns(raw, cols, len(cols), &bad); err != nil {
		return err
	}
	var prevTime uint64
	q := &d.qos
	for range n {
		t := prevTime + uint64(cols[0].varint())
		target := cols[1].uvarint()
		limit := cols[2].varint()
		prev := cols[3].varint()
		action := cols[4].byte()
		tid := cols[5].u32()
		if bad {
			return fmt.Errorf("%w: column overrun", errMalformed)
		}
		if target > MaxCPUs || action > PMQoSRemove {
			return fmt.Errorf("%w: PM QoS target %d, action %d", errMalformed, target, action)
		}
		prevTime = t
		*q = PMQoSChange{TimeNs: t, CPU: int32(target) - 1, LimitUs: limit, PrevUs: prev, Action: action, Tid: tid}
		d.delivered++
		if err := fn(q); err != nil {
			return err
		}
	}
	return columnsDone(cols, bad)
}

func (d *decoder) decodeLoss(raw []byte, n uint32, fn func(*Loss) error) error {
	var bad bool
	cols := d.cols[:lossColumns]
	present, err := splitColumns(raw, cols, lossMinColumns, &bad)
	if err != nil {
		return err
	}
	l := &d.loss
	for range n {
		var v [lossColumns]uint64
		for i := 1; i < present; i++ {
			v[i] = cols[i].uvarint()
		}
		*l = Loss{
			CPU:           cols[0].u32(),
			IdleLost:      v[1],
			IOLost:        v[2],
			OtherLost:     v[3],
			IOUnmatched:   v[4],
			IOTableFull:   v[5],
			IOCompletions: v[6],
			IOOrphaned:    v[7],
			IdleUnpaired:  v[8],
			IOUnissued:    v[9],
		}
		if bad {
			return fmt.Errorf("%w: column overrun", errMalformed)
		}
		d.delivered++
		if err := fn(l); err != nil {
			return err
		}
	}
	return columnsDone(cols, bad)
}

// indexEntry is one chunk as the index (or a header walk) describes it.
type indexEntry struct {
	off        int64
	typ        ChunkType
	payloadLen uint32
	records    uint32
	firstNs    uint64
	lastNs     uint64
	lostDelta  uint32
}

func (e *indexEntry) end() int64 { return e.off + chunkHeaderSize + int64(e.payloadLen) }

// appendIndexEntry encodes one index row; prevEnd is where the previous
// listed chunk ended (fileHeaderSize for the first).
func appendIndexEntry(dst []byte, e *indexEntry, prevEnd int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(e.off-prevEnd))
	dst = append(dst, byte(e.typ))
	dst = binary.AppendUvarint(dst, uint64(e.payloadLen))
	dst = binary.AppendUvarint(dst, uint64(e.records))
	dst = binary.AppendUvarint(dst, e.firstNs)
	dst = binary.AppendUvarint(dst, e.lastNs-e.firstNs)
	dst = binary.AppendUvarint(dst, uint64(e.lostDelta))
	return dst
}

// decodeIndex parses an index payload and checks that the chunks it lists
// lie in order, without overlap, between the file header and indexOff.
func decodeIndex(raw []byte, indexOff int64) ([]indexEntry, error) {
	var bad bool
	c := colReader{b: raw, bad: &bad}
	count := c.uvarint()
	const minEntryBytes = 7
	if bad || count == 0 || count > uint64(len(raw))/minEntryBytes {
		return nil, fmt.Errorf("%w: bad index entry count", errMalformed)
	}
	entries := make([]indexEntry, 0, count)
	prevEnd := int64(fileHeaderSize)
	for range count {
		gap := c.uvarint()
		e := indexEntry{typ: ChunkType(c.byte())}
		e.payloadLen = c.u32()
		e.records = c.u32()
		e.firstNs = c.uvarint()
		e.lastNs = e.firstNs + c.uvarint()
		e.lostDelta = c.u32()
		if bad || gap > math.MaxInt32 || e.payloadLen > maxRawLen {
			return nil, fmt.Errorf("%w: bad index entry", errMalformed)
		}
		e.off = prevEnd + int64(gap)
		if e.end() > indexOff {
			return nil, fmt.Errorf("%w: index lists a chunk beyond the index", errMalformed)
		}
		prevEnd = e.end()
		entries = append(entries, e)
	}
	if c.left() != 0 {
		return nil, fmt.Errorf("%w: trailing bytes in index", errMalformed)
	}
	if entries[0].off != fileHeaderSize || entries[0].typ != ChunkMetadata {
		return nil, fmt.Errorf("%w: index does not start with the metadata chunk", errMalformed)
	}
	return entries, nil
}
