package model

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Golden replay fingerprints: every governor and modifier replayed over a
// large deterministic synthetic trace and over the real testdata/demo.trace,
// hashing each Result (with its CDFs and the replay's Stats) and every
// decision the replay makes (each selection with its inputs, each stay's end,
// each oracle choice, the latency each period's wake-up pays). Optimisations
// must reproduce testdata/replay_golden.txt exactly; a deliberate change of
// behaviour regenerates it with
//
//	go test ./pkg/model/ -run TestReplayGolden -update-golden
//
// and says why in the change.

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/replay_golden.txt")

const goldenFile = "testdata/replay_golden.txt"

// goldenSynth is an interleaved multi-CPU trace in exit order with every
// kind of period the replay handles: all wake causes, tick stopped yes/no/
// unknown, unknown next timers, recorded states in and out of the table,
// overlapping periods, zero-length and very long periods, IO completions
// on the idle CPU, on another CPU and with no idle period near them.
func goldenSynth(seed uint64, ncpu, perCPU, nstates int, pollLimit int64) *synth {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &synth{rng: rng}
	type cpuGen struct {
		now int64
		n   int
	}
	gens := make([]cpuGen, ncpu)
	for c := range gens {
		gens[c].now = int64(500_000 + c*1_333)
	}
	causes := []trace.WakeCause{trace.WakeIPIResched, trace.WakeIRQ, trace.WakeTimer, trace.WakeTick,
		trace.WakePollTimeout, trace.WakeIPICall, trace.WakeUnknown, trace.WakeRemoteNoIPI}
	// phases change the mix so the adaptive governors see regime changes
	for {
		// the CPU whose next period starts first goes next: exit order
		c := -1
		for i := range gens {
			if gens[i].n < perCPU && (c < 0 || gens[i].now < gens[c].now) {
				c = i
			}
		}
		if c < 0 {
			break
		}
		g := &gens[c]
		phase := (g.n / 2000) % 4
		p := trace.IdlePeriod{CPU: uint32(c), NextTimerKnown: rng.IntN(12) != 0, WakeIRQ: -1}
		p.TickStopped = trace.Tristate(rng.IntN(3))
		p.PollTimedOut = trace.Unknown
		p.State = uint32(rng.IntN(nstates + 1)) // one past the table now and then
		var d int64
		k := rng.IntN(100)
		var cause trace.WakeCause
		switch {
		case phase == 0 && k < 70: // steady short pattern
			cause = trace.WakeIPIResched
			d = 30_000 + int64(rng.IntN(3_000))
		case phase == 1 && k < 60: // bimodal
			cause = trace.WakeIPICall
			if rng.IntN(2) == 0 {
				d = 8_000 + int64(rng.IntN(500))
			} else {
				d = 900_000 + int64(rng.IntN(50_000))
			}
		case phase == 3 && k < 50: // long timer sleeps, tick stopped
			cause = trace.WakeTimer
			d = 2_000_000 + int64(rng.IntN(60_000_000))
			p.TickStopped = trace.Yes
		default:
			cause = causes[rng.IntN(len(causes))]
			switch rng.IntN(6) {
			case 0:
				d = int64(rng.IntN(2_000))
			case 1:
				d = int64(rng.IntN(25_000))
			case 2:
				d = int64(rng.IntN(300_000))
			case 3:
				d = int64(rng.IntN(5_000_000))
			case 4:
				d = int64(rng.IntN(40_000_000))
			default:
				d = 0
			}
		}
		p.WakeCause = cause
		switch cause {
		case trace.WakePollTimeout:
			d = pollLimit + int64(rng.IntN(3))*1_000
			p.PollTimedOut = trace.Yes
			p.State = 0
		case trace.WakeIRQ:
			p.WakeIRQ = int32(rng.IntN(40))
		case trace.WakeIPIResched, trace.WakeRemoteNoIPI:
			p.WakeRequestNs = uint64(g.now + d - min(d, 700))
		}
		if rng.IntN(40) == 0 && p.PollTimedOut != trace.Yes {
			p.PollTimedOut = trace.No
		}
		entry := g.now
		if rng.IntN(200) == 0 {
			entry -= int64(rng.IntN(5_000)) // overlaps the previous period: clamped
		}
		p.EntryNs = uint64(max(entry, 0))
		p.ExitNs = uint64(g.now + d)
		switch {
		case cause == trace.WakeTimer:
			p.NextTimerNs = d
		case rng.IntN(30) == 0:
			p.NextTimerNs = -1
		default:
			p.NextTimerNs = d + int64(rng.IntN(6_000_000))
		}
		if rng.IntN(500) == 0 {
			p.NextTimerNs = 1 << 50 // far beyond maxSleepNs
		}
		s.periods = append(s.periods, p)
		// block IO around this period
		if cause == trace.WakeIRQ || rng.IntN(25) == 0 {
			cc := uint32(c)
			if rng.IntN(5) == 0 {
				cc = uint32(rng.IntN(ncpu))
			}
			done := g.now + d + int64(rng.IntN(30_000))
			if rng.IntN(7) == 0 {
				done += 300_000 // too late to have woken it
			}
			issue := done - 20_000 - int64(rng.IntN(400_000))
			s.ios = append(s.ios, trace.BlockIO{IssueCPU: uint32(rng.IntN(ncpu)), CompleteCPU: cc,
				IssueNs: uint64(max(issue, 1)), CompleteNs: uint64(done)})
		}
		gap := int64(rng.IntN(60_000))
		switch {
		case cause == trace.WakePollTimeout || cause == trace.WakeTick:
			gap = int64(rng.IntN(4)) * 5_000 // usually chained
		case rng.IntN(10) == 0:
			gap = 0
		}
		g.now += d + gap
		g.n++
	}
	// the main pass sees IO in completion order, interleaved with the
	// periods by the caller
	sort.SliceStable(s.ios, func(i, j int) bool { return s.ios[i].CompleteNs < s.ios[j].CompleteNs })
	return s
}

