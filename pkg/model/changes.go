package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Changes is what a policy changed against the first policy of its replay
// (the reference): the wake-ups whose exit latency differs, the IO
// completions and task IO waits whose latency differs, on which CPUs, and
// the dominant reason where it changed nothing or little, or where the
// governor ignores one of its modifiers. README.md documents the JSON.
type Changes struct {
	// Against is the reference policy; Reference is true on its own result.
	Against   string `json:"against"`
	Reference bool   `json:"reference"`
	// WakeUpsChanged of WakeUps (the recorded wake-ups the workload sees,
	// tick wake-ups and poll time-outs aside) paid another exit latency
	// than under the reference.
	WakeUpsChanged uint64 `json:"wake_ups_changed"`
	WakeUps        uint64 `json:"wake_ups"`
	// IOChanged of IOWokeIdle (the completions that woke an idle CPU, the
	// only ones a policy changes) got another latency; TaskIOChanged of
	// TaskIO (the requests a task waited for) another task IO latency.
	IOChanged     uint64 `json:"io_changed"`
	IOWokeIdle    uint64 `json:"io_woke_idle"`
	TaskIOChanged uint64 `json:"task_io_changed"`
	TaskIO        uint64 `json:"task_io"`
	// CPUs lists the CPUs with a changed wake-up or IO completion, by CPU.
	CPUs []CPUChanges `json:"cpus"`
	// Reason is the dominant reason, null where the counts say it all.
	Reason *string `json:"reason"`
	// ioUnknown: which completions woke an idle CPU is unknown (the trace
	// has no wake causes, or every completion came on a CPU it left out:
	// iowake.WokeKnown): IOChanged and IOWokeIdle are null in JSON.
	ioUnknown bool
}

// MarshalJSON writes io_changed and io_woke_idle as null where unknown.
func (c Changes) MarshalJSON() ([]byte, error) {
	type plain Changes // without this method
	out := struct {
		plain
		IOChanged  *uint64 `json:"io_changed"`   // shadow plain's
		IOWokeIdle *uint64 `json:"io_woke_idle"` // shadow plain's
	}{plain: plain(c)}
	if !c.ioUnknown {
		out.IOChanged, out.IOWokeIdle = &c.IOChanged, &c.IOWokeIdle
	}
	return json.Marshal(out)
}

// CPUChanges is one CPU's share of Changes.
type CPUChanges struct {
	CPU            int    `json:"cpu"`
	WakeUpsChanged uint64 `json:"wake_ups_changed"`
	IOChanged      uint64 `json:"io_changed"`
}

// chgCount is one policy's running counts against the reference (policy 0).
type chgCount struct {
	io, task uint64
	// ioLimited: IO wake-ups whose idle period began under the policy's
	// blkqos limit on its CPU.
	ioLimited uint64
	cpuIO     []uint64 // per CPU (the wake-ups' are idleTally's)
}

func bump(s []uint64, i int) []uint64 {
	for len(s) <= i {
		s = append(s, 0)
	}
	s[i]++
	return s
}

// whyInput is what the reason for a policy's changes is decided from.
type whyInput struct {
	pol, ref Policy
	isRef    bool // pol is the reference
	// Names of the states haltpoll picks from (states 0 and 1).
	pollName, haltName string
	// ladderFirstOff: the state ladder never leaves downwards (the first
	// after a polling state 0, else state 0), where the policy disabled
	// it and ladder stayed in it all the same.
	ladderFirstOff       string
	wakeChanged, wakeUps uint64
	ioChanged, ioWoke    uint64
	ioLimited            uint64
	io                   bool // the trace has block IO the figures count
	// issuePerCPU: the counted IO's issues per CPU; wokePerCPU: its
	// completions that woke an idle CPU, per CPU.
	issuePerCPU, wokePerCPU []uint64
	// sameStates: the policy spent the same time in every state as the
	// reference.
	sameStates bool
	// refShare is the reference's share of idle time per state; exitNs
	// each state's exit latency (by name), for qos=.
	refShare map[string]float64
	exitNs   map[string]int64
	// menu's selections, those that reached its stopped-tick override,
	// and those where margin= predicted other than the next timer there.
	selections, stoppedRuns, marginOther uint64
}

// littleShare: a policy that changed at most this share of wake-ups and of
// IO completions changed "little", and the reason is looked for.
const littleShare = 0.01

func little(n, of uint64) bool { return float64(n) <= littleShare*float64(of) }

