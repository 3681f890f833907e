package analysis

import (
	"fmt"
	"io"
	"strings"

	"github.com/idletrace/idletrace/pkg/model"
)

// stateFlags names what sets a state apart, for tables.
func stateFlags(s model.State, withPower bool) []string {
	var flags []string
	if s.Polling {
		flags = append(flags, "polling")
	}
	if s.Disabled {
		flags = append(flags, "disabled")
	}
	if withPower && s.PowerEstimated {
		flags = append(flags, "power estimated")
	}
	return flags
}

// RenderProfileList prints one line per profile (idletrace profiles).
func RenderProfileList(w io.Writer, profs []*model.Profile, describe func(name string) string, format string) error {
	if format == FormatJSON {
		return writeJSON(w, profs)
	}
	d := newDoc(w, format == FormatMarkdown)
	var rows [][]string
	for _, p := range profs {
		var st []string
		for _, s := range p.States {
			st = append(st, s.Name)
		}
		rows = append(rows, []string{p.Name, strings.Join(st, " "), describe(p.Name)})
	}
	if err := d.table([]string{"Profile", "States", "Description"}, rows, 0, 1, 2); err != nil {
		return err
	}
	d.para("Also: recorded (the trace's own table) and measured (recorded, with exit latencies measured in the trace).")
	return d.flush()
}

// RenderProfile prints one profile's state table (idletrace profiles NAME).
func RenderProfile(w io.Writer, p *model.Profile, format string) error {
	if format == FormatJSON {
		return writeJSON(w, p)
	}
	d := newDoc(w, format == FormatMarkdown)
	d.para(fmt.Sprintf("%s (HZ=%d). Source: %s.", p.Name, p.HZ, p.Source))
	var rows [][]string
	for _, s := range p.States {
		pw := fmt.Sprintf("%.3f", s.Power)
		if s.PowerEstimated {
			pw += " (est.)"
		}
		rows = append(rows, []string{s.Name, FormatUs(s.ExitLatencyNs), FormatUs(s.TargetResidencyNs), pw, strings.Join(stateFlags(s, false), ", ")})
	}
	if err := d.table([]string{"State", "Exit latency µs", "Target residency µs", "Power", "Flags"}, rows, 0, 4); err != nil {
		return err
	}
	return d.flush()
}