// goldenCase is one replay: a profile, metadata, policies and a source.
type goldenCase struct {
	name  string
	prof  *Profile
	meta  *trace.Metadata
	specs []string
	// feed drives the replay (prepass included) and calls each after every
	// Idle.
	feed func(rp *Replay, each func()) error
}

type goldenHash struct {
	results   hash.Hash64
	decisions wordHash
}

// wordHash is a fast 64-bit fingerprint of a stream of words (the decision
// streams run to hundreds of millions of words).
type wordHash uint64

func (h *wordHash) put(v ...int64) {
	x := uint64(*h)
	for _, w := range v {
		x = bits.RotateLeft64((x^uint64(w))*0x9e3779b97f4a7c15, 29) * 0xbf58476d1ce4e5b9
	}
	*h = wordHash(x)
}

// runGolden replays c and returns one golden line.
func runGolden(t *testing.T, c goldenCase) string {
	t.Helper()
	var pols []Policy
	for _, sp := range c.specs {
		pols = append(pols, mustPolicy(t, sp))
	}
	rp, err := NewReplay(c.prof, c.meta, pols)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	gh := &goldenHash{results: fnv.New64a(), decisions: 1}
	var events uint64
	for k, ps := range rp.pols {
		k := int64(k)
		ps.obs = func(ev *[8]int64) {
			events++
			gh.decisions.put(k)
			gh.decisions.put(ev[:]...)
		}
	}
	each := func() {
		gh.decisions.put(-1)
		gh.decisions.put(rp.elScratch...)
	}
	if err := c.feed(rp, each); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	res, err := rp.Finish()
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	// The oracle sleeps each episode through in its cheapest state: its
	// energy is the least (a policy's stays cost a concave function of
	// their length, and the time it spends awake a busy core, more than
	// any state). Not a rule where a policy enables a state the oracle
	// may not use (left out here), or where a latency limit is lifted
	// inside an episode (the oracle keeps the one at its start; no case
	// here has one).
	for _, o := range res {
		if o.Policy != string(GovOracle) {
			continue
		}
		for _, r := range res {
			if strings.Contains(r.Policy, "enable=") {
				continue
			}
			if o.EnergyBusyCoreSeconds > r.EnergyBusyCoreSeconds*(1+1e-9) {
				t.Errorf("%s: the oracle's energy %.9g exceeds %s's %.9g", c.name, o.EnergyBusyCoreSeconds, r.Policy, r.EnergyBusyCoreSeconds)
			}
		}
	}
	var sum []string
	for _, r := range res {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		gh.results.Write(b)
		fmt.Fprintf(gh.results, "%v|%v", r.WakeLatencyCDF, r.IOLatencyCDF)
		sum = append(sum, fmt.Sprintf("%s:%d/%d/%d", r.Policy, r.Selections, r.Above, r.Below))
	}
	fmt.Fprintf(gh.results, "%+v", rp.Stats())
	return fmt.Sprintf("%s results=%016x decisions=%016x events=%d | %s", c.name, gh.results.Sum64(),
		uint64(gh.decisions), events, strings.Join(sum, " "))
}

