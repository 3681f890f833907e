//go:build lab

package labtest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/fidelity"
	"github.com/idletrace/idletrace/pkg/trace"
)

// pmQoSLimitUs is the global latency limit lab/workloads/pmqos.sh holds
// from the second to the fifth second: on icx, POLL and C1 fit, C1E (4 µs)
// and C6 (170 µs) do not.
const pmQoSLimitUs = 2

// TestLabPMQoS holds the replay to the kernel where the latency limit
// changes during the recording (model review B7): Debian's 6.12 menu on
// icx's table runs fidelity.sh's wake-ups while a process holds
// cpu_dma_latency at 2 µs for three seconds. It judges:
//   - the recorder: the trace holds the limit's change to 2 µs and back,
//     in that order, about three seconds apart;
//   - the kernel obeyed it: no period entered inside the window (from the
//     change, which wakes every idle CPU, to the removal), but for each
//     CPU's two at the window's edges (deepPeriods), is in a state whose
//     exit latency exceeds 2 µs;
//   - the replay that applies the changes keeps the rows' bars (agreement
//     ≥ 0.98 with the kernel's choices, each state's share of idle time
//     within 2 points);
//   - the same recording replayed as if the changes were unknown (the
//     start's limit throughout: how every replay read it before) puts idle
//     time in C1E or C6 inside the window, where the kernel could not,
//     and misses the kernel's choices there: its agreement is at least
//     half the window's deep choices lower.
func TestLabPMQoS(t *testing.T) {
	root := repoRoot(t)
	in := labInput(t, root, "lab/workloads/pmqos.sh")
	addScript(t, root, in, "lab/workloads/fidelity.sh")
	defer labRun(t, "6.12")()
	r, _ := labTrace(t, "pmqos-6.12-icx-menu", func() string {
		return runLab(t, root, in, "6.12", "icx", "menu", "idletrace record -q -o /out/t.trace -- ./pmqos.sh >/dev/null")
	})
	defer r.Close()

	changes, _, err := r.PMQoSChanges(16)
	if err != nil {
		t.Fatal(err)
	}
	var from, to uint64
	for _, q := range changes {
		switch {
		case q.CPU != trace.PMQoSGlobal:
		case q.LimitUs == pmQoSLimitUs && from == 0:
			from = q.TimeNs
		case q.LimitUs >= trace.PMQoSNoGlobalLimitUs && from != 0 && to == 0:
			to = q.TimeNs
		}
	}
	if from == 0 || to == 0 || to-from < 2_500_000_000 || to-from > 3_500_000_000 {
		t.Fatalf("the trace's PM QoS changes %+v: want %d µs, then none about 3 s later", changes, pmQoSLimitUs)
	}

	inside, outside, unjudged := deepPeriods(t, r, from, to)
	inWindow, deepInWindow := inside[0], inside[1]
	t.Logf("limit %d µs for %.2f s: %d periods entered in it, %d in a state that does not fit; not judged (chosen under an unknown limit): %s", pmQoSLimitUs, float64(to-from)/1e9, inWindow, deepInWindow, unjudged)
	if inWindow < 1000 || deepInWindow > 0 {
		t.Fatalf("%d periods entered while the limit held, %d of them in a deeper state: want over 1000, none", inWindow, deepInWindow)
	}

	applied, err := fidelity.Replay(r, "menu", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Meta.Inputs.PMQoSTrace = false // as a recorder that did not trace them
	ignored, err := fidelity.Replay(r, "menu", nil)
	if err != nil {
		t.Fatal(err)
	}
	kernel := applied.Recorded.StateShare
	for _, o := range []struct {
		name string
		out  *fidelity.Outcome
	}{{"changes applied", applied}, {"changes unknown", ignored}} {
		t.Logf("%s: agreement %.4f; share model %s, kernel %s", o.name, *o.out.Model.Agreement, shares(o.out.Model.StateShare), shares(kernel))
	}
	if a := *applied.Model.Agreement; a < 0.98 {
		t.Errorf("changes applied: agreement %.4f, want ≥ 0.98", a)
	}
	for state, k := range kernel {
		if m := applied.Model.StateShare[state]; math.Abs(m-k) > 0.02 {
			t.Errorf("changes applied: %s's share of idle time: model %.3f, kernel %.3f (more than 2 points apart)", state, m, k)
		}
	}
	// Inside the window the kernel chose among POLL and C1 only; a replay
	// without the change chooses as outside it, deeper where the
	// wake-ups are far apart.
	lost := *applied.Model.Agreement - *ignored.Model.Agreement
	t.Logf("agreement lost without the changes: %.4f (%.0f selections)", lost, lost*float64(applied.Model.Selections))
	deepShareOutside := float64(outside[1]) / float64(max(outside[0], 1))
	if lost*float64(applied.Model.Selections) < 0.5*float64(inWindow)*deepShareOutside {
		t.Errorf("without the changes the replay agrees with the kernel almost as well (%.4f against %.4f): the window is not what sets the states", *ignored.Model.Agreement, *applied.Model.Agreement)
	}
}

// deepPeriods counts the periods entered inside (from, to) and outside
// it, each with how many the kernel put in a state whose exit latency the
// window's limit rules out (outside: what the window's periods would have
// had without it).
//
// On each CPU two periods count in neither, as the limit they were chosen
// under is not known. The first to end after the change: the governor may
// have chosen it before the change (select, then the cpu_idle event), and
// the change's wake-up of idle CPUs (the kernel's wake_up_all_idle_cpus)
// ends it at once; CI met one such C6 period in 10,356. The last entered
// before the removal: pm_qos_update_target moves the limit before its
// tracepoint, which gives the removal's time, so a governor may read the
// loosened limit just before it. They are returned, described, for the log.
func deepPeriods(t *testing.T, r *trace.Reader, from, to uint64) (in, out [2]int, unjudged string) {
	t.Helper()
	prof := r.Meta.States[0].States
	byCPU := map[uint32][]trace.IdlePeriod{}
	if err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
		byCPU[p.CPU] = append(byCPU[p.CPU], *p)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for cpu, ps := range byCPU {
		slices.SortFunc(ps, func(a, b trace.IdlePeriod) int { return cmp.Compare(a.EntryNs, b.EntryNs) })
		atChange := slices.IndexFunc(ps, func(p trace.IdlePeriod) bool { return p.ExitNs >= from })
		beforeRemoval := -1
		for i, p := range ps {
			if p.EntryNs < to {
				beforeRemoval = i
			}
		}
		for i, p := range ps {
			inside := p.EntryNs > from && p.EntryNs < to
			if inside && (i == atChange || i == beforeRemoval) {
				edge := "on the change"
				if i == beforeRemoval {
					edge = "before the removal"
				}
				rel := func(ns uint64) float64 { return (float64(ns) - float64(from)) / 1e3 }
				woken := p.WakeCause.String()
				if p.WakeRequestNs != 0 {
					woken += fmt.Sprintf(" asked at %+.1f µs", rel(p.WakeRequestNs))
				}
				skipped = append(skipped, fmt.Sprintf("cpu%d %s: %s entered %+.1f µs after the change, %.1f µs long, woken by %s", cpu, edge,
					prof[min(int(p.State), len(prof)-1)].Name, rel(p.EntryNs), float64(p.ExitNs-p.EntryNs)/1e3, woken))
				continue
			}
			c := &out
			if inside {
				c = &in
			}
			c[0]++
			if int(p.State) < len(prof) && prof[p.State].ExitLatencyNs > pmQoSLimitUs*1000 {
				c[1]++
			}
		}
	}
	slices.Sort(skipped)
	return in, out, strings.Join(skipped, "; ")
}
