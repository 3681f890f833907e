package analysis

import (
	"sort"

	"github.com/idletrace/idletrace/pkg/trace"
)

// The kernel's cpuidle counters: reading the start and end snapshots
// (trace.Snapshot.Counters and CountersApart, and snapTime for rules.go's per-CPU windows), their
// deltas per CPU and state (kernelStats), and the check of the trace
// against them (compareCPUIdle, ResidencyAgrees). It is apart because it
// compares the trace with an independent source rather than computing
// statistics over it.

// snapTime is the instant a snapshot took cpu's counters: its own entry in
// CPUTimeNs (parallel to CPUIdle, as the recorder writes it; or to the
// recorded CPU list), else the snapshot's global time.
func snapTime(s *trace.Snapshot, recorded []int, cpu int) (uint64, bool) {
	if s == nil {
		return 0, false
	}
	pos := s.CPUIndex(cpu, recorded)
	if pos >= 0 && pos < len(s.CPUTimeNs) && s.CPUTimeNs[pos] != 0 {
		return s.CPUTimeNs[pos], true
	}
	return s.MonotonicNs, true
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func (b *StatsBuilder) kernelStats(cpuList []int) KernelStats {
	k := KernelStats{CPUs: make([]KernelCPU, 0, len(cpuList))}
	empty := func(note string) KernelStats {
		k.Note = note
		for _, c := range cpuList {
			k.CPUs = append(k.CPUs, KernelCPU{CPU: c, States: []StateStats{}})
		}
		return k
	}
	var endSnap *trace.Snapshot
	if b.end != nil {
		endSnap = b.end.Snapshot
	}
	switch {
	case b.meta.NoCPUIdleDriver():
		return empty(NoDriverNote)
	case b.meta.Imported() && (b.meta.Start == nil || len(b.meta.Start.CPUIdle) == 0):
		// What sets an import's figures apart from a recording's of the
		// same events: a reader comparing the two sees why.
		return empty("an imported capture has no snapshot of the kernel's cpuidle counters; its residencies run from entry to exit as the events give them, not the kernel's own (above and below are judged on them), and its window from its first record to its last")
	case b.meta.Start == nil || len(b.meta.Start.CPUIdle) == 0:
		return empty("the trace has no start snapshot of the kernel's cpuidle counters")
	case endSnap == nil:
		return empty("the trace has no end snapshot (the recording was cut short), so the kernel's counters cannot be compared")
	}
	k.Available = true
	for _, c := range cpuList {
		cs := KernelCPU{CPU: c, States: []StateStats{}}
		s0, s1 := b.meta.Start.Counters(c), endSnap.Counters(c)
		cs.Unchecked = trace.CountersApart(s0, s1)
		if cs.Unchecked == "" {
			for _, e := range s1.States {
				var st0 trace.StateCounters
				for _, x := range s0.States {
					if x.Index == e.Index {
						st0 = x
					}
				}
				rej := sub(e.Rejected, st0.Rejected)
				cs.States = append(cs.States, StateStats{
					Index: e.Index, Name: b.StateName(c, e.Index),
					Usage: sub(e.Usage, st0.Usage), TimeNs: sub(e.TimeUs, st0.TimeUs) * 1000,
					Above: sub(e.Above, st0.Above), Below: sub(e.Below, st0.Below),
					Rejected: &rej,
				})
			}
			sort.Slice(cs.States, func(i, j int) bool { return cs.States[i].Index < cs.States[j].Index })
		}
		k.CPUs = append(k.CPUs, cs)
	}
	return k
}

// ResidencyAgrees says whether a traced residency agrees with the kernel's
// within ResidencyTolerance (plus ResidencySlackNs for sysfs rounding).
func ResidencyAgrees(traced, kernel uint64) bool {
	d := float64(traced) - float64(kernel)
	if d < 0 {
		d = -d
	}
	return d <= max(ResidencyTolerance*float64(kernel), ResidencySlackNs)
}

func findState(states []StateStats, idx int) *StateStats {
	for i := range states {
		if states[i].Index == idx {
			return &states[i]
		}
	}
	return nil
}

// compareCPUIdle lists every disagreement between traced and kernel counters.
// Usage is compared only for CPUs that lost no idle records, and none for a
// CPU whose counters are not comparable (KernelCPU.Unchecked).
func compareCPUIdle(traced []CPUStats, kernel []KernelCPU) []Mismatch {
	var out []Mismatch
	for _, kc := range kernel {
		if kc.Unchecked != "" {
			continue
		}
		var tc *CPUStats
		for i := range traced {
			if traced[i].CPU == kc.CPU {
				tc = &traced[i]
			}
		}
		if tc == nil {
			continue
		}
		for _, i := range StateIndexes(kc.States, tc.States) {
			var t, k StateStats
			name := ""
			if p := findState(tc.States, i); p != nil {
				t, name = *p, p.Name
			}
			if p := findState(kc.States, i); p != nil {
				k, name = *p, p.Name
			}
			mm := func(field string, a, b uint64) {
				out = append(out, Mismatch{Kind: "cpuidle", CPU: kc.CPU, State: i, Name: name, Field: field, Traced: a, Kernel: b})
			}
			if tc.LostIdle == 0 && t.Usage != k.Usage {
				mm("usage", t.Usage, k.Usage)
			}
			if !ResidencyAgrees(t.TimeNs, k.TimeNs) {
				mm("time_ns", t.TimeNs, k.TimeNs)
			}
			if t.Above != k.Above {
				mm("above", t.Above, k.Above)
			}
			if t.Below != k.Below {
				mm("below", t.Below, k.Below)
			}
		}
	}
	return out
}

// StateIndexes is the sorted union of the state indexes in the given
// lists (a CPU's states in the trace and in the kernel's counters).
func StateIndexes(lists ...[]StateStats) []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range lists {
		for _, st := range l {
			if !seen[st.Index] {
				seen[st.Index] = true
				out = append(out, st.Index)
			}
		}
	}
	sort.Ints(out)
	return out
}
