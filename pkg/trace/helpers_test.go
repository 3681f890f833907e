package trace

import (
	"bytes"
	"container/heap"
	"math/rand/v2"
	"testing"
)

// workload generates idle periods shaped like this project's machines record
// them: a few CPUs, HZ=250 with NO_HZ_IDLE, haltpoll's POLL + HLT states,
// wake-ups from IPIs, device IRQs, timers and the tick, records emitted at
// idle exit so CPUs interleave in exit order as they do in the ring buffer.
type workload struct {
	rng    *rand.Rand
	cpus   []cpuSim
	queue  exitQueue
	tickNs uint64
}

type cpuSim struct {
	cpu        uint32
	nowNs      uint64
	tickPhase  uint64 // this CPU's tick offset within the period
	timerAbsNs uint64 // next hrtimer on this CPU
}

func newWorkload(seed uint64, cpus int) *workload {
	w := &workload{rng: rand.New(rand.NewPCG(seed, 42)), tickNs: 4_000_000}
	start := uint64(1_234_567_890_123)
	for i := range cpus {
		c := cpuSim{cpu: uint32(i), nowNs: start, tickPhase: w.rng.Uint64N(w.tickNs)}
		c.timerAbsNs = start + w.rng.Uint64N(20_000_000)
		w.cpus = append(w.cpus, c)
	}
	for i := range w.cpus {
		w.queue = append(w.queue, w.period(&w.cpus[i]))
	}
	heap.Init(&w.queue)
	return w
}

func (w *workload) expNs(meanNs float64) uint64 { return uint64(w.rng.ExpFloat64()*meanNs) + 1 }

// period simulates the next busy stretch and idle period of one CPU.
func (w *workload) period(c *cpuSim) IdlePeriod {
	entry := c.nowNs + w.expNs(15_000) // busy gap
	for c.timerAbsNs <= entry {
		c.timerAbsNs += 1_000_000 + w.rng.Uint64N(50_000_000)
	}
	nextTick := (entry-c.tickPhase)/w.tickNs*w.tickNs + w.tickNs + c.tickPhase
	tickStopped := w.rng.IntN(3) > 0
	expiry := c.timerAbsNs
	if !tickStopped {
		expiry = min(expiry, nextTick)
	}
	p := IdlePeriod{
		CPU: c.cpu, State: 1, EntryNs: entry, WakeIRQ: -1,
		NextTimerNs: int64(expiry - entry), NextTimerKnown: true,
		TickStopped: TristateOf(tickStopped), PollTimedOut: Unknown,
	}
	switch r := w.rng.IntN(100); {
	case r < 45: // remote wake-up by IPI
		p.ExitNs = entry + min(w.expNs(60_000), expiry-entry)
		p.WakeCause = WakeIPIResched
		p.WakeRequestNs = p.ExitNs - 8_000 - w.rng.Uint64N(24_000)
	case r < 60: // block IO completion
		p.ExitNs = entry + min(w.expNs(80_000), expiry-entry)
		p.WakeCause = WakeIRQ
		p.WakeIRQ = 24 + int32(w.rng.IntN(2))
	case r < 75: // short poll
		p.State = 0
		p.ExitNs = entry + w.expNs(3_000)
		p.WakeCause = WakeRemoteNoIPI
		p.WakeRequestNs = p.ExitNs - w.rng.Uint64N(500)
		p.PollTimedOut = No
	default: // the timer fires
		p.ExitNs = expiry + 2_000 + w.rng.Uint64N(3_000)
		p.WakeCause = WakeTimer
		if expiry == nextTick {
			p.WakeCause = WakeTick
		}
	}
	if p.WakeRequestNs <= entry {
		p.WakeRequestNs = 0
	}
	c.nowNs = p.ExitNs
	return p
}

// next returns the next idle period in exit order across CPUs.
func (w *workload) next() IdlePeriod {
	p := w.queue[0]
	w.queue[0] = w.period(&w.cpus[p.CPU])
	heap.Fix(&w.queue, 0)
	return p
}

type exitQueue []IdlePeriod

