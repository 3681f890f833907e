package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/latency"
)

// wakeSummary turns per-state wake-up counts into a latency summary: each
// wake-up pays its state's exit latency (0 while polling), so the
// distribution is exact.
func (ps *polSim) wakeSummary() (LatencySummary, []CDFPoint) {
	type vc struct {
		v uint64
		n uint64
	}
	var vs []vc
	var total uint64
	var sum float64
	for i, n := range ps.wakeCount {
		if n == 0 {
			continue
		}
		v := uint64(ps.tab.paidLatency(i))
		vs = append(vs, vc{v, n})
		total += n
		sum += float64(v) * float64(n)
	}
	if total == 0 {
		return LatencySummary{}, nil
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].v < vs[j].v })
	q := func(f float64) uint64 {
		rank := latency.Rank(f, total)
		var cum uint64
		for _, x := range vs {
			cum += x.n
			if cum >= rank {
				return x.v
			}
		}
		return vs[len(vs)-1].v
	}
	var cdf []CDFPoint
	var cum uint64
	for i, x := range vs {
		cum += x.n
		if i+1 < len(vs) && vs[i+1].v == x.v {
			continue
		}
		cdf = append(cdf, CDFPoint{ValueNs: x.v, Fraction: float64(cum) / float64(total)})
	}
	return LatencySummary{Count: total, Mean: sum / float64(total), P50: q(0.5), P99: q(0.99), P999: q(0.999), Max: vs[len(vs)-1].v}, cdf
}

func (ps *polSim) result(r *Replay) Result {
	var idleNs int64
	for _, t := range ps.timeNs {
		idleNs += t
	}
	// Without the awake time a policy that sleeps through the recorded
	// tick wake-ups would pay for more idle time than one that wakes, and
	// seem to cost more.
	res := Result{Policy: ps.pol.Spec, IdlePeriods: ps.periods, Above: ps.above, Below: ps.below,
		Selections: ps.selections, EnergyBusyCoreSeconds: (ps.energy + busyCorePower*float64(ps.awakeNs)) / 1e9,
		StateTimeNs: uint64(max(idleNs, 0)), RecordedTimeNs: uint64(max(ps.windowNs, 0))}
	if ps.kind != GovRecorded && ps.kind != GovOracle {
		res.ModelledRelease = ps.release.String()
	}
	if ps.kind != GovOracle {
		n := ps.pollTimeouts
		res.PollTimeouts = &n
	}
	for i, n := range ps.wakeCount {
		if i < ps.tab.n && ps.tab.polling[i] {
			res.WakeupsPolling += n
		}
	}
	if ps.pol.Spec == "" {
		res.Policy = string(ps.kind)
	}
	// The recorded governor's limit is the generic one but under haltpoll,
	// whose window moves per CPU and in time (the recording's, not one
	// figure), and without a cpuidle driver, where the kernel never polled
	// (the table is the HLT it used, with the POLL a driver would add).
	recordedWindow := ps.kind == GovRecorded && (r.meta.HaltPollRan() || r.meta.NoCPUIdleDriver())
	// A policy that disables the polling state has no limit to show,
	// unless it disables every state: the governors then fall back to
	// state 0 (menu_select's "No states enabled, must use 0"), which polls.
	polls := ps.tab.n > 0 && ps.tab.polling[0] && (!ps.tab.disabled[0] || !slices.Contains(ps.tab.disabled, false))
	if ps.kind != GovOracle && !ps.dynPoll && !recordedWindow && polls && ps.pollNs > 0 && ps.pollNs != noLimit {
		v := uint64(ps.pollNs)
		res.PollLimitNs = &v
	}
	res.WakeLatencyNs, res.WakeLatencyCDF = ps.wakeSummary()
	if r.ioSeen {
		s := ps.io.Summary()
		res.IOLatencyNs = &s
		res.IOLatencyCDF = ps.io.CDF()
		if r.taskSeen || r.meta.Inputs.TaskIO {
			t := ps.taskIO.Summary()
			res.TaskIOLatencyNs = &t
		}
	}
	if iowake.WokeKnown(r.meta.Inputs, r.stats.IOCompletions, r.stats.IOWokeIdle, r.stats.IOWokeUnknown) { // as stats' io.woke_idle_cpu
		n := r.stats.IOWokeIdle
		res.IOWokeIdle = &n
	}
	res.StateShare = make(map[string]float64, ps.tab.n)
	for i, t := range ps.timeNs {
		f := 0.0
		if idleNs > 0 {
			f = float64(t) / float64(idleNs)
		}
		res.StateShare[ps.tab.name[i]] = f
	}
	if r.agreement && ps.agreeN > 0 {
		a := float64(ps.agreeHit) / float64(ps.agreeN)
		res.Agreement = &a
	}
	return res
}

