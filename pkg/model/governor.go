package model

import "math"

// Shared pieces of the governor models: the per-policy view of the state
// table and the inputs the cpuidle core hands a governor at each selection
// (drivers/cpuidle/governor.c cpuidle_governor_latency_req,
// kernel/time/tick-sched.c tick_nohz_get_sleep_length, as used from
// kernel/sched/idle.c cpuidle_idle_call, Linux 6.18).

const (
	noLimit  = int64(math.MaxInt64)
	ktimeMax = uint64(math.MaxInt64)
	// residencyThresholdNs is RESIDENCY_THRESHOLD_NS (drivers/cpuidle/governors/gov.h).
	residencyThresholdNs = 15_000
	// maxSleepNs bounds a sleep length so integer arithmetic mirrors the
	// kernel's without overflowing (the kernel's own bound is the timer
	// wheel's maximum deferment, seconds).
	maxSleepNs = int64(10_000_000_000_000)
	// unknownTime marks an absolute time the trace does not give.
	unknownTime = int64(math.MinInt64)
)

// table is one policy's view of a profile: the profile's states with the
// policy's disabled set applied, in ns.
type table struct {
	n        int
	name     []string
	el, tr   []int64
	polling  []bool
	disabled []bool
	power    []float64
	overhead []float64 // energy to enter and leave the state, busy-core × ns
	tick     int64

	// rows is the same table laid out per state for the replay's hot
	// paths (the first MaxStates states; NewReplay refuses larger tables).
	rows [MaxStates]stateRow
	// en lists the enabled states in order (nen of them).
	en  [MaxStates]uint8
	nen int
	// enEl, enTr: exit latency and target residency of the enabled
	// states, in the order of en.
	enEl [enPad]int64
	enTr [enPad]uint64
	// enMonotone: enEl and enTr are non-decreasing.
	enMonotone bool
}

// enPad is MaxStates rounded up to whole groups of four (table.walk).
const enPad = (MaxStates + 3) &^ 3

// stateRow is one state of a table as the hot paths read it.
type stateRow struct {
	tr, el int64
	// belowAt is the residency from which a stay at least as long as tr
	// counts as too shallow (cpuidle_enter_state: more than el and, after
	// el, at least the target residency of the nearest enabled deeper
	// state); noLimit when there is no enabled deeper state.
	belowAt int64
	power   float64
	// overhead: energy to enter and leave the state, busy-core × ns.
	overhead float64
	polling  bool
	disabled bool
	// aboveIfShort: a stay shorter than tr counts as too deep (a
	// shallower state is enabled).
	aboveIfShort bool
}

// classify is ClassifyMiss for the table's state s and a residency d ≥ 0.
func (r *stateRow) classify(d int64) (above, below bool) {
	if d < r.tr {
		return r.aboveIfShort, false
	}
	return false, d >= r.belowAt
}

// newTable applies a policy's disable/maxcstate modifiers. Energy model:
// a stay of d ns in state s costs power(s)·d + overhead(s), where the
// entry/exit overhead is chosen so that each state's target residency is
// its break-even time against the next shallower state, as the kernel
// defines target residency: overhead(0) = 0, overhead(s) = overhead(s−1) +
// max(0, power(s−1) − power(s))·tr(s). The overheads belong to the
// hardware, so disabled states still count in the chain.
// newTable lays out a profile's states with the policy's disable= and
// enable= (indices) and maxcstate= (<0: none) applied.
func newTable(p *Profile, disable, enable []int, maxCState int) *table {
	n := len(p.States)
	t := &table{n: n, name: make([]string, n), el: make([]int64, n), tr: make([]int64, n), polling: make([]bool, n),
		disabled: make([]bool, n), power: make([]float64, n), overhead: make([]float64, n), tick: p.TickNs()}
	for i, s := range p.States {
		t.name[i] = s.Name
		t.el[i] = int64(s.ExitLatencyNs)
		t.tr[i] = int64(s.TargetResidencyNs)
		t.polling[i] = s.Polling
		t.disabled[i] = s.Disabled || (maxCState >= 0 && i > maxCState)
		t.power[i] = s.Power
	}
	for _, i := range disable {
		t.disabled[i] = true
	}
	for _, i := range enable {
		t.disabled[i] = maxCState >= 0 && i > maxCState
	}
	for i := 1; i < n; i++ {
		t.overhead[i] = t.overhead[i-1]
		if d := t.power[i-1] - t.power[i]; d > 0 {
			t.overhead[i] += d * float64(t.tr[i])
		}
	}
	for i := 0; i < min(n, MaxStates); i++ {
		if !t.disabled[i] {
			t.en[t.nen] = uint8(i)
			t.enEl[t.nen], t.enTr[t.nen] = t.el[i], uint64(t.tr[i])
			t.nen++
		}
		r := &t.rows[i]
		r.tr, r.el, r.power, r.overhead = t.tr[i], t.el[i], t.power[i], t.overhead[i]
		r.polling, r.disabled = t.polling[i], t.disabled[i]
		r.belowAt = noLimit
		for j := i + 1; j < n; j++ {
			if !t.disabled[j] {
				r.belowAt = max(t.el[i]+t.tr[j], t.el[i]+1)
				break
			}
		}
		for j := 0; j < i; j++ {
			if !t.disabled[j] {
				r.aboveIfShort = true
			}
		}
	}
	for k := t.nen; k < enPad; k++ { // padding never fits
		t.enEl[k], t.enTr[k] = noLimit, math.MaxUint64
	}
	t.enMonotone = true
	for k := 1; k < t.nen; k++ {
		if t.enEl[k] < t.enEl[k-1] || t.enTr[k] < t.enTr[k-1] {
			t.enMonotone = false
		}
	}
	return t
}

