package trace

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the reader: it must never panic, and
// since a bytes.Reader cannot fail, Scan must never return an error either
// (damage is a warning). Seeds are files from the writer, cut and uncut, and
// the project's real traces in /testdata when present.
func FuzzReader(f *testing.F) {
	small, _ := smallTrace(f)
	f.Add(small)
	f.Add(small[:len(small)-footerSize])
	f.Add(small[:len(small)*2/3])
	f.Add(small[:metadataEnd(f, small)])
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta())
	must(f, err)
	w.chunkRecords = 100
	wl := newWorkload(11, 2)
	for i := range 300 {
		p := wl.next()
		must(f, w.AddIdle(&p))
		if i%50 == 0 {
			b := wl.blockIO(i)
			must(f, w.AddBlockIO(&b))
			must(f, w.AddLoss(Loss{CPU: uint32(i % 2), IdleLost: uint64(i)}))
			must(f, w.Flush())
		}
	}
	must(f, w.Close(nil))
	f.Add(buf.Bytes())
	// Real traces seed with their first 64 KiB (metadata and first chunks, a
	// valid cut file): whole multi-megabyte inputs would make the fuzzer
	// spend its time minimising.
	real, _ := filepath.Glob("../../testdata/*.trace")
	for _, path := range real {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data[:min(len(data), 64<<10)])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if r != nil {
				t.Fatal("reader returned with an error")
			}
			return
		}
		defer r.Close()
		if r.Meta == nil {
			t.Fatal("opened without metadata")
		}
		n := 0
		err = r.Scan(Visitor{
			Idle:     func(*IdlePeriod) error { n++; return nil },
			BlockIO:  func(*BlockIO) error { n++; return nil },
			HaltPoll: func(*HaltPollChange) error { n++; return nil },
			Loss:     func(*Loss) error { n++; return nil },
			PMQoS:    func(*PMQoSChange) error { n++; return nil },
		})
		if err != nil {
			t.Fatalf("Scan over a bytes.Reader failed: %v", err)
		}
		r.Losses()
		r.Chunks()
		r.Warnings()
	})
}

// FuzzDecodeChunk runs the record decoders on arbitrary raw payloads, which
// FuzzReader rarely reaches past the checksums.
func FuzzDecodeChunk(f *testing.F) {
	var e idleEncoder
	wl := newWorkload(2, 2)
	for range 20 {
		p := wl.next()
		e.add(&p)
	}
	f.Add(uint8(ChunkIdle), uint32(20), appendColumns(nil, e.cols[:]))
	var be blockIOEncoder
	b := wl.blockIO(1)
	be.add(&b)
	f.Add(uint8(ChunkBlockIO), uint32(1), appendColumns(nil, be.cols[:]))
	var qe pmQoSEncoder
	qe.add(&PMQoSChange{TimeNs: 5, CPU: PMQoSGlobal, LimitUs: 20, PrevUs: PMQoSNoGlobalLimitUs, Action: PMQoSUpdate})
	f.Add(uint8(ChunkPMQoS), uint32(1), appendColumns(nil, qe.cols[:]))
	f.Add(uint8(ChunkIndex), uint32(0), appendIndexEntry([]byte{1}, &indexEntry{off: 16, typ: ChunkMetadata, payloadLen: 9}, 16))
	f.Fuzz(func(t *testing.T, typ uint8, records uint32, raw []byte) {
		records = min(records, uint32(len(raw)))
		var d decoder
		switch ChunkType(typ % 9) {
		case ChunkIdle:
			_ = d.decodeIdle(raw, records, 0, func(*IdlePeriod) error { return nil })
			_ = d.decodeIdle(raw, records, IdleGovernorInputs, func(*IdlePeriod) error { return nil })
		case ChunkBlockIO:
			_ = d.decodeBlockIO(raw, records, 0, func(*BlockIO) error { return nil })
			_ = d.decodeBlockIO(raw, records, BlockIOShape|BlockIOTask, func(*BlockIO) error { return nil })
		case ChunkHaltPoll:
			_ = d.decodeHaltPoll(raw, records, func(*HaltPollChange) error { return nil })
		case ChunkLoss:
			_ = d.decodeLoss(raw, records, func(*Loss) error { return nil })
		case ChunkPMQoS:
			_ = d.decodePMQoS(raw, records, func(*PMQoSChange) error { return nil })
		default:
			_, _ = decodeIndex(raw, math.MaxInt64/2)
		}
	})
}

// FuzzRoundTrip checks that any idle period survives encoding exactly
// (tristates outside Unknown/No/Yes read back as Unknown).
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint32(0), uint32(1), uint64(1000), uint64(2000), uint64(1500), int64(4_000_000), int32(-1), uint8(4), uint8(0x15))
	f.Add(uint32(math.MaxUint32), uint32(0), uint64(math.MaxUint64), uint64(0), uint64(1), int64(math.MinInt64), int32(math.MinInt32), uint8(255), uint8(0xff))
	f.Fuzz(func(t *testing.T, cpu, state uint32, entry, exit, req uint64, next int64, irq int32, cause, bits uint8) {
		in := []IdlePeriod{
			{CPU: cpu, State: state, EntryNs: entry, ExitNs: exit, WakeRequestNs: req, NextTimerNs: next, WakeIRQ: irq,
				WakeCause: WakeCause(cause), NextTimerKnown: bits&1 != 0, TickStopped: Tristate(bits >> 1 & 3), PollTimedOut: Tristate(bits >> 3 & 3),
				IdleLoopEntry: Tristate(bits >> 5 & 3), TickStoppable: Tristate(bits >> 6 & 3)},
			{CPU: cpu, EntryNs: exit + 10, ExitNs: exit + 20, NextTimerNs: next - 1, WakeIRQ: -1},
			{CPU: cpu ^ 1, EntryNs: entry ^ exit, ExitNs: req, NextTimerNs: next, WakeIRQ: irq},
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, nil)
		must(t, err)
		for i := range in {
			must(t, w.AddIdle(&in[i]))
			in[i].TickStopped = triFromBits(triBits(in[i].TickStopped))
			in[i].PollTimedOut = triFromBits(triBits(in[i].PollTimedOut))
			in[i].IdleLoopEntry = triFromBits(triBits(in[i].IdleLoopEntry))
			in[i].TickStoppable = triFromBits(triBits(in[i].TickStoppable))
		}
		must(t, w.Close(nil))
		r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		must(t, err)
		got := readAll(t, r)
		if len(got.idle) != len(in) {
			t.Fatalf("%d records back, want %d", len(got.idle), len(in))
		}
		for i := range in {
			if got.idle[i] != in[i] {
				t.Fatalf("record %d: got %+v, want %+v", i, got.idle[i], in[i])
			}
		}
	})
}
