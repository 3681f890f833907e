package analysis

import (
	"math"
	"math/rand/v2"
	"strings"
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
	res, _ := replayOn(t, meta, scan, trace.IOFilter{}, "recorded", "oracle+disable=C6")

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

// The latency a waiting process sees changes under a policy by the exit
// latency of the CPU the completion woke and that of the CPU the process
// was woken on (issue 10 item 2): with C6 (133 µs) replaced by C1 (2 µs)
// on both, by 2 × 131 µs; where the process runs on the completing CPU,
// by one. whatif's recorded task latency is stats'.
func TestWhatifTaskIOLatency(t *testing.T) {
	meta := driverMeta()
	meta.Inputs.TaskIO = true
	var ps []trace.IdlePeriod
	var ios []trace.BlockIO
	const n = 2000
	for k := range n {
		tm := uint64(1_000_000 + k*3_000*us)
		d := uint64(800*us + (k%7)*100*us)
		dev := period(0, 2, tm, d) // C6 on CPU 0, ended by the device interrupt
		dev.WakeCause, dev.WakeIRQ = trace.WakeIRQ, 24
		io := completion(0, dev.ExitNs-5*us) // the handler inside the stay (HLT)
		io.IssueNs = tm - 100*us
		io.Tid, io.Comm = 4242, "fio"
		io.TaskWokenNs = io.CompleteNs + 3*us
		if k%2 == 0 { // the process sleeps on CPU 1, idle in C6 until woken
			task := period(1, 2, tm, d+20*us)
			task.WakeCause = trace.WakeIPIResched
			ps = append(ps, dev, task)
			io.TaskCPU, io.TaskRunNs = 1, task.ExitNs+10*us
		} else { // on CPU 0 itself
			ps = append(ps, dev)
			io.TaskCPU, io.TaskRunNs = 0, io.TaskWokenNs+10*us
		}
		ios = append(ios, io)
	}
	scan := scanOf(ps, ios)
	st, err := ComputeStats(meta, nil, nil, scan)
	if err != nil {
		t.Fatal(err)
	}
	res, rp := replayOn(t, meta, scan, trace.IOFilter{}, "recorded", "oracle+disable=C6")
	stTask, rec, cheap := st.IO.TaskLatencyNs, res[0].TaskIOLatencyNs, res[1].TaskIOLatencyNs
	if stTask == nil || stTask.Count != n || rec == nil || cheap == nil {
		t.Fatalf("task latency: stats %+v, recorded %+v, C6 off %+v; want %d requests", stTask, rec, cheap, n)
	}
	if rec.Count != stTask.Count || rec.Mean != stTask.Mean || rec.Max != stTask.Max {
		t.Errorf("recorded's task latency %+v, stats' %+v", rec, stTask)
	}
	if st := rp.Stats(); st.TaskIO != n || st.TaskWokeIdle != n/2 || st.IOWokeIdle != n {
		t.Errorf("replay counted %d task waits, %d task CPUs woken, %d completions woke; want %d, %d, %d", st.TaskIO, st.TaskWokeIdle, st.IOWokeIdle, n, n/2, n)
	}
	want := float64(131*us) * 1.5 // half the requests pay two exit latencies, half one
	if got := rec.Mean - cheap.Mean; math.Abs(got-want) > 1e-6*want {
		t.Errorf("C6 disabled takes %.1f ns off the task latency mean, want %.1f", got, want)
	}
	// The device's own time: each read's latency (issued 100 µs before
	// the stay, completed 5 µs before its end) less the 133 µs C6 exit it
	// woke through, whatever the policy.
	for _, r := range res {
		dev := r.IODeviceLatencyNs
		if dev == nil || dev.Count != n {
			t.Fatalf("%s: device latency %+v, want %d requests", r.Policy, dev, n)
		}
		if want := uint64(95*us + 1400*us - 133*us); dev.Max != want { // the longest stay, 800 + 6×100 µs
			t.Errorf("%s: device latency max %d ns, want %d", r.Policy, dev.Max, want)
		}
		if want := res[0].IOLatencyNs.Mean - float64(133*us); math.Abs(dev.Mean-want) > 1e-6*want {
			t.Errorf("%s: device latency mean %.1f ns, want the recorded IO latency less C6's exit latency, %.1f", r.Policy, dev.Mean, want)
		}
	}
}

// The same IO filter in both commands selects the same requests: counts,
// latencies and wake-ups agree, and the devices' counts still cover all.
func TestIOFilterAgrees(t *testing.T) {
	meta := driverMeta()
	var ps []trace.IdlePeriod
	var ios []trace.BlockIO
	for k := range 3000 {
		p := irqPeriod(uint32(k%2), uint64(1_000_000+k*1_000*us), 500*us)
		ps = append(ps, p)
		io := completion(p.CPU, p.ExitNs-uint64(k%3)*10*us)
		io.IssueNs = io.CompleteNs - uint64(100+k%50)*us
		io.Tid, io.Tgid, io.Comm = 7, 7, []string{"fio", "dd", "fio"}[k%3]
		ios = append(ios, io)
	}
	f, err := trace.ParseIOFilter("comm=fio", meta)
	if err != nil {
		t.Fatal(err)
	}
	scan := scanOf(ps, ios)
	b := NewStatsBuilder(meta, nil)
	b.SetIOFilter(f)
	if err := scan(b.Visitor()); err != nil {
		t.Fatal(err)
	}
	st := b.Finish(nil)
	res, _ := replayOn(t, meta, scan, f, "recorded")
	if st.IO.Requests != 2000 || st.IO.Filter != "comm=fio" || st.IO.Devices[0].Requests != 3000 {
		t.Fatalf("stats: %d requests under %q, device %d; want 2000 of 3000", st.IO.Requests, st.IO.Filter, st.IO.Devices[0].Requests)
	}
	if r := res[0]; r.IOLatencyNs.Count != st.IO.Requests || r.IOLatencyNs.Mean != st.IO.LatencyNs.Mean || *r.IOWokeIdle != st.IO.WokeIdleCPU || st.IO.WokeIdleCPU != 2000 {
		t.Errorf("whatif %+v woke %d; stats %+v woke %d", r.IOLatencyNs, *r.IOWokeIdle, st.IO.LatencyNs, st.IO.WokeIdleCPU)
	}

	// A filter that selects nothing (a mistyped name) says so, not that
	// no request completed.
	none, err := trace.ParseIOFilter("comm=fi0", meta)
	if err != nil {
		t.Fatal(err)
	}
	b = NewStatsBuilder(meta, nil)
	b.SetIOFilter(none)
	if err := scan(b.Visitor()); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := RenderStats(&out, b.Finish(nil), "text"); err != nil {
		t.Fatal(err)
	}
	if want := "None of the 3000 block IO requests completed in the window matched the filter."; !strings.Contains(out.String(), want) {
		t.Errorf("a filter that selects nothing: the report lacks %q:\n%s", want, out.String())
	}
}

// replayOn replays scan's records on the trace's recorded profile under
// specs, with the IO filter f, as whatif does.
func replayOn(t *testing.T, meta *trace.Metadata, scan scanFunc, f trace.IOFilter, specs ...string) ([]model.Result, *model.Replay) {
	t.Helper()
	prof, err := model.Recorded(meta)
	if err != nil {
		t.Fatal(err)
	}
	var pols []model.Policy
	for _, spec := range specs {
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
	rp.SetIOFilter(f)
	if err := scan(trace.Visitor{Idle: rp.Idle, BlockIO: rp.BlockIO}); err != nil {
		t.Fatal(err)
	}
	res, err := rp.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return res, rp
}
