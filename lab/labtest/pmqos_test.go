//go:build lab

package labtest

import (
	"fmt"
	"math"
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
//     CPU's period the change's wake-up ends, is in a state whose exit
//     latency exceeds 2 µs;
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

	inside, outside, straddling := deepPeriods(t, r, from, to)
	inWindow, deepInWindow := inside[0], inside[1]
	t.Logf("limit %d µs for %.2f s: %d periods entered in it, %d in a state that does not fit; each CPU's period on the change: %s", pmQoSLimitUs, float64(to-from)/1e9, inWindow, deepInWindow, straddling)
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
// Each CPU's first period to end after the change counts in neither: the
// governor may have chosen it before the change (select, then the
// cpu_idle event), and the change's wake-up of idle CPUs (the kernel's
// wake_up_all_idle_cpus) ends it at once. CI met one such C6 period in
// 10,356. They are returned, described, for the log.
func deepPeriods(t *testing.T, r *trace.Reader, from, to uint64) (in, out [2]int, straddling string) {
	t.Helper()
	prof := r.Meta.States[0].States
	settled := map[uint32]bool{}
	var onChange []string
	if err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
		deep := int(p.State) < len(prof) && prof[p.State].ExitLatencyNs > pmQoSLimitUs*1000
		if !settled[p.CPU] && p.ExitNs >= from && p.EntryNs < to {
			// Records reach the file in order on each CPU.
			settled[p.CPU] = true
			onChange = append(onChange, fmt.Sprintf("cpu%d %s entered %+.1f µs, %.1f µs", p.CPU, prof[min(int(p.State), len(prof)-1)].Name, (float64(p.EntryNs)-float64(from))/1e3, float64(p.ExitNs-p.EntryNs)/1e3))
			if p.EntryNs > from {
				return nil
			}
		}
		c := &out
		if p.EntryNs > from && p.EntryNs < to {
			c = &in
		}
		c[0]++
		if deep {
			c[1]++
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	return in, out, strings.Join(onChange, "; ")
}
