package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

const us = 1000

// spec is one synthetic machine and recording.
type spec struct {
	host     string
	cpus     int
	table    int  // which state table (tables); -1: no cpuidle driver
	periods  int  // idle periods per CPU
	io       bool // block IO recorded (and some requests)
	taskIO   bool // with the waiting task
	kernel   bool // the kernel's cpuidle counters in both snapshots
	wakeReqs bool // remote wake requests recorded
	cutShort bool // no end record
	imported bool // the state table without exit latencies and no tick state, as an import's
	noTick   bool // no tick state (a kernel whose tick_sched the recorder could not read)
	// tickCountsMissing: the end snapshot lacks the last CPU's tick counts.
	tickCountsMissing bool
	// uncounted: a driver without a state table in the trace, and the
	// kernel counted none of state 0's periods (rejected entries).
	uncounted bool
	// damaged: a byte flipped in the payload of the block IO chunk (its
	// header: magic "ICHK", type 3 at byte 4, 48 bytes).
	damaged bool
	seed    int
}

// tables are the state tables a synthetic machine may have.
var tables = [][]trace.StateInfo{
	{ // a server's intel_idle
		{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "C1", ExitLatencyNs: 2 * us, TargetResidencyNs: 2 * us},
		{Index: 2, Name: "C1E", ExitLatencyNs: 10 * us, TargetResidencyNs: 20 * us},
		{Index: 3, Name: "C6", ExitLatencyNs: 133 * us, TargetResidencyNs: 400 * us},
	},
	{ // a smaller one
		{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "C1", ExitLatencyNs: 1 * us, TargetResidencyNs: 1 * us},
		{Index: 2, Name: "C6", ExitLatencyNs: 170 * us, TargetResidencyNs: 600 * us},
	},
	{ // a guest's haltpoll
		{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "haltpoll idle", ExitLatencyNs: 1 * us, TargetResidencyNs: 1 * us},
	},
}

func (sp spec) meta() *trace.Metadata {
	m := &trace.Metadata{
		KernelRelease: []string{"6.1.0-test", "6.12.0-test", "6.18.0-test"}[sp.seed%3], HZ: []int{250, 1000}[sp.seed%2],
		CPUModel: "Synthetic CPU", Hostname: sp.host, NumCPUs: sp.cpus, CPUIdleDriver: "intel_idle", CPUIdleGovernor: "menu",
		WallClock: trace.WallClock{MonotonicNs: 500_000, UnixNs: 1_700_000_000_000_000_000 + int64(sp.seed)*1_000_000_000},
		Inputs:    trace.Inputs{WakeCauses: true, WakeRequests: sp.wakeReqs, TickState: true, NextTimer: true, BlockIO: sp.io, TaskIO: sp.io && sp.taskIO},
		Start:     &trace.Snapshot{MonotonicNs: 1_000_000},
	}
	if sp.table < 0 {
		m.CPUIdleDriver = "none"
	}
	if sp.io {
		m.BlockDevices = []trace.BlockDevice{{Name: "vda", Major: 253, Minor: 0}}
	}
	for c := 0; c < sp.cpus; c++ {
		m.RecordedCPUs = append(m.RecordedCPUs, c)
		if sp.table >= 0 && !sp.uncounted {
			m.States = append(m.States, trace.CPUStates{CPU: c, States: tables[sp.table]})
		}
	}
	if sp.kernel {
		m.Start.CPUIdle = sp.counters(0)
		m.Start.Tick = sp.tickCounters(0)
	}
	m.ExitLatenciesUnknown = sp.imported
	m.Inputs.TickState = !sp.imported && !sp.noTick
	m.Inputs.TickStateBefore = m.Inputs.TickState
	return m
}

// tickCounters are the kernel's tick-stop counts at a snapshot: at the end,
// CPU c's has grown by growth × (c+1).
func (sp spec) tickCounters(growth uint64) []trace.TickCounters {
	var out []trace.TickCounters
	for c := 0; c < sp.cpus; c++ {
		base := uint64(5000 * (c + 1))
		out = append(out, trace.TickCounters{CPU: c, IdleCalls: base + 2*growth, IdleSleeps: base + growth*uint64(c+1)})
	}
	return out
}

