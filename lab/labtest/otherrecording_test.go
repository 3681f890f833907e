//go:build lab

package labtest

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idletrace/idletrace/internal/fidelity"
	"github.com/idletrace/idletrace/internal/labrows"
	"github.com/idletrace/idletrace/pkg/trace"
)

// This file sorts after fidelity_test.go on purpose: go test runs the
// fidelity rows first, so that those on Debian's kernels run while the lab
// kernel builds.

// crossCase is one kernel and table on which the same workload is recorded
// under each governor, and each governor's model replayed on every other
// governor's recording is held to that governor's own recording (issue 9
// item 5): the replay of menu on a ladder trace must cost what menu itself
// cost.
type crossCase struct {
	kernel, profile string
	governors       []string
	// workload is the script in lab/workloads the VMs run (crossgov.sh
	// when empty).
	workload string
	// env is added to scripts/lab.sh's environment.
	env []string
}

// name is the case as rows and subtests call it: kernel/profile, and the
// workload when it is not crossgov.sh.
func (c crossCase) name() string {
	if c.workload == "" {
		return c.kernel + "/" + c.profile
	}
	return c.kernel + "/" + c.profile + " " + c.workloadName()
}

// traceSuffix tells a kept recording of the workload from crossgov.sh's.
func (c crossCase) traceSuffix() string {
	if c.workload == "" {
		return ""
	}
	return "-" + c.workloadName()
}

// workloadName is the script's name without .sh, as IDLETRACE_LAB_CROSS,
// the rows and the kept traces name it.
func (c crossCase) workloadName() string { return strings.TrimSuffix(c.script(), ".sh") }

func (c crossCase) script() string {
	if c.workload == "" {
		return "crossgov.sh"
	}
	return c.workload
}

// crossCases: ladder and menu on Debian's 6.12, the three on the lab
// kernel; IDLETRACE_LAB_CROSS narrows them (crossWanted). gotTickCase
// (gottick_test.go) is one more, judged apart.
var crossCases = []crossCase{
	{"6.12", "icx", []string{"ladder", "menu"}, "", nil},
	{"lab", "icx", []string{"ladder", "menu", "teo"}, "", nil},
	{"lab", "seed000", []string{"ladder", "menu", "teo"}, "", nil},
}

// crossBarPoints is issue 9's bar: each state's share of idle time, and
// above and below as shares of the selections, within 5 points.
const crossBarPoints = 5.0

// crossRow is one ordered pair's figures.
type crossRow = labrows.Cross

// crossWanted narrows a case to IDLETRACE_LAB_CROSS: "kernel/profile"
// entries, "*" for either part, optionally "/workload" (the script's name
// without .sh: crossgov, gottick; every workload without it), each
// optionally ":gov,gov" for a subset of the case's governors (at least
// two). ok is false when the case is not wanted.
func crossWanted(c crossCase) (govs []string, ok bool) {
	sel := os.Getenv("IDLETRACE_LAB_CROSS")
	if sel == "" {
		return c.governors, true
	}
	for _, s := range strings.Fields(sel) {
		s, only, _ := strings.Cut(s, ":")
		parts := strings.Split(s, "/")
		if len(parts) < 2 || len(parts) > 3 {
			continue
		}
		k, p := parts[0], parts[1]
		if !(k == "*" || k == c.kernel) || !(p == "*" || p == c.profile) ||
			len(parts) == 3 && parts[2] != c.workloadName() {
			continue
		}
		if only == "" {
			return c.governors, true
		}
		for _, g := range c.governors {
			if slices.Contains(strings.Split(only, ","), g) {
				govs = append(govs, g)
			}
		}
		return govs, len(govs) >= 2
	}
	return nil, false
}