func (q exitQueue) Len() int           { return len(q) }
func (q exitQueue) Less(i, j int) bool { return q[i].ExitNs < q[j].ExitNs }
func (q exitQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *exitQueue) Push(x any)        { *q = append(*q, x.(IdlePeriod)) }
func (q *exitQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (w *workload) blockIO(i int) BlockIO {
	issue := w.cpus[0].nowNs + uint64(i)*83_000
	return BlockIO{
		Dev: 254 << 20 /* 254:0, the kernel's MKDEV */, Sector: 2048 + w.rng.Uint64N(1<<24)*8, Bytes: 4096, Op: OpRead,
		CmdFlags: OpRead | 1<<11, IssueNs: issue, CompleteNs: issue + w.expNs(80_000),
		IssueCPU: uint32(i % 2), CompleteCPU: uint32(w.rng.IntN(2)),
	}
}

// records is everything one test file holds, in Add order per type.
type records struct {
	idle     []IdlePeriod
	blockIO  []BlockIO
	haltPoll []HaltPollChange
	loss     []Loss
	pmQoS    []PMQoSChange
}

// counts is how many records of each type r holds.
func (r records) counts() [5]int {
	return [5]int{len(r.idle), len(r.blockIO), len(r.haltPoll), len(r.loss), len(r.pmQoS)}
}

func (r records) total() int {
	n := 0
	for _, c := range r.counts() {
		n += c
	}
	return n
}

// readAll scans every record of a reader into copies.
func readAll(t testing.TB, r *Reader) records {
	t.Helper()
	var got records
	err := r.Scan(Visitor{
		Idle:     func(p *IdlePeriod) error { got.idle = append(got.idle, *p); return nil },
		BlockIO:  func(b *BlockIO) error { got.blockIO = append(got.blockIO, *b); return nil },
		HaltPoll: func(h *HaltPollChange) error { got.haltPoll = append(got.haltPoll, *h); return nil },
		Loss:     func(l *Loss) error { got.loss = append(got.loss, *l); return nil },
		PMQoS:    func(q *PMQoSChange) error { got.pmQoS = append(got.pmQoS, *q); return nil },
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return got
}

func testMeta() *Metadata {
	return &Metadata{
		ToolVersion: "test", KernelRelease: "6.18.0", HZ: 250, NoHZ: "idle", NumCPUs: 2,
		RecordedCPUs: []int{0, 1}, CPUIdleDriver: "haltpoll", CPUIdleGovernor: "haltpoll",
		States: []CPUStates{{CPU: 0, States: []StateInfo{
			{Index: 0, Name: "POLL", Polling: true},
			{Index: 1, Name: "haltpoll idle", ExitLatencyNs: 1000, TargetResidencyNs: 1000},
		}}},
		Probes: map[string]string{"cpu_idle": "tp_btf"},
	}
}

// smallTrace writes a multi-chunk file with every record kind: chunks of 4
// records, a Flush in between, loss reports, an end chunk and an index.
func smallTrace(t testing.TB) ([]byte, records) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	w.chunkRecords = 4
	wl := newWorkload(1, 2)
	var want records
	for i := range 22 {
		p := wl.next()
		want.idle = append(want.idle, p)
		must(t, w.AddIdle(&p))
		if i%5 == 0 {
			b := wl.blockIO(i)
			want.blockIO = append(want.blockIO, b)
			must(t, w.AddBlockIO(&b))
		}
		if i%7 == 0 {
			h := HaltPollChange{TimeNs: p.ExitNs, CPU: p.CPU, Grow: i%2 == 0, NewNs: uint32(i * 1000), OldNs: 200000}
			want.haltPoll = append(want.haltPoll, h)
			must(t, w.AddHaltPoll(&h))
		}
		if i%6 == 1 {
			q := PMQoSChange{TimeNs: p.EntryNs, CPU: int32(i%3) - 1, LimitUs: int64(i) - 2, PrevUs: PMQoSNoGlobalLimitUs, Action: uint8(i % 3), Tid: uint32(1000 + i)}
			want.pmQoS = append(want.pmQoS, q)
			must(t, w.AddPMQoS(&q))
		}
		if i == 10 {
			l := Loss{CPU: 1, IdleLost: 3, IOUnmatched: 1}
			want.loss = append(want.loss, l)
			must(t, w.AddLoss(l))
			must(t, w.Flush())
		}
	}
	l := Loss{CPU: 1, IdleLost: 5, IOLost: 1, IOUnmatched: 1}
	want.loss = append(want.loss, l)
	must(t, w.AddLoss(l))
	must(t, w.Close(&End{StopReason: "duration"}))
	return buf.Bytes(), want
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
