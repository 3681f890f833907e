package analysis

import (
	"fmt"
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
