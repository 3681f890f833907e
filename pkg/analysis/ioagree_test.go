package analysis

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// What whatif says about IO must agree with what stats says about the same
// trace (issue 10 item 1): the same completions woke an idle CPU, the
// recorded policy gives stats' own IO latency, and a policy with a cheaper
// state takes exactly the exit-latency difference off each completion that
// woke one. The file holds every idle period before any IO request, far
// more than one chunk apart, as a long recording's chunks can be.
func TestWhatifIOAgreesWithStats(t *testing.T) {
	meta := driverMeta()
	rng := rand.New(rand.NewPCG(7, 8))
	var ps []trace.IdlePeriod
	var ios []trace.BlockIO
	for cpu := uint32(0); cpu < 2; cpu++ {
		tm := uint64(1_000_000)
		for range 30_000 {
			d := uint64(300*us + rng.IntN(2_000*us))
			p := period(cpu, 2, tm, d) // C6, exit latency 133 µs
			switch rng.IntN(3) {
			case 0: // a completion's interrupt ended it, inside (HLT) or after (MWAIT)
				p.WakeCause, p.WakeIRQ = trace.WakeIRQ, 24
				done := p.ExitNs - 10*us + uint64(rng.IntN(40*us))
				io := completion(cpu, done)
				io.IssueNs = done - 250*us // the exit latency is part of it
				ios = append(ios, io)
			case 1: // a completion on a busy CPU
				ios = append(ios, completion(cpu, p.ExitNs+100*us))
			}
			ps = append(ps, p)
			tm += d + 200*us
		}
	}
	scan := scanOf(ps, ios)

	st, err := ComputeStats(meta, nil, nil, scan)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := model.Recorded(meta)
	if err != nil {
		t.Fatal(err)
	}
	var pols []model.Policy
	for _, spec := range []string{"recorded", "oracle+disable=C6"} {
		p, err := model.ParsePolicy(spec)
		if err != nil {
			t.Fatal(err)
		}
		pols = append(pols, p)
	}
	rp, err := model.NewReplay(prof, meta, pols)
	if err != nil {
		t.Fatal(err)
	}
	if err := scan(trace.Visitor{Idle: rp.Idle, BlockIO: rp.BlockIO}); err != nil {
		t.Fatal(err)
	}
	res, err := rp.Finish()
	if err != nil {
		t.Fatal(err)
	}

	woke := st.IO.WokeIdleCPU
	if woke < 15_000 || woke >= st.IO.Requests {
		t.Fatalf("stats: %d of %d completions woke an idle CPU; the trace has about 20000 that did", woke, st.IO.Requests)
	}
	for _, r := range res {
		if r.IOWokeIdle == nil || *r.IOWokeIdle != woke {
			t.Errorf("%s: io_woke_idle %v, stats' woke_idle_cpu %d", r.Policy, r.IOWokeIdle, woke)
		}
	}
	rec, cheap := res[0].IOLatencyNs, res[1].IOLatencyNs
	if s := st.IO.LatencyNs; rec == nil || rec.Count != s.Count || rec.Mean != s.Mean || rec.Max != s.Max {
		t.Errorf("recorded's IO latency %+v, stats' %+v", rec, s)
	}
	// C1 (2 µs) instead of C6 (133 µs) on every completion that woke one.
	wantCut := float64(woke) * float64(133*us-2*us) / float64(st.IO.Requests)
	if got := rec.Mean - cheap.Mean; math.Abs(got-wantCut) > 1e-6*wantCut {
		t.Errorf("C6 disabled takes %.1f ns off the IO mean, want %.1f", got, wantCut)
	}
}
