package analysis

import (
	"fmt"
	"strings"

	"github.com/idletrace/idletrace/pkg/model"
)

// changesCaption explains the lines changeLines writes.
const changesCaption = "Changes are against the first policy: wake-ups that pay another exit latency, " +
	"IO completions (of those that woke an idle CPU, the only ones a policy changes) and task IO waits with another latency, " +
	"and why a policy changed nothing or little."

// changeLines is one line per result saying what it changed against the
// first (model.Changes); nil when no result carries changes.
func changeLines(results []model.Result) []string {
	var out []string
	for i := range results {
		if l := changeLine(&results[i], false); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// changeLine says what r changed against its reference, e.g.
// "menu+disable=C6: changed 5,278 of 41,000 wake-ups (CPUs 0, 1) and 7,822
// of 58,723 IO completions", or why it changed nothing. against names the
// reference in the line (the comparison report, which shows one result).
func changeLine(r *model.Result, against bool) string {
	c := r.Changes
	if c == nil {
		return ""
	}
	why := ""
	if c.Reason != nil {
		why = *c.Reason
	}
	if c.Reference {
		l := r.Policy + ": the reference"
		if why != "" {
			l += "; " + why
		}
		return l + "."
	}
	n := model.FormatCount
	hasIO := r.IOLatencyNs != nil && r.IOWokeIdle != nil // else which IO a policy changes is unknown
	hasTask := c.TaskIO > 0
	var l strings.Builder
	l.WriteString(r.Policy + ": ")
	if against {
		fmt.Fprintf(&l, "against %s, ", c.Against)
	}
	if c.WakeUpsChanged == 0 && c.IOChanged == 0 && c.TaskIOChanged == 0 {
		parts := []string{n(c.WakeUps) + " wake-ups"}
		if hasIO {
			parts = append(parts, n(c.IOWokeIdle)+" IO completions")
		}
		if hasTask {
			parts = append(parts, n(c.TaskIO)+" task IO waits")
		}
		l.WriteString("changed none of " + joinAnd(parts))
	} else {
		cpus := make([]int, 0, len(c.CPUs))
		for _, cc := range c.CPUs {
			if cc.WakeUpsChanged > 0 {
				cpus = append(cpus, cc.CPU)
			}
		}
		wake := fmt.Sprintf("%s of %s wake-ups", n(c.WakeUpsChanged), n(c.WakeUps))
		if len(cpus) > 0 {
			wake += " (" + model.CPUList(cpus) + ")"
		}
		parts := []string{wake}
		if hasIO {
			parts = append(parts, fmt.Sprintf("%s of %s IO completions", n(c.IOChanged), n(c.IOWokeIdle)))
		}
		if hasTask {
			parts = append(parts, fmt.Sprintf("%s of %s task IO waits", n(c.TaskIOChanged), n(c.TaskIO)))
		}
		l.WriteString("changed " + joinAnd(parts))
	}
	if why != "" {
		l.WriteString("; " + why)
	}
	l.WriteString(".")
	return l.String()
}

func joinAnd(parts []string) string {
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