// paidLatency is what a wake-up pays in state i: its exit latency, nothing
// while polling.
func (t *table) paidLatency(i int) int64 {
	if t.polling[i] {
		return 0
	}
	return t.el[i]
}

// selInput is what the cpuidle core gives a governor for one selection.
type selInput struct {
	latReq      int64 // ns, noLimit when unconstrained
	sleepLen    int64 // ns to the next timer, ignoring the tick
	deltaTick   int64 // ns to the next clock event (tick included when it runs)
	tickStopped bool  // the tick was stopped earlier in this idle period
	nrIOWait    int64 // nr_iowait_cpu() (menu before 6.13); 0 when unknown
	// aborts: attempts aborted after their selection since the last stay
	// (each leaves dev->last_residency_ns 0 for the next selection).
	aborts int
}

// governor is one CPU's instance of a governor model.
type governor interface {
	// selectState returns the state to enter and whether the tick may be
	// stopped (the cpuidle core stops it if so, or if it already is).
	selectState(in *selInput) (idx int, stopTick bool)
	// reflect reports the stay that just ended: the state, its measured
	// residency (last_residency_ns), whether the tick ended it
	// (tick_nohz_idle_got_tick) and whether a poll ended on its time limit
	// (dev->poll_time_limit).
	reflect(idx int, residencyNs int64, tickWakeup, pollTimedOut bool)
}

// pollLimiter is implemented by governors that own dev->poll_limit_ns
// (haltpoll): the limit cpuidle_poll_time gives poll_idle now.
type pollLimiter interface {
	pollLimit() int64
}

// genericPollLimit is drivers/cpuidle/cpuidle.c cpuidle_poll_time for a
// rule; noLimit means polling is not time-bounded; 0 means the table has
// no polling state.
func genericPollLimit(t *table, rule PollRule, fixed int64) int64 {
	if t.n == 0 || !t.polling[0] {
		return 0
	}
	pollMax := t.tick / 16
	switch rule {
	case PollFixed:
		return fixed
	case PollUnlimited:
		return noLimit
	case PollTick16:
		return pollMax
	case PollFirstResidency:
		// A profile file may give the first state a target residency
		// below what poll_idle() can time out (minPollNs): a replay
		// re-selecting every few ns of a long POLL-only stay would not end.
		for i := 1; i < t.n; i++ {
			if !t.disabled[i] {
				return max(t.tr[i], minPollNs)
			}
		}
		return t.tick
	}
	// PollMin10us (CPUIDLE_POLL_MIN 10 µs, CPUIDLE_POLL_MAX TICK_NSEC/16).
	limit := pollMax
	for i := 1; i < t.n; i++ {
		if t.disabled[i] || t.tr[i] < 10_000 {
			continue
		}
		limit = min(t.tr[i], pollMax)
		break
	}
	return limit
}

// kernelPollRule is the rule in force in a kernel release.
func kernelPollRule(v Version) PollRule {
	switch {
	case v.AtLeast(5, 11):
		return PollMin10us
	case v.AtLeast(5, 4):
		// 5.4 shipped 259231a04561 (deepest state, a bug) and took the
		// first-residency fix in 5.4.y; 5.5–5.10 have first-residency.
		return PollFirstResidency
	case v.AtLeast(4, 17):
		return PollTick16
	}
	return PollUnlimited
}
