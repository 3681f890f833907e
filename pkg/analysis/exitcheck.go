package analysis

import (
	"fmt"
	"math"
	"strings"

	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// ExitLatencyCheck compares what a trace measured leaving each idle state
// (the remote wake-up latency stats reports: wake request → idle exit)
// with the exit latency the replayed table charges for it. On a VM the
// driver's table is nominal (cpuidle-haltpoll gives its halt state 1 µs;
// the guest took a median of 17-32 µs to wake from it on this project's
// machines), and a what-if on that table finds no cost in a state the
// workload pays tens of µs to leave: whatif says so, and names the
// profile that replays on the measured figures.
type ExitLatencyCheck struct {
	rules  *Rules
	byName map[string]*latency.Histogram
}

// Thresholds of the check: a state measured this often whose median is
// this many times its table's exit latency and this much more.
const (
	exitCheckMinWakeUps = 100
	exitCheckRatio      = 4
	exitCheckMinGapNs   = 10_000
)

// NewExitLatencyCheck counts as stats does on the trace whose metadata and
// end record (nil for a trace cut short) are given.
func NewExitLatencyCheck(meta *trace.Metadata, end *trace.End) *ExitLatencyCheck {
	return &ExitLatencyCheck{rules: NewRules(meta, end), byName: map[string]*latency.Histogram{}}
}

// Add counts p's wake-up latency where stats counts one (the rule of
// StatsBuilder.AddIdle's wake_latency_ns; TestExitLatencyCheckAgreesWithStats
// holds the two together).
func (c *ExitLatencyCheck) Add(p *trace.IdlePeriod) {
	if !c.rules.Valid(p) || !c.rules.IdleInWindow(p) {
		return
	}
	lat, ok := p.WakeLatencyNs()
	if !ok {
		return
	}
	name := c.rules.StateName(int(p.CPU), int(p.State))
	h := c.byName[name]
	if h == nil {
		h = &latency.Histogram{}
		c.byName[name] = h
	}
	h.Record(lat)
}

// P50 is the median wake-up latency per state name, as
// Stats.WakeLatencyP50 gives it.
func (c *ExitLatencyCheck) P50() map[string]uint64 {
	out := make(map[string]uint64, len(c.byName))
	for name, h := range c.byName {
		out[name] = h.Quantile(0.5)
	}
	return out
}

// Note is whatif's note for a replay on prof, the recorded table: the
// halted states whose measured wake-up median is far above the table's
// exit latency; "" when there are none.
func (c *ExitLatencyCheck) Note(prof *model.Profile) string {
	far := c.far(prof)
	if far == "" {
		return ""
	}
	return "the recorded table's exit latencies are far below what this machine took to wake (" + far +
		"): the policies are charged the table's, as the kernel's governors assume them; --profile measured replays on the measured medians (on a VM, the host's wake-up path is in them)"
}

// NoteOtherTable is whatif's note for a replay on another machine's table
// (named other) of a trace whose own table, recorded, is far below what its
// machine took to wake: the recorded idle periods and IO latencies keep
// that cost, which the other machine need not pay. "" when none is far.
func (c *ExitLatencyCheck) NoteOtherTable(recorded *model.Profile, other string) string {
	far := c.far(recorded)
	if far == "" {
		return ""
	}
	return "the recording's machine took far longer to wake than its own table says (" + far +
		"): the recorded idle periods and IO latencies keep that cost, and the replay takes out only the table's exit latency, so the figures on " + other +
		" carry a wake-up cost its machine may not pay (on a VM, the host's wake-up path), and its governors, seeing idle periods that much longer, choose deeper states than on " +
		other + " itself; a short-idle workload (a ping-pong, a poll limit's question) is best recorded where it runs"
}

// far lists prof's halted states whose measured wake-up median is far
// above their exit latency; "" when there are none.
func (c *ExitLatencyCheck) far(prof *model.Profile) string {
	var far []string
	for _, s := range prof.States {
		h := c.byName[s.Name]
		if s.Polling || h == nil || h.Count() < exitCheckMinWakeUps {
			continue
		}
		p50 := h.Quantile(0.5)
		if p50 > exitCheckRatio*s.ExitLatencyNs && p50-s.ExitLatencyNs > exitCheckMinGapNs {
			far = append(far, fmt.Sprintf("%s's exit latency is %s µs, its measured wake-up latency a median of %s µs over %s",
				s.Name, FormatUs(s.ExitLatencyNs), FormatUs(p50), Count(h.Count(), "wake-up")))
		}
	}
	return strings.Join(far, "; ")
}

// Where a policy's idle time sits in states this slow to leave, the
// first-order replay is at its weakest (lab/README.md, "Nine-state
// tables": on hsw's table, one governor replayed on another's recording
// was up to 20 points of idle time off in C9 and C10).
const (
	deepExitNs    = 500_000
	deepShareNote = 0.05
)

// DeepStatesNote is whatif's note for results that put a share of the
// idle time in states whose exit latency is as long as idle periods
// commonly are: a wake-up that late moves what follows it, which a replay
// of the recorded periods as they are cannot follow. "" when none does.
func DeepStatesNote(prof *model.Profile, results []model.Result) string {
	var names []string
	var slowest uint64
	deep := map[string]bool{}
	for _, s := range prof.States {
		if !s.Polling && s.ExitLatencyNs >= deepExitNs {
			deep[s.Name] = true
			names = append(names, s.Name)
			slowest = max(slowest, s.ExitLatencyNs)
		}
	}
	var who []string
	for _, r := range results {
		share := 0.0
		for name, v := range r.StateShare {
			if deep[name] {
				share += v
			}
		}
		if share >= deepShareNote {
			spent := " spent " // on the first named only
			if len(who) > 0 {
				spent = " "
			}
			who = append(who, fmt.Sprintf("%s%s%.0f %%", r.Policy, spent, 100*share))
		}
	}
	if len(who) == 0 {
		return ""
	}
	return fmt.Sprintf("%s of the idle time in %s, states whose exit latency (up to %s µs) is as long as idle periods commonly are: a wake-up that late delays what it starts "+
		"(the work, the other CPUs it wakes, the next idle entry), which the replay, keeping the recorded idle periods as they are, does not follow, so those figures are first-order estimates "+
		"(in the lab, on hsw's table, one governor replayed on another's recording put up to 20 points more or less of the idle time in C9 and C10 than that governor's own recording)",
		strings.Join(who, ", "), strings.Join(names, " or "), FormatUs(slowest))
}

// countedFar is how far (as a ratio) the time a policy's shares divide may
// stray from the recorded time its stays cover before whatif says so.
const countedFar = 0.10

// CountedTimeNote is whatif's note for policies whose state shares divide
// a time far from the recorded one: the shares count each stay as the
// kernel does, to its interrupt plus its own state's exit latency, while
// the replay keeps the recording's timeline, so where the exit latencies
// are as long as the idle periods the shares weigh time the workload
// would have spent waiting (or, below the recorded time, exit latency the
// policy saved), and do not match the energy, which covers the recorded
// time. "" when none does.
func CountedTimeNote(results []model.Result) string {
	var who []string
	for _, r := range results {
		if r.RecordedTimeNs == 0 {
			continue
		}
		ratio := float64(r.StateTimeNs) / float64(r.RecordedTimeNs)
		if math.Abs(ratio-1) > countedFar {
			who = append(who, fmt.Sprintf("%s %.2f×", r.Policy, ratio))
		}
	}
	if len(who) == 0 {
		return ""
	}
	return "the state shares count each stay as the kernel does, to its interrupt plus its own state's exit latency, and add up to another time than the recorded one their stays cover (" +
		strings.Join(who, ", ") + "): those policies' exit latencies differ from the recorded states' by as much as the idle periods last, " +
		"so their shares weigh time the work would have waited (or the exit latency they saved), which the replay, keeping the recorded timeline, does not move; the energy covers the recorded time"
}
