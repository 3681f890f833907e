package export

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/idletrace/idletrace/pkg/trace"
)

// qosSelection is what an event export writes of a trace's PM QoS
// changes: those in its window (of the global limit, and of the selected
// CPUs' resume latencies), in time order, and the limits in force where
// the window opens, in trace.PMQoS's terms.
type qosSelection struct {
	changes []trace.PMQoSChange
	openNs  uint64          // where the window opens
	global  int64           // the global limit there; -1 unknown
	cpus    map[int32]int64 // each CPU's resume latency there, where known
}

// selectQoS picks the changes of all (as read, in any order) the export
// writes. The limits before a constraint's first change are that change's
// previous value (the metadata's were read before the recorder attached),
// else the metadata's; the changes before the window are applied to them.
func selectQoS(meta *trace.Metadata, sel *selection, all []trace.PMQoSChange) qosSelection {
	slices.SortStableFunc(all, func(a, b trace.PMQoSChange) int { return cmp.Compare(a.TimeNs, b.TimeNs) })
	q := qosSelection{openNs: sel.start, global: meta.PMQoS.CPUDMALatencyUs, cpus: map[int32]int64{}}
	if sel.fromNs > 0 {
		q.openNs = sel.start + uint64(sel.fromNs)
	}
	for c, v := range meta.PMQoS.ResumeLatencyUs {
		q.cpus[int32(c)] = v
	}
	seen := map[int32]bool{}
	for _, c := range all {
		if !seen[c.CPU] {
			seen[c.CPU] = true
			q.set(c.CPU, c.PrevUs)
		}
		switch {
		case c.TimeNs <= q.openNs: // before the window, even one without --from (a change before the first record)
			q.set(c.CPU, c.LimitUs)
		case sel.inTime(c.TimeNs):
			if c.CPU < 0 || sel.cpus == nil || inSet(sel.cpus, uint32(c.CPU)) {
				q.changes = append(q.changes, c)
			}
		}
	}
	return q
}

func (q *qosSelection) set(cpu int32, v int64) {
	if cpu < 0 {
		q.global = v
	} else {
		q.cpus[cpu] = v
	}
}

// at is a constraint's limit where the window opens, and whether it is known.
func (q *qosSelection) at(cpu int32) (int64, bool) {
	if cpu < 0 {
		return q.global, q.global >= 0
	}
	v, ok := q.cpus[cpu]
	return v, ok
}

// headerLine is the ftrace export's trace.ExportQoSHeader lines, "" where
// no limit is known.
func (q *qosSelection) headerLine(ncpus int) string {
	var items []string
	if v, ok := q.at(trace.PMQoSGlobal); ok {
		items = append(items, fmt.Sprintf("cpu_dma_latency=%d", v))
	}
	for c := range ncpus {
		if v, ok := q.at(int32(c)); ok {
			items = append(items, fmt.Sprintf("cpu%d=%d", c, v))
		}
	}
	if len(items) == 0 {
		return ""
	}
	return string(appendComment(nil, trace.ExportQoSHeader, items))
}

// limitUs is a limit in PMQoSChange's terms as the tables give it: the
// value, and false for none.
func limitUs(cpu int32, v int64) (int64, bool) {
	if cpu < 0 && v >= trace.PMQoSNoGlobalLimitUs || cpu >= 0 && v < 0 {
		return 0, false
	}
	return v, true
}

// qosRows writes q as pm_qos_changes rows: each limit known where the
// window opens (the global one, then the selected CPUs'), then the
// changes. Without traced changes the limits read at the recording's
// start are known to hold there only.
func (e *exporter) qosRows(q qosSelection) error {
	row, v := &e.qos, &e.qosVals
	emit := func(timeNs uint64, cpu int32, action string, limit int64, prev *int64, tid uint32) error {
		fillQoSRow(row, v, timeNs, cpu, action, limit, prev, tid)
		e.sum.PMQoSRows++
		return e.sink.PMQoSChange(row)
	}
	if e.meta.Inputs.PMQoSTrace || q.openNs == e.sel.start {
		if us, ok := q.at(trace.PMQoSGlobal); ok {
			if err := emit(q.openNs, trace.PMQoSGlobal, "in_force", us, nil, 0); err != nil {
				return err
			}
		}
		ncpus := e.meta.NumCPUs
		if ncpus <= 0 {
			ncpus = len(e.meta.PMQoS.ResumeLatencyUs)
		}
		for c := range int32(ncpus) {
			if e.sel.cpus != nil && !inSet(e.sel.cpus, uint32(c)) {
				continue
			}
			if us, ok := q.at(c); ok {
				if err := emit(q.openNs, c, "in_force", us, nil, 0); err != nil {
					return err
				}
			}
		}
	}
	for i := range q.changes {
		c := &q.changes[i]
		if err := emit(c.TimeNs, c.CPU, qosActions[c.Action], c.LimitUs, &c.PrevUs, c.Tid); err != nil {
			return err
		}
	}
	return nil
}

// fillQoSRow makes row the pm_qos_changes row of one limit, its nullable
// values held in v (reused from row to row).
func fillQoSRow(row *PMQoSChangeRow, v *qosValues, timeNs uint64, cpu int32, action string, limit int64, prev *int64, tid uint32) {
	*row = PMQoSChangeRow{TimeNs: int64(timeNs), Kind: "cpu_dma_latency", Action: action}
	if cpu >= 0 {
		row.Kind = "resume_latency"
		v.cpu = cpu
		row.CPU = &v.cpu
	}
	if us, ok := limitUs(cpu, limit); ok {
		v.limit = us
		row.LimitUs = &v.limit
	}
	if prev != nil {
		if us, ok := limitUs(cpu, *prev); ok {
			v.prev = us
			row.PreviousLimitUs = &v.prev
		}
	}
	if tid != 0 {
		v.tid = int32(tid)
		row.Tid = &v.tid
	}
}

// PMQoSChangeRows are changes as the pm_qos_changes table writes them
// (kind and action by name, NULL for none), for `info --format json`.
func PMQoSChangeRows(changes []trace.PMQoSChange) []PMQoSChangeRow {
	rows := make([]PMQoSChangeRow, len(changes))
	for i := range changes {
		c := &changes[i]
		fillQoSRow(&rows[i], &qosValues{}, c.TimeNs, c.CPU, qosActions[c.Action], c.LimitUs, &c.PrevUs, c.Tid)
	}
	return rows
}

// qosActions names PMQoSChange's actions.
var qosActions = [...]string{trace.PMQoSAdd: "add", trace.PMQoSUpdate: "update", trace.PMQoSRemove: "remove"}

type qosValues struct {
	cpu         int32
	limit, prev int64
	tid         int32
}

func (r *PMQoSChangeRow) detach(v *qosValues) {
	repoint(&r.CPU, &v.cpu)
	repoint(&r.LimitUs, &v.limit)
	repoint(&r.PreviousLimitUs, &v.prev)
	repoint(&r.Tid, &v.tid)
}
