// Package fidelity replays a recording through a governor's model beside the
// recorded choices, over the periods the kernel's own counters cover. The
// tests that hold the models to the kernel use it: pkg/record's on this
// machine's table, lab/labtest's on the lab's emulated servers.
package fidelity

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Outcome is a governor's model and the recorded choices replayed on the
// recording's table, beside what the kernel counted in the same window.
type Outcome struct {
	Profile *model.Profile
	// Model is the governor's free-running replay (with its agreement);
	// Recorded replays the kernel's own choices.
	Model, Recorded model.Result
	// KernelAbove and KernelBelow are the cpuidle core's counter deltas
	// between the snapshots.
	KernelAbove, KernelBelow uint64
}

// SnapshotWindows gives each recorded CPU's span between the start and end
// snapshots: its counters were read at those instants.
// Empty where the trace lacks either snapshot (a recording cut short).
func SnapshotWindows(r *trace.Reader) map[uint32][2]uint64 {
	window := map[uint32][2]uint64{}
	if r.Meta == nil || r.Meta.Start == nil || r.End == nil || r.End.Snapshot == nil ||
		len(r.Meta.Start.CPUTimeNs) < len(r.Meta.RecordedCPUs) || len(r.End.Snapshot.CPUTimeNs) < len(r.Meta.RecordedCPUs) {
		return window
	}
	for i, c := range r.Meta.RecordedCPUs {
		window[uint32(c)] = [2]uint64{r.Meta.Start.CPUTimeNs[i], r.End.Snapshot.CPUTimeNs[i]}
	}
	return window
}

// Replay replays governor and the recorded choices over the periods inside
// each CPU's snapshot window, with those before it as the models' history
// (model.Replay.SetCountedFrom): counted from the window's start, as the
// kernel's counters are, but not started cold there. setup, when not nil,
// may seed the replay before the first period (haltpoll's starting
// windows).
func Replay(r *trace.Reader, governor string, setup func(*model.Replay, map[uint32][2]uint64) error) (*Outcome, error) {
	if r.End == nil || r.End.Snapshot == nil || r.Meta.Start == nil {
		return nil, errors.New("the trace lacks its start or end snapshot")
	}
	prof, err := model.Recorded(r.Meta)
	if err != nil {
		return nil, err
	}
	var pols []model.Policy
	for _, spec := range []string{governor, "recorded"} {
		p, err := model.ParsePolicy(spec)
		if err != nil {
			return nil, err
		}
		pols = append(pols, p)
	}
	rp, err := model.NewReplay(prof, r.Meta, pols)
	if err != nil {
		return nil, err
	}
	window := SnapshotWindows(r)
	for cpu, w := range window {
		rp.SetCountedFrom(cpu, w[0])
	}
	if setup != nil {
		if err := setup(rp, window); err != nil {
			return nil, err
		}
	}
	if v, ok := rp.Prepass(r.End); ok {
		if err := r.Scan(v); err != nil {
			return nil, err
		}
	}
	err = r.Scan(trace.Visitor{
		Idle: func(p *trace.IdlePeriod) error {
			// After the window: not replayed (before it: the models'
			// history, SetCountedFrom).
			if w, ok := window[p.CPU]; !ok || p.ExitNs > w[1] {
				return nil
			}
			return rp.Idle(p)
		},
		BlockIO: rp.BlockIO,
	})
	if err != nil {
		return nil, err
	}
	res, err := rp.Finish()
	if err != nil {
		return nil, err
	}
	if res[0].Agreement == nil {
		return nil, errors.New("no agreement on the recorded profile")
	}
	o := &Outcome{Profile: prof, Model: res[0], Recorded: res[1]}
	for _, kc := range r.End.Snapshot.CPUIdle {
		sc := r.Meta.Start.Counters(kc.CPU)
		if why := trace.CountersApart(sc, &kc); why != "" || len(sc.States) != len(kc.States) {
			return nil, fmt.Errorf("CPU %d's cpuidle counters do not compare between the snapshots (%s)", kc.CPU, cmp.Or(why, "another state table"))
		}
		for j, ks := range kc.States {
			o.KernelAbove += ks.Above - sc.States[j].Above
			o.KernelBelow += ks.Below - sc.States[j].Below
		}
	}
	return o, nil
}