// TestLabCrossGovernor records lab/workloads/crossgov.sh under each of a
// case's governors and replays every governor's model on every recording.
// The workload sets its idle lengths by its own timers (lab/timerload):
// the replay keeps the recorded periods as they are, so only a workload
// whose periods do not depend on the governor can hold it to another
// recording (lab/README.md: what the first-order replay cannot follow).
// Results go to IDLETRACE_LAB_CROSS_RESULTS (a JSON file) when set.
//
// The recorder runs on a third vCPU (crossCPUs) and records CPUs 0 and 1
// only. On the workload's own CPUs its wake-ups (the 100 ms read deadline,
// the Go runtime's sysmon sleeping 20 µs at a time after each read) ended
// idle periods at a phase to the workload that held for a whole run and
// differed between runs. Ladder demotes on each stay in its deepest state
// shorter than twice that state's exit latency (266 µs on seed 000's C6,
// 340 µs on icx's) and spends the next four stays, milliseconds each here,
// a state shallower, so those wake-ups set ladder's shallow share: on seed
// 000 its own C3 share was 3.0–3.5 % in four of five runs and 8.5 % in the
// other (C1E on icx 3.5–8.6 %), and its model on menu's and teo's
// recordings, demoting about as often on the same kind of stays, drew from
// the same spread (3.6–6.1 %; icx 4.4–11.7 %): two recordings of one
// governor differed by up to 6.1 points, menu on a ladder recording by
// 7.4. Isolated, ladder demoted 2–7 times a run instead of 27–44, and
// every pair of 4 ladder, 3 menu and 2 teo recordings on seed 000 held
// within 3.2 points (3, 2 and 1 on icx: 3.6); three runs of this test
// after the change: worst pairs 3.4, 3.0 and 4.1 points (the last ladder
// on teo's recording on the lab kernel's icx, whose teo recording had 56
// stays shorter than C6's exit latency, 17 of them ended by the tick,
// against 6 in ladder's). The pairs still catch a model error: rejudged
// with the replay's exit-latency conversion of a stay dropped, or with
// ladder demoting on stays shorter than the target residency, the same
// recordings fail by 5.2–11.3 points. Two other fixes were tried or
// weighed: short sleeps in the workload for ladder to demote on (timerload
// with a 20 or 50 µs nap every 20 wake-ups) hung on whether the CPU was
// idle before the nap's timer under TCG and were worse (ladder on teo 9.9
// points); and judging against the kernel's run-to-run spread (ladder
// recorded twice) doubles the recordings and widens the bar exactly where
// the recordings disagree. Since 2026-12-07 the models start warm (the
// periods before the counters' window are their history: fidelity.Replay),
// where ladder's began in C1 (its own recording 1.5-4.8 points off, now
// 0.0-0.3), and a recording every failing pair involves is made once more
// (disturbedRecordings); lab/README.md has the runs.
func TestLabCrossGovernor(t *testing.T) {
	root := repoRoot(t)
	in := labInput(t, root, "lab/workloads/crossgov.sh")
	addScript(t, root, in, "lab/workloads/gottick.sh")
	buildTimerload(t, root, in)
	startLabKernel(t, root)
	var mu sync.Mutex
	var rows []crossRow
	t.Cleanup(func() {
		path := os.Getenv("IDLETRACE_LAB_CROSS_RESULTS")
		if path == "" {
			return
		}
		slices.SortFunc(rows, func(a, b crossRow) int {
			return strings.Compare(a.Case+a.Replayed+a.OnTraceOf, b.Case+b.Replayed+b.OnTraceOf)
		})
		if err := labrows.Write(path, rows); err != nil {
			t.Error(err)
		}
	})
	for _, c := range crossCases {
		govs, ok := crossWanted(c)
		if !ok {
			continue
		}
		c.governors = govs
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			r := runCrossCase(t, root, in, c)
			mu.Lock()
			rows = append(rows, r...)
			mu.Unlock()
		})
	}
	if _, ok := crossWanted(gotTickCase); ok {
		t.Run(gotTickCase.name(), func(t *testing.T) {
			t.Parallel()
			runGotTick(t, root, in)
		})
	}
}

// crossCPUs is the VMs' vCPUs: the workload's CPUs 0 and 1, and CPU 2 for
// the recorder (crossScript), whose wake-ups would otherwise end idle
// periods of the workload's CPUs (TestLabCrossGovernor).
const crossCPUs = 3

