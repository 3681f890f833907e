package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// FuzzCommandsOnTrace: a trace the writer accepts, however odd its state
// table, kernel, governor and records (periods out of order, on CPUs or
// states the table lacks, IO completing before its issue, snapshots that
// disagree with the records), gets from info, stats, whatif and export
// either an answer or a one-line error: never a panic, never a silent
// failure. FuzzReader covers damaged files; this covers well-formed files
// whose content no recording makes.
func FuzzCommandsOnTrace(f *testing.F) {
	f.Add([]byte{}, []byte{}, uint8(0), uint16(0))
	// haltpoll's table on the haltpoll governor, a few periods and one IO.
	f.Add([]byte{0, 0, 4, 1, 1, 0}, fuzzRecords(
		[]byte{0, 0, 0, 0, 10, 0, 0, 40, 4, 0b0101, 0, 2, 0b1111, 0, 0, 5},
		[]byte{0, 1, 1, 0, 50, 0, 1, 0, 1, 0b1010, 0, 20, 0b0011, 0, 0, 9},
		[]byte{3, 0, 1, 0, 20, 0, 0, 90, 3, 0, 0, 0, 0, 0, 0, 0},
		[]byte{0, 0, 1, 0, 5, 0, 9, 0, 2, 0b0110, 0xff, 0xf0, 0b0101, 0, 0, 1},
	), uint8(3), uint16(250))
	// A server table (POLL C1 C1E C6), one state disabled, menu on 6.1.
	f.Add([]byte{0, 0, 4, 1, 1, 0, 2, 4, 0, 10, 20, 2, 133, 1, 0x90, 0}, fuzzRecords(
		[]byte{0, 2, 3, 0, 10, 1, 0, 0, 1, 0b0101, 0x10, 0, 0b1011, 0, 0, 5},
		[]byte{0, 0, 2, 1, 0, 0, 3, 0, 3, 0, 0, 7, 0b0001, 0, 1, 0},
		[]byte{7, 1, 0, 0, 9, 0, 0, 200, 3, 0, 0, 0, 0, 0, 0, 0},
		[]byte{0, 1, 1, 0, 0, 0, 0, 3, 7, 0b1111, 0, 1, 0b0111, 0, 0, 0},
	), uint8(0x41), uint16(1000))
	f.Fuzz(func(t *testing.T, table, records []byte, choice uint8, hz uint16) {
		path := filepath.Join(t.TempDir(), "fuzz.trace")
		if !writeFuzzTrace(t, path, table, records, choice, int(hz)) {
			return
		}
		out := t.TempDir()
		for _, args := range [][]string{
			{"info", path},
			{"stats", path},
			{"stats", "--format", "json", path},
			{"whatif", path},
			{"whatif", "--policy", "menu", "--policy", "teo", "--policy", "ladder", "--policy", "haltpoll", "--policy", "oracle", path},
			{"whatif", "--profile", "spr", "--policy", "menu+kernel=6.1", "--policy", "teo+kernel=6.12+qos=20us", "--policy", "menu+margin=25+blkqos=10us/3ms", "--format", "json", path},
			{"whatif", "--policy", "menu", "--measured", path, path},
			{"export", "--format", "csv", "-o", filepath.Join(out, "csv"), path},
			{"export", "--format", "perfetto", "-o", filepath.Join(out, "t.pftrace"), path},
			{"export", "--format", "ftrace", "-o", filepath.Join(out, "t.txt"), path},
		} {
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			// Besides warnings, a failure says one line.
			var said []string
			for _, l := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
				if l != "" && !strings.HasPrefix(l, "warning") {
					said = append(said, l)
				}
			}
			switch {
			case code == 0 && stdout.Len() == 0 && args[0] != "export":
				t.Errorf("%s: exit 0 with no output", strings.Join(args[:len(args)-1], " "))
			case code != 0 && len(said) != 1:
				t.Errorf("%s: exit %d, stderr not one line naming the problem: %q", strings.Join(args[:len(args)-1], " "), code, stderr.String())
			}
		}
	})
}

// fuzzRecords joins 16-byte record descriptions (see writeFuzzTrace).
func fuzzRecords(recs ...[]byte) []byte { return bytes.Join(recs, nil) }

var (
	fuzzKernels   = []string{"6.18.44", "6.12.0", "6.1.0", "5.10.0", "4.19.0", "7.0.0", "", "garbage"}
	fuzzGovernors = []string{"menu", "teo", "ladder", "haltpoll", "", "unknown"}
)