// changeReason is the dominant reason for what a policy changed (nil when
// the counts say it all): what its governor ignores among its modifiers,
// then, when it changed nothing or little, why its modifiers had nothing
// to act on.
func changeReason(in whyInput) *string {
	var rs []string
	p := in.pol
	refName := in.ref.Spec
	if p.Governor == GovHaltpoll {
		var ign []string
		if len(p.Disable) > 0 {
			ign = append(ign, "disable=")
		}
		if len(p.Enable) > 0 {
			ign = append(ign, "enable=")
		}
		if p.MaxCState >= 0 {
			ign = append(ign, "maxcstate=")
		}
		if len(ign) > 0 {
			rs = append(rs, fmt.Sprintf("haltpoll ignores %s (haltpoll_select picks %s or %s and never looks at a state's disable flag)",
				strings.Join(ign, " and "), in.pollName, in.haltName))
		}
		var lim []string
		if p.QoSNs > 0 {
			lim = append(lim, "qos=0")
		}
		if p.BlkQoSLimitNs > 0 {
			lim = append(lim, "a blkqos limit of 0")
		}
		if len(lim) > 0 {
			rs = append(rs, fmt.Sprintf("haltpoll honours only %s (haltpoll_select polls when the latency limit is 0 and otherwise never compares it with an exit latency)",
				strings.Join(lim, " and ")))
		}
	}
	if in.ladderFirstOff != "" {
		rs = append(rs, fmt.Sprintf("ladder entered %s though it is disabled (ladder_select_state never goes below it, whatever its disable flag)", in.ladderFirstOff))
	}
	if in.isRef || !little(in.wakeChanged, in.wakeUps) || !little(in.ioChanged, in.ioWoke) {
		return joinReasons(rs)
	}
	// One dominant reason: what the governor ignores, else the first that
	// applies below.
	n := len(rs)
	switch {
	case in.wakeUps == 0 && in.ioWoke == 0:
		rs = append(rs, "no wake-up in the trace to change")
	case p.Spec == in.ref.Spec:
		rs = append(rs, "the same policy as the reference")
	}
	if p.BlkQoSLimitNs >= 0 && p.Governor != GovHaltpoll && len(rs) == n {
		rs = append(rs, blkqosReason(in))
	}
	if len(p.Disable) > 0 && p.Governor != GovHaltpoll && len(rs) == n {
		var never []string
		for _, s := range p.Disable {
			// disable= takes a name in any case (as the sysfs names are
			// compared): the reference's shares are under the profile's.
			name, share := s, 0.0
			for k, v := range in.refShare {
				if strings.EqualFold(k, s) {
					name, share = k, v
				}
			}
			if share == 0 {
				never = append(never, name)
			}
		}
		if len(never) == len(p.Disable) {
			rs = append(rs, fmt.Sprintf("%s never entered %s", refName, strings.Join(never, " or ")))
		}
	}
	if p.QoSNs > 0 && p.Governor != GovHaltpoll && len(rs) == n {
		var above, slower []string
		for s, el := range in.exitNs {
			if el > p.QoSNs {
				slower = append(slower, s)
				if in.refShare[s] > 0 {
					above = append(above, s)
				}
			}
		}
		switch {
		case len(slower) == 0:
			rs = append(rs, fmt.Sprintf("no state of the table has an exit latency above %s µs", fmtUs(p.QoSNs)))
		case len(above) == 0:
			rs = append(rs, fmt.Sprintf("%s never entered a state with an exit latency above %s µs", refName, fmtUs(p.QoSNs)))
		}
	}
	// Against a bare menu only: against another governor, little changed
	// says nothing of the margin.
	if p.HasMargin && p.Governor == GovMenu && in.ref.Governor == GovMenu && !in.ref.HasMargin && len(rs) == n {
		rs = append(rs, fmt.Sprintf("the margin acts only where menu found the tick already stopped with a prediction under a tick: "+
			"%s of %s selections, %s of them given a prediction other than the next timer",
			FormatCount(in.stoppedRuns), FormatCount(in.selections), FormatCount(in.marginOther)))
	}
	if len(rs) == 0 && in.wakeChanged == 0 && in.ioChanged == 0 {
		if in.sameStates {
			rs = append(rs, fmt.Sprintf("chose the same state as %s in every period", refName))
		} else {
			rs = append(rs, fmt.Sprintf("paid the same exit latency as %s at every wake-up", refName))
		}
	}
	return joinReasons(rs)
}

// blkqosReason says why a blkqos limit changed little: which IO wake-ups
// it limited, and why not the others.
func blkqosReason(in whyInput) string {
	p := in.pol
	if !in.io {
		return "no block IO in the trace for blkqos to act on"
	}
	head := fmt.Sprintf("limited %s of %s IO wake-ups", FormatCount(in.ioLimited), FormatCount(in.ioWoke))
	switch {
	case in.ioWoke == 0:
		return head + ": no completion woke an idle CPU"
	case in.ioLimited*2 > in.ioWoke && in.ioChanged == 0:
		return fmt.Sprintf("%s, where %s's states already met the %s µs limit", head, in.ref.Spec, fmtUs(p.BlkQoSLimitNs))
	case in.ioLimited*2 > in.ioWoke:
		// The completions it changed are those where the limit bit: say
		// how few, not that the reference met it everywhere.
		return fmt.Sprintf("%s, where %s's states already met the %s µs limit at all but the %s it changed",
			head, in.ref.Spec, fmtUs(p.BlkQoSLimitNs), FormatCount(in.ioChanged))
	}
	woke, wokeAll := dominantCPUs(in.wokePerCPU)
	issued, issuedAll := dominantCPUs(in.issuePerCPU)
	disjoint := len(issued) > 0
	for _, c := range woke {
		if slices.Contains(issued, c) {
			disjoint = false
		}
	}
	if disjoint {
		mostly := func(all bool) string {
			if all {
				return ""
			}
			return "mostly "
		}
		return fmt.Sprintf("%s: completions woke %s%s, IO was issued %son %s", head, mostly(wokeAll), CPUList(woke), mostly(issuedAll), CPUList(issued))
	}
	return fmt.Sprintf("%s: most came more than %s µs after the last IO issued on their CPU", head, fmtUs(p.BlkQoSTimeoutNs))
}

