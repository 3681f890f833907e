// Package model holds idle-state tables (profiles), the governor models, the
// policy modifiers and the replay engine with its cost model.
package model

// State is one idle state of a profile.
type State struct {
	Name              string  `json:"name"`
	Desc              string  `json:"desc,omitempty"`
	ExitLatencyNs     uint64  `json:"exit_latency_ns"`
	TargetResidencyNs uint64  `json:"target_residency_ns"`
	Polling           bool    `json:"polling"`
	Disabled          bool    `json:"disabled"`
	Power             float64 `json:"power"`           // idle power relative to a busy core (1.0)
	PowerEstimated    bool    `json:"power_estimated"` // Power was not given; an estimate is used
}

// Profile is a machine's idle-state table, shallow to deep, as the cpuidle
// core sees it (index 0 is POLL on x86).
type Profile struct {
	Name   string  `json:"name"`
	Source string  `json:"source"` // where the table comes from (driver file and kernel release, or the trace)
	HZ     int     `json:"hz"`
	States []State `json:"states"`
}

// ClassifyMiss applies the cpuidle core's rule (drivers/cpuidle/cpuidle.c,
// cpuidle_enter_state, Linux 6.18) to one stay of residencyNs in state
// entered: too deep ("above") when it was shorter than the state's target
// residency and a shallower state was enabled; otherwise too shallow
// ("below") when, after the exit latency, it would have covered the target
// residency of the nearest enabled deeper state. Deeper states beyond that
// one are not examined, as in the kernel.
func ClassifyMiss(states []State, entered int, residencyNs uint64) (above, below bool) {
	if entered < 0 || entered >= len(states) {
		return false, false
	}
	s := &states[entered]
	if residencyNs < s.TargetResidencyNs {
		for i := entered - 1; i >= 0; i-- {
			if !states[i].Disabled {
				return true, false
			}
		}
		return false, false
	}
	if residencyNs <= s.ExitLatencyNs {
		return false, false
	}
	for i := entered + 1; i < len(states); i++ {
		if states[i].Disabled {
			continue
		}
		return false, residencyNs-s.ExitLatencyNs >= states[i].TargetResidencyNs
	}
	return false, false
}