// Assumptions is the paragraph every whatif report prints: what the model
// takes as given and what it leaves out, for this profile and these
// policies.
//
// samePower names the enabled halted states whose estimated power is the
// floor's, where more than one is: the energy figures cannot tell them
// apart (with equal powers a deeper one costs no less, its break-even
// overhead no more), so the oracle keeps to the shallowest and deeper
// states earn a policy nothing.
func samePower(prof *Profile) string {
	if prof == nil {
		return ""
	}
	var floor []string
	for _, s := range prof.States {
		if s.PowerEstimated && !s.Polling && !s.Disabled && s.Power <= minEstimatedPower {
			floor = append(floor, s.Name)
		}
	}
	if len(floor) < 2 {
		return ""
	}
	return "; " + strings.Join(floor, ", ") + " all get 0.02, so the energy figures do not tell them apart (give the profile measured powers)"
}

func Assumptions(prof *Profile, policies []Policy) string {
	var b strings.Builder
	hz := DefaultHZ
	if prof != nil && prof.HZ > 0 {
		hz = prof.HZ
	}
	b.WriteString("First-order model: the recorded idle periods are replayed unchanged — extra latency under one policy does not reshape later events. ")
	b.WriteString("A wake-up pays the exit latency of the state the CPU is in when it arrives (nothing while polling); tick wake-ups and poll time-outs are not counted as wake-ups. ")
	b.WriteString("A stay an interrupt ended lasts, in its state's time, until the interrupt (the recorded exit less the recorded state's exit latency) plus its own state's exit latency, as the kernel counts it; its energy covers the recorded time whatever the exit latency, as the work and so the idle time are the same under every policy. ")
	b.WriteString("A poll that outlasts its limit continues in the state the governor picks next; a recorded poll time-out or idle tick wake-up followed at once by another idle period is replayed as one idle period. ")
	fmt.Fprintf(&b, "Ticks come every %d µs (HZ=%d) with the phase of the last recorded tick wake-up (or of the one that ends the period), never inside a recorded halted stay with the tick running (it would have ended it) or a recorded poll that saw none; a tick interrupts a poll without ending it. The tick keeps the state each policy's own decisions gave it while the CPU stays in the idle loop and runs again once it leaves the loop (where the trace cannot tell loops apart, a period starts with the tick state the kernel recorded); a request to stop it is refused where the kernel refused it (a timer-wheel timer within the tick). ", 1_000_000/hz, hz)
	b.WriteString("At each recorded entry the governors get the sleep length and next clock event the kernel's governor was given (where the trace lacks them, the next tick boundary after the wake-up, or the exact exit for timer wake-ups) and, for menu before 6.13, the recorded iowait count; a re-selection within the period measures them from the same idle entry time, or from the last tick after one, as the kernel does. ")
	b.WriteString("Agreement scores each recorded selection with the kernel's inputs and its own history of stays. ")
	b.WriteString("IO completion latency is the recorded one minus the recorded state's exit latency plus the policy's, for completions that woke an idle CPU (" + iowake.Rule + "). ")
	b.WriteString("Above/below follow cpuidle_enter_state's rules. ")
	est := prof == nil
	if prof != nil {
		for _, s := range prof.States {
			if s.PowerEstimated {
				est = true
			}
		}
	}
	if est {
		b.WriteString("Energy uses estimated state powers (polling 0.9 of a busy core, halted states 0.35/(1+exit latency/10 µs), at least 0.02" + samePower(prof) + ") ")
	} else {
		b.WriteString("Energy uses the profile's state powers ")
	}
	b.WriteString("with each state's target residency as its break-even time against the next shallower state, and a busy core (1) for the time a policy spends awake between the periods of one idle episode (a tick or poll time-out the CPU went straight back to idle from, which a policy may sleep through); energy is relative to the first policy. ")
	for _, p := range policies {
		switch p.Governor {
		case GovOracle:
			b.WriteString("Oracle knows each idle episode's recorded length (a chain of periods the CPU went straight back to idle from is one) and takes the state of least energy for it within the latency limit (the profile's powers and break-even overheads; of states that cost the same, the shallower): a lower bound on energy, not on latency, and not a governor. ")
		case GovMenu:
			b.WriteString("menu follows the kernel release it models (kernel=, else the recorded one): mainline's, and for 6.12.y and 6.1.y the later menu commits their stable releases took (listed in Debian's changelogs); a 6.6.y or 5.15.y release gets the form of its mainline release, without the later changes its stable series took. ")
		case GovTEO:
			b.WriteString("teo follows the logic of the kernel release it models (kernel=, else the recorded one): 6.1's (recent intercepts, middle-of-bin durations, the latency limit after the walk; also given to the releases before it, not read), 6.11–6.13's (also given to 6.3–6.10, whose forms are not modelled), that of 6.14–6.18 (with or without the fix to its shallower-state check that 6.12.64 and 6.18.3 took), or the reworked one of 6.19 and later (tick wake-ups counted apart, metrics decayed to zero; from 7.0 the intercepts bound and the stricter hit; from 7.1, 7.3's, a stopped tick's query and its deeper state for a far timer), a trace that names no release taken as the newest (7.3). ")
		}
		if p.BlkQoSLimitNs >= 0 {
			b.WriteString("blkqos limits the CPU that issued block IO from the issue until the timeout; an expiring limit does not wake the CPU. ")
		}
	}
	if prof != nil && prof.Source != "" {
		fmt.Fprintf(&b, "Profile %s: %s.", prof.Name, prof.Source)
	}
	return dedupeSentences(strings.TrimSpace(b.String()))
}