// crossScript records the workload on CPUs 0 and 1 from CPU 2 (the
// workload's threads pin themselves), with POLL disabled on every CPU unless
// IDLETRACE_LAB_CROSS_POLL=1. Under single-threaded TCG a polling vCPU
// delays the guest's timer interrupts: idle entries that find their next
// timer already overdue were 6–8 % under menu and teo against 2–3 % under
// ladder on icx, and each overdue timer invites a poll that runs out. So
// with POLL the recordings of polling governors differ from the others' by
// the emulator, not the workload, in the share of too-shallow stays (5–16
// points apart in some pairs); without it every pair of three cases held
// within 3.3 points (lab/README.md). The replay takes the disabled state
// from the trace's metadata, as for any machine.
func crossScript(workload string) string {
	record := "taskset -c 2 idletrace record -q --cpus 0,1 -o /out/t.trace -- ./" + workload + " >/dev/null"
	if os.Getenv("IDLETRACE_LAB_CROSS_POLL") == "1" {
		return record
	}
	return pollOff + " && " + record
}

// crossPollNote marks the case's rows with the POLL setting they ran under.
func crossPollNote() string {
	if os.Getenv("IDLETRACE_LAB_CROSS_POLL") == "1" {
		return ""
	}
	return ", POLL off"
}

func runCrossCase(t *testing.T, root, in string, c crossCase) []crossRow {
	traces := recordCross(t, root, in, c, c.governors, "")
	rows := crossRows(t, c, traces)
	// Kept traces rejudged have no second recording to judge.
	if again := disturbedRecordings(rows); len(again) > 0 && os.Getenv("IDLETRACE_LAB_REJUDGE") == "" {
		for _, row := range rows {
			if !row.Pass {
				t.Logf("first recordings: %s", row.failure())
			}
		}
		t.Logf("every failing pair involves the %s recording: recording it once more (kept as ...-again) and judging every pair again", strings.Join(again, " and "))
		for g, r := range recordCross(t, root, in, c, again, "-again") {
			traces[g] = r
		}
		rows = crossRows(t, c, traces)
	}
	for _, row := range rows {
		if !row.Pass {
			t.Error(row.failure())
		}
	}
	return rowsOnly(rows)
}

// disturbedRecordings names the recordings every failing pair involves,
// as the trace replayed on or as the replayed governor's own: the
// recordings to make again (runCrossCase), none when all pairs pass or
// the failures share no recording.
//
// Why one recording may be made again: in CI on 2026-12-07 menu's
// recording on seed 000's table had 6.4 % of its selections too deep by
// the kernel's own counters, where its 14 other recordings that day and
// in four rehearsals had 0.2-0.6 %, and teo's model replayed on it 5.4 %:
// the workload's periods, not a governor, had changed (ladder's model,
// demoting after the first short stay, 0.6 %), and three pairs failed by
// 5.1-6.1 points. Nothing in the models' reach: five runs here since,
// two of them beside three busy loops, had none. A model error is in
// every recording and fails again; a disturbed recording, made again,
// does not.
func disturbedRecordings(rows []judgedCross) []string {
	var common []string
	first := true
	for _, r := range rows {
		if r.Pass {
			continue
		}
		pair := []string{r.Replayed, r.OnTraceOf}
		if first {
			common, first = slices.Compact(slices.Sorted(slices.Values(pair))), false
			continue
		}
		common = slices.DeleteFunc(common, func(g string) bool { return !slices.Contains(pair, g) })
	}
	return common
}

// recordCross records c's workload under each of govs, in parallel (their
// group waits for them all); the readers close with t. suffix tells a
// second recording's kept trace from the first's.
func recordCross(t *testing.T, root, in string, c crossCase, govs []string, suffix string) map[string]*trace.Reader {
	var mu sync.Mutex
	traces := map[string]*trace.Reader{}
	t.Run("record", func(t *testing.T) {
		for _, g := range govs {
			t.Run(g, func(t *testing.T) {
				t.Parallel()
				defer labRun(t, c.kernel)()
				r, _ := labTrace(t, fmt.Sprintf("cross-%s-%s-%s%s%s", c.kernel, c.profile, g, c.traceSuffix(), suffix), func() string {
					return runLabCPUs(t, root, in, c.kernel, c.profile, g, crossCPUs, crossScript(c.script()), c.env...)
				})
				if r.Meta.CPUIdleGovernor != g || r.Meta.CPUIdleDriver != "idle_emu" {
					r.Close()
					t.Fatalf("the %s recording says driver %q, governor %q", g, r.Meta.CPUIdleDriver, r.Meta.CPUIdleGovernor)
				}
				mu.Lock()
				traces[g] = r
				mu.Unlock()
			})
		}
	})
	for _, r := range traces {
		t.Cleanup(func() { r.Close() })
	}
	if len(traces) != len(govs) {
		t.Fatalf("%d of %d recordings", len(traces), len(govs))
	}
	return traces
}