// counters are the kernel's cpuidle counters at a snapshot: at the end,
// usage grows by 3 per state per CPU more than at the start, and so on.
func (sp spec) counters(growth uint64) []trace.CPUCounters {
	var out []trace.CPUCounters
	for c := 0; c < sp.cpus; c++ {
		cc := trace.CPUCounters{CPU: c}
		for i := range tables[sp.table] {
			base := uint64(1000 * (c + i + 1))
			cc.States = append(cc.States, trace.StateCounters{Index: i, Usage: base + growth*uint64(3+i+c), TimeUs: base + growth*uint64(50+i),
				Above: growth * uint64(i), Below: growth * uint64(c), Rejected: growth * uint64(i%2)})
		}
		out = append(out, cc)
	}
	return out
}

// write writes the trace to dir and returns its path.
func (sp spec) write(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, sp.host+".trace")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	m := sp.meta()
	w, err := trace.NewWriter(f, m)
	if err != nil {
		t.Fatal(err)
	}
	nStates := 2 // no driver: HLT (1), and cpu_idle_poll (0) now and then
	if sp.table >= 0 {
		nStates = len(tables[sp.table])
	}
	const step = 700 * us
	var last uint64
	for i := 0; i < sp.periods; i++ {
		for c := 0; c < sp.cpus; c++ {
			k := i*7 + c*3 + sp.seed
			entry := uint64(1_000_000 + 10*us + i*step + c*5*us)
			state := uint32(k % nStates)
			if sp.table < 0 && k%5 != 0 {
				state = 1
			}
			res := uint64(3*us + (k%29)*us)
			if int(state) == nStates-1 {
				res = uint64(50*us + (k%600)*us) // above and not, some of them
			}
			if i == 0 { // before the start snapshot: outside the window stats counts
				entry = 1_000_000 - res - 1000
			}
			p := trace.IdlePeriod{CPU: uint32(c), State: state, EntryNs: entry, ExitNs: entry + res, WakeCause: trace.WakeTimer, WakeIRQ: -1, NrIOWait: -1, AbortsBefore: -1}
			if sp.uncounted && state == 0 {
				p.KernelKnown = true // and not KernelCounted
			}
			if !sp.imported && !sp.noTick { // varied apart from the state (k): a hash of the period
				h := uint(i*2654435761+c*40503+sp.seed) >> 7
				p.TickStopped = []trace.Tristate{trace.Yes, trace.No, trace.Unknown}[h%3]
				p.TickStoppedBefore = []trace.Tristate{trace.No, trace.Yes, trace.Yes, trace.Unknown}[h/3%4]
			}
			switch k % 4 {
			case 1:
				p.WakeCause, p.WakeIRQ = trace.WakeIRQ, 24
			case 2:
				p.WakeCause = trace.WakeIPIResched
				if sp.wakeReqs {
					p.WakeRequestNs = p.ExitNs - uint64(2+k%40)*us
				}
			}
			if i == 0 && sp.wakeReqs { // a wake-up measured outside the window: not in stats
				p.WakeCause, p.WakeRequestNs = trace.WakeIPIResched, p.ExitNs-1*us
			}
			if err := w.AddIdle(&p); err != nil {
				t.Fatal(err)
			}
			last = max(last, p.ExitNs)
			if sp.io && k%3 == 1 {
				b := trace.BlockIO{Dev: 253 << 20, Sector: uint64(k) * 8, Bytes: 4096, Op: uint8(k % 2),
					IssueNs: p.ExitNs - 60*us, CompleteNs: p.ExitNs + 1*us, IssueCPU: uint32(c), CompleteCPU: uint32(c)}
				if k%11 == 0 {
					b.Error = 10
				}
				if sp.taskIO && k%2 == 0 {
					b.Tid, b.Tgid, b.Comm = 1000, 1000, "fio"
					b.TaskWokenNs, b.TaskRunNs, b.TaskCPU = b.CompleteNs+2*us, b.CompleteNs+5*us, uint32(c)
				}
				if err := w.AddBlockIO(&b); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if sp.cutShort { // the chunks written, no end record, index or footer: a recorder killed
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	} else {
		end := &trace.End{StopReason: "duration", Snapshot: &trace.Snapshot{MonotonicNs: last + 100*us}}
		if sp.kernel {
			end.Snapshot.CPUIdle = sp.counters(uint64(sp.periods))
			end.Snapshot.Tick = sp.tickCounters(uint64(sp.periods))
			if sp.tickCountsMissing {
				end.Snapshot.Tick = end.Snapshot.Tick[:sp.cpus-1]
			}
		}
		if err := w.Close(end); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if sp.damaged {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		at := -1
		for off := 0; off+48 < len(data); off++ {
			if string(data[off:off+4]) == "ICHK" && data[off+4] == 3 {
				at = off + 48
				break
			}
		}
		if at < 0 {
			t.Fatal("no block IO chunk to damage")
		}
		data[at] ^= 0x5a
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// specOf is the i-th of a fleet of varied machines: 1 to 4 CPUs, three
// state tables and no driver, 5 to 124 periods per CPU, a third without
// block IO, a quarter without the kernel's counters, a fifth without wake
// requests, one in 50 cut short.
func specOf(i int) spec {
	sp := spec{host: fmt.Sprintf("host-%04d", i), cpus: 1 + i%4, table: i % 3, periods: 5 + (i*37)%120,
		io: i%3 != 0, taskIO: i%2 == 0, kernel: i%4 != 1, wakeReqs: i%5 != 2, cutShort: i%50 == 7, noTick: i%20 == 13, seed: i}
	if i%10 == 9 {
		sp.table, sp.kernel = -1, false
	}
	return sp
}

// statsOf is what stats computes for the trace at path.
func statsOf(t testing.TB, path string) *analysis.Stats {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := analysis.StatsFromReader(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rowsOf is the fleet's rows of the trace at path, both kinds, as the
// command line makes them (whatif's with fleetPolicies).
func rowsOf(t testing.TB, path, host string) ([]StatsRow, []WhatifRow, *analysis.WhatifReport) {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k, err := KeyOf(path, host, r.Meta)
	if err != nil {
		t.Fatal(err)
	}
	s, periods, err := StatsFromReader(r, trace.IOFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Meta.ExitLatenciesUnknown { // no recorded profile to replay on: stats rows only
		return StatsRows(k, s, periods), nil, nil
	}
	rep := replay(t, r, path)
	return StatsRows(k, s, periods), WhatifRows(k, rep, ""), rep
}

// fleetPolicies are the policies the tests replay, those of the README's
// example: what the kernel did, teo in place of menu, and the bound.
var fleetPolicies = []string{"recorded", "teo", "oracle"}

// replay replays the trace on its recorded profile with fleetPolicies, as
// whatif does.
func replay(t testing.TB, r *trace.Reader, path string) *analysis.WhatifReport {
	t.Helper()
	var pols []model.Policy
	for _, spec := range fleetPolicies {
		p, err := model.ParsePolicy(spec)
		if err != nil {
			t.Fatal(err)
		}
		pols = append(pols, p)
	}
	prof, err := model.LoadProfile("recorded", r.Meta)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := model.NewReplay(prof, r.Meta, pols)
	if err != nil {
		t.Fatal(err)
	}
	rp.SetWindow(trace.SnapshotWindow(r.Meta, r.End))
	if v, ok := rp.Prepass(r.End); ok {
		if err := r.Scan(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Scan(trace.Visitor{Idle: rp.Idle, BlockIO: rp.BlockIO}); err != nil {
		t.Fatal(err)
	}
	res, err := rp.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return &analysis.WhatifReport{Trace: path, Profile: prof, Results: res}
}