// feedSynth replays a synthetic trace the way Scan would: IO interleaved
// with the periods by time (completion after the period's exit).
func feedSynth(s *synth) func(rp *Replay, each func()) error {
	return func(rp *Replay, each func()) error {
		prepassSynth(rp, s)
		j := 0
		for i := range s.periods {
			p := &s.periods[i]
			for j < len(s.ios) && s.ios[j].CompleteNs <= p.EntryNs {
				if err := rp.BlockIO(&s.ios[j]); err != nil {
					return err
				}
				j++
			}
			if err := rp.Idle(p); err != nil {
				return err
			}
			each()
		}
		for ; j < len(s.ios); j++ {
			if err := rp.BlockIO(&s.ios[j]); err != nil {
				return err
			}
		}
		return nil
	}
}

// prepassSynth gives the replay its prepass over a synthetic trace, as
// the command's first Scan would.
func prepassSynth(rp *Replay, s *synth) {
	v, ok := rp.Prepass(nil)
	if !ok {
		return
	}
	for i := range s.ios {
		if v.BlockIO != nil {
			v.BlockIO(&s.ios[i])
		}
	}
	for i := range s.periods {
		if v.Idle != nil {
			v.Idle(&s.periods[i])
		}
	}
}

// feedFile replays a trace file through trace.Open and Scan, as the
// command does.
func feedFile(path string) func(rp *Replay, each func()) error {
	return func(rp *Replay, each func()) error {
		r, err := trace.Open(path)
		if err != nil {
			return err
		}
		defer r.Close()
		rp.SetWindow(trace.SnapshotWindow(r.Meta, r.End)) // as whatif does
		if v, ok := rp.Prepass(r.End); ok {
			if err := r.Scan(v); err != nil {
				return err
			}
		}
		return r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
			if err := rp.Idle(p); err != nil {
				return err
			}
			each()
			return nil
		}, BlockIO: rp.BlockIO})
	}
}

// goldenSpecs: every governor, every modifier, and the kernel= variants.
var goldenSpecs = []string{
	"menu", "teo", "ladder", "oracle",
	"menu+margin=25", "menu+margin=0", "menu+blkqos=10us/3ms", "menu+qos=5us",
	"menu+poll=tick16", "menu+poll=first-residency", "menu+poll=min10us", "menu+poll=37us",
	"menu+maxcstate=2", "menu+disable=C1E",
	"menu+kernel=5.4", "menu+kernel=6.5", "menu+kernel=6.12", "menu+kernel=6.16", "menu+kernel=6.17",
	"menu+kernel=6.18.0", "menu+kernel=6.18", "menu+kernel=6.19", "menu+kernel=7.0", "menu+kernel=7.1",
	"menu+kernel=7.1+margin=10",
	"teo+qos=20us", "teo+maxcstate=1", "teo+blkqos=5us/1ms", "teo+poll=tick16", "teo+disable=POLL",
	"teo+kernel=6.1", "teo+kernel=6.12", "teo+kernel=6.19", "teo+kernel=7.0", "teo+kernel=7.3",
	"ladder+qos=3us", "ladder+disable=C1", "ladder+poll=first-residency",
	"oracle+qos=10us", "oracle+blkqos=2us/500us", "oracle+disable=C6",
}