// judgedCross is a row with the figure its worst difference is in.
type judgedCross struct {
	crossRow
	worstWhat string
}

// failure says how far a failing pair is from its bar.
func (r judgedCross) failure() string {
	return fmt.Sprintf("%s replayed on the %s recording: %s %.1f points from %s's own recording (bar %.0f)",
		r.Replayed, r.OnTraceOf, r.worstWhat, r.Worst, r.Replayed, crossBarPoints)
}

func rowsOnly(rows []judgedCross) []crossRow {
	out := make([]crossRow, len(rows))
	for i, r := range rows {
		out[i] = r.crossRow
	}
	return out
}

// crossRows replays every governor's model on every recording and holds
// it to that governor's own recording (Pass: within crossBarPoints).
func crossRows(t *testing.T, c crossCase, traces map[string]*trace.Reader) []judgedCross {
	pct := func(n, of uint64) float64 { return 100 * float64(n) / float64(max(of, 1)) }
	var rows []judgedCross
	for _, b := range c.governors {
		own, err := fidelity.Replay(traces[b], b, nil)
		if err != nil {
			t.Fatal(err)
		}
		ownAbove := pct(own.KernelAbove, own.Recorded.Selections)
		ownBelow := pct(own.KernelBelow, own.Recorded.Selections)
		for _, a := range c.governors {
			o, err := fidelity.Replay(traces[a], b, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := o.Model
			row := crossRow{Case: c.name() + crossPollNote(), Replayed: b, OnTraceOf: a, Periods: m.IdlePeriods,
				Above: [2]float64{pct(m.Above, m.Selections), ownAbove}, Below: [2]float64{pct(m.Below, m.Selections), ownBelow},
				Share: m.StateShare, OwnShare: own.Recorded.StateShare}
			worst := "above"
			row.Worst = math.Abs(row.Above[0] - row.Above[1])
			if d := math.Abs(row.Below[0] - row.Below[1]); d > row.Worst {
				row.Worst, worst = d, "below"
			}
			for s, k := range own.Recorded.StateShare {
				if d := 100 * math.Abs(m.StateShare[s]-k); d > row.Worst {
					row.Worst, worst = d, s+"'s share"
				}
			}
			row.Pass = row.Worst <= crossBarPoints
			t.Logf("%s replayed on the %s recording (%d periods): above %.1f %% (own recording %.1f %%), below %.1f %% (%.1f %%), share %s (own %s); worst %.1f points (%s)",
				b, a, m.IdlePeriods, row.Above[0], row.Above[1], row.Below[0], row.Below[1],
				shares(m.StateShare), shares(own.Recorded.StateShare), row.Worst, worst)
			rows = append(rows, judgedCross{row, worst})
		}
	}
	return rows
}

func TestDisturbedRecordings(t *testing.T) {
	fail := func(replayed, onTraceOf string) judgedCross {
		return judgedCross{crossRow: crossRow{Replayed: replayed, OnTraceOf: onTraceOf}}
	}
	pass := func(replayed, onTraceOf string) judgedCross {
		r := fail(replayed, onTraceOf)
		r.Pass = true
		return r
	}
	for _, tc := range []struct {
		name string
		rows []judgedCross
		want []string
	}{
		{"all pass", []judgedCross{pass("menu", "ladder"), pass("teo", "menu")}, nil},
		// CI, 2026-12-07: menu's recording in every failing pair.
		{"one recording in every failure", []judgedCross{fail("menu", "ladder"), fail("menu", "teo"), fail("teo", "menu"), pass("ladder", "menu")}, []string{"menu"}},
		{"one failing pair", []judgedCross{pass("menu", "menu"), fail("ladder", "menu")}, []string{"ladder", "menu"}},
		{"own recording only", []judgedCross{fail("teo", "teo")}, []string{"teo"}},
		{"failures share none", []judgedCross{fail("menu", "ladder"), fail("teo", "ladder"), fail("teo", "menu")}, nil},
	} {
		if got := disturbedRecordings(tc.rows); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
