package analysis

import (
	"fmt"
	"math"
	"slices"

	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Rules are what stats makes of a single record of one trace: the name
// and table of each CPU's states, the window stats counts (each CPU's own
// for idle periods, the snapshots' for block IO), and above/below. The
// StatsBuilder counts with them, and a reader that needs them per record
// (pkg/export's rows) asks them, so that its rows add up to what stats
// reports. Rules are not safe for concurrent use.
type Rules struct {
	noDriver bool
	// Per CPU (a slice, not a map: read for every period), indexed by
	// state index; CPUs the metadata does not describe have nil.
	tables [][]model.State
	names  [][]string

	winStart, winEnd uint64 // global window: (winStart, winEnd]

	start, endSnap *trace.Snapshot
	recorded       []int
	cpuWins        []cpuWindow // each CPU's window, once read
}

// NewRules reads the rules of the trace whose metadata and end record
// (nil for a trace cut short) are given.
func NewRules(meta *trace.Metadata, end *trace.End) *Rules {
	if meta == nil {
		meta = &trace.Metadata{}
	}
	r := &Rules{
		noDriver: meta.NoCPUIdleDriver(),
		start:    meta.Start,
		recorded: meta.RecordedCPUs,
	}
	if end != nil {
		r.endSnap = end.Snapshot
	}
	for _, cs := range meta.States {
		if cs.CPU < 0 || cs.CPU >= maxCPUs {
			continue // corrupt: no period of such a CPU is counted
		}
		if cs.CPU >= len(r.tables) {
			r.tables = slices.Grow(r.tables, cs.CPU+1-len(r.tables))[:cs.CPU+1]
			r.names = slices.Grow(r.names, cs.CPU+1-len(r.names))[:cs.CPU+1]
		}
		r.tables[cs.CPU], r.names[cs.CPU] = stateTable(cs.States)
	}
	r.winStart, r.winEnd = trace.SnapshotWindow(meta, end)
	return r
}

// stateTable turns a sysfs state table into model states indexed by state
// index (gaps become disabled placeholders so ClassifyMiss skips them).
func stateTable(infos []trace.StateInfo) ([]model.State, []string) {
	n := 0
	for _, si := range infos {
		if si.Index >= 0 && si.Index < maxStates && si.Index+1 > n {
			n = si.Index + 1
		}
	}
	tab := make([]model.State, n)
	names := make([]string, n)
	for i := range tab {
		tab[i].Disabled = true
		names[i] = fmt.Sprintf("state%d", i)
	}
	for _, si := range infos {
		if si.Index < 0 || si.Index >= maxStates {
			continue
		}
		tab[si.Index] = model.State{
			Name: si.Name, Desc: si.Desc,
			ExitLatencyNs: si.ExitLatencyNs, TargetResidencyNs: si.TargetResidencyNs,
			Polling: si.Polling, Disabled: si.Disabled,
		}
		if si.Name != "" {
			names[si.Index] = si.Name
		}
	}
	return tab, names
}

// StateName is the name stats gives state idx of cpu: the trace's table's,
// HLT and POLL without a cpuidle driver, else stateN.
func (r *Rules) StateName(cpu, idx int) string {
	if names := r.tableNames(cpu); idx >= 0 && idx < len(names) { // a corrupt snapshot may give -1
		return names[idx]
	}
	if r.noDriver {
		switch idx {
		case 0:
			return NoDriverPOLL
		case 1:
			return NoDriverHLT
		}
	}
	return fmt.Sprintf("state%d", idx)
}

// Valid says whether stats counts an idle period at all: a record with an
// impossible CPU or state number is skipped (invalid_records).
func (r *Rules) Valid(p *trace.IdlePeriod) bool {
	return p.CPU < maxCPUs && p.State < maxStates
}

// cpuWindow is cpu's own window, (start, end]: the instants its counters
// were read at the two snapshots; a missing snapshot leaves that side open.
func (r *Rules) cpuWindow(cpu uint32) (start, end uint64) {
	if int(cpu) < len(r.cpuWins) && r.cpuWins[cpu].set {
		w := r.cpuWins[cpu]
		return w.start, w.end
	}
	start, end = 0, math.MaxUint64
	if t, ok := snapTime(r.start, r.recorded, int(cpu)); ok {
		start = t
	}
	if t, ok := snapTime(r.endSnap, r.recorded, int(cpu)); ok {
		end = t
	}
	if cpu < maxCPUs {
		for int(cpu) >= len(r.cpuWins) {
			r.cpuWins = append(r.cpuWins, cpuWindow{})
		}
		r.cpuWins[cpu] = cpuWindow{set: true, start: start, end: end}
	}
	return start, end
}

type cpuWindow struct {
	set        bool
	start, end uint64
}

// IdleInWindow says whether stats counts the period: its exit falls in its
// CPU's window, as the kernel's counters count it.
func (r *Rules) IdleInWindow(p *trace.IdlePeriod) bool {
	start, end := r.cpuWindow(p.CPU)
	return p.ExitNs > start && p.ExitNs <= end
}

// IOInWindow says whether stats counts the request: its completion falls
// between the snapshots.
func (r *Rules) IOInWindow(b *trace.BlockIO) bool {
	return b.CompleteNs > r.winStart && b.CompleteNs <= r.winEnd
}

// Classify is above/below as the cpuidle core judges the period, on its
// CPU's recorded table: ok is false where stats judges none (no table, or
// a period the kernel did not count).
func (r *Rules) Classify(p *trace.IdlePeriod) (above, below, ok bool) {
	tab := r.table(int(p.CPU))
	res, counted := p.Residency()
	if tab == nil || !counted {
		return false, false, false
	}
	above, below = model.ClassifyMiss(tab, int(p.State), res)
	return above, below, true
}

// table is cpu's state table, nil where the metadata has none.
func (r *Rules) table(cpu int) []model.State {
	if cpu < 0 || cpu >= len(r.tables) {
		return nil
	}
	return r.tables[cpu]
}

func (r *Rules) tableNames(cpu int) []string {
	if cpu < 0 || cpu >= len(r.names) {
		return nil
	}
	return r.names[cpu]
}