// dominantCPUs lists the CPUs with at least 5 % of the counts, and whether
// they hold all of them.
func dominantCPUs(per []uint64) ([]int, bool) {
	var total uint64
	for _, n := range per {
		total += n
	}
	var out []int
	var held uint64
	for c, n := range per {
		if n > 0 && n*20 >= total {
			out = append(out, c)
			held += n
		}
	}
	return out, held == total
}

func joinReasons(rs []string) *string {
	if len(rs) == 0 {
		return nil
	}
	s := strings.Join(rs, "; ")
	return &s
}

func fmtUs(ns int64) string {
	return strconv.FormatFloat(float64(ns)/1000, 'f', -1, 64)
}

// FormatCount writes n with thousands separators: 138,286.
func FormatCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// CPUList names CPUs, runs shortened: "CPU 1", "CPUs 0-3, 7".
func CPUList(cpus []int) string {
	if len(cpus) == 0 {
		return "no CPU"
	}
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(cpus[i]))
		case j == i+1:
			parts = append(parts, strconv.Itoa(cpus[i]), strconv.Itoa(cpus[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	if len(cpus) == 1 {
		return "CPU " + parts[0]
	}
	return "CPUs " + strings.Join(parts, ", ")
}

// changes builds policy k's Changes against policy 0 from the replay's
// counts; out are the results so far (for the reference's state shares).
func (r *Replay) changes(k int, out []Result) *Changes {
	ps, ref := r.pols[k], r.pols[0]
	ch := &Changes{Against: out[0].Policy, Reference: k == 0, WakeUps: r.wakeUps,
		IOWokeIdle: r.stats.IOWokeIdle, TaskIO: r.taskCounted, CPUs: []CPUChanges{},
		ioUnknown: r.ioSeen && out[k].IOWokeIdle == nil}
	if k > 0 {
		ch.WakeUpsChanged, ch.IOChanged, ch.TaskIOChanged = ps.changedWakes, ps.chg.io, ps.chg.task
		for c := 0; c < max(len(ps.changedCPUWakes), len(ps.chg.cpuIO)); c++ {
			cc := CPUChanges{CPU: c}
			if c < len(ps.changedCPUWakes) {
				cc.WakeUpsChanged = ps.changedCPUWakes[c]
			}
			if c < len(ps.chg.cpuIO) {
				cc.IOChanged = ps.chg.cpuIO[c]
			}
			if cc.WakeUpsChanged > 0 || cc.IOChanged > 0 {
				ch.CPUs = append(ch.CPUs, cc)
			}
		}
	}
	in := whyInput{pol: ps.pol, ref: ref.pol, isRef: k == 0,
		wakeChanged: ch.WakeUpsChanged, wakeUps: ch.WakeUps, ioChanged: ch.IOChanged, ioWoke: ch.IOWokeIdle,
		ioLimited: ps.chg.ioLimited, io: r.ioSeen && !ch.ioUnknown, sameStates: slices.Equal(ps.timeNs, ref.timeNs),
		refShare: out[0].StateShare, exitNs: map[string]int64{}}
	in.pol.Spec, in.ref.Spec = out[k].Policy, out[0].Policy
	if ps.tab.n >= 2 {
		in.pollName, in.haltName = ps.tab.name[0], ps.tab.name[1]
	}
	if first := ladderFirst(ps.tab); ps.pol.Governor == GovLadder && first < ps.tab.n && ps.tab.disabled[first] && ps.timeNs[first] > 0 {
		in.ladderFirstOff = ps.tab.name[first]
	}
	for i := 0; i < ps.tab.n; i++ {
		in.exitNs[ps.tab.name[i]] = ps.tab.el[i]
	}
	in.issuePerCPU, in.wokePerCPU = r.ioIssueCPU, r.ioWokeCPU
	in.selections = ps.selections
	in.stoppedRuns, in.marginOther = ps.idleTally.menu.stoppedRuns, ps.idleTally.menu.marginOther
	ch.Reason = changeReason(in)
	return ch
}