// writeFuzzTrace writes a trace made from the fuzzer's bytes: table gives
// 3 bytes a state (exit latency and target residency in µs, flags: bit 0
// disabled, 1 polling, 2 default off; no states: no cpuidle driver);
// choice picks the kernel (bits 0-2), the governor (3-5) and whether the
// snapshots are there (6) and the inputs recorded (7); records gives 16
// bytes a record (byte 0 & 3 == 3: a block IO request, else an idle period).
// False when the writer refuses the trace, which is not what this tests.
func writeFuzzTrace(t *testing.T, path string, table, records []byte, choice uint8, hz int) bool {
	const cpus = 2
	var states []trace.StateInfo
	for i := 0; i+3 <= len(table) && len(states) < 12; i += 3 {
		states = append(states, trace.StateInfo{
			Index: len(states), Name: []string{"POLL", "C1", "C1E", "C3", "C6", "C6P", "C7s", "C8", "C9", "C10", "X", "X"}[len(states)],
			ExitLatencyNs: uint64(table[i]) * 1000, TargetResidencyNs: uint64(table[i+1]) * 1000,
			Disabled: table[i+2]&1 != 0, Polling: table[i+2]&2 != 0, DefaultOff: table[i+2]&4 != 0,
		})
	}
	meta := &trace.Metadata{
		FormatVersion: trace.FormatVersion, KernelRelease: fuzzKernels[choice&7], HZ: hz, NoHZ: "idle",
		Hostname: "fuzz", NumCPUs: cpus, RecordedCPUs: []int{0, 1},
		CPUIdleDriver:   trace.CPUIdleDriverNone,
		CPUIdleGovernor: fuzzGovernors[int(choice>>3&7)%len(fuzzGovernors)],
		HaltPoll:        &trace.HaltPollParams{GuestHaltPollNs: uint64(hz) * 1000, Grow: 2, Shrink: 2, GrowStart: 50000, AllowShrink: true},
		PMQoS:           trace.PMQoS{CPUDMALatencyUs: int64(hz%300) - 1, ResumeLatencyUs: []int64{-1, int64(hz % 7)}},
		BlockDevices:    []trace.BlockDevice{{Name: "nvme0n1", Major: 259}},
		Clock:           "CLOCK_MONOTONIC",
	}
	if choice&0x80 != 0 {
		meta.Inputs = trace.Inputs{WakeCauses: true, WakeRequests: true, TickState: true, TickStateBefore: true, NextTimer: true,
			TickWakeups: true, PollTimeLimit: true, BlockIO: true, TaskIO: true, HaltPollTrace: true, PMQoSTrace: true}
	}
	if len(states) > 0 {
		meta.CPUIdleDriver = "fuzz_idle"
		for c := range cpus {
			meta.States = append(meta.States, trace.CPUStates{CPU: c, States: states})
		}
	}
	snapshot := func(ns uint64) *trace.Snapshot {
		s := &trace.Snapshot{MonotonicNs: ns, CPUTimeNs: []uint64{ns, ns + 3},
			Block: []trace.BlockCounter{{Name: "nvme0n1", Major: 259, Stat: make([]uint64, 17)}}}
		for c := range cpus {
			cc := trace.CPUCounters{CPU: c}
			for i := range states {
				cc.States = append(cc.States, trace.StateCounters{Index: i, Usage: ns % 97, TimeUs: ns / 1000 % 1013})
			}
			s.CPUIdle = append(s.CPUIdle, cc)
		}
		return s
	}
	if choice&0x40 != 0 {
		meta.Start = snapshot(1000)
	}

	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := trace.NewWriter(f, meta)
	if err != nil {
		return false
	}
	now := uint64(2000)
	for i := 0; i+16 <= len(records) && i < 16*400; i += 16 {
		r := records[i : i+16]
		gap := uint64(binary.LittleEndian.Uint16(r[3:])) * 10
		length := uint64(r[5])<<16 | uint64(r[6])<<8 | uint64(r[7])
		if r[12]&0x80 != 0 && now > gap { // out of order
			now -= gap
		} else {
			now += gap
		}
		if r[0]&3 == 3 {
			io := trace.BlockIO{Dev: 259 << 20, Sector: uint64(r[1]) * 8, Bytes: uint32(r[2]) * 512, Op: r[8] % 5, IssueNs: now,
				CompleteNs: now + length, IssueCPU: uint32(r[1] % (cpus + 1)), CompleteCPU: uint32(r[2] % (cpus + 1)), Error: int32(r[9] % 3),
				Tid: uint32(r[10]), Tgid: uint32(r[10]), Comm: "fio"}
			if r[12]&0x40 != 0 {
				io.CompleteNs = now - min(now, length) // completes before its issue
			}
			if r[12]&0x20 != 0 {
				io.TaskWokenNs, io.TaskRunNs, io.TaskCPU = io.CompleteNs+uint64(r[13]), io.CompleteNs+uint64(r[14])*100, uint32(r[15]%cpus)
			}
			if w.AddBlockIO(&io) != nil {
				return false
			}
			continue
		}
		p := trace.IdlePeriod{
			CPU: uint32(r[1] % (cpus + 1)), State: uint32(r[2]) % uint32(len(states)+2), EntryNs: now, ExitNs: now + length,
			WakeCause: trace.WakeCause(r[8] % 9), WakeIRQ: int32(r[13]) - 1,
			TickStopped: trace.Tristate(r[9] & 3), TickStoppedBefore: trace.Tristate(r[9] >> 2 & 3),
			PollTimedOut: trace.Tristate(r[9] >> 4 & 3), IdleLoopEntry: trace.Tristate(r[9] >> 6 & 3),
			NextTimerNs: int64(int16(binary.LittleEndian.Uint16(r[10:]))) * 1000, NextTimerKnown: r[12]&1 != 0,
			NextEventNs: int64(r[11]) * 4000, NextEventKnown: r[12]&2 != 0,
			KernelKnown: r[12]&4 != 0, KernelCounted: r[12]&8 != 0, AbortedBefore: r[12]&16 != 0,
			KernelResidencyNs: length - min(length, uint64(r[14])*100), NrIOWait: int32(r[15] % 3),
		}
		if r[12]&32 != 0 {
			p.WakeRequestNs = now + length - min(length, uint64(r[15])*50)
		}
		if w.AddIdle(&p) != nil {
			return false
		}
		now += length
	}
	end := &trace.End{StopReason: "duration"}
	if choice&0x40 != 0 {
		end.Snapshot = snapshot(now + 1000)
	}
	return w.Close(end) == nil
}