func dedupeSentences(s string) string {
	parts := strings.SplitAfter(s, ". ")
	seen := map[string]bool{}
	var out []string
	for _, p := range parts {
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return strings.Join(out, "")
}

// DefaultPolicySpecs is the policy list when none is given: the kernel's
// actual choices (recorded) and the oracle bound; on another machine's
// profile, where the recorded choices mean nothing, the governor that
// machine would run and the oracle. That is the recorded governor, but
// haltpoll only on a cpuidle-haltpoll guest's table (the governor
// registers only in a KVM guest) and menu where the trace's is not one
// the replay models: menu is what a tickless kernel on bare metal picks
// (the highest rating, 20, of those it registers there).
// profileArg is --profile as given: the trace's own table is chosen
// there, whatever a file's profile calls itself.
func DefaultPolicySpecs(profileArg string, prof *Profile, recordedGovernor string) []string {
	switch profileArg {
	case "", "recorded", "measured":
		return []string{"recorded", "oracle"}
	}
	gov := string(GovMenu)
	for _, g := range []Governor{GovMenu, GovTEO, GovLadder, GovHaltpoll} {
		if string(g) == recordedGovernor && (g != GovHaltpoll || prof.StateIndex(haltpollStateName) >= 0) {
			gov = recordedGovernor
		}
	}
	return []string{gov, string(GovOracle)}
}