func goldenCases(t *testing.T) []goldenCase {
	synth := goldenSynth(42, 4, 40_000, 4, 20_000)
	synthHP := goldenSynth(43, 2, 30_000, 2, 200_000)
	synthSeq := genTrace(5, 4, 1<<13, 20_000)
	meta618 := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	metaQoS := &trace.Metadata{KernelRelease: "6.12.9", HZ: 1000, FormatVersion: 1,
		PMQoS:    trace.PMQoS{CPUDMALatencyUs: 150, ResumeLatencyUs: []int64{-1, 20, 2, -1}},
		HaltPoll: &trace.HaltPollParams{GuestHaltPollNs: 100_000, Grow: 3, Shrink: 4, GrowStart: 10_000, AllowShrink: true}}
	hp := []string{"haltpoll", "menu", "teo", "ladder", "oracle", "menu+poll=50us", "haltpoll+qos=0",
		"haltpoll+blkqos=0us/2ms", "teo+kernel=6.12", "menu+margin=25"}
	var cases []goldenCase
	add := func(name string, prof *Profile, meta *trace.Metadata, specs []string, feed func(*Replay, func()) error) {
		cases = append(cases, goldenCase{name, prof, meta, specs, feed})
	}
	spr := mustBuiltin(t, "spr", 250)
	add("synth/spr", spr, meta618, goldenSpecs, feedSynth(synth))
	add("synth/spr-1000hz", mustBuiltin(t, "spr", 1000), metaQoS, goldenSpecs, feedSynth(synth))
	hswSpecs := append([]string{"menu+disable=C3,C7s", "teo+disable=C1E,C6", "menu+maxcstate=5"}, goldenSpecs...)
	add("synth/hsw", mustBuiltin(t, "hsw", 250), meta618, hswSpecs, feedSynth(synth))
	add("synth/epyc", mustBuiltin(t, "epyc", 100), meta618, []string{"menu", "teo", "ladder", "oracle", "menu+kernel=6.12", "menu+margin=50"}, feedSynth(synth))
	add("synth/haltpoll", mustBuiltin(t, "haltpoll", 250), meta618, hp, feedSynth(synthHP))
	add("synth/haltpoll-params", mustBuiltin(t, "haltpoll", 250), metaQoS, hp, feedSynth(synthHP))
	rec, err := Recorded(meta618)
	if err != nil {
		t.Fatal(err)
	}
	withRec := append([]string{"recorded"}, hp...)
	add("synth/recorded", rec, meta618, withRec, feedSynth(synthHP))
	// The same with a driver and its table: a governor chose, so every
	// policy's agreement is pinned too (GovernorChose).
	hpTable := []trace.StateInfo{{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "haltpoll idle", ExitLatencyNs: 1000, TargetResidencyNs: 1000}}
	metaDrv := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250, CPUIdleDriver: "haltpoll", CPUIdleGovernor: "haltpoll",
		States: []trace.CPUStates{{CPU: 0, States: hpTable}}}
	recDrv, err := Recorded(metaDrv)
	if err != nil {
		t.Fatal(err)
	}
	add("synth/recorded-driver", recDrv, metaDrv, withRec, feedSynth(synthHP))
	add("seq/spr", spr, meta618, []string{"menu", "teo", "ladder", "oracle", "menu+margin=25", "menu+blkqos=10us/3ms"}, feedSynth(synthSeq))

	demo := filepath.Join("..", "..", "testdata", "demo.trace")
	r, err := trace.Open(demo)
	if err != nil {
		t.Fatalf("demo trace: %v", err)
	}
	dmeta := r.Meta
	r.Close()
	drec, err := Recorded(dmeta)
	if err != nil {
		t.Fatal(err)
	}
	add("demo/recorded", drec, dmeta, withRec, feedFile(demo))
	add("demo/spr", spr, dmeta, goldenSpecs, feedFile(demo))
	add("demo/haltpoll", mustBuiltin(t, "haltpoll", dmeta.HZ), dmeta, hp, feedFile(demo))
	return cases
}

func TestReplayGolden(t *testing.T) {
	var got []string
	for _, c := range goldenCases(t) {
		got = append(got, runGolden(t, c))
	}
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(goldenFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatalf("%v (create it with -update-golden)", err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		want = append(want, sc.Text())
	}
	if len(want) != len(got) {
		t.Fatalf("golden has %d cases, replay %d", len(want), len(got))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("golden mismatch:\n got  %s\n want %s", got[i], want[i])
		}
	}
}
